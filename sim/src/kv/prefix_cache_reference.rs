//! A plain prefix cache that keeps its eviction order in an ordered set of
//! (last use, node) instead of the fast cache's intrusive LRU list. For
//! tests only: the reference the fast cache must agree with block for
//! block (the tests below).

use super::prefix_cache::PrefixCacheStats;
use std::collections::BTreeSet;

/// The block-hash index. Keys are prefix hashes (or a trace's small block
/// ids), looked up several times per block per request: SipHash's DoS
/// resistance buys nothing here, and foldhash is several times faster. The
/// map is never iterated where order could reach an output.
type HashIndex = std::collections::HashMap<u64, u32, foldhash::fast::FixedState>;

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    hash: u64,
    parent: u32,
    children: u32,
    refs: u32,
    last_use: u64,
    pinned: bool,
}

/// The cached prefix blocks of one replica (reference implementation).
#[derive(Clone, Debug, Default)]
pub struct ReferenceCache {
    nodes: Vec<Node>,
    free_slots: Vec<u32>,
    by_hash: HashIndex,
    /// Unreferenced, unpinned leaves by (last use, node): the eviction order.
    evictable: BTreeSet<(u64, u32)>,
    /// Nodes with no references (evictable or not, e.g. inner or pinned).
    unreferenced: u64,
    /// Unreferenced nodes that are not pinned: what eviction can reach.
    reclaimable: u64,
    pinned: u64,
    pin_budget: u64,
    tick: u64,
    pub stats: PrefixCacheStats,
}

impl ReferenceCache {
    /// A cache that pins at most `pin_budget` blocks.
    pub fn new(pin_budget: u64) -> ReferenceCache {
        ReferenceCache {
            pin_budget,
            ..ReferenceCache::default()
        }
    }

    /// Blocks the cache holds (referenced or not).
    pub fn blocks(&self) -> u64 {
        self.by_hash.len() as u64
    }

    /// Cached blocks no running sequence references.
    pub fn unreferenced_blocks(&self) -> u64 {
        self.unreferenced
    }

    /// Blocks that eviction could free now.
    pub fn evictable_blocks(&self) -> u64 {
        // Evicting a leaf exposes its parent; sequences reference whole
        // chains from the first block, so every unreferenced, unpinned node
        // is reachable that way.
        self.reclaimable
    }

    /// Σ references over cached blocks.
    pub fn total_refs(&self) -> u64 {
        self.by_hash
            .values()
            .map(|&n| self.nodes[n as usize].refs as u64)
            .sum()
    }

    pub fn pinned_blocks(&self) -> u64 {
        self.pinned
    }

    /// Leading blocks of `hashes` that are cached.
    pub fn match_len(&self, hashes: &[u64]) -> usize {
        hashes
            .iter()
            .take_while(|h| self.by_hash.contains_key(h))
            .count()
    }

    fn is_evictable(&self, n: u32) -> bool {
        let node = &self.nodes[n as usize];
        node.refs == 0 && node.children == 0 && !node.pinned
    }

    fn set_evictable(&mut self, n: u32, on: bool) {
        let key = (self.nodes[n as usize].last_use, n);
        if on {
            self.evictable.insert(key);
        } else {
            self.evictable.remove(&key);
        }
    }

    /// Takes a reference on the cached blocks of `hashes` (all must be
    /// cached: call with a prefix of length ≤ [`Self::match_len`]).
    pub fn acquire(&mut self, hashes: &[u64]) {
        self.tick += 1;
        for h in hashes {
            let n = self.by_hash[h];
            if self.is_evictable(n) {
                self.set_evictable(n, false);
            }
            let node = &mut self.nodes[n as usize];
            if node.refs == 0 {
                self.unreferenced -= 1;
                self.reclaimable -= (!node.pinned) as u64;
            }
            node.refs += 1;
            node.last_use = self.tick;
        }
    }

    /// Drops a reference on each block of `hashes`; unreferenced leaves
    /// become evictable, most recently used last.
    pub fn release(&mut self, hashes: &[u64]) {
        self.tick += 1;
        // Release deepest first so a parent's eviction key is set after its
        // children's: leaves go before the prefixes they hang from.
        for h in hashes.iter().rev() {
            let n = self.by_hash[h];
            let node = &mut self.nodes[n as usize];
            debug_assert!(node.refs > 0, "prefix block released more than acquired");
            node.refs -= 1;
            node.last_use = self.tick;
            if node.refs == 0 {
                self.unreferenced += 1;
                self.reclaimable += (!node.pinned) as u64;
                if self.is_evictable(n) {
                    self.set_evictable(n, true);
                }
            }
        }
    }

