//! Property tests: `Packet::headers` and the runner on arbitrary input
//! (random bytes; truncated, malformed, VLAN-stacked and QinQ frames; IPv4
//! options; IPv6 extension header chains; every EtherType): never a panic,
//! and every field they answer is etherparse's (`SlicedPacket`), on
//! arbitrary frames, on well-formed ("real") frames of every shape the fast
//! path decodes and on each of them cut at every length, as every kind.
//!
//! A few thousand cases per property by default; `PROPTEST_CASES=100000`
//! (`scripts/fuzz-long.sh`) for a long run.

#[path = "support/frames.rs"]
mod frames;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{LinkSlice, NetSlice, SlicedPacket, TransportSlice, VlanSlice};
use pfil::{Ctx, Dir, Dirs, Filter, Packet, PacketKind, Placement, Registry, Verdict, L4};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

/// Everything a filter can ask, as etherparse answers it.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    ether_type: Option<u16>,
    vlan_ids: (Option<u16>, Option<u16>),
    ip_version: Option<u8>,
    ip_offset: Option<usize>,
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    protocol: Option<u8>,
    l4: Option<L4>,
    l4_offset: Option<usize>,
    payload_offset: Option<usize>,
    ports: Option<(u16, u16)>,
    tcp_flags: Option<u8>,
    icmp: Option<(u8, u8)>,
}

/// What etherparse says about `frame` parsed as `kind` (`None`: an error).
fn etherparse_answer(kind: PacketKind, frame: &[u8]) -> Option<Answer> {
    let s = match kind {
        PacketKind::Ethernet => SlicedPacket::from_ethernet(frame),
        PacketKind::Ipv4 | PacketKind::Ipv6 => SlicedPacket::from_ip(frame),
    }
    .ok()?;
    let at = |inner: &[u8]| inner.as_ptr() as usize - frame.as_ptr() as usize;
    let mut a = Answer {
        ether_type: match &s.link {
            Some(LinkSlice::Ethernet2(e)) => Some(e.ether_type().0),
            _ => None,
        },
        vlan_ids: (None, None),
        ip_version: None,
        ip_offset: None,
        src: None,
        dst: None,
        protocol: None,
        l4: None,
        l4_offset: None,
        payload_offset: None,
        ports: None,
        tcp_flags: None,
        icmp: None,
    };
    match &s.vlan {
        Some(VlanSlice::SingleVlan(v)) => {
            a.ether_type = Some(v.ether_type().0);
            a.vlan_ids = (Some(v.vlan_identifier().value()), None);
        }
        Some(VlanSlice::DoubleVlan(d)) => {
            a.ether_type = Some(d.inner().ether_type().0);
            a.vlan_ids = (
                Some(d.outer().vlan_identifier().value()),
                Some(d.inner().vlan_identifier().value()),
            );
        }
        None => {}
    }
    match &s.net {
        Some(NetSlice::Ipv4(v4)) => {
            a.ip_version = Some(4);
            a.ip_offset = Some(at(v4.header().slice()));
            a.src = Some(v4.header().source_addr().into());
            a.dst = Some(v4.header().destination_addr().into());
            a.protocol = Some(v4.payload().ip_number.0);
        }
        Some(NetSlice::Ipv6(v6)) => {
            a.ip_version = Some(6);
            a.ip_offset = Some(at(v6.header().slice()));
            a.src = Some(v6.header().source_addr().into());
            a.dst = Some(v6.header().destination_addr().into());
            a.protocol = Some(v6.payload().ip_number.0);
        }
        _ => {}
    }
    match &s.transport {
        Some(TransportSlice::Udp(u)) => {
            a.l4 = Some(L4::Udp);
            a.l4_offset = Some(at(u.slice()));
            a.payload_offset = Some(at(u.payload()));
            a.ports = Some((u.source_port(), u.destination_port()));
        }
        Some(TransportSlice::Tcp(t)) => {
            a.l4 = Some(L4::Tcp);
            a.l4_offset = Some(at(t.slice()));
            a.payload_offset = Some(at(t.payload()));
            a.ports = Some((t.source_port(), t.destination_port()));
            let flags = [
                t.fin(),
                t.syn(),
                t.rst(),
                t.psh(),
                t.ack(),
                t.urg(),
                t.ece(),
                t.cwr(),
            ];
            a.tcp_flags = Some(
                flags
                    .iter()
                    .enumerate()
                    .map(|(i, &f)| u8::from(f) << i)
                    .sum(),
            );
        }
        Some(TransportSlice::Icmpv4(i)) => {
            a.l4 = Some(L4::Icmpv4);
            a.l4_offset = Some(at(i.slice()));
            a.payload_offset = Some(at(i.payload()));
            a.icmp = Some((i.type_u8(), i.code_u8()));
        }
        Some(TransportSlice::Icmpv6(i)) => {
            a.l4 = Some(L4::Icmpv6);
            a.l4_offset = Some(at(i.slice()));
            a.payload_offset = Some(at(i.payload()));
            a.icmp = Some((i.type_u8(), i.code_u8()));
        }
        None => {}
    }
    Some(a)
}

