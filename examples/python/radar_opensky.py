"""Radar tracking of recorded air traffic: kestrel's IMM of UKFs beside Stone Soup's UKF
with GNN, on the same simulated radar plots, scored by GOSPA over time.

Truth: the ADS-B positions of the aircraft within 120 km of Heathrow over 20 minutes
(``examples/data/opensky-heathrow.csv``, from The OpenSky Network through Stone Soup's
demo data; see ``examples/data/README.md``), on a local east/north plane around the
radar, one scan every 10 s. A radar at Heathrow sees each aircraft with probability
``pd`` as range (sd 50 m) and bearing (sd 0.0017 rad, 0.1 degrees), among Poisson clutter
spread uniformly over range and bearing.

Both trackers get the same plots, the same clutter density, detection probability and
gate, and the same track life cycle (confirmation after 3 detections with no two misses
in a row, deletion after 3 misses; Stone Soup: ``MultiMeasurementInitiator(min_points=3)``
with ``UpdateTimeStepsDeleter(2)``, then ``UpdateTimeStepsDeleter(3)``). kestrel runs an
IMM of three modes (nearly constant velocity and left and right turns at 0.03 rad/s)
with UKFs and with EKFs, and the like-for-like pair of Stone Soup's tracker: one
constant-velocity model (q = 5) and a UKF with Stone Soup's sigma-point settings (alpha
0.5, beta 2, kappa 0). Stone Soup runs that UKF with GNN (2-D assignment over PDA
hypotheses). GOSPA (c = 2 km, p = 2) is computed
by ``kestrel.gospa`` (equal to Stone Soup's GOSPAMetric) on positions of confirmed tracks.

Usage (Stone Soup and matplotlib optional; without Stone Soup only kestrel runs):
    python examples/python/radar_opensky.py [--plot radar-opensky.svg] [--seed 1]
        [--pd 0.9] [--clutter 20] [--no-stonesoup]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from typing import NamedTuple

import numpy as np

import kestrel

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "opensky-heathrow.csv")
RADAR = (51.47, -0.4543)  # Heathrow, degrees
EARTH = 6371000.0


class Scene(NamedTuple):
    """A radar and the trackers' settings: scan period ``dt`` (s), reach ``rmax`` (m),
    range and bearing noise (sd, m and rad), the prior's velocity variance (m^2/s^2),
    the gate probability, the IMM's turn rates (+-``turn`` rad/s) and process noise
    ``q``, the constant-velocity model's ``q_cv``, and GOSPA's cut-off ``c`` (m)."""
    dt: float = 10.0
    rmax: float = 120e3
    sd_range: float = 50.0
    sd_bearing: float = 0.0017
    vel_var: float = 250.0 ** 2
    gate: float = 0.999
    turn: float = 0.03
    q: float = 1.0
    q_cv: float = 5.0
    c: float = 2000.0


# Air traffic around Heathrow: a long-range radar scanning every 10 s.
HEATHROW = Scene()
DT, RMAX = HEATHROW.dt, HEATHROW.rmax
SD_RANGE, SD_BEARING = HEATHROW.sd_range, HEATHROW.sd_bearing
VEL_VAR, GATE = HEATHROW.vel_var, HEATHROW.gate


def truth_scans(path: str = DATA) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per scan, the aircraft positions [n_k, 2] (east, north in m from the radar) and
    their identities [n_k]."""
    raw = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    t = raw["time"].astype(np.int64)
    lat0, lon0 = np.radians(RADAR[0]), np.radians(RADAR[1])
    east = (np.radians(raw["lon"]) - lon0) * EARTH * np.cos(lat0)
    north = (np.radians(raw["lat"]) - lat0) * EARTH
    ids = np.unique(raw["icao24"], return_inverse=True)[1]
    k = ((t - t.min()) / DT).round().astype(np.int64)
    pos = np.column_stack([east, north])
    return [pos[k == s] for s in range(k.max() + 1)], [ids[k == s] for s in range(k.max() + 1)]


