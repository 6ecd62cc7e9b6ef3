//! The kernel as the oracle: one object loaded into the kernel (bpf(2))
//! and into pfil with the same map contents, each frame run by both
//! (`BPF_PROG_TEST_RUN` and [`XdpProgram::run`]), and everything
//! compared: action, output bytes, map contents.

#![allow(dead_code, reason = "each test binary uses part of this helper module")]

use pfil_xdp::kernel::{self, KernelProgram};
use pfil_xdp::{Object, XdpProgram};

/// The kernel's XDP test run gives this much headroom (XDP_PACKET_HEADROOM).
pub const HEADROOM: usize = 256;
/// A test-run frame is one page, less the shared info the kernel keeps at
/// its end (`SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64).
pub const FRAME: usize = 4096 - 320;

/// Whether the oracle can run here; under CI it must.
pub fn kernel_here() -> bool {
    if kernel::available() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the kernel oracle must run under CI (as root)"
    );
    eprintln!("skipped: the kernel oracle needs root (bpf(2))");
    false
}

/// Pin the calling thread to the first CPU it may run on, so the
/// kernel's per-CPU values land in that CPU's slot, and return it: pfil
/// runs as the worker of the same index ([`Pair::run`]).
pub fn pin_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills it and sched_setaffinity reads it, for the calls only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
            0
        );
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("a CPU");
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one),
            0,
            "pin to CPU {cpu}"
        );
        CPU.with(|c| c.set(cpu));
        cpu
    }
}