    /// Inserts the chain `hashes` (block i's parent is block i − 1, the
    /// first one's is `parent_hash`) as `insert` would one by one,
    /// stopping at the first block that is already cached or whose parent is
    /// not; the first `pinnable` blocks may be pinned. Returns how many were
    /// inserted. One index probe per block: each parent is the node just
    /// made, not looked up again by hash.
    pub fn insert_run(
        &mut self,
        hashes: &[u64],
        parent_hash: Option<u64>,
        pinnable: usize,
    ) -> usize {
        let mut parent = match parent_hash {
            Some(p) => match self.by_hash.get(&p) {
                Some(&n) => n,
                None => return 0,
            },
            None => NONE,
        };
        for (i, &hash) in hashes.iter().enumerate() {
            let slot = match self.by_hash.entry(hash) {
                std::collections::hash_map::Entry::Occupied(_) => return i,
                std::collections::hash_map::Entry::Vacant(v) => {
                    let slot = match self.free_slots.pop() {
                        Some(slot) => slot,
                        None => {
                            self.nodes.push(Node {
                                hash,
                                parent: NONE,
                                children: 0,
                                refs: 0,
                                last_use: 0,
                                pinned: false,
                            });
                            (self.nodes.len() - 1) as u32
                        }
                    };
                    v.insert(slot);
                    slot
                }
            };
            self.tick += 1;
            let pinned = i < pinnable && self.pinned < self.pin_budget;
            self.pinned += pinned as u64;
            self.nodes[slot as usize] = Node {
                hash,
                parent,
                children: 0,
                refs: 1,
                last_use: self.tick,
                pinned,
            };
            if parent != NONE {
                if self.is_evictable(parent) {
                    self.set_evictable(parent, false);
                }
                self.nodes[parent as usize].children += 1;
            }
            self.stats.inserted_blocks += 1;
            parent = slot;
        }
        hashes.len()
    }

    /// Evicts up to `want` unreferenced blocks, least recently used leaves
    /// first. Returns how many were evicted (their KV blocks are free now).
    pub fn evict(&mut self, want: u64) -> u64 {
        let mut done = 0;
        // A parent exposed by evicting its last child that would be the next
        // smallest key is evicted next without a round trip through the set:
        // chains go leaf to root with one set operation, in the same order.
        let mut next: Option<u32> = None;
        while done < want {
            let n = match next.take() {
                Some(n) => n,
                None => match self.evictable.pop_first() {
                    Some((_, n)) => n,
                    None => break,
                },
            };
            let (hash, parent) = {
                let node = &self.nodes[n as usize];
                (node.hash, node.parent)
            };
            self.by_hash.remove(&hash);
            self.free_slots.push(n);
            self.unreferenced -= 1;
            self.reclaimable -= 1;
            done += 1;
            if parent != NONE {
                self.nodes[parent as usize].children -= 1;
                if self.is_evictable(parent) {
                    let key = (self.nodes[parent as usize].last_use, parent);
                    let first = self.evictable.first().copied();
                    if done < want && first.is_none_or(|f| key < f) {
                        next = Some(parent);
                    } else {
                        self.evictable.insert(key);
                    }
                }
            }
        }
        self.stats.evicted_blocks += done;
        done
    }

    /// Checks the internal bookkeeping (tests and end-of-run checks), in
    /// time linear in the cache size.
    pub fn check(&self) -> Result<(), String> {
        let (mut unref, mut pinned, mut reclaimable) = (0, 0, 0);
        let mut children = vec![0u32; self.nodes.len()];
        for (&h, &n) in &self.by_hash {
            let node = &self.nodes[n as usize];
            if node.hash != h {
                return Err(format!("node {n} filed under the wrong hash"));
            }
            unref += (node.refs == 0) as u64;
            pinned += node.pinned as u64;
            reclaimable += (node.refs == 0 && !node.pinned) as u64;
            if node.parent != NONE {
                children[node.parent as usize] += 1;
            }
        }
        for &n in self.by_hash.values() {
            let node = &self.nodes[n as usize];
            let found = children[n as usize];
            if found != node.children {
                return Err(format!(
                    "node {n}: {} children recorded, {found} found",
                    node.children
                ));
            }
            if self.evictable.contains(&(node.last_use, n)) != self.is_evictable(n) {
                return Err(format!("node {n}: eviction set out of date"));
            }
        }
        if unref != self.unreferenced || pinned != self.pinned || reclaimable != self.reclaimable {
            return Err("unreferenced, pinned or reclaimable count out of date".into());
        }
        if self.evictable.len() as u64 > self.unreferenced {
            return Err("more evictable than unreferenced blocks".into());
        }
        Ok(())
    }
}

