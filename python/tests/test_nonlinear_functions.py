"""NonlinearFilter.from_functions (a model as NumPy functions over [M, nx] batches)
against the native file-based NonlinearFilter on the same model written as an expression
file: UKF, CKF, EKF (hand-written Jacobians), filter and RTS smoother, with missing steps,
B > 1 and one track; and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import kestrel

# A constant-velocity target [x, vx, y, vy] seen by a radar at (SX, SY): range and
# bearing (an angle, component 1).
DT, SX, SY = 1.0, -20.0, 10.0
QCV = 0.01 * np.kron(np.eye(2), np.array([[DT**3 / 3, DT**2 / 2], [DT**2 / 2, DT]]))
RRB = np.diag([4.0, 1e-3])
X0 = np.array([-30.0, -1.0, 10.5, -0.03])  # moving away along the radar's -x axis: bearings near +-pi
P0 = np.diag([4.0, 0.25, 4.0, 0.25])


def toml_matrix(a):
    return "[" + ", ".join("[" + ", ".join(repr(float(v)) for v in row) + "]" for row in a) + "]"


CV_RB = f"""
[model]
kind = "nonlinear"
states = ["x", "vx", "y", "vy"]
f = ["x + vx * dt", "vx", "y + vy * dt", "vy"]
h = ["sqrt((x - sx)^2 + (y - sy)^2)", "atan2(y - sy, x - sx)"]
Q = {toml_matrix(QCV)}
R = {toml_matrix(RRB)}
constants = {{ dt = {DT}, sx = {SX}, sy = {SY} }}
angles = [1]
[prior]
x0 = {list(map(float, X0))}
P0 = {toml_matrix(P0)}
"""


def cv_f(x):
    return np.stack([x[:, 0] + x[:, 1] * DT, x[:, 1], x[:, 2] + x[:, 3] * DT, x[:, 3]], axis=1)


def cv_fjac(x):
    F = np.array([[1, DT, 0, 0], [0, 1, 0, 0], [0, 0, 1, DT], [0, 0, 0, 1]], float)
    return np.broadcast_to(F, (x.shape[0], 4, 4))


def rb_h(x):
    dx, dy = x[:, 0] - SX, x[:, 2] - SY
    return np.stack([np.hypot(dx, dy), np.arctan2(dy, dx)], axis=1)


def rb_hjac(x):
    dx, dy = x[:, 0] - SX, x[:, 2] - SY
    r2 = dx * dx + dy * dy
    r = np.sqrt(r2)
    H = np.zeros((x.shape[0], 2, 4))
    H[:, 0, 0], H[:, 0, 2] = dx / r, dy / r
    H[:, 1, 0], H[:, 1, 2] = -dy / r2, dx / r2
    return H


def simulate_cv(rng, tracks=3, steps=40):
    lq, lr = np.linalg.cholesky(QCV), np.linalg.cholesky(RRB)
    z = np.empty((tracks, steps, 2))
    for b in range(tracks):
        x = X0 + np.sqrt(np.diag(P0)) * rng.standard_normal(4)
        for k in range(steps):
            if k:
                x = cv_f(x[None])[0] + lq @ rng.standard_normal(4)
            zk = rb_h(x[None])[0] + lr @ rng.standard_normal(2)
            zk[1] = (zk[1] + np.pi) % (2 * np.pi) - np.pi
            z[b, k] = zk
    z[:, 7] = np.nan  # every track misses step 7
    z[1, 12, 0] = np.nan  # one track misses step 12
    return z


# A pendulum (Sarkka 2013, example 5.1): a nonlinear f.
PDT, G = 0.05, 9.81
QP = 0.05 * np.array([[PDT**3 / 3, PDT**2 / 2], [PDT**2 / 2, PDT]])
PENDULUM = f"""
[model]
kind = "nonlinear"
states = ["a", "w"]
f = ["a + w * dt", "w - g * sin(a) * dt"]
h = ["sin(a)", "a * w"]
Q = {toml_matrix(QP)}
R = [[0.05, 0.0], [0.0, 0.1]]
constants = {{ dt = {PDT}, g = {G} }}
[prior]
x0 = [1.2, 0.0]
P0 = [[0.2, 0.0], [0.0, 0.2]]
"""


def pend_f(x):
    return np.stack([x[:, 0] + x[:, 1] * PDT, x[:, 1] - G * np.sin(x[:, 0]) * PDT], axis=1)


def pend_fjac(x):
    J = np.zeros((x.shape[0], 2, 2))
    J[:, 0, 0], J[:, 0, 1] = 1.0, PDT
    J[:, 1, 0], J[:, 1, 1] = -G * np.cos(x[:, 0]) * PDT, 1.0
    return J


def pend_h(x):
    return np.stack([np.sin(x[:, 0]), x[:, 0] * x[:, 1]], axis=1)


def pend_hjac(x):
    J = np.zeros((x.shape[0], 2, 2))
    J[:, 0, 0] = np.cos(x[:, 0])
    J[:, 1, 0], J[:, 1, 1] = x[:, 1], x[:, 0]
    return J


def pend_z(rng, tracks=3, steps=60):
    z = np.empty((tracks, steps, 2))
    for b in range(tracks):
        x = np.array([1.2, 0.0]) + 0.3 * rng.standard_normal(2)
        for k in range(steps):
            if k:
                x = pend_f(x[None])[0] + np.linalg.cholesky(QP) @ rng.standard_normal(2)
            z[b, k] = pend_h(x[None])[0] + np.sqrt([0.05, 0.1]) * rng.standard_normal(2)
    z[:, 0] = np.nan  # step 0 missing: the prior stands
    z[-1, 30:33] = np.nan  # one track misses three steps (all of them when B = 1)
    return z


def model(name):
    if name == "cv-rb":
        fn = kestrel.NonlinearFilter.from_functions(
            cv_f, rb_h, QCV, RRB, X0, P0, angles=[1], jacobians=(cv_fjac, rb_hjac)
        )
        return kestrel.NonlinearFilter.from_toml_str(CV_RB, "cv-rb.toml"), fn, simulate_cv
    fn = kestrel.NonlinearFilter.from_functions(
        pend_f, pend_h, QP, np.diag([0.05, 0.1]), [1.2, 0.0], 0.2 * np.eye(2),
        jacobians=(pend_fjac, pend_hjac),
    )
    return kestrel.NonlinearFilter.from_toml_str(PENDULUM, "pendulum.toml"), fn, pend_z


def close(got, want):
    for name in ("mean", "cov", "loglik"):
        g, w = getattr(got, name), getattr(want, name)
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9, err_msg=name)
    assert got.mode_probs is None


@pytest.mark.parametrize("name", ["cv-rb", "pendulum"])
@pytest.mark.parametrize("kind", ["ukf", "ckf", "ekf"])
def test_functions_equal_the_file_model(rng, name, kind):
    native, fn, sim = model(name)
    z = sim(rng)
    before = z.copy()
    close(fn.filter(z, filter=kind), native.filter(z, filter=kind))
    close(fn.smooth(z, filter=kind), native.smooth(z, filter=kind))
    # One track as [T, ny] is B = 1.
    close(fn.smooth(z[1], filter=kind), native.smooth(z[1], filter=kind))
    np.testing.assert_array_equal(z, before)
    assert np.isfinite(fn.filter(z, filter=kind).mean).all()


def test_ukf_options_and_angles(rng):
    native, fn, sim = model("cv-rb")
    z = sim(rng)
    # The bearings cross +-pi (wrapped innovations and circular means at work).
    bearing = z[..., 1][~np.isnan(z[..., 1])]
    assert bearing.max() > 3.0 and bearing.min() < -3.0
    opts = dict(filter="ukf", alpha=0.5, beta=2.0, kappa=1.0)
    close(fn.smooth(z, **opts), native.smooth(z, **opts))
    # Options given at construction are the defaults of the calls.
    fn2 = kestrel.NonlinearFilter.from_functions(
        cv_f, rb_h, QCV, RRB, X0, P0, angles=[1], **opts
    )
    close(fn2.filter(z), native.filter(z, **opts))
    f32 = fn.filter(z.astype(np.float32))
    assert f32.mean.dtype == np.float32


def test_calls_do_not_grow_with_tracks(rng):
    calls = {"f": 0, "h": 0}

    def f(x):
        calls["f"] += 1
        return pend_f(x)

    def h(x):
        calls["h"] += 1
        return pend_h(x)

    counts = []
    for tracks in (1, 7):
        z = pend_z(rng, tracks=tracks, steps=20)
        z[:, 0] = 0.1
        fn = kestrel.NonlinearFilter.from_functions(
            f, h, QP, np.diag([0.05, 0.1]), [1.2, 0.0], 0.2 * np.eye(2), filter="ckf"
        )
        calls.update(f=0, h=0)
        fn.smooth(z)
        counts.append(dict(calls))
    assert counts[0] == counts[1] == {"f": 19 + 19, "h": 20}


def test_errors():
    R = np.diag([0.05, 0.1])
    args = (QP, R, [1.2, 0.0], 0.2 * np.eye(2))
    z = np.zeros((2, 5, 2))
    with pytest.raises(ValueError, match=r"needs jacobians=\(F_jac, H_jac\)"):
        kestrel.NonlinearFilter.from_functions(pend_f, pend_h, *args, filter="ekf")
    fn = kestrel.NonlinearFilter.from_functions(pend_f, pend_h, *args)
    with pytest.raises(ValueError, match="needs jacobians"):
        fn.filter(z, filter="ekf")
    with pytest.raises(ValueError, match="unknown filter"):
        fn.filter(z, filter="xkf")
    with pytest.raises(ValueError, match="CPU only"):
        fn.filter(z, device="cuda")
    assert fn.filter(z, device="auto").mean.shape == (2, 5, 2)
    with pytest.raises(ValueError, match="the model measures 2"):
        fn.filter(np.zeros((2, 5, 3)))
    with pytest.raises(ValueError, match="rts"):
        fn.smooth(z, method="iterated")
    bad_f = kestrel.NonlinearFilter.from_functions(lambda x: x[:, :1], pend_h, *args)
    with pytest.raises(ValueError, match=r"^f returned an array of shape \(10, 1\), expected \(10, 2\)"):
        bad_f.filter(z)
    bad_h = kestrel.NonlinearFilter.from_functions(pend_f, lambda x: x[:, 0], *args)
    with pytest.raises(ValueError, match=r"^h returned an array of shape \(10,\), expected \(10, 2\)"):
        bad_h.filter(z)
    nan_h = kestrel.NonlinearFilter.from_functions(pend_f, lambda x: np.log(x - 5), *args)
    with pytest.raises(ValueError, match=r"^h returned non-finite values"):
        with np.errstate(invalid="ignore"):
            nan_h.filter(z)
    bad_j = kestrel.NonlinearFilter.from_functions(
        pend_f, pend_h, *args, filter="ekf", jacobians=(pend_fjac, lambda x: np.zeros((1, 2, 2)))
    )
    with pytest.raises(ValueError, match=r"^H_jac returned an array of shape \(1, 2, 2\), expected \(2, 2, 2\)"):
        bad_j.filter(z)
    for i, name, bad in [
        (0, "Q", np.eye(3)),
        (1, "R", np.eye(2)[:1]),
        (2, "x0", np.zeros((2, 1))),
        (3, "P0", np.eye(3)),
    ]:
        a = list(args)
        a[i] = bad
        with pytest.raises(ValueError, match=rf"^{name}: expected"):
            kestrel.NonlinearFilter.from_functions(pend_f, pend_h, *a)
    with pytest.raises(ValueError, match="angles"):
        kestrel.NonlinearFilter.from_functions(pend_f, pend_h, *args, angles=[2])
    with pytest.raises(ValueError, match="alpha"):
        kestrel.NonlinearFilter.from_functions(pend_f, pend_h, *args, alpha=0.0)


def test_caller_arrays_untouched(rng):
    Q, R, x0, p0 = QP.copy(), np.diag([0.05, 0.1]), np.array([1.2, 0.0]), 0.2 * np.eye(2)
    saved = [a.copy() for a in (Q, R, x0, p0)]
    seen = []

    def f(x):
        seen.append(x)
        x[:] = 1e9  # scribbling on its argument changes nothing
        return pend_f(np.full_like(x, 0.5))

    fn = kestrel.NonlinearFilter.from_functions(f, pend_h, Q, R, x0, p0)
    z = pend_z(rng, tracks=2, steps=10)
    zc = z.copy()
    a = fn.smooth(z)
    for got, want in zip((Q, R, x0, p0), saved):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(z, zc)
    Q[0, 0] = R[0, 0] = x0[0] = p0[0, 0] = 7.0  # later changes are not seen
    b = fn.smooth(z)
    np.testing.assert_array_equal(a.mean, b.mean)
    assert seen and np.isfinite(a.mean).all()
    assert repr(fn).startswith("FunctionNonlinearFilter(")
