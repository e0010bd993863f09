//! A profile's validation: every figure finite and plausible, every table
//! well formed, each refusal naming its key, so that a hand-edited or
//! corrupted profile is refused as strictly as a scenario is.

use super::*;

impl Profile {
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: String| Err((k.to_string(), m));
        if self.version != PROFILE_VERSION {
            return bad(
                "version",
                format!(
                    "profile format {} is not supported by this build (reads version {PROFILE_VERSION}); re-run `servesim calibrate`",
                    self.version
                ),
            );
        }
        let m = &self.model;
        for (k, v) in [
            ("model.layers", m.layers),
            ("model.hidden_size", m.hidden_size),
            ("model.num_heads", m.num_heads),
            ("model.num_kv_heads", m.num_kv_heads),
            ("model.head_dim", m.head_dim),
            ("model.intermediate_size", m.intermediate_size),
            ("model.vocab_size", m.vocab_size),
            ("model.max_context", m.max_context),
        ] {
            if v == 0 {
                return bad(k, "must be at least 1".into());
            }
        }
        // Each an order of magnitude past the largest model published, so
        // only typos and damaged files are refused (`layers = 1e9` would
        // price every step at a billion layers).
        for (k, v, hi) in [
            ("model.layers", m.layers, 10_000),
            ("model.hidden_size", m.hidden_size, 1_000_000),
            ("model.num_heads", m.num_heads, 65_536),
            ("model.num_kv_heads", m.num_kv_heads, 65_536),
            ("model.head_dim", m.head_dim, 65_536),
            ("model.intermediate_size", m.intermediate_size, 10_000_000),
            ("model.vocab_size", m.vocab_size, 100_000_000),
            ("model.max_context", m.max_context, 100_000_000),
        ] {
            if v > hi {
                return bad(
                    k,
                    format!("must be at most {hi} (far past any published model), got {v}"),
                );
            }
        }
        for (k, v) in [
            ("model.rope_theta", m.rope_theta),
            ("model.rms_norm_eps", m.rms_norm_eps),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1e12) {
                return bad(k, format!("must be a positive finite number, got {v}"));
            }
        }
        if m.num_heads % m.num_kv_heads != 0 {
            return bad(
                "model.num_kv_heads",
                format!("must divide num_heads ({})", m.num_heads),
            );
        }
        if m.dtype().is_none() {
            return bad(
                "model.dtype",
                format!("unknown dtype {:?}; allowed: f32, f16, bf16", m.dtype),
            );
        }
        if !matches!(m.rope_layout.as_str(), "half" | "interleaved") {
            return bad(
                "model.rope_layout",
                format!(
                    "unknown layout {:?}; allowed: half, interleaved",
                    m.rope_layout
                ),
            );
        }
        let mem = &self.memory;
        for (k, v) in [
            ("memory.device_bytes", mem.device_bytes),
            ("memory.weight_bytes", mem.weight_bytes),
            ("memory.kv_bytes_per_token", mem.kv_bytes_per_token),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(k, format!("must be a positive number, got {v}"));
            }
        }
        for (k, v) in [
            ("memory.activation_bytes", mem.activation_bytes),
            ("memory.runtime_bytes", mem.runtime_bytes),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(k, format!("must be ≥ 0, got {v}"));
            }
        }
        let f = &self.fit;
        for (k, v) in [
            ("fit.step_ns", f.step_ns),
            ("fit.prefill_seq_ns", f.prefill_seq_ns),
            ("fit.decode_token_ns", f.decode_token_ns),
            ("fit.prefill_pair_ns", f.prefill_pair_ns),
            ("fit.prefill_square_ns", f.prefill_square_ns),
            ("fit.prefill_kv_token_ns", f.prefill_kv_token_ns),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(k, format!("must be a finite number ≥ 0, got {v}"));
            }
        }
        for (k, v) in [
            ("fit.step_ns", f.step_ns),
            ("fit.prefill_seq_ns", f.prefill_seq_ns),
            ("fit.decode_token_ns", f.decode_token_ns),
            ("fit.prefill_pair_ns", f.prefill_pair_ns),
            ("fit.prefill_square_ns", f.prefill_square_ns),
            ("fit.prefill_kv_token_ns", f.prefill_kv_token_ns),
        ] {
            if v > MAX_TERM_NS {
                return bad(
                    k,
                    format!("must be at most {MAX_TERM_NS:e} ns (1000 s), got {v:e}"),
                );
            }
        }
        if f.step_ns < MIN_STEP_NS {
            return bad(
                "fit.step_ns",
                format!(
                    "must be at least {MIN_STEP_NS} ns: no device runs an iteration in less than \
                     a microsecond, got {}",
                    f.step_ns
                ),
            );
        }
        check_table("fit.token", &f.token_knots, &f.token_ns)?;
        check_table("fit.row", &f.row_knots, &f.row_ns)?;
        for &[from, to] in &f.falling_token_segments {
            let seg = f.token_knots.windows(2).any(|w| w == [from, to]);
            if !seg {
                return bad(
                    "fit.falling_token_segments",
                    format!("[{from}, {to}] is not a segment between two adjacent token_knots"),
                );
            }
        }
        let falls = |i: usize| {
            let seg = [f.token_knots[i - 1], f.token_knots[i]];
            f.falling_token_segments.contains(&seg)
        };
        if let Some(i) =
            (1..f.token_ns.len()).find(|&i| f.token_ns[i] < f.token_ns[i - 1] && !falls(i))
        {
            return bad(
                "fit.token_ns",
                format!(
                    "falls from {} ns at {} tokens to {} ns at {}: more tokens never cost less \
                     unless fit.falling_token_segments lists the segment",
                    f.token_ns[i - 1],
                    f.token_knots[i - 1],
                    f.token_ns[i],
                    f.token_knots[i]
                ),
            );
        }
        if let Some(i) = (1..f.row_ns.len()).find(|&i| f.row_ns[i] < f.row_ns[i - 1]) {
            return bad(
                "fit.row_ns",
                format!(
                    "falls from {} ns at {} rows to {} ns at {}: more rows never cost less",
                    f.row_ns[i - 1],
                    f.row_knots[i - 1],
                    f.row_ns[i],
                    f.row_knots[i]
                ),
            );
        }
        if !f.idle_knots_ms.is_empty() || !f.wake_ns.is_empty() {
            let k = &f.idle_knots_ms;
            if k.len() != f.wake_ns.len() || k[0] != 0.0 || k.windows(2).any(|w| w[0] >= w[1]) {
                return bad(
                    "fit.idle_knots_ms",
                    "must start at 0, increase strictly and have one wake_ns value per knot".into(),
                );
            }
            if f.wake_ns.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
                return bad("fit.wake_ns", "must be finite numbers ≥ 0".into());
            }
        }
        if let Some(v) = f.wake_ns.iter().find(|v| **v > MAX_TERM_NS) {
            return bad(
                "fit.wake_ns",
                format!("must be at most {MAX_TERM_NS:e} ns, got {v:e}"),
            );
        }
        for (k, v) in [
            ("memory.device_bytes", mem.device_bytes),
            ("memory.weight_bytes", mem.weight_bytes),
            ("memory.kv_bytes_per_token", mem.kv_bytes_per_token),
            ("memory.activation_bytes", mem.activation_bytes),
            ("memory.runtime_bytes", mem.runtime_bytes),
        ] {
            if v > MAX_DEVICE_BYTES {
                return bad(
                    k,
                    format!(
                        "must be at most {MAX_DEVICE_BYTES:e} bytes (a million GiB), got {v:e}"
                    ),
                );
            }
        }
        if mem.kv_bytes_per_token > mem.device_bytes || mem.weight_bytes > mem.device_bytes {
            let k = if mem.weight_bytes > mem.device_bytes {
                "memory.weight_bytes"
            } else {
                "memory.kv_bytes_per_token"
            };
            return bad(
                k,
                format!(
                    "exceeds the device's memory (memory.device_bytes = {:e})",
                    mem.device_bytes
                ),
            );
        }
        let host = self.measurement.host_copy_bytes_per_s;
        let (lo, hi) = HOST_COPY_BYTES_PER_S;
        if !(host.is_finite() && (lo..=hi).contains(&host)) {
            return bad(
                "measurement.host_copy_bytes_per_s",
                format!("must be in [{lo:e}, {hi:e}] bytes/s (1 MB/s to 1 PB/s), got {host:e}"),
            );
        }
        let wall = self.measurement.wall_s;
        if !(wall.is_finite() && wall >= 0.0) {
            return bad(
                "measurement.wall_s",
                format!("must be a finite number of seconds ≥ 0, got {wall}"),
            );
        }
        if let Some(h) = &self.measurement.host {
            for (f, v, hi) in [
                ("step_ns", h.step_ns, 1e10),
                ("seq_ns", h.seq_ns, 1e10),
                ("share_pct", h.share_pct, 100.0),
            ] {
                if !(v.is_finite() && (0.0..=hi).contains(&v)) {
                    return bad(
                        &format!("measurement.host.{f}"),
                        format!("must be a finite number in [0, {hi:e}], got {v}"),
                    );
                }
            }
        }
        if let Some(a) = &self.measurement.attention {
            let block = a.strip_prefix("tiled:").and_then(|b| b.parse::<u32>().ok());
            if a != "naive" && !block.is_some_and(|b| (1..=65536).contains(&b)) {
                return bad(
                    "measurement.attention",
                    format!("must be `naive` or `tiled:BLOCK` (BLOCK 1 to 65536 keys), got {a:?}"),
                );
            }
        }
        for (k, e) in [("held_out", &self.held_out)] {
            for (f, v) in [
                ("mape_pct", e.mape_pct),
                ("max_error_pct", e.max_error_pct),
                ("fitted_mape_pct", e.fitted_mape_pct),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return bad(
                        &format!("{k}.{f}"),
                        format!("must be a finite percentage ≥ 0, got {v}"),
                    );
                }
            }
        }
        if let Some(e) = &self.elementwise {
            e.check()?;
        }
        if let Some(b) = &self.bench {
            b.check()?;
        }
        if let Some(e) = &self.engine {
            let h = &e.host;
            for (f, v) in [
                ("ttft_floor_ns", h.ttft_floor_ns),
                ("request_ns", h.request_ns),
                ("step_ns", h.step_ns),
                ("seq_ns", h.seq_ns),
            ] {
                if !(v.is_finite() && (0.0..=MAX_TERM_NS).contains(&v)) {
                    return bad(
                        &format!("engine.host.{f}"),
                        format!("must be a finite number of ns in [0, {MAX_TERM_NS:e}], got {v}"),
                    );
                }
            }
            if let Some(b) = &e.batching {
                // The limits `[engine]` itself allows.
                for (f, v, max) in [
                    ("max_batched_tokens", b.max_batched_tokens, 1u32 << 24),
                    ("max_num_seqs", b.max_num_seqs, 1 << 16),
                    ("ubatch_tokens", b.ubatch_tokens, 1 << 24),
                ] {
                    if let Some(v) = v.filter(|v| !(1..=max).contains(v)) {
                        return bad(
                            &format!("engine.batching.{f}"),
                            format!("must be a whole number from 1 to {max}, got {v}"),
                        );
                    }
                }
            }
            if !(e.budget_s.is_finite() && e.budget_s >= 0.0 && e.budget_s <= 1e9) {
                return bad(
                    "engine.budget_s",
                    format!(
                        "must be a finite number of seconds in [0, 1e9], got {}",
                        e.budget_s
                    ),
                );
            }
        }
        for (i, s) in self.samples.iter().enumerate() {
            if s.times_ns.is_empty() || (s.prefill.is_empty() && s.decode.is_empty()) {
                return bad(
                    &format!("samples[{i}]"),
                    "needs a batch (prefill and/or decode) and at least one time".into(),
                );
            }
            if !(s.min_ns <= s.median_ns && s.median_ns <= s.max_ns) {
                return bad(
                    &format!("samples[{i}].median_ns"),
                    format!(
                        "must lie within min_ns and max_ns, got {} ≤ {} ≤ {}",
                        s.min_ns, s.median_ns, s.max_ns
                    ),
                );
            }
            if s.host_ns.is_some_and(|h| h > s.max_ns) {
                return bad(
                    &format!("samples[{i}].host_ns"),
                    format!(
                        "the host's part of a step cannot exceed its longest run (max_ns = {})",
                        s.max_ns
                    ),
                );
            }
            if !(s.idle_ms.is_finite() && s.idle_ms >= 0.0) {
                return bad(
                    &format!("samples[{i}].idle_ms"),
                    format!("must be a finite number ≥ 0, got {}", s.idle_ms),
                );
            }
        }
        Ok(())
    }
}

