//! The JSON-lines engine under the JSONL formats: each line is parsed by a
//! serde visitor that keeps only the wanted keys (no per-line allocation
//! beyond the request's own hash list) and skips the rest, then the
//! standard fields of a [`Row`] are filled.

use super::lines::Lines;
use super::timefmt::{self, time_expected, unit_ns};
use super::{text_id, Row, RowError, RowOutcome, RowReader};
use crate::scenario::TimeUnit;
use crate::workload::{prefix, Context, WorkloadError};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::path::Path;

/// How a wanted key's value is read.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A time (number or numeric string) in a unit, to nanoseconds.
    Time(TimeUnit),
    /// A token count (non-negative integer).
    Count,
    /// A signed integer (ids such as `parent_chat_id = -1`).
    Int,
    /// Text (strings; numbers and booleans as their text).
    Text,
    /// An array of block ids.
    Hashes,
    /// An object of named arrays of segment ids, in `components` order.
    Segments(&'static [&'static str]),
}

/// The keys a format wants from each line.
pub struct JsonSpec {
    keys: Vec<(String, Kind)>,
}

/// What one line gave, slot by slot (slots are the spec's key indices).
#[derive(Default)]
pub struct JsonRow {
    pub nums: Vec<Option<i64>>,
    texts: Vec<Vec<u8>>,
    present: Vec<bool>,
    pub hashes: Vec<u64>,
    /// (component index, segment id) in file order.
    pub segs: Vec<(u8, u64)>,
}

impl JsonSpec {
    pub fn new() -> JsonSpec {
        JsonSpec { keys: Vec::new() }
    }

    /// Adds a wanted key, returning its slot; a key already wanted for
    /// another role is an error (one key, one meaning).
    pub fn add(&mut self, key: &str, kind: Kind) -> Result<usize, String> {
        if self.keys.iter().any(|(k, _)| k == key) {
            return Err(format!(
                "key {key:?} is used twice (e.g. as a tenant and as another field)"
            ));
        }
        self.keys.push((key.to_string(), kind));
        Ok(self.keys.len() - 1)
    }

    pub fn name(&self, slot: usize) -> &str {
        &self.keys[slot].0
    }

    /// Parses one line into `out` (cleared first).
    pub fn parse(&self, line: &[u8], out: &mut JsonRow) -> Result<(), String> {
        self.clear(out);
        if self.parse_plain(line, out).is_some() {
            return Ok(());
        }
        // Not in the plain subset (or malformed): serde reads the whole
        // line and words any error.
        self.clear(out);
        self.parse_serde(line, out)
    }

    /// [`Self::parse`] through serde alone, into a cleared `out`.
    fn parse_serde(&self, line: &[u8], out: &mut JsonRow) -> Result<(), String> {
        let mut de = serde_json::Deserializer::from_slice(line);
        let r = RowSeed {
            spec: self,
            out: &mut *out,
        }
        .deserialize(&mut de)
        .and_then(|_| de.end());
        r.map_err(|e| {
            // Each line is its own document: report the column only.
            let m = e.to_string();
            match m.rsplit_once(" at line 1 column ") {
                Some((msg, col)) => format!("{msg} (column {col})"),
                None => m,
            }
        })
    }
}

impl JsonSpec {
    /// Empties `out` for a line with this spec's slots.
    fn clear(&self, out: &mut JsonRow) {
        let n = self.keys.len();
        out.nums.clear();
        out.nums.resize(n, None);
        out.present.clear();
        out.present.resize(n, false);
        out.texts.resize_with(n, Vec::new);
        out.texts.iter_mut().for_each(Vec::clear);
        out.hashes.clear();
        out.segs.clear();
    }

