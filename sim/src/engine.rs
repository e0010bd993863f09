//! The discrete-event core: a priority queue of events ordered by
//! (time, insertion sequence number). Ties at the same nanosecond are broken
//! by insertion order, as in nexosim and SimPy, so a run is a pure function of
//! its inputs.
//!
//! The queue is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, "Faster
//! algorithms for the shortest path problem", J. ACM 37(2), 1990), which
//! needs only what a simulation clock guarantees: keys are integers and
//! never fall below the last key popped. Bucket `b` holds the events whose
//! time first differs from that last key at bit `b - 1` (bucket 0: the same
//! time), so a push is an xor, a leading-zero count and a `Vec` push, and a
//! pop that empties bucket 0 rescans only the lowest non-empty bucket. Each
//! event moves down at most 64 buckets over its life; in practice a few. It
//! replaced a `BinaryHeap` of `(time, seq)` keys (ten sift levels per pop at
//! 1,000 replicas) with the same pop order, which the tests check against a
//! `BinaryHeap` on random schedules.
//!
//! Why no sequence number is stored: every bucket lists its events in
//! insertion order. A push appends the newest event; rescanning bucket `b`
//! moves its events, in order, into buckets below `b`, which are all empty
//! at that moment (it is the lowest non-empty one). So the events of one
//! time reach bucket 0 in insertion order and leave it from the front.

use crate::time::SimTime;
use std::cell::Cell;
use std::collections::VecDeque;

/// Number of buckets: bucket 0 for the last popped time, bucket `b` in
/// 1..=64 for times whose highest bit differing from it is bit `b - 1`.
const BUCKETS: usize = 65;

/// The bucket of `time` relative to the last popped time `last`.
#[inline]
fn bucket(time: u64, last: u64) -> usize {
    (64 - (time ^ last).leading_zeros()) as usize
}

