//! NVIDIA aiconfigurator's silicon CSV (`systems/silicon_sample.csv` in
//! ai-dynamo/aiconfigurator): measured TTFT and TPOT of real deployments,
//! one row each, with the serving framework and version (`backend`,
//! `backend_version`), `model_path` (Hugging Face id), `system` (`h100_sxm`,
//! `b200_sxm`, `gb200`, …), `precision`, `mode` (`agg` or `disagg`), the
//! fixed `isl`/`osl`, one worker's layout (`tp_size`, `pp_size`,
//! `attention_dp_size`, `moe_tp_size`, `moe_ep_size`; `prefill_*` and
//! `decode_*` with worker counts for disaggregated rows) and
//! `silicon_ttft_ms` / `silicon_tpot_ms`. The concurrency is in
//! `silicon_data_source` as `silicon_concurrency=N` (or in the id as
//! `c<N>`); the rows come from closed-loop benchmarks at that concurrency
//! (InferenceX's `benchmark_serving.py --max-concurrency`, AIPerf's
//! `--concurrency`). The file does not say whether its figures are means or
//! medians; they are compared as means. An empty cell is "not recorded";
//! a 0 in a parallel size (some rows) is read as 1.

use super::WorkerLayout;
use super::{AccuracyError, Deployment, Format, Lengths, Load, MeasuredPoint, Metric, Stat};

/// The header cell that marks the format.
pub const MARKER: &str = "silicon_ttft_ms";

const REQUIRED: [&str; 9] = [
    "id",
    "backend",
    "model_path",
    "system",
    "mode",
    "isl",
    "osl",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
];

/// Whether `text`'s header line is aiconfigurator's.
pub fn detect(text: &str) -> bool {
    text.lines()
        .next()
        .is_some_and(|h| h.split(',').any(|c| c.trim() == MARKER))
}

/// Reads every row of a silicon CSV.
pub fn read(text: &str, source: &str) -> Result<Vec<MeasuredPoint>, AccuracyError> {
    let mut r = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes());
    let header = r
        .headers()
        .map_err(|e| AccuracyError::new(format!("{source}: header: {e}")))?
        .clone();
    let col = |name: &str| header.iter().position(|h| h.trim() == name);
    for name in REQUIRED {
        if col(name).is_none() {
            return Err(AccuracyError::new(format!(
                "{source}: missing column {name:?}; an aiconfigurator silicon CSV has {}",
                REQUIRED.join(", ")
            )));
        }
    }
    let mut out = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| AccuracyError::new(format!("{source}: line {line}: {e}")))?;
        let cell = |name: &str| {
            col(name)
                .and_then(|c| rec.get(c))
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        let number = |name: &str| -> Result<Option<f64>, AccuracyError> {
            match cell(name) {
                None => Ok(None),
                Some(s) => s
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(Some)
                    .ok_or_else(|| {
                        AccuracyError::new(format!(
                            "{source}: line {line}: {name} = {s:?} is not a non-negative number"
                        ))
                    }),
            }
        };
        let whole = |name: &str| -> Result<Option<u32>, AccuracyError> {
            Ok(number(name)?.map(|v| v as u32))
        };
        let size =
            |name: &str| -> Result<u32, AccuracyError> { Ok(whole(name)?.unwrap_or(1).max(1)) };
        let id = cell("id").unwrap_or_default().to_string();
        let mut p = MeasuredPoint::new(Format::Aiconfigurator, format!("{source}:{line}"));
        p.id = if id.is_empty() {
            p.source.clone()
        } else {
            id.clone()
        };
        p.engine = cell("backend").map(str::to_string);
        p.engine_version = cell("backend_version").map(str::to_string);
        p.model = cell("model_path").map(str::to_string);
        p.chip = cell("system").map(str::to_string);
        p.precision = cell("precision").map(str::to_string);
        p.quant_mode = cell("gemm_quant_mode").map(str::to_string);
        p.prompt = whole("isl")?.map(|tokens| Lengths::Fixed { tokens });
        p.output = whole("osl")?.map(|tokens| Lengths::Fixed { tokens });
        let layout = |prefix: &str| -> Result<WorkerLayout, AccuracyError> {
            Ok(WorkerLayout {
                tp: size(&format!("{prefix}tp_size"))?,
                pp: size(&format!("{prefix}pp_size"))?,
                attention_dp: size(&format!("{prefix}attention_dp_size"))?,
                moe_tp: size(&format!("{prefix}moe_tp_size"))?,
                moe_ep: size(&format!("{prefix}moe_ep_size"))?,
            })
        };
        let mode = cell("mode").unwrap_or_default();
        p.deployment = match mode {
            "agg" => Some(Deployment::Agg {
                workers: 1,
                layout: layout("")?,
            }),
            "disagg" => {
                let recorded = [
                    "prefill_num_workers",
                    "decode_num_workers",
                    "prefill_tp_size",
                    "decode_tp_size",
                ]
                .iter()
                .all(|c| cell(c).is_some());
                Some(if recorded {
                    Deployment::Disagg {
                        prefill_workers: size("prefill_num_workers")?,
                        prefill: layout("prefill_")?,
                        decode_workers: size("decode_num_workers")?,
                        decode: layout("decode_")?,
                    }
                } else {
                    Deployment::DisaggUnrecorded
                })
            }
            other => {
                return Err(AccuracyError::new(format!(
                    "{source}: line {line}: mode = {other:?}; allowed: agg, disagg"
                )))
            }
        };
        let concurrency = cell("silicon_data_source")
            .and_then(|s| {
                s.split(';')
                    .filter_map(|f| f.trim().strip_prefix("silicon_concurrency="))
                    .find_map(|v| v.trim().parse::<u32>().ok())
            })
            .or_else(|| concurrency_in_id(&id))
            .or_else(
                || match (&p.deployment, whole("batch_size").ok().flatten()) {
                    (Some(Deployment::Agg { layout, .. }), Some(b)) => {
                        Some(b * layout.attention_dp)
                    }
                    _ => None,
                },
            );
        p.load = concurrency
            .filter(|&c| c >= 1)
            .map(|users| Load::Concurrency { users });
        p.push(Metric::Ttft, Stat::Mean, number("silicon_ttft_ms")?);
        p.push(Metric::Tpot, Stat::Mean, number("silicon_tpot_ms")?);
        out.push(p);
    }
    if out.is_empty() {
        return Err(AccuracyError::new(format!("{source}: no data rows")));
    }
    Ok(out)
}

/// `c<N>` among an id's `_`-separated tokens.
fn concurrency_in_id(id: &str) -> Option<u32> {
    id.split('_')
        .filter_map(|t| t.strip_prefix('c'))
        .find_map(|n| n.parse::<u32>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_comes_from_the_source_then_the_id_then_the_batch() {
        assert_eq!(
            concurrency_in_id("x_b200_sxm_vllm_fp8_agg_1024x1024_c64_cfg1"),
            Some(64)
        );
        assert_eq!(concurrency_in_id("cfg12_tp4"), None);
    }
}
