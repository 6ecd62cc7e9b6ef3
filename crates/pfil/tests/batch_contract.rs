//! What a filter's own code cannot break: a batch hook that moves packets
//! around (review L6.1), a filter whose `batched()` or `spec()` uses the
//! registry (review L6.6: they ran under the writer lock).

use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use pfil::{
    Ctx, Dir, Dirs, FailMode, Filter, LinkOptions, Packet, PacketKind, Placement, Registry, Verdict,
};

/// A batch hook that drops the packet at index 0, consumes the one at
/// index 1, and then reverses the batch (safe Rust: the slice is its to
/// reorder).
struct Reverser;

impl Filter for Reverser {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
    fn filter_batch(&self, pkts: &mut [Packet<'_>], _: &Ctx<'_>) {
        if let Some(p) = pkts.get_mut(0) {
            p.set_verdict(Verdict::Dropped);
        }
        if let Some(p) = pkts.get_mut(1) {
            p.set_verdict(Verdict::Consumed);
        }
        pkts.reverse();
    }
    fn batched(&self) -> bool {
        true
    }
}

/// Runs `n` frames (frame `i` filled with `i`, cookie `100 + i`) through
/// head `h`'s chain of `hooks` (in order): each packet's cookie, first
/// byte and verdict afterwards, the links' counters, and whether a
/// contract violation was counted.
fn run_chain(
    hooks: Vec<(&str, Arc<dyn Filter>)>,
    n: u8,
) -> (Vec<(u64, u8, Verdict)>, Vec<pfil::LinkInfo>, bool) {
    let (got, chain, violations) = run_chain_with(hooks, n, FailMode::Open);
    (got, chain, violations > 0)
}

/// [`run_chain`] with every link of fail mode `fail`; how many contract
/// violations were counted.
fn run_chain_with(
    hooks: Vec<(&str, Arc<dyn Filter>)>,
    n: u8,
    fail: FailMode,
) -> (Vec<(u64, u8, Verdict)>, Vec<pfil::LinkInfo>, u64) {
    let reg = Registry::with_max_workers(1);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    for (name, f) in hooks {
        reg.add_hook_shared(name, PacketKind::Ethernet, Dirs::IN, f)
            .unwrap();
        let opts = LinkOptions {
            placement: Placement::Append,
            fail,
        };
        reg.link("h", Dir::In, name, opts).unwrap();
    }
    let mut w = reg.worker().unwrap();
    let mut bufs: Vec<[u8; 60]> = (0..n).map(|i| [i; 60]).collect();
    let mut pkts: Vec<Packet<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| Packet::new(b).with_cookie(100 + i as u64))
        .collect();
    let before = pfil::witness::thread_violations();
    head.run(Dir::In, &mut w, &mut pkts);
    let got = pkts
        .iter()
        .map(|p| (p.cookie(), p.frame()[0], p.verdict()))
        .collect();
    let violations = pfil::witness::thread_violations() - before;
    (got, reg.chain("h", Dir::In).unwrap(), violations)
}

#[test]
fn a_batch_hook_that_reorders_packets_has_its_verdicts_put_on_the_right_frames() {
    let (got, chain, violated) = run_chain(vec![("rev:x", Arc::new(Reverser))], 5);
    // Each index holds the packet the driver put there, with its verdict.
    assert_eq!(
        got,
        [
            (100, 0, Verdict::Dropped),
            (101, 1, Verdict::Consumed),
            (102, 2, Verdict::Pass),
            (103, 3, Verdict::Pass),
            (104, 4, Verdict::Pass),
        ]
    );
    assert!(violated, "counted");
    let c = chain[0].counters;
    assert_eq!((c.packets, c.dropped, c.consumed, c.passed), (5, 1, 1, 3));
}

#[test]
fn a_reordering_batch_hook_is_put_back_in_full_and_partial_chunks() {
    // 600 packets: the chain hands them over in chunks of 256, 256 and 88;
    // the snapshot of each chunk is written exactly as far as it goes.
    let reg = Registry::with_max_workers(1);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    reg.add_hook("rev:x", PacketKind::Ethernet, Dirs::IN, Reverser)
        .unwrap();
    reg.link("h", Dir::In, "rev:x", Placement::Prepend).unwrap();
    let mut w = reg.worker().unwrap();
    let mut bufs: Vec<[u8; 60]> = (0..600u32).map(|i| [(i % 251) as u8; 60]).collect();
    let mut pkts: Vec<Packet<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| Packet::new(b).with_cookie(i as u64))
        .collect();
    head.run(Dir::In, &mut w, &mut pkts);
    for (i, p) in pkts.iter().enumerate() {
        let want = match i % 256 {
            0 => Verdict::Dropped,
            1 => Verdict::Consumed,
            _ => Verdict::Pass,
        };
        assert_eq!(
            (p.cookie(), p.frame()[0], p.verdict()),
            (i as u64, (i % 251) as u8, want),
            "index {i}"
        );
    }
    let c = reg.chain("h", Dir::In).unwrap()[0].counters;
    assert_eq!(
        (c.packets, c.dropped, c.consumed, c.passed),
        (600, 3, 3, 594)
    );
}

