//! `servesim trace stats` and `servesim trace bench`: what a trace file
//! holds, and how fast the readers stream (a benchmark command, not a
//! timed test).

use crate::cli::{TraceCommand, TraceOpts};
use anyhow::{anyhow, bail, Context as _, Result};
use sim::scenario::{validate_trace_options, ColumnMap, TimeUnit, TraceCfg, TraceFormat};
use sim::workload::trace::servegen::{self, ServeGenStats};
use sim::workload::trace::stats::{trace_stats, LengthStats, TraceStats};
use sim::workload::trace::{synth, Replay};
use sim::workload::{Context, RequestSource};
use std::path::Path;
use std::time::Instant;

pub fn run(cmd: TraceCommand) -> Result<()> {
    match cmd {
        TraceCommand::Stats { file, opts, json } => stats(&file, &opts, json),
        TraceCommand::Bench { format, rows, file } => match file {
            Some(f) => bench_file(&f, &format),
            None => bench(&format, rows),
        },
    }
}

/// The scenario key of a trace option, as its command-line flag.
fn flag_of(key: &str) -> String {
    let k = key.trim_start_matches("trace.");
    let k = match k {
        "start_s" => "start",
        "end_s" => "end",
        "max_requests" => "limit",
        "path" => return "FILE".into(),
        other => other,
    };
    format!("--{}", k.replace('_', "-"))
}

fn parse_columns(s: &str) -> Result<ColumnMap> {
    let mut m = ColumnMap {
        arrival: String::new(),
        prompt: String::new(),
        output: String::new(),
        session: None,
        hashes: None,
        n: None,
    };
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| anyhow!("--columns: {part:?} is not key=column"))?;
        let v = v.trim().to_string();
        match k.trim() {
            "arrival" => m.arrival = v,
            "prompt" => m.prompt = v,
            "output" => m.output = v,
            "session" => m.session = Some(v),
            "hashes" => m.hashes = Some(v),
            "n" => m.n = Some(v),
            other => bail!(
                "--columns: unknown key {other:?}; allowed: arrival, prompt, output, session, hashes, n"
            ),
        }
    }
    for (k, v) in [
        ("arrival", &m.arrival),
        ("prompt", &m.prompt),
        ("output", &m.output),
    ] {
        if v.is_empty() {
            bail!("--columns: missing {k}=<column>");
        }
    }
    Ok(m)
}

fn trace_cfg(file: &Path, o: &TraceOpts) -> Result<TraceCfg> {
    let format = match &o.format {
        Some(f) => TraceFormat::from_name(f).expect("checked by clap"),
        None => {
            let d = sim::workload::trace::detect::detect(file, o.columns.is_some())
                .map_err(anyhow::Error::msg)?;
            eprintln!(
                "{}: format {} (from its {}; --format overrides)",
                file.display(),
                d.format.name(),
                d.because
            );
            d.format
        }
    };
    let time_unit = o
        .time_unit
        .as_deref()
        .map(|u| match u {
            "s" => Ok(TimeUnit::S),
            "ms" => Ok(TimeUnit::Ms),
            "us" => Ok(TimeUnit::Us),
            "ns" => Ok(TimeUnit::Ns),
            "datetime" => Ok(TimeUnit::Datetime),
            other => Err(anyhow!(
                "--time-unit: unknown unit {other:?}; allowed: s, ms, us, ns, datetime"
            )),
        })
        .transpose()?;
    let cfg = TraceCfg {
        format,
        path: file.display().to_string(),
        time_scale: o.time_scale,
        rate: o.rate,
        start_s: o.start,
        end_s: o.end,
        max_requests: o.limit,
        tenant_column: o.tenant_column.clone(),
        lenient: o.lenient,
        model: o.model.clone(),
        log_type: o.log_type.clone(),
        drop_failures: o.drop_failures,
        columns: o.columns.as_deref().map(parse_columns).transpose()?,
        time_unit,
        block_tokens: o.block_tokens,
    };
    if let Err(m) = validate_trace_options(&cfg) {
        let (key, msg) = m.split_once(": ").unwrap_or(("", &m));
        bail!("{}: {msg}", flag_of(key));
    }
    Ok(cfg)
}

