#!/usr/bin/env python3
"""kestrel's tracker against Stone Soup's on the same simulated scenarios.

Both trackers read the same detections (from `kestrel simulate --scenario random`) with
the same models and parameters, both track files are scored by the same `kestrel eval`
(GOSPA, c = 20 m, p = 2, on positions), and each tracker's own run time is timed
(Stone Soup: the tracker loop in Python; kestrel: the `kestrel track` process, file
reading and writing included).

Setup shared by both (examples/tracking.toml): 2-D constant velocity, q = 1, R = 25 I,
new tracks from one detection with velocity variance 100, pd = 0.9, gate probability
0.999, clutter density = clutter per scan / region area, confirmation after 3 detections
with no two misses in a row (kestrel: --confirm 3/5 --delete-tentative 2; Stone Soup:
MultiMeasurementInitiator min_points = 3, holding tracks deleted by
UpdateTimeStepsDeleter(2) and associated by GNN, as in kestrel), deletion after 3 consecutive misses
(Stone Soup: UpdateTimeStepsDeleter(3)).

Stone Soup's trackers: GNN = DetectionKDTreeGNN2D (GNNWith2DAssignment behind its k-d tree
pre-selection) and JPDA = JPDA with loopy belief propagation (JPDAwithLBP behind the same
k-d tree; Stone Soup's exact JPDA enumerates joint events over all tracks at once and does
not finish at these sizes), both with PDAHypothesiser(prob_gate 0.999).

kestrel's JPDA is run twice: with its default marginals (exact by enumeration in small
clusters, belief propagation in large ones) and with `--jpda-marginals lbp` (belief
propagation everywhere, as Stone Soup's JPDAwithLBP), which should score the same as
Stone Soup to all digits.

Usage: python3 scripts/stonesoup_compare.py [--kestrel target/release/kestrel]
       [--steps 30] [--cases 50:10,50:100,500:10:15,500:100:15] [--seeds 7] [--out DIR]
(a case is targets:clutter[:steps]; --seeds 1-20 runs every case on each seed and prints
the means over the seeds at the end)
(Stone Soup installed in a virtual environment, e.g. /work/venv-ss: pip install stonesoup)
"""
import argparse
import datetime
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
from stonesoup.dataassociator.neighbour import GNNWith2DAssignment
from stonesoup.dataassociator.probability import JPDAwithLBP
from stonesoup.dataassociator.tree import DetectionKDTreeMixIn
from stonesoup.deleter.time import UpdateTimeStepsDeleter
from stonesoup.hypothesiser.probability import PDAHypothesiser
from stonesoup.initiator.simple import MultiMeasurementInitiator
from stonesoup.models.measurement.linear import LinearGaussian
from stonesoup.models.transition.linear import (
    CombinedLinearGaussianTransitionModel, ConstantVelocity)
from stonesoup.predictor.kalman import KalmanPredictor
from stonesoup.tracker.simple import MultiTargetMixtureTracker, MultiTargetTracker
from stonesoup.types.detection import Detection
from stonesoup.types.state import GaussianState
from stonesoup.updater.kalman import KalmanUpdater

Q, R, VEL_VAR, PD, GATE = 1.0, 25.0, 100.0, 0.9, 0.999


class KDTreeGNN2D(DetectionKDTreeMixIn, GNNWith2DAssignment):
    pass


class KDTreeJPDAwithLBP(DetectionKDTreeMixIn, JPDAwithLBP):
    pass


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    return p


def read_detections(path):
    scans = {}
    with open(path) as f:
        next(f)
        for line in f:
            t, x, y = (float(v) for v in line.split(","))
            scans.setdefault(int(t), []).append((x, y))
    return scans


