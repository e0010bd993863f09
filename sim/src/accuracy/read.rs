//! Reading measured results: a path is a file or a servesim result folder;
//! the format is detected from the content, never from the file name, so a
//! renamed export still reads.

use super::{aiconfigurator, genai_perf, guidellm, inference_perf, json, observe, vllm};
use super::{AccuracyError, MeasuredPoint};
use serde::Serialize;
use std::path::Path;

/// The benchmark result formats `accuracy` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Vllm,
    GenaiPerf,
    Guidellm,
    InferencePerf,
    Aiconfigurator,
    Observe,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Vllm => "vllm-bench",
            Format::GenaiPerf => "genai-perf",
            Format::Guidellm => "guidellm",
            Format::InferencePerf => "inference-perf",
            Format::Aiconfigurator => "aiconfigurator",
            Format::Observe => "servesim-observe",
        }
    }
}

const KNOWN: &str =
    "vLLM `bench serve --save-result` JSON, genai-perf/AIPerf profile export JSON, \
GuideLLM report JSON, inference-perf report JSON, aiconfigurator silicon CSV, \
or a servesim observe folder (summary.json)";

/// Reads the measured points in `path` (a file, or a folder holding a
/// servesim `summary.json`).
pub fn read_path(path: &Path) -> Result<Vec<MeasuredPoint>, AccuracyError> {
    let source = path.display().to_string();
    let file = if path.is_dir() {
        path.join("summary.json")
    } else {
        path.to_path_buf()
    };
    let text = crate::input_file::read_result(&file, "measured points")
        .map_err(|e| AccuracyError::new(e.to_string()))?;
    read(&text, &source)
}

/// Reads the measured points in `text`, naming them after `source`.
pub fn read(text: &str, source: &str) -> Result<Vec<MeasuredPoint>, AccuracyError> {
    if aiconfigurator::detect(text) {
        return aiconfigurator::read(text, source);
    }
    let v = json::parse_lenient(text).map_err(|e| {
        AccuracyError::new(format!(
            "{source}: not a known result format (not JSON: {e}); expected {KNOWN}"
        ))
    })?;
    if observe::detect(&v) {
        observe::read(&v, source)
    } else if vllm::detect(&v) {
        vllm::read(&v, source)
    } else if genai_perf::detect(&v) {
        genai_perf::read(&v, source)
    } else if guidellm::detect(&v) {
        guidellm::read(&v, source)
    } else if inference_perf::detect(&v) {
        inference_perf::read(&v, source)
    } else {
        Err(AccuracyError::new(format!(
            "{source}: JSON of an unknown result format; expected {KNOWN}"
        )))
    }
}

#[cfg(test)]
mod tests {
    //! Each reader on a sample written from its format's documentation
    //! (`testdata/`; illustrative values, not measurements).
    use super::*;
    use crate::accuracy::{Deployment, Lengths, Load, Metric, Stat, WorkerLayout};

    fn value(p: &MeasuredPoint, metric: Metric, stat: Stat) -> Option<f64> {
        p.measured
            .iter()
            .find(|m| m.metric == metric && m.stat == stat)
            .map(|m| m.ms)
    }

    #[test]
    fn vllm_bench_serve_result() {
        let ps = read(include_str!("testdata/vllm-bench.json"), "v.json").unwrap();
        assert_eq!(ps.len(), 1);
        let p = &ps[0];
        assert_eq!(p.format, Format::Vllm);
        assert_eq!(p.model.as_deref(), Some("meta-llama/Llama-3.1-8B-Instruct"));
        assert_eq!(p.engine.as_deref(), Some("vllm"));
        // `"inf"` rate with max_concurrency: a closed loop.
        assert_eq!(p.load, Some(Load::Concurrency { users: 4 }));
        assert_eq!(p.requests, Some(16));
        assert!(
            matches!(&p.prompt, Some(Lengths::Recorded { tokens }) if tokens.len() == 16 && tokens[0] == 512)
        );
        assert_eq!(value(p, Metric::Ttft, Stat::Mean), Some(31.5));
        assert_eq!(value(p, Metric::Ttft, Stat::P50), Some(30.2));
        assert_eq!(value(p, Metric::Tpot, Stat::P99), Some(7.9));
        assert_eq!(value(p, Metric::E2e, Stat::Mean), Some(971.3));
        assert_eq!(value(p, Metric::Itl, Stat::P90), None);
    }

