//! What the router knows of the replicas: their load as last reported.
//!
//! Production routers do not read engine state directly: llm-d's endpoint
//! picker scrapes each vLLM pod's metrics (queue length, KV-cache usage) on
//! an interval, and SGLang's router tracks what it sent. With
//! `fleet.report_interval_s = 0` the view follows every change at once (the
//! idealised router, and the behaviour of runs before reports existed); with
//! an interval the view is a snapshot refreshed at each report, so
//! load-based routers herd onto the replica that looked idlest at the last
//! report until the next one corrects them.

use super::min_tree::MinTree;
use crate::replica::Replica;
use std::cell::RefCell;
use std::cmp::Reverse;

/// The capacity of the fastest replica in a view.
pub const FULL: u64 = 1 << 20;

/// One replica's load as the router sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaLoad {
    /// Requests queued or swapped out.
    pub waiting: u32,
    /// Requests in the running batch.
    pub running: u32,
    /// KV blocks in active use (vLLM's `kv_cache_usage` numerator:
    /// unreferenced cached prefixes count as free).
    pub kv_active: u64,
    pub kv_total: u64,
    /// A disaggregated prefill replica's prompt tokens still to prefill
    /// (0 on other replicas).
    pub prefill_tokens: u64,
    /// A prefill replica's tokens of KV held for transfer: what its link
    /// still has to carry (0 on other replicas).
    pub held_tokens: u64,
}

impl ReplicaLoad {
    pub fn of(r: &Replica) -> ReplicaLoad {
        ReplicaLoad {
            // Decode replicas of a disaggregated fleet also count requests
            // bound to them that are still prefilling elsewhere.
            waiting: r.waiting_len() as u32 + r.bound_incoming(),
            running: r.running_len() as u32,
            kv_active: r.active_kv_blocks(),
            kv_total: r.kv().total(),
            prefill_tokens: if r.is_prefill_only() {
                r.prefill_backlog_tokens()
            } else {
                0
            },
            held_tokens: r.held_tokens(),
        }
    }

    /// Requests routed there and not finished.
    pub fn outstanding(&self) -> u32 {
        self.waiting + self.running
    }

    pub fn kv_free(&self) -> u64 {
        self.kv_total.saturating_sub(self.kv_active)
    }

    /// Fraction of the KV cache in active use.
    pub fn kv_use(&self) -> f64 {
        self.kv_active as f64 / self.kv_total.max(1) as f64
    }
}

/// An index a router may never read: built at its first query and kept up
/// to date from then on. A run's router reads one index at most (least
/// outstanding or most free KV), and the other one changed after every
/// iteration for nothing (the KV index, under the bench's
/// least-outstanding router, was most of the view's cost). The minimum
/// does not depend on the order of the updates (lowest index on ties), so a
/// tree built late answers exactly as one kept all along.
#[derive(Clone, Debug)]
struct Lazy<K>(RefCell<Option<MinTree<K>>>);

impl<K: Ord + Copy> Lazy<K> {
    fn unread() -> Self {
        Lazy(RefCell::new(None))
    }

    /// The index's minimum; at the first query the tree is built over the
    /// `n` replicas' keys.
    fn argmin(&self, n: usize, key: impl Fn(usize) -> K) -> usize {
        self.0
            .borrow_mut()
            .get_or_insert_with(|| MinTree::new((0..n).map(key).collect()))
            .argmin()
    }

    /// Whether the tree exists (was queried): then updates must reach it.
    fn read(&mut self) -> bool {
        self.0.get_mut().is_some()
    }

    fn set(&mut self, i: usize, key: K) {
        if let Some(t) = self.0.get_mut() {
            t.set(i, key);
        }
    }
}

/// How a prefill pool's view weighs what binds a prefill replica: the work
/// ahead of a new request there, in picoseconds, is its prompt tokens
/// still to prefill at the pool's prefill rate plus the KV it holds for
/// transfer at its link's rate (the link is a FIFO: a new request's KV
/// crosses after all of it). The sum, not the longer of the two, because
/// held KV also takes the replica's memory from the prompts queued there:
/// under a saturated link the longer alone sent prompts to the replica
/// whose link drained first whatever its queue, and doubled TTFT p99
/// (`scenarios/disaggregation-slow-link.toml`, 960 → 2,040 ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefillWork {
    /// Picoseconds one prompt token takes to prefill.
    pub ps_per_prefill_token: u64,
    /// Picoseconds one token's KV takes on the link.
    pub ps_per_link_token: u64,
}

