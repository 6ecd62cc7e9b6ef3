use super::*;
use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Verdict};

fn drop7(reg: &Registry) {
    reg.add_hook(
        "udp:drop7",
        PacketKind::Ethernet,
        Dirs::BOTH,
        |p: &mut Packet<'_>, _: &Ctx<'_>| match p.headers().and_then(|h| h.transport) {
            Some(t) if t.dst_port == 7 => Verdict::Dropped,
            _ => Verdict::Pass,
        },
    )
    .unwrap();
}

/// Run `gen`'s frames on one worker of `reg`: a sink on `names[0]`'s
/// head, or a forwarder from it to `names[1]`'s. The loop's counters and
/// the port, for its counts.
fn run(
    reg: &Registry,
    names: &[&str],
    gen: &GenConfig,
    lc: &LoopConfig,
) -> (crate::stats::StatsSnapshot, SyntheticPort) {
    let a = head_for(reg, names[0]).unwrap();
    let mut port = SyntheticPort::new(gen, names, Origin::default(), 0).unwrap();
    let mut w = reg.worker().unwrap();
    let stats = Stats::default();
    let mut lw = LoopWorker {
        reg,
        worker: &mut w,
        stats: &stats,
        back: None,
    };
    match names.get(1) {
        Some(b) => {
            let b = head_for(reg, b).unwrap();
            let ends = (PortId::new(0), PortId::new(1));
            forward_loop(&mut port, ends, (&a, &b), &mut lw, lc).unwrap();
        }
        None => sink_loop(&mut port, (PortId::new(0), &a), &mut lw, lc).unwrap(),
    }
    (stats.snapshot(), port)
}

#[test]
fn synthetic_counts_and_filters() {
    let reg = Registry::new();
    head_for(&reg, "syn0").unwrap();
    drop7(&reg);
    reg.link("syn0", Dir::In, "udp:drop7", Placement::Prepend)
        .unwrap();
    let gen = GenConfig {
        count: 10_000,
        dst_ports: vec![7, 8, 9, 10],
        ..GenConfig::default()
    };
    let (s, port) = run(&reg, &["syn0", "syn1"], &gen, &LoopConfig::new());
    assert_eq!(s.generated, 10_000);
    assert_eq!(s.rx, 10_000);
    assert_eq!(s.in_dropped, 2_500);
    assert_eq!(s.tx, 7_500);
    assert_eq!(port.sent(), 7_500);
    assert_eq!(s.generated, s.tx + s.filtered());
    let c = port.counts();
    assert!(c.adds_up() && c.free == c.total, "{c:?}");
}

/// A frame's span stays inside its buffer with a headroom a packet
/// can keep exact (at most 64 KiB - 1): `set_span` refuses the rest,
/// so the packets the loops build over frames (without a check,
/// `Port::packet`) are always what `Packet::in_buffer` would build.
#[test]
fn frame_spans_stay_where_packets_can_be_built_over_them() {
    let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let gen = GenConfig {
        count: 1,
        replay: Some(Arc::new(vec![big.clone()])),
        ..GenConfig::default()
    };
    let mut port = SyntheticPort::new(&gen, &["syn0"], Origin::default(), 0).unwrap();
    let mut out = Batch::new();
    assert_eq!(port.rx(PortId::new(0), &mut out), 1);
    let mut f = out.pop().unwrap();
    let size = port.buffer(&mut f).len();
    assert_eq!(size, 100_000 + SYNTHETIC_HEADROOM + SYNTHETIC_TAILROOM);
    let check = |port: &SyntheticPort, f: &mut SyntheticFrame, start: usize, len: usize| {
        let want = {
            let (buf, s, l) = port.room(f);
            assert_eq!((s, l), (start, len));
            let p = Packet::in_buffer(buf, s, l).unwrap();
            (p.frame().to_vec(), p.headroom(), p.tailroom())
        };
        let p = port.packet(f);
        assert_eq!((p.frame().to_vec(), p.headroom(), p.tailroom()), want);
    };
    check(&port, &mut f, SYNTHETIC_HEADROOM, big.len());
    assert_eq!(port.packet(&mut f).frame(), &big[..]);
    // Past the end, overflowing, or too far in: refused, unchanged.
    for (start, len) in [
        (0, size + 1),
        (size, 1),
        (1, usize::MAX),
        (65_536, 10),
        (size, 0),
    ] {
        assert!(!port.set_span(&mut f, start, len), "{start}+{len}");
        check(&port, &mut f, SYNTHETIC_HEADROOM, big.len());
    }
    for (start, len) in [(0, size), (65_535, size - 65_535), (300, 0), (300, 10)] {
        assert!(port.set_span(&mut f, start, len), "{start}+{len}");
        check(&port, &mut f, start, len);
    }
    assert!(port.set_len(&mut f, 60));
    check(&port, &mut f, 0, 60);
    port.recycle(f);
    assert!(port.counts().adds_up());
}

