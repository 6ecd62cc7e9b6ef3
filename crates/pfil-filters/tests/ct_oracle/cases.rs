//! The generated cases: named sequences of frames, each sent in order
//! through both trackers. A (198.18.0.1 / 2001:2::1) is the client, B
//! (198.18.0.2 / 2001:2::2) the server, C (…3) a third host.

use crate::frames::{echo, icmp_error, tcp, udp, v4, v6, Ip, ACK, FIN, PSH, RST, SYN};

/// A handshake A:ap -> B:80 with client ISN `c` and server ISN `s`.
fn handshake(a: Ip, ap: u16, b: Ip, c: u32, s: u32) -> Vec<Vec<u8>> {
    vec![
        tcp(a, ap, b, 80, SYN, c, 0, 0),
        tcp(b, 80, a, ap, SYN | ACK, s, c + 1, 0),
        tcp(a, ap, b, 80, ACK, c + 1, s + 1, 0),
    ]
}

/// Handshake, data both ways, FIN from A, FIN from B, last ACK.
fn full_session(a: Ip, ap: u16, b: Ip, c: u32, s: u32) -> Vec<Vec<u8>> {
    let mut v = handshake(a, ap, b, c, s);
    v.extend([
        tcp(a, ap, b, 80, ACK | PSH, c + 1, s + 1, 100),
        tcp(b, 80, a, ap, ACK | PSH, s + 1, c + 101, 1000),
        tcp(a, ap, b, 80, ACK, c + 101, s + 1001, 0),
        tcp(a, ap, b, 80, FIN | ACK, c + 101, s + 1001, 0),
        tcp(b, 80, a, ap, ACK, s + 1001, c + 102, 0),
        tcp(b, 80, a, ap, FIN | ACK, s + 1001, c + 102, 0),
        tcp(a, ap, b, 80, ACK, c + 102, s + 1002, 0),
    ]);
    v
}

