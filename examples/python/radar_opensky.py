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

import numpy as np

import kestrel

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "opensky-heathrow.csv")
RADAR = (51.47, -0.4543)  # Heathrow, degrees
EARTH = 6371000.0
DT, RMAX = 10.0, 120e3
SD_RANGE, SD_BEARING = 50.0, 0.0017
VEL_VAR, GATE = 250.0 ** 2, 0.999


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


def radar_plots(truth: list[np.ndarray], pd: float, clutter: float, seed: int
                ) -> list[np.ndarray]:
    """Per scan, plots [m_k, 2] as (range, bearing): detections of the aircraft with
    probability ``pd`` and Poisson(``clutter``) false plots, shuffled."""
    rng = np.random.default_rng(seed)
    scans = []
    for pos in truth:
        seen = pos[rng.random(len(pos)) < pd]
        r = np.hypot(seen[:, 0], seen[:, 1]) + SD_RANGE * rng.standard_normal(len(seen))
        b = np.arctan2(seen[:, 1], seen[:, 0]) + SD_BEARING * rng.standard_normal(len(seen))
        n = rng.poisson(clutter)
        r = np.concatenate([r, rng.uniform(0, RMAX, n)])
        b = np.angle(np.exp(1j * np.concatenate([b, rng.uniform(-np.pi, np.pi, n)])))
        z = np.column_stack([r, b])
        scans.append(z[rng.permutation(len(z))])
    return scans


def imm_model(turn: float = 0.03, q: float = 1.0) -> str:
    """The IMM file: nearly constant velocity and turns at +-turn rad/s (airliners turn
    at about half the standard rate of 0.052 rad/s), UKF modes."""
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
    modes = "".join(mode.format(dt=DT, q=q, omega=w, rr=SD_RANGE ** 2, rb=SD_BEARING ** 2)
                    for w in [0.0, turn, -turn])
    return f"""
[imm]
transition = [[0.9, 0.05, 0.05], [0.1, 0.9, 0.0], [0.1, 0.0, 0.9]]
initial = [0.8, 0.1, 0.1]
{modes}
[prior]
x0 = [0.0, 0.0, 0.0, 0.0]
P0 = [[1e10, 0, 0, 0], [0, {VEL_VAR}, 0, 0], [0, 0, 1e10, 0], [0, 0, 0, {VEL_VAR}]]
[filter]
kind = "ukf"
"""


def cv_model(q: float = 5.0) -> str:
    """One nearly-constant-velocity model with Stone Soup's UKF settings (its
    UnscentedKalmanUpdater's alpha 0.5, beta 2, kappa 0): the like-for-like pair of
    Stone Soup's tracker."""
    return f"""
[model]
kind = "ct"
dt = {DT}
q = {q}
omega = 0.0
measure = "range-bearing"
radar = [0.0, 0.0]
r_range = {SD_RANGE ** 2}
r_bearing = {SD_BEARING ** 2}
[prior]
x0 = [0.0, 0.0, 0.0, 0.0]
P0 = [[1e10, 0, 0, 0], [0, {VEL_VAR}, 0, 0], [0, 0, 1e10, 0], [0, 0, 0, {VEL_VAR}]]
[filter]
kind = "ukf"
alpha = 0.5
beta = 2.0
kappa = 0.0
"""


def run_kestrel(scans: list[np.ndarray], pd: float, density: float, model: str,
                filter: str | None = None
                ) -> tuple[list[np.ndarray], list[np.ndarray], float, "kestrel.TrackResult"]:
    """kestrel's tracker of the model file text ``model``: per scan the confirmed
    tracks' positions and identities, the seconds it took, and the whole result."""
    nl = kestrel.NonlinearFilter.from_toml_str(model, "radar")
    t0 = time.perf_counter()
    res = kestrel.track(scans, nl, pd=pd, clutter=density, gate=GATE, confirm="3/5",
                        delete_tentative=2, delete=3, filter=filter)
    secs = time.perf_counter() - t0
    keep = res.confirmed
    pos, ids = [], []
    for k in range(len(scans)):
        rows = keep & (res.t == k)
        pos.append(res.x[rows][:, [0, 2]])
        ids.append(res.track[rows].astype(np.uint64))
    return pos, ids, secs, res


