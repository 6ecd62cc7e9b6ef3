//! The `bpf` filter against its anchors: libpcap's own interpreter
//! (`pcap_offline_filter`) on arbitrary and on real frames, and tcpdump's
//! verdicts on a capture of mixed traffic, frame for frame.

use etherparse::PacketBuilder;
use pcap::{Capture, Linktype};
use pfil::{Ctx, Dir, Filter, Packet, PacketKind, Verdict};
use pfil_filters::bpf::{Link, Program};
use pfil_filters::{Bpf, BpfAction};
use proptest::prelude::*;

const EXPRS: &[&str] = &[
    "udp port 53",
    "udp port 53 and not src net 10.0.0.0/8",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "icmp or icmp6",
    "vlan 100 and udp",
    "vlan 200 and vlan 100",
    "ip6 and tcp dst port 5000",
    "arp",
    "greater 100",
    "less 80",
    "ip[6:2] & 0x1fff != 0",
    "udp portrange 1000-2000",
    "ether broadcast",
    "not ip",
    "host 198.18.0.1",
    "src host 198.18.0.1 and dst net 198.19.0.0/16",
    "ip proto 47",
    "tcp and (port 22 or port 80)",
    "udp[8:2] = 0x1313",
    "ip6 net 2001:db8::/32",
    "len >= 64 and len <= 128",
];

/// Mixed frames: IPv4/IPv6, UDP/TCP/ICMP, VLAN tags, ARP, GRE, IPv4
/// fragments, broadcast, short and truncated frames.
fn frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let payloads = [0usize, 18, 100];
    let v4 = [
        ([198, 18, 0, 1], [198, 19, 0, 2]),
        ([10, 1, 2, 3], [198, 18, 0, 1]),
        ([198, 18, 7, 7], [198, 18, 0, 9]),
    ];
    let ports = [
        (1000u16, 53u16),
        (53, 1500),
        (40000, 443),
        (22, 5000),
        (1999, 80),
    ];
    for (i, (s, d)) in v4.iter().enumerate() {
        for (j, (sp, dp)) in ports.iter().enumerate() {
            for (k, pl) in payloads.iter().enumerate() {
                let mut v = Vec::new();
                let payload = vec![0x12u8 ^ (j as u8); *pl];
                let dst = if (i + j + k) % 7 == 0 {
                    [0xff; 6]
                } else {
                    [2, 0, 0, 0, 0, 2]
                };
                let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst);
                match (i + j + k) % 5 {
                    0 => eth
                        .ipv4(*s, *d, 64)
                        .udp(*sp, *dp)
                        .write(&mut v, &payload)
                        .unwrap(),
                    1 => eth
                        .ipv4(*s, *d, 64)
                        .tcp(*sp, *dp, 1, 1024)
                        .syn()
                        .write(&mut v, &payload)
                        .unwrap(),
                    2 => eth
                        .ipv4(*s, *d, 64)
                        .tcp(*sp, *dp, 1, 1024)
                        .syn()
                        .ack(7)
                        .write(&mut v, &payload)
                        .unwrap(),
                    3 => eth
                        .single_vlan(
                            etherparse::VlanId::try_new(100 + 100 * (j as u16 % 2)).unwrap(),
                        )
                        .ipv4(*s, *d, 64)
                        .udp(*sp, *dp)
                        .write(&mut v, &payload)
                        .unwrap(),
                    _ => eth
                        .ipv4(*s, *d, 64)
                        .icmpv4_echo_request(1, 2)
                        .write(&mut v, &payload)
                        .unwrap(),
                }
                out.push(v);
            }
        }
    }
    for (j, (sp, dp)) in ports.iter().enumerate() {
        let mut v = Vec::new();
        let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        match j % 3 {
            0 => eth
                .ipv6(src, dst, 64)
                .tcp(*sp, *dp, 1, 1024)
                .write(&mut v, &[])
                .unwrap(),
            1 => eth
                .ipv6(dst, src, 64)
                .udp(*sp, *dp)
                .write(&mut v, &[1; 30])
                .unwrap(),
            _ => eth
                .ipv6(src, dst, 64)
                .icmpv6_echo_request(1, 2)
                .write(&mut v, &[])
                .unwrap(),
        }
        out.push(v);
    }
    // ARP request, GRE (proto 47), an IPv4 non-first fragment, a double
    // VLAN tag, runts.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 198, 18, 0, 1]);
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&[198, 18, 0, 2]);
    arp.resize(60, 0);
    out.push(arp);
    let ip4 = |proto: u8, frag: u16| {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1]);
        f.extend_from_slice(&frag.to_be_bytes());
        f.extend_from_slice(&[64, proto, 0, 0, 198, 18, 0, 1, 198, 19, 0, 2]);
        f.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0, 20, 0x12, 0x34]);
        f.resize(14 + 40, 0);
        f
    };
    out.push(ip4(47, 0));
    out.push(ip4(17, 0x00b9)); // offset 185 * 8: a non-first fragment
    out.push(ip4(17, 0x2000)); // more fragments, first
    let mut qinq = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .double_vlan(
            etherparse::VlanId::try_new(200).unwrap(),
            etherparse::VlanId::try_new(100).unwrap(),
        )
        .ipv4([198, 18, 0, 1], [198, 19, 0, 2], 64)
        .udp(1000, 53)
        .write(&mut qinq, &[])
        .unwrap();
    out.push(qinq);
    let full = out[0].clone();
    for n in [0, 1, 13, 14, 20, 33, 41] {
        out.push(full[..n.min(full.len())].to_vec());
    }
    out
}

