#!/usr/bin/env python3
"""Plots `kestrel bench --only tracking` records: milliseconds per scan against the number
of targets (clutter = targets) and against clutter at 10^4 targets, GNN and JPDA.

Usage: kestrel bench --only tracking | python3 scripts/plot_tracking_bench.py OUT.svg
(needs matplotlib)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

recs = []
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        if r["name"].startswith("track-"):
            recs.append(r)
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.4))
for assoc, style in (("gnn", "o-"), ("jpda", "s--")):
    rs = [r for r in recs if r["name"].startswith(f"track-{assoc}/")]
    diag = sorted((r["tracks"], r["extra"]["ms_per_scan"]) for r in rs
                  if r["extra"]["clutter_per_scan"] == r["tracks"])
    if diag:
        a.loglog(*zip(*diag), style, label=assoc.upper())
    sweep = sorted((r["extra"]["clutter_per_scan"], r["extra"]["ms_per_scan"]) for r in rs
                   if r["tracks"] == 10000)
    if sweep:
        b.loglog(*zip(*sweep), style, label=assoc.upper())
device = recs[0]["device"] if recs else ""
a.set(xlabel="targets (clutter detections per scan = targets)", ylabel="ms per scan",
      title=f"time per scan, {device}")
b.set(xlabel="clutter detections per scan", ylabel="ms per scan", title="10^4 targets")
for ax in (a, b):
    ax.axhline(1000, color="grey", lw=0.8, ls=":")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[1] if len(sys.argv) > 1 else "tracking-scale.svg")
