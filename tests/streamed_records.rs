//! A run that streams its records (requests leave memory as they end, the
//! reports fold them as they go, `requests.csv` is written as they end:
//! what `servesim simulate` does) gives byte-identical files to a run that
//! keeps every request to the end, on every example scenario, and on
//! variations that recycle request slots under static batching, retries and
//! tenants, and that derive a trace's engine block hashes.

use sim::{Scenario, Simulation};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file of `dir`, by name (the lock file aside).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .filter(|(n, _)| !n.starts_with('.'))
        .collect();
    v.sort();
    v
}

/// Runs `s` both ways and compares the result folders.
fn same_both_ways(s: &Scenario, label: &str, tmp: &Path) {
    let kept = tmp.join(format!("{label}-kept"));
    let streamed = tmp.join(format!("{label}-streamed"));
    let r = Simulation::new(s).run(|_| {}).unwrap();
    assert!(!r.requests.is_empty() || r.summary.counts.arrived == 0);
    sim::report::write_all(&kept, &r).unwrap();
    let r = Simulation::new(s)
        .stream_records(Some(&streamed))
        .unwrap()
        .run(|_| {})
        .unwrap();
    assert!(
        r.requests.is_empty(),
        "{label}: a streamed run keeps no requests"
    );
    sim::report::write_all(&streamed, &r).unwrap();
    let (a, b) = (files(&kept), files(&streamed));
    assert_eq!(
        a.iter().map(|x| &x.0).collect::<Vec<_>>(),
        b.iter().map(|x| &x.0).collect::<Vec<_>>(),
        "{label}: the same files"
    );
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(
            x == y,
            "{label}: {name} differs between kept and streamed records"
        );
    }
    assert!(a.iter().any(|(n, _)| n == "requests.csv"));
}

#[test]
fn every_example_scenario_streams_the_same_files() {
    let dir = repo().join("scenarios");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 10, "{paths:?}");
    let tmp = tempfile::tempdir().unwrap();
    for p in paths {
        let s = Scenario::load(&p).unwrap();
        let label = p.file_stem().unwrap().to_string_lossy().into_owned();
        same_both_ways(&s, &label, tmp.path());
    }
}

/// Loads the quick start with `edit` applied to its text.
fn quickstart(edit: impl Fn(String) -> String) -> Scenario {
    example("quickstart", edit)
}

/// Loads example `name` with `edit` applied to its text.
fn example(name: &str, edit: impl Fn(String) -> String) -> Scenario {
    let path = repo().join(format!("scenarios/{name}.toml"));
    let text = edit(std::fs::read_to_string(&path).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("variant.toml");
    std::fs::write(&p, text).unwrap();
    Scenario::load(&p).unwrap()
}

#[test]
fn recycled_slots_give_the_same_files_under_static_batching_and_overload() {
    let tmp = tempfile::tempdir().unwrap();
    // Static batching keeps finished members until the batch ends: their
    // slots must not be reused before.
    for (label, policy) in [
        ("static", "static"),
        ("orca", "orca"),
        ("sarathi", "sarathi"),
    ] {
        let s = quickstart(|t| {
            t.replace("[engine]", &format!("[engine]\npolicy = \"{policy}\""))
                .replace("requests = 20000", "requests = 3000")
        });
        same_both_ways(&s, label, tmp.path());
    }
}

#[test]
fn regions_with_per_pool_life_cycles_stream_the_same_files() {
    // Each region's pool scales on its own and overflows to the others:
    // the per-pool life-cycle report (output tokens per pool, the SLO dip)
    // and the per-region report are folded as requests end.
    let pool = |region: &str| {
        format!(
            "region = \"{region}\"\nreplicas = 2\n[fleet.pools.lifecycle]\nprovision_s = 30\n\
             warmup_s = 20\n[fleet.pools.autoscale]\npolicy = \"target\"\nmetric = \"rps\"\n\
             target_value = 0.8\nmax_replicas = 6\n"
        )
    };
    let s = example("regions", |t| {
        let t = t.replace("duration_s = 3600", "duration_s = 1200");
        ["us-east", "eu-west", "ap-northeast"]
            .iter()
            .fold(t, |t, g| {
                let at = format!("region = \"{g}\"\nreplicas = 4\n");
                assert!(t.contains(&at), "{g}");
                t.replace(&at, &pool(g))
            })
    });
    let r = Simulation::new(&s).run(|_| {}).unwrap();
    let l = r.summary.lifecycle.as_ref().expect("a life cycle");
    assert_eq!(l.pools.len(), 3);
    assert!(l.slo_dip.is_some());
    assert!(r.summary.regions.iter().any(|g| g.overflow_out > 0));
    let tmp = tempfile::tempdir().unwrap();
    same_both_ways(&s, "regions-pools", tmp.path());
}

#[test]
fn a_trace_with_its_engine_hashes_derived_at_admission_streams_the_same_files() {
    // A Mooncake-format trace (512-token hash blocks) over 16-token engine
    // blocks with prefix caching: the engine hashes are derived as each
    // request is admitted. With a request horizon short of the trace, the
    // reader reads no further than the run pulls (the workload report
    // counts the rows read).
    let tmp = tempfile::tempdir().unwrap();
    let line = |i: u64| {
        let blocks = 1 + (i * 7) % 9;
        let hashes: Vec<String> = (0..blocks)
            .map(|j| match j {
                0..3 => i % 5 * 100 + j,
                _ => 1000 * i + j,
            })
            .map(|h| h.to_string())
            .collect();
        format!(
            "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": {}, \"hash_ids\": [{}]}}\n",
            i * 40,
            blocks * 512 - (i * 13) % 400,
            20 + (i * 31) % 200,
            hashes.join(", ")
        )
    };
    // The cut run stops pulling at 333 requests; the trace reader's own
    // reorder window reads a few thousand rows past that, not to the end.
    for (label, rows, horizon) in [("whole", 1800, ""), ("cut", 6000, "requests = 333\n")] {
        let trace = tmp.path().join(format!("{label}.jsonl"));
        std::fs::write(&trace, (0..rows).map(line).collect::<String>()).unwrap();
        let text = format!(
            "name = \"engine-hashes\"\nseed = 3\n[horizon]\n{horizon}[model]\npreset = \"smollm2-135m\"\n\
             [hardware]\npreset = \"h200\"\n[fleet]\nreplicas = 2\n[engine]\nprefix_caching = true\n\
             max_model_len = 8192\n[workload]\ntrace = {{ format = \"mooncake\", path = \"{}\" }}\n",
            trace.display()
        );
        let p = tmp.path().join(format!("{label}.toml"));
        std::fs::write(&p, text).unwrap();
        let s = Scenario::load(&p).unwrap();
        same_both_ways(&s, label, tmp.path());
        let r = Simulation::new(&s).run(|_| {}).unwrap();
        let rows = &r.summary.workload.as_ref().expect("a trace report").traces[0];
        if label == "cut" {
            assert_eq!(r.summary.counts.arrived, 333);
            assert!(rows.rows < 6000, "{rows:?}");
        }
        let hit = r
            .summary
            .engine
            .prefix_cache
            .as_ref()
            .expect("prefix cache")
            .token_hit_rate;
        assert!(hit > 0.0, "{label}: shared prefixes hit ({hit})");
    }
}
