//! End to end on veth pairs in namespaces the test creates:
//! gen (ns g) -> forward (ns f) -> sink (ns s), exact accounting.

mod common;
use common::*;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
use pfil_afxdp::run::{self, GenConfig, LoopConfig, UmemMode, Window, WorkerSetup};
use pfil_afxdp::Outboxes;

fn setup(ns: &Netns) -> WorkerSetup {
    WorkerSetup {
        netns: Some(ns.name.clone()),
        queues: Some(vec![0]),
        ..WorkerSetup::default()
    }
}

fn drop_udp_port(reg: &Registry, name: &str, port: u16) {
    reg.add_hook(
        name,
        PacketKind::Ethernet,
        Dirs::BOTH,
        move |p: &mut Packet<'_>, _: &Ctx<'_>| match p.headers().and_then(|h| h.transport) {
            Some(t) if t.dst_port == port => Verdict::Dropped,
            _ => Verdict::Pass,
        },
    )
    .unwrap();
}

/// Run gen -> forward -> sink for `count` frames; `during` runs while
/// traffic flows. Returns (gen, fwd a->b, sink) totals.
fn pipeline(
    t: &Topo,
    reg: &Registry,
    count: u64,
    dst_ports: Vec<u16>,
    during: impl FnOnce(),
) -> (run::StatsSnapshot, run::StatsSnapshot, run::StatsSnapshot) {
    let sink = run::spawn_sink(reg, "s0", &setup(&t.s), LoopConfig::new()).expect("sink");
    let fwd =
        run::spawn_forward(reg, "f0", "f1", &setup(&t.f), LoopConfig::new()).expect("forward");
    assert!(t.f.has_xdp("f0") && t.f.has_xdp("f1") && t.s.has_xdp("s0"));
    let (fs, ss) = (fwd.stats[0].clone(), sink.stats[0].clone());
    // Accounted downstream: what the forwarder filtered or could not send,
    // plus what reached the sink.
    let accounted = Arc::new(move || {
        let f = fs.snapshot();
        let s = ss.snapshot();
        f.filtered() + f.tx_dropped + s.rx
    });
    let gen = GenConfig {
        count,
        dst_ports,
        window: Some(Window {
            max_in_flight: 128,
            accounted,
        }),
        ..GenConfig::default()
    };
    let start = Instant::now();
    let g = run::spawn_gen(reg, "g0", &setup(&t.g), gen, LoopConfig::new()).expect("gen");
    during();
    // Bounded: the generator ends after `count`, or we stop it.
    while !g.finished() && start.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let gs = g.total();
    let greports = g.join().expect("gen join");
    // Let the last frames arrive (bounded).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let f = fwd.total();
        let s = sink.total();
        if f.filtered() + f.tx_dropped + s.rx >= gs.tx || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let secs = start.elapsed().as_secs_f64();
    let fstats = fwd.stats[0].snapshot();
    let freports = fwd.join().expect("fwd join");
    let sstats = sink.total();
    let sreports = sink.join().expect("sink join");
    eprintln!(
        "{count} frames in {secs:.2}s = {:.0} pps; gen {gs:?}\nfwd {fstats:?}\nsink {sstats:?}",
        gs.tx as f64 / secs
    );
    for r in greports.iter().chain(&freports).chain(&sreports) {
        assert!(r.counts.adds_up(), "frame accounting: {:?}", r.counts);
        assert_eq!(r.counts.app, 0, "{:?}", r.counts);
    }
    (gs, fstats, sstats)
}

