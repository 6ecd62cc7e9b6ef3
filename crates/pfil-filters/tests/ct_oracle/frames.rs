//! Frames for the oracle: built from fields (the generated cases) or
//! taken from a capture and rewritten to the test's addresses (every
//! IPv4 address to one in 198.18.0.0/15, every IPv6 address to one in
//! 2001:2::/48, also inside the packet an ICMP error quotes), hop limit
//! 64, checksums recomputed. The destination MAC is left zero: the
//! sender writes the receiving veth's in.

use std::collections::HashMap;

/// TCP flags.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

/// The source MAC of every frame (locally administered).
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0xc7, 0, 1];

/// An address of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip {
    /// IPv4.
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

/// `198.18.0.n`.
pub fn v4(n: u8) -> Ip {
    Ip::V4([198, 18, 0, n])
}

/// `2001:2::n`.
pub fn v6(n: u8) -> Ip {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0, 2]);
    a[15] = n;
    Ip::V6(a)
}

/// An IP packet (no Ethernet header) from `src` to `dst` carrying `l4`
/// of protocol `proto`; checksums are computed by [`frame`].
pub fn ip(src: Ip, dst: Ip, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(40 + l4.len());
    match (src, dst) {
        (Ip::V4(s), Ip::V4(d)) => {
            let len = u16::try_from(20 + l4.len()).expect("a small packet");
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&len.to_be_bytes());
            p.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
            p.extend_from_slice(&s);
            p.extend_from_slice(&d);
        }
        (Ip::V6(s), Ip::V6(d)) => {
            let len = u16::try_from(l4.len()).expect("a small packet");
            p.extend_from_slice(&[0x60, 0, 0, 0]);
            p.extend_from_slice(&len.to_be_bytes());
            p.extend_from_slice(&[proto, 64]);
            p.extend_from_slice(&s);
            p.extend_from_slice(&d);
        }
        _ => panic!("mixed address families"),
    }
    p.extend_from_slice(l4);
    p
}

/// The Ethernet frame of an IP packet, checksums computed.
pub fn frame(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 6];
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(if ip[0] >> 4 == 6 {
        &[0x86, 0xdd]
    } else {
        &[0x08, 0x00]
    });
    f.extend_from_slice(ip);
    fix_checksums(&mut f);
    f
}

/// A TCP segment from `s:sp` to `d:dp` with `data` bytes of payload.
#[allow(clippy::too_many_arguments)]
pub fn tcp(s: Ip, sp: u16, d: Ip, dp: u16, flags: u8, seq: u32, ack: u32, data: usize) -> Vec<u8> {
    let mut t = Vec::with_capacity(20 + data);
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[5 << 4, flags]);
    t.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    t.resize(20 + data, 0x61);
    frame(&ip(s, d, 6, &t))
}

/// A UDP datagram with a 5-byte payload.
pub fn udp(s: Ip, sp: u16, d: Ip, dp: u16) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sp.to_be_bytes());
    u.extend_from_slice(&dp.to_be_bytes());
    u.extend_from_slice(&13u16.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(b"hello");
    frame(&ip(s, d, 17, &u))
}

