//! The life cycle per pool: each pool scales with its own autoscaler and
//! cold-start figures, the summary splits GPU-hours per pool and
//! `pools.csv` carries each pool's replicas by phase; conservation and
//! determinism hold.

use super::tests::scenario;
use super::Simulation;
use crate::report::RunResult;

const POOLS: &str = r#"
[horizon]
duration_s = 600
[engine]
max_model_len = 8192
[workload]
prompt_tokens = { dist = "lognormal", mean = 800, cv = 1.0, min = 16, max = 6144 }
output_tokens = { dist = "lognormal", mean = 250, cv = 0.8, min = 4, max = 2048 }
[workload.arrival]
process = "piecewise"
schedule = [{ start_s = 0, rate = 12 }, { start_s = 150, rate = 40 }]
[slo]
ttft_ms = 500
tpot_ms = 50
[metrics]
timeseries = "fleet"
timeseries_interval_s = 10
[fleet]
[[fleet.pools]]
name = "steady"
replicas = 1
[[fleet.pools]]
name = "elastic"
replicas = 1
[fleet.pools.lifecycle]
provision_s = 30
warmup_s = 20
[fleet.pools.autoscale]
policy = "target"
metric = "rps"
target_value = 8
max_replicas = 5
"#;

fn run(extra: &str) -> RunResult {
    let s = scenario(&format!("{POOLS}\n{extra}"));
    Simulation::new(&s).run(|_| {}).unwrap()
}

fn files(r: &RunResult) -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    crate::report::write_all(dir.path(), r).unwrap();
    [
        "summary.json",
        "requests.csv",
        "timeseries.csv",
        "pools.csv",
    ]
    .iter()
    .map(|f| (f.to_string(), std::fs::read(dir.path().join(f)).unwrap()))
    .collect()
}

#[test]
fn each_pool_scales_on_its_own_and_gpu_hours_split_per_pool() {
    let r = run("");
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert_eq!(l.pools.len(), 2, "{l:?}");
    let (steady, elastic) = (&l.pools[0], &l.pools[1]);
    assert_eq!(steady.pool, "steady");
    assert_eq!(steady.autoscaler, "fixed");
    assert_eq!(elastic.autoscaler, "target");
    assert_eq!(l.autoscaler, "per pool");
    // Only the elastic pool reacts to the step, through cold starts.
    assert_eq!(steady.scale_ups, 0);
    assert_eq!(steady.peak_ready, 1);
    assert!(
        elastic.scale_ups >= 1 && elastic.cold_starts >= 1,
        "{elastic:?}"
    );
    assert!(elastic.peak_ready > 1, "{elastic:?}");
    assert_eq!(steady.slots, 1);
    assert_eq!(elastic.slots, 5);
    assert_eq!(l.slots, 6);
    // The steady pool's replica is billed the whole run; the per-pool
    // GPU-hours add up to the fleet's.
    let hours = r.summary.duration_s / 3600.0;
    assert!((steady.gpu_hours.billed - hours).abs() < 1e-9, "{steady:?}");
    let sum: f64 = l.pools.iter().map(|p| p.gpu_hours.billed).sum();
    assert!((sum - l.gpu_hours.billed).abs() < 1e-9);
    let starting: f64 = l.pools.iter().map(|p| p.gpu_hours.starting).sum();
    assert!(elastic.gpu_hours.starting > 0.0 && (starting - l.gpu_hours.starting).abs() < 1e-9);
    // The slots of the elastic pool follow the steady pool's one replica.
    assert_eq!(r.summary.pools[1].first_replica, 1);
    assert!(r
        .requests
        .iter()
        .any(|q| q.status == crate::request::Status::Completed && q.replica >= 2));
    // pools.csv: each pool's phases; the fleet's timeseries sums them.
    let f = files(&r);
    let pools_csv = String::from_utf8(f[3].1.clone()).unwrap();
    let header = pools_csv.lines().next().unwrap();
    assert!(header.ends_with(",replicas_requested,replicas_provisioning,replicas_loading,replicas_warming,replicas_standby,replicas_ready,replicas_draining,replicas_failed"), "{header}");
    let max_elastic_ready = pools_csv
        .lines()
        .filter(|l| l.split(',').nth(1) == Some("elastic"))
        .map(|l| l.split(',').nth(16).unwrap().parse::<u32>().unwrap())
        .max()
        .unwrap();
    assert!(max_elastic_ready > 1);
    let last = r.fleet_series.last().unwrap();
    assert_eq!(last.ready, l.ready_at_end);
}

#[test]
fn global_tables_apply_to_each_pool_and_runs_repeat_byte_for_byte() {
    // The global [autoscale] scales the steady pool too (each on its own).
    let global = POOLS.replace("[fleet.pools.autoscale]", "[autoscale]");
    let s = scenario(&global);
    let r = Simulation::new(&s).run(|_| {}).unwrap();
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert!(l
        .pools
        .iter()
        .all(|p| p.autoscaler == "target" && p.slots == 5));
    let a = files(&run(""));
    let b = files(&run(""));
    assert_eq!(a, b);
}

#[test]
fn given_failures_name_the_fleets_replicas_and_are_retried_in_the_pool() {
    let r = run("[failures]\nat = [{ time_s = 100, replica = 1 }]\nmax_retries = 2\n");
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert_eq!(l.pools[0].failures, 0);
    assert_eq!(l.pools[1].failures, 1);
    assert_eq!(l.failures, 1);
}

/// Two declared pools of two replicas each and one given failure: the
/// failure happens once, to the replica it names (the fleet's numbering),
/// and the run's counts add up.
#[test]
fn one_given_failure_with_declared_pools_fails_one_replica_once() {
    let s = scenario(
        r#"
[horizon]
duration_s = 300
[workload]
prompt_tokens = { dist = "fixed", value = 512 }
output_tokens = { dist = "fixed", value = 128 }
[workload.arrival]
process = "poisson"
rate = 8
[fleet]
[[fleet.pools]]
name = "a"
replicas = 2
[[fleet.pools]]
name = "b"
replicas = 2
[failures]
repair_s = 1000
max_retries = 1
at = [{ time_s = 100, replica = 0 }]
"#,
    );
    let r = Simulation::new(&s).run(|_| {}).unwrap();
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert_eq!(l.failures, 1, "{l:?}");
    assert_eq!(l.pools[0].failures, 1, "{:?}", l.pools[0]);
    assert_eq!(l.pools[1].failures, 0, "{:?}", l.pools[1]);
    // Only replica 0 is out after the failure (no repair within the run):
    // the other three keep serving.
    let served_late: std::collections::BTreeSet<u32> = r
        .requests
        .iter()
        .filter(|q| q.arrival.as_secs_f64() > 150.0)
        .filter(|q| q.status == crate::request::Status::Completed)
        .map(|q| q.replica)
        .collect();
    assert_eq!(
        served_late,
        [1, 2, 3].into_iter().collect(),
        "replicas serving after the failure"
    );
    let c = &r.summary.counts;
    assert_eq!(c.arrived, c.completed + c.rejected + c.in_flight, "{c:?}");
}
