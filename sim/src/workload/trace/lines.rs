//! The line reader under the JSON-lines formats: one reused buffer, line
//! numbers for errors, LF or CRLF, a leading byte-order mark and blank lines
//! skipped.

use super::csv_rows::open_file;
use super::RowError;
use crate::workload::{Context, WorkloadError};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

pub struct Lines {
    r: BufReader<File>,
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
