//! The sink, forward and generator loops, written once over [`Port`].

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use arrayvec::ArrayVec;
use pfil::{Dir, Head, Packet, Registry, Verdict, Worker};

use crate::config::{GenConfig, Idle, LoopConfig};
use crate::error::Error;
use crate::outbox::Request;
use crate::port::{Batch, Origin, Port, PortFrame, PortId, BATCH};
use crate::stats::Stats;

/// Where the generator writes a frame in its buffer when the port can
/// place it there ([`Port::set_span`]): after the kernel's XDP headroom
/// (`XDP_PACKET_HEADROOM`), room for hooks on the out head to grow into.
const GEN_HEADROOM: usize = 256;

/// What a loop runs as: the registry, its registry worker and its
/// stats. A forwarder has two stats, one per direction (a→b, b→a).
pub struct LoopWorker<'a> {
    /// The registry whose heads the loop runs.
    pub reg: &'a Registry,
    /// The registry worker (its index picks the outbox).
    pub worker: &'a mut Worker,
    /// Counters of the loop (a→b for a forwarder).
    pub stats: &'a Stats,
    /// b→a counters of a forwarder (unused by the other loops).
    pub back: Option<&'a Stats>,
}

impl std::fmt::Debug for LoopWorker<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopWorker")
            .field("worker", &self.worker)
            .field("stats", &self.stats)
            .field("back", &self.back)
            .finish_non_exhaustive()
    }
}

/// The verdicts of a batch after the in head (and the out head).
struct Verdicts {
    v: [Verdict; BATCH],
    /// The cookies' epoch (see [`crate::Held::next_epoch`]).
    epoch: u64,
    in_dropped: u64,
    in_consumed: u64,
    out_dropped: u64,
    out_consumed: u64,
    /// Passing frames a hook moved or resized that the port could not
    /// take back as they are now ([`Port::set_span`]): dropped (their
    /// verdict turned to `Dropped`) rather than sent as they were.
    unsendable: u64,
}

