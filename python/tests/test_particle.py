"""The particle filter family from Python: against the command line (`kestrel pf`,
`kestrel simulate`), the Kalman filter on linear-Gaussian models, every resampler, the
model constructors, bad inputs and the caller's arrays."""

import glob
import os
import pickle
import subprocess
import threading

import numpy as np
import pytest

import kestrel
from conftest import require_gpu, ticks_while
from reference import random_model

REPO = os.path.join(os.path.dirname(__file__), "..", "..")
EXAMPLES = os.path.join(REPO, "examples")
NONLINEAR = ["range-only", "bearings-only", "range-bearing", "stochastic-volatility"]
RESAMPLERS = ["systematic", "stratified", "multinomial", "residual", "metropolis",
              "metropolis:64", "rejection", "systematic:grid", "stratified:grid", "subsets",
              "subsets:5"]


def cli():
    """The `kestrel` binary: $KESTREL_BIN, else the newest of target/{release,debug}."""
    env = os.environ.get("KESTREL_BIN")
    if env:
        return env
    found = [p for p in (os.path.join(REPO, "target", d, "kestrel") for d in ("release", "debug"))
             if os.path.exists(p)]
    if not found:
        pytest.skip("no kestrel binary (cargo build --release -p kestrel-cli, or set KESTREL_BIN)")
    return max(found, key=os.path.getmtime)


def run_cli(*args):
    p = subprocess.run([cli(), *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stderr


def cli_message(*args):
    """The command line's error for `args`, as the Python layer words it (no `error: `,
    no `--`)."""
    rc, err = run_cli(*args)
    assert rc == 2, err
    line = err.strip().splitlines()[0]
    assert line.startswith("error: "), err
    return line[len("error: "):].replace("--", "")


def linear(rng, nx=3, ny=2, B=2, T=30, offsets=True):
    """A random linear-Gaussian model (with offsets) and measurements simulated from it."""
    F, H, Q, R, x0, P0 = random_model(rng, nx, ny)
    u = rng.normal(size=nx) if offsets else np.zeros(nx)
    d = rng.normal(size=ny) if offsets else np.zeros(ny)
    kf = kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0, u=u, d=d)
    z = np.empty((B, T, ny))
    for b in range(B):
        x = rng.multivariate_normal(x0, P0)
        for k in range(T):
            if k > 0:
                x = F @ x + u + rng.multivariate_normal(np.zeros(nx), Q)
            z[b, k] = H @ x + d + rng.multivariate_normal(np.zeros(ny), R)
    return kf, z


def example(kind):
    return kestrel.ParticleFilter.from_toml(os.path.join(EXAMPLES, f"{kind}.toml"))


def assert_same(a, b):
    for k in ("mean", "cov", "loglik", "ess"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k), err_msg=k)


# -- against the library through the command line ------------------------------------


@pytest.mark.parametrize("kind,resample,precision", [
    ("range-only", "systematic", "f64"),
    ("bearings-only", "stratified", "f64"),
    ("range-bearing", "residual", "f32"),
    ("stochastic-volatility", "multinomial", "f64"),
    ("stochastic-volatility", "metropolis:5", "f32"),
    ("cv2d", "rejection", "f64"),
])
def test_equals_the_command_line_bit_for_bit(tmp_path, kind, resample, precision):
    model = os.path.join(EXAMPLES, f"{kind}.toml")
    pf = kestrel.ParticleFilter.from_toml(model)
    if pf.kind == "linear-gaussian":
        z = np.random.default_rng(5).normal(size=(3, 25, pf.ny)) * 5
    else:
        _, z = pf.simulate(tracks=3, steps=25, seed=11, missing=0.2)
    assert np.isnan(z).any() or pf.kind == "linear-gaussian"
    zp, out = tmp_path / "z.npy", tmp_path / "out.npz"
    np.save(zp, z)
    rc, err = run_cli("pf", "--model", model, "--input", zp, "--output", out,
                      "--particles", 300, "--resample", resample, "--ess", 0.7, "--seed", 9,
                      "--device", "cpu", "--precision", precision)
    assert rc == 0, err
    ref = np.load(out)
    r = pf.filter(z, 300, resample=resample, ess=0.7, seed=9, device="cpu", precision=precision)
    assert r.device == "cpu" and r.mean.dtype == np.dtype(np.float32 if precision == "f32" else np.float64)
    for k in ("mean", "cov", "loglik", "ess"):
        assert getattr(r, k).shape == ref[k].shape, k
        np.testing.assert_array_equal(getattr(r, k), ref[k], err_msg=k)


