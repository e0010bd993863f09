//! `requests.csv`'s rows formatted and written on a thread of their own.
//!
//! Formatting a row (~35 numbers) and writing it cost about as much as
//! simulating the request on a large fleet, and none of it feeds back into
//! the run. So a run that writes the file where a second CPU can take the
//! work ([`pays`]) hands each
//! row's request over, in batches, to one writer thread that formats and
//! writes them in the order they came: the same bytes as in place, at any
//! thread count. The channel is bounded, so the simulation waits when the
//! writer falls that far behind and the rows in transit stay a few MiB.
//! This is the run's only helper thread; sweeps, capacity probes and plan
//! searches write no `requests.csv`, so their runs never start it.

use super::stream_file::StreamFile;
use crate::request::Request;
use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Rows handed over at once (~1.2 MB of requests): a hand-over may wake the
/// writer, a system call, so it comes once per batch rather than per row.
const BATCH: usize = 4096;

/// Full batches that may wait for the writer: rows come in bursts (a busy
/// fleet's iterations end many requests at once), and the simulation should
/// not wait for a writer that waits for a core.
const QUEUED: usize = 8;

/// Whether the writer thread can overlap the simulation: only where the
/// process may run on more than one CPU (`available_parallelism` counts the
/// affinity mask and a cgroup's CPU quota); on one, it would only add
/// switches. Asked once per process, as the answer reads cgroup files.
pub(super) fn pays() -> bool {
    static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAYS.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// How a row becomes bytes: the file and the columns it carries.
#[derive(Debug)]
pub(super) struct RowFile {
    /// The file; each row is formatted straight into its buffer.
    pub out: StreamFile,
    pub attribution: bool,
    pub disagg: bool,
    /// The fleet's region names (`origin_region`), when it has regions.
    pub regions: Vec<String>,
}

impl RowFile {
    /// Formats request `id`'s row and writes it once the buffer is full.
    pub fn row(&mut self, id: u64, r: &Request) -> io::Result<()> {
        let (attribution, disagg) = (self.attribution, self.disagg);
        super::request_row::push_request_row(
            self.out.buf(),
            id,
            r,
            attribution,
            disagg,
            &self.regions,
        );
        self.out.write_when_full()
    }
}

/// The simulation's side of a [`RowFile`] on the writer thread.
#[derive(Debug)]
pub(super) struct RowWriter {
    /// Rows not yet handed over.
    batch: Vec<(u64, Request)>,
    /// Full batches to the writer (`None` once closed).
    tx: Option<mpsc::SyncSender<Vec<(u64, Request)>>>,
    /// The writer; it returns the finished file's result.
    handle: Option<JoinHandle<io::Result<()>>>,
}

impl RowWriter {
    /// Starts the writer thread over `file`.
    pub fn start(mut file: RowFile) -> io::Result<RowWriter> {
        let (tx, rx) = mpsc::sync_channel::<Vec<(u64, Request)>>(QUEUED);
        let handle = std::thread::Builder::new()
            .name("servesim-writer".into())
            .spawn(move || {
                let mut first = Ok(());
                for batch in rx {
                    for (id, r) in &batch {
                        if first.is_ok() {
                            first = file.row(*id, r);
                        }
                    }
                }
                // Closed: everything was handed over (or the run stopped).
                first.and_then(|()| file.out.finish())
            })?;
        Ok(RowWriter {
            batch: Vec::with_capacity(BATCH),
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    /// Hands request `id`'s row over (its request copied).
    #[inline]
    pub fn row(&mut self, id: u64, r: &Request) {
        self.batch.push((id, r.clone()));
        if self.batch.len() >= BATCH {
            self.send();
        }
    }

    #[cold]
    fn send(&mut self) {
        let full = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        if let Some(tx) = &self.tx {
            // A send fails only if the writer died; `finish` reports why.
            let _ = tx.send(full);
        }
    }

    /// Hands over the rest and waits for the writer to write and sync the
    /// file (a panic on the writer resumes here).
    pub fn finish(&mut self) -> io::Result<()> {
        if !self.batch.is_empty() {
            self.send();
        }
        self.tx = None;
        match self.handle.take() {
            Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => Ok(()),
        }
    }
}

impl RowWriter {
    /// Stops the writer with what it has (a run that stopped early).
    pub fn stop(&mut self) {
        self.batch.clear();
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for RowWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::super::RequestsCsv;
    use crate::request::{Request, Status};
    use crate::time::SimTime;

    #[test]
    fn the_writer_writes_the_bytes_written_in_place() {
        // Several batches and a partial one.
        let n = 2 * super::BATCH as u64 + 77;
        let file = |writer: bool| {
            let dir = tempfile::tempdir().expect("dir");
            let regions = vec!["east".to_string(), "west".to_string()];
            let mut csv =
                RequestsCsv::create_with(dir.path(), true, false, regions, writer).expect("csv");
            for id in 0..n {
                let mut r = Request::new(SimTime(id * 1_000), 100 + id as u32 % 7, 5);
                r.replica = (id % 3) as u32;
                r.first_token = crate::time::Stamp::at(SimTime(id * 1_000 + 50));
                r.finished = crate::time::Stamp::at(SimTime(id * 1_000 + 900));
                r.generated = 5;
                r.status = Status::Completed;
                csv.row(id, &r).expect("row");
            }
            csv.finish(dir.path()).expect("written");
            std::fs::read(dir.path().join("requests.csv")).expect("read")
        };
        let here = file(false);
        assert_eq!(here.iter().filter(|&&c| c == b'\n').count() as u64, n + 1);
        assert_eq!(here, file(true));
    }
}
