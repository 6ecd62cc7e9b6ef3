//! What a control plane needs from the registry: hooks added, removed and
//! their filters replaced in transactions, per-link final counters on
//! retirement tickets, precise unlink errors, commit results, introspection
//! and watching the generation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use pfil::{
    Commit, Ctx, Dir, Dirs, Error, FailMode, Filter, Head, LinkOptions, Op, Packet, PacketKind,
    Placement, Registry, Verdict,
};

const LONG: Duration = Duration::from_secs(30);

fn pass(_: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    Verdict::Pass
}

/// A filter with a fixed verdict that counts its drops.
struct Canary {
    verdict: Verdict,
    dropped: Arc<AtomicUsize>,
}

impl Canary {
    fn new(verdict: Verdict) -> (Canary, Arc<AtomicUsize>) {
        let dropped = Arc::new(AtomicUsize::new(0));
        (
            Canary {
                verdict,
                dropped: dropped.clone(),
            },
            dropped,
        )
    }
}

impl Filter for Canary {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        self.verdict
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// Head `h0` (ethernet, both directions) and hooks `a:1`, `b:1`, `c:1`
/// that pass.
fn setup() -> (Registry, Head) {
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("h0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    for n in ["a:1", "b:1", "c:1"] {
        reg.add_hook(n, PacketKind::Ethernet, Dirs::BOTH, pass)
            .unwrap();
    }
    (reg, head)
}

/// Run `n` frames of `len` bytes through `head` in `dir`; their verdicts.
fn run(reg: &Registry, head: &Head, dir: Dir, n: usize, len: usize) -> Vec<Verdict> {
    let mut w = reg.worker().unwrap();
    let mut bufs = vec![vec![0u8; len]; n];
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    head.run(dir, &mut w, &mut pkts);
    pkts.iter().map(|p| p.verdict()).collect()
}

fn names(reg: &Registry, dir: Dir) -> Vec<String> {
    reg.chain_names("h0", dir).unwrap()
}

#[test]
fn replace_keeps_places_fail_modes_and_counters_in_one_generation() {
    let (reg, head) = setup();
    let (old, old_dropped) = Canary::new(Verdict::Pass);
    reg.add_hook("acl:edge", PacketKind::Ethernet, Dirs::BOTH, old)
        .unwrap();
    reg.link("h0", Dir::In, "a:1", Placement::Append).unwrap();
    reg.link(
        "h0",
        Dir::In,
        "acl:edge",
        LinkOptions {
            placement: Placement::Append,
            fail: FailMode::Closed,
        },
    )
    .unwrap();
    reg.link("h0", Dir::In, "c:1", Placement::Append).unwrap();
    reg.link("h0", Dir::Out, "acl:edge", Placement::Append)
        .unwrap();
    assert_eq!(run(&reg, &head, Dir::In, 3, 100), [Verdict::Pass; 3]);
    let before = reg.chain("h0", Dir::In).unwrap();
    let gen = reg.generation();

    let (new, new_dropped) = Canary::new(Verdict::Dropped);
    let done = reg.replace_filter("acl:edge", new).unwrap();
    assert_eq!(done.generation, gen + 1);
    assert_eq!(reg.generation(), gen + 1);
    assert!(done.links().is_empty(), "a replace unlinks nothing");
    assert!(done.wait_timeout(LONG));
    assert_eq!(old_dropped.load(Ordering::SeqCst), 1, "old filter dropped");
    assert_eq!(new_dropped.load(Ordering::SeqCst), 0);

    // Same places, fail modes and counters; the new filter runs.
    let after = reg.chain("h0", Dir::In).unwrap();
    assert_eq!(after, before);
    assert_eq!(names(&reg, Dir::In), ["a:1", "acl:edge", "c:1"]);
    assert_eq!(after[1].fail, FailMode::Closed);
    assert_eq!(reg.chain_names("h0", Dir::Out).unwrap(), ["acl:edge"]);
    assert_eq!(run(&reg, &head, Dir::In, 2, 100), [Verdict::Dropped; 2]);
    let c = reg.chain("h0", Dir::In).unwrap()[1].counters;
    assert_eq!((c.packets, c.passed, c.dropped), (5, 3, 2));
    assert_eq!(reg.hook("acl:edge").unwrap().links, 2);
}

#[test]
fn the_old_filter_is_dropped_only_after_the_grace_period() {
    let (reg, head) = setup();
    let (old, old_dropped) = Canary::new(Verdict::Pass);
    reg.add_hook("acl:edge", PacketKind::Ethernet, Dirs::IN, old)
        .unwrap();
    reg.link("h0", Dir::In, "acl:edge", Placement::Prepend)
        .unwrap();
    // A reader holds the current generation open on another thread.
    let (pinned_tx, pinned_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let r2 = reg.clone();
    let reader = thread::spawn(move || {
        let snap = r2.snapshot();
        pinned_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        drop(snap);
    });
    pinned_rx.recv().unwrap();
    let done = reg.replace_filter("acl:edge", pass).unwrap();
    assert!(!done.wait_timeout(Duration::from_millis(50)));
    assert!(!done.is_complete());
    assert_eq!(old_dropped.load(Ordering::SeqCst), 0, "a reader may run it");
    release_tx.send(()).unwrap();
    reader.join().unwrap();
    assert!(done.wait_timeout(LONG));
    assert_eq!(old_dropped.load(Ordering::SeqCst), 1);
    assert_eq!(run(&reg, &head, Dir::In, 1, 60), [Verdict::Pass]);
}

#[test]
fn a_hot_swap_is_one_generation() {
    let (reg, head) = setup();
    let (old, old_dropped) = Canary::new(Verdict::Pass);
    reg.add_hook("acl:edge", PacketKind::Ethernet, Dirs::IN, old)
        .unwrap();
    reg.link("h0", Dir::In, "acl:edge", Placement::Prepend)
        .unwrap();
    reg.link("h0", Dir::In, "a:1", Placement::Append).unwrap();
    let gen = reg.generation();
    let done = reg
        .transaction()
        .expect_generation(gen)
        .replace_filter("acl:edge", |_: &mut Packet<'_>, _: &Ctx<'_>| {
            Verdict::Dropped
        })
        .add_hook("acl:core", PacketKind::Ethernet, Dirs::IN, pass)
        .link(
            "h0",
            Dir::In,
            "acl:core",
            Placement::After("acl:edge".into()),
        )
        .unlink("h0", Dir::In, "a:1")
        .remove_hook("b:1")
        .commit()
        .unwrap();
    assert_eq!(done.generation, gen + 1);
    assert_eq!(reg.generation(), gen + 1);
    assert_eq!(names(&reg, Dir::In), ["acl:edge", "acl:core"]);
    assert!(reg.hook("b:1").is_err());
    let gone = done.links();
    assert_eq!(gone.len(), 1);
    assert_eq!(
        (gone[0].head.as_str(), gone[0].hook.as_str()),
        ("h0", "a:1")
    );
    assert!(done.wait_timeout(LONG));
    assert_eq!(old_dropped.load(Ordering::SeqCst), 1);
    assert_eq!(run(&reg, &head, Dir::In, 1, 60), [Verdict::Dropped]);
}

#[test]
fn a_failed_transaction_changes_nothing() {
    let (reg, head) = setup();
    let (old, old_dropped) = Canary::new(Verdict::Pass);
    reg.add_hook("acl:edge", PacketKind::Ethernet, Dirs::IN, old)
        .unwrap();
    reg.link("h0", Dir::In, "acl:edge", Placement::Prepend)
        .unwrap();
    let gen = reg.generation();
    let before = reg.heads();
    let hooks = reg.hooks();

    // A replace of a missing hook, then a valid link.
    let e = reg
        .transaction()
        .replace_filter("nope:x", pass)
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .commit()
        .unwrap_err();
    assert_eq!(
        e,
        Error::Transaction {
            index: 0,
            source: Box::new(Error::NoSuchHook("nope:x".into()))
        }
    );
    assert!(e.to_string().contains("no such hook `nope:x`"), "{e}");

    // A valid replace, add, remove and link, then a failing operation.
    let (new, new_dropped) = Canary::new(Verdict::Dropped);
    let e = reg
        .transaction()
        .replace_filter("acl:edge", new)
        .add_hook("new:hook", PacketKind::Ethernet, Dirs::IN, pass)
        .remove_hook("c:1")
        .link("h0", Dir::In, "a:1", Placement::Prepend)
        .unlink("h0", Dir::In, "b:1")
        .commit()
        .unwrap_err();
    assert!(
        matches!(&e, Error::Transaction { index: 4, source } if matches!(**source, Error::NotLinked { .. })),
        "{e}"
    );

    assert_eq!(reg.generation(), gen, "nothing published");
    assert_eq!(reg.heads(), before);
    assert_eq!(reg.hooks(), hooks);
    assert_eq!(
        run(&reg, &head, Dir::In, 1, 60),
        [Verdict::Pass],
        "old filter runs"
    );
    assert_eq!(old_dropped.load(Ordering::SeqCst), 0);
    assert_eq!(
        new_dropped.load(Ordering::SeqCst),
        1,
        "the unused filter went with the transaction"
    );
    assert_eq!(
        reg.wait_generation(gen, Duration::from_millis(1)),
        None,
        "no watcher woken"
    );
}

#[test]
fn a_dry_run_of_hook_operations_changes_nothing() {
    let (reg, _) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    let gen = reg.generation();
    let (f, dropped) = Canary::new(Verdict::Pass);
    let c = reg
        .transaction()
        .replace_filter("a:1", f)
        .add_hook("x:1", PacketKind::Ethernet, Dirs::IN, pass)
        .remove_hook("b:1")
        .dry_run()
        .commit()
        .unwrap();
    assert_eq!(c.generation, gen);
    assert!(c.is_complete());
    assert!(c.links().is_empty());
    assert_eq!(reg.generation(), gen);
    assert!(reg.hook("x:1").is_err());
    assert!(reg.hook("b:1").is_ok());
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "never installed");
}

#[test]
fn transactions_add_and_remove_hooks() {
    let (reg, head) = setup();
    let (f, dropped) = Canary::new(Verdict::Dropped);
    let gen = reg.generation();
    let c = reg
        .transaction()
        .add_hook("drop:all", PacketKind::Ethernet, Dirs::BOTH, f)
        .link("h0", Dir::In, "drop:all", Placement::Prepend)
        .link("h0", Dir::Out, "drop:all", Placement::Prepend)
        .commit()
        .unwrap();
    assert_eq!(c.generation, gen + 1);
    let info = reg.hook("drop:all").unwrap();
    assert_eq!(
        (info.kind, info.dirs, info.links),
        (PacketKind::Ethernet, Dirs::BOTH, 2)
    );
    assert_eq!(run(&reg, &head, Dir::In, 2, 60), [Verdict::Dropped; 2]);

    let shared: Arc<dyn Filter> = Arc::new(pass);
    let c = reg
        .transaction()
        .remove_hook("drop:all")
        .op(Op::AddHook {
            name: "drop:all".into(),
            kind: PacketKind::Ethernet,
            dirs: Dirs::IN,
            filter: shared,
        })
        .commit()
        .unwrap();
    assert_eq!(c.generation, gen + 2);
    assert_eq!(
        reg.hook("drop:all").unwrap().links,
        0,
        "a new hook, unlinked"
    );
    let mut gone = c.links();
    gone.sort_by_key(|l| l.dir);
    assert_eq!(gone.len(), 2);
    assert_eq!((gone[0].dir, gone[1].dir), (Dir::In, Dir::Out));
    assert!(c.wait_timeout(LONG));
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "removed filter dropped");
    assert_eq!((gone[0].counters.packets, gone[1].counters.packets), (2, 0));

