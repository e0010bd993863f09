//! One `requests.csv` row as bytes, written without the `csv` crate's
//! per-field writer: a 10-million-request run writes 300 million fields,
//! and a row is built here in one buffer with the exact number formatting
//! of `output::fast_fmt`, then written whole. The bytes are those the `csv`
//! crate wrote (its default `QuoteStyle::Necessary`: a field is quoted only
//! when it holds a comma, a double quote, or a line break, with quotes
//! doubled; rows end in `\n`); a test compares the two.

use super::fast_fmt::{push_fixed, push_ns_as_ms, push_ns_fixed, push_u64};
use crate::attribution::{Component, N_COMPONENTS};
use crate::request::{Request, Status};

/// Appends request `id`'s row, with its line end, to `buf`. `attribution`:
/// the latency components (`attr_*` columns); `disagg`: the KV transfer
/// columns; `regions`: the fleet's region names, when it has regions.
pub fn push_request_row<S: AsRef<str>>(
    buf: &mut Vec<u8>,
    id: u64,
    r: &Request,
    attribution: bool,
    disagg: bool,
    regions: &[S],
) {
    let reason = match r.status {
        Status::Rejected(x) => x.as_str(),
        _ => "",
    };
    push_u64(buf, id);
    buf.push(b',');
    // `arrival.as_secs_f64()` with six decimals.
    push_ns_fixed::<9, 6>(buf, r.arrival.0);
    buf.push(b',');
    if r.replica != u32::MAX {
        push_u64(buf, r.replica as u64);
    }
    buf.push(b',');
    push_u64(buf, r.prompt_tokens as u64);
    buf.push(b',');
    push_u64(buf, r.output_tokens as u64);
    buf.push(b',');
    push_u64(buf, r.generated as u64 * r.samples() as u64);
    buf.push(b',');
    push_plain(buf, r.status.as_str());
    buf.push(b',');
    push_plain(buf, reason);
    buf.push(b',');
    push_ms(buf, r.queue_wait());
    buf.push(b',');
    push_ms(buf, r.ttft());
    buf.push(b',');
    if let Some(x) = r.tpot() {
        push_fixed(buf, x / 1e6, 3);
    }
    buf.push(b',');
    push_ms(buf, r.e2e().filter(|_| r.status == Status::Completed));
    buf.push(b',');
    push_u64(buf, r.preemptions as u64);
    buf.push(b',');
    push_u64(buf, r.tenant as u64);
    buf.push(b',');
    push_u64(buf, r.session());
    if attribution {
        push_components(buf, r);
    }
    if disagg {
        for f in crate::cluster::disagg::csv_fields(r.kv_transfer()) {
            buf.push(b',');
            push_field(buf, &f);
        }
    }
    if !regions.is_empty() {
        buf.push(b',');
        push_field(buf, regions[r.region as usize].as_ref());
    }
    buf.push(b'\n');
}

/// Milliseconds with three decimals (nothing for `None`): the text of
/// `time::nanos_to_ms` formatted `{:.3}`, from the integer nanoseconds.
#[inline]
fn push_ms(buf: &mut Vec<u8>, v: Option<u64>) {
    if let Some(x) = v {
        push_ns_fixed::<6, 3>(buf, x);
    }
}

/// The latency components of `r`, each after a comma: all of them once it
/// completed, those of TTFT when it has a first token but had not finished
/// by the horizon, none otherwise (rejected, or still queued).
fn push_components(buf: &mut Vec<u8>, r: &Request) {
    // The components of TTFT come first (`Component::before_first_token`),
    // so those written are a prefix of them.
    let shown = if r.status == Status::Completed {
        N_COMPONENTS
    } else if r.first_token.is_some() {
        Component::KvTransfer as usize
    } else {
        0
    };
    for &ns in &r.attribution.ns[..shown] {
        if ns == 0 {
            // Most components of most requests: the comma and the text at once.
            buf.extend_from_slice(b",0.000000");
        } else {
            buf.push(b',');
            push_ns_as_ms(buf, ns);
        }
    }
    buf.extend_from_slice(&[b','; N_COMPONENTS][shown..]);
}

/// A text field known to need no quotes (a status or a reject reason: a
/// test checks every one).
#[inline]
fn push_plain(buf: &mut Vec<u8>, f: &str) {
    debug_assert!(!needs_quotes(f), "{f:?}");
    buf.extend_from_slice(f.as_bytes());
}

/// Whether the `csv` crate quotes `f` (its `QuoteStyle::Necessary`).
fn needs_quotes(f: &str) -> bool {
    f.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
}

