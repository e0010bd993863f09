//! A long result file written as the run goes, past the page cache where
//! the file system allows it.
//!
//! `requests.csv` of a 10 M-request run is 2.2 GB that nothing reads back
//! before the run ends. Written through the page cache, each page is
//! allocated, zeroed, charged to the memory cgroup and copied into by the
//! kernel: on this project's 2-core machines `dd bs=4M` of 2.3 GB took
//! 7.5 s of system time, against 0.4 s (1.96 s of wall time) with
//! `oflag=direct`. That kernel time would run on the simulation's thread,
//! and its copies would sweep the simulation's cache. So on Linux the
//! file is opened with `O_DIRECT` (the Linux `open(2)` page: the buffer, the
//! length and the offset must be multiples of the block size), and whole
//! blocks are written from a block-aligned start of the buffer; the last
//! partial block goes through the page cache once `O_DIRECT` is cleared.
//!
//! Where the file system refuses direct I/O (tmpfs, some network and
//! overlay file systems: `EINVAL` at the open or at a write) the file is
//! written through the page cache, and its last sync waits for the disk.
//! The bytes are the same either way.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// The block size direct writes align to (a multiple of every logical
/// block size Linux disks use: 512 and 4,096 bytes).
const ALIGN: usize = 4096;

/// A file written in order from a buffer its writer appends to; see the
/// module comment.
#[derive(Debug)]
pub(crate) struct StreamFile {
    file: File,
    /// `buf[pad..]` holds the bytes not yet written; the `pad` bytes
    /// before them only put their start on an [`ALIGN`] boundary.
    buf: Vec<u8>,
    pad: usize,
    /// Writes bypass the page cache (`O_DIRECT` is set on `file`).
    direct: bool,
}

impl StreamFile {
    /// Bytes gathered before a direct write: large enough that the disk
    /// sees few requests, small against the run's memory.
    const DIRECT_AT: usize = 1 << 20;
    /// Bytes gathered before a buffered write.
    const BUFFERED_AT: usize = 1 << 16;
    /// Room past the threshold for the item that crosses it.
    const SLACK: usize = 1 << 16;

    /// Creates (truncates) `path`, bypassing the page cache when `direct`
    /// and the file system allows it.
    pub(crate) fn create(path: &Path, direct: bool) -> io::Result<StreamFile> {
        let (file, direct) = match direct.then(|| open_direct(path)).flatten() {
            Some(file) => (file, true),
            None => (File::create(path)?, false),
        };
        let mut out = StreamFile {
            file,
            buf: Vec::new(),
            pad: 0,
            direct,
        };
        out.realign();
        Ok(out)
    }

    /// Whether writes bypass the page cache.
    #[cfg(test)]
    pub(crate) fn is_direct(&self) -> bool {
        self.direct
    }

    /// The buffer to append the file's next bytes to (its first `pad`
    /// bytes are not the file's: append only).
    #[inline]
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Writes what the buffer holds once it passes the threshold.
    #[inline]
    pub(crate) fn write_when_full(&mut self) -> io::Result<()> {
        let at = if self.direct {
            Self::DIRECT_AT
        } else {
            Self::BUFFERED_AT
        };
        if self.buf.len() - self.pad < at {
            return Ok(());
        }
        self.write_out()
    }

    #[cold]
    fn write_out(&mut self) -> io::Result<()> {
        let len = self.buf.len() - self.pad;
        // Direct writes take whole blocks; the rest waits for more.
        let n = if self.direct {
            len / ALIGN * ALIGN
        } else {
            len
        };
        let res = self.write_range(n);
        // Dropped even when the write fails: the run reports the first
        // error, and its bytes are not kept.
        let (pad, end) = (self.pad, self.buf.len());
        self.buf.copy_within(pad + n..end, pad);
        self.buf.truncate(end - n);
        res
    }