    // Errors name what was wrong.
    let e = reg
        .transaction()
        .op(Op::RemoveHook {
            name: "nope:x".into(),
        })
        .commit()
        .unwrap_err();
    assert_eq!(e, Error::NoSuchHook("nope:x".into()));
    let e = reg
        .transaction()
        .add_hook("a:1", PacketKind::Ethernet, Dirs::IN, pass)
        .commit()
        .unwrap_err();
    assert_eq!(e, Error::DuplicateHook("a:1".into()));
    let e = reg
        .transaction()
        .add_hook("bad name", PacketKind::Ethernet, Dirs::IN, pass)
        .commit()
        .unwrap_err();
    assert!(e.to_string().contains("`bad name`"), "{e}");
    let e = reg.replace_filter("nope:x", pass).unwrap_err();
    assert_eq!(e, Error::NoSuchHook("nope:x".into()));
}

#[test]
fn a_link_handle_survives_a_replace_and_tells_what_it_links() {
    let (reg, _) = setup();
    let h = reg
        .link_scoped("h0", Dir::Out, "b:1", Placement::Prepend)
        .unwrap();
    assert_eq!((h.head(), h.dir(), h.hook()), ("h0", Dir::Out, "b:1"));
    let dbg = format!("{h:?}");
    for want in ["LinkHandle", "h0", "Out", "b:1"] {
        assert!(dbg.contains(want), "{dbg} should contain {want}");
    }
    reg.replace_filter("b:1", pass).unwrap().wait();
    assert_eq!(names(&reg, Dir::Out), ["b:1"]);
    drop(h);
    assert!(
        names(&reg, Dir::Out).is_empty(),
        "the handle still unlinked it"
    );

    let h = reg
        .link_scoped("h0", Dir::In, "c:1", Placement::Prepend)
        .unwrap();
    reg.replace_filter("c:1", pass).unwrap().wait();
    let c: Commit = h.unlink().unwrap();
    assert_eq!(c.generation, reg.generation());
    assert_eq!(c.links()[0].hook, "c:1");
}