/// What `Packet::parsed` says.
fn pfil_answer(p: &Packet<'_>) -> Option<Answer> {
    let v = p.parsed()?;
    Some(Answer {
        ether_type: v.ether_type(),
        vlan_ids: v.vlan_ids(),
        ip_version: v.ip_version(),
        ip_offset: v.ip_offset(),
        src: v.src_ip(),
        dst: v.dst_ip(),
        protocol: v.protocol(),
        l4: v.l4(),
        l4_offset: v.l4_offset(),
        payload_offset: v.payload_offset(),
        ports: v.ports(),
        tcp_flags: v.tcp_flags(),
        icmp: v.icmp(),
    })
}

/// `parsed()`, `headers()`, `udp_dst_port()` and the 5-tuples agree with
/// etherparse on every field, fresh, cached and after `frame_mut`.
fn check_headers(kind: PacketKind, frame: &[u8]) -> Result<(), TestCaseError> {
    let mut buf = frame.to_vec();
    let mut p = Packet::with_kind(&mut buf, kind);
    let want = etherparse_answer(kind, frame);
    let got = pfil_answer(&p);
    prop_assert_eq!(&got, &want, "parsed() agrees with etherparse");
    prop_assert_eq!(pfil_answer(&p), got, "the cache answers the same");
    let h = p.headers();
    prop_assert_eq!(h.is_some(), want.is_some());
    if let (Some(h), Some(w)) = (h, &want) {
        prop_assert_eq!(h.ether_type, w.ether_type);
        prop_assert_eq!(
            h.ip.map(|ip| (ip.src, ip.dst, ip.protocol, ip.offset)),
            w.src.map(|src| (
                src,
                w.dst.unwrap(),
                w.protocol.unwrap(),
                w.ip_offset.unwrap()
            ))
        );
        let tcp_udp = matches!(w.l4, Some(L4::Udp | L4::Tcp));
        prop_assert_eq!(
            h.transport
                .map(|t| (t.protocol, t.src_port, t.dst_port, t.payload_offset)),
            w.l4.filter(|_| tcp_udp).map(|l4| {
                let (sp, dp) = w.ports.unwrap();
                (l4, sp, dp, w.payload_offset.unwrap())
            })
        );
    }
    let udp_dst = want
        .as_ref()
        .filter(|w| w.l4 == Some(L4::Udp))
        .and_then(|w| w.ports)
        .map(|(_, dp)| dp);
    prop_assert_eq!(p.udp_dst_port(), udp_dst);
    // The first look through each accessor (they inline the parse apart).
    let mut fresh = frame.to_vec();
    prop_assert_eq!(Packet::with_kind(&mut fresh, kind).udp_dst_port(), udp_dst);
    let v4_cached = p.parsed().and_then(|v| v.five_tuple_v4());
    let p4 = Packet::with_kind(&mut fresh, kind);
    prop_assert_eq!(
        p4.five_tuple_v4(),
        v4_cached,
        "Packet::five_tuple_v4, first look"
    );
    prop_assert_eq!(
        p4.five_tuple_v4(),
        v4_cached,
        "Packet::five_tuple_v4, cached"
    );
    let p4 = Packet::with_kind(&mut fresh, kind);
    let v4_first = p4.parsed().and_then(|v| v.five_tuple_v4());
    prop_assert_eq!(v4_first, v4_cached);
    // The 5-tuple a plain frame's parse stores in the packet (here through
    // parsed(), before any 5-tuple read), and the fast half alone.
    prop_assert_eq!(
        p4.five_tuple_v4(),
        v4_cached,
        "Packet::five_tuple_v4 after parsed()"
    );
    let plain = kind == PacketKind::Ethernet
        && want.as_ref().is_some_and(|w| {
            w.ip_version == Some(4)
                && w.ip_offset == Some(14)
                && frame[14] == 0x45
                && matches!(w.l4, Some(L4::Udp | L4::Tcp))
        });
    prop_assert_eq!(
        p4.plain_five_tuple_v4().copied(),
        v4_cached.filter(|_| plain),
        "Packet::plain_five_tuple_v4, cached"
    );
    prop_assert_eq!(
        Packet::with_kind(&mut fresh, kind)
            .plain_five_tuple_v4()
            .copied(),
        v4_cached.filter(|_| plain),
        "Packet::plain_five_tuple_v4, first look"
    );
    // A first look through udp_dst_port caches the layout alone; the
    // 5-tuple reads after it store the tuple then.
    let p5 = Packet::with_kind(&mut fresh, kind);
    prop_assert_eq!(p5.udp_dst_port(), udp_dst);
    prop_assert_eq!(
        p5.plain_five_tuple_v4().copied(),
        v4_cached.filter(|_| plain),
        "Packet::plain_five_tuple_v4 after udp_dst_port"
    );
    prop_assert_eq!(p5.five_tuple_v4(), v4_cached);
    prop_assert_eq!(p5.udp_dst_port(), udp_dst, "udp_dst_port, cached");
    prop_assert_eq!(p5.is_plain_ipv4(), plain);
    prop_assert_eq!(Packet::with_kind(&mut fresh, kind).headers(), h);
    let v = p.parsed();
    let tuple = |w: &Answer| {
        let (sp, dp) = w.ports.unwrap_or((0, 0));
        (w.src, w.dst, sp, dp, w.protocol)
    };
    let v4 = v.and_then(|v| v.five_tuple_v4()).map(|t| {
        let (s, d) = (Ipv4Addr::from(t.src), Ipv4Addr::from(t.dst));
        (
            Some(s.into()),
            Some(d.into()),
            t.src_port,
            t.dst_port,
            Some(t.protocol),
        )
    });
    let v6 = v.and_then(|v| v.five_tuple_v6()).map(|t| {
        let (s, d) = (Ipv6Addr::from(t.src), Ipv6Addr::from(t.dst));
        (
            Some(s.into()),
            Some(d.into()),
            t.src_port,
            t.dst_port,
            Some(t.protocol),
        )
    });
    let w = want.as_ref();
    prop_assert_eq!(v4, w.filter(|w| w.ip_version == Some(4)).map(tuple));
    prop_assert_eq!(v6, w.filter(|w| w.ip_version == Some(6)).map(tuple));
    let _ = p.frame_mut();
    prop_assert_eq!(
        pfil_answer(&p),
        want,
        "re-parsed after frame_mut, same answer"
    );
    Ok(())
}