@pytest.mark.parametrize("kind", NONLINEAR)
def test_simulate_equals_the_command_line(tmp_path, kind):
    model = os.path.join(EXAMPLES, f"{kind}.toml")
    zp, xp = tmp_path / "z.npy", tmp_path / "x.npy"
    rc, err = run_cli("simulate", "--model", model, "--tracks", 4, "--steps", 30, "--seed", 3,
                      "--missing", 0.25, "--output", zp, "--truth", xp)
    assert rc == 0, err
    x, z = kestrel.ParticleFilter.from_toml(model).simulate(4, 30, seed=3, missing=0.25)
    np.testing.assert_array_equal(z, np.load(zp))
    np.testing.assert_array_equal(x, np.load(xp))
    assert np.isnan(z).any() and not np.isnan(x).any()


def test_same_seed_same_output_other_seed_other_output():
    pf = example("range-only")
    _, z = pf.simulate(3, 40, seed=2)
    a = pf.filter(z, 500, seed=4, device="cpu")
    b = pf.filter(z, 500, seed=4, device="cpu")
    assert_same(a, b)
    c = pf.filter(z, 500, seed=5, device="cpu")
    assert not np.array_equal(a.mean, c.mean)
    # Track b's draws depend on b only: a track filtered alone, as track 0, is track 0.
    alone = pf.filter(z[0], 500, seed=4, device="cpu")
    assert alone.mean.shape == (40, 4) and alone.loglik.shape == (40,)
    np.testing.assert_array_equal(alone.mean, a.mean[0])
    np.testing.assert_array_equal(alone.ess, a.ess[0])


# -- statistics: the linear-Gaussian case has an exact answer --------------------------


def test_linear_gaussian_mean_is_close_to_the_kalman_filter(rng):
    kf, z = linear(rng)
    z[0, 5] = np.nan
    k = kf.filter(z, device="cpu")
    pf = kestrel.ParticleFilter.from_kalman(kf)
    assert pf.kind == "linear-gaussian" and (pf.nx, pf.ny) == (3, 2)
    r = pf.filter(z, 20000, seed=1, device="cpu")
    # The Monte Carlo error of a weighted mean is about sqrt(P / ESS) (Doucet & Johansen
    # 2011, eq. 49 with ESS for N). Every ESS here is at least 500, so one entry errs by
    # at most about sqrt(1 / 500) = 0.045 sqrt(P); 0.25 sqrt(P) is 5.5 such errors for
    # the worst of the 180 entries (20 seeds measured: at most 0.10 sqrt(P)).
    assert r.ess.min() >= 500
    sd = np.sqrt(np.diagonal(k.cov, axis1=2, axis2=3))
    assert np.max(np.abs(r.mean - k.mean) / sd) < 0.25
    # A variance from ESS >= 500 effective draws has relative error about
    # sqrt(2 / ESS) = 0.063; 0.35 is 5.5 of those (measured: at most 0.134).
    rel = np.diagonal(r.cov, axis1=2, axis2=3) / np.diagonal(k.cov, axis1=2, axis2=3) - 1
    assert np.max(np.abs(rel)) < 0.35
    # The log-likelihood estimate is unbiased in p, its log has a spread of about 0.14
    # over these 60 steps (20 seeds); 1.0 is 7 of those. A missing step adds 0.
    assert abs(r.total_loglik - float(k.loglik.sum())) < 1.0
    assert r.loglik[0, 5] == 0.0 and k.loglik[0, 5] == 0.0
    # A wrong model is far off: the check can fail.
    other = kestrel.ParticleFilter.from_kalman(
        kestrel.KalmanFilter(kf.F, kf.H, kf.Q, kf.R, x0=kf.x0, P0=kf.P0))
    off = other.filter(z, 20000, seed=1, device="cpu")
    assert np.max(np.abs(off.mean - k.mean) / sd) > 1.0


