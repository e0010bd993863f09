//! A radix tree over chained KV-block hashes whose nodes are *segments*:
//! runs of blocks with no branch inside, as the nodes of SGLang's
//! RadixAttention tree (Zheng et al., 2024) hold token runs and vLLM's
//! automatic prefix caching identifies a block by the hash of its prefix.
//!
//! Requests carry their prompt as chained block hashes (the hash of block i
//! covers blocks 0..=i), so a segment is found by its first block's hash
//! alone, checked against its parent: a walk down the tree costs one index
//! probe per segment plus a comparison per block. The tree owns the shape
//! (segments, their parents and child counts, the slab and its free slots,
//! the head index, splitting and trimming); what a segment means is the
//! `T` its user keeps in it: references and an LRU place in the replica's
//! prefix cache (`super::prefix_cache`), the replicas that were sent it in
//! the router's index (`crate::cluster::router::prefix_index`).

/// Segment heads: a segment's first block hash → segment. Keys are prefix
/// hashes (or a trace's small block ids): SipHash's DoS resistance buys
/// nothing here, and foldhash is several times faster. The map is never
/// iterated where order could reach an output.
type HeadIndex = std::collections::HashMap<u64, u32, foldhash::fast::FixedState>;

/// No segment: the parent of a segment that starts at the root.
pub const NONE: u32 = u32::MAX;

/// A run of blocks, each the only child of the one before it.
#[derive(Clone, Debug)]
struct Segment<T> {
    /// Its blocks' chained hashes, the one nearest the root first.
    hashes: Vec<u64>,
    /// The segment whose last block is this one's first block's parent.
    parent: u32,
    /// Segments hanging from its last block.
    children: u32,
    data: T,
}

/// Where a walk down the tree met a segment: `matched` leading blocks of
/// segment `seg` equal the walked chain's blocks `start..start + matched`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub seg: u32,
    pub start: usize,
    pub matched: usize,
    /// Every block of the segment matched (the walk may go on below it).
    pub whole: bool,
}

/// How far [`SegmentTree::path`] got: `blocks` leading blocks of the chain
/// are in the tree; when the match ends inside the last segment of the
/// path, `inside` of its blocks matched (0 when it ends with a segment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathEnd {
    pub blocks: usize,
    pub inside: usize,
}

/// A radix tree of block-hash segments, each carrying a `T`.
///
/// Segment ids are slab slots, reused after [`Self::remove`]; [`NONE`] is
/// the root. Matching follows the tree: block i matches when blocks 0..=i
/// are the path to it, which for chained hashes (equal hash ⇔ equal prefix,
/// as every workload and trace reader gives) is a lookup of block i's hash.
#[derive(Clone, Debug)]
pub struct SegmentTree<T> {
    segs: Vec<Segment<T>>,
    free: Vec<u32>,
    heads: HeadIndex,
}

impl<T> Default for SegmentTree<T> {
    fn default() -> SegmentTree<T> {
        SegmentTree {
            segs: Vec::new(),
            free: Vec::new(),
            heads: HeadIndex::default(),
        }
    }
}