#[test]
fn retirements_carry_per_link_final_counters() {
    let (reg, head) = setup();
    let out = reg
        .register_head("h1", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    reg.link("h0", Dir::Out, "a:1", Placement::Prepend).unwrap();
    reg.link(
        "h1",
        Dir::In,
        "a:1",
        LinkOptions {
            placement: Placement::Prepend,
            fail: FailMode::Closed,
        },
    )
    .unwrap();
    reg.link("h1", Dir::In, "b:1", Placement::Append).unwrap();
    run(&reg, &head, Dir::In, 1, 100);
    run(&reg, &head, Dir::Out, 2, 100);
    run(&reg, &out, Dir::In, 3, 100);

    let t = reg.remove_hook("a:1").unwrap();
    t.wait();
    let mut links = t.links();
    links.sort_by(|a, b| (&a.head, a.dir).cmp(&(&b.head, b.dir)));
    let got: Vec<_> = links
        .iter()
        .map(|l| {
            (
                l.head.as_str(),
                l.dir,
                l.hook.as_str(),
                l.fail,
                l.counters.packets,
                l.counters.bytes,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("h0", Dir::In, "a:1", FailMode::Open, 1, 100),
            ("h0", Dir::Out, "a:1", FailMode::Open, 2, 200),
            ("h1", Dir::In, "a:1", FailMode::Closed, 3, 300),
        ]
    );
    let sum = links
        .iter()
        .fold(pfil::Counters::default(), |a, l| a + l.counters);
    assert_eq!(sum, t.counters());

    // Unregistering a head, and a plain unlink, list theirs too.
    let t = reg.unregister_head("h1").unwrap();
    t.wait();
    let l = t.links();
    assert_eq!(l.len(), 1);
    assert_eq!(
        (l[0].head.as_str(), l[0].dir, l[0].hook.as_str()),
        ("h1", Dir::In, "b:1")
    );
    assert_eq!(l[0].counters.packets, 3);
    reg.link("h0", Dir::In, "c:1", Placement::Prepend).unwrap();
    run(&reg, &head, Dir::In, 4, 60);
    let c = reg.unlink("h0", Dir::In, "c:1").unwrap();
    c.wait();
    assert_eq!(c.links()[0].counters.packets, 4);
    assert_eq!(c.counters().packets, 4);
}

#[test]
fn unlink_says_which_of_head_hook_and_link_is_missing() {
    let (reg, _) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    assert_eq!(
        reg.unlink("h0", Dir::In, "nope:x").unwrap_err(),
        Error::NoSuchHook("nope:x".into())
    );
    assert_eq!(
        reg.unlink("h0", Dir::Out, "a:1").unwrap_err(),
        Error::NotLinked {
            head: "h0".into(),
            dir: Dir::Out,
            hook: "a:1".into()
        }
    );
    assert_eq!(
        reg.unlink("zz", Dir::In, "a:1").unwrap_err(),
        Error::NoSuchHead("zz".into())
    );
    let e = reg
        .transaction()
        .unlink("h0", Dir::In, "a:1")
        .unlink("h0", Dir::In, "gone:x")
        .commit()
        .unwrap_err();
    assert_eq!(
        e,
        Error::Transaction {
            index: 1,
            source: Box::new(Error::NoSuchHook("gone:x".into()))
        }
    );
    assert_eq!(names(&reg, Dir::In), ["a:1"]);
}

#[test]
fn link_and_unlink_return_commits() {
    let (reg, _) = setup();
    let c: Commit = reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    assert_eq!(c.generation, reg.generation());
    assert!(c.links().is_empty());
    assert!(c.wait_timeout(LONG));
    let c: Commit = reg.unlink("h0", Dir::In, "a:1").unwrap();
    assert_eq!(c.generation, reg.generation());
    assert_eq!(c.links().len(), 1);
    assert!(c.wait_timeout(LONG));
}

#[test]
fn one_hook_and_one_head_can_be_looked_up() {
    let (reg, _) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    reg.link("h0", Dir::Out, "a:1", Placement::Prepend).unwrap();
    let h = reg.hook("a:1").unwrap();
    assert_eq!(
        (h.name.as_str(), h.kind, h.dirs, h.links, h.faults),
        ("a:1", PacketKind::Ethernet, Dirs::BOTH, 2, 0)
    );
    assert_eq!(Some(&h), reg.hooks().iter().find(|h| h.name == "a:1"));
    assert_eq!(
        reg.hook("nope:x").unwrap_err(),
        Error::NoSuchHook("nope:x".into())
    );
    let info = reg.head_info("h0").unwrap();
    assert_eq!(
        (info.name.as_str(), info.kind, info.dirs),
        ("h0", PacketKind::Ethernet, Dirs::BOTH)
    );
    assert_eq!(info.chains[Dir::In.index()][0].hook, "a:1");
    assert_eq!(info, reg.heads()[0]);
    assert_eq!(
        reg.head_info("zz").unwrap_err(),
        Error::NoSuchHead("zz".into())
    );
}

#[test]
fn a_watcher_wakes_on_a_new_generation() {
    let (reg, _) = setup();
    let seen = reg.generation();
    assert_eq!(reg.wait_generation(seen, Duration::from_millis(20)), None);
    assert_eq!(
        reg.wait_generation(seen - 1, Duration::ZERO),
        Some(seen),
        "already changed"
    );
    let (tx, rx) = mpsc::channel();
    let r2 = reg.clone();
    let watcher = thread::spawn(move || {
        tx.send(()).unwrap();
        r2.wait_generation(seen, LONG)
    });
    rx.recv().unwrap();
    thread::sleep(Duration::from_millis(10));
    let c = reg.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
    assert_eq!(watcher.join().unwrap(), Some(c.generation));
    // A huge timeout is no timeout, and does not overflow.
    assert_eq!(reg.wait_generation(seen, Duration::MAX), Some(c.generation));
}

#[test]
fn ops_compare_filters_by_identity_and_print_without_them() {
    let f: Arc<dyn Filter> = Arc::new(pass);
    let a = Op::ReplaceFilter {
        hook: "a:1".into(),
        filter: f.clone(),
    };
    assert_eq!(a, a.clone());
    assert_ne!(
        a,
        Op::ReplaceFilter {
            hook: "a:1".into(),
            filter: Arc::new(pass),
        }
    );
    assert_ne!(a, Op::RemoveHook { name: "a:1".into() });
    let dbg = format!(
        "{:?}",
        Op::AddHook {
            name: "acl:edge".into(),
            kind: PacketKind::Ipv4,
            dirs: Dirs::IN,
            filter: f,
        }
    );
    assert_eq!(
        dbg,
        "AddHook { name: \"acl:edge\", kind: Ipv4, dirs: in, .. }"
    );
}

#[cfg(feature = "serde")]
#[test]
fn info_types_round_trip_through_json() {
    use serde_json::json;
    let (reg, head) = setup();
    reg.link(
        "h0",
        Dir::In,
        "a:1",
        LinkOptions {
            placement: Placement::Prepend,
            fail: FailMode::Closed,
        },
    )
    .unwrap();
    run(&reg, &head, Dir::In, 2, 64);
    let heads = reg.heads();
    let text = serde_json::to_string(&heads).unwrap();
    assert_eq!(
        serde_json::from_str::<Vec<pfil::HeadInfo>>(&text).unwrap(),
        heads
    );
    let v = serde_json::to_value(&heads[0]).unwrap();
    assert_eq!(v["name"], "h0");
    assert_eq!(v["kind"], "ethernet");
    assert_eq!(v["dirs"], "in,out");
    assert_eq!(v["chains"][0][0]["hook"], "a:1");
    assert_eq!(v["chains"][0][0]["fail"], "closed");
    assert_eq!(v["chains"][0][0]["counters"]["packets"], 2);
    assert_eq!(v["chains"][0][0]["counters"]["bytes"], 128);

    let hooks = reg.hooks();
    let text = serde_json::to_string(&hooks).unwrap();
    assert_eq!(
        serde_json::from_str::<Vec<pfil::HookInfo>>(&text).unwrap(),
        hooks
    );

    let c = reg.unlink("h0", Dir::In, "a:1").unwrap();
    c.wait();
    let links = c.links();
    let v = serde_json::to_value(&links).unwrap();
    assert_eq!(v[0]["head"], "h0");
    assert_eq!(v[0]["dir"], "in");
    assert_eq!(
        serde_json::from_value::<Vec<pfil::RetiredLink>>(v).unwrap(),
        links
    );

    for d in [Dirs::NONE, Dirs::IN, Dirs::OUT, Dirs::BOTH] {
        let v = serde_json::to_value(d).unwrap();
        assert_eq!(v, json!(d.to_string()));
        assert_eq!(serde_json::from_value::<Dirs>(v).unwrap(), d);
    }
    let e = serde_json::from_value::<Dirs>(json!("up")).unwrap_err();
    assert!(e.to_string().contains("`up`"), "{e}");
    assert_eq!(serde_json::to_value(Verdict::Consumed).unwrap(), "consumed");
    assert_eq!(serde_json::to_value(Placement::Prepend).unwrap(), "prepend");
    assert_eq!(
        serde_json::to_value(Placement::Before("a:1".into())).unwrap(),
        json!({"before": "a:1"})
    );
    let o: LinkOptions = serde_json::from_value(json!({"placement": {"after": "b:1"}})).unwrap();
    assert_eq!(o, LinkOptions::from(Placement::After("b:1".into())));
    assert_eq!(
        serde_json::from_value::<pfil::Refused>(serde_json::to_value(reg.refused()).unwrap())
            .unwrap(),
        reg.refused()
    );
}

/// A hook that takes at least 20 µs per packet.
fn slow(_: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_micros(20) {
        std::hint::spin_loop();
    }
    Verdict::Pass
}

#[test]
fn one_batch_in_n_is_timed_per_link() {
    let reg = Registry::with_max_workers(1);
    let head = reg
        .register_head("h0", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    reg.add_hook("fast:1", PacketKind::Ethernet, Dirs::IN, pass)
        .unwrap();
    reg.add_hook("slow:1", PacketKind::Ethernet, Dirs::IN, slow)
        .unwrap();
    reg.link("h0", Dir::In, "fast:1", Placement::Append)
        .unwrap();
    reg.link("h0", Dir::In, "slow:1", Placement::Append)
        .unwrap();
    assert_eq!(reg.sampling(), pfil::DEFAULT_SAMPLING);
    reg.set_sampling(3);
    assert_eq!(reg.sampling(), 4, "a power of two");
    let mut w = reg.worker().unwrap();
    let batch = |w: &mut pfil::Worker| {
        let mut frames = vec![[0u8; 60]; 8];
        let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
        head.run(Dir::In, w, &mut pkts);
    };
    for _ in 0..16 {
        batch(&mut w);
    }
    let chain = reg.chain("h0", Dir::In).unwrap();
    for l in &chain {
        let c = l.counters;
        assert_eq!(
            (c.packets, c.sampled_batches, c.sampled_packets),
            (128, 4, 32),
            "{}",
            l.hook
        );
        assert_eq!(c.ns_per_batch().unwrap(), c.sampled_ns as f64 / 4.0);
    }
    let (fast, slow) = (chain[0].counters, chain[1].counters);
    assert!(slow.ns_per_packet().unwrap() >= 20_000.0, "{slow:?}");
    assert!(
        fast.ns_per_packet().unwrap() < slow.ns_per_packet().unwrap() / 4.0,
        "{fast:?} {slow:?}"
    );
    // Off: no more timed batches; on again, from the next ones.
    reg.set_sampling(0);
    for _ in 0..16 {
        batch(&mut w);
    }
    assert_eq!(
        reg.chain("h0", Dir::In).unwrap()[0]
            .counters
            .sampled_batches,
        4
    );
    reg.set_sampling(1);
    batch(&mut w);
    let c = reg.chain("h0", Dir::In).unwrap()[0].counters;
    assert_eq!((c.sampled_batches, c.packets), (5, 264));
    assert_eq!(pfil::Counters::default().ns_per_packet(), None);
}

/// A filter that counts the packets it saw, per length parity, and says
/// so in its stats; calling the registry from `stats` must not deadlock.
struct Tally {
    reg: Registry,
    even: std::sync::atomic::AtomicU64,
    odd: std::sync::atomic::AtomicU64,
}

impl Filter for Tally {
    fn filter(&self, p: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        let c = if p.len() % 2 == 0 {
            &self.even
        } else {
            &self.odd
        };
        c.fetch_add(1, Ordering::Relaxed);
        Verdict::Pass
    }

    fn stats(&self) -> Vec<pfil::FilterStat> {
        // Not under a registry lock: reading the registry here works.
        let hooks = self.reg.hooks().len() as u64;
        vec![
            pfil::FilterStat::new("seen", pfil::StatKind::Counter, "Packets seen.")
                .sample(&[("parity", "even")], self.even.load(Ordering::Relaxed))
                .sample(&[("parity", "odd")], self.odd.load(Ordering::Relaxed)),
            pfil::FilterStat::gauge("hooks", "Hooks registered.", hooks),
        ]
    }
}

#[test]
fn filter_stats_are_read_by_hook_name_and_follow_a_replaced_filter() {
    let (reg, head) = setup();
    let tally = |reg: &Registry| Tally {
        reg: reg.clone(),
        even: Default::default(),
        odd: Default::default(),
    };
    reg.add_hook("tally:x", PacketKind::Ethernet, Dirs::BOTH, tally(&reg))
        .unwrap();
    reg.link("h0", Dir::In, "tally:x", Placement::Prepend)
        .unwrap();
    run(&reg, &head, Dir::In, 5, 60);
    run(&reg, &head, Dir::In, 3, 61);
    let s = reg.hook_stats("tally:x").unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].name.as_str(), s[0].kind),
        ("seen", pfil::StatKind::Counter)
    );
    let seen: Vec<(Option<&str>, u64)> = s[0]
        .samples
        .iter()
        .map(|x| (x.label("parity"), x.value))
        .collect();
    assert_eq!(seen, [(Some("even"), 5), (Some("odd"), 3)]);
    assert_eq!(s[0].value(), None, "two samples: not a single value");
    assert_eq!(s[1].value(), Some(4), "a:1, b:1, c:1 and tally:x");
    // A hook whose filter keeps no stats: empty, and not listed.
    assert_eq!(reg.hook_stats("a:1").unwrap(), []);
    let (generation, all) = reg.filter_stats();
    assert_eq!(generation, reg.generation());
    assert_eq!(
        all.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["tally:x"]
    );
    assert_eq!(all[0].1, s);
    // Unknown hook: the error names it.
    match reg.hook_stats("tally:y") {
        Err(Error::NoSuchHook(h)) => assert_eq!(h, "tally:y"),
        other => panic!("{other:?}"),
    }
    // The stats are the current filter's: a replacement starts at 0.
    reg.replace_filter("tally:x", tally(&reg))
        .unwrap()
        .retirement
        .wait();
    run(&reg, &head, Dir::In, 1, 61);
    let s = reg.hook_stats("tally:x").unwrap();
    assert_eq!(
        s[0].samples.iter().map(|x| x.value).collect::<Vec<_>>(),
        [0, 1]
    );
}

