//! loom model checks of the publish/retire protocol: a reader pinned on one
//! generation while a writer unlinks or removes the hook it is running; and
//! (with `--cfg pfil_loom`, where the registry's own locks and atomics are
//! loom's too) two readers faulting a hook while a writer reaps the
//! quarantine, and two control threads draining the graveyard at once.
//!
//! `RUSTFLAGS="--cfg crossbeam_loom --cfg pfil_loom" LOOM_MAX_PREEMPTIONS=2 \
//!  cargo test -p pfil --test loom --release`
//!
//! Every model asserts what must hold in every interleaving, unconditionally:
//! once the readers are joined no pin is left, so the grace period must end
//! within a few epoch advances (`drive`), and when it does the hook must be
//! gone and the counters final.
#![cfg(crossbeam_loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use pfil::{Ctx, Dir, Dirs, Filter, Packet, PacketKind, Placement, Registry, Verdict};
#[cfg(pfil_loom)]
use pfil::{FailMode, LinkOptions};

/// Counts its runs; flags a run after its own drop began (use after retire).
struct Canary {
    dropped: Arc<AtomicBool>,
    runs: Arc<AtomicUsize>,
    bad: Arc<AtomicUsize>,
}

impl Filter for Canary {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        if self.dropped.load(SeqCst) {
            self.bad.fetch_add(1, SeqCst);
        }
        self.runs.fetch_add(1, SeqCst);
        Verdict::Dropped
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.dropped.store(true, SeqCst);
    }
}

fn setup() -> (
    Registry,
    Arc<AtomicBool>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
) {
    let reg = Registry::with_max_workers(2);
    reg.register_head("h", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let runs = Arc::new(AtomicUsize::new(0));
    let bad = Arc::new(AtomicUsize::new(0));
    let c = Canary {
        dropped: dropped.clone(),
        runs: runs.clone(),
        bad: bad.clone(),
    };
    reg.add_hook("can:ary", PacketKind::Ethernet, Dirs::IN, c)
        .unwrap();
    reg.link("h", Dir::In, "can:ary", Placement::Prepend)
        .unwrap();
    (reg, dropped, runs, bad)
}

/// Run the reader: one packet through head `h`; returns its verdict.
///
/// The head and worker are taken before the thread starts: both take a
/// registry mutex, which without `pfil_loom` is not loom's (loom cannot
/// schedule around it), and with it would only add interleavings that do
/// not matter here.
fn reader(reg: Registry) -> thread::JoinHandle<Verdict> {
    let head = reg.head("h").unwrap();
    let mut w = reg.worker().unwrap();
    thread::spawn(move || {
        let mut f = [0u8; 8];
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f))
    })
}

/// Help the epoch along until `done` or give up (loom needs bounded loops).
/// With no other thread pinned, each round advances the epoch once and
/// collects what expired: 8 rounds are plenty for what the models retire.
///
/// Each round also yields: loom's `join` returns when the thread's closure
/// has, *before* its thread-locals are dropped, and dropping crossbeam's
/// thread-local participant pins once more. Without the yield, loom may
/// keep a joined thread parked inside that last pin while we spin here
/// (std's `join` waits for thread-local destructors; loom's does not).
fn drive(done: impl Fn() -> bool) -> bool {
    for _ in 0..8 {
        if done() {
            return true;
        }
        crossbeam_epoch::pin().flush();
        thread::yield_now();
    }
    done()
}

#[test]
fn remove_hook_never_frees_under_a_reader() {
    loom::model(|| {
        let (reg, dropped, runs, bad) = setup();
        let r = reader(reg.clone());
        let ticket = reg.remove_hook("can:ary").unwrap();
        // Maybe complete already, while the reader may still run: then
        // the hook must be gone (the reader's canary checks it never runs
        // dropped).
        if ticket.is_complete() {
            assert!(dropped.load(SeqCst), "ticket completed before the drop");
        }
        let v = r.join().unwrap();
        // The reader saw either generation, never a mix: dropped iff it ran.
        assert_eq!(v == Verdict::Dropped, runs.load(SeqCst) == 1);
        assert_eq!(bad.load(SeqCst), 0, "hook ran after it was dropped");
        // No reader left: the grace period must end.
        assert!(
            drive(|| ticket.is_complete()),
            "no reader is pinned, yet the removal never completed"
        );
        assert!(dropped.load(SeqCst), "ticket completed before the drop");
        assert_eq!(ticket.counters().packets, runs.load(SeqCst) as u64);
    });
}