    /// Reads a line of the plain shape trace files are written in — one
    /// object whose keys are ASCII without escapes and whose values are
    /// non-negative integers, arrays of them, or ASCII strings without
    /// escapes — by hand, filling `out` exactly as the serde visitors
    /// below do for the same line. Anything else (a fraction, a sign, an
    /// escape, a nested object, a non-ASCII byte, a malformed line) gives
    /// `None`, and [`Self::parse`] hands the line to serde, which reads
    /// every JSON document and words the errors. The Mooncake traces are
    /// all plain: serde's generic path spent about 10,000 instructions a
    /// line on them (8 % of a side-by-side run), this about a tenth.
    fn parse_plain(&self, line: &[u8], out: &mut JsonRow) -> Option<()> {
        let mut p = Plain { b: line, i: 0 };
        p.ws();
        p.eat(b'{')?;
        p.ws();
        if p.peek()? == b'}' {
            p.i += 1;
        } else {
            loop {
                let key = p.string()?;
                p.ws();
                p.eat(b':')?;
                p.ws();
                match self.keys.iter().position(|(k, _)| k.as_bytes() == key) {
                    Some(slot) => {
                        match self.keys[slot].1 {
                            Kind::Hashes => {
                                p.eat(b'[')?;
                                p.ws();
                                if p.peek()? == b']' {
                                    p.i += 1;
                                } else {
                                    loop {
                                        out.hashes.push(p.integer()?);
                                        // The usual separator, at once.
                                        if p.b.get(p.i..p.i + 2) == Some(b", ") {
                                            p.i += 2;
                                            continue;
                                        }
                                        p.ws();
                                        match p.next()? {
                                            b',' => p.ws(),
                                            b']' => break,
                                            _ => return None,
                                        }
                                    }
                                }
                            }
                            Kind::Text => {
                                // Appended, as `TextVisitor` does (a key
                                // given twice gives both texts).
                                let t = p.string()?;
                                out.texts[slot].extend_from_slice(t.trim_ascii());
                            }
                            Kind::Segments(_) => return None,
                            kind => {
                                let v = p.integer()?;
                                let r = match kind {
                                    Kind::Time(u) => {
                                        (v as i128 * unit_ns(u) as i128).try_into().ok()
                                    }
                                    _ => i64::try_from(v).ok(),
                                };
                                // Out of range: serde's path words the error.
                                out.nums[slot] = Some(r?);
                            }
                        }
                        out.present[slot] = true;
                    }
                    None => p.skip_plain_value()?,
                }
                p.ws();
                match p.next()? {
                    b',' => p.ws(),
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        p.ws();
        (p.i == line.len()).then_some(())
    }
}

/// A cursor over one line for [`JsonSpec::parse_plain`].
struct Plain<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Plain<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// JSON's whitespace.
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A string of printable ASCII without escapes, without its quotes.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match self.next()? {
                b'"' => return Some(&self.b[start..self.i - 1]),
                b'\\' => return None,
                c if !(0x20..0x80).contains(&c) => return None,
                _ => {}
            }
        }
    }

    /// A non-negative integer of at most 19 digits (always within u64), as
    /// JSON writes it: no sign, no leading zero, no fraction or exponent.
    /// A longer one is left to serde.
    #[inline]
    fn integer(&mut self) -> Option<u64> {
        let (b, start) = (self.b, self.i);
        let mut i = start;
        let mut v: u64 = 0;
        while let Some(&c) = b.get(i) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            v = v.wrapping_mul(10).wrapping_add(d as u64);
            i += 1;
        }
        let digits = i - start;
        if digits == 0 || digits > 19 || (digits > 1 && b[start] == b'0') {
            return None;
        }
        self.i = i;
        match b.get(i) {
            Some(b'.' | b'e' | b'E') => None,
            _ => Some(v),
        }
    }

    /// An unwanted key's value, when it is plain: an integer, a string or
    /// an array of integers.
    fn skip_plain_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.integer()?;
                    self.ws();
                    match self.next()? {
                        b',' => self.ws(),
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            _ => self.integer().map(|_| ()),
        }
    }
}

impl JsonRow {
    /// Whether the line had the key of `slot`.
    pub fn has(&self, slot: usize) -> bool {
        self.present[slot]
    }

