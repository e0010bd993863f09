//! The line reader under the JSON-lines formats: one reused buffer, line
//! numbers for errors, LF or CRLF, a leading byte-order mark and blank lines
//! skipped. Under it and under the CSV reader, [`LineBounded`] stops a line
//! that never ends (a binary file, `/dev/zero`) before it fills memory.

use super::csv_rows::open_file;
use super::RowError;
use crate::workload::{Context, WorkloadError};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Longest line a trace file may have, bytes. A real trace's longest line
/// is a prompt's block hashes or text (a 10⁷-token prompt's hashes are
/// ~200 KB); a line beyond this is a file that is not lines of text.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// A reader that fails with [`std::io::ErrorKind::InvalidData`] once a line
/// runs past its limit, so that every reader above it (which buffers one
/// line or record) holds at most that much.
pub struct LineBounded<R> {
    inner: R,
    limit: usize,
    /// Bytes since the last line break.
    run: usize,
    /// Line breaks seen.
    lines: u64,
}

impl<R: Read> LineBounded<R> {
    pub fn new(inner: R) -> LineBounded<R> {
        Self::with_limit(inner, MAX_LINE_BYTES)
    }

    pub fn with_limit(inner: R, limit: usize) -> LineBounded<R> {
        LineBounded {
            inner,
            limit,
            run: 0,
            lines: 0,
        }
    }
}

impl<R: Read> Read for LineBounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.run > self.limit {
            return Err(self.too_long());
        }
        let n = self.inner.read(buf)?;
        let got = &buf[..n];
        match got.iter().rposition(|&b| b == b'\n') {
            Some(i) => {
                self.lines += got.iter().filter(|&&b| b == b'\n').count() as u64;
                self.run = n - i - 1;
            }
            None => self.run += n,
        }
        if self.run > self.limit {
            return Err(self.too_long());
        }
        Ok(n)
    }
}

impl<R> LineBounded<R> {
    fn too_long(&self) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "line {} is longer than {} MiB without a line break: not a trace of text lines \
                 (a binary file, or the wrong --format?)",
                self.lines + 1,
                self.limit >> 20
            ),
        )
    }
}

pub struct Lines {
    r: BufReader<LineBounded<File>>,
    buf: Vec<u8>,
    line: u64,
    file: String,
}

impl Lines {
    pub fn open(path: &Path, key: &str, ctx: &Context) -> Result<Lines, WorkloadError> {
        Ok(Lines {
            r: BufReader::with_capacity(1 << 16, open_file(path, key, ctx)?),
            buf: Vec::with_capacity(4096),
            line: 0,
            file: path.display().to_string(),
        })
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    /// The next non-blank line and its number; `None` at the end.
    pub fn next(&mut self) -> Result<Option<(u64, &[u8])>, RowError> {
        loop {
            self.buf.clear();
            let n = self
                .r
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| RowError {
                    line: self.line + 1,
                    message: format!("cannot read: {e}"),
                    fatal: true,
                })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            // A UTF-8 byte-order mark (editors on Windows write one) is not
            // part of the first record, as the CSV reader also ignores it.
            if self.line == 1 && self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
            if !self.buf.trim_ascii().is_empty() {
                break;
            }
        }
        Ok(Some((self.line, self.buf.trim_ascii())))
    }
}

#[cfg(test)]
mod tests {
    use super::LineBounded;
    use std::io::{BufRead, BufReader, Read};

    #[test]
    fn a_line_past_the_limit_is_an_error_naming_it() {
        let text = b"short\nalso short\n0123456789abcdef0123\nnext\n";
        let mut r = BufReader::with_capacity(4, LineBounded::with_limit(&text[..], 1 << 20));
        let mut lines = Vec::new();
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).unwrap() > 0 {
            lines.push(String::from_utf8(std::mem::take(&mut buf)).unwrap());
        }
        assert_eq!(lines.len(), 4);
        let mut small = LineBounded::with_limit(&text[..], 12);
        let mut all = Vec::new();
        let e = small.read_to_end(&mut all).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("line 3"), "{e}");
        // An endless line (`/dev/zero`) stops at the limit.
        let mut zeros = LineBounded::with_limit(std::io::repeat(0), 1 << 16);
        let mut sink = Vec::new();
        let e = (&mut zeros)
            .take(1 << 20)
            .read_to_end(&mut sink)
            .unwrap_err();
        assert!(e.to_string().contains("line 1 is longer"), "{e}");
        assert!(sink.len() <= (1 << 16) + 8192, "{}", sink.len());
    }
}
