//! Tensor-parallel all-reduce, sized from measured collectives.
//!
//! `t = latency(g) + 2(g − 1)/g · bytes / busbw`: the ring algorithm's
//! traffic (Patarasuk & Yuan 2009) at the "bus bandwidth" nccl-tests reports,
//! plus a fixed latency. Vidur's NCCL all-reduce profiles inside one node
//! (microsoft/vidur `data/profiling/network/{a100,h100}_dgx/all_reduce.csv`,
//! 2–8 GPUs, 4 KB–128 MB) show two regimes the constants follow: two GPUs
//! exchange directly in ~8 µs, while 4 and 8 GPUs pay tens of µs before any
//! byte moves (54 µs on DGX-A100, 28 µs on DGX-H100); large messages then
//! run at 340 GB/s (A100) and 700 GB/s (H100, NVLink SHARP in the switch)
//! of bus bandwidth. Those figures live in the catalog
//! (`HardwareSpec::allreduce_latency_us`, `allreduce_busbw_gbps`); chips
//! without measurements fall back to the link's datasheet figures below.
//!
//! Engines do not send every all-reduce through NCCL: vLLM's
//! `custom_all_reduce` and TensorRT-LLM's all-reduce plugin (also in SGLang)
//! exchange small messages through buffers each GPU maps from its peers
//! (CUDA IPC over NVLink), one kernel and one barrier instead of NCCL's
//! ring set-up. [`CustomAllReduce`] prices them; `[engine] all_reduce =
//! "custom"` turns them on. [`AllToAll`] prices MoE dispatch and combine:
//! NCCL-style all-to-all, or DeepEP's normal (bandwidth-bound, NVLink inside
//! a node and RDMA across, tokens sent once per node) and low-latency
//! (latency-bound, one fixed cost per call) kernels. [`LayerComm`] charges a
//! layer's collectives for a parallel layout (see `parallel`).

use crate::catalog::HardwareSpec;
pub use crate::config::engine::{AllReduceKind, DeepEpMode, MoeA2aKind};
use crate::memory::ACTIVATION_BYTES;
use crate::parallel::Parallelism;

/// Bus bandwidth as a fraction of the link's per-direction datasheet figure
/// where the catalog has no measured all-reduce: nccl-tests report ~80 % for
/// the 1–64 MB messages of tensor-parallel activations.
pub const ALLREDUCE_BW_EFFICIENCY: f64 = 0.8;
/// Start-up latency of an all-reduce over more than two GPUs, as a multiple of
/// the link's small-message latency, where the catalog has no measurement:
/// the measured DGX-H100 ratio (28 µs over 8 µs, rounded).
pub const MULTI_GPU_LATENCY_FACTOR: f64 = 3.5;

/// An all-reduce over one tensor-parallel group: NCCL's ring or tree, or
/// for small messages the engine's custom kernel when it has one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllReduce {
    /// GPUs in the group inside one node (all of them unless `across`).
    pub workers: f64,
    /// Fixed start-up time, seconds.
    pub latency_s: f64,
    /// Bus bandwidth, bytes/s.
    pub busbw: f64,
    /// The engine's one-shot/two-shot kernels, where they apply.
    pub custom: Option<CustomAllReduce>,
    /// A group wider than one node: the stage across the scale-out network.
    pub across: Option<AcrossNodes>,
}

/// The inter-node stage of an all-reduce whose group spans `nodes` nodes of
/// `per_node` GPUs: NCCL's hierarchical schedule (reduce-scatter inside each
/// node over NVLink, an all-reduce of each GPU's 1/`per_node` shard with its
/// peers in the other nodes over its own NIC, all-gather inside the node;
/// NCCL's tree/ring across nodes, Jia et al. 2018 "Highly Scalable Deep
/// Learning Training System with Mixed-Precision" §3.3 hierarchical
/// all-reduce). TensorRT-LLM and SGLang run attention TP 16 across two
/// 8-GPU nodes this way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AcrossNodes {
    pub nodes: f64,
    pub per_node: f64,
    /// One network hop's latency, seconds.
    pub latency_s: f64,
    /// NIC bandwidth per GPU and direction, bytes/s.
    pub nic_bw: f64,
}

