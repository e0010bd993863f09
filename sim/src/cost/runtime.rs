//! The serving engine's host-side time per step, by named runtime
//! (`[engine] runtime`): scheduling, input preparation, sampling, output
//! processing and the round trip to tensor-parallel workers, and whether it
//! overlaps the GPU's work or adds to it.

pub use crate::config::EngineRuntime;

/// Host time of one overlapped step of the CUDA-graph runtime, seconds (the
/// order of vLLM V1's scheduler + input preparation + output processing for
/// a small batch; hidden whenever the GPU step is longer).
pub const CUDA_GRAPH_STEP_S: f64 = 0.5e-3;
/// Host time per sequence of the CUDA-graph runtime (block tables,
/// detokenization, output processing), seconds.
pub const CUDA_GRAPH_SEQ_S: f64 = 5e-6;
/// Eager runtime, least-squares fit of schedule + sampler + prepare inputs +
/// process outputs medians over Vidur's 56 rows: 1.83 ms per step ...
pub const EAGER_STEP_S: f64 = 1.833e-3;
/// ... plus 92 µs per sequence ...
pub const EAGER_SEQ_S: f64 = 0.0920e-3;
/// ... and with tensor parallelism the Ray round trip to the workers
/// (`RAY_COMM_TIME_MEDIAN`): 1.11 ms per step plus 167 µs per sequence.
pub const EAGER_TP_STEP_S: f64 = 1.113e-3;
pub const EAGER_TP_SEQ_S: f64 = 0.1667e-3;

/// Host time of one step, split into the per-step and per-sequence parts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostTime {
    pub step: f64,
    pub seqs: f64,
}

impl HostTime {
    pub fn total(&self) -> f64 {
        self.step + self.seqs
    }
}

impl EngineRuntime {
    pub const ALL: [EngineRuntime; 2] = [EngineRuntime::CudaGraph, EngineRuntime::Eager2023];

    pub fn name(self) -> &'static str {
        match self {
            EngineRuntime::CudaGraph => "cuda-graph",
            EngineRuntime::Eager2023 => "eager-2023",
        }
    }

    /// Host time of a step running `seqs` sequences on a `tp`-way group.
    #[inline]
    pub fn host(self, seqs: u32, tp: u32) -> HostTime {
        let s = seqs as f64;
        match self {
            EngineRuntime::CudaGraph => HostTime {
                step: CUDA_GRAPH_STEP_S,
                seqs: CUDA_GRAPH_SEQ_S * s,
            },
            EngineRuntime::Eager2023 => {
                let ray = tp > 1;
                HostTime {
                    step: EAGER_STEP_S + if ray { EAGER_TP_STEP_S } else { 0.0 },
                    seqs: s * (EAGER_SEQ_S + if ray { EAGER_TP_SEQ_S } else { 0.0 }),
                }
            }
        }
    }

    /// Whether host work runs concurrently with the GPU's step.
    pub fn overlaps(self) -> bool {
        matches!(self, EngineRuntime::CudaGraph)
    }

    /// The step's wall time from its GPU and host parts.
    #[inline]
    pub fn step_secs(self, gpu: f64, host: f64) -> f64 {
        if self.overlaps() {
            gpu.max(host)
        } else {
            gpu + host
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eager_host_time_matches_vidurs_example_and_adds_to_the_gpu() {
        // The data README's example: Llama-2-70B TP 4 batch 8 spends ≈ 5.6 ms
        // per step on the host.
        let h = EngineRuntime::Eager2023.host(8, 4).total() * 1e3;
        assert!((4.5..6.5).contains(&h), "{h}");
        assert_eq!(EngineRuntime::Eager2023.step_secs(0.01, 0.002), 0.012);
        // Overlapped: hidden unless it is the longer part.
        let r = EngineRuntime::CudaGraph;
        assert_eq!(r.step_secs(0.01, r.host(8, 1).total()), 0.01);
        assert_eq!(r.step_secs(0.0001, 0.0006), 0.0006);
    }
}
