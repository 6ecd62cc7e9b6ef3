//! Unit tests of every registry operation and every error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::*;

fn pass(_: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    Verdict::Pass
}

fn drop_all(_: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    Verdict::Dropped
}

/// A registry with head `h0` (ethernet, both) and hooks `a:1`, `b:1`, `c:1`.
fn setup() -> (Registry, Head) {
    let reg = Registry::with_max_workers(4);
    let head = reg
        .register_head("h0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    for n in ["a:1", "b:1", "c:1"] {
        reg.add_hook(n, PacketKind::Ethernet, Dirs::BOTH, pass)
            .unwrap();
    }
    (reg, head)
}

fn names(reg: &Registry, dir: Dir) -> Vec<String> {
    reg.chain_names("h0", dir).unwrap()
}

/// A hook that records the order in which hooks saw a packet.
fn tracer(log: &Arc<parking_lot::Mutex<Vec<&'static str>>>, name: &'static str) -> impl Filter {
    let log = log.clone();
    move |_: &mut Packet<'_>, _: &Ctx<'_>| {
        log.lock().push(name);
        Verdict::Pass
    }
}

#[test]
fn prepend_is_closest_to_the_wire() {
    let (reg, _) = setup();
    for n in ["a:1", "b:1", "c:1"] {
        reg.link("h0", Dir::In, n, Placement::Prepend).unwrap();
        reg.link("h0", Dir::Out, n, Placement::Prepend).unwrap();
    }
    assert_eq!(names(&reg, Dir::In), ["c:1", "b:1", "a:1"]);
    assert_eq!(names(&reg, Dir::Out), ["a:1", "b:1", "c:1"]);
}

#[test]
fn append_is_farthest_from_the_wire() {
    let (reg, _) = setup();
    for n in ["a:1", "b:1", "c:1"] {
        reg.link("h0", Dir::In, n, Placement::Append).unwrap();
        reg.link("h0", Dir::Out, n, Placement::Append).unwrap();
    }
    assert_eq!(names(&reg, Dir::In), ["a:1", "b:1", "c:1"]);
    assert_eq!(names(&reg, Dir::Out), ["c:1", "b:1", "a:1"]);
}

#[test]
fn before_and_after_a_named_hook() {
    let (reg, _) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Append).unwrap();
    reg.link("h0", Dir::In, "c:1", Placement::After("a:1".into()))
        .unwrap();
    reg.link("h0", Dir::In, "b:1", Placement::Before("c:1".into()))
        .unwrap();
    assert_eq!(names(&reg, Dir::In), ["a:1", "b:1", "c:1"]);
}

#[test]
fn placement_relative_to_an_unlinked_hook_is_not_linked() {
    let (reg, _) = setup();
    let e = reg
        .link("h0", Dir::In, "a:1", Placement::After("b:1".into()))
        .unwrap_err();
    assert!(
        matches!(&e, Error::NotLinked { hook, .. } if hook == "b:1"),
        "{e}"
    );
    assert!(names(&reg, Dir::In).is_empty());
}

#[test]
fn unlink_keeps_the_order_of_the_rest() {
    let (reg, _) = setup();
    for n in ["a:1", "b:1", "c:1"] {
        reg.link("h0", Dir::In, n, Placement::Append).unwrap();
    }
    let t = reg.unlink("h0", Dir::In, "b:1").unwrap();
    assert!(t.wait_timeout(Duration::from_secs(10)));
    assert_eq!(names(&reg, Dir::In), ["a:1", "c:1"]);
}

#[test]
fn chain_runs_in_walk_order_and_stops_at_a_drop() {
    let reg = Registry::new();
    let head = reg
        .register_head("h0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
    reg.add_hook("t:1", PacketKind::Ethernet, Dirs::IN, tracer(&log, "t1"))
        .unwrap();
    reg.add_hook("t:2", PacketKind::Ethernet, Dirs::IN, tracer(&log, "t2"))
        .unwrap();
    reg.add_hook("x:drop", PacketKind::Ethernet, Dirs::IN, drop_all)
        .unwrap();
    reg.add_hook("t:3", PacketKind::Ethernet, Dirs::IN, tracer(&log, "t3"))
        .unwrap();
    for n in ["t:1", "t:2", "x:drop", "t:3"] {
        reg.link("h0", Dir::In, n, Placement::Append).unwrap();
    }
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 60];
    let mut p = Packet::new(&mut f);
    assert_eq!(head.run_one(Dir::In, &mut w, &mut p), Verdict::Dropped);
    assert_eq!(*log.lock(), ["t1", "t2"]);
    let chain = reg.chain("h0", Dir::In).unwrap();
    assert_eq!(chain[2].counters.dropped, 1);
    assert_eq!(
        chain[3].counters.packets, 0,
        "t:3 must not see a dropped packet"
    );
}

#[test]
fn is_hooked_follows_links() {
    let (reg, head) = setup();
    assert!(!head.is_hooked(Dir::In) && !head.is_hooked(Dir::Out));
    reg.link("h0", Dir::Out, "a:1", Placement::Prepend).unwrap();
    assert!(!head.is_hooked(Dir::In) && head.is_hooked(Dir::Out));
    let _ = reg.unlink("h0", Dir::Out, "a:1").unwrap();
    assert!(!head.is_hooked(Dir::Out));
}

#[test]
fn every_change_is_a_new_generation() {
    let (reg, _) = setup();
    let g = reg.generation();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    assert_eq!(reg.generation(), g + 1);
    assert_eq!(reg.snapshot().generation(), g + 1);
    let _ = reg
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .unwrap_err();
    assert_eq!(
        reg.generation(),
        g + 1,
        "a failed operation publishes nothing"
    );
}

