//! The fleet above the replicas: its pools, the routing group each request
//! meets (all colocated pools behind `fleet.router`, or a prefill and a
//! decode pool with a router each), and — when it disaggregates — the KV
//! hand-off from prefill to decode replicas over the links of
//! [`super::disagg`]. The simulation calls it at arrivals, iteration ends,
//! load reports and transfer completions; it never prices iterations.

use super::disagg::{Link, LinkModel, TransferReport};
use super::pool_series::PoolSample;
use super::routing::Routing;
use super::routing_trace::{Decision, RoutingTrace};
use crate::replica::Replica;
use crate::request::{Request, RequestId, Status, TransferRecord};
use crate::scenario::{FleetPlan, PoolPlan, PoolRole, Scenario};
use crate::store::SpillSort;
use crate::time::SimTime;
use serde::Serialize;
use std::collections::VecDeque;

/// Replicas `first..first + len` behind one router.
struct Group {
    routing: Routing,
    first: usize,
    len: usize,
}

impl Group {
    fn contains(&self, r: usize) -> bool {
        (self.first..self.first + self.len).contains(&r)
    }
}

/// Disaggregation state: links per prefill replica, KV waiting for decode
/// memory per decode replica, transfers on the wire.
struct Disagg {
    model: LinkModel,
    prefill: usize,
    decode: usize,
    /// Global index of the first prefill replica (link 0).
    prefill_first: usize,
    links: Vec<Link>,
    /// Handed-off requests waiting for their decode replica's blocks, FIFO.
    inbound: Vec<VecDeque<RequestId>>,
    /// Transfers on the wire, by event slot.
    wire: Vec<Option<RequestId>>,
    wire_free: Vec<u32>,
    bytes_received: u64,
    local_prefills: u64,
    scratch: Vec<RequestId>,
}

/// What the simulation must do after a fleet step.
#[derive(Debug, Default)]
pub struct Actions {
    /// Transfers to complete: (arrival time, slot for `transfer_done`).
    pub transfers: Vec<(SimTime, u32)>,
    /// Replicas that may have work now (start them if idle).
    pub kick: Vec<usize>,
}

/// Pools, routers and the KV data path of one run.
pub struct Fleet {
    groups: Vec<Group>,
    /// Pool of each replica (index into `Scenario::pools`, 0 without pools).
    pool_of: Vec<u16>,
    disagg: Option<Disagg>,
    /// Replica range of each declared pool (empty for the implicit one),
    /// for `pools.csv`.
    pool_ranges: Vec<(usize, usize, PoolRole)>,
    series: Vec<PoolSample>,
}

/// Replica `i` (its index in the fleet) of pool `p`, as a run builds it
/// at the start and in place of a failed one.
pub fn replica(p: &PoolPlan, i: u32, seed: u64) -> Replica {
    let memory = p.memory();
    let mut r = Replica::new(
        i,
        p.replica.engine_plan,
        memory.kv_blocks,
        memory.block_bytes(),
        seed,
    );
    r.set_kv_groups(memory.kv_groups);
    if p.role == PoolRole::Prefill {
        r.set_prefill_only();
    }
    r
}

impl Fleet {
    /// The replicas of `pools`, in pool order (see
    /// `scenario::pool_plan::resolve`): each pool's slots.
    pub fn replicas(pools: &[PoolPlan], seed: u64) -> Vec<Replica> {
        let mut out = Vec::new();
        for p in pools {
            out.extend((p.first..p.first + p.replicas).map(|i| replica(p, i, seed)));
        }
        out
    }

