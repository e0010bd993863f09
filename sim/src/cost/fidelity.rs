//! The default cost model against every public measurement it can use, with
//! the median and worst absolute error per table (`servesim cost --fidelity`;
//! the tests assert the bounds so a later change cannot silently make the
//! default worse). All tables come from microsoft/vidur (MIT), staged under
//! `shared/data/vidur/data/profiling/`:
//!
//! - `compute/a100/<org>/<model>/mlp.csv`: per-operator CUDA timings of
//!   every non-attention op of one layer on an A100, 1–4096 (or 32768)
//!   tokens, TP 1–8. We compare one layer's four GEMMs plus its element-wise
//!   kernels with [`Roofline`]'s dense and element-wise terms for the same
//!   shapes on the catalog's `a100-80gb`.
//! - `network/{a100,h100}_{dgx,pairwise_nvlink}/all_reduce.csv`: NCCL
//!   all-reduce of 2 K–64 M fp16 elements inside one node, against
//!   [`AllReduce`] on `a100-80gb` / `h100-sxm` (the median over ranks of
//!   each size and group; groups that leave NVLink on the pairwise boxes
//!   are left out, as no catalog link describes them).
//! - `cpu_overhead/a100/cpu_overheads.csv`: a 2023 vLLM's host time per step
//!   (schedule + sampler + prepare inputs + process outputs, plus the Ray
//!   round trip with TP), against [`EngineRuntime::Eager2023`].

use super::comm::AllReduce;
use super::roofline::Roofline;
use super::runtime::EngineRuntime;
use crate::catalog::{self, Dtype, ModelArch};
use crate::parallel::Parallelism;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One measured table's agreement with the model.
#[derive(Clone, Debug, Serialize)]
pub struct TableFit {
    /// What was compared ("A100 dense layer", "all-reduce", "host time").
    pub kind: &'static str,
    /// The file, relative to the data folder.
    pub table: String,
    pub rows: usize,
    /// Median and worst |model − measured| / measured, in percent.
    pub median_pct: f64,
    pub worst_pct: f64,
    /// The row of the worst error.
    pub worst_at: String,
}

/// The shared data folder: `SERVESIM_SHARED_DATA`, else `shared/data` next to
/// the workspace `root`; `None` when neither exists.
pub fn data_dir(root: &Path) -> Option<PathBuf> {
    let dir = std::env::var_os("SERVESIM_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/data"));
    dir.join("vidur/data/profiling").is_dir().then_some(dir)
}

type Rows = Vec<BTreeMap<String, String>>;

fn read(path: &Path) -> Result<Rows, String> {
    let mut r = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let headers = r
        .headers()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .clone();
    let mut rows = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.map_err(|e| format!("{}: line {}: {e}", path.display(), i + 2))?;
        rows.push(
            headers
                .iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect(),
        );
    }
    Ok(rows)
}

fn num(row: &BTreeMap<String, String>, key: &str, path: &Path) -> Result<f64, String> {
    row.get(key)
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| format!("{}: column {key} missing or not a number", path.display()))
}

fn fit(kind: &'static str, table: String, errors: Vec<(f64, String)>) -> TableFit {
    let mut abs: Vec<f64> = errors.iter().map(|e| e.0.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let median = if abs.is_empty() {
        0.0
    } else if abs.len() % 2 == 1 {
        abs[abs.len() / 2]
    } else {
        (abs[abs.len() / 2 - 1] + abs[abs.len() / 2]) / 2.0
    };
    let worst = errors
        .iter()
        .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))
        .cloned()
        .unwrap_or((0.0, String::new()));
    TableFit {
        kind,
        table,
        rows: errors.len(),
        median_pct: median * 100.0,
        worst_pct: worst.0.abs() * 100.0,
        worst_at: format!("{} ({:+.1} %)", worst.1, worst.0 * 100.0),
    }
}

