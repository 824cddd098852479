"""kestrel.simulate: reproducible, equal to `kestrel simulate`'s files, and a sample of
the model it was drawn from."""

import os
import subprocess

import numpy as np
import pytest

import kestrel
from reference import random_model
from test_likelihood import cli_binary

REPO = os.path.join(os.path.dirname(__file__), "..", "..")


def model(rng, nx=3, ny=2):
    F, H, Q, R, x0, P0 = random_model(rng, nx, ny)
    u, d = 0.2 * rng.normal(size=nx), rng.normal(size=ny)
    return kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0, u=u, d=d)


def test_same_seed_same_output_and_shapes(rng):
    kf = model(rng)
    a = kestrel.simulate(kf, 4, 30, seed=11, missing=0.2)
    b = kestrel.simulate(kf, 4, 30, seed=11, missing=0.2)
    assert a.truth.shape == (4, 30, 3) and a.z.shape == (4, 30, 2)
    assert a.truth.dtype == np.float64 and a.z.dtype == np.float64
    np.testing.assert_array_equal(a.truth, b.truth)
    np.testing.assert_array_equal(a.z, b.z)
    c = kestrel.simulate(kf, 4, 30, seed=12, missing=0.2)
    assert not np.array_equal(a.truth, c.truth)
    truth, z = a  # unpacks
    assert truth is a.truth and z is a.z


def test_each_track_has_its_own_stream(rng):
    # Track b is seeded by (seed, b): a smaller batch is a prefix of a larger one.
    kf = model(rng)
    small = kestrel.simulate(kf, 3, 25, seed=5, missing=0.1)
    big = kestrel.simulate(kf, 40, 25, seed=5, missing=0.1)
    np.testing.assert_array_equal(small.truth, big.truth[:3])
    np.testing.assert_array_equal(small.z, big.z[:3])
    # And a longer run extends a shorter one.
    longer = kestrel.simulate(kf, 3, 40, seed=5, missing=0.1)
    np.testing.assert_array_equal(small.truth, longer.truth[:, :25])


def test_missing_rows_are_all_nan_at_the_asked_rate(rng):
    kf = model(rng)
    s = kestrel.simulate(kf, 200, 100, seed=1, missing=0.3)
    rows = np.isnan(s.z)
    assert np.array_equal(rows.any(axis=2), rows.all(axis=2))
    frac = rows.any(axis=2).mean()
    assert abs(frac - 0.3) < 0.015  # 20,000 Bernoulli draws: sd 0.0032
    assert np.isfinite(s.truth).all()
    assert not np.isnan(kestrel.simulate(kf, 5, 50, seed=1).z).any()


def test_sample_statistics_match_the_model(rng):
    kf = model(rng, nx=2, ny=2)
    F, H, Q, R, x0, P0, u, d = (kf.F, kf.H, kf.Q, kf.R, kf.x0, kf.P0, kf.u, kf.d)
    B, T = 2000, 20
    s = kestrel.simulate(kf, B, T, seed=3)
    x, z = s.truth, s.z
    # x_0 ~ N(x0, P0).
    e0 = x[:, 0] - x0
    assert np.all(np.abs(e0.mean(axis=0)) < 4 * np.sqrt(np.diag(P0) / B))
    np.testing.assert_allclose(np.cov(e0.T), P0, rtol=0.15, atol=0.1 * np.abs(P0).max())
    # w_k = x_k - F x_{k-1} - u ~ N(0, Q), independent of the past.
    w = (x[:, 1:] - x[:, :-1] @ F.T - u).reshape(-1, 2)
    assert np.all(np.abs(w.mean(axis=0)) < 4 * np.sqrt(np.diag(Q) / len(w)))
    np.testing.assert_allclose(np.cov(w.T), Q, rtol=0.05, atol=0.03 * np.abs(Q).max())
    xp = x[:, :-1].reshape(-1, 2)
    c = (w - w.mean(0)).T @ (xp - xp.mean(0)) / len(w)
    assert np.all(np.abs(c) < 5 * np.sqrt(np.outer(np.diag(Q), np.var(xp, axis=0)) / len(w)))
    # v_k = z_k - H x_k - d ~ N(0, R).
    v = (z - x @ H.T - d).reshape(-1, 2)
    assert np.all(np.abs(v.mean(axis=0)) < 4 * np.sqrt(np.diag(R) / len(v)))
    np.testing.assert_allclose(np.cov(v.T), R, rtol=0.05, atol=0.03 * np.abs(R).max())
    # The filter's normalised innovations are chi-square with ny degrees of freedom:
    # -2 loglik - log det(2 pi S) averages ny.
    ll = kestrel.loglik(kf, z[:200]).loglik
    f = kf.filter(z[:200], device="cpu")
    S_last = H @ (F @ f.cov[0, -2] @ F.T + Q) @ H.T + R
    nis = -2 * ll[:, -1] - np.linalg.slogdet(2 * np.pi * S_last)[1]
    assert abs(nis.mean() - 2) < 4 * np.sqrt(2 * 2 / 200)


