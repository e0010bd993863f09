//! The near future of the event queue as a hashed timing wheel (Varghese
//! and Lauck, SOSP'87; Brown's calendar queue, CACM 1988): events due
//! within a fixed horizon of the clock sit in buckets of `2^shift` ns, one
//! bucket per slot of a ring, with a bitmap of the buckets that hold any.
//! Scheduling links the event into its bucket; the next event is in the
//! first bucket at or after the clock's (a bitmap word or two in a busy
//! fleet), the least key of its few events. The (time, sequence) keys are
//! the heap's, so the order is exactly the heap's; events past the horizon
//! stay in the heap, and the queue pops whichever of the two holds the
//! least key.
//!
//! Every event in the wheel is due in `[now, now + slots · 2^shift)`, so
//! from the clock's slot the ring's order is time order: each slot holds
//! the events of one bucket-width of time only.
//!
//! **Why linked lists in one slab.** A busy fleet keeps about one event
//! per eight buckets, so almost every push and pop touches a bucket no
//! recent one touched. With a `Vec` per bucket, the wheel spread over the
//! 8,192 headers (192 KiB) and 8,192 buffers of their own, and `perf` on
//! the 1,000-replica fleet put 65 % of `peek_time`'s samples on the load
//! of a bucket's header and half of `schedule`'s on its length check. Here
//! a bucket is a `u32` head (the 8,192 heads fill 32 KiB) of a list
//! threaded through one slab of nodes, and a pop's node is the next
//! push's (a free list, last in first out), so the nodes in use are as
//! few as the events in flight. The 10 M-request fleet ran 21 % faster
//! (docs/performance.md), its other functions too, though the instructions grew
//! by 0.9 % and cachegrind's simulated 512 KiB cache shows the old queue
//! missing rarely: what the old layout cost is what that model leaves
//! out.

/// No node: the end of a list, an empty bucket, an empty free list.
const NIL: u32 = u32::MAX;

/// One event in the wheel, linked to the next in its bucket (or, when
/// free, to the next free node).
struct Node<E> {
    key: u128,
    next: u32,
    event: Option<E>,
}

/// Buckets of events keyed by (time, sequence), due within the horizon.
pub(super) struct Wheel<E> {
    /// Bucket width: `2^shift` ns.
    shift: u32,
    /// Slots − 1 (slots a power of two).
    mask: u64,
    /// The first node of each bucket's list.
    heads: Vec<u32>,
    nodes: Vec<Node<E>>,
    /// The first free node.
    free: u32,
    /// Bit `i` of word `i / 64`: bucket `i` holds an event.
    bits: Vec<u64>,
    len: usize,
    /// The least key in the wheel and its bucket, while known (cleared by
    /// a pop; a push keeps it right).
    least: Option<(u128, usize)>,
}

