"""kestrel.dask on a LocalCluster of 2 worker processes: the split along tracks and the
parallel-in-time split along T against the single-process runs, a worker killed mid-run,
bad chunks, pickling, the particle filter over chunks of tracks, the nonlinear filters and
IMM over chunks of tracks, time-varying models over both splits."""

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


EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
# A two-mode IMM: nearly constant velocity, and a manoeuvre.
with open(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "imm-two-modes.toml")) as _f:
    IMM = _f.read()


def radar(rng, b=5, t=30):
    """Range and bearing of targets near examples/range-bearing.toml's prior."""
    x = 200.0 - np.arange(t) + rng.normal(size=(b, 1)) * 5
    y = 150.0 + 0.5 * np.arange(t) + rng.normal(size=(b, 1)) * 5
    z = np.stack([np.hypot(x, y) + 2 * rng.normal(size=(b, t)),
                  np.arctan2(y, x) + 0.01 * rng.normal(size=(b, t))], axis=-1)
    z[rng.random((b, t)) < 0.1] = np.nan
    return z


def same(got, local, names):
    for k in names:
        a, b = getattr(got, k), getattr(local, k)
        assert a.dtype == b.dtype and a.shape == b.shape, k
        np.testing.assert_array_equal(a, b, err_msg=k)


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
    with pytest.raises(ValueError, match='unknown device "gpu"'):
        kd.filter(kf, zd, method="parallel", device="gpu")
    if kestrel.cuda_device_count() == 0:
        # The name is good; the worker finds no GPU and says so.
        with pytest.raises(Exception, match="(?i)cuda|gpu") as e:
            kd.filter(kf, zd, method="parallel", device="cuda").compute()
        assert "in the Dask block of tracks 0.., steps " in "".join(getattr(e.value, "__notes__", []))
        assert "no usable CUDA GPU" in str(e.value)
    with pytest.raises(TypeError, match="KalmanFilter"):
        kd.filter(object(), zd)
    # The same for a NonlinearFilter: refused when the graph is built, or by the worker's
    # kestrel call when the chunks lie.
    nf = kestrel.NonlinearFilter.from_toml(os.path.join(EXAMPLES, "range-bearing.toml"))
    with pytest.raises(ValueError, match="measurements have 3 components, the model measures 2"):
        kd.filter(nf, da.zeros((2, 10, 3), chunks=(1, 10, 3)))
    with pytest.raises(ValueError, match="measurements have 3 components, the model measures 2"):
        kd.smooth(nf, lying.rechunk({1: -1}), filter="ukf").compute()
    with pytest.raises(ValueError, match="unknown filter"):
        kd.filter(nf, lying.rechunk({1: -1}), filter="xkf")
    with pytest.raises(TypeError, match="an option of a NonlinearFilter"):
        kd.filter(kf, zd, method="parallel", filter="ukf")
    # More steps than a time-varying model has matrices for.
    tv = kestrel.KalmanFilter.from_toml(os.path.join(EXAMPLES, "time-varying.toml"))
    with pytest.raises(ValueError, match="matrices for 200 steps, the measurements have 201"):
        kd.filter(tv, da.zeros((2, 201, 2), chunks=(1, 201, 2)))


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
    # A NonlinearFilter pickles as its file's text and origin.
    nf = kestrel.NonlinearFilter.from_toml_str(IMM, "imm.toml")
    nb = pickle.loads(pickle.dumps(nf))
    assert (nb._text, nb._origin, nb.nx, nb.ny, nb.modes) == (nf._text, nf._origin, 2, 1, 2)
    # A time-varying KalmanFilter has no TOML form: kestrel.dask ships its arrays and the
    # worker rebuilds the same model.
    tv = kestrel.KalmanFilter.from_toml(os.path.join(EXAMPLES, "time-varying.toml"))
    with pytest.raises(TypeError, match="time-varying"):
        pickle.dumps(tv)
    mats = kd._step_mats(tv.model)
    again = pickle.loads(pickle.dumps(kd._Varying(mats, "t")))._kf()
    for n in ("F", "Q", "H", "R", "u", "d", "x0", "P0"):
        np.testing.assert_array_equal(getattr(again.model, n), getattr(tv.model, n))


