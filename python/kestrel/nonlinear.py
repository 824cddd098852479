"""The nonlinear Gaussian filters: extended (EKF), iterated extended (IEKF, Gauss-Newton
updates), unscented (UKF, Wan & van der Merwe's scaled sigma points) and cubature (CKF)
Kalman filters, their RTS smoothers (Sarkka 2013, alg. 9.3 and 9.10), the iterated
extended smoother / iterated posterior linearisation, and the IMM filter (Blom &
Bar-Shalom), over models written in kestrel's model-file expression language
(``[model] kind = "nonlinear"`` with ``states``, ``f``, ``h``, ``Q``, ``R``,
``constants``, ``angles``), the coordinated turn (``kind = "ct"``), the particle
filter's range-only / bearings-only / range-bearing kinds, any linear kind, or an
``[imm]`` file. As ``kestrel filter|smooth --filter KIND``; CPU only (f64 inside).

Time convention (kestrel's): the prior is the state at step 0 before the step-0
measurement; step 0 updates it, each later step predicts then updates; a measurement
with a NaN is missing (predict only, log-likelihood 0). Angle components of the
measurement (``angles``) have their innovations wrapped to (-pi, pi].
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _kestrel
from ._arrays import as_float, flush_warnings, precision_dtype, to_numpy


@dataclass
class NonlinearResult:
    """Estimates: ``mean`` [B, T, nx], ``cov`` [B, T, nx, nx], the filter's per-step
    ``loglik`` [B, T] (for ``method="iterated"`` the last pass's linearised filter's),
    and the IMM's ``mode_probs`` [B, T, r] (None for one model)."""

    mean: np.ndarray
    cov: np.ndarray
    loglik: np.ndarray | None
    mode_probs: np.ndarray | None


class NonlinearFilter:
    """A nonlinear model file (or IMM file) and its filters.

    ``filter`` picks ``"ekf"``, ``"ukf"``, ``"ckf"`` or ``"iekf"`` (default: the file's
    ``[filter] kind``, else ``"ekf"``); ``alpha``, ``beta``, ``kappa`` (UKF; defaults 1,
    0, 3 - n) and ``iterations`` (IEKF updates and iterated smoother passes; default 10)
    override the file's ``[filter]`` table.
    """

    def __init__(self, text: str, origin: str = "<string>") -> None:
        nx, ny, modes, kind = _kestrel.nonlinear_check(text, origin)
        self._text = text
        self._origin = origin
        self.nx: int = nx
        self.ny: int = ny
        self.modes: int = modes
        self.kind: str | None = kind

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> "NonlinearFilter":
        """Reads a model file (``ModelError`` names the file, field and column)."""
        p = os.fspath(path)
        with open(p, encoding="utf-8") as f:
            return cls(f.read(), p)

    @classmethod
    def from_toml_str(cls, text: str, origin: str = "<string>") -> "NonlinearFilter":
        """From a model file's text."""
        return cls(text, origin)

    def __repr__(self) -> str:
        imm = f", IMM of {self.modes} modes" if self.modes else ""
        return f"NonlinearFilter({self._origin!r}, nx={self.nx}, ny={self.ny}{imm})"

    def _run(
        self,
        z: Any,
        smooth: bool,
        method: str,
        filter: str | None,
        iterations: int | None,
        alpha: float | None,
        beta: float | None,
        kappa: float | None,
        precision: str | None,
        device: str,
        progress: bool,
    ) -> NonlinearResult:
        a, _ = to_numpy(z, "z")
        if a.ndim == 2:
            a = a[None]
        dtype = precision_dtype(precision, a, "cpu")
        a = as_float(a, "z", dtype)
        try:
            d = _kestrel.nonlinear_estimate(
                self._text,
                self._origin,
                a,
                filter=filter,
                smooth=smooth,
                method=method,
                iterations=iterations,
                alpha=alpha,
                beta=beta,
                kappa=kappa,
                device=device,
                progress=progress,
            )
        finally:
            flush_warnings()
        return NonlinearResult(d["mean"], d["cov"], d["loglik"], d["mode_probs"])

    def filter(
        self,
        z: Any,
        *,
        filter: str | None = None,
        iterations: int | None = None,
        alpha: float | None = None,
        beta: float | None = None,
        kappa: float | None = None,
        precision: str | None = None,
        device: str = "cpu",
        progress: bool = False,
    ) -> NonlinearResult:
        """Filters ``z`` [B, T, ny] (or [T, ny]): ``kestrel filter --filter KIND``."""
        return self._run(
            z, False, "rts", filter, iterations, alpha, beta, kappa, precision, device, progress
        )

    def smooth(
        self,
        z: Any,
        *,
        method: str = "rts",
        filter: str | None = None,
        iterations: int | None = None,
        alpha: float | None = None,
        beta: float | None = None,
        kappa: float | None = None,
        precision: str | None = None,
        device: str = "cpu",
        progress: bool = False,
    ) -> NonlinearResult:
        """Smooths ``z``: ``method="rts"`` (the RTS smoother with the filter's
        linearisation) or ``"iterated"`` (iterated extended smoother for ekf/iekf,
        iterated posterior linearisation for ukf/ckf): ``kestrel smooth --filter KIND
        --method METHOD``. ``loglik`` is the filter's."""
        return self._run(
            z, True, method, filter, iterations, alpha, beta, kappa, precision, device, progress
        )