    /// The fleet of `plan` over `pools` and their `replicas`.
    pub fn new(plan: &FleetPlan, pools: &[PoolPlan], replicas: &[Replica]) -> Fleet {
        let mut pool_of = vec![0u16; replicas.len()];
        for (k, p) in pools.iter().enumerate() {
            for r in p.first..p.first + p.replicas {
                pool_of[r as usize] = k as u16;
            }
        }
        let mut groups = Vec::new();
        let colocated: Vec<&PoolPlan> = pools
            .iter()
            .filter(|p| p.role == PoolRole::Colocated)
            .collect();
        if plan.canary {
            // A canary rollout splits traffic between versions before each
            // pool's own router (`canary`): one routing group per pool.
            for p in &colocated {
                let (a, b) = (p.first as usize, (p.first + p.replicas) as usize);
                groups.push(Group {
                    routing: Routing::new(&p.routing_plan(), &replicas[a..b]),
                    first: a,
                    len: b - a,
                });
            }
        } else if plan.regions > 0 {
            // One routing group per region (`region`: the global router
            // picks the region, the region's router its replica).
            for g in 0..plan.regions {
                let mine: Vec<&PoolPlan> = colocated
                    .iter()
                    .copied()
                    .filter(|p| p.region as usize == g)
                    .collect();
                let a = mine[0].first as usize;
                let len: u32 = mine.iter().map(|p| p.replicas).sum();
                let weigh = mine.len() > 1 && plan.capacity_weighted;
                let capacity = weigh.then(|| capacities(&mine));
                groups.push(Group {
                    routing: Routing::with_capacity(
                        &plan.routing,
                        &replicas[a..a + len as usize],
                        capacity,
                    ),
                    first: a,
                    len: len as usize,
                });
            }
        } else if !colocated.is_empty() {
            let len: u32 = colocated.iter().map(|p| p.replicas).sum();
            let weigh = colocated.len() > 1 && plan.capacity_weighted;
            let capacity = weigh.then(|| capacities(&colocated));
            groups.push(Group {
                routing: Routing::with_capacity(&plan.routing, &replicas[..len as usize], capacity),
                first: 0,
                len: len as usize,
            });
        }
        let mut disagg = None;
        let find = |role| pools.iter().find(|p| p.role == role);
        if let (Some(pre), Some(dec)) = (find(PoolRole::Prefill), find(PoolRole::Decode)) {
            let model = LinkModel {
                cfg: plan.kv_transfer.clone(),
                bytes_per_token: plan.kv_bytes_per_token,
                layers: plan.layers,
            };
            let work = prefill_work(pre, &model);
            for p in [pre, dec] {
                let (a, b) = (p.first as usize, (p.first + p.replicas) as usize);
                let routing = if p.role == PoolRole::Prefill {
                    Routing::for_prefill(&p.routing_plan(), &replicas[a..b], work)
                } else {
                    Routing::new(&p.routing_plan(), &replicas[a..b])
                };
                groups.push(Group {
                    routing,
                    first: a,
                    len: b - a,
                });
            }
            disagg = Some(Disagg {
                model,
                prefill: groups.len() - 2,
                prefill_first: pre.first as usize,
                decode: groups.len() - 1,
                links: vec![Link::default(); pre.replicas as usize],
                inbound: vec![VecDeque::new(); replicas.len()],
                wire: Vec::new(),
                wire_free: Vec::new(),
                bytes_received: 0,
                local_prefills: 0,
                scratch: Vec::new(),
            });
        }
        Fleet {
            groups,
            pool_of,
            disagg,
            pool_ranges: pools
                .iter()
                .filter(|p| p.declared)
                .map(|p| (p.first as usize, (p.first + p.replicas) as usize, p.role))
                .collect(),
            series: Vec::new(),
        }
    }

    /// A `pools.csv` tick (fleets with pools only).
    pub fn sample(&mut self, now: SimTime, replicas: &[Replica]) {
        for (k, &(a, b, role)) in self.pool_ranges.iter().enumerate() {
            let mut s = super::pool_series::sample(now, k as u16, &replicas[a..b]);
            if let (Some(d), PoolRole::Prefill) = (&self.disagg, role) {
                s.transfers_pending = (d.wire.iter().flatten().count()
                    + d.inbound.iter().map(VecDeque::len).sum::<usize>())
                    as u32;
                s.link_bytes_sent = d.links.iter().map(|l| l.bytes_sent).sum();
            }
            self.series.push(s);
        }
    }

    /// The life cycle's replica counts by phase of each pool at the tick
    /// just sampled (`sample` ran first): `pools.csv`'s phase columns.
    pub fn set_phase_counts(&mut self, per_pool: &[crate::lifecycle::FleetSample]) {
        let n = self.series.len();
        let k = per_pool.len().min(n);
        for (row, p) in self.series[n - k..]
            .iter_mut()
            .zip(&per_pool[per_pool.len() - k..])
        {
            row.phases = Some(*p);
        }
    }