impl PrefillWork {
    #[inline]
    fn of(&self, l: &ReplicaLoad) -> u64 {
        l.prefill_tokens
            .saturating_mul(self.ps_per_prefill_token)
            .saturating_add(l.held_tokens.saturating_mul(self.ps_per_link_token))
    }
}

/// The fleet as the router sees it, indexed so that the least-loaded replica
/// (by outstanding requests, or by free KV blocks) is found in O(1) and kept
/// up to date in O(log N) per change.
#[derive(Clone, Debug)]
pub struct FleetView {
    loads: Vec<ReplicaLoad>,
    /// Outstanding requests per unit of capacity (see [`Self::with_capacity`]),
    /// then 0; in a prefill pool's view, the work ahead (see
    /// [`PrefillWork`]), then when the router last picked the replica, so
    /// that equally loaded replicas take turns instead of the lowest index
    /// taking every tie.
    by_outstanding: Lazy<(u64, u64)>,
    /// Set in a prefill pool's view.
    prefill: Option<PrefillWork>,
    /// Per replica, the router's pick count when it last chose it (prefill
    /// views only), and the count.
    last_pick: Vec<u64>,
    picks: u64,
    /// Relative speed of each replica, [`FULL`] for the fastest.
    capacity: Vec<u64>,
    /// Most free KV blocks first, then fewest outstanding requests.
    by_free_kv: Lazy<(Reverse<u64>, u32)>,
    /// Every change is seen at once (no report interval).
    live: bool,
    /// Replicas a router may choose (all, unless the fleet has a life
    /// cycle: only ready replicas are routable, see `lifecycle`).
    routable: Vec<bool>,
}

impl FleetView {
    /// The view of `replicas` at the start of a run; `live` when there is no
    /// report interval.
    pub fn new(replicas: &[Replica], live: bool) -> FleetView {
        Self::with_capacity(replicas, live, vec![FULL; replicas.len()])
    }

    /// A view of replicas of different speeds (heterogeneous pools):
    /// least-outstanding compares outstanding requests per unit of
    /// `capacity` (relative speed, [`FULL`] for the fastest), so an H100
    /// takes about twice the requests of an A100 beside it, as weighted
    /// least-connections balancers do (Envoy's LEAST_REQUEST with weights).
    /// Equal capacities order replicas exactly as plain counts do.
    pub fn with_capacity(replicas: &[Replica], live: bool, capacity: Vec<u64>) -> FleetView {
        assert_eq!(capacity.len(), replicas.len());
        assert!(capacity.iter().all(|&c| (1..=FULL).contains(&c)));
        let loads: Vec<ReplicaLoad> = replicas.iter().map(ReplicaLoad::of).collect();
        // Both trees are filled from the loads at their first query.
        FleetView {
            by_outstanding: Lazy::unread(),
            prefill: None,
            last_pick: Vec::new(),
            picks: 0,
            capacity,
            by_free_kv: Lazy::unread(),
            routable: vec![true; loads.len()],
            loads,
            live,
        }
    }

    /// The view of a disaggregated prefill pool's replicas: least-loaded
    /// routing compares the work ahead of a new request (`work`), ties
    /// going to the replica picked least recently.
    pub fn prefill(replicas: &[Replica], live: bool, work: PrefillWork) -> FleetView {
        let mut v = Self::new(replicas, live);
        v.prefill = Some(work);
        v.last_pick = vec![0; replicas.len()];
        v
    }

    /// The router sent a request to replica `i`: a prefill view moves it
    /// behind every replica it ties with.
    #[inline]
    pub fn picked(&mut self, i: usize) {
        if self.prefill.is_some() {
            self.picks += 1;
            self.last_pick[i] = self.picks;
            if self.by_outstanding.read() {
                let key = self.outstanding_key(i);
                self.by_outstanding.set(i, key);
            }
        }
    }

    /// Replica `i`'s key in the outstanding-requests tree; an unroutable
    /// replica sorts last.
    fn outstanding_key(&self, i: usize) -> (u64, u64) {
        if !self.routable[i] {
            return (u64::MAX, u64::MAX);
        }
        match &self.prefill {
            None => (Self::per_capacity(&self.loads[i], self.capacity[i]), 0),
            Some(w) => (w.of(&self.loads[i]), self.last_pick[i]),
        }
    }