/// A filter whose verdict is its config (`pass` or `drop`), changed in
/// place.
struct Switch(std::sync::Mutex<Verdict>);

impl Filter for Switch {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        *self.0.lock().unwrap()
    }

    fn reconfigure(&self, config: &str) -> Option<Result<(), String>> {
        let v = match config {
            "pass" => Verdict::Pass,
            "drop" => Verdict::Dropped,
            other => return Some(Err(format!("expected pass or drop, found `{other}`"))),
        };
        *self.0.lock().unwrap() = v;
        Some(Ok(()))
    }

    fn derive(&self, config: &str) -> Option<Result<Arc<dyn Filter>, String>> {
        let next = Switch(std::sync::Mutex::new(*self.0.lock().unwrap()));
        Some(
            next.reconfigure(config)?
                .map(|()| Arc::new(next) as Arc<dyn Filter>),
        )
    }
}

/// [`setup`] with a `Switch` hook `sw:1`, passing, linked on `h0` in.
fn setup_switch() -> (Registry, Head) {
    let (reg, head) = setup();
    reg.add_hook(
        "sw:1",
        PacketKind::Ethernet,
        Dirs::BOTH,
        Switch(std::sync::Mutex::new(Verdict::Pass)),
    )
    .unwrap();
    reg.link("h0", Dir::In, "sw:1", Placement::Append).unwrap();
    (reg, head)
}

