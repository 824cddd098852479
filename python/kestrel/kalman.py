"""The Kalman family: the linear-Gaussian model, the batched Kalman filter, the
Rauch-Tung-Striebel, parallel-in-time RTS and two-filter smoothers.

Time convention (kestrel's, as the command line): the prior ``(x0, P0)`` is the state
at step 0 *before* the step-0 measurement; step 0 is an update of the prior and each
later step is predict-then-update. A measurement with NaN in any component is missing:
that step only predicts and its log-likelihood term is 0. The log-likelihood of step k
is ``log N(z_k; H x_{k|k-1} + d, S_k)``, ``S_k = H P_{k|k-1} H^T + R``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from . import _kestrel
from ._arrays import Origin, as_float, flush_warnings, matrix, precision_dtype, to_numpy, vector

Outputs = "str | Iterable[str]"


def outputs_arg(outputs: Any) -> str:
    """``("mean", "cov")`` or ``"mean,cov"`` as the command line's ``--outputs`` list."""
    if isinstance(outputs, str):
        return outputs
    try:
        items = list(outputs)
    except TypeError:
        raise TypeError(
            f"outputs: expected a string or a sequence of strings, got {type(outputs).__name__}"
        ) from None
    for o in items:
        if not isinstance(o, str):
            raise TypeError(f"outputs: expected strings, got {type(o).__name__}")
    return ",".join(items)


@dataclass
class KalmanResult:
    """Estimates of a batch: ``mean`` [B, T, nx], ``cov`` [B, T, nx, nx] (or the
    variances [B, T, nx] with ``outputs=("diag",)``), ``loglik`` [B, T] (the filter's
    per-step predictive log-likelihoods; for a smoother, those of its filter). The B axis
    is absent when the measurements were one track ([T, ny]). Outputs not asked for are
    None. ``device`` is where it ran."""

    mean: Any
    cov: Any
    loglik: Any
    device: str

    @property
    def total_loglik(self) -> float:
        """The sum of the per-step log-likelihoods over every step and track."""
        if self.loglik is None:
            raise ValueError("the log-likelihoods were not asked for (outputs)")
        return float(np.asarray(_host(self.loglik), dtype=np.float64).sum())


def _host(a: Any) -> Any:
    if hasattr(a, "get") and type(a).__module__.startswith("cupy"):
        return a.get()
    if hasattr(a, "cpu") and type(a).__module__.startswith("torch"):
        return a.cpu().numpy()
    return a


def measurements(z: Any, ny: int, precision: Any, device: str) -> tuple[np.ndarray, bool, Origin]:
    """``z`` as a C-contiguous [B, T, ny] array of the run's dtype; whether it was one
    track ([T, ny], or [T] when ny = 1); where it came from."""
    a, origin = to_numpy(z, "z")
    dtype = precision_dtype(precision, a, device)
    a = as_float(a, "z", dtype)
    one = False
    if a.ndim == 1 and ny == 1:
        a, one = a.reshape(1, -1, 1), True
    elif a.ndim == 2:
        if a.shape[1] != ny:
            raise ValueError(
                f"z: one track's measurements are [T, ny] with ny = {ny}, got shape {a.shape}"
            )
        a, one = a[None], True
    elif a.ndim != 3:
        raise ValueError(
            f"z: expected measurements [B, T, ny] or [T, ny], got shape {a.shape}"
        )
    if a.shape[2] != ny:
        raise ValueError(
            f"z: measurements have {a.shape[2]} components, the model measures {ny}"
        )
    return np.ascontiguousarray(a), one, origin


