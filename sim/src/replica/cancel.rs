//! Taking a request out of a replica before it finishes: what an HTTP server
//! does when its client disconnects (vLLM aborts the request at the next
//! engine step and frees its KV blocks, `AsyncLLM.abort`). The simulated twin
//! behind `servesim serve` and the live engine use it between iterations.

use super::Replica;
use crate::request::{Request, RequestId, Status};
use crate::time::SimTime;

impl Replica {
    /// Removes request `id` from this replica's queues or running batch and
    /// frees its KV blocks (device and host); its record is marked
    /// cancelled at `now`. Only between iterations (after
    /// `finish_iteration`, before `form_batch`). Returns false when the
    /// replica does not hold it (already finished, or never routed here).
    pub fn cancel(&mut self, id: RequestId, now: SimTime, reqs: &mut [Request]) -> bool {
        debug_assert!(!self.is_busy(), "cancel between iterations only");
        self.end_decode_run();
        let st = &mut self.st;
        let held = if let Some(i) = st.running.iter().position(|s| s.id == id && !s.done) {
            let mut s = st.running.remove(i);
            st.retire(&mut s, reqs);
            true
        } else if let Some(i) = st.swapped.iter().position(|s| s.id == id) {
            // Swapped blocks live in host memory, counted from `swapped`.
            st.swapped.remove(i);
            true
        } else if let Some(i) = st.inbox.iter().position(|w| w.id == id) {
            // Reached the engine, not yet its scheduler (`recv_interval`).
            st.inbox.remove(i);
            true
        } else {
            st.waiting.remove(id)
        };
        if held {
            let r = &mut reqs[id as usize];
            r.status = Status::Cancelled;
            r.finished = crate::time::Stamp::at(now);
        }
        held
    }

    /// Tokens generated so far by request `id` while it runs here (`None`
    /// when it is not in the running batch): how a server learns which
    /// sequences an iteration advanced, to stream their tokens.
    pub fn generated(&self, id: RequestId) -> Option<u32> {
        self.st
            .running
            .iter()
            .position(|s| s.id == id)
            .map(|i| self.run_generated(i))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{engine, replica, requests};
    use super::*;
    use crate::replica::TokenGaps;

    #[test]
    fn cancelling_a_running_sequence_frees_its_blocks_and_the_rest_completes() {
        let mut reqs = requests(3, 40, 10);
        let mut rep = replica(&engine(8, 512, 16), 100);
        for i in 0..3 {
            rep.enqueue(i);
        }
        let mut t = SimTime(0);
        let mut done = vec![];
        let mut gaps = TokenGaps::default();
        rep.form_batch(t, &mut reqs).unwrap();
        t = t.plus(1000);
        rep.finish_iteration(t, &mut reqs, &mut done, &mut gaps);
        let before = rep.kv().used();
        assert_eq!(rep.generated(1), Some(1));
        assert!(rep.cancel(1, t, &mut reqs));
        assert!(!rep.cancel(1, t, &mut reqs), "cancelled once");
        assert_eq!(rep.generated(1), None);
        assert!(rep.kv().used() < before, "its blocks are free");
        assert_eq!(reqs[1].status, Status::Cancelled);
        while rep.form_batch(t, &mut reqs).is_some() {
            t = t.plus(1000);
            rep.finish_iteration(t, &mut reqs, &mut done, &mut gaps);
        }
        assert_eq!(done.len(), 2);
        assert_eq!(rep.kv().used(), 0);
        assert_eq!(rep.kv().granted(), rep.kv().freed());
    }

    #[test]
    fn cancelling_a_waiting_request_dequeues_it() {
        let mut reqs = requests(2, 40, 4);
        let mut rep = replica(&engine(8, 512, 16), 100);
        rep.enqueue(0);
        rep.enqueue(1);
        assert!(rep.cancel(0, SimTime(5), &mut reqs));
        assert_eq!(rep.waiting_len(), 1);
        assert_eq!(reqs[0].finished, Some(SimTime(5)));
    }

    #[test]
    fn cancelling_a_request_not_yet_received_dequeues_it() {
        // SGLang's receive interval: arrivals wait in the inbox until the
        // scheduler receives; a cancel there must find them too.
        let mut reqs = requests(2, 40, 4);
        let mut cfg = engine(8, 512, 16);
        cfg.scheduler_recv_interval = 10;
        let mut rep = replica(&cfg, 100);
        rep.enqueue(0);
        rep.enqueue(1);
        assert!(rep.cancel(1, SimTime(5), &mut reqs));
        assert_eq!(reqs[1].status, Status::Cancelled);
        assert_eq!(rep.waiting_len(), 1);
        assert!(!rep.unfinished().any(|id| id == 1));
    }
}