    /// Rows of `pools.csv` held so far (the memory guard counts them).
    pub fn series_len(&self) -> usize {
        self.series.len()
    }

    /// The `pools.csv` rows sampled so far.
    pub fn take_series(&mut self) -> Vec<PoolSample> {
        std::mem::take(&mut self.series)
    }

    /// Pool index of replica `r` (0 without pools).
    #[inline]
    pub fn pool_of(&self, r: usize) -> usize {
        self.pool_of[r] as usize
    }

    pub fn disaggregated(&self) -> bool {
        self.disagg.is_some()
    }

    /// Time of the first load report, when reports are periodic.
    pub fn first_report(&self) -> Option<SimTime> {
        self.groups
            .iter()
            .filter_map(|g| g.routing.first_report())
            .min()
    }

    /// Places `req` (id `id`): the replica it is queued on. In a
    /// disaggregated fleet the decode router picks its decode replica first
    /// (Dynamo's decode worker receives the request); a prompt with at most
    /// `local_prefill_max_tokens` tokens outside that replica's prefix cache
    /// prefills there, any other prefills on a replica the prefill router
    /// picks and its KV follows.
    pub fn route(&mut self, req: &mut Request, replicas: &mut [Replica]) -> usize {
        let Some(d) = &mut self.disagg else {
            // With regions, a request is served in its home region unless
            // the global router sent it elsewhere (`route_in`).
            let k = if self.groups.len() > 1 {
                req.region as usize
            } else {
                0
            };
            let g = &mut self.groups[k];
            return g.first + g.routing.route(req);
        };
        let dg = &mut self.groups[d.decode];
        let dec = dg.first + dg.routing.route(req);
        let uncached = req
            .prompt_tokens
            .saturating_sub(replicas[dec].cached_prefix_tokens(req));
        if uncached <= d.model.cfg.local_prefill_max_tokens {
            d.local_prefills += 1;
            return dec;
        }
        let pg = &mut self.groups[d.prefill];
        let pre = pg.first + pg.routing.route(req);
        if req.output_tokens <= 1 {
            return pre; // its one token comes from the prefill: nothing moves
        }
        replicas[dec].bind_incoming();
        dg_observe(&mut self.groups[d.decode], dec, &replicas[dec]);
        let bytes = d.model.payload(req.prompt_tokens);
        req.set_kv_transfer(TransferRecord {
            prefill_replica: pre as u32,
            decode_replica: dec as u32,
            bytes,
            ..TransferRecord::default()
        });
        pre
    }

    /// Places `req` in routing group `k` (a region's replicas, see
    /// `region`; or a colocated pool's with `[canary]`, whose pools each
    /// have their group): the replica it is queued on.
    pub fn route_in(&mut self, k: usize, req: &Request) -> usize {
        let g = &mut self.groups[k];
        g.first + g.routing.route(req)
    }

