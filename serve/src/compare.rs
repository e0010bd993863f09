//! `servesim compare A B`: the side-by-side table `validate` prints — TTFT,
//! TPOT, ITL and E2E percentiles, throughput, rejections, each with B's
//! error against A — for any two result folders (observed vs simulated,
//! live vs twin, two simulations). Reads their `summary.json`; either side
//! may instead be a vLLM benchmark result file (`vllm bench serve
//! --save-result`, or `observe --format vllm`), told apart by its content
//! ([`crate::vllm_bench`]).

use anyhow::Context as _;
use serde_json::Value;
use std::path::Path;

/// One compared figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub metric: String,
    pub a: f64,
    pub b: f64,
    /// (b − a) / a, percent; `None` when a is 0.
    pub error_pct: Option<f64>,
    /// A count of requests, printed whole.
    pub count: bool,
}

/// From this ratio of B to A on (or its inverse), the difference prints as
/// a ratio ("×1024") rather than a percentage ("+102293.72 %").
pub const RATIO_FROM: f64 = 10.0;

impl Row {
    /// A value of the row as printed: counts whole, latencies and rates in
    /// significant figures; "-" for a latency of a run that completed no
    /// request (it has none).
    pub fn value(&self, v: f64) -> String {
        if v.is_nan() {
            "-".into()
        } else if self.count {
            format!("{v:.0}")
        } else {
            sim::sig_figs::sig(v, 4)
        }
    }

    /// B against A as printed: a signed percentage, or past [`RATIO_FROM`]
    /// either way the ratio B / A; "-" when A is 0.
    pub fn difference(&self) -> String {
        let Some(e) = self.error_pct.filter(|e| e.is_finite()) else {
            return "-".into();
        };
        let ratio = self.b / self.a;
        if ratio >= RATIO_FROM || (ratio > 0.0 && ratio <= 1.0 / RATIO_FROM) {
            format!("×{}", sim::sig_figs::sig(ratio, 4))
        } else {
            format!("{e:+.2}%")
        }
    }
}

/// What of the two runs differs beyond their results (scenario, model,
/// hardware, fleet, seed): a comparison of two different setups reads as a
/// cost-model error otherwise. One line per difference.
pub fn differences(a: &Path, b: &Path) -> anyhow::Result<Vec<String>> {
    let (va, vb) = (load(a)?, load(b)?);
    let mut out = Vec::new();
    // A folder `observe` wrote names the server's hardware only as "the
    // server's": its label says nothing a simulation's can be set against.
    let observed = !va["observed"].is_null()
        || !vb["observed"].is_null()
        || !va["vllm_bench"].is_null()
        || !vb["vllm_bench"].is_null();
    for key in [
        "scenario",
        "model",
        "hardware",
        "replicas",
        "tensor_parallel",
        "gpus",
        "seed",
    ] {
        if key == "hardware" && observed {
            continue;
        }
        let (x, y) = (&va[key], &vb[key]);
        // Model names are matched as the catalog matches them, ignoring
        // case ("smollm2-135m" as served, "SmolLM2-135M" as resolved).
        let same_name = key == "model"
            && x.as_str()
                .zip(y.as_str())
                .is_some_and(|(x, y)| x.eq_ignore_ascii_case(y));
        if !x.is_null() && !y.is_null() && x != y && !same_name {
            out.push(format!("{key} differs: A has {x}, B has {y}"));
        }
    }
    Ok(out)
}

/// The file a side is read from: a folder's `summary.json`, or the file.
fn source(path: &Path) -> std::path::PathBuf {
    if path.is_file() {
        path.to_path_buf()
    } else {
        path.join("summary.json")
    }
}

fn load(path: &Path) -> anyhow::Result<Value> {
    let p = source(path);
    let text = sim::input_file::read_result(&p, "summary.json")?;
    let v: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not JSON (a results folder's summary.json or a vLLM benchmark result)",
            p.display()
        )
    })?;
    if crate::vllm_bench::is_result(&v) {
        return crate::vllm_bench::as_summary(&v, &p);
    }
    if path.is_file() && !v["latency"].is_object() {
        anyhow::bail!(
            "{}: neither a servesim summary.json nor a vLLM benchmark result (no ttfts, itls and completed)",
            p.display()
        );
    }
    Ok(v)
}

fn num(v: &Value, path: &[&str], file: &Path) -> anyhow::Result<f64> {
    let mut x = v;
    for k in path {
        x = &x[*k];
    }
    x.as_f64().with_context(|| {
        format!(
            "{}: key {} is missing or not a number",
            source(file).display(),
            path.join(".")
        )
    })
}