fn stats(file: &Path, o: &TraceOpts, json: bool) -> Result<()> {
    let cfg = trace_cfg(file, o)?;
    let ctx = Context::new("<command line>", Path::new("."), 0);
    if cfg.format == TraceFormat::Servegen {
        // The statistics describe the descriptors as published.
        for (given, flag) in [
            (cfg.time_scale.is_some(), "--time-scale"),
            (cfg.rate.is_some(), "--rate"),
            (cfg.start_s.is_some(), "--start"),
            (cfg.end_s.is_some(), "--end"),
            (cfg.max_requests.is_some(), "--limit"),
        ] {
            if given {
                bail!("{flag}: servegen statistics describe the whole folder's descriptors; the option applies only when it is replayed");
            }
        }
        let s = servegen::describe(&cfg, "trace", &ctx)?;
        if json {
            outln!("{}", serde_json::to_string_pretty(&s)?);
        } else {
            print_servegen(&s);
        }
        return Ok(());
    }
    let s = trace_stats(&cfg, "trace", &ctx)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print_stats(&s);
    }
    Ok(())
}

fn len_row(name: &str, l: &LengthStats) {
    outln!(
        "  {name:<8} {:>10.1} {:>9} {:>9} {:>9} {:>9}",
        l.mean,
        fmt_num(l.p50),
        fmt_num(l.p90),
        fmt_num(l.p99),
        fmt_num(l.max)
    );
}

/// Whole numbers without decimals, others with one or two.
fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn print_stats(s: &TraceStats) {
    let r = &s.read;
    let filtered: u64 = r.filtered.values().sum();
    outln!("trace      {} ({})", s.path, s.format);
    outln!(
        "requests   {} from {} rows ({} skipped, {} filtered{}, {} out of order)",
        s.requests,
        r.rows,
        r.skipped_lines,
        filtered,
        if r.filtered.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                r.filtered
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        r.out_of_order
    );
    if let Some(m) = &r.first_skipped {
        outln!("           first skipped: {m}");
    }
    if r.zero_prompt + r.zero_output > 0 {
        outln!(
            "           zero-length rows replayed with 1 token: {} prompts, {} outputs",
            r.zero_prompt,
            r.zero_output
        );
    }
    if r.time_scale != 1.0 {
        outln!("           times divided by {:.6}", r.time_scale);
    }
    outln!("span       {:.3} s", s.span_s);
    outln!(
        "rate       {} req/s (mean gap {:.4} s, IAT CV {:.3})",
        sim::sig_figs::rate(s.rate_rps),
        s.iat_mean_s,
        s.iat_cv
    );
    outln!(
        "  {:<8} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "tokens",
        "mean",
        "p50",
        "p90",
        "p99",
        "max"
    );
    len_row("prompt", &s.prompt);
    len_row("output", &s.output);
    if let Some(p) = &s.prefix {
        outln!(
            "prefix     infinite-cache hit ratio {:.3} of blocks, {:.3} of prompt tokens ({} blocks of {} tokens, {} unique)",
            p.block_hit, p.token_hit, p.blocks, p.block_tokens, p.unique_blocks
        );
    }
    if let Some(n) = s.sessions {
        outln!(
            "sessions   {n} ({:.2} requests each)",
            s.requests as f64 / n as f64
        );
    }
    if !s.tenants.is_empty() {
        let t: Vec<String> = s.tenants.iter().map(|(k, v)| format!("{k} {v}")).collect();
        outln!("tenants    {}", t.join(", "));
    }
    for (k, v) in &s.extra {
        outln!("           {k} {v:.3}");
    }
}

