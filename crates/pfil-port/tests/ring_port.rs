//! A second driver, written from the crate's documentation alone: an
//! in-memory NIC with two endpoints whose "wire" is a queue of byte
//! vectors, a fixed pool of frames, and completions that go back to the
//! pool only when [`Port::reap`] is called (as a DPDK-style port or a
//! ring shared with hardware would). It is the example of the `Port`
//! contract (see the crate docs, "Writing a port"), and the tests below
//! check the loops keep their side of it:
//!
//! - the loops reap while they run (a port that reaps only when asked
//!   does not run dry);
//! - a TX error mid-batch comes back with the batch counted exactly
//!   (`passed == tx + tx_dropped`), and outbox transmits are counted as
//!   `reinjected` or `refused` in the loop's (a→b) stats;
//! - held frames stay in [`Port::held`] after a loop returns.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
use pfil_port::{
    forward_loop, head_for, sink_loop, Batch, FrameCounts, Held, LoopConfig, LoopWorker, Origin,
    Outboxes, Port, PortFrame, PortId, Stats, BATCH,
};

/// Bytes of every frame buffer.
const FRAME: usize = 2048;
/// Where RX puts a packet in its frame: the room before it is headroom.
const HEADROOM: usize = 64;

/// A frame token: it owns its buffer (so `bytes` of two frames never
/// overlap, as the loops need when they hold a batch of slices at once).
#[derive(Debug)]
struct RingFrame {
    buf: Box<[u8; FRAME]>,
    /// The packet is `buf[off..off + len]`.
    off: usize,
    len: usize,
    index: u32,
}

impl PortFrame for RingFrame {
    fn addr(&self) -> u64 {
        u64::from(self.index) * FRAME as u64
    }
}

/// The port's error; the loops' own errors convert into it.
#[derive(Debug)]
enum RingError {
    /// The link went down (the injected TX fault).
    Down,
    /// An error of the loops.
    Loop(pfil_port::Error),
}

impl From<pfil_port::Error> for RingError {
    fn from(e: pfil_port::Error) -> Self {
        RingError::Loop(e)
    }
}

impl std::fmt::Display for RingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingError::Down => f.write_str("link down"),
            RingError::Loop(e) => write!(f, "{e}"),
        }
    }
}

/// One endpoint: frames waiting on the wire, frames sent.
#[derive(Default)]
struct End {
    name: String,
    ifindex: u32,
    wire: VecDeque<Vec<u8>>,
    sent: Vec<Vec<u8>>,
}

/// The in-memory NIC.
struct RingPort {
    ends: Vec<End>,
    free: Vec<RingFrame>,
    /// Sent, waiting for `reap`.
    completion: Vec<RingFrame>,
    held: Held<RingFrame>,
    total: u64,
    /// Fail TX once this many frames were sent in all (the frames up to
    /// it are queued, the call returns `Down`).
    fail_after: Option<usize>,
    /// RX looks that found a frame on the wire but no free buffer.
    no_buffer: u64,
    /// Offer no room around packets (the `Port` defaults of `room` and
    /// `set_span`), as a port written before them.
    roomless: bool,
}

impl RingPort {
    fn new(pool: usize, wire_a: Vec<Vec<u8>>) -> RingPort {
        RingPort {
            ends: vec![
                End {
                    name: "ring-a".into(),
                    ifindex: 1,
                    wire: wire_a.into(),
                    ..End::default()
                },
                End {
                    name: "ring-b".into(),
                    ifindex: 2,
                    ..End::default()
                },
            ],
            free: (0..pool as u32)
                .map(|index| RingFrame {
                    buf: Box::new([0; FRAME]),
                    off: 0,
                    len: 0,
                    index,
                })
                .collect(),
            completion: Vec::new(),
            held: Held::default(),
            total: pool as u64,
            fail_after: None,
            no_buffer: 0,
            roomless: false,
        }
    }

    fn sent_total(&self) -> usize {
        self.ends.iter().map(|e| e.sent.len()).sum()
    }
}

impl Port for RingPort {
    type Frame = RingFrame;
    type Error = RingError;

