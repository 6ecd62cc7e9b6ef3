//! A thread links and unlinks hooks while another pushes traffic; prints
//! how many packets each generation carried.
//!
//! `cargo run --release -p pfil-examples --example runtime_attach`

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use pfil::{Dir, Dirs, Packet, PacketKind, Placement, Registry};
use pfil_filters::{Count, Null};

fn main() -> Result<(), pfil::Error> {
    let reg = Registry::new();
    let head = reg.register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)?;
    let count = Count::new(reg.max_workers());
    reg.add_hook("null:pass", PacketKind::Ethernet, Dirs::IN, Null)?;
    reg.add_hook("count:all", PacketKind::Ethernet, Dirs::IN, count.clone())?;
    let stop = Arc::new(AtomicBool::new(false));

    let traffic = {
        let (reg, head, stop) = (reg.clone(), head.clone(), stop.clone());
        thread::spawn(move || -> Result<(BTreeMap<u64, u64>, u64), pfil::Error> {
            let mut worker = reg.worker()?;
            let mut frames = vec![[0u8; 64]; 64];
            let mut per_gen = BTreeMap::new();
            let mut total = 0;
            let deadline = Instant::now() + Duration::from_secs(10);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let mut batch: Vec<Packet<'_>> =
                    frames.iter_mut().map(|f| Packet::new(f)).collect();
                // One snapshot per batch: the generation this batch ran in.
                let snap = reg.snapshot();
                snap.run(&head, Dir::In, &mut worker, &mut batch);
                *per_gen.entry(snap.generation()).or_insert(0) += batch.len() as u64;
                total += batch.len() as u64;
            }
            Ok((per_gen, total))
        })
    };

    for round in 0..5 {
        thread::sleep(Duration::from_millis(40));
        reg.link("syn0", Dir::In, "null:pass", Placement::Prepend)?;
        thread::sleep(Duration::from_millis(40));
        reg.link("syn0", Dir::In, "count:all", Placement::Append)?;
        thread::sleep(Duration::from_millis(40));
        let t = reg
            .transaction()
            .unlink("syn0", Dir::In, "null:pass")
            .unlink("syn0", Dir::In, "count:all")
            .commit()?;
        t.retirement.wait();
        println!(
            "round {round}: unlinked both, grace period over at generation {}",
            t.generation
        );
    }
    stop.store(true, Ordering::Relaxed);
    let (per_gen, total) = traffic.join().expect("traffic thread panicked")?;
    println!("generation  packets");
    for (g, n) in &per_gen {
        println!("{g:>10}  {n}");
    }
    println!(
        "total {total} packets; count:all saw {} while linked",
        count.get(Dir::In).packets
    );
    Ok(())
}
