"""kestrel's UKF against FilterPy's UnscentedKalmanFilter on the same job, as a pair in one
run: a coordinated-turn target (turn rate estimated, nx = 5) seen by a range-bearing
radar (examples/ct-radar.toml), B tracks x T steps simulated by `kestrel simulate`.

- kestrel: the command line end to end (`kestrel filter --device cpu`: start, read the
  NPY, filter every track, write the NPZ), writing all outputs (means, covariances and
  log-likelihoods) and, alternating with it, the means alone (`--outputs mean`, what the
  FilterPy loop keeps).
- FilterPy's UnscentedKalmanFilter, one filter per track in a Python loop, with the same
  model written in NumPy: the same sigma points (Merwe scaled, alpha 1, beta 0, kappa =
  3 - n, kestrel's defaults), bearings averaged and differenced as angles, the update's
  points drawn afresh from the predicted moments (kestrel's convention). Its estimates are
  kept in arrays, not written.

Both runs' means are compared (they must agree to 1e-6 relative) before the times are
printed. Usage: python3 scripts/compare-filterpy-ukf.py [--tracks 200] [--steps 100]
[--repeats 3] (KESTREL_CLI names the binary; default target/release/kestrel).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(REPO, "examples", "ct-radar.toml")
DT, Q_ACC, Q_OMEGA = 1.0, 0.05, 1e-6
R = np.diag([4.0, 1e-4])
X0 = np.array([200.0, -1.0, 150.0, 0.5, 0.0])
P0 = np.diag([25.0, 0.25, 25.0, 0.25, 1e-4])


def process_noise() -> np.ndarray:
    q = np.zeros((5, 5))
    for a in (0, 2):
        q[a, a] = Q_ACC * DT**3 / 3
        q[a, a + 1] = q[a + 1, a] = Q_ACC * DT**2 / 2
        q[a + 1, a + 1] = Q_ACC * DT
    q[4, 4] = Q_OMEGA * DT
    return q


def fx(x: np.ndarray, dt: float) -> np.ndarray:
    """The coordinated turn, exact at zero turn rate (the series kestrel uses there)."""
    px, vx, py, vy, w = x
    t = w * dt
    if abs(t) < 1e-4:
        s = dt * (1 - t * t / 6)
        c = dt * t / 2 * (1 - t * t / 12)
    else:
        s = np.sin(t) / w
        c = 2 * np.sin(t / 2) ** 2 / w
    sn, cs = np.sin(t), np.cos(t)
    return np.array([px + s * vx - c * vy, cs * vx - sn * vy, py + c * vx + s * vy,
                     sn * vx + cs * vy, w])


def hx(x: np.ndarray) -> np.ndarray:
    return np.array([np.hypot(x[0], x[2]), np.arctan2(x[2], x[0])])


def wrap(a: float) -> float:
    return (a + np.pi) % (2 * np.pi) - np.pi


def residual_z(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = a - b
    d[1] = wrap(d[1])
    return d


def z_mean(sigmas: np.ndarray, wm: np.ndarray) -> np.ndarray:
    return np.array([wm @ sigmas[:, 0],
                     np.arctan2(wm @ np.sin(sigmas[:, 1]), wm @ np.cos(sigmas[:, 1]))])


def filterpy_run(z: np.ndarray) -> np.ndarray:
    from filterpy.kalman import MerweScaledSigmaPoints, UnscentedKalmanFilter

    b, t, _ = z.shape
    out = np.empty((b, t, 5))
    q = process_noise()
    for i in range(b):
        pts = MerweScaledSigmaPoints(5, alpha=1.0, beta=0.0, kappa=-2.0)
        ukf = UnscentedKalmanFilter(5, 2, DT, hx=hx, fx=fx, points=pts,
                                    residual_z=residual_z, z_mean_fn=z_mean)
        ukf.x, ukf.P, ukf.Q, ukf.R = X0.copy(), P0.copy(), q, R
        for k in range(t):
            if k:
                ukf.predict()
            if not np.isnan(z[i, k, 0]):
                ukf.sigmas_f = pts.sigma_points(ukf.x, ukf.P)
                ukf.update(z[i, k])
            out[i, k] = ukf.x
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tracks", type=int, default=200)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    cli = os.environ.get("KESTREL_CLI", os.path.join(REPO, "target", "release", "kestrel"))
    with tempfile.TemporaryDirectory() as d:
        zf, of = os.path.join(d, "rb.npy"), os.path.join(d, "ct.npz")
        subprocess.run([cli, "simulate", "--model", MODEL, "--tracks", str(a.tracks), "--steps",
                        str(a.steps), "--seed", "7", "--output", zf], check=True,
                       capture_output=True)
        z = np.load(zf)
        cmd = [cli, "filter", "--model", MODEL, "--input", zf, "--output", of, "--device", "cpu"]
        # All outputs (means, covariances, log-likelihoods), and the means alone (what the
        # FilterPy loop keeps), alternating.
        variants = {"all outputs": cmd, "--outputs mean": cmd + ["--outputs", "mean"]}
        for c in variants.values():
            subprocess.run(c, check=True, capture_output=True)  # warm-up (page cache)
        kts: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(a.repeats):
            for name, c in variants.items():
                t0 = time.perf_counter()
                subprocess.run(c, check=True, capture_output=True)
                kts[name].append(time.perf_counter() - t0)
        mean = np.load(of)["mean"]
        ft = []
        for _ in range(max(1, a.repeats - 2)):
            t0 = time.perf_counter()
            fp = filterpy_run(z)
            ft.append(time.perf_counter() - t0)
    rel = np.abs(fp - mean).max() / np.abs(mean).max()
    if not rel < 1e-6:
        sys.exit(f"the two filters disagree: max relative difference {rel:.2e}")
    steps = a.tracks * a.steps
    f = float(np.median(ft))
    print(f"CT + range-bearing UKF, {a.tracks} tracks x {a.steps} steps, f64, "
          f"{os.cpu_count()} CPUs; means agree to {rel:.1e} relative")
    print(f"FilterPy UnscentedKalmanFilter (median of {len(ft)}): {f:.2f} s "
          f"({steps / f:.3g} track-steps/s)")
    for name, kt in kts.items():
        k = float(np.median(kt))
        print(f"kestrel filter, {name} (CLI end to end, median of {len(kt)}): {k:.3f} s "
              f"({steps / k:.3g} track-steps/s); kestrel / FilterPy: {f / k:.0f}x")


if __name__ == "__main__":
    main()
