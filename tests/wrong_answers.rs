//! Answers a new user found wrong or misleading, each with the input that
//! showed it: the load verdict of a fleet that serves nothing, the offered
//! load of conversations, the prefill pool's routing of a disaggregated
//! fleet, and the fewest replicas `capacity` names.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn load_line(out: &str) -> String {
    out.lines()
        .find(|l| l.starts_with("load"))
        .unwrap_or_else(|| panic!("no load line in {out}"))
        .to_string()
}

#[test]
fn a_fleet_that_rejects_every_request_is_not_called_stable() {
    // Every prompt is longer than max_model_len: all 2,000 are rejected.
    let tmp = tempfile::tempdir().unwrap();
    let text = small_quickstart(2000).replace(
        r#"prompt_tokens = { dist = "lognormal", mean = 800, cv = 1.0, min = 16, max = 6144 }"#,
        r#"prompt_tokens = { dist = "fixed", value = 9000 }"#,
    );
    let p = write(tmp.path(), "rejected.toml", &text);
    let out = tmp.path().join("out");
    let o = simulate(&p, &out, &[]);
    let line = load_line(&stdout(&o));
    assert!(!line.contains("stable"), "{line}");
    assert!(
        line.contains("rejecting") && line.contains("all 2000 requests rejected"),
        "{line}"
    );
    let s: Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(s["counts"]["completed"], 0);
    assert_eq!(s["load"]["verdict"], "rejecting", "{}", s["load"]);
}

#[test]
fn conversation_follow_ups_count_in_the_offered_load() {
    // 6 conversations a second of 1–6 turns (3.5 on average) offer 21
    // requests a second, and a stable run achieves no more than that.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = simulate(&repo().join("scenarios/prefix-caching.toml"), &out, &[]);
    let line = load_line(&stdout(&o));
    assert!(line.contains("offered 21.00 req/s"), "{line}");
    let s: Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    let (offered, achieved) = (f(&s, "load.offered_rps"), f(&s, "load.achieved_rps"));
    assert_eq!(s["load"]["verdict"], "stable");
    assert!(
        achieved <= offered,
        "achieved {achieved} > offered {offered}"
    );
}
