//! An ended request packed small for the reorder buffer (`records::stream`).
//!
//! A request that ends before an earlier one waits in the reorder buffer
//! until every earlier one has ended: on a 1,000-replica fleet at 16,000
//! requests/s with outputs of up to 4,096 tokens that is about a million
//! requests at once, and as whole `Request` records (~300 bytes, most of
//! them the fifteen latency components and the optional times) they were
//! the run's largest memory. Packed, the numbers are LEB128 variable-length
//! integers (as in DWARF or WebAssembly), each time as its difference from
//! the one before, in zigzag form so that a negative difference stays
//! short, and of the latency components only those that are not zero:
//! about 80 bytes with the record's own fields, against 272.
//! Packing is lossless — unpacking gives back the same record, field for
//! field — so every report folds exactly what it folded before. The prefix hashes are not kept (no report reads
//! them; `Simulation::release` already drops them).

use crate::attribution::{Attribution, N_COMPONENTS};
use crate::request::TransferRecord;
use crate::request::{RejectReason, Request, Status};
use crate::time::SimTime;

/// A packed ended request: its numbers as bytes, and the two fields that
/// are not numbers kept as they are.
#[derive(Debug)]
pub struct Packed {
    bytes: Box<[u8]>,
    status: Status,
    kv_transfer: Option<Box<TransferRecord>>,
}

// The nonzero components are marked in a `u16`.
const _: () = assert!(N_COMPONENTS <= 16);

/// Which optional times a record has (one bit each).
const FIRST_SCHEDULED: u8 = 1;
const FIRST_TOKEN: u8 = 2;
const FINISHED: u8 = 4;

impl Packed {
    /// Packs `r`, taking its KV transfer record (its prefix hashes are not
    /// kept); `buf` is scratch space. Packed in place: the 272-byte record
    /// is not copied on its way.
    pub fn pack(r: &mut Request, buf: &mut Vec<u8>) -> Packed {
        // Every field named, none skipped with `..`: a field added to
        // `Request` must be added here too, or this stops compiling.
        let &mut Request {
            arrival,
            prompt_tokens,
            output_tokens,
            replica,
            first_scheduled,
            first_token,
            last_token,
            finished,
            generated,
            preemptions,
            status,
            tenant,
            session,
            prefix_hashes: _,
            hash_block_tokens,
            pinnable_tokens,
            ref attribution,
            samples,
            ref mut kv_transfer,
            region,
        } = r;
        buf.clear();
        let a = arrival.0;
        put(buf, a);
        let flags = first_scheduled.map_or(0, |_| FIRST_SCHEDULED)
            | first_token.map_or(0, |_| FIRST_TOKEN)
            | finished.map_or(0, |_| FINISHED);
        buf.push(flags);
        // Each time as its difference from the one before it (they mostly
        // come in this order: a few bytes each).
        let mut prev = a;
        for t in [
            first_scheduled,
            first_token,
            Some(last_token),
            finished,
            Some(attribution.mark),
        ]
        .into_iter()
        .flatten()
        {
            put(buf, zigzag(t.0.wrapping_sub(prev)));
            prev = t.0;
        }
        for x in [
            prompt_tokens,
            output_tokens,
            // u32::MAX (never routed) wraps to 0 and stays one byte.
            replica.wrapping_add(1),
            generated,
            preemptions,
            tenant,
            hash_block_tokens,
            pinnable_tokens,
            samples,
        ] {
            put(buf, x as u64);
        }
        put(buf, session);
        put(buf, region as u64);
        // Most components of most requests are zero (a request meets few of
        // their causes): a bit per component says which follow, and the
        // zeros take neither bytes nor work on either side.
        // The bits are filled in once the components are written (one pass).
        let at = buf.len();
        buf.extend_from_slice(&[0, 0]);
        let mut nonzero = 0u16;
        for (i, &ns) in attribution.ns.iter().enumerate() {
            if ns != 0 {
                nonzero |= 1 << i;
                put(buf, ns);
            }
        }
        buf[at..at + 2].copy_from_slice(&nonzero.to_le_bytes());
        Packed {
            bytes: buf.as_slice().into(),
            status,
            kv_transfer: kv_transfer.take(),
        }
    }