def test_particle_filter_over_tracks(client, rng):
    kf = model()
    pf = kestrel.ParticleFilter.from_kalman(kf)
    z = data(rng, b=4, t=15, missing=0)
    one = kd.particle_filter(pf, da.from_array(z, chunks=(4, 15, 2)), 200, seed=7,
                             device="cpu").compute()
    local = pf.filter(z, 200, seed=7, device="cpu")
    for k in ("mean", "cov", "loglik", "ess"):
        np.testing.assert_array_equal(one[k], getattr(local, k))
    # Uneven chunks and several resamplers: each block is called with its first track's
    # index, so the result is the whole batch's, bit for bit, and again on recompute.
    for resample in ("systematic", "multinomial", "subsets:2"):
        local = pf.filter(z, 200, seed=7, resample=resample, ess=0.8, device="cpu")
        for chunks in ((2, 2), (1, 3)):
            split = kd.particle_filter(pf, da.from_array(z, chunks=(chunks, 15, 2)), 200,
                                       seed=7, resample=resample, ess=0.8, device="cpu")
            a, b = split.compute(), split.compute()
            for k in ("mean", "cov", "loglik", "ess"):
                np.testing.assert_array_equal(a[k], getattr(local, k), err_msg=f"{resample} {chunks} {k}")
                np.testing.assert_array_equal(a[k], b[k])
    # The block's own call needs its offset: without it, tracks 2.. repeat 0..'s streams.
    alone = pf.filter(z[2:], 200, seed=7, device="cpu").mean
    assert not np.array_equal(alone, pf.filter(z, 200, seed=7, device="cpu").mean[2:])
    np.testing.assert_array_equal(
        pf.filter(z[2:], 200, seed=7, device="cpu", first_track=2).mean,
        pf.filter(z, 200, seed=7, device="cpu").mean[2:])
    with pytest.raises(ValueError, match="first_track"):
        pf.filter(z, 200, first_track=-1, device="cpu")
    with pytest.raises(ValueError, match="2\\^32"):
        pf.filter(z, 200, first_track=2**32, device="cpu")


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


def test_nonlinear_over_tracks_equals_local(client, rng):
    nf = kestrel.NonlinearFilter.from_toml(os.path.join(EXAMPLES, "range-bearing.toml"))
    z = radar(rng)
    zd = da.from_array(z, chunks=(2, 30, 2))
    f = kd.filter(nf, zd, filter="ukf")
    assert isinstance(f, kd.DaskNonlinearResult) and f.mean.chunks[0] == (2, 2, 1)
    assert f.mode_probs is None
    got = f.compute()
    assert isinstance(got, kestrel.NonlinearResult) and got.mode_probs is None
    same(got, nf.filter(z, filter="ukf"), ("mean", "cov", "loglik"))
    s = kd.smooth(nf, zd, filter="ukf", method="iterated", iterations=3).compute()
    same(s, nf.smooth(z, filter="ukf", method="iterated", iterations=3), ("mean", "cov", "loglik"))
    # float32, the variances alone.
    z32 = z.astype(np.float32)
    r = kd.smooth(nf, da.from_array(z32, chunks=(3, 30, 2)), filter="ckf", outputs=("mean", "diag"))
    assert r.loglik is None and r.cov.shape == (5, 30, 4) and r.mean.dtype == np.float32
    got = r.compute()
    local = nf.smooth(z32, filter="ckf")
    np.testing.assert_array_equal(got.mean, local.mean)
    np.testing.assert_array_equal(got.cov, np.diagonal(local.cov, axis1=2, axis2=3))


