//! xdp-tools' xdp-filter programs, configured as `xdp-filter` configures
//! them, run by the kernel and by pfil on the same frames: the same
//! verdict, the same bytes, the same map contents (its counters
//! included), frame for frame. Needs root; under CI it must run.
//!
//! Real captures: the fifteen of tests/captures (from tcpdump's test
//! suite, its licence beside them), and with `PFIL_XDP_CAPTURES=DIR` every
//! classic pcap file of DIR (tcpdump's tests/, as
//! scripts/replay-corpus.sh uses).

mod oracle;

use oracle::frames::{self, MAC_A, V4_A, V4_B, V6_A, V6_B};
use oracle::Pair;

const FLAG_SRC: u64 = 1;
const FLAG_DST: u64 = 2;
const FLAG_TCP: u64 = 4;
const FLAG_UDP: u64 = 8;

fn configure(p: &Pair, name: &str) {
    let has = |m: &str| p.obj.maps.iter().any(|d| d.name == m);
    if has("filter_ports") {
        // `xdp-filter port 53 -p udp -m dst`, `port 22 -p tcp -m dst`,
        // `port 80 -p tcp -m src`, `port 123` (both protocols, both ways).
        for (port, flags) in [
            (53u16, FLAG_DST | FLAG_UDP),
            (22, FLAG_DST | FLAG_TCP),
            (80, FLAG_SRC | FLAG_TCP),
            (123, FLAG_SRC | FLAG_DST | FLAG_TCP | FLAG_UDP),
        ] {
            let key = u32::from(port.to_be()).to_le_bytes();
            p.set("filter_ports", &key, &flags.to_le_bytes());
        }
    }
    if has("filter_ipv4") {
        p.set("filter_ipv4", &V4_A, &FLAG_DST.to_le_bytes());
        p.set("filter_ipv4", &V4_B, &(FLAG_SRC | FLAG_DST).to_le_bytes());
    }
    if has("filter_ipv6") {
        p.set("filter_ipv6", &V6_A, &FLAG_DST.to_le_bytes());
        p.set("filter_ipv6", &V6_B, &FLAG_SRC.to_le_bytes());
    }
    if has("filter_ethernet") {
        p.set("filter_ethernet", &MAC_A, &FLAG_SRC.to_le_bytes());
    }
    let _ = name;
}

#[test]
fn xdp_filter_programs_match_the_kernel_frame_for_frame() {
    if !oracle::kernel_here() {
        return;
    }
    oracle::pin_cpu();
    let mut traffic = frames::generated();
    let vendored = frames::captures(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/captures"),
        500,
    );
    assert!(
        vendored.len() > 100,
        "tests/captures: {} frames",
        vendored.len()
    );
    traffic.extend(vendored);
    if let Some(dir) = std::env::var_os("PFIL_XDP_CAPTURES") {
        let real = frames::captures(std::path::Path::new(&dir), 200);
        eprintln!(
            "{} frames from captures in {}",
            real.len(),
            dir.to_string_lossy()
        );
        traffic.extend(real);
    }
    for name in [
        "xdpfilt_alw_all",
        "xdpfilt_alw_eth",
        "xdpfilt_alw_ip",
        "xdpfilt_alw_tcp",
        "xdpfilt_alw_udp",
        "xdpfilt_dny_all",
        "xdpfilt_dny_eth",
        "xdpfilt_dny_ip",
        "xdpfilt_dny_tcp",
        "xdpfilt_dny_udp",
    ] {
        let path = format!("/usr/lib/x86_64-linux-gnu/bpf/{name}.o");
        let Ok(bytes) = std::fs::read(&path) else {
            assert!(std::env::var_os("CI").is_none(), "{path} missing under CI");
            eprintln!("skipped: {path} (install xdp-tools)");
            return;
        };
        let mut p = Pair::new(&bytes, None);
        configure(&p, name);
        let mut actions = [0usize; 5];
        for (what, f) in &traffic {
            let a = p.run(f, &format!("{name}: {what}"));
            if let Some(c) = actions.get_mut(a as usize) {
                *c += 1;
            }
        }
        p.same_maps(name);
        eprintln!(
            "{name}: {} frames agree (aborted/drop/pass: {}/{}/{})",
            p.runs, actions[0], actions[1], actions[2]
        );
        assert!(
            actions[1] > 0 && actions[2] > 0,
            "{name}: both verdicts must occur for the check to mean something"
        );
    }
}
