//! Rows held back for id order (`records::stream`) past a memory limit, on
//! disk in runs sorted by id.
//!
//! The reorder buffer holds every request that ended while an earlier one
//! was still running: on the 1,000-replica fleet of docs/performance.md
//! that is over a million packed rows at once, its largest memory. When
//! the rows held in memory pass a limit, the stream
//! writes them all, in id order, as a run in an anonymous temporary file
//! of its own and frees them; rows held later go to memory as before.
//! Each run is sorted, so the row with the least id on disk is the least
//! of the runs' first rows, and the stream takes it when its id comes up.
//! This is the merge of an external sort (Knuth, TAOCP vol. 3, 5.4.1),
//! with the open runs scanned for their least: a run is written only when
//! the limit's worth of rows is held, so few are open at once (the 10 M
//! fleet wrote 36 runs of about 275,000 rows, at most 5 open at once).
//!
//! A row on disk is its id, its status code and its packed bytes
//! (`Packed::put_on_disk`); its read-back gives the same record.

use crate::records::packed::Packed;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;

/// Bytes read from a run at a time.
const READ: usize = 1 << 14;

/// Bytes gathered before a write to a run.
const WRITE: usize = 1 << 18;

/// Bytes before a row's packed bytes: id (8), status (1), length (4).
const HEADER: usize = 13;

/// Runs of held rows on disk; see the module comment.
#[derive(Debug, Default)]
pub struct HeldRuns {
    runs: Vec<Run>,
    /// Rows on disk not yet taken.
    rows: usize,
    /// The least id on disk.
    least: Option<u64>,
    /// Runs written so far.
    #[cfg(test)]
    written: usize,
}

/// One run being read back, in a temporary file of its own (removed by the
/// system once the run is read and dropped, so the disk it takes follows
/// the rows held, not the run's length).
#[derive(Debug)]
struct Run {
    file: File,
    /// Where the unread rest of the run starts in the file.
    at: u64,
    /// Bytes of the run not yet read from the file.
    left: u64,
    /// Bytes read, from `pos` on not yet taken.
    buf: Vec<u8>,
    pos: usize,
}

impl Run {
    /// Makes `buf[pos..]` hold `n` bytes if the run has them; `false` at
    /// the run's end.
    fn fill(&mut self, n: usize) -> io::Result<bool> {
        let have = self.buf.len() - self.pos;
        if have >= n {
            return Ok(true);
        }
        if have as u64 + self.left < n as u64 {
            return Ok(false);
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
        let want = (n - have).max(READ).min(self.left as usize);
        let start = self.buf.len();
        self.buf.resize(start + want, 0);
        self.file.read_exact_at(&mut self.buf[start..], self.at)?;
        self.at += want as u64;
        self.left -= want as u64;
        Ok(true)
    }

    /// The id of the run's next row (`None`: the run is read).
    fn head(&mut self) -> io::Result<Option<u64>> {
        if !self.fill(8)? {
            return Ok(None);
        }
        let id = &self.buf[self.pos..self.pos + 8];
        Ok(Some(u64::from_le_bytes(id.try_into().expect("8 bytes"))))
    }

    /// Takes the next row (its header was read by `head`).
    fn take(&mut self) -> io::Result<(u64, Packed)> {
        if !self.fill(HEADER)? {
            return Err(io::Error::other("a held row's header is cut short"));
        }
        let at = self.pos;
        let id = u64::from_le_bytes(self.buf[at..at + 8].try_into().expect("8 bytes"));
        let status = self.buf[at + 8];
        let len = u32::from_le_bytes(self.buf[at + 9..at + HEADER].try_into().expect("4 bytes"));
        let len = len as usize;
        if !self.fill(HEADER + len)? {
            return Err(io::Error::other("a held row is cut short"));
        }
        let at = self.pos;
        let packed = Packed::from_disk(status, &self.buf[at + HEADER..at + HEADER + len])
            .ok_or_else(|| io::Error::other(format!("a held row has status code {status}")))?;
        self.pos += HEADER + len;
        Ok((id, packed))
    }
}

impl HeldRuns {
    /// Rows on disk not yet taken.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The least id on disk, if any.
    #[inline]
    pub fn least(&self) -> Option<u64> {
        self.least
    }

    /// Runs not yet read to their end.
    #[cfg(test)]
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Runs written so far.
    #[cfg(test)]
    pub fn written(&self) -> usize {
        self.written
    }

