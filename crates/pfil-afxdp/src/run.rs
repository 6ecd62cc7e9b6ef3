//! Worker loops: sink, forward and generate on AF_XDP ports, one thread per
//! queue, heads run inline (one epoch pin per batch, no hand-off).
//!
//! The low-level loops ([`sink_loop`], [`forward_loop`], [`gen_loop`]) run
//! on the calling thread over a [`Umem`] it opened. The spawners
//! ([`spawn_sink`], [`spawn_forward`], [`spawn_gen`]) open the ports
//! (optionally inside a network namespace), start one worker thread per
//! queue, wait until every worker is ready or one failed, and return a
//! [`Running`] handle: what a `pfild` CLI needs. By default
//! ([`UmemMode::Shared`]) the queues' workers share one UMEM area, set up
//! on one thread and split into a disjoint frame range per worker.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrayvec::ArrayVec;
use pfil::{Dir, Dirs, Head, Packet, PacketKind, Registry, Verdict, Worker};

use crate::error::{Error, Result};
use crate::outbox::{Outboxes, Request};
use crate::sys::XdpStats;
use crate::umem::{
    BoundMode, Frame, FrameCounts, PortConfig, PortId, SharedUmem, Umem, UmemConfig,
};
use crate::xdp::{enter_netns, queue_count, XdpMode, XdpProgram};

pub use crate::umem::BATCH;

/// Kicks [`Umem::flush`] may take when a loop stops.
const FLUSH_KICKS: u32 = 20_000;

/// Counters of one worker, updated once per batch, readable live.
#[derive(Debug, Default)]
pub struct Stats {
    /// Frames read from RX rings.
    pub rx: AtomicU64,
    /// Frames built by a generator.
    pub generated: AtomicU64,
    /// Frames dropped by the in head.
    pub in_dropped: AtomicU64,
    /// Frames consumed by the in head.
    pub in_consumed: AtomicU64,
    /// Frames dropped by the out head.
    pub out_dropped: AtomicU64,
    /// Frames consumed by the out head.
    pub out_consumed: AtomicU64,
    /// Frames that passed every head and were delivered (sink) or put on a
    /// TX ring (forward, gen).
    pub passed: AtomicU64,
    /// Frames put on a TX ring.
    pub tx: AtomicU64,
    /// Frames that passed but could not be queued for TX (ring full after
    /// bounded retries) and were recycled.
    pub tx_dropped: AtomicU64,
    /// Batches processed.
    pub batches: AtomicU64,
    /// Consumed frames given back to the pool because more than
    /// `LoopConfig::held_limit` were held (their cookies went stale).
    pub held_evicted: AtomicU64,
    /// Consumed frames a hook released through the outbox.
    pub released: AtomicU64,
    /// Consumed frames a hook had sent through the outbox.
    pub reinjected: AtomicU64,
    /// Outbox requests for a cookie that was not held (nothing changed).
    pub stale: AtomicU64,
    /// Outbox transmits to an interface the worker has no port on (the
    /// frame was released).
    pub refused: AtomicU64,
}

/// A plain copy of [`Stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// See [`Stats::rx`].
    pub rx: u64,
    /// See [`Stats::generated`].
    pub generated: u64,
    /// See [`Stats::in_dropped`].
    pub in_dropped: u64,
    /// See [`Stats::in_consumed`].
    pub in_consumed: u64,
    /// See [`Stats::out_dropped`].
    pub out_dropped: u64,
    /// See [`Stats::out_consumed`].
    pub out_consumed: u64,
    /// See [`Stats::passed`].
    pub passed: u64,
    /// See [`Stats::tx`].
    pub tx: u64,
    /// See [`Stats::tx_dropped`].
    pub tx_dropped: u64,
    /// See [`Stats::batches`].
    pub batches: u64,
    /// See [`Stats::held_evicted`].
    pub held_evicted: u64,
    /// See [`Stats::released`].
    pub released: u64,
    /// See [`Stats::reinjected`].
    pub reinjected: u64,
    /// See [`Stats::stale`].
    pub stale: u64,
    /// See [`Stats::refused`].
    pub refused: u64,
}

impl StatsSnapshot {
    /// Frames a filter dropped or consumed, in and out.
    pub fn filtered(&self) -> u64 {
        self.in_dropped + self.in_consumed + self.out_dropped + self.out_consumed
    }
}

impl std::ops::Add for StatsSnapshot {
    type Output = StatsSnapshot;
    fn add(self, o: StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            rx: self.rx + o.rx,
            generated: self.generated + o.generated,
            in_dropped: self.in_dropped + o.in_dropped,
            in_consumed: self.in_consumed + o.in_consumed,
            out_dropped: self.out_dropped + o.out_dropped,
            out_consumed: self.out_consumed + o.out_consumed,
            passed: self.passed + o.passed,
            tx: self.tx + o.tx,
            tx_dropped: self.tx_dropped + o.tx_dropped,
            batches: self.batches + o.batches,
            held_evicted: self.held_evicted + o.held_evicted,
            released: self.released + o.released,
            reinjected: self.reinjected + o.reinjected,
            stale: self.stale + o.stale,
            refused: self.refused + o.refused,
        }
    }
}

