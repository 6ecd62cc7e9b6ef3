//! The batch paths against packet-by-packet tracking: a batch's first
//! pass reads each packet's entry before any packet of the batch is
//! tracked, so the entries it names may have been made, changed or
//! removed by earlier packets of the same batch by the time they are
//! used. Whatever the traffic and however it is cut into batches, every
//! packet gets the state it gets alone.

use pfil::{Ctx, Dir, Packet, Verdict};
use proptest::prelude::*;

use super::tcp::{ACK, FIN, RST, SYN};
use super::tests::{echo4, icmp4_error, tcp, udp, udp6, A, A6, B, B6};
use super::*;

/// One packet of the generated traffic: flow (client port), side, what
/// it carries (UDP, or TCP flags), a sequence offset (0: in order), and
/// whether an earlier hook dropped it.
#[derive(Clone, Debug)]
struct Ev {
    flow: u16,
    client: bool,
    what: u8,
    skew: u32,
    dropped: bool,
}

fn ev() -> impl Strategy<Value = Ev> {
    (
        0..5u16,
        any::<bool>(),
        0..12u8,
        prop_oneof![6 => Just(0u32), 1 => any::<u32>()],
        prop_oneof![9 => Just(false), 1 => Just(true)],
    )
        .prop_map(|(flow, client, what, skew, dropped)| Ev {
            flow,
            client,
            what,
            skew,
            dropped,
        })
}

/// The frames of `evs`: TCP segments carry each side's next sequence
/// number (plus the skew) and acknowledge the other's, so that
/// handshakes, data, closes and reopenings happen as well as segments
/// out of their window.
fn frames(evs: &[Ev]) -> Vec<Vec<u8>> {
    let mut seq = [[1000u32, 900_000]; 5];
    evs.iter()
        .map(|e| {
            let f = usize::from(e.flow);
            let port = 1000 + e.flow;
            let (me, peer) = if e.client { (0, 1) } else { (1, 0) };
            let flags = match e.what {
                0 => return udp_dir(e.client, port),
                // Packets that are not plain IPv4 UDP or TCP: IPv6, ICMP
                // echoes, an ICMP error quoting the flow's last segment
                // sent the other way, and a frame that is not IP.
                8 if e.client => return udp6(A6, port, B6, 53),
                8 => return udp6(B6, 53, A6, port),
                9 => return echo4(A, B, !e.client, e.flow),
                10 => {
                    let quoted = if e.client {
                        tcp(B, 80, A, port, ACK, seq[f][1], seq[f][0], 0)
                    } else {
                        tcp(A, port, B, 80, ACK, seq[f][0], seq[f][1], 0)
                    };
                    let (from, to) = if e.client { (A, B) } else { (B, A) };
                    return icmp4_error(from, to, 3, 3, &quoted);
                }
                11 => {
                    let mut arp = vec![0xffu8; 12];
                    arp.extend_from_slice(&[0x08, 0x06]);
                    arp.resize(60, 0);
                    return arp;
                }
                1 => SYN,
                2 => SYN | ACK,
                3 | 4 => ACK,
                5 => FIN | ACK,
                6 => RST | ACK,
                _ => RST,
            };
            let data = if e.what == 4 { 100 } else { 0 };
            let s = seq[f][me].wrapping_add(e.skew);
            let a = seq[f][peer];
            seq[f][me] = seq[f][me].wrapping_add(data as u32 + u32::from(flags & (SYN | FIN) != 0));
            if e.client {
                tcp(A, port, B, 80, flags, s, a, data)
            } else {
                tcp(B, 80, A, port, flags, s, a, data)
            }
        })
        .collect()
}

fn udp_dir(client: bool, port: u16) -> Vec<u8> {
    if client {
        udp(A, port, B, 53)
    } else {
        udp(B, 53, A, port)
    }
}

