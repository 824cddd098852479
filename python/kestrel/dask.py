"""kestrel on Dask: many tracks over many workers, and one sequence split in time.

``filter(kf, z)`` and ``smooth(kf, z)`` take a :class:`kestrel.KalmanFilter` and a Dask
array ``z`` [B, T, ny] (NaN = missing) and return a :class:`DaskKalmanResult` whose
``mean``, ``cov`` and ``loglik`` are lazy Dask arrays chunked as ``z``:

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
  between workers, each way. The time-split blocks run on the workers' CPUs.
  Both axes may be chunked at once.

``particle_filter(pf, z, particles, ...)`` runs :class:`kestrel.ParticleFilter` over
chunks of B. Its random numbers are Philox streams keyed by the seed and by each track's
index *within its call*, so the result is deterministic for a given chunking (a retried
block draws the same numbers) but changes when the chunks along B change; one chunk gives
exactly ``pf.filter(z)``.

Every task is pure given its inputs (no hidden state, fixed seeds), so Dask may retry a
block lost with its worker and the result is the same. Models pickle (``KalmanFilter``
through its exact TOML form). The inputs are read by the workers from ``z``'s own graph
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _kestrel
from .kalman import KalmanFilter, KalmanResult, outputs_arg

__all__ = ["DaskKalmanResult", "DaskPfResult", "filter", "smooth", "particle_filter"]

def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError as e:  # pragma: no cover - exercised only without dask
        raise ImportError(
            "kestrel.dask needs Dask: pip install 'dask[array]' distributed"
        ) from e
    return dask, da


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


def _selection(kf: KalmanFilter, outputs: Any) -> list[str]:
    """The outputs asked for, checked with the command line's message."""
    text = outputs_arg(outputs)
    sel = [o.strip() for o in text.split(",")]
    if "all" in sel and len(sel) == 1:
        return ["mean", "cov", "loglik"]
    ok = sel and len(set(sel)) == len(sel) and all(o in ("mean", "cov", "diag", "loglik") for o in sel)
    if not ok or ("cov" in sel and "diag" in sel):
        # The native parser words the error exactly as the command line does.
        _kestrel.kalman_estimate(kf.model, np.zeros((1, 1, kf.ny)), outputs=text)
        raise ValueError(f"outputs: cannot use {text!r}")
    return sel


def _offsets(chunks: tuple) -> list[int]:
    return [0, *itertools.accumulate(chunks)][:-1]


# -- worker-side tasks (module-level functions: they pickle by reference) ------------------


def _note(e: BaseException, where: str) -> BaseException:
    if hasattr(e, "add_note"):
        e.add_note(f"(in the Dask block of {where})")
    return e


def _aligned(a: Any) -> np.ndarray:
    """A C-contiguous, aligned array: blocks that Dask ships inside a message may arrive
    at an unaligned address, which the native module does not read in place."""
    return np.require(a, requirements=("C", "A"))


def _b_block(kf: Any, block: np.ndarray, smooth: bool, kwargs: dict, where: str) -> dict:
    run = kf.smooth if smooth else kf.filter
    try:
        r = run(_aligned(block), **kwargs)
    except Exception as e:
        raise _note(e, where)
    return {"mean": r.mean, "cov": r.cov, "loglik": r.loglik, "device": r.device}


def _filter_total(model: Any, z: np.ndarray, b0: int, k0: int) -> np.ndarray:
    try:
        return _kestrel.split_filter_total(model, _aligned(z), b0, k0)
    except Exception as e:
        raise _note(e, f"tracks {b0}.., steps {k0}..")


def _carries(nx: int, smoother: bool, *totals: np.ndarray) -> list:
    return _kestrel.split_carries(nx, [_aligned(t) for t in totals], smoother=smoother)


def _filter_block(model: Any, z: np.ndarray, b0: int, k0: int, carry: Any, scan: str) -> dict:
    try:
        return _kestrel.split_filter_block(model, _aligned(z), b0, k0,
                                           None if carry is None else _aligned(carry), scan)
    except Exception as e:
        raise _note(e, f"tracks {b0}.., steps {k0}..")


