//! The rollout's keys, split and state machine, and runs through
//! `Simulation`: bad values name their key, the split follows the weight and
//! keeps sessions on one version, gates advance, extend, hold, roll back and
//! promote, and a run conserves its requests per version.

use super::gate::Verdict;
use super::report::Action;
use super::Canary;
use crate::scenario::Scenario;
use crate::simulation::Simulation;
use crate::time::SimTime;

const BASE: &str = r#"
name = "c"
seed = 5
[horizon]
duration_s = 120
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[[fleet.pools]]
name = "old"
replicas = 2
[[fleet.pools]]
name = "new"
replicas = 2
[workload]
arrival = { process = "poisson", rate = 20.0 }
prompt_tokens = { dist = "fixed", value = 200 }
output_tokens = { dist = "fixed", value = 20 }
"#;

const CANARY: &str = r#"
[canary]
baseline = "old"
canary = "new"
steps = [{ weight = 20, hold_s = 20 }, { weight = 50, hold_s = 20 }]
"#;

fn load(extra: &str) -> Result<Scenario, crate::scenario::ScenarioError> {
    Scenario::from_toml_str(&format!("{BASE}{extra}"), "c.toml")
}

fn key_of(extra: &str) -> (String, String) {
    let e = load(extra).unwrap_err();
    (e.key, e.message)
}

#[test]
fn bad_canary_values_name_their_key() {
    let c = |over: &str| format!("{CANARY}{over}\n");
    let cases = [
        (
            CANARY.replace("baseline = \"old\"", "baseline = \"gone\""),
            "canary.baseline",
        ),
        (
            CANARY.replace("canary = \"new\"", "canary = \"old\""),
            "canary.canary",
        ),
        (
            CANARY.replace("weight = 50", "weight = 101"),
            "canary.steps[1].weight",
        ),
        (
            CANARY.replace("weight = 20", "weight = 0"),
            "canary.steps[0].weight",
        ),
        (
            CANARY.replace("weight = 50", "weight = 20"),
            "canary.steps[1].weight",
        ),
        (
            CANARY.replace("weight = 20, hold_s = 20", "weight = 20, hold_s = -1"),
            "canary.steps[0].hold_s",
        ),
        (
            CANARY.replace("weight = 50, hold_s = 20", "weight = 50, hold_s = 0"),
            "canary.steps[1].hold_s",
        ),
        (
            CANARY.replace(
                "steps = [{ weight = 20, hold_s = 20 }, { weight = 50, hold_s = 20 }]",
                "steps = []",
            ),
            "canary.steps",
        ),
        (c("start_s = -3"), "canary.start_s"),
        (c("max_failed_checks = 0"), "canary.max_failed_checks"),
        (c("min_samples = 0"), "canary.min_samples"),
        (c("percentile = 0"), "canary.percentile"),
        (c("percentile = 101"), "canary.percentile"),
        (c("tolerance = { ttft = -0.1 }"), "canary.tolerance.ttft"),
        (c("tolerance = { tpot = nan }"), "canary.tolerance.tpot"),
        (c("tolerance = { e2e = -1 }"), "canary.tolerance.e2e"),
        (
            c("tolerance = { error_rate = 1.5 }"),
            "canary.tolerance.error_rate",
        ),
        (
            c("tolerance = { latency = 0.1 }"),
            "canary.tolerance.latency",
        ),
        (c("colour = \"blue\""), "canary.colour"),
        (format!("{CANARY}[failures]\nmtbf_s = 100\n"), "failures"),
        (c("control = \"old\""), "canary"),
    ];
    for (extra, key) in cases {
        let (k, m) = key_of(&extra);
        assert_eq!(k, key, "{extra}: {m}");
        assert!(!m.is_empty());
    }
    // An unknown pool name lists the pools there are.
    let (_, m) = key_of(&CANARY.replace("baseline = \"old\"", "baseline = \"gone\""));
    assert!(m.contains("\"old\"") && m.contains("\"new\""), "{m}");
}

#[test]
fn a_canary_needs_two_colocated_pools() {
    let one = BASE.replace("[[fleet.pools]]\nname = \"new\"\nreplicas = 2\n", "");
    let e = Scenario::from_toml_str(&format!("{one}{CANARY}"), "c.toml").unwrap_err();
    assert_eq!(e.key, "canary", "{}", e.message);
    let pd = BASE
        .replace("name = \"old\"", "name = \"old\"\nrole = \"prefill\"")
        .replace("name = \"new\"", "name = \"new\"\nrole = \"decode\"");
    let e = Scenario::from_toml_str(&format!("{pd}{CANARY}"), "c.toml").unwrap_err();
    assert_eq!(e.key, "fleet.pools[0].role", "{}", e.message);
    assert!(load(CANARY).is_ok());
}

