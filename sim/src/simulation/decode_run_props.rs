//! Property test of decode runs (`replica::decode_run`): randomized
//! workloads and engine settings — every batch policy, recompute and swap
//! preemption under memory pressure, prefix caching, speculative decoding,
//! parallel sampling, tenants under each fairness policy, pools with
//! disaggregated KV transfer, life cycle with failures, closed-loop users,
//! routers with and without load reports — give the same files with decode
//! runs as step by step.

use super::Simulation;
use crate::cost::CostModel;
use crate::scenario::Scenario;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    requests: u32,
    replicas: u32,
    router: &'static str,
    report: bool,
    policy: &'static str,
    swap: bool,
    block_size: u32,
    max_num_seqs: u32,
    tight_kv: bool,
    prefix: bool,
    speculative: bool,
    samples: u32,
    tenants: Option<&'static str>,
    disagg: bool,
    failures: bool,
    closed_loop: bool,
    rate: f64,
    prompt: u32,
    output: u32,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (0u64..1000, 20u32..90, 1u32..4),
        (
            prop::sample::select(vec![
                "round-robin",
                "least-outstanding",
                "least-kv",
                "power-of-two",
                "prefix-affinity",
            ]),
            any::<bool>(),
            prop::sample::select(vec!["continuous", "vllm", "sarathi", "orca", "static"]),
            any::<bool>(),
            prop::sample::select(vec![16u32, 4]),
            prop::sample::select(vec![256u32, 8]),
        ),
        (
            prop::bool::weighted(0.4),
            any::<bool>(),
            prop::bool::weighted(0.15),
            prop::sample::select(vec![1u32, 1, 1, 1, 3]),
            prop::sample::select(vec![
                None,
                None,
                None,
                Some("fcfs"),
                Some("priority"),
                Some("vtc"),
            ]),
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.2),
        ),
        (
            prop::sample::select(vec![0.5, 2.0, 20.0, 200.0]),
            50u32..1500,
            2u32..300,
        ),
    )
        .prop_map(
            |(
                (seed, requests, replicas),
                (router, report, policy, swap, block_size, max_num_seqs),
                (tight_kv, prefix, speculative, samples, tenants, disagg, failures, closed_loop),
                (rate, prompt, output),
            )| Case {
                seed,
                requests,
                replicas,
                router,
                report,
                policy,
                swap,
                block_size,
                max_num_seqs,
                tight_kv,
                prefix,
                speculative,
                samples,
                tenants,
                disagg,
                failures: failures && !disagg,
                closed_loop,
                rate,
                prompt,
                output,
            },
        )
}

fn toml(c: &Case) -> String {
    let lengths = format!(
        "prompt_tokens = {{ dist = \"lognormal\", mean = {}, cv = 0.8, min = 4, max = 3000 }}\n\
         output_tokens = {{ dist = \"lognormal\", mean = {}, cv = 0.8, min = 1, max = 800 }}\n",
        c.prompt, c.output
    );
    let arrival = if c.closed_loop {
        "arrival = { process = \"closed\", users = 6, think_time = { dist = \"exponential\", mean_s = 0.5 } }\n"
            .to_string()
    } else {
        format!("arrival = {{ process = \"poisson\", rate = {} }}\n", c.rate)
    };
    let mut t = format!(
        "name = \"p\"\nseed = {}\n[horizon]\nrequests = {}\nduration_s = 600\n\
         [model]\npreset = \"llama-3.1-8b\"\n[hardware]\npreset = \"h100-sxm\"\n",
        c.seed, c.requests
    );
    t += &format!("[fleet]\nrouter = \"{}\"\n", c.router);
    if c.report {
        t += "report_interval_s = 0.05\n";
    }
    if c.disagg {
        t += "[[fleet.pools]]\nname = \"prefill\"\nrole = \"prefill\"\nreplicas = 1\n\
              [[fleet.pools]]\nname = \"decode\"\nrole = \"decode\"\nreplicas = 2\n\
              [fleet.kv_transfer]\nbandwidth_gbyte_s = 50.0\nlatency_us = 20.0\n";
    } else {
        t += &format!("replicas = {}\n", c.replicas);
    }
    t += &format!(
        "[engine]\npolicy = \"{}\"\npreemption = \"{}\"\nblock_size = {}\nmax_num_seqs = {}\n\
         max_batched_tokens = 4096\nmax_model_len = 4096\nprefix_caching = {}\n",
        if c.disagg { "sarathi" } else { c.policy },
        if c.swap { "swap" } else { "recompute" },
        c.block_size,
        c.max_num_seqs,
        c.prefix
    );
    if c.tight_kv {
        t += "gpu_memory_utilization = 0.235\n";
    }
    if c.speculative {
        t += "speculative = { num_draft_tokens = 3, acceptance_rate = 0.7, draft_cost_fraction = 0.1 }\n";
    }
    t += "[metrics]\ntimeseries_interval_s = 0.5\n";
    if c.failures {
        t += "[lifecycle]\nprovision_s = 5\nwarmup_s = 1\n\
              [failures]\nrepair_s = 3\nmax_retries = 1\nat = [{ time_s = 2, replica = 0 }]\n";
    }
    match c.tenants {
        Some(policy) => {
            t += &format!("[fairness]\npolicy = \"{policy}\"\n");
            for (name, prio, rate) in [("a", "interactive", c.rate), ("b", "batch", c.rate / 2.0)] {
                t += &format!(
                    "[[tenants]]\nname = \"{name}\"\npriority = \"{prio}\"\n[tenants.workload]\n\
                     arrival = {{ process = \"poisson\", rate = {rate} }}\n{lengths}"
                );
            }
        }
        None => {
            t += &format!("[workload]\n{arrival}{lengths}");
            if c.prefix {
                t += "shared_prefix = { variants = 2, tokens = 256 }\n";
            }
            if c.samples > 1 {
                t += &format!("n = {{ dist = \"fixed\", value = {} }}\n", c.samples);
            }
        }
    }
    t
}

