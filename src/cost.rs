//! `servesim cost`: one iteration priced and explained term by term, a decode
//! sweep over batch sizes with its knee, a lone request's TTFT and TPOT as
//! `simulate` reports them, and (`--fidelity`) the default model against the
//! public GPU measurements in the shared data. The pricing lives in
//! `sim::cost`; this file parses flags and prints.

use crate::ranges;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Serialize;
use sim::cost::{self, Breakdown, CostModel, LoneRequest, SweepRow};
use sim::Scenario;
use std::path::{Path, PathBuf};

/// `servesim cost`.
#[derive(Args, Debug)]
pub struct CostArgs {
    /// Scenario TOML file (optional: the flags below can stand alone or
    /// override its keys).
    pub scenario: Option<PathBuf>,
    /// Model preset (`model.preset`).
    #[arg(long)]
    pub model: Option<String>,
    /// Hardware preset (`hardware.preset`).
    #[arg(long)]
    pub hardware: Option<String>,
    /// Tensor-parallel GPUs per replica (`fleet.tensor_parallel`).
    #[arg(long, allow_negative_numbers = true)]
    pub tp: Option<u32>,
    /// Pipeline stages per replica (`fleet.pipeline_parallel`).
    #[arg(long, allow_negative_numbers = true)]
    pub pp: Option<u32>,
    /// Weight dtype (`model.weight_dtype`).
    #[arg(long, value_parser = dtypes())]
    pub dtype: Option<String>,
    /// KV-cache dtype (`model.kv_dtype`).
    #[arg(long, value_parser = dtypes())]
    pub kv_dtype: Option<String>,
    /// Engine runtime whose host time is added (`engine.runtime`).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(sim::cost::runtime::EngineRuntime::ALL.map(|r| r.name())))]
    pub runtime: Option<String>,
    /// A prefill in the batch: TOKENS, or TOKENS@CACHED for a chunk on top of
    /// cached context. Repeatable: every --prefill and --decode joins one
    /// mixed batch (see --separate).
    #[arg(long, value_name = "TOKENS[@CACHED]")]
    pub prefill: Vec<String>,
    /// Decoding sequences in the batch: N@CONTEXT. Repeatable, into the
    /// same batch as the prefills.
    #[arg(long, value_name = "N@CONTEXT")]
    pub decode: Vec<String>,
    /// Price each --prefill and each --decode as a batch of its own instead
    /// of one mixed batch.
    #[arg(long)]
    pub separate: bool,
    /// Also price a request alone on a replica: PROMPT,OUTPUT tokens.
    #[arg(long, value_name = "PROMPT,OUTPUT")]
    pub lone_request: Option<String>,
    /// Context of every sequence in the decode sweep.
    #[arg(long, default_value_t = 1024, value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
    pub context: u64,
    /// Largest batch of the sweep [default: the engine's max_num_seqs].
    #[arg(long, allow_negative_numbers = true)]
    pub max_batch: Option<u32>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Compare the default model with the measured tables in the shared data
    /// instead (see --data).
    #[arg(long)]
    pub fidelity: bool,
    /// Shared data folder for --fidelity [default: $SERVESIM_SHARED_DATA, else ../shared/data].
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
}

/// The dtypes a scenario's `model.weight_dtype` and `model.kv_dtype` take.
fn dtypes() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(sim::catalog::Dtype::ALL.map(|d| d.name()))
}

/// One priced batch, for printing and JSON.
#[derive(Serialize)]
struct Priced {
    batch: String,
    breakdown: Option<Breakdown>,
    total_ms: f64,
}

#[derive(Serialize)]
struct Report<'a> {
    scenario: String,
    source: String,
    gpus: u32,
    batches: &'a [Priced],
    sweep_context: u64,
    sweep: &'a [SweepRow],
    knee: Option<u32>,
    lone_request: Option<LoneRequest>,
}

