"""kestrel.loglik: against the Kalman filter, between its methods, against the command
line (`kestrel loglik`), and on bad inputs."""

import os
import shutil
import subprocess

import numpy as np
import pytest

import kestrel
from conftest import require_gpu
from reference import kalman_filter, random_model

REPO = os.path.join(os.path.dirname(__file__), "..", "..")


def cli_binary():
    """The release CLI (built here when missing), or None where cargo is missing too."""
    exe = os.path.join(REPO, "target", "release", "kestrel")
    if os.path.exists(exe):
        return exe
    if shutil.which("cargo") is None:
        return None
    subprocess.run(["cargo", "build", "--release", "-p", "kestrel-cli"], cwd=REPO, check=True)
    return exe


def make(rng, nx, ny, B=3, T=60, missing=0.1):
    F, H, Q, R, x0, P0 = random_model(rng, nx, ny)
    u, d = 0.1 * rng.normal(size=nx), rng.normal(size=ny)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0, u=u, d=d)
    z = rng.normal(size=(B, T, ny)) * 2
    z[rng.random((B, T)) < missing] = np.nan
    return kf, z


@pytest.mark.parametrize("nx,ny", [(1, 1), (2, 1), (4, 2), (3, 2), (5, 3)])
def test_exact_equals_the_kalman_filters_loglik(rng, nx, ny):
    kf, z = make(rng, nx, ny)
    r = kestrel.loglik(kf, z)
    assert r.loglik.shape == (3, 60) and r.loglik.dtype == np.float64
    assert r.window is None and r.bound is None and r.device == "cpu"
    f = kf.filter(z, device="cpu", outputs="loglik").loglik
    # The same recursion as the batch filter's general path; the batch filter's SIMD
    # lanes (for some sizes) order the sums differently: equal to rounding.
    np.testing.assert_allclose(r.loglik, f, rtol=1e-11, atol=1e-11)
    # And the textbook equations.
    m = kf.model
    _, _, lls = kalman_filter(m.F, m.H, m.Q, m.R, m.x0, m.P0, z[1], m.u, m.d)
    np.testing.assert_allclose(r.loglik[1], lls, rtol=1e-9, atol=1e-9)
    assert np.all(r.loglik[np.isnan(z).any(axis=2)] == 0.0)
    np.testing.assert_allclose(r.total, r.loglik.sum(axis=1))


@pytest.mark.parametrize("scan", ["fastest", "blelloch", "sequential"])
def test_parallel_equals_exact_to_rounding(rng, scan):
    kf, z = make(rng, 4, 2, B=2, T=300)
    ex = kestrel.loglik(kf, z).loglik
    par = kestrel.loglik(kf, z, method="parallel", device="cpu", scan=scan)
    assert par.device == "cpu"
    np.testing.assert_allclose(par.loglik, ex, rtol=1e-8, atol=1e-8)
    assert not np.array_equal(ex, np.zeros_like(ex))


def test_window_converges_to_exact_as_it_grows(rng):
    kf, z = make(rng, 2, 1, B=2, T=200, missing=0.0)
    ex = kestrel.loglik(kf, z).loglik
    errs = []
    for n in (4, 8, 16, 32, 64, 128):
        r = kestrel.loglik(kf, z, method=f"window:{n}")
        assert r.window == n and r.bound is not None
        err = np.max(np.abs(r.loglik - ex))
        # The first n-1 steps start from the model's prior: exact.
        np.testing.assert_allclose(r.loglik[:, : n - 1], ex[:, : n - 1], rtol=1e-9, atol=1e-9)
        # The window's error bound (docs/likelihood.md) holds.
        assert err <= r.bound
        errs.append(err)
    assert all(b < a / 4 for a, b in zip(errs, errs[1:])), errs
    assert errs[0] > 1.0 and errs[-1] < 1e-12, errs
    # A window longer than the series is exact at every step.
    r = kestrel.loglik(kf, z, method="window", window=1000)
    assert r.window == 201
    np.testing.assert_allclose(r.loglik, ex, rtol=1e-9, atol=1e-9)


def test_window_auto_meets_its_tolerance(rng):
    kf, z = make(rng, 2, 1, B=2, T=400, missing=0.0)
    ex = kestrel.loglik(kf, z).loglik
    for tol in (1e-3, 1e-6):
        r = kestrel.loglik(kf, z, method="window", tol=tol)
        assert r.method == f"window:auto:{tol!r}" and r.bound <= tol
        assert np.max(np.abs(r.loglik - ex)) <= tol
    a = kestrel.loglik(kf, z, method="window:auto")
    b = kestrel.loglik(kf, z, method="window")
    np.testing.assert_array_equal(a.loglik, b.loglik)
    assert a.window == b.window and a.bound == b.bound