def run_stonesoup(scans: list[np.ndarray], pd: float, density: float, q: float = 5.0
                  ) -> tuple[list[np.ndarray], list[np.ndarray], float]:
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
    transition = CombinedLinearGaussianTransitionModel([ConstantVelocity(q), ConstantVelocity(q)])
    measurement = CartesianToBearingRange(
        ndim_state=4, mapping=(0, 2), noise_covar=np.diag([SD_BEARING ** 2, SD_RANGE ** 2]))
    predictor = UnscentedKalmanPredictor(transition)
    updater = UnscentedKalmanUpdater(measurement)
    hyp = PDAHypothesiser(predictor=predictor, updater=updater,
                          clutter_spatial_density=density, prob_detect=pd, prob_gate=GATE)
    gnn = GNNWith2DAssignment(hyp)
    prior = GaussianState([[0], [0], [0], [0]], np.diag([0, VEL_VAR, 0, VEL_VAR]))
    initiator = MultiMeasurementInitiator(
        prior_state=prior, measurement_model=measurement, deleter=UpdateTimeStepsDeleter(2),
        data_associator=gnn, updater=updater, min_points=3)
    detections = []
    for k, z in enumerate(scans):
        ts = start + datetime.timedelta(seconds=DT * k)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pd", type=float, default=0.9)
    ap.add_argument("--clutter", type=float, default=20.0, help="false plots a scan")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plot", help="an image of the tracks and GOSPA over time")
    ap.add_argument("--no-stonesoup", action="store_true")
    a = ap.parse_args()
    truth, truth_ids = truth_scans()
    scans = radar_plots(truth, a.pd, a.clutter, a.seed)
    density = a.clutter / (RMAX * 2 * np.pi)
    runs = {}
    kp, ki, ks, res = run_kestrel(scans, a.pd, density, imm_model())
    runs["kestrel IMM-UKF"] = (kp, ki, ks)
    runs["kestrel IMM-EKF"] = run_kestrel(scans, a.pd, density, imm_model(), "ekf")[:3]
    runs["kestrel UKF"] = run_kestrel(scans, a.pd, density, cv_model())[:3]
    if not a.no_stonesoup:
        try:
            runs["Stone Soup UKF"] = run_stonesoup(scans, a.pd, density)
        except ImportError:
            print("Stone Soup is not installed: kestrel only (pip install stonesoup)")
    print(f"{len(truth)} scans of {DT:g} s, {sum(map(len, truth))} aircraft positions, "
          f"{sum(map(len, scans))} plots (pd {a.pd}, {a.clutter:g} false a scan)")
    print(f"{'tracker':18s} {'mean GOSPA (m)':>15s} {'RMS error (m)':>14s} "
          f"{'missed/scan':>12s} {'false/scan':>11s} {'time (s)':>9s}")
    c = 2000.0
    curves = {}
    for name, (pos, ids, secs) in runs.items():
        g = kestrel.gospa(truth, pos, c=c, p=2.0)
        curves[name] = g.gospa
        # The parts are p-th powers (Stone Soup's convention): c^p / 2 a missed aircraft
        # or a false track, d^p an assigned pair.
        missed, false = g.missed / (c * c / 2), g.false / (c * c / 2)
        assigned = np.array([len(x) for x in truth]) - missed
        rms = np.sqrt(g.localisation.sum() / max(assigned.sum(), 1))
        print(f"{name:18s} {g.mean:15.1f} {rms:14.1f} {missed.mean():12.2f} "
              f"{false.mean():11.2f} {secs:9.3f}")
    if a.plot:
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
        ax.plot([], [], color="0.7", lw=3, label="ADS-B truth")
        ax.plot([], [], color="C0", lw=1, label="kestrel IMM-UKF tracks (confirmed)")
        ax.plot(0, 0, "k^", label="radar")
        ax.set(xlabel="east (km)", ylabel="north (km)", aspect="equal",
               title="Air traffic around Heathrow, 20 minutes")
        ax.legend(loc="lower left", fontsize=8)
        tt = np.arange(len(truth)) * DT / 60
        for name, d in curves.items():
            bx.plot(tt, d, label=f"{name} (mean {np.mean(d):.0f} m)")
        bx.set(xlabel="time (min)", ylabel="GOSPA (m), c = 2 km, p = 2",
               title="GOSPA over time")
        bx.legend()
        fig.tight_layout()
        fig.savefig(a.plot)
        print(f"plot: {a.plot}")


if __name__ == "__main__":
    main()
