//! What the loops are told: stop flag, held frames, idling; and what a
//! generator builds.

use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::outbox::Outboxes;
use crate::port::BATCH;

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
    /// [`crate::Stats::held_evicted`]. The spawners reserve this many frames of
    /// every worker's UMEM; a port's pool must hold more than this plus its
    /// fill depth (see the crate docs). 0: a consumed frame goes back after
    /// its batch (for hooks that copy what they keep).
    pub held_limit: usize,
    /// The outboxes hooks give consumed frames back through, indexed by
    /// worker index; `None`: no hook gives frames back (they stay held
    /// until evicted).
    pub outboxes: Option<Arc<Outboxes>>,
    /// A generator that has made no progress (no frame free, no completion,
    /// no window credit) for this long stops with [`Error::Stalled`]
    /// instead of waiting forever, in milliseconds.
    pub stall_ms: u64,
    /// How long an idle loop sleeps in poll(2), in milliseconds (a
    /// negative value is taken as 0: the loops never wait without bound).
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
    /// A config with a fresh stop flag and the defaults: `held_limit`
    /// [`DEFAULT_HELD_LIMIT`] (256), no outboxes, `stall_ms` 5000,
    /// `idle_poll_ms` 1, `spin_us` 0 (sleep as soon as RX is empty),
    /// `spin_pauses` 1024.
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
pub(crate) struct Idle {
    spin: Duration,
    pauses: u32,
    since: Option<Instant>,
    polls: u32,
}

impl Idle {
    pub(crate) fn new(lc: &LoopConfig) -> Idle {
        Idle {
            spin: Duration::from_micros(u64::from(lc.spin_us)),
            pauses: lc.spin_pauses,
            since: None,
            polls: 0,
        }
    }

    /// Frames arrived: the next empty ring starts a new spin.
    #[inline]
    pub(crate) fn busy(&mut self) {
        self.since = None;
    }

    /// Pause between looks at the ring (when spinning): each look pulls
    /// the line the kernel's producer writes, and the kernel pays to take
    /// it back.
    #[inline]
    pub(crate) fn pause(&self) {
        if self.spin.is_zero() {
            return;
        }
        for _ in 0..self.pauses {
            std::hint::spin_loop();
        }
    }

    /// The rings were empty: `true` when it is time to sleep in poll(2).
    #[inline]
    pub(crate) fn sleep(&mut self) -> bool {
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

/// How far, in milliseconds of its rate, a paced generator catches up
/// after falling behind ([`GenConfig::budget`]).
pub const MAX_CATCH_UP_MS: u64 = 1;

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
    /// Frames to send as they are instead of built UDP frames (a capture
    /// replayed: `pfild --pcap`), in order, round robin; `size`, the
    /// addresses and the ports are then unused.
    pub replay: Option<Arc<Vec<Vec<u8>>>>,
    /// Traffic of this many UDP flows in both directions (0: off; the
    /// synthetic port only, see [`crate::flows`]): first one frame each
    /// way of every flow, in order (the flows set up), then the flows in
    /// a scattered order, each a frame each way (established traffic).
    pub flows: u32,
    /// The protocol of the [`flows`](Self::flows): UDP, or TCP (a
    /// handshake, then ACKs each way; the templates are TCP frames).
    pub flow_proto: crate::flows::FlowProto,
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
            replay: None,
            flows: 0,
            flow_proto: crate::flows::FlowProto::Udp,
        }
    }
}

impl GenConfig {
    /// How many of the next `BATCH` frames may be built now, given `built`
    /// so far since `start`: bounded by `count` and by `rate`. A generator
    /// that fell behind its rate (descheduled, or its TX ring full) catches
    /// up by at most [`MAX_CATCH_UP_MS`] of frames (at least a batch): the
    /// older debt is forgiven by moving `start` on, so a stall is never
    /// followed by a burst that a receiver's rings could not hold. The
    /// rate is a ceiling; `count` stays exact.
    pub fn budget(&self, built: u64, start: &mut Instant) -> u64 {
        let mut allowed = BATCH as u64;
        if self.count != 0 {
            allowed = allowed.min(self.count - built.min(self.count));
        }
        if self.rate != 0 {
            let due = (start.elapsed().as_secs_f64() * self.rate as f64) as u64;
            let mut debt = due.saturating_sub(built);
            let cap = (self.rate * MAX_CATCH_UP_MS / 1000).max(BATCH as u64);
            if debt > cap {
                let forgiven = (debt - cap) as f64 / self.rate as f64;
                *start += Duration::from_secs_f64(forgiven);
                debt = cap;
            }
            allowed = allowed.min(debt);
        }
        allowed
    }