/// Run `head_in` (In) and then `head_out` (Out) over the frames in one
/// pinned generation. Each packet is built over its frame's buffer
/// ([`Port::room`]), so hooks may grow it into the room around it; with
/// `sends` (the frames that pass go out), each passing frame then takes
/// the packet's bounds as the hooks left them ([`Port::set_span`]), so
/// what goes out is what the hooks made.
#[inline]
fn run_heads<P: Port>(
    port: &mut P,
    frames: &mut Batch<P::Frame>,
    origin: Origin,
    heads: (Option<&Head>, Option<&Head>),
    (reg, worker): (&Registry, &mut Worker),
    sends: bool,
) -> Verdicts {
    let mut out = Verdicts {
        v: [Verdict::Pass; BATCH],
        epoch: 0,
        in_dropped: 0,
        in_consumed: 0,
        out_dropped: 0,
        out_consumed: 0,
        unsendable: 0,
    };
    let hin = heads.0.filter(|h| h.is_hooked(Dir::In));
    let hout = heads.1.filter(|h| h.is_hooked(Dir::Out));
    if hin.is_none() && hout.is_none() {
        return out;
    }
    out.epoch = port.held().next_epoch();
    let port = &*port;
    // Built in place: `collect` builds the array in its own frame and
    // copies it out (a 4 KiB `memcpy` per batch, measured at over half the
    // time of a batch with the null hook).
    let mut pkts: ArrayVec<Packet<'_>, BATCH> = ArrayVec::new();
    for f in frames.iter_mut() {
        let cookie = out.epoch | f.addr();
        let p = port
            .packet(f)
            .with_origin(origin.ifindex, origin.queue)
            .with_cookie(cookie);
        // SAFETY: `frames` is a `Batch`, at most `BATCH` frames: `pkts`,
        // of the same capacity, has room for a packet each (the checked
        // `push` spent two instructions a packet proving it again).
        unsafe { pkts.push_unchecked(p) };
    }
    // Verdicts are tallied in one pass over the batch: after the in head
    // only when an out head follows (to tell the two apart), and once at
    // the end, copying them out.
    // The last pass also tells whether any packet's bounds changed, so
    // that a batch nobody moved (nearly all) skips the look for them.
    let mut moved_any = false;
    let mut tally = |pkts: &[Packet<'_>], mut v: Option<&mut [Verdict; BATCH]>| {
        let (mut dropped, mut consumed) = (0u64, 0u64);
        let mut moved = false;
        for (i, p) in pkts.iter().enumerate() {
            let verdict = p.verdict();
            dropped += u64::from(verdict == Verdict::Dropped);
            consumed += u64::from(verdict == Verdict::Consumed);
            if let Some(v) = v.as_deref_mut() {
                v[i] = verdict;
                moved |= sends && p.bounds_changed();
            }
        }
        moved_any |= moved;
        (dropped, consumed)
    };
    let snap = reg.snapshot();
    let mut stopped_in = (0, 0);
    if let Some(h) = hin {
        snap.run(h, Dir::In, worker, &mut pkts);
        if hout.is_some() {
            stopped_in = tally(&pkts, None);
        }
    }
    if let Some(h) = hout {
        snap.run(h, Dir::Out, worker, &mut pkts);
    }
    let (dropped, consumed) = tally(&pkts, Some(&mut out.v));
    if hout.is_none() {
        stopped_in = (dropped, consumed);
    }
    (out.in_dropped, out.in_consumed) = stopped_in;
    if hout.is_some() {
        // A packet the in head stopped is not shown to the out head, so
        // the totals only grow; saturate anyway (a hook cannot make the
        // datapath panic).
        out.out_dropped = dropped.saturating_sub(out.in_dropped);
        out.out_consumed = consumed.saturating_sub(out.in_consumed);
    }
    if sends && moved_any {
        // Only the frames a hook moved or resized (rare).
        let moved: ArrayVec<(usize, usize, usize), BATCH> = pkts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.bounds_changed())
            .map(|(i, p)| (i, p.headroom(), p.len()))
            .collect();
        drop(pkts);
        for (i, start, len) in moved {
            let (Some(f), Some(v)) = (frames.get_mut(i), out.v.get_mut(i)) else {
                continue;
            };
            if *v == Verdict::Pass && !port.set_span(f, start, len) {
                *v = Verdict::Dropped;
                out.unsendable += 1;
            }
        }
    }
    out
}

/// Hand out the frames of a batch by verdict: `Pass` into `pass` (or
/// recycled when `pass` is `None`), `Dropped` recycled, `Consumed` held
/// under its cookie (see [`settle`]). Never fails: every frame of the
/// batch ends in one place.
#[inline]
fn dispose<P: Port>(
    port: &mut P,
    frames: &mut Batch<P::Frame>,
    v: &Verdicts,
    mut pass: Option<&mut Batch<P::Frame>>,
) -> u64 {
    let n = frames.len() as u64;
    let dropped = v.in_dropped + v.out_dropped + v.unsendable;
    if v.in_consumed + v.out_consumed == 0 {
        match pass {
            // Every frame passed (the common case): move the batch whole.
            Some(p) if dropped == 0 => {
                p.extend(frames.drain(..));
                return n;
            }
            // A sink gives back what passed and what was dropped alike:
            // the batch whole (`dropped` counts the batch's `Dropped`
            // verdicts, so at most `n`).
            None => {
                port.recycle_all(frames);
                return n.saturating_sub(dropped);
            }
            Some(_) => {}
        }
    }
    let mut passed = 0;
    for (f, verdict) in frames.drain(..).zip(v.v.iter()) {
        match verdict {
            Verdict::Pass => {
                passed += 1;
                match pass.as_deref_mut() {
                    Some(p) => p.push(f),
                    None => port.recycle(f),
                }
            }
            Verdict::Dropped => port.recycle(f),
            Verdict::Consumed => {
                let cookie = v.epoch | f.addr();
                port.held().push(cookie, f);
            }
        }
    }
    passed
}

