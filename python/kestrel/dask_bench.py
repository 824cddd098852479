"""Scaling of kestrel.dask on this machine: ``python -m kestrel.dask_bench``.

For LocalClusters of 1, 2 and 4 worker processes (one thread each, RAYON_NUM_THREADS=1
in every worker, so a worker is one core's worth of work):

- strong and weak scaling of the split along tracks (the sequential filter over
  independent blocks of tracks) and of the split in time (the parallel-in-time filter and
  RTS smoother over blocks of steps of few long tracks);
- the overhead per chunk (the same small job cut into more and more chunks: the slope of
  the wall time against the number of tasks);
- the bytes moved between workers (the workers' outgoing transfer counters) and to the
  client.

The outputs are reduced on the workers (sums) so that what is timed is the computation
and the movement a real job has (results written where they are made), not the copy of
every estimate to the client. Each figure is the best of ``--repeats`` runs after one
warm-up. The single-process figures run in this process with one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _model():
    import kestrel

    dt = 0.5
    F = np.eye(4)
    F[0, 2] = F[1, 3] = dt
    return kestrel.KalmanFilter(F=F, H=np.eye(2, 4), Q=0.05 * np.eye(4), R=0.3 * np.eye(2),
                                x0=[0, 0, 1, -1], P0=4 * np.eye(4))


def _best(f, repeats: int) -> float:
    f()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def _moved(client) -> int:
    return sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values())


def _reduced(res):
    import dask.array as da

    return [da.sum(a) for a in (res.mean, res.cov, res.loglik) if a is not None]


def run(workers=(1, 2, 4), repeats=3, scale=1.0, out=None, gpu=False) -> dict:
    os.environ["RAYON_NUM_THREADS"] = "1"
    import dask
    import dask.array as da
    import distributed

    import kestrel
    import kestrel.dask as kd

    kf = _model()
    rng = np.random.default_rng(1)
    # Sizes: about a second of work for one worker at scale 1.
    b_strong, t_b = int(40000 * scale), 100          # tracks x steps, split along tracks
    tracks_t, t_strong = 2, int(200000 * scale)       # few long tracks, split in time
    b_weak, t_weak = int(10000 * scale), int(50000 * scale)  # per worker

    def gen_z(b, t, chunks):
        # Generated on the workers, block by block (white noise: the filter's cost does
        # not depend on the values).
        return da.random.default_rng(1).normal(size=(b, t, 2), chunks=chunks)

    report = {
        "machine": f"{_cpu_name()}, {os.cpu_count()} logical CPUs, {platform.system()}",
        "kestrel": kestrel.__version__, "dask": dask.__version__,
        "model": "constant velocity in 2-D (nx = 4, ny = 2), float64",
        "runs": [],
        "loadavg_before": os.getloadavg(),
    }

    # The single-process baseline in this process (one thread).
    zb = np.cumsum(rng.normal(size=(b_strong, t_b, 2)), axis=1)
    zt = np.cumsum(rng.normal(size=(tracks_t, t_strong, 2)), axis=1)
    report["local"] = {
        "tracks_sequential_s": _best(lambda: kf.filter(zb, device="cpu"), repeats),
        "time_parallel_filter_s": _best(lambda: kf.filter(zt, device="cpu", method="parallel"), repeats),
        "time_sequential_filter_s": _best(lambda: kf.filter(zt, device="cpu"), repeats),
        "time_parallel_rts_s": _best(lambda: kf.smooth(zt, device="cpu", method="parallel-rts"), repeats),
        "tracks": [b_strong, t_b], "time": [tracks_t, t_strong],
    }
    del zb, zt

    for n in workers:
        with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                      dashboard_address=None, env={"RAYON_NUM_THREADS": "1"}) as cl, \
                distributed.Client(cl) as client:
            def timed(kind, scaling, build, chunks_desc, size):
                arrs = build()
                try:
                    graph_tasks = len(dask.base.collections_to_dsk(arrs))
                except Exception:  # the graph API moves between Dask versions
                    graph_tasks = None
                before = _moved(client)
                t = _best(lambda: dask.compute(*arrs), repeats)
                moved = (_moved(client) - before) / (repeats + 1)
                row = dict(workers=n, kind=kind, scaling=scaling, chunks=chunks_desc,
                           size=size, seconds=t, moved_bytes_per_run=moved, tasks=graph_tasks)
                report["runs"].append(row)
                print(json.dumps(row), flush=True)

            # Split along tracks: strong (fixed total), weak (fixed per worker).
            zs = da.from_array(np.cumsum(rng.normal(size=(b_strong, t_b, 2)), axis=1),
                               chunks=(b_strong // n, t_b, 2))
            zs = client.persist(zs)
            timed("tracks", "strong", lambda: _reduced(kd.filter(kf, zs, device="cpu")),
                  f"{n} x {b_strong // n} tracks", [b_strong, t_b])
            zw = client.persist(gen_z(b_weak * n, t_b, (b_weak, t_b, 2)))
            timed("tracks", "weak", lambda: _reduced(kd.filter(kf, zw, device="cpu")),
                  f"{n} x {b_weak} tracks", [b_weak * n, t_b])
            # Split in time.
            zt = client.persist(da.from_array(np.cumsum(rng.normal(size=(tracks_t, t_strong, 2)), axis=1),
                                              chunks=(tracks_t, -(-t_strong // n), 2)))
            timed("time-filter", "strong", lambda: _reduced(kd.filter(kf, zt, method="parallel", device="cpu")),
                  f"{n} x {-(-t_strong // n)} steps", [tracks_t, t_strong])
            timed("time-rts", "strong", lambda: _reduced(kd.smooth(kf, zt, method="parallel-rts", device="cpu")),
                  f"{n} x {-(-t_strong // n)} steps", [tracks_t, t_strong])
            ztw = client.persist(gen_z(tracks_t, t_weak * n, (tracks_t, t_weak, 2)))
            timed("time-filter", "weak", lambda: _reduced(kd.filter(kf, ztw, method="parallel", device="cpu")),
                  f"{n} x {t_weak} steps", [tracks_t, t_weak * n])
            del zs, zw, zt, ztw

            # Overhead per chunk: one small job cut into 1 .. 64 chunks.
            if n == max(workers):
                small = client.persist(da.from_array(np.cumsum(rng.normal(size=(256, 64, 2)), axis=1),
                                                     chunks=(256, 64, 2)))
                pts = []
                for c in (1, 4, 16, 64):
                    zc = small.rechunk((256 // c, 64, 2))
                    zc = client.persist(zc)
                    t = _best(lambda: dask.compute(*_reduced(kd.filter(kf, zc, device="cpu"))), repeats)
                    pts.append((c, t))
                ptt = []
                long1 = client.persist(da.from_array(np.cumsum(rng.normal(size=(1, 4096, 2)), axis=1),
                                                     chunks=(1, 4096, 2)))
                for c in (1, 4, 16, 64):
                    zc = client.persist(long1.rechunk((1, 4096 // c, 2)))
                    t = _best(lambda: dask.compute(*_reduced(kd.filter(kf, zc, method="parallel", device="cpu"))),
                              repeats)
                    ptt.append((c, t))
                # Dask's own overhead on the same cluster: three sums over the same chunks.
                ptd = []
                for c in (1, 4, 16, 64):
                    zc = client.persist(small.rechunk((256 // c, 64, 2)))
                    t = _best(lambda: dask.compute((zc + 1).sum(), (zc * 2).sum(), (zc - 1).sum()),
                              repeats)
                    ptd.append((c, t))
                slope = lambda p: float(np.polyfit([x for x, _ in p], [y for _, y in p], 1)[0])  # noqa: E731
                report["per_chunk"] = {
                    "workers": n,
                    "tracks_split_points": pts, "tracks_split_s_per_chunk": slope(pts),
                    "time_split_points": ptt, "time_split_s_per_chunk": slope(ptt),
                    "plain_dask_points": ptd, "plain_dask_s_per_chunk": slope(ptd),
                }
                print(json.dumps(report["per_chunk"]), flush=True)
    if gpu:
        # One worker process owning the GPU, the split along tracks, device="cuda" against
        # device="cpu" (every core of the host in that one worker).
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cl, distributed.Client(cl) as client:
            bg = 10 * b_strong
            zg = client.persist(gen_z(bg, t_b, (bg // 4, t_b, 2)))
            report["gpu_worker"] = {"size": [bg, t_b], "chunks": f"4 x {bg // 4} tracks"}
            for dev in ("cuda", "cpu"):
                res = kd.filter(kf, zg, device=dev)
                arrs = [*_reduced(res), res.devices]
                t = _best(lambda: dask.compute(*arrs), repeats)
                report["gpu_worker"][dev] = dict(
                    seconds=t, devices=sorted(set(dask.compute(res.devices)[0])))
            print(json.dumps(report["gpu_worker"]), flush=True)
    report["loadavg_after"] = os.getloadavg()
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
    return report


def _last_step(res):
    """Sums of the last step of each output: the outputs stay where the blocks made them
    and the reduction reads little (what is timed is the kestrel calls, the movement of
    their inputs and carries, and Dask's scheduling)."""
    import dask.array as da

    return [da.sum(a[:, -1]) for a in (res.mean, res.cov, res.loglik) if a is not None]


def run_cuda_cluster(gpus=None, repeats=3, tracks=4_000_000, steps=100_000_000,
                     out=None, pf_tracks=65_000) -> dict:
    """dask-cuda's ``LocalCUDACluster`` (one worker process per GPU) with 1, 2, 4, ... of
    the host's GPUs, float32, device="cuda" on every worker:

    - the split along tracks: ``tracks`` x 100 steps (filter, all outputs), one chunk per
      GPU, against the same job as one chunk on one GPU; the same for the particle filter
      (stochastic volatility, ``pf_tracks`` x 100 steps, 1024 particles);
    - the split in time: one sequence of ``steps`` steps (the parallel filter, all
      outputs), one block per GPU, against ``method="parallel"`` on one GPU (one chunk).

    The inputs are generated and persisted on the workers before the runs; the outputs
    stay on the workers (the timed reduction reads their last step). Best of
    ``repeats`` after a warm-up, with the bytes the workers sent each other."""
    import dask
    import dask.array as da
    import distributed
    from dask_cuda import LocalCUDACluster

    import kestrel
    import kestrel.dask as kd

    kf = _model()
    n_gpu = kestrel.cuda_device_count()
    if gpus is None:
        gpus = [g for g in (1, 2, 4, 8) if g <= n_gpu]
        if n_gpu not in gpus:
            gpus.append(n_gpu)
    report = {
        "machine": f"{n_gpu} x {_gpu_name()}, {_cpu_name()}, {os.cpu_count()} logical CPUs",
        "kestrel": kestrel.__version__, "dask": dask.__version__,
        "model": "constant velocity in 2-D (nx = 4, ny = 2), float32",
        "tracks": [tracks, 100], "time": [1, steps], "runs": [],
    }

    def gen(b, t, chunks, ny=2, seed=1):
        return da.random.default_rng(seed).normal(size=(b, t, ny),
                                                  chunks=chunks).astype(np.float32)

    pf = kestrel.ParticleFilter.from_toml_str(
        '[model]\nkind = "stochastic-volatility"\nmu = -1.0\nphi = 0.9\nsigma = 0.5\n')

    for n in gpus:
        vis = ",".join(str(i) for i in range(n))
        with LocalCUDACluster(CUDA_VISIBLE_DEVICES=vis, dashboard_address=None,
                              memory_limit=0) as cl, distributed.Client(cl) as client:
            def timed(kind, build, chunks_desc, size):
                res = build()
                devices = getattr(res, "devices", None) or []
                arrs = [*_last_step(res), devices]
                before = _moved(client)
                t = _best(lambda: dask.compute(*arrs), repeats)
                moved = (_moved(client) - before) / (repeats + 1)
                devs = sorted(set(dask.compute(devices)[0]))
                row = dict(gpus=n, kind=kind, chunks=chunks_desc, size=size, seconds=t,
                           moved_bytes_per_run=moved, devices=devs)
                report["runs"].append(row)
                print(json.dumps(row), flush=True)

            addrs = sorted(client.scheduler_info()["workers"])

            def spread(size, axis, ny=2):
                # [size, 100, ny] cut along tracks (axis 0), or [1, size, ny] along T.
                # Piece i generated and kept on worker i (the blocks then run where their
                # inputs are: nothing moves but the carries).
                cuts = [size * i // n for i in range(n + 1)]
                parts = []
                for i in range(n):
                    shape = [0, 100, ny] if axis == 0 else [1, 0, ny]
                    shape[axis] = cuts[i + 1] - cuts[i]
                    # A seed a piece: equal pieces would be one Dask key, kept once.
                    parts.append(client.persist(gen(*shape[:2], tuple(shape), ny=ny, seed=i),
                                                workers=[addrs[i % len(addrs)]]))
                distributed.wait(parts)
                return da.concatenate(parts, axis=axis)

            zb = spread(tracks, 0)
            timed("tracks-filter", lambda: kd.filter(kf, zb, device="cuda"),
                  f"{n} x {-(-tracks // n)} tracks", [tracks, 100])
            del zb
            zp = spread(pf_tracks, 0, ny=1)
            timed("tracks-particle",
                  lambda: kd.particle_filter(pf, zp, particles=1024, device="cuda"),
                  f"{n} x {-(-pf_tracks // n)} tracks, 1024 particles", [pf_tracks, 100])
            del zp
            zt = spread(steps, 1)
            timed("time-filter",
                  lambda: kd.filter(kf, zt, device="cuda", method="parallel"),
                  f"{n} x {-(-steps // n)} steps", [1, steps])
            del zt
    one = {r["kind"]: r["seconds"] for r in report["runs"] if r["gpus"] == 1}
    for r in report["runs"]:
        if r["kind"] in one:
            r["speedup_over_one"] = one[r["kind"]] / r["seconds"]
            r["efficiency"] = r["speedup_over_one"] / r["gpus"]
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
    return report


def _gpu_name() -> str:
    import subprocess

    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "GPU"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m kestrel.dask_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2,4", help="LocalCluster sizes (default 1,2,4)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--scale", type=float, default=1.0, help="problem size factor (default 1)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--gpu", action="store_true", help="also time one GPU worker (device=auto)")
    p.add_argument("--cuda-cluster", action="store_true",
                   help="instead: dask-cuda's LocalCUDACluster over 1, 2, 4, ... GPUs")
    p.add_argument("--tracks", type=int, default=4_000_000,
                   help="--cuda-cluster: tracks of the split along tracks (default 4e6)")
    p.add_argument("--steps", type=int, default=100_000_000,
                   help="--cuda-cluster: steps of the split in time (default 1e8)")
    a = p.parse_args(argv)
    if a.cuda_cluster:
        r = run_cuda_cluster(None, a.repeats, a.tracks, a.steps, a.json)
        print(json.dumps({k: v for k, v in r.items() if k != "runs"}, indent=1))
        return
    r = run(tuple(int(x) for x in a.workers.split(",")), a.repeats, a.scale, a.json, a.gpu)
    print(json.dumps({k: v for k, v in r.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
