"""Time-varying models from files (``kind = "time-varying"``: per-step F, Q, H, R, u, d
in an .npz beside the TOML) and the retrodiction of stored filter estimates, from
Python: against a textbook NumPy loop over the per-step matrices, f64 and f32, every
method; bad files; the caller's arrays untouched."""

import os

import numpy as np
import pytest

import kestrel


def spd(rng, n, floor):
    a = rng.uniform(-1, 1, (n, n))
    return 0.3 * a @ a.T + floor * np.eye(n)


def write_model(tmp_path, rng, nx, ny, T, drop=(), name="m.toml"):
    F = np.stack([np.linalg.qr(rng.uniform(-1, 1, (nx, nx)))[0] * 0.95 for _ in range(T)])
    arrays = dict(
        F=F,
        Q=np.stack([spd(rng, nx, 0.01) for _ in range(T)]),
        H=rng.uniform(-1, 1, (T, ny, nx)),
        R=np.stack([spd(rng, ny, 0.1) for _ in range(T)]),
        u=rng.uniform(-1, 1, (T, nx)),
        d=rng.uniform(-1, 1, (T, ny)),
    )
    for k in drop:
        arrays.pop(k)
    np.savez(tmp_path / "steps.npz", **arrays)
    x0 = rng.uniform(-1, 1, nx)
    P0 = spd(rng, nx, 0.1)
    text = '[model]\nkind = "time-varying"\nfile = "steps.npz"\n[prior]\n'
    text += "x0 = [" + ", ".join(repr(float(v)) for v in x0) + "]\n"
    text += "P0 = [" + ", ".join(
        "[" + ", ".join(repr(float(v)) for v in row) + "]" for row in P0) + "]\n"
    (tmp_path / name).write_text(text)
    return tmp_path / name, arrays, x0, P0


def textbook(a, x0, P0, z):
    """The Kalman filter and RTS smoother of one track over per-step matrices."""
    T, ny = z.shape
    nx = x0.shape[0]
    m, P = x0.copy(), P0.copy()
    ms, Ps, lls = np.zeros((T, nx)), np.zeros((T, nx, nx)), np.zeros(T)
    for k in range(T):
        if k > 0:
            m = a["F"][k] @ m + a["u"][k]
            P = a["F"][k] @ P @ a["F"][k].T + a["Q"][k]
        if not np.isnan(z[k]).any():
            H, R = a["H"][k], a["R"][k]
            v = z[k] - H @ m - a["d"][k]
            S = H @ P @ H.T + R
            K = np.linalg.solve(S, H @ P).T
            m = m + K @ v
            P = P - K @ S @ K.T
            lls[k] = -0.5 * (v @ np.linalg.solve(S, v) + np.linalg.slogdet(S)[1]
                             + ny * np.log(2 * np.pi))
        ms[k], Ps[k] = m, P
    sm, sP = ms.copy(), Ps.copy()
    for k in range(T - 2, -1, -1):
        F, Q, u = a["F"][k + 1], a["Q"][k + 1], a["u"][k + 1]
        Pp = F @ Ps[k] @ F.T + Q
        G = np.linalg.solve(Pp, F @ Ps[k]).T
        sm[k] = ms[k] + G @ (sm[k + 1] - F @ ms[k] - u)
        sP[k] = Ps[k] + G @ (sP[k + 1] - Pp) @ G.T
    return ms, Ps, lls, sm, sP


@pytest.mark.parametrize("nx,ny,T", [(2, 1, 1), (4, 2, 30), (3, 2, 45)])
def test_from_toml_filters_and_smooths_as_the_textbook_loop(tmp_path, rng, nx, ny, T):
    path, a, x0, P0 = write_model(tmp_path, rng, nx, ny, T + 5)
    kf = kestrel.KalmanFilter.from_toml(path)
    assert kf.time_varying and kf.nx == nx and kf.ny == ny
    assert kf.F.shape == (T + 5, nx, nx) and np.array_equal(kf.R, a["R"])
    z = rng.normal(size=(3, T, ny)) * 2
    z[rng.random((3, T)) < 0.15] = np.nan
    ref = [textbook(a, x0, P0, z[b]) for b in range(3)]
    for dtype, tol in [(np.float64, 1e-9), (np.float32, 3e-3)]:
        zz = z.astype(dtype)
        for method in ["sequential", "parallel"]:
            f = kf.filter(zz, device="cpu", method=method)
            assert f.mean.dtype == dtype
            for b in range(3):
                np.testing.assert_allclose(f.mean[b], ref[b][0], rtol=tol, atol=tol)
                np.testing.assert_allclose(f.cov[b], ref[b][1], rtol=tol, atol=tol)
                np.testing.assert_allclose(f.loglik[b], ref[b][2], rtol=tol, atol=tol)
        for method in ["rts", "parallel-rts", "two-filter"]:
            s = kf.smooth(zz, device="cpu", method=method)
            for b in range(3):
                np.testing.assert_allclose(s.mean[b], ref[b][3], rtol=tol, atol=tol)
                np.testing.assert_allclose(s.cov[b], ref[b][4], rtol=tol, atol=tol)
        f = kf.filter(zz, device="cpu")
        before = (f.mean.copy(), f.cov.copy())
        for method in ["rts", "parallel"]:
            r = kf.retrodict(f, method=method, device="cpu")
            for b in range(3):
                np.testing.assert_allclose(r.mean[b], ref[b][3], rtol=tol, atol=tol)
                np.testing.assert_allclose(r.cov[b], ref[b][4], rtol=tol, atol=tol)
            r = kestrel.retrodict(kf.model, f.mean, f.cov, means_only=True, method=method,
                                  device="cpu")
            assert r.cov is None and r.mean.dtype == dtype
            for b in range(3):
                np.testing.assert_allclose(r.mean[b], ref[b][3], rtol=tol, atol=tol)
        assert np.array_equal(f.mean, before[0]) and np.array_equal(f.cov, before[1])
        one = kf.retrodict(f.mean[1], f.cov[1], device="cpu")
        np.testing.assert_allclose(one.mean, ref[1][3], rtol=tol, atol=tol)


