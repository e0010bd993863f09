//! The `Profiled` cost model: iteration times from a calibration profile's
//! fitted terms ([`CostTerms`]) instead of datasheet figures.
//!
//! The terms are linear in a handful of batch features plus two
//! piecewise-linear tables (DESIGN.md, "Cost model": fixed per-iteration and
//! per-sequence overheads plus interpolation over measured grids). The same
//! feature basis ([`Basis`]) is what `calibrate` fits against, so the fit and
//! the simulator cannot disagree on what a coefficient means.
//!
//! Pricing runs once per simulated iteration: the tables are turned into
//! cumulative arrays at load and a price is a few dozen float operations and
//! two binary searches, with no allocation.

use crate::cost::{BatchShape, CostModel};
use crate::profile::{CostTerms, Profile};
use crate::time::{secs_to_nanos, Nanos};

/// The fit's features of a batch, in the column order of [`Basis::row`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Features {
    pub prefill_seqs: f64,
    pub decode_context: f64,
    pub prefill_pairs: f64,
    /// Σ n², estimated as (Σ n)² / P: exact for one prefill or equal chunks.
    pub prefill_square: f64,
    /// Σ (c + n): cached and new tokens prefill attention reads.
    pub prefill_kv: f64,
    /// Tokens through the dense layers.
    pub tokens: f64,
    /// Logit rows (sequences, plus speculative drafts).
    pub rows: f64,
}

impl Features {
    #[inline]
    pub fn of(b: &BatchShape) -> Features {
        let p = b.prefill_tokens as f64;
        Features {
            prefill_seqs: b.prefill_seqs as f64,
            decode_context: b.decode_context_tokens as f64,
            prefill_pairs: b.prefill_attn_pairs,
            prefill_square: if b.prefill_seqs > 0 {
                p * p / b.prefill_seqs as f64
            } else {
                0.0
            },
            prefill_kv: b.prefill_kv_tokens as f64,
            tokens: b.tokens() as f64,
            rows: b.logit_rows() as f64,
        }
    }
}

/// The linear basis a profile is fitted in: six scalar columns (step,
/// prefill sequences, decode context, prefill pairs, prefill squares,
/// prefill KV tokens), then
/// one ramp per segment of the token table and one per segment of the row
/// table. A ramp rises from 0 to 1 across its segment, so its coefficient is
/// the table's increase over that segment; the last ramp keeps rising past
/// the last knot (linear extrapolation).
#[derive(Clone, Debug, PartialEq)]
pub struct Basis {
    pub token_knots: Vec<u32>,
    pub row_knots: Vec<u32>,
}

/// Scalar columns before the ramps.
pub const SCALAR_COLUMNS: usize = 6;

impl Basis {
    pub fn columns(&self) -> usize {
        SCALAR_COLUMNS + self.token_knots.len() - 1 + self.row_knots.len() - 1
    }

    /// The design-matrix row of a batch.
    pub fn row(&self, b: &BatchShape) -> Vec<f64> {
        let f = Features::of(b);
        let mut r = Vec::with_capacity(self.columns());
        r.extend_from_slice(&[
            1.0,
            f.prefill_seqs,
            f.decode_context,
            f.prefill_pairs,
            f.prefill_square,
            f.prefill_kv,
        ]);
        ramps(&self.token_knots, f.tokens, &mut r);
        ramps(&self.row_knots, f.rows, &mut r);
        r
    }

    /// Cost terms from fitted coefficients (in [`Self::row`] order).
    pub fn terms(&self, coef: &[f64]) -> CostTerms {
        assert_eq!(coef.len(), self.columns());
        let nt = self.token_knots.len() - 1;
        let cumulative = |inc: &[f64]| {
            let mut v = vec![0.0];
            for &x in inc {
                v.push(v[v.len() - 1] + x);
            }
            v
        };
        CostTerms {
            step_ns: coef[0],
            prefill_seq_ns: coef[1],
            decode_token_ns: coef[2],
            prefill_pair_ns: coef[3],
            prefill_square_ns: coef[4],
            prefill_kv_token_ns: coef[5],
            token_knots: self.token_knots.clone(),
            token_ns: cumulative(&coef[SCALAR_COLUMNS..SCALAR_COLUMNS + nt]),
            row_knots: self.row_knots.clone(),
            row_ns: cumulative(&coef[SCALAR_COLUMNS + nt..]),
            idle_knots_ms: vec![],
            wake_ns: vec![],
            falling_token_segments: vec![],
        }
    }
}

