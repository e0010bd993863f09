//! Pools: a pool is a set of replicas with one configuration (hardware,
//! parallelism, engine settings), one role (colocated, prefill, decode) and
//! one router. Every fleet has at least one: a scenario without
//! `[[fleet.pools]]` is one implicit colocated pool of `fleet.replicas`
//! replicas, so the run has one code path over its pools. Each declared pool
//! is resolved as a scenario of its own — the parent's keys with the pool's
//! overrides — so memory plans, cost models and the "does the model fit"
//! check are the single-pool ones; the pool keeps only what its models are
//! built from (its `ReplicaPlan`, router and life-cycle settings).
//! (Splitwise, ISCA'24, and DistServe, OSDI'24, size prefill and decode pools
//! apart; heterogeneous pools mix hardware generations behind one router.)

use super::lifecycle_cfg::{AutoscaleCfg, FailureCfg, LifecycleCfg};
use super::{EngineCfg, PoolRole, ReplicaPlan, RoutingPlan, Scenario, ScenarioError, ScenarioFile};

/// One resolved pool; its replicas have global indices
/// `first..first + replicas` in the run.
#[derive(Clone, Debug)]
pub struct PoolPlan {
    pub name: String,
    pub role: PoolRole,
    pub first: u32,
    /// Replica objects of the pool: its `replicas`, or with a life cycle
    /// the slots its autoscaler may fill (its maximum plus the standby pool).
    pub replicas: u32,
    /// Replicas serving at t = 0 (the pool's `replicas` key).
    pub start: u32,
    /// Index of its region in `fleet.regions` (0 without regions).
    pub region: u16,
    /// Declared in `[[fleet.pools]]`; `false` for the one implicit pool of
    /// a fleet without pools (named `fleet`).
    pub declared: bool,
    /// The seed of its life cycle's random streams: a declared pool's name
    /// salts the scenario's seed, so adding a pool leaves the others' draws
    /// unchanged; the implicit pool draws from the scenario's seed.
    pub life_seed: u64,
    /// Its replicas' resolved configuration and cost model.
    pub replica: ReplicaPlan,
    /// Its own router, resolved from the pool's settings.
    pub routing: RoutingPlan,
    /// Its life cycle, autoscaler and failures (`[lifecycle]`,
    /// `[autoscale]`, `[failures]`, or the pool's own).
    pub lifecycle: Option<LifecycleCfg>,
    pub autoscale: Option<AutoscaleCfg>,
    pub failures: Option<FailureCfg>,
    /// Whether its replicas come and go (a life cycle, an autoscaler or
    /// failures).
    pub lives: bool,
}

impl PoolPlan {
    /// Its replicas' memory plan: weights, KV blocks and their size.
    pub fn memory(&self) -> &crate::memory::MemoryPlan {
        &self.replica.memory
    }

    /// How each of its replicas lays the model out over its GPUs.
    pub fn parallel(&self) -> &crate::parallel::Parallelism {
        &self.replica.parallel
    }

    /// Its accelerator's datasheet.
    pub fn hardware(&self) -> &crate::catalog::HardwareSpec {
        &self.replica.hardware
    }

    /// GPUs of its replicas serving at the start.
    pub fn gpus(&self) -> u32 {
        self.start * self.replica.gpus()
    }

    /// What one of its replicas can ever serve.
    pub fn limits(&self) -> &super::ServeLimits {
        &self.replica.limits
    }

    /// The cost model its iterations are priced with (its calibration
    /// profile, else the roofline of its hardware and layout).
    pub fn cost_model(&self) -> Box<dyn crate::cost::CostModel> {
        self.replica.cost_model()
    }

    /// The pool's engine settings: the scenario's `[engine]` with the
    /// pool's own overrides.
    pub fn engine(&self) -> &EngineCfg {
        &self.replica.engine
    }

    /// Its life cycle: `[lifecycle]`, or the pool's own.
    pub fn lifecycle(&self) -> Option<&LifecycleCfg> {
        self.lifecycle.as_ref()
    }

    /// Its autoscaler: `[autoscale]`, or the pool's own.
    pub fn autoscale(&self) -> Option<&AutoscaleCfg> {
        self.autoscale.as_ref()
    }

    /// The pool's own router (a prefill or decode pool's, or a colocated
    /// pool's under a canary rollout).
    pub fn routing_plan(&self) -> RoutingPlan {
        self.routing.clone()
    }
}