def _smooth_total(model: Any, f: dict, b0: int, k0: int, last: bool) -> np.ndarray:
    return _kestrel.split_smooth_total(model, _aligned(f["mean"]), _aligned(f["cov"]), b0, k0, last)


def _smooth_block(model: Any, f: dict, b0: int, k0: int, last: bool, carry: Any, scan: str) -> dict:
    return _kestrel.split_smooth_block(model, _aligned(f["mean"]), _aligned(f["cov"]), b0, k0, last,
                                       None if carry is None else _aligned(carry), scan)


def _diag(c: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.diagonal(c, axis1=-2, axis2=-1))


# -- graphs ------------------------------------------------------------------------------


def _by_tracks(kf, z, smooth, sel, kwargs) -> DaskKalmanResult:
    dask, da = _dask()
    nx = kf.nx
    blocks = z.to_delayed()[:, 0, 0]
    T = z.shape[1]
    outs = {k: [] for k in ("mean", "cov", "loglik")}
    devices = []
    for b0, bsz, blk in zip(_offsets(z.chunks[0]), z.chunks[0], blocks):
        tok = dask.base.tokenize(kf.to_toml(), blk.key, smooth, kwargs)
        task = dask.delayed(_b_block, pure=True)(
            kf, blk, smooth, kwargs, f"tracks {b0}..{b0 + bsz - 1}",
            dask_key_name=f"kestrel-{'smooth' if smooth else 'filter'}-{tok}",
        )
        devices.append(task["device"])
        shapes = {"mean": (bsz, T, nx), "loglik": (bsz, T),
                  "cov": (bsz, T, nx) if "diag" in sel else (bsz, T, nx, nx)}
        for k in outs:
            outs[k].append(da.from_delayed(task[k], shape=shapes[k], dtype=z.dtype))
    res = {}
    for k, want in (("mean", "mean" in sel), ("cov", "cov" in sel or "diag" in sel),
                    ("loglik", "loglik" in sel)):
        res[k] = da.concatenate(outs[k], axis=0) if want else None
    return DaskKalmanResult(devices=devices, **res)


