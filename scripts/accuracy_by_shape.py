#!/usr/bin/env python3
"""Tabulates `servesim accuracy` errors on aiconfigurator's silicon rows by
shape: each compared row's signed error joined with its settings in the
silicon CSV (the `source` column names the CSV line), grouped by any of
engine, chip, fam (model family), band (concurrency band), moe (MoE or
dense), precision, layout (tpX dpY epZ), isl, osl. Prints count, median
|error| and median signed error per group, as docs/accuracy.md's TPOT
structure table does.

Usage: python3 scripts/accuracy_by_shape.py POINTS_CSV KEYS [METRIC] [SILICON_CSV]
  e.g. python3 scripts/accuracy_by_shape.py out/accuracy-silicon/points.csv moe,band tpot"""
import collections, csv, statistics, sys

points, keys = sys.argv[1], sys.argv[2].split(",")
metric = sys.argv[3] if len(sys.argv) > 3 else "tpot"
silicon = sys.argv[4] if len(sys.argv) > 4 else "../shared/data/aiconfigurator/silicon/silicon_train.csv"
rows = list(csv.DictReader(open(silicon)))
FAMILIES = ["deepseek", "qwen3.5", "qwen3-235b", "qwen3-32b", "llama-3.1-70b", "llama-3.1-8b", "minimax", "gpt-oss"]
MOE = {"deepseek", "qwen3.5", "qwen3-235b", "minimax", "gpt-oss"}


def band(c):
    if not c:
        return "rate"
    c = int(c)
    for hi, name in [(4, "1-4"), (16, "5-16"), (64, "17-64"), (256, "65-256"), (1024, "257-1024")]:
        if c <= hi:
            return name
    return "1025+"


groups = collections.defaultdict(list)
for p in csv.DictReader(open(points)):
    if p["metric"] != metric or p["stat"] != "mean":
        continue
    s = rows[int(p["source"].rsplit(":", 1)[1]) - 2]
    fam = next((f for f in FAMILIES if f in p["model"].lower()), p["model"])
    p.update(band=band(p["concurrency"]), fam=fam, moe="moe" if fam in MOE else "dense",
             layout=f"tp{s['tp_size']}dp{s['attention_dp_size'] or 1}ep{s['moe_ep_size'] or 1}",
             isl=s["isl"], osl=s["osl"])
    groups[tuple(p[k] for k in keys)].append(float(p["error_pct"]))
every = []
for k in sorted(groups):
    v = groups[k]
    every += v
    print(" ".join(f"{x:<14}" for x in k),
          f"{len(v):5d} {statistics.median(map(abs, v)):6.1f} % ({statistics.median(v):+.1f} %)")
print(f"{'all':<14} {len(every):5d} {statistics.median(map(abs, every)):6.1f} % ({statistics.median(every):+.1f} %)")
