"""Spatio-temporal track-before-detect (Mazurek, "Optimization of Track-Before-Detect
Systems with Decimation for GPGPU"): dim point targets found by accumulating frames
along motion hypotheses, as ``kestrel tbd``; and frames with targets in noise, as
``kestrel simulate-frames``.

For each motion vector ``v = (vx, vy)`` (pixels per frame) the state is

    P_k(x, y; v) = (1 - alpha) P_{k-1}(x - vx, y - vy; v) + alpha X_k(x, y),   P_0 = 0,

positions outside the frame reading 0 and fractional ones sampled bilinearly. The
detection map is ``D_k = max_v P_k`` with the arg-max vector (the first on ties). With
decimation ``D`` frames are folded in blocks of D along each trajectory and a map is
emitted after frames ``D-1, 2D-1, ...`` (0-based) and after the last frame. A detection
is a pixel whose score exceeds the threshold and is the largest in its
``(2 nms + 1)^2`` window. The recursion computes in float32 (on the GPU optionally with
an f16 state), whatever the frames' dtype.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _kestrel
from ._arrays import flush_warnings, to_numpy

#: The detections' fields: the columns ``kestrel tbd`` writes (t, x, y, vx, vy, score),
#: then ``motion``, the index of the arg-max vector in ``TbdResult.motions``.
DETECTION_DTYPE = np.dtype(
    [("t", np.int64), ("x", np.int64), ("y", np.int64), ("vx", np.float32),
     ("vy", np.float32), ("score", np.float32), ("motion", np.int64)]
)

#: The truth of simulated frames: the columns ``kestrel simulate-frames --truth`` writes.
TRUTH_DTYPE = np.dtype(
    [("t", np.int64), ("target", np.int64), ("x", np.float64), ("y", np.float64),
     ("vx", np.float64), ("vy", np.float64), ("amplitude", np.float64)]
)

#: A simulated target: position at frame 0, velocity (pixels per frame), amplitude.
TARGET_DTYPE = np.dtype(
    [("x", np.float64), ("y", np.float64), ("vx", np.float64), ("vy", np.float64),
     ("amplitude", np.float64)]
)


@dataclass
class TbdResult:
    """What ``kestrel.tbd`` found.

    ``detections``: a structured array with the fields ``t`` (the emitted frame,
    0-based), ``x`` (column), ``y`` (row), ``vx``, ``vy`` (the arg-max motion vector),
    ``score`` (``D_t(x, y)``) and ``motion`` (its index in ``motions``), in the order of
    ``kestrel tbd``'s CSV (by frame, then raster order). ``threshold``: the threshold
    on ``D_k`` used (given, or calibrated for ``pfa``); ``noise``: the noise fitted to
    frame 0 for the calibration (None when the threshold was given). ``motions``: the
    vectors [V, 2] (vx, vy) as float32. ``state``: the final state ``P`` [V, H, W]
    (float32) when ``return_state=True``. ``map_t`` [M], ``map_score`` [M, H, W]
    (float32 ``D_t``) and ``map_arg`` [M, H, W] (uint16 arg-max vector index): every
    emitted map when ``return_maps=True``. ``device``: where it ran; ``kernel``: the
    GPU kernel (None on the CPU).
    """

    detections: np.ndarray
    threshold: float
    motions: np.ndarray
    state: np.ndarray | None
    map_t: np.ndarray | None
    map_score: np.ndarray | None
    map_arg: np.ndarray | None
    noise: dict | None
    device: str
    kernel: str | None

    def __len__(self) -> int:
        return len(self.detections)


@dataclass
class SimulatedFrames:
    """What ``kestrel.simulate_frames`` made: ``frames`` [T, H, W] (float32, uint8 or
    uint16), ``truth`` (structured: ``t``, ``target``, ``x``, ``y``, ``vx``, ``vy``,
    ``amplitude``; one row per frame and target inside the frame, as the ``--truth``
    CSV), ``targets`` (structured: ``x``, ``y``, ``vx``, ``vy``, ``amplitude``; the given
    ones first, then the random ones) and the ``amplitude`` of every target
    (``10^(snr/20)``)."""

    frames: np.ndarray
    truth: np.ndarray
    targets: np.ndarray
    amplitude: float


def _int(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name}: expected an integer, got {type(v).__name__}")
    return int(v)


def _real(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name}: expected a number, got {type(v).__name__}")
    return float(v)


def _choice(v: Any, name: str, values: Sequence[str]) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{name}: expected a string, got {type(v).__name__}")
    if v not in values:
        raise ValueError(f"{name}: invalid value '{v}' [possible values: {', '.join(values)}]")
    return v


def _motion_args(velocities: Any, speeds: Any, directions: Any) -> tuple[Any, Any, Any]:
    """The motion options as the native module takes them: text as is, vectors as a
    list of (vx, vy) pairs, speeds as a list of numbers."""
    if velocities is not None and (speeds is not None or directions is not None):
        other = "speeds" if speeds is not None else "directions"
        raise ValueError(f"velocities cannot be used with {other} (give one motion set)")
    if directions is not None:
        if speeds is None:
            raise ValueError("directions requires speeds")
        directions = _int(directions, "directions")
        if directions < 1:
            raise ValueError("directions must be at least 1")
    if velocities is not None and not isinstance(velocities, str):
        a, _ = to_numpy(velocities, "velocities")
        if a.dtype.kind not in "biuf":
            raise TypeError(f"velocities: expected numbers, got dtype {a.dtype}")
        a = np.asarray(a, dtype=np.float64)
        if a.size == 0:
            a = a.reshape(0, 2)
        if a.ndim != 2 or a.shape[1] != 2:
            raise ValueError(f"velocities: expected vectors [V, 2] (vx, vy), got shape {a.shape}")
        velocities = [(float(x), float(y)) for x, y in a]
    if speeds is not None and not isinstance(speeds, str):
        a, _ = to_numpy(speeds, "speeds")
        if a.dtype.kind not in "biuf":
            raise TypeError(f"speeds: expected numbers, got dtype {a.dtype}")
        speeds = [float(s) for s in np.asarray(a, dtype=np.float64).reshape(-1)]
    return velocities, speeds, directions


def _frames(frames: Any) -> np.ndarray:
    """``frames`` as a C-contiguous [T, H, W] array of a dtype the ``.npy`` frame reader
    takes: uint8, uint16, float32 or float64 as they are, bool as uint8, other numbers
    as float64 (then, as float64 frames are, float32)."""
    a, _ = to_numpy(frames, "frames")
    if a.dtype.kind not in "biuf":
        raise TypeError(f"frames: expected a numeric array, got dtype {a.dtype}")
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    elif a.dtype not in (np.uint8, np.uint16, np.float32, np.float64):
        a = a.astype(np.float64)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3:
        raise ValueError(
            f"frames: expected frames [T, H, W] (or one frame [H, W]), found shape {list(a.shape)}"
        )
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
    # A buffer from a pickle or the network may be contiguous but not aligned.
    return a if a.flags.aligned else a.copy()


def tbd(
    frames: Any,
    *,
    velocities: str | Sequence[Sequence[float]] | None = None,
    speeds: str | Sequence[float] | None = None,
    directions: int | None = None,
    alpha: float = 0.1,
    decimation: int = 1,
    threshold: float | None = None,
    pfa: float | None = None,
    noise: str = "gaussian",
    nms: int = 2,
    state_out: str | os.PathLike | None = None,
    device: str = "auto",
    f16_state: bool = False,
    kernel: str | None = None,
    return_state: bool = False,
    return_maps: bool = False,
    progress: bool = False,
    transition: Any = None,
    switch: float | None = None,
) -> TbdResult:
    """Track-before-detect over ``frames`` [T, H, W] (or one frame [H, W]; uint8,
    uint16, float32, float64 or any numeric array-like), as ``kestrel tbd``.

    Motion set: ``velocities`` ("vx:vy,..." or pairs [V, 2], pixels per frame;
    fractional ones sampled bilinearly), or ``speeds`` ("s1,s2,..." or numbers; 0 adds
    (0, 0)) each in ``directions`` directions evenly spaced from +x (default 12);
    default: speeds 0 and 1 in 12 directions (13 vectors). ``alpha``: weight of the
    newest frame, in (0, 1]. ``decimation``: frames per emitted map. ``threshold`` on
    ``D_k = max_v P_k``, or ``pfa``, a per-pixel false-alarm probability for which the
    threshold is calibrated on simulated noise-only frames fitted to frame 0 (``noise``:
    "gaussian" or "rayleigh"; default Pfa 1e-4). ``nms``: the non-maximum suppression
    radius R (a detection is the largest score in its (2R+1) x (2R+1) window).
    ``state_out``: also write the final state [V, H, W] as .npy (as ``--state-out``);
    ``return_state``: return it. ``device``: auto, cpu, cuda or cuda:N. GPU only:
    ``f16_state`` (store the state as f16), ``kernel`` (a kernel by name instead of the
    autotuner's choice, as ``kestrel bench --only tbd`` prints them). ``return_maps``:
    every emitted map ``D_t`` and its arg-max. ``progress``: a bar over the frames.
    Manoeuvres (Mazurek eq. 1b): ``transition``, a Markov matrix between the motion
    vectors ([V, V] array-like or a .npy path; row = from, column = to, entries >= 0,
    rows summing to 1), or ``switch=P``, the shorthand that gives each vector's
    neighbours in the speed/direction grid P between them (1 - P stays); the identity
    is the plain recursion.

    Bad options and frames raise ValueError with the command's message (TypeError for
    wrong types); the caller's array is never modified.
    """
    if not isinstance(device, str):
        raise TypeError(f"device: expected a string, got {type(device).__name__}")
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError(f"kernel: expected a string, got {type(kernel).__name__}")
    if threshold is not None and pfa is not None:
        raise ValueError("threshold cannot be used with pfa (give one of them)")
    velocities, speeds, directions = _motion_args(velocities, speeds, directions)
    alpha = _real(alpha, "alpha")
    decimation = _int(decimation, "decimation")
    if decimation < 0:
        raise ValueError(f"decimation must be between 1 and 1024, got {decimation}")
    nms = _int(nms, "nms")
    if nms < 0:
        raise ValueError(f"nms: expected a radius >= 0, got {nms}")
    threshold = None if threshold is None else _real(threshold, "threshold")
    pfa = None if pfa is None else _real(pfa, "pfa")
    noise = _choice(noise, "noise", ("gaussian", "rayleigh"))
    if transition is not None and switch is not None:
        raise ValueError("transition cannot be used with switch (give one of them)")
    switch = None if switch is None else _real(switch, "switch")
    if transition is not None and not isinstance(transition, (str, os.PathLike)):
        try:
            transition = np.ascontiguousarray(np.asarray(transition, dtype=np.float64))
        except (TypeError, ValueError):
            raise TypeError(
                "transition: expected an array [V, V] of probabilities or a .npy path"
            ) from None
    elif transition is not None:
        transition = os.fspath(transition)
    a = _frames(frames)
    out = _kestrel.tbd_run(
        a, velocities=velocities, speeds=speeds, directions=directions, alpha=alpha,
        decimation=decimation, threshold=threshold, pfa=pfa, noise=noise, nms=nms,
        state_out=None if state_out is None else os.fspath(state_out), device=device,
        f16_state=bool(f16_state), kernel=kernel, return_state=bool(return_state),
        return_maps=bool(return_maps), progress=bool(progress), transition=transition,
        switch=switch,
    )
    flush_warnings()
    motions = out["motions"]
    det = np.empty(len(out["t"]), dtype=DETECTION_DTYPE)
    for k in ("t", "x", "y", "score", "motion"):
        det[k] = out[k]
    det["vx"] = motions[out["motion"], 0]
    det["vy"] = motions[out["motion"], 1]
    return TbdResult(
        detections=det, threshold=float(out["threshold"]), motions=motions,
        state=out["state"], map_t=out["map_t"], map_score=out["map_score"],
        map_arg=out["map_arg"], noise=out["noise"], device=out["device"],
        kernel=out["kernel"],
    )


def _targets_arg(target: Any) -> list[Any]:
    """``target`` as a list of "x:y:vx:vy" strings and lists of numbers."""
    if target is None:
        return []
    if isinstance(target, str):
        return [target]
    items = list(target)
    if items and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in items):
        return [[float(v) for v in items]]
    out = []
    for t in items:
        if isinstance(t, str):
            out.append(t)
            continue
        a, _ = to_numpy(t, "target")
        if a.dtype.kind not in "biuf" or a.ndim != 1:
            raise TypeError(f"target: expected \"x:y:vx:vy\" or four numbers, got {t!r}")
        out.append([float(v) for v in a])
    return out


def simulate_frames(
    frames: int,
    *,
    height: int = 256,
    width: int = 256,
    target: Any = (),
    targets: int = 0,
    velocities: str | Sequence[Sequence[float]] | None = None,
    speeds: str | Sequence[float] | None = None,
    directions: int | None = None,
    snr: float = 3.0,
    noise: str = "gaussian",
    dtype: Any = "f32",
    seed: int = 0,
    progress: bool = False,
) -> SimulatedFrames:
    """Frames with point targets in noise, as ``kestrel simulate-frames``.

    ``frames`` T frames of ``height`` x ``width``. ``target``: targets "x:y:vx:vy" (or
    four numbers; position at frame 0, velocity in pixels per frame), one or a list;
    ``targets``: that many random ones in addition, at random pixels with velocities
    drawn from the motion set (``velocities`` / ``speeds`` / ``directions`` as
    :func:`tbd`; default: the 9 vectors with |vx|, |vy| <= 1). ``snr`` in dB: noise of
    unit power, a target adds amplitude ``A = 10^(snr/20)`` to the pixel nearest its
    position (Gaussian: ``n + A``; Rayleigh: ``|A + n|``, n complex Gaussian).
    ``dtype``: "f32", "u8" (``round(64 + 16 X)`` clamped) or "u16"
    (``round(4096 + 256 X)`` clamped). The same ``seed`` gives the command's frames.
    """
    t = _int(frames, "frames")
    h = _int(height, "height")
    w = _int(width, "width")
    if min(t, h, w) < 1:
        raise ValueError(
            f"frames, height and width must be at least 1 (got {t}, {h}, {w})"
        )
    targets = _int(targets, "targets")
    if targets < 0:
        raise ValueError(f"targets: expected a count >= 0, got {targets}")
    seed = _int(seed, "seed")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed: expected an integer in [0, 2^64), got {seed}")
    snr = _real(snr, "snr")
    noise = _choice(noise, "noise", ("gaussian", "rayleigh"))
    if not isinstance(dtype, str):
        try:
            dtype = {np.dtype(np.float32): "f32", np.dtype(np.uint8): "u8",
                     np.dtype(np.uint16): "u16"}.get(np.dtype(dtype), str(np.dtype(dtype)))
        except TypeError:
            raise TypeError(f"dtype: expected f32, u8 or u16, got {dtype!r}") from None
    dtype = {"float32": "f32", "uint8": "u8", "uint16": "u16"}.get(dtype, dtype)
    dtype = _choice(dtype, "dtype", ("f32", "u8", "u16"))
    velocities, speeds, directions = _motion_args(velocities, speeds, directions)
    out = _kestrel.simulate_frames(
        t, height=h, width=w, target=_targets_arg(target), targets=targets,
        velocities=velocities, speeds=speeds, directions=directions, snr=snr, noise=noise,
        dtype=dtype, seed=seed, progress=bool(progress),
    )
    flush_warnings()
    tg = out["targets"]
    targets_arr = np.empty(len(tg), dtype=TARGET_DTYPE)
    for i, k in enumerate(TARGET_DTYPE.names):
        targets_arr[k] = tg[:, i]
    idx = out["truth_target"]
    truth = np.empty(len(idx), dtype=TRUTH_DTYPE)
    truth["t"] = out["truth_t"]
    truth["target"] = idx
    truth["x"] = out["truth_x"]
    truth["y"] = out["truth_y"]
    for k in ("vx", "vy", "amplitude"):
        truth[k] = targets_arr[k][idx]
    return SimulatedFrames(
        frames=out["frames"], truth=truth, targets=targets_arr,
        amplitude=float(out["amplitude"]),
    )
