//! Per-link counters, written to per-worker slots and summed on read.
//!
//! Each worker owns one cache-line-padded slot per link and is its only
//! writer, so an update is a relaxed load and a relaxed store, never a
//! read-modify-write on a line another core writes. Readers sum the slots;
//! a sum taken while traffic runs is a consistent lower bound per field.

use std::ops::{Add, AddAssign};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use crate::Verdict;

/// What a link saw and decided, summed over all workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets shown to the hook.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Packets the hook passed.
    pub passed: u64,
    /// Packets the hook dropped (including fail-closed faults).
    pub dropped: u64,
    /// Packets the hook consumed.
    pub consumed: u64,
    /// Times the hook panicked.
    pub faults: u64,
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
        self.bytes += o.bytes;
        self.passed += o.passed;
        self.dropped += o.dropped;
        self.consumed += o.consumed;
        self.faults += o.faults;
    }
}

/// A tally kept in registers during one batch, flushed to a slot once.
#[derive(Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) packets: u64,
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
    packets: AtomicU64,
    bytes: AtomicU64,
    verdicts: [AtomicU64; 3],
    faults: AtomicU64,
}

/// One link's counters: a slot per worker.
pub(crate) struct LinkCounters {
    slots: Box<[CachePadded<Slot>]>,
}

/// Add `n` to a counter this thread alone writes: no RMW needed.
#[inline(always)]
fn bump(a: &AtomicU64, n: u64) {
    if n != 0 {
        a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
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
            bump(&s.packets, t.packets);
            bump(&s.bytes, t.bytes);
            bump(
                &s.verdicts[0],
                t.packets.saturating_sub(t.verdicts[1] + t.verdicts[2]),
            );
            bump(&s.verdicts[1], t.verdicts[1]);
            bump(&s.verdicts[2], t.verdicts[2]);
            bump(&s.faults, t.faults);
        }
    }

    pub(crate) fn sum(&self) -> Counters {
        self.slots.iter().fold(Counters::default(), |acc, s| {
            acc + Counters {
                packets: s.packets.load(Relaxed),
                bytes: s.bytes.load(Relaxed),
                passed: s.verdicts[0].load(Relaxed),
                dropped: s.verdicts[1].load(Relaxed),
                consumed: s.verdicts[2].load(Relaxed),
                faults: s.faults.load(Relaxed),
            }
        })
    }
}
