//! One iteration explained term by term (`servesim cost`), and a decode
//! sweep over batch sizes that shows where adding sequences stops paying.
//!
//! The terms are computed by the same functions that price the simulation,
//! and the total is the cost model's own `iteration_time`, so what the
//! command prints is what `simulate` charges (a lone request's TTFT is one
//! prefill iteration, its TPOT the mean of its decode steps).

use super::roofline::Roofline;
use super::{BatchShape, CostModel};
use crate::time::Nanos;
use serde::Serialize;

/// One named part of an iteration's time.
#[derive(Clone, Debug, Serialize)]
pub struct Term {
    pub name: &'static str,
    /// Milliseconds this term adds to the step (negative for time hidden
    /// behind another part).
    pub ms: f64,
    /// How it was priced: roofs, what binds, intensity, sizes.
    pub detail: String,
}

/// An iteration's time and its terms.
#[derive(Clone, Debug, Serialize)]
pub struct Breakdown {
    /// The cost model's description (roofline and runtime, or profile).
    pub source: String,
    pub tokens: u64,
    pub seqs: u32,
    /// GPU forward time (all layers, LM head, swap), ms.
    pub gpu_ms: f64,
    /// Engine host time, ms.
    pub host_ms: f64,
    /// Whether the host time overlaps the GPU's (then the step is the longer).
    pub host_overlaps: bool,
    pub terms: Vec<Term>,
    /// The iteration time the simulator charges, ns.
    pub total_ns: Nanos,
}

impl Breakdown {
    pub fn total_ms(&self) -> f64 {
        self.total_ns as f64 / 1e6
    }
}

fn ms(s: f64) -> f64 {
    s * 1e3
}

