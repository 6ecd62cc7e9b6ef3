//! Fault containment (quarantine, fail-open, fail-closed) and batch hooks.

use super::*;

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
    // Drivers build one per frame per batch: keep it one cache line
    // (aligned to 64, it can only grow by whole lines).
    let size = std::mem::size_of::<Packet<'_>>();
    assert_eq!(size, 64, "Packet grew to {size} bytes");
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
