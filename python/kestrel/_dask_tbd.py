"""``kestrel.dask.tbd``: track-before-detect over the spatial tiles of a Dask array of
frames (re-exported by :mod:`kestrel.dask`, whose documentation describes it)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._dask_common import _aligned, _dask, _note, _offsets


@dataclass
class DaskTbdResult:
    """Lazy track-before-detect over frame tiles: ``detections`` and ``threshold`` are
    Dask delayed objects; :meth:`compute` gives a :class:`kestrel.TbdResult`."""

    detections: Any
    threshold: Any
    noise: Any
    motions: np.ndarray
    devices: Any = field(default=None, repr=False)

    def compute(self, **kwargs: Any) -> Any:
        """The detections of every tile in one :class:`kestrel.TbdResult` (in the order of
        ``kestrel tbd``: by frame, then raster order); ``device`` names where the tiles
        ran (``"dask[cpu]"``)."""
        from .tbd import TbdResult

        dask, _ = _dask()
        det, thr, noise, devs = dask.compute(self.detections, self.threshold, self.noise,
                                             self.devices or [], **kwargs)
        ran = sorted(set(devs)) or ["cpu"]
        return TbdResult(detections=det, threshold=thr, motions=self.motions, state=None,
                         map_t=None, map_score=None, map_arg=None, noise=noise,
                         device=f"dask[{','.join(ran)}]", kernel=None)


def _tbd_calibrate(frame0: np.ndarray, options: dict) -> tuple:
    from .tbd import tbd as run

    r = run(np.asarray(frame0)[None], **options)
    return r.threshold, r.noise


def _tbd_tile(block: np.ndarray, at: tuple, inner: tuple, cal: tuple, options: dict,
              where: str) -> dict:
    from .tbd import tbd as run

    (oy, ox), (y0, y1, x0, x1) = at, inner
    try:
        r = run(_aligned(block), threshold=cal[0], **options)
    except Exception as e:
        raise _note(e, where)
    d = r.detections.copy()
    d["x"] += ox
    d["y"] += oy
    keep = (d["y"] >= y0) & (d["y"] < y1) & (d["x"] >= x0) & (d["x"] < x1)
    return {"detections": d[keep], "device": r.device}


def _tbd_merge(parts: list) -> np.ndarray:
    from .tbd import DETECTION_DTYPE

    d = np.concatenate([p["detections"] for p in parts]) if parts else \
        np.zeros(0, DETECTION_DTYPE)
    return d[np.lexsort((d["x"], d["y"], d["t"]))]


def tbd(frames: Any, halo: int | None = None, **options: Any) -> DaskTbdResult:
    """``kestrel.tbd`` over the spatial chunks of a Dask array ``frames`` [T, H, W] (one
    chunk along T): each chunk is a tile, run with a border of ``halo`` pixels of its
    neighbours around it and keeping the detections inside it.

    The state at a pixel after frame k depends on frames within ``ceil(max |v|)`` pixels a
    frame of it (the motion vectors), and a detection on the scores within ``nms``
    pixels. So the default halo, ``ceil(max(|vx|, |vy|)) (T - 1) + nms + 1``, gives every
    tile exactly the whole-frame run's detections. The state forgets at ``(1 - alpha)`` a
    frame: for long runs a halo of ``ceil(max |v|) ln(eps) / ln(1 - alpha) + nms + 1``
    (about 350 pixels at speed 1, alpha 0.1, eps 1e-16) gives them to rounding. Tiling
    fits when the halo is small beside the tiles.

    The threshold is the whole frame's: ``threshold=``, or calibrated for ``pfa`` on
    frame 0 of the whole frame (one task), then given to every tile. Every other option
    of :func:`kestrel.tbd` is passed to each tile, except ``return_state``,
    ``return_maps`` and ``state_out`` (a tile's state and maps are not the frame's)."""
    dask, da = _dask()
    from .tbd import tbd as run

    for k in ("return_state", "return_maps", "state_out"):
        if options.get(k):
            raise ValueError(f"{k}: not available over tiles (each tile's state and maps "
                             "cover the tile only)")
    if not isinstance(frames, da.Array):
        frames = da.from_array(np.asarray(frames), chunks=(-1, "auto", "auto"))
    if frames.ndim != 3:
        raise ValueError(f"frames: expected [T, H, W], got shape {frames.shape}")
    if len(frames.chunks[0]) > 1:
        raise ValueError(f"frames are chunked along T ({len(frames.chunks[0])} chunks): "
                         "each tile needs every frame; rechunk with {0: -1}")
    T, H, W = frames.shape
    # The options checked, and the motion vectors, on one small frame.
    probe = run(np.zeros((1, 4, 4), np.float32), threshold=1.0,
                **{k: v for k, v in options.items() if k not in ("threshold", "pfa")})
    vmax = int(np.ceil(np.abs(probe.motions).max())) if len(probe.motions) else 0
    nms = int(options.get("nms", run.__kwdefaults__["nms"]))
    if halo is None:
        halo = vmax * max(T - 1, 0) + nms + 1
    if not isinstance(halo, numbers.Integral) or halo < 0:
        raise ValueError(f"halo: expected a number of pixels >= 0, got {halo!r}")
    tok = dask.base.tokenize(frames.name, halo, options)
    delayed = dask.delayed
    if options.get("threshold") is not None:
        cal = (float(options["threshold"]), None)
    else:
        f0 = frames[0].rechunk(-1).to_delayed().ravel()[0]
        cal = delayed(_tbd_calibrate, pure=True)(f0, options,
                                                 dask_key_name=f"kestrel-tbd-cal-{tok}")
    opts = {k: v for k, v in options.items() if k not in ("threshold", "pfa")}
    parts = []
    ys, xs = _offsets(frames.chunks[1]), _offsets(frames.chunks[2])
    for i, hy in enumerate(frames.chunks[1]):
        for j, wx in enumerate(frames.chunks[2]):
            y0, x0 = ys[i], xs[j]
            y1, x1 = y0 + hy, x0 + wx
            oy, ox = max(0, y0 - halo), max(0, x0 - halo)
            block = frames[:, oy:min(H, y1 + halo), ox:min(W, x1 + halo)]
            block = block.rechunk(-1).to_delayed().ravel()[0]
            parts.append(delayed(_tbd_tile, pure=True)(
                block, (oy, ox), (y0, y1, x0, x1), cal, opts,
                f"rows {y0}..{y1 - 1}, columns {x0}..{x1 - 1}",
                dask_key_name=f"kestrel-tbd-tile-{tok}-{i}-{j}"))
    det = delayed(_tbd_merge, pure=True)(parts, dask_key_name=f"kestrel-tbd-merge-{tok}")
    return DaskTbdResult(detections=det, threshold=cal[0], noise=cal[1],
                         motions=probe.motions, devices=[p["device"] for p in parts])
