//! Packet trace: for the packets matching an expression where they enter a
//! head, every link they visit, in order, with the verdict it gave and its
//! time, and the packet's final verdict (like `nft monitor trace` or VPP's
//! `trace add`).
//!
//! A [`Trace`] is attached to one head and direction with
//! [`Registry::trace`](crate::Registry::trace), which publishes a
//! generation whose chain for that direction is marked as traced; the
//! returned [`Tracing`] guard detaches it (another generation) when
//! stopped or dropped, a panic's unwinding included.
//!
//! # Cost
//! - **Off** (no trace on the chain): nothing. Whether a chain is traced is
//!   part of the generation the batch loaded already (a variant of the
//!   chain's specialization, matched where the runner matches 0, 1 or n
//!   links): no load, no check per packet.
//! - **On**: every packet still `Pass` at head entry is matched once
//!   against the trace's [`TraceMatch`] (in chunks of [`TRACE_CHUNK`]); a
//!   chunk where nothing matches runs as an untraced one. In a chunk with
//!   matches, a per-packet hook is called on the runs of untraced packets
//!   between the traced ones, and on each traced packet alone between two
//!   clock reads; a batch hook is called once on the chunk, timed as a
//!   whole. A record is a fixed-size value ([`TraceRecord`]) built on the
//!   stack and pushed, when the packet has left the chain, into the
//!   trace's bounded lock-free queue: no allocation, no lock. When the
//!   queue is full the record is dropped and counted
//!   ([`TraceStats::dropped`]); the packet never is.
//!
//! # Times
//! A hop of a per-packet hook ([`HopNote::Called`]) is the time of the call
//! on that packet alone. A hop of a batch hook ([`HopNote::Batch`]) is the
//! time of the whole `filter_batch` call on the chunk (up to
//! [`TRACE_CHUNK`] packets; [`Hop::batch`] says how many were shown to
//! it): it is not divided, divide by [`Hop::batch`] for a per-packet mean.
//! On a traced chain, cost sampling is off for the chunks with a match (so
//! that the split calls do not count as sampled batches).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;

use crate::chain::Link;
use crate::{Ctx, Dir, Headers, Packet, PacketKind, Verdict};

mod run;
pub(crate) use run::{run_traced, Traced};

/// Links a record keeps, in walk order; further links a packet visits are
/// counted in [`TraceRecord::more_hops`].
pub const MAX_HOPS: usize = 16;
/// Bytes of the frame a record keeps (its start).
pub const SUMMARY_BYTES: usize = 64;
/// Records a trace's queue holds unless told otherwise.
pub const DEFAULT_TRACE_BUFFER: usize = 1024;
/// The most records a trace's queue holds.
pub const MAX_TRACE_BUFFER: usize = 1 << 16;
/// Packets matched at a time: a traced chain runs its batches in chunks
/// of this many.
pub const TRACE_CHUNK: usize = 64;
/// Generations whose chains a trace remembers the hook names of.
const KEPT_CHAINS: usize = 64;

/// The match a trace applies to each packet entering the head: true to
/// trace it. Runs on the datapath: it must not block.
pub type TraceMatch = dyn Fn(&Packet<'_>) -> bool + Send + Sync;

/// Why a hop's verdict is what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HopNote {
    /// A per-packet hook was called on this packet; [`Hop::ns`] is that
    /// call's time.
    Called,
    /// A batch hook was called on a chunk with this packet; [`Hop::ns`] is
    /// the whole call's time, over [`Hop::batch`] packets.
    Batch,
    /// The link was quarantined (its hook panicked before): not called; a
    /// fail-open link passes the packet, a fail-closed one drops it.
    Quarantined,
    /// The hook panicked during this call: the packet got the link's fail
    /// verdict (a batch hook: every packet of the call), and the link is
    /// quarantined from now on.
    Fault,
    /// The packet's kind is not the head's: refused (dropped) at the first
    /// link, before its hook.
    RefusedKind,
}

impl HopNote {
    /// The note as a word: `called`, `batch`, `quarantined`, `fault`,
    /// `refused_kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            HopNote::Called => "called",
            HopNote::Batch => "batch",
            HopNote::Quarantined => "quarantined",
            HopNote::Fault => "fault",
            HopNote::RefusedKind => "refused_kind",
        }
    }
}

impl std::fmt::Display for HopNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One link a traced packet visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The link's position in the chain, in walk order (0: first); its
    /// hook's name is [`Trace::chain`] of the record's generation.
    pub index: u16,
    /// The packet's verdict after the link.
    pub verdict: Verdict,
    /// How the link came to it.
    pub note: HopNote,
    /// Nanoseconds (see [`HopNote::Called`] and [`HopNote::Batch`]; the
    /// check's time for the others), saturated at `u32::MAX`.
    pub ns: u32,
    /// Packets the call was shown (1 for a per-packet hook).
    pub batch: u16,
}

const NO_HOP: Hop = Hop {
    index: 0,
    verdict: Verdict::Pass,
    note: HopNote::Called,
    ns: 0,
    batch: 0,
};