fn ramps(knots: &[u32], x: f64, out: &mut Vec<f64>) {
    let last = knots.len() - 1;
    for k in 1..knots.len() {
        let (a, b) = (knots[k - 1] as f64, knots[k] as f64);
        let t = ((x - a) / (b - a)).max(0.0);
        out.push(if k == last { t } else { t.min(1.0) });
    }
}

/// A piecewise-linear table, extrapolated with its last slope.
#[derive(Clone, Debug)]
struct Table {
    knots: Vec<f64>,
    values: Vec<f64>,
    last_slope: f64,
}

impl Table {
    fn new(knots: &[u32], values: &[f64]) -> Table {
        Table::from_f64(knots.iter().map(|&x| x as f64).collect(), values)
    }

    fn from_f64(k: Vec<f64>, values: &[f64]) -> Table {
        let n = k.len();
        let last_slope = (values[n - 1] - values[n - 2]) / (k[n - 1] - k[n - 2]);
        Table {
            knots: k,
            values: values.to_vec(),
            last_slope,
        }
    }

    #[inline]
    fn at(&self, x: f64) -> f64 {
        let k = &self.knots;
        if x <= k[0] {
            return self.values[0];
        }
        let n = k.len();
        if x >= k[n - 1] {
            return self.values[n - 1] + (x - k[n - 1]) * self.last_slope;
        }
        // First knot above x; x lies in [k[i-1], k[i]).
        let i = k.partition_point(|&v| v <= x);
        let t = (x - k[i - 1]) / (k[i] - k[i - 1]);
        self.values[i - 1] + t * (self.values[i] - self.values[i - 1])
    }
}

/// Prices iterations with a calibration profile's fitted terms.
#[derive(Clone, Debug)]
pub struct Profiled {
    step_ns: f64,
    prefill_seq_ns: f64,
    decode_token_ns: f64,
    prefill_pair_ns: f64,
    prefill_square_ns: f64,
    prefill_kv_token_ns: f64,
    tokens: Table,
    rows: Table,
    /// Wake-up penalty by idle time (ns → ns), constant past its last knot.
    wake: Option<(Table, f64)>,
    /// Seconds per byte of KV swapped (measured host copy bandwidth).
    swap_secs_per_byte: f64,
    /// Of `prefill_seq_ns`, the host time a served engine spends per
    /// request outside its iterations (measured through its API; 0 for
    /// candle profiles).
    host_request_ns: f64,
    /// Host work inside each step, `(per step, per sequence)` ns, where a
    /// candle calibration timed it apart from the device's
    /// (`Profile::measurement.host`); part of the fitted step, not added.
    step_host_ns: Option<(f64, f64)>,
    label: String,
}

impl Profiled {
    /// The cost model of a validated profile; `origin` names it in summaries.
    pub fn new(p: &Profile, origin: &str) -> Profiled {
        let f = &p.fit;
        Profiled {
            step_ns: f.step_ns,
            prefill_seq_ns: f.prefill_seq_ns,
            decode_token_ns: f.decode_token_ns,
            prefill_pair_ns: f.prefill_pair_ns,
            prefill_square_ns: f.prefill_square_ns,
            prefill_kv_token_ns: f.prefill_kv_token_ns,
            tokens: Table::new(&f.token_knots, &f.token_ns),
            rows: Table::new(&f.row_knots, &f.row_ns),
            wake: (f.idle_knots_ms.len() >= 2).then(|| {
                let knots: Vec<f64> = f.idle_knots_ms.iter().map(|ms| ms * 1e6).collect();
                let last = knots[knots.len() - 1];
                (Table::from_f64(knots, &f.wake_ns), last)
            }),
            swap_secs_per_byte: 1.0 / p.measurement.host_copy_bytes_per_s,
            host_request_ns: p
                .engine
                .as_ref()
                .map_or(0.0, |e| e.host.request_ns.clamp(0.0, f.prefill_seq_ns)),
            step_host_ns: p.measurement.host.as_ref().map(|h| (h.step_ns, h.seq_ns)),
            label: format!(
                "calibration profile {origin}: {} {} on {} ({}), {}; held-out fit error {:.1} % mean, {:.1} % max over {} shapes",
                p.model.name,
                p.model.dtype,
                p.device.name,
                p.device.spec,
                p.model.weights.describe(),
                p.held_out.mape_pct,
                p.held_out.max_error_pct,
                p.held_out.shapes
            ),
        }
    }

    /// Copy-on-write block copies (`replica::fork`): each token slot's K and
    /// V read and written once in device memory, at the measured cost of
    /// decode attention reading one context token's KV.
    #[inline]
    fn block_copy_ns(&self, b: &BatchShape) -> f64 {
        if b.copy_kv_tokens == 0 {
            return 0.0;
        }
        2.0 * b.copy_kv_tokens as f64 * self.decode_token_ns
    }