def test_retrodict_of_a_time_invariant_model_equals_smooth(rng):
    kf = kestrel.KalmanFilter(F=[[1, 1], [0, 1]], H=[[1, 0]], Q=0.1 * np.eye(2), R=[[2.0]])
    z = np.cumsum(rng.normal(size=(4, 60, 1)), axis=1)
    s = kf.smooth(z, device="cpu")
    r = kf.retrodict(kf.filter(z, device="cpu"), method="parallel", device="cpu")
    np.testing.assert_allclose(r.mean, s.mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(r.cov, s.cov, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="cov"):
        kf.retrodict(kf.filter(z, device="cpu", outputs=("mean",)))
    with pytest.raises(ValueError, match="method"):
        kf.retrodict(kf.filter(z, device="cpu"), method="fast")
    with pytest.raises(ValueError, match="nx"):
        kf.retrodict(np.zeros((1, 5, 3)), np.zeros((1, 5, 3, 3)))


def test_bad_files_name_the_file_the_array_and_the_shapes(tmp_path, rng):
    path, _, _, _ = write_model(tmp_path, rng, 2, 1, 10, drop=("R",))
    with pytest.raises(kestrel.ModelError, match=r"steps.npz.*array R is missing"):
        kestrel.KalmanFilter.from_toml(path)
    path, a, _, _ = write_model(tmp_path, rng, 2, 1, 10)
    a["Q"] = a["Q"][:, :1]
    np.savez(tmp_path / "steps.npz", **a)
    with pytest.raises(kestrel.ModelError, match=r"array Q has shape \[10, 1, 2\]"):
        kestrel.KalmanFilter.from_toml(path)
    path, a, _, _ = write_model(tmp_path, rng, 2, 1, 10)
    kf = kestrel.KalmanFilter.from_toml(path)
    with pytest.raises(ValueError, match="10 steps"):
        kf.filter(np.zeros((1, 11, 1)), device="cpu")
    with pytest.raises(TypeError, match="time-varying"):
        kf.to_toml()
    a["H"][3, 0, 1] = np.inf
    np.savez(tmp_path / "steps.npz", **a)
    with pytest.raises(kestrel.ModelError, match=r"array H.*\[3\]\[0\]\[1\].*not finite"):
        kestrel.KalmanFilter.from_toml(os.fspath(path))


def test_loglik_and_simulate_take_time_varying_models(tmp_path, rng):
    path, a, x0, P0 = write_model(tmp_path, rng, 3, 2, 25)
    kf = kestrel.KalmanFilter.from_toml(path)
    sim = kestrel.simulate(kf, 4, 25, seed=3)
    assert sim.truth.shape == (4, 25, 3) and sim.z.shape == (4, 25, 2)
    # The same draws from the file path, and as `kestrel simulate` writes them.
    again = kestrel.simulate(path, 4, 25, seed=3)
    np.testing.assert_array_equal(again.z, sim.z)
    z = sim.z.copy()
    z[1, 7] = np.nan
    before = z.copy()
    for m in (kf, path, kf.model):
        exact = kestrel.loglik(m, z, method="exact")
        for b in range(4):
            want = textbook(a, x0, P0, z[b])[2]
            np.testing.assert_allclose(exact.loglik[b], want, rtol=1e-10, atol=1e-10)
        par = kestrel.loglik(m, z, method="parallel", device="cpu")
        np.testing.assert_allclose(par.loglik, exact.loglik, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(z, before)
    # More steps than the model has: refused in the library's words.
    with pytest.raises(ValueError, match="25"):
        kestrel.simulate(kf, 1, 26)
    with pytest.raises(ValueError, match="25"):
        kestrel.loglik(kf, np.zeros((1, 26, 2)))
    # The per-step API needs a time-invariant model, and says so.
    with pytest.raises(TypeError, match="time-varying"):
        kestrel.BatchState(kf, capacity=2)