/// A profile's own held-out error past which using it warns, percent: its
/// predictions are off by that much on shapes it was not fitted to.
pub const HELD_OUT_WARN_PCT: f64 = 25.0;

impl Profile {
    /// Warnings for a user of the profile at `path`: its own recorded fit
    /// error past [`HELD_OUT_WARN_PCT`], or no held-out shapes to tell it.
    pub fn warnings(&self, path: &str) -> Vec<String> {
        let e = &self.held_out;
        let mut out = Vec::new();
        if e.shapes == 0 {
            out.push(format!(
                "profile {path}: no held-out shapes, so its accuracy is unknown (fitted shapes {:.2} % off); re-run `servesim calibrate` with a larger budget",
                e.fitted_mape_pct
            ));
        } else if e.mape_pct > HELD_OUT_WARN_PCT {
            out.push(format!(
                "profile {path}: its own held-out error is {:.2} % (mean over {} shapes, worst {:.2} %), past {HELD_OUT_WARN_PCT} %: its predictions may be off by as much; re-calibrate on a quiet machine",
                e.mape_pct, e.shapes, e.max_error_pct
            ));
        }
        if e.fitted_mape_pct > HELD_OUT_WARN_PCT && e.shapes > 0 {
            out.push(format!(
                "profile {path}: its fitted shapes are {:.2} % off, past {HELD_OUT_WARN_PCT} %: the cost model's shape does not fit this device",
                e.fitted_mape_pct
            ));
        }
        out
    }
}