impl AcrossNodes {
    /// Seconds of the inter-node ring over each GPU's shard of `bytes`.
    fn secs(&self, bytes: f64) -> f64 {
        let shard = bytes / self.per_node;
        2.0 * (self.nodes - 1.0) * self.latency_s
            + 2.0 * (self.nodes - 1.0) / self.nodes * shard / self.nic_bw
    }
}

impl AllReduce {
    pub fn new(hw: &HardwareSpec, workers: u32) -> AllReduce {
        let latency_us = if workers <= 2 {
            hw.interconnect_latency_us
        } else {
            hw.allreduce_latency_us
                .unwrap_or(hw.interconnect_latency_us * MULTI_GPU_LATENCY_FACTOR)
        };
        let busbw = hw
            .allreduce_busbw_gbps
            .map(|g| g * 1e9)
            .unwrap_or(hw.interconnect_bytes_per_s() * ALLREDUCE_BW_EFFICIENCY);
        let g = hw.gpus_per_node.max(1);
        let across = match (hw.network_gbps, workers > g) {
            (Some(net), true) => Some(AcrossNodes {
                nodes: workers.div_ceil(g) as f64,
                per_node: g as f64,
                latency_s: hw.network_latency_us.unwrap_or(hw.interconnect_latency_us) * 1e-6,
                nic_bw: net * 1e9,
            }),
            _ => None,
        };
        AllReduce {
            workers: workers.min(if across.is_some() { g } else { workers }) as f64,
            latency_s: latency_us * 1e-6,
            busbw,
            custom: None,
            across,
        }
    }

    /// The same group under the engine's all-reduce choice: with
    /// [`AllReduceKind::Custom`], the custom kernels where they apply.
    pub fn with_kind(mut self, hw: &HardwareSpec, kind: AllReduceKind) -> AllReduce {
        self.custom = match kind {
            AllReduceKind::Nccl => None,
            // The custom kernels map peers' buffers over NVLink: one node only.
            AllReduceKind::Custom if self.across.is_some() => None,
            AllReduceKind::Custom => CustomAllReduce::new(hw, self.workers as u32, self.busbw),
        };
        self
    }

    /// GPUs in the whole group (every node's).
    pub fn gpus(&self) -> f64 {
        self.workers * self.across.map_or(1.0, |a| a.nodes)
    }

    /// Seconds to all-reduce `bytes` per GPU (0 for one GPU).
    #[inline]
    pub fn secs(&self, bytes: f64) -> f64 {
        if self.workers <= 1.0 && self.across.is_none() {
            return 0.0;
        }
        if let Some(c) = &self.custom {
            if let Some(t) = c.secs(bytes) {
                return t;
            }
        }
        self.nccl_secs(bytes)
    }

    /// NCCL's ring: latency plus 2(g − 1)/g of the bytes at the bus
    /// bandwidth; across nodes, the node's ring (reduce-scatter and
    /// all-gather) plus the inter-node stage over each GPU's shard.
    #[inline]
    pub fn nccl_secs(&self, bytes: f64) -> f64 {
        let inside = if self.workers > 1.0 {
            self.latency_s + 2.0 * (self.workers - 1.0) / self.workers * bytes / self.busbw
        } else {
            0.0
        };
        match &self.across {
            None => inside,
            Some(a) => inside + a.secs(bytes),
        }
    }
}

impl AllReduceKind {
    pub fn name(self) -> &'static str {
        match self {
            AllReduceKind::Nccl => "nccl",
            AllReduceKind::Custom => "custom",
        }
    }
}

/// Largest message the custom kernels take, bytes: vLLM's
/// `CustomAllreduce` buffer (`max_size = 8192 * 1024`); NCCL above it.
pub const CUSTOM_ALLREDUCE_MAX_BYTES: f64 = 8.0 * 1024.0 * 1024.0;

