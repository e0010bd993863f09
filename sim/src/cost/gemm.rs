//! Dense matrix products (attention projections, MLP, LM head, experts) on
//! one GPU: a roofline whose corner is rounded, plus a per-kernel floor.
//!
//! A GEMM of `n` token rows against a `K × N` weight takes compute time
//! `t_c = 2nKN / (peak · e_c)` and memory time `t_m = bytes / (bw · e_m)`.
//! The classic roofline (Williams et al., CACM 2009) takes `max(t_c, t_m)`,
//! a sharp corner at the ridge point. Measured kernels do not turn that
//! sharply: near the ridge neither the tensor cores nor the memory system
//! are saturated (tile and wave quantization, pipeline fill), and Vidur's
//! per-operator A100 profiles (microsoft/vidur `data/profiling/compute/a100`,
//! 8 models, TP 1–8, 1–32768 tokens) run 10–30 % slower than the max around
//! 64–512 rows. We use the smooth maximum `(t_c^p + t_m^p)^(1/p)`, a p-norm
//! that tends to the max for large `p` and adds at `p = 1`; `p`, the two
//! efficiencies and the floor were fitted jointly on those profiles (see
//! `cost::fidelity`, which re-checks the fit in the tests).

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
/// Vidur's A100 profiles (grid 1.5–4: 1.5 gives the lowest median and worst
/// error; the sharp max, p → ∞, is 10–33 % optimistic at 64–512 rows).
pub const ROOFLINE_SMOOTHING: f64 = 1.5;
/// Shortest time of one GEMM kernel, seconds: a one-token GEMV of a small
/// slice still takes a few µs (launch, tile setup, one wave). Fitted on
/// Vidur's A100 profiles (the 7B TP-8 one-token rows: 4 GEMMs in 47 µs).
pub const GEMM_KERNEL_FLOOR_S: f64 = 6e-6;
/// GEMM kernels per dense transformer layer: QKV, output projection, MLP
/// up (gate and up fused) and down, as vLLM and Vidur's profiles run them.
pub const GEMMS_PER_LAYER: f64 = 4.0;

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
    // nothing overflows. For p = 1.5, r^p = r·√r and s^(1/p) = ∛(s²): a
    // square root and a cube root instead of two `powf` calls, which took
    // a tenth of a whole run's instructions (this is priced every iteration).
    const _: () = assert!(ROOFLINE_SMOOTHING == 1.5);
    let r = a.min(b) / hi;
    let s = 1.0 + r * r.sqrt();
    hi * (s * s).cbrt()
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
        let far = smooth_max(1.0, 0.05);
        assert!(far > 1.0 && far < 1.02, "{far}");
        // ... at the ridge both count: 2^(1/1.5) = 1.587.
        assert!((smooth_max(1.0, 1.0) - 2f64.powf(1.0 / 1.5)).abs() < 1e-12);
        assert_eq!(smooth_max(0.0, 0.0), 0.0);
        // Homogeneous: pricing two equal-shaped GEMMs together is exact.
        let (a, b) = (0.3, 0.7);
        assert!((smooth_max(2.0 * a, 2.0 * b) - 2.0 * smooth_max(a, b)).abs() < 1e-12);
    }
}
