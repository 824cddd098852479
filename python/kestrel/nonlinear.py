"""The nonlinear Gaussian filters: extended (EKF), iterated extended (IEKF, Gauss-Newton
updates), unscented (UKF, Wan & van der Merwe's scaled sigma points) and cubature (CKF)
Kalman filters, their RTS smoothers (Sarkka 2013, alg. 9.3 and 9.10), the iterated
extended smoother / iterated posterior linearisation, and the IMM filter (Blom &
Bar-Shalom), over models written in kestrel's model-file expression language
(``[model] kind = "nonlinear"`` with ``states``, ``f``, ``h``, ``Q``, ``R``,
``constants``, ``angles``), the coordinated turn (``kind = "ct"``), the particle
filter's range-only / bearings-only / range-bearing kinds, any linear kind, or an
``[imm]`` file. As ``kestrel filter|smooth --filter KIND``: on the CPU in f64 inside,
or (``device="cuda"``) batched on the GPU in ``z``'s precision: the EKF, IEKF, UKF and
CKF filters of one model and their IMM, and the smoothers of one model.

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

    @staticmethod
    def from_functions(
        f: Any,
        h: Any,
        Q: Any,
        R: Any,
        x0: Any,
        P0: Any,
        *,
        filter: str = "ukf",
        alpha: float = 1.0,
        beta: float = 0.0,
        kappa: float | None = None,
        angles: Any = (),
        jacobians: Any = None,
    ) -> "FunctionNonlinearFilter":
        """A model given as Python functions over batches of states, on the CPU:
        ``x_k = f(x_{k-1}) + w_k``, ``z_k = h(x_k) + v_k``, ``w ~ N(0, Q)``,
        ``v ~ N(0, R)``, prior ``N(x0, P0)``.

        ``f(X)`` takes states ``X`` [M, nx] and returns [M, nx] (the states one step
        later); ``h(X)`` returns [M, ny]. Both are called on every track's points of a
        step at once (``M = B x`` the number of points), so a step costs a few NumPy
        calls whatever B. ``filter``: ``"ukf"`` (Wan & van der Merwe's scaled points;
        ``alpha``, ``beta``, ``kappa`` default 1, 0, 3 - nx, as for model files),
        ``"ckf"`` (cubature, 2 nx points), or ``"ekf"``, which needs
        ``jacobians=(F_jac, H_jac)`` (callables returning [M, nx, nx] and [M, ny, nx];
        there are no finite differences). ``angles``: measurement components whose
        innovations are wrapped to (-pi, pi] and averaged as angles.

        Returns a :class:`FunctionNonlinearFilter`, whose ``filter(z)`` and
        ``smooth(z)`` (RTS with the filter's linearisation) return a
        :class:`NonlinearResult` with the conventions and numbers of the file-based
        filters (step 0 updates the prior; a NaN measurement is missing: predict only,
        log-likelihood 0). CPU only; f64 inside. f or h returning a wrong shape or
        non-finite values, and bad ``Q``, ``R``, ``x0``, ``P0``, are ``ValueError``.
        """
        return FunctionNonlinearFilter(
            f, h, Q, R, x0, P0, filter=filter, alpha=alpha, beta=beta, kappa=kappa,
            angles=angles, jacobians=jacobians,
        )

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
        """Filters ``z`` [B, T, ny] (or [T, ny]): ``kestrel filter --filter KIND``.

        ``device="cuda"`` (or ``"cuda:N"``) runs the EKF, IEKF, UKF and CKF of one model,
        and the IMM of them, on the GPU, one thread a track, in ``z``'s precision."""
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
        linearisation), ``"iterated"`` (iterated extended smoother for ekf/iekf,
        iterated posterior linearisation for ukf/ckf) or ``"parallel-iterated"`` (the
        same passes, each pass's linearised filter and smoother run by the parallel scan):
        ``kestrel smooth --filter KIND --method METHOD``. ``device="cuda"`` runs each on
        the GPU: the RTS and iterated smoothers one thread a track, the parallel iterated
        smoother's scans over the steps. ``loglik`` is the filter's."""
        return self._run(
            z, True, method, filter, iterations, alpha, beta, kappa, precision, device, progress
        )


# ---------------------------------------------------------------------------------------
# Models given as Python functions (NumPy, CPU).


def _wrap(a: np.ndarray) -> np.ndarray:
    """``a`` wrapped to (-pi, pi] (the library's ``wrap``)."""
    r = a - 2.0 * np.pi * np.floor((a + np.pi) / (2.0 * np.pi))
    r = np.where(r == -np.pi, np.pi, r)
    return np.where((a > -np.pi) & (a <= np.pi), a, r)


def _sym(p: np.ndarray) -> np.ndarray:
    return 0.5 * (p + np.swapaxes(p, -1, -2))


def _matrix(x: Any, name: str, shape: tuple[int, ...]) -> np.ndarray:
    a = np.array(x, dtype=np.float64, copy=True)
    if a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: has non-finite values")
    return a


class _NotPd(Exception):
    def __init__(self, what: str, tracks: np.ndarray) -> None:
        super().__init__(what)
        self.what = what
        self.tracks = tracks


def _cholesky_psd(p: np.ndarray, what: str) -> np.ndarray:
    """Lower Cholesky factors of ``p`` [B, n, n]: LAPACK's where definite, else (as the
    library) a zero column where a pivot vanishes to rounding; ``_NotPd`` otherwise."""
    try:
        return np.linalg.cholesky(p)
    except np.linalg.LinAlgError:
        pass
    b, n, _ = p.shape
    diag = np.abs(np.diagonal(p, axis1=1, axis2=2)).max(axis=1)
    tol = 1e-12 * np.maximum(diag, np.finfo(float).tiny)
    lo = np.zeros_like(p)
    bad = np.zeros(b, dtype=bool)
    for j in range(n):
        d = p[:, j, j] - np.einsum("bk,bk->b", lo[:, j, :j], lo[:, j, :j])
        bad |= d < -tol
        ok = d > tol
        s = np.sqrt(np.where(ok, d, 1.0))
        v = p[:, j + 1 :, j] - np.einsum("bik,bk->bi", lo[:, j + 1 :, :j], lo[:, j, :j])
        lo[:, j, j] = np.where(ok, s, 0.0)
        lo[:, j + 1 :, j] = np.where(ok[:, None], v / s[:, None], 0.0)
    if bad.any() or not np.isfinite(lo).all():
        raise _NotPd(what, np.flatnonzero(bad | ~np.isfinite(lo).all(axis=(1, 2))))
    return lo


def _cholesky(s: np.ndarray, what: str) -> np.ndarray:
    try:
        return np.linalg.cholesky(s)
    except np.linalg.LinAlgError:
        bad = [i for i in range(s.shape[0]) if not _is_pd(s[i])]
        raise _NotPd(what, np.array(bad or [0])) from None


def _is_pd(a: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(a)
        return True
    except np.linalg.LinAlgError:
        return False


class FunctionNonlinearFilter:
    """A nonlinear model given as Python functions over batches of states (CPU, NumPy,
    f64 inside): made by :meth:`NonlinearFilter.from_functions`, which documents it.
    ``filter`` and ``smooth`` take and return what :class:`NonlinearFilter`'s do."""

    def __init__(
        self,
        f: Any,
        h: Any,
        Q: Any,
        R: Any,
        x0: Any,
        P0: Any,
        *,
        filter: str = "ukf",
        alpha: float = 1.0,
        beta: float = 0.0,
        kappa: float | None = None,
        angles: Any = (),
        jacobians: Any = None,
    ) -> None:
        if not callable(f) or not callable(h):
            raise ValueError("f and h must be callables taking an array [M, nx]")
        x0a = np.array(x0, dtype=np.float64, copy=True)
        if x0a.ndim != 1 or x0a.size == 0:
            raise ValueError(f"x0: expected a vector [nx], got shape {x0a.shape}")
        nx = x0a.size
        x0a = _matrix(x0a, "x0", (nx,))
        p0 = _matrix(P0, "P0", (nx, nx))
        q = _matrix(Q, "Q", (nx, nx))
        ra = np.array(R, dtype=np.float64, copy=True)
        if ra.ndim != 2 or ra.shape[0] != ra.shape[1] or ra.shape[0] == 0:
            raise ValueError(f"R: expected a square matrix [ny, ny], got shape {ra.shape}")
        ny = ra.shape[0]
        r = _matrix(ra, "R", (ny, ny))
        ang = [int(a) for a in np.asarray(angles, dtype=np.int64).reshape(-1)]
        for a in ang:
            if not 0 <= a < ny:
                raise ValueError(f"angles: index {a} is not a measurement component (ny = {ny})")
        if jacobians is not None:
            if len(jacobians) != 2 or not all(callable(j) for j in jacobians):
                raise ValueError("jacobians: expected a pair (F_jac, H_jac) of callables")
        self._f, self._h = f, h
        self._jac = tuple(jacobians) if jacobians is not None else None
        self._q, self._r, self._x0, self._p0 = q, r, x0a, p0
        self._angles = sorted(set(ang))
        self.nx: int = nx
        self.ny: int = ny
        self.modes: int = 0
        self.kind: str = filter
        self._alpha, self._beta, self._kappa = alpha, beta, kappa
        self._options(filter, alpha, beta, kappa)  # refuse bad options now

    def __repr__(self) -> str:
        name = getattr(self._f, "__name__", "f"), getattr(self._h, "__name__", "h")
        return (
            f"FunctionNonlinearFilter(f={name[0]}, h={name[1]}, nx={self.nx}, ny={self.ny}, "
            f"filter={self.kind!r})"
        )

    # -- options and sigma-point rules ------------------------------------------------

    def _options(
        self, kind: str | None, alpha: float | None, beta: float | None, kappa: float | None
    ) -> tuple[str, np.ndarray | None, np.ndarray | None, float]:
        """The filter kind and, for ukf/ckf, the weights (wm, wc) and the points' scale."""
        kind = self.kind if kind is None else kind
        alpha = self._alpha if alpha is None else float(alpha)
        beta = self._beta if beta is None else float(beta)
        kappa = self._kappa if kappa is None else float(kappa)
        n = self.nx
        if kind == "ekf":
            if self._jac is None:
                raise ValueError(
                    "filter=\"ekf\" needs jacobians=(F_jac, H_jac) (callables returning "
                    "[M, nx, nx] and [M, ny, nx]); a model given as functions has no exact "
                    "Jacobians otherwise (use \"ukf\" or \"ckf\")"
                )
            return kind, None, None, 0.0
        if kind == "ckf":
            w = np.full(2 * n, 1.0 / (2 * n))
            return kind, w, w, float(np.sqrt(n))
        if kind == "ukf":
            if kappa is None:
                kappa = 3.0 - n
            if not (alpha > 0.0) or not np.isfinite(beta) or not np.isfinite(kappa):
                raise ValueError(
                    f"filter: alpha must be positive and beta, kappa finite (alpha = {alpha}, "
                    f"beta = {beta}, kappa = {kappa})"
                )
            c = alpha * alpha * (n + kappa)
            if not (c > 0.0) or not np.isfinite(c):
                raise ValueError(
                    f"filter: alpha^2 (n + kappa) must be positive (n = {n}, alpha = {alpha}, "
                    f"kappa = {kappa})"
                )
            lam = c - n
            wm = np.full(2 * n + 1, 1.0 / (2.0 * c))
            wc = wm.copy()
            wm[0] = lam / c
            wc[0] = lam / c + 1.0 - alpha * alpha + beta
            return kind, wm, wc, float(np.sqrt(c))
        if kind == "iekf":
            raise ValueError(
                "filter: \"iekf\" is not available for a model given as functions "
                "(ekf, ukf or ckf)"
            )
        raise ValueError(f"filter: unknown filter \"{kind}\" (expected ekf, ukf or ckf)")

    # -- the user's functions, checked ---------------------------------------------------

    def _call(self, fn: Any, name: str, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        out = fn(x.copy())
        try:
            a = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name} returned {type(out).__name__}, not a numeric array: {e}") from None
        if a.shape != shape:
            kind = "[M, nx]" if name == "f" else "[M, ny]" if name == "h" else (
                "[M, nx, nx]" if name == "F_jac" else "[M, ny, nx]"
            )
            raise ValueError(
                f"{name} returned an array of shape {a.shape}, expected {shape} ({kind} for "
                f"M = {shape[0]} states)"
            )
        if not np.isfinite(a).all():
            raise ValueError(
                f"{name} returned non-finite values (shape {a.shape}, expected {shape}, all "
                "finite): the state left the function's domain?"
            )
        return a

    # -- one step, every track at once ---------------------------------------------------

    def _points(self, m: np.ndarray, p: np.ndarray, scale: float, central: bool) -> np.ndarray:
        lo = _cholesky_psd(p, "P")
        cols = scale * np.swapaxes(lo, 1, 2)  # [B, i, r]: column i of L
        parts = ([m[:, None, :]] if central else []) + [m[:, None, :] + cols, m[:, None, :] - cols]
        return np.concatenate(parts, axis=1)

    def _transform(
        self, fn: Any, name: str, d: int, angles: list[int], m: np.ndarray, p: np.ndarray,
        rule: tuple[np.ndarray, np.ndarray, float, bool],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        wm, wc, scale, central = rule
        b, n = m.shape
        xs = self._points(m, p, scale, central)
        npt = xs.shape[1]
        ys = self._call(fn, name, xs.reshape(b * npt, n), (b * npt, d)).reshape(b, npt, d)
        mean = np.einsum("p,bpd->bd", wm, ys)
        for a in angles:
            mean[:, a] = np.arctan2(wm @ np.sin(ys[:, :, a]).T, wm @ np.cos(ys[:, :, a]).T)
        dy = ys - mean[:, None, :]
        for a in angles:
            dy[:, :, a] = _wrap(dy[:, :, a])
        dx = xs - m[:, None, :]
        cov = np.einsum("p,bpi,bpj->bij", wc, dy, dy)
        cross = np.einsum("p,bpi,bpj->bij", wc, dx, dy)
        return mean, cov, cross

    def _predict(self, m: np.ndarray, p: np.ndarray, rule: Any) -> tuple[np.ndarray, ...]:
        """The predicted (m', P') and D = Cov(x_{k-1}, x_k)."""
        b, n = m.shape
        if rule is None:
            fm = self._call(self._f, "f", m, (b, n))
            fj = self._call(self._jac[0], "F_jac", m, (b, n, n))
            d = p @ np.swapaxes(fj, 1, 2)
            return fm, _sym(fj @ d + self._q), d
        mean, cov, cross = self._transform(self._f, "f", n, [], m, p, rule)
        return mean, _sym(cov + self._q), cross

    def _update(
        self, m: np.ndarray, p: np.ndarray, z: np.ndarray, rule: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b, n = m.shape
        ny = self.ny
        if rule is None:
            zhat = self._call(self._h, "h", m, (b, ny))
            hj = self._call(self._jac[1], "H_jac", m, (b, ny, n))
            c = p @ np.swapaxes(hj, 1, 2)
            s = hj @ c + self._r
        else:
            zhat, s, c = self._transform(self._h, "h", ny, self._angles, m, p, rule)
            s = s + self._r
        y = z - zhat
        for a in self._angles:
            y[:, a] = _wrap(y[:, a])
        lo = _cholesky(s, "S")
        kt = np.linalg.solve(s, np.swapaxes(c, 1, 2))  # K^T = S^-1 C^T
        m = m + np.einsum("bji,bj->bi", kt, y)
        p = _sym(p - c @ kt)
        w = np.linalg.solve(lo, y[:, :, None])[:, :, 0]
        logdet = np.log(np.diagonal(lo, axis1=1, axis2=2)).sum(axis=1)
        ll = -0.5 * (ny * np.log(2.0 * np.pi) + (w * w).sum(axis=1)) - logdet
        return m, p, ll

    # -- filter and smoother -----------------------------------------------------------------

    def _run(
        self, z: Any, smooth: bool, filter: str | None, alpha: float | None,
        beta: float | None, kappa: float | None, precision: str | None, device: str,
    ) -> NonlinearResult:
        if device not in ("cpu", "auto"):
            raise ValueError(
                f"device: a model given as Python functions runs on the CPU only (device "
                f"\"cpu\" or \"auto\"), got \"{device}\""
            )
        kind, wm, wc, scale = self._options(filter, alpha, beta, kappa)
        rule = None if kind == "ekf" else (wm, wc, scale, kind == "ukf")
        a, _ = to_numpy(z, "z")
        if a.ndim == 2:
            a = a[None]
        if a.ndim != 3:
            raise ValueError(f"z: expected [B, T, ny] or [T, ny], got shape {a.shape}")
        dtype = precision_dtype(precision, a, "cpu")
        zz = as_float(a, "z", dtype).astype(np.float64)  # a copy: the caller's z is untouched
        b, t, ny = zz.shape
        if ny != self.ny:
            raise ValueError(f"the measurements have {ny} components, the model measures {self.ny}")
        if t == 0 or b == 0:
            raise ValueError(f"z: no steps or tracks to filter (shape {zz.shape})")
        n = self.nx
        fm = np.empty((b, t, n))
        fc = np.empty((b, t, n, n))
        ll = np.zeros((b, t))
        m = np.broadcast_to(self._x0, (b, n)).copy()
        p = np.broadcast_to(self._p0, (b, n, n)).copy()
        step = 0  # the step an error names
        try:
            for k in range(t):
                step = k
                if k:
                    m, p, _ = self._predict(m, p, rule)
                obs = ~np.isnan(zz[:, k]).any(axis=1)
                if obs.all():
                    m, p, ll[:, k] = self._update(m, p, zz[:, k], rule)
                elif obs.any():
                    try:
                        mo, po, lo = self._update(m[obs], p[obs], zz[obs, k], rule)
                    except _NotPd as e:  # name the track in the whole batch
                        raise _NotPd(e.what, np.flatnonzero(obs)[e.tracks]) from None
                    m[obs], p[obs], ll[obs, k] = mo, po, lo
                fm[:, k], fc[:, k] = m, p
            if not smooth:
                return self._result(fm, fc, ll, dtype)
            sm, sc = fm.copy(), fc.copy()
            for k in range(t - 2, -1, -1):
                step = k
                mk, pk = fm[:, k], fc[:, k]
                mp, pp, d = self._predict(mk, pk, rule)
                step = k + 1
                _cholesky(pp, "the predicted P")
                gt = np.linalg.solve(pp, np.swapaxes(d, 1, 2))  # G^T = P'^-1 D^T
                g = np.swapaxes(gt, 1, 2)
                sm[:, k] = mk + np.einsum("bij,bj->bi", g, sm[:, k + 1] - mp)
                sc[:, k] = _sym(pk + g @ (sc[:, k + 1] - pp) @ gt)
            return self._result(sm, sc, ll, dtype)
        except _NotPd as e:
            raise ValueError(
                f"track {int(e.tracks[0])}, step {step}: {e.what} is not positive definite"
            ) from None

    @staticmethod
    def _result(mean: np.ndarray, cov: np.ndarray, ll: np.ndarray, dtype: Any) -> NonlinearResult:
        return NonlinearResult(
            mean.astype(dtype, copy=False), cov.astype(dtype, copy=False),
            ll.astype(dtype, copy=False), None,
        )

    def filter(
        self,
        z: Any,
        *,
        filter: str | None = None,
        alpha: float | None = None,
        beta: float | None = None,
        kappa: float | None = None,
        precision: str | None = None,
        device: str = "cpu",
    ) -> NonlinearResult:
        """Filters ``z`` [B, T, ny] (or [T, ny]): ``mean`` [B, T, nx], ``cov``,
        ``loglik`` [B, T]; the options override those given at construction."""
        return self._run(z, False, filter, alpha, beta, kappa, precision, device)

    def smooth(
        self,
        z: Any,
        *,
        method: str = "rts",
        filter: str | None = None,
        alpha: float | None = None,
        beta: float | None = None,
        kappa: float | None = None,
        precision: str | None = None,
        device: str = "cpu",
    ) -> NonlinearResult:
        """The RTS smoother with the filter's linearisation (``method="rts"``, the only
        one here); ``loglik`` is the filter's."""
        if method != "rts":
            raise ValueError(
                f"method: \"{method}\" is not available for a model given as functions (rts)"
            )
        return self._run(z, True, filter, alpha, beta, kappa, precision, device)