/// A sink whose hook drops some frames gives every frame back (the
/// batch whole) and counts what passed and what was dropped apart.
#[test]
fn a_sink_counts_passed_and_dropped_apart() {
    let reg = Registry::new();
    head_for(&reg, "syn0").unwrap();
    let n = std::sync::Mutex::new(0u64);
    reg.add_hook(
        "third",
        PacketKind::Ethernet,
        Dirs::BOTH,
        move |_: &mut Packet<'_>, _: &Ctx<'_>| {
            let mut n = n.lock().unwrap();
            *n += 1;
            if *n % 3 == 0 {
                Verdict::Dropped
            } else {
                Verdict::Pass
            }
        },
    )
    .unwrap();
    reg.link("syn0", Dir::In, "third", Placement::Prepend)
        .unwrap();
    let gen = GenConfig {
        count: 10_000,
        ..GenConfig::default()
    };
    let (s, port) = run(&reg, &["syn0"], &gen, &LoopConfig::new());
    assert_eq!(
        (s.rx, s.passed, s.in_dropped),
        (10_000, 6_667, 3_333),
        "{s:?}"
    );
    let c = port.counts();
    assert!(c.adds_up() && c.free == c.total, "{c:?}");
}

/// A whole batch recycled at once (a sink's) goes back to the free
/// list frame for frame: the counts add up, and the frames come out
/// again, each once, with their own buffers.
#[test]
fn a_batch_recycled_whole_comes_back_frame_for_frame() {
    let gen = GenConfig {
        count: 1_000,
        ..GenConfig::default()
    };
    let mut port = SyntheticPort::new(&gen, &["syn0"], Origin::default(), 200).unwrap();
    let mut ever = std::collections::BTreeSet::new();
    for round in 0..8 {
        let mut seen = std::collections::BTreeSet::new();
        let mut batch = Batch::new();
        let n = port.rx(PortId::new(0), &mut batch);
        assert_eq!(n, BATCH, "round {round}");
        for f in batch.iter_mut() {
            seen.insert(f.addr());
            let b = port.buffer(f);
            b[0] = round;
        }
        assert_eq!(seen.len(), BATCH, "a frame twice in one batch");
        ever.extend(seen);
        let c = port.counts();
        assert_eq!(c.free + BATCH as u64, c.total, "{c:?}");
        port.recycle_all(&mut batch);
        assert!(batch.is_empty());
        let c = port.counts();
        assert!(c.adds_up() && c.free == c.total, "{c:?}");
    }
    // The free list is last in, first out: the same 64 frames (still
    // in cache) serve every batch.
    assert_eq!(ever.len(), BATCH);
}

