//! The discrete-event core: a priority queue of events ordered by
//! (time, insertion sequence number). Ties at the same nanosecond are broken
//! by insertion order, as in nexosim and SimPy, so a run is a pure function of
//! its inputs.
//!
//! A std `BinaryHeap` of `u128` keys stays the queue: a radix heap (Ahuja,
//! Mehlhorn, Orlin and Tarjan, J. ACM 1990) and a 4-ary heap with Floyd's
//! bottom-up pop were both measured dearer on the 1,000-replica fleet
//! (callgrind, 100 k requests, 1.9 M pops, inclusive: `BinaryHeap::pop`
//! 499 M instructions, the radix heap's refill 674 M, the 4-ary pop 795 M;
//! the radix heap moves each event down about log2 n buckets, as many steps
//! as the binary heap's sift, each dearer) and on `bench`'s 4 replicas (a
//! heap of a few events). The tests pin the pop order any replacement must
//! keep.
//!
//! **A timing wheel for fleets.** A fleet's heap holds about one iteration
//! end per replica, each replaced by the replica's next as it pops: a
//! thousand replicas make every pop sift through ten levels (about 290
//! instructions, 15 % of the simulation's thread on a 1,000-replica fleet).
//! Those events are all due within a few of the fleet's steps, so
//! [`EventQueue::set_wheel`] keeps the near future in a timing wheel
//! (`wheel`), where scheduling and popping cost a bucket and a bitmap word,
//! and only the far events (ticks, load reports, long iterations) in the
//! heap. The keys are the same, so the order is too.

mod wheel;

use crate::time::SimTime;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use wheel::Wheel;

/// A scheduled event: fires at the time in the key's high 64 bits; the
/// sequence number in its low 64 bits breaks ties in insertion order. One
/// `u128` compare orders (time, seq) exactly as comparing the pair
/// lexicographically does, in fewer instructions per heap step.
struct Scheduled<E> {
    key: u128,
    event: E,
}

impl<E> Scheduled<E> {
    #[inline]
    fn time(&self) -> SimTime {
        SimTime((self.key >> 64) as u64)
    }
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Scheduled<E> {}
impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Scheduled<E> {
    // BinaryHeap is a max-heap: reverse so the earliest (time, seq) pops first.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// The event queue of one simulation run.
pub struct EventQueue<E> {
    heap: BinaryHeap<Scheduled<E>>,
    wheel: Option<Wheel<E>>,
    next_seq: u64,
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
            heap: BinaryHeap::with_capacity(1024),
            wheel: None,
            next_seq: 0,
            now: SimTime::ZERO,
            popped: 0,
        }
    }

    /// The time of the event being processed (the clock never goes back).
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Keeps events due within `2^shift · slots` ns of the clock in a
    /// timing wheel of `slots` buckets (a power of two, at least 64) of
    /// `2^shift` ns; set before any event is scheduled. The order of events
    /// is the same with it or without it.
    pub fn set_wheel(&mut self, shift: u32, slots: usize) {
        assert!(self.is_empty(), "the wheel is set before any event");
        self.wheel = Some(Wheel::new(shift, slots));
    }

    /// Schedules `event` at `time`. Scheduling in the past is a logic error;
    /// the event is clamped to `now` so the clock stays monotone.
    pub fn schedule(&mut self, time: SimTime, event: E) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        let time = time.max(self.now);
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = (time.0 as u128) << 64 | seq as u128;
        let event = match &mut self.wheel {
            Some(w) => match w.push(self.now.0, time.0, key, event) {
                Ok(()) => return,
                // Past the wheel's horizon: the heap orders it.
                Err(event) => event,
            },
            None => event,
        };
        self.heap.push(Scheduled { key, event });
    }

    /// Pops the next event and advances the clock to it.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        self.pop_through(SimTime(u64::MAX))
    }

    /// Pops the next event, if it is due by `limit`, and advances the clock
    /// to it (a peek and a pop in one look at the queue).
    #[inline]
    pub fn pop_through(&mut self, limit: SimTime) -> Option<(SimTime, E)> {
        let limit = (limit.0 as u128) << 64 | u64::MAX as u128;
        let heap = self.heap.peek().map(|s| s.key);
        // The wheel's least key, when it comes before the heap's.
        let wheel = self
            .wheel
            .as_mut()
            .and_then(|w| w.least(self.now.0))
            .filter(|&k| heap.is_none_or(|h| k < h));
        if wheel.or(heap)? > limit {
            return None;
        }
        let (key, event) = match (wheel, &mut self.wheel) {
            (Some(_), Some(w)) => w.pop(),
            _ => {
                let s = self.heap.pop()?;
                (s.key, s.event)
            }
        };
        let time = SimTime((key >> 64) as u64);
        self.now = time;
        self.popped += 1;
        Some((time, event))
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
    pub fn peek_time(&mut self) -> Option<SimTime> {
        let heap = self.heap.peek().map(Scheduled::time);
        let Some(w) = &mut self.wheel else {
            return heap;
        };
        match w.least(self.now.0) {
            Some(k) => {
                let t = SimTime((k >> 64) as u64);
                Some(heap.map_or(t, |h| h.min(t)))
            }
            None => heap,
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len() + self.wheel.as_ref().map_or(0, Wheel::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    fn ties_keep_insertion_order_whatever_came_between() {
        // Events at one time pushed before and after the clock moved, with
        // earlier ones between, still pop in insertion order.
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
        /// Pop if due within `now + delta`.
        PopThrough(u64),
        Peek,
        Skip(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Deltas from tiny (many ties) to huge (keys near the top of the
        // u128 packing of time and sequence).
        let delta = prop_oneof![
            3 => 0u64..4,
            3 => 0u64..5_000,
            2 => 0u64..50_000_000,
            1 => 0u64..(1 << 62),
        ];
        prop_oneof![
            4 => proptest::collection::vec(delta, 1..6).prop_map(Op::Push),
            4 => Just(Op::Pop),
            2 => (0u64..10_000).prop_map(Op::PopThrough),
            1 => Just(Op::Peek),
            1 => (0u64..1_000).prop_map(Op::Skip),
        ]
    }

    proptest! {
        #[test]
        fn pops_exactly_as_a_binary_heap_of_time_and_sequence(
            ops in proptest::collection::vec(op(), 1..400),
            wheel in prop_oneof![Just(None), (0u32..14, 6u32..9).prop_map(Some)],
        ) {
            let mut q = EventQueue::new();
            // Buckets of 1 ns to 8 µs, 64 to 256 of them: horizons from 64
            // ns (most events past it, in the heap) to 2 ms, so events wrap
            // around the ring and move between the two.
            if let Some((shift, slots)) = wheel {
                q.set_wheel(shift, 1 << slots);
            }
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
                    Op::PopThrough(d) => {
                        // Events far out put the clock near the end of
                        // time: no limit past it.
                        let limit = q.now().0.saturating_add(d);
                        let due = reference.peek().is_some_and(|Reverse((t, _))| *t <= limit);
                        let want = if due {
                            reference.pop().map(|Reverse((t, s))| (SimTime(t), s))
                        } else {
                            None
                        };
                        prop_assert_eq!(q.pop_through(SimTime(limit)), want);
                    }
                    Op::Peek => {
                        let want = reference.peek().map(|Reverse((t, _))| SimTime(*t));
                        prop_assert_eq!(q.peek_time(), want);
                    }
                    Op::Skip(d) => {
                        let t = q.now().0.saturating_add(d);
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
