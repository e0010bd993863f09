//! The seam between the HTTP front end and whatever computes tokens: the
//! server submits a request and reads its tokens from a channel, and cancels
//! it when the client goes away. Behind the handle runs one scheduler thread
//! (no async runtime in `sim`): the simulated twin ([`crate::twin`]) or the
//! live engine (`crate::live`, feature `live`), both driving `sim`'s very
//! `Replica` scheduler — so queueing, preemption and rejections happen as
//! in `simulate`.

use crate::openai::Prompt;
use sim::request::RejectReason;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc as tmpsc, oneshot};

/// What the server hears about one request.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenEvent {
    /// One output token, with its text.
    Token(String),
    /// The last token was sent; the request is complete.
    Finished,
}

/// Why the engine turned a request away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The waiting queue is at its cap (HTTP 429).
    QueueFull,
    /// It can never be served by one replica (HTTP 400).
    Unservable(RejectReason),
}

/// A request the engine took.
pub struct Admitted {
    pub id: u32,
    pub events: tmpsc::UnboundedReceiver<TokenEvent>,
}

/// One request as the engine takes it.
#[derive(Debug, Clone, Default)]
pub struct Job {
    pub prompt_tokens: u32,
    /// `max_tokens`: the most it generates.
    pub output_tokens: u32,
    /// The prompt's token ids (the live engine; the twin needs counts only).
    pub prompt_ids: Vec<u32>,
    /// Stop at the model's end-of-sequence token once this many tokens are
    /// out (`None`: vLLM's `ignore_eos`). The twin has no tokens to stop at.
    pub stop_at_eos_after: Option<u32>,
}

/// A message to the scheduler thread.
pub enum Command {
    Submit {
        job: Job,
        reply: oneshot::Sender<Result<Admitted, Refusal>>,
    },
    /// The client went away: the sequence leaves at the next iteration.
    Cancel(u32),
}

/// Live state the scheduler publishes after every step, for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    pub running: u64,
    pub waiting: u64,
    pub kv_blocks_used: u64,
    pub kv_blocks_total: u64,
    pub iterations: u64,
    pub preemptions: u64,
    pub completed: u64,
    pub cancelled: u64,
    pub queue_full: u64,
    pub unservable: u64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
}

/// Turns a prompt into the model's token ids (`Err`: the message of a 400).
pub type Tokenize = Arc<dyn Fn(&Prompt) -> Result<Vec<u32>, String> + Send + Sync>;

/// The server's end of the scheduler thread.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::Sender<Command>,
    pub gauges: Arc<Mutex<Gauges>>,
    /// The engine's tokenizer; `None`: the twin, which counts words.
    tokenize: Option<Tokenize>,
}

impl EngineHandle {
    pub fn new(tx: mpsc::Sender<Command>, gauges: Arc<Mutex<Gauges>>) -> EngineHandle {
        EngineHandle {
            tx,
            gauges,
            tokenize: None,
        }
    }

    /// The handle of an engine that runs a real tokenizer.
    pub fn with_tokenizer(mut self, tokenize: Tokenize) -> EngineHandle {
        self.tokenize = Some(tokenize);
        self
    }

    /// The prompt's token ids when the engine tokenizes (`None`: the twin).
    pub fn tokenize(&self, prompt: &Prompt) -> Option<Result<Vec<u32>, String>> {
        self.tokenize.as_ref().map(|t| t(prompt))
    }

    /// Submits a request; `None` when the scheduler thread has stopped.
    pub async fn submit(&self, job: Job) -> Option<Result<Admitted, Refusal>> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Submit { job, reply }).ok()?;
        rx.await.ok()
    }

    pub fn cancel(&self, id: u32) {
        // A stopped scheduler has nothing left to cancel.
        let _ = self.tx.send(Command::Cancel(id));
    }

    pub fn gauges(&self) -> Gauges {
        self.gauges.lock().expect("gauges lock").clone()
    }
}
