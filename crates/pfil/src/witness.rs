//! Debug checks in the spirit of FreeBSD's WITNESS: verdict contract and
//! writer calls from inside a hook. Everything here compiles to nothing
//! unless the `witness` feature is on.

use crate::{Error, Packet};

#[cfg(feature = "witness")]
thread_local! {
    static IN_HOOK: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Marks the current thread as running a hook while alive.
pub(crate) struct HookScope(());

impl HookScope {
    #[inline(always)]
    pub(crate) fn enter() -> HookScope {
        #[cfg(feature = "witness")]
        IN_HOOK.with(|c| c.set(c.get() + 1));
        HookScope(())
    }
}

#[cfg(feature = "witness")]
impl Drop for HookScope {
    fn drop(&mut self) {
        IN_HOOK.with(|c| c.set(c.get() - 1));
    }
}

#[cfg(feature = "witness")]
static VIOLATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Contract violations the `witness` feature has seen and repaired in this
/// process (always 0 without the feature).
pub fn violations() -> u64 {
    #[cfg(feature = "witness")]
    return VIOLATIONS.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "witness"))]
    0
}

/// Fails writer calls made from inside a hook.
#[inline(always)]
pub(crate) fn check_writer() -> Result<(), Error> {
    #[cfg(feature = "witness")]
    if IN_HOOK.with(|c| c.get()) > 0 {
        tracing::error!(target: "pfil::witness", "registry writer call from inside a hook");
        VIOLATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Err(Error::WriterInHook);
    }
    Ok(())
}

/// Which packets were already decided before a batch hook ran.
pub(crate) struct VerdictSnapshot {
    #[cfg(feature = "witness")]
    decided: Vec<(usize, crate::Verdict)>,
}

impl VerdictSnapshot {
    #[inline(always)]
    pub(crate) fn take(_pkts: &[Packet<'_>]) -> Self {
        VerdictSnapshot {
            #[cfg(feature = "witness")]
            decided: _pkts
                .iter()
                .enumerate()
                .filter(|(_, p)| !p.verdict().is_pass())
                .map(|(i, p)| (i, p.verdict()))
                .collect(),
        }
    }

    /// Report (and repair) a batch hook that changed a final verdict.
    #[inline(always)]
    pub(crate) fn check(&self, _pkts: &mut [Packet<'_>], _hook: &str) {
        #[cfg(feature = "witness")]
        for &(i, v) in &self.decided {
            if _pkts[i].verdict() != v {
                tracing::error!(
                    target: "pfil::witness",
                    hook = _hook,
                    packet = i,
                    was = %v,
                    now = %_pkts[i].verdict(),
                    "verdict contract broken: a final verdict was changed"
                );
                VIOLATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                _pkts[i].set_verdict(v);
            }
        }
    }
}