#[test]
fn errors_name_what_was_wrong() {
    let (reg, _) = setup();
    reg.register_head("ip4", PacketKind::Ipv4, Dirs::IN)
        .unwrap();
    reg.add_hook("in:only", PacketKind::Ethernet, Dirs::IN, pass)
        .unwrap();
    let cases: Vec<(Result<crate::Commit, Error>, &str)> = vec![
        (
            reg.link("nope", Dir::In, "a:1", Placement::Prepend),
            "no such head `nope`",
        ),
        (
            reg.link("h0", Dir::In, "nope:x", Placement::Prepend),
            "no such hook `nope:x`",
        ),
        (
            reg.link("ip4", Dir::In, "a:1", Placement::Prepend),
            "kind mismatch",
        ),
        (
            reg.link("ip4", Dir::Out, "a:1", Placement::Prepend),
            "kind mismatch",
        ),
        (
            reg.link("h0", Dir::Out, "in:only", Placement::Prepend),
            "does not declare direction out",
        ),
    ];
    for (r, want) in cases {
        let e = r.unwrap_err();
        assert!(
            e.to_string().contains(want),
            "`{e}` should contain `{want}`"
        );
    }
    reg.add_hook("v4:x", PacketKind::Ipv4, Dirs::BOTH, pass)
        .unwrap();
    let e = reg
        .link("ip4", Dir::Out, "v4:x", Placement::Prepend)
        .unwrap_err();
    assert!(matches!(e, Error::DirUnsupportedByHead { .. }), "{e}");
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    let e = reg
        .link("h0", Dir::In, "a:1", Placement::Append)
        .unwrap_err();
    assert!(matches!(e, Error::AlreadyLinked { .. }), "{e}");
    let e = reg.unlink("h0", Dir::Out, "a:1").unwrap_err();
    assert!(matches!(e, Error::NotLinked { .. }), "{e}");
    let e = reg.unlink("zz", Dir::Out, "a:1").unwrap_err();
    assert_eq!(e, Error::NoSuchHead("zz".into()));
    assert_eq!(
        reg.register_head("h0", PacketKind::Ethernet, Dirs::IN)
            .unwrap_err(),
        Error::DuplicateHead("h0".into())
    );
    assert_eq!(
        reg.add_hook("a:1", PacketKind::Ethernet, Dirs::IN, pass)
            .unwrap_err(),
        Error::DuplicateHook("a:1".into())
    );
    assert!(matches!(
        reg.register_head("", PacketKind::Ethernet, Dirs::IN),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        reg.add_hook("a b", PacketKind::Ethernet, Dirs::IN, pass),
        Err(Error::InvalidName { .. })
    ));
    assert_eq!(
        reg.remove_hook("zz:z").unwrap_err(),
        Error::NoSuchHook("zz:z".into())
    );
    assert_eq!(
        reg.unregister_head("zz").unwrap_err(),
        Error::NoSuchHead("zz".into())
    );
    assert_eq!(reg.head("zz").unwrap_err(), Error::NoSuchHead("zz".into()));
}

#[test]
fn transaction_is_all_or_nothing() {
    let (reg, _) = setup();
    let g = reg.generation();
    let e = reg
        .transaction()
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .link("h0", Dir::In, "b:1", Placement::Prepend)
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .commit()
        .unwrap_err();
    match e {
        Error::Transaction { index, source } => {
            assert_eq!(index, 2);
            assert!(matches!(*source, Error::AlreadyLinked { .. }));
        }
        other => panic!("unexpected {other}"),
    }
    assert!(names(&reg, Dir::In).is_empty());
    assert_eq!(reg.generation(), g);
    let c = reg
        .transaction()
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .link("h0", Dir::Out, "b:1", Placement::Prepend)
        .unlink("h0", Dir::In, "a:1")
        .link("h0", Dir::In, "c:1", Placement::Prepend)
        .commit()
        .unwrap();
    assert_eq!(c.generation, g + 1);
    assert_eq!(names(&reg, Dir::In), ["c:1"]);
    assert_eq!(names(&reg, Dir::Out), ["b:1"]);
}

#[test]
fn expected_generation_detects_concurrent_change() {
    let (reg, _) = setup();
    let g = reg.generation();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    let e = reg
        .transaction()
        .expect_generation(g)
        .link("h0", Dir::In, "b:1", Placement::Prepend)
        .commit()
        .unwrap_err();
    assert_eq!(
        e,
        Error::GenerationConflict {
            expected: g,
            current: g + 1
        }
    );
    assert_eq!(names(&reg, Dir::In), ["a:1"]);
    reg.transaction()
        .expect_generation(g + 1)
        .link("h0", Dir::In, "b:1", Placement::Prepend)
        .commit()
        .unwrap();
}

#[test]
fn dry_run_validates_without_publishing() {
    let (reg, _) = setup();
    let g = reg.generation();
    let c = reg
        .transaction()
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .dry_run()
        .commit()
        .unwrap();
    assert_eq!(c.generation, g);
    assert!(c.retirement.is_complete());
    assert!(names(&reg, Dir::In).is_empty());
    let e = reg
        .transaction()
        .unlink("h0", Dir::In, "a:1")
        .dry_run()
        .commit()
        .unwrap_err();
    assert!(matches!(e, Error::NotLinked { .. }));
}

