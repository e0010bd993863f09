//! Dense matrix products (attention projections, MLP, LM head, experts) on
//! one GPU: a roofline whose corner is rounded, on row counts padded to the
//! kernel's tile, plus a per-kernel floor.
//!
//! A GEMM of `n` token rows against a `K × N` weight takes compute time
//! `t_c = 2·tile(n)·K·N / (peak · e_c)` and memory time `t_m = bytes / (bw · e_m)`.
//!
//! - **Tile padding.** cuBLAS/CUTLASS tensor-core GEMMs split the output into
//!   CTA tiles; on the token (row) dimension the A100/H100 BF16 kernels use
//!   128-row tiles once there are more than 128 rows, and the narrowest tile
//!   that covers the rows (16, 32, 64) below that (CUTLASS's Ampere/Hopper
//!   tile shapes 128×128, 128×256, 64×N; NVIDIA's "Matrix Multiplication
//!   Background" guide, sections on tile and wave quantization). A partial
//!   tile costs as much tensor-core time as a full one, so the compute roof
//!   counts `tile(n)` rows, not `n`. Vidur's per-operator A100 profiles
//!   (microsoft/vidur `data/profiling/compute/a100`, 8 models, TP 1–8,
//!   1–32768 tokens) show the resulting staircase directly: Qwen-72B's MLP
//!   up-projection takes 0.52 ms at 64–128 rows, 0.90–0.96 ms at 136–256,
//!   1.34–1.42 ms at 264–384 and 1.85 ms at 392; phi-2's jumps at 128→136
//!   by 40 %. Without the padding a smooth model of `n` is 20–30 % off on
//!   either side of each step.
//! - **The corner.** The classic roofline (Williams et al., CACM 2009) takes
//!   `max(t_c, t_m)`. Near the ridge neither the tensor cores nor the memory
//!   system are saturated (pipeline fill, one partial wave over the SMs), so
//!   we use the smooth maximum `(t_c^p + t_m^p)^(1/p)`, a p-norm that tends
//!   to the max for large `p` and adds at `p = 1`. `p`, the two efficiencies
//!   and the floor were fitted jointly on those profiles (see
//!   `cost::fidelity`, which re-checks the fit in the tests).
//! - **Precision.** Low-precision GEMMs run at the chip's FP8/FP4 peak where
//!   it has those units, at a lower fitted fraction of it for block-scaled
//!   FP8 and FP4 ([`compute_efficiency`]), plus an activation-quantization
//!   kernel per FP4 GEMM: small-row decode GEMMs stay memory-bound on their
//!   (smaller) weight bytes, large ones stop well short of the FP4 peak.

use crate::catalog::Dtype;

/// Fraction of peak tensor throughput large GEMMs reach. Fitted on Vidur's
/// A100 profiles together with [`ROOFLINE_SMOOTHING`]: 4096-token GEMMs of
/// Llama-2-7B run at ~0.72 of the 312 TFLOP/s peak there; cuBLAS BF16 GEMMs
/// of LLM shapes reach 600–750 TFLOP/s of H100-SXM's 989 (0.6–0.75).
pub const GEMM_EFFICIENCY: f64 = 0.75;
/// Fraction of peak HBM bandwidth weight-streaming GEMV/GEMM kernels reach
/// (80–90 % in memory-bandwidth microbenchmarks; 0.85 fits Vidur's A100
/// one-token rows once the kernel floor is counted).
pub const MEMORY_EFFICIENCY: f64 = 0.85;
/// Exponent `p` of the smooth maximum of compute and memory time. Fitted on
/// Vidur's A100 profiles together with the tile padding (grid 1.5–6 with
/// both efficiencies on 0.7–0.9: 3 gives the lowest worst error, with the
/// efficiencies unchanged; without padding 1.5 fitted best, as the rounder
/// corner then stood in for the staircase).
pub const ROOFLINE_SMOOTHING: f64 = 3.0;
/// Rows of one tensor-core GEMM tile on the token dimension once a GEMM has
/// more rows than that (CUTLASS/cuBLAS 128×N tiles on Ampere and Hopper).
pub const GEMM_ROW_TILE: f64 = 128.0;
/// The narrowest row tile the GEMM kernels use for few rows (the m16n8k16
/// tensor-core instruction's 16 rows; cuBLAS picks 16-, 32- and 64-row
/// tiles for skinny GEMMs).
pub const GEMM_MIN_ROW_TILE: f64 = 16.0;
/// Shortest time of one GEMM kernel, seconds: a one-token GEMV of a small
/// slice still takes a few µs (launch, tile setup, one wave). Fitted on
/// Vidur's A100 profiles (the 7B TP-8 one-token rows: 4 GEMMs in 47 µs).
pub const GEMM_KERNEL_FLOOR_S: f64 = 6e-6;
/// GEMM kernels per dense transformer layer: QKV, output projection, MLP
/// up (gate and up fused) and down, as vLLM and Vidur's profiles run them.
pub const GEMMS_PER_LAYER: f64 = 4.0;

