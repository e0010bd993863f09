//! Accelerator datasheets: the hardware presets and the spec a scenario may
//! give inline.

use super::Dtype;
use serde::{Deserialize, Serialize};

/// model and the memory budget; a scenario may give one inline with the same keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareSpec {
    /// Display name ("custom" when an inline spec omits it).
    #[serde(default)]
    pub name: String,
    /// Peak dense BF16/FP16 tensor throughput, TFLOP/s.
    pub bf16_tflops: f64,
    /// Peak dense FP8 tensor throughput, TFLOP/s (absent where the chip has no FP8 units).
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    /// Peak dense INT8 tensor throughput, TOP/s.
    #[serde(default)]
    pub int8_tops: Option<f64>,
    /// Peak dense FP4 tensor throughput, TFLOP/s (absent where the chip has no FP4 units).
    #[serde(default)]
    pub fp4_tflops: Option<f64>,
    /// Device memory, GiB.
    pub memory_gib: f64,
    /// Device memory bandwidth, TB/s (decimal).
    pub memory_bw_tbps: f64,
    /// GPU-to-GPU bandwidth per direction, GB/s (NVLink / Infinity Fabric, or PCIe
    /// when the card has no such link).
    pub interconnect_gbps: f64,
    /// Latency of one small collective over that link, microseconds (the
    /// all-reduce of two GPUs, and send/recv).
    pub interconnect_latency_us: f64,
    /// Measured start-up latency of an all-reduce over more than two GPUs of
    /// one node, microseconds (absent: a multiple of the link latency; see
    /// `cost::comm`).
    #[serde(default)]
    pub allreduce_latency_us: Option<f64>,
    /// Measured all-reduce bus bandwidth inside one node, GB/s (nccl-tests
    /// "busbw"; absent: a fraction of `interconnect_gbps`). The file key says
    /// bytes (`allreduce_busbw_gbyte_s`), as every bandwidth key does.
    #[serde(default, rename = "allreduce_busbw_gbyte_s")]
    pub allreduce_busbw_gbps: Option<f64>,
    /// Host link (PCIe) bandwidth per direction, GB/s.
    pub pcie_gbps: f64,
    /// GPUs one node joins with the `interconnect` link (the NVLink / Infinity
    /// Fabric domain). A tensor-parallel group wider than one node
    /// all-reduces over the network; pipeline stages may span nodes.
    #[serde(default = "default_gpus_per_node")]
    pub gpus_per_node: u32,
    /// Scale-out network per GPU and direction, GB/s (the GPU's NIC), used by
    /// pipeline hops between nodes. Absent: replicas may not span nodes.
    #[serde(default)]
    pub network_gbps: Option<f64>,
    /// Latency of one small send/recv across nodes, microseconds.
    #[serde(default)]
    pub network_latency_us: Option<f64>,
    /// Board power under full load, W: the datasheet's TDP (maximum
    /// thermal design power) of the form factor the preset describes
    /// (`energy` prices a busy GPU at it). Absent: the run reports no energy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tdp_w: Option<f64>,
    /// Board power of an idle GPU holding a loaded model, W (absent with a
    /// TDP: [`IDLE_FRACTION_OF_TDP`] of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_w: Option<f64>,
    /// Where the numbers come from.
    #[serde(default)]
    pub source: String,
}

impl HardwareSpec {
    /// Peak dense tensor throughput (FLOP/s) used for matrix products whose
    /// operands are stored in `dtype`. Weight-only formats (int4, or fp8 on a
    /// chip without FP8 units) are dequantized and multiplied at BF16 rate, as
    /// Marlin/AWQ kernels do.
    pub fn peak_flops(&self, dtype: Dtype) -> f64 {
        let tflops = match dtype {
            Dtype::Fp8 | Dtype::Fp8Block => self.fp8_tflops.unwrap_or(self.bf16_tflops),
            // FP4 weights multiply on FP4 units where the chip has them
            // (Blackwell); elsewhere weight-only kernels dequantize them and
            // multiply in BF16 (Marlin's MXFP4/NVFP4 W4A16 kernels on Hopper
            // and Ampere, as vLLM runs gpt-oss there).
            Dtype::Nvfp4 | Dtype::Mxfp4 => self.fp4_tflops.unwrap_or(self.bf16_tflops),
            Dtype::Int8 => self.int8_tops.unwrap_or(self.bf16_tflops),
            // FP32 GEMMs run on TF32 tensor cores at half the BF16 rate.
            Dtype::Fp32 => self.bf16_tflops / 2.0,
            Dtype::Bf16 | Dtype::Fp16 | Dtype::Int4 => self.bf16_tflops,
        };
        tflops * 1e12
    }

