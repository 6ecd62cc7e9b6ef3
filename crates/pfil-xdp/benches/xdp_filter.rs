//! xdp-filter's `xdpfilt_alw_udp.o` (UDP destination port 53 in its port
//! map) in pfil's engine against a native Rust filter with the same logic
//! (benches/native/xdpfilt.rs: Ethernet, up to four VLAN tags, IPv4 or
//! IPv6 and its extension headers, UDP, the port map lookups, the stats
//! update; tests/native_xdpfilt.rs checks it agrees with the object), interleaved in one run; and the load time (parse, verify,
//! prepare) of xdp-filter's largest program.
//!
//! `cargo bench -p pfil-xdp --bench xdp_filter` (prints ns/packet and the
//! ratio; no criterion: the two are measured round after round in turn so
//! the machine's noise hits both alike).

use std::hint::black_box;
use std::time::Instant;

use pfil::{Ctx, Dir, Filter, Packet};
use pfil_xdp::XdpFilter;

#[path = "native/xdpfilt.rs"]
mod native;
use native::{Native, NativeHook};

const OBJ: &str = "/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_udp.o";
const BIG: &str = "/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_all.o";

fn frame(dport: u16) -> Vec<u8> {
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

fn main() {
    if !std::path::Path::new(OBJ).exists() {
        eprintln!("skipped: {OBJ} missing (install xdp-tools)");
        return;
    }
    let t = Instant::now();
    let big = XdpFilter::from_config(&format!("@{BIG}"), 2).unwrap();
    let load = t.elapsed();
    drop(big);
    let xdp = XdpFilter::from_config(&format!("@{OBJ}"), 2).unwrap();
    let ports = xdp.program().map("filter_ports").unwrap();
    let key = u32::from(53u16.to_be()).to_le_bytes();
    ports
        .update(&key, &10u64.to_le_bytes().repeat(2), 0)
        .unwrap();
    let mut native = Native::default();
    native.ports[Native::key(53)] = native::FLAG_DST | native::FLAG_UDP;
    let hook = NativeHook::new(2);
    hook.set_port(53, native::FLAG_DST | native::FLAG_UDP);
    // Both hooks called as the chain calls them: through `dyn Filter`.
    let (xdp_dyn, hook_dyn): (&dyn Filter, &dyn Filter) = (&xdp, &hook);

    let mut frames: Vec<Vec<u8>> = (0..64)
        .map(|i| frame(if i % 4 == 0 { 53 } else { 1000 + i }))
        .collect();
    let ctx = Ctx::new("bench", Dir::In, 0);
    // Many short rounds, the sides in turn: on a loaded machine a long
    // round is likely preempted, which would bias against the slower
    // side; the median of short rounds is not.
    let n = 20_032usize;
    let rounds: usize = std::env::var("XDP_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(61);
    let per_packet = |f: &dyn Filter, frames: &mut Vec<Vec<u8>>| {
        let t = Instant::now();
        for i in 0..n {
            let fr = &mut frames[i & 63];
            black_box(f.filter(&mut Packet::new(fr), &ctx));
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    // As the chain calls a batched hook: batches of 32.
    let batched = |f: &dyn Filter, frames: &mut Vec<Vec<u8>>| {
        let t = Instant::now();
        for _ in 0..n / 64 {
            let (x, y) = frames.split_at_mut(32);
            for half in [x, y] {
                // On the stack, as a port's batch array: no allocation.
                let mut it = half.iter_mut();
                let mut batch: [Packet<'_>; 32] =
                    std::array::from_fn(|_| Packet::new(it.next().unwrap()));
                f.filter_batch(&mut batch, &ctx);
                black_box(&batch);
            }
        }
        t.elapsed().as_nanos() as f64 / (n / 64 * 64) as f64
    };
    let mut r: [Vec<f64>; 5] = Default::default();
    for _round in 0..rounds {
        r[0].push(per_packet(xdp_dyn, &mut frames));
        r[1].push(batched(xdp_dyn, &mut frames));
        r[2].push(per_packet(hook_dyn, &mut frames));
        r[3].push(batched(hook_dyn, &mut frames));
        let t = Instant::now();
        for i in 0..n {
            let f = &frames[i & 63];
            black_box(native.filter(black_box(f)));
        }
        r[4].push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    for v in &mut r {
        v.sort_by(f64::total_cmp);
    }
    let m: Vec<f64> = r.iter().map(|v| v[v.len() / 2]).collect();
    // The spread: 10th and 90th percentiles of the rounds.
    let spread = |v: &[f64]| format!("{:.1}-{:.1}", v[v.len() / 10], v[v.len() * 9 / 10]);
    println!(
        "load (parse + verify + prepare) of xdpfilt_alw_all.o: {:.2} ms",
        load.as_secs_f64() * 1e3
    );
    println!("median of {rounds} rounds of {n} packets, ns/packet (p10-p90); Packet built per frame included");
    let rows = [
        "xdpfilt_alw_udp.o as an xdp hook, per packet",
        "  the same, in batches of 32",
        "native Rust hook, same logic, per packet",
        "  the same, in batches of 32",
        "native Rust function on the bytes (no hook)",
    ];
    for (i, row) in rows.iter().enumerate() {
        println!("{row:<46} {:>6.1} ({})", m[i], spread(&r[i]));
    }
    println!(
        "ratio to the native hook: {:.2}x per packet, {:.2}x batched",
        m[0] / m[2],
        m[1] / m[3]
    );
    println!(
        "ratio to the native function: {:.2}x per packet, {:.2}x batched",
        m[0] / m[4],
        m[1] / m[4]
    );
}
