"""Per-step marginal log-likelihoods ``log p(z_t | z_0:t-1)`` of long series
(``kestrel loglik``).

Three methods compute the same quantity (``docs/likelihood.md``):

- ``"exact"``: the sequential Kalman filter, ``log N(z_t; H x_{t|t-1} + d, S_t)`` with
  ``S_t = H P_{t|t-1} H^T + R``; with ``steady=TOL`` it switches to the steady-state gain
  once the predicted covariance has converged (the trick of Moore's sigvisa filter).
- ``"parallel"``: the associative-scan filter of Sarkka & Garcia-Fernandez (2021,
  "Temporal parallelization of Bayesian smoothers", IEEE TAC); on a GPU the covariance
  recursion runs once on the host and the mean recursion as a parallel scan.
- ``"window:N"``: the windowed ("splash") filter of Lin, Moore & Russell (Algorithm 2):
  the value at ``t`` comes from a Kalman filter over the ``N`` latest measurements,
  started from the vague prior ``N(0, vague I)``; steps ``t < N-1`` are exact.
  ``"window:auto[:TOL]"`` picks the smallest ``N`` whose per-step error bound is below
  ``TOL`` (default 1e-6).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _kestrel
from ._arrays import flush_warnings
from .kalman import measurements

#: Default variance of the windowed filter's vague start (``--vague``).
DEFAULT_VAGUE = 1e6


def model_of(model: Any, varying: bool = False) -> Any:
    """A native model from a :class:`KalmanFilter`, a ``kestrel.Model`` or a model file
    path (str or os.PathLike, read as ``kestrel loglik --model`` reads it); with
    ``varying`` a time-varying model too (a ``kestrel.TimeVaryingModel``, a KalmanFilter
    holding one, or a ``kind = "time-varying"`` file)."""
    tv = getattr(_kestrel, "TimeVaryingModel", None)
    inner = getattr(model, "model", model)
    if isinstance(inner, _kestrel.Model):
        return inner
    if tv is not None and isinstance(inner, tv):
        if varying:
            return inner
        raise TypeError(
            "model: a time-varying model is not taken here, which needs a time-invariant one "
            "(kestrel.loglik, kestrel.simulate and KalmanFilter take time-varying models)"
        )
    if isinstance(model, (str, os.PathLike)):
        if varying:
            return _kestrel.load_linear_model(os.fspath(model))
        return _kestrel.Model.from_toml(os.fspath(model))
    raise TypeError(
        "model: expected a KalmanFilter, a kestrel.Model or a model file path, "
        f"got {type(model).__name__}"
    )


@dataclass
class LogLikResult:
    """Per-step log-likelihoods ``loglik`` [B, T] (or [T] for one track; 0 where a
    measurement is missing), the ``window`` length and its per-step error ``bound``
    (windowed methods, else None), the ``method`` and the ``device`` it ran on.
    ``np.asarray(result)`` is ``loglik``."""

    loglik: Any
    window: int | None
    bound: float | None
    method: str
    device: str

    @property
    def total(self) -> Any:
        """The total log-likelihood of each track (summed in float64): [B], or a float
        for one track (what ``kestrel loglik`` prints)."""
        a = np.asarray(self.loglik, dtype=np.float64)
        t = a.sum(axis=-1)
        return float(t) if a.ndim == 1 else t

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = np.asarray(self.loglik)
        return a if dtype is None else a.astype(dtype)


def _method_arg(method: Any, window: Any, tol: Any) -> str:
    """The command line's method string (``window:N``, ``window:auto[:TOL]``) from
    ``method="window"`` with ``window`` and ``tol``."""
    if not isinstance(method, str):
        raise TypeError(f"method: expected a string, got {type(method).__name__}")
    if method != "window":
        if window is not None or tol is not None:
            raise ValueError(f'window and tol apply to method="window" only, got method="{method}"')
        return method
    if window is None or (isinstance(window, str) and window == "auto"):
        if tol is None:
            return "window:auto"
        if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)):
            raise TypeError(f"tol: expected a number, got {type(tol).__name__}")
        return f"window:auto:{float(tol)!r}"
    if tol is not None:
        raise ValueError('tol applies to window="auto" only')
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)):
        raise TypeError(f'window: expected a whole number or "auto", got {type(window).__name__}')
    return f"window:{int(window)}"


def loglik(model: Any, z: Any, method: str = "exact", *, window: int | str | None = None,
           tol: float | None = None, vague: float = DEFAULT_VAGUE, steady: float | None = None,
           device: str = "auto", precision: Any = None, scan: str = "fastest",
           progress: bool = False) -> LogLikResult:
    """Per-step marginal log-likelihoods ``log p(z_t | z_0:t-1)`` of every track of ``z``
    [B, T, ny] (or one track [T, ny]; NaN = missing), as ``kestrel loglik`` computes them.

    ``model``: a :class:`KalmanFilter`, a ``kestrel.Model`` or a model file path.
    ``method``: ``"exact"``, ``"parallel"``, ``"window:N"``, ``"window:auto"`` or
    ``"window:auto:TOL"`` (the command line's forms); or ``"window"`` with ``window=N``
    or ``window="auto"`` (the default) and, for auto, ``tol``. ``vague``: the variance ``V`` of the windowed
    filter's vague start ``N(0, V I)``. ``steady`` (exact only): switch to the
    steady-state gain once the predicted covariance changes by less than ``steady``
    (relative) in a step. ``device``: auto (the CPU for exact, else a GPU when usable),
    cpu, cuda or cuda:N (exact runs on the CPU only). ``precision``: "f32" or "f64"
    (default: the input's float dtype, else f64 on the CPU, f32 on a GPU). ``scan``: the
    parallel method's scan algorithm on the CPU (sequential, hillis-steele, blelloch,
    ladner-fischer, sengupta[:N], fastest).

    >>> import numpy as np, kestrel
    >>> kf = kestrel.KalmanFilter(F=[[0.9]], H=[[1.0]], Q=[[0.1]], R=[[1.0]])
    >>> r = kestrel.loglik(kf, np.zeros((2, 100, 1)), method="window:16")
    >>> r.loglik.shape, r.window
    ((2, 100), 16)
    """
    m = model_of(model, varying=True)
    method = _method_arg(method, window, tol)
    if not isinstance(device, str):
        raise TypeError(f"device: expected a string, got {type(device).__name__}")
    if not isinstance(scan, str):
        raise TypeError(f"scan: expected a string, got {type(scan).__name__}")
    for name, v in (("vague", vague), ("steady", steady)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.floating))):
            raise TypeError(f"{name}: expected a number, got {type(v).__name__}")
    # The device the precision follows (the command line's default for each).
    if device == "auto":
        dev = "cpu" if method == "exact" else _kestrel.auto_device()[0]
    else:
        dev = device
    a, one, origin = measurements(z, m.ny, precision, dev)
    out = _kestrel.loglik(
        m, a, method=method, vague=float(vague),
        steady=None if steady is None else float(steady),
        device=dev, scan=scan, progress=bool(progress),
    )
    flush_warnings()
    ll = out["loglik"]
    return LogLikResult(
        loglik=origin.wrap(ll[0] if one else ll),
        window=out["window"],
        bound=out["bound"],
        method=method,
        device=out["device"],
    )