    /// The fitted iteration time of `b`, nanoseconds (fractional).
    #[inline]
    pub fn predict_ns(&self, b: &BatchShape) -> f64 {
        let f = Features::of(b);
        self.step_ns
            + self.prefill_seq_ns * f.prefill_seqs
            + self.decode_token_ns * f.decode_context
            + self.prefill_pair_ns * f.prefill_pairs
            + self.prefill_square_ns * f.prefill_square
            + self.prefill_kv_token_ns * f.prefill_kv
            + self.tokens.at(f.tokens)
            + self.rows.at(f.rows)
            + b.swap_bytes * self.swap_secs_per_byte * 1e9
            + self.block_copy_ns(b)
            + match &self.wake {
                Some((t, last)) if b.idle_ns > 0 => t.at((b.idle_ns as f64).min(*last)),
                _ => 0.0,
            }
    }
}

impl CostModel for Profiled {
    fn iteration_time(&self, b: &BatchShape) -> Nanos {
        if b.is_empty() {
            return 0;
        }
        secs_to_nanos(self.predict_ns(b) * 1e-9).max(1)
    }

    /// The profile's fitted terms, as `predict_ns` adds them.
    fn explain(&self, b: &BatchShape) -> Option<crate::cost::Breakdown> {
        use crate::cost::Term;
        let f = Features::of(b);
        let t = |name: &'static str, ns: f64, detail: String| Term {
            name,
            ms: ns / 1e6,
            detail,
        };
        let wake = match &self.wake {
            Some((w, last)) if b.idle_ns > 0 => w.at((b.idle_ns as f64).min(*last)),
            _ => 0.0,
        };
        let mut terms = vec![
            t("fixed per step", self.step_ns, "fitted".into()),
            t(
                "per prefill sequence",
                self.prefill_seq_ns * f.prefill_seqs,
                if self.host_request_ns > 0.0 {
                    format!(
                        "{} sequences; {:.3} ms each is the server's host time outside the model (measured)",
                        f.prefill_seqs,
                        self.host_request_ns / 1e6
                    )
                } else {
                    format!("{} sequences", f.prefill_seqs)
                },
            ),
            t(
                "token table",
                self.tokens.at(f.tokens),
                format!("{} tokens, measured piecewise-linear", f.tokens),
            ),
            t(
                "row table",
                self.rows.at(f.rows),
                format!("{} sequences, measured piecewise-linear", f.rows),
            ),
            t(
                "attention decode",
                self.decode_token_ns * f.decode_context,
                format!("{} context tokens", f.decode_context),
            ),
            t(
                "attention prefill",
                self.prefill_pair_ns * f.prefill_pairs
                    + self.prefill_square_ns * f.prefill_square
                    + self.prefill_kv_token_ns * f.prefill_kv,
                format!("{:.0} query-key pairs", f.prefill_pairs),
            ),
            t(
                "swap",
                b.swap_bytes * self.swap_secs_per_byte * 1e9,
                "measured host copy".into(),
            ),
            t("idle wake-up", wake, format!("after {} ns idle", b.idle_ns)),
        ];
        if b.copy_kv_tokens > 0 {
            terms.push(t(
                "block copies",
                self.block_copy_ns(b),
                format!(
                    "{} KV token slots copied on write, at the decode-attention read cost",
                    b.copy_kv_tokens
                ),
            ));
        }
        let total_ns = self.iteration_time(b);
        let step_host_ms = self
            .step_host_ns
            .map_or(0.0, |(step, seq)| (step + seq * b.seqs() as f64) / 1e6);
        let host_ms =
            (self.host_request_ns * f.prefill_seqs / 1e6 + step_host_ms).min(total_ns as f64 / 1e6);
        Some(crate::cost::Breakdown {
            source: self.label.clone(),
            tokens: b.tokens(),
            seqs: b.seqs(),
            gpu_ms: total_ns as f64 / 1e6 - host_ms,
            host_ms,
            host_overlaps: false,
            terms,
            total_ns,
        })
    }

    fn source(&self) -> String {
        self.label.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::example;

    fn decode(seqs: u32, context: u64) -> BatchShape {
        let mut b = BatchShape::default();
        for _ in 0..seqs {
            b.add_decode(context);
        }
        b
    }

    #[test]
    fn tables_interpolate_and_extrapolate_with_the_last_slope() {
        let t = Table::new(&[1, 3, 7], &[0.0, 10.0, 30.0]);
        assert_eq!(t.at(0.0), 0.0);
        assert_eq!(t.at(1.0), 0.0);
        assert_eq!(t.at(2.0), 5.0);
        assert_eq!(t.at(3.0), 10.0);
        assert_eq!(t.at(5.0), 20.0);
        assert_eq!(t.at(7.0), 30.0);
        assert_eq!(t.at(9.0), 40.0);
    }

    #[test]
    fn basis_rows_times_coefficients_equal_the_cost_model() {
        // Any non-negative coefficients: the basis and the model must agree.
        let basis = Basis {
            token_knots: vec![1, 4, 16, 64],
            row_knots: vec![1, 2, 8],
        };
        let coef = [1.5e5, 2e4, 30.0, 0.7, 0.2, 40.0, 1e4, 3e4, 9e4, 5e3, 2e4];
        let mut p = example();
        p.fit = basis.terms(&coef);
        let model = Profiled::new(&p, "p.toml");
        let mut mixed = decode(5, 300);
        mixed.add_prefill(40, 100);
        mixed.add_prefill(10, 0);
        for b in [decode(1, 10), decode(9, 70), mixed, {
            let mut b = BatchShape::default();
            b.add_prefill(200, 0);
            b
        }] {
            let row = basis.row(&b);
            let linear: f64 = row.iter().zip(&coef).map(|(x, c)| x * c).sum();
            let priced = model.predict_ns(&b);
            assert!(
                (linear - priced).abs() < 1e-6 * priced,
                "{b:?}: {linear} vs {priced}"
            );
        }
    }

    #[test]
    fn the_first_step_after_idling_pays_the_measured_wake_up() {
        let mut p = example();
        p.fit.idle_knots_ms = vec![0.0, 100.0, 400.0];
        p.fit.wake_ns = vec![0.0, 4e6, 8e6];
        let m = Profiled::new(&p, "p.toml");
        let mut b = decode(1, 100);
        assert_eq!(m.iteration_time(&b), 2_000_000);
        b.idle_ns = 50_000_000;
        assert_eq!(m.iteration_time(&b), 4_000_000);
        b.idle_ns = 250_000_000;
        assert_eq!(m.iteration_time(&b), 8_000_000);
        b.idle_ns = 5_000_000_000;
        assert_eq!(
            m.iteration_time(&b),
            10_000_000,
            "constant past the last knot"
        );
    }

    #[test]
    fn an_engine_profile_shows_its_measured_host_time_apart() {
        let mut p = example();
        p.fit.prefill_seq_ns = 3e6;
        p.engine = Some(crate::profile::EngineProbe {
            url: "http://x".into(),
            server: "test".into(),
            served_model: "tiny".into(),
            requests: 1,
            budget_s: 60.0,
            host: crate::profile::HostTerms {
                ttft_floor_ns: 5e6,
                request_ns: 1e6,
                step_ns: 2e6,
                seq_ns: 0.0,
            },
            concurrency: vec![],
            findings: vec![],
            batching: None,
        });
        let m = Profiled::new(&p, "p.toml");
        let mut b = decode(3, 100);
        b.add_prefill(1, 0);
        b.add_prefill(1, 0);
        let e = m.explain(&b).unwrap();
        // 2 ms step + 2 × 3 ms per prefill + 10 µs × 4 tokens beyond the first.
        assert_eq!(e.total_ns, 8_040_000);
        assert!((e.host_ms - 2.0).abs() < 1e-9, "{}", e.host_ms);
        assert!((e.gpu_ms - 6.04).abs() < 1e-9, "{}", e.gpu_ms);
        assert!(!e.host_overlaps);
        let seq = e
            .terms
            .iter()
            .find(|t| t.name == "per prefill sequence")
            .unwrap();
        assert!(
            seq.detail
                .contains("1.000 ms each is the server's host time"),
            "{}",
            seq.detail
        );
        // A candle profile has none.
        assert_eq!(
            Profiled::new(&example(), "p").explain(&b).unwrap().host_ms,
            0.0
        );
    }

    #[test]
    fn example_profile_prices_steps_and_says_where_it_came_from() {
        let m = Profiled::new(&example(), "p.toml");
        // 2 ms + 10 µs per token beyond the first.
        assert_eq!(m.iteration_time(&decode(1, 100)), 2_000_000);
        assert_eq!(m.iteration_time(&decode(11, 100)), 2_100_000);
        assert_eq!(m.iteration_time(&BatchShape::default()), 0);
        assert!(m.source().contains("calibration profile p.toml"));
        assert!(m.source().contains("random weights"));
    }
}
