use super::{admit_whole_prompts, BatchPolicy};
use crate::cost::BatchShape;
use crate::replica::SchedState;
use crate::request::Request;
use crate::time::SimTime;

/// Orca (Yu et al., OSDI'22): iteration-level scheduling — requests join and
/// leave the batch at every iteration, whole prefills run alongside decodes —
/// but without paging: a request is admitted only when memory for its whole
/// context (prompt + every output token) can be reserved up front, so it
/// never needs more and is never preempted, and memory sits idle until the
/// tokens that will use it are generated.
#[derive(Debug, Default)]
pub struct Orca;

impl BatchPolicy for Orca {
    fn schedule(&mut self, st: &mut SchedState, now: SimTime, reqs: &mut [Request]) -> BatchShape {
        let decodes = st.schedule_decodes(now, reqs);
        let budget = st.budget_after(decodes);
        admit_whole_prompts(st, budget, true, now, reqs);
        st.shape(None)
    }

    fn reserves_whole_requests(&self) -> bool {
        true
    }
}