/// Group sizes the custom kernels serve (vLLM `_SUPPORTED_WORLD_SIZES`).
pub const CUSTOM_ALLREDUCE_WORLD_SIZES: [u32; 4] = [2, 4, 6, 8];

/// One-shot start-up latency on NVLink, µs, for 2, 4 and 8 GPUs: SGLang's
/// measurements of the TensorRT-LLM-derived custom all-reduce on H100 at its
/// smallest messages (sgl-project/sglang PR 2904: 3.7, 4.8 and 5.9 µs).
/// Chips whose link latency differs from NVLink's scale them by it.
pub const ONE_SHOT_LATENCY_US: [(u32, f64); 3] = [(2, 3.7), (4, 4.8), (8, 5.9)];

/// The NVLink small-collective latency [`ONE_SHOT_LATENCY_US`] was measured
/// against (the catalog's NVLink figure).
const NVLINK_REFERENCE_LATENCY_US: f64 = 8.0;

/// The engine's custom all-reduce (vLLM `csrc/custom_all_reduce.cuh`,
/// TensorRT-LLM `customAllReduceKernels.cu`):
///
/// - **one-shot**: every GPU reads the whole message from each of its g − 1
///   peers and reduces locally: `L₁ + (g − 1)·S / bw`, one barrier;
/// - **two-shot**: a reduce-scatter then an all-gather through the peers'
///   buffers, 2(g − 1)/g of the message per GPU as a ring moves, but two
///   barriers: `2·L₁ + 2(g − 1)/g · S / bw`.
///
/// vLLM picks one-shot for two GPUs, and on NVLink below 512 KB for up to 4
/// GPUs or 256 KB for up to 8; two-shot above, up to
/// [`CUSTOM_ALLREDUCE_MAX_BYTES`]; NCCL beyond. `bw` is the link's bus
/// bandwidth, the same figure NCCL's large messages reach.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CustomAllReduce {
    pub workers: f64,
    /// One-shot latency L₁, seconds.
    pub one_shot_latency_s: f64,
    /// Bandwidth, bytes/s.
    pub bw: f64,
    /// Largest message sent one-shot, bytes.
    pub one_shot_max_bytes: f64,
}

impl CustomAllReduce {
    /// The kernels for `workers` GPUs on `hw`, or `None` where the engine
    /// falls back to NCCL for every message (group sizes vLLM does not
    /// serve, more than two GPUs without NVLink).
    pub fn new(hw: &HardwareSpec, workers: u32, busbw: f64) -> Option<CustomAllReduce> {
        let nvlink = hw.interconnect_gbps > hw.pcie_gbps;
        if !CUSTOM_ALLREDUCE_WORLD_SIZES.contains(&workers) || (!nvlink && workers > 2) {
            return None;
        }
        let base = ONE_SHOT_LATENCY_US
            .iter()
            .find(|&&(g, _)| workers <= g)
            .map(|&(_, us)| us)
            .unwrap_or(ONE_SHOT_LATENCY_US[2].1);
        let scale = hw.interconnect_latency_us / NVLINK_REFERENCE_LATENCY_US;
        let one_shot_max_bytes = match workers {
            2 => CUSTOM_ALLREDUCE_MAX_BYTES,
            3 | 4 => 512.0 * 1024.0,
            _ => 256.0 * 1024.0,
        };
        Some(CustomAllReduce {
            workers: workers as f64,
            one_shot_latency_s: base * scale * 1e-6,
            bw: busbw,
            one_shot_max_bytes,
        })
    }

    /// Seconds for `bytes` per GPU, or `None` above the kernels' buffer.
    #[inline]
    pub fn secs(&self, bytes: f64) -> Option<f64> {
        let g = self.workers;
        if bytes >= CUSTOM_ALLREDUCE_MAX_BYTES {
            None
        } else if bytes < self.one_shot_max_bytes {
            Some(self.one_shot_latency_s + (g - 1.0) * bytes / self.bw)
        } else {
            Some(2.0 * self.one_shot_latency_s + 2.0 * (g - 1.0) / g * bytes / self.bw)
        }
    }
}