struct Canary(Arc<AtomicUsize>);
impl Filter for Canary {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
}
impl Drop for Canary {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn remove_hook_unlinks_everywhere_and_drops_after_grace() {
    let (reg, _) = setup();
    let dropped = Arc::new(AtomicUsize::new(0));
    reg.add_hook(
        "can:ary",
        PacketKind::Ethernet,
        Dirs::BOTH,
        Canary(dropped.clone()),
    )
    .unwrap();
    reg.link("h0", Dir::In, "can:ary", Placement::Prepend)
        .unwrap();
    reg.link("h0", Dir::Out, "can:ary", Placement::Prepend)
        .unwrap();
    // A snapshot pinned by another thread (a reader mid-batch) keeps the
    // hook alive past its removal. (On this thread, wait_timeout would
    // refuse to wait at all.)
    let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let r2 = reg.clone();
    let reader = std::thread::spawn(move || {
        let snap = r2.snapshot();
        pinned_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        drop(snap);
    });
    pinned_rx.recv().unwrap();
    let t = reg.remove_hook("can:ary").unwrap();
    assert!(names(&reg, Dir::In).is_empty() && names(&reg, Dir::Out).is_empty());
    assert!(!crossbeam_epoch::is_pinned());
    assert!(
        !t.wait_timeout(Duration::from_millis(50)),
        "the grace period passed under a pinned reader"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        0,
        "dropped while a reader could see it"
    );
    release_tx.send(()).unwrap();
    reader.join().unwrap();
    assert!(t.wait_timeout(Duration::from_secs(10)));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(reg.hooks().iter().all(|h| h.name != "can:ary"));
}

#[test]
fn unregister_head_takes_its_links_and_old_handles_run_empty() {
    let (reg, head) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    let t = reg.unregister_head("h0").unwrap();
    assert!(t.wait_timeout(Duration::from_secs(10)));
    assert!(!head.is_hooked(Dir::In));
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 10];
    assert_eq!(
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
        Verdict::Pass
    );
    assert_eq!(
        reg.hooks().iter().find(|h| h.name == "a:1").unwrap().links,
        0
    );
    // The name is free again, and the new head starts empty.
    let h2 = reg
        .register_head("h0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    assert!(!h2.is_hooked(Dir::In));
}

#[test]
fn link_handle_unlinks_on_drop_unless_persisted() {
    let (reg, _) = setup();
    {
        let _h = reg
            .link_scoped("h0", Dir::In, "a:1", Placement::Prepend)
            .unwrap();
        assert_eq!(names(&reg, Dir::In), ["a:1"]);
    }
    assert!(names(&reg, Dir::In).is_empty());
    reg.link_scoped("h0", Dir::In, "b:1", Placement::Prepend)
        .unwrap()
        .persist();
    assert_eq!(names(&reg, Dir::In), ["b:1"]);
    let h = reg
        .link_scoped("h0", Dir::In, "c:1", Placement::Prepend)
        .unwrap();
    h.unlink().unwrap().wait();
    assert_eq!(names(&reg, Dir::In), ["b:1"]);
}

#[test]
fn counters_per_link_sum_over_workers() {
    let (reg, head) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    let mut w1 = reg.worker().unwrap();
    let mut w2 = reg.worker().unwrap();
    assert_ne!(w1.index(), w2.index());
    let mut bufs = vec![vec![0u8; 100]; 3];
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    head.run(Dir::In, &mut w1, &mut pkts);
    for p in &mut pkts {
        p.reset();
    }
    head.run(Dir::In, &mut w2, &mut pkts[..2]);
    let c = reg.chain("h0", Dir::In).unwrap()[0].counters;
    assert_eq!(
        c,
        Counters {
            packets: 5,
            shown: 5,
            bytes: 500,
            passed: 5,
            ..Counters::default()
        }
    );
}

#[test]
fn worker_slots_are_limited_and_recycled() {
    let reg = Registry::with_max_workers(2);
    let a = reg.worker().unwrap();
    let _b = reg.worker().unwrap();
    assert_eq!(reg.worker().unwrap_err(), Error::NoWorkerSlot(2));
    let ia = a.index();
    drop(a);
    assert_eq!(reg.worker().unwrap().index(), ia);
}

#[test]
fn a_panicking_hook_is_quarantined_and_the_run_goes_on() {
    let (reg, head) = setup();
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    reg.add_hook(
        "bad:hook",
        PacketKind::Ethernet,
        Dirs::IN,
        move |p: &mut Packet<'_>, _: &Ctx<'_>| {
            s2.fetch_add(1, Ordering::SeqCst);
            if p.frame()[0] == 0xee {
                panic!("boom");
            }
            Verdict::Pass
        },
    )
    .unwrap();
    reg.link(
        "h0",
        Dir::In,
        "bad:hook",
        LinkOptions {
            placement: Placement::Prepend,
            fail: FailMode::Open,
        },
    )
    .unwrap();
    reg.link("h0", Dir::In, "a:1", Placement::Append).unwrap();
    let mut w = reg.worker().unwrap();
    let mut bufs = [[1u8; 64], [0xee; 64], [2; 64], [3; 64]];
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    head.run(Dir::In, &mut w, &mut pkts);
    let v: Vec<Verdict> = pkts.iter().map(|p| p.verdict()).collect();
    assert_eq!(
        v,
        [Verdict::Pass, Verdict::Pass, Verdict::Pass, Verdict::Pass]
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "quarantined at once: packets 3 and 4 skip it"
    );
    let chain = reg.chain("h0", Dir::In).unwrap();
    assert!(chain[0].quarantined);
    assert_eq!(
        (chain[0].counters.faults, chain[0].counters.dropped),
        (1, 0)
    );
    assert_eq!(
        (chain[0].counters.packets, chain[0].counters.passed),
        (2, 2),
        "packet 1 was passed, packet 2 faulted (fail-open: passed)"
    );
    assert_eq!(chain[1].counters.packets, 4, "the next hook still runs");
    // The next writer call unlinks it through the normal path.
    assert_eq!(reg.reap_quarantine().len(), 1);
    assert_eq!(names(&reg, Dir::In), ["a:1"]);
}

#[test]
fn fail_open_passes_the_faulting_packet() {
    let (reg, head) = setup();
    reg.add_hook(
        "bad:open",
        PacketKind::Ethernet,
        Dirs::IN,
        |_: &mut Packet<'_>, _: &Ctx<'_>| -> Verdict { panic!("always") },
    )
    .unwrap();
    reg.link("h0", Dir::In, "bad:open", Placement::Prepend)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 64];
    assert_eq!(
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
        Verdict::Pass
    );
    // Any writer operation reaps the quarantine first.
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    assert_eq!(names(&reg, Dir::In), ["a:1"]);
}

struct OddDropper;
impl Filter for OddDropper {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        unreachable!("batched hooks get filter_batch")
    }
    fn filter_batch(&self, pkts: &mut [Packet<'_>], _: &Ctx<'_>) {
        for (i, p) in pkts.iter_mut().enumerate() {
            if p.verdict().is_pass() && i % 2 == 1 {
                p.set_verdict(Verdict::Dropped);
            }
        }
    }
    fn batched(&self) -> bool {
        true
    }
}

#[test]
fn batch_hooks_are_counted_by_verdict_change() {
    let (reg, head) = setup();
    reg.add_hook("odd:drop", PacketKind::Ethernet, Dirs::IN, OddDropper)
        .unwrap();
    reg.add_hook(
        "first:consume",
        PacketKind::Ethernet,
        Dirs::IN,
        |p: &mut Packet<'_>, _: &Ctx<'_>| {
            if p.frame()[0] == 0 {
                Verdict::Consumed
            } else {
                Verdict::Pass
            }
        },
    )
    .unwrap();
    reg.link("h0", Dir::In, "first:consume", Placement::Append)
        .unwrap();
    reg.link("h0", Dir::In, "odd:drop", Placement::Append)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut bufs = [[0u8; 10], [1; 10], [2; 10], [3; 10]];
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    head.run(Dir::In, &mut w, &mut pkts);
    let v: Vec<Verdict> = pkts.iter().map(|p| p.verdict()).collect();
    assert_eq!(
        v,
        [
            Verdict::Consumed,
            Verdict::Dropped,
            Verdict::Pass,
            Verdict::Dropped
        ]
    );
    let c = reg.chain("h0", Dir::In).unwrap()[1].counters;
    assert_eq!((c.packets, c.passed, c.dropped, c.consumed), (3, 1, 2, 0));
}

