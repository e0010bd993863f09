//! Which requests `calibrate --engine` sends, so that every cost term of a
//! profile is identifiable from what an API shows (a request's first token
//! and the gaps between its tokens):
//!
//! - lone requests over prompt lengths: the time to first token is the
//!   per-request overhead plus one prefill, so its intercept (a one-token
//!   prompt) and its curve in the length give the TTFT floor, the dense
//!   cost per token and the quadratic attention term; their few decode gaps
//!   are batch-1 steps on contexts as long as the prompts;
//! - fixed concurrency levels with long outputs, at a short and a long
//!   prompt: the inter-token gaps while every request decodes are decode
//!   steps of that batch, so the step's intercept, its slope in the batch
//!   size and its slope in the context come apart;
//! - a prefill joining running decodes: the gap it lengthens is a mixed
//!   iteration, held out to check how the engine mixes them;
//! - the same prompt twice: a much shorter second TTFT means the server
//!   caches prefixes.
//!
//! Every other prompt length and the concurrency levels between powers of
//! two are held out of the fit to measure its error. The design is sized to
//! the time budget from a pilot's figures; probes are listed by priority,
//! the essential set first: the fitted shapes the fit cannot do without and
//! one held-out shape of every family, so the fit's error is always
//! measured on each. The rest (more held-out shapes, long-context decodes
//! at the smaller batches) run while the budget lasts.

use std::time::Duration;

/// What a probe measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    /// Lone requests, one after another: TTFT and batch-1 decode gaps.
    Prefill,
    /// `concurrency` requests sent at once: decode gaps at that batch.
    Decode,
    /// `concurrency - 1` decoding requests, then one prefill joins.
    Mixed,
    /// The same prompt twice in a row.
    Prefix,
}

impl ProbeKind {
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Prefill => "prefill",
            ProbeKind::Decode => "decode",
            ProbeKind::Mixed => "mixed",
            ProbeKind::Prefix => "prefix",
        }
    }
}

/// One probe: a group of requests and what it is for.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub kind: ProbeKind,
    /// Prompt tokens of each request (for `Mixed`: of the joining prefill;
    /// the decoders have `short_prompt`).
    pub prompt: u32,
    /// Requests at once (1 for `Prefill` and `Prefix`).
    pub concurrency: u32,
    /// Output tokens of each request.
    pub output: u32,
    /// Times the probe is repeated.
    pub repeats: u32,
    /// Its samples are fitted (`true`) or held out to check the fit.
    pub fitted: bool,
    /// Estimated wall time, all repeats.
    pub estimate: Duration,
    /// Part of the set a profile cannot be trusted without: every fitted
    /// shape the fit's terms need, and at least one held-out shape of
    /// every family. The essential probes come first in a design.
    pub essential: bool,
}

/// What the pilot request measured and what the server allows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pilot {
    /// TTFT of a `SHORT_PROMPT`-token prompt, ns.
    pub ttft_short_ns: f64,
    /// TTFT of a `long_prompt`-token prompt, ns.
    pub ttft_long_ns: f64,
    pub long_prompt: u32,
    /// Median gap of a lone request (a batch-1 decode step), ns.
    pub gap_ns: f64,
}

/// Bounds on the design.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Longest prompt to probe (at most half the server's context, so the
    /// long decodes fit).
    pub max_prompt: u32,
    /// Most requests sent at once.
    pub max_concurrency: u32,
    /// Wall time the probes may take.
    pub budget: Duration,
}

/// The short prompt of decode probes and of the pilot.
pub const SHORT_PROMPT: u32 = 16;
/// Output tokens of a prefill probe's requests (their gaps are batch-1 steps).
pub const PREFILL_OUTPUT: u32 = 4;

/// The probe set, in priority order, with its estimated time.
#[derive(Clone, Debug, PartialEq)]
pub struct Design {
    pub probes: Vec<Probe>,
    pub estimate: Duration,
    /// Token-table knots (prompt lengths) and row-table knots (batch sizes)
    /// the fit uses: fitted shapes only, so every segment has samples.
    pub token_knots: Vec<u32>,
    pub row_knots: Vec<u32>,
    /// The prompt of long-context decode probes.
    pub long_prompt: u32,
    /// The longest prompt probed: the limit's, or less when the budget
    /// does not fit the smallest set at it.
    pub max_prompt: u32,
}

/// Prompt lengths probed: 1, 8, then powers of two from 32, up to
/// `max_prompt`, which is always the last (so the fitted ones, every other
/// from the first, fall on the token table's knots).
fn prompt_lengths(max_prompt: u32) -> Vec<u32> {
    let mut v = vec![1u32];
    let mut n = 8u32;
    while n < max_prompt {
        v.push(n);
        n = if n == 8 { 32 } else { n * 2 };
    }
    if max_prompt > 1 {
        v.push(max_prompt);
    }
    v
}