/// Runs `servesim cost`.
pub fn run(args: CostArgs) -> Result<()> {
    if args.fidelity {
        return fidelity(&args);
    }
    let scenario = resolve(&args)?;
    let cost_model: Box<dyn CostModel> = match &scenario.profile {
        Some((path, p)) => Box::new(sim::profiled::Profiled::new(p, path)),
        None => Box::new(scenario.roofline()),
    };
    let mut batches = batches(&args)?;
    if batches.is_empty() {
        let mut p = cost::BatchShape::default();
        p.add_prefill(2048, 0);
        let mut d = cost::BatchShape::default();
        for _ in 0..64 {
            d.add_decode(1024);
        }
        batches.push(("prefill 2048 tokens on 0 cached".into(), p));
        batches.push(("64 decodes at context 1024".into(), d));
    }
    let priced: Vec<Priced> = batches
        .iter()
        .map(|(label, b)| Priced {
            batch: label.clone(),
            breakdown: cost_model.explain(b),
            total_ms: cost_model.iteration_time(b) as f64 / 1e6,
        })
        .collect();
    let max_batch = args.max_batch.unwrap_or(scenario.engine().max_num_seqs);
    if !(1..=1 << 16).contains(&max_batch) {
        bail!("--max-batch: must be 1 to 65536, got {max_batch}");
    }
    // A step priced beyond the context the replicas serve is a number no
    // run can produce.
    let limit = scenario.max_model_len as u64;
    if !(1..=limit).contains(&args.context) {
        bail!(
            "--context: must be 1 to {limit} (the max_model_len of {}), got {}",
            scenario.model.name,
            args.context
        );
    }
    let sizes: Vec<u32> = std::iter::successors(Some(1u32), |b| Some(b * 2))
        .take_while(|&b| b <= max_batch)
        .collect();
    let gpus = scenario.parallel.gpus();
    let sweep = cost::decode_sweep(cost_model.as_ref(), args.context, gpus, &sizes);
    let knee = cost::knee(&sweep);
    let lone = match &args.lone_request {
        Some(spec) => {
            let (p, o) = parse_lone(spec)?;
            Some(cost::lone_request(cost_model.as_ref(), p, o))
        }
        None => None,
    };
    let report = Report {
        scenario: scenario.name().to_string(),
        source: cost_model.source(),
        gpus,
        batches: &priced,
        sweep_context: args.context,
        sweep: &sweep,
        knee,
        lone_request: lone,
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&scenario, &report);
    }
    Ok(())
}

/// What a flags-only run adds to the flags: a name and the workload and
/// horizon every scenario must have (the cost command prices no workload).
const BASE: &str = r#"
name = "cost"
[horizon]
requests = 1
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 1 }
output_tokens = { dist = "fixed", value = 1 }
"#;

/// The scenario the flags describe: the file's table (or an empty one) with
/// each given flag written to its key.
fn resolve(args: &CostArgs) -> Result<Scenario> {
    if let Some(m) = &args.model {
        if sim::catalog::model(m).is_none() {
            bail!("--model: unknown model preset '{m}' (see `servesim catalog models`)");
        }
    }
    if let Some(h) = &args.hardware {
        if sim::catalog::hardware(h).is_none() {
            bail!("--hardware: unknown hardware preset '{h}' (see `servesim catalog hardware`)");
        }
    }
    if let Some(r) = &args.runtime {
        if !cost::EngineRuntime::ALL.iter().any(|k| k.name() == r) {
            bail!("--runtime: unknown runtime '{r}'; allowed: cuda-graph, eager-2023, vllm, sglang, trtllm");
        }
    }
    let (mut table, origin) = match &args.scenario {
        Some(path) => {
            let origin = path.display().to_string();
            let text = sim::input_file::read_config(path, "scenario file")?;
            // The file is validated with the flags applied (below): a key a
            // flag overrides may not be valid without it (a model that
            // needs the --tp given). A syntax error reads as the loader
            // words it.
            let table = match text.parse::<toml::Table>() {
                Ok(t) => t,
                Err(_) => {
                    return Err(match Scenario::from_toml_str(&text, &origin) {
                        Err(e) => e.into(),
                        Ok(_) => anyhow!("{origin}: not a TOML table"),
                    })
                }
            };
            (table, origin)
        }
        None => {
            if args.model.is_none() || args.hardware.is_none() {
                bail!("give a scenario file, or both --model and --hardware");
            }
            // The workload is not priced; the scenario format needs one.
            (BASE.parse::<toml::Table>()?, "command line".to_string())
        }
    };
    // Each flag writes its key, creating the table it lives in when the
    // file has none (a scenario without `[fleet]` still takes --tp).
    let flags: [(&str, &str, Option<toml::Value>); 7] = [
        (
            "--model",
            "model.preset",
            args.model.clone().map(Into::into),
        ),
        (
            "--hardware",
            "hardware.preset",
            args.hardware.clone().map(Into::into),
        ),
        (
            "--dtype",
            "model.weight_dtype",
            args.dtype.clone().map(Into::into),
        ),
        (
            "--kv-dtype",
            "model.kv_dtype",
            args.kv_dtype.clone().map(Into::into),
        ),
        (
            "--tp",
            "fleet.tensor_parallel",
            args.tp.map(|v| i64::from(v).into()),
        ),
        (
            "--pp",
            "fleet.pipeline_parallel",
            args.pp.map(|v| i64::from(v).into()),
        ),
        (
            "--runtime",
            "engine.runtime",
            args.runtime.clone().map(Into::into),
        ),
    ];
    for (flag, key, value) in flags {
        if let Some(v) = value {
            sim::config::keypath::set(&mut table, key, v)
                .map_err(|m| anyhow!("{flag}: cannot set {key} in {origin}: {m}"))?;
        }
    }
    Scenario::from_table(table, &origin).with_context(|| {
        if args.scenario.is_none() {
            "the flags describe no valid replica".to_string()
        } else {
            "with the flags applied".to_string()
        }
    })
}

