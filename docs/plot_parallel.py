#!/usr/bin/env python3
"""Draws time against T per scan algorithm (log-log SVG) from `kestrel bench` JSON lines,
with cuthbert's figures on the same H100 as a dashed reference.

    python3 docs/plot_parallel.py docs/bench/parallel-h100.jsonl gpu-parallel-filter f32 docs/parallel-gpu-filter.svg
"""
import json, math, sys

src, prefix, prec, out = sys.argv[1:5]
series = {}
for line in open(src):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    n = r["name"]
    if not n.startswith(prefix + "/") or r["precision"] != prec or "chunk" in n or "batched" in n:
        continue
    series.setdefault(n.split("/", 1)[1], []).append((r["steps"], r["median_s"]))
# cuthbert 0.1.1 (JAX), H100, nx = 4, ny = 2, f32: seconds at T = 1e3 .. 1e6.
CUTHBERT = {
    "gpu-parallel-filter": [(1e3, 4.7e-3), (1e4, 7.8e-3), (1e5, 7.4e-3), (1e6, 20.6e-3)],
    "gpu-parallel-rts": [(1e3, 1.0e-3), (1e4, 1.5e-3), (1e5, 2.3e-3), (1e6, 7.2e-3)],
}
ref = CUTHBERT.get(prefix, []) if prec == "f32" else []
W, H, L, B, R, T = 640, 420, 70, 50, 150, 30
xs = [t for s in series.values() for t, _ in s]
ys = [y for s in series.values() for _, y in s] + [y for _, y in ref]
x0, x1 = math.log10(min(xs)), math.log10(max(xs))
y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
X = lambda t: L + (math.log10(t) - x0) / (x1 - x0) * (W - L - R)
Y = lambda y: H - B - (math.log10(y) - y0) / (y1 - y0) * (H - B - T)
colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{L}" y="18">{prefix} ({prec}): median time vs T</text>']
for e in range(int(x0), int(x1) + 1):
    o.append(f'<line x1="{X(10**e)}" y1="{T}" x2="{X(10**e)}" y2="{H-B}" stroke="#ddd"/><text x="{X(10**e)-14}" y="{H-B+16}">1e{e}</text>')
for e in range(y0, y1 + 1):
    o.append(f'<line x1="{L}" y1="{Y(10**e)}" x2="{W-R}" y2="{Y(10**e)}" stroke="#ddd"/><text x="{L-45}" y="{Y(10**e)+4}">1e{e} s</text>')
o.append(f'<text x="{(W-R+L)/2-10}" y="{H-12}">T (steps)</text>')
for i, (name, pts) in enumerate(sorted(series.items())):
    pts.sort()
    c = colors[i % len(colors)]
    o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (c, " ".join(f"{X(t):.1f},{Y(y):.1f}" for t, y in pts)))
    for t, y in pts:
        o.append(f'<circle cx="{X(t):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}"/>')
    o.append(f'<text x="{W-R+10}" y="{T+20+18*i}" fill="{c}">{name}</text>')
if ref:
    pts = " ".join(f"{X(t):.1f},{Y(y):.1f}" for t, y in ref)
    o.append(f'<polyline fill="none" stroke="#555" stroke-width="2" stroke-dasharray="6,4" points="{pts}"/>')
    o.append(f'<text x="{W-R+10}" y="{T+20+18*len(series)}" fill="#555">cuthbert (JAX)</text>')
o.append("</svg>")
open(out, "w").write("\n".join(o))