/// The pool of the resolved scenario `s` (the parent's keys with the
/// pool's overrides and no pools), keeping only what the run's models are
/// built from.
#[allow(clippy::too_many_arguments)]
fn plan(
    s: &Scenario,
    name: String,
    role: PoolRole,
    first: u32,
    replicas: u32,
    region: u16,
    declared: bool,
    life_seed: u64,
) -> PoolPlan {
    PoolPlan {
        name,
        role,
        first,
        replicas,
        start: s.file.fleet.replicas,
        region,
        declared,
        life_seed,
        replica: s.replica_plan().clone(),
        routing: s.routing_plan(),
        lifecycle: s.file.lifecycle.clone(),
        autoscale: s.file.autoscale.clone(),
        failures: s.file.failures.clone(),
        lives: super::lifecycle_cfg::slots(&s.file).is_some(),
    }
}

/// The one pool of a fleet without `[[fleet.pools]]`: all its replicas
/// (or, with a life cycle, its slots), colocated, behind `fleet.router`.
pub fn implicit(s: &Scenario) -> PoolPlan {
    let f = &s.file;
    plan(
        s,
        "fleet".to_string(),
        PoolRole::Colocated,
        0,
        crate::scenario::lifecycle_cfg::slots(f).unwrap_or(f.fleet.replicas),
        0,
        false,
        f.seed,
    )
}

/// A declared pool's life-cycle seed (see [`PoolPlan::life_seed`]).
fn pool_seed(seed: u64, pool: &str) -> u64 {
    use rand::Rng;
    crate::rng::stream(seed, &format!("pool/{pool}/seed")).random()
}

/// Resolves `file`'s pools. Replicas are numbered colocated pools first,
/// then the prefill pool, then the decode pool, so each routing group is a
/// contiguous range. Errors name the pool's key path.
pub fn resolve(file: &ScenarioFile, origin: &str) -> Result<Vec<PoolPlan>, ScenarioError> {
    let mut order: Vec<usize> = (0..file.fleet.pools.len()).collect();
    // With regions, a region's pools are contiguous (one routing group each).
    let region_of = |i: usize| {
        let name = file.fleet.pools[i].region.as_deref();
        file.fleet
            .regions
            .iter()
            .position(|r| Some(r.name.as_str()) == name)
            .unwrap_or(0)
    };
    order.sort_by_key(|&i| {
        let role = match file.fleet.pools[i].role {
            PoolRole::Colocated => 0,
            PoolRole::Prefill => 1,
            PoolRole::Decode => 2,
        };
        (role, region_of(i))
    });
    let mut pools = Vec::with_capacity(order.len());
    let mut first = 0u32;
    for i in order {
        let p = &file.fleet.pools[i];
        let key = |k: &str| format!("fleet.pools[{i}]{}{k}", if k.is_empty() { "" } else { "." });
        let fail = |k: String, m: String| ScenarioError {
            origin: origin.to_string(),
            key: k,
            message: m,
        };
        let mut f = file.clone();
        f.fleet.pools = Vec::new();
        // Regions and the global router belong to the fleet too.
        f.fleet.regions = Vec::new();
        f.fleet.overflow = Default::default();
        // The link belongs to the fleet, not to one pool's replicas.
        f.fleet.kv_transfer = Default::default();
        // So does a canary rollout between pools.
        f.canary = None;
        f.fleet.replicas = p.replicas;
        if let Some(tp) = p.tensor_parallel {
            f.fleet.tensor_parallel = tp;
        }
        if let Some(pp) = p.pipeline_parallel {
            f.fleet.pipeline_parallel = pp;
        }
        if let Some(ep) = p.expert_parallel {
            f.fleet.expert_parallel = ep;
        }
        if p.attention_data_parallel.is_some() {
            f.fleet.attention_data_parallel = p.attention_data_parallel;
        }
        if let Some(e) = p.eplb {
            f.fleet.eplb = e;
        }
        if let Some(r) = p.num_redundant_experts {
            f.fleet.num_redundant_experts = r;
        }
        if let Some(r) = p.router {
            f.fleet.router = r;
        }
        if let Some(l) = &p.lifecycle {
            f.lifecycle = Some(l.clone());
        }
        if let Some(a) = &p.autoscale {
            f.autoscale = Some(a.clone());
        }
        if let Some(fl) = &mut f.failures {
            // Given failures name the fleet's replica numbers (checked by
            // `check_failures_at`), not the pool's.
            fl.at.clear();
        }
        let lives = f.lifecycle.is_some() || f.autoscale.is_some() || f.failures.is_some();
        if lives && p.role != PoolRole::Colocated {
            let k = if p.lifecycle.is_some() {
                key("lifecycle")
            } else if p.autoscale.is_some() {
                key("autoscale")
            } else {
                ["lifecycle", "autoscale", "failures"]
                    .into_iter()
                    .find(|k| match *k {
                        "lifecycle" => file.lifecycle.is_some(),
                        "autoscale" => file.autoscale.is_some(),
                        _ => file.failures.is_some(),
                    })
                    .unwrap_or("lifecycle")
                    .to_string()
            };
            return Err(fail(
                k,
                format!(
                    "pool {:?} is a {} pool: the life cycle, autoscaler and failures act on colocated pools only (a KV cache in transit between a failed or draining prefill replica and its decode replica is not modelled)",
                    p.name,
                    p.role.name()
                ),
            ));
        }
        if let Some(h) = &p.hardware {
            f.hardware.preset = Some(h.clone());
            f.hardware.spec = None;
            f.hardware.profile = None;
        }
        if let Some(over) = &p.engine {
            if over.contains_key("front_end") {
                return Err(fail(
                    key("engine.front_end"),
                    "the serving front end is the fleet's (requests pass it before \
                     routing): set it in [engine], not per pool"
                        .into(),
                ));
            }
            let mut t =
                toml::Value::try_from(&f.engine).map_err(|e| fail(key("engine"), e.to_string()))?;
            let table = t.as_table_mut().expect("engine is a table");
            for (k, v) in over {
                table.insert(k.clone(), v.clone());
            }
            f.engine = serde_path_to_error::deserialize(t).map_err(|e| {
                let path = e.path().to_string();
                let m = e.into_inner().message().trim().replace('\n', "; ");
                fail(key(&format!("engine.{path}")), m)
            })?;
        }
        let s = Scenario::resolve_flat(f, origin).map_err(|e| {
            // Say which pool the inherited or overridden key broke.
            let own_engine = e
                .key
                .strip_prefix("engine.")
                .and_then(|k| k.split('.').next())
                .is_some_and(|k| p.engine.as_ref().is_some_and(|t| t.contains_key(k)));
            // Keys of tables the pool sets itself are the pool's.
            let own_table = (e.key.starts_with("lifecycle") && p.lifecycle.is_some())
                || (e.key.starts_with("autoscale") && p.autoscale.is_some());
            let k = if own_engine || own_table {
                key(&e.key)
            } else if e.key.starts_with("hardware") && p.hardware.is_some() {
                key("hardware")
            } else if let Some(k) = e.key.strip_prefix("fleet.").filter(|k| match *k {
                "tensor_parallel" => p.tensor_parallel.is_some(),
                "pipeline_parallel" => p.pipeline_parallel.is_some(),
                "expert_parallel" => p.expert_parallel.is_some(),
                "attention_data_parallel" => p.attention_data_parallel.is_some(),
                "eplb" => p.eplb.is_some(),
                "num_redundant_experts" => p.num_redundant_experts.is_some(),
                _ => false,
            }) {
                key(k)
            } else if e.key.is_empty() {
                key("")
            } else {
                format!("{} ({})", key(""), e.key)
            };
            fail(k, format!("pool {:?}: {}", p.name, e.message))
        })?;
        let slots = crate::scenario::lifecycle_cfg::slots(&s.file).unwrap_or(p.replicas);
        pools.push(plan(
            &s,
            p.name.clone(),
            p.role,
            first,
            slots,
            region_of(i) as u16,
            true,
            pool_seed(file.seed, &p.name),
        ));
        first += slots;
    }
    check_failures_at(file, first).map_err(|(k, m)| ScenarioError {
        origin: origin.to_string(),
        key: k,
        message: m,
    })?;
    Ok(pools)
}