/// Largest cost term or table value a profile may hold, ns (1000 s): far
/// above any measured iteration, below which every priced step stays on
/// the clock.
pub const MAX_TERM_NS: f64 = 1e12;
/// Smallest fixed step cost, ns: kernel launches alone take microseconds.
pub const MIN_STEP_NS: f64 = 1e3;
/// Largest memory figure, bytes (the datasheet limit of a million GiB).
pub const MAX_DEVICE_BYTES: f64 = 1.1e15;
/// Host copy bandwidth, bytes/s (the datasheet's PCIe range).
pub const HOST_COPY_BYTES_PER_S: (f64, f64) = (1e6, 1e15);

fn check_table(key: &str, knots: &[u32], ns: &[f64]) -> Result<(), (String, String)> {
    if knots.len() < 2 || knots.len() != ns.len() {
        return Err((
            format!("{key}_knots"),
            format!(
                "needs at least 2 knots and one value per knot, got {} knots and {} values",
                knots.len(),
                ns.len()
            ),
        ));
    }
    if knots[0] < 1 || knots.windows(2).any(|w| w[0] >= w[1]) {
        return Err((
            format!("{key}_knots"),
            "must start at 1 or more and increase strictly".into(),
        ));
    }
    if ns[0] != 0.0 || ns.iter().any(|v| !v.is_finite()) {
        return Err((
            format!("{key}_ns"),
            "must start at 0 and hold finite numbers".into(),
        ));
    }
    // Values are relative to the first knot's: below 0 a larger batch would
    // cost less than the smallest, and a table of negative values prices
    // iterations at negative times.
    if let Some(v) = ns.iter().find(|v| !(0.0..=MAX_TERM_NS).contains(*v)) {
        return Err((
            format!("{key}_ns"),
            format!(
                "must hold numbers in [0, {MAX_TERM_NS:e}] ns (relative to the first), got {v}"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::example;
    use super::*;

    /// Model dimensions past any published model and host terms outside
    /// their range are refused by key (`layers = 1000000000` priced every
    /// step at a billion layers; a negative TTFT floor shortened every TTFT).
    #[test]
    fn model_dimensions_and_engine_terms_out_of_range_are_refused_by_key() {
        let mut p = example();
        p.model.layers = 1_000_000_000;
        let e = Profile::from_toml_str(&p.to_toml_string(), "p.toml").unwrap_err();
        assert_eq!(e.key, "model.layers", "{e}");
        assert!(e.message.contains("at most 10000"), "{e}");
        let mut p = example();
        p.model.rope_theta = -1.0;
        let e = Profile::from_toml_str(&p.to_toml_string(), "p.toml").unwrap_err();
        assert_eq!(e.key, "model.rope_theta", "{e}");
        let mut p = example();
        p.engine = Some(EngineProbe {
            url: "http://127.0.0.1:8000".into(),
            server: "vllm".into(),
            served_model: "m".into(),
            requests: 85,
            budget_s: 240.0,
            host: HostTerms {
                ttft_floor_ns: -11e6,
                request_ns: 1.1e6,
                step_ns: 8e6,
                seq_ns: 3e5,
            },
            concurrency: vec![[1, 1]],
            findings: vec![],
            batching: None,
        });
        let e = Profile::from_toml_str(&p.to_toml_string(), "p.toml").unwrap_err();
        assert_eq!(e.key, "engine.host.ttft_floor_ns", "{e}");
    }

    /// A profile's own recorded error past the threshold, or no held-out
    /// shapes at all, is told to whoever uses it; a good one says nothing.
    #[test]
    fn a_profile_warns_of_its_own_recorded_fit_error() {
        let mut p = example();
        p.held_out.shapes = 12;
        p.held_out.mape_pct = 4.0;
        assert!(p.warnings("p.toml").is_empty());
        p.held_out.mape_pct = 95.0;
        let w = p.warnings("p.toml");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("95.00 %") && w[0].contains("p.toml"), "{w:?}");
        p.held_out.shapes = 0;
        p.held_out.mape_pct = 0.0;
        p.held_out.fitted_mape_pct = 33.0;
        let w = p.warnings("p.toml");
        assert!(
            w[0].contains("no held-out shapes") && w[0].contains("33.00 %"),
            "{w:?}"
        );
    }

    #[test]
    fn implausible_cost_tables_and_figures_are_refused_by_key() {
        // A table of all-negative values priced steps at -8.9 ms.
        let neg = example().to_toml_string().replace(
            "token_ns = [0.0, 10000000.0]",
            "token_ns = [0.0, -8927000.0]",
        );
        let e = Profile::from_toml_str(&neg, "p.toml").unwrap_err();
        assert_eq!(e.key, "fit.token_ns", "{e}");
        let cases: [(&str, &str, &str); 9] = [
            ("row_ns = [0.0, 0.0]", "row_ns = [0.0, -1.0]", "fit.row_ns"),
            ("step_ns = 2000000.0", "step_ns = 1e300", "fit.step_ns"),
            ("step_ns = 2000000.0", "step_ns = 0.0", "fit.step_ns"),
            (
                "token_ns = [0.0, 10000000.0]",
                "token_ns = [0.0, 1e300]",
                "fit.token_ns",
            ),
            (
                "kv_bytes_per_token = 512.0",
                "kv_bytes_per_token = 1e20",
                "memory.kv_bytes_per_token",
            ),
            (
                "host_copy_bytes_per_s = 10000000000.0",
                "host_copy_bytes_per_s = 1e-300",
                "measurement.host_copy_bytes_per_s",
            ),
            (
                "median_ns = 2000000",
                "median_ns = 9000000",
                "samples[0].median_ns",
            ),
            ("wall_s = 1.0", "wall_s = nan", "measurement.wall_s"),
            ("mape_pct = 0.0", "mape_pct = -5.0", "held_out.mape_pct"),
        ];
        for (from, to, key) in cases {
            let text = example().to_toml_string();
            assert!(text.contains(from), "{from} not in {text}");
            let e = Profile::from_toml_str(&text.replace(from, to), "p.toml").unwrap_err();
            assert_eq!(e.key, key, "{to}: {e}");
        }
        // A falling token segment is allowed only where the fit listed it.
        let mut p = example();
        p.fit.token_knots = vec![1, 2, 3];
        p.fit.token_ns = vec![0.0, 10.0, 5.0];
        let e = Profile::from_toml_str(&p.to_toml_string(), "p.toml").unwrap_err();
        assert_eq!(e.key, "fit.token_ns", "{e}");
        p.fit.falling_token_segments = vec![[2, 3]];
        Profile::from_toml_str(&p.to_toml_string(), "p.toml").unwrap();
        p.fit.falling_token_segments = vec![[1, 3]];
        let e = Profile::from_toml_str(&p.to_toml_string(), "p.toml").unwrap_err();
        assert_eq!(e.key, "fit.falling_token_segments", "{e}");
    }
}
