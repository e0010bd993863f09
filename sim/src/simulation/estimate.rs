//! The fleet's throughput as `servesim check` estimates it from the cost
//! model, before any run: how many requests per second the fleet can serve
//! at the workload's mean lengths, against what the workload offers. A
//! scenario offered far more than its fleet serves runs into an unbounded
//! queue; `check` says so up front.
//!
//! One replica in a steady state decodes a batch of `B` sequences, `B` the
//! smaller of `engine.max_num_seqs` and the sequences its KV cache holds at
//! the mean footprint (the prompt plus half the output, the mean over a
//! sequence's decode). Each decode step of that batch costs `step` (the
//! cost model's iteration at the mean decode context, the prompt plus half
//! the output); a request needs `O` steps' share of the batch, `O·step/B`,
//! plus its prefill, priced as what a prompt of the mean length adds to
//! such a step (chunked prefill rides the decode batch). So one replica
//! serves `1 / (O·step/B + prefill)` requests per second. A disaggregated
//! fleet serves the smaller of its prefill pool (prompts back to back) and
//! its decode pool (the decode batch alone). The estimate leaves out what
//! only a run shows (queueing, preemption, prefix-cache hits), so it is
//! the sustained rate to within some tens of percent, not a forecast of
//! the latency: enough to tell a fleet offered three times what it serves.

use crate::cost::BatchShape;
use crate::replica::speculative::Speculation;
use crate::scenario::{PoolRole, ReplicaPlan, Scenario};
use crate::sig_figs::rate;
use crate::workload::{Context, WorkloadError};

/// Requests of the workload sampled for the mean lengths.
const SAMPLE: usize = 4000;

/// The offered load is called "far above" the estimate from this ratio.
pub const FAR_ABOVE: f64 = 2.0;

/// One group of identical replicas and what each serves.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupEstimate {
    /// "fleet", or the pool's name.
    pub name: String,
    pub role: PoolRole,
    pub replicas: u32,
    /// Sequences decoding at once per replica.
    pub batch: u32,
    /// Sequences the KV cache holds at the mean footprint.
    pub kv_room: u64,
    pub max_num_seqs: u32,
    /// One decode step of the batch, seconds.
    pub step_s: f64,
    /// What one mean prompt adds to an iteration, seconds.
    pub prefill_s: f64,
    /// Requests per second one replica serves.
    pub per_replica_rps: f64,
}

/// The fleet's estimated capacity against the offered load.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityEstimate {
    pub mean_prompt: f64,
    pub mean_output: f64,
    /// Requests per second offered; `None` for a closed loop, whose load
    /// follows the fleet's speed.
    pub offered_rps: Option<f64>,
    pub groups: Vec<GroupEstimate>,
    /// Requests per second the fleet serves.
    pub capacity_rps: f64,
}

impl CapacityEstimate {
    /// Samples the scenario's workload for its mean lengths and prices the
    /// steady state of each replica group with its cost model.
    pub fn of(s: &Scenario, ctx: &Context) -> Result<CapacityEstimate, WorkloadError> {
        let mut src = crate::tenancy::build_source(&s.demand_plan(), ctx)?;
        let (mut n, mut prompt, mut output) = (0usize, 0.0, 0.0);
        let (mut first, mut last) = (None, None);
        while n < SAMPLE {
            let Some(r) = src.next_request() else { break };
            first = first.or(Some(r.arrival));
            last = Some(r.arrival);
            prompt += r.prompt_tokens as f64;
            output += r.output_tokens as f64;
            n += 1;
        }
        src.finish()?;
        let plan = s.run_plan();
        // Closed-loop users' load follows the fleet's speed.
        let closed = plan.closed_loop_users > 0;
        let offered_rps = match plan.workload_rps {
            Some(r) => Some(r),
            None if closed => None,
            None => match (first, last) {
                (Some(a), Some(b)) if b > a && n > 1 => {
                    Some((n - 1) as f64 / (b.since(a) as f64 / 1e9))
                }
                _ => None,
            },
        };
        let (p, o) = (prompt / n.max(1) as f64, output / n.max(1) as f64);
        Ok(Self::at_lengths(s, p.max(1.0), o.max(1.0), offered_rps))
    }