impl Roofline {
    /// The terms of [`Roofline::iteration_secs`] for `b`. With pipeline stages
    /// or expert-parallel groups, the layer terms are those of one group's
    /// micro-batch share and a "pipeline schedule" term carries the rest.
    pub fn breakdown(&self, b: &BatchShape) -> Breakdown {
        let seqs = (b.seqs() as f64).max(1.0);
        let share = if self.single_group {
            1.0
        } else {
            let dp = self.dp.min(seqs);
            dp * self.stages.min((seqs / dp).ceil())
        };
        let n = b.tokens() as f64 / share;
        let layers = self.dense_layers + self.moe_layers;
        let mut gemm = self.dense_gemm(n).scale(self.dense_layers);
        if self.moe_layers > 0.0 {
            let routed = if self.single_group {
                n
            } else {
                n * self.dp.min(seqs)
            };
            gemm = gemm.plus(self.moe_gemm(n, routed).scale(self.moe_layers));
        }
        let gemm_s = self.dense_layers * self.dense_gemm(n).secs()
            + if self.moe_layers > 0.0 {
                let routed = if self.single_group {
                    n
                } else {
                    n * self.dp.min(seqs)
                };
                self.moe_layers * self.moe_gemm(n, routed).secs()
            } else {
                0.0
            };
        let flops = gemm.compute * self.gemm_flops;
        let bytes = gemm.memory * self.mem_bw * super::MEMORY_EFFICIENCY;
        let ew = layers * self.elementwise(n);
        let ap = layers * self.attn_prefill(b) / share;
        let ad = layers * self.attn_decode_share(b, share);
        let comm = self.dense_layers * self.comm(n)
            + if self.moe_layers > 0.0 {
                self.moe_layers * self.moe_comm(n, b.prefill_tokens == 0)
            } else {
                0.0
            };
        let rows = b.logit_rows() as f64;
        let lm_rows = if self.single_group {
            rows
        } else {
            rows.max(1.0) / share
        };
        let lm = self.lm_head_gemm(lm_rows);
        let swap = b.swap_bytes / self.pcie_bw;
        let gpu = self.forward_secs(b);
        let host = self.host(b);
        let mut terms = vec![
            Term {
                name: "dense GEMMs",
                ms: ms(gemm_s),
                detail: format!(
                    "{} layers × {:.0} tokens: compute {:.3} ms, memory {:.3} ms, kernel floors {:.3} ms; {}-bound, {:.0} FLOP/byte",
                    layers,
                    n,
                    ms(gemm.compute),
                    ms(gemm.memory),
                    ms(gemm.floor),
                    gemm.bound(),
                    if bytes > 0.0 { flops / bytes } else { 0.0 }
                ),
            },
            Term {
                name: "element-wise",
                ms: ms(ew),
                detail: "norms, rotary, activation, residual add".into(),
            },
            Term {
                name: "attention prefill",
                ms: ms(ap),
                detail: format!("{:.0} query-key pairs", b.prefill_attn_pairs),
            },
            Term {
                name: "attention decode",
                ms: ms(ad),
                detail: format!("{} context tokens read", b.decode_context_tokens),
            },
            Term {
                name: "communication",
                ms: ms(comm),
                detail: if self.tp > 1.0 || self.dp > 1.0 {
                    let a2a = &self.layer_comm.a2a;
                    format!(
                        "all-reduces over {} GPUs (latency {:.1} µs, bus {:.0} GB/s{}){}",
                        self.allreduce.gpus(),
                        self.allreduce.latency_s * 1e6,
                        self.allreduce.busbw / 1e9,
                        if self.allreduce.custom.is_some() {
                            ", custom one-/two-shot below 8 MB"
                        } else {
                            ""
                        },
                        if a2a.ranks > 1.0 {
                            format!(
                                "; MoE dispatch + combine over {} EP ranks ({}{})",
                                a2a.ranks,
                                a2a.kind.name(),
                                match a2a.kind {
                                    super::comm::MoeA2aKind::Deepep => format!(
                                        ", {} kernels",
                                        if a2a.low_latency(b.prefill_tokens == 0) {
                                            "low-latency"
                                        } else {
                                            "normal"
                                        }
                                    ),
                                    _ => String::new(),
                                }
                            )
                        } else {
                            String::new()
                        }
                    )
                } else {
                    "one GPU".into()
                },
            },
            Term {
                name: "LM head",
                ms: ms(lm.secs()),
                detail: format!("{} logit rows, {}-bound", b.logit_rows(), lm.bound()),
            },
            Term {
                name: "swap",
                ms: ms(swap),
                detail: format!("{:.0} bytes over PCIe", b.swap_bytes),
            },
        ];
        if b.copy_kv_tokens > 0 {
            terms.push(Term {
                name: "block copies",
                ms: ms(self.block_copy_secs(b.copy_kv_tokens)),
                detail: format!(
                    "{} KV token slots copied on write in device memory",
                    b.copy_kv_tokens
                ),
            });
        }
        let sum: f64 = terms.iter().map(|t| t.ms).sum();
        if !self.single_group {
            terms.push(Term {
                name: "pipeline schedule",
                ms: ms(gpu) - sum,
                detail: format!(
                    "{} micro-batches over {} stages, {} expert-parallel groups",
                    self.micro_batches(b),
                    self.stages,
                    self.dp
                ),
            });
        }
        let runtime = self.runtime();
        terms.push(Term {
            name: "host per step",
            ms: ms(host.step),
            detail: format!("{} runtime", runtime.name()),
        });
        terms.push(Term {
            name: "host per sequence",
            ms: ms(host.seqs),
            detail: format!("{} sequences", b.seqs()),
        });
        if host.launch > 0.0 {
            terms.push(Term {
                name: "host kernel launches",
                ms: ms(host.launch),
                detail: format!("{} tokens: past the captured CUDA graphs", b.tokens()),
            });
        }
        // A runtime whose kernels run while the host launches the rest
        // (TensorRT-LLM) pays the longer of the two, not their sum.
        let mut busy = gpu;
        if runtime.launches_overlap_gpu() && host.launch > 0.0 {
            terms.push(Term {
                name: "launches hidden behind GPU",
                ms: -ms(host.launch.min(gpu)),
                detail: "the kernels run while the host launches the rest".into(),
            });
            busy = gpu.max(host.launch);
        }
        if runtime.overlaps() {
            terms.push(Term {
                name: "host hidden behind GPU",
                ms: -ms(host.overlappable().min(busy)),
                detail: "scheduled while the previous step runs".into(),
            });
        }
        Breakdown {
            source: self.source(),
            tokens: b.tokens(),
            seqs: b.seqs(),
            gpu_ms: ms(gpu),
            host_ms: ms(host.total()),
            host_overlaps: runtime.overlaps(),
            terms,
            total_ns: self.iteration_time(b),
        }
    }
}

/// A request alone on a replica: what `simulate` reports for it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LoneRequest {
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// One prefill iteration of the whole prompt (the continuous policy runs
    /// it in one step), ms.
    pub ttft_ms: f64,
    /// Mean of its output − 1 decode steps at contexts prompt + 1 … prompt +
    /// output − 1 (the replica's `kv_tokens + 1`), ms; 0 with one output token.
    pub tpot_ms: f64,
}

