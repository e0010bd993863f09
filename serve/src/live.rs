//! `--engine live`: the candle live engine of `calibrate` behind the HTTP
//! front end — one replica of `sim`'s scheduler deciding each iteration and
//! a real model (GGUF, safetensors, or random weights) running it, with the
//! model's tokenizer turning prompts into ids and sampled ids back into the
//! streamed text. The scheduler thread alternates between the clients'
//! commands and one iteration ([`calibrate::online::Online::step`]), as
//! vLLM's engine core does (`EngineCore.step`, `abort_requests`): a client
//! that goes away is cancelled before the next iteration, so its sequence
//! leaves the batch, its KV blocks are freed and the model computes it no
//! more.

use crate::engine::{Admitted, Command, EngineHandle, Gauges, Job, Refusal, TokenEvent, Tokenize};
use crate::openai::Prompt;
use calibrate::device::OpenDevice;
use calibrate::model::Model;
use calibrate::online::Online;
use calibrate::tokenizer::Tokenizer;
use sim::request::{RejectReason, RequestId};
use sim::simulation::unservable;
use sim::time::SimTime;
use sim::Scenario;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc as tmpsc;

/// How the live engine runs.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Most requests waiting (not yet running); more are refused with 429.
    pub max_waiting: usize,
}

/// The scenario a profile's model is served with: the profile replaces the
/// scenario's `[hardware]` and `[model]` and what the live engine cannot run
/// is refused with its key (`calibrate::validate::live_scenario`, shared with
/// `validate`).
pub fn scenario_with_profile(scenario: &Path, profile: &Path) -> anyhow::Result<Scenario> {
    Ok(calibrate::validate::live_scenario(scenario, profile)?)
}

/// What `serve --engine live` runs: the device and model of a profile
/// (written by `servesim calibrate`: random weights by seed, or the weights
/// file), and the tokenizer the GGUF file carries — or that of
/// `tokenizer`, a GGUF file, for a model without one.
pub struct LiveModel {
    pub dev: OpenDevice,
    pub model: Model,
    pub tokenizer: Option<Tokenizer>,
    /// Where the weights came from, for the start-up line.
    pub weights: String,
}

/// Opens the profile's device (or `device`) and loads its model.
pub fn load(
    profile: &Path,
    device: Option<&str>,
    tokenizer: Option<&Path>,
) -> anyhow::Result<LiveModel> {
    use calibrate::device::DeviceSpec;
    let p = sim::profile::Profile::load(profile)?;
    let spec = DeviceSpec::parse(device.unwrap_or(&p.device.spec))?;
    let threads = (p.device.threads > 0).then_some(p.device.threads as usize);
    let dev = OpenDevice::open(spec, threads)?;
    let loaded = calibrate::loader::from_profile(&p.model, &dev)?;
    let weights = p.model.weights.describe();
    let tokenizer = match tokenizer {
        None => loaded.tokenizer,
        Some(path) => {
            if path.extension().and_then(|e| e.to_str()) != Some("gguf") {
                anyhow::bail!(
                    "--tokenizer {}: must be a .gguf file (its vocabulary and merges are read)",
                    path.display()
                );
            }
            let g = calibrate::gguf::read(path)?;
            let t = g.tokenizer.ok_or_else(|| {
                anyhow::anyhow!(
                    "--tokenizer {}: the file carries no tokenizer",
                    path.display()
                )
            })?;
            if t.vocab_size() > loaded.model.cfg.vocab_size {
                anyhow::bail!(
                    "--tokenizer {}: its vocabulary of {} is larger than the model's {}",
                    path.display(),
                    t.vocab_size(),
                    loaded.model.cfg.vocab_size
                );
            }
            Some(t)
        }
    };
    Ok(LiveModel {
        dev,
        model: loaded.model,
        tokenizer,
        weights,
    })
}

/// The ids of a prompt. Chat messages follow the ChatML template
/// SmolLM2-Instruct (and Qwen) are trained on, `<|im_start|>role\ncontent
/// <|im_end|>\n` per message and `<|im_start|>assistant\n` last, when the
/// vocabulary has those tokens; otherwise "role: content" lines.
fn prompt_ids(tok: Option<&Tokenizer>, vocab: u32, p: &Prompt) -> Result<Vec<u32>, String> {
    let ids = match (p, tok) {
        (Prompt::Ids(ids), _) => ids.clone(),
        (_, None) => {
            return Err(
                "this model has no tokenizer (random weights): send the prompt as token ids to /v1/completions"
                    .into(),
            )
        }
        (Prompt::Text(t), Some(tok)) => tok.encode(t).map_err(|e| e.to_string())?,
        (Prompt::Chat(msgs), Some(tok)) => {
            let enc = |s: &str| tok.encode(s).map_err(|e| e.to_string());
            let mut ids = Vec::new();
            match (tok.token_id("<|im_start|>"), tok.token_id("<|im_end|>")) {
                (Some(start), Some(end)) => {
                    for (role, content) in msgs {
                        ids.push(start);
                        ids.extend(enc(&format!("{role}\n{content}"))?);
                        ids.push(end);
                        ids.extend(enc("\n")?);
                    }
                    ids.push(start);
                    ids.extend(enc("assistant\n")?);
                }
                _ => {
                    for (role, content) in msgs {
                        ids.extend(enc(&format!("{role}: {content}\n"))?);
                    }
                    ids.extend(enc("assistant:")?);
                }
            }
            ids
        }
    };
    if let Some(&bad) = ids.iter().find(|&&t| t >= vocab) {
        return Err(format!(
            "token id {bad} is outside the model's vocabulary of {vocab}"
        ));
    }
    Ok(ids)
}