    /// Replica `i`'s key in the free-KV tree; an unroutable replica sorts
    /// last.
    fn kv_key_of(&self, i: usize) -> (Reverse<u64>, u32) {
        if self.routable[i] {
            Self::kv_key(&self.loads[i])
        } else {
            (Reverse(0), u32::MAX)
        }
    }

    #[inline]
    fn per_capacity(l: &ReplicaLoad, capacity: u64) -> u64 {
        let n = l.outstanding() as u64;
        if capacity == FULL {
            n // no division on the common, homogeneous path
        } else {
            n * FULL / capacity
        }
    }

    fn kv_key(l: &ReplicaLoad) -> (Reverse<u64>, u32) {
        (Reverse(l.kv_free()), l.outstanding())
    }

    fn set(&mut self, i: usize, load: ReplicaLoad) {
        let old = std::mem::replace(&mut self.loads[i], load);
        // Each tree is told only when its own key moved: most changes after
        // an iteration are KV blocks alone, which the outstanding-requests
        // tree (least-outstanding routing) does not order by.
        let outstanding = old.outstanding() != load.outstanding();
        let work = self.prefill.is_some()
            && (old.prefill_tokens != load.prefill_tokens || old.held_tokens != load.held_tokens);
        if (outstanding || work) && self.by_outstanding.read() {
            let key = self.outstanding_key(i);
            self.by_outstanding.set(i, key);
        }
        if self.by_free_kv.read() && (outstanding || old.kv_free() != load.kv_free()) {
            let key = self.kv_key_of(i);
            self.by_free_kv.set(i, key);
        }
    }

    /// Puts replica `i`'s keys in the trees a router reads; an unroutable
    /// replica sorts last in both.
    fn index(&mut self, i: usize) {
        if self.by_outstanding.read() {
            let key = self.outstanding_key(i);
            self.by_outstanding.set(i, key);
        }
        if self.by_free_kv.read() {
            let key = self.kv_key_of(i);
            self.by_free_kv.set(i, key);
        }
    }

    /// Replica `i` enters or leaves the set routers may choose from.
    pub fn set_routable(&mut self, i: usize, routable: bool) {
        if self.routable[i] != routable {
            self.routable[i] = routable;
            self.index(i);
        }
    }

    /// Whether a router may send requests to replica `i`.
    pub fn is_routable(&self, i: usize) -> bool {
        self.routable[i]
    }

    /// Replica `i` changed (a request routed, an iteration ended). A live
    /// view takes the change; a reported view waits for the next report.
    pub fn observe(&mut self, i: usize, replica: &Replica) {
        if self.live {
            self.set(i, ReplicaLoad::of(replica));
        }
    }

    /// A load report from every replica.
    pub fn report(&mut self, replicas: &[Replica]) {
        for (i, r) in replicas.iter().enumerate() {
            self.set(i, ReplicaLoad::of(r));
        }
    }

    pub fn len(&self) -> usize {
        self.loads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.loads.is_empty()
    }

    pub fn load(&self, i: usize) -> &ReplicaLoad {
        &self.loads[i]
    }

    pub fn loads(&self) -> &[ReplicaLoad] {
        &self.loads
    }

    /// The replica with the fewest outstanding requests per unit of capacity
    /// (lowest index on ties), among the routable ones when any is; in a
    /// prefill pool's view, the least work ahead (see [`PrefillWork`]),
    /// the least recently picked on ties.
    pub fn least_outstanding(&self) -> usize {
        self.by_outstanding
            .argmin(self.len(), |i| self.outstanding_key(i))
    }