/// Frames a hook grew into the headroom (an 8-byte tag) and the
/// tailroom (4 bytes) are forwarded grown: the port sends what the
/// packet holds, and the bytes the hook wrote are where it wrote them.
#[test]
fn grown_frames_are_forwarded_grown() {
    let reg = Registry::new();
    head_for(&reg, "syn0").unwrap();
    head_for(&reg, "syn1").unwrap();
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen2 = seen.clone();
    reg.add_hook(
        "grow",
        PacketKind::Ethernet,
        Dirs::BOTH,
        |p: &mut Packet<'_>, _: &Ctx<'_>| {
            assert_eq!((p.headroom(), p.len()), (SYNTHETIC_HEADROOM, 64));
            assert!(p.tailroom() >= SYNTHETIC_TAILROOM);
            if p.adjust_head(-8).is_err() || p.adjust_tail(4).is_err() {
                return Verdict::Dropped;
            }
            p.frame_mut()[..8].copy_from_slice(b"PFILTAG!");
            Verdict::Pass
        },
    )
    .unwrap();
    reg.add_hook(
        "look",
        PacketKind::Ethernet,
        Dirs::BOTH,
        move |p: &mut Packet<'_>, _: &Ctx<'_>| {
            if p.frame().starts_with(b"PFILTAG!") && p.len() == 76 {
                seen2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Verdict::Pass
        },
    )
    .unwrap();
    reg.link("syn0", Dir::In, "grow", Placement::Prepend)
        .unwrap();
    reg.link("syn1", Dir::Out, "look", Placement::Prepend)
        .unwrap();
    let gen = GenConfig {
        count: 1_000,
        size: 64,
        ..GenConfig::default()
    };
    let (s, port) = run(&reg, &["syn0", "syn1"], &gen, &LoopConfig::new());
    assert_eq!((s.rx, s.tx, s.refused), (1_000, 1_000, 0), "{s:?}");
    assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 1_000);
    assert_eq!(port.sent_bytes(), 1_000 * 76);
}

/// Consumed frames are held under their cookies, released through the
/// outbox, and evicted past the bound; the pool adds up at the end.
#[test]
fn consumed_frames_are_held_and_given_back() {
    use crate::outbox::Outboxes;
    let reg = Registry::new();
    head_for(&reg, "syn0").unwrap();
    let ob = Arc::new(Outboxes::new(reg.max_workers(), 1024));
    let ob2 = ob.clone();
    // Consume every other frame; release half of those at once, keep
    // the others (they pile up past the bound and are evicted).
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    reg.add_hook(
        "take:half",
        PacketKind::Ethernet,
        Dirs::BOTH,
        move |p: &mut Packet<'_>, cx: &Ctx<'_>| {
            let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i % 2 == 0 {
                return Verdict::Pass;
            }
            if i % 4 == 1 {
                let _ = ob2.get(cx.worker).unwrap().release(p.cookie());
            }
            Verdict::Consumed
        },
    )
    .unwrap();
    reg.link("syn0", Dir::In, "take:half", Placement::Prepend)
        .unwrap();
    let gen = GenConfig {
        count: 20_000,
        ..GenConfig::default()
    };
    let lc = LoopConfig {
        held_limit: 32,
        outboxes: Some(ob),
        ..LoopConfig::new()
    };
    let (s, port) = run(&reg, &["syn0"], &gen, &lc);
    assert_eq!(s.rx, 20_000);
    assert_eq!((s.in_consumed, s.passed), (10_000, 10_000));
    assert!(
        s.in_consumed > 0 && s.released > 0 && s.held_evicted > 0,
        "{s:?}"
    );
    let c = port.counts();
    assert!(c.adds_up() && c.app == 0 && c.held <= 32, "{c:?}");
    assert_eq!(
        s.released + s.held_evicted + c.held,
        s.in_consumed,
        "every consumed frame released, evicted or still held: {s:?} {c:?}"
    );
}

#[test]
fn spawned_synthetic_workers_end_at_their_count() {
    let reg = Registry::new();
    let gen = GenConfig {
        count: 5_000,
        ..GenConfig::default()
    };
    let r = spawn_synthetic(&reg, "syn0", None, 2, gen, LoopConfig::new()).unwrap();
    let reports = r.wait().unwrap();
    assert_eq!(reports.len(), 2);
    for rep in &reports {
        assert_eq!(rep.built, 5_000);
        assert!(rep.counts.adds_up() && rep.counts.app == 0, "{rep:?}");
    }
}