/// Every generated case for one address family.
fn family(a: Ip, b: Ip, c: Ip, tag: &str) -> Vec<(String, Vec<Vec<u8>>)> {
    let mut cases: Vec<(&str, Vec<Vec<u8>>)> = Vec::new();
    cases.push(("tcp_full_session", full_session(a, 1000, b, 100, 5000)));
    cases.push((
        "tcp_simultaneous_open",
        vec![
            tcp(a, 1000, b, 80, SYN, 100, 0, 0),
            tcp(b, 80, a, 1000, SYN, 5000, 0, 0),
            tcp(a, 1000, b, 80, SYN | ACK, 100, 5001, 0),
            tcp(b, 80, a, 1000, SYN | ACK, 5000, 101, 0),
            tcp(a, 1000, b, 80, ACK, 101, 5001, 0),
            tcp(b, 80, a, 1000, ACK | PSH, 5001, 101, 10),
        ],
    ));
    let mut retx = vec![tcp(a, 1000, b, 80, SYN, 100, 0, 0)];
    retx.push(retx[0].clone());
    retx.push(tcp(b, 80, a, 1000, SYN | ACK, 5000, 101, 0));
    retx.push(retx[2].clone());
    retx.push(tcp(a, 1000, b, 80, ACK, 101, 5001, 0));
    retx.push(tcp(a, 1000, b, 80, ACK | PSH, 101, 5001, 100));
    retx.push(retx[5].clone());
    retx.push(tcp(b, 80, a, 1000, ACK, 5001, 201, 0));
    retx.push(retx[7].clone());
    cases.push(("tcp_retransmissions", retx));
    let mut oow = handshake(a, 1000, b, 100, 5000);
    oow.extend([
        // Data far past the receiver's window.
        tcp(a, 1000, b, 80, ACK | PSH, 101 + 3_000_000, 5001, 100),
        // Data far before it.
        tcp(
            a,
            1000,
            b,
            80,
            ACK | PSH,
            101u32.wrapping_sub(3_000_000),
            5001,
            100,
        ),
        // An acknowledgement of data never sent.
        tcp(b, 80, a, 1000, ACK, 5001, 101 + 3_000_000, 0),
        // The flow still goes on.
        tcp(a, 1000, b, 80, ACK | PSH, 101, 5001, 100),
        tcp(b, 80, a, 1000, ACK, 5001, 201, 0),
    ]);
    cases.push(("tcp_out_of_window", oow));
    let mut rst_in = handshake(a, 1000, b, 100, 5000);
    rst_in.extend([
        tcp(b, 80, a, 1000, RST, 5001, 0, 0),
        tcp(a, 1000, b, 80, ACK, 101, 5001, 0),
    ]);
    cases.push(("tcp_rst_in_window_reply", rst_in));
    let mut rst_orig = handshake(a, 1000, b, 100, 5000);
    rst_orig.push(tcp(a, 1000, b, 80, RST | ACK, 101, 5001, 0));
    cases.push(("tcp_rst_in_window_original", rst_orig));
    let mut rst_out = handshake(a, 1000, b, 100, 5000);
    rst_out.extend([
        tcp(b, 80, a, 1000, RST, 5001 + 3_000_000, 0, 0),
        tcp(a, 1000, b, 80, ACK | PSH, 101, 5001, 10),
        tcp(b, 80, a, 1000, ACK, 5001, 111, 0),
    ]);
    cases.push(("tcp_rst_out_of_window", rst_out));
    cases.push((
        "tcp_rst_to_syn",
        vec![
            tcp(a, 1000, b, 80, SYN, 100, 0, 0),
            tcp(b, 80, a, 1000, RST | ACK, 0, 101, 0),
            tcp(a, 1000, b, 80, SYN, 100, 0, 0),
        ],
    ));
    let mut fins = full_session(a, 1000, b, 100, 5000);
    // Port reuse after the close: a new connection, a new ISN.
    fins.extend(full_session(a, 1000, b, 900_000, 700_000));
    cases.push(("tcp_port_reuse_after_close", fins));
    cases.push((
        "tcp_no_flow",
        vec![
            tcp(a, 1001, b, 80, ACK, 1, 1, 0),
            tcp(b, 80, a, 1002, SYN | ACK, 1, 1, 0),
            tcp(a, 1003, b, 80, FIN | ACK, 1, 1, 0),
            tcp(a, 1004, b, 80, RST, 1, 0, 0),
            tcp(a, 1005, b, 80, SYN | FIN, 1, 0, 0),
            tcp(a, 1006, b, 80, 0, 1, 0, 0),
        ],
    ));
    cases.push((
        "udp_pairs",
        vec![
            udp(a, 5000, b, 53),
            udp(a, 5000, b, 53),
            udp(b, 53, a, 5000),
            udp(a, 5000, b, 53),
            udp(b, 53, a, 5001),
            udp(c, 53, a, 5000),
        ],
    ));
    let syn = tcp(a, 1000, b, 80, SYN, 100, 0, 0);
    let dgram = udp(a, 5000, b, 53);
    cases.push((
        "icmp_errors_quoting_flows",
        vec![
            syn.clone(),
            // From the server and from a router on the way (C).
            icmp_error(b, a, &tcp(a, 1000, b, 80, SYN, 100, 0, 0)),
            icmp_error(c, a, &syn),
            dgram.clone(),
            icmp_error(b, a, &dgram),
            // Quoting a flow never seen.
            icmp_error(b, a, &udp(a, 5999, b, 53)),
            // Quoting a reply-direction packet, sent to its sender.
            udp(b, 53, a, 5000),
            icmp_error(a, b, &udp(b, 53, a, 5000)),
        ],
    ));
    cases.push((
        "echo_pairs",
        vec![
            echo(a, b, false, 7, 1),
            echo(b, a, true, 7, 1),
            echo(a, b, false, 7, 2),
            echo(b, a, true, 7, 2),
            echo(b, a, true, 8, 1),
            echo(b, a, false, 9, 1),
            echo(a, b, true, 9, 1),
        ],
    ));
    cases
        .into_iter()
        .map(|(n, f)| (format!("{n}_{tag}"), f))
        .collect()
}

/// All generated cases, IPv4 then IPv6.
pub fn all() -> Vec<(String, Vec<Vec<u8>>)> {
    let mut v = family(v4(1), v4(2), v4(3), "v4");
    v.extend(family(v6(1), v6(2), v6(3), "v6"));
    v
}
