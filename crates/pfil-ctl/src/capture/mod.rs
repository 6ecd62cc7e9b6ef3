//! Capture at a head, at any position of its chain, into pcapng.
//!
//! A [`Tap`] is a hook that never changes a verdict: linked at a head,
//! direction and position, it copies the frames that reach it (and match
//! its tcpdump expression, if any) into a bounded buffer per worker, up to
//! a snap length and a frame count. The buffers are lock-free queues of
//! records: the datapath takes a free record, fills it and queues it; a
//! writer (the control connection that asked for the capture) takes the
//! filled records, writes them as pcapng and gives them back. Records are
//! made by the writer, never on the datapath, as they are used: a worker's
//! buffer starts with up to [`FIRST_RECORDS`] and doubles when more than
//! half are in use, up to the records asked for, and all of a tap's
//! buffers together hold at most [`MAX_TAP_BYTES`] (all taps of the
//! process: [`MAX_ALL_TAPS_BYTES`]). When no record is free the copy is
//! dropped and counted; the frame itself goes on, so a capture never
//! blocks or loses traffic.
//!
//! The pcapng written: a section header, one interface description per
//! tap (`if_name` = head, direction and position, `if_tsresol` = ns,
//! `if_filter` = the expression), an enhanced packet block per frame (the
//! batch's capture time, the original length, `epb_queue` = the queue it
//! arrived on), and at the end an interface statistics block
//! (`isb_ifrecv` = frames the tap saw, `isb_filteraccept` = those matching,
//! `isb_osdrop` = copies dropped for a full buffer, `isb_usrdeliv` =
//! written).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use pfil::{Ctx, Filter, Packet, PacketKind, Verdict};
use pfil_filters::bpf::{Link, Program};

/// The largest snap length (frames of the dataplane's ports are at most
/// this long).
pub const MAX_SNAPLEN: usize = 9216;
/// Records per worker buffer unless told otherwise.
pub const DEFAULT_BUFFER: usize = 4096;
/// The fewest records per worker buffer (fewer asked for: this many).
pub const MIN_BUFFER: usize = 16;
/// The most records per worker buffer.
pub const MAX_BUFFER: usize = 1 << 20;
/// Records a worker's buffer starts with (or fewer, if fewer were asked
/// for: the default buffer is made whole when a worker first meets the
/// tap, so that a burst before the writer's first drain is not dropped);
/// a larger buffer doubles when more than half of it is in use.
pub const FIRST_RECORDS: usize = DEFAULT_BUFFER;
/// The bytes a record costs besides its snap length: its header and its
/// two queue slots.
pub const RECORD_OVERHEAD: usize = 64;
/// The most bytes the buffers of one tap (one capture) hold, over all
/// workers: 256 MiB. A capture whose one worker's buffer (`buffer` x
/// (`snaplen` + [`RECORD_OVERHEAD`])) would be larger is refused.
pub const MAX_TAP_BYTES: usize = 256 << 20;
/// The most bytes the buffers of all taps of the process hold together:
/// 1 GiB. Beyond it (many captures at once) buffers stop growing and
/// copies are dropped and counted.
pub const MAX_ALL_TAPS_BYTES: usize = 1 << 30;
/// The longest capture in seconds: a year.
pub const MAX_SECONDS: f64 = 365.0 * 86_400.0;

/// Bytes held by the buffers of every tap of the process.
static ALL_TAPS_BYTES: AtomicUsize = AtomicUsize::new(0);

/// One copied frame.
pub struct Record {
    ts_ns: u64,
    orig_len: u32,
    queue: u32,
    len: u32,
    data: Box<[u8]>,
}

/// One worker's buffer: queues for up to `records`, of which `made` exist.
struct Ring {
    free: ArrayQueue<Box<Record>>,
    full: ArrayQueue<Box<Record>>,
    made: AtomicUsize,
}

/// One worker's counters (written by that worker alone).
#[derive(Default)]
struct Counts {
    seen: AtomicU64,
    matched: AtomicU64,
    dropped: AtomicU64,
}

impl Ring {
    /// Queues for `records`, no record yet.
    fn new(records: usize) -> Ring {
        Ring {
            free: ArrayQueue::new(records),
            full: ArrayQueue::new(records),
            made: AtomicUsize::new(0),
        }
    }

    /// Make `n` more records of `snaplen` bytes (the writer's side).
    fn grow(&self, n: usize, snaplen: usize) {
        for _ in 0..n {
            let rec = Box::new(Record {
                ts_ns: 0,
                orig_len: 0,
                queue: 0,
                len: 0,
                data: vec![0u8; snaplen].into_boxed_slice(),
            });
            if self.free.push(rec).is_err() {
                break;
            }
            self.made.fetch_add(1, Relaxed);
        }
    }
}

/// A single writer's counter: a load and a store.
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed) + n, Relaxed);
}

