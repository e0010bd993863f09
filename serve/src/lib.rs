//! servesim's two HTTP ends (DESIGN.md, "serve/"): an OpenAI-compatible
//! streaming server in front of one of `sim`'s replica schedulers — the
//! simulated twin of a scenario's fleet, its clock paced to the wall — and a
//! load generator (`observe`) that measures any OpenAI-compatible server
//! with a scenario's workload and writes the results as `simulate` does, so
//! `compare` can hold the two side by side. The async runtime (tokio) lives
//! here only; `sim` stays free of it.

pub mod compare;
pub mod engine;
#[cfg(feature = "live")]
pub mod live;
pub mod observe;
pub mod openai;
pub mod probe;
pub mod prom;
pub mod server;
pub mod stall;
pub mod twin;
pub mod wire;

use std::net::SocketAddr;

/// A server running on its own thread and runtime (for tests and embedding).
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Running {
    /// Stops accepting, lets open responses end, and waits.
    pub fn stop(mut self) -> std::io::Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the server thread panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Binds `addr` (port 0: any free one) and serves `router` on a thread of
/// its own until stopped.
pub fn spawn(addr: SocketAddr, router: axum::Router) -> std::io::Result<Running> {
    spawn_with(addr, router, stall::DEFAULT_WRITE_STALL)
}

/// [`spawn`] with the time after which a client that stops reading is
/// dropped.
pub fn spawn_with(
    addr: SocketAddr,
    router: axum::Router,
    write_stall: std::time::Duration,
) -> std::io::Result<Running> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let listener = rt.block_on(tokio::net::TcpListener::bind(addr))?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("servesim-http".into())
        .spawn(move || {
            rt.block_on(server::serve(listener, router, write_stall, async {
                let _ = rx.await;
            }))
        })?;
    Ok(Running {
        addr,
        stop: Some(tx),
        thread: Some(thread),
    })
}

/// Serves `router` on `addr` until Ctrl-C; `ready` is told the bound address.
/// A client that reads nothing for `write_stall` is dropped.
pub fn serve_forever(
    addr: SocketAddr,
    router: axum::Router,
    write_stall: std::time::Duration,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        ready(listener.local_addr()?);
        server::serve(listener, router, write_stall, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
    })
}
