//! Unit tests of every registry operation and every error: placement,
//! generations, transactions and counters here; fault containment and
//! batch hooks in `faults`; packet kinds, workers and the datapath's
//! edges in `datapath`.

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

/// A batched hook that drops every odd packet of a batch.
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

/// A reader mid-batch on another thread: it holds a snapshot (an epoch
/// pin) from `start` until `release`, so nothing retired meanwhile can pass
/// its grace period. (On the test's own thread, waits would refuse to
/// wait at all.)
struct PinnedReader {
    release: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl PinnedReader {
    /// Once it returns, the reader is pinned.
    fn start(reg: &Registry) -> PinnedReader {
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let reg = reg.clone();
        let thread = std::thread::spawn(move || {
            let snap = reg.snapshot();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(snap);
        });
        pinned_rx.recv().unwrap();
        PinnedReader { release, thread }
    }

    /// Unpin it and wait for its thread.
    fn release(self) {
        self.release.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

/// Register hook `can:ary` (Ethernet, `dirs`) with a [`Canary`]; the count
/// of its drops.
fn add_canary(reg: &Registry, dirs: Dirs) -> Arc<AtomicUsize> {
    let dropped = Arc::new(AtomicUsize::new(0));
    reg.add_hook(
        "can:ary",
        PacketKind::Ethernet,
        dirs,
        Canary(dropped.clone()),
    )
    .unwrap();
    dropped
}

#[test]
fn remove_hook_unlinks_everywhere_and_drops_after_grace() {
    let (reg, _) = setup();
    let dropped = add_canary(&reg, Dirs::BOTH);
    reg.link("h0", Dir::In, "can:ary", Placement::Prepend)
        .unwrap();
    reg.link("h0", Dir::Out, "can:ary", Placement::Prepend)
        .unwrap();
    // A snapshot pinned by another thread (a reader mid-batch) keeps the
    // hook alive past its removal. (On this thread, wait_timeout would
    // refuse to wait at all.)
    let reader = PinnedReader::start(&reg);
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
    reader.release();
    assert!(t.wait_timeout(Duration::from_secs(10)));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(reg.hooks().iter().all(|h| h.name != "can:ary"));
}

/// Records the thread its `Drop` ran on.
struct DropWitness(Arc<std::sync::Mutex<Option<std::thread::ThreadId>>>);
impl Filter for DropWitness {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
}
impl Drop for DropWitness {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(std::thread::current().id());
    }
}

#[test]
fn a_removed_filter_is_dropped_by_the_control_plane_never_by_a_worker() {
    let (reg, head) = setup();
    let dropped_on = Arc::new(std::sync::Mutex::new(None));
    reg.add_hook(
        "big:acl",
        PacketKind::Ethernet,
        Dirs::IN,
        DropWitness(dropped_on.clone()),
    )
    .unwrap();
    reg.link("h0", Dir::In, "big:acl", Placement::Prepend)
        .unwrap();
    let t = reg.remove_hook("big:acl").unwrap();
    // A worker runs many batches after the removal: its pins advance the
    // epoch and collect the retired generation (crossbeam collects every
    // 128 pins). That must not drop the filter on the worker's thread.
    let worker = {
        let (reg, head) = (reg.clone(), head.clone());
        std::thread::spawn(move || {
            let mut w = reg.worker().unwrap();
            let mut f = [0u8; 60];
            for _ in 0..100_000 {
                head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f));
            }
            crossbeam_epoch::pin().flush();
        })
    };
    worker.join().unwrap();
    assert_eq!(
        *dropped_on.lock().unwrap(),
        None,
        "the filter was dropped on the worker's thread"
    );
    assert!(t.wait_timeout(Duration::from_secs(10)));
    assert_eq!(
        *dropped_on.lock().unwrap(),
        Some(std::thread::current().id()),
        "the ticket's thread drops it"
    );
}

/// A filter whose `Drop` removes another hook and waits for that.
struct RemovesOnDrop {
    reg: Registry,
    hook: &'static str,
    waited: Arc<std::sync::Mutex<Option<bool>>>,
}
impl Filter for RemovesOnDrop {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
}
impl Drop for RemovesOnDrop {
    fn drop(&mut self) {
        let done = self
            .reg
            .remove_hook(self.hook)
            .is_ok_and(|t| t.wait_timeout(Duration::from_secs(5)));
        *self.waited.lock().unwrap() = Some(done);
    }
}

/// A drop that waits for a retirement whose generation is buried beneath
/// its own: the drain must leave that one where the wait can find it.
#[test]
fn a_filter_dropped_by_a_drain_can_wait_for_a_generation_buried_under_it() {
    let (reg, _) = setup();
    let waited = Arc::new(std::sync::Mutex::new(None));
    // A reader pinned all along: every generation below waits for it.
    let reader = PinnedReader::start(&reg);
    reg.add_hook("b:1x", PacketKind::Ethernet, Dirs::IN, pass)
        .unwrap();
    reg.link("h0", Dir::In, "b:1x", Placement::Prepend).unwrap();
    // The generation that still links b:1x is retired first...
    drop(reg.unlink("h0", Dir::In, "b:1x").unwrap());
    let f = RemovesOnDrop {
        reg: reg.clone(),
        hook: "b:1x",
        waited: waited.clone(),
    };
    reg.add_hook("a:1x", PacketKind::Ethernet, Dirs::IN, f)
        .unwrap();
    reg.link("h0", Dir::In, "a:1x", Placement::Prepend).unwrap();
    // ...and the one that links a:1x after it, so it is buried on top.
    let t = reg.remove_hook("a:1x").unwrap();
    reader.release();
    assert!(t.wait_timeout(Duration::from_secs(20)));
    assert_eq!(
        *waited.lock().unwrap(),
        Some(true),
        "the drop's own wait found the generation that held b:1x"
    );
}

/// A ticket that timed out under a reader leaves its filter to the
/// housekeeping: `reclaim` drops it once the reader is gone, with no write
/// and no question to the ticket.
#[test]
fn reclaim_drops_what_a_timed_out_ticket_left() {
    let (reg, _) = setup();
    let dropped = add_canary(&reg, Dirs::IN);
    reg.link("h0", Dir::In, "can:ary", Placement::Prepend)
        .unwrap();
    let reader = PinnedReader::start(&reg);
    let t = reg.remove_hook("can:ary").unwrap();
    assert!(!t.wait_timeout(Duration::from_millis(20)));
    reader.release();
    // Inside a snapshot it does nothing: a reader never frees.
    {
        let _snap = reg.snapshot();
        reg.reclaim();
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
    }
    for _ in 0..100 {
        reg.reclaim();
        if dropped.load(Ordering::SeqCst) == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(t.is_complete());
}

#[test]
fn the_next_writer_drops_what_the_epoch_buried() {
    let (reg, _) = setup();
    let dropped = add_canary(&reg, Dirs::IN);
    // The ticket is dropped unasked: the writers after it drop the filter.
    drop(reg.remove_hook("can:ary").unwrap());
    for i in 0..1000 {
        if dropped.load(Ordering::SeqCst) == 1 {
            break;
        }
        let name = format!("n:{i}");
        reg.add_hook(&name, PacketKind::Ethernet, Dirs::IN, pass)
            .unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
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

mod datapath;
mod faults;
mod trace;