impl MoeA2aKind {
    pub fn name(self) -> &'static str {
        match self {
            MoeA2aKind::AllToAll => "all-to-all",
            MoeA2aKind::Deepep => "deepep",
        }
    }
}

impl DeepEpMode {
    pub fn name(self) -> &'static str {
        match self {
            DeepEpMode::Auto => "auto",
            DeepEpMode::Normal => "normal",
            DeepEpMode::LowLatency => "low-latency",
        }
    }
}

/// RDMA efficiency of DeepEP's internode kernels: 43–58 GB/s per GPU over
/// 400 Gb/s (50 GB/s) ConnectX-7 NICs in its README's normal-mode table;
/// their middle.
pub const RDMA_BW_EFFICIENCY: f64 = 0.9;

/// Bytes per element DeepEP dispatches in: FP8 with one fp32 scale per 128
/// values (DeepSeek-V3 report §3.3: dispatch in FP8, combine in BF16).
pub const DEEPEP_DISPATCH_BYTES: f64 = 1.0 + 4.0 / 128.0;

/// The dispatch and combine of one MoE layer over `ranks` EP ranks, with
/// `per_node` of them in each NVLink domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllToAll {
    pub kind: MoeA2aKind,
    pub mode: DeepEpMode,
    pub ranks: f64,
    pub per_node: f64,
    /// Experts per token.
    pub k: f64,
    pub hidden: f64,
    /// NVLink-domain and scale-out bandwidth (bytes/s, before efficiency)
    /// and latency (s).
    pub link_bw: f64,
    pub link_latency_s: f64,
    pub net_bw: f64,
    pub net_latency_s: f64,
}

impl AllToAll {
    pub fn new(
        hw: &HardwareSpec,
        par: &Parallelism,
        hidden: u32,
        k: u32,
        kind: MoeA2aKind,
        mode: DeepEpMode,
    ) -> AllToAll {
        let ranks = par.expert.max(1);
        // EP ranks are spread over the stage's GPUs, MoE-TP slices innermost.
        let per_node = (hw.gpus_per_node.max(1) / par.moe_tp()).clamp(1, ranks);
        let link_bw = hw.interconnect_bytes_per_s();
        let link_latency_s = hw.interconnect_latency_us * 1e-6;
        AllToAll {
            kind,
            mode,
            ranks: ranks as f64,
            per_node: per_node as f64,
            k: k as f64,
            hidden: hidden as f64,
            link_bw,
            link_latency_s,
            net_bw: hw.network_gbps.map(|g| g * 1e9).unwrap_or(link_bw),
            net_latency_s: hw
                .network_latency_us
                .map(|l| l * 1e-6)
                .unwrap_or(link_latency_s),
        }
    }

    /// Whether every EP rank shares one NVLink domain.
    fn one_domain(&self) -> bool {
        self.per_node >= self.ranks
    }

    /// The kernels a step runs: normal or low-latency DeepEP by `decode_only`
    /// under `auto`.
    pub fn low_latency(&self, decode_only: bool) -> bool {
        match self.mode {
            DeepEpMode::Auto => decode_only,
            DeepEpMode::Normal => false,
            DeepEpMode::LowLatency => true,
        }
    }