def test_steady_state_switch_stays_close_to_exact(rng):
    kf, z = make(rng, 4, 2, B=2, T=500, missing=0.0)
    ex = kestrel.loglik(kf, z).loglik
    st = kestrel.loglik(kf, z, steady=1e-12).loglik
    np.testing.assert_allclose(st, ex, rtol=1e-7, atol=1e-7)


def test_one_track_float32_and_array_protocol(rng):
    kf, z = make(rng, 2, 1, B=1, T=50)
    r = kestrel.loglik(kf, z[0])
    assert r.loglik.shape == (50,) and isinstance(r.total, float)
    np.testing.assert_array_equal(np.asarray(r), r.loglik)
    r32 = kestrel.loglik(kf, z.astype(np.float32))
    assert r32.loglik.dtype == np.float32
    np.testing.assert_allclose(r32.loglik[0], r.loglik, rtol=1e-3, atol=1e-3)
    r64 = kestrel.loglik(kf, z.astype(np.float32), precision="f64")
    assert r64.loglik.dtype == np.float64
    assert kestrel.loglik(kf, z.tolist()).loglik.dtype == np.float64


def test_progress_bar_runs_in_chunks_with_the_same_numbers(rng, capfd):
    kf, z = make(rng, 2, 1, B=150, T=40, missing=0.2)
    # exact and parallel run in chunks of tracks: the same bits. The windowed methods
    # run whole (each pattern of missing values gets its taps once per batch); with
    # missing values they are reproducible to rounding only (the window that meets a
    # pattern first runs directly, the later ones through its taps, in thread order).
    for method in ("exact", "parallel", "window:5", "window:auto"):
        a = kestrel.loglik(kf, z, method=method, device="cpu")
        b = kestrel.loglik(kf, z, method=method, device="cpu", progress=True)
        if method.startswith("window"):
            np.testing.assert_allclose(a.loglik, b.loglik, rtol=1e-9, atol=1e-9)
        else:
            np.testing.assert_array_equal(a.loglik, b.loglik)
        assert (a.window, a.bound) == (b.window, b.bound)
    assert "log-likelihoods" in capfd.readouterr().err


@pytest.fixture(scope="module")
def cli():
    exe = cli_binary()
    if exe is None:
        pytest.skip("no kestrel binary and no cargo to build it")
    return exe


@pytest.mark.parametrize(
    "method,extra,precision",
    [
        ("exact", [], "f64"),
        ("exact", ["--steady", "1e-10"], "f64"),
        ("parallel", ["--scan", "blelloch"], "f64"),
        ("window:7", ["--vague", "1e4"], "f64"),
        ("window:auto:1e-5", [], "f64"),
        ("window:6", [], "f32"),
        ("window:6+missing", [], "f64"),
        ("window:6+missing", [], "f32"),
    ],
)
def test_equals_the_command_line(rng, tmp_path, cli, method, extra, precision):
    # With missing values the windowed method's numbers depend, to rounding, on which
    # window meets a pattern of missing values first (run directly, later ones through
    # the pattern's taps): across threads, not reproducible bit for bit. Equal bit for
    # bit without missing values; to rounding with them.
    exact_bits = not method.endswith("+missing")
    method = method.removesuffix("+missing")
    windowed = method.startswith("window")
    kf, z = make(rng, 3, 2, B=4, T=80, missing=0.0 if windowed and exact_bits else 0.1)
    kf.save(tmp_path / "m.toml")
    np.save(tmp_path / "z.npy", z)
    out = tmp_path / "ll.npy"
    p = subprocess.run(
        [cli, "loglik", "--model", str(tmp_path / "m.toml"), "--input", str(tmp_path / "z.npy"),
         "--output", str(out), "--method", method, "--device", "cpu", "--precision", precision,
         *extra],
        capture_output=True, text=True,
    )
    assert p.returncode == 0, p.stderr
    want = np.load(out)
    opts = dict(zip([e.lstrip("-") for e in extra[::2]], extra[1::2]))
    kw = {}
    if "steady" in opts:
        kw["steady"] = float(opts["steady"])
    if "vague" in opts:
        kw["vague"] = float(opts["vague"])
    if "scan" in opts:
        kw["scan"] = opts["scan"]
    got = kestrel.loglik(tmp_path / "m.toml", z, method=method, device="cpu",
                         precision=precision, **kw)
    assert got.loglik.dtype == want.dtype
    if exact_bits:
        np.testing.assert_array_equal(got.loglik, want)
    else:
        tol = 1e-5 if precision == "f32" else 1e-8
        np.testing.assert_allclose(got.loglik, want, rtol=tol, atol=tol)
    # The totals the command line prints.
    total = float(p.stdout.strip().splitlines()[-1].split(",")[1])
    assert got.total.sum() == pytest.approx(total, rel=1e-6)


