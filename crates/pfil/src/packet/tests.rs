//! Tests of the packet and its parse cache.

use super::*;
use etherparse::PacketBuilder;
use std::net::IpAddr;

#[test]
fn parse_cache_is_8_bytes_and_a_packet_one_cache_line() {
    // As the docs of `Layout` say; a `Packet` is built per frame.
    assert_eq!(std::mem::size_of::<Layout>(), 8);
    assert_eq!(std::mem::size_of::<Packet<'_>>(), 64);
    assert_eq!(std::mem::align_of::<Packet<'_>>(), 64);
}

fn udp_frame(dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(4000, dst_port);
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, payload).unwrap();
    v
}

/// The plain decoder's exact-length path (IP packet and datagram fill
/// the frame) and the range checks behind it give the same answers;
/// a frame beyond 64 KiB whose lengths match modulo 2^16 is not plain
/// (etherparse's path calls it malformed), lengths off by one either
/// way are refused or taken by the range checks, and another protocol
/// than UDP or TCP is not plain, nor is TCP because bytes 38..40 happen
/// to hold what a UDP length filling the frame would.
#[test]
fn the_plain_decoders_length_paths_agree() {
    let exact = udp_frame(53, &[0xa5; 22]);
    assert_eq!(exact.len(), 64);
    let smallest = udp_frame(53, &[]);
    assert_eq!(smallest.len(), 42);
    let mut padded = udp_frame(53, &[0xa5; 2]);
    padded.resize(60, 0);
    let with = |f: &[u8], at: usize, v: u16| {
        let mut f = f.to_vec();
        f[at..at + 2].copy_from_slice(&v.to_be_bytes());
        f
    };
    let short_udp = with(&exact, 38, 20);
    let udp_minus_one = with(&exact, 38, 29);
    let udp_plus_one = with(&exact, 38, 31);
    let total_minus_one = with(&exact, 16, 49);
    let total_plus_one = with(&exact, 16, 51);
    let mut huge = exact.clone();
    huge.resize(65536 + 64, 0);
    let mut largest = exact.clone();
    largest.resize(65535, 0);
    let largest = with(&with(&largest, 16, 65535 - 14), 38, 65535 - 34);
    // Plain but for the protocol (GRE): neither UDP nor TCP.
    let mut gre = exact.clone();
    gre[23] = 47;
    // TCP whose IP packet fills the frame and whose bytes 38..40 (its
    // acknowledgement number) read as a UDP length filling it.
    let mut tcp = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .tcp(4000, 80, 1, 1024)
        .write(&mut tcp, &[0x5a; 10])
        .unwrap();
    let tcp = with(&tcp, 38, (tcp.len() - 34) as u16);
    let cases: [(&str, &[u8], bool); 13] = [
        ("exact", &exact, true),
        ("smallest", &smallest, true),
        ("padded", &padded, true),
        ("short datagram", &short_udp, true),
        ("datagram one short", &udp_minus_one, true),
        ("datagram one long", &udp_plus_one, false),
        ("total one short", &total_minus_one, false),
        ("total one long", &total_plus_one, false),
        ("beyond 64 KiB", &huge, false),
        ("64 KiB - 1", &largest, true),
        ("gre", &gre, false),
        ("tcp", &tcp, true),
        ("tcp, total one long", &with(&tcp, 16, 51), false),
    ];
    for (name, f, plain) in cases {
        let reference = parse::parse_etherparse(f, PacketKind::Ethernet);
        let fast = parse::fast::ethernet_ipv4_plain(f).map(|(l, _)| l);
        assert_eq!(fast.is_some(), plain, "{name}");
        if let Some(l) = fast {
            assert_eq!(l, reference, "{name}");
        }
        let mut buf = f.to_vec();
        let p = Packet::new(&mut buf);
        let t = p.five_tuple_v4();
        assert_eq!(p.plain_five_tuple_v4().is_some(), plain, "{name}");
        let want = (reference.state() == ParseState::Ok).then(|| {
            Parsed {
                frame: f,
                l: reference,
            }
            .five_tuple_v4()
        });
        assert_eq!(t, want.flatten(), "{name}");
    }
}

/// The SSE2 test of the plain frame's fixed fields and the portable
/// one agree, on frames that are plain but for one bit anywhere in
/// bytes 0..42 and on a plain frame; and the bits that make a frame
/// not plain are exactly the EtherType's, version and IHL's, and the
/// more-fragments flag's and fragment offset's.
#[test]
fn the_fixed_fields_test_is_the_portable_one() {
    let f = udp_frame(53, &[0xa5; 22]);
    let h: [u8; 42] = *f.first_chunk().unwrap();
    assert!(parse::fast::fixed_fields_plain(&h));
    let mut differing = Vec::new();
    for bit in 0..42 * 8 {
        let mut x = h;
        x[bit / 8] ^= 1 << (bit % 8);
        let (fast, portable) = (
            parse::fast::fixed_fields_plain(&x),
            parse::fast::fixed_fields_plain_portable(&x),
        );
        assert_eq!(fast, portable, "bit {bit}");
        if !fast {
            differing.push(bit);
        }
    }
    let want: Vec<usize> = (12 * 8..15 * 8)
        .chain(20 * 8..20 * 8 + 6)
        .chain(21 * 8..22 * 8)
        .collect();
    assert_eq!(differing, want);
}

#[test]
fn a_plain_frames_words_are_its_tuples_bytes() {
    let f = udp_frame(53, b"x");
    let t = FiveTupleV4 {
        src: 0xc612_0001,
        dst: 0xc612_0002,
        src_port: 4000,
        dst_port: 53,
        protocol: 17,
    };
    let w = plain_words(f.first_chunk().unwrap());
    assert_eq!(
        w,
        FiveTupleV4::words(t.src, t.dst, t.src_port, t.dst_port, t.protocol)
    );
    assert_eq!(FiveTupleV4::from_words(w), t);
    // The words are the tuple's bytes: the fields at their offsets,
    // the padding zero.
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&w[0].to_ne_bytes());
    bytes[8..].copy_from_slice(&w[1].to_ne_bytes());
    let mut want = [0u8; 16];
    want[0..4].copy_from_slice(&t.src.to_ne_bytes());
    want[4..8].copy_from_slice(&t.dst.to_ne_bytes());
    want[8..10].copy_from_slice(&t.src_port.to_ne_bytes());
    want[10..12].copy_from_slice(&t.dst_port.to_ne_bytes());
    want[12] = t.protocol;
    assert_eq!(bytes, want);
}