/// The capture hook.
pub struct Tap {
    program: Option<Program>,
    expr: Option<String>,
    snaplen: usize,
    /// Frames still to copy (over all workers).
    left: pfil::Quota,
    /// Buffers of the workers, made on demand by the writer (a worker
    /// without one counts its frames as dropped and asks for one).
    rings: Box<[CachePadded<std::sync::OnceLock<Ring>>]>,
    wanted: Box<[AtomicBool]>,
    counts: Box<[CachePadded<Counts>]>,
    records: usize,
    /// Bytes this tap's buffers hold (also counted in [`ALL_TAPS_BYTES`]).
    bytes: AtomicUsize,
}

impl Drop for Tap {
    fn drop(&mut self) {
        ALL_TAPS_BYTES.fetch_sub(*self.bytes.get_mut(), Relaxed);
    }
}

/// What a tap saw, summed over workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames that reached the tap.
    pub seen: u64,
    /// Of those, the ones matching its expression (all without one).
    pub matched: u64,
    /// Matching frames not copied: no free record in the worker's buffer.
    pub dropped: u64,
}

impl Tap {
    /// A tap for a registry with `max_workers` worker slots; buffers of
    /// up to `records` frames (at least [`MIN_BUFFER`]) are begun at once
    /// for the workers `active`, and on demand (by [`Tap::drain`]) for the
    /// others, and grow as they are used (see the module's doc). `count`:
    /// frames to copy at most (0: no limit).
    ///
    /// # Errors
    /// libpcap's message for a bad expression, a snap length out of range,
    /// more than [`MAX_BUFFER`] records, or one worker's buffer over
    /// [`MAX_TAP_BYTES`]; each names the limit.
    pub fn new(
        expr: Option<&str>,
        snaplen: usize,
        count: u64,
        records: usize,
        max_workers: usize,
        active: &[usize],
    ) -> Result<Tap, String> {
        if !(1..=MAX_SNAPLEN).contains(&snaplen) {
            return Err(format!("snaplen: 1 to {MAX_SNAPLEN} bytes, not {snaplen}"));
        }
        if records > MAX_BUFFER {
            return Err(format!(
                "buffer: at most {MAX_BUFFER} records per worker, not {records}"
            ));
        }
        let records = records.max(MIN_BUFFER);
        let per_worker = records.saturating_mul(snaplen + RECORD_OVERHEAD);
        if per_worker > MAX_TAP_BYTES {
            return Err(format!(
                "buffer: {records} records of {snaplen} + {RECORD_OVERHEAD} bytes is {per_worker} bytes per worker, over the capture buffer cap of {MAX_TAP_BYTES} bytes (256 MiB, over all workers): ask for fewer records or a shorter snaplen"
            ));
        }
        let program = expr
            .map(|e| Program::compile(e, Link::Ethernet).map_err(|m| format!("expression: {m}")))
            .transpose()?;
        let tap = Tap {
            program,
            expr: expr.map(str::to_owned),
            snaplen,
            left: pfil::Quota::new(count),
            rings: (0..max_workers)
                .map(|_| CachePadded::new(std::sync::OnceLock::new()))
                .collect(),
            wanted: (0..max_workers).map(|_| AtomicBool::new(false)).collect(),
            counts: (0..max_workers)
                .map(|_| CachePadded::new(Counts::default()))
                .collect(),
            records,
            bytes: AtomicUsize::new(0),
        };
        for &w in active {
            tap.begin_ring(w);
        }
        Ok(tap)
    }

    /// Take `bytes` from this tap's budget and the process's; false (and
    /// nothing taken) when either would go over its cap.
    fn reserve(&self, bytes: usize) -> bool {
        let take = |a: &AtomicUsize, cap: usize| {
            a.fetch_update(Relaxed, Relaxed, |n| {
                n.checked_add(bytes).filter(|&t| t <= cap)
            })
            .is_ok()
        };
        if !take(&self.bytes, MAX_TAP_BYTES) {
            return false;
        }
        if !take(&ALL_TAPS_BYTES, MAX_ALL_TAPS_BYTES) {
            self.bytes.fetch_sub(bytes, Relaxed);
            return false;
        }
        true
    }

    /// Make worker `w`'s buffer, with its first records, if the budgets
    /// allow (the writer's side).
    fn begin_ring(&self, w: usize) {
        let Some(slot) = self.rings.get(w) else {
            return;
        };
        let first = self.records.min(FIRST_RECORDS);
        let queues = self.records * (RECORD_OVERHEAD / 2);
        let cost = queues + first * (self.snaplen + RECORD_OVERHEAD / 2);
        if slot.get().is_some() || !self.reserve(cost) {
            return;
        }
        let ring = Ring::new(self.records);
        ring.grow(first, self.snaplen);
        let _ = slot.set(ring);
    }