/// Fraction of the chip's FP8 peak block-scaled FP8 GEMMs (128 × 128 weight
/// scales, per-token-group activation scales: DeepGEMM/CUTLASS) reach on
/// large row counts. Fitted on aiconfigurator's vLLM 0.24.0 GEMM tables
/// (`../shared/data/aiconfigurator/kernels/data/{h100_sxm,h200_sxm}/gemm`,
/// `gemm_dtype = fp8_block`, rows with m ≥ 1024 and n, k ≥ 512, about 10 000
/// shapes per chip): 0.55 gives the least median |log error| (0.27) on
/// both Hopper chips. BF16 rows of the same tables fit [`GEMM_EFFICIENCY`]
/// (0.75) best, which the Vidur fit had found.
pub const FP8_BLOCK_GEMM_EFFICIENCY: f64 = 0.55;
/// Fraction of the chip's FP8 peak per-tensor-scaled FP8 GEMMs (vLLM's
/// CUTLASS `cutlass_scaled_mm`, TensorRT-LLM's FP8 GEMMs) reach on large row
/// counts. Fitted on aiconfigurator's vLLM 0.24.0 GEMM tables
/// (`../shared/data/aiconfigurator/kernels/data/{h100_sxm,h200_sxm,b200_sxm}/gemm`,
/// `gemm_dtype = fp8`, m ≥ 1024 and n, k ≥ 512, 10 013 shapes per chip)
/// with the model here (`scripts/fit_fp8_gemm_efficiency.py`): 0.47 on
/// H100-SXM (median |log error| 0.21), 0.50 on H200 (0.24), 0.41 on B200
/// (0.34); the middle one is taken. Small-row GEMMs stay memory-bound on
/// their FP8 weight bytes, so only prefill and large decode batches slow.
pub const FP8_GEMM_EFFICIENCY: f64 = 0.47;
/// Fraction of the chip's FP4 peak NVFP4 GEMMs (FlashInfer's CuTe-DSL
/// kernel in vLLM) reach on large row counts: 0.40 on aiconfigurator's
/// B200 table (`b200_sxm/gemm`, `gemm_dtype = nvfp4`, m ≥ 1024: median
/// |log error| 0.17). Large FP4 GEMMs run at about 2.9 of 9 PFLOP/s there:
/// the scale handling and the epilogue, not the tensor cores, bound them.
pub const FP4_GEMM_EFFICIENCY: f64 = 0.40;
/// Fraction of peak HBM bandwidth an MoE layer's routed-expert grouped
/// GEMMs stream the touched experts' weights at, and ...
///
/// Fitted on aiconfigurator's vLLM 0.24.0 MoE tables
/// (`../shared/data/aiconfigurator/kernels/data/{h100_sxm,h200_sxm,b200_sxm}/moe`,
/// `balanced` routing, hidden ≥ 2048, `fp8_block` on the three chips and
/// `nvfp4` on B200: 20 312 rows; `scripts/fit_moe_efficiency.py`): with
/// 0.65 and [`MOE_EXPERT_COMPUTE_SCALE`] 0.35 the expert model's median
/// |log error| is 0.23, against 0.41 with plain GEMMs' 0.85 and 1. The
/// fused-MoE kernels' token permutation, per-expert tiles and scale handling
/// are what the plain roofline misses.
pub const MOE_EXPERT_MEMORY_EFFICIENCY: f64 = 0.65;
/// ... the share of the weight dtype's GEMM efficiency their FLOPs reach
/// (0.35: at thousands of tokens the grouped GEMMs run at about a third of
/// a dense GEMM's rate).
pub const MOE_EXPERT_COMPUTE_SCALE: f64 = 0.35;
/// Extra time per low-precision GEMM for quantizing its activations (one
/// small kernel per GEMM): 2 µs fits the same B200 table's one- to 16-row
/// NVFP4 GEMMs best (median log error −0.23 without it, −0.03 with it).
pub const FP4_ACTIVATION_QUANT_S: f64 = 2e-6;