def test_function_model_over_tracks_equals_local(client, rng):
    # Constant velocity observed in range and bearing, as NumPy functions (the lambdas
    # travel to the workers with the tasks).
    dt = 1.0
    F = np.array([[1, dt, 0, 0], [0, 1, 0, 0], [0, 0, 1, dt], [0, 0, 0, 1]], float)
    nf = kestrel.NonlinearFilter.from_functions(
        lambda X: X @ F.T,
        lambda X: np.stack([np.hypot(X[:, 0], X[:, 2]), np.arctan2(X[:, 2], X[:, 0])], axis=1),
        Q=np.eye(4) * 0.1, R=np.diag([4.0, 1e-4]), x0=[200.0, -1.0, 150.0, 0.5],
        P0=np.diag([100.0, 1.0, 100.0, 1.0]), angles=[1])
    z = radar(rng)
    zd = da.from_array(z, chunks=(2, 30, 2))
    # To rounding, not bit for bit: NumPy's products over a batch of points may sum in
    # another order for another batch size.
    for run in ("filter", "smooth"):
        got = getattr(kd, run)(nf, zd, filter="ckf").compute()
        local = getattr(nf, run)(z, filter="ckf")
        for k in ("mean", "cov", "loglik"):
            np.testing.assert_allclose(getattr(got, k), getattr(local, k), rtol=1e-11,
                                       atol=1e-9, err_msg=f"{run} {k}")
    with pytest.raises(ValueError, match="rechunk"):
        kd.filter(nf, da.from_array(z, chunks=(5, 10, 2)))


def test_imm_over_tracks_equals_local(client, rng):
    nf = kestrel.NonlinearFilter.from_toml_str(IMM, "imm.toml")
    z = np.cumsum(rng.standard_normal((5, 40, 1)) * 2.0, axis=1)
    r = kd.filter(nf, da.from_array(z, chunks=(2, 40, 1)))
    assert r.mode_probs.shape == (5, 40, 2) and r.mode_probs.chunks[0] == (2, 2, 1)
    same(r.compute(), nf.filter(z), ("mean", "cov", "loglik", "mode_probs"))
    # One track [T, ny]: as NonlinearFilter, the results keep a B axis of 1.
    one = kd.filter(nf, da.from_array(z[0], chunks=(40, 1))).compute()
    same(one, nf.filter(z[0]), ("mean", "cov", "loglik", "mode_probs"))
    # The library's own refusal, when the graph is built.
    with pytest.raises(ValueError, match="smoothing an IMM model is not available"):
        kd.smooth(nf, da.from_array(z, chunks=(2, 40, 1)))


def test_nonlinear_time_split_is_refused(client, rng):
    nf = kestrel.NonlinearFilter.from_toml(os.path.join(EXAMPLES, "range-bearing.toml"))
    zd = da.from_array(radar(rng), chunks=(5, 10, 2))
    for run in (kd.filter, kd.smooth):
        with pytest.raises(ValueError, match=r"the time split .* needs a linear model .* "
                                             r"rechunk z along tracks only"):
            run(nf, zd)
    with pytest.raises(ValueError, match="needs a linear model"):
        kd.filter(kestrel.NonlinearFilter.from_toml_str(IMM),
                  da.zeros((2, 40, 1), chunks=(2, 20, 1)))
    with pytest.raises(ValueError, match='method: a NonlinearFilter filters each track in order'):
        kd.filter(nf, zd.rechunk({1: -1}), method="parallel")


