//! Edges the scenario captures of the Linux oracle found (tests/ct_oracle,
//! `tests/data/ct-oracle/scenarios`), checked here without root: a
//! SYN-ACK that does not acknowledge the SYN, two hosts pinging each
//! other with one identifier, ICMPv6 errors quoting packets with
//! extension headers or of types above 4, an error quoting a later
//! fragment, ICMPv6 carried over IPv4.

use pfil::CtState;

use super::tcp::{ACK, SYN};
use super::tests::{echo4, tcp, udp, udp6, A, A6, B, B6, T};

use CtState::{Established as Est, Invalid as Inv, New, Related as Rel};

#[test]
fn a_synack_that_does_not_acknowledge_the_syn_is_invalid_and_sets_nothing() {
    let mut t = T::new();
    assert_eq!(t.see(tcp(A, 40000, B, 80, SYN, 1000, 0, 0)), (New, false));
    // A blind SYN-ACK: its ack is 2.2 million past the SYN (pf's ackskew).
    assert_eq!(
        t.see(tcp(B, 80, A, 40000, SYN | ACK, 3_333_333, 2_222_222, 0)),
        (Inv, false)
    );
    // The genuine answer still opens the flow: the blind one set nothing.
    assert_eq!(
        t.see(tcp(B, 80, A, 40000, SYN | ACK, 7000, 1001, 0)),
        (Est, true)
    );
    assert_eq!(
        t.see(tcp(A, 40000, B, 80, ACK, 1001, 7001, 0)),
        (Est, false)
    );
    // A RST-ACK answering a SYN with an ack far past it: invalid too.
    assert_eq!(t.see(tcp(A, 40001, B, 80, SYN, 1000, 0, 0)), (New, false));
    assert_eq!(
        t.see(tcp(B, 80, A, 40001, super::tcp::RST | ACK, 0, 101_001, 0)),
        (Inv, false)
    );
}

#[test]
fn two_hosts_pinging_each_other_with_one_identifier_are_two_flows() {
    let mut t = T::new();
    assert_eq!(t.see(echo4(A, B, false, 1)), (New, false));
    // B pings A with the same identifier: a flow of its own.
    assert_eq!(t.see(echo4(B, A, false, 1)), (New, false));
    // A answers B's ping, B answers A's: each the reply of its flow.
    assert_eq!(t.see(echo4(A, B, true, 1)), (Est, true));
    assert_eq!(t.see(echo4(B, A, true, 1)), (Est, true));
    assert_eq!(t.table.len(), 2);
    // Errors quoting either ping relate to its flow.
    let q = echo4(A, B, false, 1);
    assert_eq!(
        t.see(super::tests::icmp4_error(B, A, 3, 1, &q)),
        (Rel, true)
    );
}

/// An Ethernet frame of IPv6 from `src` to `dst` with next header `next`
/// and `payload`.
fn ip6(src: [u8; 16], dst: [u8; 16], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd];
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[next, 64]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(payload);
    f
}

/// An ICMPv6 error of type `ty` from `from` to `to` quoting `quoted` (an
/// IPv6 packet, from its header).
fn error6(from: [u8; 16], to: [u8; 16], ty: u8, quoted: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, 0, 0, 0, 0, 0, 5, 0xdc];
    m.extend_from_slice(quoted);
    ip6(from, to, 58, &m)
}

/// The IPv6 packet (no Ethernet) of a UDP datagram 5000 -> 53 behind the
/// extension headers `ext` (the first's type `first`).
fn quoted6(first: u8, ext: &[u8]) -> Vec<u8> {
    let mut p = ext.to_vec();
    p.extend_from_slice(&[0x13, 0x88, 0, 53, 0, 8, 0, 0]);
    ip6(A6, B6, first, &p)[14..].to_vec()
}

#[test]
fn icmpv6_errors_skip_the_quoted_extension_headers() {
    let mut t = T::new();
    assert_eq!(t.see(udp6(A6, 5000, B6, 53)), (New, false));
    // Hop-by-hop (PadN), then UDP.
    let hbh = [17, 0, 1, 4, 0, 0, 0, 0];
    assert_eq!(t.see(error6(B6, A6, 1, &quoted6(0, &hbh))), (Rel, true));
    // Destination options, then a first fragment's header, then UDP.
    let ext = [44, 0, 1, 4, 0, 0, 0, 0, 17, 0, 0, 1, 0, 0, 0, 7];
    assert_eq!(t.see(error6(B6, A6, 2, &quoted6(60, &ext))), (Rel, true));
    // A later fragment has no UDP header to relate by.
    let later = [17, 0, 0, 0x41, 0, 0, 0, 7];
    assert_eq!(t.see(error6(B6, A6, 2, &quoted6(44, &later))), (Inv, false));
    // Types 5-127 are errors too (RFC 4443).
    assert_eq!(t.see(error6(B6, A6, 100, &quoted6(17, &[]))), (Rel, true));
}

#[test]
fn an_icmp_error_quoting_a_later_fragment_is_invalid() {
    let mut t = T::new();
    let out = udp(A, 5000, B, 53);
    assert_eq!(t.see(out.clone()), (New, false));
    let mut later = out.clone();
    // Fragment offset 100 (8-byte units), the bytes after it read as
    // ports would name the flow.
    later[20..22].copy_from_slice(&100u16.to_be_bytes());
    assert_eq!(
        t.see(super::tests::icmp4_error(B, A, 3, 4, &later)),
        (Inv, false)
    );
    assert_eq!(
        t.see(super::tests::icmp4_error(B, A, 3, 4, &out)),
        (Rel, true)
    );
}

#[test]
fn icmpv6_over_ipv4_is_invalid() {
    let mut t = T::new();
    // An IPv4 packet whose protocol is 58 (ICMPv6) holding an echo request.
    let mut f = echo4(A, B, false, 9);
    f[23] = 58;
    f[34] = 128;
    assert_eq!(t.see(f), (Inv, false));
    // And ICMP (1) in IPv6.
    let m = [8, 0, 0, 0, 0, 9, 0, 1];
    assert_eq!(t.see(ip6(A6, B6, 1, &m)), (Inv, false));
}

#[test]
fn a_challenge_ack_lets_the_originator_reset_and_reconnect() {
    // The table lost the flow; the server still holds it and answers a
    // new SYN with a challenge ACK (RFC 5961), the client resets, then
    // connects again: Linux's states, packet for packet.
    let mut t = T::new();
    let syn = tcp(A, 40025, B, 80, SYN, 800_000_000, 0, 0);
    assert_eq!(t.see(syn.clone()), (New, false));
    assert_eq!(
        t.see(tcp(B, 80, A, 40025, ACK, 55_555, 12_345, 0)),
        (Est, true)
    );
    assert_eq!(
        t.see(tcp(A, 40025, B, 80, super::tcp::RST, 12_345, 0, 0)),
        (Est, false)
    );
    assert_eq!(t.see(syn), (New, false));
    assert_eq!(
        t.see(tcp(B, 80, A, 40025, SYN | ACK, 600_000, 800_000_001, 0)),
        (Est, true)
    );
    assert_eq!(
        t.see(tcp(A, 40025, B, 80, ACK, 800_000_001, 600_001, 0)),
        (Est, false)
    );
}
