//! `servesim compare A B`: the side-by-side table `validate` prints — TTFT,
//! TPOT, ITL and E2E percentiles, throughput, rejections, each with B's
//! error against A — for any two result folders (observed vs simulated,
//! live vs twin, two simulations). Reads their `summary.json`.

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
}

fn load(dir: &Path) -> anyhow::Result<Value> {
    let p = dir.join("summary.json");
    let text =
        std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a summary", p.display()))
}

fn num(v: &Value, path: &[&str], file: &Path) -> anyhow::Result<f64> {
    let mut x = v;
    for k in path {
        x = &x[*k];
    }
    x.as_f64().with_context(|| {
        format!(
            "{}: key {} is missing or not a number",
            file.join("summary.json").display(),
            path.join(".")
        )
    })
}

/// The table for folders `a` and `b`.
pub fn compare(a: &Path, b: &Path) -> anyhow::Result<Vec<Row>> {
    let (va, vb) = (load(a)?, load(b)?);
    let mut rows = Vec::new();
    let mut add = |metric: String, path: &[&str]| -> anyhow::Result<()> {
        let (x, y) = (num(&va, path, a)?, num(&vb, path, b)?);
        rows.push(Row {
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
    }
}