#[test]
fn udp_headers_parse_and_cache() {
    let mut f = udp_frame(53, b"hello");
    let p = Packet::new(&mut f).with_origin(7, 3);
    let h = p.headers().unwrap();
    assert_eq!(h.ether_type, Some(0x0800));
    let ip = h.ip.unwrap();
    assert_eq!(ip.src, "198.18.0.1".parse::<IpAddr>().unwrap());
    assert_eq!(ip.protocol, 17);
    assert_eq!(ip.offset, 14);
    let t = h.transport.unwrap();
    assert_eq!((t.protocol, t.src_port, t.dst_port), (L4::Udp, 4000, 53));
    assert_eq!(&p.frame()[t.payload_offset..], b"hello");
    assert_eq!((p.ifindex(), p.queue()), (7, 3));
    assert!(Layout::from_word(p.parsed.get()).state() == ParseState::Ok);
}

fn eth(tags: &[(u16, u16)], et: u16, ip: &[u8]) -> Vec<u8> {
    let mut v = vec![2u8; 12];
    for (tpid, tci) in tags {
        v.extend_from_slice(&tpid.to_be_bytes());
        v.extend_from_slice(&tci.to_be_bytes());
    }
    v.extend_from_slice(&et.to_be_bytes());
    v.extend_from_slice(ip);
    v.resize(v.len().max(60), 0);
    v
}

/// The shapes the fast path decodes itself (the benchmark's and the
/// sink's among them), each with etherparse's answer; and shapes it
/// leaves to etherparse.
#[test]
fn the_fast_path_takes_the_common_shapes_and_agrees() {
    let mut v4_udp = Vec::new();
    PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(1, 53)
        .write(&mut v4_udp, &[0; 18])
        .unwrap();
    let mut v4_tcp = Vec::new();
    PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1, 2, 3, 4)
        .syn()
        .write(&mut v4_tcp, &[])
        .unwrap();
    let mut v4_icmp = Vec::new();
    PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .icmpv4_echo_request(1, 2)
        .write(&mut v4_icmp, &[7; 8])
        .unwrap();
    let mut v6_udp = Vec::new();
    PacketBuilder::ipv6([1; 16], [2; 16], 64)
        .udp(5, 6)
        .write(&mut v6_udp, &[1, 2, 3])
        .unwrap();
    let mut v6_icmp = Vec::new();
    PacketBuilder::ipv6([1; 16], [2; 16], 64)
        .icmpv6_echo_request(1, 2)
        .write(&mut v6_icmp, &[])
        .unwrap();
    let mut v4_frag = v4_udp.clone();
    v4_frag[6] = 0x20; // more fragments
    let q = (0x8100, 0x0123);
    let ad = (0x88a8, 0x0fff);
    let fast_ones: Vec<(PacketKind, Vec<u8>)> = vec![
        (PacketKind::Ethernet, eth(&[], 0x0800, &v4_udp)),
        (PacketKind::Ethernet, eth(&[], 0x0800, &v4_tcp)),
        (PacketKind::Ethernet, eth(&[q], 0x0800, &v4_tcp)),
        (PacketKind::Ethernet, eth(&[ad, q], 0x0800, &v4_icmp)),
        (PacketKind::Ethernet, eth(&[], 0x86dd, &v6_udp)),
        (PacketKind::Ethernet, eth(&[q], 0x86dd, &v6_icmp)),
        (PacketKind::Ethernet, eth(&[], 0x0800, &v4_frag)),
        (PacketKind::Ethernet, eth(&[], 0x0806, &[0; 28])),
        (PacketKind::Ipv4, v4_udp.clone()),
        (PacketKind::Ipv6, v6_icmp.clone()),
    ];
    for (i, (kind, f)) in fast_ones.iter().enumerate() {
        let fast = parse::fast::parse(f, *kind);
        assert!(fast.is_some(), "fast path declined {kind} {f:02x?}");
        // The one-word test of the 5-tuple's fixed offsets: the
        // untagged IPv4 UDP and TCP frames (the first two) only.
        assert_eq!(
            Layout::is_plain_ipv4_word(fast.unwrap().word()),
            i < 2,
            "{kind} {f:02x?}"
        );
        assert_eq!(
            fast.unwrap(),
            parse::parse_etherparse(f, *kind),
            "{kind} {f:02x?}"
        );
    }
    // Hop-by-hop extension header, jumbogram length 0, three VLAN
    // tags, an IPv4 packet cut short: etherparse's.
    let mut v6_hop = v6_udp.clone();
    v6_hop[6] = 0;
    let mut v6_zero = v6_udp.clone();
    v6_zero[4..6].copy_from_slice(&[0, 0]);
    let slow_ones = [
        (PacketKind::Ipv6, v6_hop),
        (PacketKind::Ipv6, v6_zero),
        (PacketKind::Ethernet, eth(&[ad, q, q], 0x0800, &v4_udp)),
        (PacketKind::Ipv4, v4_udp[..24].to_vec()),
    ];
    for (kind, f) in &slow_ones {
        assert_eq!(parse::fast::parse(f, *kind), None, "{kind} {f:02x?}");
    }
}