def _by_time(kf, z, smooth, sel, scan) -> DaskKalmanResult:
    dask, da = _dask()
    nx = kf.nx
    model = kf.model
    grid = z.to_delayed()[:, :, 0]
    nb, nt = grid.shape
    b_off, k_off = _offsets(z.chunks[0]), _offsets(z.chunks[1])
    delayed = dask.delayed
    tok = dask.base.tokenize(kf.to_toml(), z.name, scan)
    fins, sfins = [], []
    for i in range(nb):
        b0 = b_off[i]
        totals = [
            delayed(_filter_total, pure=True)(
                model, grid[i, j], b0, k_off[j], dask_key_name=f"kestrel-ftotal-{tok}-{i}-{j}")
            for j in range(nt)
        ]
        carries = delayed(_carries, pure=True, nout=nt)(
            nx, False, *totals, dask_key_name=f"kestrel-fcarry-{tok}-{i}")
        row = [
            delayed(_filter_block, pure=True)(
                model, grid[i, j], b0, k_off[j], carries[j], scan,
                dask_key_name=f"kestrel-fblock-{tok}-{i}-{j}")
            for j in range(nt)
        ]
        fins.append(row)
        if smooth:
            last = [j == nt - 1 for j in range(nt)]
            stot = [
                delayed(_smooth_total, pure=True)(
                    model, row[j], b0, k_off[j], last[j],
                    dask_key_name=f"kestrel-stotal-{tok}-{i}-{j}")
                for j in range(nt)
            ]
            scar = delayed(_carries, pure=True, nout=nt)(
                nx, True, *stot, dask_key_name=f"kestrel-scarry-{tok}-{i}")
            sfins.append([
                delayed(_smooth_block, pure=True)(
                    model, row[j], b0, k_off[j], last[j], scar[j], scan,
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
    return DaskKalmanResult(devices=["cpu"], **res)


def _run(kf: KalmanFilter, z: Any, smooth: bool, device: str, precision: Any, method: str,
         scan: str, outputs: Any) -> DaskKalmanResult:
    if not isinstance(kf, KalmanFilter):
        raise TypeError(f"kf: expected a kestrel.KalmanFilter, got {type(kf).__name__}")
    if not isinstance(device, str):
        raise TypeError(f"device: expected a string, got {type(device).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method: expected a string, got {type(method).__name__}")
    # The option names and messages of the library (an unknown method or scan raises here).
    _kestrel.kalman_estimate(kf.model, np.zeros((1, 1, kf.ny)), smooth=smooth, device="cpu",
                             method=method, scan=scan, outputs="mean")
    sel = _selection(kf, outputs)
    z, one = _as_dask(z, kf.ny, precision)
    parallel = method == ("parallel-rts" if smooth else "parallel")
    if len(z.chunks[1]) > 1:
        if not parallel:
            want = "parallel-rts" if smooth else "parallel"
            raise ValueError(
                f"z is chunked along T ({len(z.chunks[1])} chunks): method \"{method}\" needs "
                f"each track whole; use method=\"{want}\" (the time split) or rechunk z to "
                "one chunk along T"
            )
        if device not in ("auto", "cpu"):
            raise ValueError(
                f'device: the time-split blocks run on the workers\' CPUs (device "auto" or '
                f'"cpu"), got "{device}"'
            )
        res = _by_time(kf, z, smooth, sel, scan)
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


def filter(kf: KalmanFilter, z: Any, device: str = "auto", precision: Any = None,
           method: str = "sequential", scan: str = "fastest",
           outputs: Any = ("mean", "cov", "loglik")) -> DaskKalmanResult:
    """The Kalman filter of :meth:`kestrel.KalmanFilter.filter` over a Dask array ``z``
    [B, T, ny] (or [T, ny]), lazily: chunks along B run as independent calls on the
    workers; chunks along T need ``method="parallel"`` and run the parallel-in-time
    filter split across the workers (see the module). Options as
    :meth:`KalmanFilter.filter` (``progress`` aside: use Dask's own,
    ``distributed.progress``)."""
    return _run(kf, z, False, device, precision, method, scan, outputs)


def smooth(kf: KalmanFilter, z: Any, device: str = "auto", precision: Any = None,
           method: str = "rts", scan: str = "fastest",
           outputs: Any = ("mean", "cov", "loglik")) -> DaskKalmanResult:
    """The smoother of :meth:`kestrel.KalmanFilter.smooth` over a Dask array ``z``,
    lazily: chunks along B as independent calls; chunks along T need
    ``method="parallel-rts"`` (the parallel filter and RTS smoother split across the
    workers). ``loglik`` holds the filter's per-step log-likelihoods."""
    return _run(kf, z, True, device, precision, method, scan, outputs)


def _pf_block(pf: Any, block: np.ndarray, kwargs: dict, where: str) -> dict:
    try:
        r = pf.filter(_aligned(block), **kwargs)
    except Exception as e:
        raise _note(e, where)
    return {"mean": r.mean, "cov": r.cov, "loglik": r.loglik, "ess": r.ess}


def particle_filter(pf: Any, z: Any, particles: int, resample: str = "systematic",
                    ess: float = 0.5, seed: int = 0, device: str = "auto",
                    precision: Any = None) -> DaskPfResult:
    """The bootstrap particle filter of :meth:`kestrel.ParticleFilter.filter` over the
    chunks along B of a Dask array ``z`` (one chunk along T): each block is one call
    with the same ``seed``. The draws are keyed by the track's index within its block,
    so the numbers depend on the chunking along B (deterministic for a given one: a
    retried block gives the same result)."""
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
            pf, blk, kwargs, f"tracks {b0}..{b0 + bsz - 1}", dask_key_name=f"kestrel-pf-{tok}")
        shapes = {"mean": (bsz, T, nx), "cov": (bsz, T, nx, nx), "loglik": (bsz, T),
                  "ess": (bsz, T)}
        for k in outs:
            outs[k].append(da.from_delayed(task[k], shape=shapes[k], dtype=z.dtype))
    res = {k: da.concatenate(v, axis=0) for k, v in outs.items()}
    if one:
        res = {k: v[0] for k, v in res.items()}
    return DaskPfResult(**res)