#[test]
fn headers_never_panic_and_agree_with_etherparse() {
    let mut runner = TestRunner::new(frames::config());
    runner
        .run(&frames::any_frame(), |(kind, frame)| {
            check_headers(kind, &frame)
        })
        .unwrap();
}

#[test]
fn headers_of_raw_bytes_as_every_kind() {
    let mut runner = TestRunner::new(frames::config());
    runner
        .run(&prop::collection::vec(any::<u8>(), 0..96), |frame| {
            for kind in [PacketKind::Ethernet, PacketKind::Ipv4, PacketKind::Ipv6] {
                check_headers(kind, &frame)?;
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn headers_of_real_frames_agree_with_etherparse() {
    let mut runner = TestRunner::new(frames::config());
    runner
        .run(&frames::real_frame(), |(kind, frame)| {
            check_headers(kind, &frame)
        })
        .unwrap();
}

/// Every real frame cut at every length and parsed as every kind (a
/// truncated frame is where a fast path would read too far or answer
/// what etherparse refuses).
#[test]
fn real_frames_cut_anywhere_as_every_kind_agree_with_etherparse() {
    let mut config = frames::config();
    config.cases = (config.cases / 16).max(64);
    let mut runner = TestRunner::new(config);
    runner
        .run(&frames::real_frame(), |(_, frame)| {
            for cut in 0..=frame.len() {
                for kind in [PacketKind::Ethernet, PacketKind::Ipv4, PacketKind::Ipv6] {
                    check_headers(kind, &frame[..cut])?;
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Parses every packet it is shown, drops those with a UDP header.
struct ParseAll;
impl Filter for ParseAll {
    fn filter(&self, p: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        match p.headers().and_then(|h| h.transport) {
            Some(t) if t.protocol == pfil::L4::Udp => Verdict::Dropped,
            _ => Verdict::Pass,
        }
    }
}

#[test]
fn the_runner_never_panics_on_any_batch_on_any_head() {
    let reg = Registry::with_max_workers(1);
    let kinds = [PacketKind::Ethernet, PacketKind::Ipv4, PacketKind::Ipv6];
    let heads: Vec<_> = kinds
        .iter()
        .map(|&k| {
            let name = format!("h:{k}");
            let head = reg.register_head(&name, k, Dirs::IN).unwrap();
            let hook = format!("parse:{k}");
            reg.add_hook(&hook, k, Dirs::IN, ParseAll).unwrap();
            reg.link(&name, Dir::In, &hook, Placement::Prepend).unwrap();
            head
        })
        .collect();
    let w = std::cell::RefCell::new(reg.worker().unwrap());
    let mut runner = TestRunner::new(frames::config());
    runner
        .run(
            &(prop::collection::vec(frames::any_frame(), 1..8), 0usize..3),
            |(batch, at)| {
                let head = &heads[at];
                let mut bufs: Vec<Vec<u8>> = batch.iter().map(|(_, f)| f.clone()).collect();
                let mut pkts: Vec<Packet<'_>> = bufs
                    .iter_mut()
                    .zip(&batch)
                    .map(|(b, (k, _))| Packet::with_kind(b, *k))
                    .collect();
                let before = reg.refused();
                head.run_in(&mut w.borrow_mut(), &mut pkts);
                let mut wrong = 0;
                for (p, (k, f)) in pkts.iter().zip(&batch) {
                    if *k != head.kind() {
                        wrong += 1;
                        prop_assert_eq!(p.verdict(), Verdict::Dropped, "refused");
                        continue;
                    }
                    let mut g = f.clone();
                    let udp = Packet::with_kind(&mut g, *k)
                        .headers()
                        .and_then(|h| h.transport)
                        .is_some_and(|t| t.protocol == pfil::L4::Udp);
                    let v = if udp { Verdict::Dropped } else { Verdict::Pass };
                    prop_assert_eq!(p.verdict(), v);
                }
                let mut want = before;
                want.kind_batches += u64::from(wrong > 0);
                want.kind_packets += wrong;
                prop_assert_eq!(reg.refused(), want);
                Ok(())
            },
        )
        .unwrap();
}
