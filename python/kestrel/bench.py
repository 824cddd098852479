"""``python -m kestrel.bench``: the cost of calling kestrel from Python.

Times, in one run on one machine, medians after a warm-up:

- ``library``: the Rust library's own call (``filter_on`` on measurements already in
  its buffers), as a Rust program would make it;
- ``python``: the same job through ``KalmanFilter.filter`` from a NumPy array (input
  conversion, the call, the outputs handed back as NumPy arrays);
- ``simdkalman``: the peer on the same data, when it is installed;
- with ``--device cuda`` and CuPy or PyTorch present, the same job from a device array.

Prints JSON lines (one per measurement) and a table. The job: a 2-D constant-velocity
model (nx = 4, ny = 2), B tracks x T steps, means only unless ``--outputs`` says more.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from . import _kestrel
from .kalman import KalmanFilter

CV = """
[model]
kind = "cv"
dims = 2
dt = 1.0
q = 0.5
r = 25.0
[prior]
p0 = 100.0
"""


def _median_time(fn, repeats: int, warmup: int = 1) -> tuple[float, list[float]]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def _emit(rows: list, rec: dict, out) -> None:
    rows.append(rec)
    print(json.dumps(rec), file=out, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kestrel.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tracks", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--precision", choices=["f32", "f64"], default="f64")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--outputs", default="mean")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-peers", action="store_true", help="skip simdkalman")
    ap.add_argument("--json", default=None, help="also append the JSON lines to this file")
    a = ap.parse_args(argv)
    if a.tracks < 1 or a.steps < 1 or a.repeats < 1:
        print("error: --tracks, --steps and --repeats must be at least 1", file=sys.stderr)
        return 2

    kf = KalmanFilter.from_toml_str(CV)
    dtype = np.float32 if a.precision == "f32" else np.float64
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(a.tracks, a.steps, 2)) * 5).astype(dtype)
    n = a.tracks * a.steps
    rows: list = []
    sink = open(a.json, "a") if a.json else None

    class Tee:
        def write(self, s):
            sys.stdout.write(s)
            if sink:
                sink.write(s)

        def flush(self):
            sys.stdout.flush()
            if sink:
                sink.flush()

    out = Tee()
    base = dict(bench="python", tracks=a.tracks, steps=a.steps, precision=a.precision,
                outputs=a.outputs)
    # The library alone (its warm-up is the first of its repeats, dropped).
    lib = _kestrel.bench_library(kf.model, z, device=a.device, outputs=a.outputs,
                                 repeats=a.repeats + 1)[1:]
    lib_med = statistics.median(lib)
    _emit(rows, dict(base, what="library", device=a.device, median_s=lib_med,
                     target_steps_per_s=n / lib_med), out)
    py_med, _ = _median_time(lambda: kf.filter(z, device=a.device, outputs=a.outputs.split(",")),
                             a.repeats)
    _emit(rows, dict(base, what="python numpy", device=a.device, median_s=py_med,
                     target_steps_per_s=n / py_med, over_library=py_med / lib_med - 1), out)
    if a.device.startswith("cuda"):
        _gpu_rows(kf, z, a, base, rows, out, lib_med, n)
    if not a.no_peers:
        try:
            import simdkalman
        except ImportError:
            simdkalman = None
        if simdkalman is not None:
            sk = simdkalman.KalmanFilter(state_transition=kf.F, process_noise=kf.Q,
                                         observation_model=kf.H, observation_noise=kf.R)
            zz = z.astype(np.float64)

            def peer():
                sk.compute(zz, 0, initial_value=kf.x0, initial_covariance=kf.P0,
                           filtered=True, smoothed=False)

            pk, _ = _median_time(peer, max(1, min(a.repeats, 3)), warmup=0)
            _emit(rows, dict(base, what="simdkalman", device="cpu", median_s=pk,
                             target_steps_per_s=n / pk, kestrel_python_speedup=pk / py_med), out)
    if sink:
        sink.close()
    print(f"\n{'what':<22}{'device':<10}{'median s':>12}{'target-steps/s':>18}  note")
    for r in rows:
        note = ""
        if "over_library" in r:
            note = f"{100 * r['over_library']:+.1f}% vs library"
        if "kestrel_python_speedup" in r:
            note = f"kestrel from Python is {r['kestrel_python_speedup']:.1f}x faster"
        if "over_kernel_plus_copy" in r:
            note = f"{100 * r['over_kernel_plus_copy']:+.1f}% vs kernel + output copy"
        print(f"{r['what']:<22}{r['device']:<10}{r['median_s']:>12.4f}"
              f"{r['target_steps_per_s']:>18.3e}  {note}")
    return 0


def _gpu_rows(kf, z, a, base, rows, out, lib_med, n):
    """The same job from arrays already on the GPU (CuPy, then PyTorch, where present)."""
    libs = []
    try:
        import cupy

        libs.append(("cupy", lambda: cupy.asarray(z), cupy.cuda.runtime.deviceSynchronize))
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            libs.append(("torch", lambda: torch.from_numpy(z).cuda(), torch.cuda.synchronize))
    except ImportError:
        pass
    for name, make, sync in libs:
        zd = make()
        sync()

        def call():
            kf.filter(zd, device=a.device, outputs=a.outputs.split(","))
            sync()

        med, _ = _median_time(call, a.repeats)
        _emit(rows, dict(base, what=f"python {name}", device=a.device, median_s=med,
                         target_steps_per_s=n / med), out)
        dev = getattr(_kestrel, "bench_device_kernels", None)
        if dev is not None:
            k = dev(kf.model, z, device=a.device, outputs=a.outputs)
            _emit(rows, dict(base, what="kernel + output copy", device=a.device,
                             median_s=k, target_steps_per_s=n / k), out)
            rows[-2]["over_kernel_plus_copy"] = med / k - 1


if __name__ == "__main__":
    sys.exit(main())