/// BASE with a third pool, `ctl`.
fn three() -> String {
    format!("{BASE}[[fleet.pools]]\nname = \"ctl\"\nreplicas = 2\n")
}

#[test]
fn a_control_is_a_third_pool_and_caps_the_weights_at_half() {
    let load3 = |extra: &str| Scenario::from_toml_str(&format!("{}{extra}", three()), "c.toml");
    let ok = format!("{CANARY}control = \"ctl\"\n");
    assert!(load3(&ok).is_ok());
    let cases = [
        (format!("{CANARY}control = \"new\"\n"), "canary.control"),
        (format!("{CANARY}control = \"gone\"\n"), "canary.control"),
        (
            ok.replace("weight = 50", "weight = 60"),
            "canary.steps[1].weight",
        ),
        (CANARY.to_string(), "canary"),
    ];
    for (extra, key) in cases {
        let e = load3(&extra).unwrap_err();
        assert_eq!(e.key, key, "{extra}: {}", e.message);
    }
}

#[test]
fn the_control_takes_the_canarys_share_from_the_baseline() {
    let s = Scenario::from_toml_str(&format!("{}{CANARY}control = \"ctl\"\n", three()), "c.toml")
        .unwrap();
    let mut c = Canary::new(&s.canary_plan().unwrap());
    assert_eq!((c.pool(1), c.pool(2)), (1, 2));
    c.on_event(SimTime::ZERO); // 20 %
    let mut n = [0usize; 3];
    for k in 0..10_000 {
        n[c.split(k)] += 1;
    }
    assert!(
        (1800..2200).contains(&n[1]) && (1800..2200).contains(&n[2]),
        "{n:?}"
    );
    // The gate judges the canary against the control: a slow baseline does
    // not make a slow canary pass, a fast one does not fail it.
    let t = |s: u64| SimTime(s * 1_000_000_000);
    feed(&mut c, 0, 100, 1000.0);
    feed(&mut c, 2, 100, 100.0);
    feed(&mut c, 1, 100, 150.0);
    assert_eq!(c.on_event(t(20)), None, "rolled back against the control");
    let r = c.report();
    assert_eq!(r.decisions[0].checks[0].baseline, 100.0);
    assert_eq!(r.outcome, "rolled_back");
    assert_eq!(r.versions.len(), 3);
}

#[test]
fn the_split_follows_the_weight_and_only_grows_the_canary() {
    let s = load(CANARY).unwrap();
    let mut c = Canary::new(&s.canary_plan().unwrap());
    assert_eq!(c.pool(0), 0);
    assert_eq!(c.pool(1), 1);
    // Before the start every request goes to the baseline.
    assert!((0..1000).all(|k| c.split(k) == 0));
    c.on_event(SimTime::ZERO); // start: 20 %
    let at20: Vec<usize> = (0..10_000).map(|k| c.split(k)).collect();
    let share = at20.iter().sum::<usize>() as f64 / 10_000.0;
    assert!((0.18..0.22).contains(&share), "{share}");
    // The same key gives the same side; raising the weight only moves keys
    // from the baseline to the canary (a session stays once moved).
    c.weight = 50;
    let at50: Vec<usize> = (0..10_000).map(|k| c.split(k)).collect();
    assert!(at20.iter().zip(&at50).all(|(a, b)| a <= b));
    let share = at50.iter().sum::<usize>() as f64 / 10_000.0;
    assert!((0.47..0.53).contains(&share), "{share}");
    assert_eq!(c.versions[0].requests + c.versions[1].requests, 21_000);
}

/// Feeds `n` completions of `ms` milliseconds to version `v`.
fn feed(c: &mut Canary, v: usize, n: usize, ms: f64) {
    for _ in 0..n {
        let ns = (ms * 1e6) as u64;
        c.completed(v, ns, Some(ms * 1e6 / 10.0), ns);
    }
}

