//! The loops of `pfil_port` on a UMEM over a fake kernel (`rings::fake`): no privileges, exact
//! addresses. What the kernel would do is played by the test: it delivers
//! frames into fill frames after the RX headroom, completes TX on kicks
//! (or not), and fails kicks on demand.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};

use arrayvec::ArrayVec;
use pfil_port::{
    forward_loop, gen_loop, head_for, sink_loop, GenConfig, LoopConfig, LoopWorker, Stats,
};

use crate::rings::fake::{FakeKernel, HEADROOM};
use crate::{Error, Frame, Outboxes, PortConfig, Umem, UmemConfig};

/// A port config with all rings of `ring` entries and a full fill ring.
fn pc(name: &str, ring: u32) -> PortConfig {
    let mut c = PortConfig::new(name, 0);
    c.rx_size = ring;
    c.tx_size = ring;
    c.fill_size = ring;
    c.comp_size = ring;
    c.fill_target = ring;
    c
}

fn umem(frames: u32) -> Umem {
    Umem::fake(UmemConfig {
        frames,
        ..UmemConfig::default()
    })
}

/// Run `body` (a loop) on a scoped thread while `drive` plays the kernel
/// on this one; `drive` returns when the loop should stop.
fn drive_loop<R: Send>(
    lc: &LoopConfig,
    body: impl FnOnce() -> R + Send,
    drive: impl FnOnce(),
) -> R {
    std::thread::scope(|s| {
        let h = s.spawn(body);
        drive();
        lc.stop.store(true, Ordering::Relaxed);
        h.join().expect("loop thread")
    })
}

