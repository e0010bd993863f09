//! The KV-cache groups of a hybrid model, as vLLM's hybrid KV cache manager
//! lays them out in one shared block pool (vLLM v1,
//! `vllm/v1/core/kv_cache_utils.py` `_get_kv_cache_groups_uniform_page_size`,
//! `vllm/v1/core/single_type_kv_cache_manager.py`):
//!
//! - The layers of each attention kind are cut into groups of `group_size`
//!   layers: the fewest layers any kind has, or the most when the most is
//!   below 1.25 × the fewest (fewer padding slots). A kind's last group may
//!   be short; its slots are padding.
//! - A block of the pool is `group_size` pages, one per slot, and every group
//!   takes its blocks from the same pool. A full-attention group holds a
//!   block per `block_size` tokens (`FullAttentionManager`).
//! - A sliding-window group frees the blocks that fall out of the window
//!   before it allocates (`SlidingWindowManager.remove_skipped_blocks`: the
//!   blocks before `(computed − window + 1) / block_size`), and a
//!   chunked-local group those before the current chunk
//!   (`ChunkedLocalAttentionManager`: before `computed / chunk × chunk`). New
//!   blocks cover the tokens being computed, so during a prefill chunk a
//!   windowed group holds the window plus the chunk, and in decode at most
//!   `⌈window / block_size⌉ + 1` blocks.
//! - A linear-attention (Mamba-style state) group holds one block per
//!   sequence (`MambaManager`); vLLM raises the attention block size to
//!   the smallest multiple of 16 tokens whose page holds one layer's state
//!   (`HybridAttentionMambaModelConfig.verify_and_update_config`: "Setting
//!   attention block size to N tokens to ensure that attention page size is
//!   >= mamba page size"), and pads the state's page to it.
//!
//! A sequence of a hybrid model therefore holds, besides its full-attention
//! blocks, a number of blocks that stops growing past the window (or does
//! not grow at all): [`KvGroups::extra_blocks`]. SGLang sizes separate
//! pools instead (`SWAKVPool`, `HybridReqToTokenPool`); servesim models
//! vLLM's shared pool.

use crate::catalog::{Dtype, LayerKind, ModelArch};
use serde::Serialize;

/// vLLM sizes the group by the larger count when it is below this multiple
/// of the smaller one.
const GROUP_BY_MAX_BELOW: f64 = 1.25;

/// Attention kernels take block sizes in multiples of 16 tokens; vLLM's
/// raised block size for state pages is one.
const STATE_BLOCK_ALIGN: u32 = 16;

/// The groups of one windowed kind (sliding or chunked-local).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WindowedGroups {
    /// Groups of this kind.
    pub groups: u32,
    /// Tokens the kind attends to (sliding window, or local chunk).
    pub window: u32,
    /// Chunked-local (frees at chunk boundaries) rather than sliding.
    pub chunked: bool,
}

impl WindowedGroups {
    /// Blocks one group holds after allocating slots for `tokens` tokens of
    /// a sequence whose first `computed` tokens are in the cache.
    pub fn held(&self, computed: u32, tokens: u32, block_size: u32) -> u32 {
        let bs = block_size.max(1);
        let rows = tokens.div_ceil(bs);
        let skipped = if self.chunked {
            computed / self.window.max(1) * self.window.max(1) / bs
        } else {
            (computed + 1).saturating_sub(self.window) / bs
        };
        rows.saturating_sub(skipped)
    }
}

/// How a hybrid model's layers share the block pool: what a block spans and
/// what each sequence holds beyond its full-attention blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct KvGroups {
    /// Layers (page slots) one block spans.
    pub group_size: u32,
    /// Full-attention groups (each a block per `block_size` tokens).
    pub full_groups: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sliding: Option<WindowedGroups>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunked: Option<WindowedGroups>,
    /// Linear-attention groups (one block per sequence each).
    pub state_groups: u32,
    /// Tokens per block: the engine's, or raised for state pages.
    pub block_size: u32,
}

