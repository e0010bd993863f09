//! Fuzz harness: mutated scenarios, trace files and grid files must each end
//! in a result or a one-line error naming where the problem is — never a
//! panic, a hang or a blow-up of memory.
//!
//! Scenario mutations set one key (any key of one of three rich base
//! scenarios: a colocated fleet, a disaggregated one with its KV link, one
//! with a life cycle and an autoscaler) to 0,
//! −1, ±1e±300, NaN, ±inf, i64::MAX, a string, a boolean, an array, a table,
//! or remove it. Trace mutations cut a sample file at a random byte, prepend
//! a byte-order mark, turn line ends into CRLF, replace numbers by huge or
//! negative ones, and splice in garbage bytes, for every row-per-request
//! reader. Grid mutations do the same to the keys of a sweep grid, plan-space
//! mutations to a plan's space (checked whole, as `servesim plan` does before
//! it runs), profile mutations to a calibration profile, and result-file
//! mutations to the values and bytes of a `plan.json`, a `capacity.json`
//! and a `sweep.json` read back as the commands that trust them read them.
//!
//! CI runs a bounded number of cases (the default, 64 per property, well
//! under a minute on two cores); `SERVESIM_FUZZ_CASES=20000 cargo test -p
//! servesim-sim --release --test fuzz_inputs` is the long local run. Each
//! run's memory budget is capped at 64 MiB (`SERVESIM_MEMORY_GIB`), so an
//! oversized run must be refused by the guards rather than allocate.

use proptest::prelude::*;
use serde_json::json;
use sim::deployment::{DeployPlan, OptionResult, PlanInputs, SizedFleet};
use sim::sweep::capacity::{CapacityReport, MaxLoad, Probe};
use sim::sweep::grid::Grid;
use sim::sweep::CheckedSweep;
use sim::sweep::SweepResults;
use sim::{Scenario, Simulation};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Wall-clock limit of one case (a debug build on a loaded CI machine).
const CASE_LIMIT: Duration = Duration::from_secs(30);

