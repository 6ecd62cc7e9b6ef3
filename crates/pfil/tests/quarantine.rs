//! Quarantine (review H3): a fail-closed link whose hook panicked stays in
//! place, dropping, through unrelated writes until it is removed on purpose;
//! a fail-open one is reaped by any writer and reported by it.

use std::time::Duration;

use pfil::{
    Ctx, Dir, Dirs, Error, FailMode, Head, LinkOptions, Packet, PacketKind, Placement, Registry,
    Verdict, Worker, MAX_KEPT_REAPED,
};

const LONG: Duration = Duration::from_secs(30);

fn pass(_: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    Verdict::Pass
}

/// Panics on frames starting with 9, passes the others.
fn bad(p: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    if p.frame()[0] == 9 {
        panic!("a bug");
    }
    Verdict::Pass
}

fn opts(fail: FailMode) -> LinkOptions {
    LinkOptions {
        placement: Placement::Prepend,
        fail,
    }
}

fn run(head: &Head, w: &mut Worker, first: u8) -> Verdict {
    let mut f = [first; 64];
    head.run_one(Dir::In, w, &mut Packet::new(&mut f))
}

/// Head `h` with `bad:x` linked with `fail` and faulted once, hook `a:1`.
fn faulted(fail: FailMode) -> (Registry, Head, Worker) {
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    reg.add_hook("bad:x", PacketKind::Ethernet, Dirs::BOTH, bad)
        .unwrap();
    reg.add_hook("a:1", PacketKind::Ethernet, Dirs::BOTH, pass)
        .unwrap();
    reg.link("h", Dir::In, "bad:x", opts(fail)).unwrap();
    let mut w = reg.worker().unwrap();
    assert_eq!(run(&head, &mut w, 1), Verdict::Pass);
    let faulting = run(&head, &mut w, 9);
    assert_eq!(faulting, fail.verdict());
    assert!(reg.chain("h", Dir::In).unwrap()[0].quarantined);
    (reg, head, w)
}

fn names(reg: &Registry) -> Vec<String> {
    reg.chain_names("h", Dir::In).unwrap()
}

