//! The driver under faults, on veth pairs in namespaces the test creates:
//! frame addresses after forwarding, the frame budget, partial starts,
//! stalls and errors in the middle of a run. Every frame is accounted for
//! on every path.

mod common;
use common::*;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pfil::Registry;
use pfil_afxdp::run::{self, GenConfig, LoopConfig, LoopWorker, Stats, Window, WorkerSetup};
use pfil_afxdp::{Error, PortConfig, Umem, UmemConfig};

fn setup(ns: &Netns) -> WorkerSetup {
    WorkerSetup {
        netns: Some(ns.name.clone()),
        queues: Some(vec![0]),
        ..WorkerSetup::default()
    }
}

/// Run `f` on a thread and wait for it at most `limit`: a hang is a
/// failure, not a stuck test run.
fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not return within {limit:?}"))
}

/// A forwarded frame's completion carries the packet address (past the RX
/// headroom); the pool must get the frame base back, or `alloc` hands out
/// a window into the next frame.
#[test]
fn forwarded_frames_come_back_frame_aligned() {
    if !require_root("forwarded_frames_come_back_frame_aligned") {
        return;
    }
    let _traffic = traffic();
    let t = Topo::new("al");
    let reg = Registry::new();
    let (ha, hb) = (
        run::head_for(&reg, "f0").unwrap(),
        run::head_for(&reg, "f1").unwrap(),
    );
    let sink = run::spawn_sink(&reg, "s0", &setup(&t.s), LoopConfig::new()).unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reg2 = reg.clone();
    let st = Arc::new(Stats::default());
    let st2 = st.clone();
    let fwd = t.f.run(move || {
        let st = st2;
        let mut umem = Umem::new(UmemConfig::default()).unwrap();
        let a = umem.open(PortConfig::new("f0", 0)).unwrap();
        let b = umem.open(PortConfig::new("f1", 0)).unwrap();
        let back = Stats::default();
        let mut w = reg2.worker().unwrap();
        let lc = LoopConfig::new();
        ready_tx.send(()).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                wait_for(|| st.rx.load(Ordering::Relaxed) >= 3000);
                lc.stop.store(true, Ordering::Relaxed);
            });
            let mut lw = LoopWorker {
                reg: &reg2,
                worker: &mut w,
                stats: &st,
                back: Some(&back),
            };
            run::forward_loop(&mut umem, (a, b), (&ha, &hb), &mut lw, &lc).unwrap();
        });
        let tx = st.snapshot().tx;
        let kernel = [umem.statistics(a).ok(), umem.statistics(b).ok()];
        // Every free frame, handed out at once: frame-aligned, inside the
        // UMEM, no two the same.
        let size = u64::from(umem.area().frame_size());
        let range = umem.frame_addrs();
        let mut frames = Vec::new();
        while let Some(f) = umem.alloc() {
            frames.push(f);
        }
        let mut addrs: Vec<u64> = frames.iter().map(|f| f.addr()).collect();
        let counts = umem.counts();
        for f in frames {
            umem.recycle(f).unwrap();
        }
        addrs.sort_unstable();
        (tx, size, range, addrs, counts, kernel)
    });
    ready_rx.recv().unwrap();
    // Paced by what the forwarder has received, so a busy machine slows
    // the test down instead of making the kernel drop.
    let gen = GenConfig {
        count: 3000,
        rate: 100_000,
        window: Some(Window {
            max_in_flight: 256,
            accounted: Arc::new(move || st.rx.load(Ordering::Relaxed)),
        }),
        ..GenConfig::default()
    };
    run::spawn_gen(&reg, "g0", &setup(&t.g), gen, LoopConfig::new())
        .unwrap()
        .wait()
        .unwrap();
    let (tx, size, range, addrs, counts, kernel) = fwd.join().unwrap();
    sink.join().unwrap();
    assert_eq!(
        tx, 3000,
        "every frame forwarded; f0, f1 kernel stats {kernel:?}"
    );
    assert!(counts.adds_up() && counts.free == 0, "{counts:?}");
    let n = addrs.len();
    assert!(n > 3000, "the forwarded frames are back in the pool: {n}");
    for a in &addrs {
        assert_eq!(a % size, 0, "frame address {a:#x} not frame-aligned");
        assert!(range.contains(a), "{a:#x} outside {range:?}");
    }
    assert!(addrs.windows(2).all(|w| w[0] != w[1]), "a frame twice");
}