/// One --prefill or --decode flag.
enum Part {
    Prefill { tokens: u64, cached: u64 },
    Decodes { n: u64, context: u64 },
}

/// The batches the flags describe: one mixed batch of every --prefill and
/// --decode, or with --separate one batch per flag. Labels name each part.
fn batches(args: &CostArgs) -> Result<Vec<(String, cost::BatchShape)>> {
    let mut parts: Vec<(String, Part)> = Vec::new();
    for spec in &args.prefill {
        let (tokens, cached) = parse_prefill(spec)?;
        parts.push((
            format!("prefill {tokens} tokens on {cached} cached"),
            Part::Prefill { tokens, cached },
        ));
    }
    for spec in &args.decode {
        let (n, context) = parse_decode(spec)?;
        parts.push((
            format!("{n} decodes at context {context}"),
            Part::Decodes { n, context },
        ));
    }
    let add = |b: &mut cost::BatchShape, part: &Part| match *part {
        Part::Prefill { tokens, cached } => b.add_prefill(tokens, cached),
        Part::Decodes { n, context } => {
            for _ in 0..n {
                b.add_decode(context);
            }
        }
    };
    if args.separate {
        return Ok(parts
            .iter()
            .map(|(label, part)| {
                let mut b = cost::BatchShape::default();
                add(&mut b, part);
                (label.clone(), b)
            })
            .collect());
    }
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    let mut mixed = cost::BatchShape::default();
    for (_, part) in &parts {
        add(&mut mixed, part);
    }
    let labels: Vec<&str> = parts.iter().map(|(l, _)| l.as_str()).collect();
    Ok(vec![(labels.join(" + "), mixed)])
}

fn number(flag: &str, spec: &str, part: &str) -> Result<u64> {
    part.trim()
        .parse::<u64>()
        .map_err(|_| anyhow!("{flag}: '{spec}' is not of the form shown in --help (a whole number expected, got '{part}')"))
}

fn parse_prefill(spec: &str) -> Result<(u64, u64)> {
    let (t, c) = spec.split_once('@').unwrap_or((spec, "0"));
    let tokens = number("--prefill", spec, t)?;
    if tokens == 0 {
        bail!("--prefill: at least one token, got '{spec}'");
    }
    Ok((tokens, number("--prefill", spec, c)?))
}

fn parse_decode(spec: &str) -> Result<(u64, u64)> {
    let Some((n, c)) = spec.split_once('@') else {
        bail!("--decode: expected N@CONTEXT (e.g. 64@1024), got '{spec}'");
    };
    let (n, c) = (number("--decode", spec, n)?, number("--decode", spec, c)?);
    if n == 0 || c == 0 || n > 1 << 20 {
        bail!("--decode: N in 1..=1048576 and CONTEXT ≥ 1, got '{spec}'");
    }
    Ok((n, c))
}

