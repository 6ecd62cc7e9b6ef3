//! Property tests: every filter of this crate on arbitrary input (random
//! bytes; truncated, malformed, VLAN-stacked and QinQ frames; IPv6
//! extension headers; every EtherType), called directly with any worker
//! index and direction, and through a registry on heads of every kind: no
//! panic, and each filter's verdict is what it documents.
//!
//! A few thousand cases by default; `PROPTEST_CASES=100000`
//! (`scripts/fuzz-long.sh`) for a long run.

#[path = "../../pfil/tests/support/frames.rs"]
mod frames;

use std::cell::RefCell;

use pfil::{Ctx, Dir, Dirs, Filter, Packet, PacketKind, Placement, Registry, Verdict, L4};
use pfil_filters::{
    Acl, Bpf, BpfAction, BuildCtx, Catalog, Count, DropUdpPort, Null, RateConfig, RateLimit,
};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

const WORKERS: usize = 3;

/// What a filter must answer for a packet, given the port of `DropUdpPort`.
type Expected = fn(&Packet<'_>, u16) -> Verdict;

/// libpcap's own verdict for the same expression and link layer.
fn libpcap_udp_port(p: &Packet<'_>, port: u16) -> Verdict {
    let lt = match p.kind() {
        PacketKind::Ethernet => pcap::Linktype::ETHERNET,
        _ => pcap::Linktype(12),
    };
    let prog = pcap::Capture::dead(lt)
        .unwrap()
        .compile(&format!("udp dst port {port}"), true)
        .unwrap();
    if prog.filter(p.frame()) {
        Verdict::Dropped
    } else {
        Verdict::Pass
    }
}

/// examples/xdp/port_filter.c compiled with clang, once (`None` without
/// clang outside CI: the xdp module is then left out, said so).
fn port_filter_object() -> Option<&'static std::path::Path> {
    static OBJ: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    OBJ.get_or_init(|| {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/xdp/port_filter.c");
        let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("port_filter.o");
        let st = std::process::Command::new("clang")
            .args(["-O2", "-g", "-target", "bpf", "-c"])
            .arg(format!(
                "-I/usr/include/{}-linux-gnu",
                std::env::consts::ARCH
            ))
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .status();
        match st {
            Ok(s) if s.success() => Some(out),
            Ok(s) => panic!("clang port_filter.c: {s}"),
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "clang missing under CI: {e}"
                );
                eprintln!("xdp module not tested: clang not found ({e})");
                None
            }
        }
    })
    .as_deref()
}

/// What examples/xdp/port_filter.c does with `port` in `blocked_ports`
/// (the frame read as Ethernet whatever the head's kind, as XDP does).
fn xdp_port_filter(p: &Packet<'_>, port: u16) -> Verdict {
    let f = p.frame();
    if f.len() < 14 {
        return Verdict::Dropped; // XDP_ABORTED
    }
    let (proto, l4) = match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 if f.len() >= 34 && f[14] & 0xf >= 5 => (f[23], 14 + usize::from(f[14] & 0xf) * 4),
        0x86dd if f.len() >= 54 => (f[20], 54),
        _ => return Verdict::Pass,
    };
    if proto != 17 && proto != 6 || f.len() < l4 + 4 {
        return Verdict::Pass;
    }
    if u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]) == port {
        Verdict::Dropped
    } else {
        Verdict::Pass
    }
}