fn cases() -> u32 {
    std::env::var("SERVESIM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn config() -> ProptestConfig {
    // SAFETY-free: set before any run reads it; every test sets the same value.
    std::env::set_var("SERVESIM_MEMORY_GIB", "0.0625");
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A scenario using most keys, so that mutations reach them.
const BASE: &str = r#"
name = "fuzz"
seed = 5
[horizon]
requests = 40
duration_s = 600.0
[model]
preset = "llama-3.1-8b"
kv_dtype = "bf16"
[hardware.spec]
bf16_tflops = 989.0
memory_gib = 80.0
memory_bw_tbyte_s = 3.35
interconnect_gbyte_s = 450.0
interconnect_latency_us = 3.0
pcie_gbyte_s = 64.0
[fleet]
replicas = 2
tensor_parallel = 1
router = "round-robin"
[engine]
max_num_seqs = 32
max_batched_tokens = 4096
block_size = 16
gpu_memory_utilization = 0.9
max_model_len = 8192
policy = "sarathi"
preemption = "swap"
swap_space_gib = 4.0
prefix_caching = true
pinned_prefix_blocks = 10
[workload]
arrival = { process = "on-off", on_rate = 20.0, off_rate = 1.0, mean_on_s = 2.0, mean_off_s = 3.0 }
prompt_tokens = { dist = "lognormal", mean = 400.0, cv = 1.0, min = 4, max = 4000 }
output_tokens = { dist = "normal", mean = 60.0, sd = 20.0, min = 1, max = 500 }
shared_prefix = { variants = 3, tokens = 64, zipf_exponent = 1.0, pin = true }
[slo]
ttft_ms = 500.0
tpot_ms = 50.0
[metrics]
timeseries_interval_s = 0.5
timeseries = "fleet"
"#;

/// A disaggregated fleet, so that mutations reach the pools and the KV
/// link (whose extreme values once held a run's series without bound).
const BASE_DISAGG: &str = r#"
name = "fuzz-disagg"
seed = 5
[horizon]
requests = 40
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
router = "least-outstanding"
[[fleet.pools]]
name = "prefill"
role = "prefill"
replicas = 2
[[fleet.pools]]
name = "decode"
role = "decode"
replicas = 2
[fleet.kv_transfer]
bandwidth_gbyte_s = 50.0
latency_us = 20.0
mode = "whole"
[engine]
max_num_seqs = 64
policy = "sarathi"
max_batched_tokens = 4096
max_model_len = 8192
[workload]
arrival = { process = "poisson", rate = 10.0 }
prompt_tokens = { dist = "lognormal", mean = 2000, cv = 0.5, min = 64, max = 6000 }
output_tokens = { dist = "lognormal", mean = 50, cv = 0.5, min = 4, max = 400 }
[slo]
ttft_ms = 2000
tpot_ms = 25
[metrics]
timeseries_interval_s = 0.5
"#;

/// A life cycle and an autoscaler, so that mutations reach their keys
/// (a tiny sync period or a huge standby pool once hung a run).
const BASE_LIFE: &str = r#"
name = "fuzz-life"
seed = 5
[horizon]
duration_s = 30.0
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
replicas = 1
[engine]
max_model_len = 8192
[workload]
arrival = { process = "piecewise", schedule = [{ start_s = 0, rate = 4 }, { start_s = 10, rate = 12 }] }
prompt_tokens = { dist = "lognormal", mean = 400, cv = 1.0, min = 16, max = 4000 }
output_tokens = { dist = "lognormal", mean = 40, cv = 0.8, min = 4, max = 400 }
[lifecycle]
provision_s = 5
weights_remote_gbyte_s = 1.25
warmup_s = 2
standby = 1
[autoscale]
policy = "target"
metric = "rps"
target_value = 4
min_replicas = 1
max_replicas = 4
[metrics]
timeseries = "fleet"
timeseries_interval_s = 1
[slo]
ttft_ms = 500
tpot_ms = 50
"#;

/// The bases a scenario mutation starts from.
const BASES: [&str; 3] = [BASE, BASE_DISAGG, BASE_LIFE];

/// Other arrival processes and length models swapped into the base.
const ARRIVALS: [&str; 6] = [
    r#"{ process = "gamma", rate = 10.0, cv = 2.0 }"#,
    r#"{ process = "weibull", rate = 10.0, cv = 1.5 }"#,
    r#"{ process = "diurnal", mean_rate = 10.0, amplitude = 0.5, period_s = 60.0, peak_s = 10.0, cv = 1.2 }"#,
    r#"{ process = "piecewise", schedule = [{ start_s = 0.0, rate = 5.0 }, { start_s = 10.0, rate = 20.0 }], period_s = 30.0, cv = 0.5 }"#,
    r#"{ process = "closed", users = 4, think_time = { dist = "lognormal", mean_s = 1.0, cv = 2.0 }, ramp_up_s = 1.0 }"#,
    r#"{ process = "poisson", rate = 10.0 }"#,
];

/// Values a mutated key takes.
fn value(pick: u8) -> Option<toml::Value> {
    use toml::Value as V;
    Some(match pick % 17 {
        0 => V::Integer(0),
        1 => V::Integer(-1),
        2 => V::Float(1e300),
        3 => V::Float(-1e300),
        4 => V::Float(1e-300),
        5 => V::Float(-1e-300),
        6 => V::Float(f64::NAN),
        7 => V::Float(f64::INFINITY),
        8 => V::Float(f64::NEG_INFINITY),
        9 => V::Integer(i64::MAX),
        10 => V::String("x".into()),
        11 => V::Boolean(true),
        12 => V::Array(vec![V::Integer(1)]),
        13 => V::Table(toml::Table::new()),
        14 => V::Float(1e-6),
        15 => V::Integer(4_000_000_000),
        _ => return None, // removed
    })
}

/// Dotted paths of every leaf (and table) of a TOML table.
fn paths(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in t {
        let p = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        out.push(p.clone());
        if let toml::Value::Table(sub) = v {
            paths(sub, &p, out);
        }
    }
}

fn set(t: &mut toml::Table, path: &str, v: Option<toml::Value>) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().expect("non-empty");
    let mut cur = t;
    for p in parts {
        match cur.get_mut(p) {
            Some(toml::Value::Table(sub)) => cur = sub,
            _ => return,
        }
    }
    match v {
        Some(v) => {
            cur.insert(last.to_string(), v);
        }
        None => {
            cur.remove(last);
        }
    }
}

/// Runs one scenario text: parse, validate, simulate. Returns the error
/// line, if any; panics (caught by the caller) fail the case.
fn run_text(text: &str, origin: &str) -> Result<(), String> {
    let s = Scenario::from_toml_str(text, origin).map_err(|e| e.to_string())?;
    Simulation::new(&s)
        .run(|_| {})
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The case must end, in time, without a panic, in a result or a one-line
/// error that says where.
fn assert_clean(what: &str, f: impl FnOnce() -> Result<(), String>) {
    let t = Instant::now();
    let r = catch_unwind(AssertUnwindSafe(f));
    let took = t.elapsed();
    match r {
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{what}: panicked: {msg}");
        }
        Ok(Err(e)) => {
            assert!(!e.trim().is_empty(), "{what}: empty error");
            assert!(!e.contains('\n'), "{what}: error is not one line: {e}");
        }
        Ok(Ok(())) => {}
    }
    assert!(took < CASE_LIMIT, "{what}: took {took:?}");
}

fn mutate_scenario(base: usize, arrival: usize, picks: &[(u16, u8)]) -> String {
    let mut t: toml::Table = BASES[base % BASES.len()].parse().expect("base parses");
    let a: toml::Value = format!("a = {}", ARRIVALS[arrival % ARRIVALS.len()])
        .parse::<toml::Table>()
        .expect("arrival parses")["a"]
        .clone();
    if arrival < ARRIVALS.len() {
        set(&mut t, "workload.arrival", Some(a));
    }
    for &(key, pick) in picks {
        let mut all = Vec::new();
        paths(&t, "", &mut all);
        if all.is_empty() {
            break;
        }
        let k = all[key as usize % all.len()].clone();
        set(&mut t, &k, value(pick));
    }
    toml::to_string(&t).unwrap_or_default()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_scenarios_end_in_a_result_or_an_error(
        base in 0usize..BASES.len(),
        arrival in 0usize..ARRIVALS.len() + 1,
        picks in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..3),
    ) {
        // The base's own arrival process stays in one case of each.
        let text = mutate_scenario(base, arrival, &picks);
        assert_clean(&format!("scenario {picks:?}:\n{text}"), || run_text(&text, "fuzz.toml"));
    }

    #[test]
    fn mutated_traces_end_in_a_result_or_an_error(
        which in 0usize..TRACES.len(),
        ops in proptest::collection::vec((any::<u8>(), any::<u32>(), any::<u8>()), 1..4),
        lenient in any::<bool>(),
    ) {
        let (format, file, extra) = TRACES[which];
        let src = std::fs::read(samples().join(file)).expect("sample trace");
        let bytes = mutate_bytes(src, &ops);
        let dir = tempfile::tempdir().unwrap();
        let name = Path::new(file).file_name().unwrap().to_string_lossy().into_owned();
        std::fs::write(dir.path().join(&name), &bytes).unwrap();
        let text = format!(
            "name = \"t\"\n[horizon]\nrequests = 40\n[model]\npreset = \"llama-3.1-8b\"\n\
             [hardware]\npreset = \"h100-sxm\"\n[engine]\nmax_model_len = 8192\n\
             [workload]\ntrace = {{ format = \"{format}\", path = \"{name}\", lenient = {lenient}{extra} }}\n"
        );
        let origin = dir.path().join("s.toml").display().to_string();
        assert_clean(&format!("{format} trace {ops:?}"), || run_text(&text, &origin));
    }

    #[test]
    fn mutated_grids_end_in_a_plan_or_an_error(
        picks in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..3),
    ) {
        let scenario = std::fs::read_to_string(samples().join("../quickstart.toml")).unwrap();
        let mut t: toml::Table = std::fs::read_to_string(samples().join("../grids/quickstart-sizing.toml"))
            .unwrap()
            .parse()
            .unwrap();
        for &(key, pick) in &picks {
            let mut all = Vec::new();
            paths(&t, "", &mut all);
            if all.is_empty() {
                break;
            }
            let k = all[key as usize % all.len()].clone();
            set(&mut t, &k, value(pick));
        }
        let grid = toml::to_string(&t).unwrap_or_default();
        assert_clean(&format!("grid {picks:?}:\n{grid}"), || {
            let g = Grid::from_toml_str(&grid, "g.toml").map_err(|e| e.to_string())?;
            CheckedSweep::new(&scenario, "q.toml", g).map(|_| ()).map_err(|e| e.to_string())
        });
    }
}

