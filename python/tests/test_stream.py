"""kestrel.BatchState, the per-step API: against the batch filter (bit for bit on the
CPU), NumPy references for intervals, control, scores and gates; slots; bad inputs; the
GPU tracker against the CPU."""

import os

import numpy as np
import pytest

import kestrel
from conftest import require_gpu
from reference import random_model

REPO = os.path.join(os.path.dirname(__file__), "..", "..")
CV2D = os.path.join(REPO, "examples", "cv2d-builder.toml")


def cv(dims=1, dt=1.0, q=0.5, r=4.0, p0=100.0, kind="cv"):
    return kestrel.KalmanFilter.from_toml_str(
        f'[model]\nkind = "{kind}"\ndims = {dims}\ndt = {dt}\nq = {q}\nr = {r}\n[prior]\np0 = {p0}\n'
    )


def stream(st, z, mask=None):
    """Step 0 updates the prior; each later step is predict then update."""
    B, T, _ = z.shape
    nx = st.nx
    mean = np.empty((B, T, nx), st.dtype)
    cov = np.empty((B, T, nx, nx), st.dtype)
    ll = np.empty((B, T), st.dtype)
    for t in range(T):
        if t > 0:
            st.predict()
        st.update(z[:, t], mask=None if mask is None else mask[:, t])
        x, P, l = st.state()
        mean[:, t], cov[:, t], ll[:, t] = x[:B], P[:B], l[:B]
    return mean, cov, ll


def random_kf(rng, nx, ny):
    F, H, Q, R, x0, P0 = random_model(rng, nx, ny)
    return kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0, u=0.1 * rng.normal(size=nx),
                                d=rng.normal(size=ny))


