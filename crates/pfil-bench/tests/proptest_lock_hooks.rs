//! Property tests of the lock-study hooks (moved here from pfil-filters'
//! property tests with the hooks): on arbitrary input (random bytes;
//! truncated, malformed, VLAN-stacked and QinQ frames; IPv6 extension
//! headers; every EtherType), called directly with any worker index and
//! direction, and through a registry on heads of every kind: no panic, and
//! every verdict is `Pass` (the ruleset never matches until set).
//!
//! A few thousand cases by default; `PROPTEST_CASES=100000` for a long run.

#[path = "../../pfil/tests/support/frames.rs"]
mod frames;

use std::cell::RefCell;
use std::sync::Arc;

use pfil::{Ctx, Dir, Dirs, Filter, Packet, PacketKind, Placement, Registry, Verdict};
use pfil_bench::{BrLockHook, EpochHook, MutexHook, RwLockHook};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

const WORKERS: usize = 3;

fn hooks() -> Vec<(&'static str, Arc<dyn Filter>)> {
    vec![
        ("mutex", Arc::new(MutexHook::new())),
        ("rwlock", Arc::new(RwLockHook::new())),
        ("brlock", Arc::new(BrLockHook::new(WORKERS))),
        ("epoch", Arc::new(EpochHook::new())),
    ]
}

#[test]
fn every_lock_hook_called_directly_with_any_ctx() {
    let mut runner = TestRunner::new(frames::config());
    let dir = prop_oneof![Just(Dir::In), Just(Dir::Out)];
    // Any worker index, including ones beyond the hook's slots.
    let worker = prop_oneof![0..WORKERS, Just(usize::MAX), any::<usize>()];
    runner
        .run(
            &(frames::any_frame(), dir, worker),
            |((kind, frame), dir, worker)| {
                let ctx = Ctx::new("h", dir, worker);
                for (name, f) in hooks() {
                    let mut buf = frame.clone();
                    let mut p = Packet::with_kind(&mut buf, kind);
                    let v = f.filter(&mut p, &ctx);
                    prop_assert_eq!(v, Verdict::Pass, "{}", name);
                    let mut batch = [p];
                    f.filter_batch(&mut batch, &ctx);
                    prop_assert_eq!(batch[0].verdict(), v, "{} batch", name);
                }
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn every_lock_hook_through_a_registry_on_every_kind_of_head() {
    let reg = Registry::with_max_workers(WORKERS);
    let kinds = [PacketKind::Ethernet, PacketKind::Ipv4, PacketKind::Ipv6];
    let mut heads = Vec::new();
    for k in kinds {
        let head = format!("h:{k}");
        heads.push(reg.register_head(&head, k, Dirs::BOTH).unwrap());
        for (name, f) in hooks() {
            let hook = format!("{name}:{k}");
            reg.add_hook_shared(&hook, k, Dirs::BOTH, f).unwrap();
            for d in Dir::ALL {
                reg.link(&head, d, &hook, Placement::Append).unwrap();
            }
        }
    }
    let workers = RefCell::new(
        (0..WORKERS)
            .map(|_| reg.worker().unwrap())
            .collect::<Vec<_>>(),
    );
    let mut runner = TestRunner::new(frames::config());
    runner
        .run(
            &(
                prop::collection::vec(frames::any_frame(), 1..6),
                0usize..3,
                0..WORKERS,
                prop_oneof![Just(Dir::In), Just(Dir::Out)],
            ),
            |(batch, at, wi, dir)| {
                let head = &heads[at];
                let mut bufs: Vec<Vec<u8>> = batch.iter().map(|(_, f)| f.clone()).collect();
                let mut pkts: Vec<Packet<'_>> = bufs
                    .iter_mut()
                    .zip(&batch)
                    .map(|(b, (k, _))| Packet::with_kind(b, *k))
                    .collect();
                head.run(dir, &mut workers.borrow_mut()[wi], &mut pkts);
                for (p, (k, _)) in pkts.iter().zip(&batch) {
                    let want = if *k == head.kind() {
                        Verdict::Pass
                    } else {
                        Verdict::Dropped // refused: wrong kind for the head
                    };
                    prop_assert_eq!(p.verdict(), want);
                }
                Ok(())
            },
        )
        .unwrap();
    for k in kinds {
        for d in Dir::ALL {
            let chain = reg.chain(&format!("h:{k}"), d).unwrap();
            assert!(chain
                .iter()
                .all(|l| l.counters.faults == 0 && !l.quarantined));
        }
    }
}
