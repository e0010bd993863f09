//! Autoscalers set how many serving replicas the fleet asks for; the
//! life cycle (`lifecycle`) turns that request into cold starts, standby
//! activations and drains. One file per policy; [`build`] is the registry
//! `autoscale.policy` names.
//!
//! An autoscaler acts on "a set of replicas with one config" (the run's
//! fleet today, a pool once pools exist) and sees its metrics only as last
//! scraped (`autoscale.scrape_interval_s`), as Kubernetes' HPA sees pod
//! metrics through metrics-server or Prometheus.

mod fixed;
mod schedule;
mod target;

pub use fixed::Fixed;
pub use schedule::Schedule;
pub use target::Target;

use crate::scenario::lifecycle_cfg::{AutoscaleCfg, AutoscalePolicy};
use crate::time::{Nanos, SimTime};

/// What an autoscaler knows when it decides.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Observation {
    pub now: SimTime,
    /// Serving replicas currently asked for.
    pub requested: u32,
    /// Replicas that were ready at the last scrape.
    pub ready: u32,
    /// The scaled metric summed over the ready replicas at the last scrape
    /// (for queue depth, plus the requests the activator holds).
    pub metric_sum: f64,
}

/// When an autoscaler decides.
#[derive(Clone, Debug, PartialEq)]
pub enum Ticks {
    /// Every so many nanoseconds from t = 0.
    Periodic(Nanos),
    /// At these times.
    At(Vec<SimTime>),
    /// Never (the count is fixed).
    Never,
}

/// A scaling policy. Deterministic: a function of its observations.
pub trait Autoscaler: Send {
    fn name(&self) -> &'static str;
    fn ticks(&self) -> Ticks;
    /// Serving replicas to ask for now.
    fn decide(&mut self, obs: &Observation) -> u32;
}

/// The autoscaler of `cfg` (`fixed` when the scenario has none); `start` is
/// `fleet.replicas`.
pub fn build(cfg: Option<&AutoscaleCfg>, start: u32) -> Box<dyn Autoscaler> {
    match cfg {
        None => Box::new(Fixed::new(start)),
        Some(c) => match c.policy {
            AutoscalePolicy::Fixed => Box::new(Fixed::new(start)),
            AutoscalePolicy::Target => Box::new(Target::new(c, start)),
            AutoscalePolicy::Schedule => Box::new(Schedule::new(c, start)),
        },
    }
}
