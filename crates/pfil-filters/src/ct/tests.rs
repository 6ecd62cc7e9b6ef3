//! The tracker's state machines, driven with frames and a clock of our
//! own.

use etherparse::{Ethernet2Header, PacketBuilder, PacketBuilderStep, TcpOptionElement};
use pfil::{CtState, Packet};

use super::tcp::{ACK, FIN, PSH, RST, SYN};
use super::*;

pub(super) const A: [u8; 4] = [198, 18, 0, 1];
pub(super) const B: [u8; 4] = [198, 18, 0, 2];
pub(super) const A6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub(super) const B6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

use CtState::{Established as Est, Invalid as Inv, New, Related as Rel};

/// A table and a clock.
pub(super) struct T {
    pub(super) table: Table,
    pub(super) now: u32,
    pub(super) loose: bool,
    pub(super) max: usize,
}

impl T {
    pub(super) fn new() -> T {
        T::with(DEFAULT_MAX, false)
    }

    pub(super) fn with(max: usize, loose: bool) -> T {
        T {
            table: Table::new(max, 1),
            now: 0,
            loose,
            max,
        }
    }

    pub(super) fn see(&mut self, mut f: Vec<u8>) -> (CtState, bool) {
        let p = Packet::new(&mut f);
        let c = flow::classify(&p);
        let run = Run {
            now: self.now,
            loose: self.loose,
            max: self.max,
        };
        self.table.track(c, p.len() as u32, run, 0)
    }

    pub(super) fn invalid(&self, r: Invalid) -> u64 {
        self.table.counts().2[r as usize]
    }
}

fn eth() -> PacketBuilderStep<Ethernet2Header> {
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
}

/// A TCP segment from `src:sp` to `dst:dp`.
#[allow(clippy::too_many_arguments)]
pub(super) fn tcp(
    src: [u8; 4],
    sp: u16,
    dst: [u8; 4],
    dp: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    data: usize,
) -> Vec<u8> {
    tcp_win(src, sp, dst, dp, flags, seq, ack, data, 65535, None)
}

#[allow(clippy::too_many_arguments)]
fn tcp_win(
    src: [u8; 4],
    sp: u16,
    dst: [u8; 4],
    dp: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    data: usize,
    win: u16,
    ws: Option<u8>,
) -> Vec<u8> {
    let mut b = eth().ipv4(src, dst, 64).tcp(sp, dp, seq, win);
    if flags & SYN != 0 {
        b = b.syn();
    }
    if flags & ACK != 0 {
        b = b.ack(ack);
    }
    if flags & FIN != 0 {
        b = b.fin();
    }
    if flags & RST != 0 {
        b = b.rst();
    }
    if flags & PSH != 0 {
        b = b.psh();
    }
    if let Some(ws) = ws {
        b = b.options(&[TcpOptionElement::WindowScale(ws)]).unwrap();
    }
    let mut v = Vec::new();
    b.write(&mut v, &vec![0x61; data]).unwrap();
    v
}

