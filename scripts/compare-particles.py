#!/usr/bin/env python3
"""CPU comparison of `kestrel pf` with the `particles` package (Chopin), measured as a
pair in one run: the seed's two-range-sensor model (examples/range-only.toml), the
same measurements, bootstrap filter, systematic resampling at every step, f64.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install particles
    /tmp/venv/bin/python scripts/compare-particles.py [--kestrel target/release/kestrel] [--steps 100] [--particles 10000 100000]

Prints particle-steps per second of each and their ratio, and the total log-likelihood
estimates (they agree to Monte Carlo error, not digit for digit: different generators).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import particles
from particles import distributions as dists
from particles import state_space_models as ssm

DT, Q, R = 1.0, 0.05, 1.0
SENSORS = np.array([[0.0, 0.0], [150.0, 40.0]])
X0 = np.array([20.0, 1.0, 100.0, -0.3])
P0 = np.diag([25.0, 0.25, 25.0, 0.25])
F = np.array([[1, DT, 0, 0], [0, 1, 0, 0], [0, 0, 1, DT], [0, 0, 0, 1]], dtype=float)
QB = Q * np.array([[DT**3 / 3, DT**2 / 2], [DT**2 / 2, DT]])
QM = np.zeros((4, 4))
QM[:2, :2] = QB
QM[2:, 2:] = QB


class RangeOnly(ssm.StateSpaceModel):
    def PX0(self):
        return dists.MvNormal(loc=X0, cov=P0)

    def PX(self, t, xp):
        return dists.MvNormal(loc=xp @ F.T, cov=QM)

    def PY(self, t, xp, x):
        r = [np.hypot(x[:, 0] - s[0], x[:, 2] - s[1]) for s in SENSORS]
        return dists.IndepProd(*[dists.Normal(loc=ri, scale=np.sqrt(R)) for ri in r])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kestrel", default="target/release/kestrel")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--particles", type=int, nargs="+", default=[10_000, 100_000])
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    model = os.path.join(root, "examples", "range-only.toml")
    with tempfile.TemporaryDirectory() as d:
        z = os.path.join(d, "z.npy")
        subprocess.run([a.kestrel, "simulate", "--model", model, "--tracks", "1", "--steps",
                        str(a.steps), "--seed", "3", "--output", z], check=True,
                       stderr=subprocess.DEVNULL)
        y = np.load(z)[0]
        data = [y[k] for k in range(a.steps)]
        for n in a.particles:
            fk = ssm.Bootstrap(ssm=RangeOnly(), data=data)
            alg = particles.SMC(fk=fk, N=n, resampling="systematic", ESSrmin=1.0, verbose=False)
            t0 = time.perf_counter()
            alg.run()
            t_p = time.perf_counter() - t0
            out = os.path.join(d, "pf.npz")
            t0 = time.perf_counter()
            subprocess.run([a.kestrel, "pf", "--model", model, "--input", z, "--output", out,
                            "--particles", str(n), "--resample", "systematic", "--ess", "1",
                            "--device", "cpu", "--precision", "f64"], check=True,
                           stderr=subprocess.DEVNULL)
            t_k = time.perf_counter() - t0
            ll_k = float(np.load(out)["loglik"].sum())
            ps = a.steps * n
            print(f"N={n:>9} T={a.steps}: particles {ps / t_p:.3e} particle-steps/s ({t_p:.2f} s, "
                  f"loglik {alg.summaries.logLts[-1]:.2f}); kestrel {ps / t_k:.3e} ({t_k:.2f} s incl. "
                  f"process start and I/O, loglik {ll_k:.2f}); ratio {t_p / t_k:.1f}x")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