    /// Seconds for the dispatch plus the combine of `tokens` tokens per GPU.
    pub fn secs(&self, tokens: f64, decode_only: bool) -> f64 {
        if self.ranks <= 1.0 {
            return 0.0;
        }
        let pairs = tokens * self.k * self.hidden;
        let remote = (self.ranks - 1.0) / self.ranks;
        match self.kind {
            MoeA2aKind::AllToAll if self.one_domain() => {
                // (In this order, the sum a single node has always charged.)
                let bytes = pairs * ACTIVATION_BYTES * (self.ranks - 1.0) / self.ranks;
                2.0 * (bytes / (self.link_bw * super::ALL_TO_ALL_BW_EFFICIENCY)
                    + self.link_latency_s)
            }
            MoeA2aKind::AllToAll => {
                // Pairs bound for other nodes cross the NIC, the rest NVLink.
                let off_node = (self.ranks - self.per_node) / self.ranks;
                let on_node = (self.per_node - 1.0) / self.ranks;
                let bytes = pairs * ACTIVATION_BYTES;
                let t = (bytes * on_node / (self.link_bw * super::ALL_TO_ALL_BW_EFFICIENCY))
                    .max(bytes * off_node / (self.net_bw * RDMA_BW_EFFICIENCY));
                2.0 * (t + self.net_latency_s)
            }
            MoeA2aKind::Deepep => {
                let both = DEEPEP_DISPATCH_BYTES + ACTIVATION_BYTES;
                let (bw, latency) = if self.one_domain() {
                    (
                        self.link_bw * super::ALL_TO_ALL_BW_EFFICIENCY,
                        self.link_latency_s,
                    )
                } else {
                    (self.net_bw * RDMA_BW_EFFICIENCY, self.net_latency_s)
                };
                if self.low_latency(decode_only) {
                    // Every pair sent directly over the domain's slowest link.
                    pairs * both * remote / bw + 2.0 * latency
                } else if self.one_domain() {
                    // Notify round, then the payload over NVLink.
                    pairs * both * remote / bw + 4.0 * latency
                } else {
                    // A token travels once to each other node holding one
                    // of its k experts (uniform routing: nodes·(1 − (1 −
                    // 1/nodes)^k) nodes touched), then on over NVLink.
                    let nodes = (self.ranks / self.per_node).ceil();
                    let touched = nodes * (1.0 - (1.0 - 1.0 / nodes).powf(self.k));
                    let rdma = tokens * self.hidden * both * touched * (nodes - 1.0) / nodes;
                    let nvl = pairs * both * (self.per_node - 1.0) / self.ranks;
                    (rdma / bw).max(nvl / (self.link_bw * super::ALL_TO_ALL_BW_EFFICIENCY))
                        + 4.0 * latency
                }
            }
        }
    }
}

/// A layer's collectives under a parallel layout: the attention group's
/// all-reduce, the MoE side's all-to-all, the MoE-TP all-reduce and, for DP
/// attention beside tensor-sliced experts, the gather and scatter over the
/// stage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerComm {
    /// Attention (and dense-layer) all-reduce over the attention TP group.
    pub attention: AllReduce,
    /// All-reduce of routed-expert outputs over one expert's MoE-TP slices.
    pub moe_tp: AllReduce,
    /// DP attention with MoE TP and no EP: SGLang's `dp_gather` before the
    /// experts and `dp_scatter` after, one all-reduce's traffic over the stage.
    pub stage: AllReduce,
    pub a2a: AllToAll,
    pub hidden: f64,
    pub k: f64,
    /// Attention DP groups, EP ranks and attention TP.
    pub dp: f64,
    pub ep: f64,
    pub atp: f64,
}

impl LayerComm {
    pub fn new(
        hw: &HardwareSpec,
        par: &Parallelism,
        hidden: u32,
        k: u32,
        choice: CommChoice,
    ) -> LayerComm {
        let ar = |g: u32| AllReduce::new(hw, g).with_kind(hw, choice.all_reduce);
        LayerComm {
            attention: ar(par.attention_tp()),
            moe_tp: ar(par.moe_tp()),
            stage: ar(par.tensor.max(1)),
            a2a: AllToAll::new(hw, par, hidden, k, choice.moe_a2a, choice.deepep_mode),
            hidden: hidden as f64,
            k: k as f64,
            dp: par.attention_dp() as f64,
            ep: par.expert.max(1) as f64,
            atp: par.attention_tp() as f64,
        }
    }

    #[inline]
    fn bytes(&self, tokens: f64) -> f64 {
        tokens * self.hidden * ACTIVATION_BYTES
    }

