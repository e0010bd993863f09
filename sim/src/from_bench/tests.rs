use super::*;
use crate::accuracy::{Format, Lengths, Load};

const BASE: &str = r#"
name = "from-bench"
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
"#;

/// The terms the synthetic measurements are made with: unlike the start.
fn known() -> BenchTerms {
    BenchTerms {
        front_end_ns: 18e6,
        step_ns: 1.5e6,
        seq_ns: 60e3,
        compute_efficiency: 0.45,
        bandwidth_efficiency: 0.8,
    }
}

/// Closed-loop points from one user to 32, short and long prompts; the
/// long contexts at 32 users make KV reads a large part of a decode step,
/// which tells the bandwidth apart from the fixed step time.
fn shapes() -> Vec<MeasuredPoint> {
    [
        (1, 128, 64),
        (1, 4096, 32),
        (4, 512, 128),
        (8, 1024, 64),
        (16, 256, 128),
        (32, 512, 64),
        (32, 4096, 96),
        (2, 2048, 64),
    ]
    .iter()
    .enumerate()
    .map(|(i, &(users, prompt, output))| {
        let mut p = MeasuredPoint::new(Format::Vllm, format!("synthetic.json#{i}"));
        p.load = Some(Load::Concurrency { users });
        let spread = |n: u32| Lengths::Recorded {
            tokens: vec![n, n - n / 8, n - n / 4, n - n / 8],
        };
        p.prompt = Some(spread(prompt));
        p.output = Some(spread(output));
        p.requests = Some(u64::from(4 * users).max(8));
        for m in METRICS {
            p.push(m, Stat::Mean, Some(1.0));
        }
        p
    })
    .collect()
}

fn settings() -> Settings {
    Settings {
        max_requests: 64,
        ..Settings::default()
    }
}

fn base() -> Table {
    BASE.parse().unwrap()
}

/// The points with their measurements replaced by what servesim predicts
/// with a profile of `terms`.
fn measured_with(terms: &BenchTerms) -> Vec<MeasuredPoint> {
    let mut points = shapes();
    let base = base();
    let e = express(Some(&base), "t.toml", &settings(), &points[0]).unwrap();
    let p = with_terms(&template(&e.scenario, "m", file()), terms);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("known.toml");
    std::fs::write(&path, p.to_toml_string()).unwrap();
    let mut profiled = base.clone();
    profiled.insert(
        "hardware".into(),
        toml::toml! { profile = (path.display().to_string()) }.into(),
    );
    let c = compare(
        Vec::new(),
        &points,
        Some((&profiled, "t.toml")),
        &settings(),
        &[],
        &|| {},
    );
    for pr in &c.points {
        if !matches!(pr.outcome, PointOutcome::Compared { .. }) {
            panic!("{}: {:?}", pr.point.id, pr.outcome);
        }
        if let PointOutcome::Compared { comparisons, .. } = &pr.outcome {
            if comparisons.iter().any(|c| c.predicted_ms.is_none()) {
                panic!("{}: {:?}", pr.point.id, comparisons);
            }
        }
    }
    let r = simulate(&points, &profiled, "t.toml", &settings());
    for (point, ratios) in points.iter_mut().zip(&r) {
        for m in point.measured.iter_mut() {
            let q = ratios.iter().find(|(x, _)| *x == m.metric).unwrap().1;
            m.ms *= q.unwrap_or_else(|| panic!("{} {:?} {:?}", point.id, m, ratios));
        }
    }
    points
}

fn file() -> Vec<BenchFile> {
    vec![BenchFile {
        path: "synthetic.json".into(),
        fnv1a64: format!("{:016x}", crate::profile::fnv1a64(b"synthetic")),
        points: 8,
    }]
}

fn request(points: Vec<MeasuredPoint>, base: &Table) -> FitRequest<'_> {
    FitRequest {
        files: file(),
        points,
        base,
        origin: "t.toml",
        settings: settings(),
        max_evaluations: DEFAULT_EVALUATIONS,
        start: start_terms(),
    }
}

#[test]
fn coordinates_round_trip() {
    let t = known();
    let back = from_coords(&to_coords(&t));
    assert!((back.front_end_ns - t.front_end_ns).abs() < 1e-3);
    assert!((back.compute_efficiency - t.compute_efficiency).abs() < 1e-12);
}