def radar_plots(truth: list[np.ndarray], pd: float, clutter: float, seed: int,
                scene: Scene = HEATHROW) -> list[np.ndarray]:
    """Per scan, plots [m_k, 2] as (range, bearing): detections of the targets with
    probability ``pd`` and Poisson(``clutter``) false plots, shuffled."""
    rng = np.random.default_rng(seed)
    scans = []
    for pos in truth:
        seen = pos[rng.random(len(pos)) < pd]
        r = np.hypot(seen[:, 0], seen[:, 1]) + scene.sd_range * rng.standard_normal(len(seen))
        b = (np.arctan2(seen[:, 1], seen[:, 0])
             + scene.sd_bearing * rng.standard_normal(len(seen)))
        n = rng.poisson(clutter)
        r = np.concatenate([r, rng.uniform(0, scene.rmax, n)])
        b = np.angle(np.exp(1j * np.concatenate([b, rng.uniform(-np.pi, np.pi, n)])))
        z = np.column_stack([r, b])
        scans.append(z[rng.permutation(len(z))])
    return scans


def imm_model(scene: Scene = HEATHROW) -> str:
    """The IMM file: nearly constant velocity and turns at +-``scene.turn`` rad/s
    (airliners turn at about half the standard rate of 0.052 rad/s), UKF modes."""
    mode = """
[[imm.mode]]
kind = "ct"
dt = {dt}
q = {q}
omega = {omega}
measure = "range-bearing"
radar = [0.0, 0.0]
r_range = {rr}
r_bearing = {rb}
"""
    s = scene
    modes = "".join(mode.format(dt=s.dt, q=s.q, omega=w, rr=s.sd_range ** 2,
                                rb=s.sd_bearing ** 2) for w in [0.0, s.turn, -s.turn])
    return f"""
[imm]
transition = [[0.9, 0.05, 0.05], [0.1, 0.9, 0.0], [0.1, 0.0, 0.9]]
initial = [0.8, 0.1, 0.1]
{modes}
[prior]
x0 = [0.0, 0.0, 0.0, 0.0]
P0 = [[1e10, 0, 0, 0], [0, {s.vel_var}, 0, 0], [0, 0, 1e10, 0], [0, 0, 0, {s.vel_var}]]
[filter]
kind = "ukf"
"""


def cv_model(scene: Scene = HEATHROW) -> str:
    """One nearly-constant-velocity model with Stone Soup's UKF settings (its
    UnscentedKalmanUpdater's alpha 0.5, beta 2, kappa 0): the like-for-like pair of
    Stone Soup's tracker."""
    s = scene
    return f"""
[model]
kind = "ct"
dt = {s.dt}
q = {s.q_cv}
omega = 0.0
measure = "range-bearing"
radar = [0.0, 0.0]
r_range = {s.sd_range ** 2}
r_bearing = {s.sd_bearing ** 2}
[prior]
x0 = [0.0, 0.0, 0.0, 0.0]
P0 = [[1e10, 0, 0, 0], [0, {s.vel_var}, 0, 0], [0, 0, 1e10, 0], [0, 0, 0, {s.vel_var}]]
[filter]
kind = "ukf"
alpha = 0.5
beta = 2.0
kappa = 0.0
"""


def run_kestrel(scans: list[np.ndarray], pd: float, density: float, model: str,
                filter: str | None = None, scene: Scene = HEATHROW
                ) -> tuple[list[np.ndarray], list[np.ndarray], float, "kestrel.TrackResult"]:
    """kestrel's tracker of the model file text ``model``: per scan the confirmed
    tracks' positions and identities, the seconds it took, and the whole result."""
    nl = kestrel.NonlinearFilter.from_toml_str(model, "radar")
    t0 = time.perf_counter()
    res = kestrel.track(scans, nl, pd=pd, clutter=density, gate=scene.gate, confirm="3/5",
                        delete_tentative=2, delete=3, filter=filter)
    secs = time.perf_counter() - t0
    keep = res.confirmed
    pos, ids = [], []
    for k in range(len(scans)):
        rows = keep & (res.t == k)
        pos.append(res.x[rows][:, [0, 2]])
        ids.append(res.track[rows].astype(np.uint64))
    return pos, ids, secs, res