impl Stats {
    /// Read every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            rx: l(&self.rx),
            generated: l(&self.generated),
            in_dropped: l(&self.in_dropped),
            in_consumed: l(&self.in_consumed),
            out_dropped: l(&self.out_dropped),
            out_consumed: l(&self.out_consumed),
            passed: l(&self.passed),
            tx: l(&self.tx),
            tx_dropped: l(&self.tx_dropped),
            batches: l(&self.batches),
            held_evicted: l(&self.held_evicted),
            released: l(&self.released),
            reinjected: l(&self.reinjected),
            stale: l(&self.stale),
            refused: l(&self.refused),
        }
    }

    #[inline]
    fn add(a: &AtomicU64, n: u64) {
        if n != 0 {
            // Single writer (the worker); a relaxed RMW once per batch on
            // the worker's own counters.
            a.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Default [`LoopConfig::held_limit`].
pub const DEFAULT_HELD_LIMIT: usize = 256;

/// What every loop needs besides its ports.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    /// Set to stop the loop; it then flushes its TX rings and returns.
    pub stop: Arc<AtomicBool>,
    /// Frames a worker keeps held for hooks that returned `Consumed`
    /// until they give them back through the outbox ([`crate::Outbox`]);
    /// beyond this the oldest go back to the pool, counted as
    /// [`Stats::held_evicted`]. The spawners reserve this many frames of
    /// every worker's UMEM. 0: a consumed frame goes back after its batch
    /// (for hooks that copy what they keep).
    pub held_limit: usize,
    /// The outboxes hooks give consumed frames back through, indexed by
    /// worker index; `None`: no hook gives frames back (they stay held
    /// until evicted).
    pub outboxes: Option<Arc<Outboxes>>,
    /// A generator that has made no progress (no frame free, no completion,
    /// no window credit) for this long stops with [`Error::Stalled`]
    /// instead of waiting forever, in milliseconds.
    pub stall_ms: u64,
    /// How long an idle loop sleeps in poll(2), in milliseconds.
    pub idle_poll_ms: i32,
    /// How long a receiving loop keeps busy-polling its RX rings after
    /// the last frame before it sleeps in poll(2), in microseconds. 0
    /// sleeps as soon as a ring is empty, which costs a wakeup (an IPI,
    /// expensive in a VM) per burst and lets the fill ring run dry at
    /// high rates; a dedicated dataplane core spins.
    pub spin_us: u32,
    /// While spinning, pause instructions between two looks at an empty
    /// RX ring, and in `forward_loop` after a batch under `BATCH / 2`
    /// (1024 ≈ 10 µs on the benchmark machine). Each look pulls the cache
    /// line the kernel's RX producer writes, and the kernel,
    /// which for veth runs on the *sending* CPU, pays to take it back:
    /// looking less often batches the frames (avg batch 1 → 10) and raised
    /// the veth generator + sink rate from 1.45 to 1.85 Mpps. Adds at most
    /// that much latency to the first frame of a burst.
    pub spin_pauses: u32,
}

impl LoopConfig {
    /// A config with a fresh stop flag.
    pub fn new() -> LoopConfig {
        LoopConfig {
            stop: Arc::new(AtomicBool::new(false)),
            held_limit: DEFAULT_HELD_LIMIT,
            outboxes: None,
            stall_ms: 5_000,
            idle_poll_ms: 1,
            spin_us: 0,
            spin_pauses: 1024,
        }
    }
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig::new()
    }
}

/// Busy-poll for `LoopConfig::spin_us` after the last frame, then sleep.
struct Idle {
    spin: Duration,
    pauses: u32,
    since: Option<Instant>,
    polls: u32,
}

impl Idle {
    fn new(lc: &LoopConfig) -> Idle {
        Idle {
            spin: Duration::from_micros(u64::from(lc.spin_us)),
            pauses: lc.spin_pauses,
            since: None,
            polls: 0,
        }
    }

    /// Frames arrived: the next empty ring starts a new spin.
    #[inline]
    fn busy(&mut self) {
        self.since = None;
    }

    /// Pause between looks at the ring (when spinning): each look pulls
    /// the line the kernel's producer writes, and the kernel pays to take
    /// it back.
    #[inline]
    fn pause(&self) {
        if self.spin.is_zero() {
            return;
        }
        for _ in 0..self.pauses {
            std::hint::spin_loop();
        }
    }

    /// The rings were empty: `true` when it is time to sleep in poll(2).
    #[inline]
    fn sleep(&mut self) -> bool {
        if self.spin.is_zero() {
            return true;
        }
        // Read the clock every 64th empty poll only: a clock_gettime per
        // spin was 8% of a spinning core.
        self.polls = self.polls.wrapping_add(1);
        self.pause();
        if self.since.is_some() && self.polls % 64 != 0 {
            return false;
        }
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) < self.spin {
            std::hint::spin_loop();
            return false;
        }
        true
    }
}

/// The verdicts of a batch after the in head (and the out head).
struct Verdicts {
    v: [Verdict; BATCH],
    /// The cookies' epoch (see [`Umem::next_cookie_epoch`]).
    epoch: u64,
    in_dropped: u64,
    in_consumed: u64,
    out_dropped: u64,
    out_consumed: u64,
}

