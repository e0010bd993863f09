//! `servesim calibrate --engine URL`: the progress bar and printing around
//! `serve::probe`, which probes a served engine through its API. It needs
//! no candle, so every build has it.

use crate::cli::CalibrateCmd;
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use serve::probe::{self, EngineArgs};
use std::io::IsTerminal;
use std::time::Duration;

pub fn calibrate(a: CalibrateCmd) -> Result<()> {
    let url = a.engine.clone().expect("dispatched on --engine");
    let out = crate::profile_out::profile_path(&a.out)?;
    if !(a.budget.is_finite() && a.budget > 0.0 && a.budget <= 600.0) {
        anyhow::bail!("--budget must be minutes in (0, 600], got {}", a.budget);
    }
    let workload_prompt = match &a.scenario {
        Some(path) => Some(longest_prompt(path)?),
        None => None,
    };
    let args = EngineArgs {
        url,
        api_key: a.api_key.clone(),
        served_model: a.served_model.clone(),
        arch: a.model.clone(),
        dtype: a.dtype.clone().unwrap_or_else(|| "bf16".into()),
        budget: Duration::from_secs_f64(a.budget * 60.0),
        max_concurrency: a.max_concurrency,
        max_prompt: a.max_prompt,
        workload_prompt,
        max_batched_tokens: a.max_num_batched_tokens,
        max_num_seqs: a.max_num_seqs,
        ubatch_tokens: a.ubatch_size,
        kv_tokens: a.kv_tokens,
        force: a.force,
    };
    let pb = if std::io::stderr().is_terminal() {
        ProgressBar::new(1000)
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template("{prefix} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg}")
            .expect("valid template"),
    );
    pb.set_prefix(format!("probing {}", args.url));
    let profile = probe::calibrate(&args, &mut |done, total, what| {
        pb.set_position((1000.0 * done / total.max(1e-9)).min(1000.0) as u64);
        pb.set_message(what.to_string());
    });
    pb.finish_and_clear();
    let profile = profile?;
    crate::profile_out::write_profile(&out, &profile)?;
    let e = profile
        .engine
        .as_ref()
        .expect("engine profiles carry their probe");
    let f = &profile.fit;
    outln!(
        "engine     {} serving {} ({}; {})",
        e.url,
        e.served_model,
        profile.device.name,
        profile.device.driver
    );
    outln!(
        "model      {} ({})",
        profile.model.name,
        profile.model.source
    );
    let seen: Vec<String> = e
        .concurrency
        .iter()
        .map(|[asked, seen]| {
            if *seen > 0 {
                format!("{asked}→{seen}")
            } else {
                asked.to_string()
            }
        })
        .collect();
    outln!(
        "measured   {} shapes ({} fitted, {} held out) from {} requests in {:.1} s; concurrency {}{}",
        profile.samples.len(),
        profile.samples.iter().filter(|s| s.fitted).count(),
        profile.held_out.shapes,
        e.requests,
        profile.measurement.wall_s,
        seen.join(" "),
        if e.concurrency.iter().any(|c| c[1] > 0) {
            " (asked→running per /metrics)"
        } else {
            ""
        }
    );
    let slope = |knots: &[u32], v: &[f64]| {
        knots
            .windows(2)
            .zip(v.windows(2))
            .map(|(k, v)| format!("{:.2}", (v[1] - v[0]) / (k[1] - k[0]) as f64 / 1e3))
            .collect::<Vec<_>>()
            .join("/")
    };
    outln!(
        "fit        step {:.3} ms + {:.3} ms per request + {:.3} µs per decode context token + {:.4} µs per prefill pair",
        f.step_ns / 1e6,
        f.prefill_seq_ns / 1e6,
        f.decode_token_ns / 1e3,
        f.prefill_pair_ns / 1e3
    );
    outln!(
        "           prefill {} µs per token (knots {:?}), {} µs per sequence (knots {:?})",
        slope(&f.token_knots, &f.token_ns),
        f.token_knots,
        slope(&f.row_knots, &f.row_ns),
        f.row_knots
    );
    outln!(
        "host       TTFT floor {:.3} ms: one {:.3} ms step + {:.3} ms per request, {:.3} ms of it outside the iterations; {:.3} µs per sequence per step",
        e.host.ttft_floor_ns / 1e6,
        e.host.step_ns / 1e6,
        f.prefill_seq_ns / 1e6,
        e.host.request_ns / 1e6,
        e.host.seq_ns / 1e3
    );
    outln!(
        "error      held out: {:.2} % mean, {:.2} % max over {} shapes (fitted shapes: {:.2} % mean)",
        profile.held_out.mape_pct,
        profile.held_out.max_error_pct,
        profile.held_out.shapes,
        profile.held_out.fitted_mape_pct
    );
    // A profile written with --force although it cannot be trusted says
    // why on every line that matters, not only in its findings.
    for line in e
        .findings
        .iter()
        .filter(|l| l.starts_with("not to be trusted"))
    {
        eprintln!("warning: {line}");
    }
    if let Some(b) = &e.batching {
        outln!(
            "{}",
            serve::probe::describe_batching(b).replacen("batching ", "batching   ", 1)
        );
    }
    for line in &e.findings {
        outln!("found      {line}");
    }
    outln!("profile    {}", out.display());
    Ok(())
}

/// Requests drawn to find a workload's longest prompt when its horizon is
/// a duration: enough to reach far into any length distribution's tail.
const WORKLOAD_DRAWS: u64 = 100_000;

/// The longest prompt `path`'s workload sends, as `observe` would send it
/// (its horizon, at most [`WORKLOAD_DRAWS`] requests), and where that comes from.
fn longest_prompt(path: &std::path::Path) -> Result<(u32, String)> {
    let s = sim::scenario::Scenario::load(path)?;
    let specs = serve::observe::workload(&s, WORKLOAD_DRAWS)?;
    let longest = specs.iter().map(|r| r.prompt_tokens).max().ok_or_else(|| {
        anyhow::anyhow!(
            "{}: its workload sends no requests, so it says nothing about the prompts to probe",
            path.display()
        )
    })?;
    Ok((
        longest,
        format!(
            "the longest of {} requests of {}",
            specs.len(),
            path.display()
        ),
    ))
}
