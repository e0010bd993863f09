//! The Pareto front of a set of points under two costs to minimise (here:
//! fleet cost and a latency percentile). A point is on the front when no
//! other point is at least as good on both and better on one.

/// One candidate: an id and the two values to minimise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: usize,
    pub x: f64,
    pub y: f64,
}

/// The non-dominated candidates, ordered by `x` ascending (then `y`, then
/// id). Candidates with a non-finite value take no part. Exact ties (equal
/// `x` and `y`) dominate neither each other, so all of them are kept.
///
/// One sort and one scan: after sorting by (x, y), a point is on the front
/// iff its `y` is below every `y` seen before it (that is, below the last
/// front point's) — or it ties the last front point exactly.
pub fn front(candidates: &[Candidate]) -> Vec<Candidate> {
    let mut c: Vec<Candidate> = candidates
        .iter()
        .copied()
        .filter(|c| c.x.is_finite() && c.y.is_finite())
        .collect();
    c.sort_by(|a, b| {
        a.x.total_cmp(&b.x)
            .then(a.y.total_cmp(&b.y))
            .then(a.id.cmp(&b.id))
    });
    let mut out: Vec<Candidate> = Vec::new();
    for p in c {
        match out.last() {
            None => out.push(p),
            // The last front point has the lowest y so far.
            Some(last) if p.y < last.y || (p.x == last.x && p.y == last.y) => out.push(p),
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: usize, x: f64, y: f64) -> Candidate {
        Candidate { id, x, y }
    }

    fn ids(v: &[Candidate]) -> Vec<usize> {
        v.iter().map(|c| c.id).collect()
    }

    /// Brute force: p is on the front iff no q dominates it.
    fn brute(cands: &[Candidate]) -> Vec<usize> {
        let mut out: Vec<Candidate> = cands
            .iter()
            .copied()
            .filter(|p| {
                p.x.is_finite()
                    && p.y.is_finite()
                    && !cands.iter().any(|q| {
                        q.x.is_finite()
                            && q.y.is_finite()
                            && q.x <= p.x
                            && q.y <= p.y
                            && (q.x < p.x || q.y < p.y)
                    })
            })
            .collect();
        out.sort_by(|a, b| {
            a.x.total_cmp(&b.x)
                .then(a.y.total_cmp(&b.y))
                .then(a.id.cmp(&b.id))
        });
        ids(&out)
    }

    #[test]
    fn hand_made_front() {
        // GPUs vs p99 TTFT (ms):
        //   0: 4 GPUs, 900 ms   front (cheapest)
        //   1: 4 GPUs, 950 ms   dominated by 0 (same cost, slower)
        //   2: 8 GPUs, 300 ms   front
        //   3: 8 GPUs, 300 ms   front (exact tie with 2)
        //   4: 12 GPUs, 320 ms  dominated by 2
        //   5: 16 GPUs, 120 ms  front
        //   6: 24 GPUs, 120 ms  dominated by 5 (same latency, dearer)
        //   7: 32 GPUs, 100 ms  front (fastest)
        //   8: 2 GPUs, NaN      no result: excluded
        let pts = [
            c(0, 4.0, 900.0),
            c(1, 4.0, 950.0),
            c(2, 8.0, 300.0),
            c(3, 8.0, 300.0),
            c(4, 12.0, 320.0),
            c(5, 16.0, 120.0),
            c(6, 24.0, 120.0),
            c(7, 32.0, 100.0),
            c(8, 2.0, f64::NAN),
        ];
        assert_eq!(ids(&front(&pts)), [0, 2, 3, 5, 7]);
        assert_eq!(ids(&front(&pts)), brute(&pts));
        assert!(front(&[]).is_empty());
        assert_eq!(ids(&front(&[c(9, 1.0, 1.0)])), [9]);
    }

    #[test]
    fn agrees_with_brute_force_on_many_sets() {
        use rand::Rng;
        let mut r = crate::rng::stream(5, "pareto-test");
        for _ in 0..300 {
            let n = r.random_range(1..30);
            // Few distinct values, so ties on one or both coordinates are common.
            let pts: Vec<Candidate> = (0..n)
                .map(|i| c(i, r.random_range(0..6) as f64, r.random_range(0..6) as f64))
                .collect();
            assert_eq!(ids(&front(&pts)), brute(&pts), "{pts:?}");
        }
    }
}
