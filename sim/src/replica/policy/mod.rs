//! Batch policies: how each iteration's batch is formed. One file per policy;
//! [`build`] is the registry `[engine] policy` names.

mod continuous;
mod orca;
mod sarathi;
mod static_batch;
mod vllm;

pub use continuous::Continuous;
pub use orca::Orca;
pub use sarathi::Sarathi;
pub use static_batch::StaticBatching;
pub use vllm::VllmPrefillFirst;

use super::SchedState;
use crate::cost::BatchShape;
use crate::request::Request;
use crate::scenario::BatchPolicyKind;
use crate::time::SimTime;

/// Decides one iteration: marks the running sequences that decode, sets the
/// prefill chunks, admits waiting requests through [`SchedState`]'s
/// operations, and returns the shape of the batch. Must be deterministic.
pub trait BatchPolicy: Send {
    fn schedule(&mut self, st: &mut SchedState, now: SimTime, reqs: &mut [Request]) -> BatchShape;

    /// Prompts longer than the token budget are split over iterations.
    fn splits_prefills(&self) -> bool {
        false
    }

    /// KV blocks for the whole request (prompt + all output) are taken at
    /// admission, so decodes never preempt.
    fn reserves_whole_requests(&self) -> bool {
        false
    }

    /// Finished sequences keep their slot until the whole batch finishes.
    fn keeps_finished_until_batch_ends(&self) -> bool {
        false
    }

    /// How the policy admits waiting prompts when it decodes every running
    /// sequence first and then admits with what is left of the token budget
    /// (Orca's iteration-level scheduling as vLLM runs it; Sarathi-Serve):
    /// with nothing swapped out, preempted or prefilling, its
    /// [`Self::schedule`] is the decodes followed by [`Admission::admit`].
    /// `None` for a policy whose admissions depend on more than that
    /// (prefill-first, whole-request reservations, static batches).
    fn admission_after_decodes(&self) -> Option<Admission> {
        None
    }
}

/// The admission rule of a decode-first policy
/// ([`BatchPolicy::admission_after_decodes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Whole prompts FCFS while the budget allows (continuous batching).
    WholePrompts,
    /// Each new prompt a chunk of what is left of the budget (Sarathi-Serve).
    Chunks,
}

impl Admission {
    /// Admits from the waiting queue at `now` with `budget` tokens left
    /// after the running sequences' decodes, as the policy's `schedule` does.
    pub fn admit(self, st: &mut SchedState, budget: u64, now: SimTime, reqs: &mut [Request]) {
        match self {
            Admission::WholePrompts => {
                admit_whole_prompts(st, budget, false, now, reqs);
            }
            Admission::Chunks => sarathi::admit_chunks(st, budget, now, reqs),
        }
    }
}

/// The policy a scenario names.
pub fn build(kind: BatchPolicyKind) -> Box<dyn BatchPolicy> {
    match kind {
        BatchPolicyKind::Continuous => Box::new(Continuous),
        BatchPolicyKind::Vllm => Box::new(VllmPrefillFirst),
        BatchPolicyKind::Sarathi => Box::new(Sarathi),
        BatchPolicyKind::Orca => Box::new(Orca),
        BatchPolicyKind::Static => Box::new(StaticBatching),
    }
}

