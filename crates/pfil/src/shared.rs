//! What a registry is made of: the state that `Registry`, `Head` and
//! `Worker` handles share.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_epoch::{self as epoch, Atomic};

use crate::chain::Quarantined;
use crate::counters::RefusedCounters;
use crate::quarantine::Reaped;
use crate::state::{Generation, Graveyard, State};
use crate::sync::{AtomicU64, Condvar, Mutex};

/// What a registry is made of; `Registry`, `Head` and `Worker` share it.
pub(crate) struct Shared {
    /// The current generation. Never null.
    pub(crate) current: Atomic<Generation>,
    /// Retired generations past their grace period, for the control plane
    /// to drop (shared with the epoch's deferred functions, which bury
    /// them there).
    pub(crate) graveyard: Arc<Graveyard>,
    pub(crate) writer: Mutex<State>,
    /// Links quarantined by the datapath that may still be linked: every
    /// writer reaps the fail-open ones and keeps the fail-closed ones here
    /// (quarantine.rs).
    pub(crate) quarantine: Mutex<Vec<Quarantined>>,
    pub(crate) free_workers: Mutex<Vec<usize>>,
    pub(crate) max_workers: usize,
    /// The current generation number, readable without pinning.
    pub(crate) number: AtomicU64,
    /// Quarantined links unlinked by writer calls that return no `Commit`,
    /// not yet handed out by `take_reaped`/`reap_quarantine`; at most
    /// `MAX_KEPT_REAPED` (quarantine.rs).
    pub(crate) reaped: Mutex<Vec<Reaped>>,
    /// Batches and packets the datapath refused, per worker slot.
    pub(crate) refused: RefusedCounters,
    /// Taken by a writer to notify `published_cv` after it stored a new
    /// `number`, and by `Registry::wait_generation` to check and wait.
    pub(crate) published: Mutex<()>,
    /// Notified after every publish.
    pub(crate) published_cv: Condvar,
    /// Time one batch in this many per worker (a power of two; 0: off).
    /// A setting, not synchronization: std's atomic also under loom.
    pub(crate) sample_every: std::sync::atomic::AtomicU32,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The buried ones go with the registry. Those still deferred hold
        // the graveyard too, and the last of them to run drops what they
        // buried on the thread that runs it: at teardown, and only for the
        // generations retired last, that may be any thread that pins.
        self.graveyard.drain();
        // SAFETY: `Shared` is dropped when the last `Registry`, `Head` or
        // `Worker` goes, and readers (snapshots) borrow one of those, so no
        // thread can hold a pointer to the current generation any more.
        unsafe {
            let g = self.current.load(Ordering::Acquire, epoch::unprotected());
            if !g.is_null() {
                drop(g.into_owned());
            }
        }
    }
}

impl Shared {
    /// Give a worker slot back (a `Worker` is dropped).
    pub(crate) fn release_worker(&self, index: usize) {
        self.free_workers.lock().push(index);
    }
}
