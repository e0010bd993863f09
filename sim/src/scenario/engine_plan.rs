//! One replica's serving engine as its scheduler runs it: the batch limits,
//! the batch policy, preemption, host swap, the prefix cache, speculative
//! decoding, the receive interval and whether decode-only stretches advance
//! in closed form, resolved once from `[engine]` (with a pool's overrides)
//! so that a [`crate::replica::Replica`] is built from it and reads no
//! configuration.

use super::{BatchPolicyKind, EngineCfg, PreemptionMode};

/// What a replica's scheduler is built from (names follow vLLM's engine
/// arguments, as `[engine]`'s keys).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnginePlan {
    /// Tokens per KV block.
    pub block_size: u32,
    /// Sequences in one iteration's batch (`max_num_seqs`).
    pub max_num_seqs: u32,
    /// Tokens processed in one iteration (`max_num_batched_tokens`).
    pub max_batched_tokens: u32,
    /// How each iteration's batch is formed (`replica::policy`).
    pub policy: BatchPolicyKind,
    /// What happens to a sequence evicted for lack of KV blocks.
    pub preemption: PreemptionMode,
    /// Host memory per GPU for swapped-out KV blocks, GiB.
    pub swap_space_gib: f64,
    /// Shared prompt prefixes keep their KV blocks (`kv::prefix_cache`),
    /// with `pinned_prefix_blocks` of them held against eviction.
    pub prefix_caching: bool,
    pub pinned_prefix_blocks: u64,
    /// Speculative decoding, off when absent.
    pub speculation: Option<SpeculationPlan>,
    /// Decode steps between two receives of newly arrived requests (SGLang's
    /// `--scheduler-recv-interval`; at least 1).
    pub recv_interval: u32,
    /// Decode-only iterations advance in closed form
    /// (`replica::decode_run`); the outputs are the same either way.
    pub decode_runs: bool,
}

/// What a replica's speculative decoding draws from: the draft length and
/// the per-token acceptance rate (Leviathan et al., ICML 2023). The draft's
/// cost is the cost model's business.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpeculationPlan {
    /// Draft length k.
    pub num_draft_tokens: u32,
    /// Per-token acceptance rate α in [0, 1).
    pub acceptance_rate: f64,
}

impl EnginePlan {
    /// The engine `[engine]` describes, its decode runs as `decode_runs`
    /// says.
    pub fn resolve(e: &EngineCfg, decode_runs: bool) -> EnginePlan {
        EnginePlan {
            block_size: e.block_size,
            max_num_seqs: e.max_num_seqs,
            max_batched_tokens: e.max_batched_tokens,
            policy: e.policy,
            preemption: e.preemption,
            swap_space_gib: e.swap_space_gib,
            prefix_caching: e.prefix_caching,
            pinned_prefix_blocks: e.pinned_prefix_blocks,
            speculation: e.speculative.as_ref().map(|sp| SpeculationPlan {
                num_draft_tokens: sp.num_draft_tokens,
                acceptance_rate: sp.acceptance_rate,
            }),
            recv_interval: e.scheduler_recv_interval.max(1),
            decode_runs,
        }
    }
}

/// A live engine's or the simulated twin's replica, built straight from
/// `[engine]` settings: they step every iteration against a wall clock, so
/// decode runs stay off whatever `decode_runs` says.
impl From<&EngineCfg> for EnginePlan {
    fn from(e: &EngineCfg) -> EnginePlan {
        EnginePlan::resolve(e, false)
    }
}

impl From<&EnginePlan> for EnginePlan {
    fn from(p: &EnginePlan) -> EnginePlan {
        *p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Overrides, Scenario};

    const POOLS: &str = r#"
name = "e"
[horizon]
requests = 10
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_num_seqs = 64
speculative = { num_draft_tokens = 3, acceptance_rate = 0.6, draft_cost_fraction = 0.1 }
[workload]
arrival = { process = "poisson", rate = 1 }
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
[[fleet.pools]]
name = "a"
replicas = 1
[[fleet.pools]]
name = "b"
replicas = 1
engine = { max_num_seqs = 8, scheduler_recv_interval = 4 }
"#;

    fn resolve(step_by_step: bool) -> Scenario {
        let mut t: toml::Table = POOLS.parse().unwrap();
        Overrides {
            step_by_step,
            ..Overrides::default()
        }
        .apply(&mut t)
        .unwrap();
        Scenario::from_table(t, "e.toml").unwrap()
    }

    #[test]
    fn each_pool_resolves_its_own_engine_with_decode_runs_in_it() {
        let s = resolve(false);
        let (a, b) = (
            &s.pools[0].replica.engine_plan,
            &s.pools[1].replica.engine_plan,
        );
        assert_eq!((a.max_num_seqs, b.max_num_seqs), (64, 8));
        assert_eq!((a.recv_interval, b.recv_interval), (1, 4));
        let sp = SpeculationPlan {
            num_draft_tokens: 3,
            acceptance_rate: 0.6,
        };
        assert_eq!((a.speculation, b.speculation), (Some(sp), Some(sp)));
        assert!(a.decode_runs && b.decode_runs);
        // `--step-by-step` reaches every pool, the one with its own
        // `engine` table too.
        let s = resolve(true);
        assert!(s.pools.iter().all(|p| !p.replica.engine_plan.decode_runs));
        assert!(!s.replica_plan().engine_plan.decode_runs);
    }

    #[test]
    fn engine_settings_given_straight_step_every_iteration() {
        let e = EngineCfg::default();
        assert!(e.decode_runs);
        let p = EnginePlan::from(&e);
        assert!(!p.decode_runs);
        assert_eq!(p, EnginePlan::resolve(&e, false));
    }
}