/// A UMEM that cannot stock its fill rings with full RX and TX rings at
/// once is refused with the numbers, not run until the kernel drops.
#[test]
fn frame_budget_is_checked_at_open_and_spawn() {
    if !require_root("frame_budget_is_checked_at_open_and_spawn") {
        return;
    }
    let _traffic = traffic();
    let t = Topo::new("bu");
    let e =
        t.f.run(|| {
            let mut umem = Umem::new(UmemConfig {
                frames: 8192,
                ..UmemConfig::default()
            })
            .unwrap();
            let mut pc = PortConfig::new("f0", 0);
            pc.fill_target = 2048;
            umem.open(pc.clone()).unwrap();
            pc.ifname = "f1".into();
            umem.open(pc).unwrap_err()
        })
        .join()
        .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, Error::Config(_)), "{e}");
    assert!(
        msg.contains("8192 frames") && msg.contains("12416"),
        "{msg}"
    );
    // The spawner says it before opening anything.
    let reg = Registry::new();
    let mut s = setup(&t.f);
    s.umem.frames = 4096;
    let e = run::spawn_forward(&reg, "f0", "f1", &s, LoopConfig::new()).expect_err("refused");
    assert!(e.to_string().contains("4096 UMEM frames per worker"), "{e}");
    assert!(!t.f.has_xdp("f0") && !t.f.has_xdp("f1"), "nothing attached");
}

/// Not enough registry worker slots for every queue: nothing is left
/// running (no XDP program, no bound socket), and the queues can be used
/// at once after.
#[test]
fn a_partial_start_leaves_nothing_running() {
    if !require_root("a_partial_start_leaves_nothing_running") {
        return;
    }
    let _traffic = traffic();
    let a = Netns::new("pa");
    let b = Netns::new("pb");
    veth_queues(&a, "p0", &b, "p1", 4, 2);
    let reg = Registry::with_max_workers(1);
    let s = WorkerSetup {
        netns: Some(a.name.clone()),
        ..WorkerSetup::default()
    };
    let e = run::spawn_sink(&reg, "p0", &s, LoopConfig::new())
        .expect_err("two queues, one worker slot");
    assert!(e.to_string().contains("worker slot"), "{e}");
    // The bpf_link's detach follows its fd's close asynchronously.
    assert!(
        wait_for(|| !a.has_xdp("p0")),
        "XDP left attached after a failed start"
    );
    // Every slot is free again and both queues can be bound.
    assert!(reg.worker().is_ok());
    let reg = Registry::with_max_workers(2);
    let r = run::spawn_sink(&reg, "p0", &s, LoopConfig::new()).unwrap();
    assert_eq!(r.join().unwrap().len(), 2);
}

/// More queues than the default 64 worker slots: a registry sized for the
/// queues runs one worker per queue.
#[test]
fn more_than_64_queues() {
    if !require_root("more_than_64_queues") {
        return;
    }
    let _traffic = traffic();
    let a = Netns::new("qa");
    let b = Netns::new("qb");
    veth_queues(&a, "q0", &b, "q1", 5, 72);
    let reg = Registry::with_max_workers(72);
    let mut port = PortConfig::new("q0", 0);
    port.rx_size = 64;
    port.tx_size = 64;
    port.fill_size = 64;
    port.comp_size = 64;
    port.fill_target = 64;
    let s = WorkerSetup {
        netns: Some(a.name.clone()),
        umem: UmemConfig {
            frames: 1024,
            ring: 64,
            ..UmemConfig::default()
        },
        port: Some(port),
        ..WorkerSetup::default()
    };
    let r = run::spawn_sink(&reg, "q0", &s, LoopConfig::new()).unwrap();
    let reports = r.join().unwrap();
    assert_eq!(reports.len(), 72);
    assert!(reports
        .iter()
        .all(|r| r.counts.adds_up() && r.counts.app == 0));
}

/// A generator whose window never opens (nothing downstream accounts for
/// its frames) stops with an error after `stall_ms` instead of spinning
/// forever; `wait` returns.
#[test]
fn a_generator_that_cannot_progress_stalls_out() {
    if !require_root("a_generator_that_cannot_progress_stalls_out") {
        return;
    }
    let _traffic = traffic();
    let t = Topo::new("st");
    let reg = Registry::new();
    let gen = GenConfig {
        count: 10_000,
        window: Some(Window {
            max_in_flight: 16,
            accounted: Arc::new(|| 0),
        }),
        ..GenConfig::default()
    };
    let mut lc = LoopConfig::new();
    lc.stall_ms = 300;
    let g = run::spawn_gen(&reg, "g0", &setup(&t.g), gen, lc).unwrap();
    let stats = g.stats[0].clone();
    let done = bounded(Duration::from_secs(20), move || g.wait_all());
    assert_eq!(stats.snapshot().tx, 16, "the window's worth, then nothing");
    assert!(
        matches!(done.errors.as_slice(), [Error::Stalled { ms: 300, .. }]),
        "{:?}",
        done.errors
    );
    let c = done.reports[0].counts;
    assert!(c.adds_up() && c.app == 0, "{c:?}");
}