/// Run `head_in` (In) and then `head_out` (Out) over the frames in one
/// pinned generation.
fn run_heads(
    umem: &mut Umem,
    frames: &mut ArrayVec<Frame, BATCH>,
    origin: (u32, u32),
    heads: (Option<&Head>, Option<&Head>),
    reg: &Registry,
    worker: &mut Worker,
) -> Verdicts {
    let mut out = Verdicts {
        v: [Verdict::Pass; BATCH],
        epoch: 0,
        in_dropped: 0,
        in_consumed: 0,
        out_dropped: 0,
        out_consumed: 0,
    };
    let hin = heads.0.filter(|h| h.is_hooked(Dir::In));
    let hout = heads.1.filter(|h| h.is_hooked(Dir::Out));
    if hin.is_none() && hout.is_none() {
        return out;
    }
    out.epoch = umem.next_cookie_epoch();
    let area = umem.area();
    let mut pkts: ArrayVec<Packet<'_>, BATCH> = frames
        .iter_mut()
        .map(|f| {
            let cookie = out.epoch | f.addr();
            Packet::new(area.bytes(f))
                .with_origin(origin.0, origin.1)
                .with_cookie(cookie)
        })
        .collect();
    let count = |pkts: &[Packet<'_>], v: Verdict| pkts.iter().filter(|p| p.verdict() == v).count();
    let snap = reg.snapshot();
    if let Some(h) = hin {
        snap.run(h, Dir::In, worker, &mut pkts);
        out.in_dropped = count(&pkts, Verdict::Dropped) as u64;
        out.in_consumed = count(&pkts, Verdict::Consumed) as u64;
    }
    if let Some(h) = hout {
        snap.run(h, Dir::Out, worker, &mut pkts);
        // A packet the in head stopped is not shown to the out head, so
        // the totals only grow; saturate anyway (a hook cannot make the
        // datapath panic).
        out.out_dropped = (count(&pkts, Verdict::Dropped) as u64).saturating_sub(out.in_dropped);
        out.out_consumed = (count(&pkts, Verdict::Consumed) as u64).saturating_sub(out.in_consumed);
    }
    for (slot, p) in out.v.iter_mut().zip(&pkts) {
        *slot = p.verdict();
    }
    out
}

/// Give a frame of this UMEM back to the pool. Every frame a loop holds
/// came from its own UMEM (`rx_batch`, `alloc`, `take_held*`), so this
/// cannot fail; a foreign frame would be a bug, caught in debug builds.
#[inline]
fn put_back(umem: &mut Umem, f: Frame) {
    let r = umem.recycle(f);
    debug_assert!(r.is_ok(), "a loop held a foreign frame");
}

/// Hand out the frames of a batch by verdict: `Pass` into `pass` (or
/// recycled when `pass` is `None`), `Dropped` recycled, `Consumed` held
/// under its cookie (see [`settle`]). Never fails: every frame of the
/// batch ends in one place.
fn dispose(
    umem: &mut Umem,
    frames: &mut ArrayVec<Frame, BATCH>,
    v: &Verdicts,
    mut pass: Option<&mut ArrayVec<Frame, BATCH>>,
) -> u64 {
    let mut passed = 0;
    for (f, verdict) in frames.drain(..).zip(v.v.iter()) {
        match verdict {
            Verdict::Pass => {
                passed += 1;
                match pass.as_deref_mut() {
                    Some(p) => p.push(f),
                    None => put_back(umem, f),
                }
            }
            Verdict::Dropped => put_back(umem, f),
            Verdict::Consumed => {
                let cookie = v.epoch | f.addr();
                let r = umem.hold(f, cookie);
                debug_assert!(r.is_ok(), "a loop held a foreign frame");
            }
        }
    }
    passed
}

/// After a batch: serve up to [`BATCH`] requests of this worker's outbox
/// (release held frames, or send them on the port of the interface asked
/// for), then give the oldest held frames beyond `lc.held_limit` back to
/// the pool. Requests a hook made inside the batch are served before the
/// bound applies.
fn settle(
    umem: &mut Umem,
    lc: &LoopConfig,
    worker: &Worker,
    staging: &mut ArrayVec<Frame, BATCH>,
    st: &Stats,
) -> Result<()> {
    let served = serve_outbox(umem, lc, worker, staging, st);
    if umem.held() > lc.held_limit {
        Stats::add(&st.held_evicted, umem.evict_held(lc.held_limit) as u64);
    }
    served
}

fn serve_outbox(
    umem: &mut Umem,
    lc: &LoopConfig,
    worker: &Worker,
    staging: &mut ArrayVec<Frame, BATCH>,
    st: &Stats,
) -> Result<()> {
    let Some(ob) = lc.outboxes.as_ref().and_then(|o| o.get(worker.index())) else {
        return Ok(());
    };
    if ob.is_empty() {
        return Ok(());
    }
    // Transmits are staged and sent a batch at a time per port.
    let mut staged: Option<PortId> = None;
    let flush = |umem: &mut Umem, staging: &mut ArrayVec<Frame, BATCH>, to: Option<PortId>| {
        let Some(p) = to else { return Ok(()) };
        let n = staging.len() as u64;
        let dropped = send_all(umem, p, staging)?;
        Stats::add(&st.reinjected, n - dropped);
        Stats::add(&st.tx_dropped, dropped);
        Ok::<(), Error>(())
    };
    for _ in 0..BATCH {
        let Some(req) = ob.pop() else { break };
        let (cookie, to) = match req {
            Request::Release { cookie } => (cookie, None),
            Request::Transmit { cookie, ifindex } => (cookie, Some(ifindex)),
        };
        let Some(f) = umem.take_held_cookie(cookie) else {
            Stats::add(&st.stale, 1);
            continue;
        };
        let port = to.and_then(|ifx| umem.port_ids().find(|&p| umem.ifindex(p) == ifx));
        match (to, port) {
            (None, _) => {
                put_back(umem, f);
                Stats::add(&st.released, 1);
            }
            (Some(_), None) => {
                put_back(umem, f);
                Stats::add(&st.refused, 1);
            }
            (Some(_), Some(p)) => {
                if staged.is_some_and(|q| q != p) || staging.is_full() {
                    flush(umem, staging, staged)?;
                }
                staged = Some(p);
                if let Err(full) = staging.try_push(f) {
                    put_back(umem, full.element());
                    Stats::add(&st.tx_dropped, 1);
                }
            }
        }
    }
    flush(umem, staging, staged)
}

/// Put `frames` on `port`'s TX ring, kicking (bounded) while it is full;
/// what still does not fit is recycled and returned as the count dropped.
///
/// # Errors
/// A failed kick; the frames not yet queued stay in `frames` (the loop's
/// exit path gives them back).
fn send_all(umem: &mut Umem, port: PortId, frames: &mut ArrayVec<Frame, BATCH>) -> Result<u64> {
    let mut tries = 0;
    while !frames.is_empty() {
        umem.tx(port, frames)?;
        if frames.is_empty() {
            break;
        }
        tries += 1;
        if tries > 1000 {
            let n = frames.len() as u64;
            for f in frames.drain(..) {
                put_back(umem, f);
            }
            return Ok(n);
        }
        umem.kick_tx(port, 8)?;
        if tries % 16 == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    Ok(0)
}

/// The one exit path of every loop, whatever `body` returned: the frames
/// still in the loop's batches go back to the pool, the TX rings are
/// flushed and completions reaped, so the UMEM's counts add up with
/// nothing left in the application. Returns `body`'s error first.
fn finish(umem: &mut Umem, batches: &mut [ArrayVec<Frame, BATCH>], body: Result<()>) -> Result<()> {
    for b in batches.iter_mut() {
        for f in b.drain(..) {
            put_back(umem, f);
        }
    }
    let ids: Vec<PortId> = umem.port_ids().collect();
    let mut flushed = Ok(());
    for p in ids {
        if let Err(e) = umem.flush(p, FLUSH_KICKS) {
            flushed = flushed.and(Err(e));
        }
    }
    umem.reap();
    body.and(flushed)
}

/// Receive on `port`, run `head` In, drop everything (delivered frames are
/// counted as `passed` and recycled to the fill ring). Returns when `lc.stop`
/// is set.
///
/// # Errors
/// A TX kick error (only when a hook has frames sent through the outbox).
pub fn sink_loop(
    umem: &mut Umem,
    port: PortId,
    head: &Head,
    reg: &Registry,
    w: &mut LoopWorker<'_>,
    lc: &LoopConfig,
) -> Result<()> {
    let mut bufs = [ArrayVec::new(), ArrayVec::new()];
    let body = (|| {
        let [frames, staging] = &mut bufs;
        let origin = (umem.ifindex(port), umem.queue(port));
        let mut idle = Idle::new(lc);
        let st = w.stats;
        while !lc.stop.load(Ordering::Relaxed) {
            let n = umem.rx_batch(port, frames);
            if n == 0 {
                settle(umem, lc, w.worker, staging, st)?;
                if idle.sleep() {
                    umem.poll_rx(&[port], lc.idle_poll_ms);
                }
                continue;
            }
            idle.busy();
            let v = run_heads(umem, frames, origin, (Some(head), None), reg, w.worker);
            let passed = dispose(umem, frames, &v, None);
            Stats::add(&st.rx, n as u64);
            Stats::add(&st.in_dropped, v.in_dropped);
            Stats::add(&st.in_consumed, v.in_consumed);
            Stats::add(&st.passed, passed);
            Stats::add(&st.batches, 1);
            settle(umem, lc, w.worker, staging, st)?;
        }
        Ok(())
    })();
    finish(umem, &mut bufs, body)
}

/// What a loop runs as: its registry worker and its stats. A forwarder has
/// two stats, one per direction (a→b, b→a).
#[derive(Debug)]
pub struct LoopWorker<'a> {
    /// The registry worker (its index picks the outbox).
    pub worker: &'a mut Worker,
    /// Counters of the loop (a→b for a forwarder).
    pub stats: &'a Stats,
    /// b→a counters of a forwarder (unused by the other loops).
    pub back: Option<&'a Stats>,
}

/// Forward between ports `a` and `b` of one UMEM, both ways, without
/// copying: frames in on `a` run `head_a` In then `head_b` Out and go out
/// on `b`, and the reverse. `w.stats` counts a→b, `w.back` b→a (or
/// `w.stats` too if `None`).
///
/// # Errors
/// A TX kick error.
pub fn forward_loop(
    umem: &mut Umem,
    (a, b): (PortId, PortId),
    (head_a, head_b): (&Head, &Head),
    reg: &Registry,
    w: &mut LoopWorker<'_>,
    lc: &LoopConfig,
) -> Result<()> {
    let mut bufs = [ArrayVec::new(), ArrayVec::new()];
    let body = (|| {
        let [frames, pass] = &mut bufs;
        let mut idle = Idle::new(lc);
        let back = w.back.unwrap_or(w.stats);
        let dirs = [
            (a, b, head_a, head_b, w.stats),
            (b, a, head_b, head_a, back),
        ];
        while !lc.stop.load(Ordering::Relaxed) {
            let mut got = 0;
            for &(src, dst, hin, hout, st) in &dirs {
                let n = umem.rx_batch(src, frames);
                if n == 0 {
                    // Keep copy-mode TX moving even without new input.
                    umem.kick_tx(dst, 1)?;
                    continue;
                }
                got += n;
                let origin = (umem.ifindex(src), umem.queue(src));
                let v = run_heads(umem, frames, origin, (Some(hin), Some(hout)), reg, w.worker);
                let passed = dispose(umem, frames, &v, Some(pass));
                let dropped = send_all(umem, dst, pass)?;
                Stats::add(&st.rx, n as u64);
                Stats::add(&st.in_dropped, v.in_dropped);
                Stats::add(&st.in_consumed, v.in_consumed);
                Stats::add(&st.out_dropped, v.out_dropped);
                Stats::add(&st.out_consumed, v.out_consumed);
                Stats::add(&st.passed, passed);
                Stats::add(&st.tx, passed - dropped);
                Stats::add(&st.tx_dropped, dropped);
                Stats::add(&st.batches, 1);
            }
            settle(umem, lc, w.worker, pass, w.stats)?;
            if got == 0 {
                if idle.sleep() {
                    umem.poll_rx(&[a, b], lc.idle_poll_ms);
                }
            } else {
                idle.busy();
                // A small batch: the next look would find a few frames at
                // most, and each look pulls the RX producer line the kernel
                // (on the generating CPU for veth) writes per frame. Pausing
                // lets the batches grow (avg 4 -> 40 frames on veth).
                if got < BATCH / 2 {
                    idle.pause();
                }
            }
        }
        Ok(())
    })();
    finish(umem, &mut bufs, body)
}

/// A pacing window: the generator keeps at most `max_in_flight` frames
/// sent but not yet accounted for by the receiving side, as told by
/// `accounted` (e.g. the sum of the downstream workers' `rx`).
#[derive(Clone)]
pub struct Window {
    /// Frames in flight at most.
    pub max_in_flight: u64,
    /// Frames the receiving side has accounted for so far.
    pub accounted: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("max_in_flight", &self.max_in_flight)
            .finish_non_exhaustive()
    }
}

