"""kestrel on Dask: many tracks over many workers, and one sequence split in time.

``filter(kf, z)`` and ``smooth(kf, z)`` take a :class:`kestrel.KalmanFilter` (time-invariant
or time-varying) or a :class:`kestrel.NonlinearFilter` and a Dask array ``z`` [B, T, ny]
(NaN = missing) and return a :class:`DaskKalmanResult` (a :class:`DaskNonlinearResult`
for a NonlinearFilter) whose ``mean``, ``cov`` and ``loglik`` (and an IMM's
``mode_probs``) are lazy Dask arrays chunked as ``z``:

- **chunks along B** (one chunk along T): each block of tracks is an independent
  ``KalmanFilter.filter`` / ``smooth`` call on a worker, with ``device`` resolved there
  (``"auto"``: a worker with a usable GPU uses it).
- **chunks along T** (``method="parallel"`` for the filter, ``"parallel-rts"`` for the
  smoother): the parallel-in-time scan of Sarkka & Garcia-Fernandez ("Temporal
  parallelization of Bayesian smoothers", IEEE TAC 2021; Algorithms 5 and 6) spread over
  the workers, as ``kestrel::parallel::blocks`` (the CPU counterpart of the library's
  multi-GPU split): each block reduces its filtering elements ``(A, b, C, eta, J)``
  (eqs. 43-45, Lemma 3) to one total per track; the totals of a row of blocks are scanned
  in one small task (block j's carry is ``total_0 x ... x total_{j-1}``, the filtered
  moments of the step before it); each block then rebuilds its elements behind its carry
  and scans them. The smoother does the same from the right with the elements
  ``(E, g, L)`` (eqs. 49-50, Lemma 4) built from the filtered moments. The result equals
  the single-process ``method="parallel"`` / ``"parallel-rts"`` run to rounding (the
  combines run in another order). Only one element per track and block boundary moves
  between workers, each way. The filter's blocks run where ``device`` resolves on each
  worker (``"auto"``: its GPU when it has a usable one, as with ``LocalCUDACluster``; the
  GPU's fused scan of ``kestrel::parallel::cuda``, totals and carries interchangeable with
  the CPU's); the smoother's backward passes run on the workers' CPUs. Both axes may be
  chunked at once.

Which models each split takes: chunks along B, any of them (a ``NonlinearFilter``: EKF,
UKF, CKF, IEKF, their RTS and iterated smoothers, IMM files; each block is one
``nf.filter`` / ``nf.smooth`` call, so the result equals the single-process run bit for
bit, with the options ``filter``, ``iterations``, ``alpha``, ``beta``, ``kappa``; one
track ``z`` [T, ny] keeps its B axis of 1, as there; a model of
``NonlinearFilter.from_functions`` too, its functions pickled with the tasks, equal to
rounding: NumPy's products may sum in another order for another batch size). Chunks
along T, a ``KalmanFilter`` only: the parallel-in-time scan needs a linear model, and a
``NonlinearFilter`` over chunks along T is refused (rechunk z along tracks only). A
time-varying model takes the time split too: each worker rebuilds the model once and the
native split passes read its matrices at each block's global steps.

``particle_filter(pf, z, particles, ...)`` runs :class:`kestrel.ParticleFilter` over
chunks of B. Its random numbers are Philox streams keyed by the seed and by each track's
index in the whole batch (each block is called with its first track's index,
``first_track``), so the result is exactly ``pf.filter(z)``'s whatever the chunking, and a
retried block draws the same numbers.

``tbd(frames, halo=None, **options)`` runs :func:`kestrel.tbd` over the spatial chunks of
a Dask array of frames [T, H, W]: each tile with a border of its neighbours' pixels wide
enough for every motion path and the non-maximum suppression (by default the whole
run's: the detections then equal the whole frame's exactly), the threshold calibrated
once on the whole frame 0.

Every task is pure given its inputs (no hidden state, fixed seeds), so Dask may retry a
block lost with its worker and the result is the same. Models pickle (``KalmanFilter``
through its exact TOML form, ``NonlinearFilter`` as its file's text; a time-varying
``KalmanFilter``, which has no TOML form, goes by value: its arrays, from which each
worker rebuilds it once). The inputs are read by the workers from ``z``'s own graph
(Zarr, NPY, ``from_array``...): nothing passes through the client. dask is imported
when first used, so ``import kestrel.dask`` works without it.

>>> import dask.array as da, numpy as np, kestrel, kestrel.dask
>>> kf = kestrel.KalmanFilter(F=[[1, 1], [0, 1]], H=[[1, 0]], Q=0.01 * np.eye(2), R=[[1.0]])
>>> z = da.from_array(np.random.default_rng(0).normal(size=(4, 100, 1)), chunks=(4, 25, 1))
>>> kestrel.dask.smooth(kf, z, method="parallel-rts").compute().mean.shape
(4, 100, 2)
"""

