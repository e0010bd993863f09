//! ServeGen reader tests: descriptor parsing and generated streams.

mod parsing {
    use super::super::*;

    #[test]
    fn python_dict_pmfs_parse() {
        assert_eq!(parse_pmf("{}"), Some(vec![]));
        assert_eq!(
            parse_pmf("{9: 0.5, 163: 5e-1}"),
            Some(vec![(9.0, 0.5), (163.0, 0.5)])
        );
        assert_eq!(parse_pmf("{9 0.5}"), None);
        assert_eq!(parse_pmf("[1, 2]"), None);
        assert_eq!(parse_pmf("{1: -0.5}"), None);
    }

    #[test]
    fn window_gaps_have_the_window_rate() {
        for (p, shape) in [(Pattern::Gamma, 0.3), (Pattern::Weibull, 0.6)] {
            let g = Gaps::new(p, shape, 4.0).unwrap();
            let mut r = rng::stream(1, "t");
            let n = 400_000;
            let mean = (0..n).map(|_| g.sample(&mut r)).sum::<f64>() / n as f64;
            assert!((mean * 4.0 - 1.0).abs() < 0.03, "{p:?}: {mean}");
        }
    }
}

mod generation {
    use super::super::*;
    use crate::scenario::TraceFormat;
    use crate::workload::length::{Fixed, LengthSampler};

    /// Two clients over six windows: client 0 Gamma (CV ≈ 1.4) at 10/s
    /// with an idle window, client 5 Weibull at 5/s; client 0 has
    /// PMFs, client 5 uses the fallback.
    fn folder() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let mut a = String::new();
        for k in 0..6 {
            if k == 2 {
                a.push_str(&format!("{},0,0,,0,0\n", k * 600));
            } else {
                a.push_str(&format!("{},10,1.41,Gamma,0.5,0.2\n", k * 600));
            }
        }
        std::fs::write(d.path().join("chunk-0-trace.csv"), a).unwrap();
        let b: String = (0..6)
            .map(|k| format!("{},5,1.6,Weibull,0.7,0.12\n", k * 600))
            .collect();
        std::fs::write(d.path().join("chunk-5-trace.csv"), b).unwrap();
        std::fs::write(
            d.path().join("chunk-0-dataset.json"),
            r#"{"0": {"input_tokens": "{100: 0.5, 300: 0.5}", "output_tokens": "{0: 0.2, 10: 0.8}"}, "21600": {"input_tokens": "{}", "output_tokens": "{}"}}"#,
        )
        .unwrap();
        d
    }

    fn cfg(d: &std::path::Path) -> TraceCfg {
        TraceCfg::new(TraceFormat::Servegen, d.display().to_string())
    }

    fn fallback() -> Option<(LengthSampler, LengthSampler)> {
        let f = |v| LengthSampler::new(Box::new(Fixed(v)), None, None);
        Some((f(7), f(3)))
    }

    fn all(c: &TraceCfg, seed: u64) -> (Vec<RequestSpec>, TraceReport) {
        let ctx = Context::new("t", std::path::Path::new("."), seed);
        let mut s = ServeGen::open(c, "workload.trace", &ctx, fallback()).unwrap();
        let v: Vec<RequestSpec> = std::iter::from_fn(|| s.next_request()).collect();
        (v, s.finish().unwrap().unwrap().traces.pop().unwrap())
    }

    #[test]
    fn each_client_is_a_tenant_arriving_at_its_window_rates() {
        let d = folder();
        let (v, rep) = all(&cfg(d.path()), 1);
        assert_eq!(rep.tenants, vec!["chunk-0", "chunk-5"]);
        assert!(v.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        let count = |t: u32, lo: f64, hi: f64| {
            v.iter()
                .filter(|r| r.tenant == t && (lo..hi).contains(&r.arrival.as_secs_f64()))
                .count() as f64
        };
        // 10/s × 600 s per active window; nothing in the idle one.
        for k in [0, 1, 3, 4, 5] {
            let n = count(0, k as f64 * 600.0, (k + 1) as f64 * 600.0);
            assert!((n / 6_000.0 - 1.0).abs() < 0.06, "window {k}: {n}");
        }
        assert_eq!(count(0, 1200.0, 1800.0), 0.0);
        assert!((count(1, 0.0, 3600.0) / 18_000.0 - 1.0).abs() < 0.04);
        // Client 0 draws from its PMFs (a 0 output is replayed as 1 and
        // counted); client 5 from the fallback.
        assert!(v
            .iter()
            .filter(|r| r.tenant == 0)
            .all(|r| [100, 300].contains(&r.prompt_tokens) && [1, 10].contains(&r.output_tokens)));
        assert!(v
            .iter()
            .filter(|r| r.tenant == 1)
            .all(|r| (r.prompt_tokens, r.output_tokens) == (7, 3)));
        let zeros = rep.zero_output as f64 / count(0, 0.0, 3600.0);
        assert!((zeros - 0.2).abs() < 0.015, "{zeros}");
    }

    #[test]
    fn options_and_seeds() {
        let d = folder();
        let base = cfg(d.path());
        let (a, _) = all(&base, 1);
        let (b, _) = all(&base, 1);
        let (c, _) = all(&base, 2);
        assert_eq!(a, b);
        assert_ne!(a, c);
        // Window [600, 1200) at 2× speed: 300 s of arrivals.
        let mut w = base.clone();
        w.start_s = Some(600.0);
        w.end_s = Some(1200.0);
        w.time_scale = Some(2.0);
        let (v, _) = all(&w, 1);
        let last = v.last().unwrap().arrival.as_secs_f64();
        assert!(last < 300.0 && last > 299.0, "{last}");
        assert!((v.len() as f64 / 9_000.0 - 1.0).abs() < 0.06, "{}", v.len());
        // A rate override scales every client; first N stops early.
        let mut r = base.clone();
        r.rate = Some(6.0);
        let (v, _) = all(&r, 1);
        assert!(
            (v.len() as f64 / 3600.0 / 6.0 - 1.0).abs() < 0.05,
            "{}",
            v.len()
        );
        r.max_requests = Some(500);
        let (v, rep) = all(&r, 1);
        assert_eq!((v.len(), rep.requests), (500, 500));
        // A malformed descriptor row names its file and line, or is
        // skipped and counted when lenient.
        let bad = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(d.path()).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, bad.path().join(f.file_name().unwrap())).unwrap();
        }
        let trace = bad.path().join("chunk-5-trace.csv");
        let text = std::fs::read_to_string(&trace).unwrap().replacen(
            "1200,5,1.6,Weibull",
            "1200,5,1.6,Pareto",
            1,
        );
        std::fs::write(&trace, text).unwrap();
        let mut c = cfg(bad.path());
        let ctx = Context::new("s.toml", std::path::Path::new("."), 1);
        let e = ServeGen::open(&c, "workload.trace", &ctx, fallback())
            .err()
            .unwrap()
            .to_string();
        assert!(e.ends_with("chunk-5-trace.csv: line 3: pattern: expected Gamma, Weibull or empty, got \"Pareto\""), "{e}");
        c.lenient = true;
        let (v, rep) = all(&c, 1);
        assert_eq!(rep.skipped_lines, 1);
        assert!(rep.first_skipped.unwrap().contains("line 3"));
        assert!(!v.is_empty());
        // Without fallback lengths, a client without PMFs is an error.
        let ctx = Context::new("s.toml", std::path::Path::new("."), 1);
        let e = ServeGen::open(&base, "workload.trace", &ctx, None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("s.toml: workload.trace: ServeGen client 5 has no length PMFs"),
            "{e}"
        );
    }
}