impl<E> Wheel<E> {
    /// A wheel of `slots` buckets (a power of two, at least 64) of
    /// `2^shift` ns.
    pub(super) fn new(shift: u32, slots: usize) -> Wheel<E> {
        assert!(slots.is_power_of_two() && slots >= 64);
        Wheel {
            shift,
            mask: slots as u64 - 1,
            heads: vec![NIL; slots],
            nodes: Vec::new(),
            free: NIL,
            bits: vec![0; slots / 64],
            len: 0,
            least: None,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Holds the event keyed `key` (due at `time`), when the clock is at
    /// `now`; past the horizon, gives it back.
    #[inline]
    pub(super) fn push(&mut self, now: u64, time: u64, key: u128, event: E) -> Result<(), E> {
        if (time >> self.shift) - (now >> self.shift) > self.mask {
            return Err(event);
        }
        let slot = ((time >> self.shift) & self.mask) as usize;
        let next = self.heads[slot];
        let node = if self.free != NIL {
            let i = self.free;
            let n = &mut self.nodes[i as usize];
            self.free = n.next;
            *n = Node {
                key,
                next,
                event: Some(event),
            };
            i
        } else {
            let i = u32::try_from(self.nodes.len()).expect("under 2^32 events in the wheel");
            self.nodes.push(Node {
                key,
                next,
                event: Some(event),
            });
            i
        };
        self.heads[slot] = node;
        self.bits[slot / 64] |= 1 << (slot % 64);
        self.len += 1;
        if let Some((least, _)) = self.least {
            if key < least {
                self.least = Some((key, slot));
            }
        }
        Ok(())
    }

    /// The least key and its bucket, the clock being at `now`.
    #[inline]
    pub(super) fn least(&mut self, now: u64) -> Option<u128> {
        if self.len == 0 {
            return None;
        }
        if self.least.is_none() {
            let slot = self.first_bucket(now);
            let mut i = self.heads[slot];
            let mut key = u128::MAX;
            while i != NIL {
                let n = &self.nodes[i as usize];
                key = key.min(n.key);
                i = n.next;
            }
            self.least = Some((key, slot));
        }
        self.least.map(|(k, _)| k)
    }

    /// Takes the event with the least key (the wheel must hold one, and
    /// [`Self::least`] have been asked since the last pop).
    #[inline]
    pub(super) fn pop(&mut self) -> (u128, E) {
        let (key, slot) = self.least.take().expect("least asked first");
        // Unlink the least key's node from the bucket's head or from the
        // node before it; it heads the free list.
        let mut prev = NIL;
        let mut i = self.heads[slot];
        while self.nodes[i as usize].key != key {
            prev = i;
            i = self.nodes[i as usize].next;
        }
        let n = &mut self.nodes[i as usize];
        let next = std::mem::replace(&mut n.next, self.free);
        let event = n.event.take().expect("a node in a bucket holds its event");
        self.free = i;
        if prev == NIL {
            self.heads[slot] = next;
            if next == NIL {
                self.bits[slot / 64] &= !(1 << (slot % 64));
            }
        } else {
            self.nodes[prev as usize].next = next;
        }
        self.len -= 1;
        (key, event)
    }

    /// The first bucket holding an event, from the clock's slot on around
    /// the ring (the wheel holds one).
    fn first_bucket(&self, now: u64) -> usize {
        let from = ((now >> self.shift) & self.mask) as usize;
        let words = self.bits.len();
        let (w0, b0) = (from / 64, from % 64);
        let first = self.bits[w0] & (!0u64 << b0);
        if first != 0 {
            return w0 * 64 + first.trailing_zeros() as usize;
        }
        for k in 1..=words {
            let w = (w0 + k) % words;
            // Back at the clock's word: only its bits below the clock's
            // slot are left (the far end of the horizon).
            let bits = if k == words {
                self.bits[w] & !(!0u64 << b0)
            } else {
                self.bits[w]
            };
            if bits != 0 {
                return w * 64 + bits.trailing_zeros() as usize;
            }
        }
        unreachable!("the wheel holds an event")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_follow_the_events_in_flight_not_the_events_handled() {
        // A fleet's steady state: each pop schedules the next event a little
        // later, 100 in flight. The slab reuses the popped nodes.
        let mut w = Wheel::new(4, 256);
        let mut now = 0u64;
        let mut seq = 0u128;
        for i in 0..100u64 {
            w.push(now, i * 7, u128::from(i * 7) << 64 | seq, i)
                .unwrap();
            seq += 1;
        }
        for _ in 0..100_000 {
            let key = w.least(now).expect("events in flight");
            let (k, e) = w.pop();
            assert_eq!(k, key);
            now = (k >> 64) as u64;
            let t = now + 500 + e % 300;
            w.push(now, t, u128::from(t) << 64 | seq, e).unwrap();
            seq += 1;
        }
        assert_eq!(w.len(), 100);
        assert_eq!(w.nodes.len(), 100, "popped nodes are reused");
    }

    #[test]
    fn a_bucket_holding_several_events_gives_them_in_key_order() {
        // One 16 ns bucket: events pushed out of order, several per bucket.
        let mut w = Wheel::new(4, 64);
        for (t, s) in [(9u64, 0u128), (3, 1), (9, 2), (15, 3), (3, 4)] {
            w.push(0, t, u128::from(t) << 64 | s, s).unwrap();
        }
        let mut got = Vec::new();
        while let Some(k) = w.least(0) {
            got.push((k >> 64) as u64);
            assert_eq!(w.pop().0, k);
        }
        assert_eq!(got, [3, 3, 9, 9, 15]);
        assert_eq!(w.len(), 0);
    }
}
