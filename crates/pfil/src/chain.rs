//! The hot path: links, chains specialized by length, and the runner that
//! walks a chain over a batch of packets.

use std::any::Any;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};

use crate::counters::{LinkCounters, RefusedCounters, Tally};
use crate::retire::Signal;
use crate::sync::{AtomicBool, AtomicU64, Mutex};
use crate::trace::{run_traced, Traced};
use crate::{witness, Ctx, Dir, Dirs, FailMode, Filter, Packet, PacketKind, Verdict};

/// A registered hook: a named filter, shared by every link that places it.
pub(crate) struct HookEntry {
    pub(crate) name: String,
    pub(crate) kind: PacketKind,
    pub(crate) dirs: Dirs,
    pub(crate) filter: Arc<dyn Filter>,
    /// `filter.batched()`, read once at registration.
    pub(crate) batched: bool,
    /// Panics caught from this hook over its lifetime, on any link.
    pub(crate) faults: AtomicU64,
    /// Signals to fire when the last reference goes (remove_hook tickets).
    /// Declared after `filter`: fields drop in order, so the filter is gone
    /// before anyone is told it is.
    pub(crate) on_drop: DropSignals,
}

/// Signals fired when dropped.
#[derive(Default)]
pub(crate) struct DropSignals(pub(crate) Mutex<Vec<Arc<Signal>>>);

impl Drop for DropSignals {
    fn drop(&mut self) {
        for s in self.0.get_mut().drain(..) {
            s.fire();
        }
    }
}

/// A hook placed on one head in one direction. Shared (by `Arc`) between
/// the generations that contain it, so its counters survive republishing.
pub(crate) struct Link {
    pub(crate) hook: Arc<HookEntry>,
    pub(crate) fail: FailMode,
    pub(crate) counters: Arc<LinkCounters>,
    /// Set once, by the first worker that catches a panic from this hook.
    pub(crate) quarantined: AtomicBool,
}

/// A link that faulted, waiting for a writer to unlink it.
pub(crate) struct Quarantined {
    pub(crate) head: String,
    pub(crate) dir: Dir,
    pub(crate) link: Weak<Link>,
}

/// The links a head runs for one direction, specialized at publish time.
pub(crate) enum Chain {
    /// Nothing linked: the runner returns at once.
    Empty,
    /// One link: a direct call, no loop over links.
    One(Arc<Link>),
    /// Several links, walked in order.
    Many(Box<[Arc<Link>]>),
    /// A chain with a packet trace attached (trace.rs): its own, cold,
    /// runner. A variant, not a flag: an untraced chain pays nothing.
    Traced(Box<Traced>),
}

impl Chain {
    pub(crate) fn from_links(links: &[Arc<Link>]) -> Chain {
        match links {
            [] => Chain::Empty,
            [one] => Chain::One(one.clone()),
            many => Chain::Many(many.into()),
        }
    }

    /// The links, in walk order.
    pub(crate) fn links(&self) -> &[Arc<Link>] {
        match self {
            Chain::Empty => &[],
            Chain::One(link) => std::slice::from_ref(link),
            Chain::Many(links) => links,
            Chain::Traced(t) => t.inner.links(),
        }
    }

    /// Run every link over the batch, in order. The first link refuses
    /// the packets of another kind than the head's, before any hook.
    #[inline]
    pub(crate) fn run(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>, env: &Env<'_>) {
        match self {
            Chain::Empty => {}
            Chain::One(link) => run_link::<true>(link, pkts, ctx, env),
            Chain::Many(links) => {
                if let Some((first, rest)) = links.split_first() {
                    run_link::<true>(first, pkts, ctx, env);
                    for link in rest {
                        run_link::<false>(link, pkts, ctx, env);
                    }
                }
            }
            Chain::Traced(t) => run_traced(t, pkts, ctx, env),
        }
    }
}

/// What a run needs from its head and registry besides the packets.
pub(crate) struct Env<'a> {
    /// The head's packet kind: packets of another kind are refused.
    pub(crate) kind: PacketKind,
    /// Where faulting links are queued for a writer to unlink.
    pub(crate) quarantine: &'a Mutex<Vec<Quarantined>>,
    /// Where refusals are counted (the worker's own slot).
    pub(crate) refused: &'a RefusedCounters,
    /// Time each link's run of this batch.
    pub(crate) sample: bool,
}

