//! The xdp_filter bench's native side (benches/native/xdpfilt.rs) against
//! the object it stands for, xdp-tools' `xdpfilt_alw_udp.o` run by pfil:
//! the same XDP action frame for frame, and the same port map and
//! `xdp_stats_map` contents afterwards. Frames: the bench's, the oracle's
//! generated traffic (VLAN tags, 802.1ad, IPv6, ARP, TCP, ICMP, every
//! truncation of some), VLAN stacks of 0 to 5 tags, IPv6 extension
//! headers, short IHLs and UDP lengths, the vendored captures, and
//! random mutations of all these. Needs no root (pfil runs the object).

mod oracle;

#[path = "../benches/native/xdpfilt.rs"]
mod native;

use native::{Native, NativeHook, FLAG_DST, FLAG_SRC, FLAG_UDP};
use oracle::frames::{eth, ipv4, ipv6, l4, MAC_A, MAC_B, V4_A, V4_B, V6_A, V6_B};
use pfil::{Ctx, Dir, Filter, Packet, Verdict};
use pfil_xdp::XdpFilter;

const OBJ: &str = "/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_udp.o";

/// The bench's frame: Ethernet, IPv4, UDP 1234 > `dport`, 64 bytes.
fn bench_frame(dport: u16) -> Vec<u8> {
    let mut f = vec![2u8, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0];
    f.extend_from_slice(&[
        0x45, 0, 0, 50, 0, 1, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ]);
    f.extend_from_slice(&1234u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 30, 0, 0]);
    f.extend_from_slice(&[0u8; 22]);
    f
}

/// A VLAN stack of `tags` tags, each 802.1Q or 802.1ad by `ad`'s bits.
fn vlan_stack(tags: usize, ad: u32, inner: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&MAC_A);
    for i in 0..tags {
        let tpid: u16 = if ad >> i & 1 == 1 { 0x88a8 } else { 0x8100 };
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&(7 + i as u16).to_be_bytes());
    }
    f.extend_from_slice(&inner.to_be_bytes());
    f
}

/// IPv6 with extension headers `exts` (type, 8-byte units or AH's
/// 4-byte ones), then UDP to `dport`.
fn ipv6_exts(exts: &[(u8, u8)], dport: u16) -> Vec<u8> {
    let mut body = Vec::new();
    let kinds: Vec<u8> = exts.iter().map(|e| e.0).chain([17]).collect();
    for (i, &(_, len)) in exts.iter().enumerate() {
        let size = if kinds[i] == 51 {
            (usize::from(len) + 2) * 4
        } else if kinds[i] == 44 {
            8
        } else {
            (usize::from(len) + 1) * 8
        };
        let mut h = vec![0u8; size];
        h[0] = kinds[i + 1];
        h[1] = len;
        body.extend(h);
    }
    body.extend(l4(17, 5353, dport));
    let mut f = eth(MAC_B, MAC_A, 0, 0x86dd);
    f.extend(ipv6(V6_A, V6_B, kinds[0], &body));
    f
}

