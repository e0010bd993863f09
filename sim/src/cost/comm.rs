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

use crate::catalog::HardwareSpec;

/// Bus bandwidth as a fraction of the link's per-direction datasheet figure
/// where the catalog has no measured all-reduce: nccl-tests report ~80 % for
/// the 1–64 MB messages of tensor-parallel activations.
pub const ALLREDUCE_BW_EFFICIENCY: f64 = 0.8;
/// Start-up latency of an all-reduce over more than two GPUs, as a multiple of
/// the link's small-message latency, where the catalog has no measurement:
/// the measured DGX-H100 ratio (28 µs over 8 µs, rounded).
pub const MULTI_GPU_LATENCY_FACTOR: f64 = 3.5;

/// An all-reduce over one tensor-parallel group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllReduce {
    /// GPUs in the group.
    pub workers: f64,
    /// Fixed start-up time, seconds.
    pub latency_s: f64,
    /// Bus bandwidth, bytes/s.
    pub busbw: f64,
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
        AllReduce {
            workers: workers as f64,
            latency_s: latency_us * 1e-6,
            busbw,
        }
    }

    /// Seconds to all-reduce `bytes` per GPU (0 for one GPU).
    #[inline]
    pub fn secs(&self, bytes: f64) -> f64 {
        if self.workers <= 1.0 {
            return 0.0;
        }
        self.latency_s + 2.0 * (self.workers - 1.0) / self.workers * bytes / self.busbw
    }
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
}