@pytest.mark.parametrize("resample", RESAMPLERS)
def test_every_resampler_runs_and_tracks_the_kalman_filter(rng, resample):
    kf, z = linear(rng, nx=2, ny=1, B=2, T=20)
    k = kf.filter(z, device="cpu")
    pf = kestrel.ParticleFilter.from_kalman(kf.model)
    r = pf.filter(z, 4000, resample=resample, ess=1.0, seed=3, device="cpu")
    again = pf.filter(z, 4000, resample=resample, ess=1.0, seed=3, device="cpu")
    assert_same(r, again)
    assert np.all((r.ess >= 1) & (r.ess <= 4000 * (1 + 1e-9)))
    # The Monte Carlo error of a weighted mean is about sqrt(P / ESS); the smallest ESS
    # here is at least 150 (one informative step), so an entry errs by at most about
    # sqrt(1 / 150) = 0.08 sqrt(P); 0.5 sqrt(P) is 6 of those (20 seeds measured, every
    # scheme: at most 0.27). Total log-likelihood: spread 0.14 to 0.24 over 20 seeds,
    # 1.5 is 6 of the widest.
    assert r.ess.min() >= 150
    sd = np.sqrt(np.diagonal(k.cov, axis1=2, axis2=3))
    assert np.max(np.abs(r.mean - k.mean) / sd) < 0.5
    assert abs(r.total_loglik - float(k.loglik.sum())) < 1.5


def test_ess_threshold_decides_when_to_resample(rng):
    kf, z = linear(rng, nx=2, ny=1, B=1, T=15)
    pf = kestrel.ParticleFilter.from_kalman(kf)
    never = pf.filter(z, 2000, ess=0.0, seed=1, device="cpu")
    always = pf.filter(z, 2000, ess=1.0, seed=1, device="cpu")
    # Without resampling the weights only multiply: they degenerate (Doucet & Johansen
    # 2011, section 3.4), and resampling every step keeps them fresh.
    assert never.ess[0, -1] < 0.05 * 2000 < always.ess[0, -1]
    assert always.ess[0, -1] > 10 * never.ess[0, -1]
    # Step 0 weighs the same prior draws either way.
    assert never.ess[0, 0] == always.ess[0, 0]