#[test]
fn a_fail_closed_link_survives_unrelated_writes_and_keeps_dropping() {
    let (reg, head, mut w) = faulted(FailMode::Closed);
    // Every kind of unrelated write: none opens the chain.
    reg.register_head("other", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    reg.add_hook("b:1", PacketKind::Ethernet, Dirs::BOTH, pass)
        .unwrap();
    let c = reg.link("h", Dir::Out, "a:1", Placement::Prepend).unwrap();
    assert!(c.reaped.is_empty(), "a fail-closed link is not reaped");
    let c = reg.replace_filter("b:1", pass).unwrap();
    assert!(c.reaped.is_empty());
    let c = reg
        .transaction()
        .link("h", Dir::In, "a:1", Placement::Append)
        .unlink("h", Dir::Out, "a:1")
        .commit()
        .unwrap();
    assert!(c.reaped.is_empty());
    {
        let scoped = reg.link_scoped("other", Dir::In, "b:1", Placement::Prepend);
        drop(scoped);
    }
    reg.remove_hook("b:1").unwrap().wait();
    reg.unregister_head("other").unwrap().wait();
    assert!(reg.take_reaped().is_empty());
    assert_eq!(names(&reg), ["bad:x", "a:1"]);
    let l = &reg.chain("h", Dir::In).unwrap()[0];
    assert!(l.quarantined);
    assert_eq!(l.fail, FailMode::Closed);
    // Still dropping, without calling the hook (a frame of 9 would panic).
    assert_eq!(run(&head, &mut w, 1), Verdict::Dropped);
    assert_eq!(run(&head, &mut w, 9), Verdict::Dropped);
    // An explicit reap of another link, or of a link not quarantined,
    // changes nothing.
    let g = reg.generation();
    assert_eq!(
        reg.reap_link("h", Dir::In, "a:1").unwrap().map(|_| ()),
        None
    );
    assert!(matches!(
        reg.reap_link("h", Dir::Out, "bad:x"),
        Err(Error::NotLinked { .. })
    ));
    assert!(matches!(
        reg.reap_link("nope", Dir::In, "bad:x"),
        Err(Error::NoSuchHead(_))
    ));
    assert!(matches!(
        reg.reap_link("h", Dir::In, "nope:x"),
        Err(Error::NoSuchHook(_))
    ));
    assert_eq!(reg.generation(), g);
    // The operator removes it: reported once, with its final counters.
    let r = reg.reap_link("h", Dir::In, "bad:x").unwrap().unwrap();
    assert_eq!(
        (r.head.as_str(), r.dir, r.hook.as_str(), r.fail),
        ("h", Dir::In, "bad:x", FailMode::Closed)
    );
    assert_eq!(r.generation, reg.generation());
    assert!(r.retirement.wait_timeout(LONG));
    let c = r.retirement.counters();
    assert_eq!(
        (c.packets, c.passed, c.dropped, c.faults),
        (4, 1, 3, 1),
        "1 passed, the fault dropped, 2 dropped by the quarantine"
    );
    assert_eq!(names(&reg), ["a:1"]);
    assert_eq!(run(&head, &mut w, 1), Verdict::Pass);
    assert!(reg.reap_quarantine().is_empty(), "handed out once");
}

#[test]
fn reap_quarantine_removes_fail_closed_links_too() {
    let (reg, head, mut w) = faulted(FailMode::Closed);
    reg.add_hook("c:1", PacketKind::Ethernet, Dirs::BOTH, pass)
        .unwrap();
    assert_eq!(names(&reg), ["bad:x"]);
    let reaped = reg.reap_quarantine();
    assert_eq!(reaped.len(), 1);
    assert_eq!(reaped[0].fail, FailMode::Closed);
    assert!(reaped[0].retirement.wait_timeout(LONG));
    assert_eq!(reaped[0].retirement.counters().faults, 1);
    assert!(names(&reg).is_empty());
    assert_eq!(run(&head, &mut w, 9), Verdict::Pass, "nothing linked");
    assert!(reg.reap_quarantine().is_empty());
}

#[test]
fn an_explicit_unlink_removes_a_fail_closed_link_and_it_is_not_reaped_again() {
    let (reg, head, mut w) = faulted(FailMode::Closed);
    let c = reg.unlink("h", Dir::In, "bad:x").unwrap();
    assert!(c.wait_timeout(LONG));
    assert_eq!(c.links()[0].counters.faults, 1);
    assert!(
        c.reaped.is_empty(),
        "unlinked on purpose: retired, not reaped"
    );
    assert_eq!(run(&head, &mut w, 1), Verdict::Pass);
    // Linked again: a new link, not quarantined, which no writer touches.
    reg.link("h", Dir::In, "bad:x", opts(FailMode::Closed))
        .unwrap();
    reg.register_head("other", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    assert!(reg.reap_quarantine().is_empty());
    assert_eq!(names(&reg), ["bad:x"]);
    assert_eq!(run(&head, &mut w, 1), Verdict::Pass);
}

#[test]
fn replacing_the_filter_of_a_quarantined_fail_closed_hook_gives_its_link_a_fresh_start() {
    let (reg, head, mut w) = faulted(FailMode::Closed);
    let c = reg.replace_filter("bad:x", pass).unwrap();
    assert!(c.reaped.is_empty());
    let l = &reg.chain("h", Dir::In).unwrap()[0];
    assert!(!l.quarantined);
    assert_eq!((l.fail, l.counters.faults), (FailMode::Closed, 1));
    assert_eq!(run(&head, &mut w, 9), Verdict::Pass, "the new filter runs");
    assert!(reg.reap_quarantine().is_empty());
}

#[test]
fn a_fail_open_link_is_reaped_by_any_write_and_reported_by_it() {
    let (reg, head, mut w) = faulted(FailMode::Open);
    assert_eq!(run(&head, &mut w, 9), Verdict::Pass, "skipped");
    let c = reg.link("h", Dir::Out, "a:1", Placement::Prepend).unwrap();
    assert!(names(&reg).is_empty());
    assert_eq!(c.reaped.len(), 1);
    let r = &c.reaped[0];
    assert_eq!(
        (r.head.as_str(), r.dir, r.hook.as_str(), r.fail),
        ("h", Dir::In, "bad:x", FailMode::Open)
    );
    assert_eq!(r.generation, c.generation);
    assert!(r.retirement.wait_timeout(LONG));
    let k = r.retirement.counters();
    assert_eq!((k.packets, k.passed, k.faults), (2, 2, 1));
    // Handed out once: in the commit, not again.
    assert!(reg.take_reaped().is_empty());
    assert!(reg.reap_quarantine().is_empty());
}

#[test]
fn what_a_write_without_a_commit_reaps_is_kept_for_take_reaped() {
    let (reg, _head, _w) = faulted(FailMode::Open);
    reg.add_hook("c:1", PacketKind::Ethernet, Dirs::BOTH, pass)
        .unwrap();
    assert!(names(&reg).is_empty());
    let kept = reg.take_reaped();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].hook, "bad:x");
    assert!(reg.take_reaped().is_empty());
}

#[test]
fn reaped_links_nobody_asks_for_are_bounded() {
    let reg = Registry::with_max_workers(1);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    reg.add_hook("bad:x", PacketKind::Ethernet, Dirs::IN, bad)
        .unwrap();
    let mut w = reg.worker().unwrap();
    for n in 0..MAX_KEPT_REAPED + 10 {
        reg.link_scoped("h", Dir::In, "bad:x", Placement::Prepend)
            .unwrap()
            .persist();
        assert_eq!(run(&head, &mut w, 9), Verdict::Pass);
        // A write with no commit to report in: kept.
        reg.register_head(&format!("h{n}"), PacketKind::Ethernet, Dirs::IN)
            .unwrap();
    }
    assert_eq!(reg.take_reaped().len(), MAX_KEPT_REAPED);
}
