#!/usr/bin/env python3
"""Fit and leave-one-group-out cross-validation of the fitted constants of
`servesim accuracy`'s default model on aiconfigurator's silicon rows, by
model family or by chip.

The fitted constants are, per engine, the kernel-launch time per layer of
an ungraphed step (`[engine] eager_launch_s_per_layer`, dense and MoE) and
the serving front end's time per request (`[engine] front_end`). Their fit
is a grid: one `servesim accuracy` run of one engine's rows per point of
the grid (`scripts/front-end-grid.toml` with DENSE, MOE and FRONT replaced;
or `scripts/launch-grid.toml` with DENSE and MOE), read from folders named
`<engine>_<value>_<value>...` (the values in the grid file's order, seconds).
An engine's fit is its grid point with the least median |TTFT error| +
median |TPOT error| over its rows; a held-out group's point is fitted on
the other groups' rows of that engine and predicts the group's rows. Rows
of an engine with no grid keep their error in the base run. Prints per
held-out group each engine's fitted point, rows and median |error| (median
signed error) of TTFT and TPOT, the median over all held-out rows and the
worst group of at least 10 rows.

Usage:
  servesim accuracy ../shared/data/aiconfigurator/silicon/silicon_train.csv --out out/acc
  awk -F, 'NR==1 || $3=="sglang"' ../shared/data/aiconfigurator/silicon/silicon_train.csv > sglang.csv
  for D in 0 0.0004 0.0008; do for M in 0 0.0016 0.0032; do for F in 0 0.02 0.05; do
    sed "s/DENSE/$D/; s/MOE/$M/; s/FRONT/$F/" scripts/front-end-grid.toml > grid.toml
    servesim accuracy sglang.csv --scenario grid.toml --out out/grid/sglang_${D}_${M}_${F}
  done; done; done
  python3 scripts/accuracy_holdout.py out/acc/points.csv family out/grid/*
  python3 scripts/accuracy_holdout.py out/acc/points.csv chip out/grid/*
Standard library only."""
import collections, csv, os, re, statistics, sys
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
    # engine -> grid point -> {row id: (group, errors)}
    grids = collections.defaultdict(dict)
    for d in grid_dirs:
        name = os.path.basename(d.rstrip("/"))
        engine, *values = name.split("_")
        rows = read(f"{d}/points.csv", by, engine)
        # Only the rows the run without a base scenario compares: the grid's
        # base scenario gives its placeholder load to rows that record none.
        grids[engine][tuple(float(v) for v in values)] = {
            i: v for i, v in rows.items() if i in base
        }
    gridded = {e: set().union(*(g.keys() for g in gs.values())) for e, gs in grids.items()}
    ms = lambda c: ", ".join(f"{v * 1e3:g}" for v in c)
    for e, gs in sorted(grids.items()):
        best = min(gs, key=lambda c: objective(list(gs[c].values())))
        rows = list(gs[best].values())
        t = [v["ttft"] for _, v in rows]
        p = [v["tpot"] for _, v in rows]
        print(f"{e}: fit on every row: {ms(best)} ms; {len(t)} rows, TTFT {fmt(t)}, TPOT {fmt(p)}")
    print()
    groups = sorted({g for g, _ in base.values()})
    print(f"| held-out {by} | refit (ms) | rows | TTFT | TPOT |")
    print("| --- | --- | ---: | ---: | ---: |")
    all_t, all_p, worst = [], [], None
    everywhere = set().union(*gridded.values()) if gridded else set()
    for g in groups:
        fits = []
        errs = {i: e for i, (gg, e) in base.items() if gg == g and i not in everywhere}
        for eng, gs in sorted(grids.items()):
            c = min(gs, key=lambda c: objective([v for v in gs[c].values() if v[0] != g]))
            held = {i: e for i, (gg, e) in gs[c].items() if gg == g}
            if held:
                fits.append(f"{eng} {ms(c)}")
            errs.update(held)
        t = [e["ttft"] for e in errs.values()]
        p = [e["tpot"] for e in errs.values()]
        all_t += t
        all_p += p
        print(f"| {g} | {'; '.join(fits) or '-'} | {len(t)} | {fmt(t)} | {fmt(p)} |")
        if len(t) >= 10:
            m = statistics.median(abs(e) for e in t)
            if worst is None or m > worst[1]:
                worst = (g, m)
    print(f"| all held out | | {len(all_t)} | {fmt(all_t)} | {fmt(all_p)} |")
    if worst:
        print(f"\nworst group of >= 10 rows on TTFT: {worst[0]} ({worst[1]:.1f} %)")


main()
