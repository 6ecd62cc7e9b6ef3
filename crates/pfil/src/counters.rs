//! Per-link counters, written to per-worker slots and summed on read.
//!
//! Each worker owns one cache-line-padded slot per link and is its only
//! writer, so an update is a relaxed load and a relaxed store, never a
//! read-modify-write on a line another core writes. A slot is written once
//! per batch (a flush) inside a sequence count, a seqlock of one writer:
//! readers take each slot as a whole, never half a flush, so a sum taken
//! while traffic runs keeps the invariants of [`Counters`] (review L4).

use std::ops::{Add, AddAssign};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crossbeam_utils::CachePadded;

use crate::sync::{fence, yield_now, AtomicU64};
use crate::Verdict;

/// What a link was given and decided, summed over all workers.
///
/// Always `packets == passed + dropped + consumed` and `shown <= packets`,
/// also in a sum read while traffic runs (each worker's slot is read as of
/// one of its batches, never in the middle of one). The difference
/// `packets - shown` is what a quarantined fail-closed link dropped without
/// calling its hook.
///
/// More counters may come (the `sampled_*` ones did): build one with
/// `Counters::default()` and set fields, not with a struct literal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Counters {
    /// Packets that reached the link (still `Pass` at its turn) and got its
    /// verdict: from the hook, or from the link's [`FailMode`] when the hook
    /// panicked on it or had panicked before (a quarantined fail-closed link
    /// drops what reaches it; a quarantined fail-open link is skipped and
    /// counts nothing).
    ///
    /// [`FailMode`]: crate::FailMode
    pub packets: u64,
    /// Of `packets`, those the hook was called with: every packet a
    /// per-packet hook was asked about (the one it panicked on included),
    /// every `Pass` packet of a chunk given to a batch hook.
    pub shown: u64,
    /// Bytes of `packets`.
    pub bytes: u64,
    /// Of `packets`, those passed (by the hook, or fail-open on its panic).
    pub passed: u64,
    /// Of `packets`, those dropped: by the hook, or fail-closed after its
    /// panic. Exact in a batch where the hook panicked too, for per-packet
    /// and batch hooks alike.
    pub dropped: u64,
    /// Of `packets`, those the hook consumed.
    pub consumed: u64,
    /// Times the hook panicked (on this link: once per filter, as the link
    /// is quarantined; a [filter replacement](crate::Op::ReplaceFilter)
    /// keeps the counters and gives the link a fresh start).
    pub faults: u64,
    /// Batches whose run of this link was timed (one in
    /// [`Registry::sampling`](crate::Registry::sampling) per worker).
    pub sampled_batches: u64,
    /// Packets those timed runs were given (still `Pass` at the link).
    pub sampled_packets: u64,
    /// Nanoseconds those timed runs took, counters included.
    pub sampled_ns: u64,
}

impl Counters {
    /// Nanoseconds per packet of this link, from its timed batches
    /// (`None` before one was timed).
    pub fn ns_per_packet(&self) -> Option<f64> {
        (self.sampled_packets > 0).then(|| self.sampled_ns as f64 / self.sampled_packets as f64)
    }

    /// Nanoseconds per batch of this link, from its timed batches.
    pub fn ns_per_batch(&self) -> Option<f64> {
        (self.sampled_batches > 0).then(|| self.sampled_ns as f64 / self.sampled_batches as f64)
    }
}

impl Add for Counters {
    type Output = Counters;
    fn add(mut self, o: Counters) -> Counters {
        self += o;
        self
    }
}

impl AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.packets += o.packets;
        self.shown += o.shown;
        self.bytes += o.bytes;
        self.passed += o.passed;
        self.dropped += o.dropped;
        self.consumed += o.consumed;
        self.faults += o.faults;
        self.sampled_batches += o.sampled_batches;
        self.sampled_packets += o.sampled_packets;
        self.sampled_ns += o.sampled_ns;
    }
}

/// A tally kept in registers during one batch, flushed to a slot once.
#[derive(Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) packets: u64,
    /// Of `packets`, those the hook was called with.
    pub(crate) shown: u64,
    pub(crate) bytes: u64,
    pub(crate) verdicts: [u64; 3],
    pub(crate) faults: u64,
}

