//! The discrete-event core: a priority queue of events ordered by
//! (time, insertion sequence number). Ties at the same nanosecond are broken
//! by insertion order, as in nexosim and SimPy, so a run is a pure function of
//! its inputs.

use crate::time::SimTime;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

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
            next_seq: 0,
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
    pub fn schedule(&mut self, time: SimTime, event: E) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        let time = time.max(self.now);
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = (time.0 as u128) << 64 | seq as u128;
        self.heap.push(Scheduled { key, event });
    }

    /// Pops the next event and advances the clock to it.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        let s = self.heap.pop()?;
        let time = s.time();
        self.now = time;
        self.popped += 1;
        Some((time, s.event))
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
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(Scheduled::time)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Number of events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