#[test]
fn gates_advance_extend_and_promote() {
    let s = load(CANARY).unwrap();
    let mut c = Canary::new(&s.canary_plan().unwrap());
    let t = |s: u64| SimTime(s * 1_000_000_000);
    assert_eq!(c.on_event(t(0)), Some(t(20)));
    // 10 canary requests: too few (min_samples 50): the step is extended.
    feed(&mut c, 0, 100, 100.0);
    feed(&mut c, 1, 10, 100.0);
    assert_eq!(c.on_event(t(20)), Some(t(40)));
    // Enough, and as fast: the next step.
    feed(&mut c, 0, 100, 100.0);
    feed(&mut c, 1, 60, 100.0);
    assert_eq!(c.on_event(t(40)), Some(t(60)));
    assert_eq!(c.weight, 50);
    // Within 20 %: the last gate promotes.
    feed(&mut c, 0, 100, 100.0);
    feed(&mut c, 1, 100, 115.0);
    assert_eq!(c.on_event(t(60)), None);
    let r = c.report();
    let actions: Vec<Action> = r.decisions.iter().map(|d| d.action).collect();
    assert_eq!(actions, [Action::Extend, Action::Advance, Action::Promote]);
    assert_eq!(r.decisions[0].verdict, Verdict::TooFewSamples);
    assert_eq!(r.decisions[0].window_start_s, 0.0);
    assert_eq!(r.decisions[1].window_start_s, 20.0);
    assert_eq!(
        (r.outcome.as_str(), r.outcome_at_s),
        ("promoted", Some(60.0))
    );
    assert_eq!(r.final_weight, 100);
    let w: Vec<(f64, u32)> = r.weights.iter().map(|w| (w.time_s, w.weight)).collect();
    assert_eq!(w, [(0.0, 20), (40.0, 50), (60.0, 100)]);
    assert_eq!(r.weight_at(t(39)), 20);
    assert_eq!(r.weight_at(t(40)), 50);
    assert_eq!(r.weight_at(t(1000)), 100);
}

#[test]
fn failed_checks_hold_until_the_threshold_then_roll_back() {
    let s = load(&format!("{CANARY}max_failed_checks = 2\n")).unwrap();
    let mut c = Canary::new(&s.canary_plan().unwrap());
    let t = |s: u64| SimTime(s * 1_000_000_000);
    c.on_event(t(0));
    feed(&mut c, 0, 100, 100.0);
    feed(&mut c, 1, 100, 150.0);
    assert_eq!(c.on_event(t(20)), Some(t(40)), "first failure holds");
    assert_eq!(c.weight, 20);
    feed(&mut c, 0, 100, 100.0);
    feed(&mut c, 1, 100, 150.0);
    assert_eq!(c.on_event(t(40)), None, "second failure rolls back");
    // A concluded rollout judges nothing more.
    assert_eq!(c.on_event(t(60)), None);
    let r = c.report();
    let actions: Vec<Action> = r.decisions.iter().map(|d| d.action).collect();
    assert_eq!(actions, [Action::Hold, Action::RollBack]);
    assert_eq!(r.decisions[1].failed_checks, 2);
    assert_eq!((r.outcome.as_str(), r.final_weight), ("rolled_back", 0));
    assert_eq!(r.outcome_at_s, Some(40.0));
    let ttft = &r.decisions[1].checks[0];
    assert_eq!(ttft.verdict, Verdict::Fail);
    assert_eq!((ttft.baseline_samples, ttft.canary_samples), (100, 100));
}

#[test]
fn a_run_splits_conserves_and_repeats() {
    let s = load(&format!("{CANARY}start_s = 10\nmin_samples = 20\n")).unwrap();
    let a = Simulation::new(&s).run(|_| {}).unwrap();
    let b = Simulation::new(&s).run(|_| {}).unwrap();
    let r = a.summary.canary.as_ref().unwrap();
    assert_eq!(Some(r), b.summary.canary.as_ref(), "deterministic");
    // Identical pools: the canary is as fast and is promoted.
    assert_eq!(r.outcome, "promoted", "{:#?}", r.decisions);
    let n = &a.summary.counts;
    let sent: u64 = r.versions.iter().map(|v| v.requests).sum();
    assert_eq!(sent, n.arrived);
    let done: u64 = r.versions.iter().map(|v| v.completed).sum();
    assert_eq!(done, n.completed);
    let fly: u64 = r.versions.iter().map(|v| v.in_flight).sum();
    assert_eq!(fly, n.in_flight);
    // Requests before the start and after the rollback stay on the
    // baseline's replicas (0, 1); the canary's are 2, 3.
    let promoted = SimTime::from_secs_f64(r.outcome_at_s.unwrap());
    for q in &a.requests {
        let on_canary = q.replica >= 2;
        if q.arrival < SimTime::from_secs_f64(10.0) {
            assert!(!on_canary, "before the start");
        }
        if q.arrival > promoted {
            assert!(on_canary, "after the promotion");
        }
    }
    let canary_served = a.requests.iter().filter(|q| q.replica >= 2).count() as u64;
    assert_eq!(canary_served, r.versions[1].requests);
}