    /// The text of a `Kind::Text` slot, if the line had it.
    pub fn text(&self, slot: usize) -> Option<&[u8]> {
        self.present[slot].then(|| self.texts[slot].as_slice())
    }
}

struct RowSeed<'a> {
    spec: &'a JsonSpec,
    out: &'a mut JsonRow,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(slot) = map.next_key_seed(KeySeed(self.spec))? {
            match slot {
                Some(i) => {
                    map.next_value_seed(ValueSeed {
                        kind: self.spec.keys[i].1,
                        slot: i,
                        out: &mut *self.out,
                    })?;
                    self.out.present[i] = true;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Matches a key against the wanted ones: `Some(slot)` or `None` (skip).
struct KeySeed<'a>(&'a JsonSpec);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Option<usize>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.keys.iter().position(|(k, _)| k == v))
    }
}

struct ValueSeed<'a> {
    kind: Kind,
    slot: usize,
    out: &'a mut JsonRow,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.kind {
            Kind::Hashes => d.deserialize_seq(HashesVisitor(&mut self.out.hashes)),
            Kind::Segments(c) => d.deserialize_map(SegmentsVisitor(c, &mut self.out.segs)),
            Kind::Text => d.deserialize_any(TextVisitor(&mut self.out.texts[self.slot])),
            k => {
                let v = d.deserialize_any(NumVisitor(k))?;
                self.out.nums[self.slot] = Some(v);
                Ok(())
            }
        }
    }
}

/// Times, counts and integers.
struct NumVisitor(Kind);

impl NumVisitor {
    /// The value, or an error showing what was found (formatted only then).
    fn done<E: de::Error>(&self, v: Option<i64>, got: impl FnOnce() -> String) -> Result<i64, E> {
        v.ok_or_else(|| E::custom(format!("expected {}, got {}", self.what(), got())))
    }
    fn what(&self) -> &'static str {
        match self.0 {
            Kind::Time(u) => time_expected(u),
            Kind::Count => "a whole number of tokens",
            _ => "an integer",
        }
    }
}

impl<'de> Visitor<'de> for NumVisitor {
    type Value = i64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.what())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        let r = match self.0 {
            Kind::Time(u) => (v as i128 * unit_ns(u) as i128).try_into().ok(),
            _ => i64::try_from(v).ok(),
        };
        self.done(r, || v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        let r = match self.0 {
            Kind::Time(u) => v.checked_mul(unit_ns(u)),
            Kind::Count if v < 0 => None,
            _ => Some(v),
        };
        self.done(r, || v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        let r = match self.0 {
            Kind::Time(u) => timefmt::f64_ns(v, unit_ns(u)),
            Kind::Count if v < 0.0 => None,
            _ if v.fract() == 0.0 && v.abs() < 9.2e18 => Some(v as i64),
            _ => None,
        };
        self.done(r, || v.to_string())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
        let b = v.as_bytes();
        let r = match self.0 {
            Kind::Time(u) => timefmt::time_ns(b, u),
            Kind::Count => timefmt::count(b).and_then(|c| i64::try_from(c).ok()),
            _ => v.trim().parse().ok(),
        };
        self.done(r, || format!("{v:?}"))
    }
}

struct TextVisitor<'a>(&'a mut Vec<u8>);

impl<'de> Visitor<'de> for TextVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or a number")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.extend_from_slice(v.trim().as_bytes());
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
}

struct HashesVisitor<'a>(&'a mut Vec<u64>);

impl<'de> Visitor<'de> for HashesVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of non-negative integer block ids")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(v) = seq.next_element::<u64>()? {
            self.0.push(v);
        }
        Ok(())
    }
}

struct SegmentsVisitor<'a>(&'static [&'static str], &'a mut Vec<(u8, u64)>);

