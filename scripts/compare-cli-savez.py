"""`kestrel filter` end to end against NumPy writing the same outputs, and against
simdkalman, measured as a pair on one machine in one run.

For each repeat (alternating, so that the page cache and the disk see both alike):
  1. `kestrel filter --model M --input z.npy --output out.npz --device cpu` (wall clock of
     the whole process: read, filter, write the NPZ);
  2. `np.savez` of the same three arrays (mean, cov, loglik) held in memory, to the same
     directory (the time NumPy needs only to write what kestrel computed and wrote);
  3. simdkalman end to end: `np.load` of z, `KalmanFilter.compute(..., filtered=True)`,
     `np.savez` of its mean and covariance (what a NumPy user runs instead).
Medians are printed, with the ratios.

Usage (from the repository root, with a release build and simdkalman installed):
    python3 scripts/compare-cli-savez.py --kestrel target/release/kestrel \
        --tracks 20000 --steps 100 --repeats 5 --dir /tmp/cmp
"""
import argparse
import os
import statistics
import subprocess
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--kestrel", default="target/release/kestrel")
ap.add_argument("--model", default="examples/cv2d.toml")
ap.add_argument("--tracks", type=int, default=20000)
ap.add_argument("--steps", type=int, default=100)
ap.add_argument("--repeats", type=int, default=5)
ap.add_argument("--dir", default="/tmp/kestrel-cmp")
a = ap.parse_args()
os.makedirs(a.dir, exist_ok=True)
z_path = os.path.join(a.dir, "z.npy")
out = os.path.join(a.dir, "out.npz")
subprocess.run([a.kestrel, "simulate", "--model", a.model, "--tracks", str(a.tracks), "--steps",
                str(a.steps), "--seed", "7", "--output", z_path], check=True, capture_output=True)

# The model, for simdkalman (cv2d: the numbers of examples/cv2d.toml).
import tomllib  # noqa: E402

with open(a.model, "rb") as f:
    m = tomllib.load(f)
F, Q, H, R = (np.array(m["model"][k], dtype=float) for k in ("F", "Q", "H", "R"))
x0 = np.array(m["prior"]["x0"], dtype=float)
P0 = np.array(m["prior"]["P0"], dtype=float)


def kestrel_run():
    # A fresh output file, as for np.savez below (replacing an old file of this size
    # costs the file system the old file's pages, in either program).
    if os.path.exists(out):
        os.remove(out)
    t0 = time.perf_counter()
    subprocess.run([a.kestrel, "filter", "--model", a.model, "--input", z_path, "--output", out,
                    "--device", "cpu"], check=True, capture_output=True)
    return time.perf_counter() - t0


def savez_run(arrays):
    p = os.path.join(a.dir, "np.npz")
    t0 = time.perf_counter()
    np.savez(p, **arrays)
    t = time.perf_counter() - t0
    os.remove(p)
    return t


def simdkalman_run():
    import simdkalman

    t0 = time.perf_counter()
    z = np.load(z_path)
    kf = simdkalman.KalmanFilter(state_transition=F, process_noise=Q, observation_model=H,
                                 observation_noise=R)
    r = kf.compute(z, 0, initial_value=x0, initial_covariance=P0, filtered=True)
    p = os.path.join(a.dir, "sk.npz")
    np.savez(p, mean=r.filtered.states.mean, cov=r.filtered.states.cov)
    t_end = time.perf_counter()
    os.remove(p)
    return t_end - t0


times = {"kestrel filter (CLI, end to end)": [], "np.savez of the same outputs": [],
         "simdkalman (load, filter, savez)": []}
for _ in range(a.repeats):
    times["kestrel filter (CLI, end to end)"].append(kestrel_run())
    with np.load(out) as d:
        arrays = {k: d[k] for k in d.files}
    times["np.savez of the same outputs"].append(savez_run(arrays))
    times["simdkalman (load, filter, savez)"].append(simdkalman_run())
nbytes = sum(v.nbytes for v in arrays.values())
print(f"B = {a.tracks}, T = {a.steps}, outputs {nbytes / 1e6:.0f} MB ({', '.join(arrays)}), "
      f"{a.repeats} repeats, medians:")
med = {k: statistics.median(v) for k, v in times.items()}
for k, v in med.items():
    print(f"  {k:36s} {v:8.3f} s")
k, s, sk = med.values()
print(f"  kestrel / np.savez = {k / s:.2f}; simdkalman / kestrel = {sk / k:.2f}")