fn print_servegen(s: &ServeGenStats) {
    outln!(
        "servegen   {}: {} clients, {} windows of 600 s, span {:.0} s",
        s.path,
        s.clients,
        s.windows,
        s.span_s
    );
    let a = &s.aggregate_rate;
    outln!(
        "rate       aggregate mean {}, p50 {}, p99 {}, max {} req/s",
        sim::sig_figs::rate(a.mean),
        sim::sig_figs::rate(a.p50),
        sim::sig_figs::rate(a.p99),
        sim::sig_figs::rate(a.max)
    );
    outln!(
        "clients    active client-windows {:.3}; IAT CV p50 {:.2}, p90 {:.2}; top-1 {:.1} %, top-10 {:.1} % of requests",
        s.active_share,
        s.cv_p50,
        s.cv_p90,
        s.top1_share * 100.0,
        s.top10_share * 100.0
    );
    outln!(
        "patterns   Gamma {}, Weibull {}",
        s.gamma_windows,
        s.weibull_windows
    );
    if s.input_tokens.is_some() || s.output_tokens.is_some() {
        outln!(
            "  {:<8} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "tokens",
            "mean",
            "p50",
            "p90",
            "p99",
            "max"
        );
    }
    if let Some(l) = &s.input_tokens {
        len_row("input", l);
    }
    if let Some(l) = &s.output_tokens {
        len_row("output", l);
    }
    if s.skipped_lines > 0 {
        outln!("skipped    {} malformed lines", s.skipped_lines);
    }
}

/// Peak and current resident memory of this process (Linux), MiB.
fn rss() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Times reading `cfg` through the replay pipeline: (requests, seconds).
fn time_read(cfg: &TraceCfg, ctx: &Context) -> Result<(u64, f64)> {
    let t = Instant::now();
    let mut r = Replay::open(cfg, "trace", ctx)?;
    let (mut n, mut tokens) = (0u64, 0u64);
    while let Some(q) = r.next_request() {
        n += 1;
        tokens += q.prompt_tokens as u64 + q.prefix_hashes.len() as u64;
    }
    r.finish()?;
    std::hint::black_box(tokens);
    Ok((n, t.elapsed().as_secs_f64()))
}

fn print_bench_header() {
    outln!(
        "{:<10} {:>10} {:>9} {:>14} {:>9} {:>14} {:>12}",
        "format",
        "file MiB",
        "read s",
        "rows/s",
        "MiB/s",
        "peak RSS MiB",
        "RSS now MiB"
    );
}

fn print_bench_row(f: TraceFormat, bytes: u64, rows: u64, secs: f64) {
    let (peak, now) = rss();
    let mib = bytes as f64 / (1024.0 * 1024.0);
    outln!(
        "{:<10} {:>10.1} {:>9.3} {:>14.0} {:>9.1} {:>14.1} {:>12.1}",
        f.name(),
        mib,
        secs,
        rows as f64 / secs,
        mib / secs,
        peak,
        now
    );
}

/// `trace bench --file`: the readers' speed on a given trace.
fn bench_file(file: &Path, formats: &[String]) -> Result<()> {
    let [format] = formats else {
        bail!("--file needs exactly one --format");
    };
    let o = TraceOpts {
        format: Some(format.clone()),
        lenient: false,
        time_scale: None,
        rate: None,
        start: None,
        end: None,
        limit: None,
        tenant_column: None,
        model: None,
        log_type: None,
        drop_failures: false,
        columns: None,
        time_unit: None,
        block_tokens: None,
    };
    let cfg = trace_cfg(file, &o)?;
    let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    let (n, secs) = time_read(&cfg, &Context::new("<command line>", Path::new("."), 1))?;
    print_bench_header();
    print_bench_row(cfg.format, bytes, n, secs);
    Ok(())
}

fn bench(formats: &[String], rows: u64) -> Result<()> {
    let formats: Vec<TraceFormat> = if formats.is_empty() {
        TraceFormat::ALL
            .into_iter()
            .filter(|f| *f != TraceFormat::Servegen)
            .collect()
    } else {
        formats
            .iter()
            .map(|f| TraceFormat::from_name(f).expect("checked by clap"))
            .collect()
    };
    let dir = std::env::temp_dir().join(format!("servesim-trace-bench-{}", std::process::id()));
    outln!(
        "trace bench: {rows} synthetic rows per format, read through the replay pipeline, 1 thread"
    );
    print_bench_header();
    for f in formats {
        std::fs::create_dir_all(&dir)?;
        let cfg = synth::write(f, rows, &dir, 1)
            .with_context(|| format!("cannot write a synthetic {} trace", f.name()))?;
        let bytes: u64 = std::fs::read_dir(&dir)?
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        let (n, secs) = time_read(&cfg, &Context::new("<bench>", &dir, 1))?;
        if n != rows {
            bail!("{}: read {n} of {rows} rows", f.name());
        }
        print_bench_row(f, bytes, rows, secs);
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