/// Drop what is still `Pass`; how many that was.
pub(crate) fn drop_passing<'a, 'p: 'a>(pkts: impl Iterator<Item = &'a mut Packet<'p>>) -> u64 {
    let mut n = 0;
    for p in pkts.filter(|p| p.verdict().is_pass()) {
        p.set_verdict(Verdict::Dropped);
        n += 1;
    }
    n
}

/// Packets built for another kind than the head carries: drop them (a hook
/// would parse an Ethernet frame as an IP packet, or the other way round).
/// Returns how many were refused. The cold paths' whole-batch check; the
/// per-packet path checks in its own loop.
#[cold]
#[inline(never)]
fn refuse_kind(pkts: &mut [Packet<'_>], kind: PacketKind) -> u64 {
    drop_passing(pkts.iter_mut().filter(|p| p.kind() != kind))
}

/// Count a link run's refusals (one batch), if any.
#[inline(always)]
fn count_refused(env: &Env<'_>, ctx: &Ctx<'_>, n: u64) {
    if n != 0 {
        env.refused.kind(ctx.worker, n);
    }
}

/// Run one link over the batch: only `Pass` packets are shown; one tally in
/// registers, one flush to this worker's counter slot.
///
/// `FIRST`: this is the chain's first link, which refuses the packets of
/// another kind than the head's before its hook sees them (in its
/// per-packet loop: one well-predicted compare per packet it looks at; on
/// the cold paths, a scan of the batch first). Not inlined: in its own
/// frame the loop keeps its state in registers (inlined into the chain
/// walk it spills more, measured with callgrind).
#[inline(never)]
pub(crate) fn run_link<const FIRST: bool>(
    link: &Arc<Link>,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    env: &Env<'_>,
) {
    if env.sample {
        return run_link_timed::<FIRST>(link, pkts, ctx, env);
    }
    run_link_body::<FIRST>(link, pkts, ctx, env)
}

/// [`run_link`] of a sampled batch: timed, with the packets it was given.
#[cold]
#[inline(never)]
fn run_link_timed<const FIRST: bool>(
    link: &Arc<Link>,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    env: &Env<'_>,
) {
    let given = pkts.iter().filter(|p| p.verdict().is_pass()).count() as u64;
    let t0 = std::time::Instant::now();
    run_link_body::<FIRST>(link, pkts, ctx, env);
    let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    link.counters.sample(ctx.worker, given, ns);
}

#[inline(always)]
fn run_link_body<const FIRST: bool>(
    link: &Arc<Link>,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    env: &Env<'_>,
) {
    let q = env.quarantine;
    if link.quarantined.load(Relaxed) {
        if FIRST {
            count_refused(env, ctx, refuse_kind(pkts, env.kind));
        }
        return quarantined(link, pkts, ctx);
    }
    let hook = &*link.hook;
    if hook.batched {
        let refused = run_batched::<FIRST>(link, pkts, ctx, env);
        if FIRST {
            count_refused(env, ctx, refused);
        }
        return;
    }
    let filter = &*hook.filter;
    // What the fault path needs across the (possibly unwinding) hook call:
    // the packet being filtered, and what the hook decided other than
    // `Pass` so far (updated only for such verdicts). The tally is lost on
    // a fault and rebuilt from these.
    let mut progress = Progress::default();
    let scope = witness::HookScope::enter();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // The first link compares each packet's kind with a constant: one
        // loop per kind, so no register is spent on the head's kind.
        match (FIRST, env.kind) {
            (false, _) => filter_each::<false, 0>(filter, pkts, ctx, &mut progress),
            (true, PacketKind::Ethernet) => filter_each::<true, { PacketKind::Ethernet as u8 }>(
                filter,
                pkts,
                ctx,
                &mut progress,
            ),
            (true, PacketKind::Ipv4) => {
                filter_each::<true, { PacketKind::Ipv4 as u8 }>(filter, pkts, ctx, &mut progress)
            }
            (true, PacketKind::Ipv6) => {
                filter_each::<true, { PacketKind::Ipv6 as u8 }>(filter, pkts, ctx, &mut progress)
            }
        }
    }));
    scope.exit(&hook.name);
    match outcome {
        Ok(tally) => link.counters.flush(ctx.worker, &tally),
        Err(payload) => {
            if FIRST {
                // The packets after the fault were not looked at yet.
                if let Some(rest) = pkts.get_mut(progress.at(pkts) + 1..) {
                    progress.refused += refuse_kind(rest, env.kind);
                }
            }
            fault(link, pkts, ctx, q, progress);
            drop_payload(payload);
        }
    }
    if FIRST {
        count_refused(env, ctx, progress.refused);
    }
}

