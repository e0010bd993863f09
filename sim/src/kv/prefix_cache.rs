//! Automatic prefix caching: KV blocks of shared prompt prefixes are kept
//! after their sequences end and reused by later requests with the same
//! prefix, as in SGLang's RadixAttention (Zheng et al., 2024) and vLLM's
//! automatic prefix caching.
//!
//! The cached blocks form a [`SegmentTree`]: runs of blocks with no branch
//! inside, each in one state (references, pin, place in the LRU list). A
//! request's chain is matched one segment at a time, acquired and released
//! a segment at a time, inserted as one segment, and evicted by cutting a
//! segment's tail. A cached block is referenced by the running sequences
//! using it, or unreferenced and evictable. Eviction takes least-recently-
//! used *leaves* first (a block whose descendants are cached is never
//! evicted before them: a child without its parent can never be matched);
//! see [`PrefixCache`] for why the order is exactly least recently used leaf
//! block first. Pinned blocks (e.g. a tenant's system prompt, up to a block
//! budget) are never evicted.
//!
//! The cache owns its blocks; the replica's [`super::BlockAllocator`]
//! counts them as used. Conservation: free + referenced + cached-unreferenced
//! = total blocks.

use super::segment_tree::{PathEnd, SegmentTree, NONE};

/// The state of a run of cached blocks.
#[derive(Clone, Copy, Debug)]
struct State {
    /// Running sequences referencing (every block of) it.
    refs: u32,
    /// The tick of its last release (checks only: the list order is the
    /// eviction order).
    released: u64,
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

/// The cached prefix blocks of one replica, as a radix tree of segments
/// (SGLang's RadixAttention, vLLM's automatic prefix caching).
///
/// Eviction takes the least recently used unreferenced, unpinned leaf block.
/// An intrusive LRU list over the segments holds every unreferenced segment
/// that is neither pinned nor blocked (inner ones too), appended when its
/// last reference is released, the deepest segment of the released chain
/// first; within a segment the blocks go deepest first. Read block by
/// block, that list is the eviction order, with no search:
/// - it is in order of last use, since a block joins it only when released
///   (the newest tick) and leaves it when acquired or evicted;
/// - its head is a leaf: a child of a listed block is unreferenced (a
///   sequence references a whole chain from its first block), so its last
///   release also released the parent, at the same tick but listed before
///   it (deepest first), or the parent was used again later;
/// - evicting a leaf exposes its parent in the place its own last use gives
///   it, which is where the list already has it;
/// - two leaves never share a tick (the blocks of one acquire or release are
///   one chain, and a chain has one leaf), so the ordered set of (last use,
///   block) this replaced never broke a tie by slot.
///
/// `prefix_cache_reference` keeps that ordered-set cache of single blocks;
/// the tests drive both with random chains and compare them block for
/// block.
#[derive(Clone, Debug)]
pub struct PrefixCache {
    tree: SegmentTree<State>,
    /// Least recently released end of the LRU list, and the other end.
    head: u32,
    tail: u32,
    blocks: u64,
    /// Blocks with no references (evictable or not, e.g. inner or pinned).
    unreferenced: u64,
    /// Unreferenced blocks that are not pinned: what eviction can reach.
    reclaimable: u64,
    pinned: u64,
    pin_budget: u64,
    tick: u64,
    /// Scratch: the segments of the chain being acquired or released.
    path: Vec<u32>,
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
            tree: SegmentTree::default(),
            head: NONE,
            tail: NONE,
            blocks: 0,
            unreferenced: 0,
            reclaimable: 0,
            pinned: 0,
            pin_budget,
            tick: 0,
            path: Vec::new(),
            stats: PrefixCacheStats::default(),
        }
    }

    /// Blocks the cache holds (referenced or not).
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Cached blocks no running sequence references.
    pub fn unreferenced_blocks(&self) -> u64 {
        self.unreferenced
    }

    /// Blocks that eviction could free now.
    pub fn evictable_blocks(&self) -> u64 {
        // Evicting a leaf exposes its parent; sequences reference whole
        // chains from the first block, so every unreferenced, unpinned block
        // is reachable that way.
        self.reclaimable
    }

    /// Σ references over cached blocks.
    pub fn total_refs(&self) -> u64 {
        self.tree
            .segments()
            .map(|n| self.tree.data(n).refs as u64 * self.tree.len(n) as u64)
            .sum()
    }

    pub fn pinned_blocks(&self) -> u64 {
        self.pinned
    }

    /// Leading blocks of `hashes` that are cached.
    pub fn match_len(&self, hashes: &[u64]) -> usize {
        self.tree.walk(hashes).map(|s| s.matched).sum()
    }

    #[inline]
    fn st(&mut self, n: u32) -> &mut State {
        self.tree.data_mut(n)
    }

    fn unlink(&mut self, n: u32) {
        let (prev, next) = {
            let s = self.st(n);
            s.listed = false;
            (
                std::mem::replace(&mut s.prev, NONE),
                std::mem::replace(&mut s.next, NONE),
            )
        };
        match prev {
            NONE => self.head = next,
            p => self.st(p).next = next,
        }
        match next {
            NONE => self.tail = prev,
            x => self.st(x).prev = prev,
        }
    }

    /// Links `n` into the list right after `at` (`NONE`: at the head).
    fn link_after(&mut self, n: u32, at: u32) {
        let next = match at {
            NONE => self.head,
            a => self.st(a).next,
        };
        {
            let s = self.st(n);
            s.listed = true;
            s.prev = at;
            s.next = next;
        }
        match at {
            NONE => self.head = n,
            a => self.st(a).next = n,
        }
        match next {
            NONE => self.tail = n,
            x => self.st(x).prev = n,
        }
    }

    /// Splits segment `n` after its first `k` blocks; returns the new
    /// segment holding those, in `n`'s state (the rest keeps `n`, its
    /// children and its place in the list, with the upper part listed right
    /// after it).
    fn split(&mut self, n: u32, k: usize) -> u32 {
        let s = *self.tree.data(n);
        let upper = State {
            prev: NONE,
            next: NONE,
            listed: false,
            ..s
        };
        let u = self.tree.split(n, k, upper);
        if s.listed {
            self.link_after(u, n);
        }
        u
    }

    /// Fills `path` with the segments holding the leading cached blocks of
    /// `hashes`, splitting the last one where the match ends inside it, and
    /// returns how many blocks they hold.
    fn cached_path(&mut self, hashes: &[u64]) -> usize {
        let end = self.tree.path(hashes, &mut self.path);
        self.split_path_end(end)
    }

    /// Splits the last segment of `path` where `end` says the chain ends
    /// inside it; returns the chain's blocks in `path`.
    fn split_path_end(&mut self, end: PathEnd) -> usize {
        if end.inside > 0 {
            let last = self.path.len() - 1;
            self.path[last] = self.split(self.path[last], end.inside);
        }
        end.blocks
    }

    /// Takes one reference on every block of segment `n`.
    #[inline]
    fn take_ref(&mut self, n: u32) {
        let len = self.tree.len(n) as u64;
        let s = self.st(n);
        s.refs += 1;
        if s.refs == 1 {
            let (pinned, listed) = (s.pinned, s.listed);
            self.unreferenced -= len;
            if !pinned {
                self.reclaimable -= len;
            }
            if listed {
                self.unlink(n);
            }
        }
    }

    /// Takes a reference on the cached blocks of `hashes` (all must be
    /// cached: call with a prefix of length ≤ [`Self::match_len`]).
    pub fn acquire(&mut self, hashes: &[u64]) {
        let m = self.acquire_prefix(hashes);
        debug_assert_eq!(m, hashes.len(), "acquired blocks that are not cached");
    }

    /// Takes a reference on the leading cached blocks of `hashes` and returns
    /// how many: [`Self::match_len`] and [`Self::acquire`] in one walk.
    pub fn acquire_prefix(&mut self, hashes: &[u64]) -> usize {
        self.tick += 1;
        let m = self.cached_path(hashes);
        for i in 0..self.path.len() {
            let n = self.path[i];
            self.take_ref(n);
        }
        m
    }

    /// Drops a reference on each block of `hashes` (which the caller
    /// acquired or inserted); segments left unreferenced join the LRU list,
    /// deepest first (leaves before the prefixes they hang from).
    pub fn release(&mut self, hashes: &[u64]) {
        self.tick += 1;
        // The caller's chain ends inside a segment only after an insertion
        // split elsewhere; the split keeps the states apart.
        let end = self.tree.known_path(hashes, &mut self.path);
        let m = self.split_path_end(end);
        debug_assert_eq!(m, hashes.len(), "released blocks that are not cached");
        for i in (0..self.path.len()).rev() {
            let n = self.path[i];
            let len = self.tree.len(n) as u64;
            let tick = self.tick;
            let s = self.st(n);
            debug_assert!(s.refs > 0, "prefix block released more than acquired");
            s.refs -= 1;
            s.released = tick;
            if s.refs == 0 {
                let (pinned, blocked) = (s.pinned, s.blocked);
                self.unreferenced += len;
                if !pinned {
                    self.reclaimable += len;
                    if !blocked {
                        let tail = self.tail;
                        self.link_after(n, tail);
                    }
                }
            }
        }
    }

    /// Inserts blocks `from..` of the chain `hashes` (block i's parent is
    /// block i − 1), referenced once by the caller, who hands over the KV
    /// blocks that hold them and references blocks `..from`. Nothing is
    /// inserted if block `from` is already cached or its parent is not.
    /// Blocks with index below `pinnable` are pinned while the budget lasts.
    /// Returns how many were inserted: all or none, as one segment (two when
    /// pins end inside it).
    pub fn insert_run(&mut self, hashes: &[u64], from: usize, pinnable: usize) -> usize {
        if from >= hashes.len() {
            return 0;
        }
        // The parent block's segment, split so that the parent ends it.
        let mut parent = NONE;
        if from > 0 {
            let end = self.tree.known_path(&hashes[..from], &mut self.path);
            if end.blocks < from {
                return 0;
            }
            parent = self.path[self.path.len() - 1];
            if end.inside > 0 {
                if self.tree.hashes(parent)[end.inside] == hashes[from] {
                    return 0;
                }
                parent = self.split(parent, end.inside);
            }
        }
        if self.tree.is_head(hashes[from]) {
            return 0;
        }
        let run = &hashes[from..];
        let left = self.pin_budget.saturating_sub(self.pinned) as usize;
        let pins = pinnable.saturating_sub(from).min(left).min(run.len());
        if pins > 0 {
            if parent != NONE {
                self.block_ancestors(parent);
            }
            parent = self.new_segment(&run[..pins], parent, true);
        }
        if pins < run.len() {
            self.new_segment(&run[pins..], parent, false);
        }
        run.len()
    }

    /// Adds a referenced segment of `run` below `parent`.
    fn new_segment(&mut self, run: &[u64], parent: u32, pinned: bool) -> u32 {
        self.tick += run.len() as u64;
        let state = State {
            refs: 1,
            released: 0,
            prev: NONE,
            next: NONE,
            listed: false,
            pinned,
            blocked: false,
        };
        let n = self.tree.add(run, parent, state);
        let len = run.len() as u64;
        self.blocks += len;
        self.pinned += if pinned { len } else { 0 };
        self.stats.inserted_blocks += len;
        n
    }

    /// Marks `n` and its ancestors up to the first pinned or blocked one as
    /// blocked: a pinned block below them is never evicted, so they stay
    /// inner blocks for good. Each segment is marked at most once.
    fn block_ancestors(&mut self, mut n: u32) {
        while n != NONE {
            let s = self.st(n);
            if s.pinned || s.blocked {
                return;
            }
            s.blocked = true;
            if s.listed {
                self.unlink(n);
            }
            n = self.tree.parent(n);
        }
    }

    /// Evicts up to `want` unreferenced blocks, least recently used leaves
    /// first. Returns how many were evicted (their KV blocks are free now).
    pub fn evict(&mut self, want: u64) -> u64 {
        let mut done = 0;
        while done < want && self.head != NONE {
            let n = self.head;
            debug_assert_eq!(self.tree.children(n), 0, "the LRU list's head is a leaf");
            if self.tree.children(n) > 0 {
                self.unlink(n);
                continue;
            }
            // Its deepest blocks go first.
            let len = self.tree.len(n) as u64;
            let take = (want - done).min(len);
            self.blocks -= take;
            self.unreferenced -= take;
            self.reclaimable -= take;
            done += take;
            if take == len {
                // The parent is already listed at its own last use, if
                // unreferenced.
                self.unlink(n);
                self.tree.remove(n);
            } else {
                self.tree.truncate(n, (len - take) as usize);
            }
        }
        self.stats.evicted_blocks += done;
        done
    }

    /// The cached hashes, sorted (tests compare caches by them).
    pub fn cached_hashes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .tree
            .segments()
            .flat_map(|n| self.tree.hashes(n).iter().copied())
            .collect();
        v.sort_unstable();
        v
    }

    /// Checks the internal bookkeeping (tests and end-of-run checks), in
    /// time linear in the cache size.
    pub fn check(&self) -> Result<(), String> {
        self.tree.check()?;
        let (mut blocks, mut unref, mut pinned, mut reclaimable, mut listed) = (0, 0, 0, 0, 0u64);
        for n in self.tree.segments() {
            let s = self.tree.data(n);
            let len = self.tree.len(n) as u64;
            blocks += len;
            unref += if s.refs == 0 { len } else { 0 };
            pinned += if s.pinned { len } else { 0 };
            reclaimable += if s.refs == 0 && !s.pinned { len } else { 0 };
            listed += s.listed as u64;
            if s.listed != (s.refs == 0 && !s.pinned && !s.blocked) {
                return Err(format!("segment {n}: LRU list membership out of date"));
            }
            let parent = self.tree.parent(n);
            if parent != NONE && self.tree.data(parent).refs < s.refs {
                return Err(format!("segment {n}: more references than its parent"));
            }
        }
        // The list: linked both ways, in order of last use.
        let (mut n, mut prev, mut walked, mut last) = (self.head, NONE, 0u64, 0u64);
        while n != NONE {
            let s = self.tree.data(n);
            if !s.listed || s.prev != prev || s.released < last {
                return Err(format!("LRU list broken or out of order at segment {n}"));
            }
            (prev, last, n) = (n, s.released, s.next);
            walked += 1;
            if walked > listed {
                return Err("LRU list longer than its members".into());
            }
        }
        if walked != listed || prev != self.tail {
            return Err("LRU list does not hold exactly its members".into());
        }
        if self.head != NONE && self.tree.children(self.head) > 0 {
            return Err("LRU list head is not a leaf".into());
        }
        if blocks != self.blocks
            || unref != self.unreferenced
            || pinned != self.pinned
            || reclaimable != self.reclaimable
        {
            return Err("block, unreferenced, pinned or reclaimable count out of date".into());
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
    if hash_block % block == 0 {
        // Mooncake's 512-token hashes over 16-token blocks: each workload
        // hash identifies `per` engine blocks in a row, so the hash of block
        // j is that of workload block j / per without a division per block
        // (the same values as the general formula below).
        let per = (hash_block / block) as u64;
        let mut out = Vec::with_capacity(full as usize);
        let mut j = 0;
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            for &h in hashes {
                let end = (j + per).min(full);
                // SAFETY: the CPU has AVX2 (checked just above).
                unsafe { mix_run_avx2(h, j, end, &mut out) };
                j = end;
                if j >= full {
                    break;
                }
            }
            return out;
        }
        for &h in hashes {
            let end = (j + per).min(full);
            // Left alone, LLVM vectorises this loop with SSE2, which has no
            // 64-bit multiply and spends five instructions on each of
            // `mix`'s three: ~24 instructions a block against ~15 scalar (a
            // trace's ~750 blocks per request made this 7 % of a Mooncake
            // run). A compiler fence (no machine instruction) before each
            // block keeps the code scalar; groups of 8 are unrolled.
            while j + 8 <= end {
                let jk = j.wrapping_mul(MIX_STEP);
                out.extend((0..8u64).map(|i| {
                    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
                    mix_keyed(h, jk.wrapping_add(i.wrapping_mul(MIX_STEP)))
                }));
                j += 8;
            }
            out.extend((j..end).map(|j| mix(h, j)));
            j = end;
            if j >= full {
                break;
            }
        }
        return out;
    }
    (0..full)
        .map(|j| {
            let last_token = (j + 1) * block as u64 - 1;
            let h = hashes[(last_token / hash_block as u64) as usize];
            mix(h, j)
        })
        .collect()
}