from __future__ import annotations

import itertools
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _kestrel
from .kalman import KalmanFilter, KalmanResult, outputs_arg
from .nonlinear import FunctionNonlinearFilter, NonlinearFilter, NonlinearResult
from ._dask_common import _aligned, _dask, _note, _offsets
from ._dask_tbd import DaskTbdResult, tbd

__all__ = ["DaskKalmanResult", "DaskNonlinearResult", "DaskPfResult", "DaskTbdResult", "filter",
           "smooth", "particle_filter", "tbd"]

@dataclass
class DaskKalmanResult:
    """Lazy estimates: ``mean`` [B, T, nx], ``cov`` [B, T, nx, nx] (or the variances
    [B, T, nx] with ``outputs=("diag",)``), ``loglik`` [B, T] as Dask arrays chunked as
    ``z`` (None where not asked for). ``compute()`` computes them together (one pass over
    the graph: computing the arrays one at a time would run it once each)."""

    mean: Any
    cov: Any
    loglik: Any
    devices: Any = field(default=None, repr=False)
    one: bool = field(default=False, repr=False)

    def _arrays(self) -> list:
        return [a for a in (self.mean, self.cov, self.loglik) if a is not None]

    def compute(self, **kwargs: Any) -> KalmanResult:
        """The estimates as NumPy arrays in a :class:`kestrel.KalmanResult`;
        ``device`` names where the blocks ran (``"dask[cpu]"``, ``"dask[cpu,cuda:0]"``)."""
        dask, _ = _dask()
        names = [n for n in ("mean", "cov", "loglik") if getattr(self, n) is not None]
        devs = self.devices if self.devices is not None else []
        out = dask.compute(*[getattr(self, n) for n in names], devs, **kwargs)
        res = {n: None for n in ("mean", "cov", "loglik")}
        for n, v in zip(names, out[:-1]):
            res[n] = v[0] if self.one else v
        ran = sorted(set(out[-1])) or ["cpu"]
        return KalmanResult(device=f"dask[{','.join(ran)}]", **res)

    def persist(self, **kwargs: Any) -> "DaskKalmanResult":
        """The same result with its arrays computed and kept on the workers."""
        dask, _ = _dask()
        names = [n for n in ("mean", "cov", "loglik") if getattr(self, n) is not None]
        out = dask.persist(*[getattr(self, n) for n in names], **kwargs)
        res = {n: None for n in ("mean", "cov", "loglik")}
        res.update(zip(names, out))
        return DaskKalmanResult(devices=self.devices, one=self.one, **res)


@dataclass
class DaskNonlinearResult:
    """Lazy estimates of a :class:`kestrel.NonlinearFilter` (:class:`kestrel.NonlinearResult`'s
    fields): ``mean`` [B, T, nx], ``cov`` [B, T, nx, nx] (or the variances [B, T, nx] with
    ``outputs=("diag",)``), ``loglik`` [B, T] and, for an IMM file, ``mode_probs``
    [B, T, r] (None for one model), as Dask arrays chunked along B as ``z`` (None where not
    asked for). ``compute()`` computes them together."""

    mean: Any
    cov: Any
    loglik: Any
    mode_probs: Any

    _names = ("mean", "cov", "loglik", "mode_probs")

    def compute(self, **kwargs: Any) -> NonlinearResult:
        """The estimates as NumPy arrays in a :class:`kestrel.NonlinearResult`."""
        dask, _ = _dask()
        names = [n for n in self._names if getattr(self, n) is not None]
        out = dask.compute(*[getattr(self, n) for n in names], **kwargs)
        res = dict.fromkeys(self._names)
        res.update(zip(names, out))
        return NonlinearResult(**res)

    def persist(self, **kwargs: Any) -> "DaskNonlinearResult":
        """The same result with its arrays computed and kept on the workers."""
        dask, _ = _dask()
        names = [n for n in self._names if getattr(self, n) is not None]
        out = dask.persist(*[getattr(self, n) for n in names], **kwargs)
        res = dict.fromkeys(self._names)
        res.update(zip(names, out))
        return DaskNonlinearResult(**res)