/// The event queue of one simulation run.
pub struct EventQueue<E> {
    /// Events at exactly `last`, in insertion order.
    current: VecDeque<E>,
    /// Buckets 1..=64 (index 0 unused: bucket 0 is `current`), each in
    /// insertion order.
    buckets: Vec<Vec<(u64, E)>>,
    /// Bit `b` set when bucket `b` (1..=64) is non-empty.
    nonempty: u128,
    /// The radix heap's reference key: the time of the last event moved
    /// into `current`. Every queued time is at least this.
    last: u64,
    /// Queued events.
    len: usize,
    /// The earliest queued time while `current` is empty, once a peek has
    /// scanned for it (pushes keep it up to date; a pop clears it), so a
    /// peek followed by a pop scans the lowest bucket once.
    earliest: Cell<Option<u64>>,
    now: SimTime,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            current: VecDeque::with_capacity(64),
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            nonempty: 0,
            last: 0,
            len: 0,
            earliest: Cell::new(None),
            now: SimTime::ZERO,
            popped: 0,
        }
    }

    /// The time of the event being processed (the clock never goes back).
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Schedules `event` at `time`. Scheduling in the past is a logic error;
    /// the event is clamped to `now` so the clock stays monotone.
    #[inline]
    pub fn schedule(&mut self, time: SimTime, event: E) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        // `now >= last` always, so the clamp also keeps the radix heap's
        // precondition (no key below the last one popped).
        let t = time.max(self.now).0;
        self.len += 1;
        if let Some(e) = self.earliest.get() {
            self.earliest.set(Some(e.min(t)));
        }
        let b = bucket(t, self.last);
        if b == 0 {
            self.current.push_back(event);
        } else {
            self.buckets[b].push((t, event));
            self.nonempty |= 1 << b;
        }
    }

    /// Pops the next event and advances the clock to it.
    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        if self.current.is_empty() {
            if self.len == 0 {
                return None;
            }
            self.refill();
        }
        let event = self.current.pop_front()?;
        // The cached earliest time may be this event's: recompute later.
        self.earliest.set(None);
        self.len -= 1;
        let time = SimTime(self.last);
        self.now = time;
        self.popped += 1;
        Some((time, event))
    }

    /// Moves the events of the earliest queued time into `current`: finds
    /// the lowest non-empty bucket and its earliest time, makes that the
    /// reference key and redistributes the bucket below it (the events
    /// at that time land in bucket 0). Events in higher buckets stay put:
    /// the new key agrees with the old one on every bit they differ in.
    #[cold]
    fn refill(&mut self) {
        let b = self.nonempty.trailing_zeros() as usize;
        debug_assert!((1..BUCKETS).contains(&b), "refill of an empty queue");
        let mut moving = std::mem::take(&mut self.buckets[b]);
        let min = match self.earliest.take() {
            Some(e) => e,
            None => moving.iter().map(|&(t, _)| t).min().expect("non-empty"),
        };
        self.last = min;
        self.nonempty &= !(1u128 << b);
        for (t, event) in moving.drain(..) {
            let nb = bucket(t, min);
            debug_assert!(nb < b, "radix heap invariant");
            if nb == 0 {
                self.current.push_back(event);
            } else {
                self.buckets[nb].push((t, event));
                self.nonempty |= 1 << nb;
            }
        }
        // Keep the allocation: the bucket fills again as time moves on.
        self.buckets[b] = moving;
    }

    /// Counts an event that the caller handles without scheduling it,
    /// because it knows the event would be the next one popped (it falls
    /// strictly before every queued event): the clock advances to `time` and
    /// the event counts as processed, as if it had gone through the heap.
    /// Decode runs (`replica::decode_run`) continue this way.
    pub fn skip_to(&mut self, time: SimTime) {
        debug_assert!(time >= self.now, "event in the past");
        debug_assert!(self.peek_time().is_none_or(|t| time < t), "not next");
        self.now = time;
        self.popped += 1;
    }

    /// Time of the next event without removing it.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        if !self.current.is_empty() {
            return Some(SimTime(self.last));
        }
        if self.len == 0 {
            return None;
        }
        if let Some(e) = self.earliest.get() {
            return Some(SimTime(e));
        }
        // Only the lowest non-empty bucket can hold the earliest time. The
        // scan does not move anything: a later push may still fall between
        // `now` and that time (a decode run's next step).
        let b = self.nonempty.trailing_zeros() as usize;
        let min = self.buckets[b].iter().map(|&(t, _)| t).min()?;
        self.earliest.set(Some(min));
        Some(SimTime(min))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(SimTime(10), "c");
        q.schedule(SimTime(5), "a");
        q.schedule(SimTime(10), "d");
        q.schedule(SimTime(5), "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!["a", "b", "c", "d"]);
        assert_eq!(q.now(), SimTime(10));
        assert_eq!(q.events_processed(), 4);
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn ties_keep_insertion_order_across_redistributions() {
        // Events at one time pushed from far away (high bucket) and then
        // from close by (lower buckets, after the clock moved) must still
        // pop in insertion order.
        let mut q = EventQueue::new();
        q.schedule(SimTime(1_000), 0);
        q.schedule(SimTime(3), 1);
        q.schedule(SimTime(1_000), 2);
        assert_eq!(q.pop(), Some((SimTime(3), 1)));
        q.schedule(SimTime(1_000), 3);
        q.schedule(SimTime(999), 4);
        q.schedule(SimTime(1_000), 5);
        assert_eq!(q.pop(), Some((SimTime(999), 4)));
        q.schedule(SimTime(1_000), 6);
        let rest: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(rest, vec![0, 2, 3, 5, 6]);
    }

    #[test]
    fn a_push_after_a_peek_can_come_first() {
        // A decode run peeks at the queue, then schedules its own step
        // before the peeked time: that step pops first.
        let mut q = EventQueue::new();
        q.schedule(SimTime(100), "far");
        assert_eq!(q.peek_time(), Some(SimTime(100)));
        q.skip_to(SimTime(40));
        q.schedule(SimTime(60), "near");
        assert_eq!(q.peek_time(), Some(SimTime(60)));
        assert_eq!(q.pop(), Some((SimTime(60), "near")));
        assert_eq!(q.pop(), Some((SimTime(100), "far")));
    }

    /// One step of a random schedule: push `n` events at `now + delta`
    /// each, pop, peek, or skip the clock forward to before the next event.
    #[derive(Clone, Debug)]
    enum Op {
        Push(Vec<u64>),
        Pop,
        Peek,
        Skip(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Deltas from tiny (many ties) to huge (high buckets).
        let delta = prop_oneof![
            3 => 0u64..4,
            3 => 0u64..5_000,
            2 => 0u64..50_000_000,
            1 => 0u64..(1 << 62),
        ];
        prop_oneof![
            4 => proptest::collection::vec(delta, 1..6).prop_map(Op::Push),
            4 => Just(Op::Pop),
            1 => Just(Op::Peek),
            1 => (0u64..1_000).prop_map(Op::Skip),
        ]
    }

    proptest! {
        #[test]
        fn pops_exactly_as_a_binary_heap_of_time_and_sequence(
            ops in proptest::collection::vec(op(), 1..400)
        ) {
            let mut q = EventQueue::new();
            let mut reference = BinaryHeap::new();
            let mut seq = 0u64;
            for op in ops {
                match op {
                    Op::Push(deltas) => {
                        for d in deltas {
                            let t = q.now().0.saturating_add(d);
                            q.schedule(SimTime(t), seq);
                            reference.push(Reverse((t, seq)));
                            seq += 1;
                        }
                    }
                    Op::Pop => {
                        let want = reference.pop().map(|Reverse((t, s))| (SimTime(t), s));
                        prop_assert_eq!(q.pop(), want);
                    }
                    Op::Peek => {
                        let want = reference.peek().map(|Reverse((t, _))| SimTime(*t));
                        prop_assert_eq!(q.peek_time(), want);
                    }
                    Op::Skip(d) => {
                        let t = q.now().0 + d;
                        let next = reference.peek().map(|Reverse((t, _))| *t);
                        if next.is_none_or(|n| t < n) {
                            q.skip_to(SimTime(t));
                            prop_assert_eq!(q.now(), SimTime(t));
                        }
                    }
                }
                prop_assert_eq!(q.len(), reference.len());
            }
            while let Some(Reverse((t, s))) = reference.pop() {
                prop_assert_eq!(q.pop(), Some((SimTime(t), s)));
            }
            prop_assert_eq!(q.pop(), None);
        }
    }
}
