"""kestrel.dask with GPU workers: the parallel-in-time split's filter blocks on the
workers' GPUs (two worker processes sharing GPU 0, and dask-cuda's LocalCUDACluster, one
worker per GPU, where dask-cuda is installed) against the single-process runs on the CPU.
Skipped without a GPU (failures with KESTREL_REQUIRE_GPU=1) or without Dask."""

import numpy as np
import pytest

import kestrel
from conftest import require_gpu

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import kestrel.dask as kd  # noqa: E402


@pytest.fixture(autouse=True)
def gpu(monkeypatch):
    require_gpu()
    monkeypatch.setenv("KESTREL_POISON", "1")


def model():
    dt = 0.5
    F = np.eye(4)
    F[0, 2] = F[1, 3] = dt
    return kestrel.KalmanFilter(F=F, H=np.eye(2, 4), Q=0.05 * np.eye(4), R=0.3 * np.eye(2),
                                x0=[0, 0, 1, -1], P0=4 * np.eye(4), u=[0.01, 0, 0, 0],
                                d=[0.1, -0.2])


def data(rng, b, t):
    z = np.cumsum(0.3 * rng.normal(size=(b, t, 2)), axis=1)
    z[rng.random((b, t)) < 0.1] = np.nan
    return z


def close(got, want, tol):
    for k in ("mean", "cov", "loglik"):
        a, b = getattr(got, k), getattr(want, k)
        if a is None and b is None:
            continue
        assert a.shape == b.shape, k
        scale = np.abs(b).max(axis=tuple(range(2, b.ndim)), keepdims=True)
        err = np.abs(a - b) / np.maximum(scale, 1e-3)
        assert err.max() < tol, f"{k}: {err.max():.2e}"


def check_time_split(rng):
    kf = model()
    z = data(rng, 3, 4000)
    chunks = (3, (1000, 1, 1999, 1000), 2)
    local_f = kf.filter(z, method="parallel", device="cpu")
    local_s = kf.smooth(z, method="parallel-rts", device="cpu")
    for dtype, tol in ((np.float64, 1e-8), (np.float32, 2e-3)):
        zd = da.from_array(z.astype(dtype), chunks=chunks)
        got = kd.filter(kf, zd, method="parallel", device="cuda").compute()
        assert got.device == "dask[cuda:0]" and got.mean.dtype == dtype
        close(got, local_f, tol)
        got = kd.smooth(kf, zd, method="parallel-rts", device="auto").compute()
        # The filter's blocks on the GPU, the smoother's passes on the CPUs.
        assert got.device == "dask[cpu,cuda:0]"
        close(got, local_s, tol)


def test_time_split_filter_blocks_on_the_gpu_equal_the_local_run(rng):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    with distributed.Client(cluster):
        check_time_split(rng)
    cluster.close()


def test_local_cuda_cluster_runs_both_splits(rng):
    dask_cuda = pytest.importorskip("dask_cuda")
    cluster = dask_cuda.LocalCUDACluster(dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            assert len(client.scheduler_info()["workers"]) == kestrel.cuda_device_count()
            check_time_split(rng)
            # Chunks of tracks: each worker sees its own GPU as cuda:0.
            kf = model()
            z = data(rng, 4000, 50)
            got = kd.smooth(kf, da.from_array(z, chunks=(1000, 50, 2)), device="cuda").compute()
            assert got.device == "dask[cuda:0]"
            close(got, kf.smooth(z, device="cpu"), 1e-8)
    finally:
        cluster.close()
