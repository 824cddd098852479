"""A notebook-style tour of kestrel from Python: simulate targets, filter and smooth
them, compare with the truth, and plot a few tracks (kestrel-python-tracks.png).

Run:  python examples/python/tracks.py [--tracks 100000] [--out kestrel-python-tracks.png]
"""

import argparse
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import kestrel  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--tracks", type=int, default=100_000)
ap.add_argument("--steps", type=int, default=100)
ap.add_argument("--out", default="kestrel-python-tracks.png")
a = ap.parse_args()

# %% A 2-D constant-velocity model: state [px, vx, py, vy], positions measured.
kf = kestrel.KalmanFilter.from_toml_str("""
[model]
kind = "cv"
dims = 2
dt = 1.0
q = 0.5
r = 25.0
[prior]
p0 = 100.0
""")

# %% Simulate B targets by the model itself (NumPy only, so the example stands alone).
rng = np.random.default_rng(1)
B, T = a.tracks, a.steps
L = np.linalg.cholesky(kf.Q)
x = np.zeros((B, T, kf.nx))
x[:, 0] = rng.normal(size=(B, kf.nx)) @ np.linalg.cholesky(kf.P0).T + kf.x0
for k in range(1, T):
    x[:, k] = x[:, k - 1] @ kf.F.T + rng.normal(size=(B, kf.nx)) @ L.T
z = x @ kf.H.T + rng.normal(size=(B, T, kf.ny)) * np.sqrt(np.diag(kf.R))
z[rng.random((B, T)) < 0.05] = np.nan          # 5% of the scans missed: NaN = missing

# %% Filter and smooth every track at once (the GPU when one pays, else all cores).
t = time.perf_counter()
f = kf.filter(z, outputs=("mean", "loglik"))
t_f = time.perf_counter() - t
t = time.perf_counter()
s = kf.smooth(z, outputs=("mean",))
t_s = time.perf_counter() - t
pos = [0, 2]
rmse = lambda m: np.sqrt(np.mean((m[..., pos] - x[..., pos]) ** 2))  # noqa: E731
print(f"{B} tracks x {T} steps on {f.device}: filter {t_f:.2f} s ({B * T / t_f:.3e} target-steps/s), "
      f"smoother {t_s:.2f} s")
print(f"position RMSE: measurements {np.sqrt(np.nanmean((z - x[..., pos]) ** 2)):.2f} m, "
      f"filtered {rmse(f.mean):.2f} m, smoothed {rmse(s.mean):.2f} m; "
      f"total log-likelihood {f.total_loglik:.6e}")

# %% Plot a few tracks (left) and a close-up of one (right): truth, measurements,
# filtered and smoothed positions.
fig, (ax, zoom) = plt.subplots(1, 2, figsize=(13, 6.5))
for b in range(4):
    c = f"C{b}"
    for axis, k in ((ax, T), (zoom, 25 if b == 0 else 0)):
        if k == 0:
            continue
        axis.plot(x[b, :k, 0], x[b, :k, 2], "-", color=c, lw=3, alpha=0.3,
                  label="truth" if b == 0 else None)
        axis.plot(z[b, :k, 0], z[b, :k, 1], ".", color=c, ms=5,
                  label="measurements" if b == 0 else None)
        axis.plot(f.mean[b, :k, 0], f.mean[b, :k, 2], "--", color=c, lw=1,
                  label="filtered" if b == 0 else None)
        axis.plot(s.mean[b, :k, 0], s.mean[b, :k, 2], "-", color=c, lw=1.2,
                  label="smoothed" if b == 0 else None)
for axis in (ax, zoom):
    axis.set_xlabel("x (m)")
    axis.set_ylabel("y (m)")
    axis.set_aspect("equal", "datalim")
    axis.legend()
ax.set_title(f"4 of {B} tracks: position RMSE filtered {rmse(f.mean):.1f} m, "
             f"smoothed {rmse(s.mean):.1f} m", fontsize=10)
zoom.set_title("track 0, steps 0-24", fontsize=10)
fig.tight_layout()
fig.savefig(a.out, dpi=100)
print(f"plot: {a.out}")
