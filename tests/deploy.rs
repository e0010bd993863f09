//! `plan --emit` and `sweep --emit` write the chosen deployment (its replica
//! counts and settings), `plan --energy-price-kwh` prices the chosen fleet's
//! energy, and bad figures are refused before anything runs.

mod common;
use common::*;
use serde_json::Value;

/// The `kind: Deployment` documents of a manifest: (name, replicas).
fn deployments(yaml: &str) -> Vec<(String, u64)> {
    use serde::Deserialize;
    serde_norway::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|d| d["kind"] == "Deployment")
        .map(|d| {
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                d["spec"]["replicas"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_disaggregated_plan_emits_its_sized_pools_and_prices_their_energy() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("plan");
    let o = run(&[
        "plan",
        repo()
            .join("scenarios/disaggregation.toml")
            .to_str()
            .unwrap(),
        "--space",
        repo()
            .join("scenarios/spaces/disaggregation-split.toml")
            .to_str()
            .unwrap(),
        "--demand",
        "24",
        "--out",
        out.to_str().unwrap(),
        "--emit",
        "all",
        "--energy-price-kwh",
        "0.1",
        "--carbon-g-per-kwh",
        "300",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan: Value = serde_json::from_str(&read(&out.join("plan.json"))).unwrap();
    let best = plan["best"].as_u64().unwrap();
    let option = plan["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["index"].as_u64() == Some(best))
        .unwrap();
    let fleet = &option["fleet"];
    // The unit the plan scaled, times the units it found, pool by pool.
    let units = fleet["units"].as_u64().unwrap();
    let unit = fleet["unit"].as_str().unwrap();
    let per = |role: &str| -> u64 {
        unit.split(" + ")
            .find(|p| p.ends_with(role))
            .and_then(|p| p.split(' ').next())
            .map_or(0, |n| n.parse().unwrap())
    };
    let deploy = out.join("deploy");
    let yaml = read(&deploy.join("kubernetes.yaml"));
    let mut d = deployments(&yaml);
    d.sort();
    assert_eq!(
        d,
        [
            ("disaggregation-decode".to_string(), per("decode") * units),
            ("disaggregation-prefill".to_string(), per("prefill") * units),
        ]
    );
    assert_eq!(
        d.iter().map(|(_, n)| n).sum::<u64>(),
        fleet["replicas"].as_u64().unwrap()
    );
    let sh = read(&deploy.join("vllm.sh"));
    assert_eq!(
        sh.matches("vllm serve meta-llama/Llama-3.1-8B").count(),
        2,
        "{sh}"
    );
    assert!(read(&deploy.join("sglang.sh")).contains("--disaggregation-mode prefill"));
    assert!(read(&deploy.join("dynamo.yaml")).contains("--is-prefill-worker"));
    assert!(stdout(&o).contains("note: "), "{}", stdout(&o));
    // Energy: the price and the intensity times the month's kWh, on top of
    // the GPUs' cost.
    let e: Value = serde_json::from_str(&read(&out.join("energy.json"))).unwrap();
    let kwh = f(&e, "kwh_per_month");
    assert!((kwh - f(&e, "fleet_avg_power_w") * 730.0 / 1000.0).abs() < 1e-6);
    assert!((f(&e, "energy_usd_per_month") - 0.1 * kwh).abs() < 1e-6);
    assert!((f(&e, "kg_co2_per_month") - 0.3 * kwh).abs() < 1e-6);
    // The plan ranked the option by its GPUs plus its energy at the price;
    // energy.json prices the chosen fleet's own run on top of the GPUs.
    let gpu = f(fleet, "usd_per_month") - f(fleet, "energy_usd_per_month");
    assert!(f(fleet, "energy_usd_per_month") > 0.0);
    assert!((f(&e, "gpu_usd_per_month") - gpu).abs() < 1e-6);
    assert!((f(&e, "total_usd_per_month") - gpu - 0.1 * kwh).abs() < 1e-6);
    // Each GPU draws between its idle power and its TDP (H100: 105–700 W).
    let w = f(&e, "avg_power_w_per_gpu");
    assert!((105.0..=700.0).contains(&w), "{w}");
}

#[test]
fn a_sweep_emits_its_operating_point() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(200)).unwrap();
    let grid = tmp.path().join("g.toml");
    std::fs::write(
        &grid,
        "[axes]\n\"fleet.replicas\" = [2, 3]\n\"engine.max_num_seqs\" = [64, 128]\n",
    )
    .unwrap();
    let out = tmp.path().join("sweep");
    let o = run(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--grid",
        grid.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--emit",
        "vllm,kubernetes",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let op: Value = serde_json::from_str(&read(&out.join("operating-point.json"))).unwrap();
    let best = op["best"].as_u64().unwrap() as usize;
    let sweep: Value = serde_json::from_str(&read(&out.join("sweep.json"))).unwrap();
    let values = &sweep["points"][best]["values"];
    let sh = read(&out.join("deploy/vllm.sh"));
    assert!(
        sh.contains(&format!("--max-num-seqs {}", values[1])),
        "{sh}\n{values}"
    );
    let d = deployments(&read(&out.join("deploy/kubernetes.yaml")));
    assert_eq!(d.len(), 1);
    assert_eq!(Some(d[0].1), values[0].as_u64());
    assert!(!out.join("deploy/sglang.sh").exists());
}

#[test]
fn bad_energy_figures_and_a_sharded_emit_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&[
        "plan",
        repo().join("scenarios/quickstart.toml").to_str().unwrap(),
        "--space",
        repo()
            .join("scenarios/spaces/quickstart-hardware.toml")
            .to_str()
            .unwrap(),
        "--demand",
        "30",
        "--out",
        tmp.path().join("p").to_str().unwrap(),
        "--energy-price-kwh",
        "-1",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--energy-price-kwh"), "{}", stderr(&o));
    let o = run(&[
        "sweep",
        repo().join("scenarios/quickstart.toml").to_str().unwrap(),
        "--grid",
        repo()
            .join("scenarios/grids/quickstart-sizing.toml")
            .to_str()
            .unwrap(),
        "--out",
        tmp.path().join("s").to_str().unwrap(),
        "--shard",
        "0/2",
        "--emit",
        "all",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--emit"), "{}", stderr(&o));
}
