//! The synthetic port: frames built in memory from a [`GenConfig`], run
//! through the same loops as any port. Needs no privileges, so
//! `pfild --synthetic` and tests exercise the datapath anywhere.
//!
//! A synthetic port has one or two endpoints: endpoint 0 is the source
//! (its RX builds frames, `gen.count` of them, paced by `gen.rate`),
//! endpoint 1 (if any) receives nothing; TX on either endpoint counts the
//! frames as sent and recycles them. So [`sink_loop`] on endpoint 0 runs
//! an in head over built frames, and [`forward_loop`] from 0 to 1 runs an
//! in head, then an out head, then "sends" what passed. It is also the
//! smallest complete [`Port`] implementation: a template for new ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pfil::{Packet, Registry, Worker};

use crate::config::{GenConfig, LoopConfig};
use crate::error::{Error, Result};
use crate::loops::{forward_loop, sink_loop, LoopWorker};
use crate::port::{Batch, FrameCounts, Held, Origin, Port, PortFrame, PortId, BATCH};
use crate::spawn::{head_for, start, take_workers, Body, Opener, Running};
use crate::stats::Stats;

/// Frame buffer size of the synthetic port (and its smallest: a port
/// replaying a capture with longer frames has buffers as long as its
/// longest frame, up to [`MAX_REPLAY_FRAME`]).
pub const SYNTHETIC_FRAME: usize = 2048;

/// Bytes of every synthetic (and replayed) frame's buffer before its
/// packet: the kernel's XDP headroom (`XDP_PACKET_HEADROOM`), so hooks can
/// push headers (`bpf_xdp_adjust_head` with a negative delta, `_meta`).
pub const SYNTHETIC_HEADROOM: usize = 256;

/// Bytes of every synthetic frame's buffer after its longest packet
/// (a shorter packet has the rest of [`SYNTHETIC_FRAME`] too), so hooks
/// can grow the tail (`bpf_xdp_adjust_tail`).
pub const SYNTHETIC_TAILROOM: usize = 256;

/// The longest captured frame a synthetic port replays: 256 KiB,
/// libpcap's largest snap length for Ethernet (`MAXIMUM_SNAPLEN`), so
/// every frame libpcap reads from a capture fits: GRO/TSO host captures
/// (64 KiB and headers), BIG TCP frames (over 64 KiB), jumbo frames.
/// Longer frames are refused with an error naming this cap. A port's
/// buffers are as long as its longest frame, not this.
pub const MAX_REPLAY_FRAME: usize = 262_144;

/// One frame of a synthetic port: it owns its buffer, so no two frames
/// share bytes (the port's unsafe code is two local shortcuts: packets
/// built without clamps, batches moved to the free list whole).
#[derive(Debug)]
#[must_use = "a dropped frame is lost to the pool: tx, recycle or hold it"]
pub struct SyntheticFrame {
    buf: Box<[u8]>,
    /// Where the packet starts in `buf` ([`SYNTHETIC_HEADROOM`] when
    /// built, 0 when written through `buffer` and `set_len`).
    off: u32,
    len: u32,
    /// Its address in the pool (its index times the port's frame size).
    addr: u32,
    /// The port whose pool it belongs to.
    pool: u32,
}

static NEXT_POOL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

impl PortFrame for SyntheticFrame {
    #[inline]
    fn addr(&self) -> u64 {
        u64::from(self.addr)
    }
}

/// A synthetic port on one worker: a pool of in-memory frames.
pub struct SyntheticPort {
    names: Vec<String>,
    pool: u32,
    origin: Origin,
    templates: Arc<Vec<Vec<u8>>>,
    next: usize,
    /// Many-flow traffic ([`GenConfig::flows`]): rewrites each frame.
    flows: Option<crate::flows::FlowGen>,
    /// Bytes of every frame buffer.
    frame_size: usize,
    /// Frames of the pool not allocated yet (made on first use, so a pool
    /// sized for the worst case costs only the frames a run uses).
    unborn: usize,
    /// Count and rate of the frames to build ([`GenConfig::budget`]).
    pace: GenConfig,
    count: u64,
    built: u64,
    start: Option<Instant>,
    free: Vec<SyntheticFrame>,
    held: Held<SyntheticFrame>,
    total: u64,
    /// Frames given to the loops and not back yet (held ones included).
    out: u64,
    sent: u64,
    /// Bytes of the packets sent, as they were when sent.
    sent_bytes: u64,
}

