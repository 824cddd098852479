"""Radar tracking of recorded shipping: kestrel's IMM of UKFs beside Stone Soup's UKF
with GNN, on the same simulated coastal-radar plots, scored by GOSPA over time.

Truth: the AIS reports of the vessels within 25 km of a radar off Southsea (50.78 N,
1.10 W) over 30 minutes of 12 January 2016 in the Solent
(``examples/data/solent-ais.csv``, from Stone Soup's demo data; see
``examples/data/README.md``), on a local east/north plane around the radar. Each
vessel's reports (one every 20 s or less while under way, every few minutes at anchor
or moored) are interpolated onto the radar's scans, one every 5 s, where two reports at
most 6 minutes apart bracket the scan; the scans cover the 24 minutes from 3 minutes
after the first report to 3 minutes before the last. The radar sees each vessel with probability
``pd`` as range (sd 15 m) and bearing (sd 0.0035 rad, 0.2 degrees), among Poisson sea
clutter spread uniformly over range and bearing.

The trackers and their settings are those of ``radar_opensky.py`` (the same life cycle,
gate and GOSPA), scaled to ships: an IMM of nearly constant velocity and turns at +-0.02
rad/s (q = 0.01), a constant-velocity model with q = 0.05 for the like-for-like pair of
Stone Soup's UKF + GNN, speeds up to about 15 m/s in the prior, GOSPA's cut-off 500 m.
Many vessels lie moored tens of metres apart in Portsmouth Harbour, so the scene tests
the association as much as the filters.

Usage (Stone Soup and matplotlib optional; without Stone Soup only kestrel runs):
    python examples/python/radar_solent.py [--plot radar-solent.svg] [--seed 1]
        [--pd 0.9] [--clutter 30] [--no-stonesoup]
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from radar_opensky import (  # noqa: E402
    EARTH, Scene, arguments, imm_model, radar_plots, report, run_all, run_kestrel)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "solent-ais.csv")
RADAR = (50.78, -1.10)  # off Southsea, degrees
GAP = 360.0  # the longest gap between two reports that a scan is interpolated across (s)

SOLENT = Scene(dt=5.0, rmax=25e3, sd_range=15.0, sd_bearing=0.0035, vel_var=15.0 ** 2,
               turn=0.02, q=0.01, q_cv=0.05, c=500.0)


def truth_scans(path: str = DATA, scene: Scene = SOLENT
                ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per scan, the vessel positions [n_k, 2] (east, north in m from the radar),
    interpolated from their AIS reports, and their identities [n_k]."""
    raw = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    t = raw["time"].astype(float)
    lat0, lon0 = np.radians(RADAR[0]), np.radians(RADAR[1])
    east = (np.radians(raw["lon"]) - lon0) * EARTH * np.cos(lat0)
    north = (np.radians(raw["lat"]) - lat0) * EARTH
    ids = np.unique(raw["mmsi"], return_inverse=True)[1]
    # The scans start GAP / 2 after the first report and end GAP / 2 before the last, so
    # that a vessel reporting at least every GAP / 2 is bracketed on every scan.
    t0 = t.min() + GAP / 2
    n = int((t.max() - GAP / 2 - t0) // scene.dt) + 1
    grid = t0 + scene.dt * np.arange(n)
    pos = [[] for _ in range(n)]
    who = [[] for _ in range(n)]
    for v in np.unique(ids):
        sel = np.flatnonzero(ids == v)
        sel = sel[np.argsort(t[sel], kind="stable")]
        tv, ev, nv = t[sel], east[sel], north[sel]
        # The scans inside a gap of at most GAP between two reports.
        j = np.searchsorted(tv, grid, side="right")
        ok = (j > 0) & (j < len(tv))
        ok &= np.where(ok, tv[np.minimum(j, len(tv) - 1)] - tv[np.maximum(j - 1, 0)], np.inf) <= GAP
        for k in np.flatnonzero(ok):
            pos[k].append([np.interp(grid[k], tv, ev), np.interp(grid[k], tv, nv)])
            who[k].append(v)
    return ([np.array(p, float).reshape(-1, 2) for p in pos],
            [np.array(w, np.int64) for w in who])


def main() -> None:
    a = arguments(__doc__, 30.0)
    truth, truth_ids = truth_scans()
    scans = radar_plots(truth, a.pd, a.clutter, a.seed, SOLENT)
    runs, res = run_all(truth, scans, a.pd, a.clutter, SOLENT, not a.no_stonesoup)
    print(f"{len(truth)} scans of {SOLENT.dt:g} s, {sum(map(len, truth))} vessel positions "
          f"of {len(np.unique(np.concatenate(truth_ids)))} vessels, "
          f"{sum(map(len, scans))} plots (pd {a.pd}, {a.clutter:g} false a scan)")
    report(truth, truth_ids, runs, res, SOLENT, a.plot,
           "Shipping in the Solent, 24 minutes", "AIS truth")


if __name__ == "__main__":
    main()
