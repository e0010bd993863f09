//! Per-request latency attribution: every nanosecond of a request's life,
//! from arrival to its last token, is charged to exactly one named
//! [`Component`], so that the components before the first token add up to
//! its TTFT and all of them to its E2E latency, to the nanosecond.
//!
//! The split follows how the serving literature explains tail latency:
//! queueing for admission by the resource that blocked it (vLLM's scheduler:
//! KV blocks, `max_num_batched_tokens`, `max_num_seqs`; Kwon et al. SOSP'23),
//! a request's own prefill compute versus the time its prefill shared
//! iterations with other work, decode compute versus decode stalls caused by
//! other requests' prefills (the "generation stalls" of Sarathi-Serve,
//! Agrawal et al. OSDI'24), and the time lost to preemption (recompute or
//! swap). The replica does the charging (`replica::attribution`); this module
//! holds the names and the per-request ledger.
//!
//! Within an iteration of length `d`, a decoding sequence is charged as
//! decode stall what the prefills batched with it added: `d` less what the
//! cost model prices the same iteration without its prefill chunks (the
//! counterfactual decode-only iteration), and the rest as decode compute.
//! Without a cost model at hand (the live engine) the split is by tokens:
//! `d·P/T` for `P` prefill tokens out of `T` batched. A prefill chunk of `n`
//! tokens is charged `d·n/T` of own prefill compute and the rest as prefill
//! interference (the linear layers that dominate an iteration cost in
//! proportion to batched tokens, Sarathi-Serve's accounting). Integer
//! division leaves any remainder with the "other work" part, so the sums
//! stay exact.

use crate::time::SimTime;

/// One named share of a request's latency. The order is the column order of
/// `requests.csv`; [`Component::before_first_token`] says which ones make up
/// TTFT (the others come after the first token).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// Waiting for admission while the head of the replica's queue did not
    /// fit in the free KV blocks (beyond vLLM's 1 % watermark), or while
    /// swapped-out sequences had to come back first.
    QueueKv,
    /// Waiting while the iteration's token budget (`max_batched_tokens`) was
    /// used up by other work.
    QueueTokenBudget,
    /// Waiting while the running batch held `max_num_seqs` sequences.
    QueueMaxSeqs,
    /// Waiting while the batch policy admitted nobody (a static batch runs
    /// until its last member ends).
    QueuePolicy,
    /// Waiting for the iteration in progress to end, with nothing else in the
    /// way: the granularity of iteration-level scheduling (Orca).
    QueueIteration,
    /// Hook, zero today: held back by a tenant fairness policy.
    QueueFairness,
    /// Hook, zero today: held back by a tenant rate limit.
    QueueRateLimit,
    /// Waiting for a working replica (`lifecycle`): held by the activator
    /// while none was ready (scale-to-zero), or, for a request retried
    /// after its replica failed, its whole time before the retry (it
    /// starts over, so that time is part of its queue wait).
    ColdStart,
    /// Its share of the iterations that prefilled its prompt.
    PrefillCompute,
    /// Admitted, before the first token, but computing other requests' work:
    /// the rest of its prefill iterations, and iterations that gave it no chunk.
    PrefillInterference,
    /// Before the first token, from a preemption until its recompute prefill
    /// completed.
    PrefillPreempted,
    /// Moving its KV cache from a prefill to a decode replica (disaggregated
    /// serving, `cluster::disagg`: waiting for decode memory, for the link,
    /// the copy, the next decode iteration). The first token comes from the
    /// prefill side, as in DistServe, so the transfer follows TTFT.
    KvTransfer,
    /// Decode iterations' time, less the share of prefills batched with them.
    DecodeCompute,
    /// After the first token: the share of its decode iterations spent on
    /// other requests' prefills, and iterations it sat out while others
    /// prefilled (vLLM's prefill-first scheduling pauses decodes).
    DecodeStall,
    /// After the first token, from a preemption until it decoded again
    /// (waiting, recomputing its context, or swapped out to host memory).
    DecodePreempted,
}

/// Number of components.
pub const N_COMPONENTS: usize = 15;

impl Component {
    /// Every component, in column order.
    pub const ALL: [Component; N_COMPONENTS] = [
        Component::QueueKv,
        Component::QueueTokenBudget,
        Component::QueueMaxSeqs,
        Component::QueuePolicy,
        Component::QueueIteration,
        Component::QueueFairness,
        Component::QueueRateLimit,
        Component::ColdStart,
        Component::PrefillCompute,
        Component::PrefillInterference,
        Component::PrefillPreempted,
        Component::KvTransfer,
        Component::DecodeCompute,
        Component::DecodeStall,
        Component::DecodePreempted,
    ];