    fn ports(&self) -> usize {
        self.ends.len()
    }
    fn origin(&self, port: PortId) -> Origin {
        Origin {
            ifindex: self.ends[port.index()].ifindex,
            queue: 0,
        }
    }
    fn name(&self, port: PortId) -> &str {
        &self.ends[port.index()].name
    }
    fn frame_size(&self) -> usize {
        FRAME
    }

    /// Copy frames off the wire into free buffers; none when the pool is
    /// empty (completions are not reaped here: that is `reap`'s job).
    fn rx(&mut self, port: PortId, out: &mut Batch<RingFrame>) -> usize {
        let mut n = 0;
        while !out.is_full() {
            let end = &mut self.ends[port.index()];
            if end.wire.is_empty() {
                break;
            }
            let Some(mut f) = self.free.pop() else {
                self.no_buffer += 1;
                break;
            };
            let bytes = end.wire.pop_front().unwrap();
            f.off = if self.roomless { 0 } else { HEADROOM };
            f.buf[f.off..f.off + bytes.len()].copy_from_slice(&bytes);
            f.len = bytes.len();
            out.push(f);
            n += 1;
        }
        n
    }
    /// The wire is finite: an endpoint ends when its queue is empty.
    fn rx_ended(&self, port: PortId) -> bool {
        self.ends[port.index()].wire.is_empty()
    }
    fn poll_rx(&mut self, ports: &[PortId], _timeout_ms: i32) -> bool {
        ports.iter().any(|p| !self.ends[p.index()].wire.is_empty())
    }

    /// "Send" at once: the bytes go on the wire out, the frame to the
    /// completion queue until `reap`.
    fn tx(&mut self, port: PortId, frames: &mut Batch<RingFrame>) -> Result<usize, RingError> {
        let mut n = frames.len();
        let mut fail = false;
        if let Some(limit) = self.fail_after {
            let room = limit.saturating_sub(self.sent_total());
            if room < n {
                (n, fail) = (room, true);
            }
        }
        for f in frames.drain(..n) {
            self.ends[port.index()]
                .sent
                .push(f.buf[f.off..f.off + f.len].to_vec());
            self.completion.push(f);
        }
        if fail {
            return Err(RingError::Down);
        }
        Ok(n)
    }
    fn kick_tx(&mut self, _port: PortId, _max_kicks: u32) -> Result<u32, RingError> {
        Ok(0)
    }
    fn flush(&mut self, _port: PortId) -> Result<(), RingError> {
        Ok(())
    }
    fn reap(&mut self) -> usize {
        let n = self.completion.len();
        self.free.append(&mut self.completion);
        n
    }

    fn alloc(&mut self) -> Option<RingFrame> {
        let mut f = self.free.pop()?;
        (f.off, f.len) = (0, 0);
        Some(f)
    }
    fn recycle(&mut self, frame: RingFrame) {
        self.free.push(frame);
    }
    fn bytes<'a>(&'a self, frame: &'a mut RingFrame) -> &'a mut [u8] {
        &mut frame.buf[frame.off..frame.off + frame.len]
    }
    fn room<'a>(&'a self, frame: &'a mut RingFrame) -> (&'a mut [u8], usize, usize) {
        if self.roomless {
            let len = frame.len;
            return (&mut frame.buf[..len], 0, len);
        }
        (&mut frame.buf[..], frame.off, frame.len)
    }
    fn set_span(&self, frame: &mut RingFrame, start: usize, len: usize) -> bool {
        if self.roomless {
            return start == 0 && self.set_len(frame, len);
        }
        if start.checked_add(len).is_none_or(|e| e > FRAME) {
            return false;
        }
        (frame.off, frame.len) = (start, len);
        true
    }
    fn buffer<'a>(&'a self, frame: &'a mut RingFrame) -> &'a mut [u8] {
        &mut frame.buf[..]
    }
    fn set_len(&self, frame: &mut RingFrame, len: usize) -> bool {
        if len > FRAME {
            return false;
        }
        (frame.off, frame.len) = (0, len);
        true
    }

    fn held(&mut self) -> &mut Held<RingFrame> {
        &mut self.held
    }
    fn counts(&self) -> FrameCounts {
        let (free, completion, held) = (
            self.free.len() as u64,
            self.completion.len() as u64,
            self.held.len() as u64,
        );
        FrameCounts {
            free,
            completion,
            held,
            app: self.total - free - completion - held,
            total: self.total,
            ..FrameCounts::default()
        }
    }
}