#[test]
fn snapshot_sees_one_generation_for_several_heads() {
    let (reg, a) = setup();
    let b = reg
        .register_head("h1", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    reg.add_hook("d:x", PacketKind::Ethernet, Dirs::BOTH, drop_all)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let snap = reg.snapshot();
    reg.transaction()
        .link("h0", Dir::In, "d:x", Placement::Prepend)
        .link("h1", Dir::Out, "d:x", Placement::Prepend)
        .commit()
        .unwrap();
    let mut f = [0u8; 8];
    let mut p = [Packet::new(&mut f)];
    snap.run(&a, Dir::In, &mut w, &mut p);
    snap.run(&b, Dir::Out, &mut w, &mut p);
    assert_eq!(
        p[0].verdict(),
        Verdict::Pass,
        "the old generation had no links"
    );
    drop(snap);
    let snap = reg.snapshot();
    snap.run(&a, Dir::In, &mut w, &mut p);
    assert_eq!(p[0].verdict(), Verdict::Dropped);
}

#[test]
fn listings_show_heads_hooks_and_links() {
    let (reg, _) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    reg.link("h0", Dir::Out, "a:1", Placement::Prepend).unwrap();
    let heads = reg.heads();
    assert_eq!(heads.len(), 1);
    assert_eq!(heads[0].name, "h0");
    assert_eq!(heads[0].chains[0][0].hook, "a:1");
    let hooks = reg.hooks();
    assert_eq!(
        hooks
            .iter()
            .map(|h| (h.name.as_str(), h.links))
            .collect::<Vec<_>>(),
        [("a:1", 2), ("b:1", 0), ("c:1", 0)]
    );
}

#[cfg(feature = "witness")]
#[test]
fn witness_reports_writer_calls_from_hooks() {
    let (reg, head) = setup();
    let r2 = reg.clone();
    let got = Arc::new(parking_lot::Mutex::new(None));
    let g2 = got.clone();
    reg.add_hook(
        "rogue:writer",
        PacketKind::Ethernet,
        Dirs::IN,
        move |_: &mut Packet<'_>, _: &Ctx<'_>| {
            *g2.lock() = Some(
                r2.link("h0", Dir::In, "b:1", Placement::Prepend)
                    .map(|c| c.generation),
            );
            Verdict::Pass
        },
    )
    .unwrap();
    reg.link("h0", Dir::In, "rogue:writer", Placement::Prepend)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 8];
    let before = witness::thread_violations();
    head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f));
    assert_eq!(*got.lock(), Some(Err(Error::WriterInHook)));
    assert!(witness::thread_violations() > before);
}

#[test]
fn a_batch_hook_cannot_change_a_final_verdict() {
    struct Resurrect;
    impl Filter for Resurrect {
        fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
            Verdict::Pass
        }
        fn filter_batch(&self, pkts: &mut [Packet<'_>], _: &Ctx<'_>) {
            for p in pkts {
                p.set_verdict(Verdict::Pass);
            }
        }
        fn batched(&self) -> bool {
            true
        }
    }
    let (reg, head) = setup();
    reg.add_hook("d:x", PacketKind::Ethernet, Dirs::IN, drop_all)
        .unwrap();
    reg.add_hook("re:surrect", PacketKind::Ethernet, Dirs::IN, Resurrect)
        .unwrap();
    reg.link("h0", Dir::In, "d:x", Placement::Append).unwrap();
    reg.link("h0", Dir::In, "re:surrect", Placement::Append)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 8];
    let before = witness::thread_violations();
    assert_eq!(
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
        Verdict::Dropped
    );
    assert!(witness::thread_violations() > before);
}

#[test]
fn packet_is_small() {
    // Drivers build one per frame per batch: keep it a few words.
    let size = std::mem::size_of::<Packet<'_>>();
    assert!(size <= 48, "Packet grew to {size} bytes");
}

#[test]
fn batch_hook_overwriting_a_consumed_frame_is_repaired_and_counted_exactly() {
    struct DropAll;
    impl Filter for DropAll {
        fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
            Verdict::Dropped
        }
        fn filter_batch(&self, pkts: &mut [Packet<'_>], _: &Ctx<'_>) {
            for p in pkts {
                p.set_verdict(Verdict::Dropped); // ignores the contract
            }
        }
        fn batched(&self) -> bool {
            true
        }
    }
    let (reg, head) = setup();
    reg.add_hook(
        "take:first",
        PacketKind::Ethernet,
        Dirs::IN,
        |p: &mut Packet<'_>, _: &Ctx<'_>| {
            if p.frame()[0] == 0 {
                Verdict::Consumed
            } else {
                Verdict::Pass
            }
        },
    )
    .unwrap();
    reg.add_hook("naive:batch", PacketKind::Ethernet, Dirs::IN, DropAll)
        .unwrap();
    reg.link("h0", Dir::In, "take:first", Placement::Append)
        .unwrap();
    reg.link("h0", Dir::In, "naive:batch", Placement::Append)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut bufs = [[0u8; 10], [1; 10]];
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    let before = witness::thread_violations();
    head.run(Dir::In, &mut w, &mut pkts);
    assert_eq!(
        pkts[0].verdict(),
        Verdict::Consumed,
        "the consumed frame stays the first hook's"
    );
    assert_eq!(pkts[1].verdict(), Verdict::Dropped);
    assert!(witness::thread_violations() > before);
    let c = reg.chain("h0", Dir::In).unwrap()[1].counters;
    assert_eq!((c.packets, c.passed, c.dropped, c.consumed), (1, 0, 1, 0));
}

