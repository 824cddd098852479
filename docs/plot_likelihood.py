"""Time and error of the windowed filter against its window N, from the JSON lines of
`kestrel bench --only likelihood` (docs/bench/likelihood-*.jsonl). Usage:

    python3 docs/plot_likelihood.py docs/bench/likelihood-cpu-2core.jsonl [more.jsonl] -o docs/likelihood-window.svg
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("files", nargs="+")
ap.add_argument("-o", "--output", default="docs/likelihood-window.svg")
a = ap.parse_args()
recs = [json.loads(l) for f in a.files for l in open(f) if l.startswith("{")]
recs = [r for r in recs if r["name"].startswith("loglik/") and r.get("extra", {}).get("method", "").startswith("window:")
        and r["extra"]["method"][7:].isdigit()]
series = {}
for r in recs:
    key = (r["name"].split("/")[1] + ("/missing20" if r["extra"].get("missing_every") else ""), r["device"].split(" (")[0], r["precision"], r["tracks"], r["steps"])
    series.setdefault(key, []).append(r)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
for (model, dev, prec, _, _), rs in sorted(series.items()):
    rs.sort(key=lambda r: r["extra"]["window"])
    n = [r["extra"]["window"] for r in rs]
    label = f"{model} {dev} {prec} (T={rs[0]['steps']:.0e})"
    ax1.semilogy(n, [r["median_s"] / (r["tracks"] * r["steps"]) * 1e9 for r in rs], "o-", label=label)
    ax2.semilogy(n, [max(r["extra"]["max_abs_error_vs_exact"] or 1e-17, 1e-17) for r in rs], "o-", label=label)
    ax2.semilogy(n, [r["extra"]["bound"] if r["extra"].get("bound") not in (None, float("inf")) else float("nan") for r in rs], "k:", alpha=0.5)
ax1.set_xlabel("window N"); ax1.set_ylabel("ns per step"); ax1.set_title("time per step")
ax2.set_xlabel("window N"); ax2.set_ylabel("max |window - exact| per step"); ax2.set_title("error (dotted: bound)")
ax1.legend(fontsize=7); ax2.legend(fontsize=7)
fig.tight_layout()
fig.savefig(a.output)
print("wrote", a.output)
