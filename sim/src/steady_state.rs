//! Offered vs achieved load and whether a run reached a steady state.
//!
//! A queue that is fed faster than it is served grows without bound, and
//! every latency measured in such a run depends on how long the run lasted:
//! such a figure is not a property of the fleet. The test here compares
//! halves of the arrival window (the "batch means" idea of steady-state
//! simulation output analysis; Law, *Simulation Modeling and Analysis*,
//! 5th ed., §9.5). The warm-up is dropped first: a quarter of the window,
//! or the mean time in system of the requests that arrived in that quarter
//! if longer (the fleet fills over about one time in system). The rest is
//! split in halves, and the time-average number of requests in the system
//! over each is compared. In a stable system the two agree up to noise; in
//! an overloaded one the backlog grows linearly, so the later half holds
//! 1.4× to 1.9× the earlier (for a warm-up of a half to a quarter of the
//! window). A growth beyond [`GROWTH_FACTOR`] (plus one request per replica,
//! so that a nearly empty fleet's noise is not mistaken for a trend) is
//! reported as `overloaded`. The queue waits (arrival to first scheduled;
//! a request never scheduled waits until the end) of the same halves are
//! compared as well: a stable fleet's waits do not trend, an overloaded
//! one's grow with every arrival, so a growth beyond [`GROWTH_FACTOR`] plus
//! [`WAIT_SLACK_MS`] is also `overloaded` — this catches overload even when
//! requests stay so long that the backlog test has no room after warm-up.
//! A fleet that turns most of its arrivals away is not in a steady state
//! of serving them, however flat its (empty) backlog: when more than half
//! of the requests that arrived were rejected — every one, in a fleet that
//! serves nothing — the verdict is `rejecting`. Otherwise, when the warm-up
//! takes more than half the window, or no request completed at all, the
//! halves cannot be compared: the verdict is `too-short`.

use crate::request::{Request, Status};
use crate::time::SimTime;
use serde::Serialize;

/// Late/early backlog ratio above which the queue counts as growing.
pub const GROWTH_FACTOR: f64 = 1.3;

/// Queue-wait growth below this many ms is noise (a few iterations).
pub const WAIT_SLACK_MS: f64 = 50.0;

/// Offered vs achieved load of a run and its verdict (`summary.json`'s `load`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LoadReport {
    /// The workload's long-run arrival rate (requests/s) when it defines
    /// one, otherwise arrivals over the arrival window; `None` when nothing
    /// arrived or the window has no length.
    pub offered_rps: Option<f64>,
    /// Requests completed per second while requests were arriving (over the
    /// arrival window, so a drain after the last arrival does not dilute it;
    /// over the whole run when everything arrived at once).
    pub achieved_rps: f64,
    /// Time-average requests in the system over the first half of the
    /// arrival window after the warm-up.
    pub in_system_early: f64,
    /// The same over the second half.
    pub in_system_late: f64,
    /// Warm-up dropped from the start of the window, seconds.
    pub warmup_s: f64,
    /// Requests still in flight when the run ended.
    pub in_flight_at_end: u64,
    /// `stable`, `overloaded` (the backlog grew over the window),
    /// `rejecting` (more than half of the arrivals were rejected) or
    /// `too-short` (the warm-up took more than half the window, or nothing
    /// completed).
    pub verdict: String,
}

impl LoadReport {
    pub fn is_stable(&self) -> bool {
        self.verdict == "stable"
    }

    pub fn is_overloaded(&self) -> bool {
        self.verdict == "overloaded"
    }

    pub fn is_rejecting(&self) -> bool {
        self.verdict == "rejecting"
    }
}

/// What the load report needs of one request: 32 bytes instead of the whole
/// record, so a streamed run keeps only these (see `records`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadRecord {
    arrival: u64,
    /// Completion time (`u64::MAX`: not completed, or no time).
    finished: u64,
    /// Arrival to first scheduled, ns (`u64::MAX`: never scheduled).
    wait: u64,
    kind: Kind,
}

