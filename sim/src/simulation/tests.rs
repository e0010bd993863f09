use super::Simulation;
use crate::cost::CostModel;
use crate::cost::{BatchShape, Roofline};
use crate::replica::Replica;
use crate::report::{RunResult, Summary};
use crate::request::RejectReason;
use crate::request::Status;
use crate::scenario::Scenario;
use crate::time::SimTime;

pub(super) fn scenario(extra: &str) -> Scenario {
    let text = format!(
        r#"
name = "t"
seed = 11
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
{extra}
"#
    );
    Scenario::from_toml_str(&text, "t.toml").unwrap()
}

fn roofline(s: &Scenario) -> Roofline {
    Roofline::new(&s.model, &s.hardware, s.weight_dtype, s.kv_dtype, 1)
}

#[test]
fn lone_request_ttft_is_prefill_time_and_tpot_is_decode_step_time() {
    let s = scenario(
        r#"
[horizon]
requests = 1
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 1000 }
output_tokens = { dist = "fixed", value = 101 }
"#,
    );
    let r = Simulation::new(&s).run(|_| {}).unwrap();
    let req = &r.requests[0];
    let cost = roofline(&s);
    let mut prefill = BatchShape::default();
    prefill.add_prefill(1000, 0);
    assert_eq!(req.ttft(), Some(cost.iteration_time(&prefill)));
    // Decode step g feeds token g: context = 1000 + g tokens including it.
    let decode_total: u64 = (1..=100)
        .map(|g| {
            let mut b = BatchShape::default();
            b.add_decode(1000 + g);
            cost.iteration_time(&b)
        })
        .sum();
    let tpot = req.tpot().unwrap();
    assert!((tpot - decode_total as f64 / 100.0).abs() < 1e-6, "{tpot}");
    // And that step is the weight-streaming time of a bf16 8B model on H100.
    assert!((4.79e6..9.6e6).contains(&tpot), "{tpot} ns");
    assert_eq!(req.queue_wait(), Some(0));
    assert_eq!(r.summary.counts.completed, 1);
}

fn at_rate(rate: f64) -> Summary {
    let s = scenario(&format!(
        r#"
[horizon]
requests = 3000
[fleet]
replicas = 2
[workload]
arrival = {{ process = "poisson", rate = {rate} }}
prompt_tokens = {{ dist = "lognormal", mean = 800, cv = 1.0, max = 6000 }}
output_tokens = {{ dist = "lognormal", mean = 250, cv = 0.8, max = 2000 }}
"#
    ));
    Simulation::new(&s).run(|_| {}).unwrap().summary
}

#[test]
fn throughput_rises_with_load_until_saturation_then_latency_climbs() {
    let rates = [5.0, 10.0, 20.0, 30.0, 120.0, 240.0];
    let runs: Vec<Summary> = rates.iter().map(|&r| at_rate(r)).collect();
    let tput: Vec<f64> = runs.iter().map(|s| s.throughput.requests_per_s).collect();
    let ttft: Vec<f64> = runs.iter().map(|s| s.latency.ttft_ms.p99).collect();
    // Below saturation the fleet keeps up with the offered load.
    for (i, &r) in rates[..4].iter().enumerate() {
        assert!(tput[i] > 0.9 * r, "rate {r}: throughput {}", tput[i]);
    }
    // Past saturation throughput flattens at capacity…
    assert!(tput[5] < 1.25 * tput[4], "{tput:?}");
    assert!(tput[4] < 0.8 * rates[4], "{tput:?}");
    // …and TTFT explodes with the queue.
    assert!(ttft[4] > 10.0 * ttft[0], "{ttft:?}");
    assert!(ttft[5] >= ttft[4], "{ttft:?}");
}

#[test]
fn duration_horizon_leaves_requests_in_flight_and_counts_add_up() {
    let s = scenario(
        r#"
[horizon]
duration_s = 60
[workload]
arrival = { process = "poisson", rate = 100.0 }
prompt_tokens = { dist = "fixed", value = 2000 }
output_tokens = { dist = "fixed", value = 200 }
"#,
    );
    let r = Simulation::new(&s).run(|_| {}).unwrap();
    let c = &r.summary.counts;
    assert!(c.in_flight > 0 && c.completed > 0);
    assert_eq!(c.arrived, c.completed + c.rejected + c.in_flight);
    assert_eq!(r.summary.duration_s, 60.0);
    assert!(r
        .requests
        .iter()
        .all(|q| q.arrival <= SimTime::from_secs_f64(60.0)));
}

