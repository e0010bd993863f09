//! Synthetic trace files in each format, for the readers' throughput
//! benchmark (`servesim trace bench`): made-up rows shaped like the public
//! traces (Poisson arrivals, log-normal lengths, shared prefixes), never
//! copies of them.

use crate::rng;
use crate::scenario::{ColumnMap, TimeUnit, TraceCfg, TraceFormat};
use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes `rows` rows of `format` into `dir` and returns the trace config
/// that reads them. ServeGen is not a per-request format and is refused.
pub fn write(format: TraceFormat, rows: u64, dir: &Path, seed: u64) -> std::io::Result<TraceCfg> {
    let mut rng = rng::stream(seed, "trace.synth");
    let gaps = Exp::new(10.0).expect("rate");
    let prompt = LogNormal::from_mean_cv(2000.0, 1.0).expect("lognormal");
    let output = LogNormal::from_mean_cv(250.0, 1.0).expect("lognormal");
    let name = match format {
        TraceFormat::Azure | TraceFormat::Burstgpt | TraceFormat::Csv | TraceFormat::Requests => {
            "trace.csv"
        }
        TraceFormat::Servegen => {
            return Err(std::io::Error::other(
                "servegen describes clients, not requests: no rows to write",
            ))
        }
        _ => "0_trace.jsonl",
    };
    let path = dir.join(name);
    let mut w = BufWriter::with_capacity(1 << 20, File::create(&path)?);
    let mut cfg = TraceCfg::new(format, path.display().to_string());
    match format {
        TraceFormat::Azure => write!(w, "TIMESTAMP,ContextTokens,GeneratedTokens")?,
        TraceFormat::Burstgpt => write!(
            w,
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
        )?,
        TraceFormat::Requests => write!(w, "id,arrival_s,replica,prompt_tokens,output_tokens")?,
        TraceFormat::Csv => {
            write!(w, "t,prompt,output")?;
            cfg.columns = Some(ColumnMap {
                arrival: "t".into(),
                prompt: "prompt".into(),
                output: "output".into(),
                session: None,
                hashes: None,
                n: None,
            });
            cfg.time_unit = Some(TimeUnit::Ms);
        }
        TraceFormat::Jsonl => {
            cfg.columns = Some(ColumnMap {
                arrival: "t".into(),
                prompt: "in".into(),
                output: "out".into(),
                session: Some("user".into()),
                hashes: None,
                n: None,
            });
        }
        _ => {}
    }
    let mut t = 0.0f64;
    // Azure stamps: 2023-11-16 18:00:00 plus t.
    for i in 0..rows {
        t += gaps.sample(&mut rng);
        let p = (prompt.sample(&mut rng) as u64).clamp(1, 100_000);
        let o = (output.sample(&mut rng) as u64).clamp(1, 8_000);
        match format {
            TraceFormat::Azure => {
                // From 2023-11-16 18:00:00 (day 19677 of the epoch).
                let s = 19_677.0 * 86_400.0 + 18.0 * 3600.0 + t;
                let day = (s / 86_400.0).floor();
                let (y, mo, d) = civil_from_days(day as i64);
                let r = s - day * 86_400.0;
                let (h, m, sec) = ((r / 3600.0) as u64, ((r % 3600.0) / 60.0) as u64, r % 60.0);
                // CRLF, and no newline after the last row, as the real files.
                write!(
                    w,
                    "\r\n{y:04}-{mo:02}-{d:02} {h:02}:{m:02}:{sec:010.7},{p},{o}"
                )?;
            }
            TraceFormat::Burstgpt => {
                let model = if rng.random::<f64>() < 0.8 {
                    "ChatGPT"
                } else {
                    "GPT-4"
                };
                let o = if rng.random::<f64>() < 0.02 { 0 } else { o };
                write!(
                    w,
                    "\n{},{model},{p},{o},{},Conversation log",
                    t.round() as u64,
                    p + o
                )?;
            }
            TraceFormat::Requests => write!(w, "\n{i},{t:.6},0,{p},{o}")?,
            TraceFormat::Csv => write!(w, "\n{:.3},{p},{o}", t * 1000.0)?,
            TraceFormat::Jsonl => writeln!(
                w,
                "{{\"t\": {t:.6}, \"in\": {p}, \"out\": {o}, \"user\": \"u{}\"}}",
                i % 997
            )?,
            TraceFormat::Mooncake | TraceFormat::Bailian => {
                let block = if format == TraceFormat::Mooncake {
                    512
                } else {
                    16
                };
                let n = p.div_ceil(block);
                // A few shared system prompts, then unique blocks.
                let shared = rng.random_range(0..8u64);
                let mut ids = String::new();
                for b in 0..n {
                    let id = if b < 2 {
                        shared * 2 + b
                    } else {
                        1_000 + i * 400 + b
                    };
                    if b > 0 {
                        ids.push_str(", ");
                    }
                    ids.push_str(&id.to_string());
                }
                if format == TraceFormat::Mooncake {
                    writeln!(w, "{{\"timestamp\": {}, \"input_length\": {p}, \"output_length\": {o}, \"hash_ids\": [{ids}]}}", (t * 1000.0) as u64)?;
                } else {
                    let parent = if i > 0 && rng.random::<f64>() < 0.3 {
                        (i - 1) as i64
                    } else {
                        -1
                    };
                    writeln!(w, "{{\"chat_id\": {i}, \"parent_chat_id\": {parent}, \"timestamp\": {t:.3}, \"input_length\": {p}, \"output_length\": {o}, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [{ids}]}}")?;
                }
            }
            TraceFormat::Ragpulse => {
                let sys = rng.random_range(0..20u64);
                let passages: Vec<String> = (0..6)
                    .map(|_| rng.random_range(100..2100u64).to_string())
                    .collect();
                writeln!(
                    w,
                    "{{\"timestamp\": \"{}\", \"input_length\": {p}, \"output_length\": {o}, \"hash_ids\": {{\"sys_prompt\": [{sys}], \"passages_ids\": [{}], \"history\": [{}], \"web_search\": [], \"user_input\": [{}]}}, \"session_id\": \"s{}\"}}",
                    t.round() as u64,
                    passages.join(", "),
                    3000 + i % 5000,
                    10_000 + i % 5000,
                    i % 3000
                )?;
            }
            TraceFormat::Servegen => unreachable!("refused above"),
        }
    }
    w.flush()?;
    if format == TraceFormat::Ragpulse {
        let side =
            |name: &str, key: &str, ids: std::ops::Range<u64>, len: u64| -> std::io::Result<()> {
                let mut f = BufWriter::new(File::create(dir.join(name))?);
                for id in ids {
                    writeln!(
                        f,
                        "{{\"{key}\": {id}, \"token_length\": {}}}",
                        50 + (id * 37) % len
                    )?;
                }
                f.flush()
            };
        side("1_sys_prompt.jsonl", "sys_prompt_id", 0..20, 512)?;
        side("2_passages.jsonl", "passage_id", 100..2100, 400)?;
        side("3_history.jsonl", "history_id", 3000..8000, 300)?;
        side("4_user_input.jsonl", "user_input_id", 10_000..15_000, 60)?;
        side("5_web_search.jsonl", "web_search_id", 0..0, 1)?;
    }
    Ok(cfg)
}

/// The date of a day number since 1970-01-01 (Hinnant, `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::trace::stats::trace_stats;
    use crate::workload::Context;

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(civil_from_days(19_677), (2023, 11, 16));
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn every_format_reads_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        for f in TraceFormat::ALL {
            if f == TraceFormat::Servegen {
                assert!(write(f, 10, dir.path(), 1).is_err());
                continue;
            }
            let sub = dir.path().join(f.name());
            std::fs::create_dir_all(&sub).unwrap();
            let cfg = write(f, 500, &sub, 1).unwrap();
            let s = trace_stats(&cfg, "t", &Context::new("<bench>", &sub, 1))
                .unwrap_or_else(|e| panic!("{}: {e}", f.name()));
            assert_eq!(s.requests, 500, "{}", f.name());
            assert_eq!(s.read.out_of_order, 0, "{}", f.name());
            // 10 requests/s (BurstGPT rounds times to whole seconds).
            assert!(
                (s.rate_rps / 10.0 - 1.0).abs() < 0.15,
                "{}: {}",
                f.name(),
                s.rate_rps
            );
            assert!(
                s.prompt.mean > 1000.0 && s.prompt.mean < 3000.0,
                "{}: {:?}",
                f.name(),
                s.prompt
            );
        }
    }
}