def test_keep_particles_returns_the_last_cloud_and_its_weights():
    pf = example("range-bearing")
    _, z = pf.simulate(2, 20, seed=8)
    r = pf.filter(z, 1000, seed=2, device="cpu", keep_particles=True)
    plain = pf.filter(z, 1000, seed=2, device="cpu")
    assert_same(r, plain)
    assert plain.particles is None and plain.weights is None
    assert r.particles.shape == (2, 1000, 4) and r.weights.shape == (2, 1000)
    np.testing.assert_allclose(r.weights.sum(axis=1), 1.0, rtol=1e-12)
    m = np.einsum("bn,bnx->bx", r.weights, r.particles)
    np.testing.assert_allclose(m, r.mean[:, -1], rtol=1e-9, atol=1e-9)
    d = r.particles - m[:, None]
    c = np.einsum("bn,bnx,bny->bxy", r.weights, d, d)
    np.testing.assert_allclose(c, r.cov[:, -1], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(r.ess[:, -1], 1 / (r.weights ** 2).sum(axis=1), rtol=1e-9)


# -- models ----------------------------------------------------------------------------


def test_keyword_constructors_equal_the_model_files():
    made = {
        "range-only": kestrel.ParticleFilter.range_only(
            sensors=[[0.0, 0.0], [150.0, 40.0]], r=1.0, q=0.05, dt=1.0,
            x0=[20.0, 1.0, 100.0, -0.3], P0=np.diag([25.0, 0.25, 25.0, 0.25])),
        "bearings-only": kestrel.ParticleFilter.bearings_only(
            sensors=np.array([[0, 0], [100, 0]]), r=1e-4, q=0.01, x0=[50.0, 0.5, 80.0, 0.0], p0=1),
        "range-bearing": kestrel.ParticleFilter.range_bearing(
            radar=[0, 0], r_range=4.0, r_bearing=1e-4, q=0.05,
            x0=[200.0, -1.0, 150.0, 0.5], P0=np.diag([25.0, 0.25, 25.0, 0.25])),
        "stochastic-volatility": kestrel.ParticleFilter.stochastic_volatility(
            mu=-1.0, phi=0.9, sigma=0.5),
    }
    for kind, pf in made.items():
        ref = example(kind)
        assert pf.kind == ref.kind == kind and (pf.nx, pf.ny) == (ref.nx, ref.ny)
        _, z = ref.simulate(2, 15, seed=1)
        x2, z2 = pf.simulate(2, 15, seed=1)
        np.testing.assert_array_equal(z2, z)
        assert_same(pf.filter(z, 200, device="cpu"), ref.filter(z, 200, device="cpu"))
    # A different parameter is a different model.
    moved = kestrel.ParticleFilter.range_only(
        sensors=[[0.0, 0.0], [150.0, 41.0]], r=1.0, q=0.05,
        x0=[20.0, 1.0, 100.0, -0.3], P0=np.diag([25.0, 0.25, 25.0, 0.25]))
    _, z = made["range-only"].simulate(1, 10)
    assert not np.array_equal(moved.filter(z, 200, device="cpu").mean,
                              made["range-only"].filter(z, 200, device="cpu").mean)


@pytest.mark.parametrize("make,msg", [
    (lambda: kestrel.ParticleFilter.stochastic_volatility(mu=0, phi=1.5, sigma=1),
     "phi: must be in (-1, 1) (a stationary process), got 1.5"),
    (lambda: kestrel.ParticleFilter.stochastic_volatility(mu=0, phi=0.5, sigma=0),
     "sigma: must be positive, got 0"),
    (lambda: kestrel.ParticleFilter.range_only(sensors=[[0, 0]], r=-1, q=0.1, x0=[0] * 4, p0=1),
     "r: must be positive, got -1"),
    (lambda: kestrel.ParticleFilter.range_only(sensors=[[0, 0, 1]], r=1, q=0.1, x0=[0] * 4, p0=1),
     "sensors[0]: a position has 2 coordinates, got 3"),
    (lambda: kestrel.ParticleFilter.bearings_only(sensors=[[0, 0]], r=1, q=0.1, x0=[0] * 3, p0=1),
     'x0: has 3 entries, the state of kind = "bearings-only" has 4'),
    (lambda: kestrel.ParticleFilter.range_bearing(r_range=1, r_bearing=1, q=0.1, x0=[0] * 4,
                                                  P0=-np.eye(4)),
     "P0: is not positive semi-definite"),
    (lambda: kestrel.ParticleFilter.range_bearing(r_range=1, r_bearing=1, q=-0.1, x0=[0] * 4, p0=1),
     "q: must be non-negative, got -0.1"),
])
def test_bad_model_parameters_raise_model_errors(make, msg):
    with pytest.raises(kestrel.ModelError) as e:
        make()
    assert msg in str(e.value)


def test_model_files(tmp_path):
    for p in glob.glob(os.path.join(EXAMPLES, "*.toml")):
        try:
            pf = kestrel.ParticleFilter.from_toml(p)
        except kestrel.ModelError as e:
            assert os.path.basename(p) in str(e), str(e)
            continue
        assert pf.nx >= 1 and pf.ny >= 1
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nkind = "range-only"\nq = 0.1\nr = 1.0\nsensors = [[0, 0]]\nwhat = 3\n'
                   '[prior]\nx0 = [0, 0, 0, 0]\np0 = 1\n')
    with pytest.raises(kestrel.ModelError, match=r"bad\.toml.*what does not apply"):
        kestrel.ParticleFilter.from_toml(bad)
    bad.write_text('[model]\nkind = "nope"\n')
    with pytest.raises(kestrel.ModelError, match='unknown model kind "nope"'):
        kestrel.ParticleFilter.from_toml(bad)
    with pytest.raises(OSError, match="missing.toml"):
        kestrel.ParticleFilter.from_toml(tmp_path / "missing.toml")
    with pytest.raises(TypeError, match="KalmanFilter"):
        kestrel.ParticleFilter.from_kalman("cv")


