//! Retirement tickets: a way to wait for the grace period after an unlink.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::counters::{Counters, LinkCounters};
use crate::sync::{AtomicBool, Condvar, Mutex};

/// A one-shot flag with a condition variable.
#[derive(Default)]
pub(crate) struct Signal {
    done: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Signal {
    pub(crate) fn new() -> Arc<Signal> {
        Arc::new(Signal::default())
    }

    pub(crate) fn fire(&self) {
        // Release: whoever sees `done` also sees the drops that preceded it.
        self.done.store(true, Ordering::Release);
        let _g = self.lock.lock();
        self.cv.notify_all();
    }

    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

/// Completes when no reader can still see what an unlink or removal retired.
///
/// For [`Registry::unlink`](crate::Registry::unlink) and transactions: once
/// the generation that still held the link has been reclaimed (the hook
/// itself stays registered and alive). For
/// [`Registry::remove_hook`](crate::Registry::remove_hook): once the
/// registry has dropped its last reference to the filter object, after the
/// grace period; the object is dropped then too, unless the caller still
/// holds an `Arc` to it (from
/// [`add_hook_shared`](crate::Registry::add_hook_shared)). Either way no
/// reader runs it any more. Dropping the ticket does not cancel anything;
/// the retirement happens anyway.
#[must_use = "a retirement ticket tells when the old configuration is gone; drop it if you don't care"]
pub struct Retirement {
    signal: Option<Arc<Signal>>,
    /// Counters of the links this change removed.
    removed: Vec<Arc<LinkCounters>>,
}

impl Retirement {
    pub(crate) fn pending(signal: Arc<Signal>) -> Self {
        Retirement {
            signal: Some(signal),
            removed: Vec::new(),
        }
    }

    /// A ticket for a change that retired nothing.
    pub(crate) fn complete() -> Self {
        Retirement {
            signal: None,
            removed: Vec::new(),
        }
    }

    pub(crate) fn with_removed(mut self, removed: Vec<Arc<LinkCounters>>) -> Self {
        self.removed = removed;
        self
    }

    /// The counters of the links this change removed, summed. Final once
    /// [`is_complete`](Self::is_complete): no reader can add to them any more.
    pub fn counters(&self) -> Counters {
        self.removed
            .iter()
            .fold(Counters::default(), |a, c| a + c.sum())
    }

    /// Has the grace period passed?
    pub fn is_complete(&self) -> bool {
        self.signal.as_ref().is_none_or(|s| s.is_done())
    }

    /// Wait for the grace period, helping the epoch advance meanwhile.
    ///
    /// Readers that hold a batch open delay it; a reader that never ends
    /// its batch delays it forever: use [`wait_timeout`](Self::wait_timeout)
    /// when that can happen.
    ///
    /// # Panics
    /// If the calling thread itself holds a [`Snapshot`](crate::Snapshot)
    /// (or runs inside a hook): its own pin would block the grace period
    /// forever.
    pub fn wait(&self) {
        if !self.is_complete() && crossbeam_epoch::is_pinned() {
            panic!("Retirement::wait on a thread that holds an epoch pin (a Snapshot, or inside a hook) would never return");
        }
        while !self.wait_timeout(Duration::from_secs(3600)) {}
    }

    /// Wait at most `timeout` (any duration: one too large to add to the
    /// clock waits as long as it takes); `true` if the grace period has
    /// passed.
    /// Returns `false` at once if the calling thread holds an epoch pin,
    /// which would keep the grace period from ending.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let Some(s) = &self.signal else { return true };
        if !s.is_done() && crossbeam_epoch::is_pinned() {
            return false;
        }
        // A timeout too large for an `Instant` is no timeout.
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if s.is_done() {
                return true;
            }
            // Pinning and flushing moves the global epoch on and runs
            // deferred destructors that are due.
            crossbeam_epoch::pin().flush();
            if s.is_done() {
                return true;
            }
            let now = Instant::now();
            let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now));
            if left.is_zero() {
                return false;
            }
            let mut g = s.lock.lock();
            if !s.is_done() {
                s.cv.wait_for(&mut g, left.min(Duration::from_millis(1)));
            }
        }
    }
}

impl std::fmt::Debug for Retirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retirement")
            .field("complete", &self.is_complete())
            .finish()
    }
}