/// The batch path a run takes.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// The near path as the table's only worker (biased: no entry locks).
    NearBiased,
    /// The near path with entry locks.
    Near,
    /// The prefetching path (a table over 8 192 entries), biased.
    FarBiased,
    /// The prefetching path with entry locks.
    Far,
}

/// Each packet's annotation and verdict after `ct`, the frames run in
/// batches of the sizes `cuts` gives in turn, through `path`.
fn run(ct: &Ct, evs: &[Ev], cuts: &[usize], path: Path, loose: bool) -> Vec<(u8, Verdict)> {
    let ctx = Ctx::new("h", Dir::In, 0);
    let mut bufs = frames(evs);
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|f| Packet::new(f)).collect();
    for (p, e) in pkts.iter_mut().zip(evs) {
        if e.dropped {
            p.set_verdict(Verdict::Dropped);
        }
    }
    let mut at = 0;
    for &n in cuts.iter().cycle() {
        if at == pkts.len() {
            break;
        }
        let end = (at + n).min(pkts.len());
        let batch = &mut pkts[at..end];
        let run = Run {
            now: ct.table().now(),
            loose,
            max: DEFAULT_MAX,
        };
        let (ad, g) = (table::Adaptive { num: 1, den: 1 }, crossbeam_epoch::pin());
        let biased = matches!(path, Path::NearBiased | Path::FarBiased);
        let section = ct.table().bias(if biased { 0 } else { 1 });
        assert_eq!(section.biased(), biased);
        match path {
            Path::NearBiased => ct.batch::<true, false>(batch, &ctx, run, ad, &g),
            Path::Near => ct.batch::<false, false>(batch, &ctx, run, ad, &g),
            Path::FarBiased => ct.batch::<true, true>(batch, &ctx, run, ad, &g),
            Path::Far => ct.batch::<false, true>(batch, &ctx, run, ad, &g),
        }
        drop(section);
        at = end;
    }
    pkts.iter().map(|p| (p.ct_bits(), p.verdict())).collect()
}

/// The same traffic tracked one packet at a time on the table's general
/// path ([`Table::track`]): the reference.
fn alone(ct: &Ct, evs: &[Ev], loose: bool) -> Vec<(u8, Verdict)> {
    let mut bufs = frames(evs);
    bufs.iter_mut()
        .zip(evs)
        .map(|(f, e)| {
            let mut p = Packet::new(f);
            if e.dropped {
                return (p.ct_bits(), Verdict::Dropped);
            }
            let run = Run {
                now: ct.table().now(),
                loose,
                max: DEFAULT_MAX,
            };
            let (s, reply) = ct.table().track(flow::classify(&p), p.len() as u32, run, 0);
            p.set_ct(s, reply);
            let v = if s == pfil::CtState::Invalid {
                Verdict::Dropped
            } else {
                Verdict::Pass
            };
            (p.ct_bits(), v)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn batches_agree_with_packet_by_packet(
        evs in prop::collection::vec(ev(), 1..300),
        cuts in prop::collection::vec(1..200usize, 1..6),
        loose in any::<bool>(),
        path in prop_oneof![
            Just(Path::NearBiased),
            Just(Path::Near),
            Just(Path::FarBiased),
            Just(Path::Far),
        ],
    ) {
        let cfg = format!("tcp {} drop-invalid", if loose { "loose" } else { "strict" });
        let (reference, batched) = (
            Ct::from_config(&cfg, 2).unwrap(),
            Ct::from_config(&cfg, 2).unwrap(),
        );
        if matches!(path, Path::Near | Path::Far) {
            // Batches of two workers make the table shared for good.
            drop(batched.table().bias(1));
            drop(batched.table().bias(0));
        }
        let want = alone(&reference, &evs, loose);
        let got = run(&batched, &evs, &cuts, path, loose);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            prop_assert_eq!(w, g, "packet {} ({:?}), {:?}", i, &evs[i], path);
        }
    }
}