    pub fn memory_bytes(&self) -> f64 {
        self.memory_gib * GIB
    }

    pub fn memory_bw_bytes_per_s(&self) -> f64 {
        self.memory_bw_tbps * 1e12
    }

    pub fn interconnect_bytes_per_s(&self) -> f64 {
        self.interconnect_gbps * 1e9
    }

    /// (load, idle) board power per GPU, W, when the spec gives a TDP; the
    /// idle figure defaults to [`IDLE_FRACTION_OF_TDP`] of it.
    pub fn power_w(&self) -> Option<(f64, f64)> {
        let tdp = self.tdp_w?;
        Some((tdp, self.idle_w.unwrap_or_else(|| idle_w(tdp))))
    }
}

/// Idle board power as a share of TDP: a GPU in its performance state with
/// weights and KV cache resident and no kernel running. Vendors publish no
/// idle figure; this is the measured ratio on a DGX A100 serving with vLLM
/// (62 W idle against the A100-SXM's 400 W TDP, nvidia-smi, the
/// chuyishang/inference-energy measurements), which also matches the
/// 60–75 W that nvidia-smi shows for an idle H100-SXM (700 W) in published
/// runs. One ratio for every chip keeps the figure a stated assumption a
/// scenario can replace with `[hardware.spec] idle_w`, not a number per
/// chip that no datasheet backs.
pub const IDLE_FRACTION_OF_TDP: f64 = 0.15;

/// The idle power of a chip of `tdp` watts (see [`IDLE_FRACTION_OF_TDP`]).
pub fn idle_w(tdp: f64) -> f64 {
    tdp * IDLE_FRACTION_OF_TDP
}

fn default_gpus_per_node() -> u32 {
    8
}

pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A hardware preset: the keys users type and the datasheet figures.
pub struct HardwarePreset {
    pub key: &'static str,
    pub aliases: &'static [&'static str],
    pub spec: fn() -> HardwareSpec,
}

// Link figures. NVLink 4 (H100/H200): 18 links, 900 GB/s bidirectional per GPU.
// NVLink 3 (A100): 600 GB/s bidirectional. NVLink 5 (B200): 1.8 TB/s bidirectional.
// MI300X: 7 Infinity Fabric links, 896 GB/s aggregate bidirectional.
// PCIe Gen4 x16: 32 GB/s per direction; Gen5 x16: 64 GB/s per direction.
// Collective latency: NCCL/RCCL all-reduce of a few KB inside one 8-GPU node takes
// on the order of 10 µs over NVLink and 20–30 µs over PCIe (nccl-tests small-message
// rows); these are order-of-magnitude figures that a calibration profile replaces.
const NVLINK_LATENCY_US: f64 = 8.0;
const PCIE_P2P_LATENCY_US: f64 = 25.0;
// Nodes: every preset's reference server holds 8 GPUs (HGX/DGX boards, the
// MI300X OAM platform, 8-card PCIe servers such as AWS g6e.48xlarge with 8 L40S
// and g6.48xlarge with 8 L4). Scale-out NICs, one per GPU: DGX H100/H200/B200
// datasheets list 8 single-port ConnectX-7 at 400 Gb/s (50 GB/s per direction);
// DGX A100 lists 8 ConnectX-6 at 200 Gb/s HDR (25 GB/s); AMD's "Instinct MI300
// Series Cluster Reference Architecture Guide" (pub. 63916) pairs each GPU with
// a 400 Gb/s NIC. PCIe-card servers ship with vendor-chosen NICs, so L40S and L4
// carry none (give an inline spec to span nodes with them). Latency of a small
// NCCL send/recv across nodes is some tens of µs against ~8 within NVLink: as
// with the figures above, an order of magnitude a calibration replaces.
const GPUS_PER_NODE: u32 = 8;
// Measured all-reduce inside one 8-GPU node: NCCL through PyTorch, Vidur's
// profiles (microsoft/vidur `data/profiling/network/{a100,h100}_dgx/
// all_reduce.csv`, 4–8 GPUs, 4 KB–128 MB), least-error fit of
// latency + 2(g−1)/g · bytes / busbw. H200 shares H100's NVLink 4 and
// NVSwitch, and A100-40GB the DGX-A100's NVLink 3, so they take the same.
const DGX_A100_ALLREDUCE_LATENCY_US: f64 = 54.0;
const DGX_A100_ALLREDUCE_BUSBW_GBPS: f64 = 340.0;
const DGX_H100_ALLREDUCE_LATENCY_US: f64 = 28.0;
const DGX_H100_ALLREDUCE_BUSBW_GBPS: f64 = 700.0;
const NETWORK_LATENCY_US: f64 = 20.0;

