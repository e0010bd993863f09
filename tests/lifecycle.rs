//! The fleet life cycle through the binary: an autoscaled run's outputs,
//! the report's replicas chart, `breakeven`, and bad life-cycle keys.

mod common;
use common::*;

fn step_scenario(dir: &std::path::Path, standby: u32) -> std::path::PathBuf {
    let text = read(&repo().join("scenarios/autoscale-step.toml"))
        .replace("duration_s = 1200", "duration_s = 600")
        .replace("standby = 0", &format!("standby = {standby}"));
    let p = dir.join(format!("step{standby}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn an_autoscaled_run_reports_its_life_cycle_and_charts_requested_vs_ready() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = simulate(&step_scenario(tmp.path(), 0), &out, &["--report"]);
    let text = stdout(&o);
    assert!(text.contains("fleet        autoscaler target"), "{text}");
    assert!(text.contains("GPU-hours"), "{text}");
    assert!(text.contains("SLO dip"), "{text}");
    let s: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert!(f(&s, "lifecycle.cold_starts") >= 1.0);
    assert!(f(&s, "lifecycle.gpu_hours.starting") > 0.0);
    assert!(f(&s, "lifecycle.slo_dip.seconds_below") > 0.0);
    let ts = read(&out.join("timeseries.csv"));
    assert!(ts.lines().next().unwrap().contains("replicas_requested"));
    let svg = read(&out.join("charts/replicas.svg"));
    for label in ["requested", "ready", "starting (cold)"] {
        assert!(svg.contains(label), "replicas chart lacks {label}");
    }
}

#[test]
fn breakeven_prices_the_measured_fleet_against_a_hosted_api() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    simulate(&step_scenario(tmp.path(), 1), &out, &[]);
    let d = out.to_str().unwrap();
    let o = run(&[
        "breakeven",
        d,
        "--gpu-hour-usd",
        "2.5",
        "--api-input-usd-per-mtok",
        "0.1",
        "--api-output-usd-per-mtok",
        "0.4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let b: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let s: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(
        f(&b, "gpu_hours.billed"),
        f(&s, "lifecycle.gpu_hours.billed")
    );
    assert!((f(&b, "dedicated_usd") - 2.5 * f(&b, "gpu_hours.billed")).abs() < 1e-9);
    let per_h = f(&b, "dedicated_usd") / f(&b, "duration_h");
    let api_per_tok = f(&b, "api_usd") / f(&b, "output_tokens");
    assert!((f(&b, "break_even_output_tokens_per_h") - per_h / api_per_tok).abs() < 1e-3);
    let text = stdout(&run(&[
        "breakeven",
        d,
        "--gpu-hour-usd",
        "2.5",
        "--api-input-usd-per-mtok",
        "0.1",
        "--api-output-usd-per-mtok",
        "0.4",
    ]));
    assert!(text.contains("break-even"), "{text}");
    // Prices are required and checked.
    let o = run(&["breakeven", d, "--gpu-hour-usd", "2.5"]);
    assert_eq!(o.status.code(), Some(2), "clap: missing flags");
    let o = run(&[
        "breakeven",
        d,
        "--gpu-hour-usd=-1",
        "--api-input-usd-per-mtok",
        "0.1",
        "--api-output-usd-per-mtok",
        "0.4",
    ]);
    let e = stderr(&o);
    // A price out of range is refused by the parser's range check.
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.starts_with("error: ") && e.contains("--gpu-hour-usd"),
        "{e}"
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
}

#[test]
fn bad_life_cycle_keys_give_one_line_with_the_key_path() {
    let tmp = tempfile::tempdir().unwrap();
    let base = small_quickstart(50);
    for (extra, key) in [
        ("[lifecycle]\nwarmup_s = -1\n", "lifecycle.warmup_s"),
        (
            "[autoscale]\npolicy = \"target\"\n",
            "autoscale.target_value",
        ),
        ("[autoscale]\npolicy = \"hpa\"\n", "autoscale.policy"),
        (
            "[failures]\nat = [{ time_s = 1, replica = 9 }]\n",
            "failures.at[0].replica",
        ),
        ("[failures]\nmtbf_s = 60\n", "failures.mtbf_s"),
    ] {
        let p = tmp.path().join("bad.toml");
        std::fs::write(&p, format!("{base}\n{extra}")).unwrap();
        let ps = p.to_str().unwrap();
        let o = run(&["check", ps]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{extra}: {e}");
        assert!(!e.contains("panicked"), "{e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        assert!(
            e.starts_with(&format!("error: {ps}: {key}: ")),
            "{extra}: {e}"
        );
    }
}

#[test]
fn failures_keep_requests_conserved_and_deterministic_through_the_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let text = read(&repo().join("scenarios/failures.toml"))
        .replace("duration_s = 1800", "duration_s = 400");
    let p = tmp.path().join("f.toml");
    std::fs::write(&p, text).unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    simulate(&p, &a, &[]);
    simulate(&p, &b, &[]);
    for file in ["summary.json", "requests.csv", "timeseries.csv"] {
        assert_eq!(read(&a.join(file)), read(&b.join(file)), "{file}");
    }
    let s: serde_json::Value = serde_json::from_str(&read(&a.join("summary.json"))).unwrap();
    assert!(f(&s, "lifecycle.failures") >= 1.0);
    assert!(f(&s, "lifecycle.retries.handed_back") > 0.0);
    let c = &s["counts"];
    let n = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(
        n("arrived"),
        n("completed") + n("rejected") + n("in_flight")
    );
}
