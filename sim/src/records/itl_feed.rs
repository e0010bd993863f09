//! The inter-token histogram (`records::itl`) filled beside the simulation.
//!
//! Every decode step adds one (gap, tokens) pair, millions in a run, and
//! filing each (the hot table, the gap log, its spills to disk) costs about
//! as much as simulating the step: a fifth of the Mooncake conversation
//! run's instructions. A run that writes its files already folds its
//! records on a worker thread (`records::stream`); the pairs go the same
//! way: the simulation appends them to a buffer and hands full buffers to a
//! thread that owns the histogram and files them in the order they came, so
//! the histogram, and every number read from it, is the same as filing
//! them in place, at any thread count. Without a worker (sweeps, which keep
//! every core busy with configurations, and tests) the pairs go straight
//! to the histogram.

use crate::records::batch_worker::BatchWorker;
use crate::records::ItlHistogram;
use crate::stats::Dist;
use crate::time::Nanos;

/// Pairs handed over at once (16 bytes each: 512 KiB): few enough that
/// memory stays bounded, many enough that a hand-over, which may wake the
/// worker (a system call), costs nothing per pair.
const PAIRS: usize = 1 << 15;

/// Full buffers that may wait for the worker (2 MiB). Raised with the
/// records queue (`records::stream`), for the same reason: a worker that
/// waits for a core should not stop the simulation. Not measured on its
/// own: the two channels' waits look alike in a profile.
const QUEUED: usize = 4;

/// Inter-token (gap, tokens) pairs on their way to the run's
/// [`ItlHistogram`], filed in place or on a worker thread
/// ([`ItlFeed::start_worker`]); see the module comment.
#[derive(Debug)]
pub struct ItlFeed {
    /// The histogram, when no worker holds it.
    hist: Option<ItlHistogram>,
    worker: Option<BatchWorker<(Nanos, u32), ItlHistogram, PAIRS>>,
}

impl Default for ItlFeed {
    fn default() -> Self {
        ItlFeed {
            hist: Some(ItlHistogram::default()),
            worker: None,
        }
    }
}

impl ItlFeed {
    /// Files the pairs on a worker thread from now on (a no-op when one
    /// runs already).
    pub fn start_worker(&mut self) -> std::io::Result<()> {
        let Some(hist) = self.hist.take() else {
            return Ok(());
        };
        // A thread that fails to start fails the run.
        self.worker = Some(BatchWorker::start(
            "servesim-itl",
            QUEUED,
            PAIRS,
            hist,
            |h, pairs, _| h.add_all(pairs),
        )?);
        Ok(())
    }

    /// Adds `w` tokens that waited `gap` (none: ignored, as the histogram
    /// ignores them).
    #[inline]
    pub fn add(&mut self, gap: Nanos, w: u32) {
        if let Some(h) = &mut self.hist {
            // In place, the histogram batches the pairs itself.
            return h.add(gap, w);
        }
        if w > 0 {
            if let Some(worker) = &mut self.worker {
                worker.push((gap, w));
            }
        }
    }

    /// Adds one iteration's pairs.
    #[inline]
    pub fn add_all(&mut self, pairs: &[(Nanos, u32)]) {
        for &(gap, w) in pairs {
            self.add(gap, w);
        }
    }

    /// Waits for the worker to file everything handed to it and takes the
    /// histogram back (a panic on the worker resumes here).
    fn join(&mut self) {
        if let Some(hist) = self.worker.take().as_mut().and_then(BatchWorker::finish) {
            self.hist = Some(hist);
        }
    }

    /// The distribution of every pair added (see [`ItlHistogram::dist`]);
    /// waits for the worker first.
    pub fn dist(&mut self) -> Dist {
        self.join();
        self.hist
            .as_mut()
            .map(ItlHistogram::dist)
            .unwrap_or_default()
    }

    /// The first error spilling gaps to disk (complete after [`Self::dist`]).
    pub fn error(&self) -> Option<&str> {
        self.hist.as_ref().and_then(ItlHistogram::error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(n: u64) -> impl Iterator<Item = (Nanos, u32)> {
        (0..n).map(|i| ((i * 7_919) % 50_000 * 1_000, (i % 5) as u32))
    }

    fn same(a: &Dist, b: &Dist) {
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_eq!(a.mean.to_bits(), b.mean.to_bits());
    }

    #[test]
    fn a_worker_files_what_filing_in_place_files() {
        // Several full buffers and a partial one, zero weights among them.
        let n = 3 * PAIRS as u64 + 1_234;
        let mut direct = ItlHistogram::default();
        let (mut here, mut there) = (ItlFeed::default(), ItlFeed::default());
        there.start_worker().expect("thread");
        for (g, w) in pairs(n) {
            direct.add(g, w);
            here.add(g, w);
            there.add_all(&[(g, w)]);
        }
        let want = direct.dist();
        assert!(want.count > 0);
        same(&here.dist(), &want);
        same(&there.dist(), &want);
        assert!(there.error().is_none());
    }

    #[test]
    fn a_worker_started_late_keeps_what_came_before() {
        let mut direct = ItlHistogram::default();
        let mut feed = ItlFeed::default();
        for (k, (g, w)) in pairs(2 * PAIRS as u64).enumerate() {
            if k == 100 {
                feed.start_worker().expect("thread");
            }
            direct.add(g, w);
            feed.add(g, w);
        }
        same(&feed.dist(), &direct.dist());
    }
}