impl<'de> Visitor<'de> for SegmentsVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object of segment-id arrays ({})", self.0.join(", "))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let Some(c) = self.0.iter().position(|n| *n == k) else {
                return Err(de::Error::custom(format!(
                    "unknown segment kind {k:?} (known: {})",
                    self.0.join(", ")
                )));
            };
            map.next_value_seed(SegmentIds(c as u8, &mut *self.1))?;
        }
        Ok(())
    }
}

/// One segment kind's id array, appended to the row's segments.
struct SegmentIds<'a>(u8, &'a mut Vec<(u8, u64)>);

impl<'de> DeserializeSeed<'de> for SegmentIds<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for SegmentIds<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of non-negative integer segment ids")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(v) = seq.next_element::<u64>()? {
            self.1.push((self.0, v));
        }
        Ok(())
    }
}

/// The standard keys of a JSONL trace.
pub struct JsonNames<'a> {
    pub time: &'a str,
    pub unit: TimeUnit,
    pub prompt: &'a str,
    pub output: &'a str,
    /// Session id as text (hashed to a number).
    pub session: Option<&'a str>,
    /// Block-id array and its block size.
    pub hashes: Option<(&'a str, u32)>,
    pub tenant: Option<&'a str>,
}

/// A JSONL trace: lines, the wanted keys, and the slots of the standard ones.
pub struct JsonTrace {
    pub lines: Lines,
    pub spec: JsonSpec,
    pub row: JsonRow,
    time: usize,
    prompt: usize,
    output: usize,
    session: Option<usize>,
    hashes: Option<(usize, u32)>,
    tenant: Option<usize>,
    /// Format-specific slots, required on every line.
    required: Vec<usize>,
}

impl JsonTrace {
    /// Opens the file with the standard keys plus `extra` format-specific
    /// (required) ones, whose slots are returned in order.
    pub fn open(
        path: &Path,
        key: &str,
        ctx: &Context,
        n: &JsonNames,
        extra: &[(&str, Kind)],
    ) -> Result<(JsonTrace, Vec<usize>), WorkloadError> {
        let lines = Lines::open(path, key, ctx)?;
        let mut spec = JsonSpec::new();
        let bad = |m: String| ctx.config_error(key, m);
        let time = spec.add(n.time, Kind::Time(n.unit)).map_err(bad)?;
        let prompt = spec.add(n.prompt, Kind::Count).map_err(bad)?;
        let output = spec.add(n.output, Kind::Count).map_err(bad)?;
        let session = n
            .session
            .map(|s| spec.add(s, Kind::Text))
            .transpose()
            .map_err(bad)?;
        let hashes = n
            .hashes
            .map(|(h, b)| spec.add(h, Kind::Hashes).map(|s| (s, b)))
            .transpose()
            .map_err(bad)?;
        let mut required = Vec::new();
        for (k, kind) in extra {
            required.push(spec.add(k, *kind).map_err(bad)?);
        }
        let tenant = n
            .tenant
            .map(|t| spec.add(t, Kind::Text))
            .transpose()
            .map_err(|m| ctx.config_error(&format!("{key}.tenant_column"), m))?;
        let extra_slots = required.clone();
        Ok((
            JsonTrace {
                lines,
                spec,
                row: JsonRow::default(),
                time,
                prompt,
                output,
                session,
                hashes,
                tenant,
                required,
            },
            extra_slots,
        ))
    }

    fn missing(&self, line: u64, slot: usize) -> RowError {
        RowError::new(line, format!("missing key {:?}", self.spec.name(slot)))
    }

    /// The value of a numeric slot present on this line.
    pub fn num(&self, line: u64, slot: usize) -> Result<i64, RowError> {
        self.row.nums[slot].ok_or_else(|| self.missing(line, slot))
    }

    /// A token count: checked to be ≥ 0, not wrapped.
    fn tokens(&self, line: u64, slot: usize) -> Result<u64, RowError> {
        let v = self.num(line, slot)?;
        u64::try_from(v)
            .map_err(|_| RowError::new(line, format!("token count must be ≥ 0, got {v}")))
    }

