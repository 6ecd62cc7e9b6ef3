//! xdp-tools' `xdpfilt_alw_udp` (xdp-filter/xdpfilt_prog.h with
//! `FILT_MODE_UDP`, allow mode, xdp-tools 1.3.1 as Debian installs it)
//! written in Rust: the native side of `benches/xdp_filter.rs`, and the
//! model `tests/native_xdpfilt.rs` checks against the object, action for
//! action and counter for counter.
//!
//! The same logic, step by step:
//! - Ethernet header (14 bytes) or `XDP_ABORTED`; then up to four VLAN
//!   tags (802.1Q or 802.1ad), the walk stopping early (no abort) at a
//!   tag that does not fit in the frame;
//! - IPv4: 20 bytes or abort; `ihl * 4` bytes (not checked against 20)
//!   in the frame or abort; the protocol;
//! - IPv6: 40 bytes or abort; up to six extension headers skipped
//!   (hop-by-hop, destination options, routing, mobility: `(len + 1) * 8`;
//!   AH: `(len + 2) * 4`; fragment: 8), each needing its 2-byte
//!   next-header/length pair in the frame, also the first non-extension
//!   one; six extensions and no upper layer: abort;
//! - any other EtherType: `XDP_PASS`;
//! - UDP: 8 bytes or abort; a length field below 8: abort; the
//!   destination port's entry in the port map (indexed by the port as
//!   the frame holds it, network order) with the `DST|UDP` flags: drop
//!   and count (`+= 1 << 6`), else the source port with `SRC|UDP`;
//! - the per-action counters (packets, bytes) as `xdp_stats_map` keeps
//!   them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use pfil::{Ctx, Filter, Packet, Verdict};

/// `XDP_ABORTED`.
pub const ABORTED: u32 = 0;
/// `XDP_DROP`.
pub const DROP: u32 = 1;
/// `XDP_PASS`.
pub const PASS: u32 = 2;
/// A port map entry's flags (xdp-filter's common_kern_user.h).
pub const FLAG_SRC: u64 = 1;
/// Destination port.
pub const FLAG_DST: u64 = 2;
/// UDP.
pub const FLAG_UDP: u64 = 8;
const COUNTER_SHIFT: u32 = 6;

/// One worker's port map and counters.
pub struct Native {
    /// Flags and hit counter per port (network order), as
    /// `filter_ports`.
    pub ports: Vec<u64>,
    /// Packets and bytes per XDP action, as `xdp_stats_map`.
    pub stats: [[u64; 2]; 5],
}

impl Default for Native {
    fn default() -> Native {
        Native {
            ports: vec![0; 65536],
            stats: [[0; 2]; 5],
        }
    }
}

impl Native {
    /// The port map index of `port`: the 16-bit field as the frame holds
    /// it, read little-endian (what the eBPF program's `u16` load gives).
    pub fn key(port: u16) -> usize {
        usize::from(port.to_be())
    }

    /// Decide on frame `f`, count it, return the XDP action.
    // Not inlined: a function call as the hook's `filter` is, and
    // callgrind can count its instructions apart.
    #[inline(never)]
    pub fn filter(&mut self, f: &[u8]) -> u32 {
        let ports = &mut self.ports;
        let action = decide(f, |i, mask| {
            let v = &mut ports[i];
            let hit = *v & mask == mask;
            if hit {
                *v += 1 << COUNTER_SHIFT;
            }
            hit
        });
        let s = &mut self.stats[action as usize];
        s[0] += 1;
        s[1] += f.len() as u64;
        action
    }
}

/// One worker's maps as a hook keeps them: shared with the control side,
/// so atomics, read and written with plain (relaxed) loads and stores as
/// the eBPF program's per-CPU map accesses are.
struct HookWorker {
    ports: Box<[AtomicU64]>,
    stats: [[AtomicU64; 2]; 5],
}

/// The same filter as a pfil hook ([`Filter`]): per-worker port maps and
/// counters indexed by [`Ctx::worker`] (the per-CPU maps of the eBPF
/// program), the frame from [`Packet::frame`], the action as a
/// [`Verdict`] (`XDP_PASS` passes, the others drop). What a native filter
/// written for pfil with xdp-filter's logic costs, called the way the
/// chain calls a hook.
pub struct NativeHook {
    workers: Box<[CachePadded<HookWorker>]>,
}

impl NativeHook {
    /// A hook for `workers` workers, its port maps empty.
    pub fn new(workers: usize) -> NativeHook {
        let workers = (0..workers)
            .map(|_| {
                CachePadded::new(HookWorker {
                    ports: (0..65536).map(|_| AtomicU64::new(0)).collect(),
                    stats: Default::default(),
                })
            })
            .collect();
        NativeHook { workers }
    }

