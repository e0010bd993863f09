//! Chained prefix-block hashes. A prefix cache (vLLM's automatic prefix
//! caching, SGLang's radix cache, Mooncake's store) reuses a KV block only
//! when every block before it matches too, so block `i`'s hash must depend
//! on blocks `0..=i`. Traces publish per-block ids that are not always
//! chained (Qwen-Bailian hashes each 16-token block on its own; RAGPulse
//! lists content segments), so every reader chains them here: equal chained
//! hash ⇔ equal ids up to and including that block (up to 64-bit collisions).

/// Start of every chain (an arbitrary odd constant: the digits of π).
const CHAIN_SEED: u64 = 0x3243_F6A8_885A_308D;

/// SplitMix64's finalizer (Steele et al., 2014): a bijection on u64 that
/// spreads every input bit over the output.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The hash of a block with id `id` following a prefix hashed `prev`: one
/// multiply on the serial path, since a long prompt chains hundreds of
/// blocks. Every step (multiplying by an odd constant, xor, rotation) is a
/// bijection, so for a fixed `prev` it is injective in `id`, and for a
/// fixed `id` injective in `prev`: the same block after different prefixes
/// never shares a hash, and different blocks collide only by chance.
#[inline]
pub fn chain(prev: u64, id: u64) -> u64 {
    (prev ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .rotate_left(27)
        .wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// Replaces per-block ids with chained hashes, in place.
pub fn chain_in_place(ids: &mut [u64]) {
    let mut h = CHAIN_SEED;
    for x in ids.iter_mut() {
        h = chain(h, *x);
        *x = h;
    }
}

/// Builds chained block hashes from variable-length content segments
/// (RAGPulse): the prompt is the concatenation of segments, cut into blocks
/// of `block_tokens`; a block's content is the list of segment ids it
/// overlaps (a segment's tokens are fixed by its id, so given the same
/// preceding blocks, the same ids mean the same tokens). Only full blocks
/// get a hash, as only full blocks are cached.
pub struct SegmentBlocks {
    block_tokens: u64,
    prev: u64,
    acc: u64,
    filled: u64,
    blocks: u64,
    max_blocks: u64,
}

impl SegmentBlocks {
    /// At most `max_blocks` blocks are produced (the prompt's full blocks).
    pub fn new(block_tokens: u32, max_blocks: u64) -> SegmentBlocks {
        SegmentBlocks {
            block_tokens: block_tokens.max(1) as u64,
            prev: CHAIN_SEED,
            acc: CHAIN_SEED,
            filled: 0,
            blocks: 0,
            max_blocks,
        }
    }

    /// Appends a segment of `tokens` tokens with (globally unique) key `id`,
    /// pushing the hash of every block it completes onto `out`.
    pub fn push(&mut self, id: u64, mut tokens: u64, out: &mut Vec<u64>) {
        // Blocks lying wholly inside the segment all have the same content
        // key, computed once.
        let whole = chain(CHAIN_SEED, id);
        while tokens > 0 && self.blocks < self.max_blocks {
            if self.filled == 0 && tokens >= self.block_tokens {
                self.prev = chain(self.prev, whole);
                out.push(self.prev);
                self.blocks += 1;
                tokens -= self.block_tokens;
                continue;
            }
            // The segment overlaps the current block.
            self.acc = chain(self.acc, id);
            let room = self.block_tokens - self.filled;
            let take = room.min(tokens);
            self.filled += take;
            tokens -= take;
            if self.filled == self.block_tokens {
                self.prev = chain(self.prev, self.acc);
                out.push(self.prev);
                self.blocks += 1;
                self.acc = CHAIN_SEED;
                self.filled = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chained_hashes_are_equal_exactly_for_equal_prefixes() {
        let mut a = vec![0, 1, 2, 3];
        let mut b = vec![0, 1, 9, 3];
        let mut c = vec![5, 1, 2, 3];
        chain_in_place(&mut a);
        chain_in_place(&mut b);
        chain_in_place(&mut c);
        assert_eq!(a[..2], b[..2]);
        // Same id 3 at position 3, different prefix: different hash.
        assert_ne!(a[2], b[2]);
        assert_ne!(a[3], b[3]);
        assert!(a.iter().zip(&c).all(|(x, y)| x != y));
    }

    #[test]
    fn segments_are_cut_into_full_blocks() {
        // 10 + 10 + 5 tokens in blocks of 8: blocks [s1 s1..][s1 s2][s2]
        let mut out = Vec::new();
        let mut s = SegmentBlocks::new(8, 100);
        for (id, n) in [(1, 10), (2, 10), (3, 5)] {
            s.push(id, n, &mut out);
        }
        assert_eq!(out.len(), 3, "25 tokens = 3 full blocks of 8");
        // Another prompt sharing the first segment only shares block 0.
        let mut other = Vec::new();
        let mut s = SegmentBlocks::new(8, 100);
        for (id, n) in [(1, 10), (7, 10)] {
            s.push(id, n, &mut other);
        }
        assert_eq!(other[0], out[0]);
        assert_ne!(other[1], out[1]);
        // The block limit caps the output.
        let mut capped = Vec::new();
        let mut s = SegmentBlocks::new(8, 2);
        s.push(1, 100, &mut capped);
        assert_eq!(capped.len(), 2);
    }
}