#[test]
fn big_batches_reach_batch_hooks_in_chunks() {
    let (reg, head) = setup();
    reg.add_hook("odd:drop", PacketKind::Ethernet, Dirs::IN, OddDropper)
        .unwrap();
    reg.link("h0", Dir::In, "odd:drop", Placement::Append)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut bufs = vec![[0u8; 4]; 600];
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    head.run(Dir::In, &mut w, &mut pkts);
    let dropped = pkts
        .iter()
        .filter(|p| p.verdict() == Verdict::Dropped)
        .count();
    assert_eq!(dropped, 300);
    let c = reg.chain("h0", Dir::In).unwrap()[0].counters;
    assert_eq!((c.packets, c.dropped, c.passed), (600, 300, 300));
}

/// Unlinks another hook from its `Drop`: must not deadlock the writer.
struct UnlinkOnDrop(Registry);
impl Filter for UnlinkOnDrop {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
}
impl Drop for UnlinkOnDrop {
    fn drop(&mut self) {
        let _ = self.0.unlink("h0", Dir::In, "a:1");
    }
}

#[test]
fn a_filter_may_use_the_registry_in_its_drop() {
    let (reg, _) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    reg.add_hook(
        "drop:unlinks",
        PacketKind::Ethernet,
        Dirs::IN,
        UnlinkOnDrop(reg.clone()),
    )
    .unwrap();
    let t = reg.remove_hook("drop:unlinks").unwrap();
    assert!(t.wait_timeout(Duration::from_secs(10)));
    assert!(
        names(&reg, Dir::In).is_empty(),
        "the Drop ran and unlinked a:1"
    );
}

#[test]
fn a_failed_operation_after_a_fault_changes_nothing() {
    let (reg, head) = setup();
    reg.add_hook(
        "bad:x",
        PacketKind::Ethernet,
        Dirs::IN,
        |_: &mut Packet<'_>, _: &Ctx<'_>| -> Verdict { panic!("boom") },
    )
    .unwrap();
    reg.link("h0", Dir::In, "bad:x", Placement::Prepend)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 8];
    head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f));
    let g = reg.generation();
    // Fails: nothing published, not even the reaping of the quarantine.
    assert!(reg
        .register_head("h0", PacketKind::Ethernet, Dirs::IN)
        .is_err());
    assert!(reg
        .transaction()
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .dry_run()
        .commit()
        .is_ok());
    assert_eq!(reg.generation(), g);
    assert_eq!(names(&reg, Dir::In), ["bad:x"]);
    // The next successful change carries the reap with it.
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    assert_eq!(reg.generation(), g + 1);
    assert_eq!(names(&reg, Dir::In), ["a:1"]);
    assert_eq!(
        reg.hooks()
            .iter()
            .find(|h| h.name == "bad:x")
            .unwrap()
            .faults,
        1
    );
}

#[test]
fn fail_closed_link_drops_everything_until_unlinked() {
    let (reg, head) = setup();
    reg.add_hook(
        "acl:broken",
        PacketKind::Ethernet,
        Dirs::IN,
        |p: &mut Packet<'_>, _: &Ctx<'_>| {
            if p.frame()[0] == 9 {
                panic!("bad rule");
            }
            Verdict::Pass
        },
    )
    .unwrap();
    reg.link(
        "h0",
        Dir::In,
        "acl:broken",
        LinkOptions {
            placement: Placement::Prepend,
            fail: FailMode::Closed,
        },
    )
    .unwrap();
    let mut w = reg.worker().unwrap();
    let mut bufs = [[1u8; 8], [9; 8], [1; 8], [1; 8]];
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    head.run(Dir::In, &mut w, &mut pkts);
    let v: Vec<Verdict> = pkts.iter().map(|p| p.verdict()).collect();
    assert_eq!(
        v,
        [
            Verdict::Pass,
            Verdict::Dropped,
            Verdict::Dropped,
            Verdict::Dropped
        ]
    );
    let mut f = [1u8; 8];
    assert_eq!(
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
        Verdict::Dropped
    );
    let c = reg.chain("h0", Dir::In).unwrap()[0].counters;
    assert_eq!((c.packets, c.passed, c.dropped, c.faults), (5, 1, 4, 1));
    assert_eq!(
        c.shown, 2,
        "the hook saw packets 1 and 2; the quarantined link dropped 3 more"
    );
    assert_eq!(reg.reap_quarantine().len(), 1);
    assert_eq!(
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
        Verdict::Pass
    );
}

#[test]
fn link_handle_leaves_someone_elses_relink_alone() {
    let (reg, _) = setup();
    let h = reg
        .link_scoped("h0", Dir::In, "a:1", Placement::Prepend)
        .unwrap();
    reg.unlink("h0", Dir::In, "a:1").unwrap().wait();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    drop(h);
    assert_eq!(names(&reg, Dir::In), ["a:1"]);
}

#[test]
fn waiting_while_pinned_does_not_hang() {
    let (reg, _) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    let snap = reg.snapshot();
    let t = reg.unlink("h0", Dir::In, "a:1").unwrap();
    let started = std::time::Instant::now();
    assert!(!t.wait_timeout(Duration::from_secs(5)));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once, not after the timeout"
    );
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.wait()));
    assert!(waited.is_err(), "wait() under a pin must refuse, not hang");
    drop(snap);
    assert!(t.wait_timeout(Duration::from_secs(10)));
}

#[test]
fn packets_of_another_kind_than_the_head_are_refused_not_re_kinded() {
    let reg = Registry::new();
    let head = reg
        .register_head("ip4", PacketKind::Ipv4, Dirs::IN)
        .unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    reg.add_hook(
        "udp:53",
        PacketKind::Ipv4,
        Dirs::IN,
        move |p: &mut Packet<'_>, _: &Ctx<'_>| {
            s2.fetch_add(1, Ordering::SeqCst);
            match p.headers().and_then(|h| h.transport) {
                Some(t) if t.dst_port == 53 => Verdict::Dropped,
                _ => Verdict::Pass,
            }
        },
    )
    .unwrap();
    reg.link("ip4", Dir::In, "udp:53", Placement::Prepend)
        .unwrap();
    let b = etherparse::PacketBuilder::ipv4([198, 18, 0, 1], [198, 18, 0, 2], 9).udp(1, 80);
    let mut v = Vec::new();
    b.write(&mut v, b"q").unwrap();
    let mut w = reg.worker().unwrap();
    // Built with the head's kind: the hook parses it and passes it.
    assert_eq!(
        head.run_one(
            Dir::In,
            &mut w,
            &mut Packet::with_kind(&mut v, PacketKind::Ipv4)
        ),
        Verdict::Pass
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    // Built as Ethernet by mistake: refused, dropped, counted; the hook
    // never sees it.
    assert_eq!(
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut v)),
        Verdict::Dropped
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(
        reg.refused(),
        Refused {
            kind_batches: 1,
            kind_packets: 1,
            ..Refused::default()
        }
    );
    assert_eq!(reg.chain("ip4", Dir::In).unwrap()[0].counters.packets, 1);
}

