#!/usr/bin/env python3
"""CPU comparison of `kestrel pf` with the `particles` package (Chopin) and with a
bootstrap filter written the FilterPy way (NumPy, FilterPy's `systematic_resample`),
measured together in one run: the seed's two-range-sensor model
(examples/range-only.toml), the same measurements, bootstrap filter, systematic
resampling at every step, f64.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install particles filterpy
    /tmp/venv/bin/python scripts/compare-particles.py [--kestrel target/release/kestrel] \
        [--steps 100] [--particles 10000 100000 1000000] [--repeats 3]

For each N, every tool runs `--repeats` times in turn (kestrel, particles, FilterPy,
kestrel, ...) and the medians are printed: particle-steps per second of each, kestrel's
both as the filter's own time (printed by `kestrel pf`, the like of `particles`' `run()`)
and as the whole process (start, reading, writing), and the ratios. FilterPy's pure-Python
resampling loop is slow: it runs the first `--filterpy-budget / N` steps only (its rate
per step does not change along the run). The total log-likelihoods agree to Monte Carlo
error, not digit for digit (different generators).

`particles` runs twice: as it comes (`run()` with its default summaries: the
log-likelihood and the ESS, no moments), and with its `Moments` collector (the particles'
weighted mean and variance every step). kestrel always computes the weighted mean and
covariance every step, and so does the FilterPy-book filter; the second `particles` run
is the one that does that work too. Both ratios are printed.

Each Python peer runs in a child process of its own (`--worker`), started and ended
around its run, as kestrel is; the child first runs 100 particles as a warm-up
(`particles` compiles its resampling with numba on first use). When the peers ran in
this process, its OpenBLAS threads, which keep spinning for a while after matrix
products, took a third of the two cores from the kestrel run that came right after them
(10^5 particles: 9.1e7 particle-steps/s cold, 6.3e7 right after 50 NumPy products in
the parent). The children keep their own BLAS threads (the peers' products may use both
cores).
"""
import argparse
import importlib.metadata
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import particles
from particles import distributions as dists
from particles import state_space_models as ssm
from particles.collectors import Moments

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


def filterpy_bootstrap(ys, n, rng):
    """The bootstrap filter of Labbe's "Kalman and Bayesian Filters in Python" (ch. 12)
    on this model: NumPy predict and update, FilterPy's `systematic_resample`, weighted
    mean and covariance every step; returns the total log-likelihood."""
    from filterpy.monte_carlo import systematic_resample
    from scipy.stats import norm

    lq = np.linalg.cholesky(QM)
    lp = np.linalg.cholesky(P0)
    x = X0 + rng.standard_normal((n, 4)) @ lp.T
    weights = np.full(n, 1.0 / n)
    ll = 0.0
    for k, z in enumerate(ys):
        if k > 0:
            x = x @ F.T + rng.standard_normal((n, 4)) @ lq.T
        for s, zs in zip(SENSORS, z):
            dist = np.hypot(x[:, 0] - s[0], x[:, 2] - s[1])
            weights *= norm(dist, np.sqrt(R)).pdf(zs)
        weights += 1.0e-300
        ll += np.log(weights.sum())
        weights /= weights.sum()
        mean = np.average(x, weights=weights, axis=0)
        d = x - mean
        _cov = (d * weights[:, None]).T @ d
        idx = systematic_resample(weights)
        x = x[idx]
        weights.fill(1.0 / n)
    return ll


def worker(a):
    """One run of a Python peer (`--worker particles|particles-moments|filterpy`) on the
    measurements in `--z`; prints its seconds and log-likelihood as one JSON line."""
    y = np.load(a.z)[0]
    if a.worker in ("particles", "particles-moments"):
        data = [y[k] for k in range(len(y))]
        fk = ssm.Bootstrap(ssm=RangeOnly(), data=data)
        # Warm-up: `particles` compiles its resampling with numba on the first call.
        particles.SMC(fk=fk, N=100, resampling="systematic", ESSrmin=1.0, verbose=False).run()
        # `particles-moments`: the weighted mean and variance of the particles every step
        # (its `Moments` collector), as kestrel (mean and covariance) and the FilterPy-book
        # filter compute them; plain `particles` computes no moments.
        kw = {"collect": [Moments()]} if a.worker == "particles-moments" else {}
        alg = particles.SMC(fk=fk, N=a.n, resampling="systematic", ESSrmin=1.0, verbose=False,
                            **kw)
        t0 = time.perf_counter()
        alg.run()
        secs = time.perf_counter() - t0
        ll = alg.summaries.logLts[-1]
    else:
        filterpy_bootstrap(y[:2], 100, np.random.default_rng(a.seed))  # warm-up
        t0 = time.perf_counter()
        ll = filterpy_bootstrap(y[:a.fp_steps], a.n, np.random.default_rng(a.seed))
        secs = time.perf_counter() - t0
    print(json.dumps({"secs": secs, "loglik": float(ll)}))