    /// Writes the buffer's first `n` bytes (after `pad`); a direct write
    /// the file system refuses is done through the page cache instead.
    fn write_range(&mut self, n: usize) -> io::Result<()> {
        let mut done = 0;
        while done < n {
            if self.direct && (self.buf.as_ptr() as usize + self.pad + done) % ALIGN != 0 {
                // The buffer moved (an item larger than its slack) or a
                // short write left an unaligned start.
                self.set_buffered()?;
            }
            match self.file.write(&self.buf[self.pad + done..self.pad + n]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(k) => done += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EINVAL: this file system takes no direct writes.
                Err(e) if self.direct && e.kind() == io::ErrorKind::InvalidInput => {
                    self.set_buffered()?
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Goes on through the page cache (clears `O_DIRECT`).
    fn set_buffered(&mut self) -> io::Result<()> {
        clear_direct(&self.file)?;
        self.direct = false;
        Ok(())
    }

    /// A fresh buffer whose data starts on an [`ALIGN`] boundary, holding
    /// what the old one held.
    fn realign(&mut self) {
        let cap = Self::DIRECT_AT.max(Self::BUFFERED_AT) + Self::SLACK + 2 * ALIGN;
        let mut buf = Vec::with_capacity(cap);
        let pad = (ALIGN - buf.as_ptr() as usize % ALIGN) % ALIGN;
        buf.resize(pad, 0);
        buf.extend_from_slice(&self.buf[self.pad..]);
        self.buf = buf;
        self.pad = pad;
    }

    /// Writes the rest and syncs the file (its data and its length).
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        if self.direct {
            // Whole blocks directly, then the last partial one buffered.
            self.write_out()?;
            self.set_buffered()?;
        }
        let n = self.buf.len() - self.pad;
        self.write_range(n)?;
        self.buf.truncate(self.pad);
        self.file.sync_all()
    }
}

/// `path` created for direct writes, or `None` where the file system
/// refuses them (the caller opens it as usual).
#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_: &Path) -> Option<File> {
    None
}

#[cfg(target_os = "linux")]
fn clear_direct(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is the open descriptor `file` owns; F_GETFL and F_SETFL
    // only read and set its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn clear_direct(_: &File) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends `total` bytes of numbered lines in items of varied length,
    /// as rows come, and returns what was appended.
    fn fill(out: &mut StreamFile, total: usize) -> io::Result<Vec<u8>> {
        let mut want = Vec::new();
        let mut i = 0u64;
        while want.len() < total {
            let line = format!("{i},{}\n", "x".repeat((i * 7919 % 301) as usize));
            out.buf().extend_from_slice(line.as_bytes());
            want.extend_from_slice(line.as_bytes());
            out.write_when_full()?;
            i += 1;
        }
        Ok(want)
    }

    #[test]
    fn direct_and_buffered_files_hold_the_same_bytes() {
        let dir = tempfile::tempdir().expect("dir");
        // Past several direct writes, ending in a partial block.
        let total = 3 * StreamFile::DIRECT_AT + 12_345;
        for direct in [true, false] {
            let path = dir.path().join(format!("f-{direct}"));
            let mut out = StreamFile::create(&path, direct).expect("create");
            if !direct {
                assert!(!out.is_direct());
            }
            let want = fill(&mut out, total).expect("write");
            out.finish().expect("finish");
            assert_eq!(std::fs::read(&path).expect("read"), want, "direct {direct}");
        }
    }

    #[test]
    fn a_buffer_that_moved_goes_on_through_the_page_cache() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        let mut out = StreamFile::create(&path, true).expect("create");
        let mut want = fill(&mut out, 5_000).expect("write");
        // One item far past the buffer's slack: the buffer reallocates and
        // its data's start is no longer aligned.
        let big = vec![b'y'; 3 * StreamFile::DIRECT_AT];
        out.buf().extend_from_slice(&big);
        want.extend_from_slice(&big);
        out.write_when_full().expect("write");
        want.extend(fill(&mut out, 2 * StreamFile::DIRECT_AT).expect("write"));
        out.finish().expect("finish");
        assert_eq!(std::fs::read(&path).expect("read"), want);
    }

    #[test]
    fn an_empty_file_is_empty() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        let mut out = StreamFile::create(&path, true).expect("create");
        out.finish().expect("finish");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 0);
    }
}