impl SyntheticPort {
    /// A port that builds the frames `gen` describes (`gen.count` of them,
    /// 0: without end; at `gen.rate`), with endpoints named `names` (one or
    /// two), reporting `origin` as the frames' interface and queue. Its
    /// pool holds `frames` frames (at least four batches; at most 2²⁰, and
    /// fewer for frames over 4 KiB so addresses stay below 2³²), each
    /// [`SYNTHETIC_FRAME`] bytes, or as long as the longest frame of a
    /// capture replayed ([`GenConfig::replay`], up to
    /// [`MAX_REPLAY_FRAME`]). Frames are allocated on first use. An empty
    /// capture makes a port whose input has ended at once.
    ///
    /// # Errors
    /// [`Error::Config`] for a frame that does not fit (a generated frame
    /// over [`SYNTHETIC_FRAME`], a captured one over
    /// [`MAX_REPLAY_FRAME`] or empty) or no endpoint.
    pub fn new(
        gen: &GenConfig,
        names: &[&str],
        origin: Origin,
        frames: usize,
    ) -> Result<SyntheticPort> {
        if names.is_empty() || names.len() > 2 {
            return Err(Error::Config(format!(
                "a synthetic port has one or two endpoints, not {}",
                names.len()
            )));
        }
        let max = if gen.replay.is_some() {
            MAX_REPLAY_FRAME
        } else {
            SYNTHETIC_FRAME
        };
        let templates = gen.templates(max)?;
        let frame_size = templates
            .iter()
            .map(Vec::len)
            .fold(SYNTHETIC_FRAME, usize::max)
            + SYNTHETIC_HEADROOM
            + SYNTHETIC_TAILROOM;
        // Addresses stay below 2^32 (cookies): at most 2^20 frames of 2 KiB,
        // fewer larger ones.
        let most = ((1usize << 32) / frame_size).min(1 << 20);
        let frames = frames.clamp(4 * BATCH, most);
        let pool = NEXT_POOL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(SyntheticPort {
            names: names.iter().map(|&n| n.to_owned()).collect(),
            pool,
            origin,
            flows: (gen.flows > 0 && gen.replay.is_none()).then(|| {
                let port = gen.dst_ports.first().copied().unwrap_or(9);
                crate::flows::FlowGen::new(
                    gen.flows,
                    gen.src_ip.octets(),
                    gen.dst_ip.octets(),
                    port,
                    gen.flow_proto,
                )
            }),
            templates,
            next: 0,
            frame_size,
            unborn: frames,
            pace: gen.clone(),
            count: gen.count,
            built: 0,
            start: None,
            free: Vec::with_capacity(frames),
            held: Held::with_capacity(frames.min(4096)),
            total: frames as u64,
            out: 0,
            sent: 0,
            sent_bytes: 0,
        })
    }

    /// Frames built so far.
    pub fn built(&self) -> u64 {
        self.built
    }

    /// Frames sent (TX) so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Bytes of the packets sent (TX) so far, each as long as it was when
    /// sent (a hook may have grown or narrowed it).
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes
    }

    /// A free frame: from the pool, or a new one while the pool has
    /// frames not made yet.
    #[inline]
    fn take_free(&mut self) -> Option<SyntheticFrame> {
        if let Some(f) = self.free.pop() {
            return Some(f);
        }
        self.unborn = self.unborn.checked_sub(1)?;
        // The frames are numbered from 0 as they are made; `new` bounds
        // their count so the address fits 32 bits.
        let made = self.total as usize - self.unborn - 1;
        Some(SyntheticFrame {
            buf: vec![0u8; self.frame_size].into_boxed_slice(),
            off: 0,
            len: 0,
            addr: (made * self.frame_size) as u32,
            pool: self.pool,
        })
    }

    /// How many frames may be built now: bounded by the count and the rate.
    fn due(&mut self, want: u64) -> u64 {
        let start = self.start.get_or_insert_with(Instant::now);
        self.pace.budget(self.built, start).min(want)
    }
}

impl Port for SyntheticPort {
    type Frame = SyntheticFrame;
    type Error = Error;
    const BUILDS_FRAMES: bool = true;

    fn ports(&self) -> usize {
        self.names.len()
    }

    fn origin(&self, _port: PortId) -> Origin {
        self.origin
    }

    fn name(&self, port: PortId) -> &str {
        self.names.get(port.index()).map_or("", String::as_str)
    }

    fn frame_size(&self) -> usize {
        self.frame_size
    }

