//! The README's main job: a head with the null and counting hooks, synthetic
//! UDP traffic built with etherparse, per-link counters printed at the end.
//!
//! `cargo run --release -p pfil-examples --example counting_hook -- [PACKETS]`

use std::time::Instant;

use etherparse::PacketBuilder;
use pfil::{Dir, Dirs, Packet, PacketKind, Placement, Registry};
use pfil_filters::{Count, DropUdpPort, Null};

/// A UDP frame from 198.18.0.1 to 198.18.0.2:`port` with `size` bytes in all.
fn udp_frame(port: u16, size: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(40_000, port);
    let payload = vec![0u8; size.saturating_sub(42)];
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, &payload)
        .expect("a vector write cannot fail");
    v
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total: u64 = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|e| format!("PACKETS must be a number, got `{s}`: {e}"))?,
        None => 1_000_000,
    };
    let reg = Registry::new();
    let head = reg.register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)?;
    let count = Count::new(reg.max_workers());
    reg.add_hook("null:pass", PacketKind::Ethernet, Dirs::BOTH, Null)?;
    reg.add_hook("count:all", PacketKind::Ethernet, Dirs::BOTH, count.clone())?;
    reg.add_hook(
        "acl:no-discard",
        PacketKind::Ethernet,
        Dirs::IN,
        DropUdpPort(9),
    )?;
    // In walk order: acl, count, null (prepend puts the last one first on input).
    reg.link("syn0", Dir::In, "null:pass", Placement::Prepend)?;
    reg.link("syn0", Dir::In, "count:all", Placement::Prepend)?;
    reg.link("syn0", Dir::In, "acl:no-discard", Placement::Prepend)?;

    // A batch of 64 frames; every 8th goes to the discard port (9).
    let templates: Vec<Vec<u8>> = (0..64)
        .map(|i| udp_frame(if i % 8 == 7 { 9 } else { 5000 + i as u16 }, 64 + i * 8))
        .collect();
    let mut frames = templates.clone();
    let mut worker = reg.worker()?;
    let (mut sent, mut passed, mut dropped) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    while sent < total {
        let n = (total - sent).min(frames.len() as u64) as usize;
        let mut batch: Vec<Packet<'_>> = frames[..n].iter_mut().map(|f| Packet::new(f)).collect();
        head.run_in(&mut worker, &mut batch);
        for p in &batch {
            match p.verdict() {
                pfil::Verdict::Pass => passed += 1,
                _ => dropped += 1,
            }
        }
        sent += n as u64;
    }
    let elapsed = start.elapsed();

    println!("pushed {sent} synthetic UDP frames through head syn0 in {elapsed:.2?}");
    println!("  callers saw: {passed} passed, {dropped} dropped");
    println!("  chain syn0 in (walk order):");
    for l in reg.chain("syn0", Dir::In)? {
        let c = l.counters;
        println!(
            "    {:<16} packets {:>10}  bytes {:>12}  passed {:>10}  dropped {:>8}  faults {}",
            l.hook, c.packets, c.bytes, c.passed, c.dropped, c.faults
        );
    }
    let ci = count.get(Dir::In);
    println!(
        "  count:all says: {} packets, {} bytes in",
        ci.packets, ci.bytes
    );
    assert_eq!(
        passed + dropped,
        sent,
        "every frame got exactly one verdict"
    );
    assert_eq!(
        ci.packets, passed,
        "count sits after the acl and sees what it passed"
    );
    Ok(())
}