/// After a batch: serve up to [`BATCH`] requests of this worker's outbox
/// (release held frames, or send them on the endpoint of the interface
/// asked for), then give the oldest held frames beyond `lc.held_limit`
/// back to the pool. Requests a hook made inside the batch are served
/// before the bound applies.
fn settle<P: Port>(
    port: &mut P,
    lc: &LoopConfig,
    worker: &Worker,
    staging: &mut Batch<P::Frame>,
    st: &Stats,
) -> Result<(), P::Error> {
    let served = serve_outbox(port, lc, worker, staging, st);
    let mut evicted = 0;
    while let Some(f) = port.held().pop_over(lc.held_limit) {
        port.recycle(f);
        evicted += 1;
    }
    Stats::add(&st.held_evicted, evicted);
    served
}

fn serve_outbox<P: Port>(
    port: &mut P,
    lc: &LoopConfig,
    worker: &Worker,
    staging: &mut Batch<P::Frame>,
    st: &Stats,
) -> Result<(), P::Error> {
    let Some(ob) = lc.outboxes.as_ref().and_then(|o| o.get(worker.index())) else {
        return Ok(());
    };
    if ob.is_empty() {
        return Ok(());
    }
    // Transmits are staged and sent a batch at a time per endpoint. What
    // went out counts as `reinjected`; what could not (TX ring full after
    // the bounded retries, or a TX error) is recycled and counts as
    // `refused`, so every request served is counted exactly once.
    let mut staged: Option<PortId> = None;
    let flush = |port: &mut P, staging: &mut Batch<P::Frame>, to: Option<PortId>| {
        let Some(p) = to else { return Ok(()) };
        let sent = send_all(port, p, staging);
        Stats::add(&st.reinjected, sent.sent);
        Stats::add(&st.refused, sent.dropped);
        sent.result
    };
    for _ in 0..BATCH {
        let Some(req) = ob.pop() else { break };
        let (cookie, to) = match req {
            Request::Release { cookie } => (cookie, None),
            Request::Transmit {
                cookie,
                ifindex,
                span,
            } => (cookie, Some((ifindex, span))),
        };
        let Some(mut f) = port.held().take(cookie) else {
            Stats::add(&st.stale, 1);
            continue;
        };
        // Sent as the hook left the packet (grown, narrowed), or, when the
        // port cannot place it so, refused rather than sent as it was.
        let placed = match to {
            Some((_, Some(sp))) => port.set_span(&mut f, sp.start as usize, sp.len as usize),
            _ => true,
        };
        let to = to.map(|(ifx, _)| ifx);
        if !placed {
            port.recycle(f);
            Stats::add(&st.refused, 1);
            continue;
        }
        let target = to.and_then(|ifx| port.find(ifx));
        match (to, target) {
            (None, _) => {
                port.recycle(f);
                Stats::add(&st.released, 1);
            }
            (Some(_), None) => {
                port.recycle(f);
                Stats::add(&st.refused, 1);
            }
            (Some(_), Some(p)) => {
                if staged.is_some_and(|q| q != p) || staging.is_full() {
                    flush(port, staging, staged)?;
                }
                staged = Some(p);
                if let Err(full) = staging.try_push(f) {
                    // Not reached: the staging batch was flushed when full.
                    port.recycle(full.element());
                    Stats::add(&st.refused, 1);
                }
            }
        }
    }
    flush(port, staging, staged)
}

/// What [`send_all`] did with a batch: every frame of it is either `sent`
/// (queued on the TX ring) or `dropped` (recycled), also when `result`
/// is the port's error, so the caller counts the batch before it returns
/// the error.
struct Sent<E> {
    sent: u64,
    dropped: u64,
    result: Result<(), E>,
}

