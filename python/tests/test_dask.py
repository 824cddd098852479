"""kestrel.dask on a LocalCluster of 2 worker processes: the split along tracks and the
parallel-in-time split along T against the single-process runs, a worker killed mid-run,
bad chunks, pickling, the particle filter over chunks of tracks."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import kestrel

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import kestrel.dask as kd  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
        env={"RAYON_NUM_THREADS": "1"},
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def model(nx2=False):
    if nx2:
        return kestrel.KalmanFilter(
            F=[[1, 1], [0, 1]], H=[[1, 0]], Q=[[0.02, 0.01], [0.01, 0.03]], R=[[0.5]],
            x0=[0.3, -0.1], P0=[[2.0, 0.1], [0.1, 1.0]],
        )
    dt = 0.5
    F = np.eye(4)
    F[0, 2] = F[1, 3] = dt
    return kestrel.KalmanFilter(F=F, H=np.eye(2, 4), Q=0.05 * np.eye(4), R=0.3 * np.eye(2),
                                x0=[0, 0, 1, -1], P0=4 * np.eye(4), u=[0.01, 0, 0, 0], d=[0.1, -0.2])


def data(rng, b=6, t=40, ny=2, missing=0.1):
    z = np.cumsum(rng.normal(size=(b, t, ny)), axis=1)
    z[rng.random((b, t)) < missing] = np.nan
    return z


def close(a, b, rtol=1e-9):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)


def test_tracks_split_equals_local(client, rng):
    kf, z = model(), data(rng)
    zd = da.from_array(z, chunks=(2, 40, 2))
    for smooth in (False, True):
        local = (kf.smooth if smooth else kf.filter)(z, device="cpu")
        res = (kd.smooth if smooth else kd.filter)(kf, zd, device="cpu")
        assert isinstance(res.mean, da.Array) and res.mean.chunks[0] == (2, 2, 2)
        got = res.compute()
        assert got.device == "dask[cpu]"
        for k in ("mean", "cov", "loglik"):
            close(getattr(got, k), getattr(local, k), 1e-12)


@pytest.mark.parametrize("chunks", [(6, 10, 2), (4, (1, 12, 7, 20), 2)])
def test_time_split_equals_local(client, rng, chunks):
    kf, z = model(), data(rng)
    zd = da.from_array(z, chunks=chunks)
    f = kd.filter(kf, zd, method="parallel")
    assert f.mean.chunks == zd.chunks[:2] + ((4,),)
    got = f.compute()
    local = kf.filter(z, method="parallel", device="cpu")
    seq = kf.filter(z, device="cpu")
    for k in ("mean", "cov", "loglik"):
        close(getattr(got, k), getattr(local, k))
        close(getattr(got, k), getattr(seq, k), 1e-8)
    s = kd.smooth(kf, zd, method="parallel-rts").compute()
    local = kf.smooth(z, method="parallel-rts", device="cpu")
    rts = kf.smooth(z, device="cpu")
    for k in ("mean", "cov", "loglik"):
        close(getattr(s, k), getattr(local, k))
        close(getattr(s, k), getattr(rts, k), 1e-8)


def test_time_split_long_blocks(client, rng):
    # Blocks longer than the 4096 steps a worker's finish scans at once.
    kf, z = model(nx2=True), data(rng, b=2, t=9500, ny=1)
    zd = da.from_array(z, chunks=(2, (8300, 1200), 1))
    got = kd.smooth(kf, zd, method="parallel-rts").compute()
    local = kf.smooth(z, method="parallel-rts", device="cpu")
    for k in ("mean", "cov", "loglik"):
        close(getattr(got, k), getattr(local, k), 1e-8)


def test_time_split_options(client, rng):
    kf, z = model(nx2=True), data(rng, b=3, t=30, ny=1).astype(np.float32)
    zd = da.from_array(z, chunks=(3, 7, 1))
    r = kd.smooth(kf, zd, method="parallel-rts", outputs=("mean", "diag"), scan="blelloch")
    assert r.loglik is None and r.cov.shape == (3, 30, 2) and r.mean.dtype == np.float32
    got = r.compute()
    local = kf.smooth(z.astype(np.float64), method="parallel-rts", device="cpu")
    close(got.mean, local.mean, 2e-4)
    close(got.cov, np.diagonal(local.cov, axis1=2, axis2=3), 2e-4)
    # One track [T, ny] in, one track out.
    one = kd.filter(kf, da.from_array(z[0].astype(np.float64), chunks=(10, 1)),
                    method="parallel").compute()
    close(one.mean, kf.filter(z[0].astype(np.float64), device="cpu").mean, 1e-8)
    assert one.loglik.shape == (30,)


def test_worker_killed_mid_run_changes_nothing(client, rng, tmp_path):
    kf, z = model(), data(rng)
    marker = str(tmp_path / "killed")

    def die_once(x, block_info=None):
        # The first time block (1, 2) is read, its worker process dies; Dask restarts the
        # worker and recomputes what was lost.
        if block_info[0]["chunk-location"][:2] == (1, 2) and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return x

    zd = da.from_array(z, chunks=(3, 10, 2)).map_blocks(die_once, dtype=z.dtype)
    pids = set(client.run(os.getpid).values())
    got = kd.smooth(kf, zd, method="parallel-rts").compute()
    assert os.path.exists(marker)
    assert set(client.run(os.getpid).values()) != pids, "no worker was replaced"
    local = kf.smooth(z, method="parallel-rts", device="cpu")
    for k in ("mean", "cov", "loglik"):
        close(getattr(got, k), getattr(local, k))


def test_bad_chunks_give_the_kestrel_error(client, rng):
    kf = model()
    # Known shape: refused when the graph is built, with the library's words.
    with pytest.raises(ValueError, match="measurements have 3 components, the model measures 2"):
        kd.filter(kf, da.zeros((2, 10, 3), chunks=(1, 10, 3)))
    # Chunks that lie about their shape: the worker's kestrel call raises it.
    z = data(rng, b=4, t=20, ny=3)

    def widen(x):
        return z[: x.shape[0], : x.shape[1]]

    lying = da.zeros((4, 20, 2), chunks=(2, 10, 2)).map_blocks(widen, dtype=np.float64)
    for method in ("parallel", "sequential"):
        zz = lying if method == "parallel" else lying.rechunk({1: -1})
        with pytest.raises(ValueError, match="measurements have 3 components, the model measures 2"):
            kd.filter(kf, zz, method=method).compute()
    # An infinite measurement names where it is.
    zinf = data(rng, b=4, t=20)
    zinf[3, 15, 1] = np.inf
    with pytest.raises(ValueError, match="infinite") as e:
        kd.filter(kf, da.from_array(zinf, chunks=(2, 10, 2)), method="parallel").compute()
    assert "tracks 2.., steps 10.." in "".join(getattr(e.value, "__notes__", [])) + str(e.value)
    # Options are checked when the graph is built.
    zd = da.from_array(data(rng), chunks=(6, 10, 2))
    with pytest.raises(ValueError, match='method="parallel"'):
        kd.filter(kf, zd)
    with pytest.raises(ValueError, match="unknown filter method"):
        kd.filter(kf, zd, method="bogus")
    with pytest.raises(ValueError, match="outputs"):
        kd.filter(kf, zd, method="parallel", outputs="means")
    with pytest.raises(ValueError, match="CPU"):
        kd.filter(kf, zd, method="parallel", device="cuda")
    with pytest.raises(TypeError, match="KalmanFilter"):
        kd.filter(object(), zd)


def test_callers_array_untouched(client, rng):
    kf, z = model(), data(rng)
    before = z.copy()
    kd.smooth(kf, da.from_array(z, chunks=(3, 20, 2)), method="parallel-rts").compute()
    np.testing.assert_array_equal(z, before)


def test_models_pickle():
    kf = model()
    back = pickle.loads(pickle.dumps(kf))
    assert back.to_toml() == kf.to_toml()
    pf = kestrel.ParticleFilter.from_kalman(kf)
    pb = pickle.loads(pickle.dumps(pf))
    assert pb.to_toml() == pf.to_toml() and pb.kind == pf.kind


def test_particle_filter_over_tracks(client, rng):
    kf = model()
    pf = kestrel.ParticleFilter.from_kalman(kf)
    z = data(rng, b=4, t=15, missing=0)
    one = kd.particle_filter(pf, da.from_array(z, chunks=(4, 15, 2)), 200, seed=7,
                             device="cpu").compute()
    local = pf.filter(z, 200, seed=7, device="cpu")
    for k in ("mean", "cov", "loglik", "ess"):
        np.testing.assert_array_equal(one[k], getattr(local, k))
    # Two chunks: each block is the call over its own tracks (the draws are keyed by the
    # track's index within its block), the same on every compute.
    two = kd.particle_filter(pf, da.from_array(z, chunks=(2, 15, 2)), 200, seed=7, device="cpu")
    a, b = two.compute(), two.compute()
    np.testing.assert_array_equal(a["mean"], b["mean"])
    np.testing.assert_array_equal(a["mean"][2:], pf.filter(z[2:], 200, seed=7, device="cpu").mean)


def test_imports_without_dask():
    code = (
        "import sys; sys.modules['dask'] = None; sys.modules['dask.array'] = None\n"
        "import kestrel, kestrel.dask\n"
        "try:\n"
        "    kestrel.dask.filter(kestrel.KalmanFilter(F=[[1.0]], H=[[1.0]], Q=[[1.0]], R=[[1.0]]), [[1.0]])\n"
        "except ImportError as e:\n"
        "    print('ImportError', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "ImportError kestrel.dask needs Dask" in out.stdout