/// What a generator sends: UDP/IPv4 frames built with etherparse.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Frames to build (0: until stopped).
    pub count: u64,
    /// Frames per second (0: as fast as the rings go).
    pub rate: u64,
    /// Frame size in bytes (Ethernet header included, FCS excluded);
    /// at least 60 (smaller is padded with payload to 60).
    pub size: usize,
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination ports, used round-robin frame by frame.
    pub dst_ports: Vec<u16>,
    /// Optional pacing window (exact accounting end to end).
    pub window: Option<Window>,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            count: 1000,
            rate: 0,
            size: 64,
            src_mac: [0x02, 0, 0, 0, 0, 1],
            dst_mac: [0x02, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(198, 18, 0, 1),
            dst_ip: Ipv4Addr::new(198, 18, 0, 2),
            src_port: 9,
            dst_ports: vec![9],
            window: None,
        }
    }
}

impl GenConfig {
    /// How many of the next `BATCH` frames may be built now, given `built`
    /// so far since `start`: bounded by `count` and by `rate`.
    pub fn budget(&self, built: u64, start: Instant) -> u64 {
        let mut allowed = BATCH as u64;
        if self.count != 0 {
            allowed = allowed.min(self.count - built.min(self.count));
        }
        if self.rate != 0 {
            let due = (start.elapsed().as_secs_f64() * self.rate as f64) as u64;
            allowed = allowed.min(due.saturating_sub(built));
        }
        allowed
    }

    /// The frame for each destination port.
    ///
    /// # Errors
    /// [`Error::Config`] for a size that does not fit headers or a frame.
    pub fn templates(&self, max: usize) -> Result<Vec<Vec<u8>>> {
        const HDR: usize = 14 + 20 + 8;
        let size = self.size.max(60);
        if size > max {
            return Err(Error::Config(format!(
                "frame size {size} exceeds the UMEM frame size {max}"
            )));
        }
        if self.dst_ports.is_empty() {
            return Err(Error::Config("no destination port".into()));
        }
        let payload = vec![0xa5u8; size - HDR];
        self.dst_ports
            .iter()
            .map(|&dp| {
                let b = etherparse::PacketBuilder::ethernet2(self.src_mac, self.dst_mac)
                    .ipv4(self.src_ip.octets(), self.dst_ip.octets(), 64)
                    .udp(self.src_port, dp);
                let mut v = Vec::with_capacity(size);
                b.write(&mut v, &payload)
                    .map_err(|e| Error::Config(format!("building the UDP frame: {e}")))?;
                Ok(v)
            })
            .collect()
    }
}