impl KvGroups {
    /// The groups of `model` with the engine's `block_size` on one GPU of
    /// `tp`; `None` for a model whose every layer is full attention (one
    /// group of every layer: the plain paged cache).
    pub fn new(model: &ModelArch, tp: u32, kv_dtype: Dtype, block_size: u32) -> Option<KvGroups> {
        if model.uniform_attention() {
            return None;
        }
        let c = model.layer_kind_counts();
        let present: Vec<u32> = c.iter().copied().filter(|&n| n > 0).collect();
        let (min, max) = (
            *present.iter().min().expect("a layer"),
            *present.iter().max().expect("a layer"),
        );
        let group_size = if (max as f64) < min as f64 * GROUP_BY_MAX_BELOW {
            max
        } else {
            min
        };
        let groups = |n: u32| n.div_ceil(group_size);
        let windowed = |kind: LayerKind, n: u32| {
            (n > 0).then(|| WindowedGroups {
                groups: groups(n),
                window: model.window(kind).unwrap_or(0),
                chunked: kind == LayerKind::Chunked,
            })
        };
        let block_size = match model.linear_attention {
            Some(l) if c[3] > 0 => {
                let page_per_token = model.kv_bytes_per_token_layer(tp, kv_dtype);
                let state = l.state_bytes(tp);
                let align = STATE_BLOCK_ALIGN as f64;
                let needed = (align * (state / (align * page_per_token)).ceil()) as u32;
                block_size.max(needed)
            }
            _ => block_size,
        };
        Some(KvGroups {
            group_size,
            full_groups: groups(c[0]),
            sliding: windowed(LayerKind::Sliding, c[1]),
            chunked: windowed(LayerKind::Chunked, c[2]),
            state_groups: groups(c[3]),
            block_size,
        })
    }

    /// Blocks a sequence (each of its `samples`) holds beyond the `rows`
    /// full-attention blocks the replica counts for it (one group's): the
    /// other full groups' rows, each windowed group's blocks after
    /// allocating for `tokens` tokens with `computed` cached, and one block
    /// per linear group.
    pub fn extra_blocks(&self, computed: u32, tokens: u32, rows: u32, samples: u32) -> u32 {
        let bs = self.block_size;
        let windowed = [self.sliding, self.chunked]
            .iter()
            .flatten()
            .map(|w| w.groups * w.held(computed, tokens, bs))
            .sum::<u32>();
        self.full_groups.saturating_sub(1) * rows + samples.max(1) * (windowed + self.state_groups)
    }

    /// The most blocks one sequence holds, all groups, on its way to
    /// `tokens` tokens in decode: its full rows, each windowed group's
    /// blocks up to the window's `⌈window / block_size⌉ + 1`, a block per
    /// linear group. What a sequence of `max_model_len` must find in the
    /// pool; it never falls as the sequence grows (the blocks a windowed
    /// group holds at one length rise and fall by a block between steps).
    pub fn sequence_blocks(&self, tokens: u32) -> u64 {
        let bs = self.block_size;
        let rows = tokens.div_ceil(bs) as u64;
        let windowed: u64 = [self.sliding, self.chunked]
            .iter()
            .flatten()
            .map(|w| w.groups as u64 * rows.min(w.window.div_ceil(bs) as u64 + 1))
            .sum();
        self.full_groups.max(1) as u64 * rows + windowed + self.state_groups as u64
    }

