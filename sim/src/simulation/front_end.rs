//! The serving front end (`[engine] front_end`): between a request's send
//! and the moment a router and a replica's scheduler see it, the API
//! server parses it, applies the chat template, tokenises the prompt and
//! hands it to the engine process. The request waits out that time here,
//! in flight (it counts in TTFT and E2E, and a closed-loop user waits with
//! it), and then takes the way every admitted request takes
//! ([`Simulation::send_on`]). Runs whose front end takes no time never
//! enter here.

use super::{Event, InvariantViolation, Simulation};
use crate::request::{Request, RequestId};
use crate::time::SimTime;

/// The requests in the front end, by slot: each leaves at its own time
/// (the per-prompt-token part makes the order differ from arrivals').
#[derive(Debug, Default)]
pub(super) struct FrontEndHop {
    held: std::collections::BTreeSet<RequestId>,
}

impl Simulation<'_> {
    /// Whether requests pass the front end in some time.
    pub(super) fn front_end_on(&self) -> bool {
        !self.plan.front_end.is_zero()
    }

    /// Takes admitted request `req` (slot `id`, canary pool `pool`) into the
    /// front end; it leaves at `now` plus the front end's time for its
    /// prompt.
    pub(super) fn enter_front_end(
        &mut self,
        id: RequestId,
        req: Request,
        pool: Option<usize>,
        now: SimTime,
    ) {
        let at = now.plus(self.plan.front_end.nanos(req.prompt_tokens));
        self.put(id, req);
        self.front_end.held.insert(id);
        let pool = pool.map_or(0, |p| p as u32 + 1);
        self.queue.schedule(at, Event::FrontEnd(id, pool));
    }

    /// Request `id` leaves the front end: routed and queued as at admission.
    pub(super) fn on_front_end(&mut self, id: RequestId, pool: u32, now: SimTime) {
        let was_held = self.front_end.held.remove(&id);
        debug_assert!(was_held, "request {id} left a front end it was not in");
        let pool = pool.checked_sub(1).map(|p| p as usize);
        self.send_on(id, pool, now);
    }

    /// Conservation: a request in the front end is in flight, held once.
    pub(super) fn front_end_check(&self, held: &mut [bool]) -> Result<(), InvariantViolation> {
        for &id in &self.front_end.held {
            let i = id as usize;
            if held[i] {
                return Err(InvariantViolation(format!(
                    "request {id} is in the front end and held elsewhere"
                )));
            }
            if self.requests[i].status != crate::request::Status::InFlight {
                return Err(InvariantViolation(format!(
                    "request {id} is {} but still in the front end",
                    self.requests[i].status.as_str()
                )));
            }
            held[i] = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::scenario;
    use super::super::Simulation;
    use crate::config::EngineRuntime;
    use crate::request::Status;
    use crate::scenario::Scenario;

    const LONE: &str = r#"
[horizon]
requests = 1
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 1000 }
output_tokens = { dist = "fixed", value = 101 }
"#;

    fn with_front_end(fe: &str) -> String {
        format!("name = \"t\"\n[model]\npreset = \"llama-3.1-8b\"\n[hardware]\npreset = \"h100-sxm\"\n{LONE}[engine]\nfront_end = {fe}\n")
    }

    fn run(s: &Scenario) -> crate::report::RunResult {
        Simulation::new(s).run(|_| {}).unwrap()
    }

    #[test]
    fn a_front_end_adds_its_time_to_ttft_and_e2e_exactly() {
        let plain = run(&scenario(LONE));
        let slow = run(&scenario(&format!(
            "{LONE}[engine]\nfront_end = {{ request_s = 0.02, prompt_token_s = 1e-6 }}\n"
        )));
        let (a, b) = (&plain.requests[0], &slow.requests[0]);
        // 20 ms + 1,000 tokens × 1 µs.
        assert_eq!(b.ttft().unwrap(), a.ttft().unwrap() + 21_000_000);
        assert_eq!(b.e2e(), a.e2e().map(|e| e + 21_000_000));
        assert_eq!(b.tpot(), a.tpot());
        assert_eq!(slow.summary.counts.completed, 1);
    }

    #[test]
    fn a_closed_loop_user_waits_out_the_front_end() {
        let closed = |fe: &str| {
            run(&scenario(&format!(
                r#"
[horizon]
requests = 4
[workload]
arrival = {{ process = "closed", users = 1 }}
prompt_tokens = {{ dist = "fixed", value = 200 }}
output_tokens = {{ dist = "fixed", value = 20 }}
{fe}
"#
            )))
        };
        let plain = closed("");
        let slow = closed("[engine]\nfront_end = { request_s = 0.05 }");
        let ends = |r: &crate::report::RunResult| {
            let mut e: Vec<u64> = r
                .requests
                .iter()
                .map(|q| q.finished.get().unwrap().0)
                .collect();
            e.sort_unstable();
            e
        };
        // The one user sends its next request when the last one ends, so
        // each of the four requests' 50 ms adds to every later end.
        for (k, (p, s)) in ends(&plain).iter().zip(ends(&slow)).enumerate() {
            assert_eq!(s, p + (k as u64 + 1) * 50_000_000, "request {k}");
        }
    }

    #[test]
    fn a_request_in_the_front_end_at_the_horizon_is_in_flight() {
        let s = scenario(
            r#"
[horizon]
duration_s = 1.0
[workload]
arrival = { process = "poisson", rate = 1000.0 }
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
[engine]
front_end = { request_s = 0.6 }
"#,
        );
        let r = run(&s);
        let c = &r.summary.counts;
        // Arrivals of the last 0.6 s are still in the front end: in flight,
        // never started, not lost.
        assert!(c.in_flight > 300, "{c:?}");
        let waiting = r
            .requests
            .iter()
            .filter(|q| q.status == Status::InFlight && q.first_token.get().is_none())
            .count();
        assert!(waiting > 500, "{waiting} {c:?}");
        assert_eq!(
            c.completed + c.in_flight + c.rejected,
            r.requests.len() as u64
        );
    }

    #[test]
    fn front_end_keys_are_checked_and_the_runtime_gives_the_default() {
        for (fe, key) in [
            ("{ request_s = -0.1 }", "engine.front_end.request_s"),
            ("{ request_s = 100.0 }", "engine.front_end.request_s"),
            (
                "{ prompt_token_s = 1.0 }",
                "engine.front_end.prompt_token_s",
            ),
        ] {
            let e = Scenario::from_toml_str(&with_front_end(fe), "t.toml").unwrap_err();
            assert_eq!(e.key, key, "{e}");
            assert!(e.to_string().contains("must be seconds"), "{e}");
        }
        let e = Scenario::from_toml_str(&with_front_end("{ request = 1 }"), "t.toml").unwrap_err();
        assert!(e.to_string().contains("unknown field `request`"), "{e}");
        // The front end is the fleet's: a pool may not set its own.
        let pools = format!(
            "{}\n[fleet]\npools = [{{ name = \"a\", replicas = 1, engine = {{ front_end = {{ request_s = 0.1 }} }} }}]\n",
            with_front_end("{ request_s = 0.01 }")
        );
        let e = Scenario::from_toml_str(&pools, "t.toml").unwrap_err();
        assert_eq!(e.key, "fleet.pools[0].engine.front_end", "{e}");
        // Unset: the runtime's own, none for the generic runtimes.
        let plan = scenario(LONE).run_plan();
        assert!(plan.front_end.is_zero());
        let plan = scenario(&format!("{LONE}[engine]\nruntime = \"trtllm\"")).run_plan();
        assert_eq!(plan.front_end, EngineRuntime::Trtllm.front_end());
    }
}