/// One traced packet: where it entered, the links it visited and its final
/// verdict. A fixed-size value (no allocation to make one).
#[derive(Clone, Copy, Debug)]
pub struct TraceRecord {
    /// When the packet's chunk entered the head, ns since the Unix epoch.
    pub ts_ns: u64,
    /// The generation whose chain the packet ran.
    pub generation: u64,
    /// The worker slot that ran it.
    pub worker: usize,
    /// The direction.
    pub dir: Dir,
    /// The packet's kind.
    pub kind: PacketKind,
    /// The frame's length in bytes.
    pub len: usize,
    /// The interface index and queue the driver gave the packet.
    pub ifindex: u32,
    /// See `ifindex`.
    pub queue: u32,
    /// The parsed headers at entry (`None`: the frame does not parse as
    /// its kind).
    pub headers: Option<Headers>,
    /// The verdict the packet left the chain with.
    pub verdict: Verdict,
    /// Links visited beyond the [`MAX_HOPS`] kept.
    pub more_hops: u32,
    bytes: [u8; SUMMARY_BYTES],
    captured: u8,
    hops: [Hop; MAX_HOPS],
    nhops: u8,
}

impl TraceRecord {
    /// The links the packet visited, in order (at most [`MAX_HOPS`]).
    pub fn hops(&self) -> &[Hop] {
        &self.hops[..usize::from(self.nhops)]
    }

    /// The first bytes of the frame (at most [`SUMMARY_BYTES`]), as it
    /// entered the head.
    pub fn summary(&self) -> &[u8] {
        &self.bytes[..usize::from(self.captured)]
    }

    /// The hop that decided a verdict other than `Pass`, if any.
    pub fn decided_by(&self) -> Option<&Hop> {
        self.hops().iter().find(|h| !h.verdict.is_pass())
    }

    pub(crate) fn enter(p: &Packet<'_>, ctx: &Ctx<'_>, ts_ns: u64, generation: u64) -> TraceRecord {
        let f = p.frame();
        let n = f.len().min(SUMMARY_BYTES);
        let mut bytes = [0u8; SUMMARY_BYTES];
        bytes[..n].copy_from_slice(&f[..n]);
        TraceRecord {
            ts_ns,
            generation,
            worker: ctx.worker,
            dir: ctx.dir,
            kind: p.kind(),
            len: f.len(),
            ifindex: p.ifindex(),
            queue: p.queue(),
            headers: p.headers(),
            verdict: Verdict::Pass,
            more_hops: 0,
            bytes,
            captured: n as u8,
            hops: [NO_HOP; MAX_HOPS],
            nhops: 0,
        }
    }

    pub(crate) fn push(&mut self, hop: Hop) {
        match self.hops.get_mut(usize::from(self.nhops)) {
            Some(h) => {
                *h = hop;
                self.nhops += 1;
            }
            None => self.more_hops = self.more_hops.saturating_add(1),
        }
    }
}

/// A trace's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Packets traced (matched, within the count asked for).
    pub traced: u64,
    /// Of those, records dropped because the queue was full (the reader
    /// did not keep up). The packets went on.
    pub dropped: u64,
}

/// A packet trace: the match, the bounded queue of records, counters.
/// Attach it with [`Registry::trace`](crate::Registry::trace); read
/// records with [`Trace::pop`].
pub struct Trace {
    matcher: Option<Box<TraceMatch>>,
    /// Packets still to trace.
    left: CachePadded<crate::Quota>,
    pub(crate) traced: CachePadded<AtomicU64>,
    pub(crate) dropped: CachePadded<AtomicU64>,
    pub(crate) queue: ArrayQueue<TraceRecord>,
    /// Hook names of the traced chain, per generation, newest last.
    chains: Mutex<VecDeque<(u64, Arc<[String]>)>>,
}

impl Trace {
    /// A trace of the packets `matcher` says yes to (all, without one), at
    /// most `count` of them (0: no limit), with a queue of `buffer`
    /// records (clamped to 1..=[`MAX_TRACE_BUFFER`]).
    pub fn new(matcher: Option<Box<TraceMatch>>, count: u64, buffer: usize) -> Trace {
        Trace {
            matcher,
            left: CachePadded::new(crate::Quota::new(count)),
            traced: CachePadded::new(AtomicU64::new(0)),
            dropped: CachePadded::new(AtomicU64::new(0)),
            queue: ArrayQueue::new(buffer.clamp(1, MAX_TRACE_BUFFER)),
            chains: Mutex::new(VecDeque::new()),
        }
    }

    /// The oldest record not read yet.
    pub fn pop(&self) -> Option<TraceRecord> {
        self.queue.pop()
    }

    /// Has it traced as many packets as it was asked to?
    pub fn done(&self) -> bool {
        self.left.done()
    }

    /// Counters so far.
    pub fn stats(&self) -> TraceStats {
        TraceStats {
            traced: self.traced.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
        }
    }