    #[test]
    fn vllm_open_loop_rate_and_burstiness() {
        let text = r#"{"backend": "vllm", "model_id": "m", "request_rate": 4.0, "burstiness": 0.25,
            "max_concurrency": null, "completed": 3, "total_input_tokens": 300,
            "total_output_tokens": 60, "mean_ttft_ms": 20.0, "median_ttft_ms": NaN}"#;
        let p = &read(text, "r.json").unwrap()[0];
        assert_eq!(p.load, Some(Load::Rate { rate: 4.0, cv: 2.0 }));
        assert_eq!(p.prompt, Some(Lengths::Mean { tokens: 100.0 }));
        // NaN is "no value", not a measurement.
        assert_eq!(p.measured.len(), 1);
        let burst = r#"{"request_rate": "inf", "max_concurrency": null, "num_prompts": 50,
            "completed": 50, "mean_ttft_ms": 900.0}"#;
        let p = &read(burst, "b.json").unwrap()[0];
        assert_eq!(p.load, Some(Load::Concurrency { users: 50 }));
    }

    #[test]
    fn genai_perf_profile_export() {
        let p = &read(include_str!("testdata/genai-perf.json"), "g.json").unwrap()[0];
        assert_eq!(p.format, Format::GenaiPerf);
        assert_eq!(p.load, Some(Load::Rate { rate: 2.0, cv: 1.0 }));
        assert_eq!(p.model.as_deref(), Some("meta-llama/Llama-3.1-8B-Instruct"));
        assert_eq!(p.prompt, Some(Lengths::Mean { tokens: 512.0 }));
        assert_eq!(value(p, Metric::Ttft, Stat::Mean), Some(35.0));
        // genai-perf's inter-token latency is per-request TPOT.
        assert_eq!(value(p, Metric::Tpot, Stat::P99), Some(8.3));
        assert_eq!(value(p, Metric::E2e, Stat::P90), Some(1040.0));
    }

    #[test]
    fn genai_perf_units_convert_and_unknown_units_are_named() {
        let ok = r#"{"time_to_first_token": {"unit": "ns", "avg": 2000000.0},
                     "input_config": {"concurrency": 2}}"#;
        let p = &read(ok, "g").unwrap()[0];
        assert_eq!(value(p, Metric::Ttft, Stat::Mean), Some(2.0));
        assert_eq!(p.load, Some(Load::Concurrency { users: 2 }));
        let bad = r#"{"time_to_first_token": {"unit": "fortnights", "avg": 2.0}}"#;
        let e = read(bad, "g.json").unwrap_err().to_string();
        assert!(
            e.contains("g.json") && e.contains("time_to_first_token.unit"),
            "{e}"
        );
    }

    #[test]
    fn guidellm_report_gives_a_point_per_benchmark() {
        let ps = read(include_str!("testdata/guidellm.json"), "gl.json").unwrap();
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].load, Some(Load::Concurrency { users: 1 }));
        assert_eq!(ps[1].load, Some(Load::Concurrency { users: 4 }));
        assert_eq!(ps[1].source, "gl.json#benchmarks.1");
        assert_eq!(value(&ps[1], Metric::Ttft, Stat::Mean), Some(31.0));
        // request_latency is in seconds.
        assert!((value(&ps[0], Metric::E2e, Stat::Mean).unwrap() - 905.0).abs() < 1e-9);
        assert_eq!(value(&ps[0], Metric::Tpot, Stat::P50), Some(6.9));
        assert_eq!(ps[0].requests, Some(20));
        assert_eq!(ps[0].output, Some(Lengths::Mean { tokens: 128.0 }));
    }

    #[test]
    fn inference_perf_lifecycle_report() {
        let p = &read(include_str!("testdata/inference-perf.json"), "i.json").unwrap()[0];
        assert_eq!(p.format, Format::InferencePerf);
        assert_eq!(p.load, Some(Load::Rate { rate: 2.0, cv: 1.0 }));
        assert_eq!(p.requests, Some(24));
        assert!((value(p, Metric::Ttft, Stat::Mean).unwrap() - 34.0).abs() < 1e-9);
        assert!((value(p, Metric::Tpot, Stat::P50).unwrap() - 7.6).abs() < 1e-9);
        assert_eq!(p.output, Some(Lengths::Mean { tokens: 128.0 }));
    }

    #[test]
    fn aiconfigurator_silicon_rows() {
        let ps = read(include_str!("testdata/aiconfigurator.csv"), "s.csv").unwrap();
        assert_eq!(ps.len(), 6);
        let p = &ps[0];
        assert_eq!(p.source, "s.csv:2");
        assert_eq!(p.id, "llama8b_h100_sxm_vllm_bf16_agg_512x64_c4");
        assert_eq!(p.chip.as_deref(), Some("h100_sxm"));
        assert_eq!(p.load, Some(Load::Concurrency { users: 4 }));
        assert_eq!(p.prompt, Some(Lengths::Fixed { tokens: 512 }));
        assert_eq!(value(p, Metric::Ttft, Stat::Mean), Some(32.5));
        assert_eq!(value(p, Metric::Tpot, Stat::Mean), Some(7.1));
        // No silicon_concurrency: the id's `c8`.
        assert_eq!(ps[1].load, Some(Load::Concurrency { users: 8 }));
        assert_eq!(
            ps[1].deployment,
            Some(Deployment::Agg {
                workers: 1,
                layout: WorkerLayout {
                    tp: 4,
                    pp: 1,
                    attention_dp: 1,
                    moe_tp: 4,
                    moe_ep: 1
                }
            })
        );
        assert_eq!(ps[1].quant_mode.as_deref(), Some("fp8"));
        assert_eq!(ps[2].deployment, Some(Deployment::DisaggUnrecorded));
        let tp4 = WorkerLayout {
            tp: 4,
            pp: 1,
            attention_dp: 1,
            moe_tp: 1,
            moe_ep: 1,
        };
        assert_eq!(
            ps[5].deployment,
            Some(Deployment::Disagg {
                prefill_workers: 1,
                prefill: tp4,
                decode_workers: 1,
                decode: tp4
            })
        );
    }

    #[test]
    fn aiconfigurator_bad_cells_name_the_line_and_column() {
        let text = include_str!("testdata/aiconfigurator.csv").replacen(",512,64,", ",5x2,64,", 1);
        let e = read(&text, "s.csv").unwrap_err().to_string();
        assert!(e.contains("s.csv: line 2: isl"), "{e}");
        let e = read("id,silicon_ttft_ms\nx,1\n", "t.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing column \"backend\""), "{e}");
    }

    #[test]
    fn unknown_json_says_what_is_read() {
        let e = read("{\"a\": 1}", "x.json").unwrap_err().to_string();
        assert!(e.contains("x.json") && e.contains("GuideLLM"), "{e}");
        let e = read("not json", "y.txt").unwrap_err().to_string();
        assert!(e.contains("y.txt") && e.contains("not JSON"), "{e}");
    }
}