#[test]
fn the_fit_recovers_the_terms_synthetic_measurements_were_made_with() {
    let points = measured_with(&known());
    let base = base();
    let started = std::time::Instant::now();
    let p = fit(&request(points, &base), &|_, _| {}).unwrap();
    let b = p.bench.as_ref().unwrap();
    let k = known();
    let t = &b.terms;
    let rel = |a: f64, b: f64| (a / b - 1.0) * 100.0;
    eprintln!(
        "recovered in {:.1} s, {} evaluations: front end {:+.2} %, step {:+.2} %, seq {:+.2} %, \
         compute {:+.2} %, bandwidth {:+.2} %; training {:?}; held back {:?}; default {:?}",
        started.elapsed().as_secs_f64(),
        b.evaluations,
        rel(t.front_end_ns, k.front_end_ns),
        rel(t.step_ns, k.step_ns),
        rel(t.seq_ns, k.seq_ns),
        rel(t.compute_efficiency, k.compute_efficiency),
        rel(t.bandwidth_efficiency, k.bandwidth_efficiency),
        b.training,
        b.held_back,
        b.default_held_back,
    );
    assert_eq!(p.held_out.shapes, 2);
    assert_eq!(b.training.points, 6);
    for (name, got, want, tol) in [
        ("front end", t.front_end_ns, k.front_end_ns, 1.0),
        ("step", t.step_ns, k.step_ns, 1.0),
        ("seq", t.seq_ns, k.seq_ns, 1.0),
        ("compute", t.compute_efficiency, k.compute_efficiency, 1.0),
        (
            "bandwidth",
            t.bandwidth_efficiency,
            k.bandwidth_efficiency,
            1.0,
        ),
    ] {
        assert!(rel(got, want).abs() < tol, "{name}: {got} against {want}");
    }
    assert!(
        b.held_back.ttft_pct < 0.5 && b.held_back.tpot_pct < 0.5,
        "{b:?}"
    );
    assert!(b.default_held_back.ttft_pct > b.held_back.ttft_pct, "{b:?}");
    // The profile reads back as written.
    let text = p.to_toml_string();
    assert_eq!(Profile::from_toml_str(&text, "p.toml").unwrap(), p);
}

/// Writes the committed sample `tests/data/from-bench/`: one `vllm bench
/// serve --save-result` JSON per point of [`shapes`], measured by servesim
/// itself with a profile of [`known`] terms, for the end-to-end test and
/// the documented before/after. Run with
/// `SERVESIM_WRITE_SAMPLE=1 cargo test -p servesim-sim --lib write_the_sample -- --ignored`.
#[test]
#[ignore = "writes tests/data/from-bench; run by hand to refresh the sample"]
fn write_the_sample() {
    if std::env::var("SERVESIM_WRITE_SAMPLE").is_err() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/from-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let mut points = shapes();
    // The lengths as the file lists them, one per request, so that the
    // points read back from the files are the ones simulated here.
    for p in &mut points {
        p.engine = Some("vllm".into());
        p.model = Some("meta-llama/Llama-3.1-8B-Instruct".into());
        let n = p.requests.unwrap() as usize;
        for l in [&mut p.prompt, &mut p.output] {
            let Some(Lengths::Recorded { tokens }) = l else {
                unreachable!()
            };
            *tokens = (0..n).map(|j| tokens[j % tokens.len()]).collect();
        }
    }
    let base = base();
    let e = express(Some(&base), "t.toml", &settings(), &points[0]).unwrap();
    let prof = with_terms(&template(&e.scenario, "m", file()), &known());
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("known.toml");
    std::fs::write(&path, prof.to_toml_string()).unwrap();
    let mut profiled = base.clone();
    profiled.insert(
        "hardware".into(),
        toml::toml! { profile = (path.display().to_string()) }.into(),
    );
    let r = compare(
        Vec::new(),
        &points,
        Some((&profiled, "t.toml")),
        &settings(),
        &[],
        &|| {},
    );
    for (i, pr) in r.points.iter().enumerate() {
        let PointOutcome::Compared { comparisons, .. } = &pr.outcome else {
            panic!("{:?}", pr.outcome)
        };
        let ms = |m: Metric| {
            comparisons
                .iter()
                .find(|c| c.metric == m)
                .and_then(|c| c.predicted_ms)
                .unwrap()
        };
        let p = &pr.point;
        let n = p.requests.unwrap() as usize;
        let lens = |l: &Option<Lengths>| match l {
            Some(Lengths::Recorded { tokens }) => tokens.clone(),
            _ => unreachable!(),
        };
        let Some(Load::Concurrency { users }) = p.load else {
            unreachable!()
        };
        let round = |v: f64| (v * 1000.0).round() / 1000.0;
        let json = serde_json::json!({
            "backend": "vllm",
            "model_id": "meta-llama/Llama-3.1-8B-Instruct",
            "num_prompts": n,
            "request_rate": "inf",
            "max_concurrency": users,
            "completed": n,
            "input_lens": lens(&p.prompt),
            "output_lens": lens(&p.output),
            "mean_ttft_ms": round(ms(Metric::Ttft)),
            "mean_tpot_ms": round(ms(Metric::Tpot)),
            "mean_e2el_ms": round(ms(Metric::E2e)),
        });
        std::fs::write(
            dir.join(format!("point-{i}.json")),
            serde_json::to_string_pretty(&json).unwrap() + "\n",
        )
        .unwrap();
    }
}
