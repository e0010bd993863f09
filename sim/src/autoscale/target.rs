//! `target`: Kubernetes' Horizontal Pod Autoscaler on one per-replica
//! metric (Kubernetes docs, "Horizontal Pod Autoscaling", algorithm
//! details): desired = ceil(Σ metric over ready replicas / target), where
//! replicas still starting count as reporting 0 on a scale-up (HPA's
//! conservative treatment of unready pods, which makes the formula
//! ceil(current × ratio) reduce to Σ/target); no change while the ratio is
//! within the tolerance; a scale-up takes the lowest and a scale-down the
//! highest recommendation of its stabilization window
//! (`behavior.scaleUp/scaleDown.stabilizationWindowSeconds`); cooldowns
//! after a change (the pre-`behavior` `--horizontal-pod-autoscaler-
//! upscale/downscale-delay`); the result is clamped to min/max.

use super::{Autoscaler, Observation, Ticks};
use crate::scenario::lifecycle_cfg::AutoscaleCfg;
use crate::time::{secs_to_nanos, Nanos, SimTime};
use std::collections::VecDeque;

/// HPA on one metric.
pub struct Target {
    target: f64,
    tolerance: f64,
    min: u32,
    max: u32,
    sync: Nanos,
    up_window: Nanos,
    down_window: Nanos,
    up_cooldown: Nanos,
    down_cooldown: Nanos,
    /// Past recommendations (time, replicas), oldest first.
    recs: VecDeque<(SimTime, u32)>,
    last_change: Option<SimTime>,
}

impl Target {
    pub fn new(c: &AutoscaleCfg, start: u32) -> Target {
        Target {
            target: c
                .target_value
                .expect("validated: target needs target_value"),
            tolerance: c.tolerance,
            min: c.min_replicas,
            max: c.max_replicas.unwrap_or(start).max(start),
            sync: secs_to_nanos(c.sync_period_s).max(1),
            up_window: secs_to_nanos(c.scale_up_stabilization_s),
            down_window: secs_to_nanos(c.scale_down_stabilization_s),
            up_cooldown: secs_to_nanos(c.scale_up_cooldown_s),
            down_cooldown: secs_to_nanos(c.scale_down_cooldown_s),
            recs: VecDeque::new(),
            last_change: None,
        }
    }

    /// The raw recommendation of one observation.
    fn recommend(&self, o: &Observation) -> u32 {
        let current = o.requested;
        if o.metric_sum <= 0.0 && o.ready == 0 {
            return current;
        }
        let ratio = o.metric_sum / (self.target * o.ready.max(1) as f64);
        if (ratio - 1.0).abs() <= self.tolerance && o.ready == current {
            return current;
        }
        let want = (o.metric_sum / self.target - 1e-9).ceil().max(0.0);
        want.min(u32::MAX as f64) as u32
    }
}

impl Autoscaler for Target {
    fn name(&self) -> &'static str {
        "target"
    }

    fn ticks(&self) -> Ticks {
        Ticks::Periodic(self.sync)
    }

    fn decide(&mut self, o: &Observation) -> u32 {
        let now = o.now;
        let rec = self.recommend(o).clamp(self.min, self.max);
        self.recs.push_back((now, rec));
        let keep = self.up_window.max(self.down_window);
        while self.recs.front().is_some_and(|&(t, _)| now.since(t) > keep) {
            self.recs.pop_front();
        }
        let within = |w: Nanos| self.recs.iter().filter(move |&&(t, _)| now.since(t) < w);
        let up = within(self.up_window).map(|r| r.1).min().unwrap_or(rec);
        let down = within(self.down_window).map(|r| r.1).max().unwrap_or(rec);
        let current = o.requested;
        let since = self.last_change.map(|t| now.since(t));
        let cooled = |c: Nanos| since.is_none_or(|s| s >= c);
        let next = if up > current && cooled(self.up_cooldown) {
            up
        } else if down < current && cooled(self.down_cooldown) {
            down
        } else {
            current
        };
        let next = next.clamp(self.min, self.max);
        if next != current {
            self.last_change = Some(now);
        }
        next
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scenario::lifecycle_cfg::{AutoscalePolicy, ScaleMetric};

    pub(crate) fn cfg() -> AutoscaleCfg {
        toml::from_str::<AutoscaleCfg>("").unwrap()
    }

    fn obs(t: f64, requested: u32, ready: u32, sum: f64) -> Observation {
        Observation {
            now: SimTime::from_secs_f64(t),
            requested,
            ready,
            metric_sum: sum,
        }
    }

    fn hpa(up_w: f64, down_w: f64) -> Target {
        let c = AutoscaleCfg {
            policy: AutoscalePolicy::Target,
            metric: ScaleMetric::QueueDepth,
            target_value: Some(10.0),
            min_replicas: 1,
            max_replicas: Some(20),
            scale_up_stabilization_s: up_w,
            scale_down_stabilization_s: down_w,
            ..cfg()
        };
        Target::new(&c, 2)
    }

    #[test]
    fn hpa_scales_to_the_ceiling_of_sum_over_target() {
        let mut t = hpa(0.0, 0.0);
        assert_eq!(t.decide(&obs(0.0, 2, 2, 61.0)), 7);
        // Within the 10 % tolerance: no change.
        assert_eq!(t.decide(&obs(15.0, 7, 7, 72.0)), 7);
        // Clamped to max.
        assert_eq!(t.decide(&obs(30.0, 7, 7, 1000.0)), 20);
    }

    #[test]
    fn scale_down_waits_for_its_stabilization_window() {
        let mut t = hpa(0.0, 60.0);
        assert_eq!(t.decide(&obs(0.0, 2, 2, 80.0)), 8);
        // Load falls: the window still holds the recommendation of 8.
        assert_eq!(t.decide(&obs(15.0, 8, 8, 10.0)), 8);
        assert_eq!(t.decide(&obs(45.0, 8, 8, 10.0)), 8);
        // 75 s after the high recommendation it has left the window.
        assert_eq!(t.decide(&obs(75.0, 8, 8, 10.0)), 1);
    }

    #[test]
    fn a_scale_up_window_takes_the_lowest_recommendation() {
        let mut t = hpa(30.0, 0.0);
        assert_eq!(t.decide(&obs(0.0, 2, 2, 20.0)), 2);
        // A spike: the window's minimum (2) holds it back.
        assert_eq!(t.decide(&obs(15.0, 2, 2, 100.0)), 2);
        assert_eq!(t.decide(&obs(30.0, 2, 2, 100.0)), 10);
    }
}