/// Leading equal elements of two slices. Runs of a Mooncake request are
/// hundreds of blocks long, matched on acquire and on release: groups of 8
/// compare as one slice (a few vector compares) before the element-wise
/// tail.
#[inline]
fn common_prefix(a: &[u64], b: &[u64]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut i = 0;
    while i + 8 <= n && a[i..i + 8] == b[i..i + 8] {
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

impl<T> SegmentTree<T> {
    /// The segment starting with `hash` below `parent`, if there is one.
    #[inline]
    pub fn child(&self, parent: u32, hash: u64) -> Option<u32> {
        self.heads
            .get(&hash)
            .copied()
            .filter(|&n| self.segs[n as usize].parent == parent)
    }

    /// Whether some segment, anywhere, starts with `hash`.
    #[inline]
    pub fn is_head(&self, hash: u64) -> bool {
        self.heads.contains_key(&hash)
    }

    #[inline]
    pub fn hashes(&self, n: u32) -> &[u64] {
        &self.segs[n as usize].hashes
    }

    /// Blocks in segment `n`.
    #[inline]
    pub fn len(&self, n: u32) -> usize {
        self.segs[n as usize].hashes.len()
    }

    #[inline]
    pub fn parent(&self, n: u32) -> u32 {
        self.segs[n as usize].parent
    }

    /// Segments hanging from `n`'s last block.
    #[inline]
    pub fn children(&self, n: u32) -> u32 {
        self.segs[n as usize].children
    }

    #[inline]
    pub fn data(&self, n: u32) -> &T {
        &self.segs[n as usize].data
    }

    #[inline]
    pub fn data_mut(&mut self, n: u32) -> &mut T {
        &mut self.segs[n as usize].data
    }

    /// Every segment, in no meaningful order (checks and sums only).
    pub fn segments(&self) -> impl Iterator<Item = u32> + '_ {
        self.heads.values().copied()
    }

    /// The segments along the leading blocks of `hashes` that are in the
    /// tree, root first; the walk stops after a segment it matches only in
    /// part.
    #[inline]
    pub fn walk<'a>(&'a self, hashes: &'a [u64]) -> Walk<'a, T> {
        Walk {
            tree: self,
            hashes,
            pos: 0,
            parent: NONE,
            done: false,
        }
    }

    /// Fills `path` with the segments [`Self::walk`] meets on `hashes`.
    pub fn path(&self, hashes: &[u64], path: &mut Vec<u32>) -> PathEnd {
        path.clear();
        let mut end = PathEnd {
            blocks: 0,
            inside: 0,
        };
        for s in self.walk(hashes) {
            path.push(s.seg);
            end.blocks = s.start + s.matched;
            if !s.whole {
                end.inside = s.matched;
            }
        }
        end
    }

    /// [`Self::path`] for leading blocks of `hashes` the caller knows are in
    /// the tree (it references them): one probe per segment, trusting the
    /// blocks inside a segment instead of comparing them, which on hundreds
    /// of blocks a request is most of the walk's cost.
    pub fn known_path(&self, hashes: &[u64], path: &mut Vec<u32>) -> PathEnd {
        path.clear();
        let (mut pos, mut parent) = (0, NONE);
        while pos < hashes.len() {
            let Some(n) = self.child(parent, hashes[pos]) else {
                break;
            };
            path.push(n);
            let len = self.len(n);
            if pos + len > hashes.len() {
                return PathEnd {
                    blocks: hashes.len(),
                    inside: hashes.len() - pos,
                };
            }
            pos += len;
            parent = n;
        }
        PathEnd {
            blocks: pos,
            inside: 0,
        }
    }

    /// A slot for `seg`: a free one, or a new one.
    fn place(&mut self, seg: Segment<T>) -> u32 {
        match self.free.pop() {
            Some(n) => {
                self.segs[n as usize] = seg;
                n
            }
            None => {
                self.segs.push(seg);
                (self.segs.len() - 1) as u32
            }
        }
    }

    /// Adds a segment of the blocks `run` (not empty) below `parent`,
    /// carrying `data`.
    pub fn add(&mut self, run: &[u64], parent: u32, data: T) -> u32 {
        let n = self.place(Segment {
            hashes: run.to_vec(),
            parent,
            children: 0,
            data,
        });
        self.heads.insert(run[0], n);
        if parent != NONE {
            self.segs[parent as usize].children += 1;
        }
        n
    }

    /// Splits segment `n` after its first `k` blocks (0 < k < its length)
    /// and returns the new segment holding those, carrying `upper`; the
    /// rest keeps `n`, its data and its children.
    pub fn split(&mut self, n: u32, k: usize, upper: T) -> u32 {
        let seg = &self.segs[n as usize];
        debug_assert!(k > 0 && k < seg.hashes.len());
        let u = self.place(Segment {
            hashes: seg.hashes[..k].to_vec(),
            parent: seg.parent,
            children: 1,
            data: upper,
        });
        let seg = &mut self.segs[n as usize];
        let upper_head = seg.hashes[0];
        seg.hashes.drain(..k);
        seg.parent = u;
        let lower_head = seg.hashes[0];
        self.heads.insert(upper_head, u);
        self.heads.insert(lower_head, n);
        u
    }

    /// Keeps the first `len` blocks (≥ 1) of leaf segment `n`.
    pub fn truncate(&mut self, n: u32, len: usize) {
        debug_assert!(len > 0 && self.segs[n as usize].children == 0);
        self.segs[n as usize].hashes.truncate(len);
    }

    /// Removes leaf segment `n`; its slot is free for the next segment.
    pub fn remove(&mut self, n: u32) {
        let s = &mut self.segs[n as usize];
        debug_assert_eq!(s.children, 0, "removed a segment with children");
        let head = s.hashes[0];
        // Its hash buffer goes too: a recycled slot keeping the capacity of
        // the longest run it ever held made memory grow with the slots, not
        // the blocks.
        s.hashes = Vec::new();
        let parent = s.parent;
        // A hash filed under two prefixes (never, for chained hashes) keeps
        // the other segment's entry.
        if self.heads.get(&head) == Some(&n) {
            self.heads.remove(&head);
        }
        self.free.push(n);
        if parent != NONE {
            self.segs[parent as usize].children -= 1;
        }
    }

    /// Checks the shape: every segment filed under its first hash, children
    /// counts as recorded. Linear in the tree's size.
    pub fn check(&self) -> Result<(), String> {
        let mut children = vec![0u32; self.segs.len()];
        for (&h, &n) in &self.heads {
            let s = &self.segs[n as usize];
            if s.hashes.first() != Some(&h) {
                return Err(format!("segment {n} filed under the wrong hash"));
            }
            if s.parent != NONE {
                children[s.parent as usize] += 1;
            }
        }
        for &n in self.heads.values() {
            let (found, recorded) = (children[n as usize], self.segs[n as usize].children);
            if found != recorded {
                return Err(format!(
                    "segment {n}: {recorded} children recorded, {found} found"
                ));
            }
        }
        Ok(())
    }
}

/// The walk of [`SegmentTree::walk`].
pub struct Walk<'a, T> {
    tree: &'a SegmentTree<T>,
    hashes: &'a [u64],
    pos: usize,
    parent: u32,
    done: bool,
}