    /// Records in `trace` the decision that just placed request `id` on
    /// replica `r`: the candidates are the replicas of `r`'s routing group
    /// (the group whose router made the last pick), scored by its router.
    #[allow(clippy::too_many_arguments)]
    pub fn trace_decision<'c>(
        &self,
        trace: &mut RoutingTrace,
        now: SimTime,
        id: u64,
        req: &Request,
        r: usize,
        replicas: &[Replica],
        cost: impl Fn(usize) -> &'c dyn crate::cost::CostModel,
        budget: impl Fn(usize) -> u32,
    ) {
        let g = self
            .groups
            .iter()
            .find(|g| g.contains(r))
            .expect("every replica is in a group");
        let routable = |i: usize| g.routing.is_routable(i);
        let d = Decision {
            first: g.first,
            len: g.len,
            routable: &routable,
            scores: g.routing.last_scores(),
        };
        trace.record(now, id, req, r, &d, replicas, cost, budget);
    }

    /// What the (first group's) router's scores mean.
    pub fn score_meaning(&self) -> &'static str {
        self.groups[0].routing.score_meaning()
    }

    fn group_of(&mut self, r: usize) -> &mut Group {
        self.groups
            .iter_mut()
            .find(|g| g.contains(r))
            .expect("every replica is in a group")
    }

    /// Replica `r` enters or leaves the set its router may choose from
    /// (life cycle: only ready replicas take requests).
    pub fn set_routable(&mut self, r: usize, routable: bool) {
        let g = if self.groups.len() == 1 {
            &mut self.groups[0]
        } else {
            self.group_of(r)
        };
        g.routing.set_routable(r - g.first, routable);
    }

    /// Replica `r` changed state (took a request, ended an iteration).
    pub fn observe(&mut self, r: usize, replica: &Replica) {
        let g = if self.groups.len() == 1 {
            &mut self.groups[0]
        } else {
            self.group_of(r)
        };
        g.routing.observe(r - g.first, replica);
    }

    /// Every replica reports its load; returns when the next report is due.
    pub fn report(&mut self, now: SimTime, replicas: &[Replica]) -> SimTime {
        let mut next = None;
        for g in &mut self.groups {
            let t = g.routing.report(now, &replicas[g.first..g.first + g.len]);
            next = Some(next.map_or(t, |n: SimTime| n.min(t)));
        }
        next.expect("a fleet has a group")
    }

    /// After replica `r` ended an iteration: its hand-offs join their decode
    /// replicas' queues, and decode replicas with room accept KV, which then
    /// takes the link.
    pub fn step(
        &mut self,
        r: usize,
        now: SimTime,
        replicas: &mut [Replica],
        reqs: &mut [Request],
        act: &mut Actions,
    ) {
        let Some(d) = &mut self.disagg else {
            return;
        };
        let mut handed = std::mem::take(&mut d.scratch);
        replicas[r].take_handoffs(&mut handed);
        let mut touched = vec![r];
        for &id in &handed {
            let r = &mut reqs[id as usize];
            let started = r.first_scheduled.unwrap_or(now);
            let rec = r.kv_transfer_mut().expect("handed off with a record");
            rec.handoff = Some(now);
            rec.prefill_start = Some(started);
            let dec = rec.decode_replica as usize;
            d.inbound[dec].push_back(id);
            if !touched.contains(&dec) {
                touched.push(dec);
            }
        }
        handed.clear();
        d.scratch = handed;
        for dec in touched {
            Self::accept(d, dec, now, replicas, reqs, act);
        }
    }

    /// Decode replica `dec` accepts queued KV in FIFO order while it fits.
    fn accept(
        d: &mut Disagg,
        dec: usize,
        now: SimTime,
        replicas: &mut [Replica],
        reqs: &mut [Request],
        act: &mut Actions,
    ) {
        while let Some(&id) = d.inbound[dec].front() {
            if !replicas[dec].accept_transfer(id, now, reqs) {
                break;
            }
            d.inbound[dec].pop_front();
            let rec = reqs[id as usize].kv_transfer_mut().expect("record");
            rec.accepted = Some(now);
            let link = rec.prefill_replica as usize - d.prefill_first;
            let at = d.model.book(&mut d.links[link], rec, now);
            let slot = match d.wire_free.pop() {
                Some(s) => {
                    d.wire[s as usize] = Some(id);
                    s
                }
                None => {
                    d.wire.push(Some(id));
                    (d.wire.len() - 1) as u32
                }
            };
            act.transfers.push((at, slot));
        }
    }

    /// Transfer `slot` arrived: the prefill side frees its blocks, the
    /// decode side starts decoding.
    pub fn transfer_done(
        &mut self,
        slot: u32,
        now: SimTime,
        replicas: &mut [Replica],
        reqs: &mut [Request],
        act: &mut Actions,
    ) {
        let d = self.disagg.as_mut().expect("transfers need disaggregation");
        let id = d.wire[slot as usize].take().expect("transfer on the wire");
        d.wire_free.push(slot);
        let rec = reqs[id as usize].kv_transfer_mut().expect("record");
        rec.done = Some(now);
        let (pre, dec) = (rec.prefill_replica as usize, rec.decode_replica as usize);
        d.bytes_received += rec.bytes;
        replicas[pre].release_handoff(id, now, reqs);
        replicas[dec].activate_transfer(id);
        reqs[id as usize].replica = dec as u32;
        act.kick.push(pre);
        act.kick.push(dec);
        // Freed prefill memory does not help decode replicas, but the next
        // queued KV on `dec` may now have its slot.
        Self::accept(d, dec, now, replicas, reqs, act);
    }

    /// Whether transfers are still queued or on the wire.
    pub fn busy(&self) -> bool {
        self.disagg.as_ref().is_some_and(|d| {
            d.wire.iter().any(Option::is_some) || d.inbound.iter().any(|q| !q.is_empty())
        })
    }

    /// Conservation of the data path: bytes sent = received + on the wire,
    /// every queued or travelling KV belongs to a request in flight whose
    /// prefill replica still holds it.
    pub fn check(&self, reqs: &[Request], replicas: &[Replica]) -> Result<(), String> {
        let Some(d) = &self.disagg else {
            return Ok(());
        };
        let sent: u64 = d.links.iter().map(|l| l.bytes_sent).sum();
        let mut on_wire = 0u64;
        for id in d.wire.iter().flatten() {
            let r = &reqs[*id as usize];
            on_wire += r.kv_transfer().map_or(0, |t| t.bytes);
        }
        if sent != d.bytes_received + on_wire {
            return Err(format!(
                "KV bytes sent {sent} != received {} + on the link {on_wire}",
                d.bytes_received
            ));
        }
        let waiting = d.inbound.iter().flatten();
        for &id in d.wire.iter().flatten().chain(waiting) {
            let r = &reqs[id as usize];
            let pre = r.kv_transfer().map_or(0, |t| t.prefill_replica);
            if r.status != Status::InFlight || !replicas[pre as usize].unfinished().any(|x| x == id)
            {
                return Err(format!(
                    "request {id}'s KV is between replicas but its prefill replica {pre} does not hold it"
                ));
            }
        }
        let bound: u64 = replicas.iter().map(|r| r.bound_incoming() as u64).sum();
        let moving = reqs
            .iter()
            .filter(|r| r.status == Status::InFlight && r.kv_transfer().is_some())
            .count() as u64;
        if bound > moving {
            return Err(format!(
                "decode replicas expect {bound} transferred requests, only {moving} are in flight"
            ));
        }
        let held: usize = replicas.iter().map(Replica::held_for_transfer).sum();
        let between =
            d.wire.iter().flatten().count() + d.inbound.iter().map(VecDeque::len).sum::<usize>();
        if held != between {
            return Err(format!(
                "prefill replicas hold {held} handed-off requests, the data path knows {between}"
            ));
        }
        Ok(())
    }

    /// Link totals for the summary (disaggregated fleets only) from times
    /// folded as requests ended; fails when times spilled to disk cannot be
    /// read back.
    pub fn transfer_report_from(
        &self,
        times: TransferTimes,
        end: SimTime,
    ) -> Result<Option<TransferReport>, String> {
        let Some(d) = self.disagg.as_ref() else {
            return Ok(None);
        };
        let ms = |ns: u64| ns as f64 / 1e6;
        let TransferTimes {
            mut wait,
            mut total,
        } = times;
        let mean = |v: &mut SpillSort<u64>| v.sorted().sum::<u64>() as f64 / v.len().max(1) as f64;
        let p99 = |v: &mut SpillSort<u64>| {
            let k = ((v.len() as f64 * 0.99).ceil() as usize).saturating_sub(1);
            v.sorted().nth(k).unwrap_or(0)
        };
        let transfers: u64 = d.links.iter().map(|l| l.transfers).sum();
        let span = end.0.max(1) as f64 * d.links.len().max(1) as f64;
        let report = TransferReport {
            mode: d.model.cfg.mode.name().to_string(),
            bandwidth_gbyte_s: d.model.cfg.bandwidth_gbyte_s,
            links: d.links.len() as u32,
            transfers,
            local_prefills: d.local_prefills,
            bytes_sent: d.links.iter().map(|l| l.bytes_sent).sum(),
            bytes_received: d.bytes_received,
            link_utilization: d.links.iter().map(|l| l.bytes_sent as f64).sum::<f64>()
                / (span / 1e9 * d.model.cfg.bandwidth_gbyte_s * 1e9),
            link_utilization_max: d
                .links
                .iter()
                .map(|l| l.bytes_sent as f64)
                .fold(0.0, f64::max)
                / (end.0.max(1) as f64 / 1e9 * d.model.cfg.bandwidth_gbyte_s * 1e9),
            link_occupancy: d.links.iter().map(|l| l.busy_ns as f64).sum::<f64>() / span,
            decode_wait_ms_mean: ms(mean(&mut wait) as u64),
            decode_wait_ms_p99: ms(p99(&mut wait)),
            link_queue_ms_mean: ms(
                d.links.iter().map(|l| l.queue_ns).sum::<u64>() / transfers.max(1)
            ),
            transfer_ms_mean: ms(mean(&mut total) as u64),
            transfer_ms_p99: ms(p99(&mut total)),
        };
        match wait.error().or(total.error()) {
            Some(e) => Err(e.to_string()),
            None => Ok(Some(report)),
        }
    }

    /// Per-pool report rows (only with `[[fleet.pools]]`).
    pub fn pool_reports(
        &self,
        s: &Scenario,
        replicas: &[Replica],
        end: SimTime,
    ) -> Vec<PoolReport> {
        s.pools
            .iter()
            .filter(|p| p.declared)
            .map(|p| {
                let reps = &replicas[p.first as usize..(p.first + p.replicas) as usize];
                let span = end.0.max(1) as f64 * reps.len() as f64;
                let busy: u64 = reps.iter().map(|r| r.stats.busy_ns).sum();
                let kv: u128 = reps.iter().map(|r| r.stats.kv_block_ns).sum();
                PoolReport {
                    name: p.name.clone(),
                    role: p.role.name().to_string(),
                    role_kind: p.role,
                    first_replica: p.first,
                    hardware: p.hardware().name.clone(),
                    replicas: p.replicas,
                    tensor_parallel: p.parallel().tensor,
                    gpus: p.gpus(),
                    kv_blocks_per_replica: p.memory().kv_blocks,
                    iterations: reps.iter().map(|r| r.stats.iterations).sum(),
                    busy_fraction: busy as f64 / span,
                    kv_util_mean: kv as f64 / (span * p.memory().kv_blocks.max(1) as f64),
                    kv_util_max: reps
                        .iter()
                        .map(|r| r.stats.kv_peak_blocks as f64 / r.kv().total().max(1) as f64)
                        .fold(0.0, f64::max),
                    shape: if p.parallel().attention_data.is_some()
                        || p.parallel().redundant_experts > 0
                    {
                        p.parallel().fleet_shape(p.replicas, &p.hardware().name)
                    } else {
                        String::new()
                    },
                }
            })
            .collect()
    }
}

