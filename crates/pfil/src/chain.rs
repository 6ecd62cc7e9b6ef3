//! The hot path: links, chains specialized by length, and the runner that
//! walks a chain over a batch of packets.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::counters::{LinkCounters, Tally};
use crate::retire::Signal;
use crate::{witness, Ctx, Dir, Dirs, FailMode, Filter, Packet, PacketKind, Verdict};

/// A registered hook: a named filter, shared by every link that places it.
pub(crate) struct HookEntry {
    pub(crate) name: String,
    pub(crate) kind: PacketKind,
    pub(crate) dirs: Dirs,
    pub(crate) filter: Arc<dyn Filter>,
    /// `filter.batched()`, read once at registration.
    pub(crate) batched: bool,
    /// Signals to fire when the last reference goes (remove_hook tickets).
    /// Declared after `filter`: fields drop in order, so the filter is gone
    /// before anyone is told it is.
    pub(crate) on_drop: DropSignals,
}

/// Signals fired when dropped.
#[derive(Default)]
pub(crate) struct DropSignals(pub(crate) Mutex<Vec<Arc<Signal>>>);

impl Drop for DropSignals {
    fn drop(&mut self) {
        for s in self.0.get_mut().drain(..) {
            s.fire();
        }
    }
}

/// A hook placed on one head in one direction. Shared (by `Arc`) between
/// the generations that contain it, so its counters survive republishing.
pub(crate) struct Link {
    pub(crate) hook: Arc<HookEntry>,
    pub(crate) fail: FailMode,
    pub(crate) counters: Arc<LinkCounters>,
    /// Set once, by the first worker that catches a panic from this hook.
    pub(crate) quarantined: AtomicBool,
}

/// A link that faulted, waiting for a writer to unlink it.
pub(crate) struct Quarantined {
    pub(crate) head: String,
    pub(crate) dir: Dir,
    pub(crate) hook: String,
    pub(crate) link: Weak<Link>,
}

/// The links a head runs for one direction, specialized at publish time.
pub(crate) enum Chain {
    /// Nothing linked: the runner returns at once.
    Empty,
    /// One link: a direct call, no loop over links.
    One(Arc<Link>),
    /// Several links, walked in order.
    Many(Box<[Arc<Link>]>),
}

impl Chain {
    pub(crate) fn from_links(links: &[Arc<Link>]) -> Chain {
        match links {
            [] => Chain::Empty,
            [one] => Chain::One(one.clone()),
            many => Chain::Many(many.into()),
        }
    }

    /// Run every link over the batch, in order.
    #[inline]
    pub(crate) fn run(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>, q: &Mutex<Vec<Quarantined>>) {
        match self {
            Chain::Empty => {}
            Chain::One(link) => run_link(link, pkts, ctx, q),
            Chain::Many(links) => {
                for link in links.iter() {
                    run_link(link, pkts, ctx, q);
                }
            }
        }
    }
}

/// Run one link over the batch: only `Pass` packets are shown; one tally in
/// registers, one flush to this worker's counter slot.
#[inline]
fn run_link(link: &Arc<Link>, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>, q: &Mutex<Vec<Quarantined>>) {
    if link.quarantined.load(Relaxed) {
        return;
    }
    let hook = &*link.hook;
    if hook.batched {
        return run_batched(link, pkts, ctx, q);
    }
    let filter = &*hook.filter;
    // The packet being filtered, for the fault path. The only state that
    // must live in memory across the (possibly unwinding) call; the tally
    // stays in registers.
    let mut at = 0;
    let _scope = witness::HookScope::enter();
    match catch_unwind(AssertUnwindSafe(|| filter_each(filter, pkts, ctx, &mut at))) {
        Ok(tally) => link.counters.flush(ctx.worker, &tally),
        Err(_) => fault(link, pkts, ctx, q, at),
    }
}