/// Prices a lone request of `prompt` + `output` tokens step by step with
/// the same shapes the replica builds, in integer nanoseconds as the clock
/// advances, so the figures equal a one-request `simulate` run's.
pub fn lone_request(cost: &dyn CostModel, prompt: u64, output: u64) -> LoneRequest {
    let mut p = BatchShape::default();
    p.add_prefill(prompt, 0);
    let ttft = cost.iteration_time(&p);
    let mut decode_ns: u64 = 0;
    for j in 1..output {
        let mut d = BatchShape::default();
        d.add_decode(prompt + j);
        decode_ns += cost.iteration_time(&d);
    }
    LoneRequest {
        prompt_tokens: prompt,
        output_tokens: output,
        ttft_ms: ttft as f64 / 1e6,
        tpot_ms: if output > 1 {
            decode_ns as f64 / (output - 1) as f64 / 1e6
        } else {
            0.0
        },
    }
}

/// One batch size of a decode sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    pub batch: u32,
    pub step_ms: f64,
    /// Output tokens per second per GPU of the replica.
    pub tokens_per_s_per_gpu: f64,
    /// Output tokens per second each sequence sees (1 / step).
    pub tokens_per_s_per_user: f64,
}

/// Decode steps of `batches` sequences at `context` tokens each on a replica
/// of `gpus` GPUs.
pub fn decode_sweep(
    cost: &dyn CostModel,
    context: u64,
    gpus: u32,
    batches: &[u32],
) -> Vec<SweepRow> {
    batches
        .iter()
        .map(|&batch| {
            let mut b = BatchShape::default();
            for _ in 0..batch {
                b.add_decode(context);
            }
            let step = cost.iteration_time(&b) as f64 / 1e9;
            SweepRow {
                batch,
                step_ms: step * 1e3,
                tokens_per_s_per_gpu: batch as f64 / step / gpus.max(1) as f64,
                tokens_per_s_per_user: 1.0 / step,
            }
        })
        .collect()
}

/// The knee of a sweep: the first batch size after which doubling the batch
/// (the next row, in a sweep of doublings) adds less than half again in
/// tokens per second per GPU, so larger batches buy little throughput for
/// their latency (the latency–throughput operating point). `None` when every
/// step still pays.
pub fn knee(rows: &[SweepRow]) -> Option<u32> {
    rows.windows(2)
        .find(|w| w[1].tokens_per_s_per_gpu < 1.5 * w[0].tokens_per_s_per_gpu)
        .map(|w| w[0].batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, Dtype};
    use crate::parallel::Parallelism;

    fn terms_sum(b: &Breakdown) -> f64 {
        b.terms.iter().map(|t| t.ms).sum()
    }

    #[test]
    fn terms_add_up_to_the_iteration_the_simulator_charges() {
        let (m, _) = catalog::model("llama-3.1-70b").unwrap();
        let h = catalog::hardware("h100-sxm").unwrap();
        for par in [
            Parallelism::tensor(4),
            Parallelism {
                tensor: 4,
                pipeline: 2,
                expert: 1,
                ..Parallelism::default()
            },
        ] {
            for rt in super::super::EngineRuntime::ALL {
                let r = Roofline::with_parallelism(&m, &h, Dtype::Bf16, Dtype::Bf16, &par)
                    .with_runtime(rt);
                let mut b = BatchShape::default();
                b.add_prefill(1024, 0);
                for _ in 0..31 {
                    b.add_decode(2048);
                }
                let bd = r.breakdown(&b);
                assert!((terms_sum(&bd) - bd.total_ms()).abs() < 1e-5, "{bd:?}");
            }
        }
    }

    #[test]
    fn sweep_finds_the_knee_where_decode_turns_compute_bound() {
        let (m, _) = catalog::model("llama-3.1-8b").unwrap();
        let h = catalog::hardware("h100-sxm").unwrap();
        let r = Roofline::new(&m, &h, Dtype::Bf16, Dtype::Bf16, 1);
        let batches: Vec<u32> = (0..10).map(|i| 1 << i).collect();
        let rows = decode_sweep(&r, 1024, 1, &batches);
        // Tokens per GPU grow with the batch, tokens per user fall.
        assert!(rows
            .windows(2)
            .all(|w| w[1].tokens_per_s_per_gpu > w[0].tokens_per_s_per_gpu));
        assert!(rows
            .windows(2)
            .all(|w| w[1].tokens_per_s_per_user <= w[0].tokens_per_s_per_user));
        let k = knee(&rows).expect("a knee below 512");
        assert!((16..=256).contains(&k), "{k}");
    }
}