fn dg_observe(g: &mut Group, r: usize, replica: &Replica) {
    g.routing.observe(r - g.first, replica);
}

/// What a token costs a prefill replica of pool `pre`: its prefill at the
/// pool's cost model (a 2,048-token chunk on an empty cache, the bulk of a
/// prefill step) and its KV on the link (bytes per token over the link's
/// bandwidth), the weights of the prefill pool's load view.
fn prefill_work(pre: &PoolPlan, link: &LinkModel) -> super::view::PrefillWork {
    use crate::cost::BatchShape;
    const CHUNK: u64 = 2048;
    let mut b = BatchShape::default();
    b.add_prefill(CHUNK, 0);
    let chunk_ns = pre.cost_model().iteration_time(&b).max(1);
    let link_ps = link.bytes_per_token / (link.cfg.bandwidth_gbyte_s * 1e9) * 1e12;
    super::view::PrefillWork {
        ps_per_prefill_token: (chunk_ns * 1000 / CHUNK).max(1),
        ps_per_link_token: (link_ps.round() as u64).max(1),
    }
}

/// Relative speed of each replica of `pools` (the fastest = `view::FULL`):
/// the inverse of the time its cost model gives a reference iteration
/// (a 512-token prefill chunk beside 64 decodes at 2048 tokens of context,
/// a busy chunked-prefill step), so a router can weigh load by capacity.
fn capacities(pools: &[&PoolPlan]) -> Vec<u64> {
    use crate::cost::BatchShape;
    let mut b = BatchShape::default();
    b.add_prefill(512, 0);
    for _ in 0..64 {
        b.add_decode(2049);
    }
    let times: Vec<f64> = pools
        .iter()
        .map(|p| p.cost_model().iteration_time(&b).max(1) as f64)
        .collect();
    let fastest = times.iter().cloned().fold(f64::INFINITY, f64::min);
    let full = super::view::FULL;
    pools
        .iter()
        .zip(&times)
        .flat_map(|(p, &t)| {
            let c = ((full as f64 * fastest / t).round() as u64).clamp(1, full);
            std::iter::repeat_n(c, p.replicas as usize)
        })
        .collect()
}