    /// The hook names of the traced chain in `generation`, in walk order
    /// (what [`Hop::index`] indexes), if this trace saw that generation
    /// (the last 64 it saw are kept).
    pub fn chain(&self, generation: u64) -> Option<Arc<[String]>> {
        let chains = self.chains.lock().unwrap_or_else(|e| e.into_inner());
        chains
            .iter()
            .rev()
            .find(|(g, _)| *g == generation)
            .map(|(_, n)| n.clone())
    }

    /// The writer's side: `generation` runs a traced chain of these links.
    pub(crate) fn note_chain(&self, generation: u64, links: &[Arc<Link>]) {
        let names: Arc<[String]> = links.iter().map(|l| l.hook.name.clone()).collect();
        let mut chains = self.chains.lock().unwrap_or_else(|e| e.into_inner());
        if chains.len() == KEPT_CHAINS {
            chains.pop_front();
        }
        chains.push_back((generation, names));
    }

    #[inline]
    pub(crate) fn matches(&self, p: &Packet<'_>) -> bool {
        self.matcher.as_ref().is_none_or(|m| m(p))
    }

    /// Take up to `n` of the packets still to trace; how many were granted.
    pub(crate) fn take(&self, n: u64) -> u64 {
        self.left.take(n)
    }
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace")
            .field("matcher", &self.matcher.is_some())
            .field("left", &self.left.left())
            .field("stats", &self.stats())
            .finish()
    }
}

/// A trace attached to a head and direction: detached by
/// [`Tracing::stop`], or when dropped (a panic's unwinding included).
#[must_use = "dropping it detaches the trace"]
pub struct Tracing {
    pub(crate) reg: crate::Registry,
    pub(crate) head: String,
    pub(crate) dir: Dir,
    pub(crate) trace: Arc<Trace>,
    pub(crate) generation: u64,
    pub(crate) done: bool,
}

impl Tracing {
    /// The trace.
    pub fn trace(&self) -> &Arc<Trace> {
        &self.trace
    }

    /// The generation that attached it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Detach the trace. Once the ticket completes (the grace period), no
    /// worker runs it any more and every record it made is in its queue.
    ///
    /// # Errors
    /// What a writer call can fail with (e.g. [`Error::WriterInHook`](crate::Error::WriterInHook)
    /// under `witness`); a head unregistered since is not an error.
    pub fn stop(mut self) -> Result<crate::Retirement, crate::Error> {
        self.done = true;
        self.reg.untrace(&self.head, self.dir, &self.trace)
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        if !self.done {
            let r = self.reg.untrace(&self.head, self.dir, &self.trace);
            tracing::debug!(target: "pfil", head = %self.head, dir = %self.dir, detached = r.is_ok(), "trace dropped");
        }
    }
}

impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing")
            .field("head", &self.head)
            .field("dir", &self.dir)
            .field("generation", &self.generation)
            .finish()
    }
}

impl crate::Registry {
    /// Attach `trace` to `head` in `dir`: from the generation this
    /// publishes, the packets entering that chain are matched and the
    /// matching ones traced (see the [`trace`](crate::trace) module). The
    /// head runs in `dir` while traced even with nothing linked
    /// ([`Head::is_hooked`](crate::Head::is_hooked) is true), so a trace
    /// of an empty chain shows the packets passing.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`](crate::Error::NoSuchHead),
    /// [`Error::DirUnsupportedByHead`](crate::Error::DirUnsupportedByHead),
    /// [`Error::AlreadyTraced`](crate::Error::AlreadyTraced).
    pub fn trace(&self, head: &str, dir: Dir, trace: Arc<Trace>) -> Result<Tracing, crate::Error> {
        let t = trace.clone();
        let ((), generation, _) = self.change(|s| {
            let rec = s
                .heads
                .get_mut(head)
                .ok_or_else(|| crate::Error::NoSuchHead(head.to_owned()))?;
            if !rec.inner.dirs.contains(dir) {
                return Err(crate::Error::DirUnsupportedByHead {
                    head: head.to_owned(),
                    dir,
                });
            }
            let slot = &mut rec.traces[dir.index()];
            if slot.is_some() {
                return Err(crate::Error::AlreadyTraced {
                    head: head.to_owned(),
                    dir,
                });
            }
            *slot = Some(t);
            Ok(())
        })?;
        tracing::info!(target: "pfil", head, %dir, generation, "trace attached");
        Ok(Tracing {
            reg: self.clone(),
            head: head.to_owned(),
            dir,
            trace,
            generation,
            done: false,
        })
    }

    /// Detach `trace` from `head` in `dir` if it is attached there.
    pub(crate) fn untrace(
        &self,
        head: &str,
        dir: Dir,
        trace: &Arc<Trace>,
    ) -> Result<crate::Retirement, crate::Error> {
        let (_, generation, ticket) = self.change(|s| {
            if let Some(rec) = s.heads.get_mut(head) {
                let slot = &mut rec.traces[dir.index()];
                if slot.as_ref().is_some_and(|t| Arc::ptr_eq(t, trace)) {
                    *slot = None;
                }
            }
            Ok(())
        })?;
        tracing::info!(target: "pfil", head, %dir, generation, "trace detached");
        Ok(ticket)
    }
}