/// The per-packet loop of one link.
#[inline(always)]
fn filter_each(
    filter: &dyn Filter,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    at: &mut usize,
) -> Tally {
    let mut t = Tally::default();
    for (i, p) in pkts.iter_mut().enumerate() {
        if p.verdict().is_pass() {
            *at = i;
            let v = filter.filter(p, ctx);
            p.set_verdict(v);
            t.record(v, p.len());
        }
    }
    t
}

/// A hook panicked on packet `at`: give it the link's fail verdict, count
/// the fault, quarantine the link (later packets of the batch skip it).
///
/// The batch's tally was in registers the unwind discarded; it is rebuilt
/// from the verdicts: the packets before `at` that are still `Pass` were
/// shown and passed. Packets this hook dropped or consumed earlier in the
/// same batch cannot be told from ones dropped before it and are not
/// counted: a fault batch may undercount the hook's drops.
#[cold]
#[inline(never)]
fn fault(
    link: &Arc<Link>,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    q: &Mutex<Vec<Quarantined>>,
    at: usize,
) {
    let mut t = Tally::default();
    for p in pkts.iter().take(at) {
        if p.verdict().is_pass() {
            t.record(Verdict::Pass, p.len());
        }
    }
    if let Some(p) = pkts.get_mut(at) {
        let v = link.fail.verdict();
        p.set_verdict(v);
        t.record(v, p.len());
    }
    t.faults = 1;
    link.counters.flush(ctx.worker, &t);
    quarantine(link, ctx, q);
}

/// The batch-method path: verdict counts are taken from the difference
/// before and after, since the hook sets verdicts itself.
#[cold]
#[inline(never)]
fn run_batched(
    link: &Arc<Link>,
    pkts: &mut [Packet<'_>],
    ctx: &Ctx<'_>,
    q: &Mutex<Vec<Quarantined>>,
) {
    let mut tally = Tally::default();
    let mut before = [0u64; 3];
    for p in pkts.iter() {
        before[p.verdict() as usize] += 1;
        if p.verdict().is_pass() {
            tally.packets += 1;
            tally.bytes += p.len() as u64;
        }
    }
    let witness = witness::VerdictSnapshot::take(pkts);
    let outcome = {
        let _scope = witness::HookScope::enter();
        catch_unwind(AssertUnwindSafe(|| {
            link.hook.filter.filter_batch(pkts, ctx)
        }))
    };
    witness.check(pkts, &link.hook.name);
    if outcome.is_err() {
        tally.faults += 1;
        quarantine(link, ctx, q);
        if link.fail == FailMode::Closed {
            // We cannot tell which packet the hook died on: drop all it was shown.
            for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
                p.set_verdict(Verdict::Dropped);
            }
        }
    }
    let mut after = [0u64; 3];
    for p in pkts.iter() {
        after[p.verdict() as usize] += 1;
    }
    // Packets that were not `Pass` before keep their verdict (contract), so
    // the growth of Dropped/Consumed is what this hook decided.
    tally.verdicts[1] = after[1].saturating_sub(before[1]);
    tally.verdicts[2] = after[2].saturating_sub(before[2]);
    link.counters.flush(ctx.worker, &tally);
}

/// Skip the link from now on and ask a writer to unlink it. Cold: runs once
/// per faulty link.
#[cold]
#[inline(never)]
fn quarantine(link: &Arc<Link>, ctx: &Ctx<'_>, q: &Mutex<Vec<Quarantined>>) {
    if link.quarantined.swap(true, Relaxed) {
        return;
    }
    tracing::error!(
        target: "pfil",
        head = ctx.head,
        dir = %ctx.dir,
        hook = %link.hook.name,
        fail = %link.fail,
        "hook panicked; link quarantined"
    );
    q.lock().push(Quarantined {
        head: ctx.head.to_owned(),
        dir: ctx.dir,
        hook: link.hook.name.clone(),
        link: Arc::downgrade(link),
    });
}