/// Starts the live engine's scheduler thread: `model` on `dev`, scheduled
/// as `scenario`'s `[engine]` says with its KV blocks, sequences of up to
/// `scenario.max_model_len` tokens.
pub fn start(
    scenario: Scenario,
    dev: OpenDevice,
    model: Model,
    tokenizer: Option<Tokenizer>,
    cfg: LiveConfig,
) -> EngineHandle {
    let (tx, rx) = mpsc::channel();
    let gauges = Arc::new(Mutex::new(Gauges {
        kv_blocks_total: scenario.memory.kv_blocks,
        ..Gauges::default()
    }));
    let tokenizer = tokenizer.map(Arc::new);
    let vocab = model.cfg.vocab_size as u32;
    let t = tokenizer.clone();
    let tokenize: Tokenize = Arc::new(move |p: &Prompt| prompt_ids(t.as_deref(), vocab, p));
    let g = gauges.clone();
    std::thread::Builder::new()
        .name("servesim-live".into())
        .spawn(move || {
            let mut e = Live {
                online: Online::new(&dev, &model, &scenario, scenario.max_model_len as usize),
                scenario: &scenario,
                tokenizer: tokenizer.as_deref(),
                subs: BTreeMap::new(),
                gauges: g.lock().expect("gauges lock").clone(),
                max_waiting: cfg.max_waiting,
                start: Instant::now(),
            };
            e.run(&rx, &g);
        })
        .expect("spawn the live engine's thread");
    EngineHandle::new(tx, gauges).with_tokenizer(tokenize)
}

/// One request's client.
struct Sub {
    tx: tmpsc::UnboundedSender<TokenEvent>,
    ids: Vec<u32>,
    /// Bytes of the detokenized text already sent.
    shown: usize,
    stop_at_eos_after: Option<u32>,
}

struct Live<'a> {
    online: Online<'a>,
    scenario: &'a Scenario,
    tokenizer: Option<&'a Tokenizer>,
    subs: BTreeMap<RequestId, Sub>,
    gauges: Gauges,
    max_waiting: usize,
    start: Instant,
}

impl Live<'_> {
    fn now(&self) -> SimTime {
        SimTime(self.start.elapsed().as_nanos() as u64)
    }

    fn run(&mut self, rx: &mpsc::Receiver<Command>, out: &Mutex<Gauges>) {
        loop {
            if !self.online.has_work() {
                self.publish(out);
                match rx.recv() {
                    Ok(c) => self.command(c),
                    Err(_) => return,
                }
            }
            // Everything that came during the last iteration, before the
            // next one is formed.
            loop {
                match rx.try_recv() {
                    Ok(c) => self.command(c),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            let start = self.start;
            let clock = move || SimTime(start.elapsed().as_nanos() as u64);
            let st = match self.online.step(&clock) {
                Ok(st) => st,
                Err(e) => {
                    // Every open stream breaks (its sender is dropped) and
                    // later submissions find the engine stopped (503).
                    eprintln!("error: the live engine stopped: {e}");
                    return;
                }
            };
            if st.iteration.is_some() {
                self.gauges.iterations += 1;
            }
            let eos = self.tokenizer.and_then(|t| t.eos);
            for &(id, tok) in &st.sampled {
                let completes = st.completed.contains(&id);
                let Some(s) = self.subs.get_mut(&id) else {
                    continue;
                };
                s.ids.push(tok);
                self.gauges.generation_tokens += 1;
                let stops =
                    Some(tok) == eos && s.stop_at_eos_after.is_some_and(|m| s.ids.len() as u32 > m);
                let text = if stops {
                    // The end-of-sequence token counts, its text is not
                    // shown (vLLM's skip_special_tokens).
                    String::new()
                } else {
                    piece(self.tokenizer, s, tok, completes)
                };
                let _ = s.tx.send(TokenEvent::Token(text));
                if stops && !completes {
                    let _ = s.tx.send(TokenEvent::Finished);
                    self.subs.remove(&id);
                    let now = self.now();
                    self.online.cancel(id, now);
                    self.gauges.completed += 1;
                }
            }
            for id in &st.completed {
                if let Some(s) = self.subs.remove(id) {
                    let _ = s.tx.send(TokenEvent::Finished);
                }
                self.gauges.completed += 1;
            }
            self.publish(out);
        }
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Submit { job, reply } => {
                let res = self.submit(job);
                match &res {
                    Err(Refusal::QueueFull) => self.gauges.queue_full += 1,
                    Err(Refusal::Unservable(_)) => self.gauges.unservable += 1,
                    Ok(_) => {}
                }
                if let Err(Ok(a)) = reply.send(res) {
                    // The client left before the answer.
                    self.cancel(a.id);
                }
            }
            Command::Cancel(id) => self.cancel(id),
        }
    }

    fn submit(&mut self, job: Job) -> Result<Admitted, Refusal> {
        let output = job.output_tokens.max(1);
        let prompt = job.prompt_ids.len() as u32;
        if let Some(reason) = unservable(
            &self.scenario.limits,
            &self.scenario.memory,
            prompt,
            output,
            self.online.replica().splits_prefills(),
        ) {
            return Err(Refusal::Unservable(reason));
        }
        if self.online.replica().waiting_len() >= self.max_waiting {
            return Err(Refusal::QueueFull);
        }
        let now = self.now();
        let id = self
            .online
            .submit(now, job.prompt_ids, output)
            .map_err(|_| Refusal::Unservable(RejectReason::ExceedsMaxModelLen))?;
        let (tx, rx) = tmpsc::unbounded_channel();
        self.subs.insert(
            id,
            Sub {
                tx,
                ids: Vec::new(),
                shown: 0,
                stop_at_eos_after: job.stop_at_eos_after,
            },
        );
        self.gauges.prompt_tokens += prompt as u64;
        Ok(Admitted { id, events: rx })
    }

    fn cancel(&mut self, id: RequestId) {
        self.subs.remove(&id);
        let now = self.now();
        if self.online.cancel(id, now) {
            self.gauges.cancelled += 1;
        }
    }

    fn publish(&mut self, out: &Mutex<Gauges>) {
        let rep = self.online.replica();
        let g = &mut self.gauges;
        g.running = rep.running_len() as u64;
        g.waiting = rep.waiting_len() as u64;
        g.kv_blocks_used = rep.kv().used();
        g.preemptions = rep.preemptions();
        *out.lock().expect("gauges lock") = g.clone();
    }
}

