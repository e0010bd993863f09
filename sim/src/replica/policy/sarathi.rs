use super::{Admission, BatchPolicy};
use crate::cost::BatchShape;
use crate::replica::SchedState;
use crate::request::Request;
use crate::time::SimTime;

/// Sarathi-Serve (Agrawal et al., OSDI'24): chunked prefills under a
/// per-iteration token budget (`max_batched_tokens`), stall-free. Running
/// decodes are scheduled first, then partially prefilled prompts continue,
/// then new prompts are admitted, each taking a chunk of what is left of the
/// budget. Decodes never wait behind a long prompt, at the price of prompts
/// finishing their prefill over several iterations. vLLM v1 behaves this way
/// by default (chunked prefill on).
#[derive(Debug, Default)]
pub struct Sarathi;

impl BatchPolicy for Sarathi {
    fn schedule(&mut self, st: &mut SchedState, now: SimTime, reqs: &mut [Request]) -> BatchShape {
        let mut decodes = st.schedule_decodes(now, reqs);
        if !st.preempted_now {
            decodes += st.swap_in();
        }
        let mut budget = st.budget_after(decodes);

        // Continue prompts already being prefilled, oldest first. They are
        // a few among many decodes: a tight scan finds each, from the first
        // the decode walk saw (unless a preemption has moved sequences).
        let mut from = if st.preempted_now {
            0
        } else {
            st.first_prefilling.min(st.running.len())
        };
        while budget > 0 {
            let Some(j) = st.running[from..].iter().position(|s| s.prefilling()) else {
                break;
            };
            let i = from + j;
            let s = st.running[i];
            let chunk = ((s.prefill_target - s.kv_tokens) as u64).min(budget) as u32;
            if !st.grow(i, s.kv_tokens + chunk, now, reqs) {
                break; // it was preempted, and it was the last one
            }
            st.set_chunk(i, chunk);
            budget -= chunk as u64;
            // `grow` preempts only from the back, past `i`.
            from = i + 1;
        }

        // Then admit new prompts with the remaining budget.
        if st.swapped.is_empty() {
            admit_chunks(st, budget, now, reqs);
        }
        st.shape(None)
    }

    /// With nothing prefilling, `schedule`'s continuing chunks are none:
    /// what is left of the budget after the decodes goes to new prompts.
    fn admission_after_decodes(&self) -> Option<Admission> {
        Some(Admission::Chunks)
    }

    fn splits_prefills(&self) -> bool {
        true
    }
}

/// Admits new prompts FCFS, each with a chunk of what is left of `budget`.
pub(super) fn admit_chunks(
    st: &mut SchedState,
    mut budget: u64,
    now: SimTime,
    reqs: &mut [Request],
) {
    while budget > 0 {
        let Some(n) = st.head_prefill_tokens(reqs) else {
            break;
        };
        let chunk = (n as u64).min(budget) as u32;
        if !st.admit_head(chunk, false, now, reqs) {
            break;
        }
        budget -= chunk as u64;
    }
}
