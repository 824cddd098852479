"""The Kalman family on the GPU from Python: NumPy inputs run on the device, PyTorch and
CuPy arrays already on the device stay there (outputs poisoned with NaN before the run,
so an unwritten element fails). Skipped without a GPU; failures with
KESTREL_REQUIRE_GPU=1."""

import numpy as np
import pytest

import kestrel
from conftest import require_gpu
from reference import random_model


@pytest.fixture(autouse=True)
def gpu(monkeypatch):
    require_gpu()
    monkeypatch.setenv("KESTREL_POISON", "1")


def case(nx=4, ny=2, B=300, T=50, seed=3):
    rng = np.random.default_rng(seed)
    F, H, Q, R, x0, P0 = random_model(rng, nx, ny)
    z = rng.normal(size=(B, T, ny)) * 2
    z[rng.random((B, T)) < 0.1] = np.nan
    return kestrel.KalmanFilter(F, H, Q, R, x0=x0, P0=P0), z


def host(a):
    if a is None:
        return None
    if hasattr(a, "get"):
        return a.get()
    return a.cpu().numpy()


@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-9), (np.float32, 2e-3)])
def test_numpy_on_the_gpu_equals_the_cpu(smooth, dtype, tol):
    kf, z = case()
    z = z.astype(dtype)
    run = kf.smooth if smooth else kf.filter
    g = run(z, device="cuda")
    c = run(z.astype(np.float64), device="cpu")
    assert g.device == "cuda:0" and g.mean.dtype == dtype
    for k in ("mean", "cov", "loglik"):
        np.testing.assert_allclose(getattr(g, k), getattr(c, k), rtol=tol, atol=tol)


def _libs():
    out = []
    try:
        import torch

        if torch.cuda.is_available():
            out.append("torch")
    except ImportError:
        pass
    try:
        import cupy  # noqa: F401

        out.append("cupy")
    except ImportError:
        pass
    return out


def to_device(lib, a):
    if lib == "torch":
        import torch

        return torch.from_numpy(a).cuda()
    import cupy

    return cupy.asarray(a)


@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-9), (np.float32, 2e-3)])
def test_device_arrays_stay_on_the_device_and_equal_the_cpu(lib, smooth, dtype, tol):
    if lib not in _libs():
        pytest.skip(f"{lib} with CUDA is not installed")
    for nx, ny in [(4, 2), (2, 1), (6, 3)]:
        kf, z = case(nx, ny)
        z = z.astype(dtype)
        zd = to_device(lib, z)
        before = host(zd).copy()
        run = kf.smooth if smooth else kf.filter
        g = run(zd)
        assert type(g.mean).__module__.split(".")[0] == lib
        assert g.device == "cuda:0"
        c = run(z.astype(np.float64), device="cpu")
        for k in ("mean", "cov", "loglik"):
            v = host(getattr(g, k))
            assert v.dtype == dtype
            assert not np.isnan(v).any() or np.isnan(getattr(c, k)).any()
            np.testing.assert_allclose(v, getattr(c, k), rtol=tol, atol=tol)
        np.testing.assert_array_equal(host(zd), before)


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_device_output_selection_and_one_track(lib):
    if lib not in _libs():
        pytest.skip(f"{lib} with CUDA is not installed")
    kf, z = case()
    zd = to_device(lib, z)
    full = kf.filter(z, device="cpu")
    m = kf.filter(zd, outputs=("mean",))
    assert m.cov is None and m.loglik is None
    np.testing.assert_allclose(host(m.mean), full.mean, rtol=1e-9, atol=1e-9)
    d = kf.filter(zd, outputs="diag,loglik")
    np.testing.assert_allclose(host(d.cov), np.diagonal(full.cov, axis1=2, axis2=3),
                               rtol=1e-9, atol=1e-9)
    one = kf.filter(to_device(lib, np.ascontiguousarray(z[5])))
    np.testing.assert_allclose(host(one.mean), full.mean[5], rtol=1e-9, atol=1e-9)
    assert tuple(one.cov.shape) == (z.shape[1], 4, 4)


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_device_bad_inputs(lib):
    if lib not in _libs():
        pytest.skip(f"{lib} with CUDA is not installed")
    kf, z = case()
    z[2, 9, 1] = np.inf
    z[2, 9, 0] = np.nan  # a NaN beside it does not hide it
    z[2, 11, 0] = -np.inf
    z[5, 1, 0] = np.inf
    zd = to_device(lib, z)
    # The first in track, step, component order, found by the kernel that reads them.
    for call in (kf.filter, kf.smooth):
        with pytest.raises(ValueError, match="track 2, step 9: measurement component z1 is infinite"):
            call(zd)
    with pytest.raises(ValueError, match="the model measures 2"):
        kf.filter(to_device(lib, np.zeros((3, 4, 3))))
    with pytest.raises(ValueError, match="unknown output"):
        kf.filter(zd, outputs=("bogus",))
    # After failures the device still works.
    ok = kf.filter(to_device(lib, np.nan_to_num(z, posinf=0.0)))
    assert np.isfinite(host(ok.mean)).all()


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_parallel_methods_from_device_arrays(lib):
    if lib not in _libs():
        pytest.skip(f"{lib} with CUDA is not installed")
    kf, z = case(B=4, T=300)
    zd = to_device(lib, z)
    p = kf.smooth(zd, method="parallel-rts")
    c = kf.smooth(z, device="cpu")
    assert type(p.mean).__module__.split(".")[0] == lib
    np.testing.assert_allclose(host(p.mean), c.mean, rtol=1e-7, atol=1e-7)


FAULT_SCRIPT = """
import numpy as np, kestrel
from kestrel import _kestrel
rng = np.random.default_rng(5)
kf = kestrel.KalmanFilter(np.eye(2) * 0.9, np.eye(2), np.eye(2) * 0.1, np.eye(2), x0=np.zeros(2), P0=np.eye(2))
z = rng.normal(size=(50, 20, 2))
before = kf.filter(z, device="cuda").mean
try:
    _kestrel._provoke_kernel_fault(0)
except RuntimeError as e:
    msg = str(e)
else:
    raise SystemExit("no error from a faulting kernel")
assert "cuda:0" in msg and "kernel fault" in msg and "\\n" not in msg, msg
try:
    kf.filter(z, device="cuda")
except RuntimeError as e:
    later = str(e)
else:
    raise SystemExit("a faulted device took more work")
assert "kernel fault earlier" in later and "cuda:0" in later, later
after = kf.filter(z).mean  # auto: the CPU now
assert np.allclose(after, before, rtol=1e-9, atol=1e-12), "the CPU differs from the GPU"
print("went on:", later)
"""


def test_a_kernel_fault_names_the_device_and_the_process_goes_on():
    # In a process of its own: a fault ends the device for the whole process.
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", FAULT_SCRIPT], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "went on: " in r.stdout and "cuda:0" in r.stdout