#[test]
fn gen_forward_sink_exact() {
    if !require_root("gen_forward_sink_exact") {
        return;
    }
    let _traffic = traffic();
    init_tracing();
    let t = Topo::new("e");
    let reg = Registry::new();
    let count: u64 = std::env::var("PFIL_AFXDP_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let (g, f, s) = pipeline(&t, &reg, count, vec![9], || {});
    assert_eq!(g.generated, count);
    assert_eq!(g.tx, count);
    assert_eq!(f.rx, g.tx, "forwarder received every frame sent");
    assert_eq!(f.tx, f.rx - f.filtered());
    assert_eq!(s.rx, f.tx, "sink received every frame forwarded");
    assert_eq!(g.tx, s.rx + f.filtered() + s.filtered());
}

#[test]
fn udp_port_filter_drops_exactly_those() {
    if !require_root("udp_port_filter_drops_exactly_those") {
        return;
    }
    let _traffic = traffic();
    init_tracing();
    let t = Topo::new("p");
    let reg = Registry::new();
    run::head_for(&reg, "f0").unwrap();
    drop_udp_port(&reg, "udp:drop53", 53);
    reg.link("f0", Dir::In, "udp:drop53", Placement::Prepend)
        .unwrap();
    let count = 40_000;
    let (g, f, s) = pipeline(&t, &reg, count, vec![53, 80, 443, 8080], || {});
    assert_eq!(g.tx, count);
    assert_eq!(f.in_dropped, count / 4, "exactly the port-53 frames");
    assert_eq!(s.rx, count - count / 4);
    let c = reg.chain("f0", Dir::In).unwrap()[0].counters;
    assert_eq!((c.packets, c.dropped), (count, count / 4));
}

#[test]
fn relink_during_traffic_loses_nothing() {
    if !require_root("relink_during_traffic_loses_nothing") {
        return;
    }
    let _traffic = traffic();
    init_tracing();
    let t = Topo::new("r");
    let reg = Registry::new();
    run::head_for(&reg, "f0").unwrap();
    run::head_for(&reg, "f1").unwrap();
    reg.add_hook(
        "null:pass",
        PacketKind::Ethernet,
        Dirs::BOTH,
        |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Pass,
    )
    .unwrap();
    drop_udp_port(&reg, "udp:never", 1);
    let count = 200_000;
    let reg2 = reg.clone();
    let (g, f, s) = pipeline(&t, &reg, count, vec![9, 10], move || {
        // Churn: link and unlink on both heads while frames flow (bounded).
        for i in 0..400 {
            let (head, dir) = if i % 2 == 0 {
                ("f0", Dir::In)
            } else {
                ("f1", Dir::Out)
            };
            reg2.link(head, dir, "null:pass", Placement::Prepend)
                .unwrap();
            reg2.link(head, dir, "udp:never", Placement::Append)
                .unwrap();
            std::thread::sleep(Duration::from_micros(500));
            drop(reg2.unlink(head, dir, "null:pass").unwrap());
            drop(reg2.unlink(head, dir, "udp:never").unwrap());
        }
    });
    assert_eq!(g.tx, count);
    assert_eq!(f.filtered(), 0);
    assert_eq!(s.rx, count, "no frame lost to the relinking");
}

#[test]
fn consumed_frames_are_owned_until_given_back() {
    if !require_root("consumed_frames_are_owned_until_given_back") {
        return;
    }
    let _traffic = traffic();
    init_tracing();
    let t = Topo::new("c");
    let reg = Registry::new();
    run::head_for(&reg, "s0").unwrap();
    let outboxes = Arc::new(Outboxes::new(reg.max_workers(), 1024));
    // Port 7: consumed and kept (the cookies are recorded to give back
    // later). Port 9: consumed, answered in place and sent back out of the
    // port it came in on, through the outbox, from inside the hook.
    let kept = Arc::new(Mutex::new(Vec::<u64>::new()));
    let (k2, ob2) = (kept.clone(), outboxes.clone());
    reg.add_hook(
        "tap:take",
        PacketKind::Ethernet,
        Dirs::IN,
        move |p: &mut Packet<'_>, ctx: &Ctx<'_>| match p.headers().and_then(|h| h.transport) {
            Some(t) if t.dst_port == 7 => {
                k2.lock().unwrap().push(p.cookie());
                Verdict::Consumed
            }
            Some(t) if t.dst_port == 9 => {
                let ob = ob2.get(ctx.worker).expect("an outbox per worker slot");
                ob.transmit(p.cookie(), p.ifindex()).expect("outbox room");
                Verdict::Consumed
            }
            _ => Verdict::Pass,
        },
    )
    .unwrap();
    reg.link("s0", Dir::In, "tap:take", Placement::Prepend)
        .unwrap();
    // Hold at most 300: of the 500 kept frames the oldest 200 go back
    // (evicted, their cookies stale).
    let mut lc = LoopConfig::new();
    lc.held_limit = 300;
    lc.outboxes = Some(outboxes.clone());
    let sink = run::spawn_sink(&reg, "s0", &setup(&t.s), lc).unwrap();
    // g0's peer is f0; bridge f0 <-> f1 so frames reach s0 and the answers
    // come back to f1 (counted by the b->a direction).
    let fwd = run::spawn_forward(&reg, "f0", "f1", &setup(&t.f), LoopConfig::new()).unwrap();
    let gen = GenConfig {
        count: 1000,
        dst_ports: vec![7, 9],
        rate: 50_000,
        ..GenConfig::default()
    };
    let g = run::spawn_gen(&reg, "g0", &setup(&t.g), gen, LoopConfig::new()).unwrap();
    g.wait().unwrap();
    let st = sink.stats[0].clone();
    let back = fwd.stats[1].clone();
    assert!(
        wait_for(|| st.snapshot().rx == 1000 && back.snapshot().rx == 500),
        "sink {:?}\nfwd back {:?}",
        st.snapshot(),
        back.snapshot()
    );
    let s = st.snapshot();
    assert_eq!(s.in_consumed, 1000, "{s:?}");
    assert_eq!(s.reinjected, 500, "{s:?}");
    assert_eq!(s.held_evicted, 200, "{s:?}");
    // Give every kept frame back, plus one cookie that was never held.
    let kept = std::mem::take(&mut *kept.lock().unwrap());
    assert_eq!(kept.len(), 500);
    let ob = outboxes.get(0).unwrap();
    for &c in kept.iter().chain([&0xdead_beef]) {
        ob.release(c).unwrap();
    }
    assert!(wait_for(
        || st.snapshot().released + st.snapshot().stale == 501
    ));
    let s = st.snapshot();
    assert_eq!((s.released, s.stale), (300, 201), "{s:?}");
    let reports = sink.join().unwrap();
    fwd.join().unwrap();
    let c = reports[0].counts;
    assert!(c.adds_up() && c.held == 0 && c.app == 0, "{c:?}");
}

/// Check the end-of-run reports of the workers of one spawner: every
/// worker's frames add up, none is left with the application, and with a
/// shared UMEM the workers own disjoint parts of one area.
fn check_reports(reports: &[run::WorkerReport], mode: UmemMode, frames: u32) {
    let parts = if mode == UmemMode::Shared {
        reports.len()
    } else {
        1
    };
    for r in reports {
        assert!(r.counts.adds_up(), "queue {}: {:?}", r.queue, r.counts);
        assert_eq!(r.counts.app, 0, "queue {}: {:?}", r.queue, r.counts);
        assert_eq!(r.counts.total, u64::from(frames), "queue {}", r.queue);
        assert_eq!(r.umem_parts, parts, "queue {}", r.queue);
    }
    if mode == UmemMode::Shared {
        let mut ranges: Vec<_> = reports.iter().map(|r| r.frame_addrs.clone()).collect();
        ranges.sort_by_key(|r| r.start);
        for w in ranges.windows(2) {
            assert!(w[0].end <= w[1].start, "overlapping parts {ranges:?}");
        }
    }
}

/// Two queues of s0, one sink worker each, on `mode` UMEM(s); one
/// generator per queue, each paced by its own sink queue.
fn two_queues_exact(tag: &str, mode: UmemMode) {
    init_tracing();
    let g = Netns::new(&format!("{tag}g"));
    let s = Netns::new(&format!("{tag}s"));
    veth_queues(&g, "g0", &s, "s0", 0, 2);
    let reg = Registry::new();
    // Every queue of s0 (2 workers, one XDP program, one XSKMAP).
    let sink_setup = WorkerSetup {
        netns: Some(s.name.clone()),
        umem_mode: mode,
        ..WorkerSetup::default()
    };
    let sink = run::spawn_sink(&reg, "s0", &sink_setup, LoopConfig::new()).expect("sink");
    assert_eq!(sink.stats.len(), 2);
    // The workers write their own counters once per batch: the two
    // counter blocks must not share a 128-byte line (false sharing between
    // queues is what a second queue must not cost).
    let line = |i: usize| {
        let a = Arc::as_ptr(&sink.stats[i]) as usize;
        (
            a / 128,
            (a + std::mem::size_of::<pfil_port::Stats>() - 1) / 128,
        )
    };
    let ((a0, a1), (b0, b1)) = (line(0), line(1));
    assert!(
        a1 < b0 || b1 < a0,
        "workers' counters share a line: {a0}..={a1} / {b0}..={b1}"
    );
    let count = 50_000;
    // One generator per queue, each paced by its own sink queue: veth
    // delivers TX queue q to the peer's RX queue q.
    let gens: Vec<run::Running> = (0..2u32)
        .map(|q| {
            let st = sink.stats[q as usize].clone();
            let gen = GenConfig {
                count,
                window: Some(Window {
                    max_in_flight: 64,
                    accounted: Arc::new(move || st.snapshot().rx),
                }),
                ..GenConfig::default()
            };
            let gsetup = WorkerSetup {
                netns: Some(g.name.clone()),
                queues: Some(vec![q]),
                umem_mode: mode,
                ..WorkerSetup::default()
            };
            run::spawn_gen(&reg, "g0", &gsetup, gen, LoopConfig::new()).expect("gen")
        })
        .collect();
    let t = Instant::now();
    while !gens.iter().all(|g| g.finished()) && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent: Vec<u64> = gens.iter().map(|g| g.total().tx).collect();
    let mut greports = Vec::new();
    for g in gens {
        greports.extend(g.join().unwrap());
    }
    let total_sent: u64 = sent.iter().sum();
    let deadline = Instant::now() + Duration::from_secs(5);
    while sink.total().rx < total_sent && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let per_queue: Vec<u64> = sink.stats.iter().map(|s| s.snapshot().rx).collect();
    let total = sink.total();
    let reports = sink.join().unwrap();
    assert_eq!(sent, vec![count, count]);
    assert_eq!(total.rx, 2 * count, "per queue {per_queue:?}");
    assert_eq!(
        per_queue, sent,
        "each queue received what its generator sent"
    );
    assert_eq!(reports.len(), 2);
    check_reports(&reports, mode, sink_setup.umem.frames);
    for r in &greports {
        assert!(r.counts.adds_up() && r.counts.app == 0, "{:?}", r.counts);
    }
}

#[test]
fn two_queues_shared_umem_exact() {
    if !require_root("two_queues_shared_umem_exact") {
        return;
    }
    let _traffic = traffic();
    two_queues_exact("m", UmemMode::Shared);
}

#[test]
fn two_queues_per_queue_umem_exact() {
    if !require_root("two_queues_per_queue_umem_exact") {
        return;
    }
    let _traffic = traffic();
    two_queues_exact("n", UmemMode::PerQueue);
}

/// Both sides on a shared UMEM: one generator spawner with two queues (two
/// TX-only sockets on one area, the second joined with XDP_SHARED_UMEM)
/// into a two-queue sink. Paced by rate (the pacing window is per
/// spawner, not per queue), exact counts.
#[test]
fn two_queue_gen_and_sink_on_shared_umems_exact() {
    if !require_root("two_queue_gen_and_sink_on_shared_umems_exact") {
        return;
    }
    let _traffic = traffic();
    init_tracing();
    let g = Netns::new("ug");
    let s = Netns::new("us");
    veth_queues(&g, "g0", &s, "s0", 0, 2);
    let reg = Registry::new();
    let sink_setup = WorkerSetup {
        netns: Some(s.name.clone()),
        ..WorkerSetup::default()
    };
    assert_eq!(sink_setup.umem_mode, UmemMode::Shared, "the default");
    let sink = run::spawn_sink(&reg, "s0", &sink_setup, LoopConfig::new()).expect("sink");
    let count = 20_000;
    let gen = GenConfig {
        count,
        rate: 40_000,
        ..GenConfig::default()
    };
    let gsetup = WorkerSetup {
        netns: Some(g.name.clone()),
        queues: Some(vec![0, 1]),
        ..WorkerSetup::default()
    };
    let gens = run::spawn_gen(&reg, "g0", &gsetup, gen, LoopConfig::new()).expect("gen");
    let t = Instant::now();
    while !gens.finished() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent: Vec<u64> = gens.stats.iter().map(|s| s.snapshot().tx).collect();
    let greports = gens.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while sink.total().rx < 2 * count && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let per_queue: Vec<u64> = sink.stats.iter().map(|s| s.snapshot().rx).collect();
    let reports = sink.join().unwrap();
    assert_eq!(sent, vec![count, count]);
    let kernel: Vec<_> = reports
        .iter()
        .flat_map(|r| r.ports.iter().map(|p| (p.queue, p.kernel)))
        .collect();
    assert_eq!(
        per_queue, sent,
        "each queue received what was sent on it; sink ports (queue, kernel stats): {kernel:?}"
    );
    check_reports(&greports, UmemMode::Shared, gsetup.umem.frames);
    check_reports(&reports, UmemMode::Shared, sink_setup.umem.frames);
}
