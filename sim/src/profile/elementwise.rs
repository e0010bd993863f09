//! The element-wise experiment a calibration records: RMSNorm (Zhang &
//! Sennrich, 2019) computed eagerly as composed tensor operations, the way
//! Hugging Face transformers' `LlamaRMSNorm` runs it in PyTorch eager mode
//! (upcast to f32, square, mean, add ε, reciprocal square root, scale,
//! downcast, weight), against one fused kernel (candle's `rms_norm`, the
//! counterpart of vLLM's and SGLang's custom `rms_norm` kernels and of what
//! `torch.compile` emits), on the calibration device.
//!
//! It says two things a profile's reader needs before trusting the cost
//! model's element-wise term ([`crate::cost::elementwise`]): that the two
//! forms agree numerically (so an engine may run either), and what fusing is
//! worth on this device at this model's hidden size. Timings come from the
//! device's own clock where it has one (CUDA events); elsewhere they are host
//! wall time around a synchronized region and are labelled so: a CPU timing
//! is never reported as GPU kernel time.

use serde::{Deserialize, Serialize};

/// The clock a timing was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimingClock {
    /// CUDA events recorded on the stream around the operation: GPU time.
    CudaEvents,
    /// The host's monotonic clock around a region the device was
    /// synchronized before and after: on CPU this is the kernel's time; on a
    /// GPU without events it includes launch overhead.
    HostWall,
}

/// RMSNorm, eager against fused, on the calibration device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElementwiseExperiment {
    /// The operation measured (`rms_norm`).
    pub op: String,
    /// How the eager form is composed, in words.
    pub eager: String,
    /// Which kernel the fused form is.
    pub fused: String,
    /// The ε both forms add to the mean square.
    pub eps: f64,
    pub clock: TimingClock,
    /// Timed repetitions per form and shape (after warm-up), eager and
    /// fused interleaved so that a slow spell of the machine hits both.
    pub repetitions: u32,
    /// One entry per (dtype, tokens) shape, at the model's hidden size.
    pub cases: Vec<ElementwiseCase>,
}

/// One shape and dtype of the experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElementwiseCase {
    /// The activations' dtype (`f32`, `f16`, `bf16`).
    pub dtype: String,
    /// Rows (tokens) normalized at once.
    pub tokens: u32,
    /// Row width (the model's hidden size).
    pub hidden: u32,
    /// Median time of the eager form, ns.
    pub eager_ns: u64,
    /// Median time of the fused kernel, ns.
    pub fused_ns: u64,
    /// Largest |eager − fused| over every output element.
    pub max_abs_diff: f64,
    /// Mean |eager − fused|.
    pub mean_abs_diff: f64,
    /// Largest |eager − reference| and |fused − reference|, where the
    /// reference is computed in f64 on the host from the same (rounded)
    /// inputs: which form, if either, loses accuracy.
    pub eager_max_abs_error: f64,
    pub fused_max_abs_error: f64,
}

impl ElementwiseCase {
    /// How many times faster the fused kernel is.
    pub fn speedup(&self) -> f64 {
        self.eager_ns as f64 / self.fused_ns.max(1) as f64
    }
}

impl ElementwiseExperiment {
    /// Checks what a hand-edited profile could break: finite, non-negative
    /// figures and positive shapes. Returns the key path and the problem.
    pub fn check(&self) -> Result<(), (String, String)> {
        if !(self.eps.is_finite() && self.eps > 0.0 && self.eps < 1.0) {
            return Err(("elementwise.eps".into(), "must be in (0, 1)".into()));
        }
        for (i, c) in self.cases.iter().enumerate() {
            let key = |k: &str| format!("elementwise.cases[{i}].{k}");
            if c.tokens == 0 || c.hidden == 0 {
                return Err((key("tokens"), "tokens and hidden must be positive".into()));
            }
            if c.eager_ns == 0 || c.fused_ns == 0 {
                return Err((key("eager_ns"), "timings must be positive".into()));
            }
            for (k, v) in [
                ("max_abs_diff", c.max_abs_diff),
                ("mean_abs_diff", c.mean_abs_diff),
                ("eager_max_abs_error", c.eager_max_abs_error),
                ("fused_max_abs_error", c.fused_max_abs_error),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err((key(k), format!("{v}: must be a finite number ≥ 0")));
                }
            }
            if !matches!(c.dtype.as_str(), "f32" | "f16" | "bf16") {
                return Err((
                    key("dtype"),
                    format!("{:?}: allowed are f32, f16, bf16", c.dtype),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> ElementwiseCase {
        ElementwiseCase {
            dtype: "f32".into(),
            tokens: 64,
            hidden: 576,
            eager_ns: 9_000,
            fused_ns: 3_000,
            max_abs_diff: 2e-7,
            mean_abs_diff: 1e-8,
            eager_max_abs_error: 2e-7,
            fused_max_abs_error: 1e-7,
        }
    }

    #[test]
    fn speedup_is_eager_over_fused() {
        assert_eq!(case().speedup(), 3.0);
    }

    #[test]
    fn a_hand_edited_case_is_refused_with_its_key() {
        let mut e = ElementwiseExperiment {
            op: "rms_norm".into(),
            eager: String::new(),
            fused: String::new(),
            eps: 1e-5,
            clock: TimingClock::HostWall,
            repetitions: 10,
            cases: vec![case()],
        };
        assert!(e.check().is_ok());
        e.cases[0].max_abs_diff = f64::NAN;
        assert_eq!(
            e.check().unwrap_err().0,
            "elementwise.cases[0].max_abs_diff"
        );
        e.cases[0].max_abs_diff = 0.0;
        e.cases[0].dtype = "f8".into();
        assert_eq!(e.check().unwrap_err().0, "elementwise.cases[0].dtype");
        e.cases[0].dtype = "f32".into();
        e.eps = 0.0;
        assert_eq!(e.check().unwrap_err().0, "elementwise.eps");
    }
}