impl Tally {
    /// Count one packet and its verdict. Pass is the common case and is
    /// derived on flush, so the loop keeps four counters in registers and
    /// takes one well-predicted branch.
    #[inline(always)]
    pub(crate) fn record(&mut self, v: Verdict, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
        match v {
            Verdict::Pass => {}
            Verdict::Dropped => self.verdicts[1] += 1,
            Verdict::Consumed => self.verdicts[2] += 1,
        }
    }
}

#[derive(Default)]
struct Slot {
    /// Odd while the worker writes the slot: bumped before and after each
    /// flush or sample (a seqlock with one writer, the worker).
    seq: AtomicU64,
    packets: AtomicU64,
    shown: AtomicU64,
    bytes: AtomicU64,
    verdicts: [AtomicU64; 3],
    faults: AtomicU64,
    sampled_batches: AtomicU64,
    sampled_packets: AtomicU64,
    sampled_ns: AtomicU64,
}

/// One link's counters: a slot per worker.
pub(crate) struct LinkCounters {
    slots: Box<[CachePadded<Slot>]>,
}

/// Add `n` to a counter this thread alone writes: no RMW needed. Also
/// when `n` is 0: the slot's line is the worker's own and already written
/// (its sequence), so a store costs less than a test and branch per
/// counter (measured with callgrind: about 10 instructions a flush).
#[inline(always)]
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

impl Slot {
    /// Write the slot as one step for readers ([`read`](Self::read)).
    /// Only its worker calls this. On x86-64 the fences compile to nothing
    /// (stores are not reordered with stores): one load and two stores
    /// more per flush, per link and batch, none per packet.
    #[inline(always)]
    fn write(&self, f: impl FnOnce(&Slot)) {
        let v = self.seq.load(Relaxed);
        self.seq.store(v.wrapping_add(1), Relaxed);
        // The odd count is visible before any of the writes below.
        fence(Release);
        f(self);
        self.seq.store(v.wrapping_add(2), Release);
    }

    /// The slot as of the end of one of its writes. Retries while its
    /// worker is in the middle of one (a few instructions; yields after a
    /// while, in case the worker was preempted there).
    fn read(&self) -> Counters {
        let mut tries = 0u32;
        loop {
            let v = self.seq.load(Acquire);
            if v & 1 == 0 {
                let c = Counters {
                    packets: self.packets.load(Relaxed),
                    shown: self.shown.load(Relaxed),
                    bytes: self.bytes.load(Relaxed),
                    passed: self.verdicts[0].load(Relaxed),
                    dropped: self.verdicts[1].load(Relaxed),
                    consumed: self.verdicts[2].load(Relaxed),
                    faults: self.faults.load(Relaxed),
                    sampled_batches: self.sampled_batches.load(Relaxed),
                    sampled_packets: self.sampled_packets.load(Relaxed),
                    sampled_ns: self.sampled_ns.load(Relaxed),
                };
                // The loads above are done before the count is read again.
                fence(Acquire);
                if self.seq.load(Relaxed) == v {
                    return c;
                }
            }
            tries += 1;
            if tries < 64 && !cfg!(pfil_loom) {
                std::hint::spin_loop();
            } else {
                yield_now();
            }
        }
    }
}

impl LinkCounters {
    pub(crate) fn new(workers: usize) -> Self {
        LinkCounters {
            slots: (0..workers)
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
        }
    }

    /// Flush a batch tally into `worker`'s slot. The caller must be the only
    /// thread using that worker index (guaranteed by `&mut Worker`).
    #[inline]
    pub(crate) fn flush(&self, worker: usize, t: &Tally) {
        if let Some(s) = self.slots.get(worker) {
            s.write(|s| {
                bump(&s.packets, t.packets);
                bump(&s.shown, t.shown);
                bump(&s.bytes, t.bytes);
                bump(
                    &s.verdicts[0],
                    t.packets.saturating_sub(t.verdicts[1] + t.verdicts[2]),
                );
                bump(&s.verdicts[1], t.verdicts[1]);
                bump(&s.verdicts[2], t.verdicts[2]);
                bump(&s.faults, t.faults);
            });
        }
    }