#[test]
fn metadata_starts_clear_survives_reset_and_is_cleared_on_demand() {
    let mut f = udp_frame(53, b"x");
    let mut p = Packet::new(&mut f);
    assert_eq!((p.mark(), p.ct()), (0, (CtState::Untracked, false)));
    p.set_mark(0xdead_beef);
    p.set_ct(CtState::Established, true);
    assert_eq!(p.ct(), (CtState::Established, true));
    assert_eq!(p.ct_bits(), 0x82);
    // The tracker's extra bits: apart from the state, the direction and
    // the classifiers' byte; `set_ct` clears them.
    p.set_ct_ext(CtState::Related, true, 0x1b);
    assert_eq!(
        (p.ct(), p.ct_ext(), p.ct_bits()),
        ((CtState::Related, true), 0xb, 0x83)
    );
    p.set_ct(CtState::Established, true);
    assert_eq!((p.ct_ext(), p.ct_bits()), (0, 0x82));
    p.set_verdict(Verdict::Dropped);
    p.reset();
    assert_eq!(
        (p.mark(), p.ct_state()),
        (0xdead_beef, CtState::Established)
    );
    for s in [
        CtState::Untracked,
        CtState::New,
        CtState::Established,
        CtState::Related,
        CtState::Invalid,
    ] {
        for r in [false, true] {
            p.set_ct(s, r);
            assert_eq!(p.ct(), (s, r));
        }
    }
    p.clear_meta();
    assert_eq!((p.mark(), p.ct()), (0, (CtState::Untracked, false)));
}

#[test]
fn rewriting_the_frame_drops_the_cache() {
    let mut f = udp_frame(53, b"x");
    let mut p = Packet::new(&mut f);
    assert_eq!(p.headers().unwrap().transport.unwrap().dst_port, 53);
    // UDP destination port lives at 14 + 20 + 2.
    p.frame_mut()[36..38].copy_from_slice(&80u16.to_be_bytes());
    assert_eq!(p.headers().unwrap().transport.unwrap().dst_port, 80);
    // The 5-tuple the packet keeps of a plain frame goes with it.
    assert_eq!(p.five_tuple_v4().unwrap().dst_port, 80);
    assert!(p.is_plain_ipv4());
    p.frame_mut()[26..30].copy_from_slice(&[198, 18, 7, 7]);
    assert_eq!(p.udp_dst_port(), Some(80));
    assert_eq!(p.five_tuple_v4().unwrap().src, 0xc612_0707);
    assert_eq!(p.plain_five_tuple_v4().unwrap().src, 0xc612_0707);
    // An IPv4 header with options is not plain: no stored tuple.
    p.frame_mut()[14] = 0x46;
    assert_eq!(p.plain_five_tuple_v4(), None);
    assert!(!p.is_plain_ipv4());
}

#[test]
fn garbage_is_malformed_not_a_panic() {
    let mut f = vec![0xffu8; 9];
    let p = Packet::new(&mut f);
    assert_eq!(p.headers(), None);
    let mut f = vec![];
    assert_eq!(Packet::with_kind(&mut f, PacketKind::Ipv4).headers(), None);
}

#[test]
fn ip_kind_heads_parse_from_the_ip_header() {
    let b = PacketBuilder::ipv6([0x20; 16], [0x21; 16], 8).tcp(1, 2, 3, 4);
    let mut v = Vec::new();
    b.write(&mut v, b"").unwrap();
    let p = Packet::with_kind(&mut v, PacketKind::Ipv6);
    let h = p.headers().unwrap();
    assert_eq!(h.ether_type, None);
    assert_eq!(h.ip.unwrap().protocol, 6);
    assert_eq!(h.transport.unwrap().protocol, L4::Tcp);
}
