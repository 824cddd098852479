"""Multi-target tracking and its metrics: ``kestrel track``, ``kestrel eval`` and
``kestrel simulate --scenario`` over arrays.

The tracker (Bar-Shalom, Willett & Tian, *Tracking and Data Fusion*, 2011; the names
of Stone Soup's components): each scan predicts every track (Kalman filter), gates the
detections by the chi-square test on the innovation ``(z - H x)^T S^-1 (z - H x) <=
gamma`` (``gamma`` the ``gate`` quantile of chi-square with ``ny`` degrees of freedom),
associates confirmed tracks by global nearest neighbour (the best joint assignment of
the log-likelihood ratios ``ln(pd N(z; H x, S) / (clutter (1 - pd pg)))``) or by JPDA
(Fortmann, Bar-Shalom & Scheffe 1983: exact marginals by enumeration, or loopy belief
propagation as Williams & Lau 2014), then tentative tracks by GNN over what is left,
updates, confirms a tentative track after ``M`` detections in its first ``N`` scans,
deletes a confirmed one after ``delete`` consecutive misses, and starts a tentative
track from every detection no track claimed: ``x = G (z - d) + N x0``,
``P = G R G^T + N P0 N^T`` with ``G = H^+``, ``N = I - G H`` (the model's prior
supplies what is not measured, such as the velocity).

Metrics: GOSPA with ``alpha = 2`` (Rahmathullah, Garcia-Fernandez & Svensson, FUSION
2017) with a switching penalty between steps (as in trajectory GOSPA, Garcia-Fernandez
et al., IEEE TSP 2020), OSPA (Schuhmacher, Vo & Vo, IEEE TSP 2008) and CLEAR MOT
(Bernardin & Stiefelhagen, EURASIP JIVP 2008).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _kestrel
from ._arrays import as_float, flush_warnings, to_numpy


def model_of(model: Any) -> "_kestrel.Model":
    """A native model from a :class:`KalmanFilter`, a ``kestrel.Model`` or a model file
    path (str or os.PathLike; read as ``kestrel track --model`` reads it)."""
    if isinstance(model, _kestrel.Model):
        return model
    inner = getattr(model, "model", None)
    if isinstance(inner, _kestrel.Model):
        return inner
    if isinstance(model, (str, os.PathLike)):
        return _kestrel.Model.from_toml(os.fspath(model))
    raise TypeError(
        "model: expected a KalmanFilter, a kestrel.Model or a model file path, "
        f"got {type(model).__name__}"
    )


def _finite(a: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(a)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = ", ".join(str(i) for i in idx)
        raise ValueError(f"{name}[{where}]: value {a[idx]} is not finite")


def _str_opt(v: Any, name: str) -> Any:
    if v is not None and not isinstance(v, str):
        raise TypeError(f"{name}: expected a string, got {type(v).__name__}")
    return v


def _scan(x: Any, ny: int, name: str) -> np.ndarray:
    a, _ = to_numpy(x, name)
    a = as_float(a, name, np.float64)
    if a.ndim == 1 and (a.size == 0 or ny == 1):
        a = a.reshape(-1, ny)
    if a.ndim != 2 or a.shape[1] != ny:
        raise ValueError(
            f"{name}: expected a scan of detections [n, ny] with ny = {ny}, got shape {a.shape}"
        )
    _finite(a, name)
    return a


def detections_arrays(detections: Any, t: Any, ny: int, dt: float | None
                      ) -> tuple[np.ndarray, np.ndarray, list[int] | None]:
    """The detections as ``(t [N], z [N, ny], counts)``: ``counts`` per scan for the
    list-of-scans form, None for the ``t=`` form."""
    if t is not None:
        z, _ = to_numpy(detections, "detections")
        z = as_float(z, "detections", np.float64)
        if z.ndim == 1 and ny == 1:
            z = z.reshape(-1, 1)
        if z.ndim != 2:
            raise ValueError(
                f"detections: expected an array [N, ny] with the times t [N], got shape {z.shape}"
            )
        if z.shape[1] != ny:
            raise ValueError(
                f"detections have {z.shape[1]} components (z0..z{max(z.shape[1] - 1, 0)}), "
                f"the model measures {ny}"
            )
        tt, _ = to_numpy(t, "t")
        tt = np.ascontiguousarray(as_float(tt, "t", np.float64).reshape(-1))
        if tt.shape[0] != z.shape[0]:
            raise ValueError(f"t: {tt.shape[0]} times for {z.shape[0]} detections")
        _finite(tt, "t")
        _finite(z, "detections")
        return tt, np.ascontiguousarray(z), None
    if isinstance(detections, np.ndarray) and detections.ndim == 2:
        raise ValueError(
            "detections: an array [N, ny] needs its times t [N] (or give a list of "
            "per-scan arrays [n_k, ny])"
        )
    if isinstance(detections, (str, bytes)) or not hasattr(detections, "__iter__"):
        raise TypeError(
            "detections: expected a sequence of per-scan arrays [n_k, ny], or an array "
            f"[N, ny] with t=, got {type(detections).__name__}"
        )
    scans = [_scan(s, ny, f"detections[{k}]") for k, s in enumerate(detections)]
    counts = [s.shape[0] for s in scans]
    z = np.concatenate(scans, axis=0) if scans else np.zeros((0, ny))
    steps = np.repeat(np.arange(len(scans), dtype=np.float64), counts)
    tt = steps * dt if dt is not None else steps
    return np.ascontiguousarray(tt), np.ascontiguousarray(z), counts


@dataclass
class TrackResult:
    """The live tracks after every scan, one row per track and scan, as the columns of
    ``kestrel track``'s output file: ``t`` [R] (the scan's step, or seconds with
    ``dt``), ``track`` [R] (the identity, int64), ``status`` [R] (``"tentative"`` or
    ``"confirmed"``), ``x`` [R, nx] (the mean), ``P`` [R, nx, nx] (the covariance).

    Also: ``clutter`` (the density used), ``gate_threshold`` (the chi-square quantile),
    ``scans``, ``confirmed_tracks`` (tracks ever confirmed) and ``device``; with an IMM
    model, ``mode_probs`` [R, r] (the file's ``p0,p1,..`` columns), else ``None``."""

    t: np.ndarray
    track: np.ndarray
    status: np.ndarray
    x: np.ndarray
    P: np.ndarray
    clutter: float
    gate_threshold: float
    scans: int
    confirmed_tracks: int
    device: str
    mode_probs: np.ndarray | None = None

    @property
    def confirmed(self) -> np.ndarray:
        """Rows of confirmed tracks (bool [R])."""
        return self.status == "confirmed"

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def by_track(self, confirmed_only: bool = True) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Each track's ``(t, x)`` over its life (confirmed rows only by default)."""
        keep = self.confirmed if confirmed_only else np.ones(len(self), bool)
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for tid in np.unique(self.track[keep]):
            rows = keep & (self.track == tid)
            out[int(tid)] = (self.t[rows], self.x[rows])
        return out


def track(detections: Any, model: Any, *, t: Any = None, assoc: str = "gnn",
          jpda_marginals: str | None = None, gate: float = 0.999, pd: float = 0.9,
          clutter: float | None = None, confirm: str | tuple[int, int] = "2/3",
          delete: int = 3, delete_tentative: int | None = None,
          max_variance: float | None = None, dt: float | None = None,
          device: str = "cpu", progress: bool = False,
          filter: str | None = None) -> TrackResult:
    """Tracks unlabelled detections (``kestrel track``; module documentation for the
    equations).

    ``detections``: either a sequence of scans, scan ``k`` an array [n_k, ny] of the
    detections at step ``k`` (an empty scan: ``np.empty((0, ny))`` or ``[]``), as Stone
    Soup's detector yields sets of detections per time; or an array [N, ny] with their
    times ``t`` [N] (the detections file's columns ``t,z0,z1,..``: integer steps, or
    seconds that are multiples of ``dt``; in time order; steps without detections are
    scans where every track misses). ``model``: a :class:`KalmanFilter`, a
    ``kestrel.Model``, a :class:`NonlinearFilter` (a nonlinear model or IMM file) or a
    model file path of any of these kinds; its prior supplies the unmeasured part of a
    new track. ``filter``: each track's filter, "kf", "ekf", "ukf", "ckf" or "iekf"
    (default: the Kalman filter for linear models, the file's ``[filter]`` kind or the
    EKF for nonlinear ones), as ``kestrel track --filter``. Nonlinear and IMM tracks
    start from one detection by Gauss-Newton on ``h(x) = z`` and run on the CPU; radar
    detections are ``[range, bearing]`` rows with bearings in radians.

    Options, as the command line's (same names, same defaults): ``assoc`` "gnn" or
    "jpda"; ``jpda_marginals`` (JPDA only) "auto" (exact up to 20,000 joint events a
    cluster, belief propagation past that) or "lbp" (as Stone Soup's JPDAwithLBP);
    ``gate`` the gate probability; ``pd`` the detection probability; ``clutter`` the
    clutter density per unit measurement volume per scan (default: detections per scan
    over the volume of their bounding box); ``confirm`` "M/N" (or ``(M, N)``);
    ``delete`` K misses end a confirmed track; ``delete_tentative`` K misses end a
    tentative one (default: when M of N can no longer be reached); ``max_variance``
    ends a track when a variance of ``H P H^T`` exceeds it; ``dt`` scans are ``dt``
    apart and times are seconds; ``device`` cpu, cuda, cuda:N or auto (the GPU tracker
    is GNN only). The computation is in float64, as the command line's.
    """
    nonlinear = _nonlinear_source(model, _str_opt(filter, "filter"))
    m = None if nonlinear is not None else model_of(model)
    ny = nonlinear[2] if nonlinear is not None else m.ny
    if isinstance(confirm, tuple):
        confirm = "/".join(str(int(v)) for v in confirm)
    for name, v in (("assoc", assoc), ("jpda_marginals", jpda_marginals),
                    ("confirm", confirm), ("device", device)):
        _str_opt(v, name)
    for name, v in (("delete", delete), ("delete_tentative", delete_tentative)):
        if v is None and name == "delete_tentative":
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name}: expected an integer, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{name} must be at least 1")
    tt, z, counts = detections_arrays(detections, t, ny, dt)
    out = _kestrel.track(
        m, tt, z, counts=counts, assoc=assoc, jpda_marginals=jpda_marginals, gate=gate,
        pd=pd, clutter=clutter, confirm=confirm, delete=delete,
        delete_tentative=delete_tentative, max_variance=max_variance, dt=dt, device=device,
        progress=bool(progress),
        nonlinear=None if nonlinear is None else nonlinear[:2],
        filter=None if nonlinear is None else filter,
    )
    flush_warnings()
    status = np.where(out["confirmed"], "confirmed", "tentative")
    return TrackResult(
        t=out["t"], track=out["track"], status=status, x=out["x"], P=out["P"],
        clutter=out["clutter"], gate_threshold=out["gate_threshold"], scans=out["scans"],
        confirmed_tracks=out["confirmed_tracks"], device=out["device"],
        mode_probs=out.get("mode_probs"),
    )