/// Drop a caught panic's payload. A payload whose own `Drop` panics would
/// unwind into the datapath: that second panic is caught too and its
/// payload leaked.
#[cold]
#[inline(never)]
fn drop_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// A quarantined link until a writer unlinks it: fail-open links are
/// skipped; fail-closed links drop everything they are shown.
#[cold]
#[inline(never)]
fn quarantined(link: &Link, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
    if link.fail == FailMode::Closed {
        let mut t = Tally::default();
        for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
            p.set_verdict(Verdict::Dropped);
            t.record(Verdict::Dropped, p.len());
        }
        link.counters.flush(ctx.worker, &t);
    }
}

/// How far a per-packet hook got in a batch, for the fault path: the packet
/// it is looking at, and the packets it dropped or consumed (which the
/// fault path cannot tell from earlier hooks' by their verdicts). Packets
/// before `at` still `Pass` were shown and passed.
///
/// Never borrowed by anything but the loop (the fault path gets a copy), so
/// the compiler keeps its fields in registers and spills them only around
/// the hook call, as unwinding needs.
#[derive(Clone, Copy, Default)]
struct Progress {
    /// The address of the packet being filtered (an address, not an index:
    /// the loop then keeps no index; [`Progress::at`] turns it into one).
    cur: usize,
    dropped: u64,
    consumed: u64,
    /// Bytes of the dropped and consumed packets.
    bytes: u64,
    /// Packets refused for their kind (first link only).
    refused: u64,
}

/// The per-packet loop of one link; the first link (`FIRST`) also refuses
/// packets of another kind than `KIND` (a `PacketKind as u8`).
#[inline(always)]
fn filter_each<const FIRST: bool, const KIND: u8>(
    filter: &dyn Filter,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    progress: &mut Progress,
) -> Tally {
    // Per packet shown the loop counts bytes only: the packets shown are
    // the batch less those skipped (counted on the skip path), and the
    // verdicts other than `Pass` are in `progress` (the fault path needs
    // them there anyway), so the shown path keeps no packet counter or
    // index and the hook's operands stay in registers across the call.
    let mut bytes = 0u64;
    let mut skipped = 0u64;
    for p in pkts.iter_mut() {
        // The first link: still `Pass` and of the head's kind (a compare
        // with a constant); the others: still `Pass`.
        let shown = if FIRST {
            p.verdict().is_pass() && p.kind() as u8 == KIND
        } else {
            p.verdict().is_pass()
        };
        if !shown {
            if FIRST && p.verdict().is_pass() {
                // Of another kind: refused. Inline: an out-of-line call
                // taking `progress` would keep all of it in memory.
                p.set_verdict(Verdict::Dropped);
                progress.refused += 1;
            }
            skipped += 1;
            continue;
        }
        progress.cur = p as *const Packet<'_> as usize;
        let v = filter.filter(p, ctx);
        p.set_verdict(v);
        bytes += p.len() as u64;
        if !v.is_pass() {
            progress.record_slow(v, p.len());
        }
    }
    let shown = pkts.len() as u64 - skipped;
    Tally {
        packets: shown,
        shown,
        bytes,
        verdicts: [0, progress.dropped, progress.consumed],
        faults: 0,
    }
}