/// A batch hook that stops the first two packets it is shown (an earlier
/// hook's work in the test below), then breaks every rule a batch hook
/// can break in safe Rust: sets every verdict to `Pass` (also the final
/// ones it was not shown), replaces the packet at index 3 by one of its
/// own, and reverses the batch.
struct Vandal;

impl Filter for Vandal {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
    fn filter_batch(&self, pkts: &mut [Packet<'_>], _: &Ctx<'_>) {
        for p in pkts.iter_mut() {
            p.set_verdict(Verdict::Pass);
        }
        if pkts.len() > 3 {
            let own: &'static mut [u8] = Box::leak(Box::new([0xee; 60]));
            pkts[3] = Packet::new(own).with_cookie(999);
        }
        pkts.reverse();
    }
    fn batched(&self) -> bool {
        true
    }
}

/// A batch hook that drops the packet at index 0 and consumes the one at
/// index 1, and leaves the rest.
struct Stopper;

impl Filter for Stopper {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
    fn filter_batch(&self, pkts: &mut [Packet<'_>], _: &Ctx<'_>) {
        pkts[0].set_verdict(Verdict::Dropped);
        pkts[1].set_verdict(Verdict::Consumed);
    }
    fn batched(&self) -> bool {
        true
    }
}

#[test]
fn a_batch_hook_that_replaces_reorders_and_revives_packets_is_repaired() {
    let (got, chain, violated) = run_chain(
        vec![
            ("stop:x", Arc::new(Stopper)),
            ("vandal:x", Arc::new(Vandal)),
        ],
        6,
    );
    // The final verdicts of the first hook stand; every packet the driver
    // placed is back at its index, but the one the vandal replaced: the
    // stranger there is dropped (the driver's frame 3 was shown as `Pass`).
    assert_eq!(
        got,
        [
            (100, 0, Verdict::Dropped),
            (101, 1, Verdict::Consumed),
            (102, 2, Verdict::Pass),
            (999, 0xee, Verdict::Dropped),
            (104, 4, Verdict::Pass),
            (105, 5, Verdict::Pass),
        ]
    );
    assert!(violated, "counted");
    assert_eq!(chain[1].hook, "vandal:x");
    let c = chain[1].counters;
    // Shown 4, of which the stranger's index is dropped.
    assert_eq!((c.packets, c.dropped, c.consumed, c.passed), (4, 1, 0, 3));
}

/// A batch hook that gives the packet at index 2 another cookie (the
/// frame a driver or a sending hook would name by it) and, when `panics`,
/// replaces the one at index 3 by one of its own and panics.
struct Renamer {
    panics: bool,
}

impl Filter for Renamer {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
    fn filter_batch(&self, pkts: &mut [Packet<'_>], _: &Ctx<'_>) {
        let empty: &'static mut [u8] = Box::leak(Box::new([]));
        let p = std::mem::replace(&mut pkts[2], Packet::new(empty));
        pkts[2] = p.with_cookie(7);
        if self.panics {
            let own: &'static mut [u8] = Box::leak(Box::new([0xee; 60]));
            pkts[3] = Packet::new(own).with_cookie(999);
            panic!("renamer");
        }
    }
    fn batched(&self) -> bool {
        true
    }
}

/// `violations` is `want`, or one more with the `witness` feature, which
/// also reports a batch descheduled past its limit (a panicking hook's
/// backtrace can take that long).
fn assert_violations(violations: u64, want: u64) {
    let slow = u64::from(cfg!(feature = "witness"));
    assert!(
        (want..=want + slow).contains(&violations),
        "{violations} violations, want {want}"
    );
}

#[test]
fn a_batch_hook_that_renames_a_packet_has_it_treated_as_a_stranger() {
    let (got, chain, violations) = run_chain_with(
        vec![("rename:x", Arc::new(Renamer { panics: false }))],
        4,
        FailMode::Open,
    );
    // Index 2 holds the driver's frame under a cookie the driver did not
    // give: dropped (it was shown as `Pass`), counted once.
    assert_eq!(got[2], (7, 2, Verdict::Dropped));
    assert_eq!(got[3], (103, 3, Verdict::Pass));
    assert_violations(violations, 1);
    let c = chain[0].counters;
    assert_eq!((c.packets, c.dropped, c.passed), (4, 1, 3));
}

#[test]
fn a_fail_closed_batch_hook_that_panics_after_breaking_the_contract_is_counted_once() {
    let (got, chain, violations) = run_chain_with(
        vec![("rename:x", Arc::new(Renamer { panics: true }))],
        5,
        FailMode::Closed,
    );
    // Every packet it was shown is dropped (it died on one of them); the
    // renamed and the replaced index are each one violation, not two.
    assert!(got.iter().all(|g| g.2 == Verdict::Dropped), "{got:?}");
    assert_eq!((got[2].0, got[3].0), (7, 999));
    assert_violations(violations, 2);
    let c = chain[0].counters;
    assert_eq!((c.packets, c.dropped, c.faults), (5, 5, 1));
}

/// A batch hook that pushes a 4-byte tag in front of every other packet
/// (`adjust_head`, as an XDP program's `bpf_xdp_adjust_head`) and trims
/// the last byte of the rest: it moves frames, not packets.
struct Tagger;

impl Filter for Tagger {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
    fn filter_batch(&self, pkts: &mut [Packet<'_>], _: &Ctx<'_>) {
        for (i, p) in pkts.iter_mut().enumerate() {
            if i % 2 == 0 {
                p.adjust_head(-4).unwrap();
                p.frame_mut()[..4].copy_from_slice(b"TAG!");
            } else {
                p.adjust_tail(-1).unwrap();
            }
        }
    }
    fn batched(&self) -> bool {
        true
    }
}

#[test]
fn a_batch_hook_that_moves_frames_in_their_buffers_keeps_every_packet() {
    let reg = Registry::with_max_workers(1);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    reg.add_hook("tag:x", PacketKind::Ethernet, Dirs::IN, Tagger)
        .unwrap();
    reg.link("h", Dir::In, "tag:x", Placement::Prepend).unwrap();
    let mut w = reg.worker().unwrap();
    let mut bufs: Vec<[u8; 80]> = (0..300u32).map(|i| [(i % 251) as u8; 80]).collect();
    let mut pkts: Vec<Packet<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| Packet::in_buffer(b, 16, 60).unwrap().with_cookie(i as u64))
        .collect();
    let before = pfil::witness::thread_violations();
    head.run(Dir::In, &mut w, &mut pkts);
    for (i, p) in pkts.iter().enumerate() {
        let (room, len, first) = if i % 2 == 0 {
            (12, 64, b'T')
        } else {
            (16, 59, (i % 251) as u8)
        };
        assert_eq!(
            (p.cookie(), p.verdict(), p.headroom(), p.len(), p.frame()[0]),
            (i as u64, Verdict::Pass, room, len, first),
            "index {i}"
        );
    }
    assert_eq!(
        pfil::witness::thread_violations(),
        before,
        "no contract broken"
    );
    let c = reg.chain("h", Dir::In).unwrap()[0].counters;
    assert_eq!((c.packets, c.passed), (300, 300));
}

/// A filter that asks the registry about itself from `batched()` and
/// `spec()`: user code the registry must call without its lock.
struct Curious(Arc<OnceLock<Registry>>);

impl Filter for Curious {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
    fn batched(&self) -> bool {
        self.0.get().map(|r| r.hooks().len()).unwrap_or(0) > 1000
    }
    fn spec(&self) -> Option<String> {
        let n = self.0.get().map(|r| r.generation()).unwrap_or(0);
        let _ = self.0.get().map(|r| r.heads());
        Some(format!("curious:{n}"))
    }
}

#[test]
fn a_filter_that_uses_the_registry_from_batched_or_spec_does_not_deadlock_it() {
    let (tx, rx) = mpsc::channel();
    // On a thread: before the fix this deadlocked (the writer lock is not
    // reentrant), and the test fails on the time-out below instead of
    // hanging.
    std::thread::spawn(move || {
        let reg = Registry::new();
        let cell = Arc::new(OnceLock::new());
        let _ = cell.set(reg.clone());
        reg.register_head("h", PacketKind::Ethernet, Dirs::IN)
            .unwrap();
        reg.add_hook(
            "curious:a",
            PacketKind::Ethernet,
            Dirs::IN,
            Curious(cell.clone()),
        )
        .unwrap();
        reg.replace_filter("curious:a", Curious(cell.clone()))
            .unwrap();
        let spec = reg.hook("curious:a").unwrap().spec;
        let listed = reg.hooks().len();
        let _ = tx.send((spec, listed));
    });
    let (spec, listed) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the registry deadlocked on a filter's batched() or spec()");
    assert_eq!(listed, 1);
    assert!(spec.is_some_and(|s| s.starts_with("curious:")));
}