/// `n` distinct 60-byte frames (the index in the first payload bytes).
fn wire(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut f = vec![0u8; 60];
            f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&[0x88, 0xb5]);
            f[14..22].copy_from_slice(&(i as u64).to_be_bytes());
            f
        })
        .collect()
}

/// Run `forward_loop` a→b on its own thread with a watchdog that sets the
/// stop flag after `limit`; returns the port, the result, the stats and
/// whether the watchdog had to stop it.
fn forward(
    reg: &Registry,
    port: RingPort,
    lc: LoopConfig,
    limit: Duration,
) -> (RingPort, Result<(), RingError>, Stats, bool) {
    let (ha, hb) = (
        head_for(reg, "ring-a").unwrap(),
        head_for(reg, "ring-b").unwrap(),
    );
    let done = Arc::new(AtomicBool::new(false));
    let (stop, done2) = (lc.stop.clone(), done.clone());
    let watchdog = std::thread::spawn(move || {
        let t = Instant::now();
        while !done2.load(Ordering::Relaxed) {
            if t.elapsed() > limit {
                stop.store(true, Ordering::Relaxed);
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    });
    let reg2 = reg.clone();
    let (port, r, stats) = std::thread::spawn(move || {
        let mut port = port;
        let mut w = reg2.worker().unwrap();
        let stats = Stats::default();
        let mut lw = LoopWorker {
            reg: &reg2,
            worker: &mut w,
            stats: &stats,
            back: None,
        };
        let ends = (PortId::new(0), PortId::new(1));
        let r = forward_loop(&mut port, ends, (&ha, &hb), &mut lw, &lc);
        (port, r, stats)
    })
    .join()
    .unwrap();
    done.store(true, Ordering::Relaxed);
    let stopped = watchdog.join().unwrap();
    (port, r, stats, stopped)
}

/// A port that reaps only when asked, with a pool of three batches:
/// every frame gets through, in order, and the loop ends by itself when
/// the wire is empty. (Before the loops reaped while running, 192 of
/// 1000 frames went through and the loop spun until stopped.)
#[test]
fn a_port_that_reaps_when_asked_does_not_run_dry() {
    let reg = Registry::new();
    let frames = wire(1000);
    let port = RingPort::new(3 * BATCH, frames.clone());
    let lc = LoopConfig {
        held_limit: BATCH,
        ..LoopConfig::new()
    };
    let (port, r, stats, stopped) = forward(&reg, port, lc, Duration::from_secs(10));
    r.unwrap();
    let s = stats.snapshot();
    assert!(
        !stopped,
        "the loop ran until the watchdog stopped it: {s:?}"
    );
    assert_eq!(
        port.ends[1].sent.len(),
        1000,
        "{s:?}, {} no-buffer looks",
        port.no_buffer
    );
    assert_eq!(
        port.ends[1].sent, frames,
        "every frame, in order, byte for byte"
    );
    assert_eq!((s.rx, s.passed, s.tx, s.tx_dropped), (1000, 1000, 1000, 0));
    let c = port.counts();
    assert!(c.adds_up() && c.app == 0 && c.free == c.total, "{c:?}");
}

/// TX fails after 100 frames, in the second batch of 64: the loop
/// returns the port's error with both batches counted (128 read, 100
/// sent, 28 recycled as `tx_dropped`), and every frame is back.
#[test]
fn a_tx_error_mid_batch_keeps_the_batch_counted() {
    let reg = Registry::new();
    let mut port = RingPort::new(4 * BATCH, wire(2 * BATCH));
    port.fail_after = Some(100);
    let (port, r, stats, stopped) = forward(&reg, port, LoopConfig::new(), Duration::from_secs(10));
    assert!(matches!(r, Err(RingError::Down)), "{r:?}");
    assert!(!stopped);
    let s = stats.snapshot();
    assert_eq!(
        (s.rx, s.passed, s.tx, s.tx_dropped, s.batches),
        (128, 128, 100, 28, 2),
        "{s:?}"
    );
    assert_eq!(
        s.passed,
        s.tx + s.tx_dropped,
        "forward: passed = tx + tx_dropped"
    );
    assert_eq!(port.ends[1].sent.len(), 100);
    let c = port.counts();
    assert!(c.adds_up() && c.app == 0 && c.free == c.total, "{c:?}");
}

/// A hook consumes every frame and has it sent on b through the outbox;
/// TX fails after 40: 40 are `reinjected`, 24 `refused`, counted in the
/// loop's a→b stats, and the error comes back.
#[test]
fn outbox_transmits_are_counted_also_when_tx_fails() {
    let reg = Registry::new();
    let ob = Arc::new(Outboxes::new(reg.max_workers(), 1024));
    let ob2 = ob.clone();
    reg.add_hook(
        "take:all",
        PacketKind::Ethernet,
        Dirs::BOTH,
        move |p: &mut Packet<'_>, cx: &Ctx<'_>| {
            ob2.get(cx.worker).unwrap().transmit(p.cookie(), 2).unwrap();
            Verdict::Consumed
        },
    )
    .unwrap();
    head_for(&reg, "ring-a").unwrap();
    reg.link("ring-a", Dir::In, "take:all", Placement::Prepend)
        .unwrap();
    let mut port = RingPort::new(4 * BATCH, wire(BATCH));
    port.fail_after = Some(40);
    let lc = LoopConfig {
        outboxes: Some(ob),
        ..LoopConfig::new()
    };
    let (port, r, stats, _) = forward(&reg, port, lc, Duration::from_secs(10));
    assert!(matches!(r, Err(RingError::Down)), "{r:?}");
    let s = stats.snapshot();
    assert_eq!(
        (s.rx, s.in_consumed, s.passed, s.tx, s.reinjected, s.refused),
        (64, 64, 0, 0, 40, 24),
        "{s:?}"
    );
    assert_eq!(port.ends[1].sent.len(), 40);
    let c = port.counts();
    assert!(c.adds_up() && c.app == 0 && c.held == 0, "{c:?}");
}

/// Frames a hook consumed and never gave back stay in `Port::held()`
/// after the loop returns (at most `held_limit`; the older ones were
/// evicted); the caller gives them back.
#[test]
fn held_frames_stay_held_after_the_loop() {
    let reg = Registry::new();
    reg.add_hook(
        "take:odd",
        PacketKind::Ethernet,
        Dirs::BOTH,
        |p: &mut Packet<'_>, _: &Ctx<'_>| {
            if p.frame()[21] % 2 == 1 {
                Verdict::Consumed
            } else {
                Verdict::Pass
            }
        },
    )
    .unwrap();
    let head = head_for(&reg, "ring-a").unwrap();
    reg.link("ring-a", Dir::In, "take:odd", Placement::Prepend)
        .unwrap();
    let mut port = RingPort::new(4 * BATCH, wire(500));
    let lc = LoopConfig {
        held_limit: 10,
        ..LoopConfig::new()
    };
    let mut w = reg.worker().unwrap();
    let stats = Stats::default();
    let mut lw = LoopWorker {
        reg: &reg,
        worker: &mut w,
        stats: &stats,
        back: None,
    };
    sink_loop(&mut port, (PortId::new(0), &head), &mut lw, &lc).unwrap();
    let s = stats.snapshot();
    assert_eq!((s.rx, s.passed, s.in_consumed), (500, 250, 250));
    assert_eq!(port.held().len(), 10);
    assert_eq!(s.held_evicted, 240);
    let c = port.counts();
    assert!(c.adds_up() && c.held == 10 && c.app == 0, "{c:?}");
    while let Some(f) = port.held().pop_oldest() {
        port.recycle(f);
    }
    assert_eq!(port.counts().free, port.counts().total);
}

/// A hook that pushes an 8-byte tag in front of every frame (into the
/// port's headroom) and trims 4 bytes off its end.
fn tag_and_trim(p: &mut Packet<'_>) -> bool {
    if p.adjust_head(-8).is_err() || p.adjust_tail(-4).is_err() {
        return false;
    }
    p.frame_mut()[..8].copy_from_slice(b"TAG-TAG!");
    true
}

fn tagged(f: &[u8]) -> Vec<u8> {
    let mut t = b"TAG-TAG!".to_vec();
    t.extend_from_slice(&f[..f.len() - 4]);
    t
}

/// A frame a hook grew into the headroom and trimmed goes out on the
/// other end as the hook left it, forwarded (it passed) or transmitted
/// through the outbox (it was consumed), never as it came in.
#[test]
fn frames_go_out_as_hooks_resized_them() {
    for through_outbox in [false, true] {
        let reg = Registry::new();
        let ob = Arc::new(Outboxes::new(reg.max_workers(), 1024));
        let ob2 = ob.clone();
        reg.add_hook(
            "tag:all",
            PacketKind::Ethernet,
            Dirs::BOTH,
            move |p: &mut Packet<'_>, cx: &Ctx<'_>| {
                if !tag_and_trim(p) {
                    return Verdict::Dropped;
                }
                if !through_outbox {
                    return Verdict::Pass;
                }
                ob2.get(cx.worker).unwrap().transmit_packet(p, 2).unwrap();
                Verdict::Consumed
            },
        )
        .unwrap();
        head_for(&reg, "ring-a").unwrap();
        reg.link("ring-a", Dir::In, "tag:all", Placement::Prepend)
            .unwrap();
        let frames = wire(3 * BATCH);
        let port = RingPort::new(4 * BATCH, frames.clone());
        let lc = LoopConfig {
            outboxes: Some(ob),
            ..LoopConfig::new()
        };
        let (port, r, stats, stopped) = forward(&reg, port, lc, Duration::from_secs(10));
        assert!(r.is_ok() && !stopped, "{r:?}");
        let want: Vec<Vec<u8>> = frames.iter().map(|f| tagged(f)).collect();
        assert_eq!(
            port.ends[1].sent, want,
            "through the outbox: {through_outbox}"
        );
        let s = stats.snapshot();
        assert_eq!(s.refused, 0, "{s:?}");
    }
}

/// A port without room (the `Port` defaults): a frame a hook narrowed at
/// its front cannot be sent as it is now, so it is refused and counted,
/// never sent as it came; one narrowed at its end goes out narrowed.
#[test]
fn a_port_without_room_refuses_what_it_cannot_send_as_changed() {
    let reg = Registry::new();
    reg.add_hook(
        "narrow:odd",
        PacketKind::Ethernet,
        Dirs::BOTH,
        |p: &mut Packet<'_>, _: &Ctx<'_>| {
            let odd = p.frame()[21] % 2 == 1;
            let r = if odd {
                p.adjust_head(2)
            } else {
                p.adjust_tail(-2)
            };
            assert!(
                r.is_ok()
                    && p.headroom() == usize::from(odd) * 2
                    && p.tailroom() == usize::from(!odd) * 2
            );
            Verdict::Pass
        },
    )
    .unwrap();
    head_for(&reg, "ring-a").unwrap();
    reg.link("ring-a", Dir::In, "narrow:odd", Placement::Prepend)
        .unwrap();
    let frames = wire(BATCH);
    let mut port = RingPort::new(4 * BATCH, frames.clone());
    port.roomless = true;
    let (port, r, stats, _) = forward(&reg, port, LoopConfig::new(), Duration::from_secs(10));
    assert!(r.is_ok(), "{r:?}");
    let want: Vec<Vec<u8>> = frames
        .iter()
        .filter(|f| f[21] % 2 == 0)
        .map(|f| f[..f.len() - 2].to_vec())
        .collect();
    assert_eq!(port.ends[1].sent, want);
    let s = stats.snapshot();
    assert_eq!(
        (s.refused, s.tx),
        (BATCH as u64 / 2, BATCH as u64 / 2),
        "{s:?}"
    );
    let c = port.counts();
    assert!(c.adds_up() && c.app == 0, "{c:?}");
}