#[test]
fn an_ethernet_frame_on_an_ip_head_is_not_a_silent_pass() {
    // A blocklist hook passes what does not parse; the frame would parse as
    // a malformed IPv4 packet had the runner re-kinded it.
    let reg = Registry::new();
    let head = reg
        .register_head("ip4", PacketKind::Ipv4, Dirs::IN)
        .unwrap();
    reg.add_hook(
        "block:udp",
        PacketKind::Ipv4,
        Dirs::IN,
        |p: &mut Packet<'_>, _: &Ctx<'_>| match p.headers().and_then(|h| h.transport) {
            Some(_) => Verdict::Dropped,
            None => Verdict::Pass,
        },
    )
    .unwrap();
    reg.link("ip4", Dir::In, "block:udp", Placement::Prepend)
        .unwrap();
    let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 9)
        .udp(1, 53);
    let mut eth = Vec::new();
    b.write(&mut eth, b"q").unwrap();
    let mut ip = eth[14..].to_vec();
    let mut other = vec![0u8; 20];
    let mut w = reg.worker().unwrap();
    let mut batch = [
        Packet::with_kind(&mut ip, PacketKind::Ipv4),
        Packet::new(&mut eth),
        Packet::with_kind(&mut other, PacketKind::Ipv4),
    ];
    head.run_in(&mut w, &mut batch);
    let v: Vec<Verdict> = batch.iter().map(|p| p.verdict()).collect();
    assert_eq!(v, [Verdict::Dropped, Verdict::Dropped, Verdict::Pass]);
    assert_eq!(
        (reg.refused().kind_batches, reg.refused().kind_packets),
        (1, 1)
    );
    let c = reg.chain("ip4", Dir::In).unwrap()[0].counters;
    assert_eq!((c.packets, c.dropped), (2, 1), "the hook saw the other two");
}

#[test]
fn a_worker_of_another_registry_is_refused_without_a_panic() {
    let (reg, head) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    let other = Registry::new();
    let mut w = other.worker().unwrap();
    let mut bufs = [[0u8; 8]; 3];
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    pkts[2].set_verdict(Verdict::Consumed);
    head.run(Dir::In, &mut w, &mut pkts);
    let v: Vec<Verdict> = pkts.iter().map(|p| p.verdict()).collect();
    assert_eq!(
        v,
        [Verdict::Dropped, Verdict::Dropped, Verdict::Consumed],
        "refused: dropped, final verdicts kept"
    );
    assert_eq!(reg.chain("h0", Dir::In).unwrap()[0].counters.packets, 0);
    let want = Refused {
        foreign_batches: 1,
        foreign_packets: 2,
        ..Refused::default()
    };
    assert_eq!(other.refused(), want, "counted where the worker belongs");
    assert_eq!(reg.refused(), Refused::default());
}

#[test]
fn a_snapshot_refuses_a_head_of_another_registry() {
    let (reg, _) = setup();
    let (other, other_head) = setup();
    other
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 8];
    let mut p = [Packet::new(&mut f)];
    let snap = reg.snapshot();
    snap.run(&other_head, Dir::In, &mut w, &mut p);
    assert_eq!(p[0].verdict(), Verdict::Dropped);
    assert_eq!(reg.refused().foreign_batches, 1);
    assert_eq!(other.chain("h0", Dir::In).unwrap()[0].counters.packets, 0);
    // The worker's own registry runs normally afterwards.
    let mut g = [0u8; 8];
    let mut q = [Packet::new(&mut g)];
    drop(snap);
    let mut ow = other.worker().unwrap();
    other_head.run(Dir::In, &mut ow, &mut q);
    assert_eq!(q[0].verdict(), Verdict::Pass);
}

/// A panic payload whose own `Drop` panics.
struct Bomb;
impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload's drop panics too");
    }
}

#[test]
fn a_panic_payload_that_panics_on_drop_stays_in_the_hook() {
    struct BatchBomb;
    impl Filter for BatchBomb {
        fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
            std::panic::panic_any(Bomb)
        }
        fn filter_batch(&self, _: &mut [Packet<'_>], _: &Ctx<'_>) {
            std::panic::panic_any(Bomb)
        }
        fn batched(&self) -> bool {
            true
        }
    }
    let (reg, head) = setup();
    reg.add_hook(
        "bomb:each",
        PacketKind::Ethernet,
        Dirs::IN,
        |_: &mut Packet<'_>, _: &Ctx<'_>| -> Verdict { std::panic::panic_any(Bomb) },
    )
    .unwrap();
    reg.add_hook("bomb:batch", PacketKind::Ethernet, Dirs::IN, BatchBomb)
        .unwrap();
    reg.link("h0", Dir::In, "bomb:each", Placement::Append)
        .unwrap();
    reg.link("h0", Dir::In, "bomb:batch", Placement::Append)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 8];
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f))
    }));
    assert_eq!(ran.ok(), Some(Verdict::Pass), "fail-open, both quarantined");
    assert!(reg
        .chain("h0", Dir::In)
        .unwrap()
        .iter()
        .all(|l| l.quarantined));
}

/// Drops frames starting with 0, panics on frames starting with 9, as a
/// per-packet hook or as a batch hook (which stops at the panic too).
struct DropThenPanic {
    batched: bool,
}
impl Filter for DropThenPanic {
    fn filter(&self, p: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        match p.frame()[0] {
            0 => Verdict::Dropped,
            9 => panic!("boom"),
            _ => Verdict::Pass,
        }
    }
    fn batched(&self) -> bool {
        self.batched
    }
}