/// With pools, `failures.at[i].replica` is a replica number of the whole
/// fleet (pools' slots in order, see `resolve`): it must exist.
fn check_failures_at(file: &ScenarioFile, slots: u32) -> Result<(), (String, String)> {
    let Some(fl) = &file.failures else {
        return Ok(());
    };
    if file.fleet.pools.is_empty() {
        return Ok(());
    }
    for (i, a) in fl.at.iter().enumerate() {
        if a.replica >= slots {
            return Err((
                format!("failures.at[{i}].replica"),
                format!(
                    "no replica {} (the pools' replicas are 0..{slots}, in pool order)",
                    a.replica
                ),
            ));
        }
    }
    Ok(())
}

/// `servesim check`'s lines for the declared pools (none without).
pub fn check_lines(s: &Scenario) -> Vec<String> {
    s.pools
        .iter()
        .filter(|p| p.declared)
        .map(|p| {
            let ps = &p.replica;
            let router = match p.role {
                PoolRole::Colocated => format!("{} (fleet.router)", s.file.fleet.router.name()),
                _ => p.routing.router.name().to_string(),
            };
            format!(
                "pool       {} ({}): {}, {} KV blocks per replica, max_num_seqs {}, router {}",
                p.name,
                p.role.name(),
                ps.parallel.fleet_shape(p.replicas, &ps.hardware.name),
                ps.memory.kv_blocks,
                ps.engine.max_num_seqs,
                router
            )
        })
        .collect()
}
