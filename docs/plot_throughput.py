#!/usr/bin/env python3
"""Draws throughput (target-steps/s) against the number of tracks B, one line per record
name, as a log-log SVG, from `kestrel bench` JSON lines.

    python3 docs/plot_throughput.py docs/bench/kalman-h100.jsonl f32 "H100: many-target filter" docs/throughput-vs-b.svg [name-prefix ...]
"""
import json, math, sys

src, prec, title, out = sys.argv[1:5]
prefixes = sys.argv[5:]
series = {}
for line in open(src):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if r["precision"] != prec or r.get("steps") != 100:
        continue
    if prefixes and not any(r["name"].startswith(p) for p in prefixes):
        continue
    series.setdefault(r["name"], []).append((r["tracks"], r["target_steps_per_s"]))
series = {k: sorted(v) for k, v in series.items() if len(v) >= 2}
if not series:
    sys.exit("no series with two or more sizes")
W, H, L, B, R, T = 720, 440, 70, 50, 260, 30
xs = [b for s in series.values() for b, _ in s]
ys = [y for s in series.values() for _, y in s]
x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
X = lambda b: L + (math.log10(b) - x0) / max(x1 - x0, 1e-9) * (W - L - R)
Y = lambda y: H - B - (math.log10(y) - y0) / max(y1 - y0, 1e-9) * (H - B - T)
colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{L}" y="18">{title} ({prec}, T = 100): target-steps/s vs tracks</text>']
for e in range(x0, x1 + 1):
    o.append(f'<line x1="{X(10**e)}" y1="{T}" x2="{X(10**e)}" y2="{H-B}" stroke="#ddd"/><text x="{X(10**e)-14}" y="{H-B+16}">1e{e}</text>')
for e in range(y0, y1 + 1):
    o.append(f'<line x1="{L}" y1="{Y(10**e)}" x2="{W-R}" y2="{Y(10**e)}" stroke="#ddd"/><text x="{L-40}" y="{Y(10**e)+4}">1e{e}</text>')
o.append(f'<text x="{(W-R)/2}" y="{H-12}">tracks B</text>')
for i, (name, pts) in enumerate(sorted(series.items())):
    c = colors[i % len(colors)]
    o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (c, " ".join(f"{X(b):.1f},{Y(y):.1f}" for b, y in pts)))
    for b, y in pts:
        o.append(f'<circle cx="{X(b):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}"/>')
    o.append(f'<rect x="{W-R+10}" y="{T+18*i}" width="12" height="12" fill="{c}"/><text x="{W-R+28}" y="{T+18*i+10}">{name}</text>')
o.append("</svg>")
open(out, "w").write("\n".join(o))