/// An echo request (or reply) with identifier `id` and sequence `seq`.
pub fn echo(s: Ip, d: Ip, reply: bool, id: u16, seq: u16) -> Vec<u8> {
    let (proto, ty) = match (s, reply) {
        (Ip::V4(_), false) => (1, 8),
        (Ip::V4(_), true) => (1, 0),
        (Ip::V6(_), false) => (58, 128),
        (Ip::V6(_), true) => (58, 129),
    };
    let mut m = vec![ty, 0, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(b"pingpong");
    frame(&ip(s, d, proto, &m))
}

/// An ICMP error (destination unreachable, port unreachable; for IPv6
/// code 4) from `s` to `d` quoting `quoted` (a frame: its first 64 bytes
/// of IP packet are quoted).
pub fn icmp_error(s: Ip, d: Ip, quoted: &[u8]) -> Vec<u8> {
    let inner = &quoted[14..quoted.len().min(14 + 64)];
    let (proto, ty, code) = match s {
        Ip::V4(_) => (1, 3, 3),
        Ip::V6(_) => (58, 1, 4),
    };
    let mut m = vec![ty, code, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(inner);
    frame(&ip(s, d, proto, &m))
}

fn sum(mut acc: u32, b: &[u8]) -> u32 {
    let mut it = b.chunks_exact(2);
    for c in &mut it {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [x] = it.remainder() {
        acc += u32::from(*x) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Recompute the IPv4 header checksum and the TCP, UDP, ICMP or ICMPv6
/// checksum of an Ethernet frame holding one unfragmented IP packet
/// (the packet's own lengths bound what is summed).
pub fn fix_checksums(f: &mut [u8]) {
    let et = u16::from_be_bytes([f[12], f[13]]);
    let (l4, end, proto, pseudo) = match et {
        0x0800 => {
            let ihl = usize::from(f[14] & 0xf) * 4;
            let end = (14 + usize::from(u16::from_be_bytes([f[16], f[17]]))).min(f.len());
            f[24] = 0;
            f[25] = 0;
            let c = fold(sum(0, &f[14..14 + ihl]));
            f[24..26].copy_from_slice(&c.to_be_bytes());
            let proto = f[23];
            let len = (end - 14 - ihl) as u32;
            let pseudo = sum(u32::from(proto) + len, &f[26..34]);
            (14 + ihl, end, proto, if proto == 1 { 0 } else { pseudo })
        }
        0x86dd => {
            let end = (54 + usize::from(u16::from_be_bytes([f[18], f[19]]))).min(f.len());
            let proto = f[20];
            let len = (end - 54) as u32;
            (54, end, proto, sum(u32::from(proto) + len, &f[22..54]))
        }
        _ => return,
    };
    let at = match proto {
        6 => 16,
        17 => 6,
        1 | 58 => 2,
        _ => return,
    };
    if l4 + at + 2 > end {
        return;
    }
    f[l4 + at] = 0;
    f[l4 + at + 1] = 0;
    let mut c = fold(sum(pseudo, &f[l4..end]));
    if proto == 17 && c == 0 {
        c = 0xffff;
    }
    f[l4 + at..l4 + at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Maps a capture's addresses to the test's, in order of first sight.
#[derive(Default)]
pub struct Rewriter {
    v4: HashMap<[u8; 4], [u8; 4]>,
    v6: HashMap<[u8; 16], [u8; 16]>,
}

impl Rewriter {
    fn map4(&mut self, a: &mut [u8]) {
        let n = self.v4.len() as u32 + 1;
        let key: [u8; 4] = a.try_into().expect("4 bytes");
        let to = *self.v4.entry(key).or_insert_with(|| {
            let x = (198u32 << 24 | 18 << 16) + (n & 0x1_ffff);
            x.to_be_bytes()
        });
        a.copy_from_slice(&to);
    }

    fn map6(&mut self, a: &mut [u8]) {
        let n = self.v6.len() as u16 + 1;
        let key: [u8; 16] = a.try_into().expect("16 bytes");
        let to = *self.v6.entry(key).or_insert_with(|| {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&[0x20, 0x01, 0, 2]);
            b[14..].copy_from_slice(&n.to_be_bytes());
            b
        });
        a.copy_from_slice(&to);
    }

    /// The captured frame `f` (of original length `len`) rewritten, or
    /// `None` if the oracle cannot use it: not plain Ethernet IPv4/IPv6
    /// (VLAN tags, ARP, ...), cut short by the capture's snap length,
    /// longer than the veths' MTU (65 000), an IP fragment, IPv6 with extension
    /// headers, or IP lengths that do not fit the frame (Linux drops
    /// those before conntrack sees them).
    pub fn rewrite(&mut self, f: &[u8], len: usize) -> Option<Vec<u8>> {
        if f.len() != len || f.len() > 14 + crate::linux::MTU || f.len() < 34 {
            return None;
        }
        let mut f = f.to_vec();
        f[6..12].copy_from_slice(&SRC_MAC);
        f[..6].fill(0);
        match u16::from_be_bytes([f[12], f[13]]) {
            0x0800 => {
                let ihl = usize::from(f[14] & 0xf) * 4;
                let tot = usize::from(u16::from_be_bytes([f[16], f[17]]));
                let frag = u16::from_be_bytes([f[20], f[21]]) & 0x3fff;
                if f[14] >> 4 != 4 || ihl < 20 || tot < ihl || 14 + tot > f.len() || frag != 0 {
                    return None;
                }
                f.truncate(14 + tot);
                f[22] = 64;
                self.map4(&mut f[26..30]);
                self.map4(&mut f[30..34]);
                let l4 = 14 + ihl;
                let quoting =
                    f[23] == 1 && f.len() >= l4 + 8 + 20 && matches!(f[l4], 3 | 4 | 5 | 11 | 12);
                if quoting && f[l4 + 8] >> 4 == 4 {
                    let i = l4 + 8;
                    let iihl = usize::from(f[i] & 0xf) * 4;
                    self.map4(&mut f[i + 12..i + 16]);
                    self.map4(&mut f[i + 16..i + 20]);
                    if iihl >= 20 && i + iihl <= f.len() {
                        f[i + 10] = 0;
                        f[i + 11] = 0;
                        let c = fold(sum(0, &f[i..i + iihl]));
                        f[i + 10..i + 12].copy_from_slice(&c.to_be_bytes());
                    }
                }
            }
            0x86dd => {
                let plen = usize::from(u16::from_be_bytes([f[18], f[19]]));
                if f.len() < 54
                    || f[14] >> 4 != 6
                    || 54 + plen > f.len()
                    || !matches!(f[20], 6 | 17 | 58)
                {
                    return None;
                }
                f.truncate(54 + plen);
                f[21] = 64;
                self.map6(&mut f[22..38]);
                self.map6(&mut f[38..54]);
                if f[20] == 58 && f.len() >= 54 + 8 + 40 && (1..=4).contains(&f[54]) {
                    self.map6(&mut f[54 + 8 + 8..54 + 8 + 24]);
                    self.map6(&mut f[54 + 8 + 24..54 + 8 + 40]);
                }
            }
            _ => return None,
        }
        fix_checksums(&mut f);
        Some(f)
    }
}