#[test]
fn a_canary_that_turns_requests_away_is_rolled_back_on_its_error_rate() {
    // The canary's engine takes at most 210 tokens per request: every one
    // of its 220-token requests is rejected, the baseline serves them all.
    let text = format!(
        "{}{CANARY}",
        BASE.replace(
            "name = \"new\"\nreplicas = 2\n",
            "name = \"new\"\nreplicas = 2\nengine = { max_model_len = 210 }\n"
        )
    );
    let s = Scenario::from_toml_str(&text, "c.toml").unwrap();
    let a = Simulation::new(&s).run(|_| {}).unwrap();
    let r = a.summary.canary.as_ref().unwrap();
    assert_eq!(r.outcome, "rolled_back", "{:#?}", r.decisions);
    let d = &r.decisions[0];
    assert_eq!(d.verdict, Verdict::Fail);
    let err = d.checks.iter().find(|c| c.metric == "error_rate").unwrap();
    assert_eq!((err.baseline, err.canary), (0.0, 1.0));
    assert_eq!(err.verdict, Verdict::Fail);
    // No canary latencies at all: those checks lack samples, the error
    // rate decides.
    assert!(d.checks[..3]
        .iter()
        .all(|c| c.verdict == Verdict::TooFewSamples && c.canary_samples == 0));
    assert_eq!(r.versions[1].completed, 0);
    assert_eq!(r.versions[1].rejected, a.summary.counts.rejected);
    assert!(a.summary.counts.rejected > 0);
    assert_eq!(r.versions[0].rejected, 0);
}

#[test]
fn a_session_stays_on_one_version() {
    // 40 closed-loop users at a fixed 50 % (the gate is past the horizon):
    // each user's requests all go to the same pool. (Their first requests
    // at t = 0 come before the rollout's start event, on the baseline.)
    let text = format!(
        "{}{}",
        BASE.replace(
            "arrival = { process = \"poisson\", rate = 20.0 }",
            "arrival = { process = \"closed\", users = 40, think_time = { dist = \"exponential\", mean_s = 1.0 } }"
        ),
        CANARY.replace(
            "steps = [{ weight = 20, hold_s = 20 }, { weight = 50, hold_s = 20 }]",
            "steps = [{ weight = 50, hold_s = 1000 }]"
        )
    );
    let s = Scenario::from_toml_str(&text, "c.toml").unwrap();
    let a = Simulation::new(&s).run(|_| {}).unwrap();
    let mut side = std::collections::BTreeMap::new();
    let started = a.requests.iter().filter(|q| q.arrival > SimTime::ZERO);
    for q in started.filter(|q| q.replica != u32::MAX) {
        assert_ne!(q.session(), 0, "closed-loop requests carry their user");
        let v = q.replica >= 2;
        assert_eq!(
            *side.entry(q.session()).or_insert(v),
            v,
            "user {}",
            q.session()
        );
    }
    let canary_users = side.values().filter(|&&v| v).count();
    assert!(side.len() >= 30, "{} users seen", side.len());
    assert!(
        (8..=32).contains(&canary_users),
        "{canary_users} of {} users on the canary",
        side.len()
    );
    assert_eq!(a.summary.canary.as_ref().unwrap().outcome, "in_progress");
}

#[test]
fn a_canary_refuses_regions_and_pool_life_cycles() {
    // Both route around the split: each region (or autoscaled pool) places
    // its own requests.
    let regions = BASE
        .replace("name = \"old\"", "name = \"old\"\nregion = \"eu\"")
        .replace("name = \"new\"", "name = \"new\"\nregion = \"us\"")
        .replace(
            "[[fleet.pools]]\nname = \"old\"",
            "[[fleet.regions]]\nname = \"eu\"\ngpu_price_per_hour = 1.0\n[[fleet.regions]]\nname = \"us\"\ngpu_price_per_hour = 1.0\n[[fleet.pools]]\nname = \"old\"",
        );
    assert!(Scenario::from_toml_str(&regions, "c.toml").is_ok());
    let e = Scenario::from_toml_str(&format!("{regions}{CANARY}"), "c.toml").unwrap_err();
    assert_eq!(e.key, "fleet.regions", "{}", e.message);
    let life = BASE.replace(
        "[workload]",
        "[fleet.pools.lifecycle]\nstandby = 1\n[workload]",
    );
    assert!(Scenario::from_toml_str(&life, "c.toml").is_ok());
    let e = Scenario::from_toml_str(&format!("{life}{CANARY}"), "c.toml").unwrap_err();
    assert_eq!(e.key, "fleet.pools.lifecycle", "{}", e.message);
}
