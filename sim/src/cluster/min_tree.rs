//! An indexed tournament tree (a segment tree over the replica index) that
//! keeps the replica with the smallest key at its root: O(log N) to change
//! one replica's key, O(1) to read the minimum. Load-based routers use it so
//! routing cost grows with log(fleet size), not with the fleet, the way
//! large-fleet load balancers keep an indexed heap of backend loads instead of
//! scanning every backend per request.

/// Minimum of `N` keys with its index; ties go to the lowest index, so the
/// result is the same as a left-to-right scan keeping the first strict minimum.
#[derive(Clone, Debug)]
pub struct MinTree<K> {
    /// Leaves start at `size`; node `i` holds the winning leaf index of its range.
    win: Vec<u32>,
    keys: Vec<K>,
    size: usize,
}

impl<K: Ord + Copy> MinTree<K> {
    /// A tree over `keys` (at least one).
    pub fn new(keys: Vec<K>) -> MinTree<K> {
        assert!(!keys.is_empty(), "a tree over no replicas");
        let size = keys.len().next_power_of_two();
        let mut win = vec![0u32; 2 * size];
        for i in 0..size {
            // Padding leaves point at the last real leaf; ties resolve to the
            // lower index, so padding never wins over a real leaf.
            win[size + i] = i.min(keys.len() - 1) as u32;
        }
        let mut t = MinTree { win, keys, size };
        for n in (1..size).rev() {
            t.win[n] = t.better(t.win[2 * n], t.win[2 * n + 1]);
        }
        t
    }

    fn better(&self, a: u32, b: u32) -> u32 {
        let (ka, kb) = (self.keys[a as usize], self.keys[b as usize]);
        if kb < ka || (kb == ka && b < a) {
            b
        } else {
            a
        }
    }

    /// Whether leaf `a` wins over leaf `b` (smaller key, then lower index).
    #[inline]
    fn beats(&self, a: u32, b: u32) -> bool {
        let (ka, kb) = (self.keys[a as usize], self.keys[b as usize]);
        ka < kb || (ka == kb && a < b)
    }

    /// Sets replica `i`'s key. Only the nodes on `i`'s path can change hands,
    /// and which way tells how far up to look: a better key can only take
    /// nodes over (one comparison with the holder per level, and none above
    /// the first node it fails to take); a worse one can only lose the
    /// nodes it held (rematched from their children, and none above the
    /// first node it did not hold).
    pub fn set(&mut self, i: usize, key: K) {
        let old = self.keys[i];
        if old == key {
            return;
        }
        self.keys[i] = key;
        let leaf = i as u32;
        let mut n = (self.size + i) / 2;
        if key < old {
            while n >= 1 {
                let w = self.win[n];
                if w != leaf {
                    if !self.beats(leaf, w) {
                        // The holder beats `i` here and so above.
                        break;
                    }
                    self.win[n] = leaf;
                }
                n /= 2;
            }
        } else {
            while n >= 1 && self.win[n] == leaf {
                self.win[n] = self.better(self.win[2 * n], self.win[2 * n + 1]);
                n /= 2;
            }
        }
    }

    /// Index of the smallest key (lowest index on ties).
    pub fn argmin(&self) -> usize {
        self.win[1] as usize
    }

    pub fn key(&self, i: usize) -> K {
        self.keys[i]
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn scan(keys: &[u64]) -> usize {
        let mut best = 0;
        for (i, &k) in keys.iter().enumerate() {
            if k < keys[best] {
                best = i;
            }
        }
        best
    }

    #[test]
    fn agrees_with_a_linear_scan_under_random_updates() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for n in [1usize, 2, 3, 5, 8, 13, 64, 100] {
            let mut keys: Vec<u64> = (0..n).map(|_| rng.random_range(0..4)).collect();
            let mut t = MinTree::new(keys.clone());
            for _ in 0..2000 {
                let i = rng.random_range(0..n);
                let k = rng.random_range(0..6);
                keys[i] = k;
                t.set(i, k);
                assert_eq!(t.argmin(), scan(&keys), "n={n} keys={keys:?}");
                assert_eq!(t.key(t.argmin()), keys[scan(&keys)]);
                // Every node holds the winner of its two children, as a
                // tree built afresh would.
                let fresh = MinTree::new(keys.clone());
                assert_eq!(t.win, fresh.win, "n={n} keys={keys:?}");
            }
        }
    }
}