    /// Record one timed run of the link in `worker`'s slot.
    #[cold]
    pub(crate) fn sample(&self, worker: usize, packets: u64, ns: u64) {
        if let Some(s) = self.slots.get(worker) {
            s.write(|s| {
                bump(&s.sampled_batches, 1);
                bump(&s.sampled_packets, packets);
                bump(&s.sampled_ns, ns);
            });
        }
    }

    pub(crate) fn sum(&self) -> Counters {
        self.slots
            .iter()
            .fold(Counters::default(), |acc, s| acc + s.read())
    }
}

/// Batches the datapath refused to run, and the packets it dropped for
/// them, summed over a registry's workers ([`Registry::refused`]).
///
/// A refusal never panics and never runs a hook: every refused packet that
/// was still `Pass` gets [`Verdict::Dropped`] (a misconfigured driver stops
/// traffic instead of letting it through unfiltered), and is counted here.
/// Refusals are counted in the registry of the [`Worker`] that ran the
/// batch, in that worker's own slot (one relaxed load and store, only on
/// the refusal path).
///
/// [`Registry::refused`]: crate::Registry::refused
/// [`Worker`]: crate::Worker
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Refused {
    /// Batches refused because the head, the worker or the snapshot running
    /// them belong to different registries (their slots would index another
    /// registry's chains and counters). No hook ran on them.
    pub foreign_batches: u64,
    /// Packets of those batches that were dropped (those still `Pass`).
    pub foreign_packets: u64,
    /// Batches holding at least one packet whose [`kind`](crate::Packet::kind)
    /// is not the head's. Only those packets are refused; the rest of the
    /// batch runs the chain.
    pub kind_batches: u64,
    /// Packets dropped because their kind was not the head's (a hook would
    /// have parsed them as something they are not).
    pub kind_packets: u64,
}

/// One worker's refusal counts. Written only by the worker that owns the
/// slot, like link counters.
#[derive(Default)]
pub(crate) struct RefusedSlot {
    foreign_batches: AtomicU64,
    foreign_packets: AtomicU64,
    kind_batches: AtomicU64,
    kind_packets: AtomicU64,
}

/// Every worker's refusal slot of one registry.
pub(crate) struct RefusedCounters {
    slots: Box<[CachePadded<RefusedSlot>]>,
}

impl RefusedCounters {
    pub(crate) fn new(workers: usize) -> Self {
        RefusedCounters {
            slots: (0..workers)
                .map(|_| CachePadded::new(RefusedSlot::default()))
                .collect(),
        }
    }

    /// Count a batch refused as foreign, in `worker`'s slot.
    #[cold]
    pub(crate) fn foreign(&self, worker: usize, packets: u64) {
        if let Some(s) = self.slots.get(worker) {
            bump(&s.foreign_batches, 1);
            bump(&s.foreign_packets, packets);
        }
    }

    /// Count packets refused for their kind, in `worker`'s slot.
    #[cold]
    pub(crate) fn kind(&self, worker: usize, packets: u64) {
        if let Some(s) = self.slots.get(worker) {
            bump(&s.kind_batches, 1);
            bump(&s.kind_packets, packets);
        }
    }

    pub(crate) fn sum(&self) -> Refused {
        self.slots.iter().fold(Refused::default(), |a, s| Refused {
            foreign_batches: a.foreign_batches + s.foreign_batches.load(Relaxed),
            foreign_packets: a.foreign_packets + s.foreign_packets.load(Relaxed),
            kind_batches: a.kind_batches + s.kind_batches.load(Relaxed),
            kind_packets: a.kind_packets + s.kind_packets.load(Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs::limitations` says a link keeps one 128-byte slot per worker on
    /// x86-64 (crossbeam's `CachePadded` pads to 128 there: the adjacent-line
    /// prefetcher pulls cache lines in pairs).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn counter_slots_are_128_bytes_on_x86_64() {
        assert_eq!(std::mem::size_of::<CachePadded<Slot>>(), 128);
        assert_eq!(std::mem::size_of::<CachePadded<RefusedSlot>>(), 128);
    }
}