/// Concurrency levels: powers of two fitted, 3, 6, 12, ... held out.
fn levels(max: u32) -> (Vec<u32>, Vec<u32>) {
    let mut fitted = vec![];
    let mut held = vec![];
    let mut b = 1u32;
    while b <= max {
        fitted.push(b);
        if b >= 2 && b + b / 2 <= max {
            held.push(b + b / 2);
        }
        b *= 2;
    }
    if *fitted.last().unwrap_or(&1) < max {
        fitted.push(max);
        held.retain(|&h| h < max);
    }
    (fitted, held)
}

/// Sizes the probe set to the budget. Fails when even the set the fit needs
/// (each fitted prompt length once, each fitted level once at short outputs)
/// would not fit, naming the budget that would.
///
/// When even that set does not fit at `l.max_prompt`, the longest prompt is
/// halved (down to [`MIN_LONGEST_PROMPT`]) before giving up: every family
/// is covered at sizes that fit, and the design says how far it reached
/// ([`Design::max_prompt`]).
pub fn design(p: &Pilot, l: &Limits) -> Result<Design, String> {
    if !(p.ttft_short_ns > 0.0 && p.gap_ns > 0.0) {
        return Err("the pilot request measured no time to first token or no token gaps".into());
    }
    let full = l.max_prompt.max(SHORT_PROMPT);
    let floor = MIN_LONGEST_PROMPT.min(full);
    let mut size = full;
    loop {
        match sized(p, l, size) {
            Ok(d) => return Ok(d),
            Err(total) if size <= floor => {
                let minutes = (total / 0.85 / 60e9 * 2.0).ceil() / 2.0;
                return Err(format!(
                    "a budget of {:.1} min is too short for the probes this server needs at its speed (the smallest set, prompts up to {size} tokens, takes about {:.1} min); give --budget {} or more, or a lower --max-concurrency",
                    l.budget.as_secs_f64() / 60.0,
                    total / 60e9,
                    minutes.max(0.5)
                ));
            }
            Err(_) => size = (size / 2).max(floor),
        }
    }
}

/// The shortest longest-prompt a design shrinks to before it gives up:
/// below it the prefill curve is too short to tell the per-token cost from
/// the per-request one.
pub const MIN_LONGEST_PROMPT: u32 = 64;

