//! One worker's table without entry locks: a biased lock over the whole
//! table.
//!
//! Every write of a live entry holds the entry's lock, a compare-and-swap
//! a packet (see [`Slot`](super::slot::Slot)). On one worker that lock
//! excludes no one, yet its compare-and-swap is a full barrier on x86:
//! measured, 6 ns of the `ct` hook's 42 a packet at 1 000 flows. So the
//! table is *biased* to the first worker that runs a batch on it, as
//! biased locks are (Dice, Moir and Scherer's quickly reacquirable
//! locks): the owner's batches update live entries with plain atomic
//! loads and stores (no lock bit, no read-modify-write), and anyone else
//! who writes entries first takes the bias away:
//!
//! - a second worker makes the table *shared* for good: every batch of
//!   every worker then locks entries as before (one table stays right
//!   whatever the RSS);
//! - the control plane (`pfilctl states`, `--kill`) *holds* the bias for
//!   as long as it reads or removes entries ([`Bias::hold`]): the owner's
//!   batches lock entries meanwhile.
//!
//! Both wait for the owner's batch in progress to end before they touch
//! an entry: the owner marks a batch `busy`, then reads `owner` and
//! `revoke`; the others write `owner` or `revoke`, then read `busy` (a
//! Dekker handshake, sequentially consistent on both sides, once a batch
//! on the owner's side). Whichever comes second sees the other.
//!
//! Worker slots are unique among the threads that run hooks at once (what
//! [`pfil::Registry`]'s workers are; the table's per-worker counters
//! already count on it). Two threads passing one worker slot at once
//! would both take the owner's way: counters and states of a flow they
//! both see could lose updates (every field is an atomic: nothing
//! undefined, nothing freed).

use std::sync::atomic::{
    AtomicBool, AtomicUsize,
    Ordering::{Relaxed, Release, SeqCst},
};

/// `owner` of a table two workers have run: no owner, for good.
const SHARED: usize = usize::MAX;

/// The bias of one table.
#[derive(Debug, Default)]
pub(super) struct Bias {
    /// The owning worker + 1; 0 before any batch, [`SHARED`] after a
    /// second worker's.
    owner: AtomicUsize,
    /// The owner is in a batch that writes entries without their locks.
    busy: AtomicBool,
    /// Holders ([`Bias::hold`]) at the moment: while any, the owner's
    /// batches lock entries.
    revoke: AtomicUsize,
}

/// A batch on a table: whether it may write live entries without their
/// locks ([`biased`](Section::biased)). Ends the owner's `busy` mark when
/// dropped (also on unwinding: a holder waits for it).
pub(crate) struct Section<'a> {
    bias: Option<&'a Bias>,
}

impl Section<'_> {
    /// Whether this batch writes live entries without their locks.
    #[inline(always)]
    pub(crate) fn biased(&self) -> bool {
        self.bias.is_some()
    }
}

impl Drop for Section<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(b) = self.bias {
            // Release: a holder that sees the batch over sees its writes.
            b.busy.store(false, Release);
        }
    }
}

/// The control plane's exclusion of the owner's lock-free writes, until
/// dropped.
pub(crate) struct Hold<'a>(&'a Bias);

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        self.0.revoke.fetch_sub(1, Release);
    }
}

impl Bias {
    /// Start a batch of `worker` on the table: biased if `worker` owns
    /// the table (the first to run a batch on it does) and no one holds
    /// it. Any other worker makes the table shared first.
    #[inline]
    pub(super) fn enter(&self, worker: usize) -> Section<'_> {
        let me = worker.wrapping_add(1);
        let o = self.owner.load(Relaxed);
        if o != me && (o == SHARED || !self.claim(me)) {
            self.settled();
            return Section { bias: None };
        }
        // The handshake: `busy` set, then `owner` and `revoke` read; a
        // sharer or holder writes its word, then reads `busy`.
        self.busy.swap(true, SeqCst);
        if self.owner.load(SeqCst) != me || self.revoke.load(SeqCst) != 0 {
            self.busy.store(false, Release);
            return Section { bias: None };
        }
        Section { bias: Some(self) }
    }

    /// Become the owner of an unowned table (`me`: worker + 1), or make
    /// an owned one shared: whether `me` owns it now.
    #[cold]
    fn claim(&self, me: usize) -> bool {
        match self.owner.compare_exchange(0, me, SeqCst, Relaxed) {
            Ok(_) => true,
            Err(o) if o == me => true,
            Err(SHARED) => false,
            Err(_) => {
                // A second worker: shared for good, once the owner's batch
                // in progress (which writes without locks) is over.
                self.owner.store(SHARED, SeqCst);
                self.wait();
                false
            }
        }
    }

    /// Exclude the owner's lock-free writes until the returned guard
    /// drops: the owner's batch in progress ends first, and its next
    /// batches lock entries (the control plane's reads and removals of
    /// entries take this).
    pub(crate) fn hold(&self) -> Hold<'_> {
        self.revoke.fetch_add(1, SeqCst);
        self.wait();
        Hold(self)
    }

    /// In a shared table, wait out a biased batch the former owner may
    /// still be in (the worker that made the table shared waits for it,
    /// and so must every other that comes meanwhile): `owner` read again
    /// in the handshake's order, then `busy`. Two loads when there is
    /// none.
    #[inline]
    fn settled(&self) {
        let _ = self.owner.load(SeqCst);
        self.wait();
    }

    /// Wait for the owner's batch in progress, if any (a few
    /// microseconds: spin, then yield).
    fn wait(&self) {
        let mut spins = 0u32;
        // SeqCst: the second half of the handshake (the caller's write of
        // `owner` or `revoke`, then this read); it also acquires the
        // batch's writes once the batch is seen over.
        while self.busy.load(SeqCst) {
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Whether a second worker has made the table shared.
    #[cfg(test)]
    pub(super) fn is_shared(&self) -> bool {
        self.owner.load(Relaxed) == SHARED
    }
}