/// The printed summary's lines for pools and KV links (none without pools).
pub fn summary_lines(
    pools: &[PoolReport],
    kv_transfer: Option<&super::disagg::TransferReport>,
) -> Vec<String> {
    let mut out: Vec<String> = pools
        .iter()
        .map(|p| {
            format!(
                "pool         {} ({}): {}, busy {:.1} %, KV use mean {:.1} %, max {:.1} %",
                p.name,
                p.role,
                if p.shape.is_empty() {
                    crate::parallel::fleet_shape(
                        p.replicas,
                        p.tensor_parallel,
                        p.gpus / (p.replicas * p.tensor_parallel).max(1),
                        1,
                        &p.hardware,
                    )
                } else {
                    p.shape.clone()
                },
                p.busy_fraction * 100.0,
                p.kv_util_mean * 100.0,
                p.kv_util_max * 100.0
            )
        })
        .collect();
    if let Some(t) = kv_transfer {
        out.push(format!(
            "KV transfer  {} transfers ({} prefilled locally), {:.1} GB over {} × {} GB/s {} links ({:.1} % used, hottest link {:.1} %); wait for decode memory mean {:.1} ms, p99 {:.1} ms; hand-off → decode mean {:.1} ms, p99 {:.1} ms",
            t.transfers,
            t.local_prefills,
            t.bytes_sent as f64 / 1e9,
            t.links,
            t.bandwidth_gbyte_s,
            t.mode,
            t.link_utilization * 100.0,
            t.link_utilization_max * 100.0,
            t.decode_wait_ms_mean,
            t.decode_wait_ms_p99,
            t.transfer_ms_mean,
            t.transfer_ms_p99
        ));
    }
    out
}

