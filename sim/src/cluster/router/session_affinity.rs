use super::{prompt_hashes, Router};
use crate::cluster::view::FleetView;
use crate::kv::prefix_cache::mix;
use crate::request::Request;
use crate::scenario::SessionAffinityCfg;

/// Session affinity by consistent hashing (Karger et al., STOC'97; Envoy's
/// `RING_HASH` on a session header, ketama): every replica owns
/// `virtual_nodes` points on a 64-bit ring and a session goes to the owner of
/// the first point at or after its key's hash. The same session keeps its
/// replica (and the KV cache of its history) while the membership holds,
/// and adding or removing one replica of N moves only ~1/N of the sessions.
/// O(log(N × virtual_nodes)) per request.
///
/// The key is the request's session id; open-loop traces have none, so the
/// key is then the chained hash of the prompt's first `key_prefix_tokens`
/// (the conversation's opening, shared by all its turns). A request with
/// neither goes to the least-loaded replica.
#[derive(Debug)]
pub struct SessionAffinity {
    /// (point, replica), sorted by point.
    ring: Vec<(u64, u32)>,
    vnodes: u32,
    key_tokens: u32,
}

impl SessionAffinity {
    pub fn new(replicas: usize, cfg: &SessionAffinityCfg) -> SessionAffinity {
        let mut s = SessionAffinity {
            ring: Vec::new(),
            vnodes: cfg.virtual_nodes,
            key_tokens: cfg.key_prefix_tokens,
        };
        for r in 0..replicas {
            s.add(r as u32);
        }
        s
    }

    /// Puts replica `r`'s points on the ring (a replica coming up).
    pub fn add(&mut self, r: u32) {
        for v in 0..self.vnodes {
            self.ring
                .push((mix(0x5E55_1011 ^ ((r as u64) << 32), v as u64), r));
        }
        self.ring.sort_unstable();
    }

    /// Takes replica `r`'s points off the ring (a replica going down).
    pub fn remove(&mut self, r: u32) {
        self.ring.retain(|&(_, x)| x != r);
    }

    /// The replica owning `key`.
    pub fn owner(&self, key: u64) -> usize {
        let h = mix(key, 0x5E55);
        let i = self.ring.partition_point(|&(p, _)| p < h);
        self.ring[i % self.ring.len()].1 as usize
    }

    fn key(&self, req: &Request) -> Option<u64> {
        if req.session() != 0 {
            return Some(req.session());
        }
        let hashes = prompt_hashes(req);
        let blocks = (self.key_tokens / req.hash_block_tokens.max(1)).max(1) as usize;
        hashes
            .get(blocks.min(hashes.len()).checked_sub(1)?)
            .copied()
    }
}

impl Router for SessionAffinity {
    fn route(&mut self, req: &Request, view: &FleetView) -> usize {
        match self.key(req) {
            Some(k) => self.owner(k),
            None => view.least_outstanding(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn a_session_sticks_and_adding_a_replica_moves_about_one_in_n() {
        let cfg = SessionAffinityCfg::default();
        let mut ring = SessionAffinity::new(8, &cfg);
        let keys: Vec<u64> = (1..=20_000).collect();
        let before: Vec<usize> = keys.iter().map(|&k| ring.owner(k)).collect();
        // Each replica owns a fair share (±25 % with 160 points each).
        for r in 0..8 {
            let n = before.iter().filter(|&&x| x == r).count();
            assert!((1875..3125).contains(&n), "replica {r}: {n}");
        }
        ring.add(8);
        let after: Vec<usize> = keys.iter().map(|&k| ring.owner(k)).collect();
        let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        // ~1/9 move, all of them to the new replica.
        assert!((1500..3000).contains(&moved), "{moved} moved");
        assert!(before.iter().zip(&after).all(|(a, b)| a == b || *b == 8));
        ring.remove(8);
        let back: Vec<usize> = keys.iter().map(|&k| ring.owner(k)).collect();
        assert_eq!(back, before);
    }

    #[test]
    fn keys_by_session_or_by_the_prompt_opening() {
        let reps = replicas(8);
        let view = FleetView::new(&reps, true);
        let mut r = SessionAffinity::new(
            8,
            &SessionAffinityCfg {
                virtual_nodes: 160,
                key_prefix_tokens: 32,
            },
        );
        // Same session: same replica whatever the prompt.
        let a = r.route(&request(&[1, 2, 3], 77), &view);
        assert_eq!(r.route(&request(&[9], 77), &view), a);
        // No session: the first 32 tokens (2 blocks) decide.
        let b = r.route(&request(&[1, 2, 3], 0), &view);
        assert_eq!(r.route(&request(&[1, 2, 4, 5], 0), &view), b);
        assert_eq!(r.owner(2), b);
        // Neither: least loaded.
        assert_eq!(r.route(&request(&[], 0), &view), 0);
    }
}