class KalmanFilter:
    """A linear-Gaussian state-space model and its batched filters and smoothers.

    ``x_k = F x_{k-1} + u + w_k``, ``w_k ~ N(0, Q)``; ``z_k = H x_k + d + v_k``,
    ``v_k ~ N(0, R)``; prior ``x_0 ~ N(x0, P0)`` before the step-0 measurement
    (``x0`` defaults to zeros, ``P0`` to the identity, ``u`` and ``d`` to zeros).

    >>> import numpy as np, kestrel
    >>> kf = kestrel.KalmanFilter(F=[[1, 1], [0, 1]], H=[[1, 0]], Q=0.01 * np.eye(2), R=[[1.0]])
    >>> z = np.cumsum(np.ones(50))[:, None]          # one track, 50 steps, ny = 1
    >>> kf.filter(z).mean.shape
    (50, 2)
    """

    def __init__(self, F: Any, H: Any, Q: Any, R: Any, x0: Any = None, P0: Any = None,
                 u: Any = None, d: Any = None):
        F = matrix(F, "F")
        nx = F.shape[0]
        H = matrix(H, "H")
        args = dict(
            F=F,
            H=H,
            Q=matrix(Q, "Q"),
            R=matrix(R, "R"),
            x0=np.zeros(nx) if x0 is None else vector(x0, "x0"),
            P0=np.eye(nx) if P0 is None else matrix(P0, "P0"),
            u=None if u is None else vector(u, "u"),
            d=None if d is None else vector(d, "d"),
        )
        self._model = _kestrel.Model(**args)

    @classmethod
    def from_model(cls, model: "_kestrel.Model | _kestrel.TimeVaryingModel") -> "KalmanFilter":
        """Wraps a native ``kestrel.Model`` or ``kestrel.TimeVaryingModel``."""
        if not isinstance(model, (_kestrel.Model, _kestrel.TimeVaryingModel)):
            raise TypeError(
                f"model: expected a kestrel Model or TimeVaryingModel, got {type(model).__name__}"
            )
        kf = cls.__new__(cls)
        kf._model = model
        return kf

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> "KalmanFilter":
        """Reads a model file: every form ``kestrel filter --model`` reads (explicit
        matrices, the cv / ca / random-walk / ar builders, ``prior = "stationary"``, and
        ``kind = "time-varying"``: per-step matrices ``F, Q, H, R`` (optional ``u, d``)
        from the ``.npz`` its ``file`` names, relative to the TOML; then ``F`` etc. are
        [T, ...] arrays, entry k the transition into step k and the measurement model of
        step k)."""
        return cls.from_model(_kestrel.load_linear_model(os.fspath(path)))

    @property
    def time_varying(self) -> bool:
        """Whether the model has per-step matrices (``kind = "time-varying"``)."""
        return isinstance(self._model, _kestrel.TimeVaryingModel)

    def _invariant(self, what: str) -> None:
        if self.time_varying:
            raise TypeError(
                f"{what}: a time-varying model (per-step matrices from {self._model.file}) "
                "has no single-file TOML form; keep its model file and .npz"
            )

    @classmethod
    def from_toml_str(cls, text: str) -> "KalmanFilter":
        """Parses a model from TOML text."""
        return cls.from_model(_kestrel.Model.from_toml_str(text))

    def to_toml(self) -> str:
        """The model in the explicit TOML form (numbers round-trip exactly)."""
        self._invariant("to_toml")
        return self._model.to_toml()

    def save(self, path: str | os.PathLike) -> None:
        """Writes the model file (explicit form)."""
        self._invariant("save")
        self._model.save(os.fspath(path))

    @property
    def model(self) -> "_kestrel.Model":
        return self._model

    nx = property(lambda self: self._model.nx, doc="State dimension.")
    ny = property(lambda self: self._model.ny, doc="Measurement dimension.")
    F = property(lambda self: self._model.F, doc="Transition matrix [nx, nx].")
    H = property(lambda self: self._model.H, doc="Measurement matrix [ny, nx].")
    Q = property(lambda self: self._model.Q, doc="Process noise covariance [nx, nx].")
    R = property(lambda self: self._model.R, doc="Measurement noise covariance [ny, ny].")
    x0 = property(lambda self: self._model.x0, doc="Prior mean at step 0 [nx].")
    P0 = property(lambda self: self._model.P0, doc="Prior covariance at step 0 [nx, nx].")
    u = property(lambda self: self._model.u, doc="Transition offset [nx].")
    d = property(lambda self: self._model.d, doc="Measurement offset [ny].")

    def __repr__(self) -> str:
        if self.time_varying:
            return f"KalmanFilter(nx={self.nx}, ny={self.ny}, steps={self._model.steps})"
        return f"KalmanFilter(nx={self.nx}, ny={self.ny})"

    def __reduce__(self):
        self._invariant("pickling")
        return (KalmanFilter.from_toml_str, (self.to_toml(),))

    def _run(self, z, smooth, device, precision, method, scan, outputs, progress):
        if not isinstance(device, str):
            raise TypeError(f"device: expected a string, got {type(device).__name__}")
        if method is None:
            method = "rts" if smooth else "sequential"
        resident = None if self.time_varying else _resident_library(z)
        if resident and method in ("sequential", "rts") and device != "cpu" \
                and device != "cuda:all" and not progress:
            return _run_resident(self, z, resident, smooth, device, precision, outputs)
        a, one, origin = measurements(z, self.ny, precision, device)
        out = _kestrel.kalman_estimate(
            self._model, a, smooth=smooth, device=device, method=method, scan=scan,
            outputs=outputs_arg(outputs), progress=bool(progress),
        )
        flush_warnings()
        res = {}
        for key in ("mean", "cov", "loglik"):
            v = out[key]
            if v is not None and one:
                v = v[0]
            res[key] = origin.wrap(v)
        return KalmanResult(device=out["device"], **res)

    def filter(self, z: Any, device: str = "auto", precision: Any = None,
               method: str = "sequential", scan: str = "fastest",
               outputs: Any = ("mean", "cov", "loglik"), progress: bool = False) -> KalmanResult:
        """The Kalman filter over every track of ``z`` [B, T, ny] (or one track [T, ny]).

        ``method``: ``"sequential"`` (each track's steps in order, tracks in parallel),
        ``"parallel"`` (Sarkka & Garcia-Fernandez's associative scan over time, with
        ``scan``: sequential, hillis-steele, blelloch, ladner-fischer, sengupta[:N],
        fastest) or ``"parallel-sqrt"`` (the same scan over Cholesky factors: every
        covariance positive semi-definite by construction, in f32 too). ``device``: auto, cpu, cuda, cuda:N or cuda:all. ``precision``:
        "f32" or "f64" (default: the input's float dtype; else f64 on the CPU and f32 on
        a GPU). ``outputs``: any of mean, cov, diag (the variances), loglik, or "all".
        Returns filtered means ``x_{k|k}``, covariances ``P_{k|k}`` and per-step
        log-likelihoods.
        """
        return self._run(z, False, device, precision, method, scan, outputs, progress)

    def smooth(self, z: Any, device: str = "auto", precision: Any = None,
               method: str = "rts", scan: str = "fastest",
               outputs: Any = ("mean", "cov", "loglik"), progress: bool = False) -> KalmanResult:
        """The smoothed moments ``x_{k|T}``, ``P_{k|T}`` of every track of ``z``.

        ``method``: ``"rts"`` (Kalman filter then Rauch-Tung-Striebel), ``"parallel-rts"``
        (both as associative scans over time), ``"two-filter"`` (the parallel two-filter
        smoother), ``"parallel-sqrt-rts"`` (``"parallel-rts"`` over Cholesky factors). ``loglik`` holds the filter's per-step log-likelihoods. Other
        arguments as :meth:`filter`.
        """
        return self._run(z, True, device, precision, method, scan, outputs, progress)

    def retrodict(self, filtered: Any, cov: Any = None, means_only: bool = False,
                  method: str = "rts", scan: str = "fastest",
                  device: str = "auto") -> KalmanResult:
        """Smooths stored filter estimates (retrodiction, Tager 2013 ch. 3; the
        command line's ``kestrel retrodict``): ``filtered`` is a :class:`KalmanResult`
        of :meth:`filter` (full covariances), or the filtered means [B, T, nx] (or one
        track [T, nx]) with their covariances ``cov`` [B, T, nx, nx]. ``method``:
        ``"rts"`` (the Rauch-Tung-Striebel recursion) or ``"parallel"`` (the reverse
        associative scan of the pairs (C_k, b_k), with ``scan``). With ``means_only``
        only the smoothed means are computed (on a GPU no covariance is formed) and
        ``cov`` of the result is None. Equals :meth:`smooth` on the same measurements;
        the filtered arrays are not changed.
        """
        if not isinstance(device, str):
            raise TypeError(f"device: expected a string, got {type(device).__name__}")
        if isinstance(filtered, KalmanResult):
            if cov is not None:
                raise TypeError("cov: give either a KalmanResult or the means and cov")
            mean, cov = filtered.mean, filtered.cov
            if mean is None or cov is None:
                raise ValueError("filtered: the result holds no means or no covariances "
                                 "(filter with outputs including mean and cov)")
        else:
            mean = filtered
            if cov is None:
                raise TypeError("cov: the filtered covariances are needed with the means")
        mean = np.asarray(_host(mean))
        cov = np.asarray(_host(cov))
        one = mean.ndim == 2
        if one:
            mean, cov = mean[None], cov[None]
        if mean.dtype not in (np.float32, np.float64):
            mean = mean.astype(np.float64)
        cov = cov.astype(mean.dtype, copy=False)
        out = _kestrel.kalman_retrodict(
            self._model, np.ascontiguousarray(mean), np.ascontiguousarray(cov),
            means_only=bool(means_only), method=method, scan=scan, device=device,
        )
        flush_warnings()
        m, c = out["mean"], out["cov"]
        if one:
            m = m[0]
            c = None if c is None else c[0]
        return KalmanResult(mean=m, cov=c, loglik=None, device=out["device"])