    /// Set port `port`'s (host order) flags in every worker's map.
    pub fn set_port(&self, port: u16, flags: u64) {
        for w in self.workers.iter() {
            w.ports[Native::key(port)].store(flags, Relaxed);
        }
    }

    // Read by tests/native_xdpfilt.rs, not by the bench.
    #[allow(dead_code)]
    /// Worker `w`'s packets and bytes for action `a`, and its port map
    /// entry at index `i`.
    pub fn counters(&self, w: usize, a: usize, i: usize) -> ([u64; 2], u64) {
        let w = &self.workers[w];
        let s = &w.stats[a];
        (
            [s[0].load(Relaxed), s[1].load(Relaxed)],
            w.ports[i].load(Relaxed),
        )
    }
}

impl NativeHook {
    #[inline(always)]
    fn run(w: &HookWorker, pkt: &Packet<'_>) -> Verdict {
        let f = pkt.frame();
        let action = decide(f, |i, mask| {
            let v = &w.ports[i];
            let x = v.load(Relaxed);
            let hit = x & mask == mask;
            if hit {
                v.store(x + (1 << COUNTER_SHIFT), Relaxed);
            }
            hit
        });
        let s = &w.stats[action as usize];
        s[0].store(s[0].load(Relaxed) + 1, Relaxed);
        s[1].store(s[1].load(Relaxed) + f.len() as u64, Relaxed);
        if action == PASS {
            Verdict::Pass
        } else {
            Verdict::Dropped
        }
    }
}

impl Filter for NativeHook {
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        match self.workers.get(ctx.worker) {
            Some(w) => Self::run(w, pkt),
            None => Verdict::Dropped,
        }
    }

    /// The worker's maps found once a batch.
    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        let Some(w) = self.workers.get(ctx.worker) else {
            for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
                p.set_verdict(Verdict::Dropped);
            }
            return;
        };
        for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
            let v = Self::run(w, p);
            p.set_verdict(v);
        }
    }

    fn batched(&self) -> bool {
        true
    }
}

/// xdp-filter's decision on frame `f`; `hit(index, mask)` tests a port
/// map entry for the flags and, on a match, counts it.
#[inline(always)]
fn decide(f: &[u8], mut hit: impl FnMut(usize, u64) -> bool) -> u32 {
    let Some(eth) = f.get(..14) else {
        return ABORTED;
    };
    let mut proto = u16::from_be_bytes([eth[12], eth[13]]);
    let mut off = 14;
    for _ in 0..4 {
        if proto != 0x8100 && proto != 0x88a8 {
            break;
        }
        let Some(tag) = f.get(off..off + 4) else {
            break;
        };
        proto = u16::from_be_bytes([tag[2], tag[3]]);
        off += 4;
    }
    let l4 = match proto {
        0x0800 => {
            let Some(ip) = f.get(off..off + 20) else {
                return ABORTED;
            };
            let hl = usize::from(ip[0] & 0xf) * 4;
            if off + hl > f.len() {
                return ABORTED;
            }
            off += hl;
            ip[9]
        }
        0x86dd => match ipv6_upper(f, off) {
            Some((next, at)) => {
                off = at;
                next
            }
            None => return ABORTED,
        },
        _ => return PASS,
    };
    if l4 != 17 {
        return PASS;
    }
    let Some(udp) = f.get(off..off + 8) else {
        return ABORTED;
    };
    if u16::from_be_bytes([udp[4], udp[5]]) < 8 {
        return ABORTED;
    }
    for (port, mask) in [
        ([udp[2], udp[3]], FLAG_DST | FLAG_UDP),
        ([udp[0], udp[1]], FLAG_SRC | FLAG_UDP),
    ] {
        if hit(usize::from(u16::from_le_bytes(port)), mask) {
            return DROP;
        }
    }
    PASS
}

/// The IPv6 header at `off`: its upper-layer protocol and where that
/// header starts, after skipping up to six extension headers; `None`
/// where xdp-filter aborts.
#[inline(always)]
fn ipv6_upper(f: &[u8], off: usize) -> Option<(u8, usize)> {
    let mut next = f.get(off..off + 40)?[6];
    let mut off = off + 40;
    for _ in 0..6 {
        let h = f.get(off..off + 2)?;
        let len = usize::from(h[1]);
        off += match next {
            0 | 60 | 43 | 135 => (len + 1) * 8,
            51 => (len + 2) * 4,
            44 => 8,
            _ => return Some((next, off)),
        };
        next = h[0];
    }
    None
}
