//! Frames built by hand for the oracle: Ethernet with up to two VLAN
//! tags, IPv4, IPv6, ARP, UDP, TCP, ICMP, ICMPv6 neighbour discovery, and
//! [`generated`], every combination of them plus truncations.

#![allow(
    clippy::cast_possible_truncation,
    reason = "lengths of frames built here are far below 64 KiB"
)]

/// A MAC address.
pub const MAC_A: [u8; 6] = [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01];
/// Another.
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// An IPv4 address.
pub const V4_A: [u8; 4] = [198, 18, 0, 1];
/// Another.
pub const V4_B: [u8; 4] = [198, 18, 0, 2];
/// A third, in another /16.
pub const V4_C: [u8; 4] = [198, 19, 7, 9];
/// An IPv6 address.
pub const V6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
/// Another.
pub const V6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// An Ethernet header with `vlans` tags (802.1ad then 802.1Q when two).
pub fn eth(dst: [u8; 6], src: [u8; 6], vlans: usize, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for i in 0..vlans {
        f.extend_from_slice(
            &(if i == 0 && vlans == 2 {
                0x88a8u16
            } else {
                0x8100
            })
            .to_be_bytes(),
        );
        f.extend_from_slice(&(100 + i as u16).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// A UDP (17), TCP (6, a SYN) or ICMP echo header with a little payload.
pub fn l4(proto: u8, sport: u16, dport: u16) -> Vec<u8> {
    match proto {
        17 => {
            let mut u = Vec::new();
            u.extend_from_slice(&sport.to_be_bytes());
            u.extend_from_slice(&dport.to_be_bytes());
            u.extend_from_slice(&[0, 12, 0, 0, 0xde, 0xad, 0xbe, 0xef]);
            u
        }
        6 => {
            let mut t = Vec::new();
            t.extend_from_slice(&sport.to_be_bytes());
            t.extend_from_slice(&dport.to_be_bytes());
            t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
            t
        }
        _ => vec![8, 0, 0xf7, 0xff, 0, 1, 0, 1],
    }
}

/// An IPv4 header (checksum 0) and `body`.
pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, body: &[u8]) -> Vec<u8> {
    let len = (20 + body.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(body);
    h
}

/// An IPv6 header and `body`.
pub fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, body: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(body);
    h
}

/// An ICMPv6 message of type `kind` with `target` (neighbour discovery).
pub fn icmp6_nd(kind: u8, target: [u8; 16]) -> Vec<u8> {
    let mut b = vec![kind, 0, 0, 0, 0, 0, 0, 0];
    b.extend_from_slice(&target);
    b
}

/// An ARP request (1) or reply (2) body.
pub fn arp(op: u16, sip: [u8; 4], tip: [u8; 4]) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&MAC_B);
    a.extend_from_slice(&sip);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&tip);
    a
}

/// Generated traffic: every combination of MACs, VLAN tags, IPv4/IPv6/
/// ARP/other, UDP/TCP/ICMP, ports and addresses, plus every
/// truncation of a few of them.
pub fn generated() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let ports = [53u16, 80, 22, 123, 1000];
    for (mi, (dst, src)) in [(MAC_B, MAC_A), (MAC_A, MAC_B), (MAC_B, MAC_B)]
        .into_iter()
        .enumerate()
    {
        for vlans in 0..3 {
            for (ai, (s4, d4)) in [(V4_A, V4_C), (V4_C, V4_A), (V4_B, V4_C), (V4_C, V4_C)]
                .into_iter()
                .enumerate()
            {
                for proto in [17u8, 6, 1] {
                    for &sp in &ports {
                        for &dp in &ports {
                            if proto == 1 && (sp, dp) != (53, 53) {
                                continue;
                            }
                            let mut f = eth(dst, src, vlans, 0x0800);
                            f.extend(ipv4(s4, d4, proto, &l4(proto, sp, dp)));
                            out.push((
                                format!("v4 mac{mi} vlan{vlans} addr{ai} p{proto} {sp}>{dp}"),
                                f,
                            ));
                        }
                    }
                }
            }
            for (ai, (s6, d6)) in [(V6_A, V6_B), (V6_B, V6_A), (V6_B, V6_B)]
                .into_iter()
                .enumerate()
            {
                for proto in [17u8, 6] {
                    for &dp in &ports {
                        let mut f = eth(dst, src, vlans, 0x86dd);
                        f.extend(ipv6(s6, d6, proto, &l4(proto, 4000, dp)));
                        out.push((format!("v6 mac{mi} vlan{vlans} addr{ai} p{proto} >{dp}"), f));
                    }
                }
                for (kind, t) in [(135u8, V6_A), (136, V6_A), (135, V6_B), (128, V6_A)] {
                    let mut f = eth(dst, src, vlans, 0x86dd);
                    f.extend(ipv6(s6, d6, 58, &icmp6_nd(kind, t)));
                    out.push((format!("icmp6 {kind} mac{mi} vlan{vlans} addr{ai}"), f));
                }
            }
            for (op, s, t) in [
                (1u16, V4_C, V4_A),
                (2, V4_C, V4_A),
                (1, V4_B, V4_C),
                (2, V4_A, V4_C),
            ] {
                let mut f = eth(dst, src, vlans, 0x0806);
                f.extend(arp(op, s, t));
                out.push((format!("arp {op} mac{mi} vlan{vlans}"), f));
            }
            let mut f = eth(dst, src, vlans, 0x88cc);
            f.extend_from_slice(&[0; 40]);
            out.push((format!("lldp mac{mi} vlan{vlans}"), f));
        }
    }
    let seeds: Vec<Vec<u8>> = out.iter().step_by(97).map(|(_, f)| f.clone()).collect();
    for (i, f) in seeds.iter().enumerate() {
        for cut in 14..f.len() {
            out.push((format!("truncated seed{i} at {cut}"), f[..cut].to_vec()));
        }
    }
    out
}