/// The run's files, by name: priced by the scenario's cost model or by
/// [`GridCost`], with records kept or streamed (`simulate`'s way, which
/// recycles request slots).
fn files(s: &Scenario, grid: bool, streamed: bool) -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let sim = if grid {
        Simulation::with_cost_models(s, vec![Box::new(GridCost)])
    } else {
        Simulation::new(s)
    };
    let sim = if streamed {
        sim.stream_records(Some(dir.path())).unwrap()
    } else {
        sim
    };
    let r = sim.run(|_| {}).unwrap();
    crate::report::write_all(dir.path(), &r).unwrap();
    let mut out: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .filter(|(n, _)| !n.starts_with('.'))
        .collect();
    out.sort();
    out
}

/// Prices every iteration in whole milliseconds (one per 512 tokens through
/// the layers and per 64 Ki tokens of decode context, plus one), so that,
/// with arrivals and ticks on a millisecond grid too, iterations end at the
/// same nanosecond as arrivals, ticks and other replicas' iterations all the
/// time: the ties a step taken ahead of the queue must respect.
struct GridCost;

impl CostModel for GridCost {
    fn iteration_time(&self, b: &crate::cost::BatchShape) -> crate::time::Nanos {
        if b.is_empty() {
            return 0;
        }
        1_000_000 * (1 + b.tokens() / 512 + b.decode_context_tokens / 65_536)
    }

    fn source(&self) -> String {
        "whole milliseconds (test)".into()
    }
}

/// A Mooncake-format trace on a 10 ms grid: bursts at one time, shared
/// first blocks (prefix hits), prompts of one to six 512-token blocks.
#[derive(Clone, Debug)]
struct GridCase {
    seed: u64,
    replicas: u32,
    router: &'static str,
    policy: &'static str,
    max_num_seqs: u32,
    prefix: bool,
    tick_ms: u32,
    /// Load reports every so many ms (none: the router sees every change).
    report_ms: Option<u32>,
    rows: Vec<(u32, u32, u32, u32)>,
}

fn grid_case() -> impl Strategy<Value = GridCase> {
    (
        (0u64..1000, 1u32..5),
        prop::sample::select(vec!["round-robin", "least-outstanding", "least-kv"]),
        prop::sample::select(vec!["vllm", "sarathi", "continuous"]),
        prop::sample::select(vec![256u32, 4]),
        any::<bool>(),
        prop::sample::select(vec![10u32, 50, 7]),
        prop::sample::select(vec![None, Some(3u32), Some(20)]),
        prop::collection::vec((0u32..6, 20u32..3000, 1u32..400, 0u32..3), 10..60),
    )
        .prop_map(
            |((seed, replicas), router, policy, max_num_seqs, prefix, tick_ms, report_ms, rows)| {
                GridCase {
                    seed,
                    replicas,
                    router,
                    policy,
                    max_num_seqs,
                    prefix,
                    tick_ms,
                    report_ms,
                    rows,
                }
            },
        )
}