/// An interface taken down in the middle of a run makes TX kicks fail:
/// the loops end with the error, and still every frame of their UMEMs is
/// accounted for, none left with the application, and the report is there.
#[test]
fn tx_errors_mid_run_leave_every_frame_accounted() {
    if !require_root("tx_errors_mid_run_leave_every_frame_accounted") {
        return;
    }
    let _traffic = traffic();
    let t = Topo::new("er");
    let reg = Registry::new();
    let sink = run::spawn_sink(&reg, "s0", &setup(&t.s), LoopConfig::new()).unwrap();
    let fwd = run::spawn_forward(&reg, "f0", "f1", &setup(&t.f), LoopConfig::new()).unwrap();
    let gen = GenConfig {
        count: 0,
        rate: 200_000,
        ..GenConfig::default()
    };
    let g = run::spawn_gen(&reg, "g0", &setup(&t.g), gen, LoopConfig::new()).unwrap();
    let (fs, ss) = (fwd.stats[0].clone(), sink.stats[0].clone());
    assert!(wait_for(|| ss.snapshot().rx > 5_000), "traffic flows");
    // The forwarder's egress goes away under it, then the generator's.
    t.f.exec(&["ip", "link", "set", "f1", "down"]);
    assert!(wait_for(|| fwd.finished()), "forwarder ends on the error");
    t.g.exec(&["ip", "link", "set", "g0", "down"]);
    let gd = bounded(Duration::from_secs(20), move || g.wait_all());
    let fd = fwd.join_all();
    let sd = sink.join_all();
    eprintln!(
        "gen {:?}\nfwd {:?} {:?}\nsink {:?}",
        gd.errors,
        fd.errors,
        fs.snapshot(),
        sd.errors
    );
    assert!(!fd.errors.is_empty(), "the forwarder saw the failed kicks");
    assert!(!gd.errors.is_empty(), "the generator saw the failed kicks");
    for d in [&gd, &fd, &sd] {
        assert_eq!(d.reports.len(), 1);
        let c = d.reports[0].counts;
        assert!(c.adds_up() && c.app == 0 && c.held == 0, "{c:?}");
    }
}

/// The first open of a UMEM binds the UMEM's own socket; when the step
/// after it fails (here the XSKMAP update: a program whose map has one
/// slot, for queue 1), the UMEM is registered again, so opening the same
/// queue once more works. (It failed with "queue busy" before: the
/// half-opened socket kept the queue, review L6.3.)
#[test]
fn a_failed_first_open_does_not_poison_the_umem() {
    if !require_root("a_failed_first_open_does_not_poison_the_umem") {
        return;
    }
    let ns = Netns::new("po");
    let peer = Netns::new("pp");
    veth_queues(&ns, "p0", &peer, "p1", 4, 2);
    let r = ns
        .run(|| {
            let mut umem = Umem::new(UmemConfig::default()).unwrap();
            // A one-slot XSKMAP (attached to the loopback, which has one
            // queue): queue 1 does not fit.
            let small =
                Arc::new(pfil_afxdp::XdpProgram::attach("lo", 1, Default::default()).unwrap());
            let mut cfg = PortConfig::new("p0", 1);
            cfg.program = Some(small);
            let e = umem.open(cfg).unwrap_err();
            let prog =
                Arc::new(pfil_afxdp::XdpProgram::attach("p0", 2, Default::default()).unwrap());
            let with = |q| {
                let mut c = PortConfig::new("p0", q);
                c.program = Some(prog.clone());
                c
            };
            let again = umem.open(with(1)).map(|_| ());
            let other = umem.open(with(0)).map(|_| ());
            (
                e.to_string(),
                again.map_err(|e| e.to_string()),
                other.map_err(|e| e.to_string()),
                umem.counts(),
            )
        })
        .join()
        .unwrap();
    let (first_err, again, other, counts) = r;
    assert!(!first_err.is_empty());
    again.unwrap_or_else(|e| panic!("the queue after a failed first open ({first_err}): {e}"));
    other.unwrap_or_else(|e| panic!("another queue of the UMEM: {e}"));
    assert!(counts.adds_up(), "{counts:?}");
}
