//! The kind of each packet, for the allow-list: its protocol and class,
//! and for TCP what a reader of the capture sees of its flow (the test's
//! own bookkeeping of each direction: sent, acknowledged, its window),
//! so that a documented difference is recognised in a capture it was not
//! written for.

use std::collections::{HashMap, HashSet};

/// A direction of a flow: addresses and ports (an echo's identifier),
/// source first.
pub type Way = Vec<u8>;

/// What the test knows of the flows of a case: per TCP direction, the
/// directions seen (a SYN-ACK before any SYN is not seen: it answers
/// nothing), the furthest sequence sent (the data's end) and
/// acknowledgement, the right edge of the window it advertised, its
/// window scale and ISNs; the flows whose first answer was a RST or not
/// a SYN-ACK; each echo request's code; and the flows (either direction)
/// on which a difference by design was allowed.
#[derive(Default)]
pub struct Ways {
    seen: HashSet<Way>,
    sent: HashMap<Way, u32>,
    acked: HashMap<Way, u32>,
    edge: HashMap<Way, u32>,
    wscale: HashMap<Way, Option<u8>>,
    syn: HashMap<Way, u32>,
    synack: HashMap<Way, u32>,
    first_rst: HashSet<Way>,
    no_synack: HashSet<Way>,
    echo_code: HashMap<Way, u8>,
    /// Flows (their lesser direction) where a difference by design was
    /// allowed: later packets are not comparable.
    pub diverged: HashSet<Way>,
}

/// `a` is after `b` in sequence space (RFC 793's comparison).
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Linux's `MAXACKWINDOW` floor (`nf_conntrack_proto_tcp.c`): an ACK
/// more than this below the data sent is under the lower bound.
const MAX_ACK_WINDOW: u32 = 66_000;

/// The flag combinations Linux's `tcp_valid_flags` takes (of FIN, SYN,
/// RST, ACK and URG; PSH, ECE and CWR aside): SYN, SYN-URG, SYN-ACK,
/// RST, RST-ACK, FIN-ACK, FIN-ACK-URG, ACK, ACK-URG.
fn linux_valid_flags(fl: u8) -> bool {
    matches!(
        fl & 0x37,
        0x02 | 0x22 | 0x12 | 0x04 | 0x14 | 0x11 | 0x31 | 0x10 | 0x30
    )
}

/// Flag combinations pf's normaliser and Linux's table judge apart: a
/// SYN with PSH or URG (pf: bad), SYN-ACK-URG, RST-ACK-URG, FIN-RST-ACK
/// (Linux: invalid).
fn flags_judged_apart(fl: u8) -> bool {
    let f = fl & 0x3f;
    (f & 0x02 != 0 && f & 0x10 == 0 && f & 0x28 != 0) || matches!(f & 0x37, 0x32 | 0x34 | 0x15)
}

impl Ways {
    /// This segment's (or echo's) direction and its reverse, or `None`.
    pub fn of(f: &[u8]) -> Option<(Way, Way)> {
        let (alen, src, l4) = match u16::from_be_bytes([*f.get(12)?, *f.get(13)?]) {
            0x0800 if *f.get(23)? == 6 => (4, 26, 14 + usize::from(f[14] & 0xf) * 4),
            0x86dd if *f.get(20)? == 6 => (16, 22, 54),
            _ => return None,
        };
        let (a, b) = (f.get(src..src + alen)?, f.get(src + alen..src + 2 * alen)?);
        let (sp, dp) = (f.get(l4..l4 + 2)?, f.get(l4 + 2..l4 + 4)?);
        Some(([a, sp, b, dp].concat(), [b, dp, a, sp].concat()))
    }

    /// The flow a packet of `way` belongs to (its lesser direction).
    fn flow(way: &Way, back: &Way) -> Way {
        way.clone().min(back.clone())
    }
}

/// TCP options of the segment at `l4` with header length `hl`: the
/// window scale, and the SACK blocks' right edges.
fn options(f: &[u8], l4: usize, hl: usize) -> (Option<u8>, Vec<u32>) {
    let (mut ws, mut sack) = (None, Vec::new());
    let Some(o) = f.get(l4 + 20..(l4 + hl).min(f.len())) else {
        return (ws, sack);
    };
    let mut i = 0;
    while i < o.len() {
        match o[i] {
            0 => break,
            1 => i += 1,
            k => {
                let Some(&n) = o.get(i + 1) else { break };
                let n = usize::from(n);
                if n < 2 || i + n > o.len() {
                    break;
                }
                if k == 3 && n == 3 {
                    ws = Some(o[i + 2].min(14));
                }
                if k == 5 {
                    for b in o[i + 2..i + n].chunks_exact(8) {
                        sack.push(u32::from_be_bytes([b[4], b[5], b[6], b[7]]));
                    }
                }
                i += n;
            }
        }
    }
    (ws, sack)
}

