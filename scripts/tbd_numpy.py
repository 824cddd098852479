#!/usr/bin/env python3
"""Track-before-detect in vectorised NumPy, timed as a pair with `kestrel tbd` on the CPU.

The same recursion as kestrel (crates/kestrel/src/tbd/): for each motion vector v,
P_k(x, y; v) = (1 - alpha) P_{k-1}(x - vx, y - vy; v) + alpha X_k(x, y), P_0 = 0,
outside reads 0, bilinear sampling with pixel centres at integer coordinates, and the
detection map D_k = max_v P_k with its arg-max, every frame. Each vector's shift is a
few whole-array slices (no Python loop over pixels).

Usage: scripts/tbd_numpy.py [KESTREL_BINARY] [--size N] [--frames T]
Prints NumPy's and kestrel's frames/s, their ratio, and the largest difference of the
final states (kestrel --state-out), which checks that both computed the same thing.
"""
import math, os, re, subprocess, sys, tempfile, time
import numpy as np


def motions(speeds=(0.0, 1.0), directions=12):
    out = []
    for s in speeds:
        if s == 0:
            out.append((0.0, 0.0))
            continue
        for d in range(directions):
            a = 2 * math.pi * d / directions
            snap = lambda v: float(round(v)) if abs(v - round(v)) < 1e-6 else v
            out.append((np.float32(snap(s * math.cos(a))), np.float32(snap(s * math.sin(a)))))
    return out


def taps(s):
    s = np.float32(s)
    i = np.floor(s)
    f = np.float32(s - i)
    return int(i), np.float32(1) - f, f


def shifted(img, ix, iy, pad, out):
    """out[y, x] = img[y + iy, x + ix] with zeros outside (img padded by `pad`)."""
    h, w = out.shape
    out[...] = img[pad + iy:pad + iy + h, pad + ix:pad + ix + w]


def sample(padded, pad, sx, sy, out, tmp):
    ix, wx0, wx1 = taps(sx)
    iy, wy0, wy1 = taps(sy)
    h, w = out.shape
    r0 = padded[pad + iy:pad + iy + h]
    out[...] = r0[:, pad + ix:pad + ix + w]
    if wx1 != 0:
        out *= wx0
        out += wx1 * r0[:, pad + ix + 1:pad + ix + 1 + w]
    if wy1 != 0:
        r1 = padded[pad + iy + 1:pad + iy + 1 + h]
        tmp[...] = r1[:, pad + ix:pad + ix + w]
        if wx1 != 0:
            tmp *= wx0
            tmp += wx1 * r1[:, pad + ix + 1:pad + ix + 1 + w]
        out *= wy0
        out += wy1 * tmp


def run_numpy(frames, ms, alpha):
    t, h, w = frames.shape
    pad = 4
    v = len(ms)
    padded = np.zeros((v, h + 2 * pad, w + 2 * pad), np.float32)
    c = np.float32(1 - alpha)
    a = np.float32(alpha)
    nxt = np.empty((v, h, w), np.float32)
    tmp = np.empty((h, w), np.float32)
    for k in range(t):
        x = frames[k].astype(np.float32)
        ax = a * x
        for j, (vx, vy) in enumerate(ms):
            sample(padded[j], pad, -vx, -vy, nxt[j], tmp)
            nxt[j] *= c
            nxt[j] += ax
        padded[:, pad:pad + h, pad:pad + w] = nxt
        d = nxt.max(axis=0)
        arg = nxt.argmax(axis=0)
    return nxt, d, arg


def main():
    args = sys.argv[1:]
    exe = "target/release/kestrel"
    size, t = 1024, 16
    i = 0
    while i < len(args):
        if args[i] == "--size":
            size = int(args[i + 1]); i += 2
        elif args[i] == "--frames":
            t = int(args[i + 1]); i += 2
        else:
            exe = args[i]; i += 1
    rng = np.random.default_rng(1)
    frames = rng.standard_normal((t, size, size), dtype=np.float32)
    ms = motions()
    alpha = 0.1
    with tempfile.TemporaryDirectory() as d:
        fp = os.path.join(d, "frames.npy")
        np.save(fp, frames)
        t0 = time.perf_counter()
        state, _, _ = run_numpy(frames, ms, alpha)
        np_s = time.perf_counter() - t0
        sp = os.path.join(d, "state.npy")
        out = subprocess.run(
            [exe, "tbd", "--input", fp, "--output", os.path.join(d, "det.csv"), "--speeds", "0,1",
             "--directions", "12", "--alpha", str(alpha), "--threshold", "1e30", "--state-out", sp,
             "--device", "cpu"], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"kestrel failed: {out.stderr}")
        m = re.search(r"([0-9.]+) s \(([0-9.]+) frames/s\)", out.stderr)
        k_fps = float(m.group(2))
        ks = np.load(sp)
        diff = float(np.max(np.abs(ks - state)) / max(1e-30, float(np.max(np.abs(state)))))
    np_fps = t / np_s
    print(f'{{"name": "tbd-cpu-pair", "size": {size}, "frames": {t}, "vectors": {len(ms)}, '
          f'"numpy_fps": {np_fps:.3f}, "kestrel_fps": {k_fps:.3f}, "ratio": {k_fps / np_fps:.2f}, '
          f'"max_rel_state_diff": {diff:.2e}, "threads": {os.cpu_count()}}}')
    print(f"{size}x{size}, {len(ms)} vectors, {t} frames: NumPy {np_fps:.2f} frames/s, "
          f"kestrel (CPU, whole command) {k_fps:.2f} frames/s: {k_fps / np_fps:.1f}x; "
          f"states differ by {diff:.1e} (relative)")


if __name__ == "__main__":
    main()