    /// The request as it was packed (with no prefix hashes).
    pub fn unpack(self) -> Request {
        let mut b = Bytes(&self.bytes);
        let a = b.get();
        let flags = b.get_u8();
        let mut prev = a;
        let mut time = |b: &mut Bytes| {
            prev = prev.wrapping_add(unzigzag(b.get()));
            SimTime(prev)
        };
        let first_scheduled = (flags & FIRST_SCHEDULED != 0).then(|| time(&mut b));
        let first_token = (flags & FIRST_TOKEN != 0).then(|| time(&mut b));
        let last_token = time(&mut b);
        let finished = (flags & FINISHED != 0).then(|| time(&mut b));
        let mark = time(&mut b);
        let mut u32s = [0u32; 9];
        for x in &mut u32s {
            *x = b.get() as u32;
        }
        let [prompt_tokens, output_tokens, replica, generated, preemptions, tenant, hash_block_tokens, pinnable_tokens, samples] =
            u32s;
        let session = b.get();
        let region = b.get() as u16;
        let mut nonzero = u16::from_le_bytes([b.get_u8(), b.get_u8()]);
        let mut ns = [0u64; N_COMPONENTS];
        while nonzero != 0 {
            ns[nonzero.trailing_zeros() as usize] = b.get();
            nonzero &= nonzero - 1;
        }
        debug_assert!(b.0.is_empty());
        Request {
            arrival: SimTime(a),
            prompt_tokens,
            output_tokens,
            replica: replica.wrapping_sub(1),
            first_scheduled,
            first_token,
            last_token,
            finished,
            generated,
            preemptions,
            status: self.status,
            tenant,
            session,
            prefix_hashes: Vec::new(),
            hash_block_tokens,
            pinnable_tokens,
            attribution: Attribution { ns, mark },
            samples,
            kv_transfer: self.kv_transfer,
            region,
        }
    }

    /// Bytes held, the record's own fields included.
    pub fn size(&self) -> usize {
        std::mem::size_of::<Packed>() + self.bytes.len()
    }

    /// Whether [`Self::put_on_disk`] writes the row.
    pub fn goes_to_disk(&self) -> bool {
        self.kv_transfer.is_none()
    }

    /// Appends the row `id` as it goes to disk (`records::held_runs`): its
    /// id, its status code, the length of its bytes and the bytes. A row
    /// with a KV transfer record is not written (`false`): it stays in
    /// memory.
    pub fn put_on_disk(&self, id: u64, out: &mut Vec<u8>) -> bool {
        if !self.goes_to_disk() {
            return false;
        }
        out.extend_from_slice(&id.to_le_bytes());
        out.push(status_code(self.status));
        out.extend_from_slice(&(self.bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.bytes);
        true
    }

    /// The row [`Self::put_on_disk`] wrote, from its status code and bytes
    /// (`None`: no status has that code).
    pub fn from_disk(status: u8, bytes: &[u8]) -> Option<Packed> {
        Some(Packed {
            bytes: bytes.into(),
            status: status_of(status)?,
            kv_transfer: None,
        })
    }
}

/// Rejection reasons by code: each at its declaration's place (its
/// discriminant, checked below), so a status code is `16 + r as u8`.
const REASONS: [RejectReason; 11] = [
    RejectReason::ExceedsMaxModelLen,
    RejectReason::PromptExceedsTokenBudget,
    RejectReason::ExceedsKvCapacity,
    RejectReason::RateLimited,
    RejectReason::QueueFull,
    RejectReason::ConcurrencyLimit,
    RejectReason::Deadline,
    RejectReason::ServerBusy,
    RejectReason::ServerRefused,
    RejectReason::NoReadyReplica,
    RejectReason::ReplicaFailed,
];

const _: () = {
    let mut i = 0;
    while i < REASONS.len() {
        assert!(REASONS[i] as usize == i, "REASONS in declaration order");
        i += 1;
    }
};

/// A status as one byte: the four plain ones 0–3, a rejection 16 plus its
/// reason's discriminant. A reason added to `RejectReason` but not to
/// [`REASONS`] gets a code [`status_of`] refuses: its rows fail the run
/// with that code, never silently.
fn status_code(s: Status) -> u8 {
    match s {
        Status::InFlight => 0,
        Status::Completed => 1,
        Status::Cancelled => 2,
        Status::Failed => 3,
        Status::Rejected(r) => 16 + r as u8,
    }
}

/// The status [`status_code`] gave `c`.
fn status_of(c: u8) -> Option<Status> {
    Some(match c {
        0 => Status::InFlight,
        1 => Status::Completed,
        2 => Status::Cancelled,
        3 => Status::Failed,
        16.. => Status::Rejected(*REASONS.get(usize::from(c - 16))?),
        _ => return None,
    })
}

/// A signed difference (two's complement in a `u64`) mapped so that small
/// magnitudes of either sign are small (Protocol Buffers' zigzag encoding).
#[inline]
fn zigzag(x: u64) -> u64 {
    let s = x as i64;
    ((s << 1) ^ (s >> 63)) as u64
}

#[inline]
fn unzigzag(z: u64) -> u64 {
    ((z >> 1) as i64 ^ -((z & 1) as i64)) as u64
}

/// Appends `x` as an unsigned LEB128 integer (7 bits a byte, low first).
#[inline]
fn put(buf: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        buf.push(x as u8 | 0x80);
        x >>= 7;
    }
    buf.push(x as u8);
}

