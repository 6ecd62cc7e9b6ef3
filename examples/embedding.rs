//! The README's embedding example, kept compiling: `cargo test` builds
//! every example. Run it with
//! `cargo run -p pfil-examples --example embedding`.

use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
fn main() -> Result<(), pfil::Error> {
    let reg = Registry::new();
    let head = reg.register_head("veth0", PacketKind::Ethernet, Dirs::BOTH)?;
    reg.add_hook(
        "runt:drop",
        PacketKind::Ethernet,
        Dirs::IN,
        |p: &mut Packet<'_>, _: &Ctx<'_>| {
            if p.len() < 60 {
                Verdict::Dropped
            } else {
                Verdict::Pass
            }
        },
    )?;
    reg.link("veth0", Dir::In, "runt:drop", Placement::Prepend)?;

    // On each datapath thread: one worker, then per batch of received frames:
    let mut worker = reg.worker()?;
    let mut frames = vec![vec![0u8; 64]; 32]; // a driver's RX batch
    let mut batch: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    if head.is_hooked(Dir::In) {
        // one relaxed load; skip when unhooked
        head.run_in(&mut worker, &mut batch); // one epoch pin for the batch
    }
    for p in &batch {
        match p.verdict() {
            Verdict::Pass => { /* forward */ }
            Verdict::Dropped => { /* recycle the frame */ }
            // The hook owns the frame now: keep it (by p.cookie()) until the
            // hook gives it back; pfil-port's loops do this with its Outbox.
            Verdict::Consumed => { /* hold */ }
        }
    }
    let t = reg.unlink("veth0", Dir::In, "runt:drop")?; // traffic keeps flowing
    t.wait(); // grace period over: no reader can still run the hook

    // On the control thread, now and then (pfild: every second): drop what
    // removed filters left once no reader can see them. Datapath threads
    // never free a filter; writers and tickets do this too.
    reg.reclaim();

    Ok(())
}