/// Build UDP frames, run `head` Out over them and send the passed ones on
/// `port`, paced by `gen.rate` and `gen.window`, until `gen.count` frames
/// are built or `lc.stop` is set. Flushes the TX ring before returning.
///
/// Bounded: when nothing moves (no frame sent, no completion, no window
/// credit) for `lc.stall_ms`, it stops with [`Error::Stalled`].
///
/// # Errors
/// [`Error::Config`] (frame size), TX errors, [`Error::TxStalled`],
/// [`Error::Stalled`].
pub fn gen_loop(
    umem: &mut Umem,
    port: PortId,
    head: &Head,
    reg: &Registry,
    w: &mut LoopWorker<'_>,
    gen: &GenConfig,
    lc: &LoopConfig,
) -> Result<()> {
    let templates = gen.templates(umem.area().frame_size() as usize)?;
    let mut bufs = [ArrayVec::new(), ArrayVec::new()];
    let body = (|| {
        let [frames, pass] = &mut bufs;
        let origin = (umem.ifindex(port), umem.queue(port));
        let st = w.stats;
        let start = Instant::now();
        let stall = Duration::from_millis(lc.stall_ms.max(1));
        let mut last_progress = Instant::now();
        let mut built = 0u64;
        let mut sent = 0u64;
        let mut next_port = 0usize;
        let stalled = |what: &'static str, umem: &Umem| Error::Stalled {
            what,
            ifname: umem.ifname(port).to_owned(),
            queue: umem.queue(port),
            ms: lc.stall_ms,
        };
        while !lc.stop.load(Ordering::Relaxed) && (gen.count == 0 || built < gen.count) {
            if umem.reap() > 0 {
                last_progress = Instant::now();
            }
            let mut allowed = gen.budget(built, start);
            let mut window_closed = false;
            if let Some(win) = &gen.window {
                let in_flight = sent.saturating_sub((win.accounted)());
                let credit = win.max_in_flight.saturating_sub(in_flight);
                window_closed = credit == 0;
                allowed = allowed.min(credit);
            }
            if allowed == 0 {
                if window_closed && last_progress.elapsed() > stall {
                    return Err(stalled(
                        "the pacing window (nothing accounted downstream)",
                        umem,
                    ));
                }
                umem.kick_tx(port, 1)?;
                std::thread::sleep(Duration::from_micros(20));
                continue;
            }
            for _ in 0..allowed {
                let Some(mut f) = umem.alloc() else { break };
                let t = &templates[next_port];
                next_port = (next_port + 1) % templates.len();
                // The templates fit a frame (checked by `templates`).
                if let Some(dst) = umem.area().buffer(&mut f).get_mut(..t.len()) {
                    dst.copy_from_slice(t);
                }
                umem.area().set_len(&mut f, t.len());
                frames.push(f);
            }
            if frames.is_empty() {
                // Every frame is in flight: wait (bounded) for completions.
                if last_progress.elapsed() > stall {
                    return Err(stalled("TX completions (no frame came back)", umem));
                }
                umem.kick_tx(port, 1)?;
                std::thread::sleep(Duration::from_micros(20));
                continue;
            }
            let n = frames.len() as u64;
            built += n;
            let v = run_heads(umem, frames, origin, (None, Some(head)), reg, w.worker);
            let passed = dispose(umem, frames, &v, Some(pass));
            let dropped = send_all(umem, port, pass)?;
            sent += passed - dropped;
            Stats::add(&st.generated, n);
            Stats::add(&st.out_dropped, v.out_dropped);
            Stats::add(&st.out_consumed, v.out_consumed);
            Stats::add(&st.passed, passed);
            Stats::add(&st.tx, passed - dropped);
            Stats::add(&st.tx_dropped, dropped);
            Stats::add(&st.batches, 1);
            settle(umem, lc, w.worker, pass, st)?;
            // Progress is frames leaving (or a hook taking them), not
            // frames built and dropped at a TX ring that never drains.
            if passed > dropped || passed < n {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > stall {
                return Err(stalled("the TX ring to drain (nothing sent)", umem));
            }
        }
        Ok(())
    })();
    finish(umem, &mut bufs, body)
}

// ---- spawners -------------------------------------------------------------

/// How the workers of a spawner get their UMEM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UmemMode {
    /// One UMEM area for all the queues of the spawner ([`SharedUmem`]):
    /// registered once, every socket but the first joins it with
    /// `XDP_SHARED_UMEM`; each worker owns `WorkerSetup::umem.frames`
    /// frames of it and its own sockets and fill/completion rings. The
    /// ports are opened on one setup thread, then each worker's part
    /// moves to its thread.
    #[default]
    Shared,
    /// One UMEM per worker, registered and opened on the worker's thread.
    PerQueue,
}

impl std::fmt::Display for UmemMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UmemMode::Shared => "shared",
            UmemMode::PerQueue => "per-queue",
        })
    }
}

/// Where the worker threads run and what they allocate.
#[derive(Clone, Debug, Default)]
pub struct WorkerSetup {
    /// Network namespace (name in /run/netns or a path) the workers enter.
    pub netns: Option<String>,
    /// Queues to run (one worker each); `None`: every queue of the interface.
    pub queues: Option<Vec<u32>>,
    /// UMEM of each worker (with [`UmemMode::Shared`]: each worker's part
    /// of the shared area).
    pub umem: UmemConfig,
    /// One shared UMEM or one per worker.
    pub umem_mode: UmemMode,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// Port template (ring sizes, bind mode); interface and queue are set
    /// by the spawner.
    pub port: Option<PortConfig>,
}

/// What a worker hands back when it ends.
#[derive(Clone, Debug)]
pub struct WorkerReport {
    /// Queue the worker ran.
    pub queue: u32,
    /// Where every frame of its UMEM (its part of a shared one) was at
    /// the end.
    pub counts: FrameCounts,
    /// Byte offsets of the frames it owned ([`Umem::frame_addrs`]).
    pub frame_addrs: std::ops::Range<u64>,
    /// Workers its UMEM area was shared by (1: its own).
    pub umem_parts: usize,
    /// Its ports (none for a synthetic worker).
    pub ports: Vec<PortReport>,
}