#[test]
fn derive_filter_builds_a_successor_and_changes_nothing_until_it_is_published() {
    let (reg, head) = setup_switch();
    let g = reg.generation();
    let d = reg.derive_filter("sw:1", "drop").unwrap().unwrap();
    assert_eq!(reg.generation(), g);
    assert_eq!(run(&reg, &head, Dir::In, 1, 60), [Verdict::Pass], "not yet");
    let mut f = [0u8; 60];
    let ctx = Ctx::new("h0", Dir::In, 0);
    assert_eq!(d.from.filter(&mut Packet::new(&mut f), &ctx), Verdict::Pass);
    let c = reg.replace_filter_shared("sw:1", d.filter).unwrap();
    assert_eq!(c.generation, g + 1);
    assert_eq!(run(&reg, &head, Dir::In, 1, 60), [Verdict::Dropped]);
    assert!(c.wait_timeout(Duration::from_secs(10)));
    // The registry let go of the old filter: `from` is its last owner.
    assert_eq!(Arc::strong_count(&d.from), 1);
    // A refused config names the hook and the reason.
    assert_eq!(
        reg.derive_filter("sw:1", "maybe").unwrap_err().to_string(),
        "hook `sw:1`: expected pass or drop, found `maybe`"
    );
    // A filter without `derive` cannot; an unknown hook is an error.
    assert!(reg.derive_filter("a:1", "x").unwrap().is_none());
    assert!(matches!(
        reg.derive_filter("zz:1", "x"),
        Err(Error::NoSuchHook(h)) if h == "zz:1"
    ));
}