/// One pool's share of the run (summary.json `pools`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PoolReport {
    pub name: String,
    pub role: String,
    #[serde(skip)]
    pub role_kind: PoolRole,
    /// Its replicas are `first_replica..first_replica + replicas`.
    pub first_replica: u32,
    pub hardware: String,
    pub replicas: u32,
    pub tensor_parallel: u32,
    pub gpus: u32,
    pub kv_blocks_per_replica: u64,
    pub iterations: u64,
    /// Mean fraction of the run its replicas were computing.
    pub busy_fraction: f64,
    /// Mean and peak fraction of its KV cache in active use.
    pub kv_util_mean: f64,
    pub kv_util_max: f64,
    /// The printed shape of a pool whose MoE layout names DP attention or
    /// redundant experts (`Parallelism::fleet_shape`); empty otherwise.
    #[serde(skip)]
    pub shape: String,
}

/// Each KV transfer's decode-side wait and total time, ns, folded one ended
/// request at a time (one pair per transferred request), sorted on disk
/// beyond a bounded buffer (`store`).
#[derive(Debug, Default)]
pub struct TransferTimes {
    wait: SpillSort<u64>,
    total: SpillSort<u64>,
}

impl TransferTimes {
    pub fn add(&mut self, r: &Request) {
        let Some(t) = r.kv_transfer() else { return };
        if let (Some(h), Some(a)) = (t.handoff, t.accepted) {
            self.wait.push(a.since(h));
        }
        if let (Some(h), Some(x)) = (t.handoff, t.done) {
            self.total.push(x.since(h));
        }
    }

    /// The first error spilling times to disk.
    pub fn error(&self) -> Option<&str> {
        self.wait.error().or(self.total.error())
    }
}