/// One port of a worker at the end of its run.
#[derive(Clone, Debug)]
pub struct PortReport {
    /// Interface name.
    pub ifname: String,
    /// Queue.
    pub queue: u32,
    /// Copy or zero-copy.
    pub bound: BoundMode,
    /// Mode of the XDP program steering to the port (`None`: TX only).
    pub xdp_mode: Option<XdpMode>,
    /// The kernel's AF_XDP statistics (`None` if they could not be read).
    pub kernel: Option<XdpStats>,
    /// TX kicks the kernel answered with EAGAIN/EBUSY.
    pub tx_busy: u64,
}

impl WorkerReport {
    /// The report of a worker that ran `queue` on `umem`.
    pub fn of(umem: &Umem, queue: u32) -> WorkerReport {
        WorkerReport {
            queue,
            counts: umem.counts(),
            frame_addrs: umem.frame_addrs(),
            umem_parts: umem.parts(),
            ports: umem
                .port_ids()
                .map(|p| PortReport {
                    ifname: umem.ifname(p).to_owned(),
                    queue: umem.queue(p),
                    bound: umem.mode(p),
                    xdp_mode: umem.program(p).map(|x| x.mode()),
                    kernel: umem.statistics(p).ok(),
                    tx_busy: umem.tx_busy(p),
                })
                .collect(),
        }
    }
}

/// Running workers: their stats, a stop flag, and the join handles.
pub struct Running {
    /// One entry per worker (a forwarder has two per queue: a→b, b→a).
    pub stats: Vec<Arc<Stats>>,
    /// The loop config shared by the workers (set `stop` to end them).
    pub lc: LoopConfig,
    handles: Vec<JoinHandle<Outcome>>,
}

/// What a worker thread returns: its report (`None` if it never opened
/// its ports) and how its loop ended.
type Outcome = (Option<WorkerReport>, Result<()>);

/// Every worker of a [`Running`] after it ended: the reports (also of the
/// workers whose loop failed: their frames are accounted for all the
/// same) and the errors.
#[derive(Debug, Default)]
pub struct Finished {
    /// One report per worker that opened its ports.
    pub reports: Vec<WorkerReport>,
    /// The errors of the workers that failed.
    pub errors: Vec<Error>,
}

impl Finished {
    /// The reports, or the first error.
    ///
    /// # Errors
    /// The first worker error.
    pub fn into_result(mut self) -> Result<Vec<WorkerReport>> {
        if self.errors.is_empty() {
            Ok(self.reports)
        } else {
            Err(self.errors.swap_remove(0))
        }
    }
}

impl Running {
    /// The sum of every worker's stats.
    pub fn total(&self) -> StatsSnapshot {
        self.stats
            .iter()
            .map(|s| s.snapshot())
            .fold(StatsSnapshot::default(), |a, b| a + b)
    }

    /// Set the stop flag.
    pub fn stop(&self) {
        self.lc.stop.store(true, Ordering::Relaxed);
    }

    /// Have all workers returned?
    pub fn finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    /// Stop (if not yet) and wait for every worker.
    ///
    /// # Errors
    /// The first worker error (see [`Running::join_all`] for every report).
    pub fn join(self) -> Result<Vec<WorkerReport>> {
        self.join_all().into_result()
    }

    /// Stop (if not yet) and wait for every worker; every report and
    /// every error.
    pub fn join_all(self) -> Finished {
        self.stop();
        self.wait_all()
    }

    /// Wait for every worker without setting the stop flag (a generator
    /// ends by itself after its count, or stalls out after
    /// `LoopConfig::stall_ms`).
    ///
    /// # Errors
    /// The first worker error; [`Error::Config`] if a worker panicked.
    pub fn wait(self) -> Result<Vec<WorkerReport>> {
        self.wait_all().into_result()
    }

    /// [`Running::wait`], with every report and every error.
    pub fn wait_all(mut self) -> Finished {
        let mut out = Finished::default();
        for h in std::mem::take(&mut self.handles) {
            match h.join() {
                Ok((report, result)) => {
                    out.reports.extend(report);
                    if let Err(e) = result {
                        out.errors.push(e);
                    }
                }
                Err(_) => out
                    .errors
                    .push(Error::Config("a worker thread panicked".into())),
            }
        }
        out
    }
}

impl Drop for Running {
    /// Dropping the handle stops the workers (without waiting for them).
    fn drop(&mut self) {
        self.stop();
    }
}

/// Get or register the Ethernet head `name` (both directions).
///
/// # Errors
/// pfil errors (invalid name).
pub fn head_for(reg: &Registry, name: &str) -> Result<Head> {
    match reg.head(name) {
        Ok(h) => Ok(h),
        Err(_) => Ok(reg.register_head(name, PacketKind::Ethernet, Dirs::BOTH)?),
    }
}

fn in_setup<T: Send + 'static>(
    netns: &Option<String>,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let ns = netns.clone();
    std::thread::spawn(move || {
        if let Some(ns) = ns {
            enter_netns(&ns)?;
        }
        f()
    })
    .join()
    .unwrap_or_else(|_| Err(Error::Config("setup thread panicked".into())))
}

type Body = Box<dyn FnOnce(&mut Worker, &LoopConfig) -> Outcome>;
type Opener = Box<dyn FnOnce() -> Result<Body> + Send>;

/// Take `n` registry worker slots, all or none.
///
/// # Errors
/// [`Error::Config`] naming the slots needed and free.
fn take_workers(reg: &Registry, n: usize) -> Result<Vec<Worker>> {
    let mut ws = Vec::with_capacity(n);
    for _ in 0..n {
        match reg.worker() {
            Ok(w) => ws.push(w),
            Err(e) => {
                return Err(Error::Config(format!(
                    "{n} worker(s) need {n} registry worker slot(s), {} were free ({e}); \
                     build the registry with Registry::with_max_workers(N) for N >= the queues to run",
                    ws.len()
                )))
            }
        }
    }
    Ok(ws)
}

/// The frame budget of one worker: refuse a UMEM that cannot stock the
/// fill rings, the TX rings, the loop's batches and `held_limit` frames.
fn check_budget(setup: &WorkerSetup, ports: &[PortConfig], lc: &LoopConfig) -> Result<()> {
    let needed = Umem::frames_needed(ports, crate::umem::APP_RESERVE + lc.held_limit as u64);
    if u64::from(setup.umem.frames) < needed {
        return Err(Error::Config(format!(
            "{} UMEM frames per worker cannot hold what its {} port(s) keep in flight: {needed} \
             needed (fill target + TX ring of each port, {} for the loop's batches, {} held for \
             hooks); use more frames or smaller rings",
            setup.umem.frames,
            ports.len(),
            crate::umem::APP_RESERVE,
            lc.held_limit,
        )));
    }
    Ok(())
}