    fn rx(&mut self, port: PortId, out: &mut Batch<SyntheticFrame>) -> usize {
        if port.index() != 0 || self.templates.is_empty() {
            return 0;
        }
        let want = self.due(out.remaining_capacity() as u64);
        let mut n = 0;
        while n < want {
            let Some(mut f) = self.take_free() else { break };
            let t = &self.templates[self.next];
            // Every template fits after the headroom (`new` sized the
            // buffers for the longest); `get_mut` keeps it panic-free.
            let Some(b) = f
                .buf
                .get_mut(SYNTHETIC_HEADROOM..SYNTHETIC_HEADROOM + t.len())
            else {
                self.free.push(f);
                break;
            };
            b.copy_from_slice(t);
            f.off = SYNTHETIC_HEADROOM as u32;
            f.len = t.len() as u32;
            match &mut self.flows {
                Some(g) => g.write(b),
                None => self.next = (self.next + 1) % self.templates.len(),
            }
            out.push(f);
            n += 1;
        }
        self.built += n;
        self.out += n;
        n as usize
    }

    fn rx_ended(&self, port: PortId) -> bool {
        port.index() != 0
            || self.templates.is_empty()
            || (self.count != 0 && self.built >= self.count)
    }

    fn poll_rx(&mut self, _ports: &[PortId], timeout_ms: i32) -> bool {
        // Only the rate (or a pool emptied by held frames) makes RX come
        // back empty before the count. Paced with a free frame: sleep
        // until the next frame is due (a 10 frames/s port sleeps, where
        // 50 µs naps took 15 % of a core); otherwise a little.
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        let mut wait = Duration::from_micros(50);
        if let (Some(start), true) = (self.start, self.pace.rate != 0) {
            if !self.free.is_empty() || self.unborn > 0 {
                let due = Duration::from_secs_f64((self.built + 1) as f64 / self.pace.rate as f64);
                wait = due.saturating_sub(start.elapsed());
            }
        }
        std::thread::sleep(wait.min(timeout));
        true
    }

    fn tx(&mut self, _port: PortId, frames: &mut Batch<SyntheticFrame>) -> Result<usize> {
        let n = frames.len();
        for f in frames.drain(..) {
            self.sent_bytes += u64::from(f.len);
            self.recycle(f);
        }
        self.sent += n as u64;
        Ok(n)
    }

    fn kick_tx(&mut self, _port: PortId, _max_kicks: u32) -> Result<u32> {
        Ok(0)
    }

    fn flush(&mut self, _port: PortId) -> Result<()> {
        Ok(())
    }

    fn reap(&mut self) -> usize {
        0
    }

    fn alloc(&mut self) -> Option<SyntheticFrame> {
        let mut f = self.take_free()?;
        f.off = 0;
        f.len = 0;
        self.out += 1;
        Some(f)
    }

    fn recycle(&mut self, frame: SyntheticFrame) {
        // A frame of another port's pool is dropped (its memory freed), so
        // the counts of this one stay exact.
        if frame.pool != self.pool {
            debug_assert!(false, "a loop held a frame of another synthetic port");
            return;
        }
        self.out -= 1;
        self.free.push(frame);
    }

    fn recycle_all(&mut self, frames: &mut Batch<SyntheticFrame>) {
        let pool = self.pool;
        if frames.iter().any(|f| f.pool != pool) {
            // Not the loops' case: frame by frame, dropping strangers.
            for f in frames.drain(..) {
                self.recycle(f);
            }
            return;
        }
        // A sink's whole batch, every frame ours, moved in one copy: frame
        // by frame (`push`, or `extend`, which cannot tell an `ArrayVec`'s
        // length in advance) it cost 30 instructions a frame.
        let n = frames.len();
        self.free.reserve(n);
        let at = self.free.len();
        // SAFETY: `reserve` made room for `n` more frames after the `at`
        // the free list holds; the `n` frames of `frames` are copied there
        // bitwise (two distinct allocations: no overlap), then the free
        // list counts them and `frames` forgets them (`set_len(0)`: they
        // are not dropped there), so each frame has one owner throughout.
        unsafe {
            std::ptr::copy_nonoverlapping(frames.as_ptr(), self.free.as_mut_ptr().add(at), n);
            self.free.set_len(at + n);
            frames.set_len(0);
        }
        self.out -= n as u64;
    }

    fn bytes<'a>(&'a self, frame: &'a mut SyntheticFrame) -> &'a mut [u8] {
        let (off, len) = (frame.off as usize, frame.len as usize);
        frame.buf.get_mut(off..off + len).unwrap_or_default()
    }