@pytest.mark.parametrize("which", ["cv2d", "ca2d", "random32", "random53", "random11"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_predict_update_equals_the_batch_filter_bit_for_bit(rng, which, dtype):
    if which == "cv2d":
        kf = kestrel.KalmanFilter.from_toml(CV2D)
    elif which == "ca2d":
        kf = cv(dims=2, dt=0.1, kind="ca")
    else:
        nx, ny = int(which[-2]), int(which[-1])
        kf = random_kf(rng, nx, ny)
    B, T = 11, 30  # not a multiple of the 8 lanes
    z = (rng.normal(size=(B, T, kf.ny)) * 3).astype(dtype)
    z[rng.random((B, T)) < 0.15] = np.nan
    keep = z.copy()
    st = kestrel.BatchState(kf, B, precision=dtype)
    assert st.dtype == dtype
    slots = st.add(count=B)
    np.testing.assert_array_equal(slots, np.arange(B))
    mean, cov, ll = stream(st, z)
    f = kf.filter(z, device="cpu")
    # The per-step API runs the batch filter's own arithmetic (SIMD lanes for the
    # common tracking sizes, the textbook step otherwise): the same bits.
    np.testing.assert_array_equal(mean, f.mean)
    np.testing.assert_array_equal(cov, f.cov)
    np.testing.assert_array_equal(ll, f.loglik)
    np.testing.assert_array_equal(z, keep)
    assert st.updates == T


def test_mask_skips_updates(rng):
    kf = kestrel.KalmanFilter.from_toml(CV2D)
    B, T = 6, 20
    z = rng.normal(size=(B, T, 2)) * 5
    mask = rng.random((B, T)) > 0.3
    st = kestrel.BatchState(kf, B)
    st.add(count=B)
    mean, cov, ll = stream(st, z, mask=mask)
    zn = z.copy()
    zn[~mask] = np.nan
    f = kf.filter(zn, device="cpu")
    np.testing.assert_array_equal(mean, f.mean)
    np.testing.assert_array_equal(cov, f.cov)
    assert np.all(ll[~mask] == 0.0) and np.all(ll[mask] != 0.0)
    # A masked target stays at its prediction.
    st2 = kestrel.BatchState(kf, 2)
    st2.add(count=2)
    st2.update(np.ones((2, 2)), mask=[True, False])
    x, P, _ = st2.state()
    np.testing.assert_array_equal(x[1], kf.x0)
    np.testing.assert_array_equal(P[1], kf.P0)
    assert not np.array_equal(x[0], kf.x0)


def test_per_target_intervals_and_control_equal_the_kinematic_equations(rng):
    q, r = 0.7, 2.0
    kf = cv(dims=1, dt=1.0, q=q, r=r)
    st = kestrel.BatchState(kf, 4)
    assert st.kinematics == ("cv", 1, pytest.approx(q))
    x0 = rng.normal(size=(3, 2))
    A = rng.normal(size=(3, 2, 2))
    P0 = A @ A.transpose(0, 2, 1) + np.eye(2)
    slots = st.add(x0, P0)
    np.testing.assert_array_equal(slots, [0, 1, 2])
    dts = np.array([0.5, 1.0, 2.5, 9.0])  # the free slot's interval is not used
    c = rng.normal(size=(4, 2))
    st.predict(dt=dts, u=c)
    x, P, _ = st.state()
    for b in range(3):
        dt = dts[b]
        F = np.array([[1, dt], [0, 1]])
        Q = q * np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])
        np.testing.assert_allclose(x[b], F @ x0[b] + c[b], rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(P[b], F @ P0[b] @ F.T + Q, rtol=1e-13, atol=1e-13)
    assert np.isnan(x[3]).all() and np.isnan(P[3]).all()
    # One interval for all equals per-target intervals that are all the same.
    a = kestrel.BatchState(kf, 3)
    b_ = kestrel.BatchState(kf, 3)
    for s in (a, b_):
        s.add(x0, P0)
    a.predict(dt=0.3)
    b_.predict(dt=np.full(3, 0.3))
    np.testing.assert_array_equal(a.x, b_.x)
    np.testing.assert_array_equal(a.P, b_.P)
    # The model's own step is the interval it was built with.
    a.predict()
    b_.predict(dt=1.0)
    np.testing.assert_allclose(a.x, b_.x, rtol=1e-15)
    np.testing.assert_allclose(a.P, b_.P, rtol=1e-14)


def test_kinematics_detection_and_explicit(rng):
    assert kestrel.BatchState(cv(dims=2, dt=0.25, q=3.0), 1).kinematics == ("cv", 2, pytest.approx(3.0))
    assert kestrel.BatchState(cv(dims=3, dt=0.1, kind="ca"), 1).kinematics[:2] == ("ca", 3)
    assert kestrel.BatchState(cv(dims=2), 1, kinematics=None).kinematics is None
    kf = random_kf(rng, 4, 2)
    st = kestrel.BatchState(kf, 2)
    assert st.kinematics is None
    st.add()
    with pytest.raises(ValueError, match="needs the model's kinematics"):
        st.predict(dt=0.5)
    st2 = kestrel.BatchState(kf, 2, kinematics=("cv", 0.5))
    assert st2.kinematics == ("cv", 2, 0.5)
    with pytest.raises(ValueError, match="kinematics: cv has 2 state components per axis"):
        kestrel.BatchState(random_kf(rng, 3, 1), 2, kinematics=("cv", 0.5))
    with pytest.raises(ValueError, match='unknown kind "xx"'):
        kestrel.BatchState(kf, 2, kinematics=("xx", 0.5))


def test_slots_add_remove_reserve_and_priors(rng):
    kf = kestrel.KalmanFilter.from_toml(CV2D)
    st = kestrel.BatchState(kf, 3)
    assert len(st) == 0 and st.capacity == 3
    assert [st.add(), st.add(), st.add()] == [0, 1, 2]
    with pytest.raises(ValueError, match="all 3 slots are taken"):
        st.add()
    st.remove([0, 2])
    np.testing.assert_array_equal(st.live, [False, True, False])
    np.testing.assert_array_equal(st.slots, [1])
    assert np.isnan(st.x[0]).all() and np.isnan(st.P[2]).all()
    with pytest.raises(ValueError, match="slot 0 holds no target"):
        st.remove(0)
    with pytest.raises(ValueError, match="slot 1 holds no target"):
        st.remove([1, 1])  # all or none: slot 1 is still live
    assert st.live[1]
    mean = np.array([1.0, 2.0, 3.0, 4.0])
    assert st.add(mean) == 0  # the lowest free slot
    np.testing.assert_array_equal(st.x[0], mean)
    np.testing.assert_array_equal(st.P[0], kf.P0)
    P = np.diag([1.0, 2.0, 3.0, 4.0])
    st.set_prior(np.zeros(4), P)
    assert st.add() == 2
    np.testing.assert_array_equal(st.P[2], P)
    st.reserve(5)
    assert st.capacity == 5 and st.add() == 3 and len(st) == 4
    st.set_state(1, mean, P)
    np.testing.assert_array_equal(st.x[1], mean)
    # Adds of several at once are all or none.
    st2 = kestrel.BatchState(kf, 3)
    bad = np.stack([np.eye(4), -np.eye(4)])
    with pytest.raises(ValueError, match="P0"):
        st2.add(np.zeros((2, 4)), bad)
    assert len(st2) == 0


def test_score_and_gate_equal_the_numpy_reference(rng):
    kf = random_kf(rng, 4, 2)
    st = kestrel.BatchState(kf, 5)
    st.add(count=4)
    st.update(rng.normal(size=(5, 2)))
    st.predict()
    zc = rng.normal(size=(5, 3, 2)) * 2
    s = st.score(zc)
    x, P, _ = st.state()
    H, R, d = kf.H, kf.R, kf.d
    zhat, S = st.measure()
    for b in range(4):
        Sb = H @ P[b] @ H.T + R
        np.testing.assert_allclose(S[b], Sb, rtol=1e-12)
        np.testing.assert_allclose(zhat[b], H @ x[b] + d, rtol=1e-12)
        for j in range(3):
            y = zc[b, j] - H @ x[b] - d
            m2 = y @ np.linalg.solve(Sb, y)
            ll = -0.5 * (m2 + np.linalg.slogdet(2 * np.pi * Sb)[1])
            assert s.mahalanobis2[b, j] == pytest.approx(m2, rel=1e-10)
            assert s.loglik[b, j] == pytest.approx(ll, rel=1e-10)
    assert np.isnan(s.mahalanobis2[4]).all()
    one = st.score(zc[:, 0])
    np.testing.assert_array_equal(one.mahalanobis2, s.mahalanobis2[:, 0])
    g = st.gate(zc)
    np.testing.assert_array_equal(g, s.mahalanobis2 <= 9.21034037197618)
    assert not g[4].any()
    np.testing.assert_array_equal(st.gate(zc, threshold=1.0), s.mahalanobis2 <= 1.0)
    # The update's log-likelihood is the score of its measurement.
    zu = zc[:, 1].copy()
    st.update(zu)
    np.testing.assert_allclose(st.loglik[:4], s.loglik[:4, 1], rtol=1e-12)
    np.testing.assert_allclose(st.S[:4], S[:4], rtol=1e-12)


def test_per_target_R(rng):
    kf = kestrel.KalmanFilter.from_toml(CV2D)
    st = kestrel.BatchState(kf, 2)
    st.add(count=2)
    z = np.array([[3.0, 1.0], [3.0, 1.0]])
    Rs = np.stack([kf.R, 4 * kf.R])
    st.update(z, R=Rs)
    x = st.x
    ref = kestrel.BatchState(kf, 1)
    ref.add()
    ref.update(z[:1], R=4 * kf.R)
    np.testing.assert_array_equal(x[1], ref.x[0])
    assert not np.array_equal(x[0], x[1])


@pytest.mark.parametrize(
    "call,exc,msg",
    [
        (lambda st: st.update(np.zeros((3, 3))), ValueError, r"z: expected shape \[3, 2\], got \[3, 3\]"),
        (lambda st: st.update(np.zeros(6)), ValueError, r"z: expected shape \[3, 2\]"),
        (lambda st: st.update(np.zeros((3, 2)), mask=[True, False]), ValueError, r"mask: expected shape \[3\]"),
        (lambda st: st.update(np.zeros((3, 2)), mask=[0.5, 1, 1]), TypeError, "mask: expected booleans"),
        (lambda st: st.update(np.full((3, 2), np.inf)), ValueError, "slot 0: measurement component z0 is infinite"),
        (lambda st: st.update(np.zeros((3, 2)), R=np.eye(3)), ValueError, r"R: expected shape \[3, 2, 2\]"),
        (lambda st: st.predict(dt=[1.0, 2.0]), ValueError, r"dt: expected shape \[3\]"),
        (lambda st: st.predict(dt=-1.0), ValueError, "sampling interval must be finite and positive"),
        (lambda st: st.predict(dt=np.array([1.0, 0.0, 1.0])), ValueError, "slot 1: the sampling interval"),
        (lambda st: st.predict(u=np.zeros(3)), ValueError, r"u: expected shape \[3, 4\]"),
        (lambda st: st.predict(u=np.full((3, 4), np.nan)), ValueError, "control input NaN is not finite"),
        (lambda st: st.add(np.zeros(3)), ValueError, r"x0: expected shape \[4\]"),
        (lambda st: st.add(P0=np.eye(4)), ValueError, "P0: a prior covariance needs its mean"),
        (lambda st: st.add(np.zeros(4), -np.eye(4)), ValueError, "P0"),
        (lambda st: st.add(np.full(4, np.nan)), ValueError, "finite"),
        (lambda st: st.remove(7), ValueError, "slot 7 holds no target"),
        (lambda st: st.remove(-1), ValueError, "slot -1 holds no target"),
        (lambda st: st.remove(1.5), TypeError, "slots: expected whole numbers"),
        (lambda st: st.score(np.zeros((3, 2, 5))), ValueError, r"z: expected shape \[3, 2\] or \[3, m, 2\]"),
        (lambda st: st.update("abc"), TypeError, "z: expected a numeric array"),
        (lambda st: st.set_state(2, np.zeros(4), np.eye(4)), ValueError, "slot 2 holds no target"),
    ],
)
def test_bad_inputs_raise_clear_errors_and_change_nothing(rng, call, exc, msg):
    kf = kestrel.KalmanFilter.from_toml(CV2D)
    st = kestrel.BatchState(kf, 3)
    st.add(count=2)
    st.update(rng.normal(size=(3, 2)))
    before = st.state()
    with pytest.raises(exc, match=msg):
        call(st)
    after = st.state()
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    assert len(st) == 2


def test_bad_construction():
    kf = kestrel.KalmanFilter.from_toml(CV2D)
    with pytest.raises(ValueError, match="capacity between 1 and"):
        kestrel.BatchState(kf, 0)
    with pytest.raises(TypeError, match="capacity: expected a whole number"):
        kestrel.BatchState(kf, 2.5)
    with pytest.raises(ValueError, match='unknown device "tpu"'):
        kestrel.BatchState(kf, 2, device="tpu")
    with pytest.raises(ValueError, match='unknown precision "f16"'):
        kestrel.BatchState(kf, 2, precision="f16")
    with pytest.raises(TypeError, match="model: expected a KalmanFilter"):
        kestrel.BatchState([1, 2], 2)


def test_calls_from_threads_are_serialised(rng):
    # One state shared by threads: every call runs whole, none is lost.
    import threading

    kf = kestrel.KalmanFilter.from_toml(CV2D)
    a = kestrel.BatchState(kf, 9)
    b = kestrel.BatchState(kf, 9)
    for s in (a, b):
        s.add(count=9)

    def work():
        for _ in range(50):
            a.predict()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for _ in range(200):
        b.predict()
    np.testing.assert_array_equal(a.P, b.P)


def test_gpu_tracker_equals_the_cpu_state(rng):
    require_gpu()
    kf = kestrel.KalmanFilter.from_toml(CV2D)
    B, T = 37, 25
    z = rng.normal(size=(B, T, 2)) * 5
    z[rng.random((B, T)) < 0.2] = np.nan
    mask = rng.random((B, T)) > 0.1
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 2e-3)):
        cpu = kestrel.BatchState(kf, B, precision=dtype)
        gpu = kestrel.BatchState(kf, B, device="cuda", precision=dtype)
        assert gpu.device == "cuda:0" and gpu.kinematics == cpu.kinematics
        for s in (cpu, gpu):
            s.add(count=B)
        a = stream(cpu, z.astype(dtype), mask)
        b = stream(gpu, z.astype(dtype), mask)
        for u, v in zip(a, b):
            np.testing.assert_allclose(v, u, rtol=tol, atol=tol)
        dts = np.linspace(0.1, 2.0, B)
        for s in (cpu, gpu):
            s.remove([3, 5])
            s.add(np.arange(4.0))
            s.predict(dt=dts)
        np.testing.assert_allclose(gpu.x, cpu.x, rtol=tol, atol=tol)
        zc = rng.normal(size=(B, 2, 2)).astype(dtype)
        sc, sg = cpu.score(zc), gpu.score(zc)
        np.testing.assert_allclose(sg.mahalanobis2, sc.mahalanobis2, rtol=tol * 10, atol=tol)
        np.testing.assert_allclose(sg.loglik, sc.loglik, rtol=tol * 10, atol=tol)
        with pytest.raises(ValueError, match="not available on a GPU"):
            gpu.set_state(0, np.zeros(4), np.eye(4))
