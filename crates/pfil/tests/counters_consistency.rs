//! Counter snapshots read while traffic runs keep the invariants of
//! `Counters` (review L4): `packets == passed + dropped + consumed` and
//! `shown <= packets`, never half a batch's flush.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};

#[test]
fn a_sum_read_under_traffic_is_never_half_a_flush() {
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    // Drops odd first bytes, consumes none: every batch moves `packets`,
    // `passed` and `dropped` together.
    reg.add_hook(
        "half:x",
        PacketKind::Ethernet,
        Dirs::IN,
        |p: &mut Packet<'_>, _: &Ctx<'_>| {
            if p.frame()[0] % 2 == 1 {
                Verdict::Dropped
            } else {
                Verdict::Pass
            }
        },
    )
    .unwrap();
    reg.link("h", Dir::In, "half:x", Placement::Prepend)
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (stop, head, mut w) = (stop.clone(), head.clone(), reg.worker().unwrap());
        std::thread::spawn(move || {
            let mut bufs: Vec<[u8; 60]> = (0..32u8).map(|i| [i; 60]).collect();
            let mut batches = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
                head.run(Dir::In, &mut w, &mut pkts);
                batches += 1;
            }
            batches
        })
    };
    // Bounded: this many reads or this long, whichever first.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut reads = 0u64;
    let mut torn = Vec::new();
    while reads < 2_000_000 && Instant::now() < deadline {
        let c = reg.chain("h", Dir::In).unwrap()[0].counters;
        reads += 1;
        if c.packets != c.passed + c.dropped + c.consumed || c.shown > c.packets {
            torn.push(c);
            if torn.len() > 5 {
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let batches = worker.join().unwrap();
    assert!(batches > 0);
    assert!(
        torn.is_empty(),
        "{} of {reads} reads saw half a flush, e.g. {:?}",
        torn.len(),
        torn[0]
    );
    let c = reg.chain("h", Dir::In).unwrap()[0].counters;
    assert_eq!(c.packets, batches * 32);
    assert_eq!((c.passed, c.dropped), (batches * 16, batches * 16));
}
