"""The Kalman family from Python: against the NumPy reference, the peers, bad inputs,
threads and array kinds."""

import glob
import os
import pickle
import threading

import numpy as np
import pytest

import kestrel
from conftest import ticks_while
from reference import kalman_filter, random_model, rts_smoother

REPO = os.path.join(os.path.dirname(__file__), "..", "..")


def make(rng, nx, ny, B=3, T=40, missing=0.1):
    F, H, Q, R, x0, P0 = random_model(rng, nx, ny)
    z = rng.normal(size=(B, T, ny)) * 3
    z[rng.random((B, T)) < missing] = np.nan
    return (F, H, Q, R, x0, P0), z


@pytest.mark.parametrize("nx,ny", [(1, 1), (2, 1), (4, 2), (3, 2), (5, 3), (6, 2)])
def test_filter_and_rts_equal_the_textbook_equations(rng, nx, ny):
    (F, H, Q, R, x0, P0), z = make(rng, nx, ny)
    u, d = rng.normal(size=nx), rng.normal(size=ny)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0, u=u, d=d)
    f = kf.filter(z, device="cpu")
    s = kf.smooth(z, device="cpu")
    assert f.mean.shape == (3, 40, nx) and f.cov.shape == (3, 40, nx, nx)
    assert f.loglik.shape == (3, 40) and f.mean.dtype == np.float64
    for b in range(3):
        ms, Ps, lls = kalman_filter(F, H, Q, R, x0, P0, z[b], u, d)
        np.testing.assert_allclose(f.mean[b], ms, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(f.cov[b], Ps, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(f.loglik[b], lls, rtol=1e-9, atol=1e-9)
        sm, sP = rts_smoother(F, Q, ms, Ps, u)
        np.testing.assert_allclose(s.mean[b], sm, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(s.cov[b], sP, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(s.loglik[b], lls, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("method,filter_method", [("parallel-rts", "parallel"),
                                                  ("two-filter", "parallel"),
                                                  ("parallel-sqrt-rts", "parallel-sqrt")])
def test_parallel_methods_equal_the_sequential_ones(rng, method, filter_method):
    (F, H, Q, R, x0, P0), z = make(rng, 4, 2, B=2, T=200)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    seq = kf.filter(z, device="cpu")
    par = kf.filter(z, device="cpu", method=filter_method, scan="blelloch")
    for k in ("mean", "cov", "loglik"):
        np.testing.assert_allclose(getattr(par, k), getattr(seq, k), rtol=1e-7, atol=1e-8)
    rts = kf.smooth(z, device="cpu")
    other = kf.smooth(z, device="cpu", method=method)
    np.testing.assert_allclose(other.mean, rts.mean, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(other.cov, rts.cov, rtol=1e-6, atol=1e-7)


def test_one_track_has_no_batch_axis_and_1d_scalars_work(rng):
    kf = kestrel.KalmanFilter(F=[[1.0]], H=[[1.0]], Q=[[0.1]], R=[[1.0]])
    z = rng.normal(size=30)
    r1 = kf.filter(z)
    r2 = kf.filter(z[:, None])
    r3 = kf.filter(z[None, :, None])
    assert r1.mean.shape == (30, 1) and r1.cov.shape == (30, 1, 1) and r1.loglik.shape == (30,)
    np.testing.assert_array_equal(r1.mean, r2.mean)
    np.testing.assert_array_equal(r1.mean, r3.mean[0])


def test_output_selection(rng):
    (F, H, Q, R, x0, P0), z = make(rng, 4, 2)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    full = kf.filter(z)
    m = kf.filter(z, outputs=("mean",))
    assert m.cov is None and m.loglik is None
    np.testing.assert_array_equal(m.mean, full.mean)
    dg = kf.filter(z, outputs="diag,loglik")
    assert dg.mean is None and dg.cov.shape == (3, 40, 4)
    np.testing.assert_array_equal(dg.cov, np.diagonal(full.cov, axis1=2, axis2=3))
    np.testing.assert_array_equal(dg.loglik, full.loglik)
    s = kf.smooth(z, outputs=["mean", "loglik"])
    assert s.cov is None
    np.testing.assert_array_equal(s.loglik, full.loglik)
    assert full.total_loglik == pytest.approx(float(np.sum(full.loglik)))


def test_missing_steps_only_predict(rng):
    (F, H, Q, R, x0, P0), z = make(rng, 2, 1, B=1, T=10, missing=0.0)
    z[0, 4] = np.nan
    r = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0).filter(z)
    assert r.loglik[0, 4] == 0.0
    np.testing.assert_allclose(r.mean[0, 4], F @ r.mean[0, 3], rtol=1e-12)


def test_float32_in_float32_out_and_close_to_float64(rng):
    (F, H, Q, R, x0, P0), z = make(rng, 4, 2, B=50, T=60)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    r32 = kf.filter(z.astype(np.float32))
    r64 = kf.filter(z)
    assert r32.mean.dtype == np.float32 and r64.mean.dtype == np.float64
    np.testing.assert_allclose(r32.mean, r64.mean, rtol=1e-3, atol=1e-3)
    r = kf.filter(z, precision="f32")
    assert r.mean.dtype == np.float32


def test_any_layout_and_dtype_gives_the_same_answer(rng):
    (F, H, Q, R, x0, P0), z = make(rng, 2, 2, B=4, T=20, missing=0.0)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    ref = kf.filter(z).mean
    np.testing.assert_array_equal(kf.filter(np.asfortranarray(z)).mean, ref)
    big = np.zeros((8, 20, 4))
    big[::2, :, ::2] = z
    np.testing.assert_array_equal(kf.filter(big[::2, :, ::2]).mean, ref)
    zi = np.round(z * 10).astype(np.int32)
    np.testing.assert_array_equal(kf.filter(zi).mean, kf.filter(zi.astype(np.float64)).mean)
    lst = z.tolist()
    np.testing.assert_array_equal(kf.filter(lst).mean, ref)


class CpuDlpack:
    """An object that offers its data only through DLPack (as a CPU tensor would)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_cpu_input(rng):
    (F, H, Q, R, x0, P0), z = make(rng, 4, 2, missing=0.0)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    np.testing.assert_array_equal(kf.filter(CpuDlpack(z)).mean, kf.filter(z).mean)


def test_the_callers_array_is_untouched_on_success_and_failure(rng):
    (F, H, Q, R, x0, P0), z = make(rng, 4, 2)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    before = z.copy()
    kf.filter(z)
    kf.smooth(z)
    bad = z.copy()
    bad[1, 7, 0] = np.inf
    bad_before = bad.copy()
    with pytest.raises(ValueError, match="track 1, step 7"):
        kf.filter(bad)
    np.testing.assert_array_equal(z, before)
    np.testing.assert_array_equal(bad, bad_before)
    assert z.flags.writeable


@pytest.mark.parametrize(
    "call,exc,msg",
    [
        (lambda kf, z: kf.filter(z[..., :1]), ValueError, "the model measures 2"),
        (lambda kf, z: kf.filter(z[0, 0]), ValueError, "expected measurements"),
        (lambda kf, z: kf.filter(z[:, :0]), ValueError, "no measurements"),
        (lambda kf, z: kf.filter(z, method="bogus"), ValueError, "unknown filter method"),
        (lambda kf, z: kf.smooth(z, method="parallel"), ValueError, "unknown smoother method"),
        (lambda kf, z: kf.filter(z, outputs=("mean", "nope")), ValueError, "unknown output"),
        (lambda kf, z: kf.filter(z, outputs=("cov", "diag")), ValueError, "twice"),
        (lambda kf, z: kf.filter(z, scan="zigzag"), ValueError, "scan"),
        (lambda kf, z: kf.filter(z, device="tpu"), ValueError, "unknown device"),
        (lambda kf, z: kf.filter(z, device=3), TypeError, "device"),
        (lambda kf, z: kf.filter(z, precision="f16"), ValueError, "precision"),
        (lambda kf, z: kf.filter(z, outputs=3), TypeError, "outputs"),
        (lambda kf, z: kf.filter("abc"), TypeError, "numeric"),
        (lambda kf, z: kf.filter(z.astype(complex)), TypeError, "numeric"),
    ],
)
def test_bad_inputs_raise_clear_errors(rng, call, exc, msg):
    (F, H, Q, R, x0, P0), z = make(rng, 4, 2)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    with pytest.raises(exc, match=msg):
        call(kf, z)


def test_bad_models_raise_model_errors():
    with pytest.raises(kestrel.ModelError, match="Q"):
        kestrel.KalmanFilter(F=np.eye(2), H=[[1, 0]], Q=-np.eye(2), R=[[1.0]])
    with pytest.raises(kestrel.ModelError, match="R"):
        kestrel.KalmanFilter(F=np.eye(2), H=[[1, 0]], Q=np.eye(2), R=[[0.0]])
    with pytest.raises(ValueError):
        kestrel.KalmanFilter(F=np.eye(2), H=[[1, 0, 0]], Q=np.eye(2), R=[[1.0]])
    with pytest.raises(ValueError, match="x0"):
        kestrel.KalmanFilter(F=np.eye(2), H=[[1, 0]], Q=np.eye(2), R=[[1.0]], x0=[1, 2, 3])
    assert issubclass(kestrel.ModelError, ValueError)


def test_model_files(tmp_path):
    names = ["cv2d.toml", "cv2d-builder.toml", "ca2d.toml", "random-walk.toml", "ar.toml",
             "scalar-explicit.toml", "random-walk-2d.toml", "ar10-seismic-noise.toml"]
    for n in names:
        kf = kestrel.KalmanFilter.from_toml(os.path.join(REPO, "examples", n))
        assert kf.F.shape == (kf.nx, kf.nx) and kf.H.shape == (kf.ny, kf.nx)
        again = kestrel.KalmanFilter.from_toml_str(kf.to_toml())
        for k in ("F", "H", "Q", "R", "x0", "P0", "u", "d"):
            np.testing.assert_array_equal(getattr(again, k), getattr(kf, k))
    p = tmp_path / "m.toml"
    kf.save(p)
    np.testing.assert_array_equal(kestrel.KalmanFilter.from_toml(p).F, kf.F)
    bad = tmp_path / "bad.toml"
    bad.write_text("[model]\nkind = \"cv\"\ndims = 2\ndt = 1.0\nq = 0.5\nr = -1.0\n")
    with pytest.raises(kestrel.ModelError, match="bad.toml"):
        kestrel.KalmanFilter.from_toml(bad)
    with pytest.raises(kestrel.ModelError, match="range-bearing.toml"):
        kestrel.KalmanFilter.from_toml(os.path.join(REPO, "examples", "range-bearing.toml"))
    with pytest.raises(OSError, match="missing.toml"):
        kestrel.KalmanFilter.from_toml(tmp_path / "missing.toml")


def test_pickle_round_trip_is_exact(rng):
    (F, H, Q, R, x0, P0), z = make(rng, 3, 2)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    again = pickle.loads(pickle.dumps(kf))
    np.testing.assert_array_equal(again.filter(z).mean, kf.filter(z).mean)
    m = pickle.loads(pickle.dumps(kf.model))
    np.testing.assert_array_equal(m.Q, Q)


def test_calls_from_threads_run_at_once_and_agree(rng):
    kf = kestrel.KalmanFilter.from_toml(os.path.join(REPO, "examples", "cv2d-builder.toml"))
    z = rng.normal(size=(20000, 50, 2))
    ref = kf.filter(z, device="cpu").mean
    results = [None] * 4

    def work(i):
        results[i] = kf.filter(z, device="cpu").mean

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, ref)


def test_the_gil_is_released_while_kestrel_computes(rng):
    kf = kestrel.KalmanFilter.from_toml(os.path.join(REPO, "examples", "cv2d-builder.toml"))
    z = rng.normal(size=(40000, 100, 2))
    _, secs, during = ticks_while(lambda: kf.smooth(z, device="cpu"))
    assert secs > 0.05 and during >= 5, (secs, during)


def test_progress_bar_only_when_asked(rng, capfd):
    kf = kestrel.KalmanFilter.from_toml(os.path.join(REPO, "examples", "cv2d-builder.toml"))
    z = rng.normal(size=(3000, 20, 2))
    quiet = kf.filter(z)
    assert capfd.readouterr().err == ""
    loud = kf.filter(z, progress=True)
    err = capfd.readouterr().err
    assert "3000/3000 tracks" in err and "100%" in err
    np.testing.assert_array_equal(loud.mean, quiet.mean)
    np.testing.assert_array_equal(loud.cov, quiet.cov)
    s1 = kf.smooth(z, progress=True, outputs="mean,diag,loglik")
    s0 = kf.smooth(z, outputs="mean,diag,loglik")
    for k in ("mean", "cov", "loglik"):
        np.testing.assert_array_equal(getattr(s1, k), getattr(s0, k))


def test_every_example_model_loads_or_names_its_file():
    for p in glob.glob(os.path.join(REPO, "examples", "*.toml")):
        try:
            kestrel.KalmanFilter.from_toml(p)
        except kestrel.ModelError as e:
            assert os.path.basename(p) in str(e), str(e)
