//! The request source read ahead on a thread of its own.
//!
//! Reading a trace (parsing a JSON line per request) and turning its block
//! hashes into the engine's (`kv::prefix_cache::engine_block_hashes`, ~750
//! per Mooncake request) cost about a seventh of a Mooncake conversation
//! run, all of it independent of the simulation. A run that writes its
//! files (and so already folds its records on a worker thread) reads its
//! source on another: the thread pulls requests in order, prepares each
//! (its hashes in engine blocks) and hands them over in batches, and the
//! simulation takes them in the same order. The source produces the same
//! requests as when pulled in place, so every file is the same.
//!
//! Only an open-loop source can be read ahead (a closed loop's next arrival
//! depends on the run), and only in a run without a duration horizon: the
//! run then pulls every request up to its request horizon, which the
//! thread is told, so the source reads exactly what it would have read in
//! place and its report (rows read, filtered, skipped) is the same.

use crate::workload::{RequestSource, RequestSpec, WorkloadError, WorkloadReport};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Most requests handed over at once (with [`QUEUED`], up to 16 Ki requests
/// read ahead).
const BATCH: usize = 4096;

/// Requests in the first batch; each next one is twice as large, up to
/// [`BATCH`], so that a small run (Vidur's 5,000 requests) starts
/// simulating after a few requests are read, not after most of its trace.
const FIRST_BATCH: usize = 128;

/// A batch is also handed over once its requests carry this many block
/// hashes (1 MiB: a Mooncake request with its engine hashes is ~6 KB, so
/// about 170 of them), which bounds the memory read ahead. (At 32 Ki
/// hashes, 40 Mooncake requests a batch, a one-core conversation run
/// switched threads 1,600 times instead of 1,250; at 128 Ki, 1,100.)
const BATCH_HASHES: usize = 1 << 17;

/// Full batches queued before the reader waits: enough that the simulation
/// does not catch up with a reader that waits for a core. With two batches
/// of 128 it did, and the two then took turns (the simulation waited for
/// the reader about a tenth of a 10 M-request fleet run). A reader that
/// waits on a full queue is woken by each batch taken, a system call on the
/// simulation's thread: batches of 512 made it 1,900 of the 3,200 the
/// thread made per million requests; batches of 4,096 from the first, 240.
const QUEUED: usize = 4;

/// A request source pulled on a thread; see the module comment.
pub struct ReadAhead {
    /// The batch being taken, in order.
    batch: std::vec::IntoIter<RequestSpec>,
    /// Batches from the reader (`None` once it has said it is done).
    rx: Option<mpsc::Receiver<Vec<RequestSpec>>>,
    /// The reader; it returns the source, to finish it here.
    handle: Option<JoinHandle<Box<dyn RequestSource>>>,
}

impl ReadAhead {
    /// Reads at most `limit` more requests of `source` on a thread, each
    /// passed through `prepare` there.
    pub fn start(
        mut source: Box<dyn RequestSource>,
        limit: u64,
        prepare: impl Fn(&mut RequestSpec) + Send + 'static,
    ) -> std::io::Result<ReadAhead> {
        let (tx, rx) = mpsc::sync_channel::<Vec<RequestSpec>>(QUEUED);
        let handle = std::thread::Builder::new()
            .name("servesim-source".into())
            .spawn(move || {
                let mut left = limit;
                let mut size = FIRST_BATCH;
                while left > 0 {
                    let n = size.min(usize::try_from(left).unwrap_or(size));
                    size = (2 * size).min(BATCH);
                    let mut batch = Vec::with_capacity(n);
                    let mut hashes = 0;
                    let mut exhausted = false;
                    while batch.len() < n && hashes < BATCH_HASHES {
                        let Some(mut spec) = source.next_request() else {
                            exhausted = true;
                            break;
                        };
                        prepare(&mut spec);
                        hashes += spec.prefix_hashes.len();
                        batch.push(spec);
                    }
                    left -= batch.len() as u64;
                    // The simulation stopped early (an error): stop reading.
                    if (!batch.is_empty() && tx.send(batch).is_err()) || exhausted {
                        break;
                    }
                }
                source
            })?;
        Ok(ReadAhead {
            batch: Vec::new().into_iter(),
            rx: Some(rx),
            handle: Some(handle),
        })
    }

    /// Stops the reader and takes the source back (a panic on the reader
    /// resumes here).
    fn join(&mut self) -> Option<Box<dyn RequestSource>> {
        // A reader blocked on a full queue sees the queue closed and stops.
        self.rx = None;
        match self.handle.take()?.join() {
            Ok(source) => Some(source),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl RequestSource for ReadAhead {
    fn next_request(&mut self) -> Option<RequestSpec> {
        loop {
            if let Some(spec) = self.batch.next() {
                return Some(spec);
            }
            match self.rx.as_ref()?.recv() {
                Ok(batch) => self.batch = batch.into_iter(),
                Err(_) => {
                    self.rx = None;
                    return None;
                }
            }
        }
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        match self.join() {
            Some(mut source) => source.finish(),
            None => Ok(None),
        }
    }

    fn open_loop(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests 0, 1, 2, … with a report counting what was read.
    struct Counting {
        next: u64,
        end: u64,
    }

    impl RequestSource for Counting {
        fn next_request(&mut self) -> Option<RequestSpec> {
            (self.next < self.end).then(|| {
                self.next += 1;
                RequestSpec {
                    arrival: crate::time::SimTime(self.next),
                    prompt_tokens: self.next as u32,
                    output_tokens: 1,
                    tenant: 0,
                    session: 0,
                    prefix_hashes: vec![],
                    hash_block_tokens: 16,
                    pinnable_tokens: 0,
                    samples: 0,
                    region: 0,
                }
            })
        }

        fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
            Ok(Some(WorkloadReport {
                users_left: Some(self.next),
                ..Default::default()
            }))
        }

        fn open_loop(&self) -> bool {
            true
        }
    }

    fn read_all(limit: u64, end: u64) -> (Vec<u32>, Option<u64>) {
        let src = Box::new(Counting { next: 0, end });
        let mut r = ReadAhead::start(src, limit, |s| s.output_tokens = 2).expect("thread");
        let mut got = Vec::new();
        while let Some(s) = r.next_request() {
            assert_eq!(s.output_tokens, 2, "prepared on the reader");
            got.push(s.prompt_tokens);
        }
        let read = r.finish().expect("finish").and_then(|w| w.users_left);
        (got, read)
    }

    #[test]
    fn requests_come_in_order_and_the_source_reads_no_further_than_the_limit() {
        let n = 3 * BATCH as u64 + 5;
        let (got, read) = read_all(n - 2, n);
        assert_eq!(got, (1..=(n - 2) as u32).collect::<Vec<_>>());
        assert_eq!(read, Some(n - 2), "read past the horizon");
        let (got, read) = read_all(u64::MAX, n);
        assert_eq!(got.len() as u64, n);
        assert_eq!(read, Some(n));
        assert_eq!(read_all(0, n), (vec![], Some(0)));
    }

    #[test]
    fn finishing_early_stops_a_reader_that_is_ahead() {
        let src = Box::new(Counting {
            next: 0,
            end: u64::MAX,
        });
        let mut r = ReadAhead::start(src, u64::MAX, |_| {}).expect("thread");
        assert_eq!(r.next_request().map(|s| s.prompt_tokens), Some(1));
        let read = r.finish().expect("finish").and_then(|w| w.users_left);
        // At most the batch taken, the queued ones and the one being filled.
        assert!(
            read.is_some_and(|n| n <= ((QUEUED + 2) * BATCH) as u64),
            "{read:?}"
        );
    }

    #[test]
    fn requests_with_many_hashes_come_in_smaller_batches() {
        let src = Box::new(Counting {
            next: 0,
            end: u64::MAX,
        });
        // 4,096 hashes each (32 KiB): 32 to a batch.
        let per_batch = (BATCH_HASHES / 4_096) as u64;
        let mut r =
            ReadAhead::start(src, u64::MAX, |s| s.prefix_hashes = vec![7; 4_096]).expect("thread");
        assert_eq!(r.next_request().map(|s| s.prefix_hashes.len()), Some(4_096));
        // Time for the reader to fill the queue and wait.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let read = r.finish().expect("finish").and_then(|w| w.users_left);
        let read = read.expect("counted");
        assert!(
            read >= QUEUED as u64 * per_batch,
            "the reader stopped early: {read}"
        );
        assert!(read <= (QUEUED as u64 + 2) * per_batch, "read {read} ahead");
    }
}
