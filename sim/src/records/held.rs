//! The slots of the rows held back for id order (`records::stream`), in
//! chunks of a fixed size.
//!
//! The ring spans the ids from the oldest unfinished request to the newest
//! ended one, so its length follows the longest hold of the run, which
//! grows as a longer run draws a longer request. A `VecDeque` doubles to
//! grow and copies what it holds: a 100 M-request run's resident memory
//! jumped 40 MiB at the doubling (docs/performance.md). Here the ring grows a
//! chunk at a time and never moves a slot; a chunk emptied at the front is
//! kept for reuse at the back. The operations are the `VecDeque` ones the
//! stream uses, with the same results (a proptest checks them against
//! one).

use std::collections::VecDeque;

/// Slots a chunk (32 bytes each for the stream's packed rows: 128 KiB).
const CHUNK: usize = 1 << 12;

/// Emptied chunks kept for reuse.
const SPARES: usize = 2;

/// A double-ended queue of optional slots in fixed-size chunks.
#[derive(Debug)]
pub struct HeldRing<T> {
    chunks: VecDeque<Box<[Option<T>]>>,
    /// The first slot's place in the first chunk.
    head: usize,
    len: usize,
    spare: Vec<Box<[Option<T>]>>,
}

impl<T> Default for HeldRing<T> {
    fn default() -> Self {
        HeldRing {
            chunks: VecDeque::new(),
            head: 0,
            len: 0,
            spare: Vec::new(),
        }
    }
}

impl<T> HeldRing<T> {
    /// Slots in the ring (the stream keeps its own count of held rows).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Makes the ring `n` slots long if it is shorter (the new slots empty).
    pub fn extend_to(&mut self, n: usize) {
        if n <= self.len {
            return;
        }
        while self.head + n > self.chunks.len() * CHUNK {
            let chunk = self
                .spare
                .pop()
                .unwrap_or_else(|| (0..CHUNK).map(|_| None).collect());
            self.chunks.push_back(chunk);
        }
        self.len = n;
    }

    /// Slot `k` from the front (`k` below the length).
    #[inline]
    pub fn slot_mut(&mut self, k: usize) -> &mut Option<T> {
        assert!(k < self.len, "slot {k} of a ring of {}", self.len);
        let at = self.head + k;
        &mut self.chunks[at / CHUNK][at % CHUNK]
    }

    /// What slot `k` from the front holds (`k` below the length).
    #[inline]
    pub fn slot(&self, k: usize) -> Option<&T> {
        assert!(k < self.len, "slot {k} of a ring of {}", self.len);
        let at = self.head + k;
        self.chunks[at / CHUNK][at % CHUNK].as_ref()
    }

    /// The first slot, if the ring has one.
    #[inline]
    pub fn front(&self) -> Option<&Option<T>> {
        (self.len > 0).then(|| &self.chunks[0][self.head])
    }

    /// Takes the first slot, if the ring has one.
    pub fn pop_front(&mut self) -> Option<Option<T>> {
        if self.len == 0 {
            return None;
        }
        let slot = self.chunks[0][self.head].take();
        self.head += 1;
        self.len -= 1;
        if self.head == CHUNK {
            let chunk = self.chunks.pop_front().expect("the first chunk");
            debug_assert!(chunk.iter().all(Option::is_none), "every slot taken");
            if self.spare.len() < SPARES {
                self.spare.push(chunk);
            }
            self.head = 0;
        }
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// Hold a value `k` slots from the front, growing the ring to it.
        Hold(usize, u32),
        Pop,
        /// Pop while the front slot holds a value (the stream's emission).
        Drain,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..3 * CHUNK, any::<u32>()).prop_map(|(k, v)| Op::Hold(k, v)),
            2 => Just(Op::Pop),
            1 => Just(Op::Drain),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn behaves_as_a_vecdeque_of_options(ops in proptest::collection::vec(op(), 1..200)) {
            let mut ring = HeldRing::default();
            let mut want: VecDeque<Option<u32>> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Hold(k, v) => {
                        if want.len() <= k {
                            want.resize_with(k + 1, || None);
                        }
                        want[k] = Some(v);
                        ring.extend_to(k + 1);
                        *ring.slot_mut(k) = Some(v);
                    }
                    Op::Pop => prop_assert_eq!(ring.pop_front(), want.pop_front()),
                    Op::Drain => {
                        while let Some(Some(_)) = want.front() {
                            prop_assert_eq!(ring.pop_front(), want.pop_front());
                        }
                        prop_assert!(!matches!(ring.front(), Some(Some(_))));
                    }
                }
                prop_assert_eq!(ring.len(), want.len());
                prop_assert_eq!(ring.front().copied(), want.front().copied());
            }
            while let Some(w) = want.pop_front() {
                prop_assert_eq!(ring.pop_front(), Some(w));
            }
            prop_assert_eq!(ring.pop_front(), None);
        }
    }

    #[test]
    fn a_ring_sliding_forward_holds_its_span_in_a_few_chunks() {
        // A steady span of 3 chunks sliding over 100 chunks' ids: the
        // chunks follow the span, not the ids that went through.
        let mut ring = HeldRing::default();
        for id in 0..100 * CHUNK {
            ring.extend_to(3 * CHUNK);
            *ring.slot_mut(3 * CHUNK - 1) = Some(id);
            ring.pop_front();
        }
        assert_eq!(ring.len(), 3 * CHUNK - 1);
        assert!(ring.chunks.len() <= 4, "{} chunks", ring.chunks.len());
    }
}