@dataclass
class DaskPfResult:
    """Lazy particle filter estimates (``kestrel.ParticleFilter.filter``'s ``mean``,
    ``cov``, ``loglik``, ``ess``) as Dask arrays chunked along B as ``z``."""

    mean: Any
    cov: Any
    loglik: Any
    ess: Any
    one: bool = field(default=False, repr=False)

    def compute(self, **kwargs: Any) -> dict:
        """The four arrays as NumPy arrays, computed together (a dict by name)."""
        dask, _ = _dask()
        out = dask.compute(self.mean, self.cov, self.loglik, self.ess, **kwargs)
        return {n: (v[0] if self.one else v) for n, v in zip(("mean", "cov", "loglik", "ess"), out)}


# -- inputs ------------------------------------------------------------------------------


def _as_dask(z: Any, ny: int, precision: Any):
    """``z`` as a 3-D Dask array of the run's float dtype, one chunk along ny; whether it
    was one track [T, ny]."""
    _, da = _dask()
    if not isinstance(z, da.Array):
        z = da.asarray(z)
    one = False
    if z.ndim == 2:
        z, one = z[None], True
    elif z.ndim != 3:
        raise ValueError(f"z: expected measurements [B, T, ny] or [T, ny], got shape {z.shape}")
    if not math.isnan(z.shape[2]) and z.shape[2] != ny:
        raise ValueError(f"z: measurements have {z.shape[2]} components, the model measures {ny}")
    if any(math.isnan(c) for c in itertools.chain(*z.chunks)):
        raise ValueError("z: unknown chunk sizes; call z.compute_chunk_sizes() first")
    if z.dtype.kind not in "biuf":
        raise TypeError(f"z: expected a numeric array, got dtype {z.dtype}")
    if precision is None:
        dtype = z.dtype if z.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    elif precision in ("f32", "float32", np.float32):
        dtype = np.dtype(np.float32)
    elif precision in ("f64", "float64", np.float64):
        dtype = np.dtype(np.float64)
    else:
        raise ValueError(f'precision: expected "f32" or "f64", got {precision!r}')
    if z.dtype != dtype:
        z = z.astype(dtype)
    if len(z.chunks[2]) > 1:
        z = z.rechunk({2: -1})
    if 0 in z.shape:
        raise ValueError(f"z: no measurements ({z.shape[0]} tracks x {z.shape[1]} steps)")
    return z, one


def _selection(model: Any, outputs: Any) -> list[str]:
    """The outputs asked for, checked with the command line's message (``model``: any
    native linear model, for the parser's call)."""
    text = outputs_arg(outputs)
    sel = [o.strip() for o in text.split(",")]
    if "all" in sel and len(sel) == 1:
        return ["mean", "cov", "loglik"]
    ok = sel and len(set(sel)) == len(sel) and all(o in ("mean", "cov", "diag", "loglik") for o in sel)
    if not ok or ("cov" in sel and "diag" in sel):
        # The native parser words the error exactly as the command line does.
        _kestrel.kalman_estimate(model, np.zeros((1, 1, model.ny)), outputs=text)
        raise ValueError(f"outputs: cannot use {text!r}")
    return sel


# -- worker-side tasks (module-level functions: they pickle by reference) ------------------


def _b_block(kf: Any, block: np.ndarray, smooth: bool, kwargs: dict, where: str) -> dict:
    run = kf.smooth if smooth else kf.filter
    try:
        r = run(_aligned(block), **kwargs)
    except Exception as e:
        raise _note(e, where)
    return {"mean": r.mean, "cov": r.cov, "loglik": r.loglik, "device": r.device}


