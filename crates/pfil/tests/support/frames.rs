//! Frame generators for the property tests: arbitrary bytes, and frames
//! built layer by layer (Ethernet with 0 to 3 VLAN tags, QinQ included;
//! IPv4 with options; IPv6 with extension header chains; UDP, TCP and other
//! payloads) with every field allowed to be wrong, then truncated and
//! corrupted at random.
//!
//! Shared by `pfil`'s and `pfil-filters`' property tests (the latter
//! includes this file with `#[path]`).

#![allow(dead_code)]

use pfil::PacketKind;
use proptest::prelude::*;
use proptest::test_runner::Config;

/// Cases per property: `PROPTEST_CASES` if set (`scripts/fuzz-long.sh`
/// sets 100 000), else a few thousand.
pub fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4096);
    Config {
        cases,
        // Keep the source tree clean; a failure prints its minimal input.
        failure_persistence: None,
        ..Config::default()
    }
}

/// Mostly `true`: a field is usually right, so that the layers behind it
/// get parsed too.
fn honest() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.85)
}

/// EtherTypes worth hitting, and any other.
pub fn ether_type() -> impl Strategy<Value = u16> {
    prop_oneof![
        3 => Just(0x0800u16), // IPv4
        3 => Just(0x86dd),    // IPv6
        1 => Just(0x0806),    // ARP
        1 => Just(0x8100),    // 802.1Q
        1 => Just(0x88a8),    // 802.1ad (QinQ)
        1 => Just(0x9100),    // old QinQ
        1 => Just(0x8847),    // MPLS
        1 => Just(0x0000),
        1 => Just(0xffff),
        2 => any::<u16>(),
    ]
}

/// A transport protocol number and its header + payload bytes.
fn l4() -> impl Strategy<Value = (u8, Vec<u8>)> {
    let payload = || prop::collection::vec(any::<u8>(), 0..48);
    // Port 53 often: the filters' tests block it.
    let port = || prop_oneof![1 => Just(53u16), 3 => any::<u16>()];
    let udp = (port(), port(), honest(), payload()).prop_map(|(sp, dp, honest_len, pl)| {
        let len = if honest_len {
            8 + pl.len() as u16
        } else {
            sp ^ dp
        };
        let mut v = Vec::new();
        v.extend_from_slice(&sp.to_be_bytes());
        v.extend_from_slice(&dp.to_be_bytes());
        v.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend(pl);
        (17u8, v)
    });
    let tcp = (
        port(),
        port(),
        0u8..16,
        prop::collection::vec(any::<u8>(), 0..40),
        payload(),
    )
        .prop_map(|(sp, dp, data_offset, options, pl)| {
            let mut v = Vec::new();
            v.extend_from_slice(&sp.to_be_bytes());
            v.extend_from_slice(&dp.to_be_bytes());
            v.extend_from_slice(&[0; 8]); // seq, ack
            v.push(data_offset << 4);
            v.extend_from_slice(&[0x18, 0xff, 0xff, 0, 0, 0, 0]);
            v.extend(options);
            v.extend(pl);
            (6u8, v)
        });
    let other = (any::<u8>(), payload());
    prop_oneof![3 => udp, 3 => tcp, 1 => other]
}

/// IPv6 extension headers: (next-header number of this header, bytes
/// without the leading next-header byte, which the chain fills in).
fn ext_header() -> impl Strategy<Value = (u8, Vec<u8>)> {
    let generic = |num: u8| {
        (0u8..4, honest()).prop_map(move |(len, honest)| {
            // Hop-by-hop, routing, destination options: (len + 1) * 8 bytes.
            let total = (usize::from(len) + 1) * 8;
            let mut v = vec![if honest { len } else { len.wrapping_add(7) }];
            v.resize(total - 1, 0);
            (num, v)
        })
    };
    prop_oneof![
        generic(0),                 // hop-by-hop
        generic(43),                // routing
        generic(60),                // destination options
        Just((44u8, vec![0u8; 7])), // fragment: 8 bytes
        (0u8..4).prop_map(|len| {
            // Authentication header: (len + 2) * 4 bytes.
            let mut v = vec![len];
            v.resize((usize::from(len) + 2) * 4 - 1, 0);
            (51u8, v)
        }),
    ]
}