    /// Double `ring`'s records if more than half are in use, within the
    /// budgets (the writer's side).
    fn grow_ring(&self, ring: &Ring) {
        let made = ring.made.load(Relaxed);
        let in_use = made.saturating_sub(ring.free.len());
        if made >= self.records || in_use * 2 < made {
            return;
        }
        let n = made.max(1).min(self.records - made);
        if self.reserve(n * (self.snaplen + RECORD_OVERHEAD / 2)) {
            ring.grow(n, self.snaplen);
        }
    }

    /// The bytes its buffers hold (they only grow while it lives).
    pub fn buffer_bytes(&self) -> usize {
        self.bytes.load(Relaxed)
    }

    /// The expression, if any.
    pub fn expression(&self) -> Option<&str> {
        self.expr.as_deref()
    }

    /// The snap length.
    pub fn snaplen(&self) -> usize {
        self.snaplen
    }

    /// Has it copied as many frames as it was asked for?
    pub fn done(&self) -> bool {
        self.left.done()
    }

    /// Counters so far.
    pub fn stats(&self) -> TapStats {
        let mut s = TapStats::default();
        for c in self.counts.iter() {
            s.seen += c.seen.load(Relaxed);
            s.matched += c.matched.load(Relaxed);
            s.dropped += c.dropped.load(Relaxed);
        }
        s
    }

    /// The writer's side: make the buffers workers asked for, then hand
    /// every filled record to `f` (in each worker's order) and recycle it.
    pub fn drain(&self, mut f: impl FnMut(&Record)) {
        for (w, want) in self.wanted.iter().enumerate() {
            if want.swap(false, Relaxed) {
                self.begin_ring(w);
            }
        }
        for r in self.rings.iter().filter_map(|r| r.get()) {
            self.grow_ring(r);
            while let Some(rec) = r.full.pop() {
                f(&rec);
                let _ = r.free.push(rec);
            }
        }
    }

    /// Take up to `n` of the frames still to copy; how many were granted.
    fn take(&self, n: u64) -> u64 {
        self.left.take(n)
    }
}

impl Filter for Tap {
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        self.filter_batch(std::slice::from_mut(pkt), ctx);
        Verdict::Pass
    }

    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        let (Some(slot), Some(counts)) = (self.rings.get(ctx.worker), self.counts.get(ctx.worker))
        else {
            return;
        };
        // A worker the tap made no buffer for: counted, copies dropped,
        // a buffer asked for (the writer makes it at its next drain).
        let ring = slot.get();
        if ring.is_none() {
            if let Some(w) = self.wanted.get(ctx.worker) {
                w.store(true, Relaxed);
            }
        }
        let (mut seen, mut matched, mut dropped) = (0, 0, 0);
        let mut ts = None;
        // Chunks of up to CHUNK frames: the matching ones first, then the
        // frame budget taken for all of them at once (one compare-and-swap
        // per chunk on the tap's shared count, not one per frame).
        const CHUNK: usize = 64;
        for chunk in pkts.chunks(CHUNK) {
            let mut hits = [0u8; CHUNK];
            let mut n = 0;
            for (i, p) in chunk.iter().enumerate() {
                if !p.verdict().is_pass() {
                    continue;
                }
                seen += 1;
                let hit = match (&self.program, p.kind()) {
                    (None, _) => true,
                    (Some(prog), PacketKind::Ethernet) => prog.matches(p.frame()),
                    (Some(_), _) => false,
                };
                if hit {
                    hits[n] = i as u8;
                    n += 1;
                }
            }
            matched += n as u64;
            let granted = self.take(n as u64) as usize;
            for &i in &hits[..granted] {
                let p = &chunk[usize::from(i)];
                let Some(mut rec) = ring.and_then(|r| r.free.pop()) else {
                    dropped += 1;
                    continue;
                };
                let ts = *ts.get_or_insert_with(|| {
                    SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64)
                });
                let f = p.frame();
                let len = f.len().min(self.snaplen);
                rec.data[..len].copy_from_slice(&f[..len]);
                rec.len = len as u32;
                rec.orig_len = f.len() as u32;
                rec.queue = p.queue();
                rec.ts_ns = ts;
                if let Some(ring) = ring {
                    if let Err(rec) = ring.full.push(rec) {
                        // Cannot happen (as many full slots as records);
                        // keep the record in the pool all the same.
                        let _ = ring.free.push(rec);
                        dropped += 1;
                    }
                }
            }
        }
        bump(&counts.seen, seen);
        bump(&counts.matched, matched);
        if dropped > 0 {
            bump(&counts.dropped, dropped);
        }
    }

    fn batched(&self) -> bool {
        true
    }
}

/// Taps in use, to name them `capture:N`.
pub(crate) static NEXT_TAP: Mutex<u64> = Mutex::new(1);

/// Hooks that are captures: transient, never part of a configuration.
pub fn is_tap(hook: &str) -> bool {
    hook.starts_with("capture:")
}

mod pcapng;
pub(crate) mod session;

pub use pcapng::{pcapng_header, pcapng_packet, pcapng_stats};
pub(crate) use session::session;