def _nl_block(nf: NonlinearFilter, block: np.ndarray, smooth: bool, kwargs: dict,
              diag: bool, where: str) -> dict:
    run = nf.smooth if smooth else nf.filter
    try:
        r = run(_aligned(block), **kwargs)
    except Exception as e:
        raise _note(e, where)
    return {"mean": r.mean, "cov": _diag(r.cov) if diag else r.cov, "loglik": r.loglik,
            "mode_probs": r.mode_probs}


_STEP_NAMES = ("F", "Q", "u", "H", "R", "d")
_LOADED: dict = {}


def _step_mats(model: Any) -> dict:
    """A time-varying model's per-step arrays and prior (each getter copies them all)."""
    return {n: np.ascontiguousarray(getattr(model, n)) for n in (*_STEP_NAMES, "x0", "P0")}


class _Varying:
    """A time-varying :class:`KalmanFilter` shipped to the workers by value (its per-step
    arrays and prior): ``KalmanFilter`` pickles through its TOML form, which a time-varying
    model lacks, and a worker may not see the caller's files. A worker rebuilds the model
    once (from a model file and ``.npz`` it writes to a temporary folder: the numbers are
    the same bits) and keeps it for the graph's other blocks."""

    def __init__(self, mats: dict, token: str) -> None:
        self.mats = mats
        self.token = token

    def _kf(self) -> KalmanFilter:
        kf = _LOADED.get(self.token)
        if kf is None:
            m = self.mats

            def row(v: np.ndarray) -> str:
                return "[" + ", ".join(repr(float(x)) for x in v) + "]"

            with tempfile.TemporaryDirectory(prefix="kestrel-dask-") as d:
                np.savez(os.path.join(d, "steps.npz"), **{n: m[n] for n in _STEP_NAMES})
                path = os.path.join(d, "model.toml")
                with open(path, "w", encoding="utf-8") as f:
                    f.write('[model]\nkind = "time-varying"\nfile = "steps.npz"\n[prior]\n'
                            f"x0 = {row(m['x0'])}\n"
                            f"P0 = [{', '.join(row(r) for r in m['P0'])}]\n")
                kf = KalmanFilter.from_toml(path)
            if len(_LOADED) >= 4:
                _LOADED.clear()
            _LOADED[self.token] = kf
        return kf

    def filter(self, z: np.ndarray, **kwargs: Any) -> KalmanResult:
        return self._kf().filter(z, **kwargs)

    def smooth(self, z: np.ndarray, **kwargs: Any) -> KalmanResult:
        return self._kf().smooth(z, **kwargs)


def _native(model: Any) -> Any:
    """The native model of a time-split block: a time-invariant ``Model`` as shipped, or
    the ``TimeVaryingModel`` a worker rebuilds once from a shipped :class:`_Varying`
    (the split passes read its matrices at the block's global steps)."""
    return model._kf().model if isinstance(model, _Varying) else model


def _filter_total(model: Any, z: np.ndarray, b0: int, k0: int, device: str) -> np.ndarray:
    try:
        return _kestrel.split_filter_total(_native(model), _aligned(z), b0, k0, device)
    except Exception as e:
        raise _note(e, f"tracks {b0}.., steps {k0}..")


def _carries(nx: int, smoother: bool, *totals: np.ndarray) -> list:
    return _kestrel.split_carries(nx, [_aligned(t) for t in totals], smoother=smoother)


def _filter_block(model: Any, z: np.ndarray, b0: int, k0: int, carry: Any, scan: str,
                  device: str) -> dict:
    carry = None if carry is None else _aligned(carry)
    try:
        return _kestrel.split_filter_block(_native(model), _aligned(z), b0, k0, carry, scan,
                                           device)
    except Exception as e:
        raise _note(e, f"tracks {b0}.., steps {k0}..")


def _smooth_total(model: Any, f: dict, b0: int, k0: int, last: bool) -> np.ndarray:
    return _kestrel.split_smooth_total(_native(model), _aligned(f["mean"]), _aligned(f["cov"]),
                                       b0, k0, last)


def _smooth_block(model: Any, f: dict, b0: int, k0: int, last: bool, carry: Any, scan: str) -> dict:
    carry = None if carry is None else _aligned(carry)
    return _kestrel.split_smooth_block(_native(model), _aligned(f["mean"]), _aligned(f["cov"]),
                                       b0, k0, last, carry, scan)