    /// A dense layer of `tokens` tokens per attention group: all-reduces
    /// after attention and after the MLP.
    #[inline]
    pub fn dense(&self, tokens: f64) -> f64 {
        if self.atp <= 1.0 {
            return 0.0;
        }
        2.0 * self.attention.secs(self.bytes(tokens))
    }

    /// An MoE layer of `tokens` tokens per attention group. Without DP
    /// attention or EP, the dense layer's two all-reduces (experts are
    /// tensor-sliced). With EP: the attention all-reduce, a dispatch and a
    /// combine of each GPU's share of its group's tokens (GShard), and an
    /// all-reduce of the expert outputs an EP rank receives when its
    /// experts are split over more than one GPU. DP attention with
    /// tensor-sliced experts gathers every group's tokens and scatters the
    /// results over the stage instead of the all-to-all.
    pub fn moe(&self, tokens: f64, decode_only: bool) -> f64 {
        if self.dp <= 1.0 && self.ep <= 1.0 {
            return self.dense(tokens);
        }
        let attention = self.attention.secs(self.bytes(tokens));
        if self.ep <= 1.0 {
            return attention + self.stage.secs(self.bytes(tokens * self.dp));
        }
        let per_gpu = tokens / self.atp;
        let a2a = self.a2a.secs(per_gpu, decode_only);
        // Tokens an EP rank's experts see: every group's, k each, over EP.
        let routed = if self.dp == self.ep {
            tokens * self.k
        } else {
            tokens * self.dp * self.k / self.ep
        };
        attention + a2a + self.moe_tp.secs(self.bytes(routed))
    }
}