#[test]
fn impossible_requests_are_rejected_with_their_reason() {
    let s = scenario(
        r#"
[horizon]
requests = 300
[engine]
max_model_len = 8192
max_batched_tokens = 4096
[workload]
arrival = { process = "poisson", rate = 5.0 }
prompt_tokens = { dist = "uniform", min = 100, max = 9000 }
output_tokens = { dist = "fixed", value = 10 }
"#,
    );
    let r = Simulation::new(&s).run(|_| {}).unwrap();
    let c = &r.summary.counts;
    assert!(c.rejected_by_reason["exceeds_max_model_len"] > 0);
    assert!(c.rejected_by_reason["prompt_exceeds_token_budget"] > 0);
    assert_eq!(c.completed + c.rejected, 300);
    for q in &r.requests {
        match q.status {
            Status::Rejected(RejectReason::ExceedsMaxModelLen) => {
                assert!(q.prompt_tokens + q.output_tokens > 8192)
            }
            Status::Rejected(RejectReason::PromptExceedsTokenBudget) => {
                assert!(q.prompt_tokens > 4096)
            }
            Status::Completed => assert!(q.prompt_tokens <= 4096),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn preemption_under_memory_pressure_still_completes_everything() {
    // 0.35 of an H100 leaves ~10 GiB of KV (~80k tokens) for 8B.
    let s = scenario(
        r#"
[horizon]
requests = 400
[engine]
gpu_memory_utilization = 0.3
max_model_len = 8192
[workload]
arrival = { process = "poisson", rate = 200.0 }
prompt_tokens = { dist = "fixed", value = 1500 }
output_tokens = { dist = "fixed", value = 1500 }
"#,
    );
    let r = Simulation::new(&s).run(|_| {}).unwrap();
    assert!(r.summary.engine.preemptions > 0, "{:?}", r.summary.engine);
    assert_eq!(r.summary.counts.completed, 400);
    assert!((r.summary.engine.kv_util_max - 1.0).abs() < 0.02);
}

#[test]
fn invariant_check_catches_broken_ledgers() {
    let s = scenario(
        r#"
[horizon]
requests = 5
[workload]
arrival = { process = "poisson", rate = 5.0 }
prompt_tokens = { dist = "fixed", value = 10 }
output_tokens = { dist = "fixed", value = 3 }
"#,
    );
    let mut sim = Simulation::new(&s);
    while let Some((now, ev)) = sim.queue.next() {
        sim.dispatch(ev, now).unwrap();
    }
    assert!(sim.check_invariants().is_ok());
    sim.requests[2].generated = 2;
    let e = sim.check_invariants().unwrap_err();
    assert!(e.0.contains("request 2 completed with 2 of 3"), "{e}");
    sim.requests[2].generated = 3;
    sim.requests[3].status = Status::InFlight;
    assert!(sim.check_invariants().is_err());
    sim.requests[3].status = Status::Completed;
    sim.replicas[0].enqueue(4);
    let e = sim.check_invariants().unwrap_err();
    assert!(e.0.contains("still held"), "{e}");
}

#[test]
fn invariant_check_follows_kv_between_prefill_and_decode() {
    let s = scenario(
        r#"
[horizon]
requests = 40
[engine]
policy = "sarathi"
[[fleet.pools]]
name = "p"
role = "prefill"
replicas = 1
[[fleet.pools]]
name = "d"
role = "decode"
replicas = 1
[fleet.kv_transfer]
bandwidth_gbyte_s = 1.0
[workload]
arrival = { process = "poisson", rate = 50.0 }
prompt_tokens = { dist = "fixed", value = 2000 }
output_tokens = { dist = "fixed", value = 20 }
"#,
    );
    let mut sim = Simulation::new(&s);
    // Stop while KV caches are on the 1 GB/s link.
    let mut on_link = false;
    while let Some((now, ev)) = sim.queue.next() {
        sim.dispatch(ev, now).unwrap();
        if sim.fleet.busy() && sim.replicas[0].held_for_transfer() > 2 {
            on_link = true;
            break;
        }
    }
    assert!(on_link);
    sim.check_invariants().unwrap();
    // A request whose KV is on the link must still be in flight.
    let id = sim
        .requests
        .iter()
        .position(|r| {
            r.kv_transfer()
                .is_some_and(|t| t.accepted.is_some() && t.done.is_none())
        })
        .unwrap();
    sim.requests[id].status = Status::Completed;
    let e = sim.check_invariants().unwrap_err();
    assert!(
        e.0.contains("between replicas") || e.0.contains("held"),
        "{e}"
    );
}

/// The single-sample decode loop and the group loop of `replica::fork` give
/// the same run, request by request, under preemption and speculation.
#[test]
fn the_single_sample_fast_path_equals_the_group_path() {
    for extra in [
        "[engine]\nblock_size = 16\ngpu_memory_utilization = 0.22\nmax_model_len = 8000\n",
        "[engine]\npolicy = \"sarathi\"\nspeculative = { num_draft_tokens = 3, acceptance_rate = 0.7, draft_model = \"llama-3.2-1b\" }\n",
    ] {
        let s = scenario(&format!(
            r#"
[horizon]
requests = 600
[fleet]
replicas = 2
[workload]
arrival = {{ process = "poisson", rate = 60.0 }}
prompt_tokens = {{ dist = "lognormal", mean = 900, cv = 1.0, min = 8, max = 6000 }}
output_tokens = {{ dist = "lognormal", mean = 300, cv = 1.0, min = 2, max = 2000 }}
{extra}"#
        ));
        let fast = Simulation::new(&s).run(|_| {}).unwrap();
        let mut sim = Simulation::new(&s);
        sim.replicas.iter_mut().for_each(Replica::force_group_path);
        let group = sim.run(|_| {}).unwrap();
        assert_eq!(fast.summary, group.summary, "{extra}");
        let key = |r: &RunResult| {
            r.requests
                .iter()
                .map(|q| (q.ttft(), q.e2e(), q.preemptions, q.replica))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&fast), key(&group), "{extra}");
        let preempted: u32 = fast.requests.iter().map(|q| q.preemptions).sum();
        assert!(preempted > 0 || extra.contains("speculative"), "{extra}");
    }
}