def test_pickle_round_trip(rng):
    kf, z = linear(rng, B=1, T=10)
    for pf in (example("range-only"), example("stochastic-volatility"),
               kestrel.ParticleFilter.from_kalman(kf)):
        back = pickle.loads(pickle.dumps(pf))
        assert back.kind == pf.kind
        zz = pf.simulate(2, 10, seed=1)[1]
        assert_same(back.filter(zz, 100, device="cpu"), pf.filter(zz, 100, device="cpu"))


def test_custom_model_needs_a_gpu(tmp_path):
    (tmp_path / "m.cu").write_text("// a model\n")
    (tmp_path / "m.toml").write_text('[model]\nkind = "custom"\nsource = "m.cu"\nnx = 1\nny = 1\n'
                                     '[prior]\nx0 = [0.0]\np0 = 1.0\n')
    pf = kestrel.ParticleFilter.from_toml(tmp_path / "m.toml")
    assert pf.kind == "custom" and (pf.nx, pf.ny) == (1, 1)
    with pytest.raises(ValueError, match=r'GPU only.*run it with device="cuda"'):
        pf.filter(np.zeros((1, 3, 1)), 10, device="cpu")


# -- bad inputs --------------------------------------------------------------------------


def test_option_errors_are_the_command_lines(tmp_path):
    pf = example("range-only")
    _, z = pf.simulate(2, 10, seed=1)
    zp = tmp_path / "z.npy"
    np.save(zp, z)
    base = ["pf", "--model", os.path.join(EXAMPLES, "range-only.toml"), "--input", zp,
            "--output", tmp_path / "o.npz", "--device", "cpu"]
    cases = [
        (dict(particles=0), ["--particles", 0]),
        (dict(particles=10, resample="foo"), ["--particles", 10, "--resample", "foo"]),
        (dict(particles=10, resample="metropolis:0"), ["--particles", 10, "--resample", "metropolis:0"]),
        (dict(particles=10, ess=-1.0), ["--particles", 10, "--ess=-1"]),
        (dict(particles=10, ess=float("nan")), ["--particles", 10, "--ess", "nan"]),
        (dict(particles=10, ess=float("inf")), ["--particles", 10, "--ess", "inf"]),
    ]
    for kw, args in cases:
        want = cli_message(*base, *args)
        before = z.copy()
        with pytest.raises(ValueError) as e:
            pf.filter(z, device="cpu", **kw)
        assert str(e.value) == want, (kw, want)
        np.testing.assert_array_equal(z, before)
        assert not (tmp_path / "o.npz").exists()
    # The measurement size: the command line names its file, Python the argument.
    np.save(zp, np.zeros((2, 10, 3)))
    want = cli_message(*base, "--particles", 10)
    with pytest.raises(ValueError) as e:
        pf.filter(np.zeros((2, 10, 3)), 10)
    assert "measurements have 3 components" in want and "the model measures 2" in want
    assert str(e.value) == "z: measurements have 3 components, the model measures 2"


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(particles=-3), ValueError, "particles must be at least 1 (got -3)"),
    (dict(particles=2.5), TypeError, "particles: expected a whole number"),
    (dict(particles=True), TypeError, "particles: expected a whole number"),
    (dict(particles=10, resample=3), TypeError, "resample: expected a string"),
    (dict(particles=10, ess="half"), TypeError, "ess: expected a number"),
    (dict(particles=10, seed=-1), ValueError, "seed: must be from 0 to 2^64 - 1 (got -1)"),
    (dict(particles=10, device="gpu9"), ValueError, 'unknown device "gpu9"'),
    (dict(particles=10, precision="f16"), ValueError, 'unknown precision "f16"'),
])
def test_bad_arguments(kw, exc, msg):
    pf = example("range-only")
    z = np.ones((2, 5, 2))
    with pytest.raises(exc) as e:
        pf.filter(z, **kw)
    assert msg in str(e.value)
    assert np.array_equal(z, np.ones((2, 5, 2)))