/// Fraction of peak that GEMMs on weights stored in `dtype` reach at large
/// row counts on a chip whose native low-precision units are `native` (FP8
/// units for block-scaled FP8, FP4 units for NVFP4/MXFP4). Weight-only
/// kernels (no such units) dequantize and multiply in BF16 at
/// [`GEMM_EFFICIENCY`]; INT8 and INT4 keep it too.
pub fn compute_efficiency(dtype: Dtype, native: bool) -> f64 {
    match dtype {
        Dtype::Fp8Block if native => FP8_BLOCK_GEMM_EFFICIENCY,
        Dtype::Fp8 if native => FP8_GEMM_EFFICIENCY,
        Dtype::Nvfp4 | Dtype::Mxfp4 if native => FP4_GEMM_EFFICIENCY,
        _ => GEMM_EFFICIENCY,
    }
}

/// Extra floor per GEMM for quantizing activations in `dtype` GEMMs on
/// native units ([`FP4_ACTIVATION_QUANT_S`] for FP4; 0 otherwise).
pub fn activation_quant_s(dtype: Dtype, native: bool) -> f64 {
    if native && dtype.is_fp4() {
        FP4_ACTIVATION_QUANT_S
    } else {
        0.0
    }
}

/// The rows a GEMM of `rows` token rows computes on the tensor cores: the
/// count padded to whole tiles, [`GEMM_ROW_TILE`] rows above that many and
/// the narrowest power-of-two tile of at least [`GEMM_MIN_ROW_TILE`] that
/// covers them below (see the module comment). Zero rows compute nothing.
#[inline]
pub fn tile_rows(rows: f64) -> f64 {
    if rows <= 0.0 {
        0.0
    } else if rows > GEMM_ROW_TILE {
        (rows / GEMM_ROW_TILE).ceil() * GEMM_ROW_TILE
    } else {
        // Powers of two from 16 to 128: at most three doublings.
        let mut t = GEMM_MIN_ROW_TILE;
        while t < rows {
            t *= 2.0;
        }
        t
    }
}

/// The smooth maximum `(a^p + b^p)^(1/p)` with `p` = [`ROOFLINE_SMOOTHING`].
/// Homogeneous of degree one, so a layer's GEMMs can be priced together: the
/// sum over GEMMs of equal row count equals the smooth max of the sums.
#[inline]
pub fn smooth_max(a: f64, b: f64) -> f64 {
    let hi = a.max(b);
    if hi <= 0.0 {
        return 0.0;
    }
    // Scale by the larger term: one ratio is 1 and the other r ≤ 1, so
    // nothing overflows. For p = 3, r^p = r·r·r and s^(1/p) = ∛s: one cube
    // root instead of two `powf` calls, which took a tenth of a whole run's
    // instructions (this is priced every iteration).
    const _: () = assert!(ROOFLINE_SMOOTHING == 3.0);
    let r = a.min(b) / hi;
    hi * (1.0 + r * r * r).cbrt()
}

