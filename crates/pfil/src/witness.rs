//! Debug checks in the spirit of FreeBSD's WITNESS.
//!
//! Always on (they cost nothing on the per-packet path): a batch hook that
//! changes a final verdict is reported and repaired, since a driver would
//! otherwise recycle a frame a hook consumed.
//!
//! With the `witness` feature, also: writer calls made from inside a hook
//! fail with [`Error::WriterInHook`], and a hook whose batch takes longer
//! than [`SLOW_BATCH`] is reported. Without the feature those checks
//! compile to nothing.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::{Error, Verdict};

/// A link's batch taking longer than this is reported as blocking (witness).
pub const SLOW_BATCH: std::time::Duration = std::time::Duration::from_millis(10);

static VIOLATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's share of `VIOLATIONS`.
    static THREAD_VIOLATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(feature = "witness")]
thread_local! {
    static IN_HOOK: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Contract violations seen in this process: verdicts repaired, and with the
/// `witness` feature, writer calls from hooks and slow hook batches.
pub fn violations() -> u64 {
    VIOLATIONS.load(Relaxed)
}

/// Contract violations seen on the calling thread: those of
/// [`violations`] that a datapath call (a repaired verdict, a slow hook
/// batch) or a writer call (from inside a hook) made on this thread. Unlike
/// the process total, other threads cannot move it: a test can compare it
/// before and after its own calls.
pub fn thread_violations() -> u64 {
    THREAD_VIOLATIONS.with(|c| c.get())
}

/// Count one violation, process-wide and for this thread. Cold: only on a
/// violation.
#[cold]
fn violation() {
    VIOLATIONS.fetch_add(1, Relaxed);
    // `try_with`: a violation during thread teardown is still counted above.
    let _ = THREAD_VIOLATIONS.try_with(|c| c.set(c.get() + 1));
}

/// Marks the current thread as running a hook until `exit`.
pub(crate) struct HookScope {
    #[cfg(feature = "witness")]
    started: std::time::Instant,
}

impl HookScope {
    #[inline(always)]
    pub(crate) fn enter() -> HookScope {
        #[cfg(feature = "witness")]
        IN_HOOK.with(|c| c.set(c.get() + 1));
        HookScope {
            #[cfg(feature = "witness")]
            started: std::time::Instant::now(),
        }
    }

    /// Leave the hook; with `witness`, report it if it ran too long.
    #[inline(always)]
    pub(crate) fn exit(self, _hook: &str) {
        #[cfg(feature = "witness")]
        {
            IN_HOOK.with(|c| c.set(c.get().saturating_sub(1)));
            let took = self.started.elapsed();
            if took > SLOW_BATCH {
                violation();
                tracing::warn!(target: "pfil::witness", hook = _hook, ?took, "hook batch ran too long: hooks must not block");
            }
        }
    }
}

/// Fails writer calls made from inside a hook (with `witness`).
#[inline(always)]
pub(crate) fn check_writer() -> Result<(), Error> {
    #[cfg(feature = "witness")]
    if IN_HOOK.with(|c| c.get()) > 0 {
        violation();
        tracing::error!(target: "pfil::witness", "registry writer call from inside a hook");
        return Err(Error::WriterInHook);
    }
    Ok(())
}

/// A batch hook changed a final verdict; the caller puts it back.
#[cold]
pub(crate) fn broken_contract(hook: &str, packet: usize, was: Verdict, now: Verdict) {
    violation();
    tracing::error!(
        target: "pfil::witness",
        hook,
        packet,
        %was,
        %now,
        "verdict contract broken: a final verdict was changed (repaired)"
    );
}
