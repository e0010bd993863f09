//! The `[fleet]` table's routing settings: how often replicas report their
//! load to the router, and the parameters of the routers that take any.
//! (`FleetCfg` itself lives in `scenario/mod.rs`; these are its sub-tables.)

use serde::{Deserialize, Serialize};

/// `[fleet.prefix_affinity]`: the cache-aware router's knobs, named and
/// defaulted after SGLang's router (`--cache-threshold 0.3`,
/// `--balance-abs-threshold 64`, `--balance-rel-threshold 1.5`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixAffinityCfg {
    /// Smallest matched fraction of the prompt's blocks that sends a
    /// request to its best-matching replica; below it the request goes to
    /// the replica whose index holds the least (the most room to cache it).
    #[serde(default = "default_cache_threshold")]
    pub cache_threshold: f64,
    /// The chosen replica is abandoned for the least-loaded one when its
    /// outstanding requests exceed the least-loaded replica's by more than
    /// this many…
    #[serde(default = "default_balance_abs")]
    pub balance_abs_threshold: u32,
    /// …and by more than this factor.
    #[serde(default = "default_balance_rel")]
    pub balance_rel_threshold: f64,
    /// Apply the load bound at all (off: pure cache affinity, which herds
    /// onto a hot prefix's replica).
    #[serde(default = "yes")]
    pub load_bound: bool,
    /// Prompt tokens the router remembers per replica before it forgets the
    /// least recently routed blocks (llm-d's `lruCapacityPerServer`, in
    /// tokens). Default: one replica's KV cache capacity.
    #[serde(default)]
    pub index_tokens_per_replica: Option<u64>,
}

fn default_cache_threshold() -> f64 {
    0.3
}
fn default_balance_abs() -> u32 {
    64
}
fn default_balance_rel() -> f64 {
    1.5
}
use crate::config::yes;

impl Default for PrefixAffinityCfg {
    fn default() -> Self {
        PrefixAffinityCfg {
            cache_threshold: default_cache_threshold(),
            balance_abs_threshold: default_balance_abs(),
            balance_rel_threshold: default_balance_rel(),
            load_bound: true,
            index_tokens_per_replica: None,
        }
    }
}

/// `[fleet.weighted]`: weights of the llm-d-style scorer, each applied to a
/// score in [0, 1] (higher is better).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedCfg {
    /// Matched fraction of the prompt's blocks (llm-d prefix-cache scorer).
    #[serde(default = "unit")]
    pub prefix: f64,
    /// Shortness of the queue, min-max normalised over replicas (llm-d queue scorer).
    #[serde(default = "unit")]
    pub queue: f64,
    /// Free fraction of the KV cache (llm-d kv-cache-utilization scorer).
    #[serde(default = "unit")]
    pub kv: f64,
}

fn unit() -> f64 {
    1.0
}

impl Default for WeightedCfg {
    fn default() -> Self {
        WeightedCfg {
            prefix: 1.0,
            queue: 1.0,
            kv: 1.0,
        }
    }
}

/// `[fleet.session_affinity]`: the consistent-hash ring of the
/// session-affinity router.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionAffinityCfg {
    /// Points per replica on the ring (Envoy's ring hash and ketama use
    /// 100–160); more points even out the share of each replica.
    #[serde(default = "default_vnodes")]
    pub virtual_nodes: u32,
    /// Requests without a session id (open-loop traces) are keyed by their
    /// first this-many prompt tokens, as gateways hash a prompt prefix when
    /// no session header is set.
    #[serde(default = "default_key_tokens")]
    pub key_prefix_tokens: u32,
}

fn default_vnodes() -> u32 {
    160
}
fn default_key_tokens() -> u32 {
    1024
}

impl Default for SessionAffinityCfg {
    fn default() -> Self {
        SessionAffinityCfg {
            virtual_nodes: default_vnodes(),
            key_prefix_tokens: default_key_tokens(),
        }
    }
}

