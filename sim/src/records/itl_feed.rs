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

use crate::metrics::Dist;
use crate::records::ItlHistogram;
use crate::time::Nanos;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Pairs handed over at once (16 bytes each: 128 KiB): few enough that
/// memory stays bounded, many enough that a hand-over costs nothing per
/// pair.
const PAIRS: usize = 1 << 13;

/// Full buffers queued for the worker before the simulation waits for it.
const QUEUED: usize = 2;

type Pairs = Vec<(Nanos, u32)>;

/// The simulation's side of a histogram filled on a worker thread.
#[derive(Debug)]
struct Worker {
    /// Full buffers to the worker (`None` once closed).
    tx: Option<mpsc::SyncSender<Pairs>>,
    /// Buffers the worker has emptied, for reuse.
    empties: mpsc::Receiver<Pairs>,
    /// The worker; it returns the histogram it filled.
    handle: Option<JoinHandle<ItlHistogram>>,
}

/// Inter-token (gap, tokens) pairs on their way to the run's
/// [`ItlHistogram`], filed in place or on a worker thread
/// ([`ItlFeed::start_worker`]); see the module comment.
#[derive(Debug)]
pub struct ItlFeed {
    /// Pairs not yet handed over, in the order they came.
    buf: Pairs,
    /// The histogram, when no worker holds it.
    hist: Option<ItlHistogram>,
    worker: Option<Worker>,
}

impl Default for ItlFeed {
    fn default() -> Self {
        ItlFeed {
            buf: Vec::new(),
            hist: Some(ItlHistogram::default()),
            worker: None,
        }
    }
}

impl ItlFeed {
    /// Files the pairs on a worker thread from now on (a no-op when one
    /// runs already).
    pub fn start_worker(&mut self) -> std::io::Result<()> {
        let Some(mut hist) = self.hist.take() else {
            return Ok(());
        };
        self.buf.reserve_exact(PAIRS);
        let (tx, rx) = mpsc::sync_channel::<Pairs>(QUEUED);
        let (back, empties) = mpsc::channel::<Pairs>();
        let handle = std::thread::Builder::new()
            .name("servesim-itl".into())
            .spawn(move || {
                for mut pairs in rx {
                    hist.add_all(&pairs);
                    pairs.clear();
                    // The simulation may have finished already.
                    let _ = back.send(pairs);
                }
                hist
            })?;
        self.worker = Some(Worker {
            tx: Some(tx),
            empties,
            handle: Some(handle),
        });
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
            self.buf.push((gap, w));
            if self.buf.len() >= PAIRS {
                self.hand_over();
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

    /// Hands the full buffer to the worker.
    #[cold]
    fn hand_over(&mut self) {
        let Some(w) = &mut self.worker else {
            return;
        };
        let fresh = w
            .empties
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(PAIRS));
        let full = std::mem::replace(&mut self.buf, fresh);
        if let Some(tx) = &w.tx {
            // A send fails only if the worker died; `join` reports why.
            let _ = tx.send(full);
        }
    }

    /// Waits for the worker to file everything handed to it and takes the
    /// histogram back (a panic on the worker resumes here).
    fn join(&mut self) {
        if let Some(mut w) = self.worker.take() {
            if let Some(tx) = w.tx.take() {
                let _ = tx.send(std::mem::take(&mut self.buf));
            }
            if let Some(h) = w.handle.take() {
                match h.join() {
                    Ok(hist) => self.hist = Some(hist),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
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