thread_local! {
    /// The CPU [`pin_cpu`] pinned this thread to.
    static CPU: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One object in both places.
pub struct Pair {
    pub obj: Object,
    pub kernel: KernelProgram,
    pub ours: XdpProgram,
    pub runs: usize,
}

impl Pair {
    pub fn new(bytes: &[u8], program: Option<&str>) -> Pair {
        let obj = Object::parse(bytes).expect("object parses");
        let p = obj.program(program).expect("program");
        let kernel = KernelProgram::load(&obj, p).expect("the kernel loads it");
        let ours =
            XdpProgram::load(&obj, program, kernel::possible_cpus(), &[]).expect("pfil loads it");
        Pair {
            obj,
            kernel,
            ours,
            runs: 0,
        }
    }

    fn index(&self, map: &str) -> usize {
        self.obj
            .maps
            .iter()
            .position(|m| m.name == map)
            .unwrap_or_else(|| panic!("no map {map}"))
    }

    /// Set `key` in `map` on both sides; `value` is one CPU's value,
    /// written for every CPU of a per-CPU map (as xdp-filter does).
    pub fn set(&self, map: &str, key: &[u8], value: &[u8]) {
        let i = self.index(map);
        let k = &self.kernel.maps[i];
        let full: Vec<u8> = if k.def.kind.per_cpu() {
            let stride = value.len().div_ceil(8) * 8;
            let mut one = value.to_vec();
            one.resize(stride, 0);
            one.repeat(kernel::possible_cpus())
        } else {
            value.to_vec()
        };
        k.update(key, &full)
            .unwrap_or_else(|e| panic!("kernel {map}: {e}"));
        self.ours.maps()[i]
            .update(key, &full, 0)
            .unwrap_or_else(|e| panic!("pfil {map}: {e}"));
    }

    /// Run `frame` on both; panic with the frame on any difference.
    pub fn run(&mut self, frame: &[u8], what: &str) -> u32 {
        if frame.len() < 14 {
            return u32::MAX; // the kernel's test run refuses frames shorter than Ethernet
        }
        let k = self
            .kernel
            .test_run(frame)
            .unwrap_or_else(|e| panic!("{what}: kernel: {e}"));
        let mut buf = vec![0u8; FRAME];
        buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
        let r = self
            .ours
            .run(CPU.with(|c| c.get()), &mut buf, HEADROOM, frame.len(), 1, 0)
            .unwrap_or_else(|e| panic!("{what}: pfil faulted: {e} (kernel: action {})", k.action));
        assert_eq!(
            r.action,
            u64::from(k.action),
            "{what}: action differs on {}",
            hex(frame)
        );
        assert_eq!(
            hex(&buf[r.meta..r.end]),
            hex(&k.data),
            "{what}: output bytes differ"
        );
        self.runs += 1;
        k.action
    }

    /// Every map's contents, compared.
    pub fn same_maps(&self, what: &str) {
        for (i, d) in self.obj.maps.iter().enumerate() {
            let mut a = self.ours.maps()[i].entries();
            let mut b = self.kernel.maps[i].entries().expect("kernel map dump");
            if d.kind.per_cpu() || d.kind == pfil_xdp::MapType::Array {
                // Arrays list every index on both sides.
            }
            a.sort();
            b.sort();
            assert!(
                a == b,
                "{what}: map {} differs after {} runs",
                d.name,
                self.runs
            );
        }
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Frames to test with, built by hand.
pub mod frames {
    pub const MAC_A: [u8; 6] = [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01];
    pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
    pub const V4_A: [u8; 4] = [198, 18, 0, 1];
    pub const V4_B: [u8; 4] = [198, 18, 0, 2];
    pub const V4_C: [u8; 4] = [198, 19, 7, 9];
    pub const V6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    pub const V6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    pub fn eth(dst: [u8; 6], src: [u8; 6], vlans: usize, ethertype: u16) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        for i in 0..vlans {
            f.extend_from_slice(
                &(if i == 0 && vlans == 2 {
                    0x88a8u16
                } else {
                    0x8100
                })
                .to_be_bytes(),
            );
            f.extend_from_slice(&(100 + i as u16).to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    pub fn l4(proto: u8, sport: u16, dport: u16) -> Vec<u8> {
        match proto {
            17 => {
                let mut u = Vec::new();
                u.extend_from_slice(&sport.to_be_bytes());
                u.extend_from_slice(&dport.to_be_bytes());
                u.extend_from_slice(&[0, 12, 0, 0, 0xde, 0xad, 0xbe, 0xef]);
                u
            }
            6 => {
                let mut t = Vec::new();
                t.extend_from_slice(&sport.to_be_bytes());
                t.extend_from_slice(&dport.to_be_bytes());
                t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
                t
            }
            _ => vec![8, 0, 0xf7, 0xff, 0, 1, 0, 1],
        }
    }

    pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, body: &[u8]) -> Vec<u8> {
        let len = (20 + body.len()) as u16;
        let mut h = vec![0x45, 0];
        h.extend_from_slice(&len.to_be_bytes());
        h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
        h.extend_from_slice(&src);
        h.extend_from_slice(&dst);
        h.extend_from_slice(body);
        h
    }

    pub fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, body: &[u8]) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0];
        h.extend_from_slice(&(body.len() as u16).to_be_bytes());
        h.extend_from_slice(&[next, 64]);
        h.extend_from_slice(&src);
        h.extend_from_slice(&dst);
        h.extend_from_slice(body);
        h
    }

    pub fn icmp6_nd(kind: u8, target: [u8; 16]) -> Vec<u8> {
        let mut b = vec![kind, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&target);
        b
    }

    pub fn arp(op: u16, sip: [u8; 4], tip: [u8; 4]) -> Vec<u8> {
        let mut a = vec![0, 1, 8, 0, 6, 4];
        a.extend_from_slice(&op.to_be_bytes());
        a.extend_from_slice(&MAC_B);
        a.extend_from_slice(&sip);
        a.extend_from_slice(&[0; 6]);
        a.extend_from_slice(&tip);
        a
    }

    /// Generated traffic: every combination of MACs, VLAN tags, IPv4/IPv6/
    /// ARP/other, UDP/TCP/ICMP, ports and addresses, plus every
    /// truncation of a few of them.
    pub fn generated() -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let ports = [53u16, 80, 22, 123, 1000];
        for (mi, (dst, src)) in [(MAC_B, MAC_A), (MAC_A, MAC_B), (MAC_B, MAC_B)]
            .into_iter()
            .enumerate()
        {
            for vlans in 0..3 {
                for (ai, (s4, d4)) in [(V4_A, V4_C), (V4_C, V4_A), (V4_B, V4_C), (V4_C, V4_C)]
                    .into_iter()
                    .enumerate()
                {
                    for proto in [17u8, 6, 1] {
                        for &sp in &ports {
                            for &dp in &ports {
                                if proto == 1 && (sp, dp) != (53, 53) {
                                    continue;
                                }
                                let mut f = eth(dst, src, vlans, 0x0800);
                                f.extend(ipv4(s4, d4, proto, &l4(proto, sp, dp)));
                                out.push((
                                    format!("v4 mac{mi} vlan{vlans} addr{ai} p{proto} {sp}>{dp}"),
                                    f,
                                ));
                            }
                        }
                    }
                }
                for (ai, (s6, d6)) in [(V6_A, V6_B), (V6_B, V6_A), (V6_B, V6_B)]
                    .into_iter()
                    .enumerate()
                {
                    for proto in [17u8, 6] {
                        for &dp in &ports {
                            let mut f = eth(dst, src, vlans, 0x86dd);
                            f.extend(ipv6(s6, d6, proto, &l4(proto, 4000, dp)));
                            out.push((
                                format!("v6 mac{mi} vlan{vlans} addr{ai} p{proto} >{dp}"),
                                f,
                            ));
                        }
                    }
                    for (kind, t) in [(135u8, V6_A), (136, V6_A), (135, V6_B), (128, V6_A)] {
                        let mut f = eth(dst, src, vlans, 0x86dd);
                        f.extend(ipv6(s6, d6, 58, &icmp6_nd(kind, t)));
                        out.push((format!("icmp6 {kind} mac{mi} vlan{vlans} addr{ai}"), f));
                    }
                }
                for (op, s, t) in [
                    (1u16, V4_C, V4_A),
                    (2, V4_C, V4_A),
                    (1, V4_B, V4_C),
                    (2, V4_A, V4_C),
                ] {
                    let mut f = eth(dst, src, vlans, 0x0806);
                    f.extend(arp(op, s, t));
                    out.push((format!("arp {op} mac{mi} vlan{vlans}"), f));
                }
                let mut f = eth(dst, src, vlans, 0x88cc);
                f.extend_from_slice(&[0; 40]);
                out.push((format!("lldp mac{mi} vlan{vlans}"), f));
            }
        }
        let seeds: Vec<Vec<u8>> = out.iter().step_by(97).map(|(_, f)| f.clone()).collect();
        for (i, f) in seeds.iter().enumerate() {
            for cut in 14..f.len() {
                out.push((format!("truncated seed{i} at {cut}"), f[..cut].to_vec()));
            }
        }
        out
    }

    /// Ethernet frames of every classic pcap capture in `dir` (at most
    /// `max` per file).
    pub fn captures(dir: &std::path::Path, max: usize) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(dir) else {
            return out;
        };
        let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for p in files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        {
            let Ok(b) = std::fs::read(&p) else { continue };
            if b.len() < 24 {
                continue;
            }
            let le = match b[..4] {
                [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
                [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
                _ => continue,
            };
            let u32_at = |o: usize| {
                let w = [b[o], b[o + 1], b[o + 2], b[o + 3]];
                if le {
                    u32::from_le_bytes(w)
                } else {
                    u32::from_be_bytes(w)
                }
            };
            if u32_at(20) & 0x0fff_ffff != 1 {
                continue; // not Ethernet
            }
            let (mut off, mut n) = (24usize, 0);
            while off + 16 <= b.len() && n < max {
                let cap = u32_at(off + 8) as usize;
                let Some(f) = b.get(off + 16..off + 16 + cap) else {
                    break;
                };
                if f.len() <= super::FRAME - super::HEADROOM - 64 {
                    out.push((
                        format!(
                            "{}#{n}",
                            p.file_name().unwrap_or_default().to_string_lossy()
                        ),
                        f.to_vec(),
                    ));
                }
                off += 16 + cap;
                n += 1;
            }
        }
        out
    }
}
