"""kestrel.HiddenMarkovModel against a NumPy forward-backward and Viterbi written here,
both methods, f32 and f64, one track or a batch, categorical and Gaussian; the model
file and the CLI; bad models and observations (the caller's arrays untouched). No peer
HMM package is installed in the test environment (hmmlearn, pomegranate), so the
reference is the textbook recursion below."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import kestrel
from conftest import require_gpu

ROOT = pathlib.Path(__file__).resolve().parents[2]


def dist(rng, *shape):
    v = rng.uniform(0.05, 1.0, size=shape)
    return v / v.sum(axis=-1, keepdims=True)


def emission_np(model, y):
    """p(y_t | x_t = i) [T, K] (1 where y_t is missing)."""
    T = y.shape[0]
    miss = np.isnan(y).any(axis=1)
    if model.kind == "categorical":
        e = np.ones((T, model.states))
        e[~miss] = model.probs[:, y[~miss, 0].astype(int)].T
        return e
    e = np.ones((T, model.states))
    for i in range(model.states):
        d = y - model.means[i]
        c = model.covs[i]
        q = np.einsum("ti,ij,tj->t", d, np.linalg.inv(c), d)
        p = np.exp(-0.5 * q) / np.sqrt((2 * np.pi) ** len(c) * np.linalg.det(c))
        e[~miss, i] = p[~miss]
    return e


def forward_backward(model, y):
    A, e = model.transition, emission_np(model, y)
    T, K = e.shape
    f = np.zeros((T, K))
    ll = np.zeros(T)
    for t in range(T):
        pred = model.initial if t == 0 else f[t - 1] @ A
        w = pred * e[t]
        f[t] = w / w.sum()
        ll[t] = 0.0 if np.isnan(y[t]).any() else np.log(w.sum())
    s = np.zeros((T, K))
    s[-1] = f[-1]
    for t in range(T - 2, -1, -1):
        pred = f[t] @ A
        s[t] = f[t] * (A @ (s[t + 1] / pred))
        s[t] /= s[t].sum()
    return f, s, ll


def viterbi_np(model, y):
    with np.errstate(divide="ignore"):
        la, le, li = np.log(model.transition), np.log(emission_np(model, y)), np.log(model.initial)
    T, K = le.shape
    d = li + le[0]
    back = np.zeros((T, K), dtype=int)
    for t in range(1, T):
        v = d[:, None] + la
        back[t] = np.argmax(v, axis=0)  # the first (smallest) maximising index
        d = v.max(axis=0) + le[t]
    path = np.zeros(T, dtype=int)
    path[-1] = np.argmax(d)
    for t in range(T - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path


def sample(rng, model, B, T, missing=0.1):
    out = []
    for _ in range(B):
        x = rng.choice(model.states, p=model.initial)
        ys = []
        for t in range(T):
            if t:
                x = rng.choice(model.states, p=model.transition[x])
            if model.kind == "categorical":
                ys.append([rng.choice(model.probs.shape[1], p=model.probs[x])])
            else:
                ys.append(rng.multivariate_normal(model.means[x], model.covs[x]))
        out.append(ys)
    y = np.array(out, dtype=float)
    y[rng.uniform(size=y.shape[:2]) < missing] = np.nan
    return y


def categorical(rng, K=3, M=4):
    return kestrel.HiddenMarkovModel(
        dist(rng, K, K), dist(rng, K), kestrel.CategoricalEmission(dist(rng, K, M))
    )


def gaussian(rng, K=3, ny=2):
    g = rng.normal(size=(K, ny, ny))
    covs = g @ g.transpose(0, 2, 1) + 0.5 * np.eye(ny)
    return kestrel.HiddenMarkovModel(
        dist(rng, K, K),
        dist(rng, K),
        {"kind": "gaussian", "means": rng.normal(size=(K, ny)) * 2, "covs": covs},
    )


@pytest.mark.parametrize("make", [categorical, gaussian])
@pytest.mark.parametrize("method", ["sequential", "parallel"])
def test_against_numpy_forward_backward_and_viterbi(rng, make, method):
    for _ in range(3):
        model = make(rng)
        y = sample(rng, model, 4, 60)
        r = model.run(y, method=method)
        assert r.filtered.shape == (4, 60, model.states) and r.path.dtype == np.int64
        for b in range(4):
            f, s, ll = forward_backward(model, y[b])
            np.testing.assert_allclose(r.filtered[b], f, atol=1e-10)
            np.testing.assert_allclose(r.smoothed[b], s, atol=1e-10)
            np.testing.assert_allclose(r.loglik[b], ll, atol=1e-9, rtol=1e-10)
            np.testing.assert_array_equal(r.path[b], viterbi_np(model, y[b]))


def test_methods_precisions_and_one_track(rng):
    model = categorical(rng, 4, 5)
    y = sample(rng, model, 3, 500)
    seq = model.run(y)
    for scan in ["fastest", "blelloch", "hillis-steele", "sengupta:8"]:
        par = model.run(y, method="parallel", scan=scan)
        np.testing.assert_allclose(par.filtered, seq.filtered, atol=1e-10)
        np.testing.assert_allclose(par.smoothed, seq.smoothed, atol=1e-10)
        np.testing.assert_array_equal(par.path, seq.path)
    r32 = model.run(y.astype(np.float32), method="parallel")
    assert r32.filtered.dtype == np.float32
    np.testing.assert_allclose(r32.smoothed, seq.smoothed, atol=1e-4)
    np.testing.assert_array_equal(r32.path, seq.path)
    one = model.run(y[1])
    assert one.filtered.shape == (500, 4) and one.path.shape == (500,)
    np.testing.assert_allclose(one.smoothed, seq.smoothed[1], atol=1e-12)
    np.testing.assert_allclose(model.filter(y), seq.filtered)
    np.testing.assert_allclose(model.smooth(y), seq.smoothed)
    np.testing.assert_allclose(model.loglik(y), seq.loglik)
    np.testing.assert_array_equal(model.viterbi(y), seq.path)
    # Integer codes (no missing values).
    codes = np.nan_to_num(y, nan=0.0).astype(np.int64)
    np.testing.assert_allclose(model.run(codes).filtered, model.run(codes.astype(float)).filtered)


def test_from_toml_equals_the_cli(tmp_path):
    model = kestrel.HiddenMarkovModel.from_toml(ROOT / "examples/hmm-weather.toml")
    assert model.states == 3 and model.kind == "categorical"
    obs = np.load(ROOT / "examples/hmm-weather-obs.npy")
    r = model.run(obs)
    cli = os.environ.get("KESTREL_CLI")
    if not cli:
        pytest.skip("KESTREL_CLI not set")
    out = tmp_path / "o.npz"
    subprocess.run(
        [cli, "hmm", "--device", "cpu", "--model", str(ROOT / "examples/hmm-weather.toml"),
         "--input", str(ROOT / "examples/hmm-weather-obs.npy"), "--output", str(out)],
        check=True, capture_output=True,
    )
    z = np.load(out)
    for k in ["filtered", "smoothed", "loglik", "path"]:
        np.testing.assert_array_equal(z[k], getattr(r, k))


def test_bad_models_and_observations(rng):
    A, p0, P = dist(rng, 2, 2), dist(rng, 2), dist(rng, 2, 3)
    bad = A.copy()
    bad[1, 0] += 0.1
    with pytest.raises(kestrel.ModelError, match="transition row 1"):
        kestrel.HiddenMarkovModel(bad, p0, kestrel.CategoricalEmission(P))
    with pytest.raises(ValueError, match="transition"):
        kestrel.HiddenMarkovModel(np.eye(3), p0, kestrel.CategoricalEmission(P))
    with pytest.raises(kestrel.ModelError, match="initial"):
        kestrel.HiddenMarkovModel(A, [0.5, 0.6], kestrel.CategoricalEmission(P))
    with pytest.raises(kestrel.ModelError, match="covs"):
        kestrel.HiddenMarkovModel(A, p0, kestrel.GaussianEmission([[0.0], [1.0]], [[[1.0]], [[-1.0]]]))
    with pytest.raises(ValueError, match="unknown kind"):
        kestrel.HiddenMarkovModel(A, p0, {"kind": "poisson", "probs": P})
    with pytest.raises(kestrel.ModelError, match="toml"):
        kestrel.HiddenMarkovModel.from_toml_str("[hmm]\ntransition = 1\n", "m.toml")
    model = kestrel.HiddenMarkovModel(A, p0, kestrel.CategoricalEmission(P))
    y = np.array([[[0.0], [1.0], [2.0], [2.5]]])
    keep = y.copy()
    with pytest.raises(ValueError, match="track 0, step 3.*not an integer"):
        model.run(y)
    np.testing.assert_array_equal(y, keep)
    with pytest.raises(ValueError, match="track 1, step 0.*out of range"):
        model.run(np.array([[[0]], [[3]]]))
    with pytest.raises(ValueError, match="2 components"):
        model.run(np.zeros((1, 4, 2)))
    with pytest.raises(ValueError, match="method"):
        model.run(y[:, :3], method="magic")
    with pytest.raises(ValueError, match="scan"):
        model.run(y[:, :3], method="parallel", scan="zigzag")


def test_gpu_equals_cpu(rng):
    require_gpu()
    model = categorical(rng, 4, 6)
    y = sample(rng, model, 50, 400)
    cpu = model.run(y)
    for method in ["sequential", "parallel"]:
        gpu = model.run(y, method=method, device="cuda")
        np.testing.assert_allclose(gpu.smoothed, cpu.smoothed, atol=1e-10)
        np.testing.assert_array_equal(gpu.path, cpu.path)
