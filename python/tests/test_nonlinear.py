"""kestrel.NonlinearFilter against NumPy references of the textbook equations, FilterPy's
UnscentedKalmanFilter (fresh sigma points at the update, kestrel's convention) and
IMMEstimator (their conventions made to meet at step 0), and bad inputs."""

from __future__ import annotations

import os

import numpy as np
import pytest

import kestrel

DT, G = 0.01, 9.81
Q = 0.01 * np.array([[DT**3 / 3, DT**2 / 2], [DT**2 / 2, DT]])
PENDULUM = f"""
[model]
kind = "nonlinear"
states = ["a", "w"]
f = ["a + w * dt", "w - g * sin(a) * dt"]
h = ["sin(a)"]
Q = [[{float(Q[0, 0])!r}, {float(Q[0, 1])!r}], [{float(Q[1, 0])!r}, {float(Q[1, 1])!r}]]
R = [[0.1]]
constants = {{ dt = {DT}, g = {G} }}
[prior]
x0 = [1.6, 0.0]
P0 = [[0.1, 0.0], [0.0, 0.1]]
"""


def f(x):
    return np.array([x[0] + x[1] * DT, x[1] - G * np.sin(x[0]) * DT])


def fjac(x):
    return np.array([[1.0, DT], [-G * np.cos(x[0]) * DT, 1.0]])


def simulate(rng, tracks=2, steps=120):
    lq = np.linalg.cholesky(Q)
    z = np.empty((tracks, steps, 1))
    for b in range(tracks):
        x = np.array([1.5, 0.0])
        for k in range(steps):
            if k:
                x = f(x) + lq @ rng.standard_normal(2)
            z[b, k, 0] = np.sin(x[0]) + np.sqrt(0.1) * rng.standard_normal()
    z[:, 5] = np.nan
    return z


def ekf_reference(z):
    """The EKF and ERTS of Sarkka (2013), alg. 5.4 and 9.3, with kestrel's step 0."""
    m, p = np.array([1.6, 0.0]), 0.1 * np.eye(2)
    ms, ps, ll = [], [], []
    for k, zk in enumerate(z[:, 0]):
        if k:
            F = fjac(m)
            m, p = f(m), F @ p @ F.T + Q
        if np.isnan(zk):
            ll.append(0.0)
        else:
            H = np.array([[np.cos(m[0]), 0.0]])
            s = H @ p @ H.T + 0.1
            kg = p @ H.T / s
            y = zk - np.sin(m[0])
            ll.append(float(-0.5 * (np.log(2 * np.pi * s) + y * y / s)[0, 0]))
            m = m + kg[:, 0] * y
            p = p - kg @ s @ kg.T
        ms.append(m)
        ps.append(p)
    sm, sp = list(ms), list(ps)
    for k in range(len(ms) - 2, -1, -1):
        F = fjac(ms[k])
        pp = F @ ps[k] @ F.T + Q
        g = ps[k] @ F.T @ np.linalg.inv(pp)
        sm[k] = ms[k] + g @ (sm[k + 1] - f(ms[k]))
        sp[k] = ps[k] + g @ (sp[k + 1] - pp) @ g.T
    return np.array(ms), np.array(ll), np.array(sm), np.array(sp)