/// Start one thread per opener with one of `workers` each: enter the
/// namespace, open (the opener returns the loop body), report ready, run.
/// Every resource is acquired before the first thread starts; if a thread
/// cannot start or a worker fails to open, every started worker is
/// stopped and joined before the error is returned.
fn start(
    what: &str,
    workers: Vec<Worker>,
    netns: &Option<String>,
    openers: Vec<Opener>,
    stats: Vec<Arc<Stats>>,
    lc: LoopConfig,
) -> Result<Running> {
    let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
    let n = openers.len();
    debug_assert_eq!(n, workers.len());
    let mut running = Running {
        stats,
        lc,
        handles: Vec::with_capacity(n),
    };
    for (i, (open, mut worker)) in openers.into_iter().zip(workers).enumerate() {
        let ns = netns.clone();
        let lc2 = running.lc.clone();
        let ready = ready_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("pfil-{what}-{i}"))
            .spawn(move || {
                let opened = (|| {
                    if let Some(ns) = ns {
                        enter_netns(&ns)?;
                    }
                    open()
                })();
                match opened {
                    Ok(body) => {
                        let _ = ready.send(Ok(()));
                        body(&mut worker, &lc2)
                    }
                    Err(e) => {
                        let msg = e.to_string();
                        let _ = ready.send(Err(e));
                        (
                            None,
                            Err(Error::Config(format!("worker failed to open: {msg}"))),
                        )
                    }
                }
            });
        match spawned {
            Ok(h) => running.handles.push(h),
            Err(e) => {
                let _ = running.join_all();
                return Err(Error::io("spawning a worker thread", e));
            }
        }
    }
    drop(ready_tx);
    for _ in 0..n {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = running.join_all();
                return Err(e);
            }
            Err(_) => {
                let _ = running.join_all();
                return Err(Error::Config("a worker died while opening".into()));
            }
        }
    }
    Ok(running)
}

fn queues_of(setup: &WorkerSetup, ifname: &str) -> Result<Vec<u32>> {
    if let Some(q) = &setup.queues {
        return Ok(q.clone());
    }
    let name = ifname.to_owned();
    let n = in_setup(&setup.netns, move || queue_count(&name))?;
    Ok((0..n).collect())
}

fn port_cfg(
    setup: &WorkerSetup,
    ifname: &str,
    queue: u32,
    prog: Option<Arc<XdpProgram>>,
) -> PortConfig {
    let mut c = setup
        .port
        .clone()
        .unwrap_or_else(|| PortConfig::new(ifname, queue));
    c.ifname = ifname.to_owned();
    c.queue = queue;
    c.xdp_mode = setup.xdp_mode;
    c.program = prog;
    c
}

fn attach(setup: &WorkerSetup, ifname: &str) -> Result<Arc<XdpProgram>> {
    let name = ifname.to_owned();
    let mode = setup.xdp_mode;
    in_setup(&setup.netns, move || {
        let n = queue_count(&name)?;
        Ok(Arc::new(XdpProgram::attach(&name, n, mode)?))
    })
}

/// Makes a worker's loop body from its UMEM and the ids of its ports (in
/// the order of its port configs).
type MakeBody = Box<dyn FnOnce(Umem, Vec<PortId>) -> Body + Send>;

/// The openers of the workers: each opens the ports of `ports[i]` and
/// builds its body with `make[i]`. [`UmemMode::Shared`]: one area is
/// registered and every port opened now, on a setup thread (in the
/// namespace); the openers only hand each worker its part.
/// [`UmemMode::PerQueue`]: each opener makes its own UMEM on its thread.
fn openers(
    setup: &WorkerSetup,
    what: &str,
    workers: Vec<(Vec<PortConfig>, MakeBody)>,
) -> Result<Vec<Opener>> {
    let uc = setup.umem;
    let n = workers.len();
    tracing::info!(
        target: "pfil_afxdp",
        what,
        workers = n,
        umem_mode = %setup.umem_mode,
        frames_per_worker = uc.frames,
        "UMEM mode: {}",
        match setup.umem_mode {
            UmemMode::Shared => "one area shared by every queue's worker",
            UmemMode::PerQueue => "one area per worker",
        }
    );
    match setup.umem_mode {
        UmemMode::PerQueue => Ok(workers
            .into_iter()
            .map(|(ports, make)| {
                Box::new(move || {
                    let mut umem = Umem::new(uc)?;
                    let ids = ports
                        .into_iter()
                        .map(|p| umem.open(p))
                        .collect::<Result<Vec<_>>>()?;
                    Ok(make(umem, ids))
                }) as Opener
            })
            .collect()),
        UmemMode::Shared => {
            let (ports, makes): (Vec<_>, Vec<_>) = workers.into_iter().unzip();
            let parts = in_setup(&setup.netns, move || {
                let mut shared = SharedUmem::new(uc, n)?;
                let mut ids = Vec::with_capacity(n);
                for (i, ports) in ports.into_iter().enumerate() {
                    let part = shared.part(i);
                    ids.push(
                        ports
                            .into_iter()
                            .map(|p| part.open(p))
                            .collect::<Result<Vec<_>>>()?,
                    );
                }
                Ok(shared.into_parts().into_iter().zip(ids).collect::<Vec<_>>())
            })?;
            Ok(parts
                .into_iter()
                .zip(makes)
                .map(|((umem, ids), make)| Box::new(move || Ok(make(umem, ids))) as Opener)
                .collect())
        }
    }
}

/// `sink IF`: one worker per queue receives, runs head `IF` In, drops.
///
/// # Errors
/// The first open error (every worker is stopped then); [`Error::Config`]
/// when the registry has too few free worker slots or the UMEM too few
/// frames ([`Umem::frames_needed`]).
pub fn spawn_sink(
    reg: &Registry,
    ifname: &str,
    setup: &WorkerSetup,
    lc: LoopConfig,
) -> Result<Running> {
    let head = head_for(reg, ifname)?;
    let queues = queues_of(setup, ifname)?;
    let ws = take_workers(reg, queues.len())?;
    check_budget(setup, &[port_cfg(setup, ifname, 0, None)], &lc)?;
    let prog = attach(setup, ifname)?;
    let mut workers: Vec<(Vec<PortConfig>, MakeBody)> = Vec::new();
    let mut stats = Vec::new();
    for q in queues {
        let st = Arc::new(Stats::default());
        stats.push(st.clone());
        let (head, reg) = (head.clone(), reg.clone());
        let make: MakeBody = Box::new(move |mut umem: Umem, ids: Vec<PortId>| {
            let port = ids[0];
            Box::new(move |w: &mut Worker, lc: &LoopConfig| {
                let mut lw = LoopWorker {
                    worker: w,
                    stats: &st,
                    back: None,
                };
                let r = sink_loop(&mut umem, port, &head, &reg, &mut lw, lc);
                umem.stop_rx(port);
                (Some(WorkerReport::of(&umem, q)), r)
            }) as Body
        });
        workers.push((vec![port_cfg(setup, ifname, q, Some(prog.clone()))], make));
    }
    let openers = openers(setup, "sink", workers)?;
    start("sink", ws, &setup.netns, openers, stats, lc)
}

