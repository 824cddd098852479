"""Array conversion at the boundary: any NumPy array, array-like or DLPack object in,
NumPy arrays (or arrays of the caller's own library) out.

The native module reads C-contiguous float32/float64 NumPy arrays in place and never
writes to them; everything else is converted here, once, into a new array, so the
caller's arrays are never modified.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from . import _kestrel

# DLPack device types (dlpack.h): CPU memory, CUDA device memory, CUDA pinned host
# memory, CUDA managed memory.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


class KestrelWarning(UserWarning):
    """A warning from kestrel's library (for example f32 accuracy on large values)."""


def flush_warnings() -> None:
    """Re-issues the library's warnings of the last call as Python warnings."""
    for w in _kestrel.take_warnings():
        warnings.warn(w, KestrelWarning, stacklevel=3)


class Origin:
    """Where an input array came from, so that outputs go back to the same place.

    ``kind`` is ``"numpy"`` for NumPy and CPU DLPack inputs (outputs are NumPy
    arrays), or the module of a GPU array (``"torch"``, ``"cupy"``, ``"jax"``): outputs
    then come back as arrays of that library on the input's device.
    """

    def __init__(self, kind: str = "numpy", like: Any = None, device_id: int = 0):
        self.kind = kind
        self.like = like
        self.device_id = device_id

    @property
    def on_gpu(self) -> bool:
        return self.kind != "numpy"

    def wrap(self, a: Any) -> Any:
        """An output array in the caller's library (NumPy arrays are returned as is)."""
        if a is None or self.kind == "numpy":
            return a
        if self.kind == "torch":
            import torch

            return torch.from_numpy(a).to(self.like.device)
        if self.kind == "cupy":
            import cupy

            with cupy.cuda.Device(self.device_id):
                return cupy.asarray(a)
        if self.kind == "jax":
            import jax

            devs = getattr(self.like, "devices", None)
            dev = next(iter(devs())) if callable(devs) else None
            return jax.device_put(a, dev)
        return a


def _library_of(x: Any) -> str:
    mod = type(x).__module__.split(".")[0]
    if mod in ("torch", "cupy"):
        return mod
    if mod in ("jax", "jaxlib"):
        return "jax"
    return mod


def to_numpy(x: Any, name: str) -> tuple[np.ndarray, Origin]:
    """Any array-like, NumPy array or DLPack object as a NumPy array (a view where the
    memory is on the host), and where it came from."""
    if isinstance(x, np.ndarray):
        return x, Origin()
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        dev_type, dev_id = x.__dlpack_device__()
        dev_type = int(dev_type)
        if dev_type in (_DL_CPU, _DL_CUDA_HOST):
            try:
                return np.from_dlpack(x), Origin()
            except (TypeError, BufferError, RuntimeError):
                pass
        elif dev_type in (_DL_CUDA, _DL_CUDA_MANAGED):
            return _from_gpu(x, name, int(dev_id))
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: cannot be read as an array: {e}") from None
    if a.dtype == object:
        try:
            a = a.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                f"{name}: expected numbers (None or NaN for a missing value), got {type(x).__name__}"
            ) from None
    return a, Origin()


def _from_gpu(x: Any, name: str, dev_id: int) -> tuple[np.ndarray, Origin]:
    lib = _library_of(x)
    if lib == "torch":
        return x.detach().cpu().numpy(), Origin("torch", x, dev_id)
    if lib == "cupy":
        return x.get(), Origin("cupy", x, dev_id)
    if lib == "jax":
        return np.asarray(x), Origin("jax", x, dev_id)
    raise TypeError(
        f"{name}: a GPU array of {lib} (DLPack device {dev_id}) is not supported; "
        "give a NumPy, PyTorch, CuPy or JAX array"
    )


def as_float(a: np.ndarray, name: str, dtype: Any) -> np.ndarray:
    """``a`` as an aligned, C-contiguous array of ``dtype`` (no copy when it already is
    one; a block handed over by Dask or a buffer can be contiguous but unaligned)."""
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected a numeric array, got dtype {a.dtype}")
    return np.require(a, dtype=dtype, requirements=("C", "A"))


def whole(v: Any, name: str) -> int:
    """``v`` as a non-negative whole number (``TypeError``/``ValueError`` naming ``name``)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name}: expected a whole number, got {type(v).__name__}")
    if v < 0:
        raise ValueError(f"{name}: must be >= 0 (got {int(v)})")
    return int(v)


def precision_dtype(precision: Any, a: np.ndarray | None, device: str) -> np.dtype:
    """The dtype of a run: ``precision`` when given ("f32"/"f64", or a NumPy dtype),
    else the input ``a``'s own float32/float64, else float64 on the CPU and float32 on a
    GPU (the command line's default)."""
    if precision is None:
        if a is not None and a.dtype in (np.float32, np.float64):
            return a.dtype
        return np.dtype(np.float32 if device.startswith("cuda") else np.float64)
    p = str(np.dtype(precision)) if not isinstance(precision, str) else precision
    if p in ("f32", "float32", "single"):
        return np.dtype(np.float32)
    if p in ("f64", "float64", "double"):
        return np.dtype(np.float64)
    raise ValueError(f'precision: unknown precision "{precision}" (expected f32 or f64)')


def matrix(x: Any, name: str, shape: tuple[int, int] | None = None) -> np.ndarray:
    """A float64 matrix (scalars become 1 x 1)."""
    a, _ = to_numpy(x, name)
    a = np.atleast_2d(as_float(a, name, np.float64))
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a matrix, got shape {a.shape}")
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    return np.ascontiguousarray(a)


def vector(x: Any, name: str, n: int | None = None) -> np.ndarray:
    """A float64 vector (a column matrix is flattened)."""
    a, _ = to_numpy(x, name)
    a = as_float(a, name, np.float64)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    a = np.atleast_1d(a)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a vector, got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"{name}: expected {n} values, got {a.shape[0]}")
    return np.ascontiguousarray(a)
