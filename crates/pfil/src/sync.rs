//! Every lock and atomic the registry synchronizes with, in one place.
//!
//! Normally: parking_lot's adaptive mutex (spins briefly, then parks) and
//! std's atomics. Under `--cfg pfil_loom` (which needs `--cfg
//! crossbeam_loom`, so the epoch runs on loom too): loom's mutex and
//! atomics, so loom's model checker sees the registry's own
//! synchronization (writer lock, quarantine, worker slots, link flags,
//! counters, retirement signals), not only the epoch's.
//!
//! Under loom the condition variable does not block: [`Condvar::wait_for`]
//! yields to loom's scheduler (loom does not model time-outs); models poll
//! [`Retirement::is_complete`](crate::Retirement::is_complete) instead of
//! waiting.
//!
//! Only the loom test binary (`tests/loom.rs`) is meant to run under
//! `pfil_loom`: loom's types panic outside `loom::model`.
//!
//! Not routed here: the `witness` counters (process statistics in statics,
//! which loom's atomics cannot be) and `Arc` (std's is correct and not ours
//! to check).

#[cfg(all(pfil_loom, not(crossbeam_loom)))]
compile_error!(
    "`--cfg pfil_loom` needs `--cfg crossbeam_loom` too: the epoch must run on loom as well"
);

use std::time::Duration;

#[cfg(not(pfil_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64};

#[cfg(pfil_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64};

#[cfg(not(pfil_loom))]
pub(crate) use std::thread::yield_now;

#[cfg(pfil_loom)]
pub(crate) use loom::thread::yield_now;

#[cfg(not(pfil_loom))]
type Inner<T> = parking_lot::Mutex<T>;
#[cfg(pfil_loom)]
type Inner<T> = loom::sync::Mutex<T>;

/// A guard of [`Mutex`].
#[cfg(not(pfil_loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
/// A guard of [`Mutex`].
#[cfg(pfil_loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

/// A mutex without poisoning (a panic under it is caught elsewhere or is a
/// bug already reported).
#[derive(Default)]
pub(crate) struct Mutex<T>(Inner<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(Inner::new(value))
    }

    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(pfil_loom))]
        return self.0.lock();
        #[cfg(pfil_loom)]
        return self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        #[cfg(not(pfil_loom))]
        return self.0.get_mut();
        #[cfg(pfil_loom)]
        return self
            .0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// A condition variable for [`Mutex`].
#[derive(Default)]
pub(crate) struct Condvar {
    #[cfg(not(pfil_loom))]
    inner: parking_lot::Condvar,
}

impl Condvar {
    pub(crate) fn notify_all(&self) {
        #[cfg(not(pfil_loom))]
        self.inner.notify_all();
    }

    /// Wait for a notification or at most `timeout` (spurious wake-ups
    /// allowed: callers re-check their condition).
    pub(crate) fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) {
        #[cfg(not(pfil_loom))]
        self.inner.wait_for(guard, timeout);
        #[cfg(pfil_loom)]
        {
            let _ = (guard, timeout);
            loom::thread::yield_now();
        }
    }
}
