//! Packet kinds, worker slots, pinning, and other edges of the datapath.

use super::*;

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
    let dropped = add_canary(&reg, Dirs::IN);
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
