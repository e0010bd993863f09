//! A state folded on a worker thread from items the simulation hands over
//! in order, in batches (`records::stream`'s ended requests,
//! `records::itl_feed`'s inter-token gaps).
//!
//! The simulation fills a batch; a full one goes over a bounded channel (the
//! simulation waits when the worker falls that far behind, so memory stays
//! bounded) and comes back empty for reuse, so no batch is allocated after
//! the first few. The channel must hold more than the worker's bursts: the
//! record stream's worker emits every request a long one held back at once
//! (`records::stream`), and a channel of two batches then stopped the
//! simulation for up to 60 ms at a time, about a fifth of a 10 M-request
//! run. The worker folds the batches in the order they were sent, so its
//! state is the one folding in place would give, at any thread count. The
//! last batch comes marked, so a fold can start the work that waits for the
//! last item while it folds that batch.

use std::sync::mpsc;
use std::thread::JoinHandle;

/// The simulation's side of a state `S` folded from items `T` on a worker
/// thread, at most `N` items a batch; see the module comment.
pub(crate) struct BatchWorker<T, S, const N: usize> {
    /// Items not yet handed over, in the order they came.
    batch: Vec<T>,
    /// Items a batch (1 to `N`): what the worker has left to fold after the
    /// last item comes is at most one batch, so a small run hands over
    /// smaller ones.
    size: usize,
    /// Full batches to the worker, the last one marked (`None` once
    /// closed).
    tx: Option<mpsc::SyncSender<(Vec<T>, bool)>>,
    /// Batches the worker has emptied, for reuse.
    empties: mpsc::Receiver<Vec<T>>,
    /// The worker; it returns the state it folded into.
    handle: Option<JoinHandle<S>>,
}

impl<T: Send + 'static, S: Send + 'static, const N: usize> BatchWorker<T, S, N> {
    /// Starts thread `name`, which folds every batch of `size` items (at
    /// most `N`) into `state` with `fold` (which may leave the batch as it
    /// likes: it is cleared after; its flag marks the last batch, empty or
    /// not, that [`Self::finish`] hands over); the simulation waits once
    /// `queued` full batches wait for the worker.
    pub(crate) fn start(
        name: &str,
        queued: usize,
        size: usize,
        mut state: S,
        mut fold: impl FnMut(&mut S, &mut Vec<T>, bool) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::sync_channel::<(Vec<T>, bool)>(queued);
        let (back, empties) = mpsc::channel::<Vec<T>>();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                for (mut batch, last) in rx {
                    fold(&mut state, &mut batch, last);
                    batch.clear();
                    // The simulation may have finished already.
                    let _ = back.send(batch);
                }
                state
            })?;
        let size = size.clamp(1, N);
        Ok(BatchWorker {
            batch: Vec::with_capacity(size),
            size,
            tx: Some(tx),
            empties,
            handle: Some(handle),
        })
    }

    /// Adds `item`, handing the batch over when it is full.
    #[inline]
    pub(crate) fn push(&mut self, item: T) {
        self.batch.push(item);
        if self.batch.len() >= self.size {
            self.send(false);
        }
    }

    /// Hands the batch over (a no-op when empty, unless `last`).
    #[cold]
    fn send(&mut self, last: bool) {
        if self.batch.is_empty() && !last {
            return;
        }
        let fresh = self
            .empties
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(self.size));
        let full = std::mem::replace(&mut self.batch, fresh);
        if let Some(tx) = &self.tx {
            // A send fails only if the worker died; `finish` reports why.
            let _ = tx.send((full, last));
        }
    }

    /// Hands over what is left, closes the hand-over and waits for the
    /// worker's state (a panic on the worker resumes here); `None` once
    /// taken.
    pub(crate) fn finish(&mut self) -> Option<S> {
        if self.handle.is_some() {
            self.send(true);
        }
        self.tx = None;
        match self.handle.take()?.join() {
            Ok(state) => Some(state),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl<T, S, const N: usize> Drop for BatchWorker<T, S, N> {
    /// A run that stopped early (a guard, an error): the worker ends with
    /// what it has.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl<T, S, const N: usize> std::fmt::Debug for BatchWorker<T, S, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchWorker")
            .field("pending", &self.batch.len())
            .field("size", &self.size)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_every_item_in_order_across_batches() {
        // 98 items in batches of 7: 14 full ones, then an empty last one.
        // Batches of 3 under the same cap of 7: 33 (the last one partial).
        for (n, size) in [(100, 7), (98, 7), (98, 3), (99, 3), (5, 100)] {
            let fold = |s: &mut (Vec<u32>, Vec<usize>, Vec<bool>), b: &mut Vec<u32>, last| {
                s.1.push(b.len());
                s.0.append(b);
                s.2.push(last);
            };
            let mut w = BatchWorker::<_, _, 7>::start("test", 2, size, Default::default(), fold)
                .expect("thread");
            for i in 0..n {
                w.push(i);
            }
            let (items, lens, last) = w.finish().expect("state");
            assert_eq!(items, (0..n).collect::<Vec<_>>());
            let size = size.min(7);
            let full = n as usize / size;
            assert!(lens[..full].iter().all(|&l| l == size), "{lens:?}");
            assert_eq!(lens[full..], [n as usize % size], "{lens:?}");
            // Only the last batch is marked, and it always comes.
            assert_eq!(last.len(), full + 1);
            assert!(last[..last.len() - 1].iter().all(|&l| !l) && last[last.len() - 1]);
            assert_eq!(w.finish(), None);
        }
    }

    #[test]
    #[should_panic(expected = "fold failed")]
    fn a_panic_on_the_worker_resumes_at_finish() {
        let mut w =
            BatchWorker::<_, _, 2>::start("test", 2, 2, (), |_: &mut (), _: &mut Vec<u32>, _| {
                panic!("fold failed")
            })
            .expect("thread");
        w.push(1);
        w.push(2);
        w.finish();
    }
}
