//! The block-by-block form of the router's prefix index (`prefix_index`),
//! kept as the tests' reference: one hash-map entry per block and replica,
//! one LRU queue entry per routed block. The run-wise index must make the
//! same decisions; `prefix_index`'s tests drive both with random chains.

use super::super::min_tree::MinTree;
use std::collections::{HashMap, VecDeque};

/// Per-replica LRU sets of prefix-block hashes, with a cap in tokens.
#[derive(Debug)]
pub struct ReferenceIndex {
    /// Block hash → (replica, last-use stamp) of each replica holding it.
    holders: HashMap<u64, Vec<(u32, u64)>>,
    /// Per replica, blocks in order of last use; an entry whose stamp no
    /// longer matches `holders` is stale and skipped (lazy deletion).
    lru: Vec<VecDeque<(u64, u64)>>,
    /// Live blocks per replica.
    blocks: Vec<u64>,
    /// Tokens the index remembers per replica, and per live block.
    capacity_tokens: u64,
    /// Tokens held per replica, smallest first (SGLang's "smallest tree").
    by_size: MinTree<u64>,
    clock: u64,
    /// Scratch sets for the longest-match walk.
    cur: Vec<u32>,
    next: Vec<u32>,
}

impl ReferenceIndex {
    pub fn new(replicas: usize, capacity_tokens: u64) -> ReferenceIndex {
        ReferenceIndex {
            holders: HashMap::new(),
            lru: vec![VecDeque::new(); replicas],
            blocks: vec![0; replicas],
            capacity_tokens: capacity_tokens.max(1),
            by_size: MinTree::new(vec![0; replicas]),
            clock: 0,
            cur: Vec::new(),
            next: Vec::new(),
        }
    }

    /// The longest run of leading `hashes` one replica holds, and the
    /// replicas holding it (ascending index) in `out`. Stops at the first
    /// block no remaining replica holds: O(matched blocks × holders).
    pub fn longest_match(&mut self, hashes: &[u64], out: &mut Vec<u32>) -> usize {
        out.clear();
        let Some(first) = hashes.first().and_then(|h| self.holders.get(h)) else {
            return 0;
        };
        self.cur.clear();
        self.cur.extend(first.iter().map(|&(r, _)| r));
        self.cur.sort_unstable();
        let mut matched = 1;
        for h in &hashes[1..] {
            let Some(hs) = self.holders.get(h) else { break };
            self.next.clear();
            self.next.extend(
                self.cur
                    .iter()
                    .copied()
                    .filter(|r| hs.iter().any(|&(x, _)| x == *r)),
            );
            if self.next.is_empty() {
                break;
            }
            std::mem::swap(&mut self.cur, &mut self.next);
            matched += 1;
        }
        out.extend_from_slice(&self.cur);
        matched
    }

    /// Leading blocks of `hashes` each replica holds, written into `out`
    /// (one entry per replica): the per-replica form of `longest_match`.
    pub fn match_lengths(&mut self, hashes: &[u64], out: &mut Vec<u32>) {
        out.clear();
        out.resize(self.lru.len(), 0);
        for (d, h) in hashes.iter().enumerate() {
            let Some(hs) = self.holders.get(h) else { break };
            let mut any = false;
            for &(r, _) in hs {
                if out[r as usize] == d as u32 {
                    out[r as usize] += 1;
                    any = true;
                }
            }
            if !any {
                break;
            }
        }
    }

    /// Records that `hashes` (blocks of `block_tokens` tokens) were sent to
    /// `replica`, making them its most recent, and forgets its least recently
    /// routed blocks beyond the capacity.
    pub fn insert(&mut self, replica: usize, hashes: &[u64], block_tokens: u32) {
        let r = replica as u32;
        for &h in hashes {
            self.clock += 1;
            let stamp = self.clock;
            let hs = self.holders.entry(h).or_default();
            match hs.iter_mut().find(|(x, _)| *x == r) {
                Some(e) => e.1 = stamp,
                None => {
                    hs.push((r, stamp));
                    self.blocks[replica] += 1;
                }
            }
            self.lru[replica].push_back((stamp, h));
        }
        let cap_blocks = (self.capacity_tokens / block_tokens.max(1) as u64).max(1);
        while self.blocks[replica] > cap_blocks {
            let (stamp, h) = self.lru[replica]
                .pop_front()
                .expect("live blocks are queued");
            if let Some(hs) = self.holders.get_mut(&h) {
                if let Some(pos) = hs.iter().position(|&(x, s)| x == r && s == stamp) {
                    hs.swap_remove(pos);
                    self.blocks[replica] -= 1;
                    if hs.is_empty() {
                        self.holders.remove(&h);
                    }
                }
            }
        }
        // Drop stale queue entries once they outnumber the live ones.
        let q = &mut self.lru[replica];
        if q.len() as u64 > 2 * self.blocks[replica] + 64 {
            let holders = &self.holders;
            q.retain(|&(s, h)| {
                holders
                    .get(&h)
                    .is_some_and(|hs| hs.iter().any(|&(x, st)| x == r && st == s))
            });
        }
        self.by_size
            .set(replica, self.blocks[replica] * block_tokens as u64);
    }

    /// The replica whose index holds the fewest tokens (lowest index on ties).
    pub fn smallest(&self) -> usize {
        self.by_size.argmin()
    }

    /// Blocks the index remembers for `replica`.
    pub fn blocks(&self, replica: usize) -> u64 {
        self.blocks[replica]
    }
}
