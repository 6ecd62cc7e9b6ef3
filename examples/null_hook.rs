//! The smallest embedding: one head, the null hook, synthetic traffic.
//!
//! `cargo run --release -p pfil-examples --example null_hook`

use pfil::{Dir, Dirs, Packet, PacketKind, Placement, Registry};
use pfil_filters::Null;

fn main() -> Result<(), pfil::Error> {
    let reg = Registry::new();
    let head = reg.register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)?;
    reg.add_hook("null:pass", PacketKind::Ethernet, Dirs::BOTH, Null)?;
    reg.link("syn0", Dir::In, "null:pass", Placement::Prepend)?;

    let mut worker = reg.worker()?;
    let mut frames = vec![[0u8; 64]; 32];
    for _ in 0..10_000 {
        let mut batch: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
        if head.is_hooked(Dir::In) {
            head.run_in(&mut worker, &mut batch);
        }
    }
    let link = &reg.chain("syn0", Dir::In)?[0];
    println!(
        "{} on syn0 in: {} packets, {} bytes, {} passed, generation {}",
        link.hook,
        link.counters.packets,
        link.counters.bytes,
        link.counters.passed,
        reg.generation()
    );
    Ok(())
}