fn wait_for(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "condition not met in 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Frames in the RX ring and not yet read leave the kernel a full fill
/// ring: the target counts the fill ring, not fill + RX.
#[test]
fn refill_keeps_the_fill_ring_full_while_rx_backs_up() {
    let mut u = umem(1024);
    let k = FakeKernel::new(64);
    let p = u.open_fake(&pc("a", 64), 1, k.clone()).unwrap();
    assert_eq!(k.state().fill.len(), 64);
    for _ in 0..64 {
        k.deliver(60).unwrap();
    }
    {
        let s = k.state();
        assert_eq!((s.fill.len(), s.rx.len()), (0, 64));
    }
    // Reading a full batch while more wait in RX tops the fill ring up.
    let mut batch: ArrayVec<Frame, 32> = ArrayVec::new();
    assert_eq!(u.rx_batch(p, &mut batch), 32);
    assert_eq!(k.state().fill.len(), 64, "fill ring topped up behind RX");
    let c = u.counts();
    assert!(
        c.adds_up() && c.fill == 64 && c.rx == 32 && c.app == 32,
        "{c:?}"
    );
    for f in batch.drain(..) {
        u.recycle(f).unwrap();
    }
    // And the explicit refill counts the fill ring, not fill + RX.
    for _ in 0..32 {
        k.deliver(60).unwrap();
    }
    assert_eq!(k.state().fill.len(), 32);
    u.refill(p);
    assert_eq!(k.state().fill.len(), 64);
}

/// Forward a→b: what b sends is exactly what a received (same addresses,
/// the packet after the headroom), completions come back as frame bases,
/// and every frame is accounted for.
#[test]
fn forward_sends_what_it_received_and_recycles_frame_bases() {
    let reg = Registry::new();
    let (ha, hb) = (head_for(&reg, "a").unwrap(), head_for(&reg, "b").unwrap());
    let mut u = umem(1024);
    let (ka, kb) = (FakeKernel::new(64), FakeKernel::new(64));
    let a = u.open_fake(&pc("a", 64), 1, ka.clone()).unwrap();
    let b = u.open_fake(&pc("b", 64), 2, kb.clone()).unwrap();
    let (st, back) = (Stats::default(), Stats::default());
    let mut w = reg.worker().unwrap();
    let lc = LoopConfig::new();
    let delivered = Mutex::new(Vec::new());
    let r = drive_loop(
        &lc,
        || {
            let mut lw = LoopWorker {
                reg: &reg,
                worker: &mut w,
                stats: &st,
                back: Some(&back),
            };
            let r = forward_loop(&mut u, (a, b), (&ha, &hb), &mut lw, &lc);
            (r, u)
        },
        || {
            for _ in 0..500 {
                wait_for(|| !ka.state().fill.is_empty());
                delivered.lock().unwrap().push(ka.deliver(100).unwrap());
            }
            wait_for(|| st.tx.load(Ordering::Relaxed) == 500);
        },
    );
    let (r, mut u) = r;
    r.unwrap();
    let sent: Vec<u64> = kb.state().sent.iter().map(|&(a, _)| a).collect();
    assert_eq!(sent, *delivered.lock().unwrap(), "b sent what a received");
    assert!(kb.state().sent.iter().all(|&(_, l)| l == 100));
    assert!(sent.iter().all(|a| a % 2048 == u64::from(HEADROOM)));
    let c = u.counts();
    assert!(c.adds_up() && c.app == 0 && c.tx == 0, "{c:?}");
    let mut frames = Vec::new();
    while let Some(f) = u.alloc() {
        assert_eq!(f.addr() % 2048, 0, "{:#x}", f.addr());
        frames.push(f);
    }
    let mut addrs: Vec<u64> = frames.iter().map(|f| f.addr()).collect();
    for f in frames {
        u.recycle(f).unwrap();
    }
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(addrs.len() as u64, c.free, "no frame handed out twice");
}

/// A kick that fails while the TX ring is full: the loop ends with the
/// error, the frames it had not queued go back to the pool, the ones on
/// the TX ring stay counted there.
#[test]
fn a_failed_kick_with_a_full_tx_ring_leaks_nothing() {
    let reg = Registry::new();
    let (ha, hb) = (head_for(&reg, "a").unwrap(), head_for(&reg, "b").unwrap());
    let mut u = umem(1024);
    let (ka, kb) = (FakeKernel::new(128), FakeKernel::new(64));
    {
        let mut s = kb.state();
        s.complete_on_kick = false;
        s.kicks_ok = Some(4);
    }
    let a = u.open_fake(&pc("a", 128), 1, ka.clone()).unwrap();
    let b = u.open_fake(&pc("b", 64), 2, kb.clone()).unwrap();
    for _ in 0..128 {
        ka.deliver(60).unwrap();
    }
    let (st, back) = (Stats::default(), Stats::default());
    let mut w = reg.worker().unwrap();
    let lc = LoopConfig::new();
    let mut lw = LoopWorker {
        reg: &reg,
        worker: &mut w,
        stats: &st,
        back: Some(&back),
    };
    let e = forward_loop(&mut u, (a, b), (&ha, &hb), &mut lw, &lc).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    let c = u.counts();
    assert!(c.adds_up(), "{c:?}");
    assert_eq!((c.app, c.tx), (0, 64), "{c:?}");
    assert_eq!(kb.state().tx.len(), 64);
}

/// A generator whose TX never completes stops with `Stalled` after
/// `stall_ms` instead of building and dropping frames forever.
#[test]
fn gen_stalls_out_when_tx_never_drains() {
    let reg = Registry::new();
    let h = head_for(&reg, "g").unwrap();
    let mut u = umem(1024);
    let k = FakeKernel::new(64);
    k.state().complete_on_kick = false;
    let p = u.open_fake(&pc("g", 64).tx_only(), 1, k.clone()).unwrap();
    let st = Stats::default();
    let mut w = reg.worker().unwrap();
    let mut lc = LoopConfig::new();
    lc.stall_ms = 100;
    let gen = GenConfig {
        count: 0,
        ..GenConfig::default()
    };
    let mut lw = LoopWorker {
        reg: &reg,
        worker: &mut w,
        stats: &st,
        back: None,
    };
    let t = Instant::now();
    // A watchdog stops the loop after 10 s: without the stall bound it
    // would return Ok then, and the test fails instead of hanging.
    let stop = lc.stop.clone();
    let e = std::thread::scope(|s| {
        s.spawn(|| {
            while t.elapsed() < Duration::from_secs(10) && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, Ordering::Relaxed);
        });
        let r = gen_loop(&mut u, (p, &h), &mut lw, &gen, &lc);
        stop.store(true, Ordering::Relaxed);
        r
    })
    .unwrap_err();
    assert!(matches!(e, Error::Stalled { ms: 100, .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10));
    let s = st.snapshot();
    assert_eq!(s.tx, 64, "one TX ring's worth went out: {s:?}");
    assert!(
        s.tx_dropped > 0 && s.generated == s.tx + s.tx_dropped,
        "{s:?}"
    );
    let c = u.counts();
    assert!(c.adds_up() && c.app == 0 && c.tx == 64, "{c:?}");
}

/// `Consumed` frames belong to the hook until it gives them back through
/// its worker's outbox: released, or sent on a port; past `held_limit`
/// the oldest go back (counted) and their cookies are stale.
#[test]
fn consumed_frames_go_back_only_through_the_outbox() {
    let reg = Registry::new();
    let h = head_for(&reg, "a").unwrap();
    let outboxes = Arc::new(Outboxes::new(reg.max_workers(), 256));
    let kept = Arc::new(Mutex::new(Vec::new()));
    let (k2, ob2) = (kept.clone(), outboxes.clone());
    let n = std::sync::atomic::AtomicU64::new(0);
    reg.add_hook(
        "take:all",
        PacketKind::Ethernet,
        Dirs::IN,
        move |p: &mut Packet<'_>, ctx: &Ctx<'_>| {
            // Every other packet is answered at once (sent back out of its
            // port); the rest are kept.
            if n.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
                let ob = ob2.get(ctx.worker).unwrap();
                ob.transmit(p.cookie(), p.ifindex()).unwrap();
            } else {
                k2.lock().unwrap().push(p.cookie());
            }
            Verdict::Consumed
        },
    )
    .unwrap();
    reg.link("a", Dir::In, "take:all", Placement::Append)
        .unwrap();
    let mut u = umem(1024);
    let k = FakeKernel::new(64);
    let p = u.open_fake(&pc("a", 64), 7, k.clone()).unwrap();
    let st = Stats::default();
    let mut w = reg.worker().unwrap();
    let mut lc = LoopConfig::new();
    lc.held_limit = 20;
    lc.outboxes = Some(outboxes.clone());
    let mut delivered = Vec::new();
    let u = drive_loop(
        &lc,
        || {
            let mut lw = LoopWorker {
                reg: &reg,
                worker: &mut w,
                stats: &st,
                back: None,
            };
            sink_loop(&mut u, (p, &h), &mut lw, &lc).unwrap();
            u
        },
        || {
            for _ in 0..100 {
                wait_for(|| !k.state().fill.is_empty());
                delivered.push(k.deliver(80).unwrap());
                // One at a time: the held set's order is the delivery order.
                wait_for(|| st.rx.load(Ordering::Relaxed) == delivered.len() as u64);
            }
            wait_for(|| st.reinjected.load(Ordering::Relaxed) == 50);
            let s = st.snapshot();
            assert_eq!((s.in_consumed, s.held_evicted), (100, 30), "{s:?}");
            // The 50 kept: the first 30 were evicted (stale), 20 held.
            let ob = outboxes.get(0).unwrap();
            for c in kept.lock().unwrap().iter() {
                ob.release(*c).unwrap();
            }
            wait_for(|| {
                let s = st.snapshot();
                s.released + s.stale == 50
            });
        },
    );
    let s = st.snapshot();
    assert_eq!((s.released, s.stale), (20, 30), "{s:?}");
    // What went back out is exactly the answered half, in order.
    let sent: Vec<u64> = k.state().sent.iter().map(|&(a, _)| a).collect();
    let answered: Vec<u64> = delivered.iter().copied().step_by(2).collect();
    assert_eq!(sent, answered);
    let c = u.counts();
    assert!(c.adds_up() && c.held == 0 && c.app == 0, "{c:?}");
}

/// A frame token of another UMEM reaches no bytes and panics nowhere: its
/// buffer is empty, and giving it back is refused with an error.
#[test]
fn a_foreign_frame_gets_an_empty_buffer_not_a_panic() {
    let (mut a, b) = (umem(256), umem(256));
    let mut f = a.alloc().unwrap();
    assert_eq!(a.area().buffer(&mut f).len(), 2048);
    assert!(b.area().buffer(&mut f).is_empty());
    assert!(b.area().bytes(&mut f).is_empty());
    let mut b = b;
    let e = b.recycle(f).unwrap_err();
    assert!(matches!(e, Error::ForeignFrame), "{e}");
}