    /// The estimate for requests of `prompt` + `output` tokens.
    pub fn at_lengths(
        s: &Scenario,
        prompt: f64,
        output: f64,
        offered_rps: Option<f64>,
    ) -> CapacityEstimate {
        let groups: Vec<GroupEstimate> = s
            .pools
            .iter()
            .map(|p| group(&p.replica, &p.name, p.role, p.start, prompt, output))
            .collect();
        let total = |role: PoolRole| -> f64 {
            groups
                .iter()
                .filter(|g| g.role == role)
                .map(|g| g.replicas as f64 * g.per_replica_rps)
                .sum()
        };
        let colocated = total(PoolRole::Colocated);
        let has = |role: PoolRole| groups.iter().any(|g| g.role == role);
        let disaggregated = if has(PoolRole::Prefill) && has(PoolRole::Decode) {
            total(PoolRole::Prefill).min(total(PoolRole::Decode))
        } else {
            0.0
        };
        CapacityEstimate {
            mean_prompt: prompt,
            mean_output: output,
            offered_rps,
            capacity_rps: colocated + disaggregated,
            groups,
        }
    }

    /// Offered load over the estimated capacity.
    pub fn load_ratio(&self) -> Option<f64> {
        self.offered_rps
            .map(|o| o / self.capacity_rps.max(f64::MIN_POSITIVE))
    }

    /// The lines `servesim check` prints; the last one a warning when the
    /// offered load is above the estimate.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            let head = if i == 0 { "capacity   " } else { "           " };
            let pool = if g.name == "fleet" && g.role == PoolRole::Colocated {
                String::new()
            } else {
                format!("pool {} ({}): ", g.name, g.role.name())
            };
            let replicas = format!(
                "{} replica{} × {} req/s",
                g.replicas,
                if g.replicas == 1 { "" } else { "s" },
                rate(g.per_replica_rps)
            );
            let what = match g.role {
                PoolRole::Prefill => format!(
                    "{pool}{replicas}: a {:.0}-token prompt takes {:.1} ms",
                    self.mean_prompt,
                    g.prefill_s * 1e3
                ),
                role => format!(
                    "{pool}{replicas}: batch {} (KV room for {}, max_num_seqs {}), decode step {:.1} ms{}",
                    g.batch,
                    g.kv_room,
                    g.max_num_seqs,
                    g.step_s * 1e3,
                    if role == PoolRole::Colocated {
                        format!(", prefill {:.1} ms per request", g.prefill_s * 1e3)
                    } else {
                        String::new()
                    }
                ),
            };
            out.push(format!("{head}{what}"));
        }
        let pools = if self.groups.iter().any(|g| g.role == PoolRole::Prefill) {
            ", the smaller of the prefill and decode pools"
        } else {
            ""
        };
        out.push(format!(
            "           ≈ {} req/s{pools} at the mean {:.0} prompt + {:.0} output tokens (cost model, steady state; queueing, preemption and prefix hits left out)",
            rate(self.capacity_rps),
            self.mean_prompt,
            self.mean_output
        ));
        match (self.offered_rps, self.load_ratio()) {
            (Some(offered), Some(ratio)) => {
                out.push(format!(
                    "           offered {} req/s = {:.0} % of the estimate",
                    rate(offered),
                    ratio * 100.0
                ));
                if ratio > 1.0 {
                    out.push(format!(
                        "warning    the offered load {} req/s is {} the {} req/s the fleet can serve ({:.1}×): the queue grows for as long as the load lasts; add replicas or lower workload.arrival.rate",
                        rate(offered),
                        if ratio >= FAR_ABOVE { "far above" } else { "above" },
                        rate(self.capacity_rps),
                        ratio
                    ));
                }
            }
            _ => out.push(
                "           offered: a closed loop, whose load follows the fleet's speed".into(),
            ),
        }
        out
    }
}