/// The engine's collective implementations (`[engine] all_reduce`,
/// `moe_a2a`, `deepep_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommChoice {
    pub all_reduce: AllReduceKind,
    pub moe_a2a: MoeA2aKind,
    pub deepep_mode: DeepEpMode,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    #[test]
    fn latency_bound_small_and_bandwidth_bound_large_messages() {
        let h = catalog::hardware("h100-sxm").unwrap();
        let ar = AllReduce::new(&h, 8);
        // 4 KB: the latency; 128 MB: 1.75 × 128 MiB over 700 GB/s ≈ 0.34 ms.
        assert!((ar.secs(4096.0) - 28e-6).abs() < 1e-6);
        let big = ar.secs(2.0 * 67_108_864.0);
        assert!((big - 0.3635e-3).abs() < 0.01e-3, "{big}");
        assert!(AllReduce::new(&h, 2).secs(4096.0) < 10e-6);
        assert_eq!(AllReduce::new(&h, 1).secs(1e9), 0.0);
    }

    #[test]
    fn all_reduce_across_nodes_adds_the_network_stage_over_each_gpus_shard() {
        // TP 16 over two 8-GPU H100 nodes: the node's ring (28 µs + 1.75 ×
        // S / 700 GB/s), then each GPU's S / 8 shard all-reduced with its
        // peer node over its 50 GB/s NIC (2 × 1 hop × 20 µs + 2 · 1/2 · S/8 / 50 GB/s).
        let h = catalog::hardware("h100-sxm").unwrap();
        let ar = AllReduce::new(&h, 16).with_kind(&h, AllReduceKind::Custom);
        assert!(ar.custom.is_none(), "custom kernels stay inside a node");
        assert_eq!(ar.gpus(), 16.0);
        let s = 1_048_576.0;
        let want = 28e-6 + 1.75 * s / 700e9 + 2.0 * 20e-6 + s / 8.0 / 50e9;
        assert!(
            (ar.secs(s) - want).abs() < 1e-12,
            "{} vs {want}",
            ar.secs(s)
        );
        // Slower than one node's all-reduce, by the network's share.
        assert!(ar.secs(s) > AllReduce::new(&h, 8).secs(s));
    }

    #[test]
    fn custom_all_reduce_is_one_shot_small_two_shot_medium_and_nccl_large() {
        let h = catalog::hardware("h100-sxm").unwrap();
        let ar = AllReduce::new(&h, 8).with_kind(&h, AllReduceKind::Custom);
        let bw = 700e9;
        // 64 KB: one-shot, L₁ + 7 · S / bw.
        let s = 65_536.0;
        assert!((ar.secs(s) - (5.9e-6 + 7.0 * s / bw)).abs() < 1e-12);
        // 1 MB (≥ 256 KB on 8 GPUs): two-shot, 2 L₁ + 2 · 7/8 · S / bw.
        let s = 1_048_576.0;
        assert!((ar.secs(s) - (2.0 * 5.9e-6 + 1.75 * s / bw)).abs() < 1e-12);
        // 16 MB (≥ 8 MB): NCCL's ring.
        let s = 16.0 * 1_048_576.0;
        assert_eq!(ar.secs(s), AllReduce::new(&h, 8).secs(s));
        assert!((ar.secs(s) - (28e-6 + 1.75 * s / bw)).abs() < 1e-12);
        // Two GPUs: one-shot up to the buffer; four: one-shot below 512 KB.
        let two = AllReduce::new(&h, 2).with_kind(&h, AllReduceKind::Custom);
        assert!((two.secs(4e6) - (3.7e-6 + 4e6 / bw)).abs() < 1e-12);
        let four = AllReduce::new(&h, 4).with_kind(&h, AllReduceKind::Custom);
        assert!((four.secs(400_000.0) - (4.8e-6 + 3.0 * 400_000.0 / bw)).abs() < 1e-12);
        // Small decode messages: a quarter of NCCL's time or less.
        let decode = 8.0 * 8192.0 * 2.0;
        assert!(ar.secs(decode) < 0.3 * AllReduce::new(&h, 8).secs(decode));
        // No custom kernel for 4 PCIe GPUs, nor for 16 GPUs of an NVL72 rack.
        let l40s = catalog::hardware("l40s").unwrap();
        assert_eq!(CustomAllReduce::new(&l40s, 4, 1e9), None);
        assert!(CustomAllReduce::new(&l40s, 2, 1e9).is_some());
        let gb200 = catalog::hardware("gb200").unwrap();
        assert_eq!(CustomAllReduce::new(&gb200, 16, 1e9), None);
        // NCCL by choice: every message through the ring.
        assert_eq!(
            AllReduce::new(&h, 8).with_kind(&h, AllReduceKind::Nccl),
            AllReduce::new(&h, 8)
        );
    }

    fn a2a(hw: &str, par: Parallelism, kind: MoeA2aKind, mode: DeepEpMode) -> AllToAll {
        let h = catalog::hardware(hw).unwrap();
        AllToAll::new(&h, &par, 7168, 8, kind, mode)
    }

    #[test]
    fn deepep_low_latency_and_normal_modes_follow_their_closed_forms() {
        let both = DEEPEP_DISPATCH_BYTES + ACTIVATION_BYTES;
        let pairs = 16.0 * 8.0 * 7168.0;
        // Low latency inside one NVL72 rack (EP 32): every pair over NVLink
        // at 0.75 × 900 GB/s, 31/32 of them to other ranks, plus two latencies.
        let ll = a2a(
            "gb200",
            Parallelism::moe(32, 32, 32),
            MoeA2aKind::Deepep,
            DeepEpMode::Auto,
        );
        let want = pairs * both * 31.0 / 32.0 / (900e9 * 0.75) + 2.0 * 8e-6;
        assert!((ll.secs(16.0, true) - want).abs() < 1e-12);
        // Auto mode: normal kernels for a step with prefill (notify round).
        let want = pairs * both * 31.0 / 32.0 / (900e9 * 0.75) + 4.0 * 8e-6;
        assert!((ll.secs(16.0, false) - want).abs() < 1e-12);
        // Normal mode across four H200 nodes (EP 32, 8 ranks per node): a
        // token crosses to each other node holding one of its 8 experts,
        // 4 · (1 − (3/4)^8) nodes touched, 3/4 of them remote, over
        // 0.9 × 50 GB/s; the NVLink share is 7/32 of the pairs.
        let n = a2a(
            "h200",
            Parallelism::moe(32, 32, 32),
            MoeA2aKind::Deepep,
            DeepEpMode::Normal,
        );
        let tokens = 4096.0;
        let touched = 4.0 * (1.0 - 0.75f64.powi(8));
        let rdma = tokens * 7168.0 * both * touched * 0.75 / (50e9 * 0.9);
        let nvl = tokens * 8.0 * 7168.0 * both * 7.0 / 32.0 / (450e9 * 0.75);
        assert!(rdma > nvl);
        assert!((n.secs(tokens, false) - (rdma + 4.0 * 20e-6)).abs() < 1e-12);
        // Low latency across nodes: every pair over RDMA.
        let l = a2a(
            "h200",
            Parallelism::moe(32, 32, 32),
            MoeA2aKind::Deepep,
            DeepEpMode::LowLatency,
        );
        let want = 16.0 * 8.0 * 7168.0 * both * 31.0 / 32.0 / (50e9 * 0.9) + 2.0 * 20e-6;
        assert!((l.secs(16.0, false) - want).abs() < 1e-12);
        // A plain all-to-all across nodes: the NIC's share bounds it.
        let p = a2a(
            "h200",
            Parallelism::moe(32, 32, 32),
            MoeA2aKind::AllToAll,
            DeepEpMode::Auto,
        );
        let bytes = tokens * 8.0 * 7168.0 * ACTIVATION_BYTES;
        let want = 2.0 * (bytes * 24.0 / 32.0 / (50e9 * 0.9) + 20e-6);
        assert!((p.secs(tokens, false) - want).abs() < 1e-12);
        // One rank moves nothing.
        let one = a2a(
            "h200",
            Parallelism::tensor(8),
            MoeA2aKind::Deepep,
            DeepEpMode::Auto,
        );
        assert_eq!(one.secs(100.0, true), 0.0);
    }

    #[test]
    fn a_layers_collectives_follow_its_layout() {
        let h = catalog::hardware("h200").unwrap();
        let c = CommChoice::default();
        let bytes = |t: f64| t * 7168.0 * ACTIVATION_BYTES;
        // DP attention 8 with experts sliced over all 8 GPUs: no attention
        // all-reduce (attention TP 1); every group's tokens gathered and
        // scattered over the stage, one all-reduce's traffic.
        let l = LayerComm::new(&h, &Parallelism::moe(8, 8, 1), 7168, 8, c);
        let ar8 = AllReduce::new(&h, 8);
        assert_eq!(l.moe(10.0, true), ar8.secs(bytes(80.0)));
        assert_eq!(l.dense(10.0), 0.0);
        // Attention TP 8 with EP 8: the attention all-reduce, then each GPU
        // dispatches an eighth of the tokens; no MoE-TP all-reduce.
        let l = LayerComm::new(&h, &Parallelism::moe(8, 1, 8), 7168, 8, c);
        let a = AllToAll::new(
            &h,
            &Parallelism::moe(8, 1, 8),
            7168,
            8,
            c.moe_a2a,
            c.deepep_mode,
        );
        assert_eq!(l.moe(64.0, true), ar8.secs(bytes(64.0)) + a.secs(8.0, true));
        // DP 2 × attention TP 4 with EP 2 (MoE TP 4): an EP rank's experts
        // see 2 groups × 10 tokens × 8 experts / 2 ranks, all-reduced over 4.
        let par = Parallelism::moe(8, 2, 2);
        let l = LayerComm::new(&h, &par, 7168, 8, c);
        let ar4 = AllReduce::new(&h, 4);
        let a = AllToAll::new(&h, &par, 7168, 8, c.moe_a2a, c.deepep_mode);
        let want = ar4.secs(bytes(10.0)) + a.secs(2.5, true) + ar4.secs(bytes(80.0));
        assert_eq!(l.moe(10.0, true), want);
    }
}