def test_bad_measurements():
    pf = example("range-only")
    with pytest.raises(ValueError, match=r"z: expected measurements \[B, T, ny\]"):
        pf.filter(np.zeros((1, 2, 3, 2)), 10)
    with pytest.raises(ValueError, match=r"z: one track's measurements are \[T, ny\] with ny = 2"):
        pf.filter(np.zeros((5, 3)), 10)
    with pytest.raises(ValueError, match=r"z: no measurements \(0 tracks x 5 steps\)"):
        pf.filter(np.zeros((0, 5, 2)), 10)
    with pytest.raises(ValueError, match="non-finite|infinite|inf"):
        pf.filter(np.full((1, 5, 2), np.inf), 10, device="cpu")
    with pytest.raises(TypeError, match="z: expected a numeric array"):
        pf.filter(np.array([["a", "b"]]), 10)
    # A measurement impossible under the model: the library's message, naming track and step.
    sv = example("stochastic-volatility")
    z = np.zeros((2, 4, 1))
    z[1, 2] = 1e200
    with pytest.raises(ValueError, match="track 1, step 2: every particle has likelihood zero"):
        sv.filter(z, 50, device="cpu")


def test_the_callers_arrays_are_untouched(rng):
    pf = example("bearings-only")
    _, z = pf.simulate(3, 20, seed=4, missing=0.3)
    # Fortran order and float32: converted on the way in, never written.
    for a in (np.asfortranarray(z), z.astype(np.float32), z):
        before = a.copy()
        r = pf.filter(a, 200, device="cpu")
        assert r.mean.dtype == a.dtype
        np.testing.assert_array_equal(a, before)
        assert a.flags.writeable
    ref = pf.filter(z, 200, device="cpu")
    assert_same(pf.filter(np.asfortranarray(z), 200, device="cpu"), ref)
    assert_same(pf.filter(z.tolist(), 200, device="cpu"), ref)


# -- threads, the GIL, progress -----------------------------------------------------------


def test_the_gil_is_released_and_threads_agree():
    pf = example("range-only")
    _, z = pf.simulate(4, 100, seed=1)
    # A job long enough to see ticks in (machines of many cores are fast).
    n = 20000
    while True:
        r, secs, during = ticks_while(lambda: pf.filter(z, n, device="cpu"))
        if secs > 0.1 or n >= 1_280_000:
            break
        n *= 4
    assert secs > 0.1 and during >= 10, (secs, during)
    out = [None, None]

    def work(i):
        out[i] = pf.filter(z, n, device="cpu")

    ths = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    assert_same(out[0], r)
    assert_same(out[1], r)


@pytest.mark.parametrize("tracks,particles", [(6, 2000), (1, 60000)])
def test_progress_bar_only_when_asked_and_the_same_numbers(capfd, tracks, particles):
    # Many tracks run side by side, one track of many particles on a crew of threads:
    # both paths count their particles on the bar without changing a draw.
    pf = example("range-only")
    _, z = pf.simulate(tracks, 30, seed=2)
    quiet = pf.filter(z, particles, device="cpu")
    assert capfd.readouterr().err == ""
    loud = pf.filter(z, particles, device="cpu", progress=True)
    err = capfd.readouterr().err
    total = tracks * 30 * particles
    assert f"{total}/{total} particle-steps" in err and "100%" in err
    assert_same(loud, quiet)


# -- the GPU -------------------------------------------------------------------------------