def piecewise(tmp_path, rng, steps=90):
    """A time-varying model whose matrices hold for runs of steps: dt switching between
    two values, the noise of the sensor every 20 steps, an offset from step 33 on."""
    dts = np.where((np.arange(steps) // 7) % 3 == 2, 0.5, 1.0)
    F = np.stack([np.array([[1.0, dt], [0.0, 1.0]]) for dt in dts])
    Q = np.stack([0.05 * np.array([[dt ** 3 / 3, dt ** 2 / 2], [dt ** 2 / 2, dt]]) for dt in dts])
    H = np.tile([[1.0, 0.0]], (steps, 1, 1))
    R = np.where((np.arange(steps) // 20) % 2 == 0, 0.5, 4.0)[:, None, None]
    u = np.zeros((steps, 2))
    u[33:, 1] = 0.01
    d = np.zeros((steps, 1))
    np.savez(tmp_path / "pw.npz", F=F, Q=Q, H=H, R=R, u=u, d=d)
    (tmp_path / "pw.toml").write_text('[model]\nkind = "time-varying"\nfile = "pw.npz"\n'
                                      "[prior]\nx0 = [0.5, 1.0]\nP0 = [[4.0, 0.5], [0.5, 1.0]]\n")
    return kestrel.KalmanFilter.from_toml(tmp_path / "pw.toml")


def test_time_varying_over_tracks_equals_local(client, rng):
    kf = kestrel.KalmanFilter.from_toml(os.path.join(EXAMPLES, "time-varying.toml"))
    z = data(rng, b=5, t=150)
    zd = da.from_array(z, chunks=(2, 150, 2))
    for smooth in (False, True):
        got = (kd.smooth if smooth else kd.filter)(kf, zd, device="cpu").compute()
        local = (kf.smooth if smooth else kf.filter)(z, device="cpu")
        same(got, local, ("mean", "cov", "loglik"))


@pytest.mark.parametrize("which", ["example", "piecewise"])
def test_time_varying_time_split_equals_local(client, rng, tmp_path, which):
    if which == "example":
        # Matrices that change every step; chunks reaching the model's last step.
        kf = kestrel.KalmanFilter.from_toml(os.path.join(EXAMPLES, "time-varying.toml"))
        z, chunks = data(rng, b=3, t=200), (2, (1, 60, 99, 40), 2)
    else:
        # Runs of equal matrices, cut by the blocks and ending inside them; fewer steps
        # than the model has.
        kf, z = piecewise(tmp_path, rng), data(rng, b=3, t=80, ny=1)
        chunks = (3, (20, 13, 1, 30, 16), 1)
    zd = da.from_array(z, chunks=chunks)
    f = kd.filter(kf, zd, method="parallel").compute()
    local, seq = kf.filter(z, method="parallel", device="cpu"), kf.filter(z, device="cpu")
    s = kd.smooth(kf, zd, method="parallel-rts").compute()
    slocal, rts = kf.smooth(z, method="parallel-rts", device="cpu"), kf.smooth(z, device="cpu")
    for k in ("mean", "cov", "loglik"):
        close(getattr(f, k), getattr(local, k))
        close(getattr(f, k), getattr(seq, k), 1e-8)
        close(getattr(s, k), getattr(slocal, k))
        close(getattr(s, k), getattr(rts, k), 1e-8)


def test_tbd_over_tiles_equals_the_whole_frame(client):
    # Two targets, one crossing a tile border; tiles of uneven sizes, the threshold
    # calibrated for pfa on the whole frame 0.
    sim = kestrel.simulate_frames(16, height=70, width=90, target=["20:33:1:0", "60:10:0:1"],
                                  snr=5, seed=11)
    whole = kestrel.tbd(sim.frames, pfa=1e-3, device="cpu")
    assert len(whole.detections) > 10
    fd = da.from_array(sim.frames, chunks=(16, (30, 40), (25, 40, 25)))
    res = kd.tbd(fd, pfa=1e-3, device="cpu")
    got = res.compute()
    assert got.threshold == whole.threshold and got.device == "dask[cpu]"
    np.testing.assert_array_equal(got.detections, whole.detections)
    np.testing.assert_array_equal(got.motions, whole.motions)
    # A given threshold and other motion vectors (fractional: bilinear), with decimation.
    opts = dict(threshold=whole.threshold, speeds="0,1.5", directions=8, decimation=4,
                nms=1, device="cpu")
    np.testing.assert_array_equal(kd.tbd(fd, **opts).compute().detections,
                                  kestrel.tbd(sim.frames, **opts).detections)
    # A halo too small for the run changes detections near the tile borders (the check
    # above is not vacuous).
    small = kd.tbd(fd, halo=0, pfa=1e-3, device="cpu").compute().detections
    assert not np.array_equal(small, whole.detections)
    # Refusals, when the graph is built.
    with pytest.raises(ValueError, match="chunked along T"):
        kd.tbd(da.from_array(sim.frames, chunks=(8, 35, 45)))
    with pytest.raises(ValueError, match="return_maps"):
        kd.tbd(fd, return_maps=True)
    with pytest.raises(ValueError, match="halo"):
        kd.tbd(fd, halo=-1)
