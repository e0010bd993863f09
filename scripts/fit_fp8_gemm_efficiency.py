#!/usr/bin/env python3
"""Fits the fraction of the FP8 peak that per-tensor-scaled FP8 GEMMs reach
(`cost::gemm::FP8_GEMM_EFFICIENCY`) on aiconfigurator's vLLM 0.24.0 GEMM
tables, with the protocol of the block-scaled fit: servesim's GEMM model
(tile-padded rows, smooth maximum p = 3 of compute and memory time, memory
efficiency 0.85, a 6 µs kernel floor), rows with m >= 1024 and n, k >= 512,
the efficiency on a 0.01 grid that gives the least median |log error|.

Usage: python3 scripts/fit_fp8_gemm_efficiency.py [../shared/data/aiconfigurator/kernels]
Needs pyarrow (to read the parquet tables)."""
import math, statistics, sys
import pyarrow.parquet as pq

ROOT = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/aiconfigurator/kernels"
# (FP8 dense peak FLOP/s, HBM bytes/s): servesim's catalog (sim/src/catalog/hardware.rs).
CHIPS = {"h100_sxm": (1978.9e12, 3.35e12), "h200_sxm": (1978.9e12, 4.8e12), "b200_sxm": (4500e12, 8.0e12)}


def tile(m):
    if m > 128:
        return math.ceil(m / 128) * 128
    t = 16
    while t < m:
        t *= 2
    return t


def model(m, n, k, eff, peak, bw):
    tc = 2 * tile(m) * n * k / (peak * eff)
    tm = (n * k + m * k + 2 * m * n) / (bw * 0.85)  # FP8 weights and activations, BF16 out
    hi, lo = max(tc, tm), min(tc, tm)
    return hi * (1 + (lo / hi) ** 3) ** (1 / 3) + 6e-6


for chip, (peak, bw) in CHIPS.items():
    d = pq.read_table(f"{ROOT}/data/{chip}/gemm/vllm/0.24.0/gemm_perf.parquet").to_pydict()
    rows = [(d["m"][i], d["n"][i], d["k"][i], d["latency"][i] * 1e-3)
            for i in range(len(d["m"]))
            if d["gemm_dtype"][i] == "fp8" and d["m"][i] >= 1024 and d["n"][i] >= 512 and d["k"][i] >= 512]
    best = None
    for e100 in range(20, 91):
        e = e100 / 100
        err = statistics.median(abs(math.log(model(m, n, k, e, peak, bw) / t)) for m, n, k, t in rows)
        if best is None or err < best[1]:
            best = (e, err)
    print(f"{chip}: {len(rows)} fp8 GEMMs, efficiency {best[0]:.2f}, median |log error| {best[1]:.3f}")
