//! `--pcap FILE`: a capture replayed through the heads (no root): exact
//! totals, filters checked against tcpdump's verdicts on the same file,
//! and bad captures explained.

mod common;
use common::*;

fn udp(dst_port: u16, src: [u8; 4], payload: usize) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src, [198, 18, 0, 2], 64)
        .udp(4000, dst_port);
    let mut v = Vec::new();
    b.write(&mut v, &vec![7u8; payload]).unwrap();
    v
}

fn tcp(dst_port: u16) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .tcp(4000, dst_port, 1, 1024)
        .syn();
    let mut v = Vec::new();
    b.write(&mut v, &[]).unwrap();
    v
}

/// 120 frames: UDP to 53 and 80 from two networks, TCP SYNs, sizes 60
/// to about 1 KiB.
fn mixed() -> Vec<Vec<u8>> {
    (0..120u16)
        .map(|i| match i % 4 {
            0 => udp(53, [198, 18, 1, 1], usize::from(i) * 8),
            1 => udp(80, [198, 18, 1, 2], 18),
            2 => udp(53, [10, 0, 0, 1], 30),
            _ => tcp(443),
        })
        .collect()
}

/// A pcap file with snap length `snap` (pfil_testnet's has 65535, and
/// libpcap cuts longer frames to it).
fn write_pcap_snap(path: &std::path::Path, snap: u32, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&snap.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let len = f.len() as u32;
        b.extend_from_slice(&(i as u32 + 1).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

fn dir(tag: &str) -> pfil_testnet::TempDir {
    pfil_testnet::TempDir::new(&format!("pfild-replay-{tag}"))
}

#[test]
fn a_capture_replayed_through_filters_agrees_with_tcpdump() {
    let d = dir("mixed");
    let file = d.join("mixed.pcap");
    let frames = mixed();
    pfil_testnet::write_pcap(&file, 1, &frames);
    let expr = "udp port 53 and not src net 10.0.0.0/8";
    let loops = 3u64;
    let out = pfild(&[
        "sink",
        "cap0",
        "--pcap",
        file.to_str().unwrap(),
        "--loop",
        &loops.to_string(),
        "--hook",
        "count",
        "--hook",
        &format!("bpf:drop {expr}"),
        "--hook",
        "count",
        "--no-control",
        "--quiet",
    ]);
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{so}\n{se}");
    assert!(se.contains("120 frames, played 3 times"), "{se}");
    let t = totals(&out.stdout);
    let n = frames.len() as u64 * loops;
    assert_eq!(num(&t, "generated"), n, "{so}");
    assert_eq!(num(&t, "rx"), n, "{so}");
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum::<u64>() * loops;
    assert!(
        so.contains(&format!("hook count:1: packets {n} bytes {bytes} ")),
        "every frame, byte for byte: {so}"
    );
    // What the bpf hook dropped is what tcpdump keeps, per play.
    let want = match pfil_testnet::tcpdump() {
        Some(td) => pfil_testnet::tcpdump_indices(td, &file, expr).len() as u64,
        // 30 frames to port 53 from 198.18.1.1 per play (i % 4 == 0).
        None => 30,
    };
    assert_eq!(want, 30, "the capture has 30 such frames");
    assert_eq!(num(&t, "filtered"), want * loops, "{so}");
    assert!(
        so.contains(&format!("hook count:3: packets {}", n - want * loops)),
        "{so}"
    );
}

#[test]
fn bad_captures_and_options_are_explained() {
    let d = dir("bad");
    // Bad captures: each refused with what is wrong with it.
    let missing = d.join("nope.pcap");
    let (raw, huge) = (d.join("raw.pcap"), d.join("huge.pcap"));
    pfil_testnet::write_pcap(&raw, 101, &[vec![0x45; 20]]);
    // A frame over libpcap's (and the replay's) 256 KiB.
    write_pcap_snap(
        &huge,
        400_000,
        &[udp(53, [198, 18, 0, 1], 18), vec![0; 300_000]],
    );
    let missing_msg = format!("--pcap {}", missing.display());
    for (file, want) in [
        (&missing, vec![missing_msg.as_str()]),
        (&raw, vec!["link type", "replays Ethernet captures"]),
        (
            &huge,
            vec!["after 1 frames", "300000, bigger than maximum of 262144"],
        ),
    ] {
        let out = pfild(&[
            "sink",
            "cap0",
            "--pcap",
            file.to_str().unwrap(),
            "--no-control",
        ]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {e}", file.display());
        for w in want {
            assert!(e.contains(w), "{}: `{w}` in {e}", file.display());
        }
    }

    let ok = d.join("ok.pcap");
    pfil_testnet::write_pcap(&ok, 1, &[udp(53, [198, 18, 0, 1], 18)]);
    for (args, want) in [
        (vec!["--count", "5"], "--count does not apply"),
        (
            vec!["--size", "100"],
            "--size, --src-*, --dst-* do not apply",
        ),
        (vec!["--queues", "2"], "replays on one worker"),
    ] {
        let mut a = vec!["sink", "cap0", "--pcap", ok.to_str().unwrap()];
        a.extend(args);
        let out = pfild(&a);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {e}");
        assert!(e.contains(want), "{a:?}: {e}");
    }
    let out = pfild(&["sink", "cap0", "--loop", "2", "--no-control"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("--pcap"), "--loop needs --pcap: {e}");
}

/// An operator testing a ruleset offline: the final report has every
/// counted rule's hits, the default action's, and a rate limiter's
/// evictions, exactly.
#[test]
fn a_replay_reports_per_rule_hits_and_evictions() {
    let d = dir("rules");
    let file = d.join("mixed.pcap");
    pfil_testnet::write_pcap(&file, 1, &mixed());
    // Per play: 30 UDP to 53 from 10.0.0.1 (rule 0), 30 UDP to 53 from
    // 198.18.1.1 (rule 1), 30 TCP SYNs (rule 2, not counted), 30 UDP to
    // port 80 (the default).
    let rules = "drop count proto udp from 10.0.0.0/8; pass count proto udp to any port 53; \
                 pass proto tcp; default drop";
    let out = pfild(&[
        "sink",
        "cap0",
        "--pcap",
        file.to_str().unwrap(),
        "--loop",
        "3",
        "--hook",
        &format!("acl:{rules}"),
        "--hook",
        "count",
        "--no-control",
        "--quiet",
    ]);
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{so}\n{se}");
    assert!(
        so.contains(
            "  hook acl:1 rules:\n\
             \x20   rule 0: 90 hits: drop count proto 17 from 10.0.0.0/8 to any\n\
             \x20   rule 1: 90 hits: pass count proto 17 from any to any port 53:53\n\
             \x20   default: 90 hits: default drop\n"
        ),
        "{so}"
    );
    assert_eq!(num(&totals(&out.stdout), "filtered"), 180, "{so}");
    assert!(so.contains("hook count:2: packets 180 "), "{so}");

    // Six sources into a limiter whose table has one set of 4 ways: the
    // 5th and the 6th evict.
    let six: Vec<Vec<u8>> = (1..=6).map(|i| udp(53, [198, 18, 2, i], 18)).collect();
    let file = d.join("six.pcap");
    pfil_testnet::write_pcap(&file, 1, &six);
    let out = pfild(&[
        "sink",
        "cap0",
        "--pcap",
        file.to_str().unwrap(),
        "--hook",
        "ratelimit:0.001 burst 1 per src table 4",
        "--no-control",
        "--quiet",
    ]);
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{so}");
    assert!(
        so.contains("  hook ratelimit:1: evictions 2, table_used 4, table_slots "),
        "{so}"
    );
}

/// What host captures hold (GRO/TSO frames of up to 64 KiB, BIG TCP
/// frames over it, jumbo frames, zero-length records) replays whole:
/// frames over 2048 bytes are taken, the bpf filter sees every byte (a
/// load at offset 8000 agrees with tcpdump, one at 150000 too),
/// zero-length frames are left out and counted.
#[test]
fn big_frames_replay_whole_and_empty_ones_are_counted() {
    let d = dir("big");
    let file = d.join("big.pcap");
    let mut frames = vec![
        udp(53, [198, 18, 0, 1], 18),
        udp(53, [198, 18, 0, 1], 3000),
        udp(53, [198, 18, 0, 1], 9000),
        udp(53, [198, 18, 0, 1], 65_000),
        tcp(80),
        vec![],
        udp(53, [198, 18, 0, 1], 8_000),
    ];
    frames[6][14 + 20 + 8000] = 9;
    // A 200000-byte frame (an experimental EtherType), 7 at byte 150000.
    let mut giant = vec![7u8; 200_000];
    giant[..14].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    frames.push(giant);
    write_pcap_snap(&file, 262_144, &frames);
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum::<u64>();
    // Byte 8000 of the UDP header's start is 7 in the 9000 and 65000
    // payload frames, 9 in the 8000 one, out of the others; byte 150000
    // of the frame is there in the giant one only.
    for (expr, matched) in [
        ("udp[8000] = 7", vec![2, 3]),
        ("ether[150000] = 7", vec![7]),
    ] {
        let out = pfild(&[
            "sink",
            "cap0",
            "--pcap",
            file.to_str().unwrap(),
            "--loop",
            "2",
            "--hook",
            &format!("bpf:drop {expr}"),
            "--hook",
            "count",
            "--no-control",
            "--quiet",
        ]);
        let (so, se) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{so}\n{se}");
        assert!(
            se.contains("7 frames (1 of zero length left out), played 2 times"),
            "{se}"
        );
        let t = totals(&out.stdout);
        assert_eq!(num(&t, "rx"), 14, "{so}");
        if let Some(td) = pfil_testnet::tcpdump() {
            assert_eq!(
                pfil_testnet::tcpdump_indices(td, &file, expr),
                matched,
                "tcpdump's matches of `{expr}`"
            );
        }
        let n = matched.len() as u64;
        assert_eq!(num(&t, "filtered"), 2 * n, "`{expr}`: {so}");
        let kept: u64 = bytes - matched.iter().map(|&i| frames[i].len() as u64).sum::<u64>();
        assert!(
            so.contains(&format!(
                "hook count:2: packets {} bytes {} ",
                2 * (7 - n),
                2 * kept
            )),
            "`{expr}`: {so}"
        );
    }
}

/// An empty capture plays nothing and exits 0, also with `--loop 0`;
/// `frames x --loop` over 2^64 is refused (it wrapped to 0 = forever).
#[test]
fn an_empty_capture_plays_nothing_and_loops_cannot_wrap() {
    let d = dir("empty");
    let empty = d.join("empty.pcap");
    pfil_testnet::write_pcap(&empty, 1, &[]);
    for loops in ["1", "0"] {
        let out = pfild(&[
            "sink",
            "cap0",
            "--pcap",
            empty.to_str().unwrap(),
            "--loop",
            loops,
            "--hook",
            "count",
            "--no-control",
            "--quiet",
        ]);
        let (so, se) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "--loop {loops}: {so}\n{se}");
        assert!(se.contains("0 frames, nothing to play"), "{se}");
        assert_eq!(num(&totals(&out.stdout), "rx"), 0, "{so}");
    }
    let two = d.join("two.pcap");
    pfil_testnet::write_pcap(&two, 1, &[tcp(80), tcp(81)]);
    let out = pfild(&[
        "sink",
        "cap0",
        "--pcap",
        two.to_str().unwrap(),
        "--loop",
        &(u64::MAX / 2 + 1).to_string(),
        "--no-control",
    ]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("2 frames x --loop 9223372036854775808 is more frames than a run counts"),
        "{e}"
    );
}
