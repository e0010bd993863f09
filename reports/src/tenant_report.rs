//! Per-tenant charts of a run with `[[tenants]]`, from `summary.json`'s
//! `tenancy` field: SLO attainment against each tenant's own targets, TTFT
//! p99, output throughput, and rejections — who paid for whose protection.

use crate::chart::{BarPlot, Chart, PALETTE};
use crate::data::num;
use serde_json::Value;

/// The charts, or none when the run has no tenancy report.
pub fn charts(prefix: &str, s: &Value) -> Vec<Chart> {
    let Some(tenants) = s
        .get("tenancy")
        .and_then(|t| t.get("tenants"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let policy = s
        .get("tenancy")
        .and_then(|t| t.get("fairness"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let jain = num(s, "tenancy.jain_index").unwrap_or(0.0);
    let name = |t: &Value| {
        t.get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let bars = |f: &dyn Fn(&Value) -> Option<f64>| -> Vec<(String, f64)> {
        tenants
            .iter()
            .filter_map(|t| f(t).map(|v| (name(t), v)))
            .collect()
    };
    let chart = |key: &str, title: String, y: &str, bars: Vec<(String, f64)>, color| {
        Chart::Bars(BarPlot {
            name: format!("{prefix}tenants-{key}"),
            title,
            x_label: "tenant".into(),
            y_label: y.into(),
            bars,
            colors: vec![color],
            tips: Vec::new(),
        })
    };
    let mut out = Vec::new();
    let slo = bars(&|t| num(t, "slo.attainment").map(|a| 100.0 * a));
    if !slo.is_empty() {
        out.push(chart(
            "slo",
            format!("SLO attainment per tenant, each against its own targets (fairness {policy})"),
            "requests meeting their SLOs (%)",
            slo,
            PALETTE[0],
        ));
    }
    out.push(chart(
        "ttft-p99",
        format!("TTFT p99 per tenant (fairness {policy})"),
        "TTFT p99 (ms)",
        bars(&|t| num(t, "latency.ttft_ms.p99")),
        PALETTE[1],
    ));
    out.push(chart(
        "throughput",
        format!("Output throughput per tenant (Jain's index {jain:.3})"),
        "output tokens/s",
        bars(&|t| num(t, "output_tokens_per_s")),
        PALETTE[2],
    ));
    let rejected = bars(&|t| num(t, "counts.rejected"));
    if rejected.iter().any(|(_, v)| *v > 0.0) {
        out.push(chart(
            "rejected",
            "Rejected requests per tenant (every reason, retries counted each time)".into(),
            "rejected requests",
            rejected,
            PALETTE[3],
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_per_tenant_and_nothing_without_tenants() {
        assert!(charts("", &serde_json::json!({"counts": {}})).is_empty());
        let s = serde_json::json!({"tenancy": {"fairness": "vtc", "jain_index": 0.9, "tenants": [
            {"name": "a", "slo": {"attainment": 0.5}, "latency": {"ttft_ms": {"p99": 10.0}},
             "output_tokens_per_s": 3.0, "counts": {"rejected": 0}},
            {"name": "b", "slo": null, "latency": {"ttft_ms": {"p99": 20.0}},
             "output_tokens_per_s": 4.0, "counts": {"rejected": 2}}]}});
        let c = charts("x-", &s);
        assert_eq!(c.len(), 4);
        let Chart::Bars(slo) = &c[0] else { panic!() };
        assert_eq!(slo.bars, vec![("a".to_string(), 50.0)]);
        let Chart::Bars(p99) = &c[1] else { panic!() };
        assert_eq!(p99.name, "x-tenants-ttft-p99");
        assert_eq!(p99.bars.len(), 2);
    }
}
