//! The fleet life cycle end to end: cold starts and standby under a traffic
//! step, scale-to-zero through the activator, drains, failures and retries,
//! with conservation and determinism.

use super::tests::scenario;
use super::Simulation;
use crate::report::RunResult;
use crate::request::Status;
use crate::request::{RejectReason, Request};
use crate::time::{secs_to_nanos, SimTime};

const SERVING: &str = r#"
[engine]
max_model_len = 8192
[workload]
prompt_tokens = { dist = "lognormal", mean = 800, cv = 1.0, min = 16, max = 6144 }
output_tokens = { dist = "lognormal", mean = 250, cv = 0.8, min = 4, max = 2048 }
[slo]
ttft_ms = 500
tpot_ms = 50
"#;

fn run(extra: &str) -> RunResult {
    let s = scenario(&format!("{SERVING}\n{extra}"));
    Simulation::new(&s).run(|_| {}).unwrap()
}

fn step(standby: u32) -> RunResult {
    run(&format!(
        r#"
[horizon]
duration_s = 700
[fleet]
replicas = 1
[workload.arrival]
process = "piecewise"
schedule = [{{ start_s = 0, rate = 12 }}, {{ start_s = 200, rate = 36 }}]
[lifecycle]
standby = {standby}
[autoscale]
policy = "target"
metric = "rps"
target_value = 12
max_replicas = 6
[metrics]
timeseries = "fleet"
timeseries_interval_s = 10
"#
    ))
}

fn files(r: &RunResult) -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    crate::report::write_all(dir.path(), r).unwrap();
    ["summary.json", "requests.csv", "timeseries.csv"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(dir.path().join(f)).unwrap()))
        .collect()
}

#[test]
fn a_traffic_step_dips_while_cold_and_a_standby_pool_removes_the_dip() {
    let cold = step(0);
    let warm = step(2);
    let lc = cold.summary.lifecycle.as_ref().unwrap();
    let lw = warm.summary.lifecycle.as_ref().unwrap();
    let dip_cold = lc.slo_dip.as_ref().unwrap();
    let dip_warm = lw.slo_dip.as_ref().unwrap();
    // The default cold start is provisioning 180 s + 16 GB at 1.25 GB/s +
    // warm-up 60 s ≈ 253 s: the step at 200 s is not served in time.
    assert!(dip_cold.seconds_below >= 100.0, "{dip_cold:?}");
    assert!(dip_cold.first_below_s.unwrap() >= 200.0, "{dip_cold:?}");
    assert!(lc.cold_starts >= 1 && lc.standby_activations == 0, "{lc:?}");
    assert!(
        dip_warm.seconds_below < dip_cold.seconds_below / 4.0,
        "{dip_warm:?}"
    );
    assert!(lw.standby_activations >= 1, "{lw:?}");
    // Standby costs GPU-hours; cold starts show as their own line.
    assert!(lw.gpu_hours.standby > 0.0 && lc.gpu_hours.standby == 0.0);
    assert!(lc.gpu_hours.starting > 0.0);
    for l in [lc, lw] {
        let g = &l.gpu_hours;
        let sum = g.serving + g.idle_ready + g.standby_billed + g.starting;
        assert!((sum - g.billed).abs() < 1e-9, "{g:?}");
    }
    // Capacity requested before it is ready, in the time series.
    let ts = cold.fleet_series.iter();
    assert!(ts
        .clone()
        .any(|s| s.requested > s.ready && s.provisioning > 0));
    assert_eq!(cold.fleet_series.last().unwrap().ready, lc.ready_at_end);
}

#[test]
fn lifecycle_runs_are_deterministic_and_write_phase_columns() {
    let a = files(&step(1));
    let b = files(&step(1));
    assert_eq!(a, b);
    let ts = String::from_utf8(a[2].1.clone()).unwrap();
    let header = ts.lines().next().unwrap();
    assert!(header.ends_with(
        "replicas_requested,replicas_provisioning,replicas_loading,replicas_warming,\
         replicas_standby,replicas_ready,replicas_draining,replicas_failed"
    ));
    assert!(ts.lines().skip(1).all(|l| l.split(',').count() == 14));
}