    #[inline(always)]
    fn room<'a>(&'a self, frame: &'a mut SyntheticFrame) -> (&'a mut [u8], usize, usize) {
        (&mut frame.buf[..], frame.off as usize, frame.len as usize)
    }

    #[inline(always)]
    fn packet<'a>(&'a self, frame: &'a mut SyntheticFrame) -> Packet<'a> {
        let (off, len) = (frame.off as usize, frame.len as usize);
        // SAFETY: every write of a frame's `off` and `len` keeps `off <=
        // 65 535` and `off + len <= buf.len()`: `take_free` and `alloc` set
        // both to 0, `rx` to the headroom and a template it fitted after it
        // (`get_mut`), `set_len` to 0 and a length it checked, `set_span`
        // to a span it checked; the fields are private to this module.
        unsafe { Packet::in_buffer_unchecked(&mut frame.buf[..], off, len) }
    }

    fn set_span(&self, frame: &mut SyntheticFrame, start: usize, len: usize) -> bool {
        // A packet keeps its headroom exact up to 64 KiB - 1 (`packet`
        // relies on it): a span farther in is refused.
        if start > usize::from(u16::MAX)
            || start
                .checked_add(len)
                .is_none_or(|end| end > frame.buf.len())
        {
            return false;
        }
        frame.off = start as u32;
        frame.len = len as u32;
        true
    }

    fn buffer<'a>(&'a self, frame: &'a mut SyntheticFrame) -> &'a mut [u8] {
        &mut frame.buf[..]
    }

    fn set_len(&self, frame: &mut SyntheticFrame, len: usize) -> bool {
        if len > frame.buf.len() {
            return false;
        }
        frame.off = 0;
        frame.len = len as u32;
        true
    }

    fn held(&mut self) -> &mut Held<SyntheticFrame> {
        &mut self.held
    }

    fn counts(&self) -> FrameCounts {
        let held = self.held.len() as u64;
        FrameCounts {
            free: (self.free.len() + self.unborn) as u64,
            app: self.out.saturating_sub(held),
            held,
            total: self.total,
            ..FrameCounts::default()
        }
    }
}

impl std::fmt::Debug for SyntheticPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyntheticPort")
            .field("names", &self.names)
            .field("origin", &self.origin)
            .field("built", &self.built)
            .field("counts", &self.counts())
            .finish()
    }
}

/// What a synthetic worker hands back when it ends.
#[derive(Clone, Debug)]
pub struct SyntheticReport {
    /// The worker's queue number.
    pub queue: u32,
    /// Frames it built.
    pub built: u64,
    /// Where every frame of its pool was at the end.
    pub counts: FrameCounts,
}

/// Workers of synthetic ports.
pub type SyntheticRunning = Running<SyntheticReport, Error>;

/// `workers` threads each build `gen.count` frames in memory (0: until
/// stopped) and run them through head `ifname_in` In and, if given, head
/// `ifname_out` Out (the forward loop from the source endpoint to the
/// other), with the loops of every port. No privileges needed.
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
) -> Result<SyntheticRunning> {
    let head_in = head_for(reg, ifname_in)?;
    let head_out = ifname_out.map(|n| head_for(reg, n)).transpose()?;
    let n = workers.max(1);
    let ws = take_workers(reg, n as usize)?;
    let frames = 4 * BATCH + lc.held_limit;
    let mut openers: Vec<Opener<SyntheticReport, Error>> = Vec::new();
    let mut stats = Vec::new();
    for q in 0..n {
        let st = Arc::new(Stats::default());
        stats.push(st.clone());
        let (reg, gen) = (reg.clone(), gen.clone());
        let (hi, ho) = (head_in.clone(), head_out.clone());
        let names: Vec<String> = std::iter::once(ifname_in)
            .chain(ifname_out)
            .map(str::to_owned)
            .collect();
        openers.push(Box::new(move || {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let origin = Origin {
                ifindex: 0,
                queue: q,
            };
            let mut port = SyntheticPort::new(&gen, &names, origin, frames)?;
            Ok(Box::new(move |w: &mut Worker, lc: &LoopConfig| {
                let mut lw = LoopWorker {
                    reg: &reg,
                    worker: w,
                    stats: &st,
                    back: None,
                };
                let (src, dst) = (PortId::new(0), PortId::new(1));
                let r = match &ho {
                    Some(ho) => forward_loop(&mut port, (src, dst), (&hi, ho), &mut lw, lc),
                    None => sink_loop(&mut port, (src, &hi), &mut lw, lc),
                };
                let report = SyntheticReport {
                    queue: q,
                    built: port.built(),
                    counts: port.counts(),
                };
                (Some(report), r)
            }) as Body<SyntheticReport, Error>)
        }));
    }
    start("synthetic", ws, openers, stats, lc)
}

#[cfg(test)]
mod tests;