#[test]
fn nothing_runs_a_link_after_its_ticket_completed() {
    loom::model(|| {
        let (reg, _dropped, runs, bad) = setup();
        let r = reader(reg.clone());
        let ticket = reg.unlink("h", Dir::In, "can:ary").unwrap();
        // Drive the grace period while the reader may still be running.
        let at_completion =
            drive(|| ticket.is_complete()).then(|| (runs.load(SeqCst), ticket.counters()));
        let v = r.join().unwrap();
        assert_eq!(v == Verdict::Dropped, runs.load(SeqCst) == 1);
        assert_eq!(bad.load(SeqCst), 0);
        // No reader left: the grace period must end, with the final count.
        assert!(
            drive(|| ticket.is_complete()),
            "no reader is pinned, yet the unlink never completed"
        );
        assert_eq!(ticket.counters().packets, runs.load(SeqCst) as u64);
        assert_eq!(ticket.counters().shown, runs.load(SeqCst) as u64);
        if let Some((n, counters)) = at_completion {
            assert_eq!(
                n,
                runs.load(SeqCst),
                "the link ran after its ticket completed"
            );
            assert_eq!(
                counters,
                ticket.counters(),
                "counters moved after completion"
            );
            assert_eq!(counters.packets, n as u64);
        }
    });
}

/// Two control threads drain the graveyard at once (a ticket's wait and the
/// housekeeping's `reclaim`) while the epoch buries the removed hook's
/// generation: the filter is dropped, once, and the ticket completes.
/// Needs `pfil_loom`: the drains contend on the graveyard's mutex, which
/// must be loom's for loom to schedule around it.
#[cfg(pfil_loom)]
#[test]
fn two_drains_race_and_free_a_removed_filter_once() {
    loom::model(|| {
        let (reg, dropped, _runs, bad) = setup();
        let ticket = reg.remove_hook("can:ary").unwrap();
        let r2 = reg.clone();
        let housekeeping = thread::spawn(move || {
            r2.reclaim();
            r2.reclaim();
        });
        let early = drive(|| ticket.is_complete());
        housekeeping.join().unwrap();
        assert!(
            early || drive(|| ticket.is_complete()),
            "no reader is pinned, yet the removal never completed"
        );
        assert!(dropped.load(SeqCst), "ticket completed before the drop");
        assert_eq!(bad.load(SeqCst), 0);
    });
}

