//! TCP tracking after pf's `pf_tcp_track` (Guido van Rooij's sequence
//! window algorithm, which OVS's userspace conntrack follows too): each
//! side's highest sequence sent and the highest the other side's window
//! lets it send; a segment passes if it lies in its window (or at most
//! one window back, a retransmission) and acknowledges no more than a
//! window ahead or a reassembled fragment behind; a RST only at the
//! exact sequence (or one off). Written from the algorithm's rules, not
//! from either implementation.

use super::{Invalid, Timeout};

/// FIN.
pub const FIN: u8 = 0x01;
/// SYN.
pub const SYN: u8 = 0x02;
/// RST.
pub const RST: u8 = 0x04;
/// PSH.
pub const PSH: u8 = 0x08;
/// ACK.
pub const ACK: u8 = 0x10;
/// URG.
pub const URG: u8 = 0x20;

/// A side's state, ordered as pf's (a later state is a larger number).
pub mod state {
    /// Nothing sent yet.
    pub const CLOSED: u8 = 0;
    /// Sent its SYN (or its first segment).
    pub const SYN_SENT: u8 = 2;
    /// Its SYN was acknowledged.
    pub const ESTABLISHED: u8 = 4;
    /// Sent its FIN.
    pub const CLOSING: u8 = 7;
    /// Its FIN was acknowledged.
    pub const FIN_WAIT_2: u8 = 9;
    /// Reset, or closed both ways.
    pub const TIME_WAIT: u8 = 10;

    /// The state's name.
    pub fn name(s: u8) -> &'static str {
        match s {
            CLOSED => "closed",
            SYN_SENT => "syn_sent",
            ESTABLISHED => "established",
            CLOSING => "closing",
            FIN_WAIT_2 => "fin_wait_2",
            _ => "time_wait",
        }
    }
}
use state::*;

/// How far an acknowledgement may lag (one reassembled fragment) or lead.
const MAX_ACK_WINDOW: i64 = 0xffff + 1500;
/// Largest window scale.
const MAX_WSCALE: u8 = 14;
/// In [`Peer::wscale`]: the side sent a window scale option.
const WS_SET: u8 = 0x80;
/// In [`Peer::wscale`]: picked up mid-stream, scale unknown: be liberal.
const WS_UNKNOWN: u8 = 0x40;

/// The fields of a TCP segment the tracker reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seg {
    /// Flags byte.
    pub flags: u8,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// Window (unscaled).
    pub win: u16,
    /// Payload bytes.
    pub len: u32,
    /// The window scale option of a SYN, if it has one.
    pub wscale: Option<u8>,
}

/// One side of a connection (12 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// Highest sequence number sent, plus one (the end of its data).
    pub seqlo: u32,
    /// Highest sequence number the other side's window allows it to send.
    pub seqhi: u32,
    /// Largest window it advertised (unscaled).
    pub max_win: u16,
    /// Its window scale (bits 0..=3), with 0x80 set if it sent the option,
    /// 0x40 if picked up mid-stream (scale unknown: liberal checks).
    pub wscale: u8,
    /// Its state ([`state`]).
    pub state: u8,
}

/// What a segment does to a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// In order: the state was updated.
    Valid,
    /// Refused, state unchanged.
    Invalid(Invalid),
    /// A SYN on a connection closed both ways: the port is reused; start
    /// over with this segment as a new connection.
    Reopen,
}