// Board power (TDP, W) from each datasheet's maximum thermal design power
// for the form factor above: H100 SXM5 and H200 SXM up to 700 W; A100 SXM
// (40 and 80 GB) 400 W; L40S 350 W; L4 72 W; B200 in HGX B200 1,000 W;
// MI300X 750 W; B300 in HGX B300 1,100 W; GB200 NVL72 1,200 W and GB300
// NVL72 1,400 W per Blackwell GPU; H20 400 W; MI325X 1,000 W; MI355X
// 1,400 W; RTX PRO 6000 Blackwell Server Edition 600 W (configurable down to
// 400 W).
fn h100_sxm() -> HardwareSpec {
    HardwareSpec {
        name: "H100-SXM".into(),
        bf16_tflops: 989.4,
        fp8_tflops: Some(1978.9),
        int8_tops: Some(1978.9),
        fp4_tflops: None,
        memory_gib: 80.0,
        memory_bw_tbps: 3.35,
        interconnect_gbps: 450.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: Some(DGX_H100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_H100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(700.0),
        idle_w: Some(idle_w(700.0)),
        source: "NVIDIA H100 Tensor Core GPU datasheet (SXM5 column; sparse figures halved)".into(),
    }
}

fn h200() -> HardwareSpec {
    HardwareSpec {
        name: "H200".into(),
        bf16_tflops: 989.4,
        fp8_tflops: Some(1978.9),
        int8_tops: Some(1978.9),
        fp4_tflops: None,
        memory_gib: 141.0,
        memory_bw_tbps: 4.8,
        interconnect_gbps: 450.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: Some(DGX_H100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_H100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(700.0),
        idle_w: Some(idle_w(700.0)),
        source: "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column; sparse figures halved)"
            .into(),
    }
}

fn a100_80gb() -> HardwareSpec {
    HardwareSpec {
        name: "A100-80GB".into(),
        bf16_tflops: 312.0,
        fp8_tflops: None,
        int8_tops: Some(624.0),
        fp4_tflops: None,
        memory_gib: 80.0,
        memory_bw_tbps: 2.039,
        interconnect_gbps: 300.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: Some(DGX_A100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_A100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 32.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(25.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(400.0),
        idle_w: Some(idle_w(400.0)),
        source: "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column; dense figures)"
            .into(),
    }
}

fn a100_40gb() -> HardwareSpec {
    HardwareSpec {
        name: "A100-40GB".into(),
        bf16_tflops: 312.0,
        fp8_tflops: None,
        int8_tops: Some(624.0),
        fp4_tflops: None,
        memory_gib: 40.0,
        memory_bw_tbps: 1.555,
        interconnect_gbps: 300.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: Some(DGX_A100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_A100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 32.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(25.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(400.0),
        idle_w: Some(idle_w(400.0)),
        source: "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM column; dense figures)"
            .into(),
    }
}

fn l40s() -> HardwareSpec {
    HardwareSpec {
        name: "L40S".into(),
        bf16_tflops: 362.05,
        fp8_tflops: Some(733.0),
        int8_tops: Some(733.0),
        fp4_tflops: None,
        memory_gib: 48.0,
        memory_bw_tbps: 0.864,
        interconnect_gbps: 32.0,
        interconnect_latency_us: PCIE_P2P_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 32.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: None,
        network_latency_us: None,
        tdp_w: Some(350.0),
        idle_w: Some(idle_w(350.0)),
        source: "NVIDIA L40S datasheet (sparse figures halved; no NVLink, PCIe Gen4 x16)".into(),
    }
}

fn l4() -> HardwareSpec {
    HardwareSpec {
        name: "L4".into(),
        bf16_tflops: 121.0,
        fp8_tflops: Some(242.5),
        int8_tops: Some(242.5),
        fp4_tflops: None,
        memory_gib: 24.0,
        memory_bw_tbps: 0.300,
        interconnect_gbps: 32.0,
        interconnect_latency_us: PCIE_P2P_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 32.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: None,
        network_latency_us: None,
        tdp_w: Some(72.0),
        idle_w: Some(idle_w(72.0)),
        source: "NVIDIA L4 Tensor Core GPU datasheet (sparse figures halved; PCIe Gen4 x16)".into(),
    }
}

fn b200() -> HardwareSpec {
    HardwareSpec {
        name: "B200".into(),
        bf16_tflops: 2250.0,
        fp8_tflops: Some(4500.0),
        int8_tops: Some(4500.0),
        fp4_tflops: Some(9000.0),
        memory_gib: 180.0,
        memory_bw_tbps: 8.0,
        interconnect_gbps: 900.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(1000.0),
        idle_w: Some(idle_w(1000.0)),
        source:
            "NVIDIA HGX B200 datasheet, per-GPU share of the 8-GPU board (sparse figures halved)"
                .into(),
    }
}

fn mi300x() -> HardwareSpec {
    HardwareSpec {
        name: "MI300X".into(),
        bf16_tflops: 1307.4,
        fp8_tflops: Some(2614.9),
        int8_tops: Some(2614.9),
        fp4_tflops: None,
        memory_gib: 192.0,
        memory_bw_tbps: 5.3,
        interconnect_gbps: 448.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(750.0),
        idle_w: Some(idle_w(750.0)),
        source: "AMD Instinct MI300X accelerator datasheet (dense figures; Infinity Fabric 896 GB/s aggregate)"
            .into(),
    }
}

// Grace Blackwell racks (GB200 / GB300 NVL72): 72 GPUs joined by fifth-generation
// NVLink through NVSwitch trays, 1.8 TB/s bidirectional per GPU, so the whole
// rack is one NVLink domain and tensor- or expert-parallel groups up to 72 GPUs
// never leave it. Each GPU reaches its Grace CPU over NVLink-C2C (900 GB/s
// bidirectional for the pair), which is the host link KV swapping crosses.
// Memory sizes are the capacity nvidia-smi reports, as NVIDIA's aiconfigurator
// system files record them (`systems/{b300_sxm,gb200,gb300}.yaml`), which the
// datasheets round to 186 GB and 288 GB.
const NVL72_GPUS: u32 = 72;
const NVLINK_C2C_GBPS: f64 = 450.0;
const MIB: f64 = 1024.0 * 1024.0;

fn b300() -> HardwareSpec {
    HardwareSpec {
        name: "B300".into(),
        bf16_tflops: 2250.0,
        fp8_tflops: Some(4500.0),
        int8_tops: Some(153.5),
        fp4_tflops: Some(13500.0),
        memory_gib: 275_040.0 * MIB / GIB,
        memory_bw_tbps: 7.75,
        interconnect_gbps: 900.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 128.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(100.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(1100.0),
        idle_w: Some(idle_w(1100.0)),
        source:
            "NVIDIA HGX B300 datasheet, per-GPU share of the 8-GPU board (sparse BF16/FP8/INT8 \
                 halved; FP4 dense 108 PFLOPS / 8; 62 TB/s HBM3e / 8; NVLink 5 1.8 TB/s; \
                 ConnectX-8 800 Gb/s and PCIe Gen6 per GPU; INT8 cut on Blackwell Ultra)"
                .into(),
    }
}

fn gb200() -> HardwareSpec {
    HardwareSpec {
        name: "GB200".into(),
        bf16_tflops: 2500.0,
        fp8_tflops: Some(5000.0),
        int8_tops: Some(5000.0),
        fp4_tflops: Some(10000.0),
        memory_gib: 189_471.0 * MIB / GIB,
        memory_bw_tbps: 8.0,
        interconnect_gbps: 900.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: NVLINK_C2C_GBPS,
        gpus_per_node: NVL72_GPUS,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(1200.0),
        idle_w: Some(idle_w(1200.0)),
        source: "NVIDIA GB200 NVL72 datasheet, per-GPU share of the 72-GPU rack (sparse figures \
                 halved; 8 TB/s HBM3e; NVLink 5 1.8 TB/s in one 72-GPU domain; NVLink-C2C to \
                 Grace; ConnectX-7 400 Gb/s per GPU)"
            .into(),
    }
}

fn gb300() -> HardwareSpec {
    HardwareSpec {
        name: "GB300".into(),
        bf16_tflops: 2500.0,
        fp8_tflops: Some(5000.0),
        int8_tops: Some(165.0),
        fp4_tflops: Some(15000.0),
        memory_gib: 284_208.0 * MIB / GIB,
        memory_bw_tbps: 8.0,
        interconnect_gbps: 900.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: NVLINK_C2C_GBPS,
        gpus_per_node: NVL72_GPUS,
        network_gbps: Some(100.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(1400.0),
        idle_w: Some(idle_w(1400.0)),
        source: "NVIDIA GB300 NVL72 datasheet, per-GPU share of the 72-GPU rack (sparse BF16/FP8/\
                 INT8 halved; FP4 dense 1,080 PFLOPS / 72; 8 TB/s HBM3e; NVLink 5 1.8 TB/s in one \
                 72-GPU domain; NVLink-C2C to Grace; ConnectX-8 800 Gb/s per GPU)"
            .into(),
    }
}

fn h20() -> HardwareSpec {
    HardwareSpec {
        name: "H20".into(),
        bf16_tflops: 148.0,
        fp8_tflops: Some(296.0),
        int8_tops: Some(296.0),
        fp4_tflops: None,
        memory_gib: 96.0,
        memory_bw_tbps: 4.0,
        interconnect_gbps: 450.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: Some(DGX_H100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_H100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(400.0),
        idle_w: Some(idle_w(400.0)),
        source: "NVIDIA H20 product specification (dense figures; 96 GB HBM3 at 4.0 TB/s; \
                 NVLink 4 900 GB/s bidirectional and NVSwitch as HGX H100, whose measured \
                 all-reduce it takes; PCIe Gen5 x16)"
            .into(),
    }
}

fn mi325x() -> HardwareSpec {
    HardwareSpec {
        name: "MI325X".into(),
        bf16_tflops: 1307.4,
        fp8_tflops: Some(2614.9),
        int8_tops: Some(2614.9),
        fp4_tflops: None,
        memory_gib: 256.0,
        memory_bw_tbps: 6.0,
        interconnect_gbps: 448.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(1000.0),
        idle_w: Some(idle_w(1000.0)),
        source:
            "AMD Instinct MI325X accelerator datasheet (dense figures; 256 GB HBM3E at 6 TB/s; \
                 7 Infinity Fabric links, 896 GB/s aggregate)"
                .into(),
    }
}

fn mi355x() -> HardwareSpec {
    HardwareSpec {
        name: "MI355X".into(),
        bf16_tflops: 2516.6,
        fp8_tflops: Some(5033.2),
        int8_tops: Some(5033.2),
        fp4_tflops: Some(10066.3),
        memory_gib: 288.0,
        memory_bw_tbps: 8.0,
        interconnect_gbps: 537.6,
        interconnect_latency_us: NVLINK_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
        tdp_w: Some(1400.0),
        idle_w: Some(idle_w(1400.0)),
        source: "AMD Instinct MI355X accelerator datasheet (dense figures; MXFP4 10.1 PFLOPS; \
                 288 GB HBM3E at 8 TB/s; 7 Infinity Fabric links of 153.6 GB/s, 1,075 GB/s \
                 aggregate)"
            .into(),
    }
}

fn rtx_pro_6000() -> HardwareSpec {
    HardwareSpec {
        name: "RTX-PRO-6000".into(),
        bf16_tflops: 467.8,
        fp8_tflops: Some(935.6),
        int8_tops: Some(935.6),
        fp4_tflops: Some(1871.2),
        memory_gib: 96.0,
        memory_bw_tbps: 1.597,
        interconnect_gbps: 64.0,
        interconnect_latency_us: PCIE_P2P_LATENCY_US,
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: None,
        network_latency_us: None,
        tdp_w: Some(600.0),
        idle_w: Some(idle_w(600.0)),
        source: "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet (96 GB GDDR7 at 1.6 TB/s; \
                 no NVLink, PCIe Gen5 x16; dense tensor rates at the 2,430 MHz boost clock, FP4 \
                 4 PFLOPS sparse halved)"
            .into(),
    }
}

pub const HARDWARE: &[HardwarePreset] = &[
    HardwarePreset {
        key: "h100-sxm",
        aliases: &["h100", "h100-sxm5"],
        spec: h100_sxm,
    },
    HardwarePreset {
        key: "h200",
        aliases: &["h200-sxm"],
        spec: h200,
    },
    HardwarePreset {
        key: "a100-80gb",
        aliases: &["a100"],
        spec: a100_80gb,
    },
    HardwarePreset {
        key: "a100-40gb",
        aliases: &[],
        spec: a100_40gb,
    },
    HardwarePreset {
        key: "l40s",
        aliases: &[],
        spec: l40s,
    },
    HardwarePreset {
        key: "l4",
        aliases: &[],
        spec: l4,
    },
    HardwarePreset {
        key: "b200",
        aliases: &[],
        spec: b200,
    },
    HardwarePreset {
        key: "mi300x",
        aliases: &[],
        spec: mi300x,
    },
    HardwarePreset {
        key: "b300",
        aliases: &["b300-sxm", "hgx-b300"],
        spec: b300,
    },
    HardwarePreset {
        key: "gb200",
        aliases: &["gb200-nvl72"],
        spec: gb200,
    },
    HardwarePreset {
        key: "gb300",
        aliases: &["gb300-nvl72"],
        spec: gb300,
    },
    HardwarePreset {
        key: "h20",
        aliases: &[],
        spec: h20,
    },
    HardwarePreset {
        key: "mi325x",
        aliases: &[],
        spec: mi325x,
    },
    HardwarePreset {
        key: "mi355x",
        aliases: &[],
        spec: mi355x,
    },
    HardwarePreset {
        key: "rtx-pro-6000",
        aliases: &["rtx-pro-6000-server", "rtx-pro-6000-blackwell"],
        spec: rtx_pro_6000,
    },
];

/// Looks a hardware preset up by key or alias, case-insensitively.
pub fn hardware(name: &str) -> Option<HardwareSpec> {
    let n = name.to_ascii_lowercase();
    HARDWARE
        .iter()
        .find(|p| p.key == n || p.aliases.contains(&n.as_str()))
        .map(|p| (p.spec)())
}

pub fn hardware_keys() -> Vec<&'static str> {
    HARDWARE.iter().map(|p| p.key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn todays_chips_carry_their_datasheet_figures() {
        // (preset, dense BF16, FP8, FP4 TFLOP/s, GPUs per NVLink domain, link GB/s per direction),
        // cross-checked against aiconfigurator's system files where they exist
        // (b200_sxm, b300_sxm, gb200, gb300, rtx_pro_6000_server).
        type Row = (&'static str, f64, Option<f64>, Option<f64>, u32, f64);
        let rows: [Row; 8] = [
            ("b200", 2250.0, Some(4500.0), Some(9000.0), 8, 900.0),
            ("b300", 2250.0, Some(4500.0), Some(13500.0), 8, 900.0),
            ("gb200", 2500.0, Some(5000.0), Some(10000.0), 72, 900.0),
            ("gb300", 2500.0, Some(5000.0), Some(15000.0), 72, 900.0),
            ("h20", 148.0, Some(296.0), None, 8, 450.0),
            ("mi325x", 1307.4, Some(2614.9), None, 8, 448.0),
            ("mi355x", 2516.6, Some(5033.2), Some(10066.3), 8, 537.6),
            ("rtx-pro-6000", 467.8, Some(935.6), Some(1871.2), 8, 64.0),
        ];
        for (key, bf16, fp8, fp4, node, link) in rows {
            let h = hardware(key).unwrap();
            assert_eq!(
                (
                    h.bf16_tflops,
                    h.fp8_tflops,
                    h.fp4_tflops,
                    h.gpus_per_node,
                    h.interconnect_gbps
                ),
                (bf16, fp8, fp4, node, link),
                "{key}"
            );
            assert!(!h.source.is_empty());
            // FP4 doubles FP8 where both are dense Blackwell/CDNA4 figures,
            // triples it on Blackwell Ultra (to the datasheets' rounding).
            if let (Some(f8), Some(f4)) = (h.fp8_tflops, h.fp4_tflops) {
                assert!((1.999..=3.0).contains(&(f4 / f8)), "{key}: {f4} / {f8}");
            }
        }
        // nvidia-smi capacities: 275040, 189471 and 284208 MiB.
        assert!((hardware("b300").unwrap().memory_gib - 268.59375).abs() < 1e-9);
        assert!((hardware("gb200").unwrap().memory_gib - 185.030_273_437_5).abs() < 1e-9);
        assert!((hardware("gb300").unwrap().memory_gib - 277.546_875).abs() < 1e-9);
        // No NVLink on the PCIe card: its "interconnect" is the host link.
        let rtx = hardware("rtx-pro-6000-server").unwrap();
        assert_eq!(rtx.interconnect_gbps, rtx.pcie_gbps);
        assert_eq!(rtx.network_gbps, None);
        // The earlier presets have no FP4 units (Hopper, Ampere, Ada, CDNA3).
        for key in ["h100", "h200", "a100", "a100-40gb", "l40s", "l4", "mi300x"] {
            assert_eq!(hardware(key).unwrap().fp4_tflops, None, "{key}");
        }
    }
}
