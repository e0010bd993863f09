//! Automatic prefix caching: KV blocks of shared prompt prefixes are kept
//! after their sequences end and reused by later requests with the same
//! prefix, as in SGLang's RadixAttention (Zheng et al., 2024) and vLLM's
//! automatic prefix caching.
//!
//! Requests carry their prompt as chained block hashes (the hash of block i
//! covers blocks 0..=i), so equal hash ⇔ equal prefix, and the radix tree over
//! token blocks collapses to a map from hash to node plus parent links. A
//! node is one cached KV block: referenced by the running sequences using
//! it, or unreferenced and evictable. Eviction takes least-recently-used
//! *leaves* first (a block whose descendants are cached is never evicted
//! before them: a child without its parent can never be matched). Pinned
//! nodes (e.g. a tenant's system prompt, up to a block budget) are never
//! evicted.
//!
//! The cache owns its nodes' blocks; the replica's [`super::BlockAllocator`]
//! counts them as used. Conservation: free + referenced + cached-unreferenced
//! = total blocks.

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

/// Counters reported in the summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrefixCacheStats {
    /// Prompt blocks looked up at first admission, and how many hit.
    pub lookup_blocks: u64,
    pub hit_blocks: u64,
    /// Prompt tokens at first admission, and how many were served from cache.
    pub lookup_tokens: u64,
    pub hit_tokens: u64,
    pub inserted_blocks: u64,
    pub evicted_blocks: u64,
}

