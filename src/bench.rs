//! `servesim bench`: simulator speed on a fixed large scenario, so changes can
//! be compared run to run (a benchmark command, not a timed test).

use anyhow::Result;
use sim::{Scenario, Simulation};
use std::time::Instant;

/// Llama-3.1-8B on H100s with chat-like lengths, loaded to roughly 70 % of
/// capacity (≈ 16 req/s per replica; the fleet saturates near 22): the quickstart's shape at fleet scale.
fn scenario(
    requests: u64,
    replicas: u32,
    attribution: bool,
    decode_runs: bool,
) -> Result<Scenario> {
    let rate = 16.0 * replicas as f64;
    let text = format!(
        r#"
name = "bench"
seed = 1
[horizon]
requests = {requests}
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
replicas = {replicas}
router = "least-outstanding"
[engine]
max_model_len = 16384
decode_runs = {decode_runs}
[workload]
arrival = {{ process = "poisson", rate = {rate} }}
prompt_tokens = {{ dist = "lognormal", mean = 1000, cv = 1.0, max = 8192 }}
output_tokens = {{ dist = "lognormal", mean = 250, cv = 1.0, max = 4096 }}
[slo]
ttft_ms = 500
tpot_ms = 50
[metrics]
timeseries_interval_s = 10.0
attribution = {attribution}
"#
    );
    Ok(Scenario::from_toml_str(&text, "<bench>")?)
}

/// Peak resident memory of this process (Linux), bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn run(
    requests: u64,
    replicas: u32,
    repeat: u32,
    attribution: bool,
    decode_runs: bool,
) -> Result<()> {
    let s = scenario(requests, replicas, attribution, decode_runs)?;
    outln!(
        "bench: {requests} requests, {replicas} replicas of Llama-3.1-8B on H100-SXM, {} run(s), 1 thread",
        repeat.max(1)
    );
    let mut best = f64::INFINITY;
    let mut last = None;
    for i in 0..repeat.max(1) {
        let t = Instant::now();
        // As `simulate` runs: records folded as requests end, none kept.
        let r = Simulation::new(&s).stream_records(None)?.run(|_| {})?;
        let secs = t.elapsed().as_secs_f64();
        outln!(
            "  run {}: {:.3} s wall, {:.0} simulated requests/s",
            i + 1,
            secs,
            requests as f64 / secs
        );
        best = best.min(secs);
        last = Some(r);
    }
    let r = last.expect("at least one run");
    let sum = &r.summary;
    outln!("best wall time        {best:.3} s");
    outln!("simulated requests/s  {:.0}", requests as f64 / best);
    outln!(
        "iterations/s          {:.0}",
        sum.engine.iterations as f64 / best
    );
    outln!("events/s              {:.0}", sum.events as f64 / best);
    outln!(
        "simulated span        {:.0} s ({:.0}× faster than real time)",
        sum.duration_s,
        sum.duration_s / best
    );
    outln!(
        "run check             {} completed, mean batch {:.1}, TTFT p99 {:.0} ms, TPOT p99 {:.1} ms",
        sum.counts.completed, sum.engine.mean_batch_size, sum.latency.ttft_ms.p99, sum.latency.tpot_ms.p99
    );
    if let Some(b) = peak_rss() {
        outln!(
            "peak memory (RSS)     {:.1} MiB",
            b as f64 / 1024.0 / 1024.0
        );
    }
    Ok(())
}