def _diag(c: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.diagonal(c, axis1=-2, axis2=-1))


# -- graphs ------------------------------------------------------------------------------


def _identity(kf: Any) -> tuple[Any, dict | None]:
    """What names the model in the graph's keys; a time-varying model's arrays (else None)."""
    if isinstance(kf, NonlinearFilter):
        return ("nonlinear", kf._text, kf._origin), None
    if isinstance(kf, FunctionNonlinearFilter):
        # Its functions travel with it (Dask pickles tasks with cloudpickle).
        dask, _ = _dask()
        return ("functions", dask.base.tokenize(kf)), None
    if kf.time_varying:
        dask, _ = _dask()
        mats = _step_mats(kf.model)
        return ("time-varying", dask.base.tokenize(*(mats[n] for n in sorted(mats)))), mats
    return kf.to_toml(), None


def _shipped(kf: Any) -> tuple[Any, Any]:
    """The model as one task of the graph (each worker fetches it once) and its identity."""
    dask, _ = _dask()
    ident, mats = _identity(kf)
    obj = kf if mats is None else _Varying(mats, ident[1])
    return dask.delayed(obj, name=f"kestrel-model-{dask.base.tokenize(ident)}"), ident


def _along_b(fn, model, ident, z, args: tuple, shapes: dict, what: str) -> tuple[dict, list]:
    """One task ``fn(model, block, *args, where)`` per chunk along B; the outputs named in
    ``shapes`` (name -> shape of a block of b tracks and t steps) concatenated along B, and
    the tasks."""
    dask, da = _dask()
    T = z.shape[1]
    outs = {k: [] for k in shapes}
    tasks = []
    for b0, bsz, blk in zip(_offsets(z.chunks[0]), z.chunks[0], z.to_delayed()[:, 0, 0]):
        tok = dask.base.tokenize(ident, blk.key, *args)
        task = dask.delayed(fn, pure=True)(
            model, blk, *args, f"tracks {b0}..{b0 + bsz - 1}",
            dask_key_name=f"kestrel-{what}-{tok}",
        )
        tasks.append(task)
        for k, shape in shapes.items():
            outs[k].append(da.from_delayed(task[k], shape=shape(bsz, T), dtype=z.dtype))
    return {k: da.concatenate(v, axis=0) for k, v in outs.items()}, tasks


def _shapes(sel: list[str], nx: int) -> dict:
    shapes = {}
    if "mean" in sel:
        shapes["mean"] = lambda b, t: (b, t, nx)
    if "cov" in sel:
        shapes["cov"] = lambda b, t: (b, t, nx, nx)
    if "diag" in sel:
        shapes["cov"] = lambda b, t: (b, t, nx)
    if "loglik" in sel:
        shapes["loglik"] = lambda b, t: (b, t)
    return shapes


def _by_tracks(kf, z, smooth, sel, kwargs) -> DaskKalmanResult:
    model, ident = _shipped(kf)
    arrays, tasks = _along_b(_b_block, model, ident, z, (smooth, kwargs), _shapes(sel, kf.nx),
                             "smooth" if smooth else "filter")
    res = {k: arrays.get(k) for k in ("mean", "cov", "loglik")}
    return DaskKalmanResult(devices=[t["device"] for t in tasks], **res)


def _nl_by_tracks(nf, z, smooth, sel, kwargs) -> DaskNonlinearResult:
    model, ident = _shipped(nf)
    shapes = _shapes(sel, nf.nx)
    modes = getattr(nf, "modes", 0)
    if modes:
        shapes["mode_probs"] = lambda b, t: (b, t, modes)
    arrays, _ = _along_b(_nl_block, model, ident, z, (smooth, kwargs, "diag" in sel), shapes,
                         "nonlinear-smooth" if smooth else "nonlinear-filter")
    return DaskNonlinearResult(**{k: arrays.get(k) for k in DaskNonlinearResult._names})