/// The outcomes the load report tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    InFlight,
    Completed,
    Rejected,
    /// Cancelled or failed (observed runs).
    Other,
}

impl crate::store::Spill for LoadRecord {
    const BYTES: usize = 25;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.arrival.to_le_bytes());
        out.extend_from_slice(&self.finished.to_le_bytes());
        out.extend_from_slice(&self.wait.to_le_bytes());
        out.push(self.kind as u8);
    }
    fn get(b: &[u8]) -> LoadRecord {
        let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        LoadRecord {
            arrival: u(0),
            finished: u(8),
            wait: u(16),
            kind: match b[24] {
                0 => Kind::InFlight,
                1 => Kind::Completed,
                2 => Kind::Rejected,
                _ => Kind::Other,
            },
        }
    }
}

impl LoadRecord {
    pub fn of(r: &Request) -> LoadRecord {
        LoadRecord {
            arrival: r.arrival.0,
            finished: r.finished.map_or(u64::MAX, |f| f.0),
            wait: r.queue_wait().unwrap_or(u64::MAX),
            kind: match r.status {
                Status::InFlight => Kind::InFlight,
                Status::Completed => Kind::Completed,
                Status::Rejected(_) => Kind::Rejected,
                Status::Cancelled | Status::Failed => Kind::Other,
            },
        }
    }

    fn finished(&self) -> Option<u64> {
        (self.finished != u64::MAX).then_some(self.finished)
    }

    fn queue_wait(&self) -> Option<u64> {
        (self.wait != u64::MAX).then_some(self.wait)
    }
}

/// Builds the load report of a run of `replicas` replicas that ended at `end`.
pub fn load_report(
    reqs: &[Request],
    end: SimTime,
    replicas: u32,
    configured_rate: Option<f64>,
) -> LoadReport {
    load_report_of(
        || reqs.iter().map(LoadRecord::of),
        end,
        replicas,
        configured_rate,
    )
}