def test_the_callers_array_is_untouched(rng):
    kf, z = make(rng, 2, 1)
    keep = z.copy()
    kestrel.loglik(kf, z, method="window:3")
    bad = z.copy()
    bad[1, 7, 0] = np.inf
    keep_bad = bad.copy()
    with pytest.raises(ValueError, match="track 1.*step 7|step 7.*track 1"):
        kestrel.loglik(kf, bad)
    np.testing.assert_array_equal(z, keep)
    np.testing.assert_array_equal(bad, keep_bad)


@pytest.mark.parametrize(
    "kw,exc,msg",
    [
        (dict(method="bogus"), ValueError, 'method: method "bogus": expected exact, parallel'),
        (dict(method="window:0"), ValueError, "window length must be at least 1"),
        (dict(method="window:auto:-1"), ValueError, "tolerance must be positive"),
        (dict(method="window", window=0), ValueError, "window length must be at least 1"),
        (dict(method="exact", window=4), ValueError, 'apply to method="window" only'),
        (dict(method="window", window=4, tol=1e-3), ValueError, 'tol applies to window="auto"'),
        (dict(method="window", window=2.5), TypeError, "window: expected a whole number"),
        (dict(method=3), TypeError, "method: expected a string"),
        (dict(vague=0.0, method="window:3"), ValueError, "vague must be finite and positive, got 0"),
        (dict(steady=-1.0), ValueError, "steady must be finite and non-negative, got -1"),
        (dict(steady=1e-9, method="parallel", device="cpu"), ValueError, "steady applies to method"),
        (dict(scan="nope", method="parallel", device="cpu"), ValueError, "scan: "),
        (dict(device="tpu"), ValueError, 'unknown device "tpu"'),
        (dict(precision="f16"), ValueError, 'unknown precision "f16"'),
    ],
)
def test_bad_options_raise_clear_errors(rng, kw, exc, msg):
    kf, z = make(rng, 2, 1, B=2, T=10)
    with pytest.raises(exc, match=msg):
        kestrel.loglik(kf, z, **kw)


def test_bad_measurements_and_models(rng):
    kf, z = make(rng, 2, 2, B=2, T=10)
    with pytest.raises(ValueError, match="z: measurements have 3 components, the model measures 2"):
        kestrel.loglik(kf, np.zeros((2, 10, 3)))
    with pytest.raises(ValueError, match="no measurements"):
        kestrel.loglik(kf, np.zeros((0, 10, 2)))
    with pytest.raises(ValueError, match=r"expected measurements \[B, T, ny\]"):
        kestrel.loglik(kf, np.zeros((1, 2, 3, 2)))
    with pytest.raises(TypeError, match="model: expected a KalmanFilter"):
        kestrel.loglik(42, z)
    with pytest.raises(OSError):
        kestrel.loglik("/nonexistent/model.toml", z)


def test_gpu_methods_agree_with_the_cpu(rng):
    require_gpu()
    kf, z = make(rng, 4, 2, B=8, T=500)
    ex = kestrel.loglik(kf, z).loglik
    par = kestrel.loglik(kf, z, method="parallel", device="cuda", precision="f64")
    assert par.device == "cuda:0"
    np.testing.assert_allclose(par.loglik, ex, rtol=1e-7, atol=1e-7)
    w_cpu = kestrel.loglik(kf, z, method="window:12", device="cpu")
    w_gpu = kestrel.loglik(kf, z, method="window:12", device="cuda", precision="f64")
    np.testing.assert_allclose(w_gpu.loglik, w_cpu.loglik, rtol=1e-9, atol=1e-9)
    # A GPU's default precision for input that is not float: f32.
    w32 = kestrel.loglik(kf, z.astype(np.float32), method="window:12", device="cuda")
    assert w32.loglik.dtype == np.float32
    ints = np.round(np.nan_to_num(z)).astype(np.int32)
    assert kestrel.loglik(kf, ints, method="window:12", device="cuda").loglik.dtype == np.float32
    assert kestrel.loglik(kf, z, method="window:12", device="cuda").loglik.dtype == np.float64
    np.testing.assert_allclose(w32.loglik, w_cpu.loglik, rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="exact sequential filter runs on the CPU"):
        kestrel.loglik(kf, z, method="exact", device="cuda")
