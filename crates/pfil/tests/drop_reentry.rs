//! A filter whose `Drop` calls the registry must never deadlock a writer.
//!
//! crossbeam-epoch runs deferred functions inside `pin()` on every 128th
//! outermost pin of a thread (the first pin of a thread is such a pin), and
//! inside `flush()`. Ours bury retired generations (with them the last
//! reference to a removed hook's filter) in the registry's graveyard, which
//! the writer then drains at the end of its call. A writer that dropped
//! them while it held the writer lock would run a filter's `Drop` under
//! that lock; a `Drop` that links or unlinks would then wait for the lock
//! its own thread holds.
//!
//! The test makes crossbeam collect at exactly a writer's pin:
//! - a helper thread holds a pin, so the global epoch cannot advance far
//!   enough for the removed filter's generation to expire;
//! - a fresh writer thread pins exactly 128 times (pin counts 0..=127)
//!   while the helper holds on, so its next outermost pin collects;
//! - the helper lets go; the writer's next call (`unlink`) pins, that pin
//!   advances the epoch and finds the generation expired and buries it,
//!   and the call drops it at its end, and with it the filter, whose `Drop`
//!   calls [`Registry::link`].
//!
//! The drop is asserted to happen inside that call, on that thread (a
//! `Drop` elsewhere would prove nothing).
//!
//! It is alone in its test binary: no other test thread pins and moves the
//! epoch in between. A watchdog turns a deadlock into a failure.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use pfil::{Ctx, Dir, Dirs, Filter, Packet, PacketKind, Placement, Registry, Verdict};

/// Links `b:1` on `h0` in from its `Drop`.
struct LinkOnDrop {
    reg: Registry,
    linked: Arc<AtomicBool>,
    dropped_on: Arc<Mutex<Option<String>>>,
}

impl Filter for LinkOnDrop {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }
}

impl Drop for LinkOnDrop {
    fn drop(&mut self) {
        let ok = self
            .reg
            .link("h0", Dir::In, "b:1", Placement::Append)
            .is_ok();
        self.linked.store(ok, SeqCst);
        *self.dropped_on.lock().unwrap() = thread::current().name().map(str::to_owned);
    }
}

fn pass(_: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    Verdict::Pass
}

#[test]
fn a_filter_drop_that_links_never_deadlocks_the_writer() {
    let reg = Registry::with_max_workers(2);
    reg.register_head("h0", PacketKind::Ethernet, Dirs::IN)
        .unwrap();
    for n in ["a:1", "b:1"] {
        reg.add_hook(n, PacketKind::Ethernet, Dirs::IN, pass)
            .unwrap();
    }
    let linked = Arc::new(AtomicBool::new(false));
    let dropped_on = Arc::new(Mutex::new(None));
    reg.add_hook(
        "drop:links",
        PacketKind::Ethernet,
        Dirs::IN,
        LinkOnDrop {
            reg: reg.clone(),
            linked: linked.clone(),
            dropped_on: dropped_on.clone(),
        },
    )
    .unwrap();
    reg.link("h0", Dir::In, "drop:links", Placement::Prepend)
        .unwrap();
    // Collect everything retired so far: the generations that held the
    // hook before the removal below must not be left in the queue.
    for _ in 0..8 {
        crossbeam_epoch::pin().flush();
    }

    // The helper pins and holds the epoch back until told.
    let (pinned_tx, pinned_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let helper = thread::spawn(move || {
        // A thread's first pin collects and may advance the epoch past the
        // pin it takes; take that one first, then the pin that holds on.
        drop(crossbeam_epoch::pin());
        let guard = crossbeam_epoch::pin();
        pinned_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        drop(guard);
    });
    pinned_rx.recv().unwrap();

    // The last references to the filter are now in a retired generation
    // that cannot expire while the helper is pinned.
    let ticket = reg.remove_hook("drop:links").unwrap();
    assert!(!ticket.is_complete());

    let (done_tx, done_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let r2 = reg.clone();
    // A fresh thread: its pin count starts at 0.
    let spawned = thread::Builder::new().name("writer".into()).spawn(move || {
        // Pin count 0 (a collecting pin, but nothing has expired).
        r2.link("h0", Dir::In, "a:1", Placement::Prepend).unwrap();
        // Pin counts 1..=127.
        for _ in 1..128 {
            drop(crossbeam_epoch::pin());
        }
        ready_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // Pin count 128: collects, with the helper gone.
        let t = r2.unlink("h0", Dir::In, "a:1").unwrap();
        done_tx.send(t).unwrap();
    });
    spawned.unwrap();
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("writer thread did not get ready");
    assert!(!linked.load(SeqCst), "the filter dropped too early");
    release_tx.send(()).unwrap();
    helper.join().unwrap();
    go_tx.send(()).unwrap();

    let unlink_ticket = done_rx.recv_timeout(Duration::from_secs(20)).expect(
        "writer deadlocked: a filter's Drop ran under the writer lock and called the registry",
    );
    assert!(
        ticket.wait_timeout(Duration::from_secs(10)),
        "the removed hook was never dropped"
    );
    assert!(unlink_ticket.wait_timeout(Duration::from_secs(10)));
    assert!(linked.load(SeqCst), "the filter's Drop linked b:1");
    assert_eq!(
        dropped_on.lock().unwrap().as_deref(),
        Some("writer"),
        "the filter was to drop in the writer's own pin (the test lost its determinism)"
    );
    assert_eq!(reg.chain_names("h0", Dir::In).unwrap(), ["b:1"]);
}