/// The steady state of one replica of `s` (a pool's resolved scenario).
fn group(
    s: &ReplicaPlan,
    name: &str,
    role: PoolRole,
    replicas: u32,
    prompt: f64,
    output: f64,
) -> GroupEstimate {
    let cost = s.cost_model();
    let max_num_seqs = s.engine.max_num_seqs.max(1);
    let footprint = prompt + output / 2.0;
    let kv_room = (s.memory.kv_tokens as f64 / footprint).floor() as u64;
    let batch = kv_room.clamp(1, max_num_seqs as u64) as u32;
    let context = footprint.round() as u64;
    let spec = s.engine.speculative.as_ref();
    let decode_batch = |b: &mut BatchShape| {
        for _ in 0..batch {
            match spec {
                Some(sp) => b.add_verify(sp.num_draft_tokens as u64, context),
                None => b.add_decode(context),
            }
        }
    };
    let mut d = BatchShape::default();
    decode_batch(&mut d);
    let step_ns = cost.iteration_time(&d);
    // Tokens each sequence gains per step: one, or the accepted drafts
    // plus the verified token when decoding speculatively.
    let per_step = spec.map_or(1.0, |sp| {
        Speculation::expected_tokens(sp.num_draft_tokens, sp.acceptance_rate)
    });
    let prompt_tokens = prompt.round() as u64;
    let prefill_ns = match role {
        // A prefill replica runs prompts back to back.
        PoolRole::Prefill => {
            let mut b = BatchShape::default();
            b.add_prefill(prompt_tokens, 0);
            cost.iteration_time(&b)
        }
        PoolRole::Decode => 0,
        PoolRole::Colocated => {
            let mut b = d;
            b.add_prefill(prompt_tokens, 0);
            cost.iteration_time(&b).saturating_sub(step_ns)
        }
    };
    let (step_s, prefill_s) = (step_ns as f64 / 1e9, prefill_ns as f64 / 1e9);
    let per_request_s = match role {
        PoolRole::Prefill => prefill_s,
        _ => output / per_step * step_s / batch as f64 + prefill_s,
    };
    GroupEstimate {
        name: name.to_string(),
        role,
        replicas,
        batch,
        kv_room,
        max_num_seqs,
        step_s,
        prefill_s,
        per_replica_rps: 1.0 / per_request_s.max(1e-12),
    }
}

#[cfg(test)]
mod tests {
    use super::{CapacityEstimate, FAR_ABOVE};
    use crate::scenario::Scenario;
    use crate::workload::Context;
    use crate::Simulation;

    /// Prompts of 8,000 tokens at 20 req/s on two H100s: a fleet that
    /// `simulate` finds overloaded, which `check` must warn of.
    const LONG_PROMPTS: &str = r#"
name = "long-prompts"
[horizon]
requests = 3000
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
replicas = 2
[workload]
arrival = { process = "poisson", rate = 20.0 }
prompt_tokens = { dist = "normal", mean = 8000, sd = 1500, min = 2000, max = 14000 }
output_tokens = { dist = "uniform", min = 100, max = 400 }
[slo]
ttft_ms = 1000
tpot_ms = 50
"#;

    fn estimate(text: &str) -> (Scenario, CapacityEstimate) {
        let s = Scenario::from_toml_str(text, "s.toml").unwrap();
        let ctx = Context::new(&s.origin, &s.base_dir, s.seed());
        let e = CapacityEstimate::of(&s, &ctx).unwrap();
        (s, e)
    }

    #[test]
    fn an_overloaded_fleet_is_flagged_and_the_estimate_matches_the_run() {
        let (s, e) = estimate(LONG_PROMPTS);
        let ratio = e.load_ratio().unwrap();
        assert!(ratio > FAR_ABOVE, "{ratio}: {:?}", e.lines());
        let lines = e.lines();
        let warning = lines.last().unwrap();
        assert!(
            warning.starts_with("warning    the offered load 20 req/s is far above the "),
            "{warning}"
        );
        // The run serves what the estimate says, within a quarter.
        let r = Simulation::new(&s).run(|_| {}).unwrap();
        let achieved = r.summary.load.achieved_rps;
        let within = achieved / e.capacity_rps;
        assert!(
            (0.75..1.25).contains(&within),
            "achieved {achieved} vs estimated {}",
            e.capacity_rps
        );
        // A tenth of the load is well within it, with no warning.
        let (_, light) = estimate(&LONG_PROMPTS.replace("rate = 20.0", "rate = 0.5"));
        assert!(light.load_ratio().unwrap() < 0.2);
        assert!(light.lines().iter().all(|l| !l.starts_with("warning")));
    }

    #[test]
    fn more_replicas_serve_proportionally_more_and_a_closed_loop_offers_no_rate() {
        let (_, two) = estimate(LONG_PROMPTS);
        let (_, four) = estimate(&LONG_PROMPTS.replace("replicas = 2", "replicas = 4"));
        assert!((four.capacity_rps / two.capacity_rps - 2.0).abs() < 1e-9);
        let closed = LONG_PROMPTS.replace(
            r#"arrival = { process = "poisson", rate = 20.0 }"#,
            r#"arrival = { process = "closed", users = 8 }"#,
        );
        let (_, c) = estimate(&closed);
        assert_eq!(c.offered_rps, None);
        assert!(c.lines().last().unwrap().contains("closed loop"));
    }
}