/// A text field, quoted as the `csv` crate quotes it when it must be.
fn push_field(buf: &mut Vec<u8>, f: &str) {
    if !needs_quotes(f) {
        buf.extend_from_slice(f.as_bytes());
        return;
    }
    buf.push(b'"');
    for b in f.bytes() {
        if b == b'"' {
            buf.push(b'"');
        }
        buf.push(b);
    }
    buf.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RejectReason;
    use crate::time::nanos_to_ms;
    use crate::time::SimTime;
    use proptest::prelude::*;

    /// The row as the `csv` crate writes the same fields.
    fn csv_row(fields: &[String]) -> Vec<u8> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(fields).expect("in memory");
        w.into_inner().expect("in memory")
    }

    /// What the row's shortcuts rest on: statuses and reject reasons need
    /// no quotes, and the components of TTFT are the first ones, in the
    /// order of `Attribution::ns`.
    #[test]
    fn plain_fields_and_component_order() {
        use RejectReason::*;
        for s in [
            Status::InFlight,
            Status::Completed,
            Status::Cancelled,
            Status::Failed,
        ] {
            assert!(!needs_quotes(s.as_str()));
        }
        for x in [
            ExceedsMaxModelLen,
            PromptExceedsTokenBudget,
            ExceedsKvCapacity,
            RateLimited,
            QueueFull,
            ConcurrencyLimit,
            Deadline,
            ServerBusy,
            ServerRefused,
            NoReadyReplica,
            ReplicaFailed,
        ] {
            assert!(!needs_quotes(x.as_str()));
            assert!(!needs_quotes(Status::Rejected(x).as_str()));
        }
        for (i, c) in Component::ALL.into_iter().enumerate() {
            assert_eq!(c as usize, i);
            assert_eq!(c.before_first_token(), i < Component::KvTransfer as usize);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Any request, any region name (commas, quotes, line breaks): the
        /// row equals the `csv` crate's, field by field from `format!`.
        #[test]
        fn row_equals_the_csv_crates(
            t in proptest::array::uniform4(0u64..1 << 44),
            opt in 0u8..16,
            small in proptest::array::uniform6(0u32..100_000),
            status in 0u8..5,
            ns in proptest::array::uniform15(0u64..1 << 40),
            region in "[a-z,\"\n\r ]{1,6}",
            attribution in any::<bool>(),
        ) {
            let mut r = Request::new(SimTime(t[0]), small[0], small[1] % 50 + 1);
            r.replica = if opt & 8 != 0 { u32::MAX } else { small[2] };
            r.first_scheduled = (opt & 1 != 0).then(|| SimTime(t[0] + t[1])).into();
            r.first_token = (opt & 2 != 0).then(|| SimTime(t[0] + t[2])).into();
            r.finished = (opt & 4 != 0).then(|| SimTime(t[0] + t[2] + t[3])).into();
            r.generated = small[3];
            r.preemptions = small[4];
            r.tenant = small[5];
            r.set_session(t[3]);
            r.status = [Status::InFlight, Status::Completed, Status::Rejected(RejectReason::QueueFull), Status::Cancelled, Status::Failed][status as usize];
            r.attribution.ns = ns;
            let ms = |v: Option<u64>| v.map(|x| format!("{:.3}", nanos_to_ms(x))).unwrap_or_default();
            let mut want = vec![
                "17".to_string(),
                format!("{:.6}", r.arrival.as_secs_f64()),
                if r.replica == u32::MAX { String::new() } else { r.replica.to_string() },
                r.prompt_tokens.to_string(),
                r.output_tokens.to_string(),
                (r.generated as u64 * r.samples() as u64).to_string(),
                r.status.as_str().to_string(),
                match r.status { Status::Rejected(x) => x.as_str().to_string(), _ => String::new() },
                ms(r.queue_wait()),
                ms(r.ttft()),
                r.tpot().map(|x| format!("{:.3}", x / 1e6)).unwrap_or_default(),
                ms(r.e2e().filter(|_| r.status == Status::Completed)),
                r.preemptions.to_string(),
                r.tenant.to_string(),
                r.session().to_string(),
            ];
            if attribution {
                let done = r.status == Status::Completed;
                for c in Component::ALL {
                    want.push(if done || (r.first_token.is_some() && c.before_first_token()) {
                        crate::attribution::ns_as_ms(r.attribution.get(c))
                    } else {
                        String::new()
                    });
                }
            }
            want.extend(crate::cluster::disagg::csv_fields(None));
            want.push(region.clone());
            let mut got = Vec::new();
            push_request_row(&mut got, 17, &r, attribution, true, &[region]);
            prop_assert_eq!(String::from_utf8(got).expect("utf-8"),
                String::from_utf8(csv_row(&want)).expect("utf-8"));
            prop_assert_eq!(want.len(), 15 + if attribution { N_COMPONENTS } else { 0 } + 6);
        }
    }
}