/// The kind of a packet (see the module docs); TCP kinds, most specific
/// first:
/// - `tcp flags judged apart`: a combination pf's normaliser and Linux's
///   table judge differently;
/// - `tcp before any answer`: a segment other than a SYN sent before its
///   flow has seen any packet the other way (a SYN-ACK before any SYN is
///   no answer);
/// - `tcp after a first answer that was a rst` / `... no syn-ack`: the
///   flow's responder first answered with a RST, or with a segment that
///   was not a SYN-ACK (the SYN-ACK lost before the capture point);
/// - `tcp syn with a new isn`: a SYN (or SYN-ACK) with another ISN than
///   the direction's last one;
/// - `tcp rst not at the next sequence`: a RST neither at, one before nor
///   one after the sequence its sender has reached;
/// - `tcp old segment`: data ending at or before what its receiver
///   acknowledged;
/// - `tcp data past the window`: data ending past the right edge of the
///   window its receiver advertised;
/// - `tcp ack of data not seen`: an acknowledgement past all the data the
///   other way has sent (a capture that lost packets), or a SACK block
///   past it;
/// - `tcp ack far below the data sent`: an acknowledgement more than
///   Linux's `MAXACKWINDOW` below the data the other way has sent.
///
/// Segments whose flags Linux refuses (a FIN without ACK) are classified
/// but leave the bookkeeping alone: neither tracker takes them.
pub fn kind(f: &[u8], ways: &mut Ways) -> &'static str {
    let (proto, l4) = match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 => (f[23], 14 + usize::from(f[14] & 0xf) * 4),
        0x86dd => (f[20], 54),
        _ => return "other",
    };
    let ty = f.get(l4).copied().unwrap_or(0);
    match proto {
        6 => tcp(f, l4, ways),
        132 => "sctp",
        17 => "udp",
        1 | 58 if matches!((proto, ty), (1, 0 | 8) | (58, 128 | 129)) => echo(f, l4, ways),
        1 => match ty {
            3 | 4 | 5 | 11 | 12 => "icmp error",
            _ => "icmp informational",
        },
        58 => match ty {
            0..=127 => "icmp error",
            // Not redirects (137): Linux calls them invalid.
            130..=136 | 143 => "icmpv6 nd/mld",
            _ => "icmp informational",
        },
        _ => "other protocol",
    }
}

/// An echo request or reply: `icmp echo`, or `icmp echo code mismatch`
/// for a reply whose code is not its request's.
fn echo(f: &[u8], l4: usize, ways: &mut Ways) -> &'static str {
    let (alen, src) = match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 => (4, 26),
        _ => (16, 22),
    };
    let (Some(a), Some(b), Some(id)) = (
        f.get(src..src + alen),
        f.get(src + alen..src + 2 * alen),
        f.get(l4 + 4..l4 + 6),
    ) else {
        return "icmp echo";
    };
    let (ty, code) = (f[l4], f.get(l4 + 1).copied().unwrap_or(0));
    if matches!(ty, 8 | 128) {
        ways.echo_code.insert([a, b, id].concat(), code);
        return "icmp echo";
    }
    match ways.echo_code.get(&[b, a, id].concat()) {
        Some(&c) if c != code => "icmp echo code mismatch",
        _ => "icmp echo",
    }
}