def test_gpu_agrees_with_the_cpu(rng):
    require_gpu()
    kf, z = linear(rng, nx=3, ny=2, B=4, T=30)
    pf = kestrel.ParticleFilter.from_kalman(kf)
    cpu = pf.filter(z, 20000, seed=1, device="cpu")
    gpu = pf.filter(z, 20000, seed=1, device="cuda", precision="f64")
    assert gpu.device == "cuda:0" and gpu.mean.dtype == np.float64
    assert_same(gpu, pf.filter(z, 20000, seed=1, device="cuda", precision="f64"))
    # The same draws; the sums in another order, so a resampling position may move and
    # a filter take its own (equally valid) path: statistically close, as against the
    # Kalman filter above.
    k = kf.filter(z)
    sd = np.sqrt(np.diagonal(k.cov, axis1=2, axis2=3))
    assert np.max(np.abs(gpu.mean - cpu.mean) / sd) < 0.35
    f32 = pf.filter(z.astype(np.float32), 20000, seed=1, device="cuda")
    assert f32.mean.dtype == np.float32
    assert np.max(np.abs(f32.mean - k.mean) / sd) < 0.35


def test_custom_model_on_the_gpu(tmp_path):
    require_gpu()
    # The stochastic volatility model as CUDA C++: the same kind, so the same law.
    (tmp_path / "sv.cu").write_text(
        "__device__ void pf_prior(real_t* x, PfNormals& noise) {\n"
        "  x[0] = -1.0 + 0.5 / sqrt(1.0 - 0.81) * noise.draw(); }\n"
        "__device__ void pf_propagate(unsigned k, real_t* x, PfNormals& noise) {\n"
        "  x[0] = -1.0 + 0.9 * (x[0] + 1.0) + 0.5 * noise.draw(); }\n"
        "__device__ real_t pf_loglik(unsigned k, const real_t* x, const real_t* z) {\n"
        "  return -0.9189385332046727 - 0.5 * (x[0] + z[0] * z[0] * exp(-x[0])); }\n")
    (tmp_path / "sv.toml").write_text('[model]\nkind = "custom"\nsource = "sv.cu"\nnx = 1\nny = 1\n'
                                      '[prior]\nx0 = [0.0]\np0 = 1.0\n')
    custom = kestrel.ParticleFilter.from_toml(tmp_path / "sv.toml")
    sv = example("stochastic-volatility")
    _, z = sv.simulate(4, 50, seed=3)
    a = custom.filter(z, 20000, seed=2, device="cuda", precision="f64")
    b = sv.filter(z, 20000, seed=2, device="cpu")
    assert a.device == "cuda:0"
    assert abs(a.total_loglik - b.total_loglik) < 1.0
    np.testing.assert_allclose(a.mean, b.mean, atol=0.15)


def test_grid_selection_equals_the_search_and_bad_names_say_so(rng):
    kf, z = linear(rng, nx=2, ny=1, B=2, T=15)
    pf = kestrel.ParticleFilter.from_kalman(kf.model)
    for grid, search in (("systematic:grid", "systematic"), ("stratified:grid", "stratified")):
        a = pf.filter(z, 3000, resample=grid, ess=1.0, seed=2, device="cpu")
        b = pf.filter(z, 3000, resample=search, ess=1.0, seed=2, device="cpu")
        assert_same(a, b)
    for bad in ("subsets:0", "subsets:x", "grid"):
        with pytest.raises(ValueError, match=bad):
            pf.filter(z, 100, resample=bad, device="cpu")


def test_gpu_new_resamplers_agree_with_the_cpu(rng):
    require_gpu()
    kf, z = linear(rng, nx=3, ny=2, B=4, T=30)
    pf = kestrel.ParticleFilter.from_kalman(kf)
    k = kf.filter(z)
    sd = np.sqrt(np.diagonal(k.cov, axis1=2, axis2=3))
    for resample in ("multinomial", "systematic:grid", "stratified:grid", "subsets:32"):
        cpu = pf.filter(z, 20000, resample=resample, seed=1, device="cpu")
        gpu = pf.filter(z, 20000, resample=resample, seed=1, device="cuda", precision="f64")
        assert gpu.device == "cuda:0"
        assert np.max(np.abs(gpu.mean - cpu.mean) / sd) < 0.35, resample