def test_equals_the_command_line_files(rng, tmp_path):
    exe = cli_binary()
    if exe is None:
        pytest.skip("no kestrel binary and no cargo to build it")
    kf = model(rng)
    kf.save(tmp_path / "m.toml")
    for seed, missing in ((0, 0.0), (987654321, 0.25)):
        z_path, x_path = tmp_path / f"z{seed}.npy", tmp_path / f"x{seed}.npy"
        p = subprocess.run(
            [exe, "simulate", "--model", str(tmp_path / "m.toml"), "--tracks", "5",
             "--steps", "33", "--seed", str(seed), "--missing", str(missing),
             "--output", str(z_path), "--truth", str(x_path)],
            capture_output=True, text=True,
        )
        assert p.returncode == 0, p.stderr
        s = kestrel.simulate(tmp_path / "m.toml", 5, 33, seed=seed, missing=missing)
        np.testing.assert_array_equal(s.truth, np.load(x_path))
        np.testing.assert_array_equal(s.z, np.load(z_path))
    # A builder model file too.
    ex = os.path.join(REPO, "examples", "cv2d-builder.toml")
    p = subprocess.run(
        [exe, "simulate", "--model", ex, "--tracks", "2", "--steps", "10", "--seed", "3",
         "--output", str(tmp_path / "c.npy"), "--truth", str(tmp_path / "cx.npy")],
        capture_output=True, text=True,
    )
    assert p.returncode == 0, p.stderr
    s = kestrel.simulate(kestrel.KalmanFilter.from_toml(ex), 2, 10, seed=3)
    np.testing.assert_array_equal(s.z, np.load(tmp_path / "c.npy"))
    np.testing.assert_array_equal(s.truth, np.load(tmp_path / "cx.npy"))


def test_any_model_form(rng, tmp_path):
    kf = model(rng)
    kf.save(tmp_path / "m.toml")
    a = kestrel.simulate(kf, 2, 5, seed=4)
    for m in (kf.model, str(tmp_path / "m.toml"), tmp_path / "m.toml"):
        b = kestrel.simulate(m, 2, 5, seed=4)
        np.testing.assert_array_equal(a.z, b.z)


@pytest.mark.parametrize(
    "kw,exc,msg",
    [
        (dict(tracks=0), ValueError, r"tracks and steps must be at least 1 \(got 0 and 10\)"),
        (dict(steps=0), ValueError, r"tracks and steps must be at least 1 \(got 3 and 0\)"),
        (dict(missing=1.5), ValueError, r"missing must be a probability in \[0, 1\], got 1.5"),
        (dict(missing=-0.1), ValueError, r"missing must be a probability in \[0, 1\]"),
        (dict(missing=float("nan")), ValueError, r"missing must be a probability"),
        (dict(tracks=2.0), TypeError, "tracks: expected a whole number, got float"),
        (dict(seed=-1), ValueError, r"seed: must be >= 0"),
        (dict(missing="0.1"), TypeError, "missing: expected a number"),
    ],
)
def test_bad_arguments(rng, kw, exc, msg):
    kf = model(rng)
    args = dict(tracks=3, steps=10)
    args.update(kw)
    with pytest.raises(exc, match=msg):
        kestrel.simulate(kf, **args)


def test_an_unstable_model_names_where_it_overflows():
    kf = kestrel.KalmanFilter(F=[[1e30]], H=[[1.0]], Q=[[1.0]], R=[[1.0]], P0=[[1.0]])
    with pytest.raises(ValueError, match=r"track 0.*step|overflows"):
        kestrel.simulate(kf, 2, 50, seed=0)
    with pytest.raises(TypeError, match="model: expected a KalmanFilter"):
        kestrel.simulate(object(), 2, 5)