/// [`load_report`] over the requests' [`LoadRecord`]s, which `reqs` lists in
/// request order each time it is called (several passes: the windows depend
/// on the last arrival; a streamed run reads them back from
/// `store`).
pub fn load_report_of<I: Iterator<Item = LoadRecord>>(
    reqs: impl Fn() -> I,
    end: SimTime,
    replicas: u32,
    configured_rate: Option<f64>,
) -> LoadReport {
    // Three reads of the records (a streamed run reads them back from
    // disk each time): what the windows depend on, then every sum over them
    // at once, then the backlog (whose windows depend on the second). Each
    // sum takes the same terms in the same order as a pass of its own, so
    // the same bits.
    let (mut last_arrival, mut count, mut in_flight) = (0u64, 0usize, 0u64);
    let (mut completed, mut rejected) = (0usize, 0usize);
    for r in reqs() {
        last_arrival = last_arrival.max(r.arrival);
        count += 1;
        in_flight += (r.kind == Kind::InFlight) as u64;
        completed += (r.kind == Kind::Completed) as usize;
        rejected += (r.kind == Kind::Rejected) as usize;
    }
    let window = last_arrival as f64 / 1e9;
    let offered = configured_rate
        .or_else(|| (window > 0.0 && count > 1).then(|| (count - 1) as f64 / window));
    // Warm-up: a quarter of the window, or the mean time in system of the
    // requests that arrived in it when longer.
    let quarter = last_arrival / 4;
    // Queue waits of arrivals in the halves after a quarter of warm-up.
    let wmid = quarter + (last_arrival - quarter) / 2;
    // Completions by the last arrival (by the end when all arrived at 0).
    let done_t = if last_arrival > 0 {
        last_arrival
    } else {
        u64::MAX
    };
    let (mut n, mut sum) = (0u64, 0u128);
    let mut done = 0usize;
    let mut waits = [(0u64, 0f64); 2];
    for r in reqs() {
        let finished = r.finished();
        if r.kind == Kind::Completed {
            if r.arrival <= quarter {
                if let Some(f) = finished {
                    (n, sum) = (n + 1, sum + f.saturating_sub(r.arrival) as u128);
                }
            }
            done += finished.is_some_and(|f| f <= done_t) as usize;
        }
        let half = if (quarter..wmid).contains(&r.arrival) {
            0
        } else if (wmid..last_arrival + 1).contains(&r.arrival) {
            1
        } else {
            continue;
        };
        let w = match (r.kind, r.queue_wait()) {
            (Kind::Rejected, _) => continue,
            (_, Some(w)) => w,
            (_, None) => end.0.saturating_sub(r.arrival),
        };
        waits[half].0 += 1;
        waits[half].1 += w as f64 / 1e6;
    }
    let sojourn = if n > 0 { (sum / n as u128) as u64 } else { 0 };
    let warm = quarter.max(sojourn);
    let too_short = warm >= last_arrival / 2 || last_arrival == 0;
    let mid = warm + (last_arrival.saturating_sub(warm)) / 2;
    let (early, late) = if too_short {
        (0.0, 0.0)
    } else {
        backlog_halves(reqs(), warm, mid, last_arrival, end)
    };
    let growing = !too_short && late > GROWTH_FACTOR * early + replicas.max(1) as f64;
    let mean_wait = |(n, sum): (u64, f64)| if n == 0 { 0.0 } else { sum / n as f64 };
    let waits_grow = last_arrival > 0
        && mean_wait(waits[1]) > GROWTH_FACTOR * mean_wait(waits[0]) + WAIT_SLACK_MS;
    let verdict = if growing || waits_grow {
        "overloaded"
    } else if count > 0 && 2 * rejected > count {
        "rejecting"
    } else if too_short || completed == 0 {
        "too-short"
    } else {
        "stable"
    };
    LoadReport {
        offered_rps: offered,
        achieved_rps: if last_arrival > 0 {
            done as f64 / window
        } else {
            done as f64 / end.as_secs_f64().max(1e-9)
        },
        in_system_early: early,
        in_system_late: late,
        warmup_s: warm as f64 / 1e9,
        in_flight_at_end: in_flight,
        verdict: verdict.to_string(),
    }
}