def stonesoup(scans, steps, clutter_density, assoc):
    start = datetime.datetime(2024, 1, 1)
    transition = CombinedLinearGaussianTransitionModel([ConstantVelocity(Q), ConstantVelocity(Q)])
    measurement = LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=np.diag([R, R]))
    predictor = KalmanPredictor(transition)
    updater = KalmanUpdater(measurement)
    hyp = PDAHypothesiser(predictor=predictor, updater=updater,
                          clutter_spatial_density=clutter_density,
                          prob_detect=PD, prob_gate=GATE)

    def associator(kind):
        if kind == "gnn":
            return KDTreeGNN2D(hypothesiser=hyp, predictor=predictor, updater=updater,
                               max_distance=200.0)
        return KDTreeJPDAwithLBP(hypothesiser=hyp, predictor=predictor, updater=updater,
                                 max_distance=200.0)

    prior = GaussianState([[0], [0], [0], [0]], np.diag([0, VEL_VAR, 0, VEL_VAR]))
    initiator = MultiMeasurementInitiator(
        prior_state=prior, measurement_model=measurement,
        deleter=UpdateTimeStepsDeleter(2), data_associator=associator("gnn"),
        updater=updater, min_points=3)
    detections = []
    for k in range(steps):
        ts = start + datetime.timedelta(seconds=k)
        detections.append((ts, {Detection(np.array([[x], [y]]), timestamp=ts,
                                          measurement_model=measurement)
                                for x, y in scans.get(k, [])}))
    cls = MultiTargetTracker if assoc == "gnn" else MultiTargetMixtureTracker
    tracker = cls(initiator=initiator, deleter=UpdateTimeStepsDeleter(3),
                  detector=detections, data_associator=associator(assoc), updater=updater)
    rows = []
    t0 = time.perf_counter()
    for ts, tracks in tracker:
        k = round((ts - start).total_seconds())
        for track in tracks:
            s = track.state
            if s.timestamp == ts:
                rows.append((k, id(track), np.ravel(s.state_vector), np.ravel(s.covar)))
    secs = time.perf_counter() - t0
    # Stable small ids for the file.
    ids = {}
    lines = ["t,track,status,x0,x1,x2,x3," + ",".join(f"P{i}{j}" for i in range(4) for j in range(4))]
    for k, key, x, p in rows:
        i = ids.setdefault(key, len(ids))
        lines.append(f"{k},{i},confirmed," + ",".join(repr(float(v)) for v in np.concatenate([x, p])))
    return "\n".join(lines) + "\n", secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kestrel", default="target/release/kestrel")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--cases", default="50:10,50:100,500:10:15,500:100:15")
    ap.add_argument("--assoc", default="gnn,jpda")
    ap.add_argument("--out", default="stonesoup-compare")
    ap.add_argument("--seeds", default="7", help="a seed, a list 1,2,3 or a range 1-20")
    a = ap.parse_args()
    seeds = []
    for part in a.seeds.split(","):
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    os.makedirs(a.out, exist_ok=True)
    model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "tracking.toml")
    print("targets clutter steps seed assoc | GOSPA kestrel  GOSPA kestrel-lbp  GOSPA StoneSoup | "
          "time kestrel (s)  time StoneSoup (s)  speed-up", flush=True)
    sums = {}
    for case in a.cases.split(","):
        parts = [int(v) for v in case.split(":")]
        n, clutter = parts[0], parts[1]
        steps = parts[2] if len(parts) > 2 else a.steps
        # The same target density in every case: 50 targets in a 2 km x 2 km square.
        region = 1000.0 * math.sqrt(n / 50.0)
        density = clutter / (2 * region) ** 2
        for seed in seeds:
            base = os.path.join(a.out, f"n{n}-c{clutter}-t{steps}-s{seed}")
            det, truth = base + "-det.csv", base + "-truth.csv"
            run([a.kestrel, "simulate", "--scenario", "random", "--model", model,
                 "--tracks", str(n), "--steps", str(steps), "--pd", str(PD),
                 "--clutter", str(clutter), "--region", str(region), "--seed", str(seed),
                 "--output", det, "--truth", truth])
            scans = read_detections(det)
            for assoc in a.assoc.split(","):
                common = ["--model", model, "--detections", det, "--assoc", assoc,
                          "--gate", str(GATE), "--pd", str(PD), "--clutter", repr(density),
                          "--confirm", "3/5", "--delete-tentative", "2", "--delete", "3"]
                kt = f"{base}-{assoc}-kestrel.csv"
                t0 = time.perf_counter()
                run([a.kestrel, "track", "--output", kt] + common)
                k_secs = time.perf_counter() - t0
                files = [kt]
                if assoc == "jpda":
                    kl = f"{base}-{assoc}-kestrel-lbp.csv"
                    run([a.kestrel, "track", "--output", kl, "--jpda-marginals", "lbp"] + common)
                    files.append(kl)
                text, s_secs = stonesoup(scans, steps, density, assoc)
                st = f"{base}-{assoc}-stonesoup.csv"
                with open(st, "w") as f:
                    f.write(text)
                files.append(st)
                g = []
                for tracks in files:
                    out = run([a.kestrel, "eval", "--truth", truth, "--tracks", tracks,
                               "--metric", "gospa", "--c", "20", "--p", "2", "--model", model]).stdout
                    g.append(float(re.search(r"mean GOSPA ([0-9.eE+-]+)", out).group(1)))
                if len(g) == 2:
                    g.insert(1, g[0])
                key = (n, clutter, steps, assoc)
                acc = sums.setdefault(key, [0, 0.0, 0.0, 0.0, 0.0, 0.0])
                for i, v in enumerate([1] + g + [k_secs, s_secs]):
                    acc[i] += v
                print(f"{n:7d} {clutter:7d} {steps:5d} {seed:4d} {assoc:5s} | {g[0]:13.4f}  "
                      f"{g[1]:17.4f}  {g[2]:15.4f} | {k_secs:16.3f}  {s_secs:18.3f}  "
                      f"{s_secs / k_secs:8.1f}x", flush=True)
    if len(seeds) > 1:
        print("means over the seeds:")
        for (n, clutter, steps, assoc), acc in sums.items():
            k = acc[0]
            print(f"{n:7d} {clutter:7d} {steps:5d} {k:3d}x {assoc:5s} | {acc[1] / k:13.4f}  "
                  f"{acc[2] / k:17.4f}  {acc[3] / k:15.4f} | {acc[4] / k:16.3f}  "
                  f"{acc[5] / k:18.3f}  {acc[5] / acc[4]:8.1f}x", flush=True)

if __name__ == "__main__":
    main()