fn libpcap(expr: &str) -> pcap::BpfProgram {
    Capture::dead(Linktype::ETHERNET)
        .unwrap()
        .compile(expr, true)
        .unwrap()
}

#[test]
fn agrees_with_libpcaps_interpreter_on_real_frames() {
    let frames = frames();
    for e in EXPRS {
        let ours = Program::compile(e, Link::Ethernet).unwrap();
        let theirs = libpcap(e);
        let mut hits = 0;
        for (i, f) in frames.iter().enumerate() {
            let m = ours.matches(f);
            assert_eq!(m, theirs.filter(f), "`{e}` on frame {i}: {f:02x?}");
            hits += usize::from(m);
        }
        // Each expression means something on this mix (the test can fail).
        assert!(hits > 0, "`{e}` matched no frame");
    }
}

#[test]
fn the_engine_runs_every_expression_and_agrees_with_the_interpreter() {
    let frames = frames();
    for e in EXPRS {
        let p = Program::compile(e, Link::Ethernet).unwrap();
        assert!(p.on_engine(), "`{e}` not taken by the eBPF engine");
        for f in &frames {
            for cut in [f.len(), f.len() / 2, 1] {
                let f = &f[..cut.min(f.len())];
                assert_eq!(
                    p.run(f, f.len() as u32 + 4),
                    p.run_interpreted(f, f.len() as u32 + 4),
                    "`{e}` on {f:02x?}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn agrees_with_libpcap_on_arbitrary_bytes(
        which in 0..EXPRS.len(),
        base in 0..64usize,
        edits in proptest::collection::vec((0..200usize, any::<u8>()), 0..12),
        cut in 0..220usize,
    ) {
        let frames = frames();
        let mut f = frames[base % frames.len()].clone();
        for (at, b) in edits {
            if let Some(x) = f.get_mut(at) { *x = b; }
        }
        f.truncate(cut.max(1));
        let e = EXPRS[which];
        let ours = Program::compile(e, Link::Ethernet).unwrap();
        prop_assert_eq!(ours.matches(&f), libpcap(e).filter(&f), "`{}` on {:02x?}", e, f);
    }
}

#[test]
fn agrees_with_tcpdump_frame_for_frame() {
    let Some(tcpdump) = pfil_testnet::tcpdump() else {
        return;
    };
    let frames = frames();
    let dir = std::env::temp_dir().join(format!("pfil-bpf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mixed.pcap");
    pfil_testnet::write_pcap(&file, 1, &frames);
    let ctx = Ctx::new("h", Dir::In, 0);
    for e in EXPRS {
        let kept = pfil_testnet::tcpdump_indices(tcpdump, &file, e);
        let f = Bpf::new(BpfAction::Drop, e).unwrap();
        let ours: Vec<usize> = frames
            .iter()
            .enumerate()
            // tcpdump reports an empty record as an invalid header, with
            // no verdict.
            .filter(|(_, fr)| !fr.is_empty())
            .filter(|(_, fr)| {
                let mut fr = fr.to_vec();
                f.filter(&mut Packet::with_kind(&mut fr, PacketKind::Ethernet), &ctx)
                    == Verdict::Dropped
            })
            .map(|(i, _)| i)
            .collect();
        assert_eq!(ours, kept, "`{e}`: pfil's bpf vs tcpdump -r");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `host A or host B or …` with `n` hosts: libpcap's optimizer takes time
/// superlinear in `n` (1.2 s at 250, 104 s at 1 000 on the test machine).
fn many_hosts(n: usize) -> String {
    (0..n)
        .map(|i| format!("host 198.18.{}.{}", i / 250, i % 250))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// A 98 KB expression (`udp or udp or …`, 14 000 terms) used to overflow
/// the calling thread's stack inside libpcap and abort the whole process
/// (pfild's control thread: the dataplane with it). It is refused by
/// length, and with the length limit lifted the compile runs in a child
/// with a large stack and a time limit: an answer either way, and this
/// test process (on a default 2 MiB test thread) is still here.
#[test]
fn a_deep_expression_is_an_error_not_a_crash() {
    use pfil_filters::bpf::{CompileLimits, MAX_EXPR_BYTES};
    let expr = format!("drop {}udp", "udp or ".repeat(14_000));
    let e = Bpf::from_config(&expr).unwrap_err();
    assert!(
        e.contains("over the limit") && e.contains(&MAX_EXPR_BYTES.to_string()),
        "{e}"
    );
    let limits = CompileLimits::default()
        .with_max_len(1 << 20)
        .with_timeout(std::time::Duration::from_secs(2));
    let t = std::time::Instant::now();
    let r = Bpf::with_limits(BpfAction::Drop, &expr[5..], &limits);
    // Whatever libpcap makes of it (a program, a time limit, a compiler
    // that died), the answer comes back within the limit (plus the time a
    // killed child takes to be reaped).
    if let Err(e) = &r {
        assert!(
            e.contains("time limit") || e.contains("died of signal") || e.contains("out of memory"),
            "{e}"
        );
    }
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
    // The compiler is still usable afterwards.
    assert!(Program::compile("udp port 53", Link::Ethernet).is_ok());
}

/// An expression that takes libpcap's optimizer minutes is stopped at the
/// time limit with an error that says so, and the next compile works
/// (the slot was given back, the child killed and reaped).
#[test]
fn a_slow_expression_hits_the_time_limit() {
    use pfil_filters::bpf::CompileLimits;
    let limits = CompileLimits::default().with_timeout(std::time::Duration::from_millis(500));
    let e = Program::compile_with(&many_hosts(700), Link::Ethernet, &limits).unwrap_err();
    assert!(e.contains("time limit (500ms)"), "{e}");
    for _ in 0..3 {
        let e = Bpf::with_limits(BpfAction::Drop, &many_hosts(700), &limits).unwrap_err();
        assert!(e.contains("time limit"), "{e}");
    }
    let small = Program::compile(&many_hosts(20), Link::Ethernet).unwrap();
    assert_eq!(
        small.insns().len(),
        libpcap(&many_hosts(20)).get_instructions().len()
    );
    // Every child was reaped: no zombie of ours is left. (The other tests
    // of this binary compile in children at the same time: one of theirs
    // may be a zombie for the moment before its compile reaps it, so a
    // zombie must stay for 5 s to count.)
    let me = std::process::id().to_string();
    let zombies = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|st| {
                let f: Vec<&str> = st
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                f.first() == Some(&"Z") && f.get(1) == Some(&me.as_str())
            })
            .count()
    };
    let mut left = zombies();
    for _ in 0..50 {
        if left == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = zombies();
    }
    assert_eq!(left, 0);
}

/// The compiler in its child agrees with libpcap called in this process,
/// instruction for instruction, for both link types, and a NUL byte is
/// refused before libpcap sees a truncated string.
#[test]
fn the_sandboxed_compiler_gives_libpcaps_program() {
    for e in EXPRS {
        let ours = Program::compile(e, Link::Ethernet).unwrap();
        let theirs = libpcap(e);
        assert_eq!(ours.insns().len(), theirs.get_instructions().len(), "{e}");
        for (a, b) in ours.insns().iter().zip(theirs.get_instructions()) {
            assert_eq!(
                format!("{} {} {} {}", a.code, a.jt, a.jf, a.k),
                b.to_string(),
                "{e}"
            );
        }
    }
    let e = Program::compile("udp\0 or tcp", Link::Ethernet).unwrap_err();
    assert!(e.contains("NUL"), "{e}");
}