/// A fail-closed hook that panics on frames starting with 9 and counts its
/// calls; a run after its link's ticket completed is flagged.
///
/// Its bookkeeping is std atomics, invisible to loom: it is read only after
/// the readers are joined, and loom need not explore its interleavings.
#[cfg(pfil_loom)]
struct Faulty {
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    retired: std::sync::Arc<std::sync::atomic::AtomicBool>,
    bad: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

#[cfg(pfil_loom)]
impl Filter for Faulty {
    fn filter(&self, p: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        if self.retired.load(SeqCst) {
            self.bad.fetch_add(1, SeqCst);
        }
        self.calls.fetch_add(1, SeqCst);
        if p.frame()[0] == 9 {
            std::panic::panic_any(Quiet);
        }
        Verdict::Pass
    }
}

/// The panic payload of `Faulty`, kept out of the test output.
#[cfg(pfil_loom)]
struct Quiet;

/// Publish + retire + quarantine reaping, with the registry's own locks and
/// atomics on loom: reader A's packet makes hook `bad:x` panic (fail-closed,
/// quarantined), reader B runs a packet at the same time, the writer (the
/// main thread) reaps the quarantine concurrently; after the readers are
/// done an unrelated write leaves the link as it was (a fail-closed link
/// leaves only by an explicit reap), and the writer reaps once more.
///
/// Holds in every interleaving: A's packet is dropped; B's is dropped iff it
/// met the quarantined link; the link is reaped exactly once over both
/// reaps; its ticket completes once the readers are done, and then its
/// counters are final and exact: what the hook was called with, plus what
/// the quarantine dropped unseen; the hook never runs after that.
///
/// Kept small for loom: one link; the readers wait, done but alive, until
/// the writer's checks are over (a thread's exit runs crossbeam's
/// participant teardown, which would otherwise interleave with all of
/// them: 30 times the interleavings), and hand their workers back to the
/// main thread.
#[cfg(pfil_loom)]
#[test]
fn two_readers_fault_while_a_writer_reaps() {
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<Quiet>().is_none() {
            quiet(info);
        }
    }));
    // `Builder::check`, not `loom::model`: the latter installs a tracing
    // subscriber that formats our quarantine event in every iteration.
    loom::model::Builder::new().check(|| {
        let reg = Registry::with_max_workers(3);
        let mut w = reg.worker().unwrap();
        let head = reg
            .register_head("h", PacketKind::Ethernet, Dirs::IN)
            .unwrap();
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let retired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let bad = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let faulty = Faulty {
            calls: calls.clone(),
            retired: retired.clone(),
            bad: bad.clone(),
        };
        reg.add_hook("bad:x", PacketKind::Ethernet, Dirs::IN, faulty)
            .unwrap();
        let closed = LinkOptions {
            placement: Placement::Prepend,
            fail: FailMode::Closed,
        };
        reg.link("h", Dir::In, "bad:x", closed).unwrap();
        let (done_tx, done_rx) = loom::sync::mpsc::channel();
        // Held by the writer until its checks are over; the readers block on
        // it when done (blocked, a thread costs loom no interleavings).
        let gate = Arc::new(loom::sync::Mutex::new(()));
        let closed_gate = gate.lock().unwrap();
        let readers: Vec<_> = [9u8, 1]
            .into_iter()
            .map(|first| {
                let head = head.clone();
                let mut w = reg.worker().unwrap();
                let (done, gate) = (done_tx.clone(), gate.clone());
                thread::spawn(move || {
                    let mut f = [first; 8];
                    let v = head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f));
                    done.send((first, v)).unwrap();
                    drop(gate.lock().unwrap());
                })
            })
            .collect();
        let mut reaped = reg.reap_quarantine();
        let mut verdicts: Vec<(u8, Verdict)> = (0..2).map(|_| done_rx.recv().unwrap()).collect();
        verdicts.sort_unstable_by_key(|(first, _)| std::cmp::Reverse(*first));
        // The readers are done (no pin left), not gone. An unrelated write
        // leaves the quarantined fail-closed link in place (review H3): only
        // an explicit reap removes it.
        reg.register_head("other", PacketKind::Ethernet, Dirs::IN)
            .unwrap();
        assert_eq!(
            reg.chain_names("h", Dir::In).unwrap().len(),
            1 - reaped.len(),
            "only an explicit reap removes a fail-closed link"
        );
        assert!(reg.take_reaped().is_empty());
        reaped.extend(reg.reap_quarantine());
        assert_eq!(reaped.len(), 1, "reaped exactly once");
        assert_eq!(reaped[0].hook, "bad:x");
        assert!(reg.chain_names("h", Dir::In).unwrap().is_empty());
        let ticket = &reaped[0].retirement;
        assert!(
            drive(|| ticket.is_complete()),
            "no reader is pinned, yet the reaped link never retired"
        );
        retired.store(true, std::sync::atomic::Ordering::SeqCst);
        let c = ticket.counters();
        let mut g = [1u8; 8];
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut g));
        assert_eq!(ticket.counters(), c, "final once complete");
        assert_eq!(reg.refused(), pfil::Refused::default());
        let mut f = [9u8; 8];
        assert_eq!(
            head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
            Verdict::Pass
        );
        assert_eq!(
            bad.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "the reaped hook ran after its ticket"
        );
        drop(closed_gate);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(verdicts[0], (9, Verdict::Dropped), "A fails closed");
        let b_dropped = u64::from(verdicts[1].1 == Verdict::Dropped);
        let calls = calls.load(std::sync::atomic::Ordering::SeqCst) as u64;
        assert_eq!(c.faults, 1);
        assert_eq!(c.shown, calls, "shown: what the hook was called with");
        assert_eq!(
            c.packets,
            calls + b_dropped,
            "plus what the quarantine dropped"
        );
        assert_eq!((c.dropped, c.passed), (1 + b_dropped, calls - 1));
    });
}