#[test]
fn a_lifecycle_section_alone_leaves_the_requests_unchanged() {
    let base = r#"
[horizon]
requests = 400
[fleet]
replicas = 2
[workload.arrival]
process = "poisson"
rate = 20
"#;
    let plain = run(base);
    let with = run(&format!("{base}\n[lifecycle]\nwarmup_s = 30\n"));
    let (p, w) = (files(&plain), files(&with));
    assert_eq!(p[1], w[1], "requests.csv");
    assert!(plain.summary.lifecycle.is_none() && with.summary.lifecycle.is_some());
}

#[test]
fn scale_to_zero_holds_arrivals_in_the_activator_and_charges_the_cold_start() {
    let r = run(r#"
[horizon]
requests = 200
[fleet]
replicas = 0
[workload.arrival]
process = "poisson"
rate = 5
[lifecycle]
activator = true
provision_s = 20
warmup_s = 10
[autoscale]
policy = "target"
metric = "queue_depth"
target_value = 4
min_replicas = 0
max_replicas = 2
sync_period_s = 2
scrape_interval_s = 2
scale_down_stabilization_s = 30
"#);
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert!(l.activator_held > 0 && l.activator_peak > 0, "{l:?}");
    assert_eq!(r.summary.counts.completed, 200);
    let first = &r.requests[0];
    let cold = first
        .attribution
        .get(crate::attribution::Component::ColdStart);
    // At least provisioning + loading + warm-up.
    assert!(cold > secs_to_nanos(30.0), "{cold}");
    assert_eq!(first.attribution.ttft_sum(), first.ttft().unwrap());
    assert_eq!(first.attribution.total(), first.e2e().unwrap());
}

#[test]
fn without_an_activator_a_fleet_with_nothing_ready_rejects_with_a_reason() {
    let r = run(r#"
[horizon]
duration_s = 400
[fleet]
replicas = 1
[workload.arrival]
process = "poisson"
rate = 4
[lifecycle]
provision_s = 30
[failures]
repair_s = 10
max_retries = 0
at = [{ time_s = 50, replica = 0 }]
"#);
    let c = &r.summary.counts;
    assert!(c.rejected_by_reason["no_ready_replica"] > 0, "{c:?}");
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert_eq!(l.failures, 1);
    assert_eq!(l.retries.failed, l.retries.handed_back, "{:?}", l.retries);
    assert_eq!(
        c.rejected_by_reason
            .get("replica_failed")
            .copied()
            .unwrap_or(0),
        l.retries.failed
    );
    // Repaired: requests after the cold start complete again.
    let late = r
        .requests
        .iter()
        .filter(|q| q.arrival.as_secs_f64() > 250.0)
        .filter(|q| q.status == Status::Completed)
        .count();
    assert!(late > 100, "{late}");
}

/// A tenant's in-flight count is released when a failure (retries off) or
/// an empty fleet ends a request it had admitted: before, only completions
/// released it and the end-of-run check failed.
#[test]
fn tenants_release_requests_that_failures_end() {
    let r = run(r#"
[horizon]
duration_s = 400
[fleet]
replicas = 2
[workload.arrival]
process = "poisson"
rate = 4
[[tenants]]
name = "a"
limits = { max_concurrency = 64 }
[lifecycle]
provision_s = 30
[failures]
repair_s = 10
max_retries = 0
at = [{ time_s = 50, replica = 0 }, { time_s = 50, replica = 1 }]
"#);
    let c = &r.summary.counts;
    assert!(c.rejected_by_reason["replica_failed"] > 0, "{c:?}");
    assert!(c.rejected_by_reason["no_ready_replica"] > 0, "{c:?}");
    let late = r
        .requests
        .iter()
        .filter(|q| q.arrival.as_secs_f64() > 250.0)
        .filter(|q| q.status == Status::Completed)
        .count();
    assert!(
        late > 100,
        "the tenant admits again after the repair: {late}"
    );
}

#[test]
fn failed_replicas_hand_their_requests_to_the_others() {
    let r = run(r#"
[horizon]
duration_s = 300
[fleet]
replicas = 3
[workload.arrival]
process = "poisson"
rate = 30
[lifecycle]
provision_s = 20
[failures]
max_retries = 2
at = [{ time_s = 60, replica = 0 }, { time_s = 90, replica = 2 }]
"#);
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert_eq!(l.failures, 2);
    assert!(l.retries.handed_back > 10, "{:?}", l.retries);
    assert_eq!(l.retries.retried, l.retries.handed_back);
    assert!(l.retries.lost_decode_tokens > 0);
    assert_eq!(r.summary.counts.rejected, 0);
    // Every completed request, retried or not, has a consistent ledger.
    for q in r.requests.iter().filter(|q| q.status == Status::Completed) {
        assert_eq!(q.generated, q.output_tokens);
        assert_eq!(q.attribution.total(), q.e2e().unwrap());
    }
    assert!(l.gpu_hours.starting > 0.0, "repairs go through cold starts");
}

#[test]
fn a_replacement_replica_keeps_the_runs_switches() {
    // With attribution off, no request may carry latency components, also
    // those a replacement node (built after a failure) served.
    let r = run(r#"
[horizon]
duration_s = 200
[fleet]
replicas = 2
[workload.arrival]
process = "poisson"
rate = 20
[metrics]
attribution = false
[lifecycle]
provision_s = 5
[failures]
max_retries = 2
at = [{ time_s = 30, replica = 0 }, { time_s = 40, replica = 1 }]
"#);
    let done: Vec<_> = r
        .requests
        .iter()
        .filter(|q| q.status == Status::Completed && q.arrival.0 > 60_000_000_000)
        .collect();
    assert!(done.len() > 100, "{}", done.len());
    for q in done {
        assert_eq!(
            q.attribution.total(),
            0,
            "a request arriving at {:?} was attributed",
            q.arrival
        );
    }
}

#[test]
fn a_schedule_scales_down_by_draining_and_a_drain_timeout_hands_back() {
    let r = run(r#"
[horizon]
duration_s = 200
[fleet]
replicas = 3
[workload.arrival]
process = "poisson"
rate = 40
[lifecycle]
drain_timeout_s = 1
[autoscale]
policy = "schedule"
steps = [{ at_s = 100, replicas = 1 }]
"#);
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert_eq!(l.drains, 2);
    assert_eq!(l.requested_at_end, 1);
    assert_eq!(l.ready_at_end, 1);
    assert!(l.drain_timeouts > 0, "{l:?}");
    assert!(l.retries.retried > 0 && l.retries.failed == 0);
}

#[test]
fn given_failures_with_random_ones_conserve_requests_at_any_seed() {
    for seed in [1, 2, 3] {
        let r = run(&format!(
            r#"
[horizon]
duration_s = 300
[fleet]
replicas = 2
[workload.arrival]
process = "poisson"
rate = 25
[lifecycle]
provision_s = 10
provision_cv = 0.5
cache_hit_probability = 0.5
standby = 1
[failures]
mtbf_s = {}
repair_s = 5
max_retries = 1
"#,
            60 + seed * 10
        ));
        let l = r.summary.lifecycle.as_ref().unwrap();
        assert!(l.failures > 0, "seed {seed}");
        let c = &r.summary.counts;
        assert_eq!(c.arrived, c.completed + c.rejected + c.in_flight);
    }
}

#[test]
fn the_invariant_check_covers_the_activator() {
    let s = scenario(&format!(
        r#"{SERVING}
[horizon]
requests = 10
[fleet]
replicas = 0
[workload.arrival]
process = "poisson"
rate = 5
[lifecycle]
activator = true
[autoscale]
policy = "target"
target_value = 4
min_replicas = 0
max_replicas = 2
"#
    ));
    let mut sim = Simulation::new(&s);
    assert!(sim.check_invariants().is_ok());
    // A request the activator holds must be in flight.
    let mut req = Request::new(SimTime::ZERO, 10, 2);
    req.status = Status::Rejected(RejectReason::QueueFull);
    sim.requests.push(req);
    sim.life.as_mut().unwrap().units[0]
        .fleet
        .buffer
        .push_back(0);
    let e = sim.check_invariants().unwrap_err();
    assert!(e.0.contains("still held by the activator"), "{e}");
    // ... and held nowhere else.
    sim.requests[0].status = Status::InFlight;
    sim.replicas[0].enqueue(0);
    let e = sim.check_invariants().unwrap_err();
    assert!(e.0.contains("activator and a replica"), "{e}");
}
