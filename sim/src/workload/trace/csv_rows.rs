//! The CSV engine under the CSV formats: streams records with the `csv`
//! crate (CRLF or LF, quoted fields, no newline after the last row), finds
//! columns by header name, and parses the standard fields of a [`Row`].

use super::lines::LineBounded;
use super::timefmt::{self, time_expected_for};
use super::{text_id, Row, RowError, RowOutcome, RowReader};
use crate::scenario::TimeUnit;
use crate::workload::{prefix, Context, WorkloadError};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// A CSV file read record by record into one reused buffer.
pub struct CsvRows {
    rdr: csv::Reader<BufReader<LineBounded<File>>>,
    rec: csv::ByteRecord,
    headers: Vec<String>,
    file: String,
}

/// Opens `path` or reports it against the scenario key `key`; its lines
/// are bounded ([`LineBounded`]).
pub fn open_file(
    path: &Path,
    key: &str,
    ctx: &Context,
) -> Result<LineBounded<File>, WorkloadError> {
    File::open(path).map(LineBounded::new).map_err(|e| {
        ctx.config_error(
            &format!("{key}.path"),
            format!("cannot open {}: {e}", path.display()),
        )
    })
}

impl CsvRows {
    pub fn open(
        path: &Path,
        key: &str,
        ctx: &Context,
        has_headers: bool,
    ) -> Result<CsvRows, WorkloadError> {
        let f = open_file(path, key, ctx)?;
        let file = path.display().to_string();
        // Records end at LF; a CR before it is trimmed with the field. (The
        // default CRLF terminator makes the crate report CRLF files' line
        // numbers one too low.)
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(has_headers)
            .terminator(csv::Terminator::Any(b'\n'))
            .flexible(true)
            .buffer_capacity(1 << 16)
            .from_reader(BufReader::with_capacity(1 << 16, f));
        let mut headers = Vec::new();
        if has_headers {
            let h = rdr.byte_headers().map_err(|e| WorkloadError::Data {
                file: file.clone(),
                line: Some(1),
                message: format!("cannot read the header: {e}"),
            })?;
            headers = h
                .iter()
                .map(|c| {
                    String::from_utf8_lossy(c)
                        .trim()
                        .trim_start_matches('\u{feff}')
                        .to_string()
                })
                .collect();
        }
        Ok(CsvRows {
            rdr,
            rec: csv::ByteRecord::new(),
            headers,
            file,
        })
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    /// The index of header column `name`.
    pub fn column(&self, name: &str) -> Result<usize, WorkloadError> {
        self.headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| WorkloadError::Data {
                file: self.file.clone(),
                line: Some(1),
                message: format!(
                    "no column {name:?} in the header (found: {})",
                    if self.headers.iter().all(String::is_empty) {
                        "nothing: is the file empty?".to_string()
                    } else {
                        self.headers.join(", ")
                    }
                ),
            })
    }

    /// Whether the header has column `name`.
    pub fn has_column(&self, name: &str) -> bool {
        self.headers.iter().any(|h| h == name)
    }

    /// Reads the next record (blank lines are skipped); `false` at the end.
    pub fn next(&mut self) -> Result<bool, RowError> {
        loop {
            match self.rdr.read_byte_record(&mut self.rec) {
                Ok(false) => return Ok(false),
                Ok(true) => {
                    if self.rec.len() == 1 && self.rec[0].trim_ascii().is_empty() {
                        continue;
                    }
                    return Ok(true);
                }
                Err(e) => {
                    let line = e.position().map_or(0, |p| p.line());
                    let fatal = matches!(e.kind(), csv::ErrorKind::Io(_));
                    return Err(RowError {
                        line,
                        message: e.to_string(),
                        fatal,
                    });
                }
            }
        }
    }

    /// Line of the current record.
    pub fn line(&self) -> u64 {
        self.rec.position().map_or(0, |p| p.line())
    }

    /// Field `i` of the current record, named `name` in errors.
    pub fn get(&self, i: usize, name: &str) -> Result<&[u8], RowError> {
        self.rec.get(i).ok_or_else(|| {
            RowError::new(
                self.line(),
                format!(
                    "has {} fields, no column {name:?} (field {})",
                    self.rec.len(),
                    i + 1
                ),
            )
        })
    }

