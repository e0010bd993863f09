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

//!
//! Eviction order is kept in O(1) per operation by an intrusive LRU list
//! over the node slab (as SGLang's radix cache and vLLM's free-block queue
//! keep theirs), not an ordered set: see [`PrefixCache`] for why a list in
//! release order is exactly the least-recently-used-leaf order.

/// The block-hash index. Keys are prefix hashes (or a trace's small block
/// ids), looked up once per block per operation: SipHash's DoS resistance
/// buys nothing here, and foldhash is several times faster. The map is never
/// iterated where order could reach an output.
type HashIndex = std::collections::HashMap<u64, u32, foldhash::fast::FixedState>;

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    hash: u64,
    parent: u32,
    children: u32,
    refs: u32,
    /// The tick of its last acquire, release or insert (checks only: the
    /// list order is the eviction order).
    last_use: u64,
    /// Neighbours in the LRU list (`NONE` at the ends or when not listed).
    prev: u32,
    next: u32,
    listed: bool,
    pinned: bool,
    /// Has a pinned descendant, so it can never become a leaf again and is
    /// kept off the list (pins are never dropped).
    blocked: bool,
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
///
/// Eviction takes the least recently used unreferenced, unpinned leaf. The
/// list holds every unreferenced node that is neither pinned nor blocked
/// (inner ones too), appended when its last reference is released, deepest
/// block of the chain first. That is the eviction order, with no search:
/// - the list is in order of last use, since a node joins it only when it
///   is released (the newest tick) and leaves it when acquired or evicted;
/// - its head is a leaf: a child of a listed node is unreferenced (a
///   sequence references a whole chain from its first block), so its last
///   release also released the parent, at the same tick but listed before
///   it (deepest first), or the parent was used again later;
/// - evicting a leaf exposes its parent in the place its own last use gives
///   it, which is where the list already has it;
/// - two leaves never share a tick (the nodes of one acquire or release are
///   one chain, and a chain has one leaf), so the ordered set's tie-break by
///   slot never decided anything.
///
/// `prefix_cache_reference` keeps the ordered-set cache this replaced; the
/// tests drive both with random chains and compare them block for block.
#[derive(Clone, Debug)]
pub struct PrefixCache {
    nodes: Vec<Node>,
    free_slots: Vec<u32>,
    by_hash: HashIndex,
    /// Least recently released end of the LRU list, and the other end.
    head: u32,
    tail: u32,
    /// Nodes with no references (evictable or not, e.g. inner or pinned).
    unreferenced: u64,
    /// Unreferenced nodes that are not pinned: what eviction can reach.
    reclaimable: u64,
    pinned: u64,
    pin_budget: u64,
    tick: u64,
    pub stats: PrefixCacheStats,
}

impl Default for PrefixCache {
    fn default() -> PrefixCache {
        PrefixCache::new(0)
    }
}

