//! Conservation of time per request, for every example scenario: the latency
//! components of each request add up to its TTFT and (once completed) to its
//! E2E latency, to the nanosecond.

use sim::attribution::Component;
use sim::request::Status;
use sim::{Scenario, Simulation};
use std::path::PathBuf;

fn scenarios() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    assert!(v.len() >= 3, "{v:?}");
    v
}

#[test]
fn every_example_scenario_conserves_time_per_request() {
    for path in scenarios() {
        let name = path.display().to_string();
        let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let r = Simulation::new(&s)
            .run(|_| {})
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut checked = 0;
        for (i, q) in r.requests.iter().enumerate() {
            let a = &q.attribution;
            if let Some(ttft) = q.ttft() {
                assert_eq!(a.ttft_sum(), ttft, "{name}: TTFT of request {i}: {a:?}");
                let queue: u64 = Component::ALL
                    .iter()
                    .filter(|c| c.is_queue())
                    .map(|&c| a.get(c))
                    .sum();
                assert_eq!(Some(queue), q.queue_wait(), "{name}: queue wait of {i}");
            }
            if q.status == Status::Completed {
                assert_eq!(
                    a.total(),
                    q.e2e().unwrap(),
                    "{name}: E2E of request {i}: {a:?}"
                );
                checked += 1;
            }
        }
        assert!(checked > 0, "{name}: no completed request");
    }
}
