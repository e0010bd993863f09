//! Token buckets (Turner, "New directions in communications", 1986; the
//! rate limiter of API gateways such as OpenAI's requests- and
//! tokens-per-minute limits): a bucket of depth `burst` refills at `rate` per
//! period; a request passes when the bucket holds what it costs, which is
//! then taken out.
//!
//! The level is kept in integer "atoms" (1 unit = period_ns × 10⁶ atoms,
//! refilled at rate × 10⁶ atoms per ns), so a bucket admits exactly
//! `burst + rate × t` units over a window of `t` (rates with up to six
//! decimals are exact) and no rounding drifts over a long run.

use crate::time::SimTime;

const MICRO: i128 = 1_000_000;

/// A token bucket on some unit (requests, tokens).
#[derive(Clone, Debug)]
pub struct TokenBucket {
    level: i128,
    cap: i128,
    refill_per_ns: i128,
    atoms_per_unit: i128,
    last: SimTime,
}

impl TokenBucket {
    /// A full bucket of depth `burst` units refilled at `rate` units per
    /// `period_ns`.
    pub fn new(rate: f64, burst: f64, period_ns: u64) -> TokenBucket {
        let atoms_per_unit = period_ns as i128 * MICRO;
        let cap = (burst * atoms_per_unit as f64).round() as i128;
        TokenBucket {
            level: cap,
            cap,
            refill_per_ns: (rate * MICRO as f64).round() as i128,
            atoms_per_unit,
            last: SimTime::ZERO,
        }
    }

    fn refill(&mut self, now: SimTime) {
        let dt = now.since(self.last) as i128;
        self.last = self.last.max(now);
        self.level = (self.level + dt * self.refill_per_ns).min(self.cap);
    }

    /// Whether `units` could be taken at `now` (refilling up to it).
    pub fn has(&mut self, units: u64, now: SimTime) -> bool {
        self.refill(now);
        self.level >= units as i128 * self.atoms_per_unit
    }

    /// Takes `units`; the caller checked [`Self::has`] at the same `now`, or
    /// charges after the fact (then the bucket may go into debt).
    pub fn take(&mut self, units: u64, now: SimTime) {
        self.refill(now);
        self.level -= units as i128 * self.atoms_per_unit;
    }

    /// Whole units in the bucket now (negative in debt).
    pub fn units(&mut self, now: SimTime) -> i64 {
        self.refill(now);
        (self.level.div_euclid(self.atoms_per_unit)) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offers a request every `gap_ns` for `secs` seconds; counts admissions.
    fn admitted(rate: f64, burst: f64, gap_ns: u64, secs: u64) -> u64 {
        let mut b = TokenBucket::new(rate, burst, 1_000_000_000);
        let mut n = 0;
        let mut t = 0;
        while t <= secs * 1_000_000_000 {
            let now = SimTime(t);
            if b.has(1, now) {
                b.take(1, now);
                n += 1;
            }
            t += gap_ns;
        }
        n
    }

    #[test]
    fn admits_exactly_the_rate_over_a_long_window() {
        // 10 req/s, depth 5, offered 1000 req/s for 1000 s: the burst plus
        // one request per 100 ms after it.
        assert_eq!(admitted(10.0, 5.0, 1_000_000, 1000), 5 + 10 * 1000);
        // A fractional rate with no drift: 0.3 req/s over 10,000 s. (With
        // depth 2 the bucket never sits full between offers, so no refill is
        // wasted; at depth 1 each refill would wait for the next 10 ms offer.)
        assert_eq!(admitted(0.3, 2.0, 10_000_000, 10_000), 2 + 3000);
        assert_eq!(admitted(0.3, 1.0, 10_000_000, 10_000), 2995);
        // Below the rate everything passes.
        assert_eq!(admitted(10.0, 1.0, 200_000_000, 100), 501);
    }

    #[test]
    fn tokens_per_minute_and_debt() {
        // 6000 tokens/min = 100 tokens/s, depth 6000.
        let mut b = TokenBucket::new(6000.0, 6000.0, 60_000_000_000);
        let t0 = SimTime::ZERO;
        assert!(b.has(6000, t0) && !b.has(6001, t0));
        b.take(6000, t0);
        b.take(500, t0); // charged after the fact: 500 in debt
        assert_eq!(b.units(t0), -500);
        assert!(!b.has(1, SimTime::from_secs_f64(5.0)));
        assert_eq!(b.units(SimTime::from_secs_f64(6.0)), 100);
        // Never above the depth.
        assert_eq!(b.units(SimTime::from_secs_f64(1e4)), 6000);
    }
}