/// The text token `tok` adds to its sequence: the new part of the decoded
/// whole (a token can end inside a multi-byte character, whose bytes are
/// held back until the character is complete, as vLLM's incremental
/// detokenizer does). Without a tokenizer (random weights) a token reads as
/// its id.
fn piece(tokenizer: Option<&Tokenizer>, s: &mut Sub, tok: u32, last: bool) -> String {
    let Some(t) = tokenizer else {
        return format!(" {tok}");
    };
    let text = t.decode(&s.ids);
    if !last && text.ends_with('\u{FFFD}') {
        return String::new();
    }
    let new = text.get(s.shown..).unwrap_or("").to_string();
    s.shown = text.len();
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte_tokenizer() -> Tokenizer {
        // GPT-2's byte alphabet (id = byte), then "<|im_start|>", "<|im_end|>".
        let mut tokens = gpt2_bytes();
        tokens.extend(["<|im_start|>", "<|im_end|>"].map(String::from));
        Tokenizer::new(tokens, &[], None, Some(257)).unwrap()
    }

    fn gpt2_bytes() -> Vec<String> {
        // The same reversible byte map the tokenizer uses (printable bytes
        // stand for themselves, the rest map above U+0100).
        let mut extra = 0u32;
        (0u32..256)
            .map(|b| {
                let printable = (33..=126).contains(&b)
                    || (0xA1..=0xAC).contains(&b)
                    || (0xAE..=0xFF).contains(&b);
                let c = if printable {
                    char::from_u32(b).unwrap()
                } else {
                    extra += 1;
                    char::from_u32(255 + extra).unwrap()
                };
                c.to_string()
            })
            .collect()
    }

    #[test]
    fn chat_prompts_follow_chatml_and_ids_are_checked() {
        let t = byte_tokenizer();
        let p = Prompt::Chat(vec![("user".into(), "hi".into())]);
        let ids = prompt_ids(Some(&t), 300, &p).unwrap();
        assert_eq!(ids[0], 256);
        assert_eq!(
            t.decode(&ids),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        let e = prompt_ids(None, 300, &Prompt::Text("hi".into())).unwrap_err();
        assert!(e.contains("no tokenizer"), "{e}");
        let e = prompt_ids(None, 300, &Prompt::Ids(vec![1, 300])).unwrap_err();
        assert!(e.contains("outside the model's vocabulary of 300"), "{e}");
        assert_eq!(
            prompt_ids(None, 300, &Prompt::Ids(vec![1, 299])).unwrap(),
            vec![1, 299]
        );
    }

    #[test]
    fn multibyte_characters_are_held_back_until_complete() {
        let t = byte_tokenizer();
        let (tx, _rx) = tmpsc::unbounded_channel();
        let mut s = Sub {
            tx,
            ids: Vec::new(),
            shown: 0,
            stop_at_eos_after: None,
        };
        // "é" is two bytes: the first alone is held back.
        let mut out = Vec::new();
        for &b in "aé!".as_bytes() {
            s.ids.push(b as u32);
            out.push(piece(Some(&t), &mut s, b as u32, false));
        }
        assert_eq!(out, vec!["a", "", "é", "!"]);
        assert_eq!(piece(None, &mut s, 42, false), " 42");
    }
}