/// Every filter of the crate, by name, with the verdict it must give.
fn filters(port: u16) -> Vec<(&'static str, Box<dyn Filter>, Expected)> {
    fn pass(_: &Packet<'_>, _: u16) -> Verdict {
        Verdict::Pass
    }
    fn udp_port(p: &Packet<'_>, port: u16) -> Verdict {
        match p.headers().and_then(|h| h.transport) {
            Some(t) if t.protocol == L4::Udp && t.dst_port == port => Verdict::Dropped,
            _ => Verdict::Pass,
        }
    }
    let builtin: Vec<(&'static str, Box<dyn Filter>, Expected)> = vec![
        ("null", Box::new(Null), pass),
        ("count", Box::new(Count::new(WORKERS)), pass),
        ("drop-udp", Box::new(DropUdpPort(port)), udp_port),
        (
            "bpf",
            Box::new(Bpf::new(BpfAction::Drop, &format!("udp dst port {port}")).unwrap()),
            libpcap_udp_port,
        ),
        // A limit no test reaches (its limiting is tested in the crate):
        // every frame, parsed or not, through the keyed path.
        (
            "ratelimit",
            Box::new(RateLimit::new(
                RateConfig::parse("1G burst 1000000 per flow table 8").unwrap(),
                WORKERS,
            )),
            pass,
        ),
        // The tracker on arbitrary frames: never a panic, always a pass
        // (no drop-invalid); a small table, so the limit is reached.
        (
            "ct",
            Box::new(pfil_filters::Ct::from_config("max 64 tcp loose", WORKERS).unwrap()),
            pass,
        ),
        // The same policy as an ACL: its key extraction and classifier on
        // arbitrary frames must agree with drop-udp.
        (
            "acl",
            Box::new(
                Acl::from_config(
                    &format!(
                        "pass proto tcp flags S/SA; drop proto udp to any port {port}; pass all"
                    ),
                    WORKERS,
                )
                .unwrap(),
            ),
            udp_port,
        ),
    ];
    builtin
        .into_iter()
        .chain(port_filter_object().map(|obj| {
            let f = pfil_filters::Xdp::from_config(
                &format!(
                    "@{}\nmap blocked_ports key {} {} value 1",
                    obj.display(),
                    port >> 8,
                    port & 0xff
                ),
                WORKERS,
            )
            .unwrap();
            (
                "xdp",
                Box::new(f) as Box<dyn Filter>,
                xdp_port_filter as Expected,
            )
        }))
        .collect()
}

#[test]
fn the_property_tests_cover_every_module_of_the_catalog() {
    let catalog: Vec<_> = Catalog::builtin()
        .modules()
        .map(|m| m.name().to_owned())
        .collect();
    let mut tested: Vec<_> = filters(0).into_iter().map(|(n, _, _)| n).collect();
    if port_filter_object().is_none() {
        tested.push("xdp"); // not testable without clang (said above)
    }
    assert_eq!(catalog, tested);
    // And the catalog builds them (its own tests check what they do).
    for m in Catalog::builtin().modules() {
        if m.name() == "xdp" && !std::path::Path::new(&m.example()[5..]).exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "xdp-tools missing under CI"
            );
            continue;
        }
        Catalog::builtin()
            .create(m.example(), &BuildCtx::new(WORKERS))
            .unwrap();
    }
}

fn port() -> impl Strategy<Value = u16> {
    prop_oneof![Just(53u16), Just(0), any::<u16>()]
}