    /// Writes `rows` (in increasing id order; those that may not go to
    /// disk are skipped, `Packed::goes_to_disk`) as a run, and gives how
    /// many it wrote. On an error nothing is kept; with no row to write,
    /// no file is made.
    pub fn write_run<'a>(
        &mut self,
        rows: impl Iterator<Item = (u64, &'a Packed)>,
    ) -> io::Result<usize> {
        let mut out: Option<BufWriter<File>> = None;
        let mut row = Vec::new();
        let (mut n, mut len) = (0, 0u64);
        for (id, p) in rows {
            row.clear();
            if p.put_on_disk(id, &mut row) {
                let w = match &mut out {
                    Some(w) => w,
                    None => out.insert(BufWriter::with_capacity(WRITE, tempfile::tempfile()?)),
                };
                w.write_all(&row)?;
                n += 1;
                len += row.len() as u64;
            }
        }
        let Some(out) = out else {
            return Ok(0);
        };
        let file = out.into_inner().map_err(|e| e.into_error())?;
        let mut run = Run {
            file,
            at: 0,
            left: len,
            buf: Vec::new(),
            pos: 0,
        };
        let head = run.head()?.expect("a run of at least one row");
        self.runs.push(run);
        #[cfg(test)]
        {
            self.written += 1;
        }
        self.rows += n;
        self.least = Some(self.least.map_or(head, |l| l.min(head)));
        Ok(n)
    }

    /// Takes the row with the least id (there must be one).
    pub fn take_least(&mut self) -> io::Result<(u64, Packed)> {
        let least = self.least.expect("rows on disk");
        let mut row = None;
        let mut next: Option<u64> = None;
        let mut k = 0;
        // One pass: take the least, and find the next least among the
        // heads after it; a run read to its end is dropped.
        while k < self.runs.len() {
            let run = &mut self.runs[k];
            let mut head = run.head()?;
            if row.is_none() && head == Some(least) {
                row = Some(run.take()?);
                head = run.head()?;
            }
            match head {
                Some(id) => {
                    next = Some(next.map_or(id, |n| n.min(id)));
                    k += 1;
                }
                None => {
                    self.runs.swap_remove(k);
                }
            }
        }
        let row = row.expect("the least id is a run's head");
        self.rows -= 1;
        self.least = next;
        Ok(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Request, Status};
    use crate::time::SimTime;

    fn row(id: u64) -> Packed {
        let mut r = Request::new(SimTime(id * 1_000), 100 + id as u32 % 9, 5);
        r.status = Status::Completed;
        r.generated = 5;
        Packed::pack(&mut r, &mut Vec::new())
    }

    fn run(runs: &mut HeldRuns, ids: &[u64]) {
        let rows: Vec<Packed> = ids.iter().map(|&id| row(id)).collect();
        let n = runs
            .write_run(ids.iter().copied().zip(&rows))
            .expect("written");
        assert_eq!(n, ids.len());
    }

    #[test]
    fn runs_give_their_rows_back_least_id_first() {
        let mut runs = HeldRuns::default();
        // Interleaved runs; one long enough to be read in several pieces.
        let long: Vec<u64> = (0..3_000).map(|k| 10 + 3 * k).collect();
        run(&mut runs, &long);
        run(&mut runs, &[11, 12, 14, 5_000]);
        run(&mut runs, &[4, 13]);
        assert_eq!(
            (runs.rows(), runs.runs(), runs.least()),
            (3_006, 3, Some(4))
        );
        let mut want: Vec<u64> = long.clone();
        want.extend([11, 12, 14, 5_000, 4, 13]);
        want.sort_unstable();
        let mut got = Vec::new();
        while runs.least().is_some() {
            let (id, p) = runs.take_least().expect("read");
            assert_eq!(
                format!("{:?}", p.unpack()),
                format!("{:?}", row(id).unpack())
            );
            got.push(id);
        }
        assert_eq!(got, want);
        // Each run is dropped once read: no file is kept.
        assert_eq!((runs.rows(), runs.runs()), (0, 0));
    }

    #[test]
    fn an_empty_run_is_not_kept() {
        let mut runs = HeldRuns::default();
        assert_eq!(
            runs.write_run(std::iter::empty())
                .expect("nothing to write"),
            0
        );
        assert_eq!((runs.rows(), runs.runs(), runs.least()), (0, 0, None));
    }
}