/// An IP packet (IPv4 or IPv6, fields possibly inconsistent); returns the
/// kind it claims to be.
pub fn ip_packet() -> impl Strategy<Value = (PacketKind, Vec<u8>)> {
    let v4 = (
        l4(),
        prop_oneof![4 => Just(5u8), 3 => 6u8..16, 1 => 0u8..5],
        prop::collection::vec(any::<u8>(), 40),
        honest(),
        any::<[u8; 4]>(),
        any::<[u8; 8]>(),
        any::<u8>(),
    )
        .prop_map(|((proto, l4), ihl, opts, honest, frag, addrs, noise)| {
            let hl = usize::from(ihl) * 4;
            let total = (hl + l4.len()) as u16;
            let mut v = vec![0x40 | ihl, 0];
            let len = if honest {
                total
            } else {
                total ^ u16::from(noise)
            };
            v.extend_from_slice(&len.to_be_bytes());
            // id, flags + fragment offset (sometimes a fragment)
            v.extend_from_slice(&[0, 0]);
            v.extend_from_slice(&if honest {
                [0x40, 0]
            } else {
                [frag[0], frag[1]]
            });
            v.extend_from_slice(&[64, proto, 0, 0]);
            v.extend_from_slice(&addrs);
            v.extend_from_slice(&opts[..hl.saturating_sub(20)]);
            v.extend(l4);
            (PacketKind::Ipv4, v)
        });
    let v6 = (
        l4(),
        prop::collection::vec(ext_header(), 0..4),
        honest(),
        any::<[u8; 32]>(),
        any::<u16>(),
    )
        .prop_map(|((proto, l4), exts, honest, addrs, noise)| {
            // Chain: each header's first byte names the next one.
            let mut body = Vec::new();
            let mut first = proto;
            for (num, bytes) in exts.iter().rev() {
                let mut h = vec![first];
                h.extend_from_slice(bytes);
                h.extend(body);
                body = h;
                first = *num;
            }
            body.extend(l4);
            let len = if honest { body.len() as u16 } else { noise };
            let mut v = vec![0x60, 0, 0, 0];
            v.extend_from_slice(&len.to_be_bytes());
            v.extend_from_slice(&[first, 64]);
            v.extend_from_slice(&addrs);
            v.extend(body);
            (PacketKind::Ipv6, v)
        });
    prop_oneof![v4, v6]
}

/// An Ethernet frame: MACs, 0 to 3 VLAN tags (802.1Q, QinQ), an EtherType
/// (usually the IP packet's), then the IP packet or random bytes.
pub fn ethernet_frame() -> impl Strategy<Value = Vec<u8>> {
    let tpid = prop_oneof![
        4 => Just(0x8100u16),
        3 => Just(0x88a8),
        1 => Just(0x9100),
        1 => any::<u16>(),
    ];
    (
        any::<[u8; 12]>(),
        prop::collection::vec((tpid, any::<u16>()), 0..4),
        prop_oneof![
            3 => ip_packet().prop_map(|(k, v)| (Some(k), v)),
            1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(|v| (None, v)),
        ],
        honest(),
        ether_type(),
    )
        .prop_map(|(macs, tags, (kind, payload), honest, random_type)| {
            let mut v = macs.to_vec();
            for (tpid, tci) in tags {
                v.extend_from_slice(&tpid.to_be_bytes());
                v.extend_from_slice(&tci.to_be_bytes());
            }
            let et = match kind {
                Some(PacketKind::Ipv4) if honest => 0x0800,
                Some(PacketKind::Ipv6) if honest => 0x86dd,
                _ => random_type,
            };
            v.extend_from_slice(&et.to_be_bytes());
            v.extend(payload);
            v
        })
}