fn tcp(f: &[u8], l4: usize, ways: &mut Ways) -> &'static str {
    let Some((way, back)) = Ways::of(f) else {
        return "tcp";
    };
    let flow = Ways::flow(&way, &back);
    let fl = f.get(l4 + 13).copied().unwrap_or(0);
    let be32 = |o: usize| {
        f.get(o..o + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (Some(seq), Some(ack)) = (be32(l4 + 4), be32(l4 + 8)) else {
        return "tcp";
    };
    let win = f
        .get(l4 + 14..l4 + 16)
        .map_or(0, |b| u32::from(u16::from_be_bytes([b[0], b[1]])));
    let ip_end = match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 => 14 + usize::from(u16::from_be_bytes([f[16], f[17]])),
        _ => 54 + usize::from(u16::from_be_bytes([f[18], f[19]])),
    };
    let hl = usize::from(f.get(l4 + 12).copied().unwrap_or(0) >> 4) * 4;
    let len = ip_end.min(f.len()).saturating_sub(l4 + hl) as u32;
    let (syn, ackf, rst) = (fl & 0x02 != 0, fl & 0x10 != 0, fl & 0x04 != 0);
    let end = seq
        .wrapping_add(len)
        .wrapping_add(u32::from(syn))
        .wrapping_add(u32::from(fl & 0x01 != 0));
    let (ws, sacks) = options(f, l4, hl);
    let valid = linux_valid_flags(fl);

    let syn_only = syn && !ackf;
    let first = !ways.seen.contains(&back) && !syn_only;
    // A SYN-ACK before any SYN the other way answers nothing.
    let early_synack = syn && ackf && !ways.seen.contains(&back);
    // The first packet the other way: the flow's first answer.
    let answer = ways.seen.contains(&back) && !ways.seen.contains(&way) && !early_synack;
    if answer && valid {
        if rst {
            ways.first_rst.insert(flow.clone());
        } else if !(syn && ackf) && ways.syn.contains_key(&back) {
            // The originator sent a SYN; the answer was no SYN-ACK.
            ways.no_synack.insert(flow.clone());
        }
    }
    let new_isn = syn
        && valid
        && (if ackf { &ways.synack } else { &ways.syn })
            .get(&way)
            .is_some_and(|&isn| isn != seq);
    let peer_sent = ways.sent.get(&back).copied();
    let rcv_acked = ways.acked.get(&back).copied();
    // pf: a RST at the sender's next sequence (what it has sent), one
    // before or one after.
    let rst_off = rst
        && ways
            .sent
            .get(&way)
            .is_some_and(|&s| ![s.wrapping_sub(1), s, s.wrapping_add(1)].contains(&seq));
    let old = len > 0 && fl & 0x07 == 0 && rcv_acked.is_some_and(|rcv| !after(end, rcv));
    let past_window = len > 0
        && !syn
        && ways
            .edge
            .get(&back)
            .is_some_and(|&e| after(seq.wrapping_add(len), e));
    let ack_ahead = ackf
        && peer_sent
            .is_some_and(|peer| after(ack, peer) || sacks.iter().any(|&right| after(right, peer)));
    let ack_far_below =
        ackf && peer_sent.is_some_and(|peer| after(peer.wrapping_sub(MAX_ACK_WINDOW), ack));
    let kind = if flags_judged_apart(fl) {
        "tcp flags judged apart"
    } else if first {
        "tcp before any answer"
    } else if ways.first_rst.contains(&flow) && !(answer && rst) {
        "tcp after a first answer that was a rst"
    } else if ways.no_synack.contains(&flow) && !answer {
        "tcp after a first answer that was no syn-ack"
    } else if new_isn {
        "tcp syn with a new isn"
    } else if rst_off {
        "tcp rst not at the next sequence"
    } else if old {
        "tcp old segment"
    } else if past_window {
        "tcp data past the window"
    } else if ack_ahead {
        "tcp ack of data not seen"
    } else if ack_far_below {
        "tcp ack far below the data sent"
    } else {
        "tcp"
    };
    if !valid {
        // Neither tracker takes it: nothing it says is known after.
        return kind;
    }
    if !early_synack {
        ways.seen.insert(way.clone());
    }
    if syn {
        (if ackf {
            &mut ways.synack
        } else {
            &mut ways.syn
        })
        .insert(way.clone(), seq);
        ways.wscale.insert(way.clone(), ws);
    }
    let e = ways.sent.entry(way.clone()).or_insert(end);
    if after(end, *e) {
        *e = end;
    }
    if ackf {
        let a = ways.acked.entry(way.clone()).or_insert(ack);
        if after(ack, *a) {
            *a = ack;
        }
        // The window's right edge this direction advertised (pf keeps
        // the furthest).
        // A scale applies only when both ends offered one, and not to a
        // SYN's own window.
        let scale = match (ways.wscale.get(&way), ways.wscale.get(&back)) {
            (Some(Some(s)), Some(Some(_))) if !syn => *s,
            _ => 0,
        };
        let right = ack.wrapping_add(win << scale);
        let r = ways.edge.entry(way).or_insert(right);
        if after(right, *r) {
            *r = right;
        }
    }
    kind
}
