//! What a packet trace costs the datapath: a head with `count` and
//! `drop-udp:53` over batches of 64 UDP frames (ports 53 and 80 in
//! turn), untraced (`off`), traced with a tcpdump expression that matches
//! nothing (`none`: `udp port 9999`) or every frame (`all`: `udp`), the
//! records read after each batch as a control connection would.
//! `benches/callgrind_trace.sh` counts its instructions per frame.
//!
//! `cargo run --release -p pfil-examples --example trace_cost -- MODE [FRAMES]`

use std::sync::Arc;
use std::time::Instant;

use etherparse::PacketBuilder;
use pfil::{Dir, Dirs, Packet, PacketKind, Placement, Registry, Trace};
use pfil_filters::bpf::{Link, Program};
use pfil_filters::{Count, DropUdpPort};

const BATCH: usize = 64;

/// A 64-byte UDP frame from 198.18.0.1:9 to 198.18.0.2:`port`.
fn udp_frame(port: u16) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(9, port);
    let payload = [0u8; 22];
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, &payload)
        .expect("a vector write cannot fail");
    v
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "off".into());
    let frames: u64 = match args.next() {
        Some(s) => s
            .parse()
            .map_err(|e| format!("FRAMES must be a number, got `{s}`: {e}"))?,
        None => 1_000_000,
    };
    let expr = match mode.as_str() {
        "off" => None,
        "none" => Some("udp port 9999"),
        "all" => Some("udp"),
        other => return Err(format!("MODE: off, none or all, not `{other}`").into()),
    };
    let reg = Registry::new();
    let head = reg.register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)?;
    reg.add_hook(
        "count:1",
        PacketKind::Ethernet,
        Dirs::BOTH,
        Count::new(reg.max_workers()),
    )?;
    reg.add_hook(
        "drop-udp:2",
        PacketKind::Ethernet,
        Dirs::BOTH,
        DropUdpPort(53),
    )?;
    reg.link("syn0", Dir::In, "count:1", Placement::Append)?;
    reg.link("syn0", Dir::In, "drop-udp:2", Placement::Append)?;
    let trace = match expr {
        None => None,
        Some(e) => {
            let prog = Program::compile(e, Link::Ethernet)?;
            let m: Box<pfil::TraceMatch> = Box::new(move |p: &Packet<'_>| prog.matches(p.frame()));
            let t = Arc::new(Trace::new(Some(m), 0, pfil::trace::DEFAULT_TRACE_BUFFER));
            Some(reg.trace("syn0", Dir::In, t)?)
        }
    };
    let mut w = reg.worker()?;
    let mut bufs: Vec<Vec<u8>> = (0..BATCH)
        .map(|i| udp_frame(if i % 2 == 0 { 53 } else { 80 }))
        .collect();
    let batches = frames.div_ceil(BATCH as u64);
    let (mut records, mut dropped_pkts) = (0u64, 0u64);
    let t0 = Instant::now();
    for _ in 0..batches {
        let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
        if head.is_hooked(Dir::In) {
            head.run_in(&mut w, &mut pkts);
        }
        dropped_pkts += pkts.iter().filter(|p| !p.verdict().is_pass()).count() as u64;
        drop(pkts);
        if let Some(t) = &trace {
            while t.trace().pop().is_some() {
                records += 1;
            }
        }
    }
    let el = t0.elapsed();
    let n = batches * BATCH as u64;
    let stats = trace
        .as_ref()
        .map(|t| t.trace().stats())
        .unwrap_or_default();
    println!(
        "trace_cost {mode}: {n} frames, {:.1} ns/frame, {dropped_pkts} dropped by drop-udp, {records} records read, {} traced, {} records dropped",
        el.as_nanos() as f64 / n as f64,
        stats.traced,
        stats.dropped
    );
    Ok(())
}
