//! Bounds on an option before it is simulated, from its resolved scenario
//! and cost model alone, as analytic planners (NVIDIA's aiconfigurator,
//! LLM-Viewer's roofline analysis) price a layout without running it:
//!
//! * **Memory fit**: an option whose model does not fit is refused by
//!   resolution, before this module sees it.
//! * **A latency floor at zero load**: a lone request of the shortest
//!   prompt waits at least one prefill of that prompt for its first token,
//!   and every later token at least one decode step of one sequence (over
//!   the tokens a speculative step can accept). A floor above the `[slo]`
//!   TTFT or TPOT target means no request meets it at any load, so the
//!   option is pruned without a run.
//! * **A throughput ceiling**: a replica decodes at most `b` sequences a
//!   step (`b` up to `engine.max_num_seqs`, and up to what its KV cache
//!   holds at the shortest context), each step taking at least what the
//!   cost model charges for `b` decodes at that context, and computes at
//!   most `engine.max_batched_tokens` prompt tokens a step, each such step
//!   taking at least a prefill of that many tokens with no attention,
//!   spread over as many sequences as the batch allows. Its
//!   requests per second are at most the tokens it can produce over the
//!   tokens a mean request needs, on the side (prompt or answer) that
//!   binds. A unit of pools adds its colocated replicas' ceilings and
//!   takes the least of its prefill and decode pools'.
//!
//! The ceiling gives the fewest replicas (or units) that could serve the
//! demand, hence the least an option can cost: the search simulates only
//! options whose least cost could beat the cheapest one found so far. The
//! bound assumes a cost that does not fall when a batch grows or its
//! context lengthens, which the roofline and measured profiles both hold.
//! A probe judges a finite run, whose requests' mean lengths differ from
//! the distribution's by sampling and whose load verdict cannot tell a
//! backlog growing by a few percent from noise, so the count is taken at
//! [`CEILING_MARGIN`] times the ceiling. Workloads whose token work the
//! configuration does not state (traces, length pairs, shared prefixes,
//! conversations, parallel samples, tenants) and fleets whose replica count
//! moves (autoscaling) or whose replicas overlap micro-batches (pipeline
//! parallelism) get no count bound: they are always simulated.

use crate::cost::{BatchShape, CostModel};
use crate::scenario::{LengthDist, PoolRole, ReplicaPlan};
use crate::Scenario;

/// The ceiling's allowance for a finite run (see the module's doc): a
/// probe is taken to possibly pass at up to this many times the ceiling.
pub const CEILING_MARGIN: f64 = 1.25;

/// How the reason of an option pruned by its latency floor begins.
pub const LATENCY_FLOOR: &str = "its latency floor at zero load misses the SLOs";

/// What the bounds say about one option.
#[derive(Clone, Debug, PartialEq)]
pub enum OptionBound {
    /// No request can meet the SLOs at any load: why, in words.
    Unservable(String),
    /// At least `fewest` replicas (or units) are needed for the demand:
    /// one sustains at most `ceiling_rps`.
    Count { fewest: u32, ceiling_rps: f64 },
    /// The workload or fleet is outside what the bounds price.
    Unbounded,
}

/// The bounds of the resolved option `s` at the demand `rate` (requests/s,
/// headroom included).
pub fn bound(s: &Scenario, rate: f64) -> OptionBound {
    let w = s.workload();
    let (Some(prompt), Some(output)) = (&w.prompt_tokens, &w.output_tokens) else {
        return OptionBound::Unbounded;
    };
    let least_prompt = least(prompt);
    let least_output = least(output);
    let pools: Vec<(PoolRole, u32, &ReplicaPlan)> = if !s.declares_pools() {
        vec![(PoolRole::Colocated, 1, s.replica_plan())]
    } else {
        s.pools
            .iter()
            .map(|p| (p.role, p.replicas, &p.replica))
            .collect()
    };
    if let Some(why) = latency_floor(s, &pools, least_prompt, least_output) {
        return OptionBound::Unservable(why);
    }
    let plain = w.trace.is_none()
        && w.length_pairs.is_none()
        && w.shared_prefix.is_none()
        && w.conversation.is_none()
        && w.n.is_none()
        && !s.has_tenants()
        && s.autoscale().is_none()
        && pools.iter().all(|(_, _, r)| r.parallel.pipeline <= 1);
    let (Some(mean_prompt), Some(mean_output)) = (prompt.mean(), output.mean()) else {
        return OptionBound::Unbounded;
    };
    if !plain {
        return OptionBound::Unbounded;
    }
    // The first answer token comes with the prefill; the rest are decoded.
    let decoded = (mean_output - 1.0).max(0.0);
    let (mut colocated, mut prefill, mut decode) = (0.0, 0.0, 0.0);
    let (mut has_prefill, mut has_decode) = (false, false);
    for &(role, n, r) in &pools {
        let c = Ceiling::of(r, least_prompt);
        let n = n as f64;
        match role {
            PoolRole::Colocated => {
                colocated += n / (mean_prompt / c.prefill_tps).max(decoded / c.decode_tps)
            }
            PoolRole::Prefill => {
                has_prefill = true;
                prefill += n * c.prefill_tps / mean_prompt;
            }
            PoolRole::Decode => {
                has_decode = true;
                decode += n * c.decode_tps / decoded;
            }
        }
    }
    let split = match (has_prefill, has_decode) {
        (true, true) => prefill.min(decode),
        _ => 0.0,
    };
    let ceiling_rps = colocated + split;
    if !(ceiling_rps.is_finite() && ceiling_rps > 0.0) {
        return OptionBound::Unbounded;
    }
    let fewest = (rate / (ceiling_rps * CEILING_MARGIN)).ceil();
    OptionBound::Count {
        fewest: fewest.clamp(1.0, u32::MAX as f64) as u32,
        ceiling_rps,
    }
}

