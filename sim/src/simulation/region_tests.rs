//! Regions end to end: the global router overflows only from a saturated
//! home region, overflowed requests pay the round trip in TTFT, requests
//! are conserved and tagged with their origin, runs repeat byte for byte,
//! and bad keys name their path.

use super::tests::scenario;
use super::Simulation;
use crate::report::RunResult;
use crate::request::Status;

/// Three one-pool regions; `rates` are the regions' mean rates (as three
/// poisson-like diurnals with amplitude 0), `extra` more keys.
fn three(rates: [f64; 3], extra: &str) -> String {
    let mut s = String::from(
        r#"
[horizon]
duration_s = 300
[engine]
max_model_len = 8192
max_num_seqs = 4
[workload]
prompt_tokens = { dist = "lognormal", mean = 800, cv = 1.0, min = 16, max = 4096 }
output_tokens = { dist = "lognormal", mean = 200, cv = 0.8, min = 4, max = 1024 }
[workload.arrival]
process = "diurnal"
mean_rate = 4.0
amplitude = 0.9
period_s = 300
peak_s = 75
[slo]
ttft_ms = 1000
tpot_ms = 100
[fleet]
"#,
    );
    for (i, (name, shift)) in [("a", 0), ("b", 100), ("c", 200)].iter().enumerate() {
        let _ = rates[i];
        s.push_str(&format!(
            "[[fleet.regions]]\nname = \"{name}\"\nshift_s = {shift}\ngpu_price_per_hour = {}\n",
            1 + i
        ));
    }
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let n = rates[i] as u32;
        s.push_str(&format!(
            "[[fleet.pools]]\nname = \"p{name}\"\nregion = \"{name}\"\nreplicas = {n}\n"
        ));
    }
    s.push_str(extra);
    s
}

fn parse(text: &str) -> Result<crate::scenario::Scenario, crate::scenario::ScenarioError> {
    let head = "name = \"t\"\nseed = 11\n[model]\npreset = \"llama-3.1-8b\"\n[hardware]\npreset = \"h100-sxm\"\n";
    crate::scenario::Scenario::from_toml_str(&format!("{head}{text}"), "r.toml")
}

fn run(text: &str) -> RunResult {
    let s = scenario(text);
    Simulation::new(&s).run(|_| {}).unwrap()
}

fn region_of(r: &RunResult, replica: u32) -> usize {
    r.summary
        .pools
        .iter()
        .position(|p| (p.first_replica..p.first_replica + p.replicas).contains(&replica))
        .unwrap()
}

#[test]
fn saturated_regions_overflow_with_the_round_trip_and_requests_are_conserved() {
    let r = run(&three([1.0, 1.0, 1.0], "[fleet.overflow]\nrtt_ms = 150\n"));
    let regs = &r.summary.regions;
    assert_eq!(regs.len(), 3);
    let out: u64 = regs.iter().map(|g| g.overflow_out).sum();
    let inn: u64 = regs.iter().map(|g| g.overflow_in).sum();
    assert!(out > 0 && out == inn, "{regs:?}");
    let mut away = 0;
    for q in &r.requests {
        if q.replica == u32::MAX {
            continue;
        }
        if region_of(&r, q.replica) != q.region as usize {
            away += 1;
            // The round trip is part of TTFT.
            if let Some(t) = q.ttft() {
                assert!(t >= 150_000_000, "{t}");
            }
        }
    }
    assert_eq!(away, out);
    // Every origin's requests end once: completed, rejected or in flight.
    let total: u64 = regs.iter().map(|g| g.requests).sum();
    assert_eq!(total, r.requests.len() as u64);
    let served: u64 = regs.iter().map(|g| g.served).sum();
    let placed = r.requests.iter().filter(|q| q.replica != u32::MAX).count() as u64;
    assert_eq!(served, placed);
    for g in regs {
        let inflight = r
            .requests
            .iter()
            .filter(|q| q.region as usize == regs.iter().position(|x| x.name == g.name).unwrap())
            .filter(|q| q.status == Status::InFlight)
            .count() as u64;
        assert_eq!(g.requests, g.completed + g.rejected + inflight);
        assert!(g.slo_attainment.is_some());
        // One replica for the whole run at the region's price.
        let hours = r.summary.duration_s / 3600.0;
        assert!((g.gpu_hours - hours).abs() < 1e-9);
        assert!((g.cost.unwrap() - g.gpu_hours * g.gpu_price_per_hour.unwrap()).abs() < 1e-9);
    }
}