/// Put `frames` on `to`'s TX queue, kicking (bounded) while it is full;
/// what still does not fit is recycled and counted as dropped. On a TX
/// error the frames not queued yet are recycled (and counted as dropped)
/// too: `frames` is empty when this returns, and `sent + dropped` is the
/// batch.
fn send_all<P: Port>(port: &mut P, to: PortId, frames: &mut Batch<P::Frame>) -> Sent<P::Error> {
    let total = frames.len() as u64;
    let mut tries = 0;
    let mut result = Ok(());
    while !frames.is_empty() {
        // What left `frames` was queued, whatever `tx` returned (a port may
        // queue frames and then fail to kick).
        if let Err(e) = port.tx(to, frames) {
            result = Err(e);
            break;
        }
        if frames.is_empty() {
            break;
        }
        tries += 1;
        if tries > 1000 {
            break;
        }
        if let Err(e) = port.kick_tx(to, 8) {
            result = Err(e);
            break;
        }
        if tries % 16 == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    let dropped = frames.len() as u64;
    if dropped > 0 {
        port.recycle_all(frames);
    }
    Sent {
        sent: total - dropped,
        dropped,
        result,
    }
}

/// The one exit path of every loop, whatever `body` returned: the frames
/// still in the loop's batches go back to the pool, the TX queues are
/// flushed and completions reaped, so the port's counts add up with
/// nothing left in the application. Returns `body`'s error first.
fn finish<P: Port>(
    port: &mut P,
    batches: &mut [Batch<P::Frame>],
    body: Result<(), P::Error>,
) -> Result<(), P::Error> {
    for b in batches.iter_mut() {
        for f in b.drain(..) {
            port.recycle(f);
        }
    }
    let mut flushed = Ok(());
    for i in 0..port.ports() {
        if let Err(e) = port.flush(PortId::new(i)) {
            flushed = flushed.and(Err(e));
        }
    }
    port.reap();
    body.and(flushed)
}

/// When the loops call [`Port::reap`]: whenever a look at RX found
/// nothing (no frame, or no free buffer to receive into), and after every
/// [`REAP_EVERY`] batches in between, so a port that takes completions
/// back only when asked keeps a free pool under steady load.
#[derive(Default)]
struct Reap {
    batches: u32,
}

impl Reap {
    #[inline]
    fn idle<P: Port>(&mut self, port: &mut P) {
        self.batches = 0;
        port.reap();
    }

    #[inline]
    fn batch<P: Port>(&mut self, port: &mut P) {
        self.batches += 1;
        if self.batches >= REAP_EVERY {
            self.idle(port);
        }
    }
}

/// The loops call [`Port::reap`] at least once every this many batches
/// while frames keep arriving (and whenever an RX look finds nothing).
pub const REAP_EVERY: u32 = 8;

/// The poll(2) timeout the loops pass to [`Port::poll_rx`]: never
/// negative (a negative timeout would block without bound and never see
/// the stop flag).
#[inline]
fn poll_ms(lc: &LoopConfig) -> i32 {
    lc.idle_poll_ms.max(0)
}

/// Frames that entered the loop from `rx`: counted as `rx`, and also as
/// `generated` by a port that builds them ([`Port::BUILDS_FRAMES`]).
#[inline]
fn count_rx<P: Port>(st: &Stats, n: u64) {
    Stats::add(&st.rx, n);
    if P::BUILDS_FRAMES {
        Stats::add(&st.generated, n);
    }
}

/// Receive on `id`, run `head` In, drop everything (delivered frames are
/// counted as `passed` and recycled). Returns when `lc.stop` is set or the
/// endpoint's input ended ([`Port::rx_ended`]).
///
/// # Errors
/// A TX error (only when a hook has frames sent through the outbox).
pub fn sink_loop<P: Port>(
    port: &mut P,
    (id, head): (PortId, &Head),
    w: &mut LoopWorker<'_>,
    lc: &LoopConfig,
) -> Result<(), P::Error> {
    let mut bufs = [ArrayVec::new(), ArrayVec::new()];
    let body = (|| {
        let [frames, staging] = &mut bufs;
        let origin = port.origin(id);
        let mut idle = Idle::new(lc);
        let st = w.stats;
        let mut reap = Reap::default();
        while !lc.stop.load(Ordering::Relaxed) {
            let n = port.rx(id, frames);
            if n == 0 {
                // No frame, or no buffer to receive into: take back what
                // the outbox sent (see `Port::reap`).
                reap.idle(port);
                settle(port, lc, w.worker, staging, st)?;
                if port.rx_ended(id) {
                    break;
                }
                if idle.sleep() {
                    port.poll_rx(&[id], poll_ms(lc));
                }
                continue;
            }
            idle.busy();
            reap.batch(port);
            let v = run_heads(
                port,
                frames,
                origin,
                (Some(head), None),
                (w.reg, w.worker),
                false,
            );
            let passed = dispose(port, frames, &v, None);
            count_rx::<P>(st, n as u64);
            Stats::add(&st.in_dropped, v.in_dropped);
            Stats::add(&st.in_consumed, v.in_consumed);
            Stats::add(&st.passed, passed);
            Stats::add(&st.batches, 1);
            settle(port, lc, w.worker, staging, st)?;
        }
        Ok(())
    })();
    finish(port, &mut bufs, body)
}

/// Forward between endpoints `a` and `b` of one port, both ways, without
/// copying: frames in on `a` run `head_a` In then `head_b` Out and go out
/// on `b`, and the reverse. `w.stats` counts a→b, `w.back` b→a (or
/// `w.stats` too if `None`). Returns when `lc.stop` is set or both
/// endpoints' input ended.
///
/// # Errors
/// A TX error.
pub fn forward_loop<P: Port>(
    port: &mut P,
    (a, b): (PortId, PortId),
    (head_a, head_b): (&Head, &Head),
    w: &mut LoopWorker<'_>,
    lc: &LoopConfig,
) -> Result<(), P::Error> {
    let mut bufs = [ArrayVec::new(), ArrayVec::new()];
    let body = (|| {
        let [frames, pass] = &mut bufs;
        let mut idle = Idle::new(lc);
        let back = w.back.unwrap_or(w.stats);
        let dirs = [
            (a, b, head_a, head_b, w.stats),
            (b, a, head_b, head_a, back),
        ];
        let mut reap = Reap::default();
        while !lc.stop.load(Ordering::Relaxed) {
            let mut got = 0;
            for &(src, dst, hin, hout, st) in &dirs {
                let n = port.rx(src, frames);
                if n == 0 {
                    // Keep copy-mode TX moving even without new input.
                    port.kick_tx(dst, 1)?;
                    continue;
                }
                got += n;
                reap.batch(port);
                let origin = port.origin(src);
                let v = run_heads(
                    port,
                    frames,
                    origin,
                    (Some(hin), Some(hout)),
                    (w.reg, w.worker),
                    true,
                );
                let passed = dispose(port, frames, &v, Some(pass));
                let sent = send_all(port, dst, pass);
                // The batch is counted whatever TX did: every frame of it
                // was sent, recycled or held.
                count_rx::<P>(st, n as u64);
                Stats::add(&st.in_dropped, v.in_dropped);
                Stats::add(&st.in_consumed, v.in_consumed);
                Stats::add(&st.out_dropped, v.out_dropped);
                Stats::add(&st.refused, v.unsendable);
                Stats::add(&st.out_consumed, v.out_consumed);
                Stats::add(&st.passed, passed);
                Stats::add(&st.tx, sent.sent);
                Stats::add(&st.tx_dropped, sent.dropped);
                Stats::add(&st.batches, 1);
                sent.result?;
            }
            if got == 0 {
                // Nothing received: no frame, or no buffer to receive into
                // (a port that reaps only when asked has its pool in its
                // completion queue): take the sent frames back.
                reap.idle(port);
            }
            settle(port, lc, w.worker, pass, w.stats)?;
            if got == 0 {
                if port.rx_ended(a) && port.rx_ended(b) {
                    break;
                }
                if idle.sleep() {
                    port.poll_rx(&[a, b], poll_ms(lc));
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
    finish(port, &mut bufs, body)
}

/// Build UDP frames, run `head` Out over them and send the passed ones on
/// endpoint `id`, paced by `gen.rate` and `gen.window`, until `gen.count`
/// frames are built or `lc.stop` is set. Flushes the TX queue before
/// returning.
///
/// Bounded: when nothing moves (no frame sent, no completion, no window
/// credit) for `lc.stall_ms`, it stops with [`Error::Stalled`].
///
/// # Errors
/// [`Error::Config`] (frame size), the port's TX errors,
/// [`Error::Stalled`].
pub fn gen_loop<P: Port>(
    port: &mut P,
    (id, head): (PortId, &Head),
    w: &mut LoopWorker<'_>,
    gen: &GenConfig,
    lc: &LoopConfig,
) -> Result<(), P::Error> {
    let templates = gen.templates(port.frame_size())?;
    if templates.is_empty() {
        // An empty capture replayed: nothing to send.
        return Ok(());
    }
    let mut bufs = [ArrayVec::new(), ArrayVec::new()];
    let body = (|| {
        let [frames, pass] = &mut bufs;
        let origin = port.origin(id);
        let st = w.stats;
        let mut start = Instant::now();
        let stall = Duration::from_millis(lc.stall_ms.max(1));
        let mut last_progress = Instant::now();
        let mut built = 0u64;
        let mut sent = 0u64;
        let mut next_port = 0usize;
        let stalled = |what: &'static str, port: &P| -> P::Error {
            Error::Stalled {
                what,
                ifname: port.name(id).to_owned(),
                queue: origin.queue,
                ms: lc.stall_ms,
            }
            .into()
        };
        while !lc.stop.load(Ordering::Relaxed) && (gen.count == 0 || built < gen.count) {
            if port.reap() > 0 {
                last_progress = Instant::now();
            }
            let mut allowed = gen.budget(built, &mut start);
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
                        port,
                    ));
                }
                port.kick_tx(id, 1)?;
                std::thread::sleep(Duration::from_micros(20));
                continue;
            }
            for _ in 0..allowed {
                let Some(mut f) = port.alloc() else { break };
                let t = &templates[next_port];
                next_port = (next_port + 1) % templates.len();
                // The templates fit a frame (checked by `templates`). Written
                // after the kernel's XDP headroom where the port has the room
                // (out hooks may push headers), at the buffer's start if not.
                if port.set_span(&mut f, GEN_HEADROOM, t.len()) {
                    if let Some(dst) = port.bytes(&mut f).get_mut(..t.len()) {
                        dst.copy_from_slice(t);
                    }
                } else {
                    if let Some(dst) = port.buffer(&mut f).get_mut(..t.len()) {
                        dst.copy_from_slice(t);
                    }
                    port.set_len(&mut f, t.len());
                }
                frames.push(f);
            }
            if frames.is_empty() {
                // Every frame is in flight: wait (bounded) for completions.
                if last_progress.elapsed() > stall {
                    return Err(stalled("TX completions (no frame came back)", port));
                }
                port.kick_tx(id, 1)?;
                std::thread::sleep(Duration::from_micros(20));
                continue;
            }
            let n = frames.len() as u64;
            built += n;
            let v = run_heads(
                port,
                frames,
                origin,
                (None, Some(head)),
                (w.reg, w.worker),
                true,
            );
            let passed = dispose(port, frames, &v, Some(pass));
            let out = send_all(port, id, pass);
            let dropped = out.dropped;
            sent += out.sent;
            Stats::add(&st.generated, n);
            Stats::add(&st.out_dropped, v.out_dropped);
            Stats::add(&st.refused, v.unsendable);
            Stats::add(&st.out_consumed, v.out_consumed);
            Stats::add(&st.passed, passed);
            Stats::add(&st.tx, out.sent);
            Stats::add(&st.tx_dropped, dropped);
            Stats::add(&st.batches, 1);
            out.result?;
            settle(port, lc, w.worker, pass, st)?;
            // Progress is frames leaving (or a hook taking them), not
            // frames built and dropped at a TX ring that never drains.
            if passed > dropped || passed < n {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > stall {
                return Err(stalled("the TX ring to drain (nothing sent)", port));
            }
        }
        Ok(())
    })();
    finish(port, &mut bufs, body)
}