/// `forward A B`: one worker per queue forwards A⇄B through A's in head and
/// B's out head (and back), both ports of a queue on one UMEM (part). Both
/// interfaces must be in the same namespace. `stats` holds, per queue, a→b
/// then b→a.
///
/// # Errors
/// As [`spawn_sink`].
pub fn spawn_forward(
    reg: &Registry,
    a: &str,
    b: &str,
    setup: &WorkerSetup,
    lc: LoopConfig,
) -> Result<Running> {
    let head_a = head_for(reg, a)?;
    let head_b = head_for(reg, b)?;
    let queues = queues_of(setup, a)?;
    let ws = take_workers(reg, queues.len())?;
    check_budget(
        setup,
        &[port_cfg(setup, a, 0, None), port_cfg(setup, b, 0, None)],
        &lc,
    )?;
    let prog_a = attach(setup, a)?;
    let prog_b = attach(setup, b)?;
    let mut workers: Vec<(Vec<PortConfig>, MakeBody)> = Vec::new();
    let mut stats = Vec::new();
    for q in queues {
        let ab = Arc::new(Stats::default());
        let ba = Arc::new(Stats::default());
        stats.push(ab.clone());
        stats.push(ba.clone());
        let pa = port_cfg(setup, a, q, Some(prog_a.clone()));
        let pb = port_cfg(setup, b, q, Some(prog_b.clone()));
        let (ha, hb, reg) = (head_a.clone(), head_b.clone(), reg.clone());
        let make: MakeBody = Box::new(move |mut umem: Umem, ids: Vec<PortId>| {
            let (pa, pb) = (ids[0], ids[1]);
            Box::new(move |w: &mut Worker, lc: &LoopConfig| {
                let mut lw = LoopWorker {
                    worker: w,
                    stats: &ab,
                    back: Some(&ba),
                };
                let r = forward_loop(&mut umem, (pa, pb), (&ha, &hb), &reg, &mut lw, lc);
                umem.stop_rx(pa);
                umem.stop_rx(pb);
                (Some(WorkerReport::of(&umem, q)), r)
            }) as Body
        });
        workers.push((vec![pa, pb], make));
    }
    let openers = openers(setup, "forward", workers)?;
    start("forward", ws, &setup.netns, openers, stats, lc)
}

/// `gen IF`: one worker per queue (usually just queue 0) builds and sends
/// frames through head `IF` Out. Each worker sends `gen.count` frames.
///
/// # Errors
/// As [`spawn_sink`].
pub fn spawn_gen(
    reg: &Registry,
    ifname: &str,
    setup: &WorkerSetup,
    gen: GenConfig,
    lc: LoopConfig,
) -> Result<Running> {
    let head = head_for(reg, ifname)?;
    let queues = setup.queues.clone().unwrap_or_else(|| vec![0]);
    let ws = take_workers(reg, queues.len())?;
    check_budget(setup, &[port_cfg(setup, ifname, 0, None).tx_only()], &lc)?;
    let mut workers: Vec<(Vec<PortConfig>, MakeBody)> = Vec::new();
    let mut stats = Vec::new();
    for q in queues {
        let st = Arc::new(Stats::default());
        stats.push(st.clone());
        let pc = port_cfg(setup, ifname, q, None).tx_only();
        let (head, reg, gen) = (head.clone(), reg.clone(), gen.clone());
        let make: MakeBody = Box::new(move |mut umem: Umem, ids: Vec<PortId>| {
            let port = ids[0];
            Box::new(move |w: &mut Worker, lc: &LoopConfig| {
                let mut lw = LoopWorker {
                    worker: w,
                    stats: &st,
                    back: None,
                };
                let r = gen_loop(&mut umem, port, &head, &reg, &mut lw, &gen, lc);
                (Some(WorkerReport::of(&umem, q)), r)
            }) as Body
        });
        workers.push((vec![pc], make));
    }
    let openers = openers(setup, "gen", workers)?;
    start("gen", ws, &setup.netns, openers, stats, lc)
}

/// `pfild --synthetic`: `workers` threads each build `gen.count` frames in
/// memory (0: until stopped) and run them through head `ifname_in` In and,
/// if given, head `ifname_out` Out, with the loop shape of an AF_XDP
/// worker. No privileges needed.
///
/// # Errors
/// pfil errors (head names), [`Error::Config`] (worker slots, frame size).
pub fn spawn_synthetic(
    reg: &Registry,
    ifname_in: &str,
    ifname_out: Option<&str>,
    workers: u32,
    gen: GenConfig,
    lc: LoopConfig,
) -> Result<Running> {
    let head_in = head_for(reg, ifname_in)?;
    let head_out = ifname_out.map(|n| head_for(reg, n)).transpose()?;
    let n = workers.max(1);
    let ws = take_workers(reg, n as usize)?;
    let mut openers: Vec<Opener> = Vec::new();
    let mut stats = Vec::new();
    for q in 0..n {
        let st = Arc::new(Stats::default());
        stats.push(st.clone());
        let (hi, ho, reg, gen) = (head_in.clone(), head_out.clone(), reg.clone(), gen.clone());
        openers.push(Box::new(move || {
            let mut port = crate::synthetic::SyntheticPort::new(&gen, 0, q)?;
            Ok(Box::new(move |w: &mut Worker, lc: &LoopConfig| {
                let r = port.run(&hi, ho.as_ref(), &reg, w, &st, &gen, lc);
                let report = WorkerReport {
                    queue: q,
                    counts: FrameCounts::default(),
                    frame_addrs: 0..0,
                    umem_parts: 0,
                    ports: Vec::new(),
                };
                (Some(report), r)
            }) as Body)
        }));
    }
    start("synthetic", ws, &None, openers, stats, lc)
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