def retrodict(model: Any, mean: Any, cov: Any, means_only: bool = False,
              method: str = "rts", scan: str = "fastest", device: str = "auto") -> KalmanResult:
    """:meth:`KalmanFilter.retrodict` for a :class:`KalmanFilter` or a native model
    (``kestrel.Model``, ``kestrel.TimeVaryingModel``)."""
    kf = model if isinstance(model, KalmanFilter) else KalmanFilter.from_model(model)
    return kf.retrodict(mean, cov, means_only=means_only, method=method, scan=scan,
                        device=device)


def _resident_library(z: Any) -> str | None:
    """``"torch"`` or ``"cupy"`` when ``z`` is such an array in CUDA device memory."""
    mod = type(z).__module__.split(".")[0]
    if mod == "torch":
        return "torch" if getattr(z, "is_cuda", False) else None
    if mod == "cupy":
        return "cupy"
    return None


def _run_resident(kf: KalmanFilter, z: Any, lib: str, smooth: bool, device: str,
                  precision: Any, outputs: Any) -> KalmanResult:
    """The filter or RTS smoother on measurements already on a GPU: the kernels read
    them in place and write the outputs asked for into new arrays of the same library
    on the same device (nothing crosses the bus)."""
    from ._arrays import precision_dtype

    sel = [o.strip() for o in outputs_arg(outputs).split(",")]
    if "all" in sel:
        sel = ["mean", "cov", "loglik"]
    unknown = [o for o in sel if o not in ("mean", "cov", "diag", "loglik")]
    if unknown or len(set(sel)) != len(sel) or ("cov" in sel and "diag" in sel) or not sel:
        # The native parser words the error exactly as the command line does.
        _kestrel.kalman_estimate(kf.model, np.zeros((1, 1, kf.ny)), outputs=outputs_arg(outputs))
    if lib == "torch":
        import torch

        ordinal = z.device.index or 0
        own = {torch.float32: np.float32, torch.float64: np.float64}.get(z.dtype, np.int8)
        np_dtype = precision_dtype(precision, np.empty(0, dtype=own), "cuda")
        tdt = torch.float32 if np_dtype == np.float32 else torch.float64
        zz = z.detach().to(tdt).contiguous()
        empty = lambda shape: torch.empty(shape, dtype=tdt, device=z.device)  # noqa: E731
        ptr = lambda a: a.data_ptr()  # noqa: E731
        sync = lambda: torch.cuda.synchronize(z.device)  # noqa: E731
    else:
        import cupy

        ordinal = z.device.id
        np_dtype = precision_dtype(precision, np.empty(0, dtype=z.dtype), "cuda")
        with cupy.cuda.Device(ordinal):
            zz = cupy.ascontiguousarray(z, dtype=np_dtype)
        empty = lambda shape: cupy.empty(shape, dtype=np_dtype)  # noqa: E731
        ptr = lambda a: a.data.ptr  # noqa: E731
        sync = lambda: cupy.cuda.Device(ordinal).synchronize()  # noqa: E731
    if device not in ("auto", "cuda", f"cuda:{ordinal}"):
        raise ValueError(
            f'device: the measurements are on cuda:{ordinal}, device="{device}" names another device '
            f'(use "auto", "cuda:{ordinal}" or "cpu")'
        )
    one = False
    ny, nx = kf.ny, kf.nx
    if zz.ndim == 1 and ny == 1:
        zz, one = zz.reshape(1, -1, 1), True
    elif zz.ndim == 2:
        if zz.shape[1] != ny:
            raise ValueError(
                f"z: one track's measurements are [T, ny] with ny = {ny}, got shape {tuple(zz.shape)}"
            )
        zz, one = zz.reshape(1, zz.shape[0], ny), True
    elif zz.ndim != 3:
        raise ValueError(f"z: expected measurements [B, T, ny] or [T, ny], got shape {tuple(zz.shape)}")
    B, T, zny = (int(v) for v in zz.shape)
    if zny != ny:
        raise ValueError(f"z: measurements have {zny} components, the model measures {ny}")
    if B == 0 or T == 0:
        raise ValueError(f"z: no measurements ({B} tracks x {T} steps)")
    # Infinite measurements are found by the filter kernel in the pass that reads them
    # (no extra pass over the array here) and refused with the host path's message.
    dt = "f32" if np_dtype == np.float32 else "f64"
    with _on(lib, ordinal):
        mean = empty((B, T, nx)) if "mean" in sel else None
        cov = empty((B, T, nx, nx)) if ("cov" in sel or "diag" in sel) else None
        ll = empty((B, T)) if "loglik" in sel else None
    sync()
    _kestrel.kalman_estimate_resident(
        kf.model, ptr(zz), B, T, ny, dt, ordinal, smooth,
        mean=None if mean is None else ptr(mean),
        cov=None if cov is None else ptr(cov),
        loglik=None if ll is None else ptr(ll),
    )
    flush_warnings()
    if "diag" in sel and cov is not None:
        cov = cov.diagonal(axis1=2, axis2=3) if lib == "cupy" else cov.diagonal(dim1=2, dim2=3)
        cov = cov.copy() if lib == "cupy" else cov.contiguous()
    if one:
        mean = None if mean is None else mean[0]
        cov = None if cov is None else cov[0]
        ll = None if ll is None else ll[0]
    return KalmanResult(mean=mean, cov=cov, loglik=ll, device=f"cuda:{ordinal}")


class _on:
    """The CuPy device context for ``ordinal`` (PyTorch needs none: its arrays name
    their device)."""

    def __init__(self, lib: str, ordinal: int):
        self._ctx = None
        if lib == "cupy":
            import cupy

            self._ctx = cupy.cuda.Device(ordinal)

    def __enter__(self):
        if self._ctx is not None:
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False