fn frames() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = (0..64)
        .map(|i| {
            let d = if i % 4 == 0 { 53 } else { 1000 + i };
            (format!("bench {d}"), bench_frame(d))
        })
        .collect();
    out.extend(oracle::frames::generated());
    for tags in 0..=5 {
        for ad in 0..(1u32 << tags) {
            for (inner, l3) in [
                (0x0800u16, ipv4(V4_A, V4_B, 17, &l4(17, 1234, 53))),
                (0x86dd, ipv6(V6_A, V6_B, 17, &l4(17, 1234, 53))),
                (0x0800, ipv4(V4_A, V4_B, 17, &l4(17, 53, 9))),
            ] {
                let mut f = vlan_stack(tags, ad, inner);
                f.extend(&l3);
                out.push((format!("vlan{tags} ad{ad:b} {inner:#x}"), f.clone()));
                // A tag cut off in the middle: the walk stops there.
                for cut in 14..(18 + 4 * tags).min(f.len()) {
                    out.push((format!("vlan{tags} ad{ad:b} cut {cut}"), f[..cut].to_vec()));
                }
            }
        }
    }
    let ext_chains: &[&[(u8, u8)]] = &[
        &[(0, 0)],
        &[(60, 1)],
        &[(43, 0), (44, 0)],
        &[(51, 1)],
        &[(135, 0), (0, 2), (60, 0)],
        &[(0, 0), (60, 0), (43, 0), (44, 0), (51, 1)],
        &[(0, 0), (60, 0), (43, 0), (44, 0), (51, 1), (60, 0)],
        &[(0, 0); 7],
    ];
    for (i, chain) in ext_chains.iter().enumerate() {
        for dport in [53u16, 99] {
            let f = ipv6_exts(chain, dport);
            for cut in 54..f.len() {
                out.push((format!("v6 ext{i} >{dport} cut {cut}"), f[..cut].to_vec()));
            }
            out.push((format!("v6 ext{i} >{dport}"), f));
        }
    }
    for ihl in 0..16u8 {
        for len in [0usize, 8, 60] {
            let mut f = eth(MAC_B, MAC_A, 1, 0x0800);
            let mut ip = ipv4(V4_A, V4_B, 17, &l4(17, 53, 53));
            ip[0] = 0x40 | ihl;
            ip.truncate(20 + len.min(ip.len() - 20));
            ip.extend(l4(17, 77, 53));
            f.extend(ip);
            out.push((format!("ihl {ihl} +{len}"), f));
        }
    }
    for ulen in [0u16, 7, 8, 9, 0xffff] {
        let mut f = eth(MAC_B, MAC_A, 0, 0x0800);
        let mut u = l4(17, 1, 53);
        u[4..6].copy_from_slice(&ulen.to_be_bytes());
        f.extend(ipv4(V4_A, V4_B, 17, &u));
        out.push((format!("udp len {ulen}"), f));
    }
    out.extend(oracle::frames::captures(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/captures"),
        300,
    ));
    // Random mutations of everything above: header bytes changed, frames
    // cut (xorshift, fixed seed: reproducible).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let base: Vec<Vec<u8>> = out.iter().map(|(_, f)| f.clone()).collect();
    for round in 0..20_000 {
        let mut f = base[rnd() as usize % base.len()].clone();
        for _ in 0..1 + rnd() % 4 {
            let at = (rnd() % 80) as usize;
            if let Some(b) = f.get_mut(at) {
                *b = match rnd() % 4 {
                    0 => rnd() as u8,
                    1 => [0x81, 0x88, 0x86, 0x08, 0x00, 0xdd, 0xa8][rnd() as usize % 7],
                    2 => [0, 17, 6, 43, 44, 51, 60, 135, 58][rnd() as usize % 9],
                    _ => *b ^ (1 << (rnd() % 8)),
                };
            }
        }
        if rnd() % 4 == 0 {
            let cut = (rnd() as usize) % (f.len() + 1);
            f.truncate(cut);
        }
        out.push((format!("mutation {round}"), f));
    }
    out
}

/// `xdp-filter port 53 -p udp -m dst`, `port 5353 -p udp -m src`,
/// `port 1234 -p udp` (both ways), `port 9 -p tcp -m dst` (not UDP).
const PORTS: [(u16, u64); 4] = [
    (53, FLAG_DST | FLAG_UDP),
    (5353, FLAG_SRC | FLAG_UDP),
    (1234, FLAG_SRC | FLAG_DST | FLAG_UDP),
    (9, FLAG_DST | 4),
];

