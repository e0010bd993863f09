//! `[workload] n`: how many parallel samples each request asks for (vLLM's
//! and the OpenAI API's `n`), drawn per request from a length-style
//! distribution on its own random stream, so adding `n` to a scenario does
//! not move any other draw. A source that already says (a trace's `n`
//! column) keeps its value. The replica shares the prompt's KV blocks among
//! the samples (`replica::fork`).

use super::{LengthSampler, RequestSource, RequestSpec, WorkloadError, WorkloadReport};
use crate::request::Request;
use crate::rng::{self, StreamRng};
use crate::scenario::MAX_SAMPLES;
use crate::time::SimTime;

/// Sets each request's `samples` from a distribution (when its source did
/// not), for fresh requests and closed-loop follow-ups alike.
pub struct Samples<S> {
    inner: S,
    n: LengthSampler,
    rng: StreamRng,
}

impl<S: RequestSource> Samples<S> {
    pub fn new(inner: S, n: LengthSampler, seed: u64) -> Self {
        Samples {
            inner,
            n,
            rng: rng::stream(seed, "workload.n"),
        }
    }

    fn draw(&mut self, mut spec: RequestSpec) -> RequestSpec {
        if spec.samples == 0 {
            spec.samples = self.n.sample(&mut self.rng).min(MAX_SAMPLES);
        }
        spec
    }
}

impl<S: RequestSource> RequestSource for Samples<S> {
    fn next_request(&mut self) -> Option<RequestSpec> {
        let spec = self.inner.next_request()?;
        Some(self.draw(spec))
    }

    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        let spec = self.inner.on_request_end(req, now, completed)?;
        Some(self.draw(spec))
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        self.inner.finish()
    }

    fn open_loop(&self) -> bool {
        self.inner.open_loop()
    }

    fn tenant_name(&self, index: u32) -> Option<String> {
        self.inner.tenant_name(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{build, Context};

    fn workload(n: &str) -> crate::scenario::WorkloadCfg {
        let text = format!(
            "arrival = {{ process = \"poisson\", rate = 5.0 }}\nprompt_tokens = {{ dist = \"fixed\", value = 100 }}\noutput_tokens = {{ dist = \"fixed\", value = 10 }}\n{n}"
        );
        toml::from_str(&text).unwrap()
    }

    fn draws(n: &str) -> Vec<(SimTime, u32, u32)> {
        let ctx = Context::new("t", std::path::Path::new("."), 7);
        let mut src = build(&workload(n), &ctx).unwrap();
        (0..200)
            .map(|_| {
                let s = src.next_request().unwrap();
                (s.arrival, s.prompt_tokens, s.samples)
            })
            .collect()
    }

    #[test]
    fn n_is_drawn_per_request_without_moving_other_draws() {
        let plain = draws("");
        let fixed = draws("n = { dist = \"fixed\", value = 4 }");
        let uniform = draws("n = { dist = \"uniform\", min = 1, max = 8 }");
        assert!(plain.iter().all(|r| r.2 == 0));
        assert!(fixed.iter().all(|r| r.2 == 4));
        assert!(uniform.iter().all(|r| (1..=8).contains(&r.2)));
        assert!(uniform.iter().any(|r| r.2 == 1) && uniform.iter().any(|r| r.2 == 8));
        // Arrivals and lengths are the same draws with or without `n`.
        let strip = |v: &[(SimTime, u32, u32)]| v.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>();
        assert_eq!(strip(&plain), strip(&fixed));
        assert_eq!(strip(&plain), strip(&uniform));
    }

    fn trace_samples(ext: &str, body: &str, n_dist: &str) -> Result<Vec<u32>, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(format!("t.{ext}")), body).unwrap();
        let text = format!(
            "trace = {{ format = \"{}\", path = \"t.{ext}\", columns = {{ arrival = \"t\", prompt = \"p\", output = \"o\", n = \"n\" }} }}\n{n_dist}",
            if ext == "csv" { "csv" } else { "jsonl" }
        );
        let cfg: crate::scenario::WorkloadCfg = toml::from_str(&text).unwrap();
        let ctx = Context::new("s.toml", dir.path(), 1);
        let mut src = build(&cfg, &ctx).map_err(|e| e.to_string())?;
        let mut out = vec![];
        while let Some(s) = src.next_request() {
            out.push(s.samples);
        }
        src.finish().map_err(|e| e.to_string())?;
        Ok(out)
    }

    #[test]
    fn a_trace_column_gives_each_request_its_n() {
        let csv = "t,p,o,n\n0,10,5,1\n1,10,5,4\n2,10,5,2\n";
        assert_eq!(trace_samples("csv", csv, ""), Ok(vec![1, 4, 2]));
        let json = "{\"t\":0,\"p\":10,\"o\":5,\"n\":3}\n{\"t\":1,\"p\":10,\"o\":5,\"n\":1}\n";
        assert_eq!(trace_samples("jsonl", json, ""), Ok(vec![3, 1]));
        // The trace's value wins over a workload distribution.
        let fixed = "n = { dist = \"fixed\", value = 8 }";
        assert_eq!(trace_samples("csv", csv, fixed), Ok(vec![1, 4, 2]));
        // Out of range or missing: the line and the column are named.
        let e = trace_samples("csv", "t,p,o,n\n0,10,5,1\n1,10,5,0\n", "").unwrap_err();
        assert!(
            e.contains("line 3") && e.contains("\"n\"") && e.contains("1 to 128"),
            "{e}"
        );
        let e = trace_samples("csv", "t,p,o\n0,10,5\n", "").unwrap_err();
        assert!(e.contains("columns.n") || e.contains("\"n\""), "{e}");
    }
}