    /// Reads the next line into `row`; `false` at the end.
    pub fn read(&mut self, row: &mut Row) -> Result<bool, RowError> {
        let Some((line, text)) = self.lines.next()? else {
            return Ok(false);
        };
        row.reset(line);
        self.spec
            .parse(text, &mut self.row)
            .map_err(|m| RowError::new(line, m))?;
        row.time_ns = self.num(line, self.time)?;
        row.prompt = self.tokens(line, self.prompt)?;
        row.output = self.tokens(line, self.output)?;
        if let Some(&s) = self.required.iter().find(|&&s| !self.row.has(s)) {
            return Err(self.missing(line, s));
        }
        if let Some(s) = self.session {
            if let Some(t) = self.row.text(s) {
                row.session = text_id(t);
            }
        }
        if let Some((slot, block)) = self.hashes {
            if !self.row.has(slot) {
                return Err(self.missing(line, slot));
            }
            row.hashes.extend_from_slice(&self.row.hashes);
            prefix::chain_in_place(&mut row.hashes);
            row.block_tokens = block;
        }
        if let Some(s) = self.tenant {
            match self.row.text(s) {
                Some(t) => row.set_tenant(t),
                None => return Err(self.missing(line, s)),
            }
        }
        Ok(true)
    }
}

/// Formats whose rows are exactly the standard columns read straight
/// through this reader: no per-format wrapper needed.
impl RowReader for JsonTrace {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        Ok(if self.read(row)? {
            RowOutcome::Row
        } else {
            RowOutcome::End
        })
    }

    fn file(&self) -> &str {
        self.lines.file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a parse left in a row: numbers, texts, presence, hashes.
    type Seen = (Vec<Option<i64>>, Vec<Option<Vec<u8>>>, Vec<bool>, Vec<u64>);

    /// What a parse left in `row`, for comparing two parses.
    fn seen(spec: &JsonSpec, row: &JsonRow) -> Seen {
        let n = spec.keys.len();
        (
            row.nums.clone(),
            (0..n).map(|s| row.text(s).map(<[u8]>::to_vec)).collect(),
            row.present.clone(),
            row.hashes.clone(),
        )
    }

    fn mooncake_spec() -> JsonSpec {
        let mut spec = JsonSpec::new();
        spec.add("timestamp", Kind::Time(TimeUnit::Ms)).unwrap();
        spec.add("input_length", Kind::Count).unwrap();
        spec.add("output_length", Kind::Count).unwrap();
        spec.add("hash_ids", Kind::Hashes).unwrap();
        spec.add("who", Kind::Text).unwrap();
        spec
    }

    /// The hand parser and serde agree on every line: the same row, or
    /// both an error (the hand parser hands every line it does not take to
    /// serde, so an error is always serde's).
    fn agree(spec: &JsonSpec, line: &[u8]) {
        let (mut fast, mut slow) = (JsonRow::default(), JsonRow::default());
        let a = spec.parse(line, &mut fast);
        spec.clear(&mut slow);
        let b = spec.parse_serde(line, &mut slow);
        assert_eq!(a, b, "{}", String::from_utf8_lossy(line));
        if a.is_ok() {
            assert_eq!(
                seen(spec, &fast),
                seen(spec, &slow),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn the_plain_reader_agrees_with_serde_on_edge_cases() {
        let spec = mooncake_spec();
        for line in [
            &br#"{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}"#[..],
            br#"{}"#,
            br#" { "hash_ids" : [ ] , "who":"  x y  " } "#,
            br#"{"hash_ids": [1], "hash_ids": [2, 3], "who": "a", "who": "b"}"#,
            br#"{"timestamp": 18446744073709551615}"#,
            br#"{"timestamp": 9223372036854775807}"#,
            br#"{"timestamp": 18446744073709551616}"#,
            br#"{"input_length": 9223372036854775808}"#,
            br#"{"timestamp": 01}"#,
            br#"{"timestamp": 1.5}"#,
            br#"{"timestamp": 1e3}"#,
            br#"{"timestamp": -1}"#,
            br#"{"timestamp": "12.5"}"#,
            br#"{"hash_ids": [1,]}"#,
            br#"{"hash_ids": [1 2]}"#,
            br#"{"other": [1, 2], "x": "y", "z": 3, "timestamp": 4}"#,
            br#"{"other": {"a": 1}, "timestamp": 4}"#,
            br#"{"who": "a\"b"}"#,
            b"{\"who\": \"\xc3\xa9\"}",
            br#"{"timestamp": 4,}"#,
            br#"{"timestamp": 4} x"#,
            br#"{"timestamp": 4"#,
            br#"{"timestamp" 4}"#,
            br#"{"who": 7}"#,
            br#"[1]"#,
            b"",
        ] {
            agree(&spec, line);
        }
    }

    proptest::proptest! {
        #[test]
        fn the_plain_reader_agrees_with_serde(
            parts in proptest::collection::vec(
                (0usize..7, 0usize..9, 0usize..4, proptest::collection::vec(0u64..100_000, 0..5)),
                0..6,
            ),
            big in proptest::num::u64::ANY,
            cut in proptest::option::of(0usize..200),
        ) {
            let spec = mooncake_spec();
            let keys = ["timestamp", "input_length", "output_length", "hash_ids", "who", "other", "t\\u0041"];
            let ws = ["", " ", "  ", "\t", "\r\n"];
            let mut line = String::from("{");
            for (k, (key, value, w, ids)) in parts.iter().enumerate() {
                if k > 0 {
                    line.push(',');
                }
                let w = ws[*w];
                let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(&format!(",{w}"));
                let v = match value {
                    0 => ids.first().copied().unwrap_or(0).to_string(),
                    1 => big.to_string(),
                    2 => format!("[{w}{list}{w}]"),
                    3 => format!("\"{w}{list}{w}\""),
                    4 => format!("{}.5", ids.len()),
                    5 => "-3".into(),
                    6 => "0{list}".replace("{list}", &list),
                    7 => "null".into(),
                    _ => format!("\"{}\"", "\\n"),
                };
                line.push_str(&format!("{w}\"{}\"{w}:{w}{v}{w}", keys[*key]));
            }
            line.push('}');
            let mut bytes = line.into_bytes();
            if let Some(c) = cut {
                bytes.truncate(c);
            }
            agree(&spec, &bytes);
        }
    }

    #[test]
    fn rows_keep_only_the_wanted_keys() {
        let mut spec = JsonSpec::new();
        let t = spec.add("timestamp", Kind::Time(TimeUnit::Ms)).unwrap();
        let h = spec.add("hash_ids", Kind::Hashes).unwrap();
        let s = spec.add("who", Kind::Text).unwrap();
        assert!(spec.add("who", Kind::Int).is_err());
        let mut row = JsonRow::default();
        spec.parse(
            br#"{"x": {"y": [1, {"z": null}]}, "timestamp": 1500, "hash_ids": [3, 4], "who": 7}"#,
            &mut row,
        )
        .unwrap();
        assert_eq!(row.nums[t], Some(1_500_000_000));
        assert_eq!(row.hashes, vec![3, 4]);
        assert_eq!(row.text(s), Some(&b"7"[..]));
        spec.parse(br#"{"timestamp": "12.5"}"#, &mut row).unwrap();
        assert_eq!(row.nums[t], Some(12_500_000));
        assert!(!row.has(h) && row.text(s).is_none());
        for bad in [
            &br#"{"hash_ids": [1.5]}"#[..],
            br#"{"hash_ids": [-1]}"#,
            br#"{"hash_ids": 3}"#,
        ] {
            assert!(spec.parse(bad, &mut row).is_err());
        }
        let e = spec.parse(br#"{"timestamp": true}"#, &mut row).unwrap_err();
        assert!(
            e.contains("expected a time in milliseconds") && e.contains("(column "),
            "{e}"
        );
    }
}