/// Compute and memory time of one group of GEMMs, and what binds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GemmTime {
    /// FLOPs over peak × [`GEMM_EFFICIENCY`], seconds.
    pub compute: f64,
    /// Bytes over bandwidth × [`MEMORY_EFFICIENCY`], seconds.
    pub memory: f64,
    /// Kernel floors, seconds.
    pub floor: f64,
}

impl GemmTime {
    /// The priced time: smooth maximum plus the floors.
    #[inline]
    pub fn secs(&self) -> f64 {
        smooth_max(self.compute, self.memory) + self.floor
    }

    /// Which roof binds.
    pub fn bound(&self) -> &'static str {
        if self.compute >= self.memory {
            "compute"
        } else {
            "memory"
        }
    }

    pub fn plus(self, o: GemmTime) -> GemmTime {
        GemmTime {
            compute: self.compute + o.compute,
            memory: self.memory + o.memory,
            floor: self.floor + o.floor,
        }
    }

    pub fn scale(self, k: f64) -> GemmTime {
        GemmTime {
            compute: self.compute * k,
            memory: self.memory * k,
            floor: self.floor * k,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_max_rounds_the_corner_and_keeps_the_asymptotes() {
        // Far from the ridge the larger term wins to within a few percent ...
        let far = smooth_max(1.0, 0.2);
        assert!(far > 1.0 && far < 1.003, "{far}");
        // ... at the ridge both count: 2^(1/3) = 1.26.
        assert!((smooth_max(1.0, 1.0) - 2f64.powf(1.0 / 3.0)).abs() < 1e-12);
        assert_eq!(smooth_max(0.0, 0.0), 0.0);
        // Homogeneous: pricing two equal-shaped GEMMs together is exact.
        let (a, b) = (0.3, 0.7);
        assert!((smooth_max(2.0 * a, 2.0 * b) - 2.0 * smooth_max(a, b)).abs() < 1e-12);
    }

    #[test]
    fn low_precision_efficiency_depends_on_native_units() {
        assert_eq!(compute_efficiency(Dtype::Bf16, true), GEMM_EFFICIENCY);
        assert_eq!(compute_efficiency(Dtype::Fp8, true), FP8_GEMM_EFFICIENCY);
        assert_eq!(compute_efficiency(Dtype::Fp8, false), GEMM_EFFICIENCY);
        assert_eq!(compute_efficiency(Dtype::Nvfp4, true), 0.40);
        assert_eq!(compute_efficiency(Dtype::Mxfp4, false), GEMM_EFFICIENCY);
        assert_eq!(compute_efficiency(Dtype::Fp8Block, true), 0.55);
        assert_eq!(activation_quant_s(Dtype::Nvfp4, true), 2e-6);
        assert_eq!(activation_quant_s(Dtype::Nvfp4, false), 0.0);
        assert_eq!(activation_quant_s(Dtype::Fp8, true), 0.0);
    }

    #[test]
    fn rows_pad_to_whole_tiles() {
        assert_eq!(tile_rows(0.0), 0.0);
        assert_eq!(tile_rows(1.0), 16.0);
        assert_eq!(tile_rows(16.0), 16.0);
        assert_eq!(tile_rows(17.0), 32.0);
        assert_eq!(tile_rows(72.0), 128.0);
        assert_eq!(tile_rows(128.0), 128.0);
        // One row past a tile costs a whole tile: the staircase of the profiles.
        assert_eq!(tile_rows(129.0), 256.0);
        assert_eq!(tile_rows(384.0), 384.0);
        assert_eq!(tile_rows(392.0), 512.0);
        // Fractional shares (a micro-batch's N/m) round up to a row first.
        assert_eq!(tile_rows(128.5), 256.0);
        // Never fewer rows than asked for, never a tile more than needed.
        for n in 1..5000 {
            let t = tile_rows(n as f64);
            assert!(t >= n as f64 && t < n as f64 + GEMM_ROW_TILE, "{n} -> {t}");
        }
    }
}