#[test]
fn overflow_only_leaves_a_saturated_home_and_can_be_turned_off() {
    // Ample capacity everywhere: nobody is saturated, nobody travels.
    let light = run(&three([6.0, 6.0, 6.0], ""));
    assert!(light.summary.regions.iter().all(|g| g.overflow_out == 0));
    // Thresholds no replica reaches: the same.
    let high = run(&three(
        [1.0, 1.0, 1.0],
        "[fleet.overflow]\nqueue_threshold = 100000\nkv_threshold = 1.0\n",
    ));
    assert!(high.summary.regions.iter().all(|g| g.overflow_out == 0));
    let off = run(&three(
        [1.0, 1.0, 1.0],
        "[fleet.overflow]\nenabled = false\n",
    ));
    for q in off.requests.iter().filter(|q| q.replica != u32::MAX) {
        assert_eq!(region_of(&off, q.replica), q.region as usize);
    }
    // Sharing beats each region alone on the same replicas, with a
    // threshold that keeps TTFT within the SLO (one waiting request on
    // these max_num_seqs = 4 replicas already costs seconds).
    let rule = "[fleet.overflow]\nqueue_threshold = 1\n";
    let on = run(&three([2.0, 2.0, 2.0], rule));
    let off = run(&three([2.0, 2.0, 2.0], &format!("{rule}enabled = false\n")));
    let met = |r: &RunResult| {
        r.summary
            .regions
            .iter()
            .map(|g| g.slo_attainment.unwrap())
            .sum::<f64>()
    };
    assert!(met(&on) > met(&off), "{} vs {}", met(&on), met(&off));
    assert!(on.summary.regions.iter().any(|g| g.overflow_out > 0));
}

#[test]
fn regional_runs_repeat_byte_for_byte() {
    let files = |r: &RunResult| {
        let dir = tempfile::tempdir().unwrap();
        crate::report::write_all(dir.path(), r).unwrap();
        ["summary.json", "requests.csv"]
            .iter()
            .map(|f| std::fs::read(dir.path().join(f)).unwrap())
            .collect::<Vec<_>>()
    };
    let text = three([1.0, 1.0, 1.0], "");
    assert_eq!(files(&run(&text)), files(&run(&text)));
}

#[test]
fn regions_scale_their_own_pools() {
    let r = run(&three(
        [1.0, 1.0, 1.0],
        "[lifecycle]\nprovision_s = 10\nwarmup_s = 5\n[autoscale]\npolicy = \"target\"\nmetric = \"rps\"\ntarget_value = 2\nmax_replicas = 3\nsync_period_s = 10\nscrape_interval_s = 10\n",
    ));
    let l = r.summary.lifecycle.as_ref().unwrap();
    assert_eq!(l.pools.len(), 3);
    assert!(l.pools.iter().all(|p| p.scale_ups >= 1), "{:?}", l.pools);
    let sum: f64 = r.summary.regions.iter().map(|g| g.gpu_hours).sum();
    assert!((sum - l.gpu_hours.billed).abs() < 1e-9);
}

#[test]
fn bad_region_keys_name_their_path() {
    let ok = three([1.0, 1.0, 1.0], "");
    let cases: Vec<(String, &str)> = vec![
        (
            ok.replace("region = \"b\"", "region = \"mars\""),
            "fleet.pools[1].region",
        ),
        (
            format!("{ok}[fleet.overflow]\nrtt_ms = -1\n"),
            "fleet.overflow.rtt_ms",
        ),
        (
            ok.replace("gpu_price_per_hour = 2", "gpu_price_per_hour = -2"),
            "fleet.regions[1].gpu_price_per_hour",
        ),
        (
            ok.replace(
                "name = \"pb\"\nregion = \"b\"\nreplicas = 1",
                "name = \"pb\"\nregion = \"b\"\nreplicas = 0",
            ),
            "fleet.pools[1].replicas",
        ),
        (
            format!("{ok}[fleet.overflow]\nqueue_threshold = 2000000\n"),
            "fleet.overflow.queue_threshold",
        ),
        (
            format!("{ok}[fleet.overflow]\nkv_threshold = 1.5\n"),
            "fleet.overflow.kv_threshold",
        ),
        (
            ok.replace("shift_s = 100", "shift_s = -100"),
            "fleet.regions[1].shift_s",
        ),
        (
            ok.replace("name = \"c\"", "name = \"a\""),
            "fleet.regions[2].name",
        ),
        (ok.replace("region = \"c\"\n", ""), "fleet.pools[2].region"),
        (
            format!("{ok}[fleet.overflow]\nrtt = 5\n"),
            "fleet.overflow.rtt",
        ),
    ];
    for (text, key) in cases {
        let e = parse(&text).unwrap_err();
        assert_eq!(e.key, key, "{}", e.message);
    }
    // A region without pools, and overflow keys without regions.
    let lonely = ok.replace("region = \"c\"", "region = \"a\"");
    let e = parse(&lonely).unwrap_err();
    assert_eq!(e.key, "fleet.regions[2]", "{}", e.message);
}