    pub fn count(&self, i: usize, name: &str) -> Result<u64, RowError> {
        let f = self.get(i, name)?;
        timefmt::count(f)
            .ok_or_else(|| RowError::field(self.line(), name, "a whole number of tokens", f))
    }

    pub fn time(&self, i: usize, name: &str, unit: TimeUnit) -> Result<i64, RowError> {
        let f = self.get(i, name)?;
        timefmt::time_ns(f, unit)
            .ok_or_else(|| RowError::field(self.line(), name, time_expected_for(unit, f), f))
    }
}

/// A column of a CSV trace: its index and header name.
#[derive(Clone, Debug)]
pub struct Col {
    pub i: usize,
    pub name: String,
}

/// The standard columns of a CSV trace.
pub struct CsvTrace {
    pub csv: CsvRows,
    time: Col,
    unit: TimeUnit,
    prompt: Col,
    output: Col,
    session: Option<Col>,
    /// Hash-id column and its block size.
    hashes: Option<(Col, u32)>,
    tenant: Option<Col>,
}

/// Which header names hold the standard fields.
pub struct CsvNames<'a> {
    pub time: &'a str,
    pub unit: TimeUnit,
    pub prompt: &'a str,
    pub output: &'a str,
    pub session: Option<&'a str>,
    pub hashes: Option<(&'a str, u32)>,
    pub tenant: Option<&'a str>,
}

impl CsvTrace {
    pub fn open(
        path: &Path,
        key: &str,
        ctx: &Context,
        n: &CsvNames,
    ) -> Result<CsvTrace, WorkloadError> {
        let csv = CsvRows::open(path, key, ctx, true)?;
        let col = |name: &str| -> Result<Col, WorkloadError> {
            Ok(Col {
                i: csv.column(name)?,
                name: name.to_string(),
            })
        };
        Ok(CsvTrace {
            time: col(n.time)?,
            unit: n.unit,
            prompt: col(n.prompt)?,
            output: col(n.output)?,
            session: n.session.map(col).transpose()?,
            hashes: n.hashes.map(|(h, b)| col(h).map(|c| (c, b))).transpose()?,
            tenant: n.tenant.map(col).transpose()?,
            csv,
        })
    }

    /// Reads the next record into `row`; `false` at the end.
    pub fn read(&mut self, row: &mut Row) -> Result<bool, RowError> {
        if !self.csv.next()? {
            return Ok(false);
        }
        row.reset(self.csv.line());
        row.time_ns = self.csv.time(self.time.i, &self.time.name, self.unit)?;
        row.prompt = self.csv.count(self.prompt.i, &self.prompt.name)?;
        row.output = self.csv.count(self.output.i, &self.output.name)?;
        if let Some(c) = &self.session {
            row.session = text_id(self.csv.get(c.i, &c.name)?.trim_ascii());
        }
        if let Some((c, block)) = &self.hashes {
            let f = self.csv.get(c.i, &c.name)?;
            parse_hash_list(f, &mut row.hashes).ok_or_else(|| {
                RowError::field(
                    self.csv.line(),
                    &c.name,
                    "hash ids (integers separated by spaces or ';')",
                    f,
                )
            })?;
            prefix::chain_in_place(&mut row.hashes);
            row.block_tokens = *block;
        }
        if let Some(c) = &self.tenant {
            let f = self.csv.get(c.i, &c.name)?.trim_ascii();
            row.set_tenant(f);
        }
        Ok(true)
    }
}

/// Integers separated by spaces, commas or semicolons, optionally in
/// brackets (`[1, 2, 3]`, `1;2;3`).
fn parse_hash_list(f: &[u8], out: &mut Vec<u64>) -> Option<()> {
    let f = f.trim_ascii();
    let f = f.strip_prefix(b"[").unwrap_or(f);
    let f = f.strip_suffix(b"]").unwrap_or(f);
    for part in f.split(|c| matches!(c, b' ' | b',' | b';' | b'\t')) {
        if part.is_empty() {
            continue;
        }
        out.push(timefmt::count(part)?);
    }
    Some(())
}

/// Formats whose rows are exactly the standard columns read straight
/// through this reader: no per-format wrapper needed.
impl RowReader for CsvTrace {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        Ok(if self.read(row)? {
            RowOutcome::Row
        } else {
            RowOutcome::End
        })
    }

    fn file(&self) -> &str {
        self.csv.file()
    }
}
