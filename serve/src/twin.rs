//! The simulated twin: a scenario's fleet (replicas, router, batch policy,
//! KV blocks, cost model) answering HTTP requests with the simulated clock
//! paced to the wall clock (× `speed`). Each request is routed and queued as
//! in `simulate`; each iteration's length comes from the scenario's cost
//! model and its tokens are sent when the wall clock reaches the iteration's
//! simulated end — so a client sees the latencies `simulate` predicts, with
//! the queueing, preemptions and rejections that go with them. Gateway and
//! autoscaler authors get a fleet that answers like a real one without GPUs.

use crate::engine::{Admitted, Command, EngineHandle, Gauges, Refusal, TokenEvent};
use sim::cluster::routing::Routing;
use sim::replica::{Replica, TokenGaps};
use sim::request::{Request, RequestId, Status};
use sim::simulation::unservable;
use sim::time::SimTime;
use sim::Scenario;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc as tmpsc;

/// How the twin runs.
#[derive(Debug, Clone)]
pub struct TwinConfig {
    /// Simulated seconds per wall second (1: real time).
    pub speed: f64,
    /// Most requests waiting (not yet running) across the fleet; more are
    /// refused with 429.
    pub max_waiting: usize,
}

/// Starts the twin's scheduler thread for `scenario`.
pub fn start(scenario: Scenario, cfg: TwinConfig) -> EngineHandle {
    let (tx, rx) = mpsc::channel();
    let gauges = Arc::new(Mutex::new(Gauges::default()));
    let g = gauges.clone();
    std::thread::Builder::new()
        .name("servesim-twin".into())
        .spawn(move || run(&scenario, &cfg, rx, &g))
        .expect("spawn the twin's scheduler thread");
    EngineHandle::new(tx, gauges)
}

struct Fleet<'a> {
    scenario: &'a Scenario,
    cost: Box<dyn sim::cost::CostModel + 'a>,
    replicas: Vec<Replica>,
    /// The scenario's router and its (possibly stale) view of the replicas.
    routing: Routing,
    /// When the replicas next report their load (`fleet.report_interval_s`).
    next_report: Option<SimTime>,
    reqs: Vec<Request>,
    /// Each request's token channel while it is in flight.
    subs: Vec<Option<tmpsc::UnboundedSender<TokenEvent>>>,
    /// Tokens sent so far per request.
    sent: Vec<u32>,
    /// End of each replica's iteration in progress.
    busy_until: Vec<Option<SimTime>>,
    /// Members of each replica's iteration in progress.
    batch: Vec<Vec<RequestId>>,
    /// Cancels that wait for their replica's iteration to end.
    pending_cancel: Vec<RequestId>,
    completed: Vec<RequestId>,
    gaps: TokenGaps,
    gauges: Gauges,
    max_waiting: usize,
}

fn run(scenario: &Scenario, cfg: &TwinConfig, rx: mpsc::Receiver<Command>, out: &Mutex<Gauges>) {
    let n = scenario.replicas();
    let replicas: Vec<Replica> = (0..n)
        .map(|i| {
            Replica::new(
                i,
                scenario.engine(),
                scenario.memory.kv_blocks,
                scenario.memory.block_bytes(),
                scenario.seed(),
            )
        })
        .collect();
    let routing = Routing::new(&scenario.routing_plan(), &replicas);
    let next_report = routing.first_report();
    let mut fleet = Fleet {
        scenario,
        cost: scenario.cost_model(),
        replicas,
        routing,
        next_report,
        reqs: Vec::new(),
        subs: Vec::new(),
        sent: Vec::new(),
        busy_until: vec![None; n as usize],
        batch: vec![Vec::new(); n as usize],
        pending_cancel: Vec::new(),
        completed: Vec::new(),
        gaps: TokenGaps::default(),
        gauges: Gauges {
            kv_blocks_total: scenario.memory.kv_blocks * n as u64,
            ..Gauges::default()
        },
        max_waiting: cfg.max_waiting,
    };
    let start = Instant::now();
    let speed = cfg.speed;
    // The simulated clock never runs backwards: a command read late is
    // stamped no earlier than the last iteration end processed.
    let mut last = SimTime::ZERO;
    let sim_now =
        |last: SimTime| SimTime(((start.elapsed().as_nanos() as f64 * speed) as u64).max(last.0));
    loop {
        let due = fleet
            .busy_until
            .iter()
            .enumerate()
            .filter_map(|(r, t)| t.map(|t| (t, r)))
            .min();
        let cmd = match due {
            None => match rx.recv() {
                Ok(c) => Some(c),
                Err(_) => return,
            },
            Some((t, _)) => {
                let wall = start + Duration::from_nanos((t.0 as f64 / speed) as u64);
                match wall.checked_duration_since(Instant::now()) {
                    None => None,
                    Some(wait) => match rx.recv_timeout(wait) {
                        Ok(c) => Some(c),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => return,
                    },
                }
            }
        };
        match (cmd, due) {
            (Some(c), _) => {
                let now = sim_now(last);
                last = now;
                fleet.command(c, now);
            }
            (None, Some((t, r))) => {
                last = t;
                fleet.iteration_end(r, t);
            }
            (None, None) => unreachable!("a command or a due iteration"),
        }
        fleet.publish(out);
    }
}