pub(super) fn udp(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> Vec<u8> {
    let mut v = Vec::new();
    eth()
        .ipv4(src, dst, 64)
        .udp(sp, dp)
        .write(&mut v, b"hello")
        .unwrap();
    v
}

pub(super) fn udp6(src: [u8; 16], sp: u16, dst: [u8; 16], dp: u16) -> Vec<u8> {
    let mut v = Vec::new();
    eth()
        .ipv6(src, dst, 64)
        .udp(sp, dp)
        .write(&mut v, b"hello")
        .unwrap();
    v
}

/// For the model test: a TCP segment.
#[allow(clippy::too_many_arguments)]
pub(super) fn tcp_frame(
    src: [u8; 4],
    sp: u16,
    dst: [u8; 4],
    dp: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    data: usize,
) -> Vec<u8> {
    tcp(src, sp, dst, dp, flags, seq, ack, data)
}

/// For the model test: a UDP datagram.
pub(super) fn udp_frame(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> Vec<u8> {
    udp(src, sp, dst, dp)
}

/// For the model test: an echo request or reply.
pub(super) fn echo_frame(src: [u8; 4], dst: [u8; 4], reply: bool, id: u16) -> Vec<u8> {
    echo4(src, dst, reply, id)
}

/// Client A:1000 to server B:80: SYN, SYN-ACK, ACK. ISNs 100 and 5000.
fn handshake(t: &mut T) {
    assert_eq!(t.see(tcp(A, 1000, B, 80, SYN, 100, 0, 0)), (New, false));
    assert_eq!(
        t.see(tcp(B, 80, A, 1000, SYN | ACK, 5000, 101, 0)),
        (Est, true)
    );
    assert_eq!(t.see(tcp(A, 1000, B, 80, ACK, 101, 5001, 0)), (Est, false));
}

/// The fast path of plain IPv4 UDP and TCP frames (the packet's cached
/// 5-tuple) classifies as the general one: keys in both directions, the
/// TCP fields (window scale of a SYN included); a frame the fast path
/// declines (padding, truncated) still classified by the general one.
#[test]
fn the_plain_path_classifies_as_the_general_one() {
    let udp = |src, sp, dst, dp| {
        let mut v = Vec::new();
        eth()
            .ipv4(src, dst, 64)
            .udp(sp, dp)
            .write(&mut v, &[1, 2, 3])
            .unwrap();
        v
    };
    let mut frames = vec![
        udp(A, 1000, B, 53),
        udp(B, 53, A, 1000),
        udp(A, 53, A, 53),
        udp(A, 9, B, 8),
        udp(B, 8, A, 9),
        tcp(A, 1000, B, 80, SYN, 7, 0, 0),
        tcp(B, 80, A, 1000, SYN | ACK, 9, 8, 0),
        tcp(A, 1000, B, 80, ACK | PSH, 8, 10, 100),
        tcp_win(A, 1, B, 2, SYN, 1, 0, 0, 512, Some(9)),
        tcp_win(B, 2, A, 1, SYN | ACK, 1, 2, 0, 512, Some(20)),
    ];
    let mut padded = udp(A, 1000, B, 53);
    padded.extend_from_slice(&[0; 20]);
    frames.push(padded);
    let mut cut = tcp(A, 1000, B, 80, ACK, 8, 10, 100);
    cut.truncate(60);
    frames.push(cut);
    let mut plain = 0;
    for (i, f) in frames.into_iter().enumerate() {
        let (mut x, mut y) = (f.clone(), f);
        let p = Packet::new(&mut x);
        plain += usize::from(p.plain_five_tuple_v4().is_some());
        let fast = flow::classify(&p);
        let general = flow::classify_general(&Packet::new(&mut y));
        assert_eq!(fast, general, "frame {i}");
        // The words-only path gives the same key, side and kind.
        if let Some((w, a, kind)) = flow::plain_v4(&p) {
            assert_eq!(
                flow::Class::Flow(flow::FlowKey::from_words(w), a, kind),
                general,
                "frame {i}"
            );
            let flow::Class::Flow(k, ..) = general else {
                unreachable!()
            };
            assert_eq!(w, k.words(), "frame {i}");
        }
        assert!(!matches!(fast, flow::Class::Untracked), "frame {i}");
    }
    assert!(plain >= 10, "the fast path ran ({plain} frames)");
}

#[test]
fn tcp_handshake_data_both_ways_and_retransmissions() {
    let mut t = T::new();
    handshake(&mut t);
    assert_eq!(
        t.see(tcp(A, 1000, B, 80, ACK | PSH, 101, 5001, 100)),
        (Est, false)
    );
    assert_eq!(
        t.see(tcp(B, 80, A, 1000, ACK | PSH, 5001, 201, 1000)),
        (Est, true)
    );
    // The same segments again: retransmissions are in the window.
    assert_eq!(
        t.see(tcp(A, 1000, B, 80, ACK | PSH, 101, 5001, 100)),
        (Est, false)
    );
    assert_eq!(
        t.see(tcp(B, 80, A, 1000, ACK | PSH, 5001, 201, 1000)),
        (Est, true)
    );
    // A retransmitted SYN before the answer is still new.
    let mut u = T::new();
    assert_eq!(u.see(tcp(A, 1000, B, 80, SYN, 100, 0, 0)), (New, false));
    assert_eq!(u.see(tcp(A, 1000, B, 80, SYN, 100, 0, 0)), (New, false));
    assert_eq!(u.table.len(), 1);
    let s = &u.table.states(DEFAULT_MAX)[0];
    assert_eq!((s.sport, s.dport, s.packets), (1000, 80, [2, 0]));
    assert_eq!(s.state, "syn_sent:closed");
}

#[test]
fn tcp_simultaneous_open() {
    let mut t = T::new();
    assert_eq!(t.see(tcp(A, 1000, B, 2000, SYN, 100, 0, 0)), (New, false));
    assert_eq!(t.see(tcp(B, 2000, A, 1000, SYN, 7000, 0, 0)), (Est, true));
    assert_eq!(
        t.see(tcp(A, 1000, B, 2000, SYN | ACK, 100, 7001, 0)),
        (Est, false)
    );
    assert_eq!(
        t.see(tcp(B, 2000, A, 1000, SYN | ACK, 7000, 101, 0)),
        (Est, true)
    );
    assert_eq!(
        t.see(tcp(A, 1000, B, 2000, ACK, 101, 7001, 10)),
        (Est, false)
    );
    assert_eq!(
        t.table.states(DEFAULT_MAX)[0].state,
        "established:established"
    );
}

#[test]
fn tcp_out_of_window_is_invalid_when_strict_and_passes_when_loose() {
    for loose in [false, true] {
        let mut t = T::with(DEFAULT_MAX, loose);
        handshake(&mut t);
        // 10 MB ahead of anything the server's window allows.
        let far = tcp(A, 1000, B, 80, ACK, 101 + 10_000_000, 5001, 10);
        // Acknowledging data the server never sent.
        let bad_ack = tcp(A, 1000, B, 80, ACK, 101, 5001 + 10_000_000, 0);
        let want = if loose { (Est, false) } else { (Inv, false) };
        assert_eq!(t.see(far), want, "loose {loose}");
        assert_eq!(t.see(bad_ack), want, "loose {loose}");
        // The flow itself goes on.
        assert_eq!(t.see(tcp(A, 1000, B, 80, ACK, 101, 5001, 10)), (Est, false));
        assert_eq!(t.invalid(Invalid::TcpWindow), if loose { 0 } else { 2 });
    }
}

#[test]
fn tcp_rst_in_window_closes_and_out_of_window_is_invalid() {
    let mut t = T::new();
    handshake(&mut t);
    // A RST far from the sequence the server is at: a blind reset.
    assert_eq!(
        t.see(tcp(B, 80, A, 1000, RST, 5001 + 30_000, 0, 0)),
        (Inv, false)
    );
    assert_eq!(t.invalid(Invalid::TcpRst), 1);
    assert_eq!(
        t.table.states(DEFAULT_MAX)[0].state,
        "established:established"
    );
    // At the exact sequence: the flow closes (TIME_WAIT both ways).
    assert_eq!(t.see(tcp(B, 80, A, 1000, RST, 5001, 0, 0)), (Est, true));
    assert_eq!(t.table.states(DEFAULT_MAX)[0].state, "time_wait:time_wait");
    // A SYN for the same ports now starts over.
    assert_eq!(t.see(tcp(A, 1000, B, 80, SYN, 9000, 0, 0)), (New, false));
}

#[test]
fn tcp_fin_both_ways_then_port_reuse() {
    let mut t = T::new();
    handshake(&mut t);
    assert_eq!(
        t.see(tcp(A, 1000, B, 80, FIN | ACK, 101, 5001, 0)),
        (Est, false)
    );
    assert_eq!(t.table.states(DEFAULT_MAX)[0].state, "closing:established");
    assert_eq!(
        t.see(tcp(B, 80, A, 1000, FIN | ACK, 5001, 102, 0)),
        (Est, true)
    );
    assert_eq!(t.table.states(DEFAULT_MAX)[0].state, "fin_wait_2:closing");
    assert_eq!(t.see(tcp(A, 1000, B, 80, ACK, 102, 5002, 0)), (Est, false));
    let s = t.table.states(DEFAULT_MAX);
    assert_eq!(s[0].state, "fin_wait_2:fin_wait_2");
    assert_eq!(s[0].expires, PF_TIMEOUTS[Timeout::TcpClosed as usize]);
    // Port reuse: a new SYN from the same client port is a new flow in
    // the original direction (not a reply, not invalid).
    assert_eq!(t.see(tcp(A, 1000, B, 80, SYN, 77_000, 0, 0)), (New, false));
    assert_eq!(
        t.see(tcp(B, 80, A, 1000, SYN | ACK, 3, 77_001, 0)),
        (Est, true)
    );
    assert_eq!(t.table.len(), 1);
    // Reused by the other side (the server now opens to the client).
    let mut u = T::new();
    handshake(&mut u);
    u.see(tcp(A, 1000, B, 80, FIN | ACK, 101, 5001, 0));
    u.see(tcp(B, 80, A, 1000, FIN | ACK, 5001, 102, 0));
    u.see(tcp(A, 1000, B, 80, ACK, 102, 5002, 0));
    assert_eq!(u.see(tcp(B, 80, A, 1000, SYN, 1, 0, 0)), (New, false));
    assert_eq!(u.table.states(DEFAULT_MAX)[0].src.to_string(), "198.18.0.2");
}

#[test]
fn tcp_without_state_and_bad_flags() {
    let mut t = T::new();
    // An ACK of no known flow: invalid when strict, picked up when loose.
    assert_eq!(t.see(tcp(A, 1, B, 2, ACK, 1, 1, 0)), (Inv, false));
    assert_eq!(t.see(tcp(A, 1, B, 2, SYN | ACK, 1, 1, 0)), (Inv, false));
    assert_eq!(t.see(tcp(A, 1, B, 2, RST, 1, 0, 0)), (Inv, false));
    assert_eq!(t.invalid(Invalid::NoState), 3);
    assert_eq!(t.see(tcp(A, 1, B, 2, SYN | FIN, 1, 0, 0)), (Inv, false));
    assert_eq!(t.see(tcp(A, 1, B, 2, FIN, 1, 0, 0)), (Inv, false));
    assert_eq!(t.invalid(Invalid::TcpFlags), 2);
    assert!(t.table.is_empty());
    let mut l = T::with(DEFAULT_MAX, true);
    assert_eq!(l.see(tcp(A, 1, B, 2, ACK, 1, 1, 10)), (New, false));
    assert_eq!(l.see(tcp(B, 2, A, 1, ACK, 1, 11, 10)), (Est, true));
    assert_eq!(l.see(tcp(A, 1, B, 2, SYN | ACK, 1, 1, 0)), (Est, false));
}

#[test]
fn tcp_window_scaling_is_followed() {
    let mut t = T::new();
    let syn = tcp_win(A, 1000, B, 80, SYN, 100, 0, 0, 64240, Some(7));
    assert_eq!(t.see(syn), (New, false));
    let synack = tcp_win(B, 80, A, 1000, SYN | ACK, 5000, 101, 0, 65160, Some(7));
    assert_eq!(t.see(synack), (Est, true));
    assert_eq!(
        t.see(tcp_win(A, 1000, B, 80, ACK, 101, 5001, 0, 502, None)),
        (Est, false)
    );
    // 2 MB of data in flight from the server: within 502 << 7 bytes of
    // window? No: 502 << 7 = 64 256; 1 MB ahead is out.
    assert_eq!(
        t.see(tcp_win(
            B,
            80,
            A,
            1000,
            ACK,
            5001 + 60_000,
            101,
            1000,
            509,
            None
        )),
        (Est, true)
    );
    assert_eq!(
        t.see(tcp_win(
            B,
            80,
            A,
            1000,
            ACK,
            5001 + 1_000_000,
            101,
            1000,
            509,
            None
        )),
        (Inv, false)
    );
}

#[test]
fn udp_new_established_and_expiry() {
    let mut t = T::new();
    assert_eq!(t.see(udp(A, 5353, B, 53)), (New, false));
    assert_eq!(t.see(udp(A, 5353, B, 53)), (New, false));
    assert_eq!(t.see(udp(B, 53, A, 5353)), (Est, true));
    assert_eq!(t.see(udp(A, 5353, B, 53)), (Est, false));
    // udp.multiple (60 s) after the last packet: gone, a new flow.
    t.now = 61;
    assert_eq!(t.see(udp(B, 53, A, 5353)), (New, false));
    assert_eq!(t.table.states(DEFAULT_MAX)[0].src.to_string(), "198.18.0.2");
    // A single packet's flow lasts udp.first (60 s), then udp.single
    // (30 s) once the sender repeats itself.
    t.now = 200;
    t.see(udp(A, 1, B, 2));
    t.now = 259;
    assert_eq!(t.see(udp(B, 2, A, 1)), (Est, true));
    t.see(udp(A, 3, B, 4));
    t.see(udp(A, 3, B, 4));
    t.now = 290;
    assert_eq!(t.see(udp(B, 4, A, 3)), (New, false), "udp.single expired");
    // v6.
    assert_eq!(t.see(udp6(A6, 1, B6, 2)), (New, false));
    assert_eq!(t.see(udp6(B6, 2, A6, 1)), (Est, true));
    assert_eq!(
        t.table
            .states(DEFAULT_MAX)
            .iter()
            .filter(|s| s.src.is_ipv6())
            .count(),
        1
    );
}

pub(super) fn echo4(src: [u8; 4], dst: [u8; 4], reply: bool, id: u16) -> Vec<u8> {
    let b = eth().ipv4(src, dst, 64);
    let b = if reply {
        b.icmpv4_echo_reply(id, 1)
    } else {
        b.icmpv4_echo_request(id, 1)
    };
    let mut v = Vec::new();
    b.write(&mut v, b"ping").unwrap();
    v
}

fn echo6(src: [u8; 16], dst: [u8; 16], reply: bool, id: u16) -> Vec<u8> {
    let b = eth().ipv6(src, dst, 64);
    let b = if reply {
        b.icmpv6_echo_reply(id, 1)
    } else {
        b.icmpv6_echo_request(id, 1)
    };
    let mut v = Vec::new();
    b.write(&mut v, b"ping").unwrap();
    v
}

#[test]
fn icmp_echo_pairs_up_v4_and_v6() {
    let mut t = T::new();
    assert_eq!(
        t.see(echo4(A, B, true, 7)),
        (Inv, false),
        "a reply to nothing"
    );
    assert_eq!(t.see(echo4(A, B, false, 7)), (New, false));
    assert_eq!(t.see(echo4(B, A, true, 7)), (Est, true));
    assert_eq!(t.see(echo4(B, A, true, 8)), (Inv, false), "another id");
    assert_eq!(
        t.see(echo4(A, B, true, 7)),
        (Inv, false),
        "a reply the wrong way"
    );
    assert_eq!(t.see(echo6(A6, B6, false, 9)), (New, false));
    assert_eq!(t.see(echo6(B6, A6, true, 9)), (Est, true));
    assert_eq!(t.see(echo6(B6, A6, true, 10)), (Inv, false));
    // icmp.error (10 s) after the reply.
    t.now = 11;
    assert_eq!(t.see(echo4(B, A, true, 7)), (Inv, false));
}

#[test]
fn an_echo_of_identifier_0_is_not_the_address_pairs_icmp_flow() {
    // Other informational ICMP (a timestamp request, a neighbour
    // advertisement) is tracked by address pair with ports 0, as an echo
    // of identifier 0 from the lower address would be keyed: the two
    // must stay apart (found by a tester's captures against Linux).
    let mut t = T::new();
    let mut ts = Vec::new();
    eth()
        .ipv4(A, B, 64)
        .icmpv4_raw(13, 0, [0; 4])
        .write(&mut ts, &[0; 12])
        .unwrap();
    assert_eq!(t.see(ts), (New, false));
    assert_eq!(
        t.see(echo4(B, A, true, 0)),
        (Inv, false),
        "a reply to no echo request"
    );
    // IPv6: a neighbour advertisement, then an error quoting an echo of
    // identifier 0 that was never sent.
    let mut na = Vec::new();
    eth()
        .ipv6(A6, B6, 255)
        .icmpv6_raw(136, 0, [0; 4])
        .write(&mut na, &[0; 16])
        .unwrap();
    assert_eq!(t.see(na), (New, false));
    assert_eq!(
        t.see(icmp6_error(B6, A6, 1, &echo6(A6, B6, false, 0))),
        (Inv, false)
    );
    // The echo itself still pairs up.
    assert_eq!(t.see(echo4(A, B, false, 0)), (New, false));
    assert_eq!(t.see(echo4(B, A, true, 0)), (Est, true));
}

/// An ICMP error from `from` to `to` quoting `orig` (an Ethernet frame).
pub(super) fn icmp4_error(from: [u8; 4], to: [u8; 4], ty: u8, code: u8, orig: &[u8]) -> Vec<u8> {
    let quoted = &orig[14..(14 + 28).min(orig.len())];
    let mut v = Vec::new();
    eth()
        .ipv4(from, to, 64)
        .icmpv4_raw(ty, code, [0; 4])
        .write(&mut v, quoted)
        .unwrap();
    v
}

fn icmp6_error(from: [u8; 16], to: [u8; 16], ty: u8, orig: &[u8]) -> Vec<u8> {
    let quoted = &orig[14..(14 + 48).min(orig.len())];
    let mut v = Vec::new();
    eth()
        .ipv6(from, to, 64)
        .icmpv6_raw(ty, 0, [0; 4])
        .write(&mut v, quoted)
        .unwrap();
    v
}

#[test]
fn icmp_errors_quoting_a_flow_are_related_v4_and_v6() {
    let mut t = T::new();
    let out = udp(A, 5000, B, 53);
    assert_eq!(t.see(out.clone()), (New, false));
    // Port unreachable from B, and time exceeded from a router.
    assert_eq!(t.see(icmp4_error(B, A, 3, 3, &out)), (Rel, true));
    assert_eq!(
        t.see(icmp4_error([10, 9, 9, 9], A, 11, 0, &out)),
        (Rel, true)
    );
    // Quoting the reply direction: the error goes the original way.
    let back = udp(B, 53, A, 5000);
    assert_eq!(t.see(icmp4_error(A, B, 3, 3, &back)), (Rel, false));
    // Quoting no flow, or sent to someone else than the quoted sender.
    assert_eq!(
        t.see(icmp4_error(B, A, 3, 3, &udp(A, 5001, B, 53))),
        (Inv, false)
    );
    assert_eq!(
        t.see(icmp4_error(B, [1, 2, 3, 4], 3, 3, &out)),
        (Inv, false)
    );
    assert_eq!(t.invalid(Invalid::NoState), 1);
    assert_eq!(t.invalid(Invalid::IcmpMismatch), 1);
    // TCP and ICMP echo quoted.
    let syn = tcp(A, 1000, B, 80, SYN, 100, 0, 0);
    t.see(syn.clone());
    assert_eq!(t.see(icmp4_error(B, A, 3, 10, &syn)), (Rel, true));
    let ping = echo4(A, B, false, 3);
    t.see(ping.clone());
    assert_eq!(t.see(icmp4_error(B, A, 3, 1, &ping)), (Rel, true));
    // v6: packet too big, destination unreachable.
    let out6 = udp6(A6, 5000, B6, 53);
    assert_eq!(t.see(out6.clone()), (New, false));
    assert_eq!(t.see(icmp6_error(B6, A6, 2, &out6)), (Rel, true));
    assert_eq!(t.see(icmp6_error(B6, A6, 1, &out6)), (Rel, true));
    assert_eq!(
        t.see(icmp6_error(B6, A6, 1, &udp6(A6, 5001, B6, 53))),
        (Inv, false)
    );
    // A truncated quote.
    let mut cut = icmp4_error(B, A, 3, 3, &out);
    cut.truncate(14 + 20 + 8 + 10);
    let ip_len = (cut.len() - 14) as u16;
    cut[16..18].copy_from_slice(&ip_len.to_be_bytes());
    assert_eq!(t.see(cut), (Inv, false));
}

/// The sweep's idle limits say what `expired_at` says.
#[test]
fn idle_limits_agree_with_expired_at() {
    for (n, max) in [
        (0, 100),
        (70, 100),
        (90, 100),
        (100, 100),
        (119, 100),
        (500, 100),
    ] {
        let ad = table::Adaptive::at(n, max);
        let cut = step::idle_limits(ad);
        for to in 0..16u8 {
            for last in (0..100_000u32).step_by(7) {
                let now = 100_000;
                let by_cut = u64::from(now - last) > cut[usize::from(to)];
                assert_eq!(
                    by_cut,
                    expired_at(to.min(13), last, now, ad),
                    "{to} {last} {ad:?}"
                );
            }
        }
    }
}

/// Below the adaptive start the round-robin sweep keeps pf's pace: a
/// second's sweeps together remove at most the second's budget (the
/// table over `SWEEP_PASS_SECONDS`, at least `SWEEP_MIN_PER_SECOND`)
/// however many chunks ask, and the next second brings a new budget;
/// from the adaptive start every sweep takes all it is asked. An expired
/// entry the sweep has not reached is still expired to a lookup.
#[test]
fn the_sweep_keeps_pfs_pace_below_the_adaptive_start() {
    use super::sweep::{SWEEP_MIN_PER_SECOND, SWEEP_PASS_SECONDS};
    let flows = 30_000u32;
    let addr = |f: u32| {
        let mut a = [1u8; 16];
        a[12..].copy_from_slice(&f.to_be_bytes());
        a
    };
    let fill = |max: usize| {
        let table = Table::new(max, 1);
        let run = Run {
            now: 5,
            loose: false,
            max,
        };
        for f in 0..flows {
            let (k, a) = FlowKey::new(addr(f), 1000, addr(u32::MAX), 53, 17, true);
            table.track(Class::Flow(k, a, Kind::Udp), 60, run, 0);
        }
        assert_eq!(table.len(), flows as usize);
        table
    };
    // 30 000 of 100 000: below the start (60 000). Everything expired.
    let max = 100_000;
    let table = fill(max);
    let budget = (flows as usize / SWEEP_PASS_SECONDS).max(SWEEP_MIN_PER_SECOND);
    let at = |now| Run {
        now,
        loose: false,
        max,
    };
    for _ in 0..1000 {
        table.sweep_next(64, at(1000));
    }
    let gone = flows as usize - table.len();
    assert_eq!(gone, budget, "one second's sweeps remove its budget");
    let left = table.len();
    let budget = (left / SWEEP_PASS_SECONDS).max(SWEEP_MIN_PER_SECOND);
    for _ in 0..1000 {
        table.sweep_next(64, at(1001));
    }
    assert_eq!(
        left - table.len(),
        budget,
        "the next second's, of what is left"
    );
    // Not yet swept, still expired: a lookup finds no state.
    let (k, a) = FlowKey::new(addr(7), 1000, addr(u32::MAX), 53, 17, true);
    assert_eq!(
        table.track_existing(Class::Flow(k, a, Kind::Udp), 60, at(1001), 0),
        None
    );
    // 30 000 of 40 000: past the start, every sweep takes its 64.
    let max = 40_000;
    let table = fill(max);
    let run = Run {
        now: 1000,
        loose: false,
        max,
    };
    for _ in 0..100 {
        table.sweep_next(64, run);
    }
    assert_eq!(flows as usize - table.len(), 6400, "unpaced from the start");
}