/// A dense decoder layer of the shape a profile row names.
fn arch(row: &BTreeMap<String, String>, path: &Path) -> Result<ModelArch, String> {
    let heads = num(row, "n_head", path)? as u32;
    let hidden = num(row, "n_embd", path)? as u32;
    Ok(ModelArch {
        name: path.display().to_string(),
        layers: 1,
        hidden_size: hidden,
        num_heads: heads,
        num_kv_heads: num(row, "n_kv_head", path)? as u32,
        head_dim: hidden / heads.max(1),
        intermediate_size: num(row, "n_expanded_embd", path)? as u32,
        vocab_size: num(row, "vocab_size", path)? as u32,
        gated_mlp: row.get("use_gated_mlp").map(String::as_str) == Some("True"),
        tied_embeddings: false,
        max_context: 32768,
        num_experts: 0,
        experts_per_token: 0,
        num_shared_experts: 0,
        moe_intermediate_size: None,
        first_dense_layers: 0,
        kv_lora_rank: None,
        q_lora_rank: None,
        qk_nope_head_dim: None,
        qk_rope_head_dim: None,
        v_head_dim: None,
        ..ModelArch::default()
    })
}

const GEMM_OPS: [&str; 4] = [
    "attn_pre_proj",
    "attn_post_proj",
    "mlp_up_proj",
    "mlp_down_proj",
];
const ELEMENTWISE_OPS: [&str; 5] = [
    "input_layernorm",
    "attn_rope",
    "post_attention_layernorm",
    "mlp_act",
    "add",
];