/// The cached prefix blocks of one replica.
#[derive(Clone, Debug, Default)]
pub struct PrefixCache {
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

impl PrefixCache {
    /// A cache that pins at most `pin_budget` blocks.
    pub fn new(pin_budget: u64) -> PrefixCache {
        PrefixCache {
            pin_budget,
            ..PrefixCache::default()
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

    /// Adds `hash` (whose parent block is `parent_hash`, `None` for the first
    /// block) as a cached block referenced once by the caller, who hands over
    /// the KV block that holds it. `pinnable` blocks are pinned while the
    /// budget lasts. Returns false (nothing changes) if the hash is already
    /// cached or its parent is not.
    pub fn insert(&mut self, hash: u64, parent_hash: Option<u64>, pinnable: bool) -> bool {
        self.insert_run(&[hash], parent_hash, pinnable as usize) == 1
    }

    /// Inserts the chain `hashes` (block i's parent is block i − 1, the
    /// first one's is `parent_hash`) as [`Self::insert`] would one by one,
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

/// Turns a workload's chained hashes of `hash_block` tokens into chained
/// hashes of the engine's `block` tokens covering the first `tokens` tokens.
/// Engine block j is identified by the workload hash of the block holding
/// its last token, mixed with j: equal prefixes still give equal hashes, and
/// a block that extends past the hashed range gets none.
pub fn engine_block_hashes(hashes: &[u64], hash_block: u32, block: u32, tokens: u32) -> Vec<u64> {
    if hashes.is_empty() || hash_block == 0 || block == 0 {
        return Vec::new();
    }
    let covered = (hashes.len() as u64 * hash_block as u64).min(tokens as u64);
    let full = covered / block as u64;
    if hash_block == block {
        return hashes[..full as usize].to_vec();
    }
    (0..full)
        .map(|j| {
            let last_token = (j + 1) * block as u64 - 1;
            let h = hashes[(last_token / hash_block as u64) as usize];
            mix(h, j)
        })
        .collect()
}

/// SplitMix64-style mixing of a hash with an index.
pub fn mix(h: u64, i: u64) -> u64 {
    let mut z = h ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(seed: u64, n: usize) -> Vec<u64> {
        let mut h = seed;
        (0..n)
            .map(|i| {
                h = mix(h, i as u64);
                h
            })
            .collect()
    }

    fn insert_all(c: &mut PrefixCache, hs: &[u64]) {
        for (i, &h) in hs.iter().enumerate() {
            let parent = (i > 0).then(|| hs[i - 1]);
            c.insert(h, parent, false);
        }
    }

    #[test]
    fn shared_prefix_is_matched_and_evicted_leaves_first_lru() {
        let mut c = PrefixCache::new(0);
        let a = chain(1, 4);
        insert_all(&mut c, &a);
        assert_eq!(c.match_len(&a), 4);
        // A second sequence with the same first two blocks, then its own.
        let mut b = a[..2].to_vec();
        b.extend(chain(99, 2).iter().map(|&x| mix(x, 7)));
        assert_eq!(c.match_len(&b), 2);
        c.acquire(&b[..2]);
        c.insert(b[2], Some(b[1]), false);
        c.insert(b[3], Some(b[2]), false);
        c.release(&a);
        assert_eq!(
            c.unreferenced_blocks(),
            2,
            "a's own tail; shared blocks still held by b"
        );
        c.check().unwrap();
        // Only a's private tail (a[2], a[3]) can go, leaf first.
        assert_eq!(c.evict(10), 2);
        assert_eq!(c.match_len(&a), 2);
        c.release(&b);
        c.check().unwrap();
        assert_eq!(c.evict(10), 4);
        assert_eq!(c.blocks(), 0);
        assert_eq!(c.stats.evicted_blocks, 6);
    }

    /// The eviction order before the chain shortcut: every exposed parent
    /// goes through the ordered set.
    fn evict_reference(c: &mut PrefixCache, want: u64) -> u64 {
        let mut done = 0;
        while done < want {
            let Some((_, n)) = c.evictable.pop_first() else {
                break;
            };
            let node = c.nodes[n as usize].clone();
            c.by_hash.remove(&node.hash);
            c.free_slots.push(n);
            c.unreferenced -= 1;
            c.reclaimable -= 1;
            if node.parent != NONE {
                c.nodes[node.parent as usize].children -= 1;
                if c.is_evictable(node.parent) {
                    c.set_evictable(node.parent, true);
                }
            }
            done += 1;
        }
        c.stats.evicted_blocks += done;
        done
    }

    fn cached_set(c: &PrefixCache) -> Vec<u64> {
        let mut v: Vec<u64> = c.by_hash.keys().copied().collect();
        v.sort_unstable();
        v
    }

    proptest::proptest! {
        /// Random branching chains, referenced, released and evicted in
        /// random amounts: the shortcut evicts exactly the blocks the
        /// ordered set alone would, and the bookkeeping stays consistent.
        #[test]
        fn eviction_matches_the_ordered_set_reference(
            ops in proptest::collection::vec((0u64..6, 1usize..12, 0u64..20), 1..60)
        ) {
            let mut c = PrefixCache::new(3);
            let mut held: Vec<Vec<u64>> = Vec::new();
            for (root, len, evict) in ops {
                // Chains share prefixes: a few roots, lengths vary.
                let hs = chain(root, len);
                let m = c.match_len(&hs);
                c.acquire(&hs[..m]);
                for i in m..hs.len() {
                    if !c.insert(hs[i], (i > 0).then(|| hs[i - 1]), root == 0) {
                        c.release(&hs[..i]);
                        break;
                    }
                    if i + 1 == hs.len() {
                        held.push(hs.clone());
                    }
                }
                if m == hs.len() {
                    held.push(hs.clone());
                }
                if held.len() > 3 {
                    let h = held.remove((evict as usize) % held.len());
                    c.release(&h);
                }
                let mut reference = c.clone();
                let got = c.evict(evict);
                let want = evict_reference(&mut reference, evict);
                proptest::prop_assert_eq!(got, want);
                proptest::prop_assert_eq!(cached_set(&c), cached_set(&reference));
                proptest::prop_assert!(c.check().is_ok(), "{:?}", c.check());
            }
        }
    }

    #[test]
    fn pinned_blocks_survive_eviction_within_budget() {
        let mut c = PrefixCache::new(2);
        let a = chain(5, 3);
        for (i, &h) in a.iter().enumerate() {
            c.insert(h, (i > 0).then(|| a[i - 1]), true);
        }
        assert_eq!(c.pinned_blocks(), 2, "budget of two");
        c.release(&a);
        assert_eq!(c.evict(10), 1);
        assert_eq!(c.match_len(&a), 2);
        c.check().unwrap();
    }

    #[test]
    fn engine_hashes_follow_equal_prefixes_across_block_sizes() {
        let a = chain(3, 4); // 4 × 512 tokens
        let mut b = a.clone();
        b[3] = 12345; // differs in the last 512-token block
        let ea = engine_block_hashes(&a, 512, 16, 2048);
        let eb = engine_block_hashes(&b, 512, 16, 2048);
        assert_eq!(ea.len(), 128);
        assert_eq!(ea[..96], eb[..96]);
        assert!(ea[96..].iter().zip(&eb[96..]).all(|(x, y)| x != y));
        // Only the tokens of the prompt get hashes; a partial block gets none.
        assert_eq!(engine_block_hashes(&a, 512, 16, 1000).len(), 62);
        assert_eq!(engine_block_hashes(&a, 16, 16, 40), a[..2].to_vec());
    }
}