/// The table for folders `a` and `b`.
pub fn compare(a: &Path, b: &Path) -> anyhow::Result<Vec<Row>> {
    let (va, vb) = (load(a)?, load(b)?);
    let mut rows = Vec::new();
    // A run that completed nothing has no latency to compare: its
    // latencies show as "-" (NaN here) rather than failing the table.
    let value = |v: &Value, path: &[&str], file: &Path| -> anyhow::Result<f64> {
        let none_completed = v["counts"]["completed"].as_u64() == Some(0);
        match num(v, path, file) {
            Err(_) if path[0] == "latency" && none_completed => Ok(f64::NAN),
            r => r,
        }
    };
    let mut add = |metric: String, path: &[&str]| -> anyhow::Result<()> {
        let (x, y) = (value(&va, path, a)?, value(&vb, path, b)?);
        rows.push(Row {
            count: path[0] == "counts",
            metric,
            a: x,
            b: y,
            error_pct: (x != 0.0).then(|| (y - x) / x * 100.0),
        });
        Ok(())
    };
    for (name, key) in [
        ("TTFT", "ttft_ms"),
        ("TPOT", "tpot_ms"),
        ("ITL", "itl_ms"),
        ("E2E", "e2e_ms"),
    ] {
        for p in ["p50", "p90", "p99"] {
            add(format!("{name} {p} (ms)"), &["latency", key, p])?;
        }
    }
    add(
        "throughput (output tok/s)".into(),
        &["throughput", "output_tokens_per_s"],
    )?;
    add(
        "throughput (req/s)".into(),
        &["throughput", "requests_per_s"],
    )?;
    add("completed".into(), &["counts", "completed"])?;
    add("rejected".into(), &["counts", "rejected"])?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_relative_to_the_first_folder_and_missing_keys_are_named() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        for (dir, ttft) in [(&a, 100.0), (&b, 110.0)] {
            std::fs::create_dir_all(dir).unwrap();
            let dist = |x: f64| serde_json::json!({"p50": x, "p90": x, "p99": x});
            let v = serde_json::json!({
                "latency": {"ttft_ms": dist(ttft), "tpot_ms": dist(10.0), "itl_ms": dist(10.0), "e2e_ms": dist(0.0)},
                "throughput": {"output_tokens_per_s": 5.0, "requests_per_s": 1.0},
                "counts": {"completed": 3, "rejected": 0},
            });
            std::fs::write(dir.join("summary.json"), v.to_string()).unwrap();
        }
        let rows = compare(&a, &b).unwrap();
        assert_eq!(rows[0].metric, "TTFT p50 (ms)");
        assert!((rows[0].error_pct.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(rows[9].error_pct, None, "E2E of 0 has no relative error");
        std::fs::write(b.join("summary.json"), "{}").unwrap();
        let e = compare(&a, &b).unwrap_err().to_string();
        assert!(e.contains("latency.ttft_ms.p50"), "{e}");
        // A run that completed nothing has no latencies: they print "-".
        let none = serde_json::json!({
            "latency": {"ttft_ms": {"count": 0}, "tpot_ms": {}, "itl_ms": {}, "e2e_ms": {}},
            "throughput": {"output_tokens_per_s": 0.0, "requests_per_s": 0.0},
            "counts": {"completed": 0, "rejected": 3},
        });
        std::fs::write(b.join("summary.json"), none.to_string()).unwrap();
        let rows = compare(&a, &b).unwrap();
        assert_eq!(rows[0].value(rows[0].b), "-");
        assert_eq!(rows[0].difference(), "-");
        assert_eq!(rows[14].value(rows[14].b), "0", "{:?}", rows[14]);
    }

    #[test]
    fn an_observed_server_and_its_simulation_are_the_same_setup() {
        // As scripts/llamacpp-check.sh writes them: the served model name
        // in lower case, the server's hardware unnamed.
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        for (dir, v) in [
            (
                &a,
                serde_json::json!({"scenario": "h", "model": "smollm2-135m", "hardware": "the server's", "observed": {"offered_rps": 1.0}}),
            ),
            (
                &b,
                serde_json::json!({"scenario": "h", "model": "SmolLM2-135M", "hardware": "an OpenAI-compatible server"}),
            ),
        ] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("summary.json"), v.to_string()).unwrap();
        }
        assert_eq!(differences(&a, &b).unwrap(), Vec::<String>::new());
        // Another model is still named.
        let other =
            serde_json::json!({"scenario": "h", "model": "Llama-3.1-8B", "hardware": "H100-SXM"});
        std::fs::write(b.join("summary.json"), other.to_string()).unwrap();
        let d = differences(&a, &b).unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("model differs"), "{d:?}");
    }

    #[test]
    fn counts_print_whole_large_errors_as_ratios_and_other_scenarios_are_named() {
        let row = |metric: &str, a: f64, b: f64, count: bool| Row {
            metric: metric.into(),
            a,
            b,
            error_pct: (a != 0.0).then(|| (b - a) / a * 100.0),
            count,
        };
        // The figures `compare` printed as "6000.000" and "+102293.72 %".
        let completed = row("completed", 6000.0, 6000.0, true);
        assert_eq!(completed.value(6000.0), "6000");
        assert_eq!(completed.difference(), "+0.00%");
        let ttft = row("TTFT p99 (ms)", 410.3, 420_174.0, false);
        assert_eq!(ttft.difference(), "×1024");
        assert_eq!(ttft.value(420_174.0), "420174");
        assert_eq!(ttft.value(410.3), "410.3");
        assert_eq!(row("x", 100.0, 110.0, false).difference(), "+10.00%");
        assert_eq!(row("x", 100.0, 5.0, false).difference(), "×0.05");
        assert_eq!(row("x", 100.0, 0.0, false).difference(), "-100.00%");
        assert_eq!(row("x", 0.0, 3.0, true).difference(), "-");

        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        for (dir, name) in [(&a, "quickstart"), (&b, "overload")] {
            std::fs::create_dir_all(dir).unwrap();
            let v = serde_json::json!({"scenario": name, "model": "Llama-3.1-8B", "seed": 7});
            std::fs::write(dir.join("summary.json"), v.to_string()).unwrap();
        }
        assert_eq!(
            differences(&a, &b).unwrap(),
            vec![r#"scenario differs: A has "quickstart", B has "overload""#.to_string()]
        );
        assert!(differences(&a, &a).unwrap().is_empty());
    }
}
