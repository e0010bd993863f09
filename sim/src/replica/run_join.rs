//! Admissions beside a decode run (DESIGN.md, "Performance").
//!
//! In a busy fleet a request reaches each replica every few steps. Were
//! every arrival to end the replica's decode run (`decode_run`), the run's
//! sequences would be brought up to date, the policy would walk the batch
//! to decode it and admit the newcomer, the iteration's end would walk it
//! again, and the next run's start a fourth time. Yet a policy that schedules every
//! running sequence's decode first and then admits from the waiting queue
//! with what is left of the token budget (continuous batching, Orca's
//! iteration-level scheduling as vLLM runs it; Sarathi-Serve's chunked
//! prefill) decides the decodes' part exactly as a run step does when no
//! block runs short. So the run goes on:
//!
//! - **Forming** the step, its decodes are taken in closed form (their
//!   blocks from the run's histogram, their shape from its sums), then the
//!   policy admits beside them ([`super::policy::Admission::admit`])
//!   against the same free blocks, budget and sequence slots the step by
//!   step walk leaves it. The newcomers are appended to the batch, as the
//!   policy always appends them, and are not yet in the run's sums.
//! - **Ending** the step, the run's members advance in closed form and
//!   those completing leave (`leave_run`), as in any run step; then each
//!   newcomer lands its prefill and samples its first token exactly as
//!   `finish_iteration` does (in batch order, after the members, as there),
//!   and joins the run: its `kv_tokens` and `generated` stay as of this
//!   step (`RunningSeq::run_base`), and its term of the context sum, its
//!   slot of the block histogram and its completion step are shifted by the
//!   steps the run took before it joined.
//!
//! A newcomer that cannot join ends the run at that step's end, having
//! changed nothing the step by step path would not: a prompt prefilled only
//! in part (a chunk of it continues next iteration, and runs hold decoding
//! sequences only), parallel samples (they decode as groups) or a reserved
//! one. A waiting queue whose head may preempt running sequences (strict
//! priority with `preempt`) keeps runs from admitting at all.

use super::{attribution, mark_completed, Replica, TokenGaps};
use crate::cost::BatchShape;
use crate::request::{Request, RequestId};
use crate::time::SimTime;

impl Replica {
    /// Forms run step `formed + 1` at `now` with requests waiting: the
    /// decodes' part in closed form (its `alloc` blocks known to be free),
    /// then the policy's admissions beside them. Leaves the replica as the
    /// policy's `schedule` does on the same batch.
    pub(super) fn form_joining_step(
        &mut self,
        now: SimTime,
        reqs: &mut [Request],
        alloc: u64,
    ) -> BatchShape {
        self.account_kv(now);
        self.take_step_blocks(alloc);
        let st = &mut self.st;
        st.acc = self.run.decode_shape();
        st.acc_valid = true;
        st.attr.begin(now, reqs);
        let before = st.running.len();
        let budget = st.budget_after(self.run.n as u64);
        if let Some(admission) = self.admission {
            admission.admit(st, budget, now, reqs);
        }
        let joining = st.running.len() - before;
        // No swap (none swapped out, none preempted): `acc` as it stands.
        let shape = st.shape(None);
        let cause = attribution::blocker(st, &shape, false);
        st.attr.decided(cause, &shape, now, reqs);
        self.run.joining = joining as u32;
        self.run.joins += (joining > 0) as u64;
        self.count_step(now, shape.seqs() as u64, shape.tokens());
        if joining > 0 {
            // Its end lands the newcomers: the general path's.
            self.run.stop = self.run.formed;
        }
        shape
    }

    /// Ends the newcomers of the step that ended at `now` (after the run's
    /// members: `finish_run_step`), as `finish_iteration` would, and makes
    /// them members of the run, or ends the run first when one cannot join.
    pub(super) fn finish_joiners(
        &mut self,
        now: SimTime,
        reqs: &mut [Request],
        completed: &mut Vec<RequestId>,
        gaps: &mut TokenGaps,
    ) {
        let bs = self.st.cfg.block_size;
        let first = self.st.running.len() - self.run.joining as usize;
        let joins = self.run.active
            && self.st.running[first..].iter().all(|s| {
                let cached = s.kv_tokens + s.chunk;
                cached == s.prefill_target
                    && s.samples == 1
                    && !s.reserved
                    && s.capacity(bs) - cached < bs
            });
        if !joins {
            // The members brought up to date, none decoding: the next
            // iteration is the policy's.
            self.end_decode_run();
        }
        self.run.joining = 0;
        // The members' shared gap goes after any newcomer's own, where
        // `finish_iteration` puts its back-to-back decodes.
        let members_gap = gaps.gaps.pop();
        let st = &mut self.st;
        let run = &mut self.run;
        let mut running = std::mem::take(&mut st.running);
        let mut i = first;
        while i < running.len() {
            let s = &mut running[i];
            if st.land_chunk(s, now, reqs, gaps) == 0 {
                i += 1; // a chunk of a longer prompt (the run has ended)
                continue;
            }
            s.generated += 1;
            if s.generated >= s.output_tokens {
                mark_completed(&st.attr.mix, &mut reqs[s.id as usize], s.generated, now);
                completed.push(s.id);
                let mut s = running.remove(i);
                st.retire(&mut s, reqs);
                continue;
            }
            if joins {
                s.run_base = run.finished;
                run.hist[s.run_block_phase(bs)] += 1;
                run.n += 1;
                run.ctx1 = run.ctx1.wrapping_add(s.run_context_base());
                run.next_leave = run.next_leave.min(s.run_leave_step());
                run.leave.push(s.run_leave_step());
            }
            i += 1;
        }
        st.running = running;
        run.stop = run.next_leave;
        gaps.gaps.extend(members_gap);
    }
}