#[test]
fn fault_batches_count_exactly_for_per_packet_and_batch_hooks() {
    for (batched, fail) in [
        (false, FailMode::Open),
        (true, FailMode::Open),
        (false, FailMode::Closed),
        (true, FailMode::Closed),
    ] {
        let (reg, head) = setup();
        reg.add_hook(
            "x:y",
            PacketKind::Ethernet,
            Dirs::IN,
            DropThenPanic { batched },
        )
        .unwrap();
        reg.add_hook("first:consume", PacketKind::Ethernet, Dirs::IN, {
            |p: &mut Packet<'_>, _: &Ctx<'_>| {
                if p.frame()[0] == 5 {
                    Verdict::Consumed
                } else {
                    Verdict::Pass
                }
            }
        })
        .unwrap();
        reg.link("h0", Dir::In, "first:consume", Placement::Append)
            .unwrap();
        let opts = LinkOptions {
            placement: Placement::Append,
            fail,
        };
        reg.link("h0", Dir::In, "x:y", opts).unwrap();
        let mut w = reg.worker().unwrap();
        // consumed before the hook, dropped by it, passed, panics on, after.
        let mut bufs = [[5u8; 8], [0; 8], [1; 8], [9; 8], [1; 8]];
        let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
        head.run(Dir::In, &mut w, &mut pkts);
        let c = reg.chain("h0", Dir::In).unwrap()[1].counters;
        let what = format!("batched {batched}, {fail}: {c:?}");
        assert_eq!(c.faults, 1, "{what}");
        assert_eq!(c.packets, c.passed + c.dropped + c.consumed, "{what}");
        assert_eq!((c.consumed, c.bytes), (0, 8 * c.packets), "{what}");
        let want = match (batched, fail) {
            // Shown: 0 (dropped), 1, 9 (fails open); the last packet skips
            // the quarantined link.
            (false, FailMode::Open) => (3, 3, 2, 1),
            // Shown: all four, in one call; its drop stands, the rest pass.
            (true, FailMode::Open) => (4, 4, 3, 1),
            // 9 fails closed; the last packet is dropped by the quarantine,
            // unseen.
            (false, FailMode::Closed) => (4, 3, 1, 3),
            // Which packet the batch hook died on is unknown: all it was
            // shown and did not decide are dropped.
            (true, FailMode::Closed) => (4, 4, 0, 4),
        };
        assert_eq!((c.packets, c.shown, c.passed, c.dropped), want, "{what}");
    }
}

#[test]
fn reap_quarantine_hands_out_each_reaped_link_once_with_its_final_counters() {
    let (reg, head) = setup();
    for n in ["bad:a", "bad:b"] {
        reg.add_hook(
            n,
            PacketKind::Ethernet,
            Dirs::IN,
            |p: &mut Packet<'_>, _: &Ctx<'_>| -> Verdict {
                if p.frame()[0] == 9 {
                    panic!("boom")
                }
                Verdict::Pass
            },
        )
        .unwrap();
    }
    let mut w = reg.worker().unwrap();
    let run = |w: &mut Worker, first: u8| {
        let mut bufs = [[first; 8], [9; 8]];
        let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
        head.run(Dir::In, w, &mut pkts);
    };
    reg.link("h0", Dir::In, "bad:a", Placement::Prepend)
        .unwrap();
    run(&mut w, 1);
    // An implicit reap by another writer call...
    reg.register_head("h9", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    assert!(names(&reg, Dir::In).is_empty());
    // ...is handed out by the next reap_quarantine, with its final counts.
    let reaped = reg.reap_quarantine();
    assert_eq!(reaped.len(), 1, "bad:a, reaped implicitly");
    let a = &reaped[0];
    assert_eq!(
        (a.head.as_str(), a.dir, a.hook.as_str()),
        ("h0", Dir::In, "bad:a")
    );
    assert_eq!(a.fail, FailMode::Open);
    assert!(a.retirement.wait_timeout(Duration::from_secs(10)));
    let c = a.retirement.counters();
    assert_eq!((c.packets, c.passed, c.faults), (2, 2, 1));
    assert!(reg.reap_quarantine().is_empty(), "handed out once");
    // A second fault: exactly one more, not two.
    reg.link("h0", Dir::In, "bad:b", Placement::Prepend)
        .unwrap();
    run(&mut w, 1);
    let reaped = reg.reap_quarantine();
    assert_eq!(
        reaped.iter().map(|r| r.hook.as_str()).collect::<Vec<_>>(),
        ["bad:b"]
    );
    assert!(reg.reap_quarantine().is_empty());
}

#[test]
fn unlink_keeps_the_filter_only_remove_hook_drops_it() {
    let (reg, head) = setup();
    let dropped = Arc::new(AtomicUsize::new(0));
    reg.add_hook(
        "can:ary",
        PacketKind::Ethernet,
        Dirs::IN,
        Canary(dropped.clone()),
    )
    .unwrap();
    reg.link("h0", Dir::In, "can:ary", Placement::Prepend)
        .unwrap();
    let t = reg.unlink("h0", Dir::In, "can:ary").unwrap();
    assert!(t.wait_timeout(Duration::from_secs(10)));
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        0,
        "an unlinked hook stays registered, filter and all"
    );
    // It can be linked again as it was.
    reg.link("h0", Dir::In, "can:ary", Placement::Prepend)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 8];
    head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f));
    assert_eq!(reg.chain("h0", Dir::In).unwrap()[0].counters.packets, 1);
    let t = reg.remove_hook("can:ary").unwrap();
    assert!(t.wait_timeout(Duration::from_secs(10)));
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "removed: dropped");
}

#[test]
fn a_remove_hook_ticket_completes_when_the_registry_lets_go_of_a_shared_filter() {
    let (reg, head) = setup();
    let runs = Arc::new(AtomicUsize::new(0));
    let r2 = runs.clone();
    let filter: Arc<dyn Filter> = Arc::new(move |_: &mut Packet<'_>, _: &Ctx<'_>| {
        r2.fetch_add(1, Ordering::SeqCst);
        Verdict::Pass
    });
    reg.add_hook_shared("sh:ared", PacketKind::Ethernet, Dirs::IN, filter.clone())
        .unwrap();
    reg.link("h0", Dir::In, "sh:ared", Placement::Prepend)
        .unwrap();
    let mut w = reg.worker().unwrap();
    let mut f = [0u8; 8];
    head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f));
    assert!(Arc::strong_count(&filter) > 1);
    let t = reg.remove_hook("sh:ared").unwrap();
    assert!(t.wait_timeout(Duration::from_secs(10)));
    // The registry's reference is gone; the caller's keeps the object alive.
    assert_eq!(Arc::strong_count(&filter), 1);
    assert_eq!(t.counters().packets, 1);
    head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "no reader runs it any more");
}