/// A reader of [`put`]'s integers.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    #[inline]
    fn get(&mut self) -> u64 {
        // Most fields fit in one byte (small counts, zero components).
        let first = self.0[0];
        if first < 0x80 {
            self.0 = &self.0[1..];
            return first as u64;
        }
        let mut x = 0u64;
        let mut shift = 0;
        loop {
            let b = self.0[0];
            self.0 = &self.0[1..];
            x |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return x;
            }
            shift += 7;
        }
    }

    fn get_u8(&mut self) -> u8 {
        let b = self.0[0];
        self.0 = &self.0[1..];
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RejectReason;
    use proptest::prelude::*;

    fn same(a: &Request, b: &Request) -> bool {
        // `Request` has no `PartialEq`; its debug form lists every field.
        format!("{a:?}") == format!("{b:?}")
    }

    proptest! {
        /// Any request, extreme values included, comes back field for field.
        #[test]
        fn unpack_gives_back_the_packed_request(
            times in proptest::array::uniform6(any::<u64>()),
            opt in 0u8..8,
            small in proptest::array::uniform9(any::<u32>()),
            session in any::<u64>(),
            region in any::<u16>(),
            ns in proptest::array::uniform15(any::<u64>()),
            near in any::<bool>(),
            status in 0u8..4,
            kv in any::<bool>(),
        ) {
            // Near: times shortly after the arrival and small components,
            // the common case; otherwise anything, wrapping included.
            let t = |i: usize| if near { times[0] % 1_000_000_000_000 + times[i] % 100_000_000_000 } else { times[i] };
            let mut r = Request::new(SimTime(t(0)), small[0], small[1]);
            r.replica = if small[2] % 3 == 0 { u32::MAX } else { small[2] };
            r.first_scheduled = (opt & 1 != 0).then(|| SimTime(t(1)));
            r.first_token = (opt & 2 != 0).then(|| SimTime(t(2)));
            r.last_token = SimTime(t(3));
            r.finished = (opt & 4 != 0).then(|| SimTime(t(4)));
            r.generated = small[3];
            r.preemptions = small[4];
            r.status = [Status::InFlight, Status::Completed, Status::Rejected(RejectReason::QueueFull), Status::Cancelled][status as usize];
            r.tenant = small[5];
            r.session = session;
            r.hash_block_tokens = small[6];
            r.pinnable_tokens = small[7];
            r.samples = small[8];
            r.region = region;
            // A quarter of the components zero (not written).
            r.attribution.ns = ns.map(|x| if x % 4 == 0 { 0 } else if near { x % 10_000_000_000 } else { x });
            r.attribution.mark = SimTime(t(5));
            if kv {
                r.kv_transfer = Some(Box::new(TransferRecord { prefill_replica: small[0], ..Default::default() }));
            }
            let want = format!("{r:?}");
            let p = Packed::pack(&mut r, &mut Vec::new());
            // On disk and back (`held_runs`), when it may go there.
            let mut disk = Vec::new();
            let id = session ^ u64::from(region);
            let p = if p.put_on_disk(id, &mut disk) {
                prop_assert!(!kv);
                prop_assert_eq!(&disk[..8], &id.to_le_bytes());
                prop_assert_eq!(disk.len(), 13 + p.bytes.len());
                Packed::from_disk(disk[8], &disk[13..]).expect("a status code")
            } else {
                prop_assert!(kv && disk.is_empty());
                p
            };
            prop_assert_eq!(format!("{:?}", p.unpack()), want);
        }
    }

    #[test]
    fn every_status_has_its_own_code() {
        let mut all = vec![
            Status::InFlight,
            Status::Completed,
            Status::Cancelled,
            Status::Failed,
        ];
        all.extend(REASONS.iter().map(|&r| Status::Rejected(r)));
        let codes: std::collections::BTreeSet<u8> = all.iter().map(|&s| status_code(s)).collect();
        assert_eq!(codes.len(), all.len());
        for s in all {
            assert_eq!(status_of(status_code(s)), Some(s));
        }
        assert_eq!(status_of(4), None);
        assert_eq!(status_of(16 + REASONS.len() as u8), None);
    }

    #[test]
    fn a_typical_completed_request_packs_small() {
        let mut r = Request::new(SimTime(91_000_000_000), 1_000, 250);
        r.replica = 731;
        r.first_scheduled = Some(SimTime(91_011_000_000));
        r.first_token = Some(SimTime(91_054_000_000));
        r.last_token = SimTime(95_141_000_000);
        r.finished = Some(r.last_token);
        r.generated = 250;
        r.status = Status::Completed;
        r.attribution.ns[0] = 11_000_000;
        r.attribution.ns[3] = 4_087_000_000;
        r.attribution.mark = r.last_token;
        r.prefix_hashes = vec![1, 2, 3];
        let p = Packed::pack(&mut r.clone(), &mut Vec::new());
        // 32 bytes of struct and 48 of numbers (59 when each zero
        // component took a byte), against 272 unpacked.
        assert!(p.bytes.len() <= 48, "{} bytes", p.bytes.len());
        assert!(p.size() <= 80, "{} bytes", p.size());
        r.prefix_hashes = Vec::new();
        assert!(same(&p.unpack(), &r));
    }
}