def run_stonesoup(scans: list[np.ndarray], pd: float, density: float,
                  scene: Scene = HEATHROW) -> tuple[list[np.ndarray], list[np.ndarray], float]:
    """Stone Soup's UKF + GNN tracker on the same plots (its measurements are
    (bearing, range))."""
    from stonesoup.dataassociator.neighbour import GNNWith2DAssignment
    from stonesoup.deleter.time import UpdateTimeStepsDeleter
    from stonesoup.hypothesiser.probability import PDAHypothesiser
    from stonesoup.initiator.simple import MultiMeasurementInitiator
    from stonesoup.models.measurement.nonlinear import CartesianToBearingRange
    from stonesoup.models.transition.linear import (
        CombinedLinearGaussianTransitionModel, ConstantVelocity)
    from stonesoup.predictor.kalman import UnscentedKalmanPredictor
    from stonesoup.tracker.simple import MultiTargetTracker
    from stonesoup.types.detection import Detection
    from stonesoup.types.state import GaussianState
    from stonesoup.updater.kalman import UnscentedKalmanUpdater

    start = datetime.datetime(2021, 7, 12, 14, 0)
    s = scene
    transition = CombinedLinearGaussianTransitionModel(
        [ConstantVelocity(s.q_cv), ConstantVelocity(s.q_cv)])
    measurement = CartesianToBearingRange(
        ndim_state=4, mapping=(0, 2),
        noise_covar=np.diag([s.sd_bearing ** 2, s.sd_range ** 2]))
    predictor = UnscentedKalmanPredictor(transition)
    updater = UnscentedKalmanUpdater(measurement)
    hyp = PDAHypothesiser(predictor=predictor, updater=updater,
                          clutter_spatial_density=density, prob_detect=pd, prob_gate=s.gate)
    gnn = GNNWith2DAssignment(hyp)
    prior = GaussianState([[0], [0], [0], [0]], np.diag([0, s.vel_var, 0, s.vel_var]))
    initiator = MultiMeasurementInitiator(
        prior_state=prior, measurement_model=measurement, deleter=UpdateTimeStepsDeleter(2),
        data_associator=gnn, updater=updater, min_points=3)
    detections = []
    for k, z in enumerate(scans):
        ts = start + datetime.timedelta(seconds=s.dt * k)
        detections.append((ts, {Detection(np.array([[b], [r]]), timestamp=ts,
                                          measurement_model=measurement) for r, b in z}))
    tracker = MultiTargetTracker(initiator=initiator, deleter=UpdateTimeStepsDeleter(3),
                                 detector=detections, data_associator=gnn, updater=updater)
    pos, ids, names = [], [], {}
    t0 = time.perf_counter()
    for ts, tracks in tracker:
        here = [t for t in tracks if t.state.timestamp == ts]
        pos.append(np.array([[float(t.state_vector[0]), float(t.state_vector[2])]
                             for t in here]).reshape(-1, 2))
        ids.append(np.array([names.setdefault(id(t), len(names)) for t in here], np.uint64))
    return pos, ids, time.perf_counter() - t0


def run_all(truth: list[np.ndarray], scans: list[np.ndarray], pd: float, clutter: float,
            scene: Scene, stonesoup: bool = True
            ) -> tuple[dict, "kestrel.TrackResult"]:
    """The four trackers on the same plots: name -> (positions, identities, seconds) per
    scan, and the IMM-UKF's whole result (for the plot)."""
    density = clutter / (scene.rmax * 2 * np.pi)
    runs = {}
    kp, ki, ks, res = run_kestrel(scans, pd, density, imm_model(scene), scene=scene)
    runs["kestrel IMM-UKF"] = (kp, ki, ks)
    runs["kestrel IMM-EKF"] = run_kestrel(scans, pd, density, imm_model(scene), "ekf",
                                          scene=scene)[:3]
    runs["kestrel UKF"] = run_kestrel(scans, pd, density, cv_model(scene), scene=scene)[:3]
    if stonesoup:
        try:
            runs["Stone Soup UKF"] = run_stonesoup(scans, pd, density, scene)
        except ImportError:
            print("Stone Soup is not installed: kestrel only (pip install stonesoup)")
    return runs, res