    /// Short name, as in `requests.csv` (`attr_<name>_ms`) and `explain`.
    pub fn name(self) -> &'static str {
        match self {
            Component::QueueKv => "queue_kv",
            Component::QueueTokenBudget => "queue_token_budget",
            Component::QueueMaxSeqs => "queue_max_seqs",
            Component::QueuePolicy => "queue_policy",
            Component::QueueIteration => "queue_iteration",
            Component::QueueFairness => "queue_fairness",
            Component::QueueRateLimit => "queue_rate_limit",
            Component::ColdStart => "cold_start",
            Component::PrefillCompute => "prefill_compute",
            Component::PrefillInterference => "prefill_interference",
            Component::PrefillPreempted => "prefill_preempted",
            Component::KvTransfer => "kv_transfer",
            Component::DecodeCompute => "decode_compute",
            Component::DecodeStall => "decode_stall",
            Component::DecodePreempted => "decode_preempted",
        }
    }

    /// Whether it is part of TTFT (the rest falls between the first and the
    /// last token).
    pub fn before_first_token(self) -> bool {
        (self as usize) < Component::KvTransfer as usize
    }

    /// Whether it is time spent waiting for admission (first queue wait).
    pub fn is_queue(self) -> bool {
        (self as usize) <= Component::ColdStart as usize
    }

    /// `requests.csv` column of this component.
    pub fn column(self) -> &'static str {
        COLUMNS[self as usize]
    }
}

/// `requests.csv` columns of the components, in order (milliseconds with six
/// decimals, i.e. exact nanoseconds).
pub const COLUMNS: [&str; N_COMPONENTS] = [
    "attr_queue_kv_ms",
    "attr_queue_token_budget_ms",
    "attr_queue_max_seqs_ms",
    "attr_queue_policy_ms",
    "attr_queue_iteration_ms",
    "attr_queue_fairness_ms",
    "attr_queue_rate_limit_ms",
    "attr_cold_start_ms",
    "attr_prefill_compute_ms",
    "attr_prefill_interference_ms",
    "attr_prefill_preempted_ms",
    "attr_kv_transfer_ms",
    "attr_decode_compute_ms",
    "attr_decode_stall_ms",
    "attr_decode_preempted_ms",
];

/// One request's ledger: nanoseconds charged to each component, and the time
/// up to which its life has been charged.
///
/// While a request waits for its first admission the queue entries hold a
/// running difference against the replica's queue clock (see
/// `replica::attribution::QueueClock`), so they are only meaningful once it
/// has been admitted; arithmetic on them wraps on purpose.
#[derive(Clone, Debug)]
pub struct Attribution {
    pub ns: [u64; N_COMPONENTS],
    /// Everything before this instant has been charged.
    pub mark: SimTime,
}

impl Attribution {
    /// A ledger for a request arriving at `arrival`.
    pub fn new(arrival: SimTime) -> Attribution {
        Attribution {
            ns: [0; N_COMPONENTS],
            mark: arrival,
        }
    }

    /// Charges `[mark, now)` to `c` and moves the mark to `now`. The hook for
    /// time spent before a request reaches a replica's queue (rate limits,
    /// cold starts) and for KV transfers between replicas.
    #[inline]
    pub fn charge_until(&mut self, c: Component, now: SimTime) {
        let d = now.0.saturating_sub(self.mark.0);
        self.ns[c as usize] = self.ns[c as usize].wrapping_add(d);
        self.mark = SimTime(self.mark.0.max(now.0));
    }

    /// Adds `ns` to `c` without moving the mark (a split of an interval the
    /// caller charges as a whole).
    #[inline]
    pub fn add(&mut self, c: Component, ns: u64) {
        self.ns[c as usize] = self.ns[c as usize].wrapping_add(ns);
    }

    pub fn get(&self, c: Component) -> u64 {
        self.ns[c as usize]
    }

    /// Σ of the components that make up TTFT.
    pub fn ttft_sum(&self) -> u64 {
        Component::ALL
            .iter()
            .filter(|c| c.before_first_token())
            .fold(0u64, |a, &c| a.wrapping_add(self.get(c)))
    }

    /// Σ of every component (E2E once the request completed).
    pub fn total(&self) -> u64 {
        self.ns.iter().fold(0u64, |a, &x| a.wrapping_add(x))
    }
}

/// Formats nanoseconds as milliseconds with six decimals, exactly.
pub fn ns_as_ms(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_columns_and_phases_line_up() {
        for (i, c) in Component::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert_eq!(c.column(), format!("attr_{}_ms", c.name()));
        }
        assert!(Component::PrefillPreempted.before_first_token());
        assert!(!Component::KvTransfer.before_first_token());
        assert!(!Component::DecodeStall.before_first_token());
        assert!(Component::ColdStart.is_queue());
        assert!(!Component::PrefillCompute.is_queue());
    }

    #[test]
    fn charging_moves_the_mark_and_sums_split() {
        let mut a = Attribution::new(SimTime(100));
        a.charge_until(Component::QueueRateLimit, SimTime(250));
        assert_eq!(a.mark, SimTime(250));
        a.add(Component::DecodeCompute, 7);
        assert_eq!(a.ttft_sum(), 150);
        assert_eq!(a.total(), 157);
        assert_eq!(ns_as_ms(1_234_567_891), "1234.567891");
        assert_eq!(ns_as_ms(5), "0.000005");
    }
}