    /// Layers of the stage `[first, first + n)` in the fullest group: the
    /// pages a block spans on that stage's GPUs (vLLM's KV tensors are one
    /// per slot, shared by the slot's layer of every group).
    pub fn stage_slots(&self, model: &ModelArch, first: u32, n: u32) -> u32 {
        let mut seen = [0u32; 4];
        let mut fullest = 0;
        let mut in_group = std::collections::BTreeMap::new();
        for i in 0..model.layers {
            let k = LayerKind::ALL
                .iter()
                .position(|&x| x == model.layer_kind(i))
                .expect("a kind");
            let group = (k, seen[k] / self.group_size);
            seen[k] += 1;
            if (first..first + n).contains(&i) {
                let e = in_group.entry(group).or_insert(0u32);
                *e += 1;
                fullest = fullest.max(*e);
            }
        }
        fullest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use proptest::prelude::*;

    fn groups(model: &str) -> (ModelArch, KvGroups) {
        let (m, _) = catalog::model(model).unwrap();
        let g = KvGroups::new(&m, 1, Dtype::Bf16, 16).unwrap();
        (m, g)
    }

    #[test]
    fn groups_as_vllm_forms_them() {
        // gpt-oss-120b: 18 full + 18 sliding (128) → group_size 18, one of each.
        let (m, g) = groups("gpt-oss-120b");
        assert_eq!((g.group_size, g.full_groups, g.state_groups), (18, 1, 0));
        assert_eq!(g.sliding.unwrap().groups, 1);
        assert_eq!(g.stage_slots(&m, 0, 36), 18);
        assert_eq!(g.stage_slots(&m, 0, 18), 9);
        // Gemma 3 27B: 62 layers, 5 sliding of 6 → 10 full, 52 sliding:
        // group_size 10, six sliding groups (the last has 2 layers, 8 slots padding).
        let (_, g) = groups("gemma-3-27b");
        assert_eq!((g.group_size, g.full_groups), (10, 1));
        assert_eq!(g.sliding.unwrap().groups, 6);
        // Llama 4 Scout: 48 layers, chunked on 3 of 4 → 12 full, 36 chunked.
        let (_, g) = groups("llama-4-scout");
        assert_eq!((g.group_size, g.full_groups), (12, 1));
        assert_eq!(g.chunked.unwrap().groups, 3);
        // Plain models keep the single group.
        let (m, _) = catalog::model("llama-3.1-8b").unwrap();
        assert!(KvGroups::new(&m, 1, Dtype::Bf16, 16).is_none());
    }

    #[test]
    fn linear_groups_raise_the_block_size_to_the_state_page() {
        // Qwen3.5-397B-A17B: 60 layers, 15 full + 45 Gated DeltaNet.
        let (m, g) = groups("qwen3.5-397b-a17b");
        assert_eq!((g.group_size, g.full_groups, g.state_groups), (15, 1, 3));
        // One layer's state: 64 value heads × 128 × 128 × 4 B + 3 × (2·2048
        // + 8192) × 2 B = 4 268 032 B. One token's page: 2 KV heads × 256 ×
        // 2 (K, V) × 2 B = 2048 B. 16 × ⌈4 268 032 / (16 × 2048)⌉ = 16 × 131.
        let state = m.linear_attention.unwrap().state_bytes(1);
        assert_eq!(state, 4_268_032.0);
        assert_eq!(m.kv_bytes_per_token_layer(1, Dtype::Bf16), 2048.0);
        assert_eq!(g.block_size, 2096);
        // A sequence holds its full rows plus three state blocks, whatever its length.
        assert_eq!(g.sequence_blocks(1), 1 + 3);
        assert_eq!(g.sequence_blocks(100_000), 100_000u64.div_ceil(2096) + 3);
    }

    #[test]
    fn sliding_group_frees_what_leaves_the_window() {
        let w = WindowedGroups {
            groups: 1,
            window: 128,
            chunked: false,
        };
        // A 1000-token prefill chunk from nothing holds all its rows.
        assert_eq!(w.held(0, 1000, 16), 63);
        // Decoding token 1001 with 1000 computed: blocks before
        // (1000 − 128 + 1) / 16 = 54 are gone; 63 − 54 = 9 remain.
        assert_eq!(w.held(1000, 1001, 16), 9);
        // A second 512-token chunk after 1000: the window plus the chunk.
        assert_eq!(w.held(1000, 1512, 16), 95 - 54);
        // Chunked-local (8192): blocks before the current chunk are freed.
        let c = WindowedGroups {
            groups: 1,
            window: 8192,
            chunked: true,
        };
        assert_eq!(c.held(10_000, 10_001, 16), 626 - 512);
        assert_eq!(c.held(8191, 8192, 16), 512);
    }

    proptest! {
        /// In decode, a sliding or chunked group's blocks never exceed the
        /// window's (plus one partial block), however long the sequence, and
        /// a linear group's never grow at all; a full group's keep growing.
        #[test]
        fn windowed_and_linear_blocks_stop_growing(
            ctx in 0u32..3_000_000,
            more in 1u32..1_000_000,
            w in 1u32..20_000,
            bs in prop::sample::select(vec![1u32, 16, 32, 64, 256]),
            chunked: bool,
            state in 0u32..4,
        ) {
            let g = KvGroups {
                group_size: 1,
                full_groups: 1,
                sliding: (!chunked).then_some(WindowedGroups { groups: 1, window: w, chunked: false }),
                chunked: chunked.then_some(WindowedGroups { groups: 1, window: w, chunked: true }),
                state_groups: state,
                block_size: bs,
            };
            let cap = w.div_ceil(bs) as u64 + 1 + state as u64;
            // In decode (token t with t − 1 cached) what the groups hold
            // beside the full rows stays within the window and the state,
            // and within the plan's bound.
            let extra = |t: u32| g.extra_blocks(t - 1, t, t.div_ceil(bs), 1) as u64;
            for t in [ctx + 1, ctx + more] {
                prop_assert!(extra(t) <= cap, "{} > {cap}", extra(t));
                prop_assert!(t.div_ceil(bs) as u64 + extra(t) <= g.sequence_blocks(t));
            }
            prop_assert!(g.sequence_blocks(ctx + more) >= g.sequence_blocks(ctx + 1));
            // Within the window nothing has been freed yet.
            if ctx < w && !chunked {
                prop_assert_eq!(extra(ctx + 1), (ctx + 1).div_ceil(bs) as u64 + state as u64);
            }
        }
    }
}
