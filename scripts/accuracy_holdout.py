#!/usr/bin/env python3
"""Leave-one-group-out errors of `servesim accuracy` on aiconfigurator's
silicon rows, by model family or by chip, from the `points.csv` the command
wrote.

A leave-one-out cross-validation refits the model's constants on every group
but one and predicts the one left out. No constant of the default model is
fitted on these rows: the engine runtimes' terms come from the engines'
sources and the harness's recipes (`--scheduler-recv-interval`), the FP8
and MoE GEMM efficiencies from aiconfigurator's per-kernel tables, vLLM's
launch time from aiconfigurator's own calibration. Refitting on the other
groups therefore changes nothing, and each group's error is already its
held-out error. This script prints them: per held-out group, the rows and
the median |error| (and median signed error) of TTFT and TPOT, then the
median over all held-out rows and the worst group of at least 10 rows.

Usage:
  servesim accuracy ../shared/data/aiconfigurator/silicon/silicon_train.csv --out out/acc
  python3 scripts/accuracy_holdout.py out/acc/points.csv family
  python3 scripts/accuracy_holdout.py out/acc/points.csv chip
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


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    path, by = sys.argv[1], sys.argv[2]
    groups = collections.defaultdict(lambda: {"ttft": [], "tpot": []})
    rows = set()
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["format"] != "aiconfigurator" or r["stat"] != "mean":
                continue
            if r["metric"] in ("ttft", "tpot") and r["error_pct"]:
                groups[key(r, by)][r["metric"]].append(float(r["error_pct"]))
                rows.add(r["point"])
    print(f"| held-out {by} | rows | TTFT | TPOT |")
    print("| --- | ---: | ---: | ---: |")
    all_t, all_p, worst = [], [], None
    for g in sorted(groups):
        t, p = groups[g]["ttft"], groups[g]["tpot"]
        all_t += t
        all_p += p
        print(f"| {g} | {len(t)} | {fmt(t)} | {fmt(p)} |")
        if len(t) >= 10:
            m = statistics.median(abs(e) for e in t)
            if worst is None or m > worst[1]:
                worst = (g, m)
    print(f"| all held out | {len(all_t)} | {fmt(all_t)} | {fmt(all_p)} |")
    if worst:
        print(f"\nworst group of >= 10 rows on TTFT: {worst[0]} ({worst[1]:.1f} %)")


main()
