//! `[[fleet.pools]]` and `[fleet.kv_transfer]`: a fleet made of pools of
//! replicas, each with one configuration and one role, and the link that
//! carries KV caches from prefill to decode pools (disaggregated serving:
//! Splitwise, ISCA'24; DistServe, OSDI'24; Mooncake, FAST'25). Resolution of
//! a pool into a runnable configuration lives in `pool_plan`.

use super::RouterKind;
use serde::{Deserialize, Serialize};

/// What a pool's replicas do with a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolRole {
    /// Prefill and decode on the same replica (today's serving).
    #[default]
    Colocated,
    /// Computes prompts only; the first token comes from here, then the KV
    /// cache moves to a decode replica.
    Prefill,
    /// Decodes requests whose KV arrived from a prefill replica (and
    /// prefills short or mostly cached prompts locally, see
    /// `fleet.kv_transfer.local_prefill_max_tokens`).
    Decode,
}

impl TransferMode {
    pub fn name(self) -> &'static str {
        match self {
            TransferMode::Whole => "whole",
            TransferMode::LayerWise => "layer-wise",
        }
    }
}

impl PoolRole {
    pub fn name(self) -> &'static str {
        match self {
            PoolRole::Colocated => "colocated",
            PoolRole::Prefill => "prefill",
            PoolRole::Decode => "decode",
        }
    }
}

/// One `[[fleet.pools]]` entry: `replicas` replicas sharing one hardware
/// preset, parallelism and engine settings. Keys left out inherit the
/// scenario's `[hardware]`, `[fleet]` and `[engine]` values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolCfg {
    pub name: String,
    #[serde(default)]
    pub role: PoolRole,
    pub replicas: u32,
    /// A hardware preset name (default: the scenario's `[hardware]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_parallel: Option<u32>,
    /// The pool's own layout (default: the `[fleet]` keys of the same
    /// names), so a prefill pool and a decode pool each take theirs, e.g.
    /// prefill TP 8 with EP 8 and decode DP attention 32 × EP 32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_parallel: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_parallel: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_data_parallel: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eplb: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_redundant_experts: Option<u32>,
    /// The router of a prefill or decode pool (default: `fleet.router`).
    /// Colocated pools share `fleet.router`, which sees all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterKind>,
    /// `[engine]` keys this pool sets differently (e.g. `max_num_seqs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<toml::Table>,
    /// `[fleet.pools.lifecycle]`: this pool's cold-start figures and standby
    /// pool, in place of the scenario's `[lifecycle]` (which otherwise
    /// applies to each pool on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<crate::scenario::lifecycle_cfg::LifecycleCfg>,
    /// `[fleet.pools.autoscale]`: this pool's autoscaler, in place of the
    /// scenario's `[autoscale]` (which otherwise scales each pool on its
    /// own, with `replicas` as the pool's starting count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<crate::scenario::lifecycle_cfg::AutoscaleCfg>,
    /// The `[[fleet.regions]]` entry this pool's replicas run in (see
    /// `region`); required once the fleet has regions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// How a KV cache crosses the link: all of it once the prefill ends, or
/// layer by layer while the prefill computes (DistServe §4.2 and Mooncake's
/// layer-wise transfer overlap the copy with compute).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransferMode {
    #[default]
    Whole,
    LayerWise,
}

/// `[fleet.kv_transfer]`: each prefill replica's link to the decode pool
/// (its NICs or NVLink), a FIFO resource, and Dynamo's conditional
/// disaggregation threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvTransferCfg {
    /// Link bandwidth per prefill replica, GB/s (10^9 bytes per second).
    /// NVLink-class: 450; 8×400 Gb/s RDMA: 400; one 200 Gb/s NIC: 25.
    #[serde(default = "default_bandwidth")]
    pub bandwidth_gbyte_s: f64,
    /// Fixed cost of one transfer (connection, descriptor exchange), µs.
    #[serde(default = "default_latency")]
    pub latency_us: f64,
    #[serde(default)]
    pub mode: TransferMode,
    /// Dynamo's conditional disaggregation (`max_local_prefill_length`): a
    /// prompt whose tokens not already in the chosen decode replica's
    /// prefix cache number at most this prefills there, with no transfer.
    /// 0: every request with a prefill pool goes through it.
    #[serde(default)]
    pub local_prefill_max_tokens: u32,
}

fn default_bandwidth() -> f64 {
    50.0
}
fn default_latency() -> f64 {
    20.0
}

impl Default for KvTransferCfg {
    fn default() -> Self {
        KvTransferCfg {
            bandwidth_gbyte_s: default_bandwidth(),
            latency_us: default_latency(),
            mode: TransferMode::Whole,
            local_prefill_max_tokens: 0,
        }
    }
}

/// Bandwidth of a KV link, GB/s: a megabyte a second to a thousand times
/// NVLink; beyond them a transfer's time leaves the clock or rounds to 0.
pub const LINK_GBYTE_S: (f64, f64) = (1e-3, 1e6);