/// The trace file and the scenario reading it.
fn grid_scenario(c: &GridCase, dir: &std::path::Path) -> Scenario {
    let (mut t, mut text, mut next_id) = (0u32, String::new(), 100u32);
    for &(gap, prompt, output, first) in &c.rows {
        t += gap * 10;
        let blocks = prompt.div_ceil(512);
        let ids: Vec<String> = std::iter::once(first)
            .chain((1..blocks).map(|_| {
                next_id += 1;
                next_id
            }))
            .map(|h| h.to_string())
            .collect();
        text += &format!(
            "{{\"timestamp\": {t}, \"input_length\": {prompt}, \"output_length\": {output}, \"hash_ids\": [{}]}}\n",
            ids.join(", ")
        );
    }
    let trace = dir.join("grid.jsonl");
    std::fs::write(&trace, text).unwrap();
    let report = c
        .report_ms
        .map(|ms| format!("report_interval_s = {}\n", ms as f64 / 1000.0))
        .unwrap_or_default();
    let toml = format!(
        "name = \"g\"\nseed = {}\n[horizon]\n[model]\npreset = \"llama-3.1-8b\"\n\
         [hardware]\npreset = \"h100-sxm\"\n[fleet]\nreplicas = {}\nrouter = \"{}\"\n{}\
         [engine]\npolicy = \"{}\"\nblock_size = 16\nmax_num_seqs = {}\n\
         max_batched_tokens = 2048\nmax_model_len = 8192\nprefix_caching = {}\n\
         [metrics]\ntimeseries_interval_s = {}\n\
         [workload]\ntrace = {{ format = \"mooncake\", path = \"{}\" }}\n",
        c.seed,
        c.replicas,
        c.router,
        report,
        c.policy,
        c.max_num_seqs,
        c.prefix,
        c.tick_ms as f64 / 1000.0,
        trace.display()
    );
    Scenario::from_toml_str(&toml, &dir.join("g.toml").to_string_lossy()).unwrap()
}

/// `s` resolved again with `[engine] decode_runs = runs` (the plan holds
/// the switch, so the file is edited and resolved, as `--step-by-step`
/// does).
fn stepping(s: &Scenario, runs: bool) -> Scenario {
    let mut f = s.file.clone();
    f.engine.decode_runs = runs;
    Scenario::from_file(f, &s.origin).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn decode_runs_give_the_same_files_as_step_by_step(c in case()) {
        let text = toml(&c);
        let s = Scenario::from_toml_str(&text, "p.toml");
        prop_assume!(s.is_ok(), "{}", s.err().map(|e| e.to_string()).unwrap_or_default());
        let s = s.unwrap();
        for streamed in [false, true] {
            let steps = files(&stepping(&s, false), false, streamed);
            let runs = files(&stepping(&s, true), false, streamed);
            prop_assert_eq!(steps.len(), runs.len());
            for ((a, x), (b, y)) in steps.iter().zip(&runs) {
                prop_assert_eq!(a, b);
                prop_assert!(x == y, "{} differs (streamed: {})\n{}", a, streamed, text);
            }
        }
    }

    /// Runs stepping ahead of other replicas' events (`simulation::replicas`) where
    /// everything happens on a millisecond grid: ties with arrivals, ticks
    /// and other replicas' iterations at every turn.
    #[test]
    fn decode_runs_keep_ties_on_a_grid(c in grid_case()) {
        let dir = tempfile::tempdir().unwrap();
        let s = grid_scenario(&c, dir.path());
        for streamed in [false, true] {
            let steps = files(&stepping(&s, false), true, streamed);
            let runs = files(&stepping(&s, true), true, streamed);
            prop_assert_eq!(steps.len(), runs.len());
            for ((a, x), (b, y)) in steps.iter().zip(&runs) {
                prop_assert_eq!(a, b);
                prop_assert!(x == y, "{} differs (streamed: {})\n{:?}", a, streamed, c);
            }
        }
    }
}

/// A run's replicas take decode runs as their pool's engine plan says, at
/// the start and in place of a failed one (`cluster::fleet::replica`), and
/// none once the scenario is resolved step by step.
#[test]
fn replicas_take_decode_runs_from_their_pools_plan() {
    let text = "name = \"d\"\n[horizon]\nrequests = 10\n[model]\npreset = \"llama-3.1-8b\"\n\
                [hardware]\npreset = \"h100-sxm\"\n\
                [workload]\narrival = { process = \"poisson\", rate = 1 }\n\
                prompt_tokens = { dist = \"fixed\", value = 100 }\n\
                output_tokens = { dist = \"fixed\", value = 10 }\n\
                [[fleet.pools]]\nname = \"a\"\nreplicas = 2\n\
                [[fleet.pools]]\nname = \"b\"\nreplicas = 1\n\
                engine = { decode_runs = false }\n";
    let s = Scenario::from_toml_str(text, "d.toml").unwrap();
    let sim = Simulation::new(&s);
    let on: Vec<bool> = sim.replicas.iter().map(|r| r.decode_runs()).collect();
    assert_eq!(on, [true, true, false]);
    let fresh = crate::cluster::fleet::replica(&s.pools[0], 1, 0);
    assert!(fresh.decode_runs());
    let stepped = stepping(&s, false);
    let sim = Simulation::new(&stepped);
    assert!(sim.replicas.iter().all(|r| !r.decode_runs()));
}
