//! Property tests: `Packet::headers` and the runner on arbitrary input
//! (random bytes; truncated, malformed, VLAN-stacked and QinQ frames; IPv4
//! options; IPv6 extension header chains; every EtherType): never a panic,
//! and what they answer is consistent.
//!
//! A few thousand cases per property by default; `PROPTEST_CASES=100000`
//! (`scripts/fuzz-long.sh`) for a long run.

#[path = "support/frames.rs"]
mod frames;

use std::net::IpAddr;

use etherparse::SlicedPacket;
use pfil::{Ctx, Dir, Dirs, Filter, Packet, PacketKind, Placement, Refused, Registry, Verdict};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

fn check_headers(kind: PacketKind, frame: &[u8]) -> Result<(), TestCaseError> {
    let mut buf = frame.to_vec();
    let mut p = Packet::with_kind(&mut buf, kind);
    let h = p.headers();
    prop_assert_eq!(p.headers(), h, "the cache answers the same");
    let parses = match kind {
        PacketKind::Ethernet => SlicedPacket::from_ethernet(frame).is_ok(),
        PacketKind::Ipv4 | PacketKind::Ipv6 => SlicedPacket::from_ip(frame).is_ok(),
    };
    prop_assert_eq!(
        h.is_some(),
        parses,
        "headers() is Some iff etherparse parses it"
    );
    if let Some(h) = h {
        if kind != PacketKind::Ethernet {
            prop_assert!(h.ether_type.is_none());
        }
        if let Some(ip) = h.ip {
            let (min, v4) = match ip.src {
                IpAddr::V4(_) => (20, true),
                IpAddr::V6(_) => (40, false),
            };
            prop_assert_eq!(ip.dst.is_ipv4(), v4);
            prop_assert!(ip.offset + min <= frame.len());
            match kind {
                PacketKind::Ethernet => prop_assert!(ip.offset >= 14),
                _ => prop_assert_eq!(ip.offset, 0),
            }
            let b = &frame[ip.offset..];
            prop_assert_eq!(b[0] >> 4, if v4 { 4 } else { 6 });
        }
        if let Some(t) = h.transport {
            let ip = h.ip.expect("a transport layer inside an IP layer");
            prop_assert!(t.payload_offset <= frame.len());
            prop_assert!(t.payload_offset >= ip.offset + 8);
        }
    }
    let _ = p.frame_mut();
    prop_assert_eq!(p.headers(), h, "re-parsed after frame_mut, same answer");
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
                let want = Refused {
                    kind_batches: before.kind_batches + u64::from(wrong > 0),
                    kind_packets: before.kind_packets + wrong,
                    ..before
                };
                prop_assert_eq!(reg.refused(), want);
                Ok(())
            },
        )
        .unwrap();
}