#[test]
fn native_filter_agrees_with_xdpfilt_alw_udp() {
    if !std::path::Path::new(OBJ).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{OBJ} missing (scripts/setup.sh installs xdp-tools)"
        );
        eprintln!("skipped: {OBJ} missing (install xdp-tools)");
        return;
    }
    let xdp = XdpFilter::from_config(&format!("@{OBJ}"), 1).unwrap();
    let prog = xdp.program();
    let ports = prog.map("filter_ports").unwrap();
    let stats = prog.map("xdp_stats_map").unwrap();
    let mut native = Native::default();
    let hook = NativeHook::new(2);
    for (port, flags) in PORTS {
        let key = u32::from(port.to_be()).to_le_bytes();
        ports.update(&key, &flags.to_le_bytes(), 0).unwrap();
        native.ports[Native::key(port)] = flags;
        hook.set_port(port, flags);
    }
    let frames = frames();
    let mut seen = [0usize; 3];
    for (name, f) in &frames {
        let mut buf = f.clone();
        let len = buf.len();
        let got = prog.run(0, &mut buf, 0, len, 1, 0).unwrap().action;
        let want = native.filter(f);
        assert_eq!(got, u64::from(want), "frame {name}: {f:02x?}");
        // The hook form (worker 1), one packet at a time and in a batch
        // of one (each frame counted once: every other frame each way).
        let mut b = f.clone();
        let ctx = Ctx::new("t", Dir::In, 1);
        let v = if seen.iter().sum::<usize>() % 2 == 0 {
            hook.filter(&mut Packet::new(&mut b), &ctx)
        } else {
            let mut batch = [Packet::new(&mut b)];
            hook.filter_batch(&mut batch, &ctx);
            batch[0].verdict()
        };
        let pass = if want == native::PASS {
            Verdict::Pass
        } else {
            Verdict::Dropped
        };
        assert_eq!(v, pass, "frame {name}: the hook's verdict");
        seen[want as usize] += 1;
    }
    // The xdp hook itself, in batches of 32 as the chain calls it (this
    // program's code is contained: the batch runs through the engine's
    // runner), frame for frame against the native filter's verdicts and,
    // after, counter for counter.
    let hooked = XdpFilter::from_config(&format!("@{OBJ}"), 1).unwrap();
    let mut expect = native::Native::default();
    for (port, flags) in PORTS {
        let key = u32::from(port.to_be()).to_le_bytes();
        let map = hooked.program().map("filter_ports").unwrap();
        map.update(&key, &flags.to_le_bytes(), 0).unwrap();
        expect.ports[Native::key(port)] = flags;
    }
    let ctx = Ctx::new("t", Dir::In, 0);
    for chunk in frames.chunks(32) {
        let mut bufs: Vec<Vec<u8>> = chunk.iter().map(|(_, f)| f.clone()).collect();
        let mut batch: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
        hooked.filter_batch(&mut batch, &ctx);
        for ((name, f), p) in chunk.iter().zip(&batch) {
            let a = expect.filter(f);
            let v = if a == native::PASS {
                Verdict::Pass
            } else {
                Verdict::Dropped
            };
            assert_eq!(p.verdict(), v, "batched, frame {name}");
        }
    }
    let hstats = hooked.program().map("xdp_stats_map").unwrap();
    for a in 0u32..5 {
        let v = hstats.lookup(&a.to_le_bytes()).unwrap().unwrap();
        let got = [
            u64::from_le_bytes(v[..8].try_into().unwrap()),
            u64::from_le_bytes(v[8..16].try_into().unwrap()),
        ];
        assert_eq!(got, expect.stats[a as usize], "batched, action {a}");
    }

    // Every action taken, or the frames test less than they seem.
    assert!(seen.iter().all(|&n| n > 100), "actions seen {seen:?}");
    for a in 0u32..5 {
        let v = stats.lookup(&a.to_le_bytes()).unwrap().unwrap();
        let packets = u64::from_le_bytes(v[..8].try_into().unwrap());
        let bytes = u64::from_le_bytes(v[8..16].try_into().unwrap());
        assert_eq!([packets, bytes], native.stats[a as usize], "action {a}");
        assert_eq!(
            hook.counters(1, a as usize, 0).0,
            [packets, bytes],
            "hook, action {a}"
        );
        assert_eq!(
            hook.counters(0, a as usize, 0).0,
            [0, 0],
            "hook's idle worker"
        );
    }
    for port in 0..=u16::MAX {
        let key = u32::from(port).to_le_bytes();
        let v = ports.lookup(&key).unwrap().unwrap();
        let v = u64::from_le_bytes(v[..8].try_into().unwrap());
        assert_eq!(v, native.ports[usize::from(port)], "port map index {port}");
        assert_eq!(
            v,
            hook.counters(1, 0, usize::from(port)).1,
            "hook's port map index {port}"
        );
    }
}
