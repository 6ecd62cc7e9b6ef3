//! Packet traces: records of the links a packet visits, their verdicts
//! and notes, the guard, the bounds.

use super::*;
use crate::trace::{HopNote, Trace, TraceRecord};

/// Drops the packets whose first byte is 2.
fn drop_twos(p: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    if p.frame()[0] == 2 {
        Verdict::Dropped
    } else {
        Verdict::Pass
    }
}

/// A trace of the packets whose first byte is at least `min`.
fn trace_from(min: u8, count: u64, buffer: usize) -> Arc<Trace> {
    Arc::new(Trace::new(
        Some(Box::new(move |p: &Packet<'_>| p.frame()[0] >= min)),
        count,
        buffer,
    ))
}

fn records(t: &Trace) -> Vec<TraceRecord> {
    std::iter::from_fn(|| t.pop()).collect()
}

/// (hook name, verdict, note) of each hop of `r`.
fn hops(t: &Trace, r: &TraceRecord) -> Vec<(String, Verdict, HopNote)> {
    let names = t.chain(r.generation).expect("the chain's names");
    r.hops()
        .iter()
        .map(|h| (names[usize::from(h.index)].clone(), h.verdict, h.note))
        .collect()
}

fn run(head: &Head, w: &mut Worker, firsts: &[u8]) -> Vec<Verdict> {
    let mut bufs: Vec<[u8; 64]> = firsts.iter().map(|&b| [b; 64]).collect();
    let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
    head.run(Dir::In, w, &mut pkts);
    pkts.iter().map(|p| p.verdict()).collect()
}

#[test]
fn a_record_lists_the_links_in_order_with_their_verdicts() {
    let (reg, head) = setup();
    reg.add_hook("d:2", PacketKind::Ethernet, Dirs::BOTH, drop_twos)
        .unwrap();
    for n in ["a:1", "d:2", "c:1"] {
        reg.link("h0", Dir::In, n, Placement::Append).unwrap();
    }
    let t = trace_from(1, 0, 64);
    let tracing = reg.trace("h0", Dir::In, t.clone()).unwrap();
    let mut w = reg.worker().unwrap();
    let v = run(&head, &mut w, &[0, 1, 2, 3]);
    use Verdict::{Dropped, Pass};
    assert_eq!(v, [Pass, Pass, Dropped, Pass]);
    let recs = records(&t);
    assert_eq!(recs.len(), 3, "packets 1, 2, 3 matched");
    let called = |h: &str, v| (h.to_owned(), v, HopNote::Called);
    let all_pass = vec![
        called("a:1", Pass),
        called("d:2", Pass),
        called("c:1", Pass),
    ];
    assert_eq!(hops(&t, &recs[0]), all_pass);
    assert_eq!(
        hops(&t, &recs[1]),
        [called("a:1", Pass), called("d:2", Dropped)],
        "c:1 is not visited after the drop"
    );
    assert_eq!(hops(&t, &recs[2]), all_pass);
    assert_eq!(
        recs.iter().map(|r| r.verdict).collect::<Vec<_>>(),
        [Pass, Dropped, Pass]
    );
    assert_eq!(recs[1].decided_by().map(|h| h.index), Some(1));
    let r = &recs[0];
    assert_eq!((r.worker, r.dir, r.len), (w.index(), Dir::In, 64));
    assert_eq!(r.summary(), &[1u8; 64][..]);
    assert_eq!(r.generation, tracing.generation());
    // Counters stay exact through the split calls.
    let c: Vec<u64> = reg
        .chain("h0", Dir::In)
        .unwrap()
        .iter()
        .map(|l| l.counters.packets)
        .collect();
    assert_eq!(c, [4, 4, 3]);
    assert_eq!(t.stats().traced, 3);
    assert_eq!(t.stats().dropped, 0);
}

#[test]
fn faults_and_quarantined_links_are_named_in_the_record() {
    let (reg, head) = setup();
    let bomb = |p: &mut Packet<'_>, _: &Ctx<'_>| {
        if p.frame()[0] == 0xee {
            panic!("boom (expected by the test)");
        }
        Verdict::Pass
    };
    reg.add_hook("closed:1", PacketKind::Ethernet, Dirs::IN, bomb)
        .unwrap();
    reg.add_hook("open:1", PacketKind::Ethernet, Dirs::IN, bomb)
        .unwrap();
    let closed = LinkOptions {
        placement: Placement::Append,
        fail: FailMode::Closed,
    };
    let open = LinkOptions {
        placement: Placement::Append,
        fail: FailMode::Open,
    };
    reg.link("h0", Dir::In, "open:1", open).unwrap();
    reg.link("h0", Dir::In, "a:1", Placement::Append).unwrap();
    reg.link("h0", Dir::In, "closed:1", closed).unwrap();
    let t = trace_from(0, 0, 64);
    let _tracing = reg.trace("h0", Dir::In, t.clone()).unwrap();
    let mut w = reg.worker().unwrap();
    // 0xee: open:1 faults (fail open: passes), a:1 passes, closed:1
    // faults (fail closed: dropped). 5: both links quarantined now.
    let v = run(&head, &mut w, &[0xee, 5]);
    use Verdict::{Dropped, Pass};
    assert_eq!(v, [Dropped, Dropped]);
    let recs = records(&t);
    assert_eq!(recs.len(), 2);
    let h = |n: &str, v, note| (n.to_owned(), v, note);
    assert_eq!(
        hops(&t, &recs[0]),
        [
            h("open:1", Pass, HopNote::Fault),
            h("a:1", Pass, HopNote::Called),
            h("closed:1", Dropped, HopNote::Fault),
        ]
    );
    assert_eq!(
        hops(&t, &recs[1]),
        [
            h("open:1", Pass, HopNote::Quarantined),
            h("a:1", Pass, HopNote::Called),
            h("closed:1", Dropped, HopNote::Quarantined),
        ]
    );
}

#[test]
fn a_packet_of_another_kind_is_refused_at_the_first_link() {
    let (reg, head) = setup();
    let called = Arc::new(AtomicUsize::new(0));
    let c2 = called.clone();
    reg.add_hook(
        "n:1",
        PacketKind::Ethernet,
        Dirs::IN,
        move |_: &mut Packet<'_>, _: &Ctx<'_>| {
            c2.fetch_add(1, Ordering::SeqCst);
            Verdict::Pass
        },
    )
    .unwrap();
    reg.link("h0", Dir::In, "n:1", Placement::Append).unwrap();
    let t = Arc::new(Trace::new(None, 0, 64));
    let _tracing = reg.trace("h0", Dir::In, t.clone()).unwrap();
    let mut w = reg.worker().unwrap();
    let (mut a, mut b) = ([0u8; 64], [0x45u8; 40]);
    let mut pkts = [
        Packet::new(&mut a),
        Packet::with_kind(&mut b, PacketKind::Ipv4),
    ];
    head.run(Dir::In, &mut w, &mut pkts);
    assert_eq!(pkts[1].verdict(), Verdict::Dropped);
    assert_eq!(called.load(Ordering::SeqCst), 1, "only the Ethernet frame");
    let recs = records(&t);
    assert_eq!(recs.len(), 2);
    assert_eq!(
        hops(&t, &recs[1]),
        [("n:1".to_owned(), Verdict::Dropped, HopNote::RefusedKind)]
    );
    assert_eq!(recs[1].kind, PacketKind::Ipv4);
    assert_eq!(reg.refused().kind_packets, 1);
}

#[test]
fn a_batch_hook_records_the_verdict_it_gave_each_traced_packet() {
    let (reg, head) = setup();
    reg.add_hook("odd:1", PacketKind::Ethernet, Dirs::IN, OddDropper)
        .unwrap();
    reg.link("h0", Dir::In, "a:1", Placement::Append).unwrap();
    reg.link("h0", Dir::In, "odd:1", Placement::Append).unwrap();
    let t = trace_from(2, 0, 64);
    let _tracing = reg.trace("h0", Dir::In, t.clone()).unwrap();
    let mut w = reg.worker().unwrap();
    let v = run(&head, &mut w, &[1, 2, 3, 4]);
    use Verdict::{Dropped, Pass};
    assert_eq!(v, [Pass, Dropped, Pass, Dropped], "as without the trace");
    let recs = records(&t);
    assert_eq!(recs.len(), 3);
    for (r, want) in recs.iter().zip([Dropped, Pass, Dropped]) {
        let hop = r.hops()[1];
        assert_eq!(hop.note, HopNote::Batch);
        assert_eq!(hop.verdict, want);
        assert_eq!(hop.batch, 4, "the call was shown the whole chunk");
        assert_eq!(r.verdict, want);
    }
}

#[test]
fn untraced_runs_record_nothing() {
    let (reg, head) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Append).unwrap();
    let t = trace_from(0, 0, 64);
    let mut w = reg.worker().unwrap();
    // Attached to the other direction: nothing here.
    let other = reg.trace("h0", Dir::Out, t.clone()).unwrap();
    run(&head, &mut w, &[1, 2]);
    assert!(t.pop().is_none());
    other.stop().unwrap().wait();
    // Attached and detached: nothing after.
    let tracing = reg.trace("h0", Dir::In, t.clone()).unwrap();
    run(&head, &mut w, &[1]);
    assert_eq!(records(&t).len(), 1);
    tracing.stop().unwrap().wait();
    run(&head, &mut w, &[1, 2, 3]);
    assert!(t.pop().is_none());
    assert_eq!(t.stats().traced, 1);
    // Matching nothing: nothing recorded, verdicts as usual.
    let none = trace_from(0xff, 0, 64);
    let _tracing = reg.trace("h0", Dir::In, none.clone()).unwrap();
    assert_eq!(run(&head, &mut w, &[1, 2]), [Verdict::Pass; 2]);
    assert!(none.pop().is_none());
    assert_eq!(none.stats().traced, 0);
}

#[test]
fn a_full_queue_drops_records_and_counts_them_never_packets() {
    let (reg, head) = setup();
    reg.add_hook("d:2", PacketKind::Ethernet, Dirs::BOTH, drop_twos)
        .unwrap();
    reg.link("h0", Dir::In, "d:2", Placement::Append).unwrap();
    let t = trace_from(0, 0, 4);
    let _tracing = reg.trace("h0", Dir::In, t.clone()).unwrap();
    let mut w = reg.worker().unwrap();
    let firsts: Vec<u8> = (0..10).map(|i| (i % 3) as u8).collect();
    let v = run(&head, &mut w, &firsts);
    let want: Vec<Verdict> = firsts
        .iter()
        .map(|&b| {
            if b == 2 {
                Verdict::Dropped
            } else {
                Verdict::Pass
            }
        })
        .collect();
    assert_eq!(v, want);
    assert_eq!(records(&t).len(), 4);
    assert_eq!(
        t.stats(),
        crate::TraceStats {
            traced: 10,
            dropped: 6
        }
    );
}

#[test]
fn a_count_stops_the_trace() {
    let (reg, head) = setup();
    reg.link("h0", Dir::In, "a:1", Placement::Append).unwrap();
    let t = trace_from(0, 3, 64);
    let _tracing = reg.trace("h0", Dir::In, t.clone()).unwrap();
    let mut w = reg.worker().unwrap();
    run(&head, &mut w, &[1, 2]);
    assert!(!t.done());
    run(&head, &mut w, &[3, 4, 5]);
    assert!(t.done());
    let firsts: Vec<u8> = records(&t).iter().map(|r| r.summary()[0]).collect();
    assert_eq!(firsts, [1, 2, 3]);
}

#[test]
fn the_guard_detaches_the_trace_however_it_ends() {
    let (reg, head) = setup();
    let t = trace_from(0, 0, 64);
    assert!(matches!(
        reg.trace("nope", Dir::In, t.clone()),
        Err(Error::NoSuchHead(_))
    ));
    let g = reg.trace("h0", Dir::In, t.clone()).unwrap();
    assert!(head.is_hooked(Dir::In), "a traced empty chain runs");
    assert!(matches!(
        reg.trace("h0", Dir::In, trace_from(0, 0, 1)),
        Err(Error::AlreadyTraced { .. })
    ));
    let mut w = reg.worker().unwrap();
    assert_eq!(run(&head, &mut w, &[7]), [Verdict::Pass]);
    let r = records(&t);
    assert_eq!((r.len(), r[0].hops().len()), (1, 0), "no link visited");
    drop(g);
    assert!(!head.is_hooked(Dir::In));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g = reg.trace("h0", Dir::In, t.clone()).unwrap();
        panic!("a bug while tracing (expected by the test)");
    }));
    assert!(r.is_err());
    assert!(!head.is_hooked(Dir::In), "the unwinding detached it");
    let ipv4 = reg.register_head("v4", PacketKind::Ipv4, Dirs::IN).unwrap();
    assert!(matches!(
        reg.trace(ipv4.name(), Dir::Out, t),
        Err(Error::DirUnsupportedByHead { .. })
    ));
}
