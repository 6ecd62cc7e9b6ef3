//! The loader on real objects: xdp-tools' xdp-filter programs as Debian
//! installs them, and the kernel's verifier as a second opinion on the
//! linked instructions.

use pfil_xdp::{kernel, MapOrigin, MapType, Object};

const BPF_DIR: &str = "/usr/lib/x86_64-linux-gnu/bpf";
const XDPFILT: [&str; 10] = [
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
];

fn read(name: &str) -> Option<Vec<u8>> {
    let path = format!("{BPF_DIR}/{name}.o");
    match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{path}: {e} (scripts/setup.sh installs xdp-tools)"
            );
            eprintln!("skipped: {path}: {e} (install xdp-tools)");
            None
        }
    }
}

#[test]
fn xdp_filter_objects_parse_with_their_btf_maps() {
    for name in XDPFILT {
        let Some(bytes) = read(name) else { return };
        let obj = Object::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(obj.license, "GPL", "{name}");
        let prog = obj.program(None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(prog.section, "xdp");
        let stats = obj
            .maps
            .iter()
            .find(|m| m.name == "xdp_stats_map")
            .expect("xdp_stats_map");
        assert_eq!(
            (stats.kind, stats.key_size, stats.origin.clone()),
            (MapType::PercpuArray, 4, MapOrigin::Btf)
        );
        if name.ends_with("udp") || name.ends_with("tcp") {
            let ports = obj
                .maps
                .iter()
                .find(|m| m.name == "filter_ports")
                .expect("filter_ports");
            assert_eq!(
                (ports.kind, ports.key_size, ports.max_entries),
                (MapType::PercpuArray, 4, 65536),
                "{name}"
            );
        }
        if name.ends_with("all") {
            for m in [
                "filter_ports",
                "filter_ipv4",
                "filter_ipv6",
                "filter_ethernet",
            ] {
                assert!(obj.maps.iter().any(|d| d.name == m), "{name}: no {m}");
            }
        }
    }
}

#[test]
fn xdp_filter_objects_pass_the_kernel_verifier_as_linked() {
    if !kernel::available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "bpf(2) unavailable under CI (needs root)"
        );
        eprintln!("skipped: bpf(2) needs root");
        return;
    }
    for name in XDPFILT {
        let Some(bytes) = read(name) else { return };
        let obj = Object::parse(&bytes).unwrap();
        let prog = obj.program(None).unwrap();
        let k = kernel::KernelProgram::load(&obj, prog).unwrap_or_else(|e| panic!("{name}: {e}"));
        let run = k.test_run(&[0u8; 64]).unwrap();
        assert!(run.action <= 4, "{name}: action {}", run.action);
    }
}

#[test]
fn garbage_and_truncated_objects_are_errors_not_panics() {
    let Some(bytes) = read("xdpfilt_dny_all") else {
        return;
    };
    for cut in (0..bytes.len()).step_by(97) {
        let _ = Object::parse(&bytes[..cut]);
    }
    let mut flipped = bytes.clone();
    let mut x: u32 = 12345;
    for _ in 0..2000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let i = (x as usize >> 4) % flipped.len();
        flipped[i] ^= (x >> 24) as u8 | 1;
        let _ = Object::parse(&flipped);
    }
    assert!(Object::parse(b"not an elf").is_err());
}