impl Fleet<'_> {
    fn command(&mut self, c: Command, now: SimTime) {
        match c {
            Command::Submit { job, reply } => {
                let res = self.submit(job.prompt_tokens, job.output_tokens, now);
                if let Err(Refusal::QueueFull) = res {
                    self.gauges.queue_full += 1;
                } else if res.is_err() {
                    self.gauges.unservable += 1;
                }
                if let Err(Ok(a)) = reply.send(res) {
                    // The client left before the answer: cancel at once.
                    self.cancel(a.id, now);
                }
            }
            Command::Cancel(id) => self.cancel(id, now),
        }
    }

    fn submit(&mut self, prompt: u32, output: u32, now: SimTime) -> Result<Admitted, Refusal> {
        let output = output.max(1);
        if let Some(reason) = unservable(
            &self.scenario.limits,
            &self.scenario.memory,
            prompt,
            output,
            self.replicas[0].splits_prefills(),
        ) {
            return Err(Refusal::Unservable(reason));
        }
        let waiting: usize = self.replicas.iter().map(|r| r.waiting_len()).sum();
        if waiting >= self.max_waiting {
            return Err(Refusal::QueueFull);
        }
        let id = self.reqs.len() as RequestId;
        let mut req = Request::new(now, prompt, output);
        while let Some(t) = self.next_report.filter(|&t| t <= now) {
            self.next_report = Some(self.routing.report(t, &self.replicas));
        }
        let r = self.routing.route(&req);
        req.replica = r as u32;
        self.reqs.push(req);
        let (tx, rx) = tmpsc::unbounded_channel();
        self.subs.push(Some(tx));
        self.sent.push(0);
        self.replicas[r].enqueue(id);
        self.routing.observe(r, &self.replicas[r]);
        self.gauges.prompt_tokens += prompt as u64;
        if self.busy_until[r].is_none() {
            self.start_iteration(r, now);
        }
        Ok(Admitted { id, events: rx })
    }

    fn cancel(&mut self, id: RequestId, now: SimTime) {
        let Some(req) = self.reqs.get(id as usize) else {
            return;
        };
        if req.status != Status::InFlight {
            return;
        }
        let r = req.replica as usize;
        if self.busy_until[r].is_some() {
            // Mid-iteration: it leaves the batch when the iteration ends.
            if !self.pending_cancel.contains(&id) {
                self.pending_cancel.push(id);
            }
            return;
        }
        if self.replicas[r].cancel(id, now, &mut self.reqs) {
            self.gauges.cancelled += 1;
        }
        self.subs[id as usize] = None;
    }

    fn start_iteration(&mut self, r: usize, now: SimTime) {
        if let Some(shape) = self.replicas[r].form_batch(now, &mut self.reqs) {
            let dt = self.cost.iteration_time(&shape).max(1);
            self.busy_until[r] = Some(now.plus(dt));
            self.batch[r].clear();
            self.batch[r].extend(self.replicas[r].batch().map(|e| e.id));
            self.gauges.iterations += 1;
        }
    }

    fn iteration_end(&mut self, r: usize, now: SimTime) {
        self.busy_until[r] = None;
        self.completed.clear();
        self.gaps.gaps.clear();
        let rep = &mut self.replicas[r];
        rep.finish_iteration(now, &mut self.reqs, &mut self.completed, &mut self.gaps);
        self.routing.observe(r, rep);
        for &id in &self.batch[r] {
            let i = id as usize;
            let generated = rep.generated(id).unwrap_or(self.reqs[i].generated);
            let Some(tx) = &self.subs[i] else { continue };
            while self.sent[i] < generated {
                // Placeholder text: the twin has exact counts, no words.
                let _ = tx.send(TokenEvent::Token(" tok".to_string()));
                self.sent[i] += 1;
                self.gauges.generation_tokens += 1;
            }
        }
        for &id in &self.completed {
            if let Some(tx) = self.subs[id as usize].take() {
                let _ = tx.send(TokenEvent::Finished);
            }
            self.gauges.completed += 1;
        }
        // Cancels that came mid-iteration take effect now.
        let mut i = 0;
        while i < self.pending_cancel.len() {
            let id = self.pending_cancel[i];
            if self.reqs[id as usize].replica as usize == r {
                self.pending_cancel.swap_remove(i);
                self.cancel(id, now);
            } else {
                i += 1;
            }
        }
        self.start_iteration(r, now);
    }

    fn publish(&mut self, out: &Mutex<Gauges>) {
        let g = &mut self.gauges;
        g.running = self.replicas.iter().map(|r| r.running_len() as u64).sum();
        g.waiting = self.replicas.iter().map(|r| r.waiting_len() as u64).sum();
        g.kv_blocks_used = self.replicas.iter().map(|r| r.kv().used()).sum();
        g.preemptions = self.replicas.iter().map(|r| r.preemptions()).sum();
        *out.lock().expect("gauges lock") = g.clone();
    }
}
