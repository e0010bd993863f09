#!/usr/bin/env python3
"""Fits the efficiencies of MoE layers' routed-expert grouped GEMMs
(`cost::gemm::MOE_EXPERT_MEMORY_EFFICIENCY`, `MOE_EXPERT_COMPUTE_SCALE`) on
aiconfigurator's vLLM 0.24.0 MoE tables, with servesim's expert model: the
experts a batch touches (uniform routing) streamed at bandwidth x e_m, the
token-expert pairs' FLOPs at the dtype's GEMM efficiency x s_c, a smooth
maximum (p = 3) of the two and three 6 us kernel floors. Rows: `balanced`
routing, hidden >= 2048, the formats engines run MoE in (fp8_block on
H100/H200/B200, nvfp4 on B200). The pair with the least median |log error|
on a 0.05 grid.

Usage: python3 scripts/fit_moe_efficiency.py [../shared/data/aiconfigurator/kernels]
Needs pyarrow."""
import math, statistics, sys
import pyarrow.parquet as pq

ROOT = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/aiconfigurator/kernels"
# (FP8 dense peak, HBM bytes/s): servesim's catalog; FP4 peak is twice FP8's.
CHIPS = {"h100_sxm": (1978.9e12, 3.35e12), "h200_sxm": (1978.9e12, 4.8e12), "b200_sxm": (4500e12, 8.0e12)}
FORMATS = {"fp8_block": (1.0002, 0.55, 1), "nvfp4": (0.5625, 0.40, 2)}  # bytes/param, GEMM eff, peak x

rows = []
for chip, (pk, bw) in CHIPS.items():
    d = pq.read_table(f"{ROOT}/data/{chip}/moe/vllm/0.24.0/moe_perf.parquet").to_pydict()
    for i in range(len(d["latency"])):
        dt = d["moe_dtype"][i]
        if d["distribution"][i] != "balanced" or dt not in FORMATS or d["hidden_size"][i] < 2048:
            continue
        bpp, eff, px = FORMATS[dt]
        e, k, n = d["num_experts"][i], d["topk"][i], d["num_tokens"][i]
        ep, tp = d["moe_ep_size"][i], d["moe_tp_size"][i]
        params = 3 * d["hidden_size"][i] * d["inter_size"][i] / tp
        touched = e / ep * (1 - (1 - k / e) ** n)
        mem = touched * params * bpp / bw
        comp = 2 * n * k / ep * params / (pk * px * eff)
        rows.append((mem, comp, d["latency"][i] * 1e-3))


def err(em, sc):
    out = []
    for mem, comp, t in rows:
        a, b = mem / em, comp / sc
        hi, lo = max(a, b), min(a, b)
        out.append(abs(math.log((hi * (1 + (lo / hi) ** 3) ** (1 / 3) + 18e-6) / t)))
    return statistics.median(out)


best = min(((err(em / 100, sc / 100), em / 100, sc / 100)
            for em in range(30, 91, 5) for sc in range(15, 101, 5)))
print(f"{len(rows)} MoE rows: memory efficiency {best[1]:.2f}, compute scale {best[2]:.2f}, "
      f"median |log error| {best[0]:.3f} (servesim's dense values 0.85, 1.00: {err(0.85, 1.0):.3f})")