def test_ekf_and_erts_match_the_textbook(rng):
    z = simulate(rng)
    before = z.copy()
    nf = kestrel.NonlinearFilter.from_toml_str(PENDULUM, "pendulum.toml")
    out = nf.smooth(z, filter="ekf")
    filt = nf.filter(z)
    for b in range(z.shape[0]):
        ms, ll, sm, sp = ekf_reference(z[b])
        np.testing.assert_allclose(filt.mean[b], ms, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(filt.loglik[b], ll, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out.mean[b], sm, rtol=1e-8, atol=1e-11)
        np.testing.assert_allclose(out.cov[b], sp, rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(z, before)
    assert out.mode_probs is None


def test_ukf_matches_filterpy_with_fresh_sigma_points(rng):
    pytest.importorskip("filterpy")
    from filterpy.kalman import MerweScaledSigmaPoints, UnscentedKalmanFilter

    z = simulate(rng, tracks=1)
    out = kestrel.NonlinearFilter.from_toml_str(PENDULUM).filter(z, filter="ukf")
    pts = MerweScaledSigmaPoints(2, alpha=1.0, beta=0.0, kappa=1.0)
    ukf = UnscentedKalmanFilter(2, 1, DT, hx=lambda x: np.array([np.sin(x[0])]),
                                fx=lambda x, dt: f(x), points=pts)
    ukf.x, ukf.P, ukf.Q, ukf.R = np.array([1.6, 0.0]), 0.1 * np.eye(2), Q, np.array([[0.1]])
    for k, zk in enumerate(z[0]):
        if k:
            ukf.predict()
        if not np.isnan(zk[0]):
            # kestrel draws the update's points afresh from the predicted moments.
            ukf.sigmas_f = pts.sigma_points(ukf.x, ukf.P)
            ukf.update(zk)
            np.testing.assert_allclose(out.loglik[0, k], ukf.log_likelihood, rtol=1e-9)
        np.testing.assert_allclose(out.mean[0, k], ukf.x, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out.cov[0, k], ukf.P, rtol=1e-8, atol=1e-13)


# A two-mode IMM: nearly constant velocity, and a manoeuvre.
with open(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "imm-two-modes.toml")) as _f:
    IMM = _f.read()


def test_imm_matches_filterpy_imm_estimator(rng):
    pytest.importorskip("filterpy")
    from filterpy.kalman import IMMEstimator, KalmanFilter

    z = np.cumsum(rng.standard_normal((1, 40, 1)) * 2.0, axis=1)
    out = kestrel.NonlinearFilter.from_toml_str(IMM).filter(z)
    assert out.mode_probs.shape == (1, 40, 2)
    fs = []
    for fm, q in [([[1, 1], [0, 1]], 0.01), ([[1, 1], [0, 0.9]], 1.0)]:
        kf = KalmanFilter(2, 1)
        kf.F, kf.Q, kf.H, kf.R = np.array(fm, float), q * np.eye(2), np.array([[1.0, 0]]), np.eye(1)
        kf.x, kf.P = np.array([[0.0], [1.0]]), np.diag([5.0, 2.0])
        fs.append(kf)
    imm = IMMEstimator(fs, np.array([0.7, 0.3]), np.array([[0.9, 0.1], [0.2, 0.8]]))
    # Step 0 weighs the modes by `initial` (FilterPy by initial @ M): make them meet.
    imm.cbar = np.array([0.7, 0.3])
    for k in range(40):
        if k:
            imm.predict()
        imm.update(z[0, k])
        np.testing.assert_allclose(out.mode_probs[0, k], imm.mu, rtol=1e-9)
        np.testing.assert_allclose(out.mean[0, k], imm.x[:, 0], rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(out.cov[0, k], imm.P, rtol=1e-8, atol=1e-10)


def test_bad_files_and_arguments():
    with pytest.raises(kestrel.ModelError, match=r"m.toml: model.f\[1\]: column 13: unknown name \"b\""):
        kestrel.NonlinearFilter.from_toml_str(PENDULUM.replace("g * sin(a)", "g * sin(b)"), "m.toml")
    nf = kestrel.NonlinearFilter.from_toml_str(PENDULUM)
    z = np.zeros((1, 4, 1))
    with pytest.raises(ValueError, match="unknown filter"):
        nf.filter(z, filter="xkf")
    with pytest.raises(ValueError, match="the model measures 1"):
        nf.filter(np.zeros((1, 4, 2)))
    with pytest.raises(ValueError, match="rts, iterated or parallel-iterated"):
        nf.smooth(z, method="two-filter")
    # What no device runs is refused by name before a GPU is looked for.
    imm = kestrel.NonlinearFilter.from_toml_str(IMM)
    with pytest.raises(ValueError, match="smoothing an IMM model is not available"):
        imm.smooth(np.zeros((1, 4, 1)), device="cuda")


def test_the_parallel_iterated_smoother_is_the_iterated_smoother(rng):
    z = simulate(rng, tracks=3, steps=200)
    nf = kestrel.NonlinearFilter.from_toml_str(PENDULUM)
    for kind in ("ekf", "ukf"):
        seq = nf.smooth(z, method="iterated", iterations=4, filter=kind)
        par = nf.smooth(z, method="parallel-iterated", iterations=4, filter=kind)
        for name in ("mean", "cov", "loglik"):
            np.testing.assert_allclose(getattr(par, name), getattr(seq, name), rtol=1e-8,
                                       atol=1e-10)
        # One pass is the method's own smoother.
        one = nf.smooth(z, method="parallel-iterated", iterations=1, filter=kind)
        np.testing.assert_array_equal(one.mean, nf.smooth(z, filter=kind).mean)


def test_iterated_smoother_and_precision(rng):
    z = simulate(rng, tracks=2, steps=60)
    nf = kestrel.NonlinearFilter.from_toml_str(PENDULUM)
    one = nf.smooth(z, method="iterated", iterations=1, filter="ukf")
    rts = nf.smooth(z, filter="ukf")
    np.testing.assert_array_equal(one.mean, rts.mean)
    many = nf.smooth(z, method="iterated", iterations=5, filter="ckf")
    assert np.isfinite(many.mean).all()
    f32 = nf.filter(z.astype(np.float32))
    assert f32.mean.dtype == np.float32
    np.testing.assert_allclose(f32.mean, nf.filter(z).mean, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["ekf", "ukf", "ckf", "iekf"])
def test_the_gpu_filters_equal_the_cpu(rng, kind):
    from conftest import require_gpu

    require_gpu()
    z = simulate(rng, tracks=64, steps=50)
    z[3, 7] = np.nan
    nf = kestrel.NonlinearFilter.from_toml_str(PENDULUM)
    cpu = nf.filter(z, filter=kind)
    gpu = nf.filter(z, filter=kind, device="cuda")
    for name in ("mean", "cov", "loglik"):
        np.testing.assert_allclose(getattr(gpu, name), getattr(cpu, name), rtol=1e-9, atol=1e-12)
    g32 = nf.filter(z.astype(np.float32), filter=kind, device="cuda")
    assert g32.mean.dtype == np.float32
    np.testing.assert_allclose(g32.mean, cpu.mean, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("kind", ["ekf", "ukf"])
def test_the_gpu_imm_equals_the_cpu(rng, kind):
    from conftest import require_gpu

    require_gpu()
    z = rng.standard_normal((64, 40, 1)) * 3.0 + np.arange(40)[None, :, None] * 0.5
    z[2, 9] = np.nan
    nf = kestrel.NonlinearFilter.from_toml_str(IMM)
    cpu = nf.filter(z, filter=kind)
    gpu = nf.filter(z, filter=kind, device="cuda")
    for name in ("mean", "cov", "loglik", "mode_probs"):
        np.testing.assert_allclose(getattr(gpu, name), getattr(cpu, name), rtol=1e-9, atol=1e-12)
