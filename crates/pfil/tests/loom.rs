//! loom model checks of the publish/retire protocol: a reader pinned on one
//! generation while a writer unlinks or removes the hook it is running.
//!
//! `RUSTFLAGS="--cfg crossbeam_loom" LOOM_MAX_PREEMPTIONS=2 \
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