#[test]
fn every_filter_called_directly_with_any_ctx() {
    let mut runner = TestRunner::new(frames::config());
    let dir = prop_oneof![Just(Dir::In), Just(Dir::Out)];
    // Any worker index, including ones beyond the filter's slots.
    let worker = prop_oneof![0..WORKERS, Just(usize::MAX), any::<usize>()];
    runner
        .run(
            &(frames::any_frame(), port(), dir, worker),
            |((kind, frame), port, dir, worker)| {
                let ctx = Ctx::new("h", dir, worker);
                for (name, f, want) in filters(port) {
                    let mut buf = frame.clone();
                    let mut p = Packet::with_kind(&mut buf, kind);
                    let v = f.filter(&mut p, &ctx);
                    prop_assert_eq!(v, want(&p, port), "{}", name);
                    let mut batch = [p];
                    f.filter_batch(&mut batch, &ctx);
                    prop_assert_eq!(batch[0].verdict(), v, "{} batch", name);
                }
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn every_filter_through_a_registry_on_every_kind_of_head() {
    let port = 53;
    let reg = Registry::with_max_workers(WORKERS);
    let count = Count::new(WORKERS);
    let kinds = [PacketKind::Ethernet, PacketKind::Ipv4, PacketKind::Ipv6];
    let mut heads = Vec::new();
    for k in kinds {
        let head = format!("h:{k}");
        heads.push(reg.register_head(&head, k, Dirs::BOTH).unwrap());
        for (name, f, _) in filters(port) {
            if name == "xdp" {
                // Its policy is not the UDP-port one this chain's verdicts
                // are checked against; it is checked alone above.
                continue;
            }
            let hook = format!("{name}:{k}");
            let f: std::sync::Arc<dyn Filter> = if name == "count" {
                std::sync::Arc::new(count.clone())
            } else {
                f.into()
            };
            reg.add_hook_shared(&hook, k, Dirs::BOTH, f).unwrap();
            for d in Dir::ALL {
                reg.link(&head, d, &hook, Placement::Append).unwrap();
            }
        }
    }
    let workers = RefCell::new(
        (0..WORKERS)
            .map(|_| reg.worker().unwrap())
            .collect::<Vec<_>>(),
    );
    let mut runner = TestRunner::new(frames::config());
    runner
        .run(
            &(
                prop::collection::vec(frames::any_frame(), 1..6),
                0usize..3,
                0..WORKERS,
                prop_oneof![Just(Dir::In), Just(Dir::Out)],
            ),
            |(batch, at, wi, dir)| {
                let head = &heads[at];
                let mut bufs: Vec<Vec<u8>> = batch.iter().map(|(_, f)| f.clone()).collect();
                let mut pkts: Vec<Packet<'_>> = bufs
                    .iter_mut()
                    .zip(&batch)
                    .map(|(b, (k, _))| Packet::with_kind(b, *k))
                    .collect();
                let seen = count.get(dir).packets;
                head.run(dir, &mut workers.borrow_mut()[wi], &mut pkts);
                let mut shown = 0;
                for (p, (k, f)) in pkts.iter().zip(&batch) {
                    if *k != head.kind() {
                        prop_assert_eq!(p.verdict(), Verdict::Dropped, "refused");
                        continue;
                    }
                    let mut g = f.clone();
                    let q = Packet::with_kind(&mut g, *k);
                    let udp53 = q
                        .headers()
                        .and_then(|h| h.transport)
                        .is_some_and(|t| t.protocol == L4::Udp && t.dst_port == port)
                        || libpcap_udp_port(&q, port) == Verdict::Dropped;
                    // In: null, count, drop-udp, bpf. Out: the same,
                    // appended, so walked the other way round: count sees
                    // only what drop-udp and bpf passed.
                    let v = if udp53 {
                        Verdict::Dropped
                    } else {
                        Verdict::Pass
                    };
                    prop_assert_eq!(p.verdict(), v);
                    if dir == Dir::In || !udp53 {
                        shown += 1;
                    }
                }
                prop_assert_eq!(
                    count.get(dir).packets,
                    seen + shown,
                    "count saw every packet of its kind that reached it"
                );
                Ok(())
            },
        )
        .unwrap();
    for k in kinds {
        for d in Dir::ALL {
            let chain = reg.chain(&format!("h:{k}"), d).unwrap();
            assert!(chain
                .iter()
                .all(|l| l.counters.faults == 0 && !l.quarantined));
        }
    }
}

/// The acl filter's key, fast path and reference, on every kind of frame
/// (each on a fresh packet: the fast path also covers the first look).
#[test]
fn the_acl_key_fast_path_agrees_with_the_reference() {
    let mut runner = TestRunner::new(frames::config());
    runner
        .run(&frames::any_frame(), |(kind, frame)| {
            let (mut a, mut b) = (frame.clone(), frame.clone());
            let fast = pfil_filters::acl::key_of(&Packet::with_kind(&mut a, kind));
            let slow = pfil_filters::acl::key_of_reference(&Packet::with_kind(&mut b, kind));
            prop_assert_eq!(fast, slow);
            // And on a packet whose headers were read before.
            let p = Packet::with_kind(&mut a, kind);
            let _ = p.parsed();
            prop_assert_eq!(pfil_filters::acl::key_of(&p), slow);
            Ok(())
        })
        .unwrap();
}

/// The acl filter on a batch of mixed frames (IPv4 through its IPv4 batch
/// path, everything else one by one) decides each frame as it does alone,
/// and leaves frames already dropped alone.
#[test]
fn the_acl_decides_a_mixed_batch_as_each_frame_alone() {
    let acl = Acl::from_config(
        "drop inet6 proto udp; pass proto tcp flags S/SA; drop vlan 7; drop proto udp to any port 53; drop proto icmp; pass all",
        WORKERS,
    )
    .unwrap();
    let ctx = Ctx::new("h", Dir::In, 0);
    // A batch is up to 80 frames: an eighth of the cases covers as many
    // frames as the other tests.
    let base = frames::config();
    let mut runner = TestRunner::new(proptest::test_runner::Config {
        cases: (base.cases / 8).max(64),
        ..base
    });
    runner
        .run(
            &proptest::collection::vec((frames::any_frame(), any::<bool>()), 1..80),
            |frames| {
                let mut alone = Vec::new();
                for ((kind, f), _) in &frames {
                    let mut b = f.clone();
                    alone.push(acl.filter(&mut Packet::with_kind(&mut b, *kind), &ctx));
                }
                let mut bufs: Vec<Vec<u8>> = frames.iter().map(|((_, f), _)| f.clone()).collect();
                let mut pkts: Vec<Packet<'_>> = bufs
                    .iter_mut()
                    .zip(&frames)
                    .map(|(b, ((kind, _), pre))| {
                        let mut p = Packet::with_kind(b, *kind);
                        if *pre {
                            p.set_verdict(Verdict::Dropped);
                        }
                        p
                    })
                    .collect();
                acl.filter_batch(&mut pkts, &ctx);
                for ((p, a), (_, pre)) in pkts.iter().zip(&alone).zip(&frames) {
                    let want = if *pre { Verdict::Dropped } else { *a };
                    prop_assert_eq!(p.verdict(), want);
                }
                Ok(())
            },
        )
        .unwrap();
}

/// A word of a `ratelimit` config: the keywords, numbers of every size
/// and form (huge, tiny, negative, NaN, infinities, with the suffixes),
/// the per modes, and junk.
fn ratelimit_word() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        any::<u64>().prop_map(|v| v.to_string()),
        any::<u32>().prop_map(|v| v.to_string()),
        (0u32..40).prop_map(|e| format!("1{}", "0".repeat(e as usize))),
        any::<f64>().prop_map(|v| v.to_string()),
        (-400i32..400).prop_map(|e| format!("1e{e}")),
        prop::sample::select(vec![
            "0",
            "-1",
            "0.001",
            "0.0009",
            "1e-3",
            "nan",
            "inf",
            "-inf",
            "NaN",
            "1G",
            "2G",
            "0.1",
            "4294967295",
            "4294967296",
            "16777216",
            "16777217",
            "262144",
            "1048576",
            "18446744073709551616",
            "",
        ])
        .prop_map(str::to_owned),
    ];
    let suffixed = (
        number.clone(),
        prop::sample::select(vec!["", "k", "K", "M", "G", "pps", "kpps", "Gpps"]),
    )
        .prop_map(|(n, s)| format!("{n}{s}"));
    prop_oneof![
        3 => prop::sample::select(vec!["burst", "per", "table", "src", "dst", "flow", "hook"])
            .prop_map(str::to_owned),
        3 => number,
        2 => suffixed,
        1 => "\\PC{0,12}",
    ]
}

/// Review/issue 23: no `ratelimit` config string crashes, hangs or takes
/// unbounded memory: the parser answers (a config or an error naming
/// what was wrong), the catalog's constructor holds the tables to the
/// byte cap over every worker slot (pfild's 64), and what it builds
/// admits at most the batch and never faults, whatever the numbers.
#[test]
fn any_ratelimit_config_is_parsed_or_refused_within_the_caps() {
    use pfil_filters::ratelimit::{Per, MAX_BURST_SECONDS, MIN_RATE, SLOT_BYTES, TABLE_BYTES_CAP};
    let mut runner = TestRunner::new(frames::config());
    let config = prop_oneof![
        prop::collection::vec(ratelimit_word(), 0..9).prop_map(|w| w.join(" ")),
        "\\PC{0,64}",
    ];
    runner
        .run(
            &(config, prop_oneof![Just(1usize), Just(64), 1usize..200]),
            |(text, workers)| {
                let t = std::time::Instant::now();
                let parsed = RateConfig::parse(&text);
                match &parsed {
                    Ok(c) => {
                        prop_assert!(c.rate >= MIN_RATE && c.rate <= 1e9, "{text:?}: {c:?}");
                        prop_assert!(
                            f64::from(c.burst) / c.rate <= MAX_BURST_SECONDS,
                            "{text:?}: {c:?}"
                        );
                        prop_assert!(c.table.is_power_of_two() && c.table >= 4, "{text:?}: {c:?}");
                    }
                    Err(e) => prop_assert!(!e.is_empty() && e.len() < 400, "{text:?}: {e}"),
                }
                let built = Catalog::builtin()
                    .create(&format!("ratelimit:{text}"), &BuildCtx::new(workers));
                prop_assert_eq!(
                    built.is_ok(),
                    parsed
                        .as_ref()
                        .is_ok_and(|c| c.per == Per::Hook
                            || c.table * SLOT_BYTES * workers <= TABLE_BYTES_CAP),
                    "{:?}",
                    text
                );
                // A frame allocates one worker's table: up to 256 MiB with one
                // worker slot; those run only their stats (kept to 16 MiB here).
                let small = parsed
                    .as_ref()
                    .is_ok_and(|c| c.table * SLOT_BYTES <= 16 << 20);
                if let (Ok(f), true) = (built, small) {
                    // Nothing is allocated before a frame comes.
                    let bytes = f
                        .stats()
                        .iter()
                        .find(|s| s.name == "table_bytes")
                        .and_then(|s| s.value());
                    prop_assert!(bytes.is_none_or(|b| b == 0), "{text:?}: {bytes:?}");
                    let mut bufs: Vec<Vec<u8>> = (0..8u8)
                        .map(|i| {
                            let mut v = Vec::new();
                            etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
                                .ipv4([198, 18, 0, i], [198, 18, 1, 1], 64)
                                .udp(1000, 53)
                                .write(&mut v, &[0; 8])
                                .unwrap();
                            v
                        })
                        .collect();
                    let mut pkts: Vec<Packet<'_>> =
                        bufs.iter_mut().map(|b| Packet::new(b)).collect();
                    let ctx = Ctx::new("h", Dir::In, workers - 1);
                    f.filter_batch(&mut pkts, &ctx);
                    prop_assert!(pkts
                        .iter()
                        .all(|p| matches!(p.verdict(), Verdict::Pass | Verdict::Dropped)));
                    let bytes = f
                        .stats()
                        .iter()
                        .find(|s| s.name == "table_bytes")
                        .and_then(|s| s.value());
                    prop_assert!(
                        bytes.is_none_or(|b| b as usize <= TABLE_BYTES_CAP / workers),
                        "{text:?}: {bytes:?}"
                    );
                }
                prop_assert!(
                    t.elapsed() < std::time::Duration::from_secs(2),
                    "{text:?} took {:?}",
                    t.elapsed()
                );
                Ok(())
            },
        )
        .unwrap();
}
