//! `schedule`: a capacity plan, replica counts from given times on (a
//! forecast turned into steps, as teams pre-scale for a known daily peak;
//! KEDA's cron scaler, AWS Auto Scaling scheduled actions).

use super::{Autoscaler, Observation, Ticks};
use crate::scenario::lifecycle_cfg::AutoscaleCfg;
use crate::time::SimTime;

/// Steps of (time, replicas), in order of time.
pub struct Schedule {
    steps: Vec<(SimTime, u32)>,
    start: u32,
}

impl Schedule {
    pub fn new(c: &AutoscaleCfg, start: u32) -> Schedule {
        Schedule {
            steps: c
                .steps
                .iter()
                .map(|s| (SimTime::from_secs_f64(s.at_s), s.replicas))
                .collect(),
            start,
        }
    }
}

impl Autoscaler for Schedule {
    fn name(&self) -> &'static str {
        "schedule"
    }

    fn ticks(&self) -> Ticks {
        Ticks::At(self.steps.iter().map(|s| s.0).collect())
    }

    /// The count of the latest step at or before `now` (`fleet.replicas`
    /// before the first).
    fn decide(&mut self, obs: &Observation) -> u32 {
        self.steps
            .iter()
            .take_while(|s| s.0 <= obs.now)
            .last()
            .map_or(self.start, |s| s.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::lifecycle_cfg::{AutoscalePolicy, ScheduleStep};

    #[test]
    fn a_schedule_follows_its_steps() {
        let c = AutoscaleCfg {
            policy: AutoscalePolicy::Schedule,
            steps: vec![
                ScheduleStep {
                    at_s: 10.0,
                    replicas: 4,
                },
                ScheduleStep {
                    at_s: 20.0,
                    replicas: 2,
                },
            ],
            ..crate::autoscale::target::tests::cfg()
        };
        let mut s = Schedule::new(&c, 1);
        let at = |t: f64| Observation {
            now: SimTime::from_secs_f64(t),
            ..Observation::default()
        };
        assert_eq!(s.decide(&at(0.0)), 1);
        assert_eq!(s.decide(&at(10.0)), 4);
        assert_eq!(s.decide(&at(19.9)), 4);
        assert_eq!(s.decide(&at(25.0)), 2);
    }
}
