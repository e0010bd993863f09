//! Slow and idle readers: a client that stops reading its stream (a stuck
//! proxy, a paused process, a slowloris reader) would otherwise hold its
//! sequence in the batch and its KV blocks for as long as the kernel's
//! socket buffers and the server's write buffer take to fill and then for
//! ever. Each accepted connection is wrapped in a [`StallGuard`]: when a
//! write to the socket has made no progress for the limit, the write fails
//! with `TimedOut`, hyper closes the connection and drops the response,
//! and the response's ticket cancels the sequence (see `server.rs`). This
//! is nginx's `send_timeout` ("a timeout for transmitting a response to the
//! client … set only between two successive write operations"), applied
//! per connection. A client merely waiting for its first token is not
//! affected: nothing is written to it, so nothing stalls.

use axum::serve::Listener;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

/// The default: as long as any client may reasonably pause reading.
pub const DEFAULT_WRITE_STALL: Duration = Duration::from_secs(30);

/// A connection whose writes fail after `limit` without progress.
pub struct StallGuard<IO> {
    io: IO,
    limit: Duration,
    /// Running while a write is pending; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<IO> StallGuard<IO> {
    pub fn new(io: IO, limit: Duration) -> StallGuard<IO> {
        StallGuard {
            io,
            limit,
            stalled: None,
        }
    }

    /// Called when the socket would block: starts the clock, or ends the
    /// connection when it has run out.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client read nothing for {} s", limit.as_secs_f64()),
        )))
    }

    fn progress<T>(&mut self, r: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for StallGuard<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for StallGuard<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.progress(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.progress(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.progress(r, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_shutdown(cx);
        self.progress(r, cx)
    }
}

/// A TCP listener whose connections are guarded (and send each token at
/// once: without TCP_NODELAY, Nagle's algorithm holds a small write until
/// the client's delayed ACK, ~40 ms on Linux).
pub struct GuardedListener {
    inner: TcpListener,
    limit: Duration,
}

impl GuardedListener {
    pub fn new(inner: TcpListener, limit: Duration) -> GuardedListener {
        GuardedListener { inner, limit }
    }
}

impl Listener for GuardedListener {
    type Io = StallGuard<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (tcp, addr) = Listener::accept(&mut self.inner).await;
        let _ = tcp.set_nodelay(true);
        (StallGuard::new(tcp, self.limit), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A peer that never reads: writes fill the pipe, then stall, then fail
    /// after the limit — and not before.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_write_that_makes_no_progress_fails_after_the_limit() {
        let (a, _b) = tokio::io::duplex(1024);
        let mut g = StallGuard::new(a, Duration::from_secs(5));
        let t0 = tokio::time::Instant::now();
        let chunk = [7u8; 256];
        let err = loop {
            if let Err(e) = g.write_all(&chunk).await {
                break e;
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
    }

    /// Progress resets the clock: a slow reader that keeps reading is kept.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_kept() {
        use tokio::io::AsyncReadExt;
        let (a, mut b) = tokio::io::duplex(64);
        let mut g = StallGuard::new(a, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let mut n = 0;
            while n < 64 * 20 {
                tokio::time::sleep(Duration::from_secs(3)).await;
                n += b.read(&mut buf).await.unwrap();
            }
            n
        });
        for _ in 0..20 {
            g.write_all(&[1u8; 64]).await.unwrap();
        }
        assert_eq!(reader.await.unwrap(), 64 * 20);
    }
}
