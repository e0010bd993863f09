use super::BatchPolicy;
use crate::cost::BatchShape;
use crate::replica::SchedState;
use crate::request::Request;
use crate::time::SimTime;

/// Request-level (static) batching, as FasterTransformer behind Triton's
/// dynamic batcher served models before iteration-level scheduling: an idle
/// replica takes up to `max_num_seqs` waiting requests, pads their prompts to
/// the longest, and runs the batch until its *last* member finishes; members
/// that finish early keep their slot as padding, and nothing joins a running
/// batch. Memory for whole requests is reserved up front.
#[derive(Debug, Default)]
pub struct StaticBatching;

impl BatchPolicy for StaticBatching {
    fn schedule(&mut self, st: &mut SchedState, now: SimTime, reqs: &mut [Request]) -> BatchShape {
        if !st.running.is_empty() {
            st.schedule_decodes(now, reqs);
            return st.shape(None);
        }
        // Form a new batch: padded prompt tokens must fit the token budget
        // (the first member always goes).
        let budget = st.cfg.max_batched_tokens;
        let mut longest = 0u64;
        let mut members = 0u64;
        while let Some(n) = st.head_prefill_tokens(reqs) {
            let padded = (members + 1) * longest.max(n as u64);
            if members > 0 && padded > budget {
                break;
            }
            if !st.admit_head(n, true, now, reqs) {
                break;
            }
            members += 1;
            longest = longest.max(n as u64);
        }
        st.shape(Some(longest as u32))
    }

    fn reserves_whole_requests(&self) -> bool {
        true
    }

    fn keeps_finished_until_batch_ends(&self) -> bool {
        true
    }
}
