//! What seeing inside the datapath costs it (issue 10), per packet, in
//! one run: cost sampling off / one batch in 64 (the default) / every
//! batch, with one null hook at batches of 32 and 64; and a capture tap
//! next to the null hook matching nothing (a tcpdump expression no frame
//! matches) or copying everything at snap length 128 (a writer thread
//! drains the buffers, as the control server does), against no tap.
//!
//! `cargo bench -p pfil-benches --bench observe`
//!
//! One iteration = reset the verdicts of the batch and run it on one
//! worker; the frames are 64-byte UDP to port 9.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pfil::{Dir, Dirs, Packet, PacketKind, Placement, Registry};
use pfil_ctl::capture::Tap;

fn frame() -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(9, 9);
    let mut v = Vec::new();
    b.write(&mut v, &[0; 18]).unwrap();
    v
}

/// A registry with head `h` and the null hook linked; `tap`: also a tap
/// after it (and the thread draining it, stopped by the returned flag).
fn rig(tap: Option<(Option<&str>, usize)>) -> (Registry, pfil::Head, Arc<AtomicBool>) {
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    reg.add_hook("null:1", PacketKind::Ethernet, Dirs::IN, pfil_filters::Null)
        .unwrap();
    reg.link("h", Dir::In, "null:1", Placement::Append).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    if let Some((expr, snaplen)) = tap {
        // Worker slot 0 is the bench's (taken first below).
        let t = Arc::new(Tap::new(expr, snaplen, 0, 4096, 2, &[0]).unwrap());
        reg.add_hook_shared("capture:1", PacketKind::Ethernet, Dirs::IN, t.clone())
            .unwrap();
        reg.link("h", Dir::In, "capture:1", Placement::Append)
            .unwrap();
        let s = stop.clone();
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let mut n = 0u64;
                t.drain(|r| n += std::hint::black_box(r as *const _ as u64) & 1);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    }
    (reg, head, stop)
}

fn run(
    c: &mut Criterion,
    group: &str,
    id: String,
    batch: usize,
    reg: &Registry,
    head: &pfil::Head,
) {
    let mut g = c.benchmark_group(group);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(batch as u64));
    let mut w = reg.worker().unwrap();
    let mut frames: Vec<Vec<u8>> = (0..batch).map(|_| frame()).collect();
    let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    g.bench_function(BenchmarkId::new(id, batch), |b| {
        b.iter(|| {
            for p in pkts.iter_mut() {
                p.reset();
            }
            head.run(Dir::In, &mut w, &mut pkts);
            std::hint::black_box(&mut pkts);
        })
    });
    g.finish();
}

/// The tap's and the `bpf` filter's expression: ours against libpcap's
/// own interpreter (`pcap_offline_filter`) on the same 64-byte frame.
fn bpf(c: &mut Criterion) {
    let f = frame();
    let mut g = c.benchmark_group("bpf");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    for expr in ["udp port 9999", "udp port 53 and not src net 10.0.0.0/8"] {
        let ours =
            pfil_filters::bpf::Program::compile(expr, pfil_filters::bpf::Link::Ethernet).unwrap();
        let theirs = pcap::Capture::dead(pcap::Linktype::ETHERNET)
            .unwrap()
            .compile(expr, true)
            .unwrap();
        g.bench_function(BenchmarkId::new("pfil", expr), |b| {
            b.iter(|| ours.matches(std::hint::black_box(&f)))
        });
        g.bench_function(BenchmarkId::new("libpcap", expr), |b| {
            b.iter(|| theirs.filter(std::hint::black_box(&f)))
        });
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    bpf(c);
    for batch in [32, 64] {
        for every in [0u32, 64, 1] {
            let (reg, head, _) = rig(None);
            reg.set_sampling(every);
            let id = match every {
                0 => "off".to_owned(),
                n => format!("1in{n}"),
            };
            run(c, "sampling", id, batch, &reg, &head);
        }
    }
    for (id, tap) in [
        ("none", None),
        ("nomatch", Some((Some("udp port 9999"), 128))),
        ("all-128", Some((None, 128))),
    ] {
        let (reg, head, stop) = rig(tap);
        run(c, "tap", id.to_owned(), 32, &reg, &head);
        stop.store(true, Ordering::Relaxed);
    }
}

#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group!(benches, bench);
}
use group::benches;
criterion_main!(benches);