impl PrefixCache {
    /// A cache that pins at most `pin_budget` blocks.
    pub fn new(pin_budget: u64) -> PrefixCache {
        PrefixCache {
            nodes: Vec::new(),
            free_slots: Vec::new(),
            by_hash: HashIndex::default(),
            head: NONE,
            tail: NONE,
            unreferenced: 0,
            reclaimable: 0,
            pinned: 0,
            pin_budget,
            tick: 0,
            stats: PrefixCacheStats::default(),
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

    fn unlink(&mut self, n: u32) {
        let (prev, next) = {
            let node = &mut self.nodes[n as usize];
            node.listed = false;
            (
                std::mem::replace(&mut node.prev, NONE),
                std::mem::replace(&mut node.next, NONE),
            )
        };
        match prev {
            NONE => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            x => self.nodes[x as usize].prev = prev,
        }
    }

    fn push_back(&mut self, n: u32) {
        let tail = self.tail;
        let node = &mut self.nodes[n as usize];
        node.listed = true;
        node.prev = tail;
        node.next = NONE;
        match tail {
            NONE => self.head = n,
            t => self.nodes[t as usize].next = n,
        }
        self.tail = n;
    }

    /// Takes one reference on `n` (one probe already spent finding it).
    #[inline]
    fn take_ref(&mut self, n: u32) {
        let node = &mut self.nodes[n as usize];
        node.last_use = self.tick;
        node.refs += 1;
        if node.refs == 1 {
            self.unreferenced -= 1;
            self.reclaimable -= (!node.pinned) as u64;
            if node.listed {
                self.unlink(n);
            }
        }
    }

    /// Takes a reference on the cached blocks of `hashes` (all must be
    /// cached: call with a prefix of length ≤ [`Self::match_len`]).
    pub fn acquire(&mut self, hashes: &[u64]) {
        self.tick += 1;
        for h in hashes {
            let n = self.by_hash[h];
            self.take_ref(n);
        }
    }

    /// Takes a reference on the leading cached blocks of `hashes` and returns
    /// how many: [`Self::match_len`] and [`Self::acquire`] in one probe per
    /// block.
    pub fn acquire_prefix(&mut self, hashes: &[u64]) -> usize {
        self.tick += 1;
        for (i, h) in hashes.iter().enumerate() {
            match self.by_hash.get(h) {
                Some(&n) => self.take_ref(n),
                None => return i,
            }
        }
        hashes.len()
    }

    /// Drops a reference on each block of `hashes`; blocks left unreferenced
    /// join the LRU list, deepest first (leaves before the prefixes they
    /// hang from).
    pub fn release(&mut self, hashes: &[u64]) {
        self.tick += 1;
        for h in hashes.iter().rev() {
            let n = self.by_hash[h];
            let node = &mut self.nodes[n as usize];
            debug_assert!(node.refs > 0, "prefix block released more than acquired");
            node.refs -= 1;
            node.last_use = self.tick;
            if node.refs == 0 {
                self.unreferenced += 1;
                if !node.pinned {
                    self.reclaimable += 1;
                    if !node.blocked {
                        self.push_back(n);
                    }
                }
            }
        }
    }

    /// Adds `hash` (whose parent block is `parent_hash`, `None` for the first
    /// block) as a cached block referenced once by the caller, who hands over
    /// the KV block that holds it and holds a reference on its parent.
    /// `pinnable` blocks are pinned while the budget lasts. Returns false
    /// (nothing changes) if the hash is already cached or its parent is not.
    pub fn insert(&mut self, hash: u64, parent_hash: Option<u64>, pinnable: bool) -> bool {
        self.insert_run(&[hash], parent_hash, pinnable as usize) == 1
    }

    /// Inserts the chain `hashes` (block i's parent is block i − 1, the
    /// first one's is `parent_hash`, which the caller references) as
    /// [`Self::insert`] would one by one, stopping at the first block that is
    /// already cached or whose parent is not; the first `pinnable` blocks may
    /// be pinned. Returns how many were inserted. One index probe per block:
    /// each parent is the node just made, not looked up again by hash.
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
        debug_assert!(
            parent == NONE || self.nodes[parent as usize].refs > 0,
            "a run is inserted below a block its sequence references"
        );
        for (i, &hash) in hashes.iter().enumerate() {
            let slot = match self.by_hash.entry(hash) {
                std::collections::hash_map::Entry::Occupied(_) => return i,
                std::collections::hash_map::Entry::Vacant(v) => {
                    let slot = self.free_slots.pop().unwrap_or_else(|| {
                        self.nodes.push(Node {
                            hash,
                            parent: NONE,
                            children: 0,
                            refs: 0,
                            last_use: 0,
                            prev: NONE,
                            next: NONE,
                            listed: false,
                            pinned: false,
                            blocked: false,
                        });
                        (self.nodes.len() - 1) as u32
                    });
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
                prev: NONE,
                next: NONE,
                listed: false,
                pinned,
                blocked: false,
            };
            if parent != NONE {
                self.nodes[parent as usize].children += 1;
                if pinned {
                    self.block_ancestors(parent);
                }
            }
            self.stats.inserted_blocks += 1;
            parent = slot;
        }
        hashes.len()
    }

    /// Marks `n` and its ancestors up to the first pinned or blocked one as
    /// blocked: a pinned block below them is never evicted, so they stay
    /// inner nodes for good. Each node is marked at most once.
    fn block_ancestors(&mut self, mut n: u32) {
        while n != NONE {
            let node = &mut self.nodes[n as usize];
            if node.pinned || node.blocked {
                return;
            }
            node.blocked = true;
            let (listed, parent) = (node.listed, node.parent);
            if listed {
                self.unlink(n);
            }
            n = parent;
        }
    }

    /// Evicts up to `want` unreferenced blocks, least recently used leaves
    /// first. Returns how many were evicted (their KV blocks are free now).
    pub fn evict(&mut self, want: u64) -> u64 {
        let mut done = 0;
        while done < want && self.head != NONE {
            let n = self.head;
            let (hash, parent, children) = {
                let node = &self.nodes[n as usize];
                (node.hash, node.parent, node.children)
            };
            debug_assert_eq!(children, 0, "the LRU list's head is a leaf");
            self.unlink(n);
            if children > 0 {
                continue;
            }
            self.by_hash.remove(&hash);
            self.free_slots.push(n);
            self.unreferenced -= 1;
            self.reclaimable -= 1;
            done += 1;
            if parent != NONE {
                // Already listed at its own last use, if unreferenced.
                self.nodes[parent as usize].children -= 1;
            }
        }
        self.stats.evicted_blocks += done;
        done
    }

    /// The cached hashes, sorted (tests compare caches by them).
    pub fn cached_hashes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.by_hash.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Checks the internal bookkeeping (tests and end-of-run checks), in
    /// time linear in the cache size.
    pub fn check(&self) -> Result<(), String> {
        let (mut unref, mut pinned, mut reclaimable, mut listed) = (0, 0, 0, 0u64);
        let mut children = vec![0u32; self.nodes.len()];
        for (&h, &n) in &self.by_hash {
            let node = &self.nodes[n as usize];
            if node.hash != h {
                return Err(format!("node {n} filed under the wrong hash"));
            }
            unref += (node.refs == 0) as u64;
            pinned += node.pinned as u64;
            reclaimable += (node.refs == 0 && !node.pinned) as u64;
            listed += node.listed as u64;
            let should = node.refs == 0 && !node.pinned && !node.blocked;
            if node.listed != should {
                return Err(format!("node {n}: LRU list membership out of date"));
            }
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
        }
        // The list: linked both ways, in order of last use.
        let (mut n, mut prev, mut walked, mut last) = (self.head, NONE, 0u64, 0u64);
        while n != NONE {
            let node = &self.nodes[n as usize];
            if !node.listed || node.prev != prev || node.last_use < last {
                return Err(format!("LRU list broken or out of order at node {n}"));
            }
            (prev, last, n) = (n, node.last_use, node.next);
            walked += 1;
            if walked > listed {
                return Err("LRU list longer than its members".into());
            }
        }
        if walked != listed || prev != self.tail {
            return Err("LRU list does not hold exactly its members".into());
        }
        if self.head != NONE && self.nodes[self.head as usize].children > 0 {
            return Err("LRU list head is not a leaf".into());
        }
        if unref != self.unreferenced || pinned != self.pinned || reclaimable != self.reclaimable {
            return Err("unreferenced, pinned or reclaimable count out of date".into());
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

    use crate::kv::prefix_cache_reference::ReferenceCache;

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
        /// evicted in random amounts: the LRU list gives the same matches,
        /// insertions, evictions, cached blocks and counters as the ordered
        /// set after every step.
        #[test]
        fn lru_list_matches_the_ordered_set_reference(
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
                    let a = p.fast.insert_run(&hs[shared..end], parent, pinnable.saturating_sub(shared));
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

    #[test]
    fn a_block_above_a_pin_is_never_listed() {
        // A first sequence caches two blocks unpinned; a second with the
        // same prefix pins the third below them: the two can never be
        // leaves again, and eviction passes them by.
        let mut c = PrefixCache::new(4);
        let a = chain(8, 3);
        c.insert_run(&a[..2], None, 0);
        c.release(&a[..2]);
        assert_eq!(c.acquire_prefix(&a), 2);
        assert_eq!(c.insert_run(&a[2..], Some(a[1]), 1), 1);
        c.check().unwrap();
        c.release(&a);
        assert_eq!(c.evictable_blocks(), 2);
        assert_eq!(c.evict(10), 0);
        assert_eq!(c.blocks(), 3);
        c.check().unwrap();
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