/// Why `[fleet.kv_transfer]` is refused in a fleet without a prefill pool.
pub const KV_TRANSFER_WITHOUT_PREFILL: &str = "applies only to a fleet with a prefill and a \
     decode pool ([[fleet.pools]] with role = \"prefill\" and \"decode\"); this fleet has none: \
     remove the table or add the pools";

/// Checks of the raw `[fleet]` table that its parsed form cannot make: a
/// `[fleet.kv_transfer]` table given (even with default values) in a fleet
/// without a prefill pool does nothing, and `pools = []` would read as no
/// pools at all.
pub(super) fn check_table(table: &toml::Table) -> Result<(), (String, String)> {
    let Some(fleet) = table.get("fleet").and_then(|f| f.as_table()) else {
        return Ok(());
    };
    let pools = fleet.get("pools").and_then(|p| p.as_array());
    if pools.is_some_and(|p| p.is_empty()) {
        return Err((
            "fleet.pools".into(),
            "is empty: give at least one [[fleet.pools]] entry, or leave the key out for one \
             colocated pool of fleet.replicas replicas"
                .into(),
        ));
    }
    let prefill = pools.is_some_and(|p| {
        p.iter()
            .any(|e| e.get("role").and_then(|r| r.as_str()) == Some(PoolRole::Prefill.name()))
    });
    if fleet.contains_key("kv_transfer") && !prefill {
        return Err((
            "fleet.kv_transfer".into(),
            KV_TRANSFER_WITHOUT_PREFILL.into(),
        ));
    }
    Ok(())
}

/// Checks the pools and the link; errors carry the dotted key path.
pub(super) fn validate_pools(
    replicas: u32,
    pools: &[PoolCfg],
    kt: &KvTransferCfg,
) -> Result<(), (String, String)> {
    let err = |k: String, m: String| Err((k, m));
    let (lo, hi) = LINK_GBYTE_S;
    if !(kt.bandwidth_gbyte_s.is_finite() && (lo..=hi).contains(&kt.bandwidth_gbyte_s)) {
        return err(
            "fleet.kv_transfer.bandwidth_gbyte_s".into(),
            format!(
                "must be in [{lo:e}, {hi:e}] GB/s, got {}",
                super::ranges::num(kt.bandwidth_gbyte_s)
            ),
        );
    }
    let max_us = super::ranges::MAX_LATENCY_US;
    if !(kt.latency_us.is_finite() && (0.0..=max_us).contains(&kt.latency_us)) {
        return err(
            "fleet.kv_transfer.latency_us".into(),
            format!(
                "must be in [0, {max_us:e}] µs, got {}",
                super::ranges::num(kt.latency_us)
            ),
        );
    }
    if !pools.iter().any(|p| p.role == PoolRole::Prefill) && *kt != KvTransferCfg::default() {
        return err(
            "fleet.kv_transfer".into(),
            KV_TRANSFER_WITHOUT_PREFILL.into(),
        );
    }
    if pools.is_empty() {
        return Ok(());
    }
    let total: u64 = pools.iter().map(|p| p.replicas as u64).sum();
    if replicas != 1 && replicas as u64 != total {
        return err(
            "fleet.replicas".into(),
            format!(
                "leave it out with [[fleet.pools]]: the pools' replicas ({total}) make the fleet, got {replicas}"
            ),
        );
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in pools.iter().enumerate() {
        let key = |k: &str| format!("fleet.pools[{i}].{k}");
        if p.name.is_empty() || names.contains(&p.name.as_str()) {
            return err(
                key("name"),
                format!(
                    "must be a non-empty name no other pool has, got {:?}",
                    p.name
                ),
            );
        }
        names.push(&p.name);
        if !(1..=100_000).contains(&p.replicas) {
            return err(
                key("replicas"),
                format!("must be 1 to 100000, got {}", p.replicas),
            );
        }
        for (k, v) in [
            ("tensor_parallel", p.tensor_parallel),
            ("pipeline_parallel", p.pipeline_parallel),
            ("expert_parallel", p.expert_parallel),
            ("attention_data_parallel", p.attention_data_parallel),
        ] {
            if v == Some(0) {
                return err(key(k), "must be at least 1".into());
            }
        }
        if p.router.is_some() && p.role == PoolRole::Colocated {
            return err(
                key("router"),
                "colocated pools share `fleet.router` (one router sees them all); set it there"
                    .into(),
            );
        }
    }
    let count = |r: PoolRole| pools.iter().filter(|p| p.role == r).count();
    let (pre, dec) = (count(PoolRole::Prefill), count(PoolRole::Decode));
    if pre > 1 || dec > 1 {
        return err(
            "fleet.pools".into(),
            format!("at most one prefill and one decode pool, got {pre} and {dec}"),
        );
    }
    if pre != dec {
        return err(
            "fleet.pools".into(),
            "a prefill pool needs a decode pool and the other way round".into(),
        );
    }
    if pre == 1 && count(PoolRole::Colocated) > 0 {
        return err(
            "fleet.pools".into(),
            "mixing colocated pools with a prefill/decode pair is not modelled; use one or the other"
                .into(),
        );
    }
    Ok(())
}