def _by_time(kf, z, smooth, sel, scan, device) -> DaskKalmanResult:
    dask, da = _dask()
    nx = kf.nx
    grid = z.to_delayed()[:, :, 0]
    nb, nt = grid.shape
    b_off, k_off = _offsets(z.chunks[0]), _offsets(z.chunks[1])
    delayed = dask.delayed
    ident, mats = _identity(kf)
    tok = dask.base.tokenize(ident, z.name, scan, device)
    if mats is None:
        models = [kf.model] * nt
    else:
        # The model by value, fetched once by each worker that runs a block.
        shipped = delayed(_Varying(mats, ident[1]), name=f"kestrel-model-{tok}")
        models = [shipped] * nt
    fins, sfins = [], []
    for i in range(nb):
        b0 = b_off[i]
        totals = [
            delayed(_filter_total, pure=True)(
                models[j], grid[i, j], b0, k_off[j], device,
                dask_key_name=f"kestrel-ftotal-{tok}-{i}-{j}")
            for j in range(nt)
        ]
        carries = delayed(_carries, pure=True, nout=nt)(
            nx, False, *totals, dask_key_name=f"kestrel-fcarry-{tok}-{i}")
        row = [
            delayed(_filter_block, pure=True)(
                models[j], grid[i, j], b0, k_off[j], carries[j], scan, device,
                dask_key_name=f"kestrel-fblock-{tok}-{i}-{j}")
            for j in range(nt)
        ]
        fins.append(row)
        if smooth:
            last = [j == nt - 1 for j in range(nt)]
            stot = [
                delayed(_smooth_total, pure=True)(
                    models[j], row[j], b0, k_off[j], last[j],
                    dask_key_name=f"kestrel-stotal-{tok}-{i}-{j}")
                for j in range(nt)
            ]
            scar = delayed(_carries, pure=True, nout=nt)(
                nx, True, *stot, dask_key_name=f"kestrel-scarry-{tok}-{i}")
            sfins.append([
                delayed(_smooth_block, pure=True)(
                    models[j], row[j], b0, k_off[j], last[j], scar[j], scan,
                    dask_key_name=f"kestrel-sblock-{tok}-{i}-{j}")
                for j in range(nt)
            ])

    def grid_of(src, key, shape_of, post=None):
        rows = []
        for i in range(nb):
            cols = []
            for j in range(nt):
                part = src[i][j][key]
                if post is not None:
                    part = delayed(post, pure=True)(part)
                cols.append(da.from_delayed(
                    part, shape=shape_of(z.chunks[0][i], z.chunks[1][j]), dtype=z.dtype))
            rows.append(da.concatenate(cols, axis=1))
        return da.concatenate(rows, axis=0)

    moments = sfins if smooth else fins
    res = {"mean": None, "cov": None, "loglik": None}
    if "mean" in sel:
        res["mean"] = grid_of(moments, "mean", lambda b, t: (b, t, nx))
    if "cov" in sel:
        res["cov"] = grid_of(moments, "cov", lambda b, t: (b, t, nx, nx))
    if "diag" in sel:
        res["cov"] = grid_of(moments, "cov", lambda b, t: (b, t, nx), _diag)
    if "loglik" in sel:
        res["loglik"] = grid_of(fins, "loglik", lambda b, t: (b, t))
    # Where the filter's blocks ran (each reports its device); the smoother's passes run
    # on the workers' CPUs.
    devices = [row[j]["device"] for row in fins for j in range(nt)]
    if smooth:
        devices.append("cpu")
    return DaskKalmanResult(devices=devices, **res)


def _run_nonlinear(nf: NonlinearFilter, z: Any, smooth: bool, device: str, precision: Any,
                   method: str, scan: str, outputs: Any, options: dict) -> DaskNonlinearResult:
    if not isinstance(device, str):
        raise TypeError(f"device: expected a string, got {type(device).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method: expected a string, got {type(method).__name__}")
    z, _ = _as_dask(z, nf.ny, precision)
    if len(z.chunks[1]) > 1:
        raise ValueError(
            f"z is chunked along T ({len(z.chunks[1])} chunks): the time split (method="
            '"parallel" / "parallel-rts") needs a linear model (kestrel.KalmanFilter); a '
            "NonlinearFilter runs each track whole: rechunk z along tracks only (one chunk "
            "along T: z.rechunk({1: -1}))"
        )
    if not smooth and method != "sequential":
        raise ValueError(
            f'method: a NonlinearFilter filters each track in order (method "sequential"), '
            f'got "{method}"'
        )
    if scan != "fastest":
        raise ValueError(f'scan: a NonlinearFilter runs no associative scan, got "{scan}"')
    sel = _selection(KalmanFilter(F=[[1.0]], H=[[1.0]], Q=[[1.0]], R=[[1.0]]).model, outputs)
    kwargs = dict(device=device, **{k: v for k, v in options.items() if v is not None})
    if smooth:
        kwargs["method"] = method
    if precision is not None:
        kwargs["precision"] = precision
    # The library's checks and words (an unknown filter or smoother, an IMM smoother, a GPU)
    # when the graph is built: one missing measurement (the prior alone).
    (nf.smooth if smooth else nf.filter)(np.full((1, 1, nf.ny), np.nan, z.dtype), **kwargs)
    return _nl_by_tracks(nf, z, smooth, sel, kwargs)


