#!/usr/bin/env python3
"""Fits decode attention's KV-streaming efficiency and per-layer kernel floor
(`cost::DECODE_ATTENTION_BW_EFFICIENCY`, `cost::DECODE_ATTENTION_FLOOR_S`) on
aiconfigurator's vLLM 0.24.0 generation-attention tables, with servesim's
decode-attention model: one layer's decode of `batch` sequences over
`step + 1` cached tokens each reads K and V of every cached token
(batch x (step+1) x kv_heads x head_dim x 2 x 2 bytes, BF16 cache) at
bandwidth x e, or computes 4 x heads x head_dim FLOPs per query-key pair at
0.45 of the BF16 peak, whichever is longer, plus a floor f per layer (the
kernel's launch in the captured graph, its split-KV combine, one wave over
the SMs). Rows: full attention (`window_size` 0), BF16 KV cache, head_dim
<= 256 (the kernels engines run for GQA/MHA decode: FlashAttention-3 on
Hopper, FlashAttention-4/FlashInfer on Blackwell). The pair (e, f) with the
least median |log error| over every chip's rows on a 0.01 x 0.5 us grid,
then each chip held out in turn: fitted on the other three, error on it.

Usage: python3 scripts/fit_decode_attention.py [../shared/data/aiconfigurator/kernels]
Needs pyarrow."""
import collections, math, statistics, sys
import pyarrow.parquet as pq

ROOT = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/aiconfigurator/kernels"
# (BF16 dense peak, HBM bytes/s): servesim's catalog.
CHIPS = {"h100_sxm": (989.4e12, 3.35e12), "h200_sxm": (989.4e12, 4.8e12),
         "b200_sxm": (2250e12, 8.0e12), "gb200": (2500e12, 8.0e12)}
ATTENTION_EFFICIENCY = 0.45

rows = collections.defaultdict(list)
for chip, (peak, bw) in CHIPS.items():
    d = pq.read_table(f"{ROOT}/data/{chip}/attention/vllm/0.24.0/generation_attention_perf.parquet").to_pydict()
    for i in range(len(d["latency"])):
        if d["window_size"][i] != 0 or d["kv_cache_dtype"][i] != "bfloat16" or d["head_dim"][i] > 256:
            continue
        b, s = d["batch_size"][i], d["step"][i] + 1
        heads, kv, hd = d["num_heads"][i], d["num_key_value_heads"][i], d["head_dim"][i]
        mem = b * s * kv * hd * 2 * 2 / bw
        comp = 4 * b * s * heads * hd / (peak * ATTENTION_EFFICIENCY)
        rows[chip].append((mem, comp, d["latency"][i] * 1e-3, b * s))


def errs(rs, e, f):
    return [math.log((max(m / e, c) + f) / t) for m, c, t, _ in rs]


def err(rs, e, f):
    return statistics.median(abs(x) for x in errs(rs, e, f))


def fit(rs):
    coarse = min((err(rs, e / 100, f * 1e-6), e / 100, f) for e in range(50, 101, 5) for f in range(0, 21, 2))
    _, e0, f0 = coarse
    return min((err(rs, e / 100, f / 2 * 1e-6), e / 100, f / 2)
               for e in range(int(e0 * 100) - 4, int(e0 * 100) + 5) if e <= 100
               for f in range(max(0, 2 * f0 - 4), 2 * f0 + 5))


every = [r for rs in rows.values() for r in rs]
best = fit(every)
print(f"{len(every)} rows: efficiency {best[1]:.2f}, floor {best[2]:.1f} us, median |log error| {best[0]:.3f} "
      f"(0.70 and no floor: {err(every, 0.7, 0):.3f})")
for chip in rows:
    others = [r for c, rs in rows.items() if c != chip for r in rs]
    _, e, f = fit(others)
    print(f"  {chip} held out: fitted on the others {e:.2f}, {f:.1f} us; "
          f"median |log error| on {chip} {err(rows[chip], e, f * 1e-6):.3f} "
          f"(its own fit {fit(rows[chip])[0]:.3f})")
by = collections.defaultdict(list)
for r, x in zip(every, errs(every, best[1], best[2] * 1e-6)):
    by[1 << (r[3] - 1).bit_length()].append(x)
print("median log error (model/measured) by KV tokens read per layer (batch x context):")
print("  " + " ".join(f"{k}:{statistics.median(v):+.2f}" for k, v in sorted(by.items()) if k >= 64))