impl Progress {
    /// The index in `pkts` of the packet being filtered (0 if none was).
    fn at(&self, pkts: &[Packet<'_>]) -> usize {
        let base = pkts.as_ptr() as usize;
        self.cur.saturating_sub(base) / std::mem::size_of::<Packet<'_>>()
    }

    /// [`Progress::record`] out of line: the per-packet loop keeps one
    /// test of the verdict (inlined, the compiler makes a three-way branch
    /// of it on every packet).
    #[cold]
    #[inline(never)]
    fn record_slow(&mut self, v: Verdict, len: usize) {
        self.record(v, len)
    }

    #[inline(always)]
    fn record(&mut self, v: Verdict, len: usize) {
        match v {
            Verdict::Pass => return,
            Verdict::Dropped => self.dropped += 1,
            Verdict::Consumed => self.consumed += 1,
        }
        self.bytes += len as u64;
    }
}

/// A hook panicked on packet `at`: give it the link's fail verdict, count
/// the fault, quarantine the link (later packets of the batch skip it).
///
/// The batch's tally was in registers the unwind discarded; it is rebuilt
/// exactly: the packets before `at` that are still `Pass` were shown and
/// passed, `progress` holds the ones the hook dropped or consumed, and the
/// packet at `at` was shown and gets the fail verdict.
#[cold]
#[inline(never)]
fn fault(
    link: &Arc<Link>,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    q: &Mutex<Vec<Quarantined>>,
    progress: Progress,
) {
    let at = progress.at(pkts);
    let mut t = Tally::default();
    for p in pkts.iter().take(at) {
        if p.verdict().is_pass() {
            t.record(Verdict::Pass, p.len());
        }
    }
    t.packets += progress.dropped + progress.consumed;
    t.bytes += progress.bytes;
    t.verdicts[1] += progress.dropped;
    t.verdicts[2] += progress.consumed;
    if let Some(p) = pkts.get_mut(at) {
        let v = link.fail.verdict();
        p.set_verdict(v);
        t.record(v, p.len());
    }
    t.shown = t.packets;
    t.faults = 1;
    link.counters.flush(ctx.worker, &t);
    quarantine(link, ctx, q);
    // The rest of the batch meets the quarantined link as later batches do.
    if let Some(rest) = pkts.get_mut(at + 1..) {
        quarantined(link, rest, ctx);
    }
}

/// Packets per call of a batch hook: the verdict snapshot is an array on
/// the stack (written only as far as the chunk goes, see [`Prefix`]).
const CHUNK: usize = 256;

/// The batch-method path: the hook sets verdicts itself, in chunks of at
/// most [`CHUNK`] packets. The verdict contract is enforced: a final
/// verdict the hook changed is put back (and counted by
/// [`witness::violations`]), so a driver never recycles a frame a hook
/// consumed. Counts are exact per packet.
#[inline(never)]
fn run_batched<const FIRST: bool>(
    link: &Arc<Link>,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    env: &Env<'_>,
) -> u64 {
    let mut refused = 0;
    for chunk in pkts.chunks_mut(CHUNK) {
        if link.quarantined.load(Relaxed) {
            if FIRST {
                refused += refuse_kind(chunk, env.kind);
            }
            quarantined(link, chunk, ctx);
            continue;
        }
        // One pass before the call: the first link refuses packets of
        // another kind; every verdict is kept (a `Pass` one is shown to the
        // hook), and what is shown is counted and sized here (a hook
        // changes verdicts, never lengths).
        let (mut before_buf, mut ids_buf) = (MaybeUninit::uninit(), MaybeUninit::uninit());
        let mut before = Prefix::<Verdict>::new(&mut before_buf);
        // Which packet each index held: a hook given `&mut [Packet]` can
        // swap or replace them (safe Rust), and the driver maps verdicts
        // to frames by index.
        let mut ids = Prefix::<Identity>::new(&mut ids_buf);
        let mut t = Tally::default();
        for p in chunk.iter_mut() {
            if FIRST && p.kind() != env.kind && p.verdict().is_pass() {
                p.set_verdict(Verdict::Dropped);
                refused += 1;
            }
            ids.push(Identity::of(p));
            let b = p.verdict();
            before.push(b);
            if b.is_pass() {
                t.packets += 1;
                t.bytes += p.len() as u64;
            }
        }
        let (before, ids) = (before.into_slice(), ids.into_slice());
        let scope = witness::HookScope::enter();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            link.hook.filter.filter_batch(chunk, ctx)
        }));
        scope.exit(&link.hook.name);
        if chunk
            .iter()
            .zip(ids.iter())
            .any(|(p, id)| Identity::of(p) != *id)
        {
            put_back(chunk, ids, before, &link.hook.name);
        }
        if outcome.is_err() && link.fail == FailMode::Closed {
            // We cannot tell which packet the hook died on: drop all it was
            // shown.
            for (b, p) in before.iter().zip(chunk.iter_mut()) {
                if b.is_pass() && p.verdict().is_pass() {
                    p.set_verdict(Verdict::Dropped);
                }
            }
        }
        // One pass after: count the verdicts of what was shown, put back
        // any other verdict the hook changed.
        for (i, (&b, p)) in before.iter().zip(chunk.iter_mut()).enumerate() {
            let v = p.verdict();
            if b.is_pass() {
                t.verdicts[1] += u64::from(v == Verdict::Dropped);
                t.verdicts[2] += u64::from(v == Verdict::Consumed);
            } else if v != b {
                witness::broken_contract(&link.hook.name, i, b, v);
                p.set_verdict(b);
            }
        }
        t.shown = t.packets;
        t.faults = u64::from(outcome.is_err());
        link.counters.flush(ctx.worker, &t);
        if let Err(payload) = outcome {
            quarantine(link, ctx, env.quarantine);
            drop_payload(payload);
        }
    }
    refused
}