/// The shortest length a distribution draws (its `min`, at least 1).
fn least(d: &LengthDist) -> u64 {
    let m = match d {
        LengthDist::Fixed { value } => Some(*value),
        LengthDist::Uniform { min, .. } => Some(*min),
        LengthDist::Normal { min, .. }
        | LengthDist::Lognormal { min, .. }
        | LengthDist::Zipf { min, .. }
        | LengthDist::Empirical { min, .. } => *min,
    };
    u64::from(m.unwrap_or(1).max(1))
}

fn secs(cost: &dyn CostModel, b: &BatchShape) -> f64 {
    cost.iteration_time(b) as f64 / 1e9
}

/// Tokens accepted per decode step at most: one, plus the drafts of a
/// speculative step.
fn tokens_per_step(r: &ReplicaPlan) -> f64 {
    1.0 + r
        .engine
        .speculative
        .as_ref()
        .map_or(0.0, |sp| sp.num_draft_tokens as f64)
}

/// One replica's token rates at best (see the module's doc).
struct Ceiling {
    /// Prompt tokens computed per second.
    prefill_tps: f64,
    /// Answer tokens decoded per second.
    decode_tps: f64,
}

impl Ceiling {
    fn of(r: &ReplicaPlan, least_prompt: u64) -> Ceiling {
        let cost = r.cost_model();
        let e = &r.engine;
        let context = least_prompt + 1;
        let mut most = u64::from(e.max_num_seqs.max(1));
        // A cache of plain full attention holds a whole context per
        // sequence; windows and states hold less, so only then does the
        // cache bound the batch.
        if r.memory.layer_kinds.is_empty() {
            most = most.min((r.memory.kv_tokens / context).max(1));
        }
        let per_step = tokens_per_step(r);
        let decode_tps = doublings(most)
            .map(|b| {
                let mut shape = BatchShape::default();
                for _ in 0..b {
                    shape.add_decode(context);
                }
                b as f64 * per_step / secs(cost.as_ref(), &shape)
            })
            .fold(0.0, f64::max);
        // A step's prompt tokens, spread over as many sequences as the
        // batch allows (data-parallel attention groups each take their
        // share), with no attention: no real step of that many tokens is
        // cheaper.
        let budget = u64::from(e.max_batched_tokens.max(1));
        let seqs = u64::from(e.max_num_seqs.max(1)).min((budget / least_prompt).max(1));
        let prefill_tps = doublings(budget)
            .flat_map(|t| doublings(seqs.min(t)).map(move |k| (t, k)))
            .map(|(t, k)| {
                let shape = BatchShape {
                    prefill_seqs: k as u32,
                    prefill_tokens: t,
                    prefill_kv_tokens: t,
                    ..BatchShape::default()
                };
                t as f64 / secs(cost.as_ref(), &shape)
            })
            .fold(0.0, f64::max);
        Ceiling {
            prefill_tps,
            decode_tps,
        }
    }
}

/// 1, 2, 4, … below `most`, then `most`.
fn doublings(most: u64) -> impl Iterator<Item = u64> {
    std::iter::successors(Some(1u64), move |&b| (b < most).then(|| (b * 2).min(most)))
}

/// Why no request meets the SLOs even alone on a replica, if so: the
/// shortest prompt's prefill above the TTFT target, or one decode step of
/// one sequence (per token it can accept) above the TPOT target, on every
/// pool that does that work.
fn latency_floor(
    s: &Scenario,
    pools: &[(PoolRole, u32, &ReplicaPlan)],
    least_prompt: u64,
    least_output: u64,
) -> Option<String> {
    let slo = s.slo()?;
    let ms = |cost: &dyn CostModel, b: &BatchShape| secs(cost, b) * 1e3;
    let floor = |side: PoolRole| {
        pools
            .iter()
            .filter(|(role, _, _)| *role == side || *role == PoolRole::Colocated)
            .map(|(_, _, r)| {
                let cost = r.cost_model();
                let mut b = BatchShape::default();
                if side == PoolRole::Prefill {
                    b.add_prefill(least_prompt, 0);
                    ms(cost.as_ref(), &b)
                } else {
                    b.add_decode(least_prompt + 1);
                    ms(cost.as_ref(), &b) / tokens_per_step(r)
                }
            })
            .fold(f64::INFINITY, f64::min)
    };
    if let Some(target) = slo.ttft_ms {
        let f = floor(PoolRole::Prefill);
        if f.is_finite() && f > target {
            return Some(format!(
                "{LATENCY_FLOOR}: a lone {least_prompt}-token prompt (the shortest) takes {f:.1} ms to prefill, above the {target} ms TTFT target"
            ));
        }
    }
    // A one-token answer has no time per output token to miss.
    if let (Some(target), true) = (slo.tpot_ms, least_output >= 2) {
        let f = floor(PoolRole::Decode);
        if f.is_finite() && f > target {
            return Some(format!(
                "{LATENCY_FLOOR}: one decode step of a lone sequence takes {f:.2} ms per token, above the {target} ms TPOT target"
            ));
        }
    }
    None
}
