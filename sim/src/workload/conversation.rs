//! Multi-turn conversations: each arrival of an inner source opens a
//! conversation; every later turn is sent a think time after the previous
//! answer, with the whole conversation so far as its prompt — the pattern
//! behind chat multi-turn prefix reuse (e.g. SGLang's multi-turn benchmark,
//! Mooncake's and Qwen-Bailian's traces).

use super::shared_prefix::{chain, unique_salt, HASH_BLOCK_TOKENS};
use super::WorkloadError;
use super::WorkloadReport;
use super::{LengthSampler, RequestSource, RequestSpec};
use crate::request::Request;
use crate::rng::{self, StreamRng};
use crate::time::{secs_to_nanos, SimTime};
use rand_distr::{Distribution, Exp};
use std::collections::HashMap;

/// What a conversation carries from one turn to the next.
struct Session {
    /// Tokens of context after the current turn's answer.
    context_tokens: u32,
    /// Chained hashes covering that context (full blocks).
    hashes: Vec<u64>,
    turns_left: u32,
    tenant: u32,
    pinnable_tokens: u32,
    salt: u64,
}

/// Wraps an open-loop source with conversations.
pub struct Conversations<S> {
    inner: S,
    turns: LengthSampler,
    follow_up: LengthSampler,
    output: LengthSampler,
    think: Option<Exp<f64>>,
    turns_rng: StreamRng,
    follow_rng: StreamRng,
    output_rng: StreamRng,
    think_rng: StreamRng,
    salt_rng: StreamRng,
    sessions: HashMap<u64, Session>,
    next_session: u64,
}

impl<S: RequestSource> Conversations<S> {
    /// `turns`, `follow_up` and `output` sample the turns per conversation,
    /// the new tokens of each follow-up, and each follow-up's answer;
    /// `think_time_s` is the mean pause before a follow-up.
    pub fn new(
        inner: S,
        turns: LengthSampler,
        follow_up: LengthSampler,
        output: LengthSampler,
        think_time_s: f64,
        seed: u64,
    ) -> Self {
        Conversations {
            inner,
            turns,
            follow_up,
            output,
            think: (think_time_s > 0.0)
                .then(|| Exp::new(1.0 / think_time_s).expect("validated think time")),
            turns_rng: rng::stream(seed, "workload.conversation.turns"),
            follow_rng: rng::stream(seed, "workload.conversation.follow_up_tokens"),
            output_rng: rng::stream(seed, "workload.conversation.output_tokens"),
            think_rng: rng::stream(seed, "workload.conversation.think_time"),
            salt_rng: rng::stream(seed, "workload.conversation.salt"),
            sessions: HashMap::new(),
            next_session: 1,
        }
    }

    /// Hashes covering `tokens` tokens of a session: the known prefix, then
    /// session-unique blocks.
    fn extend(hashes: &mut Vec<u64>, salt: u64, tokens: u32) {
        let want = (tokens / HASH_BLOCK_TOKENS) as usize;
        if want > hashes.len() {
            let more = chain(
                hashes.last().copied(),
                salt,
                hashes.len(),
                want - hashes.len(),
            );
            hashes.extend(more);
        }
    }
}

impl<S: RequestSource> RequestSource for Conversations<S> {
    fn next_request(&mut self) -> Option<RequestSpec> {
        let mut spec = self.inner.next_request()?;
        let turns = self.turns.sample(&mut self.turns_rng);
        let id = self.next_session;
        self.next_session += 1;
        let salt = unique_salt(&mut self.salt_rng);
        // Hash the first turn's prompt and answer. Inner hashes of another
        // block size are replaced: the conversation needs one block size.
        if spec.hash_block_tokens != HASH_BLOCK_TOKENS {
            spec.prefix_hashes.clear();
        }
        let context = spec.prompt_tokens + spec.output_tokens;
        let mut hashes = std::mem::take(&mut spec.prefix_hashes);
        Self::extend(&mut hashes, salt, context);
        spec.prefix_hashes = hashes.clone();
        spec.hash_block_tokens = HASH_BLOCK_TOKENS;
        spec.session = id;
        if turns > 1 {
            self.sessions.insert(
                id,
                Session {
                    context_tokens: context,
                    hashes,
                    turns_left: turns - 1,
                    tenant: spec.tenant,
                    pinnable_tokens: spec.pinnable_tokens,
                    salt,
                },
            );
        }
        Some(spec)
    }

    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        if let Some(next) = self.inner.on_request_end(req, now, completed) {
            return Some(next);
        }
        if !completed {
            // A rejected turn ends its conversation.
            self.sessions.remove(&req.session());
            return None;
        }
        let session = self.sessions.get_mut(&req.session())?;
        let new_tokens = self.follow_up.sample(&mut self.follow_rng);
        let output = self.output.sample(&mut self.output_rng);
        let prompt = session.context_tokens + new_tokens;
        let mut hashes = std::mem::take(&mut session.hashes);
        Self::extend(&mut hashes, session.salt, prompt + output);
        session.context_tokens = prompt + output;
        session.turns_left -= 1;
        let think = self
            .think
            .map_or(0, |d| secs_to_nanos(d.sample(&mut self.think_rng)));
        let spec = RequestSpec {
            arrival: now.plus(think),
            prompt_tokens: prompt,
            output_tokens: output,
            tenant: session.tenant,
            session: req.session(),
            prefix_hashes: hashes.clone(),
            hash_block_tokens: HASH_BLOCK_TOKENS,
            pinnable_tokens: session.pinnable_tokens,
            samples: 0,
            region: 0,
        };
        session.hashes = hashes;
        if session.turns_left == 0 {
            self.sessions.remove(&req.session());
        }
        Some(spec)
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        self.inner.finish()
    }

    fn tenant_name(&self, index: u32) -> Option<String> {
        self.inner.tenant_name(index)
    }
}