fn seq_ge(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

fn seq_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Flag combinations no stack sends (SYN with RST or FIN, no SYN and
/// neither ACK nor RST, FIN/PSH/URG without ACK).
pub fn bad_flags(f: u8) -> bool {
    if f & SYN != 0 {
        if f & (RST | FIN) != 0 {
            return true;
        }
    } else if f & (ACK | RST) == 0 {
        return true;
    }
    f & ACK == 0 && f & (FIN | PSH | URG) != 0
}

/// Whether `seg` may start a connection: a SYN without ACK, or in loose
/// mode any segment with sane flags but a SYN-ACK or a RST.
pub fn may_open(seg: &Seg, loose: bool) -> Result<(), Invalid> {
    if bad_flags(seg.flags) {
        return Err(Invalid::TcpFlags);
    }
    let syn_only = seg.flags & (SYN | ACK) == SYN;
    if syn_only || (loose && seg.flags & SYN == 0 && seg.flags & RST == 0) {
        Ok(())
    } else {
        Err(Invalid::NoState)
    }
}

/// The two sides of a connection opened by `seg` (index 0: its sender).
pub fn open(seg: &Seg) -> [Peer; 2] {
    let mut src = Peer {
        seqlo: seg.seq,
        seqhi: seg.seq.wrapping_add(seg.len).wrapping_add(1),
        max_win: seg.win.max(1),
        wscale: 0,
        state: SYN_SENT,
    };
    let mut dst = Peer {
        seqhi: 1,
        max_win: 1,
        ..Peer::default()
    };
    if seg.flags & SYN != 0 {
        src.seqhi = src.seqhi.wrapping_add(1);
        if let Some(ws) = seg.wscale {
            src.wscale = ws.min(MAX_WSCALE) | WS_SET;
            // Windows are kept unscaled: a SYN's is not scaled yet.
            src.max_win = u32::from(src.max_win)
                .div_ceil(1 << (src.wscale & 15))
                .max(1) as u16;
        }
    } else {
        // Picked up mid-stream: the scale factors are unknown.
        src.wscale = WS_UNKNOWN;
        dst.wscale = WS_UNKNOWN;
    }
    if seg.flags & FIN != 0 {
        src.seqhi = src.seqhi.wrapping_add(1);
    }
    [src, dst]
}

/// Track `seg`, sent by side `from` (0: the opener), strictly: flags and
/// windows.
pub fn track(peers: &mut [Peer; 2], from: usize, seg: &Seg) -> Outcome {
    let f = seg.flags;
    if bad_flags(f) {
        return Outcome::Invalid(Invalid::TcpFlags);
    }
    let (s, d) = if from == 0 { (0, 1) } else { (1, 0) };
    if f & (SYN | ACK) == SYN && peers[s].state >= FIN_WAIT_2 && peers[d].state >= FIN_WAIT_2 {
        return Outcome::Reopen;
    }
    let mut src = peers[s];
    let mut dst = peers[d];
    let (mut sws, mut dws) = (0u32, 0u32);
    if f & SYN == 0 {
        if src.wscale & WS_SET != 0 && dst.wscale & WS_SET != 0 {
            sws = u32::from(src.wscale & 15);
            dws = u32::from(dst.wscale & 15);
        } else if src.wscale & WS_UNKNOWN != 0 && dst.wscale & WS_UNKNOWN != 0 {
            sws = u32::from(MAX_WSCALE);
            dws = u32::from(MAX_WSCALE);
        }
    }
    let mut win = u32::from(seg.win);
    let orig_seq = seg.seq;
    let mut seq = seg.seq;
    let mut end = seq.wrapping_add(seg.len);
    if f & SYN != 0 {
        end = end.wrapping_add(1);
    }
    if f & FIN != 0 {
        end = end.wrapping_add(1);
    }
    if src.state < SYN_SENT {
        // This side's first segment (the SYN-ACK of a handshake).
        if f & SYN != 0 && dst.wscale & WS_SET != 0 {
            match seg.wscale {
                Some(ws) => {
                    src.wscale = ws.min(MAX_WSCALE) | WS_SET;
                    sws = u32::from(src.wscale & 15);
                    win = win.div_ceil(1 << sws);
                    dws = u32::from(dst.wscale & 15);
                }
                None => {
                    // The other side will not scale: undo its scale.
                    dst.max_win = (u32::from(dst.max_win) << (dst.wscale & 15)).min(0xffff) as u16;
                    dst.wscale = 0;
                }
            }
        }
        src.seqlo = seq;
        src.state = SYN_SENT;
        let room = (u32::from(dst.max_win) << dws).max(1);
        if src.seqhi == 1 || seq_ge(end.wrapping_add(room), src.seqhi) {
            src.seqhi = end.wrapping_add(room);
        }
        src.max_win = src.max_win.max(win.min(0xffff) as u16);
    }
    // The acknowledgement is checked, a responder's first segment's too
    // (pf's `ackskew`: a SYN-ACK, or a RST, that does not acknowledge
    // the SYN is not the answer; it is invalid and sets nothing, so the
    // genuine answer after a blind one still opens the flow), unless
    // there is nothing to check it against: no ACK flag, a RST-ACK of 0
    // (stacks that time a SYN out), or a peer that has sent nothing yet
    // (a flow picked up mid-stream).
    let mut ack = seg.ack;
    if f & ACK == 0 || (ack == 0 && f & (ACK | RST) == ACK | RST) || dst.state < SYN_SENT {
        ack = dst.seqlo;
    }
    if seq == end {
        // No data: only the acknowledgement is checked.
        seq = src.seqlo;
        end = seq;
    }
    let ackskew = i64::from(dst.seqlo.wrapping_sub(ack) as i32);
    let back = u32::from(dst.max_win) << dws;
    let in_window = seq_ge(src.seqhi, end)
        && seq_ge(seq, src.seqlo.wrapping_sub(back))
        && ackskew >= -MAX_ACK_WINDOW
        && ackskew <= MAX_ACK_WINDOW << sws
        && (f & RST == 0
            || orig_seq == src.seqlo
            || orig_seq == src.seqlo.wrapping_add(1)
            || orig_seq.wrapping_add(1) == src.seqlo);
    let scaled = win << sws;
    if in_window {
        src.max_win = src.max_win.max(win.min(0xffff) as u16);
        if seq_gt(end, src.seqlo) {
            src.seqlo = end;
        }
        if f & ACK != 0 && seq_ge(ack.wrapping_add(scaled), dst.seqhi) {
            dst.seqhi = ack.wrapping_add(scaled.max(1));
        }
        if f & SYN != 0 && src.state < SYN_SENT {
            src.state = SYN_SENT;
        }
        if f & FIN != 0 && src.state < CLOSING {
            src.state = CLOSING;
        }
        if f & ACK != 0 {
            if dst.state == SYN_SENT {
                dst.state = ESTABLISHED;
            } else if dst.state == CLOSING {
                dst.state = FIN_WAIT_2;
            }
        }
        if f & RST != 0 {
            src.state = TIME_WAIT;
            dst.state = TIME_WAIT;
        }
    } else if (dst.state < SYN_SENT || dst.state >= FIN_WAIT_2 || src.state >= FIN_WAIT_2)
        && seq_ge(src.seqhi.wrapping_add(MAX_ACK_WINDOW as u32), end)
        && seq_ge(seq, src.seqlo.wrapping_sub(MAX_ACK_WINDOW as u32))
    {
        // pf's leniency: SYNs shotgunned before the peer answers, and
        // stray segments right after a close. The state advances on FIN
        // and RST only.
        src.max_win = src.max_win.max(win.min(0xffff) as u16);
        if seq_gt(end, src.seqlo) {
            src.seqlo = end;
        }
        if f & ACK != 0 && seq_ge(ack.wrapping_add(scaled), dst.seqhi) {
            dst.seqhi = ack.wrapping_add(scaled.max(1));
        }
        if f & FIN != 0 && src.state < CLOSING {
            src.state = CLOSING;
        }
        if f & RST != 0 {
            src.state = TIME_WAIT;
            dst.state = TIME_WAIT;
        }
    } else if peers[s].state < SYN_SENT
        && peers[d].state == SYN_SENT
        && f & (SYN | RST | FIN | ACK) == ACK
        && seg.len == 0
    {
        // A challenge ACK (RFC 5961): the responder answers the SYN with
        // an ACK of a connection it still holds (one the table lost, as
        // after a restart). It passes and sets nothing, as in Linux, so
        // that the originator's RST (pf's leniency takes it before any
        // answer) and its next SYN open the flow again; pf would drop it
        // and the originator would retry until the old connection timed
        // out.
        return Outcome::Valid;
    } else {
        return Outcome::Invalid(if f & RST != 0 {
            Invalid::TcpRst
        } else {
            Invalid::TcpWindow
        });
    }
    peers[s] = src;
    peers[d] = dst;
    Outcome::Valid
}

/// Track `seg` on flags alone (the `loose` mode).
pub fn track_loose(peers: &mut [Peer; 2], from: usize, seg: &Seg) -> Outcome {
    let f = seg.flags;
    if bad_flags(f) {
        return Outcome::Invalid(Invalid::TcpFlags);
    }
    let (s, d) = if from == 0 { (0, 1) } else { (1, 0) };
    if f & (SYN | ACK) == SYN && peers[s].state >= FIN_WAIT_2 && peers[d].state >= FIN_WAIT_2 {
        return Outcome::Reopen;
    }
    if peers[s].state < SYN_SENT {
        peers[s].state = SYN_SENT;
    }
    if f & FIN != 0 && peers[s].state < CLOSING {
        peers[s].state = CLOSING;
    }
    if f & ACK != 0 {
        if peers[d].state == SYN_SENT {
            peers[d].state = ESTABLISHED;
        } else if peers[d].state == CLOSING {
            peers[d].state = FIN_WAIT_2;
        }
    }
    if f & RST != 0 {
        peers[s].state = TIME_WAIT;
        peers[d].state = TIME_WAIT;
    }
    Outcome::Valid
}

/// Which of pf's TCP timeouts applies to a connection in these states.
pub fn timeout(peers: &[Peer; 2]) -> Timeout {
    let (a, b) = (peers[0].state, peers[1].state);
    if a >= FIN_WAIT_2 && b >= FIN_WAIT_2 {
        Timeout::TcpClosed
    } else if a >= CLOSING && b >= CLOSING {
        Timeout::TcpFinWait
    } else if a < ESTABLISHED || b < ESTABLISHED {
        Timeout::TcpOpening
    } else if a >= CLOSING || b >= CLOSING {
        Timeout::TcpClosing
    } else {
        Timeout::TcpEstablished
    }
}