/// Cut a frame at a random length and flip a few random bytes.
fn damage(frame: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = frame.len();
    (
        prop_oneof![3 => Just(len), 1 => 0..=len],
        prop_oneof![
            3 => Just(Vec::new()),
            1 => prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..3),
        ],
    )
        .prop_map(move |(cut, flips)| {
            let mut f = frame.clone();
            f.truncate(cut);
            if !f.is_empty() {
                for (i, x) in flips {
                    let at = i.index(f.len());
                    f[at] ^= x | 1;
                }
            }
            f
        })
}

/// Any frame with the kind to run it as: structured (Ethernet, IPv4, IPv6,
/// damaged or not), or raw random bytes of any kind.
pub fn any_frame() -> impl Strategy<Value = (PacketKind, Vec<u8>)> {
    let kind = prop_oneof![
        Just(PacketKind::Ethernet),
        Just(PacketKind::Ipv4),
        Just(PacketKind::Ipv6)
    ];
    prop_oneof![
        3 => ethernet_frame()
            .prop_flat_map(damage)
            .prop_map(|f| (PacketKind::Ethernet, f)),
        2 => ip_packet().prop_flat_map(|(k, f)| damage(f).prop_map(move |f| (k, f))),
        1 => (kind, prop::collection::vec(any::<u8>(), 0..128)),
    ]
}

/// A well-formed transport header and payload: (is ICMP, protocol number
/// over IPv4, bytes). ICMP takes the number of its IP version.
fn real_l4() -> impl Strategy<Value = (bool, u8, Vec<u8>)> {
    let payload = || prop::collection::vec(any::<u8>(), 0..64);
    let port = || prop_oneof![1 => Just(53u16), 1 => Just(443), 3 => any::<u16>()];
    let udp = (port(), port(), payload()).prop_map(|(sp, dp, pl)| {
        let mut v = Vec::new();
        v.extend_from_slice(&sp.to_be_bytes());
        v.extend_from_slice(&dp.to_be_bytes());
        v.extend_from_slice(&(8 + pl.len() as u16).to_be_bytes());
        v.extend_from_slice(&[0x12, 0x34]);
        v.extend(pl);
        (false, 17u8, v)
    });
    let tcp = (port(), port(), any::<u8>(), 0usize..=10, payload()).prop_map(
        |(sp, dp, flags, words, pl)| {
            let mut v = Vec::new();
            v.extend_from_slice(&sp.to_be_bytes());
            v.extend_from_slice(&dp.to_be_bytes());
            v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
            v.push(((5 + words) as u8) << 4);
            v.extend_from_slice(&[flags, 0xff, 0xff, 0, 0, 0, 0]);
            v.extend(std::iter::repeat_n(1u8, words * 4)); // NOP options
            v.extend(pl);
            (false, 6u8, v)
        },
    );
    let icmp = (
        prop_oneof![
            Just(0u8),
            Just(3),
            Just(8),
            Just(11),
            Just(13),
            Just(14),
            Just(128),
            Just(129),
            Just(135),
            any::<u8>()
        ],
        prop_oneof![3 => Just(0u8), 1 => any::<u8>()],
        payload(),
    )
        .prop_map(|(t, c, mut pl)| {
            if matches!(t, 13 | 14) && c == 0 {
                pl.resize(12, 0); // timestamps: 20 bytes exactly
            }
            let mut v = vec![t, c, 0, 0, 0, 1, 0, 1];
            v.extend(pl);
            (true, 1u8, v)
        });
    let other = (
        prop_oneof![Just(47u8), Just(132), Just(4), Just(59)],
        payload(),
    )
        .prop_map(|(p, pl)| (false, p, pl));
    prop_oneof![4 => udp, 3 => tcp, 2 => icmp, 1 => other]
}