/// Appends `mix(h, j)` for every `j` in `from..end` to `out`, four blocks
/// to an AVX2 vector: the same values as the scalar loop, bit for bit (64-bit
/// products modulo 2^64 from three 32 × 32-bit multiplies, as AVX2 has no
/// 64-bit multiply), at about 6 instructions a block against 15 (block
/// hashing was 11 % of the instructions of the Mooncake side-by-side run).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mix_run_avx2(h: u64, from: u64, end: u64, out: &mut Vec<u64>) {
    use std::arch::x86_64::*;
    /// The low 64 bits of each lane times the constant whose 32-bit halves
    /// are `lo` and `hi`.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn mul(a: __m256i, lo: __m256i, hi: __m256i) -> __m256i {
        let ll = _mm256_mul_epu32(a, lo);
        let cross = _mm256_add_epi64(
            _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), lo),
            _mm256_mul_epu32(a, hi),
        );
        _mm256_add_epi64(ll, _mm256_slli_epi64::<32>(cross))
    }
    const C1: u64 = 0xBF58_476D_1CE4_E5B9;
    const C2: u64 = 0x94D0_49BB_1331_11EB;
    const LOW: u64 = 0xFFFF_FFFF;
    let c1l = _mm256_set1_epi64x((C1 & LOW) as i64);
    let c1h = _mm256_set1_epi64x((C1 >> 32) as i64);
    let c2l = _mm256_set1_epi64x((C2 & LOW) as i64);
    let c2h = _mm256_set1_epi64x((C2 >> 32) as i64);
    let hv = _mm256_set1_epi64x(h as i64);
    let step = _mm256_set1_epi64x(MIX_STEP.wrapping_mul(4) as i64);
    let k0 = from.wrapping_mul(MIX_STEP);
    let mut ik = _mm256_set_epi64x(
        k0.wrapping_add(MIX_STEP.wrapping_mul(3)) as i64,
        k0.wrapping_add(MIX_STEP.wrapping_mul(2)) as i64,
        k0.wrapping_add(MIX_STEP) as i64,
        k0 as i64,
    );
    let mut j = from;
    // Written straight into the reserved tail: a capacity check per vector
    // cost as much as the vector's arithmetic.
    out.reserve(end.saturating_sub(from) as usize);
    let mut at = out.as_mut_ptr().add(out.len());
    while j + 4 <= end {
        let mut z = _mm256_xor_si256(hv, ik);
        z = _mm256_xor_si256(z, _mm256_srli_epi64::<30>(z));
        z = mul(z, c1l, c1h);
        z = _mm256_xor_si256(z, _mm256_srli_epi64::<27>(z));
        z = mul(z, c2l, c2h);
        z = _mm256_xor_si256(z, _mm256_srli_epi64::<31>(z));
        _mm256_storeu_si256(at.cast(), z);
        at = at.add(4);
        ik = _mm256_add_epi64(ik, step);
        j += 4;
    }
    // SAFETY: the reserve above left room for every value written.
    out.set_len(at.offset_from(out.as_ptr()) as usize);
    out.extend((j..end).map(|j| mix(h, j)));
}