/// Admits whole prompts FCFS while the token budget allows. The first prefill
/// of an iteration is never held back by the budget already spent on decodes:
/// without chunking a prompt must run whole, and one that waited for decodes
/// to drain would stall the queue (vLLM v0 gives it an iteration of its own).
/// Returns the number admitted.
fn admit_whole_prompts(
    st: &mut SchedState,
    mut budget: u64,
    reserve_whole: bool,
    now: SimTime,
    reqs: &mut [Request],
) -> u32 {
    let mut admitted = 0;
    while let Some(n) = st.head_prefill_tokens(reqs) {
        if admitted > 0 && n as u64 > budget {
            break;
        }
        if !st.admit_head(n, reserve_whole, now, reqs) {
            break;
        }
        admitted += 1;
        budget = budget.saturating_sub(n as u64);
    }
    admitted
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use crate::cost::{BatchShape, CostModel, Roofline};
    use crate::request::Request;
    use crate::scenario::BatchPolicyKind;
    use crate::time::SimTime;

    /// Shapes of a run of three long prompts arriving while four short chat
    /// requests decode.
    fn mixed(policy: BatchPolicyKind) -> Vec<BatchShape> {
        let mut e = engine(16, 512, 16);
        e.policy = policy;
        let mut reqs: Vec<Request> = (0..4).map(|_| Request::new(SimTime(0), 32, 40)).collect();
        reqs.extend((0..3).map(|_| Request::new(SimTime(0), 1500, 4)));
        let mut rep = replica(&e, 10_000);
        let mut t = SimTime(0);
        let mut shapes = vec![];
        for i in 0..4 {
            rep.enqueue(i);
        }
        let mut enqueued = false;
        while let Some(s) = rep.form_batch(t, &mut reqs) {
            shapes.push(s);
            t = t.plus(1000);
            rep.finish_iteration(t, &mut reqs, &mut vec![], &mut Default::default());
            if !enqueued && shapes.len() == 3 {
                for i in 4..7 {
                    rep.enqueue(i);
                }
                enqueued = true;
            }
        }
        assert_all_completed(&rep, &reqs);
        shapes
    }

    #[test]
    fn sarathi_chunks_prefills_under_the_budget_and_never_stalls_decodes() {
        let shapes = mixed(BatchPolicyKind::Sarathi);
        assert!(shapes.iter().all(|s| s.tokens() <= 512), "budget respected");
        // While prompts are being chunked, the 4 chat sequences keep decoding.
        let chunked: Vec<_> = shapes.iter().filter(|s| s.prefill_tokens > 0).collect();
        assert!(
            chunked.len() >= 9,
            "1500-token prompts need ≥ 3 chunks each"
        );
        assert!(chunked[1..]
            .iter()
            .all(|s| s.decode_seqs > 0 || s.prefill_tokens < 512));
    }

    #[test]
    fn vllm_never_mixes_prefill_and_decode() {
        let shapes = mixed(BatchPolicyKind::Vllm);
        assert!(shapes
            .iter()
            .all(|s| s.prefill_seqs == 0 || s.decode_seqs == 0));
        // A 1500-token prompt runs whole: decodes stall behind it.
        assert!(shapes
            .iter()
            .any(|s| s.prefill_tokens >= 1500 && s.decode_seqs == 0));
    }

    #[test]
    fn continuous_mixes_whole_prefills_with_decodes() {
        let shapes = mixed(BatchPolicyKind::Continuous);
        assert!(shapes
            .iter()
            .any(|s| s.prefill_tokens >= 1500 && s.decode_seqs > 0));
    }

    #[test]
    fn sarathi_bounds_the_worst_iteration_and_so_tpot() {
        // Price the shapes: the longest iteration a decode waits through is
        // what TPOT's tail sees.
        let (m, _) = crate::catalog::model("llama-3.1-8b").unwrap();
        let h = crate::catalog::hardware("h100").unwrap();
        let cost = Roofline::new(
            &m,
            &h,
            crate::catalog::Dtype::Bf16,
            crate::catalog::Dtype::Bf16,
            1,
        );
        let worst = |p| {
            mixed(p)
                .iter()
                .filter(|s| s.decode_seqs > 0)
                .map(|s| cost.iteration_time(s))
                .max()
                .unwrap()
        };
        assert!(worst(BatchPolicyKind::Sarathi) * 2 < worst(BatchPolicyKind::Continuous));
    }

    #[test]
    fn orca_and_static_reserve_whole_requests_and_never_preempt() {
        for p in [BatchPolicyKind::Orca, BatchPolicyKind::Static] {
            let mut e = engine(8, 1000, 4);
            e.policy = p;
            // 6 blocks of 4 tokens: each request needs 4 + 8 − 1 = 11 tokens = 3 blocks.
            let mut reqs: Vec<Request> = (0..3).map(|_| Request::new(SimTime(0), 4, 8)).collect();
            let mut rep = replica(&e, 6);
            for i in 0..3 {
                rep.enqueue(i);
            }
            let shapes = run_to_end(&mut rep, &mut reqs);
            assert_eq!(rep.preemptions(), 0, "{p:?}");
            assert_eq!(
                shapes[0].prefill_seqs, 2,
                "{p:?}: only two reservations fit"
            );
            assert_all_completed(&rep, &reqs);
        }
    }

    #[test]
    fn static_batch_runs_until_its_last_member_finishes() {
        let mut e = engine(4, 1000, 16);
        e.policy = BatchPolicyKind::Static;
        let mut reqs = vec![
            Request::new(SimTime(0), 10, 2),
            Request::new(SimTime(0), 30, 6),
            Request::new(SimTime(0), 10, 2),
        ];
        let mut rep = replica(&e, 100);
        rep.enqueue(0);
        rep.enqueue(1);
        let shapes = run_to_end_enqueue_after(&mut rep, &mut reqs, 1, 2);
        // First batch: prompts padded to the longest (30) for both members.
        assert_eq!(shapes[0].prefill_tokens, 60);
        // Request 0 finishes after 2 tokens but stays as padding until
        // request 1's 6th token: 5 decode steps of 2 sequences each.
        assert!(shapes[1..6].iter().all(|s| s.decode_seqs == 2));
        // Request 2 arrived after the first iteration and waits for the batch.
        assert_eq!(reqs[2].first_scheduled.unwrap(), SimTime(6000));
        assert_all_completed(&rep, &reqs);
    }

    fn run_to_end_enqueue_after(
        rep: &mut super::super::Replica,
        reqs: &mut [Request],
        after: usize,
        id: u32,
    ) -> Vec<BatchShape> {
        let mut t = SimTime(0);
        let mut shapes = vec![];
        while let Some(shape) = rep.form_batch(t, reqs) {
            shapes.push(shape);
            t = t.plus(1000);
            rep.finish_iteration(t, reqs, &mut vec![], &mut Default::default());
            if shapes.len() == after {
                rep.enqueue(id);
            }
        }
        shapes
    }
}
