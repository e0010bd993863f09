//! The run's agenda: the event queue (`engine`) up to the run's horizon,
//! the guard against simulated time that stops advancing (`guard`), and
//! the end of the run so far. Beside the queue it keeps, as events come and
//! go, when the next event that can reach a replica from outside is due
//! ([`Outside`]), so that an iteration end that touches nothing but its own
//! replica may be handled ahead of other replicas' events (`replicas`).
//! Handlers schedule through it and never see the bookkeeping.

use super::Event;
use crate::engine::EventQueue;
use crate::guard::RunGuard;
use crate::time::SimTime;

/// The event queue of a run and what its handlers need to know of it.
pub(super) struct Agenda {
    queue: EventQueue<Event>,
    /// The queued events that can reach a replica from outside.
    outside: Outside,
    /// Events past this instant are never handled (the duration horizon).
    horizon: SimTime,
    /// Stops a run whose simulated time stops advancing.
    guard: RunGuard,
    /// The run's last arrival or iteration end so far: ticks (samples, load
    /// reports, life-cycle and canary events) do not extend a run.
    end: SimTime,
    /// Events handled ahead of queued ones ([`Self::handle_now`]).
    ahead: u64,
}

impl Agenda {
    /// An empty agenda up to `horizon` (none: the queue's end); `wheel`:
    /// near events go into the queue's timing wheel of `2^shift`-ns buckets.
    pub(super) fn new(wheel: Option<(u32, usize)>, horizon: Option<SimTime>) -> Agenda {
        let mut queue = EventQueue::new();
        if let Some((shift, slots)) = wheel {
            queue.set_wheel(shift, slots);
        }
        Agenda {
            queue,
            outside: Outside::default(),
            horizon: horizon.unwrap_or(SimTime(u64::MAX)),
            guard: RunGuard::new(),
            end: SimTime::ZERO,
            ahead: 0,
        }
    }

    /// Keeps track of when the next event that can reach a replica from
    /// outside is due ([`Self::outside_due`]): only in a fleet where the
    /// workload's arrivals, the time-series ticks and the load reports are
    /// all such events (an open-loop source, no tenants, regions, canary,
    /// life cycle or disaggregation).
    pub(super) fn watch_outside(&mut self, on: bool) {
        self.outside.enabled = on;
    }

    #[inline]
    pub(super) fn schedule(&mut self, at: SimTime, event: Event) {
        self.outside.scheduled(at, &event);
        self.queue.schedule(at, event);
    }

    /// The next event due within the horizon.
    #[inline(always)]
    pub(super) fn next(&mut self) -> Option<(SimTime, Event)> {
        let (at, event) = self.queue.pop_through(self.horizon)?;
        self.outside.popped(&event);
        if event.extends_run() {
            self.end = self.end.max(at);
        }
        Some((at, event))
    }

    /// An error when simulated time has stopped advancing at `at`, the time
    /// of the event popped last.
    #[inline(always)]
    pub(super) fn check_time(&mut self, at: SimTime) -> Result<(), String> {
        self.guard.on_event(at.0)
    }

    #[inline]
    pub(super) fn peek_time(&mut self) -> Option<SimTime> {
        self.queue.peek_time()
    }

    /// The instant before which an event comes strictly before every queued
    /// event that could reach a replica from outside (0 where that is not
    /// tracked: [`Self::watch_outside`]).
    #[inline]
    pub(super) fn outside_due(&self) -> u64 {
        self.outside.due()
    }

    /// The last instant whose events are handled.
    #[inline]
    pub(super) fn horizon(&self) -> SimTime {
        self.horizon
    }

    /// Handles an event due at `at` without the queue: it comes strictly
    /// before every queued event, so it would be popped next (the clock
    /// moves to it), or (`ahead`) it touches nothing that any queued event
    /// before it touches, so it may go first (the clock stays).
    #[inline]
    pub(super) fn handle_now(&mut self, at: SimTime, ahead: bool) -> Result<(), String> {
        if ahead {
            self.ahead += 1;
        } else {
            self.queue.skip_to(at);
        }
        self.guard.on_event(at.0)?;
        self.end = self.end.max(at);
        Ok(())
    }

    /// The run's last arrival or iteration end so far.
    pub(super) fn end(&self) -> SimTime {
        self.end
    }

    pub(super) fn guard(&self) -> &RunGuard {
        &self.guard
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Events popped from the queue or handled at the queue's clock.
    #[inline]
    pub(super) fn events_processed(&self) -> u64 {
        self.queue.events_processed()
    }

    /// Every event handled, those handled ahead of the queue included.
    pub(super) fn events(&self) -> u64 {
        self.queue.events_processed() + self.ahead
    }
}

/// What may reach a replica from outside: the times of the queued events of
/// the kinds that can (none in the queue: `u64::MAX`), in a fleet where only
/// those kinds can (`enabled`).
#[derive(Debug)]
struct Outside {
    enabled: bool,
    arrival: u64,
    sample: u64,
    report: u64,
}

impl Default for Outside {
    fn default() -> Self {
        Outside {
            enabled: false,
            arrival: u64::MAX,
            sample: u64::MAX,
            report: u64::MAX,
        }
    }
}

impl Outside {
    /// `event` was scheduled at `t`.
    #[inline]
    fn scheduled(&mut self, t: SimTime, event: &Event) {
        match event {
            Event::Arrival => self.arrival = t.0,
            Event::Sample => self.sample = t.0,
            Event::LoadReport => self.report = t.0,
            _ => {}
        }
    }

    /// `event` left the queue.
    #[inline]
    fn popped(&mut self, event: &Event) {
        self.scheduled(SimTime(u64::MAX), event);
    }

    #[inline]
    fn due(&self) -> u64 {
        if self.enabled {
            self.arrival.min(self.sample).min(self.report)
        } else {
            0
        }
    }
}