/// Up to [`CHUNK`] values written in order, left uninitialised beyond:
/// the per-call snapshot of a batch costs what its packets need (a batch
/// of 32 from a driver), not a 4 KiB clear of the whole array per call
/// (measured: 128 instructions a frame on a 32-frame batch).
/// (`N`: the array's length, [`CHUNK`] unless said; the trace's records
/// use it too.)
pub(crate) struct Prefix<'a, T: Copy, const N: usize = CHUNK> {
    // Borrowed, not owned: an owned buffer made in one struct with `len`
    // was cleared whole by LLVM (a memset of the array per call, seen in
    // the disassembly), an uninitialised local on its own is not.
    buf: &'a mut MaybeUninit<[T; N]>,
    len: usize,
}

impl<'a, T: Copy, const N: usize> Prefix<'a, T, N> {
    #[inline(always)]
    pub(crate) fn new(buf: &'a mut MaybeUninit<[T; N]>) -> Self {
        Prefix { buf, len: 0 }
    }

    /// Appends `v`; panics past `N` values (the caller pushes one per
    /// packet of a chunk of at most `N`).
    #[inline(always)]
    pub(crate) fn push(&mut self, v: T) {
        assert!(self.len < N, "Prefix::push past its length");
        // SAFETY: `len < N`, so the element is inside the array; it is
        // written, never read, before `len` counts it.
        unsafe { self.buf.as_mut_ptr().cast::<T>().add(self.len).write(v) };
        self.len += 1;
    }

    #[inline(always)]
    fn into_slice(self) -> &'a [T] {
        // SAFETY: `push` wrote the first `len <= N` elements, and an
        // array of `T` is laid out as `T`s in a row, so they read as `[T]`.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<T>(), self.len) }
    }

    /// The values pushed, mutable.
    #[inline(always)]
    pub(crate) fn into_mut_slice(self) -> &'a mut [T] {
        // SAFETY: as `into_slice`; `self` (and so the only other path to
        // `buf`) is consumed, so the slice is the one borrow of it.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().cast::<T>(), self.len) }
    }
}

/// What tells the packets of a batch apart: the address of the frame's
/// buffer (distinct for distinct frames, and the same whatever a hook does
/// to the frame's bounds: `adjust_head` moves the frame, not its buffer)
/// and the driver's cookie.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Identity {
    frame: usize,
    cookie: u64,
}

impl Identity {
    #[inline(always)]
    fn of(p: &Packet<'_>) -> Identity {
        Identity {
            frame: p.buffer_addr(),
            cookie: p.cookie(),
        }
    }
}

/// A batch hook moved packets to other indices (or replaced them): put each
/// back where the driver placed it, so verdicts land on the right frames.
/// A packet the hook replaced by one of its own cannot be put back: the
/// stranger at its index is dropped if the original was still `Pass` (its
/// final verdict otherwise, which the caller restores). Counted by
/// [`witness::violations`]. Cold: only a broken hook gets here; quadratic
/// in the chunk at worst (256 packets).
#[cold]
#[inline(never)]
fn put_back(chunk: &mut [Packet<'_>], ids: &[Identity], before: &[Verdict], hook: &str) {
    for (i, id) in ids.iter().enumerate().take(chunk.len()) {
        let now = chunk[i].verdict();
        if Identity::of(&chunk[i]) == *id {
            continue;
        }
        witness::broken_contract(hook, i, before[i], now);
        match (i + 1..chunk.len()).find(|&j| Identity::of(&chunk[j]) == *id) {
            Some(j) => chunk.swap(i, j),
            None if before[i].is_pass() => chunk[i].set_verdict(Verdict::Dropped),
            None => {}
        }
    }
}

/// Skip the link from now on and ask a writer to unlink it. Cold: runs once
/// per faulty link.
#[cold]
#[inline(never)]
fn quarantine(link: &Arc<Link>, ctx: &Ctx<'_>, q: &Mutex<Vec<Quarantined>>) {
    if link.quarantined.swap(true, Relaxed) {
        return;
    }
    link.hook.faults.fetch_add(1, Relaxed);
    tracing::error!(
        target: "pfil",
        head = ctx.head,
        dir = %ctx.dir,
        hook = %link.hook.name,
        fail = %link.fail,
        "hook panicked; link quarantined"
    );
    q.lock().push(Quarantined {
        head: ctx.head.to_owned(),
        dir: ctx.dir,
        link: Arc::downgrade(link),
    });
}
