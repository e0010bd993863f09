//! The paged KV-cache block allocator of one replica (vLLM PagedAttention,
//! Kwon et al., SOSP'23): device memory for KV is cut into fixed-size blocks of
//! `block_size` tokens, and a sequence holds ⌈tokens / block_size⌉ of them.
//!
//! Without prefix sharing a block's identity does not matter, so the
//! allocator keeps counts only; the ledger (granted, freed) lets every run
//! check that no block leaked. Prefix caching (shared, reference-counted
//! blocks) extends this type.

pub mod prefix_cache;
#[cfg(test)]
mod prefix_cache_reference;
pub mod segment_tree;

pub use prefix_cache::{PrefixCache, PrefixCacheStats};

/// Block ledger of one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockAllocator {
    total: u64,
    free: u64,
    granted: u64,
    freed: u64,
}

impl BlockAllocator {
    pub fn new(total_blocks: u64) -> BlockAllocator {
        BlockAllocator {
            total: total_blocks,
            free: total_blocks,
            granted: 0,
            freed: 0,
        }
    }

    /// Grants `n` blocks if that many are free; all or nothing.
    #[inline]
    pub fn allocate(&mut self, n: u64) -> bool {
        if n > self.free {
            return false;
        }
        self.free -= n;
        self.granted += n;
        true
    }

    /// Returns `n` blocks. Returning more than are held is a logic error.
    #[inline]
    pub fn release(&mut self, n: u64) {
        debug_assert!(
            self.free + n <= self.total,
            "released more KV blocks than held"
        );
        self.free = (self.free + n).min(self.total);
        self.freed += n;
    }

    pub fn total(&self) -> u64 {
        self.total
    }
    pub fn free(&self) -> u64 {
        self.free
    }
    pub fn used(&self) -> u64 {
        self.total - self.free
    }
    pub fn granted(&self) -> u64 {
        self.granted
    }
    pub fn freed(&self) -> u64 {
        self.freed
    }

    /// Blocks needed to hold `tokens` tokens.
    #[inline]
    pub fn blocks_for(tokens: u64, block_size: u64) -> u64 {
        tokens.div_ceil(block_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_balances_and_refuses_overcommit() {
        let mut a = BlockAllocator::new(10);
        assert!(a.allocate(7));
        assert!(!a.allocate(4));
        assert_eq!(a.free(), 3);
        a.release(5);
        assert!(a.allocate(8));
        assert_eq!(a.granted(), 15);
        assert_eq!(a.freed(), 5);
        assert_eq!(a.granted(), a.freed() + a.used());
        assert_eq!(BlockAllocator::blocks_for(33, 16), 3);
        assert_eq!(BlockAllocator::blocks_for(32, 16), 2);
    }
}
