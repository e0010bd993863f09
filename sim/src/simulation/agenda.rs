//! The run's agenda: the event queue (`engine`) and, kept beside it as
//! events come and go, when the next event that can reach a replica from
//! outside is due ([`RunAhead`]), which decode runs read to step ahead of
//! other replicas' events. Handlers schedule through it and never see the
//! bookkeeping.

use super::decode_runs::RunAhead;
use super::Event;
use crate::engine::EventQueue;
use crate::time::SimTime;

/// The event queue of a run and what decode runs need to know of it.
pub(super) struct Agenda {
    queue: EventQueue<Event>,
    /// The queued events that can reach a replica from outside.
    pub(super) ahead: RunAhead,
}

impl Agenda {
    /// An empty agenda; `wheel`: near events go into the queue's timing
    /// wheel of `2^shift`-ns buckets.
    pub(super) fn new(wheel: Option<(u32, usize)>) -> Agenda {
        let mut queue = EventQueue::new();
        if let Some((shift, slots)) = wheel {
            queue.set_wheel(shift, slots);
        }
        Agenda {
            queue,
            ahead: RunAhead::default(),
        }
    }

    #[inline]
    pub(super) fn schedule(&mut self, at: SimTime, event: Event) {
        self.ahead.scheduled(at, &event);
        self.queue.schedule(at, event);
    }

    /// The next event due at or before `limit`.
    #[inline]
    pub(super) fn pop_through(&mut self, limit: SimTime) -> Option<(SimTime, Event)> {
        let (at, event) = self.queue.pop_through(limit)?;
        self.ahead.popped(&event);
        Some((at, event))
    }

    /// The next event.
    #[cfg(test)]
    pub(super) fn pop(&mut self) -> Option<(SimTime, Event)> {
        self.pop_through(SimTime(u64::MAX))
    }

    #[inline]
    pub(super) fn peek_time(&mut self) -> Option<SimTime> {
        self.queue.peek_time()
    }

    /// Moves the clock to `time`, an event handled without the queue.
    #[inline]
    pub(super) fn skip_to(&mut self, time: SimTime) {
        self.queue.skip_to(time);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Events popped from the queue or handled through `skip_to`.
    #[inline]
    pub(super) fn events_processed(&self) -> u64 {
        self.queue.events_processed()
    }

    /// Every event handled, the steps decode runs took ahead of the queue
    /// included.
    pub(super) fn events(&self) -> u64 {
        self.queue.events_processed() + self.ahead.events
    }
}