def _nonlinear_source(model: Any, filter: str | None) -> tuple[str, str, int] | None:
    """``(text, origin, ny)`` of a model the nonlinear family tracks (a
    :class:`NonlinearFilter`, a nonlinear model file, or any model file with a
    nonlinear ``filter``), or ``None`` for the Kalman filter's."""
    from .nonlinear import NonlinearFilter

    gaussian = filter is not None and filter != "kf"
    if isinstance(model, NonlinearFilter):
        if filter == "kf":
            raise ValueError(
                "filter: kf is the linear Kalman filter's (give a linear model; here use "
                "ekf, ukf, ckf or iekf)")
        return model._text, model._origin, model.ny
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            return None  # the linear reader names the problem, as the command line's
        if gaussian or _kestrel.nonlinear_text(text):
            nl = NonlinearFilter(text, path)
            if filter == "kf":
                return None
            return text, path, nl.ny
        return None
    if gaussian:
        raise ValueError(
            f"filter: {filter} needs a nonlinear model file (a path or a NonlinearFilter); "
            "a linear model object is tracked by the Kalman filter")
    return None


@dataclass
class ScenarioResult:
    """A simulated scenario, as ``kestrel simulate --scenario`` writes it: detections
    ``t`` [N], ``z`` [N, ny] (unlabelled, shuffled within each scan) and truth
    ``truth_t`` [M], ``truth_id`` [M], ``truth_x`` [M, nx] (the files' columns), the
    number of ``steps`` and the ``clutter_density`` a tracker should use."""

    t: np.ndarray
    z: np.ndarray
    truth_t: np.ndarray
    truth_id: np.ndarray
    truth_x: np.ndarray
    steps: int
    clutter_density: float

    def scans(self) -> list[np.ndarray]:
        """The detections as one array [n_k, ny] per step (what :func:`track` takes)."""
        k = self.t.astype(np.int64)
        return [self.z[k == s] for s in range(self.steps)]

    def truth_scans(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The true states [m_k, nx] and their identities [m_k] of each step."""
        k = self.truth_t.astype(np.int64)
        return ([self.truth_x[k == s] for s in range(self.steps)],
                [self.truth_id[k == s] for s in range(self.steps)])


def simulate_scenario(model: Any, tracks: int, steps: int, scenario: str = "random", *,
                      seed: int = 0, pd: float = 0.9, clutter: float = 10.0,
                      region: float = 1000.0, births: float = 0.0,
                      death: float = 0.0) -> ScenarioResult:
    """A multi-target scenario (``kestrel simulate --scenario``): ``tracks`` targets at
    step 0 (``scenario="random"``: anywhere in the region; ``"crossing"``: in pairs that
    meet at the middle step), moving by the model for ``steps`` steps, detected with
    probability ``pd`` among Poisson clutter (``clutter`` a scan on average) uniform over
    the region ``[-region, region]^ny``; ``births`` new targets a step (Poisson) and
    death probability ``death`` a step. Seeded: the same ``seed`` gives the command
    line's files value for value."""
    _str_opt(scenario, "scenario")
    for name, v in (("tracks", tracks), ("steps", steps), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name}: expected an integer, got {type(v).__name__}")
        if v < 0:
            raise ValueError(f"{name} must be non-negative, got {v}")
    m = model_of(model)
    out = _kestrel.simulate_scenario(
        m, int(tracks), int(steps), scenario=scenario, seed=int(seed), pd=float(pd),
        clutter=float(clutter), region=float(region), births=float(births),
        death=float(death),
    )
    flush_warnings()
    return ScenarioResult(steps=int(steps), **out)


# --------------------------------------------------------------------------------------
# Metrics


@dataclass
class GospaResult:
    """GOSPA per step: ``t``, ``gospa`` (the distance), and its parts in p-th power units
    (as Stone Soup reports them): ``localisation`` (sum of ``d^p`` over assigned pairs),
    ``missed`` and ``false`` (``c^p / 2`` per unassigned truth / estimate),
    ``switching`` (``switching^p`` per switch) and ``switches`` (a half switch counts
    0.5); ``mean`` the mean GOSPA over the steps; ``summary`` the line ``kestrel eval``
    prints."""

    t: np.ndarray
    gospa: np.ndarray
    localisation: np.ndarray
    missed: np.ndarray
    false: np.ndarray
    switching: np.ndarray
    switches: np.ndarray
    mean: float
    summary: str = field(repr=False)


@dataclass
class OspaResult:
    """OSPA per step (``t``, ``ospa``), its ``mean`` and the ``summary`` line."""

    t: np.ndarray
    ospa: np.ndarray
    mean: float
    summary: str = field(repr=False)


@dataclass
class MotResult:
    """CLEAR MOT per step: ``t``, ``truths``, ``matches``, ``misses``, ``false``,
    ``switches`` (identity switches) and ``distance`` (mean matched distance, NaN
    without matches); totals ``mota`` ``= 1 - (misses + false + switches) / truths``,
    ``motp`` (mean matched distance: lower is better) and ``total_*``; ``summary``."""

    t: np.ndarray
    truths: np.ndarray
    matches: np.ndarray
    misses: np.ndarray
    false: np.ndarray
    switches: np.ndarray
    distance: np.ndarray
    mota: float
    motp: float
    total_truths: int
    total_matches: int
    total_misses: int
    total_false: int
    total_switches: int
    summary: str = field(repr=False)


def _result(metric: str, out: dict) -> Any:
    if metric == "gospa":
        return GospaResult(**out)
    if metric == "ospa":
        return OspaResult(**out)
    for k in ("truths", "matches", "misses", "false", "switches"):
        out[k] = out[k].astype(np.int64)
    for k in ("total_truths", "total_matches", "total_misses", "total_false",
              "total_switches"):
        out[k] = int(out[k])
    return MotResult(**out)


def _steps(x: Any, name: str) -> list[np.ndarray]:
    """Per-step point sets: a sequence of [n_k, d] arrays, a [T, n, d] array, or one
    [n, d] array (one step)."""
    if isinstance(x, (list, tuple)):
        items = list(x)
    else:
        a, _ = to_numpy(x, name)
        if a.ndim == 2:
            items = [a]
        elif a.ndim == 3:
            items = list(a)
        else:
            raise ValueError(
                f"{name}: expected per-step points: a list of [n_k, d] arrays, an array "
                f"[T, n, d], or one step [n, d]; got shape {a.shape}"
            )
    out = []
    for k, s in enumerate(items):
        a, _ = to_numpy(s, f"{name}[{k}]")
        a = as_float(a, f"{name}[{k}]", np.float64)
        if a.ndim == 1 and a.size == 0:
            a = a.reshape(0, 0)
        if a.ndim != 2:
            raise ValueError(f"{name}[{k}]: expected points [n, d], got shape {a.shape}")
        _finite(a, f"{name}[{k}]")
        out.append(a)
    return out


def _ids(ids: Any, sets: list[np.ndarray], name: str) -> list[np.ndarray]:
    if ids is None:
        return [np.arange(s.shape[0], dtype=np.uint64) for s in sets]
    items = list(ids)
    if len(items) != len(sets):
        raise ValueError(f"{name}: {len(items)} steps of identities for {len(sets)} steps")
    out = []
    for k, (i, s) in enumerate(zip(items, sets)):
        a = np.asarray(i).reshape(-1)
        if a.size and (a.dtype.kind not in "iu" or (a < 0).any()):
            raise ValueError(f"{name}[{k}]: identities must be non-negative integers")
        if a.shape[0] != s.shape[0]:
            raise ValueError(f"{name}[{k}]: {a.shape[0]} identities for {s.shape[0]} points")
        out.append(a.astype(np.uint64))
    return out


def _per_step(metric: str, truth: Any, estimates: Any, c: float, p: float,
              switching: float, truth_ids: Any, estimate_ids: Any) -> Any:
    a = _steps(truth, "truth")
    b = _steps(estimates, "estimates")
    if len(a) != len(b):
        raise ValueError(f"truth and estimates: {len(a)} and {len(b)} steps")
    dims = {s.shape[1] for s in a + b if s.shape[0] > 0}
    if len(dims) > 1:
        raise ValueError(
            f"truth and estimates: points of different dimensions {sorted(dims)}"
        )
    dim = dims.pop() if dims else 1
    ia, ib = _ids(truth_ids, a, "truth_ids"), _ids(estimate_ids, b, "estimate_ids")

    def flat(sets: list[np.ndarray]) -> np.ndarray:
        sets = [s for s in sets if s.shape[0] > 0]
        return np.ascontiguousarray(np.concatenate(sets) if sets else np.zeros((0, dim)))

    def flat_ids(ids: list[np.ndarray]) -> np.ndarray:
        return np.ascontiguousarray(np.concatenate(ids) if ids else np.zeros(0, np.uint64),
                                    dtype=np.uint64)

    out = _kestrel.metric_steps(
        metric, [float(k) for k in range(len(a))], dim,
        [s.shape[0] for s in a], flat(a), flat_ids(ia),
        [s.shape[0] for s in b], flat(b), flat_ids(ib),
        c=float(c), p=float(p), switching=float(switching),
    )
    return _result(metric, out)


def gospa(truth: Any, estimates: Any, c: float = 10.0, p: float = 2.0,
          switching: float = 0.0, truth_ids: Any = None,
          estimate_ids: Any = None) -> GospaResult:
    """GOSPA with ``alpha = 2`` at every step (``kestrel eval --metric gospa``):
    ``d = (min_g sum_(i,j in g) d(x_i, y_j)^p + c^p / 2 (|X| + |Y| - 2 |g|))^(1/p)``,
    over assignments ``g`` of pairs closer than ``c``; with ``switching = gamma > 0``,
    a truth whose assigned estimate changes from one step to the next adds ``gamma^p``
    (``gamma^p / 2`` when it gains or loses one) inside the p-th power sum.

    ``truth``, ``estimates``: per-step points, a list of arrays [n_k, d] (or an array
    [T, n, d]; one array [n, d] is one step). ``truth_ids``, ``estimate_ids``: per-step
    identities for the switching term (default: the row index within the step).

    Equal to Stone Soup's ``GOSPAMetric(c=c, p=p)`` (alpha 2, Euclidean) in the
    distance and its localisation / missed / false parts without switching. With a
    switching penalty they differ: Stone Soup reports ``switching`` as
    ``gamma * n^(1/p)`` and adds it as ``sqrt(d^2 + switching^2)``, which is kestrel's
    ``(.. + gamma^p n)^(1/p)`` only for p = 2; Stone Soup also remembers a truth's last
    estimate across steps where it is absent and does not charge a truth that first
    appears unassigned, where kestrel compares consecutive steps only.
    """
    return _per_step("gospa", truth, estimates, c, p, switching, truth_ids, estimate_ids)


def ospa(truth: Any, estimates: Any, c: float = 10.0, p: float = 2.0) -> OspaResult:
    """OSPA at every step (``kestrel eval --metric ospa``; Schuhmacher, Vo & Vo 2008):
    ``d = ((min_pi sum_i min(d(x_i, y_pi(i)), c)^p + c^p (n - m)) / n)^(1/p)`` for
    ``m <= n`` points; 0 when both sets are empty. Inputs as :func:`gospa`. Equal to
    Stone Soup's ``OSPAMetric(c=c, p=p)``."""
    return _per_step("ospa", truth, estimates, c, p, 0.0, None, None)


def clear_mot(truth: Any, estimates: Any, c: float = 10.0, truth_ids: Any = None,
              estimate_ids: Any = None) -> MotResult:
    """CLEAR MOT over the steps (``kestrel eval --metric mot``; Bernardin & Stiefelhagen
    2008), with matches closer than the threshold ``c``: a step keeps the previous
    step's matches still closer than ``c``, matches the rest by the assignment with the
    most matches and then the least total distance; a truth matched to another estimate
    than at its last match is an identity switch. ``MOTA = 1 - (misses + false +
    switches) / truths``, ``MOTP`` the mean matched distance. Inputs as :func:`gospa`;
    identities default to the row index within each step."""
    return _per_step("mot", truth, estimates, c, 2.0, 0.0, truth_ids, estimate_ids)


def evaluate(truth: Any, tracks: Any, metric: str, *, c: float = 10.0, p: float = 2.0,
             switching: float = 0.0, model: Any = None,
             all_tracks: bool = False) -> Any:
    """``kestrel eval`` on arrays: ``metric`` ("gospa", "ospa" or "mot") between the
    truth and the tracks at every time present in either (in time order).

    ``truth``: a :class:`ScenarioResult`, or ``(t, id, x)`` (the truth file's columns,
    x [M, n]). ``tracks``: a :class:`TrackResult`, or ``(t, track, status, x)`` (status
    "confirmed" / "tentative", or booleans: confirmed). ``model`` (a KalmanFilter, Model
    or file): compare the measured components ``H x`` instead of whole states;
    ``all_tracks``: count tentative tracks too. Returns a :class:`GospaResult`,
    :class:`OspaResult` or :class:`MotResult` (``t`` the times)."""
    _str_opt(metric, "metric")
    if isinstance(truth, ScenarioResult):
        tt, tid, tx = truth.truth_t, truth.truth_id, truth.truth_x
    else:
        tt, tid, tx = truth
    if isinstance(tracks, TrackResult):
        rt, rid, rs, rx = tracks.t, tracks.track, tracks.status, tracks.x
    else:
        rt, rid, rs, rx = tracks
    rs = np.asarray(rs)
    conf = rs == "confirmed" if rs.dtype.kind in "US" else rs.astype(bool)

    def ids(v: Any, name: str) -> list[int]:
        a = np.asarray(v).reshape(-1)
        if a.size and (a.dtype.kind not in "iu" or (a < 0).any()):
            raise ValueError(f"{name}: identities must be non-negative integers")
        return [int(i) for i in a]

    def states(v: Any, name: str) -> np.ndarray:
        a, _ = to_numpy(v, name)
        a = as_float(a, name, np.float64)
        if a.ndim == 1:
            a = a.reshape(-1, 1)
        return np.ascontiguousarray(a)

    h = None if model is None else np.ascontiguousarray(model_of(model).H)
    out = _kestrel.metric_labelled(
        metric,
        [float(v) for v in np.asarray(tt, dtype=np.float64).reshape(-1)],
        ids(tid, "truth id"), states(tx, "truth x"),
        [float(v) for v in np.asarray(rt, dtype=np.float64).reshape(-1)],
        ids(rid, "tracks track"), [bool(v) for v in np.asarray(conf).reshape(-1)],
        states(rx, "tracks x"), h=h, all_tracks=bool(all_tracks), c=float(c),
        p=float(p), switching=float(switching),
    )
    return _result(metric, out)