/// SplitMix64-style mixing of a hash with an index.
pub fn mix(h: u64, i: u64) -> u64 {
    mix_keyed(h, i.wrapping_mul(MIX_STEP))
}

/// The odd constant an index is multiplied by in [`mix`].
const MIX_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// [`mix`] of index i, given `ik` = i × [`MIX_STEP`] (a loop over
/// consecutive indices steps `ik` by an addition instead of multiplying).
#[inline(always)]
fn mix_keyed(h: u64, ik: u64) -> u64 {
    let mut z = h ^ ik;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Prefix-cache counters summed over replicas. Hit rates count each
/// request's first admission (a recompute after preemption is not a lookup).
#[derive(Clone, Debug, Default, serde::Serialize, PartialEq)]
pub struct PrefixCacheReport {
    /// Prompt tokens served from cache / prompt tokens looked up.
    pub token_hit_rate: f64,
    /// Hashed prompt blocks found / looked up.
    pub block_hit_rate: f64,
    pub lookup_tokens: u64,
    pub hit_tokens: u64,
    pub lookup_blocks: u64,
    pub hit_blocks: u64,
    pub inserted_blocks: u64,
    pub evicted_blocks: u64,
    pub cached_blocks_at_end: u64,
    pub pinned_blocks_at_end: u64,
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
        assert_eq!(c.insert_run(hs, 0, 0), hs.len());
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
        assert_eq!(c.insert_run(&b, 2, 0), 2);
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

    #[test]
    fn a_block_above_a_pin_is_never_listed() {
        // A first sequence caches two blocks unpinned; a second with the
        // same prefix pins the third below them: the two can never be
        // leaves again, and eviction passes them by.
        let mut c = PrefixCache::new(4);
        let a = chain(8, 3);
        c.insert_run(&a[..2], 0, 0);
        c.release(&a[..2]);
        assert_eq!(c.acquire_prefix(&a), 2);
        assert_eq!(c.insert_run(&a, 2, 3), 1);
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
        assert_eq!(c.insert_run(&a, 0, 3), 3);
        assert_eq!(c.pinned_blocks(), 2, "budget of two");
        c.release(&a);
        assert_eq!(c.evict(10), 1);
        assert_eq!(c.match_len(&a), 2);
        c.check().unwrap();
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_block_hashes_equal_the_scalar_ones() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = 0x1234_5678_9ABC_DEF0u64;
        for n in 0..40u64 {
            rng = mix(rng, n);
            let (h, from) = (rng, mix(rng, 7) % 100_000);
            let mut out = vec![42];
            unsafe { mix_run_avx2(h, from, from + n, &mut out) };
            let want: Vec<u64> = std::iter::once(42)
                .chain((from..from + n).map(|j| mix(h, j)))
                .collect();
            assert_eq!(out, want, "h {h} from {from} n {n}");
        }
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
        // The whole-multiple shortcut gives the general formula's hashes.
        for (hb, b, t) in [
            (512, 16, 2048),
            (512, 16, 1000),
            (48, 16, 150),
            (64, 32, 100),
        ] {
            let general: Vec<u64> = (0..(a.len() as u64 * hb as u64).min(t) / b as u64)
                .map(|j| mix(a[(((j + 1) * b as u64 - 1) / hb as u64) as usize], j))
                .collect();
            assert_eq!(
                engine_block_hashes(&a, hb, b, t as u32),
                general,
                "{hb} {b} {t}"
            );
        }
    }
}