/// The design with prompts up to `max_prompt`, or the smallest set's
/// estimated time (ns) when it does not fit.
fn sized(p: &Pilot, l: &Limits, max_prompt: u32) -> Result<Design, f64> {
    let slope = ((p.ttft_long_ns - p.ttft_short_ns) / (p.long_prompt as f64 - SHORT_PROMPT as f64))
        .max(0.0);
    let ttft = |n: u32| (p.ttft_short_ns + slope * (n as f64 - SHORT_PROMPT as f64)).max(p.gap_ns);
    // A batch of B decodes is priced as B lone steps' worth of the part that
    // grows with the batch at worst half the step (a CPU engine's decode
    // grows nearly linearly; a GPU's far less), so budgets are not overrun.
    let gap = |b: u32| p.gap_ns * (1.0 + 0.5 * (b as f64 - 1.0));
    let lengths = prompt_lengths(max_prompt);
    let long_prompt = (max_prompt / 2).clamp(SHORT_PROMPT, 1024);
    let (fit_levels, held_levels) = levels(l.max_concurrency.max(1));
    let budget = l.budget.as_secs_f64() * 1e9 * 0.85;
    // From generous to minimal: repeats of the prefill probes, output of
    // the decode probes, whether held-out probes run.
    let tries = [
        (7, 96, true),
        (5, 64, true),
        (3, 64, true),
        (3, 48, true),
        (2, 32, true),
        (2, 24, true),
        (1, 16, false),
    ];
    for &(repeats, output, held) in &tries {
        let mut probes = Vec::new();
        let prefill = |n: u32, fitted: bool, r: u32, essential: bool| Probe {
            kind: ProbeKind::Prefill,
            prompt: n,
            concurrency: 1,
            output: PREFILL_OUTPUT,
            repeats: r,
            fitted,
            estimate: ns(r as f64 * (ttft(n) + (PREFILL_OUTPUT - 1) as f64 * gap(1))),
            essential,
        };
        let decode = |b: u32, prompt: u32, fitted: bool, essential: bool| Probe {
            kind: ProbeKind::Decode,
            prompt,
            concurrency: b,
            output,
            repeats: 1,
            fitted,
            estimate: ns(ttft(prompt) * b as f64 + output as f64 * gap(b)),
            essential,
        };
        let mixed = |top: u32, repeats: u32, essential: bool| Probe {
            kind: ProbeKind::Mixed,
            prompt: long_prompt,
            concurrency: top,
            output,
            repeats,
            fitted: false,
            estimate: ns(repeats as f64
                * (ttft(SHORT_PROMPT) * top as f64 + ttft(long_prompt) + output as f64 * gap(top))),
            essential,
        };
        // Essential, in order: the fitted shapes, then one held-out shape
        // of each family (the middle held-out length, the first level
        // between powers of two, one mixed step, the prefix pair), so a
        // run cut short by a slower server than the pilot showed still
        // has a measured error on every family.
        let held_lengths: Vec<u32> = lengths
            .iter()
            .enumerate()
            .filter(|&(i, _)| i % 2 == 1 && i + 1 != lengths.len())
            .map(|(_, &n)| n)
            .collect();
        let key_length = held_lengths[held_lengths.len() / 2];
        for (i, &n) in lengths.iter().enumerate() {
            if i % 2 == 0 || i + 1 == lengths.len() {
                probes.push(prefill(n, true, repeats, true));
            }
        }
        for &b in &fit_levels {
            probes.push(decode(b, SHORT_PROMPT, true, true));
        }
        let top = *fit_levels.last().expect("level 1 at least");
        probes.push(decode(top, long_prompt, true, true));
        probes.push(prefill(key_length, false, repeats.max(2), true));
        if let Some(&b) = held_levels.first() {
            probes.push(decode(b, SHORT_PROMPT, false, true));
        }
        if top >= 2 {
            probes.push(mixed(top, 1, true));
        }
        probes.push(Probe {
            kind: ProbeKind::Prefix,
            prompt: long_prompt,
            concurrency: 1,
            output: 1,
            repeats: 1,
            fitted: false,
            estimate: ns(2.0 * ttft(long_prompt)),
            essential: true,
        });
        if held {
            for &b in &fit_levels[..fit_levels.len() - 1] {
                probes.push(decode(b, long_prompt, true, false));
            }
            for &n in held_lengths.iter().filter(|&&n| n != key_length) {
                probes.push(prefill(n, false, repeats, false));
            }
            for &b in held_levels.iter().skip(1) {
                probes.push(decode(b, SHORT_PROMPT, false, false));
            }
            if top >= 2 {
                probes.push(mixed(top, 1, false));
            }
        }
        let total: f64 = probes.iter().map(|p| p.estimate.as_secs_f64() * 1e9).sum();
        if total <= budget {
            let mut token_knots: Vec<u32> = vec![1];
            if max_prompt > 256 {
                token_knots.push(128);
            }
            token_knots.push(max_prompt);
            token_knots.dedup();
            let row_knots = if top >= 2 { vec![1, top] } else { vec![1, 2] };
            return Ok(Design {
                max_prompt,
                probes,
                estimate: ns(total),
                token_knots,
                row_knots,
                long_prompt,
            });
        }
        if (repeats, output, held) == (1, 16, false) {
            return Err(total);
        }
    }
    unreachable!("the last try returns")
}