fn parse_lone(spec: &str) -> Result<(u64, u64)> {
    let Some((p, o)) = spec.split_once(',') else {
        bail!("--lone-request: expected PROMPT,OUTPUT (e.g. 1024,256), got '{spec}'");
    };
    let (p, o) = (
        number("--lone-request", spec, p)?,
        number("--lone-request", spec, o)?,
    );
    if p == 0 || o == 0 || o > 1 << 20 {
        bail!("--lone-request: PROMPT ≥ 1 and OUTPUT in 1..=1048576, got '{spec}'");
    }
    Ok((p, o))
}

fn print(s: &Scenario, r: &Report) {
    outln!(
        "cost — {}, {}, {} weights, {} KV",
        s.model.name,
        s.parallel.fleet_shape(1, &s.hardware.name),
        s.weight_dtype.name(),
        s.kv_dtype.name()
    );
    outln!("costs: {}", r.source);
    for p in r.batches {
        outln!();
        match &p.breakdown {
            Some(b) => {
                outln!(
                    "batch: {} — {} tokens, {} sequences",
                    p.batch,
                    b.tokens,
                    b.seqs
                );
                outln!("  {:<24} {:>10}  how", "term", "ms");
                for t in &b.terms {
                    outln!("  {:<24} {:>10.3}  {}", t.name, t.ms, t.detail);
                }
                let host = if b.host_ms == 0.0 {
                    String::new()
                } else if b.host_overlaps {
                    format!(", host {:.3} ms overlapped", b.host_ms)
                } else {
                    format!(", host {:.3} ms added", b.host_ms)
                };
                outln!(
                    "  {:<24} {:>10.3}  GPU {:.3} ms{host}",
                    "iteration",
                    b.total_ms(),
                    b.gpu_ms
                );
            }
            None => outln!("batch: {}: {:.3} ms", p.batch, p.total_ms),
        }
    }
    outln!();
    outln!(
        "decode sweep at context {} (one step of every sequence):",
        r.sweep_context
    );
    outln!(
        "  {:>6} {:>10} {:>12} {:>12}",
        "batch",
        "step ms",
        "tok/s/GPU",
        "tok/s/user"
    );
    for row in r.sweep {
        outln!(
            "  {:>6} {:>10.3} {:>12} {:>12}{}",
            row.batch,
            row.step_ms,
            sim::sig_figs::rate(row.tokens_per_s_per_gpu),
            sim::sig_figs::rate(row.tokens_per_s_per_user),
            if Some(row.batch) == r.knee {
                "  ← knee"
            } else {
                ""
            }
        );
    }
    match r.knee {
        Some(k) => outln!(
            "knee: batch {k} — doubling it adds less than half again in tokens/s per GPU, at a higher step time per user"
        ),
        None => outln!("knee: none up to this batch — every doubling still adds half again in throughput"),
    }
    if let Some(l) = &r.lone_request {
        outln!();
        outln!(
            "lone request {} + {} tokens: TTFT {:.3} ms, TPOT {:.3} ms (what `simulate` reports for it)",
            l.prompt_tokens,
            l.output_tokens,
            l.ttft_ms,
            l.tpot_ms
        );
    }
}

/// `servesim cost --fidelity`: the table of `sim::cost::fidelity`.
fn fidelity(args: &CostArgs) -> Result<()> {
    let dir = match &args.data {
        Some(d) => d.clone(),
        None => sim::cost::fidelity::data_dir(Path::new(".")).ok_or_else(|| {
            anyhow!(
                "--fidelity: no shared data folder (give --data DIR or set SERVESIM_SHARED_DATA)"
            )
        })?,
    };
    let fits = sim::cost::fidelity::check(&dir).map_err(|e| anyhow!("--fidelity: {e}"))?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&fits)?);
        return Ok(());
    }
    outln!(
        "default cost model vs public measurements in {}",
        dir.display()
    );
    outln!(
        "  {:<17} {:<66} {:>5} {:>8} {:>8}  worst at",
        "what",
        "table",
        "rows",
        "median",
        "worst"
    );
    for f in &fits {
        outln!(
            "  {:<17} {:<66} {:>5} {:>7.1}% {:>7.1}%  {}",
            f.kind,
            f.table,
            f.rows,
            f.median_pct,
            f.worst_pct,
            f.worst_at
        );
    }
    Ok(())
}
