//! Prefix structure for generated workloads: shared system prompts and the
//! chained block hashes that let the prefix cache recognise equal prefixes.

use super::{RequestSource, RequestSpec};
use crate::kv::prefix_cache::mix;
use crate::request::Request;
use crate::rng::{self, StreamRng};
use crate::scenario::SharedPrefixCfg;
use crate::time::SimTime;
use rand_distr::{Distribution, Zipf};

/// Tokens per hashed block in generated workloads (vLLM's default block).
pub const HASH_BLOCK_TOKENS: u32 = 16;

/// Chained hashes of `blocks` blocks continuing from `prev` (None: the first
/// block), each block's content identified by `salt`.
pub fn chain(prev: Option<u64>, salt: u64, first_block: usize, blocks: usize) -> Vec<u64> {
    let mut h = prev.unwrap_or(0x005E_ED0F_C4A1);
    (first_block..first_block + blocks)
        .map(|j| {
            h = mix(h ^ salt, j as u64);
            h
        })
        .collect()
}

/// Gives every request a unique identity for its own blocks: a request's
/// prompt (and output) hash chain, salted by a per-run random id.
pub fn unique_salt(rng: &mut StreamRng) -> u64 {
    use rand::Rng;
    rng.random()
}

/// Prepends one of several system prompts, with Zipf popularity, to every
/// request of an inner source, and hashes the result so requests sharing a
/// system prompt share their first blocks.
pub struct SharedPrefix<S> {
    inner: S,
    cfg: SharedPrefixCfg,
    zipf: Zipf<f64>,
    pick_rng: StreamRng,
    salt_rng: StreamRng,
    variant_salt: u64,
}

impl<S: RequestSource> SharedPrefix<S> {
    pub fn new(inner: S, cfg: &SharedPrefixCfg, seed: u64) -> Self {
        SharedPrefix {
            inner,
            cfg: cfg.clone(),
            // Validated: variants ≥ 1, exponent ≥ 0.
            zipf: Zipf::new(cfg.variants as f64, cfg.zipf_exponent).expect("validated zipf"),
            pick_rng: rng::stream(seed, "workload.shared_prefix.variant"),
            salt_rng: rng::stream(seed, "workload.shared_prefix.salt"),
            variant_salt: unique_salt(&mut rng::stream(seed, "workload.shared_prefix.variants")),
        }
    }
}

impl<S: RequestSource> RequestSource for SharedPrefix<S> {
    fn next_request(&mut self) -> Option<RequestSpec> {
        let mut spec = self.inner.next_request()?;
        // Zipf samples 1..=variants; variant 1 is the most popular.
        let variant = self.zipf.sample(&mut self.pick_rng) as u64;
        let sys_blocks = (self.cfg.tokens / HASH_BLOCK_TOKENS) as usize;
        let mut hashes = chain(
            None,
            self.variant_salt ^ mix(variant, 0xA11CE),
            0,
            sys_blocks,
        );
        spec.prompt_tokens += self.cfg.tokens;
        let last = hashes.last().copied();
        if spec.prefix_hashes.is_empty() {
            // The rest of the request (prompt and output) is its own.
            let total = (spec.prompt_tokens + spec.output_tokens) / HASH_BLOCK_TOKENS;
            let salt = unique_salt(&mut self.salt_rng);
            hashes.extend(chain(last, salt, sys_blocks, total as usize - sys_blocks));
        } else if spec.hash_block_tokens == HASH_BLOCK_TOKENS
            && self.cfg.tokens % HASH_BLOCK_TOKENS == 0
        {
            // Re-chain the inner hashes onto the system prompt: equal inner
            // prefixes still hash equal. (Inner hashes of another block size
            // cannot be re-aligned and are dropped: only the system prompt
            // is then shareable.)
            let anchor = last.unwrap_or(0);
            hashes.extend(spec.prefix_hashes.iter().map(|&h| mix(h, anchor)));
        }
        spec.prefix_hashes = hashes;
        spec.hash_block_tokens = HASH_BLOCK_TOKENS;
        if self.cfg.pin {
            spec.pinnable_tokens = self.cfg.tokens;
        }
        Some(spec)
    }

    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        self.inner.on_request_end(req, now, completed)
    }

    fn open_loop(&self) -> bool {
        self.inner.open_loop()
    }

    fn tenant_name(&self, index: u32) -> Option<String> {
        self.inner.tenant_name(index)
    }
}