    /// The frames to send, round robin: the [`replay`](Self::replay)
    /// frames (shared, not copied: a capture is held once), or one UDP
    /// frame per destination port. An empty capture gives no frame (a
    /// replay of it plays nothing).
    ///
    /// # Errors
    /// [`Error::Config`] for a size that does not fit headers or a frame,
    /// or a captured frame that is empty or longer than `max`.
    pub fn templates(&self, max: usize) -> Result<Arc<Vec<Vec<u8>>>> {
        const HDR: usize = 14 + 20 + 8;
        if let Some(frames) = &self.replay {
            if let Some((i, f)) = frames
                .iter()
                .enumerate()
                .find(|(_, f)| f.len() > max || f.is_empty())
            {
                return Err(Error::Config(format!(
                    "frame {} of the capture has {} bytes: a port takes 1 to {max}",
                    i + 1,
                    f.len()
                )));
            }
            return Ok(frames.clone());
        }
        let size = self.size.max(60);
        if size > max {
            return Err(Error::Config(format!(
                "frame size {size} exceeds the frame size {max} of the port"
            )));
        }
        if self.dst_ports.is_empty() {
            return Err(Error::Config("no destination port".into()));
        }
        // TCP flows: a segment without data (the flows write sequence
        // numbers and flags), the frame padded to `size` after it
        // (padding, not payload: the IP length ends at the TCP header).
        let tcp = self.flows > 0 && self.flow_proto == crate::flows::FlowProto::Tcp;
        let payload = if tcp {
            Vec::new()
        } else {
            vec![0xa5u8; size - HDR]
        };
        let frames: Result<Vec<Vec<u8>>> = self
            .dst_ports
            .iter()
            .map(|&dp| {
                let b = etherparse::PacketBuilder::ethernet2(self.src_mac, self.dst_mac).ipv4(
                    self.src_ip.octets(),
                    self.dst_ip.octets(),
                    64,
                );
                let mut v = Vec::with_capacity(size);
                let built = if tcp {
                    b.tcp(self.src_port, dp, 0, 65535).write(&mut v, &payload)
                } else {
                    b.udp(self.src_port, dp).write(&mut v, &payload)
                };
                let proto = if tcp { "TCP" } else { "UDP" };
                built.map_err(|e| Error::Config(format!("building the {proto} frame: {e}")))?;
                v.resize(v.len().max(size), 0);
                Ok(v)
            })
            .collect();
        Ok(Arc::new(frames?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generator a second behind its rate catches up by at most
    /// `MAX_CATCH_UP_MS` of frames, then paces again; `count` still bounds.
    #[test]
    fn a_late_generator_catches_up_by_a_bounded_burst() {
        let g = GenConfig {
            count: 100_000,
            rate: 40_000,
            ..GenConfig::default()
        };
        let mut start = Instant::now() - Duration::from_secs(1);
        let mut built = 0;
        let mut burst = 0;
        let t0 = Instant::now();
        loop {
            let n = g.budget(built, &mut start);
            if n == 0 {
                break;
            }
            assert!(n <= BATCH as u64, "{n} frames at once");
            built += n;
            burst += n;
        }
        // 1 ms at 40 kpps is 40 frames: the cap is one batch; the frames
        // the loop's own time pays for come on top (a loaded machine
        // runs it for tens of microseconds: a frame or two; the whole
        // debt would be 40 000).
        let paid = (t0.elapsed().as_secs_f64() * g.rate as f64).ceil() as u64;
        assert!(
            (BATCH as u64..=BATCH as u64 + paid).contains(&burst),
            "a {burst}-frame burst after a stall ({paid} paid for meanwhile)"
        );
        assert!(
            start.elapsed() < Duration::from_millis(100),
            "the debt was forgiven"
        );
        let g = GenConfig {
            count: 10,
            rate: 0,
            ..GenConfig::default()
        };
        let mut start = Instant::now();
        assert_eq!(g.budget(0, &mut start), 10);
        assert_eq!(g.budget(10, &mut start), 0);
    }
}