impl ReferenceCache {
    /// The cached hashes, sorted (what the equivalence tests compare).
    pub fn cached_hashes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.by_hash.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

/// The fast cache against this reference.
#[cfg(test)]
mod tests {
    use super::ReferenceCache;
    use crate::kv::prefix_cache::{mix, PrefixCache};

    /// The fast cache and the ordered-set reference side by side, driven the
    /// way a replica drives its cache.
    struct Pair {
        fast: PrefixCache,
        slow: ReferenceCache,
    }

    impl Pair {
        fn same(&self) -> Result<(), proptest::test_runner::TestCaseError> {
            let (f, s) = (&self.fast, &self.slow);
            proptest::prop_assert_eq!(f.cached_hashes(), s.cached_hashes());
            proptest::prop_assert_eq!(f.blocks(), s.blocks());
            proptest::prop_assert_eq!(f.unreferenced_blocks(), s.unreferenced_blocks());
            proptest::prop_assert_eq!(f.evictable_blocks(), s.evictable_blocks());
            proptest::prop_assert_eq!(f.pinned_blocks(), s.pinned_blocks());
            proptest::prop_assert_eq!(f.total_refs(), s.total_refs());
            proptest::prop_assert_eq!(&f.stats, &s.stats);
            proptest::prop_assert!(f.check().is_ok(), "{:?}", f.check());
            proptest::prop_assert!(s.check().is_ok(), "{:?}", s.check());
            Ok(())
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
        /// Random sequences over a few branching chains (shared roots,
        /// varied lengths and forks, pinnable prefixes under a small pin
        /// budget) are admitted (match, acquire), publish their blocks in
        /// one or two runs, retire (release) in random order, and blocks are
        /// evicted in random amounts: the segment tree gives the same matches,
        /// insertions, evictions, cached blocks and counters as the ordered
        /// set of single blocks after every step.
        #[test]
        fn segments_match_the_per_block_reference(
            pin_budget in 0u64..6,
            ops in proptest::collection::vec(
                (0u64..4, 0u64..4, 1usize..14, 0usize..14, 0u64..24, 0usize..4, proptest::bool::ANY),
                1..80,
            )
        ) {
            let mut p = Pair { fast: PrefixCache::new(pin_budget), slow: ReferenceCache::new(pin_budget) };
            // (hashes, shared) of the live sequences.
            let mut held: Vec<(Vec<u64>, usize)> = Vec::new();
            for (root, fork, len, split, evict, pinnable, via_match) in ops {
                // A chain: a few roots, a fork point after which blocks
                // differ by `fork`, so chains share prefixes of many lengths.
                let mut h = root;
                let hs: Vec<u64> = (0..len)
                    .map(|i| {
                        h = mix(h, if i >= 3 { i as u64 + 100 * fork } else { i as u64 });
                        h
                    })
                    .collect();
                let m = p.slow.match_len(&hs);
                proptest::prop_assert_eq!(p.fast.match_len(&hs), m);
                p.slow.acquire(&hs[..m]);
                if via_match {
                    p.fast.acquire(&hs[..m]);
                } else {
                    proptest::prop_assert_eq!(p.fast.acquire_prefix(&hs), m);
                }
                // Publish the rest as the replica does: one run at prefill,
                // perhaps a second at retirement.
                let mut shared = m;
                let cut = m + split.min(len - m);
                for end in [cut, len] {
                    if shared >= end {
                        continue;
                    }
                    let parent = (shared > 0).then(|| hs[shared - 1]);
                    let a = p.fast.insert_run(&hs[..end], shared, pinnable);
                    let b = p.slow.insert_run(&hs[shared..end], parent, pinnable.saturating_sub(shared));
                    proptest::prop_assert_eq!(a, b);
                    shared += a;
                    if shared < end {
                        break; // someone else's copy: the rest stays private
                    }
                }
                held.push((hs, shared));
                if held.len() > 3 {
                    let (h, shared) = held.remove((evict as usize) % held.len());
                    p.fast.release(&h[..shared]);
                    p.slow.release(&h[..shared]);
                }
                p.same()?;
                proptest::prop_assert_eq!(p.fast.evict(evict), p.slow.evict(evict));
                p.same()?;
            }
            for (h, shared) in held {
                p.fast.release(&h[..shared]);
                p.slow.release(&h[..shared]);
            }
            proptest::prop_assert_eq!(p.fast.evict(u64::MAX), p.slow.evict(u64::MAX));
            p.same()?;
        }
    }
}