fn median_ms(row: &BTreeMap<String, String>, op: &str) -> f64 {
    // phi-2 has no post-attention norm: an absent column adds nothing.
    row.get(&format!("time_stats.{op}.median"))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

fn dense_layers(data: &Path, rel: &str) -> Result<TableFit, String> {
    let path = data.join(rel);
    let hw = catalog::hardware("a100-80gb").expect("preset");
    let mut errors = Vec::new();
    for row in read(&path)? {
        let m = arch(&row, &path)?;
        let tp = num(&row, "num_tensor_parallel_workers", &path)? as u32;
        let n = num(&row, "num_tokens", &path)?;
        let r =
            Roofline::with_parallelism(&m, &hw, Dtype::Bf16, Dtype::Bf16, &Parallelism::tensor(tp));
        let model = r.dense_gemm(n).secs() + r.elementwise(n);
        let measured = (GEMM_OPS.iter().chain(&ELEMENTWISE_OPS))
            .map(|op| median_ms(&row, op))
            .sum::<f64>()
            * 1e-3;
        if measured > 0.0 {
            errors.push((model / measured - 1.0, format!("TP {tp}, {n} tokens")));
        }
    }
    Ok(fit("A100 dense layer", rel.to_string(), errors))
}

fn all_reduce(
    data: &Path,
    cluster: &str,
    hw_key: &str,
    pairwise: bool,
) -> Result<TableFit, String> {
    let rel = format!("vidur/data/profiling/network/{cluster}/all_reduce.csv");
    let path = data.join(&rel);
    let hw = catalog::hardware(hw_key).expect("preset");
    let mut by_shape: BTreeMap<(u32, u64), Vec<f64>> = BTreeMap::new();
    for row in read(&path)? {
        let g = num(&row, "num_workers", &path)? as u32;
        let per_node = num(&row, "devices_per_node", &path)? as u32;
        if per_node != g || (pairwise && g > 2) {
            continue;
        }
        let size = num(&row, "size", &path)? as u64;
        by_shape.entry((g, size)).or_default().push(num(
            &row,
            "time_stats.all_reduce.median",
            &path,
        )?);
    }
    let errors = by_shape
        .into_iter()
        .map(|((g, size), mut t)| {
            t.sort_by(f64::total_cmp);
            let measured = t[t.len() / 2] * 1e-3;
            let model = AllReduce::new(&hw, g).secs(size as f64 * 2.0);
            (model / measured - 1.0, format!("{g} GPUs, {size} elements"))
        })
        .collect();
    Ok(fit("all-reduce", rel, errors))
}

fn host_time(data: &Path) -> Result<TableFit, String> {
    let rel = "vidur/data/profiling/cpu_overhead/a100/cpu_overheads.csv";
    let path = data.join(rel);
    let mut errors = Vec::new();
    for row in read(&path)? {
        let batch = num(&row, "batch_size", &path)? as u32;
        let tp = num(&row, "tensor_parallel_degree", &path)? as u32;
        let mut measured = 0.0;
        for k in [
            "SCHEDULE_MEDIAN",
            "SAMPLER_E2E_MEDIAN",
            "PREPARE_INPUTS_E2E_MEDIAN",
            "PROCESS_MODEL_OUTPUTS_MEDIAN",
        ] {
            measured += num(&row, k, &path)?;
        }
        if tp > 1 {
            measured += num(&row, "RAY_COMM_TIME_MEDIAN", &path)?;
        }
        let model = EngineRuntime::Eager2023.host(batch, tp).total() * 1e3;
        let name = row.get("model_name").cloned().unwrap_or_default();
        errors.push((
            model / measured - 1.0,
            format!("{name} TP {tp} batch {batch}"),
        ));
    }
    Ok(fit("eager host time", rel.to_string(), errors))
}

/// Every table in `data` (the shared data folder) against the default model.
pub fn check(data: &Path) -> Result<Vec<TableFit>, String> {
    let compute = data.join("vidur/data/profiling/compute/a100");
    let mut mlp = Vec::new();
    for org in std::fs::read_dir(&compute).map_err(|e| format!("{}: {e}", compute.display()))? {
        let org = org.map_err(|e| e.to_string())?.path();
        for model in std::fs::read_dir(&org).map_err(|e| format!("{}: {e}", org.display()))? {
            let p = model.map_err(|e| e.to_string())?.path().join("mlp.csv");
            if p.is_file() {
                let rel = p.strip_prefix(data).unwrap_or(&p).display().to_string();
                mlp.push(rel);
            }
        }
    }
    // Directory order differs between file systems; the table must not.
    mlp.sort();
    let mut out = Vec::new();
    for rel in &mlp {
        out.push(dense_layers(data, rel)?);
    }
    for (cluster, hw, pairwise) in [
        ("a100_dgx", "a100-80gb", false),
        ("h100_dgx", "h100-sxm", false),
        ("a100_pairwise_nvlink", "a100-80gb", true),
        ("h100_pairwise_nvlink", "h100-sxm", true),
    ] {
        out.push(all_reduce(data, cluster, hw, pairwise)?);
    }
    out.push(host_time(data)?);
    Ok(out)
}

/// The worst dense-layer error the tests allow, percent: the target.
/// Padding GEMM rows to whole tiles (see `cost::gemm`) lets the model follow
/// the profiles' staircase at 128, 256, 384 … rows, where a smooth model of
/// the row count was up to ~30 % off.
pub const DENSE_WORST_PCT: f64 = 25.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// The targets: dense layers median ≤ 10 %; all-reduce median
    /// ≤ 15 %; eager host time median ≤ 15 %; dense layers worst ≤ 25 % at
    /// every token count (see the table in docs/cost-model.md).
    #[test]
    fn default_model_agrees_with_public_gpu_measurements() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let Some(data) = data_dir(&root) else {
            // CI has the data and sets SERVESIM_REQUIRE_SHARED=1: there the
            // comparison must run, not pass by skipping.
            assert!(
                std::env::var("SERVESIM_REQUIRE_SHARED").as_deref() != Ok("1"),
                "no shared/data and SERVESIM_REQUIRE_SHARED=1: this test must run"
            );
            eprintln!("skipped: no shared/data (set SERVESIM_SHARED_DATA)");
            return;
        };
        let fits = check(&data).unwrap();
        for f in &fits {
            eprintln!(
                "{:<18} {:<70} {:>5} rows  median {:>5.1} %  worst {:>5.1} % at {}",
                f.kind, f.table, f.rows, f.median_pct, f.worst_pct, f.worst_at
            );
        }
        assert_eq!(
            fits.iter().filter(|f| f.kind == "A100 dense layer").count(),
            8
        );
        for f in &fits {
            assert!(f.rows > 0, "{f:?}");
            let (median, worst) = match f.kind {
                "A100 dense layer" => (10.0, DENSE_WORST_PCT),
                // No preset describes PCIe cards joined by NVLink bridges.
                "all-reduce" if f.table.contains("pairwise") => continue,
                _ => (15.0, f64::INFINITY),
            };
            assert!(f.median_pct <= median, "{f:?}");
            assert!(f.worst_pct <= worst, "{f:?}");
        }
    }
}