/// Time-average number in the system over [a, m) and [m, b). Rejected
/// requests never enter the system.
///
/// The integral of N(t) over a window is the sum over requests of the
/// time each spent in it (N(t) is the count of arrivals at or before t less
/// the departures), so it is summed request by request in exact integer
/// arithmetic, with no sorting and no memory: each request adds the part of
/// the window after its arrival and takes away the part after its
/// departure. Integrating N(t) in f64 over the time-sorted arrivals and
/// departures instead would need a sort of two events per request; every
/// partial sum there is an integer, so whenever the total stays below 2^53
/// (request-nanoseconds: 104 days of summed time in the system per half)
/// both give the same bits, and beyond that this is the more exact (the
/// exact sum rounded once).
fn backlog_halves(
    reqs: impl Iterator<Item = LoadRecord>,
    a: u64,
    m: u64,
    b: u64,
    run_end: SimTime,
) -> (f64, f64) {
    let halves = [(a, m), (m, b)];
    // The part of window [lo, hi) at or after t.
    let after = |t: u64, (lo, hi): (u64, u64)| (hi - t.clamp(lo, hi)) as i128;
    let mut area = [0i128; 2];
    for r in reqs {
        if r.kind == Kind::Rejected {
            continue;
        }
        let gone = match r.kind {
            Kind::Completed => r.finished().unwrap_or(run_end.0),
            _ => u64::MAX,
        };
        for (k, &w) in halves.iter().enumerate() {
            area[k] += after(r.arrival, w) - after(gone, w);
        }
    }
    let avg = |k: usize| -> f64 {
        let (a, b) = halves[k];
        area[k] as f64 / (b - a).max(1) as f64
    };
    (avg(0), avg(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::RequestSpec;

    fn req(arrival_s: f64, done_s: Option<f64>) -> Request {
        let mut r = Request::from_spec(RequestSpec {
            arrival: SimTime::from_secs_f64(arrival_s),
            prompt_tokens: 1,
            output_tokens: 1,
            tenant: 0,
            session: 0,
            prefix_hashes: vec![],
            hash_block_tokens: 16,
            pinnable_tokens: 0,
            samples: 0,
            region: 0,
        });
        if let Some(d) = done_s {
            r.status = Status::Completed;
            r.finished = crate::time::Stamp::at(SimTime::from_secs_f64(d));
        }
        r
    }

    /// The integration this replaced: N(t) summed in f64 over the
    /// time-sorted arrivals (+1) and departures (−1, first at a tie).
    fn backlog_by_events(recs: &[LoadRecord], a: u64, m: u64, b: u64, end: u64) -> (f64, f64) {
        let mut ev = Vec::new();
        for r in recs.iter().filter(|r| r.kind != Kind::Rejected) {
            ev.push((r.arrival, 1i64));
            let gone = match r.kind {
                Kind::Completed => r.finished().unwrap_or(end),
                _ => u64::MAX,
            };
            ev.push((gone, -1));
        }
        ev.sort_unstable();
        let halves = [(a, m), (m, b)];
        let (mut area, mut done) = ([0f64; 2], [false; 2]);
        let (mut n, mut prev) = (0i64, 0u64);
        for (at, d) in ev {
            for (k, &(a, b)) in halves.iter().enumerate() {
                if done[k] {
                    continue;
                }
                let (lo, hi) = (prev.max(a), at.min(b));
                if hi > lo {
                    area[k] += n as f64 * (hi - lo) as f64;
                }
                done[k] = at >= b;
            }
            if done == [true; 2] {
                break;
            }
            prev = at;
            n += d;
        }
        let avg = |k: usize| {
            let (a, b) = halves[k];
            let mut area = area[k];
            let lo = prev.max(a);
            if !done[k] && b > lo {
                area += n as f64 * (b - lo) as f64;
            }
            area / (b - a).max(1) as f64
        };
        (avg(0), avg(1))
    }

    proptest::proptest! {
        /// Summed request by request, the backlog has the same bits as the
        /// sorted-event integration (whose partial sums stay below 2^53
        /// here), whatever the outcomes, ties and windows.
        #[test]
        fn backlog_equals_the_event_integration(
            recs in proptest::collection::vec(
                (0u64..2_000, 0u64..3_000, 0u8..4, proptest::bool::ANY),
                0..200,
            ),
            cuts in (0u64..3_000, 0u64..3_000, 0u64..3_000),
            end in 0u64..4_000,
        ) {
            let recs: Vec<LoadRecord> = recs
                .into_iter()
                .map(|(arrival, stay, kind, has_finish)| LoadRecord {
                    arrival: arrival * 1_000_003,
                    finished: if has_finish { (arrival + stay) * 1_000_003 } else { u64::MAX },
                    wait: u64::MAX,
                    kind: [Kind::InFlight, Kind::Completed, Kind::Rejected, Kind::Other]
                        [kind as usize],
                })
                .collect();
            let mut w = [cuts.0, cuts.1, cuts.2].map(|c| c * 1_000_003);
            w.sort_unstable();
            let [a, m, b] = w;
            let end = end * 1_000_003;
            let got = backlog_halves(recs.iter().copied(), a, m, b, SimTime(end));
            let want = backlog_by_events(&recs, a, m, b, end);
            proptest::prop_assert_eq!(got.0.to_bits(), want.0.to_bits(), "{:?} {:?}", got, want);
            proptest::prop_assert_eq!(got.1.to_bits(), want.1.to_bits(), "{:?} {:?}", got, want);
        }
    }

    #[test]
    fn a_queue_that_keeps_up_is_stable() {
        // One arrival a second, each served in half a second.
        let reqs: Vec<_> = (0..100)
            .map(|i| req(i as f64, Some(i as f64 + 0.5)))
            .collect();
        let l = load_report(&reqs, SimTime::from_secs_f64(99.5), 1, Some(1.0));
        assert!((l.in_system_early - 0.5).abs() < 0.05, "{l:?}");
        assert_eq!(l.verdict, "stable");
        assert_eq!(l.offered_rps, Some(1.0));
    }

    #[test]
    fn a_growing_backlog_is_overloaded() {
        // One arrival a second, served one every two seconds, in order.
        let reqs: Vec<_> = (0..100)
            .map(|i| req(i as f64, Some(2.0 * i as f64 + 2.0)))
            .collect();
        let l = load_report(&reqs, SimTime::from_secs_f64(200.0), 1, None);
        assert!(
            l.in_system_late > GROWTH_FACTOR * l.in_system_early,
            "{l:?}"
        );
        assert_eq!(l.verdict, "overloaded");
        assert!((l.offered_rps.unwrap() - 1.0).abs() < 1e-9);
        // 49 of 100 done by the last arrival at 99 s.
        assert!((l.achieved_rps - 49.0 / 99.0).abs() < 1e-9, "{l:?}");
    }

    #[test]
    fn a_fleet_that_rejects_every_request_is_not_stable() {
        // One arrival a second for 100 s, every one rejected at arrival:
        // nothing in the system, nothing served.
        let reqs: Vec<_> = (0..100)
            .map(|i| {
                let mut r = req(i as f64, None);
                r.status = Status::Rejected(crate::request::RejectReason::ExceedsKvCapacity);
                r.finished = crate::time::Stamp::at(r.arrival);
                r
            })
            .collect();
        let l = load_report(&reqs, SimTime::from_secs_f64(99.0), 1, Some(1.0));
        assert_eq!(l.achieved_rps, 0.0);
        assert_eq!(l.verdict, "rejecting", "{l:?}");
        assert!(!l.is_stable());
        // Most rejected, a few served: still rejecting; a few rejected: stable.
        let mixed = |served_every: usize| -> Vec<Request> {
            (0..100)
                .map(|i| {
                    if i % served_every == 0 {
                        req(i as f64, Some(i as f64 + 0.5))
                    } else {
                        let mut r = req(i as f64, None);
                        r.status =
                            Status::Rejected(crate::request::RejectReason::ExceedsKvCapacity);
                        r
                    }
                })
                .collect()
        };
        let end = SimTime::from_secs_f64(99.5);
        assert_eq!(load_report(&mixed(3), end, 1, None).verdict, "rejecting");
        let few: Vec<_> = (0..100)
            .map(|i| {
                let mut r = req(i as f64, Some(i as f64 + 0.5));
                if i % 10 == 0 {
                    r.status = Status::Rejected(crate::request::RejectReason::ExceedsKvCapacity);
                    r.finished = crate::time::Stamp::NONE;
                }
                r
            })
            .collect();
        assert_eq!(load_report(&few, end, 1, None).verdict, "stable");
    }

    #[test]
    fn a_run_in_which_nothing_completed_is_not_stable() {
        // Requests arrive and are all still in flight at the end (each
        // takes far longer than the run): no backlog growth can be seen in
        // a window this short relative to them, and nothing was served.
        let reqs: Vec<_> = (0..10).map(|i| req(i as f64 * 0.1, None)).collect();
        let l = load_report(&reqs, SimTime::from_secs_f64(1.0), 100, Some(10.0));
        assert_ne!(l.verdict, "stable", "{l:?}");
    }

    #[test]
    fn a_run_shorter_than_its_warm_up_is_too_short() {
        // Ten arrivals a second apart, each in the system for 30 s.
        let reqs: Vec<_> = (0..10)
            .map(|i| req(i as f64, Some(i as f64 + 30.0)))
            .collect();
        let l = load_report(&reqs, SimTime::from_secs_f64(39.0), 1, Some(1.0));
        assert_eq!(l.verdict, "too-short", "{l:?}");
    }
}