#[test]
fn zero_max_workers_means_one() {
    let reg = Registry::with_max_workers(0);
    assert_eq!(reg.max_workers(), 1);
    let w = reg.worker().unwrap();
    assert_eq!(w.index(), 0);
    assert_eq!(reg.worker().unwrap_err(), Error::NoWorkerSlot(1));
}

#[test]
fn more_than_64_workers_each_count_in_their_own_slot() {
    // A NIC with more than 64 queues: one worker per queue.
    const N: usize = 130;
    let reg = Registry::with_max_workers(N);
    let head = reg
        .register_head("h0", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    let top = Arc::new(AtomicUsize::new(0));
    let t2 = top.clone();
    reg.add_hook(
        "w:max",
        PacketKind::Ethernet,
        Dirs::IN,
        move |_: &mut Packet<'_>, ctx: &Ctx<'_>| {
            t2.fetch_max(ctx.worker, Ordering::SeqCst);
            Verdict::Dropped
        },
    )
    .unwrap();
    reg.link("h0", Dir::In, "w:max", Placement::Prepend)
        .unwrap();
    let mut workers: Vec<Worker> = (0..N).map(|_| reg.worker().unwrap()).collect();
    assert_eq!(reg.worker().unwrap_err(), Error::NoWorkerSlot(N));
    let mut seen: Vec<usize> = workers.iter().map(|w| w.index()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..N).collect::<Vec<_>>());
    for (i, w) in workers.iter_mut().enumerate() {
        let mut bufs = vec![[0u8; 10]; i % 3 + 1];
        let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
        head.run(Dir::In, w, &mut pkts);
        assert!(pkts.iter().all(|p| p.verdict() == Verdict::Dropped));
    }
    let want: u64 = (0..N).map(|i| (i % 3 + 1) as u64).sum();
    let c = reg.chain("h0", Dir::In).unwrap()[0].counters;
    assert_eq!((c.packets, c.dropped, c.bytes), (want, want, 10 * want));
    assert_eq!(top.load(Ordering::SeqCst), N - 1);
    assert_eq!(reg.refused(), Refused::default());
}

#[test]
fn packets_of_another_kind_are_refused_whatever_the_first_link_is() {
    // The first link refuses them: in its per-packet loop, or by a scan on
    // its cold paths (batch hook, quarantined link, a fault mid-batch).
    // The second link counts what reached it.
    type AddFirst = Box<dyn Fn(&Registry)>;
    let cases: [(&str, AddFirst); 3] = [
        (
            "batch hook",
            Box::new(|reg: &Registry| {
                reg.add_hook("first:x", PacketKind::Ipv4, Dirs::IN, OddDropper)
                    .unwrap()
            }),
        ),
        (
            "quarantined fail-open",
            Box::new(|reg: &Registry| {
                reg.add_hook(
                    "first:x",
                    PacketKind::Ipv4,
                    Dirs::IN,
                    |_: &mut Packet<'_>, _: &Ctx<'_>| -> Verdict { panic!("boom") },
                )
                .unwrap()
            }),
        ),
        (
            "fault mid-batch",
            Box::new(|reg: &Registry| {
                reg.add_hook(
                    "first:x",
                    PacketKind::Ipv4,
                    Dirs::IN,
                    |p: &mut Packet<'_>, _: &Ctx<'_>| {
                        if p.frame()[0] == 9 {
                            panic!("boom")
                        }
                        Verdict::Pass
                    },
                )
                .unwrap()
            }),
        ),
    ];
    for (what, add_first) in cases {
        let reg = Registry::new();
        let head = reg
            .register_head("ip4", PacketKind::Ipv4, Dirs::BOTH)
            .unwrap();
        add_first(&reg);
        reg.add_hook("second:x", PacketKind::Ipv4, Dirs::IN, pass)
            .unwrap();
        reg.link("ip4", Dir::In, "first:x", Placement::Append)
            .unwrap();
        reg.link("ip4", Dir::In, "second:x", Placement::Append)
            .unwrap();
        let mut w = reg.worker().unwrap();
        if what == "quarantined fail-open" {
            let mut f = [0u8; 4];
            head.run_one(
                Dir::In,
                &mut w,
                &mut Packet::with_kind(&mut f, PacketKind::Ipv4),
            );
            assert!(reg.chain("ip4", Dir::In).unwrap()[0].quarantined);
        }
        let before = reg.chain("ip4", Dir::In).unwrap()[1].counters.packets;
        // [ip, ip that faults, ethernet, ip]
        let mut bufs = [[1u8; 4], [9; 4], [1; 4], [1; 4]];
        let mut it = bufs.iter_mut();
        let mut pkts = [
            Packet::with_kind(it.next().unwrap(), PacketKind::Ipv4),
            Packet::with_kind(it.next().unwrap(), PacketKind::Ipv4),
            Packet::new(it.next().unwrap()),
            Packet::with_kind(it.next().unwrap(), PacketKind::Ipv4),
        ];
        head.run_in(&mut w, &mut pkts);
        assert_eq!(pkts[2].verdict(), Verdict::Dropped, "{what}");
        assert_eq!(
            (reg.refused().kind_batches, reg.refused().kind_packets),
            (1, 1),
            "{what}"
        );
        let second = reg.chain("ip4", Dir::In).unwrap()[1].counters.packets - before;
        let reached = pkts.iter().filter(|p| p.verdict().is_pass()).count() as u64;
        assert_eq!(second, reached, "{what}");
        // Nothing linked out: nothing to misparse, nothing refused.
        let mut f = [0u8; 4];
        assert_eq!(
            head.run_one(Dir::Out, &mut w, &mut Packet::new(&mut f)),
            Verdict::Pass
        );
        assert_eq!(reg.refused().kind_packets, 1, "{what}");
    }
}

#[test]
fn wait_timeout_takes_any_duration() {
    let (reg, _) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    let t = reg.unlink("h0", Dir::In, "a:1").unwrap();
    // `Instant::now() + Duration::MAX` overflows: a huge timeout is "no
    // timeout", not a panic.
    assert!(t.wait_timeout(Duration::MAX));
}