/// Sets the value at a random path of a JSON tree (or removes it).
fn mutate_json(v: &mut serde_json::Value, key: u16, pick: u8) {
    fn paths(v: &serde_json::Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    at.push(k.clone());
                    out.push(at.clone());
                    paths(x, at, out);
                    at.pop();
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    at.push(i.to_string());
                    out.push(at.clone());
                    paths(x, at, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    if all.is_empty() {
        return;
    }
    let path = &all[key as usize % all.len()];
    let (last, parents) = path.split_last().expect("non-empty");
    let mut cur = v;
    for p in parents {
        cur = match cur {
            serde_json::Value::Object(m) => m.get_mut(p).expect("path"),
            serde_json::Value::Array(a) => &mut a[p.parse::<usize>().expect("index")],
            _ => return,
        };
    }
    let new = match pick % 12 {
        0 => Some(json!(0)),
        1 => Some(json!(-1)),
        2 => Some(json!(1e300)),
        3 => Some(json!(-1e300)),
        4 => Some(json!(999)),
        5 => Some(json!("x")),
        6 => Some(json!(true)),
        7 => Some(json!([1])),
        8 => Some(json!({})),
        9 => Some(serde_json::Value::Null),
        10 => Some(json!(u64::MAX)),
        _ => None,
    };
    match (cur, new) {
        (serde_json::Value::Object(m), Some(n)) => {
            m.insert(last.clone(), n);
        }
        (serde_json::Value::Object(m), None) => {
            m.remove(last);
        }
        (serde_json::Value::Array(a), n) => {
            let i = last.parse::<usize>().expect("index");
            match n {
                Some(n) => a[i] = n,
                None => {
                    a.remove(i);
                }
            }
        }
        _ => {}
    }
}

/// A probe as a capacity search records it.
fn probe(replicas: u32, rate: f64, meets: bool) -> Probe {
    Probe {
        search: "rate".into(),
        replicas,
        pool_replicas: None,
        rate_rps: rate,
        attainment: if meets { 0.995 } else { 0.6 },
        ttft_p99_ms: 120.0,
        tpot_p99_ms: 20.0,
        goodput_rps: rate * 0.99,
        completed: 300,
        stable: meets,
        requests: 300,
        percentiles_met: None,
        meets_slo: meets,
        missed: String::new(),
        figures: None,
        reused: false,
    }
}

/// Well-formed result files of each kind, as the commands write them.
fn result_files() -> [(&'static str, serde_json::Value); 3] {
    let fleet = SizedFleet {
        replicas: 2,
        gpus_per_replica: 1,
        unit: None,
        units: None,
        gpus: 2,
        gpu_hour_usd: 2.49,
        usd_per_month: 2.0 * 2.49 * 730.0,
        attainment: 0.995,
        goodput_rps_per_gpu: 14.9,
        headroom: Some(0.6),
        max_load_rps: Some(48.0),
        energy_kwh_per_month: None,
        energy_usd_per_month: None,
    };
    let plan = DeployPlan {
        format: sim::deployment::FORMAT.into(),
        scenario: "quickstart".into(),
        demand_rps: 30.0,
        headroom: 0.0,
        attainment_target: 0.99,
        tolerance: 0.01,
        shard: None,
        options: vec![
            OptionResult {
                index: 1,
                settings: "hardware.preset = \"h100-sxm\"".into(),
                hardware: Some("H100-SXM".into()),
                simulations: 22,
                fleet: Some(fleet),
                pruned: None,
                rechecked: true,
            },
            OptionResult {
                index: 0,
                settings: "hardware.preset = \"l4\"".into(),
                hardware: Some("L4".into()),
                simulations: 1,
                fleet: None,
                pruned: Some("one replica misses the SLOs".into()),
                rechecked: false,
            },
        ],
        best: Some(1),
        simulations: 23,
        headroom_simulations: 9,
        simulations_reused: 0,
        energy_usd_per_kwh: None,
        inputs: PlanInputs {
            scenario_toml: "name = \"q\"".into(),
            scenario_origin: "q.toml".into(),
            space_toml: "[axes]".into(),
            space_origin: "s.toml".into(),
        },
    };
    let capacity = CapacityReport {
        format: sim::sweep::capacity::FORMAT.into(),
        scenario: "quickstart".into(),
        slo_ttft_ms: Some(500.0),
        slo_tpot_ms: None,
        slo_e2e_ms: None,
        slo_percentiles_ms: Default::default(),
        attainment_target: 0.99,
        tolerance: 0.01,
        hours_per_month: 730.0,
        max_load: MaxLoad {
            replicas: 1,
            rate_rps: 24.0,
            per_replica_rps: 24.0,
            fails_at_rps: 25.0,
            at: probe(1, 24.0, true),
        },
        sizing: None,
        unit: None,
        probes: vec![probe(1, 24.0, true), probe(1, 25.0, false)],
    };
    let sweep = json!({
        "format": sim::sweep::results::FORMAT,
        "scenario": "quickstart",
        "scenario_path": "q.toml",
        "scenario_toml": "name = \"q\"",
        "grid_toml": "[axes]",
        "sample": "cartesian",
        "axes": ["fleet.replicas"],
        "points_total": 2,
        "shard": null,
        "points": [
            {"index": 0, "values": [1], "offered_rps": 2.5, "summary": {"counts": {"arrived": 10}}},
            {"index": 1, "values": [2], "offered_rps": 2.5, "summary": {"counts": {"arrived": 11}}}
        ]
    });
    [
        ("plan.json", serde_json::to_value(plan).unwrap()),
        ("capacity.json", serde_json::to_value(capacity).unwrap()),
        ("sweep.json", sweep),
    ]
}

/// Reads a result file as the command that trusts it does.
fn read_result(kind: &str, path: &Path) -> Result<(), String> {
    match kind {
        "plan.json" => DeployPlan::read(path).map(|_| ()).map_err(|e| e.0),
        "capacity.json" => CapacityReport::read(path).map(|_| ()).map_err(|e| e.0),
        _ => SweepResults::read(path).map(|_| ()).map_err(|e| e.0),
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_plan_spaces_end_in_options_or_an_error(
        picks in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..3),
    ) {
        let scenario = std::fs::read_to_string(samples().join("../quickstart.toml")).unwrap();
        let mut t: toml::Table = std::fs::read_to_string(samples().join("../spaces/quickstart-hardware.toml"))
            .unwrap()
            .parse()
            .unwrap();
        for &(key, pick) in &picks {
            let mut all = Vec::new();
            paths(&t, "", &mut all);
            if all.is_empty() {
                break;
            }
            let k = all[key as usize % all.len()].clone();
            set(&mut t, &k, value(pick));
        }
        let space = toml::to_string(&t).unwrap_or_default();
        assert_clean(&format!("space {picks:?}:\n{space}"), || {
            let g = Grid::from_toml_str(&space, "space.toml").map_err(|e| e.to_string())?;
            sim::deployment::check_space(&scenario, "q.toml", &g)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    }

    #[test]
    fn mutated_profiles_load_or_end_in_an_error(
        picks in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..3),
    ) {
        let mut t: toml::Table = std::fs::read_to_string(samples().join("../validate/cpu-profile.toml"))
            .unwrap()
            .parse()
            .unwrap();
        for &(key, pick) in &picks {
            let mut all = Vec::new();
            paths(&t, "", &mut all);
            if all.is_empty() {
                break;
            }
            let k = all[key as usize % all.len()].clone();
            set(&mut t, &k, value(pick));
        }
        let text = toml::to_string(&t).unwrap_or_default();
        assert_clean(&format!("profile {picks:?}"), || {
            let p = sim::profile::Profile::from_toml_str(&text, "p.toml").map_err(|e| e.to_string())?;
            // What a scenario using it reads: its hardware and memory plan.
            let _ = p.hardware("p.toml");
            let _ = p.warnings("p.toml");
            Ok(())
        });
    }

    #[test]
    fn mutated_result_files_are_read_or_refused(
        which in 0usize..3,
        picks in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..3),
        ops in proptest::collection::vec((any::<u8>(), any::<u32>(), any::<u8>()), 0..2),
    ) {
        let (kind, mut v) = result_files()[which].clone();
        for &(key, pick) in &picks {
            mutate_json(&mut v, key, pick);
        }
        let bytes = mutate_bytes(serde_json::to_vec_pretty(&v).unwrap(), &ops);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(kind);
        std::fs::write(&path, &bytes).unwrap();
        assert_clean(&format!("{kind} {picks:?} {ops:?}"), || read_result(kind, &path));
    }
}

/// The untouched result files read back: the fuzz starts from files the
/// readers accept.
#[test]
fn the_fuzzed_result_files_start_valid() {
    for (kind, v) in result_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(kind);
        std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        read_result(kind, &path).unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
}

/// (format, sample file under scenarios/traces, extra trace options).
const TRACES: [(&str, &str, &str); 7] = [
    ("azure", "azure_sample.csv", ""),
    ("burstgpt", "burstgpt_sample.csv", ""),
    ("mooncake", "mooncake_sample.jsonl", ""),
    ("bailian", "bailian_sample.jsonl", ""),
    ("requests", "requests_sample.csv", ""),
    (
        "csv",
        "generic_sample.csv",
        ", time_unit = \"ms\", block_tokens = 16, columns = { arrival = \"ts_ms\", prompt = \"in_tokens\", output = \"out_tokens\", session = \"user\", hashes = \"blocks\" }",
    ),
    (
        "jsonl",
        "generic_sample.jsonl",
        ", columns = { arrival = \"arrived\", prompt = \"prompt\", output = \"completion\" }",
    ),
];

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/traces")
}

/// Applies byte-level mutations: (op, position, value).
fn mutate_bytes(mut b: Vec<u8>, ops: &[(u8, u32, u8)]) -> Vec<u8> {
    for &(op, pos, v) in ops {
        let at = if b.is_empty() {
            0
        } else {
            pos as usize % b.len()
        };
        match op % 7 {
            0 => b.truncate(at),
            1 => {
                let mut with = b"\xEF\xBB\xBF".to_vec();
                with.extend_from_slice(&b);
                b = with;
            }
            2 => {
                let mut out = Vec::with_capacity(b.len() + b.len() / 20);
                for &c in &b {
                    if c == b'\n' {
                        out.push(b'\r');
                    }
                    out.push(c);
                }
                b = out;
            }
            3 | 4 => {
                // Replace the number at or after `at` with a huge or negative one.
                let Some(start) = b[at..].iter().position(u8::is_ascii_digit).map(|i| i + at)
                else {
                    continue;
                };
                let end = b[start..]
                    .iter()
                    .position(|c| !c.is_ascii_digit())
                    .map_or(b.len(), |i| i + start);
                let with: &[u8] = match v % 5 {
                    0 => b"99999999999999999999999",
                    1 => b"-5",
                    2 => b"4294967296",
                    3 => b"1e308",
                    _ => b"18446744073709551615",
                };
                b.splice(start..end, with.iter().copied());
            }
            5 => {
                let garbage = [v, v.wrapping_mul(31), 0xFF, 0x00, b'"', b','];
                b.splice(at..at, garbage.iter().copied());
            }
            _ => {
                // Duplicate a line somewhere else: out-of-order rows.
                if let Some(nl) = b[at..].iter().position(|&c| c == b'\n') {
                    let line_start = b[..at]
                        .iter()
                        .rposition(|&c| c == b'\n')
                        .map_or(0, |i| i + 1);
                    let line: Vec<u8> = b[line_start..at + nl + 1].to_vec();
                    b.extend_from_slice(&line);
                }
            }
        }
    }
    b
}