/// A well-formed IP packet as real traffic has them: IPv4 with or without
/// options, sometimes a fragment; IPv6 with no or a few extension headers,
/// sometimes a fragment; every length right.
pub fn real_ip_packet() -> impl Strategy<Value = (PacketKind, Vec<u8>)> {
    let v4 = (
        real_l4(),
        prop_oneof![6 => Just(5u8), 1 => 6u8..16],
        prop_oneof![6 => Just([0x40u8, 0]), 1 => Just([0x20, 0]), 1 => any::<[u8; 2]>()],
        any::<[u8; 8]>(),
    )
        .prop_map(|((_, proto, l4), ihl, frag, addrs)| {
            let hl = usize::from(ihl) * 4;
            let mut v = vec![0x40 | ihl, 0];
            v.extend_from_slice(&((hl + l4.len()) as u16).to_be_bytes());
            v.extend_from_slice(&[0xab, 0xcd]);
            v.extend_from_slice(&frag);
            v.extend_from_slice(&[64, proto, 0, 0]);
            v.extend_from_slice(&addrs);
            v.resize(hl, 1); // NOP options
            v.extend(l4);
            (PacketKind::Ipv4, v)
        });
    let ext = prop_oneof![
        Just((0u8, vec![0u8; 7])),
        Just((60u8, vec![0u8; 7])),
        Just((43u8, vec![0u8, 0, 0, 0, 0, 0, 0])),
        any::<[u8; 2]>().prop_map(|f| (44u8, vec![0, f[0], f[1] & 0xf9, 0, 0, 0, 7])),
    ];
    let v6 = (
        real_l4(),
        prop_oneof![4 => Just(vec![]), 1 => prop::collection::vec(ext, 1..3)],
        any::<[u8; 32]>(),
    )
        .prop_map(|((icmp, proto, l4), exts, addrs)| {
            let proto = if icmp { 58 } else { proto };
            let mut body = Vec::new();
            let mut first = proto;
            for (num, bytes) in exts.iter().rev() {
                let mut h = vec![first];
                h.extend_from_slice(bytes);
                h.extend(body);
                body = h;
                first = *num;
            }
            body.extend(l4);
            let mut v = vec![0x60, 0, 0, 0];
            v.extend_from_slice(&(body.len() as u16).to_be_bytes());
            v.extend_from_slice(&[first, 64]);
            v.extend_from_slice(&addrs);
            v.extend(body);
            (PacketKind::Ipv6, v)
        });
    prop_oneof![v4, v6]
}

/// A well-formed frame: an Ethernet frame with no, one (802.1Q) or two
/// (802.1ad + 802.1Q) VLAN tags, padded to 60 bytes as on the wire, or the
/// bare IP packet for an IP head; now and then ARP.
pub fn real_frame() -> impl Strategy<Value = (PacketKind, Vec<u8>)> {
    let tags = prop_oneof![
        4 => Just(vec![]),
        2 => any::<u16>().prop_map(|t| vec![(0x8100u16, t)]),
        1 => any::<[u16; 2]>().prop_map(|t| vec![(0x88a8u16, t[0]), (0x8100, t[1])]),
    ];
    let ethernet = (any::<[u8; 12]>(), tags, real_ip_packet()).prop_map(|(macs, tags, (k, ip))| {
        let mut v = macs.to_vec();
        for (tpid, tci) in tags {
            v.extend_from_slice(&tpid.to_be_bytes());
            v.extend_from_slice(&tci.to_be_bytes());
        }
        let et: u16 = if k == PacketKind::Ipv4 {
            0x0800
        } else {
            0x86dd
        };
        v.extend_from_slice(&et.to_be_bytes());
        v.extend(ip);
        if v.len() < 60 {
            v.resize(60, 0);
        }
        (PacketKind::Ethernet, v)
    });
    let arp = any::<[u8; 12]>().prop_map(|macs| {
        let mut v = macs.to_vec();
        v.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        v.resize(60, 0);
        (PacketKind::Ethernet, v)
    });
    prop_oneof![6 => ethernet, 3 => real_ip_packet(), 1 => arp]
}
