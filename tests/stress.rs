//! Stress: readers on every core run batches while a writer churns links,
//! unlinks, transactions and hook removals for several seconds.
//!
//! Checked exactly at the end:
//! - every packet got exactly one verdict, and the verdicts the callers saw
//!   equal the verdicts the links counted;
//! - per-link counts (live links + retired links' final counts) equal what
//!   the hooks themselves saw;
//! - no hook ran after its retirement completed (canaries).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use pfil::{Counters, Ctx, Dir, Dirs, Filter, Packet, PacketKind, Placement, Registry, Verdict};

const BATCH: usize = 32;

/// Counts what it is shown, per worker; drops frames whose first byte is
/// `drop_byte`.
struct Seen {
    drop_byte: Option<u8>,
    slots: Arc<Vec<[AtomicU64; 2]>>,
}

impl Filter for Seen {
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        let s = &self.slots[ctx.worker];
        let dropping = Some(pkt.frame()[0]) == self.drop_byte;
        s[0].store(s[0].load(Relaxed) + 1, Relaxed);
        if dropping {
            s[1].store(s[1].load(Relaxed) + 1, Relaxed);
            Verdict::Dropped
        } else {
            Verdict::Pass
        }
    }
}

fn sum(slots: &[[AtomicU64; 2]]) -> (u64, u64) {
    slots.iter().fold((0, 0), |a, s| {
        (a.0 + s[0].load(Relaxed), a.1 + s[1].load(Relaxed))
    })
}

/// Records use after its retirement completed.
struct Canary {
    retired: Arc<AtomicBool>,
    used_after_retire: Arc<AtomicU64>,
    dropped: Arc<AtomicBool>,
    runs: Arc<AtomicU64>,
}

impl Filter for Canary {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        if self.retired.load(SeqCst) || self.dropped.load(SeqCst) {
            self.used_after_retire.fetch_add(1, SeqCst);
        }
        self.runs.fetch_add(1, Relaxed);
        Verdict::Pass
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.dropped.store(true, SeqCst);
    }
}