def _run(kf: Any, z: Any, smooth: bool, device: str, precision: Any, method: str,
         scan: str, outputs: Any, options: dict) -> Any:
    if isinstance(kf, (NonlinearFilter, FunctionNonlinearFilter)):
        return _run_nonlinear(kf, z, smooth, device, precision, method, scan, outputs, options)
    if not isinstance(kf, KalmanFilter):
        raise TypeError("kf: expected a kestrel.KalmanFilter or kestrel.NonlinearFilter (from a "
                        f"file or NonlinearFilter.from_functions), got {type(kf).__name__}")
    given = [k for k, v in options.items() if v is not None]
    if given:
        raise TypeError(f"{given[0]}: an option of a NonlinearFilter; kf is a KalmanFilter")
    if not isinstance(device, str):
        raise TypeError(f"device: expected a string, got {type(device).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method: expected a string, got {type(method).__name__}")
    # The option names and messages of the library (an unknown method or scan raises here).
    _kestrel.kalman_estimate(kf.model, np.zeros((1, 1, kf.ny)), smooth=smooth, device="cpu",
                             method=method, scan=scan, outputs="mean")
    sel = _selection(kf.model, outputs)
    z, one = _as_dask(z, kf.ny, precision)
    if kf.time_varying and z.shape[1] > kf.model.steps:
        raise ValueError(f"the time-varying model has matrices for {kf.model.steps} steps, "
                         f"the measurements have {z.shape[1]}")
    parallel = method == ("parallel-rts" if smooth else "parallel")
    if len(z.chunks[1]) > 1:
        if not parallel:
            want = "parallel-rts" if smooth else "parallel"
            raise ValueError(
                f"z is chunked along T ({len(z.chunks[1])} chunks): method \"{method}\" needs "
                f"each track whole; use method=\"{want}\" (the time split) or rechunk z to "
                "one chunk along T"
            )
        # The name is checked here; whether the device is usable, on each worker.
        if re.fullmatch(r"auto|cpu|cuda|cuda:all|cuda:[0-9]+", device) is None:
            raise ValueError(f'unknown device "{device}" (expected auto, cpu, cuda, cuda:N or '
                             "cuda:all)")
        res = _by_time(kf, z, smooth, sel, scan, device)
    else:
        kwargs = dict(device=device, method=method, scan=scan, outputs=",".join(sel))
        if precision is not None:
            kwargs["precision"] = precision
        res = _by_tracks(kf, z, smooth, sel, kwargs)
    res.one = one
    if one:
        for n in ("mean", "cov", "loglik"):
            v = getattr(res, n)
            if v is not None:
                setattr(res, n, v[0])
        res.one = False
    return res


def filter(kf: KalmanFilter | NonlinearFilter, z: Any, device: str = "auto",
           precision: Any = None, method: str = "sequential", scan: str = "fastest",
           outputs: Any = ("mean", "cov", "loglik"), *, filter: str | None = None,
           iterations: int | None = None, alpha: float | None = None,
           beta: float | None = None, kappa: float | None = None) -> Any:
    """The filter of :meth:`kestrel.KalmanFilter.filter` (a :class:`DaskKalmanResult`) or
    :meth:`kestrel.NonlinearFilter.filter` (a :class:`DaskNonlinearResult`) over a Dask
    array ``z`` [B, T, ny] (or [T, ny]), lazily: chunks along B run as independent calls
    on the workers; chunks along T need a ``KalmanFilter`` and ``method="parallel"`` and
    run the parallel-in-time filter split across the workers (see the module). Options as
    :meth:`KalmanFilter.filter` (``progress`` aside: use Dask's own,
    ``distributed.progress``); ``filter``, ``iterations``, ``alpha``, ``beta``, ``kappa``
    as :meth:`NonlinearFilter.filter` (a NonlinearFilter only)."""
    return _run(kf, z, False, device, precision, method, scan, outputs,
                dict(filter=filter, iterations=iterations, alpha=alpha, beta=beta, kappa=kappa))