    /// The replica with the most free KV blocks (then the fewest outstanding
    /// requests, then the lowest index).
    pub fn most_free_kv(&self) -> usize {
        self.by_free_kv.argmin(self.len(), |i| self.kv_key_of(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RequestId;
    use crate::scenario::EngineCfg;

    fn reps(n: u32) -> Vec<Replica> {
        (0..n)
            .map(|i| Replica::new(i, &EngineCfg::default(), 100, 1024.0, 0))
            .collect()
    }

    #[test]
    fn a_live_view_follows_changes_and_a_reported_one_waits() {
        let mut rs = reps(3);
        let mut live = FleetView::new(&rs, true);
        let mut stale = FleetView::new(&rs, false);
        rs[0].enqueue(0);
        live.observe(0, &rs[0]);
        stale.observe(0, &rs[0]);
        assert_eq!(live.least_outstanding(), 1);
        assert_eq!(live.load(0).outstanding(), 1);
        assert_eq!(stale.least_outstanding(), 0, "not reported yet");
        stale.report(&rs);
        assert_eq!(stale.least_outstanding(), 1);
        assert_eq!(stale.most_free_kv(), 1, "equal KV: fewest outstanding wins");
    }

    #[test]
    fn a_tree_first_read_late_answers_as_a_scan() {
        // Changes before and after each tree's first query: the lazily
        // built tree must name the replica a left-to-right scan finds.
        let mut rs = reps(5);
        let mut v = FleetView::new(&rs, true);
        let scan = |v: &FleetView| {
            let mut best = (0, 0);
            for i in 0..v.len() {
                let (o, k) = (v.load(i).outstanding(), v.load(i).kv_free());
                if o < v.load(best.0).outstanding() {
                    best.0 = i;
                }
                let kb = v.load(best.1);
                if k > kb.kv_free() || (k == kb.kv_free() && o < kb.outstanding()) {
                    best.1 = i;
                }
            }
            best
        };
        for (step, r) in [3usize, 0, 3, 1, 4, 4, 2, 0].into_iter().enumerate() {
            rs[r].enqueue(step as RequestId);
            v.observe(r, &rs[r]);
            if step == 2 {
                assert_eq!(v.least_outstanding(), scan(&v).0);
            }
            if step >= 5 {
                assert_eq!(v.least_outstanding(), scan(&v).0);
                assert_eq!(v.most_free_kv(), scan(&v).1);
            }
        }
        v.set_routable(0, false);
        assert_ne!(v.least_outstanding(), 0);
        assert_ne!(v.most_free_kv(), 0);
    }

    #[test]
    fn a_prefill_view_takes_turns_on_ties_and_weighs_held_kv() {
        let rs = reps(3);
        let work = PrefillWork {
            ps_per_prefill_token: 20_000,
            ps_per_link_token: 3_000,
        };
        let mut v = FleetView::prefill(&rs, true, work);
        // Idle replicas tie: each pick sends the next one to the back,
        // so three picks visit all three instead of replica 0 three times.
        let mut seen = Vec::new();
        for _ in 0..6 {
            let r = v.least_outstanding();
            v.picked(r);
            seen.push(r);
        }
        assert_eq!(seen, [0, 1, 2, 0, 1, 2]);
        // Replica 0 holds 10,000 tokens of KV for its link (30 ms of link
        // time), replica 1 has 1,000 prompt tokens to prefill (20 ms),
        // replica 2 500 tokens (10 ms) and 2,000 held (6 ms): replica 2
        // has the least work ahead, then replica 1.
        let load = |prefill_tokens, held_tokens| ReplicaLoad {
            prefill_tokens,
            held_tokens,
            ..ReplicaLoad::default()
        };
        v.set(0, load(0, 10_000));
        v.set(1, load(1_000, 0));
        v.set(2, load(500, 2_000));
        assert_eq!(v.least_outstanding(), 2);
        v.set(2, load(500, 5_000));
        assert_eq!(v.least_outstanding(), 1);
        // A colocated view is unchanged: fewest requests, lowest index.
        let mut plain = FleetView::new(&rs, true);
        plain.picked(0);
        assert_eq!(plain.least_outstanding(), 0);
    }

    #[test]
    fn capacity_weights_outstanding_counts() {
        let mut rs = reps(2);
        let half = FULL / 2;
        let mut v = FleetView::with_capacity(&rs, true, vec![FULL, half]);
        // Replica 0 (twice as fast) holds 1, replica 1 none: replica 1.
        rs[0].enqueue(0);
        v.observe(0, &rs[0]);
        assert_eq!(v.least_outstanding(), 1);
        // Replica 0 at 1 and replica 1 at 1: 1 per full unit vs 2.
        rs[1].enqueue(1);
        v.observe(1, &rs[1]);
        assert_eq!(v.least_outstanding(), 0);
        // Replica 0 at 2 ties replica 1 at 1 (2/1 = 1/0.5): the lower index.
        rs[0].enqueue(2);
        v.observe(0, &rs[0]);
        assert_eq!(v.least_outstanding(), 0);
        rs[0].enqueue(3);
        v.observe(0, &rs[0]);
        assert_eq!(v.least_outstanding(), 1);
    }
}