fn ns(x: f64) -> Duration {
    Duration::from_nanos(x.max(0.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pilot(gap_ms: f64) -> Pilot {
        Pilot {
            ttft_short_ns: 30e6,
            ttft_long_ns: 130e6,
            long_prompt: 512,
            gap_ns: gap_ms * 1e6,
        }
    }

    fn limits(minutes: f64) -> Limits {
        Limits {
            max_prompt: 2048,
            max_concurrency: 16,
            budget: Duration::from_secs_f64(minutes * 60.0),
        }
    }

    #[test]
    fn every_term_has_fitted_shapes_that_vary_it() {
        let d = design(&pilot(20.0), &limits(5.0)).unwrap();
        let fitted = |k: ProbeKind| d.probes.iter().filter(move |p| p.kind == k && p.fitted);
        let lengths: Vec<u32> = fitted(ProbeKind::Prefill).map(|p| p.prompt).collect();
        assert_eq!(
            lengths,
            [1, 32, 128, 512, 2048],
            "intercept, curve and the longest"
        );
        let short: Vec<u32> = fitted(ProbeKind::Decode)
            .filter(|p| p.prompt == SHORT_PROMPT)
            .map(|p| p.concurrency)
            .collect();
        assert_eq!(short, [1, 2, 4, 8, 16], "the step's slope in the batch");
        assert!(
            fitted(ProbeKind::Decode).any(|p| p.prompt == d.long_prompt && p.concurrency == 16),
            "the step's slope in the context at the largest batch"
        );
        assert_eq!(d.long_prompt, 1024);
        // The tables' knots are fitted shapes.
        assert_eq!(d.token_knots, [1, 128, 2048]);
        assert_eq!(d.row_knots, [1, 16]);
        // Held out: the other lengths, the levels between, a mix, a prefix.
        let held: Vec<(ProbeKind, u32, u32)> = d
            .probes
            .iter()
            .filter(|p| !p.fitted)
            .map(|p| (p.kind, p.prompt, p.concurrency))
            .collect();
        for want in [
            (ProbeKind::Prefill, 8, 1),
            (ProbeKind::Prefill, 1024, 1),
            (ProbeKind::Decode, SHORT_PROMPT, 3),
            (ProbeKind::Decode, SHORT_PROMPT, 12),
            (ProbeKind::Mixed, 1024, 16),
            (ProbeKind::Prefix, 1024, 1),
        ] {
            assert!(held.contains(&want), "{want:?} not in {held:?}");
        }
        assert!(d.estimate <= Duration::from_secs(255), "{:?}", d.estimate);
    }

    #[test]
    fn a_slower_server_gets_a_smaller_design_within_the_budget() {
        let fast = design(&pilot(10.0), &limits(5.0)).unwrap();
        let slow = design(&pilot(60.0), &limits(5.0)).unwrap();
        let output = |d: &Design| {
            d.probes
                .iter()
                .find(|p| p.kind == ProbeKind::Decode)
                .unwrap()
                .output
        };
        assert!(
            output(&slow) < output(&fast),
            "{} vs {}",
            output(&slow),
            output(&fast)
        );
        assert!(slow.estimate.as_secs_f64() <= 0.85 * 300.0);
        // Priority: everything essential comes before anything else, and
        // the essential set has a held-out shape of every family.
        for d in [&fast, &slow] {
            let first_extra = d.probes.iter().position(|p| !p.essential);
            let last_essential = d.probes.iter().rposition(|p| p.essential).unwrap();
            assert!(first_extra.is_none_or(|h| h > last_essential));
            for kind in [
                ProbeKind::Prefill,
                ProbeKind::Decode,
                ProbeKind::Mixed,
                ProbeKind::Prefix,
            ] {
                assert!(
                    d.probes
                        .iter()
                        .any(|p| p.essential && !p.fitted && p.kind == kind),
                    "no essential held-out {kind:?}"
                );
            }
        }
    }

    #[test]
    fn a_budget_too_short_names_one_that_fits() {
        let e = design(&pilot(200.0), &limits(0.2)).unwrap_err();
        assert!(e.starts_with("a budget of 0.2 min is too short"), "{e}");
        assert!(e.contains("prompts up to 64 tokens"), "{e}");
        let minutes: f64 = e
            .split("give --budget ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("{e}"));
        // The budget it names is one that fits.
        assert!(design(&pilot(200.0), &limits(minutes)).is_ok(), "{e}");
    }

    #[test]
    fn a_slow_prefill_shrinks_the_longest_prompt_before_giving_up() {
        // 20 ms per prompt token: a 2048-token prefill takes 41 s.
        let slow = Pilot {
            ttft_short_ns: 30e6,
            ttft_long_ns: 30e6 + 496.0 * 20e6,
            long_prompt: 512,
            gap_ns: 20e6,
        };
        let d = design(&slow, &limits(1.0)).unwrap();
        assert!(
            d.max_prompt < 2048 && d.max_prompt >= MIN_LONGEST_PROMPT,
            "{}",
            d.max_prompt
        );
        assert_eq!(*d.token_knots.last().unwrap(), d.max_prompt);
        assert!(d.probes.iter().all(|p| p.prompt <= d.max_prompt));
        assert!(d.estimate.as_secs_f64() <= 0.85 * 60.0);
        assert!(d
            .probes
            .iter()
            .any(|p| !p.fitted && p.kind == ProbeKind::Prefill));
    }

    #[test]
    fn one_slot_and_short_contexts_still_give_a_design() {
        let l = Limits {
            max_prompt: 100,
            max_concurrency: 1,
            budget: Duration::from_secs(120),
        };
        let d = design(&pilot(5.0), &l).unwrap();
        // Held-out shapes even so: a prefill length and the prefix pair.
        assert!(d
            .probes
            .iter()
            .any(|p| !p.fitted && p.kind == ProbeKind::Prefill));
        assert_eq!(d.token_knots, [1, 100]);
        assert_eq!(d.row_knots, [1, 2]);
        assert!(d.probes.iter().all(|p| p.kind != ProbeKind::Mixed));
        assert_eq!(levels(12), (vec![1, 2, 4, 8, 12], vec![3, 6]));
    }
}