def smooth(kf: KalmanFilter | NonlinearFilter, z: Any, device: str = "auto",
           precision: Any = None, method: str = "rts", scan: str = "fastest",
           outputs: Any = ("mean", "cov", "loglik"), *, filter: str | None = None,
           iterations: int | None = None, alpha: float | None = None,
           beta: float | None = None, kappa: float | None = None) -> Any:
    """The smoother of :meth:`kestrel.KalmanFilter.smooth` or
    :meth:`kestrel.NonlinearFilter.smooth` (``method="rts"`` or ``"iterated"``) over a
    Dask array ``z``, lazily: chunks along B as independent calls; chunks along T need a
    ``KalmanFilter`` and ``method="parallel-rts"`` (the parallel filter and RTS smoother
    split across the workers). ``loglik`` holds the filter's per-step log-likelihoods."""
    return _run(kf, z, True, device, precision, method, scan, outputs,
                dict(filter=filter, iterations=iterations, alpha=alpha, beta=beta, kappa=kappa))


def _pf_block(pf: Any, block: np.ndarray, b0: int, kwargs: dict, where: str) -> dict:
    try:
        r = pf.filter(_aligned(block), first_track=b0, **kwargs)
    except Exception as e:
        raise _note(e, where)
    return {"mean": r.mean, "cov": r.cov, "loglik": r.loglik, "ess": r.ess}


def particle_filter(pf: Any, z: Any, particles: int, resample: str = "systematic",
                    ess: float = 0.5, seed: int = 0, device: str = "auto",
                    precision: Any = None) -> DaskPfResult:
    """The bootstrap particle filter of :meth:`kestrel.ParticleFilter.filter` over the
    chunks along B of a Dask array ``z`` (one chunk along T): each block is one call
    with the same ``seed`` and its first track's index (``first_track``): the draws are
    keyed by each track's index in the whole batch, so the result is exactly
    ``pf.filter(z)``'s whatever the chunking, and a retried block gives the same."""
    dask, da = _dask()
    from .particle import ParticleFilter

    if not isinstance(pf, ParticleFilter):
        raise TypeError(f"pf: expected a kestrel.ParticleFilter, got {type(pf).__name__}")
    z, one = _as_dask(z, pf.ny, precision)
    if len(z.chunks[1]) > 1:
        raise ValueError(
            f"z is chunked along T ({len(z.chunks[1])} chunks): the particle filter needs "
            "each track whole; rechunk z to one chunk along T"
        )
    kwargs = dict(particles=particles, resample=resample, ess=ess, seed=seed, device=device)
    if precision is not None:
        kwargs["precision"] = precision
    nx, T = pf.nx, z.shape[1]
    outs = {k: [] for k in ("mean", "cov", "loglik", "ess")}
    for b0, bsz, blk in zip(_offsets(z.chunks[0]), z.chunks[0], z.to_delayed()[:, 0, 0]):
        tok = dask.base.tokenize(pf.to_toml(), blk.key, kwargs)
        task = dask.delayed(_pf_block, pure=True)(
            pf, blk, b0, kwargs, f"tracks {b0}..{b0 + bsz - 1}",
            dask_key_name=f"kestrel-pf-{tok}")
        shapes = {"mean": (bsz, T, nx), "cov": (bsz, T, nx, nx), "loglik": (bsz, T),
                  "ess": (bsz, T)}
        for k in outs:
            outs[k].append(da.from_delayed(task[k], shape=shapes[k], dtype=z.dtype))
    res = {k: da.concatenate(v, axis=0) for k, v in outs.items()}
    if one:
        res = {k: v[0] for k, v in res.items()}
    return DaskPfResult(**res)
