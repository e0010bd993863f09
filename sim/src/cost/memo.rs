//! Per-token-count memo of the roofline's batch-size terms.
//!
//! In a one-group, one-stage replica the expensive terms of an iteration's
//! price (the dense and MoE matrices and the LM head, each a rounded
//! roofline corner with a square and a cube root, see `gemm::smooth_max`)
//! depend on nothing but the batch's token count or its logit rows, small
//! integers. The simulator prices every iteration, and with latency
//! attribution on also the decode-only counterfactual of every mixed
//! iteration (`replica::attribution::decode_alone`): both hit the same few
//! hundred token counts over and over. Keeping each term's value per count
//! returns the very `f64` the formula gives (the function is pure), so prices,
//! and every output, stay bit for bit the same.
//!
//! The table is filled lazily and shared by threads without a lock: a slot
//! holds the value's bits, or 0 while not yet computed (every term has a
//! positive kernel floor, so 0.0 is never a value). Two threads racing on a
//! slot store the same bits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Token counts below this are memoized (larger batches are priced directly).
pub const MEMO_TOKENS: u64 = 8192;

/// The memoized terms.
#[derive(Clone, Copy, Debug)]
pub enum Term {
    /// One dense layer's matrices for `n` tokens (`Roofline::dense`).
    Dense = 0,
    /// One MoE layer's matrices for `n` tokens, all routed locally.
    Moe = 1,
    /// The LM head for `n` logit rows.
    LmHead = 2,
}

const TERMS: usize = 3;

/// A lazily allocated table of term values by token count.
#[derive(Default)]
pub struct TokenMemo {
    slots: OnceLock<Box<[AtomicU64]>>,
}

impl TokenMemo {
    /// `term(n)`, computed by `f` the first time and remembered after.
    #[inline]
    pub fn get(&self, term: Term, n: u64, f: impl FnOnce() -> f64) -> f64 {
        if n >= MEMO_TOKENS {
            return f();
        }
        let slots = self.slots.get_or_init(|| {
            (0..TERMS * MEMO_TOKENS as usize)
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        let slot = &slots[term as usize * MEMO_TOKENS as usize + n as usize];
        let bits = slot.load(Ordering::Relaxed);
        if bits != 0 {
            return f64::from_bits(bits);
        }
        let v = f();
        if v.to_bits() != 0 {
            slot.store(v.to_bits(), Ordering::Relaxed);
        }
        v
    }
}

/// A copy starts empty: the values depend only on the model's fields, which
/// the clone shares, so it refills the same numbers.
impl Clone for TokenMemo {
    fn clone(&self) -> Self {
        TokenMemo::default()
    }
}

impl std::fmt::Debug for TokenMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenMemo")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_once_and_returns_the_same_bits() {
        let m = TokenMemo::default();
        let mut calls = 0;
        let mut f = |n: u64| {
            calls += 1;
            (n as f64).sqrt() + 1e-6
        };
        let a = m.get(Term::Dense, 7, || f(7));
        let b = m.get(Term::Dense, 7, || f(7));
        assert_eq!(a.to_bits(), b.to_bits());
        // Another term at the same count is its own slot.
        let c = m.get(Term::LmHead, 7, || 2.0);
        assert_eq!(c, 2.0);
        // Beyond the table, always computed.
        m.get(Term::Dense, MEMO_TOKENS, || f(MEMO_TOKENS));
        m.get(Term::Dense, MEMO_TOKENS, || f(MEMO_TOKENS));
        assert_eq!(calls, 3);
    }
}
