use super::{admit_whole_prompts, Admission, BatchPolicy};
use crate::cost::BatchShape;
use crate::replica::SchedState;
use crate::request::Request;
use crate::time::SimTime;

/// Continuous batching with whole prefills mixed into decode iterations:
/// every running sequence decodes, then waiting prompts are admitted FCFS and
/// prefilled whole in the same iteration while KV blocks, sequence slots and
/// the token budget allow (Orca's iteration-level scheduling with vLLM's paged
/// KV allocation, blocks granted on demand and recompute/swap preemption).
#[derive(Debug, Default)]
pub struct Continuous;

impl BatchPolicy for Continuous {
    fn schedule(&mut self, st: &mut SchedState, now: SimTime, reqs: &mut [Request]) -> BatchShape {
        let decodes = st.schedule_decodes(now, reqs);
        let decodes = decodes + if st.preempted_now { 0 } else { st.swap_in() };
        if st.swapped.is_empty() {
            let budget = st.budget_after(decodes);
            admit_whole_prompts(st, budget, false, now, reqs);
        }
        st.shape(None)
    }

    fn admission_after_decodes(&self) -> Option<Admission> {
        Some(Admission::WholePrompts)
    }
}
