"""The Kalman family beside the Python peers on the same data."""

import numpy as np
import pytest

import kestrel
from reference import random_model


@pytest.fixture
def case():
    rng = np.random.default_rng(7)
    F, H, Q, R, x0, P0 = random_model(rng, 4, 2)
    z = rng.normal(size=(5, 60, 2)) * 2
    return (F, H, Q, R, x0, P0), z


def test_pykalman_filter_and_smoother(case):
    pykalman = pytest.importorskip("pykalman")
    (F, H, Q, R, x0, P0), z = case
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    f = kf.filter(z)
    s = kf.smooth(z)
    for b in range(z.shape[0]):
        pk = pykalman.KalmanFilter(transition_matrices=F, observation_matrices=H,
                                   transition_covariance=Q, observation_covariance=R,
                                   initial_state_mean=x0, initial_state_covariance=P0)
        fm, fP = pk.filter(z[b])
        sm, sP = pk.smooth(z[b])
        np.testing.assert_allclose(f.mean[b], fm, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(f.cov[b], fP, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(s.mean[b], sm, rtol=1e-7, atol=1e-7)
        np.testing.assert_allclose(s.cov[b], sP, rtol=1e-7, atol=1e-7)
        np.testing.assert_allclose(f.loglik[b].sum(), pk.loglikelihood(z[b]), rtol=1e-9)


def test_simdkalman_filter_and_smoother(case):
    simdkalman = pytest.importorskip("simdkalman")
    (F, H, Q, R, x0, P0), z = case
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0)
    f = kf.filter(z)
    s = kf.smooth(z)
    sk = simdkalman.KalmanFilter(state_transition=F, process_noise=Q,
                                 observation_model=H, observation_noise=R)
    r = sk.compute(z, 0, initial_value=x0, initial_covariance=P0,
                   filtered=True, smoothed=True, log_likelihood=True)
    np.testing.assert_allclose(f.mean, r.filtered.states.mean, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(f.cov, r.filtered.states.cov, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(s.mean, r.smoothed.states.mean, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(s.cov, r.smoothed.states.cov, rtol=1e-7, atol=1e-7)
    # simdkalman leaves out the constant -ny/2 log(2 pi) of every step's Gaussian density.
    const = -0.5 * z.shape[2] * np.log(2 * np.pi) * z.shape[1]
    np.testing.assert_allclose(f.loglik.sum(axis=1), r.log_likelihood + const, rtol=1e-8)


def test_filterpy_step_by_step(case):
    fp = pytest.importorskip("filterpy.kalman")
    (F, H, Q, R, x0, P0), z = case
    f = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0).filter(z[0])
    k = fp.KalmanFilter(dim_x=4, dim_z=2)
    k.F, k.H, k.Q, k.R, k.x, k.P = F, H, Q, R, x0.copy(), P0.copy()
    for t in range(z.shape[1]):
        if t > 0:
            k.predict()
        k.update(z[0, t])
        np.testing.assert_allclose(f.mean[t], k.x, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(f.cov[t], k.P, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(f.loglik[t], k.log_likelihood, rtol=1e-8)