/// Checks the routing settings; errors carry the dotted key path.
pub(super) fn validate_routing(
    report_interval_s: f64,
    pa: &PrefixAffinityCfg,
    w: &WeightedCfg,
    sa: &SessionAffinityCfg,
) -> Result<(), (String, String)> {
    let err = |k: &str, m: String| Err((format!("fleet.{k}"), m));
    // Each report is an event: a positive interval below a millisecond
    // makes a run spin through billions of them.
    let max = super::ranges::MAX_SECONDS;
    let ok = report_interval_s == 0.0
        || (report_interval_s.is_finite() && (1e-3..=max).contains(&report_interval_s));
    if !ok {
        return err(
            "report_interval_s",
            format!(
                "must be 0 (the router sees every change at once) or a number of seconds in \
                 [1e-3, {max:e}], got {}",
                super::ranges::num(report_interval_s)
            ),
        );
    }
    if !(0.0..=1.0).contains(&pa.cache_threshold) {
        return err(
            "prefix_affinity.cache_threshold",
            format!("must be a fraction in [0, 1], got {}", pa.cache_threshold),
        );
    }
    if !(pa.balance_rel_threshold.is_finite() && pa.balance_rel_threshold >= 1.0) {
        return err(
            "prefix_affinity.balance_rel_threshold",
            format!("must be a factor ≥ 1, got {}", pa.balance_rel_threshold),
        );
    }
    if pa.index_tokens_per_replica == Some(0) {
        return err(
            "prefix_affinity.index_tokens_per_replica",
            "must be at least 1 token".into(),
        );
    }
    for (k, v) in [("prefix", w.prefix), ("queue", w.queue), ("kv", w.kv)] {
        if !(v.is_finite() && v >= 0.0) {
            return err(
                &format!("weighted.{k}"),
                format!("must be a weight ≥ 0, got {v}"),
            );
        }
    }
    if w.prefix + w.queue + w.kv <= 0.0 {
        return err("weighted", "at least one weight must be positive".into());
    }
    if !(1..=10_000).contains(&sa.virtual_nodes) {
        return err(
            "session_affinity.virtual_nodes",
            format!("must be 1 to 10000, got {}", sa.virtual_nodes),
        );
    }
    if sa.key_prefix_tokens == 0 {
        return err(
            "session_affinity.key_prefix_tokens",
            "must be at least 1 token".into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::scenario::{RouterKind, Scenario};

    const BASE: &str = r#"
name = "r"
[horizon]
requests = 10
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
"#;

    fn with(fleet: &str) -> Result<Scenario, crate::scenario::ScenarioError> {
        Scenario::from_toml_str(&format!("{BASE}[fleet]\nreplicas = 2\n{fleet}\n"), "r.toml")
    }

    #[test]
    fn routing_tables_parse_with_defaults() {
        let s = with("router = \"prefix-affinity\"\n[fleet.prefix_affinity]\nload_bound = false")
            .unwrap();
        let f = &s.file.fleet;
        assert_eq!(f.router, RouterKind::PrefixAffinity);
        assert!(!f.prefix_affinity.load_bound);
        assert_eq!(f.prefix_affinity.balance_abs_threshold, 64);
        assert_eq!(f.session_affinity.virtual_nodes, 160);
        assert_eq!(f.report_interval_s, 0.0);
        for name in [
            "round-robin",
            "least-outstanding",
            "random",
            "least-kv",
            "power-of-two",
            "session-affinity",
            "prefix-affinity",
            "weighted",
        ] {
            let s = with(&format!("router = \"{name}\"")).unwrap();
            assert_eq!(s.file.fleet.router.name(), name);
        }
    }

    #[test]
    fn bad_routing_values_name_their_key() {
        let cases = [
            ("report_interval_s = -1", "fleet.report_interval_s"),
            (
                "[fleet.prefix_affinity]\ncache_threshold = 1.5",
                "fleet.prefix_affinity.cache_threshold",
            ),
            (
                "[fleet.prefix_affinity]\nbalance_rel_threshold = 0.5",
                "fleet.prefix_affinity.balance_rel_threshold",
            ),
            (
                "[fleet.prefix_affinity]\nindex_tokens_per_replica = 0",
                "fleet.prefix_affinity.index_tokens_per_replica",
            ),
            ("[fleet.weighted]\nqueue = -2", "fleet.weighted.queue"),
            (
                "[fleet.weighted]\nprefix = 0\nqueue = 0\nkv = 0",
                "fleet.weighted",
            ),
            (
                "[fleet.session_affinity]\nvirtual_nodes = 0",
                "fleet.session_affinity.virtual_nodes",
            ),
        ];
        for (text, key) in cases {
            let e = with(text).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
            assert!(e.to_string().contains("r.toml"), "{e}");
        }
        let e = with("router = \"fastest\"").unwrap_err();
        assert!(e.to_string().contains("prefix-affinity"), "{e}");
        let e = with("[fleet.prefix_affinity]\nbalance = 3").unwrap_err();
        assert!(e.to_string().contains("balance"), "{e}");
    }
}