#[test]
fn reconfigure_hook_changes_a_filter_in_place_or_says_it_cannot() {
    let (reg, head) = setup_switch();
    let g = reg.generation();
    assert_eq!(run(&reg, &head, Dir::In, 2, 60), [Verdict::Pass; 2]);
    assert_eq!(reg.reconfigure_hook("sw:1", "drop"), Ok(true));
    assert_eq!(
        reg.generation(),
        g + 1,
        "in place, and one generation with the same chains"
    );
    // A transaction based on the generation before is refused: it would
    // undo the change.
    assert!(matches!(
        reg.transaction()
            .expect_generation(g)
            .unlink("h0", Dir::In, "sw:1")
            .commit(),
        Err(Error::GenerationConflict { expected, current }) if expected == g && current == g + 1
    ));
    assert_eq!(run(&reg, &head, Dir::In, 2, 60), [Verdict::Dropped; 2]);
    // The link's counters went on across it.
    let l = &reg.chain("h0", Dir::In).unwrap()[0];
    assert_eq!((l.counters.packets, l.counters.dropped), (4, 2));
    // A refused config names the hook and the reason, and changes nothing.
    assert_eq!(
        reg.reconfigure_hook("sw:1", "maybe")
            .unwrap_err()
            .to_string(),
        "hook `sw:1`: expected pass or drop, found `maybe`"
    );
    assert_eq!(run(&reg, &head, Dir::In, 1, 60), [Verdict::Dropped]);
    // A filter without `reconfigure` cannot; an unknown hook is an error.
    assert_eq!(reg.reconfigure_hook("a:1", "x"), Ok(false));
    assert_eq!(
        reg.reconfigure_hook("zz:1", "x"),
        Err(Error::NoSuchHook("zz:1".into()))
    );
}
