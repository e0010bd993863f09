//! Reading what a server sends, bounded in bytes and time: whole bodies
//! (`/v1/models`, `/metrics`, `/props`, an error's body) are cut at a cap,
//! and a Server-Sent Events stream is split into events by a parser that
//! refuses a line past its cap, so a server that sends an endless body or
//! an endless line costs a clear error, not the client's memory. Every read
//! waits at most until a deadline, and the deadline is checked between
//! reads too: a server that always has bytes ready cannot keep a read
//! going past it.
//!
//! The event format is the WHATWG HTML standard's "Server-sent events"
//! (§9.2, "Interpreting an event stream"): lines end in CR, LF or CRLF;
//! `data:` lines accumulate (joined with LF) until a blank line dispatches
//! the event; lines starting with `:` are comments; other fields (`event`,
//! `id`, `retry`) carry nothing a completion stream uses.

use futures_util::StreamExt;
use tokio::time::Instant;

/// Largest body of a GET that `calibrate --engine` reads (`/v1/models`,
/// `/metrics`, `/props`): vLLM's `/metrics` with every histogram is tens of
/// KiB, so 8 MiB leaves room for any real server.
pub const MAX_BODY_BYTES: usize = 8 << 20;
/// Largest error body kept (the message of a 4xx/5xx answer).
pub const MAX_ERROR_BODY_BYTES: usize = 64 << 10;
/// Longest line of an event stream: one completion chunk is a few hundred
/// bytes, so 1 MiB is far past any real one.
pub const MAX_SSE_LINE_BYTES: usize = 1 << 20;

/// Why a bounded read stopped short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The deadline passed.
    Timeout,
    /// More than the cap arrived (the cap, bytes).
    TooLarge(usize),
    /// The connection broke (the transport's message).
    Broken(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Timeout => write!(f, "no end before the deadline"),
            ReadError::TooLarge(cap) => write!(f, "the body passed the {} cap", bytes(*cap)),
            ReadError::Broken(e) => write!(f, "the connection broke: {e}"),
        }
    }
}

/// A byte count as people read caps: "8 MiB", "64 KiB".
pub fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// The next piece of `stream`, waiting at most until `deadline` (checked
/// before the read, too, so a stream that is always ready still stops).
pub async fn next_by<S, B, E>(stream: &mut S, deadline: Instant) -> Result<Option<B>, ReadError>
where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    E: std::error::Error,
{
    if Instant::now() >= deadline {
        return Err(ReadError::Timeout);
    }
    match tokio::time::timeout_at(deadline, stream.next()).await {
        Err(_) => Err(ReadError::Timeout),
        Ok(None) => Ok(None),
        Ok(Some(Ok(b))) => Ok(Some(b)),
        Ok(Some(Err(e))) => Err(ReadError::Broken(crate::observe::error_chain(&e))),
    }
}

/// A response's whole body, at most `cap` bytes, by `deadline`.
pub async fn body(
    resp: reqwest::Response,
    cap: usize,
    deadline: Instant,
) -> Result<Vec<u8>, ReadError> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(ReadError::TooLarge(cap));
    }
    let mut stream = resp.bytes_stream();
    let mut out = Vec::new();
    while let Some(piece) = next_by(&mut stream, deadline).await? {
        if out.len() + piece.len() > cap {
            return Err(ReadError::TooLarge(cap));
        }
        out.extend_from_slice(&piece);
    }
    Ok(out)
}

/// Splits an event stream's bytes into the data of its events.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The last byte fed was a CR: an LF right after it ends no new line.
    after_cr: bool,
}

/// An event stream that breaks its own format's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseTooLong(pub usize);

impl std::fmt::Display for SseTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "an event-stream line or event passed the {} cap",
            bytes(self.0)
        )
    }
}

impl SseParser {
    /// Feeds `bytes`; each event completed by them is pushed to `events`
    /// (its data lines joined with LF, as UTF-8 with bad bytes replaced).
    pub fn feed(&mut self, bytes: &[u8], events: &mut Vec<String>) -> Result<(), SseTooLong> {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    self.end_line(events);
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() >= MAX_SSE_LINE_BYTES {
                        return Err(SseTooLong(MAX_SSE_LINE_BYTES));
                    }
                    self.line.push(b);
                }
            }
        }
        if self.data.len() > MAX_SSE_LINE_BYTES {
            return Err(SseTooLong(MAX_SSE_LINE_BYTES));
        }
        Ok(())
    }

    fn end_line(&mut self, events: &mut Vec<String>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                events.push(String::from_utf8_lossy(&self.data).into_owned());
            }
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(pieces: &[&[u8]]) -> Result<Vec<String>, SseTooLong> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for piece in pieces {
            p.feed(piece, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn events_split_on_blank_lines_whatever_the_line_ends_and_pieces() {
        let want = vec!["{\"a\":1}".to_string(), "x\ny".into(), "[DONE]".into()];
        let whole: &[u8] =
            b": comment\ndata: {\"a\":1}\n\ndata:x\r\ndata: y\r\n\r\nevent: e\ndata: [DONE]\r\r";
        assert_eq!(events(&[whole]).unwrap(), want);
        // Byte by byte, CRLF split across pieces included.
        let pieces: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(events(&pieces).unwrap(), want);
        // An event not yet ended by a blank line is not dispatched.
        assert!(events(&[b"data: half\n"]).unwrap().is_empty());
    }

    #[test]
    fn a_line_past_the_cap_is_refused_as_it_grows() {
        let chunk = vec![b'x'; 64 << 10];
        let mut p = SseParser::default();
        let mut out = Vec::new();
        p.feed(b"data: ", &mut out).unwrap();
        let mut fed = 0;
        let e = loop {
            if let Err(e) = p.feed(&chunk, &mut out) {
                break e;
            }
            fed += chunk.len();
            assert!(fed <= MAX_SSE_LINE_BYTES, "never refused");
        };
        assert_eq!(e, SseTooLong(MAX_SSE_LINE_BYTES));
        assert!(e.to_string().contains("1 MiB cap"), "{e}");
        // Many short data lines of one event are bounded too.
        let mut p = SseParser::default();
        let line =
            b"data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n".repeat(1024);
        let r = (0..64).try_for_each(|_| p.feed(&line, &mut out));
        assert!(r.is_err());
    }
}