#[test]
fn readers_and_a_churning_writer_account_exactly() {
    let secs: u64 = std::env::var("PFIL_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let readers = thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .max(2);
    let reg = Registry::with_max_workers(readers + 1);
    let head = reg
        .register_head("h0", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    let names = ["s:a", "s:b", "s:c", "s:d"];
    let seen: Vec<Arc<Vec<[AtomicU64; 2]>>> = names
        .iter()
        .map(|_| Arc::new((0..reg.max_workers()).map(|_| Default::default()).collect()))
        .collect();
    for (i, n) in names.iter().enumerate() {
        let drop_byte = (i % 2 == 1).then_some(i as u8);
        reg.add_hook(
            n,
            PacketKind::Ethernet,
            Dirs::IN,
            Seen {
                drop_byte,
                slots: seen[i].clone(),
            },
        )
        .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(secs);

    let mut handles = Vec::new();
    for r in 0..readers {
        let (reg, head, stop) = (reg.clone(), head.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            let mut w = reg.worker().unwrap();
            let mut bufs = [[0u8; 64]; BATCH];
            for (i, b) in bufs.iter_mut().enumerate() {
                b[0] = ((i + r) % 8) as u8;
            }
            let mut verdicts = [0u64; 3];
            let mut batches = 0u64;
            // Bounded in time (the writer stops us) and in count.
            while !stop.load(Relaxed) && batches < 50_000_000 {
                let mut pkts: [Packet<'_>; BATCH] = {
                    let mut it = bufs.iter_mut();
                    std::array::from_fn(|_| Packet::new(it.next().unwrap()))
                };
                head.run(Dir::In, &mut w, &mut pkts);
                for p in &pkts {
                    verdicts[p.verdict() as usize] += 1;
                }
                batches += 1;
            }
            (batches * BATCH as u64, verdicts)
        }));
    }

    // The writer.
    let mut retired = Counters::default();
    let mut canaries = Vec::new();
    let mut canary_packets = 0u64;
    let mut ops = 0u64;
    let mut rng = 0x2545F4914F6CDD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while Instant::now() < deadline {
        let k = names[(next() % 4) as usize];
        let linked = reg.chain_names("h0", Dir::In).unwrap();
        match next() % 5 {
            0 | 1 if !linked.iter().any(|n| n == k) => {
                let p = if next() % 2 == 0 {
                    Placement::Prepend
                } else {
                    Placement::Append
                };
                reg.link("h0", Dir::In, k, p).unwrap();
            }
            0..=2 if linked.iter().any(|n| n == k) => {
                let t = reg.unlink("h0", Dir::In, k).unwrap();
                assert!(
                    t.wait_timeout(Duration::from_secs(20)),
                    "grace period never ended"
                );
                retired += t.counters();
            }
            3 => {
                // A transaction that swaps the whole chain for its reverse.
                let mut tx = reg.transaction().expect_generation(reg.generation());
                for n in &linked {
                    tx = tx.unlink("h0", Dir::In, n);
                }
                for n in &linked {
                    tx = tx.link("h0", Dir::In, n, Placement::Prepend);
                }
                let c = tx.commit().unwrap();
                assert!(c.retirement.wait_timeout(Duration::from_secs(20)));
                retired += c.retirement.counters();
            }
            _ => {
                // A canary's whole life: add, link, run a while, remove.
                let name = format!("canary:{ops}");
                let c = (
                    Arc::new(AtomicBool::new(false)),
                    Arc::new(AtomicU64::new(0)),
                    Arc::new(AtomicBool::new(false)),
                    Arc::new(AtomicU64::new(0)),
                );
                reg.add_hook(
                    &name,
                    PacketKind::Ethernet,
                    Dirs::IN,
                    Canary {
                        retired: c.0.clone(),
                        used_after_retire: c.1.clone(),
                        dropped: c.2.clone(),
                        runs: c.3.clone(),
                    },
                )
                .unwrap();
                reg.link("h0", Dir::In, &name, Placement::Prepend).unwrap();
                thread::sleep(Duration::from_micros(200));
                let t = reg.remove_hook(&name).unwrap();
                assert!(t.wait_timeout(Duration::from_secs(20)));
                assert!(
                    c.2.load(SeqCst),
                    "remove_hook ticket completed before the hook was dropped"
                );
                c.0.store(true, SeqCst);
                // Retired means final: the link's counters equal the runs.
                let n = t.counters();
                assert_eq!(n.packets, c.3.load(SeqCst), "canary link count vs its runs");
                assert_eq!((n.passed, n.faults), (n.packets, 0));
                canary_packets += n.packets;
                canaries.push(c);
            }
        }
        ops += 1;
    }
    stop.store(true, Relaxed);
    let mut total = 0;
    let mut verdicts = [0u64; 3];
    for h in handles {
        let (n, v) = h.join().unwrap();
        total += n;
        for i in 0..3 {
            verdicts[i] += v[i];
        }
    }

    // Exactly one verdict per packet, and only pass/dropped exist here.
    assert_eq!(verdicts.iter().sum::<u64>(), total);
    assert_eq!(verdicts[2], 0);
    // Links' counts (live + retired) equal what the hooks saw.
    let live: Counters = reg
        .chain("h0", Dir::In)
        .unwrap()
        .iter()
        .filter(|l| !l.hook.starts_with("canary:"))
        .fold(Counters::default(), |a, l| a + l.counters);
    let counted = live + retired;
    let (hook_seen, hook_dropped) = seen.iter().fold((0, 0), |a, s| {
        let (x, y) = sum(s);
        (a.0 + x, a.1 + y)
    });
    // Canary links are counted apart (above), only `s:*` links here.
    assert_eq!(counted.packets, hook_seen, "packets per links vs hooks");
    assert_eq!(counted.dropped, hook_dropped, "dropped per links vs hooks");
    assert_eq!(counted.dropped, verdicts[1], "dropped per links vs callers");
    assert_eq!(counted.passed + counted.dropped, counted.packets);
    assert_eq!(counted.faults, 0);
    for c in &canaries {
        assert_eq!(
            c.1.load(SeqCst),
            0,
            "a canary ran after its retirement completed"
        );
    }
    eprintln!(
        "stress: {readers} readers, {total} packets, {ops} writer ops, {} canaries, {} hook calls, {} dropped",
        canaries.len(),
        counted.packets + canary_packets,
        counted.dropped
    );
    assert!(
        ops > 100,
        "the writer did too little to mean anything: {ops}"
    );
    assert!(total > 0 && canaries.len() > 5);
}