def report(truth: list[np.ndarray], truth_ids: list[np.ndarray], runs: dict,
           res: "kestrel.TrackResult", scene: Scene, plot: str | None, title: str,
           truth_label: str) -> None:
    """The GOSPA table of ``runs`` and, with ``plot``, the tracks beside the truth and
    GOSPA over time."""
    print(f"{'tracker':18s} {'mean GOSPA (m)':>15s} {'RMS error (m)':>14s} "
          f"{'missed/scan':>12s} {'false/scan':>11s} {'time (s)':>9s}")
    c = scene.c
    curves = {}
    for name, (pos, ids, secs) in runs.items():
        g = kestrel.gospa(truth, pos, c=c, p=2.0)
        curves[name] = g.gospa
        # The parts are p-th powers (Stone Soup's convention): c^p / 2 a missed target
        # or a false track, d^p an assigned pair.
        missed, false = g.missed / (c * c / 2), g.false / (c * c / 2)
        assigned = np.array([len(x) for x in truth]) - missed
        rms = np.sqrt(g.localisation.sum() / max(assigned.sum(), 1))
        print(f"{name:18s} {g.mean:15.1f} {rms:14.1f} {missed.mean():12.2f} "
              f"{false.mean():11.2f} {secs:9.3f}")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.5))
        all_truth = np.concatenate(truth)
        all_ids = np.concatenate(truth_ids)
        for i in np.unique(all_ids):
            p = all_truth[all_ids == i] / 1e3
            ax.plot(p[:, 0], p[:, 1], color="0.7", lw=3, zorder=1)
        for tid, (_, x) in res.by_track().items():
            ax.plot(x[:, 0] / 1e3, x[:, 2] / 1e3, lw=1, zorder=2)
        ax.plot([], [], color="0.7", lw=3, label=truth_label)
        ax.plot([], [], color="C0", lw=1, label="kestrel IMM-UKF tracks (confirmed)")
        ax.plot(0, 0, "k^", label="radar")
        ax.set(xlabel="east (km)", ylabel="north (km)", aspect="equal", title=title)
        ax.legend(loc="lower left", fontsize=8)
        tt = np.arange(len(truth)) * scene.dt / 60
        for name, d in curves.items():
            bx.plot(tt, d, label=f"{name} (mean {np.mean(d):.0f} m)")
        bx.set(xlabel="time (min)", ylabel=f"GOSPA (m), c = {c / 1e3:g} km, p = 2",
               title="GOSPA over time")
        bx.legend()
        fig.tight_layout()
        fig.savefig(plot)
        print(f"plot: {plot}")


def arguments(doc: str, clutter: float) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--pd", type=float, default=0.9)
    ap.add_argument("--clutter", type=float, default=clutter, help="false plots a scan")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plot", help="an image of the tracks and GOSPA over time")
    ap.add_argument("--no-stonesoup", action="store_true")
    return ap.parse_args()


def main() -> None:
    a = arguments(__doc__, 20.0)
    truth, truth_ids = truth_scans()
    scans = radar_plots(truth, a.pd, a.clutter, a.seed)
    runs, res = run_all(truth, scans, a.pd, a.clutter, HEATHROW, not a.no_stonesoup)
    print(f"{len(truth)} scans of {DT:g} s, {sum(map(len, truth))} aircraft positions, "
          f"{sum(map(len, scans))} plots (pd {a.pd}, {a.clutter:g} false a scan)")
    report(truth, truth_ids, runs, res, HEATHROW, a.plot,
           "Air traffic around Heathrow, 20 minutes", "ADS-B truth")


if __name__ == "__main__":
    main()