impl<T> Iterator for Walk<'_, T> {
    type Item = Step;

    #[inline]
    fn next(&mut self) -> Option<Step> {
        if self.done || self.pos >= self.hashes.len() {
            return None;
        }
        let n = self.tree.child(self.parent, self.hashes[self.pos])?;
        let seg = self.tree.hashes(n);
        let matched = common_prefix(seg, &self.hashes[self.pos..]);
        let step = Step {
            seg: n,
            start: self.pos,
            matched,
            whole: matched == seg.len(),
        };
        self.pos += matched;
        self.parent = n;
        self.done = !step.whole;
        Some(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::prefix_cache::mix;
    use std::collections::BTreeSet;

    /// Adds what of `hashes` is missing, splitting where it leaves the tree.
    fn insert(t: &mut SegmentTree<char>, hashes: &[u64], data: char) -> Vec<u32> {
        let mut path = Vec::new();
        let end = t.path(hashes, &mut path);
        let mut parent = path.last().copied().unwrap_or(NONE);
        if end.inside > 0 {
            let d = *t.data(parent);
            parent = t.split(parent, end.inside, d);
            *path.last_mut().unwrap() = parent;
        }
        if end.blocks < hashes.len() && !t.is_head(hashes[end.blocks]) {
            path.push(t.add(&hashes[end.blocks..], parent, data));
        }
        path
    }

    #[test]
    fn splits_where_a_chain_leaves_a_segment() {
        let mut t = SegmentTree::default();
        let a = t.add(&[1, 2, 3, 4], NONE, 'a');
        assert_eq!(insert(&mut t, &[1, 2, 7], 'b').len(), 2);
        let u = t.child(NONE, 1).unwrap();
        assert_eq!(
            (t.hashes(u), *t.data(u), t.children(u)),
            (&[1, 2][..], 'a', 2)
        );
        assert_eq!((t.hashes(a), t.parent(a)), (&[3, 4][..], u));
        let b = t.child(u, 7).unwrap();
        assert_eq!(*t.data(b), 'b');
        assert_eq!(t.child(NONE, 3), None, "3 hangs below the split");
        let steps: Vec<Step> = t.walk(&[1, 2, 3, 9]).collect();
        assert_eq!(
            steps,
            [
                Step {
                    seg: u,
                    start: 0,
                    matched: 2,
                    whole: true
                },
                Step {
                    seg: a,
                    start: 2,
                    matched: 1,
                    whole: false
                },
            ]
        );
        let mut path = Vec::new();
        let end = t.path(&[1, 2, 3, 9], &mut path);
        assert_eq!((end.blocks, end.inside, path), (3, 1, vec![u, a]));
        t.check().unwrap();
    }

    #[test]
    fn removed_leaves_free_their_slots_and_heads() {
        let mut t = SegmentTree::default();
        let top = t.add(&[1, 2], NONE, 'a');
        let leaf = t.add(&[3], top, 'b');
        t.remove(leaf);
        assert_eq!((t.children(top), t.is_head(3)), (0, false));
        assert_eq!(t.add(&[5, 6], top, 'c'), leaf, "the slot is reused");
        t.remove(leaf);
        t.truncate(top, 1);
        assert_eq!(t.walk(&[1, 2]).map(|s| s.matched).sum::<usize>(), 1);
        t.remove(top);
        assert_eq!(t.segments().count(), 0);
        t.check().unwrap();
    }

    /// A chained-hash prompt: `family`'s stem of `at` blocks, then branch
    /// `branch`, `len` blocks in all.
    fn prompt(family: u64, branch: u64, at: usize, len: usize) -> Vec<u64> {
        let mut h = 0x5EED;
        (0..len as u64)
            .map(|i| {
                let id = if (i as usize) < at {
                    family * 1000 + i
                } else {
                    family * 1000 + branch * 100 + i + 1
                };
                h = mix(h, id);
                h
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Inserting chains and trimming leaves keep the tree equal to the
        /// set of cached blocks it stands for: every walk matches the
        /// leading blocks found in the set, and the segments hold exactly
        /// the set's blocks.
        #[test]
        fn the_tree_is_the_set_of_its_prefixes(
            ops in proptest::collection::vec(
                (0u64..3, 0u64..4, 0usize..10, 1usize..16, 0usize..6),
                1..80,
            ),
        ) {
            let mut t = SegmentTree::default();
            let mut set = BTreeSet::new();
            let mut path = Vec::new();
            for (family, branch, at, len, trim) in ops {
                let p = prompt(family, branch, at, len);
                if trim == 0 {
                    insert(&mut t, &p, 'x');
                    set.extend(p.iter().copied());
                } else {
                    // Trims the segment the chain's cached part ends in, if
                    // it is a leaf: its last `trim` blocks.
                    t.path(&p, &mut path);
                    if let Some(&last) = path.last().filter(|&&n| t.children(n) == 0) {
                        let n = t.len(last);
                        let keep = n.saturating_sub(trim);
                        for h in &t.hashes(last)[keep..] {
                            set.remove(h);
                        }
                        if keep == 0 {
                            t.remove(last);
                        } else {
                            t.truncate(last, keep);
                        }
                    }
                }
                proptest::prop_assert!(t.check().is_ok(), "{:?}", t.check());
                let held: usize = t.segments().map(|n| t.len(n)).sum();
                proptest::prop_assert_eq!(held, set.len());
                for probe in [p.clone(), prompt(family, (branch + 1) % 4, at / 2, len + 2)] {
                    let want = probe.iter().take_while(|h| set.contains(h)).count();
                    let mut next = 0;
                    for s in t.walk(&probe) {
                        proptest::prop_assert_eq!(s.start, next);
                        next += s.matched;
                    }
                    proptest::prop_assert_eq!(next, want);
                    let end = t.path(&probe, &mut path);
                    proptest::prop_assert_eq!(end.blocks, want);
                    let mut known = Vec::new();
                    let trusted = t.known_path(&probe[..want], &mut known);
                    let walked = t.path(&probe[..want], &mut path);
                    proptest::prop_assert_eq!((trusted, known), (walked, path.clone()));
                }
            }
        }
    }
}
