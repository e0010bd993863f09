use super::{admit_whole_prompts, BatchPolicy};
use crate::cost::BatchShape;
use crate::replica::SchedState;
use crate::request::Request;
use crate::time::SimTime;

/// vLLM v0's default scheduler (Kwon et al., SOSP'23; `vllm/core/scheduler.py`
/// without chunked prefill): prefill-first. When nothing is swapped out and
/// waiting prompts fit, the iteration is prefill-only — running sequences
/// pause — with the whole token budget for prompts; otherwise it is
/// decode-only, with preemption when KV blocks run out, and swapped sequences
/// come back before any new prompt. Prefills and decodes never share an
/// iteration, so a long prompt stalls every decode behind it.
#[derive(Debug, Default)]
pub struct VllmPrefillFirst;

impl BatchPolicy for VllmPrefillFirst {
    fn schedule(&mut self, st: &mut SchedState, now: SimTime, reqs: &mut [Request]) -> BatchShape {
        if st.swapped.is_empty() {
            let budget = st.cfg.max_batched_tokens;
            if admit_whole_prompts(st, budget, false, now, reqs) > 0 {
                return st.shape(None);
            }
        }
        st.schedule_decodes(now, reqs);
        if !st.preempted_now {
            st.swap_in();
        }
        st.shape(None)
    }
}
