#!/usr/bin/env python3
"""Fit and leave-one-group-out cross-validation of the fitted constants of
`servesim accuracy`'s default model on aiconfigurator's silicon rows, by
model family or by chip.

The fitted constants are SGLang's kernel-launch time per layer of a prefill
step (`cost::runtime::PREFILL_LAUNCH_S_PER_DENSE_LAYER`, `..._MOE_LAYER`).
Their fit is a grid: one `servesim accuracy` run of the SGLang rows per pair
(`scripts/launch-grid.toml` with DENSE and MOE replaced: a base scenario
whose `[engine] eager_launch_s_per_layer` replaces the two constants), its SGLang rows read from folders named `<prefix>_<dense>_<moe>`. The fit is the pair with
the least median |TTFT error| + median |TPOT error| over the SGLang rows; a
held-out group's pair is fitted on the other groups' SGLang rows and
predicts the group's rows. Rows of the other engines depend on no fitted
constant (their terms come from the engines' sources, the harness's recipes
and aiconfigurator's per-kernel tables), so their held-out error is the one
in the base run. Prints per held-out group its fitted pair, rows and median
|error| (median signed error) of TTFT and TPOT, the median over all held-out
rows and the worst group of at least 10 rows.

Usage:
  servesim accuracy ../shared/data/aiconfigurator/silicon/silicon_train.csv --out out/acc
  awk -F, 'NR==1 || $3=="sglang"' ../shared/data/aiconfigurator/silicon/silicon_train.csv > sg.csv
  for D in 0 0.0004 0.0008; do for M in 0 0.0008 0.0016 0.0024 0.0032; do
    sed "s/DENSE/$D/; s/MOE/$M/" scripts/launch-grid.toml > grid.toml
    servesim accuracy sg.csv --scenario grid.toml --out out/grid/sg_${D}_${M}
  done; done
  python3 scripts/accuracy_holdout.py out/acc/points.csv family out/grid/sg_*
  python3 scripts/accuracy_holdout.py out/acc/points.csv chip out/grid/sg_*
Standard library only."""
import collections, csv, re, statistics, sys

# Checkpoint variants of one architecture share a family.
FAMILIES = [
    (r"deepseek-(r1|v3)", "DeepSeek-R1/V3"),
    (r"llama-3\.1-70b", "Llama-3.1-70B"),
    (r"llama-3\.1-8b", "Llama-3.1-8B"),
    (r"minimax-m2", "MiniMax-M2.5"),
    (r"qwen3-235b", "Qwen3-235B (MoE)"),
    (r"qwen3-32b", "Qwen3-32B"),
    (r"qwen3\.5", "Qwen3.5"),
    (r"gpt-oss", "gpt-oss"),
]


def family(model):
    m = model.lower()
    for pat, name in FAMILIES:
        if re.search(pat, m):
            return name
    return model


def key(row, by):
    if by == "family":
        return family(row["model"])
    if by == "chip":
        return row["chip"].upper().replace("_SXM", "-SXM").replace("B200-SXM", "B200").replace(
            "B300-SXM", "B300")
    raise SystemExit(f"group by `family` or `chip`, not `{by}`")


def fmt(errs):
    if not errs:
        return "-"
    a = statistics.median(abs(e) for e in errs)
    s = statistics.median(errs)
    return f"{a:.1f} % ({s:+.1f} %)"


def read(path, by, engine=None):
    """Row id -> (group, {metric: error %}) of the mean statistics (of one
    engine's rows when `engine` is given)."""
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["format"] != "aiconfigurator" or r["stat"] != "mean" or not r["error_pct"]:
                continue
            if engine and r["engine"] != engine:
                continue
            if r["metric"] not in ("ttft", "tpot"):
                continue
            g, errs = rows.setdefault(r["id"], (key(r, by), {}))
            errs[r["metric"]] = float(r["error_pct"])
    return {k: v for k, v in rows.items() if len(v[1]) == 2}


def objective(rows):
    if not rows:
        return float("inf")
    t = statistics.median(abs(e["ttft"]) for _, e in rows)
    p = statistics.median(abs(e["tpot"]) for _, e in rows)
    return t + p


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    path, by, grid_dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    base = read(path, by)
    grid = {}
    for d in grid_dirs:
        parts = d.rstrip("/").rsplit("_", 2)
        rows = read(f"{d}/points.csv", by, "sglang")
        # Only the rows the run without a base scenario compares: the grid's
        # base scenario gives its placeholder load to rows that record none.
        grid[(float(parts[1]), float(parts[2]))] = {i: v for i, v in rows.items() if i in base}
    fitted_ids = set().union(*(g.keys() for g in grid.values())) if grid else set()
    if grid:
        best = min(grid, key=lambda c: objective(list(grid[c].values())))
        print(f"fit on every row: dense {best[0] * 1e3:.1f} ms, MoE {best[1] * 1e3:.1f} ms per layer\n")
    groups = sorted({g for g, _ in base.values()})
    print(f"| held-out {by} | fitted (dense, MoE) ms/layer | rows | TTFT | TPOT |")
    print("| --- | --- | ---: | ---: | ---: |")
    all_t, all_p, worst = [], [], None
    for g in groups:
        pair = "-"
        errs = {i: e for i, (gg, e) in base.items() if gg == g and i not in fitted_ids}
        if grid:
            c = min(grid, key=lambda c: objective([v for v in grid[c].values() if v[0] != g]))
            held = {i: e for i, (gg, e) in grid[c].items() if gg == g}
            if held:
                pair = f"{c[0] * 1e3:.1f}, {c[1] * 1e3:.1f}"
            errs.update(held)
        t = [e["ttft"] for e in errs.values()]
        p = [e["tpot"] for e in errs.values()]
        all_t += t
        all_p += p
        print(f"| {g} | {pair} | {len(t)} | {fmt(t)} | {fmt(p)} |")
        if len(t) >= 10:
            m = statistics.median(abs(e) for e in t)
            if worst is None or m > worst[1]:
                worst = (g, m)
    print(f"| all held out | | {len(all_t)} | {fmt(all_t)} | {fmt(all_p)} |")
    if worst:
        print(f"\nworst group of >= 10 rows on TTFT: {worst[0]} ({worst[1]:.1f} %)")


main()
