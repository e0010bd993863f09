//! Regions through the binary: `scenarios/regions.toml` overflows between
//! regions with the round trip in TTFT, tags every request with its origin,
//! conserves requests per region, repeats byte for byte, beats each region
//! sized alone on the same GPUs, and bad region keys fail with their path.

mod common;
use common::*;

fn regions_text() -> String {
    read(&repo().join("scenarios/regions.toml"))
}

#[test]
fn the_example_overflows_conserves_and_repeats() {
    let tmp = tempfile::tempdir().unwrap();
    let f = repo().join("scenarios/regions.toml");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let o = simulate(&f, &a, &[]);
    assert!(
        stdout(&o).contains("region       us-east:"),
        "{}",
        stdout(&o)
    );
    simulate(&f, &b, &[]);
    for file in [
        "summary.json",
        "requests.csv",
        "timeseries.csv",
        "pools.csv",
    ] {
        assert_eq!(read(&a.join(file)), read(&b.join(file)), "{file}");
    }
    let s: serde_json::Value = serde_json::from_str(&read(&a.join("summary.json"))).unwrap();
    let regs = s["regions"].as_array().unwrap();
    assert_eq!(regs.len(), 3);
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap();
    let out: u64 = regs.iter().map(|r| n(r, "overflow_out")).sum();
    let inn: u64 = regs.iter().map(|r| n(r, "overflow_in")).sum();
    assert!(out > 0 && out == inn);
    let arrived = s["counts"]["arrived"].as_u64().unwrap();
    assert_eq!(regs.iter().map(|r| n(r, "requests")).sum::<u64>(), arrived);
    // requests.csv: every row names its origin; rows served outside it
    // paid the 100 ms round trip.
    let csv = read(&a.join("requests.csv"));
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(*header.last().unwrap(), "origin_region");
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (rep, ttft) = (col("replica"), col("ttft_ms"));
    let region_of = |r: u32| ["us-east", "eu-west", "ap-northeast"][(r / 4) as usize];
    let mut away = 0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let origin = *f.last().unwrap();
        if let Ok(r) = f[rep].parse::<u32>() {
            if region_of(r) != origin {
                away += 1;
                if let Ok(t) = f[ttft].parse::<f64>() {
                    assert!(t >= 100.0, "{l}");
                }
            }
        }
    }
    assert_eq!(away, out);
}

#[test]
fn sharing_meets_the_slo_where_each_region_alone_does_not() {
    let shared = summary_of("regions", &[]);
    let alone = summary_of(
        "regions",
        &[(
            "queue_threshold = 0\n",
            "queue_threshold = 0\nenabled = false\n",
        )],
    );
    let worst = |s: &serde_json::Value| {
        s["regions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["slo_attainment"].as_f64().unwrap())
            .fold(1.0, f64::min)
    };
    assert!(worst(&shared) >= 0.99, "{}", worst(&shared));
    assert!(worst(&alone) < 0.5, "{}", worst(&alone));
    assert!(alone["regions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["overflow_out"].as_u64() == Some(0)));
}

#[test]
fn bad_region_keys_fail_with_their_path() {
    let text = regions_text();
    let cases = [
        (
            text.replace("region = \"eu-west\"", "region = \"mars\""),
            "fleet.pools[1].region",
        ),
        (
            text.replace("rtt_ms = 100", "rtt_ms = -5"),
            "fleet.overflow.rtt_ms",
        ),
        (
            text.replace("gpu_price_per_hour = 0.80", "gpu_price_per_hour = -1"),
            "fleet.regions[0].gpu_price_per_hour",
        ),
        (
            text.replace(
                "name = \"eu\"\nregion = \"eu-west\"\nreplicas = 4",
                "name = \"eu\"\nregion = \"eu-west\"\nreplicas = 0",
            ),
            "fleet.pools[1].replicas",
        ),
        (
            text.replace("rtt_ms = 100", "rtt_ms = 100\nrtt = 5"),
            "fleet.overflow.rtt",
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    for (i, (t, key)) in cases.iter().enumerate() {
        let p = tmp.path().join(format!("bad{i}.toml"));
        std::fs::write(&p, t).unwrap();
        let o = run(&["check", p.to_str().unwrap()]);
        assert!(!o.status.success(), "{key}");
        let e = stderr(&o);
        assert!(e.contains(key) && e.contains("bad"), "{key}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
}