def peer(kind, z, n, seed, fp_steps=0):
    """Runs `worker` in a fresh Python process; returns (seconds, log-likelihood)."""
    run = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", kind, "--z", z,
                          "--n", str(n), "--seed", str(seed), "--fp-steps", str(fp_steps)],
                         check=True, stdout=subprocess.PIPE, text=True)
    r = json.loads(run.stdout.strip().splitlines()[-1])
    return r["secs"], r["loglik"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", choices=["particles", "particles-moments", "filterpy"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--z", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--fp-steps", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--kestrel", default="target/release/kestrel")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--particles", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--filterpy-budget", type=float, default=2e7,
                    help="particle-steps of each FilterPy run (0: skip FilterPy)")
    a = ap.parse_args()
    if a.worker:
        worker(a)
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    model = os.path.join(root, "examples", "range-only.toml")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f}; {os.cpu_count()} CPUs; particles "
          f"{importlib.metadata.version('particles')}, filterpy {importlib.metadata.version('filterpy')}")
    with tempfile.TemporaryDirectory() as d:
        z = os.path.join(d, "z.npy")
        subprocess.run([a.kestrel, "simulate", "--model", model, "--tracks", "1", "--steps",
                        str(a.steps), "--seed", "3", "--output", z], check=True,
                       stderr=subprocess.DEVNULL)
        for n in a.particles:
            ps = a.steps * n
            t_k, t_kf, t_p, t_pm, t_f = [], [], [], [], []
            fp_steps = min(a.steps, int(a.filterpy_budget // n))
            for rep in range(a.repeats):
                out = os.path.join(d, "pf.npz")
                t0 = time.perf_counter()
                run = subprocess.run([a.kestrel, "pf", "--model", model, "--input", z, "--output",
                                      out, "--particles", str(n), "--resample", "systematic",
                                      "--ess", "1", "--device", "cpu", "--precision", "f64",
                                      "--seed", str(rep)],
                                     check=True, stderr=subprocess.PIPE, text=True)
                t_k.append(time.perf_counter() - t0)
                # The rate has four digits; the seconds only three decimals (too coarse
                # at 10^4 particles).
                rate = float(re.search(r"s, ([0-9.e+]+) particle-steps/s", run.stderr).group(1))
                t_kf.append(ps / rate)
                ll_k = float(np.load(out)["loglik"].sum())

                secs, ll_p = peer("particles", z, n, rep)
                t_p.append(secs)
                secs, _ = peer("particles-moments", z, n, rep)
                t_pm.append(secs)

                if fp_steps > 0:
                    secs, ll_f = peer("filterpy", z, n, rep, fp_steps)
                    t_f.append(secs)
            mk, mkf, mp, mpm = (statistics.median(v) for v in (t_k, t_kf, t_p, t_pm))
            line = (f"N={n:>9} T={a.steps} (medians of {a.repeats}): kestrel {ps / mkf:.3e} "
                    f"particle-steps/s ({mkf:.3f} s filtering; {ps / mk:.3e} whole process, "
                    f"{mk:.3f} s), loglik {ll_k:.2f}; particles {ps / mp:.3e} ({mp:.2f} s), loglik "
                    f"{ll_p:.2f}; ratio {mp / mkf:.1f}x ({mp / mk:.1f}x whole process); "
                    f"particles with moments {ps / mpm:.3e} ({mpm:.2f} s), ratio {mpm / mkf:.1f}x")
            if t_f:
                mf = statistics.median(t_f)
                pf = fp_steps * n
                line += (f"; FilterPy-book {pf / mf:.3e} ({fp_steps} steps, {mf:.2f} s, "
                         f"loglik of those steps {ll_f:.2f}), ratio {(ps / mkf) / (pf / mf):.1f}x")
            print(line)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
