//! Retirement tickets: a way to wait for the grace period after an unlink.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::counters::{Counters, LinkCounters};
use crate::state::Graveyard;
use crate::sync::{AtomicBool, Condvar, Mutex};
use crate::{Dir, FailMode};

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

/// A link a change removed, as kept by its [`Retirement`]: where it was and
/// its live counters (final once the ticket completes).
pub(crate) struct Removed {
    pub(crate) head: String,
    pub(crate) dir: Dir,
    pub(crate) hook: String,
    pub(crate) fail: FailMode,
    pub(crate) counters: Arc<LinkCounters>,
}

/// One link a change removed, with its counters, as listed by
/// [`Retirement::links`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RetiredLink {
    /// The head it was linked to.
    pub head: String,
    /// The direction of the chain it was in.
    pub dir: Dir,
    /// The hook it placed.
    pub hook: String,
    /// Its fail mode.
    pub fail: FailMode,
    /// Its counters summed over workers: final once the ticket
    /// [completes](Retirement::is_complete), a lower bound before.
    pub counters: Counters,
}

/// Completes when no reader can still see what an unlink or removal retired.
///
/// For [`Registry::unlink`](crate::Registry::unlink) and transactions: once
/// the generation that still held the link has been reclaimed (the hook
/// itself stays registered and alive). For
/// [`Registry::remove_hook`](crate::Registry::remove_hook), and for
/// transactions that remove a hook or replace its filter
/// ([`Op::RemoveHook`](crate::Op::RemoveHook),
/// [`Op::ReplaceFilter`](crate::Op::ReplaceFilter)): once the registry has
/// dropped its last reference to the old filter object, after the grace
/// period; the object is dropped then too, unless the caller still holds an
/// `Arc` to it (from [`add_hook_shared`](crate::Registry::add_hook_shared)).
/// Either way no reader runs it any more. Dropping the ticket does not
/// cancel anything; the retirement happens anyway.
///
/// What the change retired is dropped on the control plane's threads,
/// never on a datapath worker's: by this ticket's [`wait`](Self::wait),
/// [`wait_timeout`](Self::wait_timeout) or [`is_complete`](Self::is_complete),
/// by a write to the registry or by
/// [`Registry::reclaim`](crate::Registry::reclaim), whichever comes first
/// once the grace period is over.
#[must_use = "a retirement ticket tells when the old configuration is gone; drop it if you don't care"]
pub struct Retirement {
    /// All must fire for the ticket to complete.
    signals: Vec<Arc<Signal>>,
    /// The links this change removed.
    removed: Vec<Removed>,
    /// Where the epoch buries the retired generation: the ticket drops
    /// what is there while it waits (`None`: nothing retired).
    graveyard: Option<Arc<Graveyard>>,
}

impl Retirement {
    pub(crate) fn pending(signal: Arc<Signal>, graveyard: &Arc<Graveyard>) -> Self {
        Retirement {
            signals: vec![signal],
            removed: Vec::new(),
            graveyard: Some(Arc::clone(graveyard)),
        }
    }

    /// A ticket that completes with this one, for other links of the same
    /// change (it lists none yet: see [`with_removed`](Self::with_removed)).
    pub(crate) fn sibling(&self) -> Self {
        Retirement {
            signals: self.signals.clone(),
            removed: Vec::new(),
            graveyard: self.graveyard.clone(),
        }
    }

    /// A ticket for a change that retired nothing.
    pub(crate) fn complete() -> Self {
        Retirement {
            signals: Vec::new(),
            removed: Vec::new(),
            graveyard: None,
        }
    }

    /// Drop the generations whose grace period is over (their drop
    /// completes tickets), here, on the control plane's thread, never on
    /// a pinned one: see [`Graveyard::drain_unpinned`].
    fn bury_the_dead(&self) {
        if let Some(g) = &self.graveyard {
            g.drain_unpinned();
        }
    }

    /// Have all signals fired? No side effect (unlike `is_complete`).
    fn fired(&self) -> bool {
        self.signals.iter().all(|s| s.is_done())
    }

    pub(crate) fn with_removed(mut self, removed: Vec<Removed>) -> Self {
        self.removed = removed;
        self
    }

    /// Also wait for `signals` (hooks whose drop the ticket reports).
    pub(crate) fn with_signals(mut self, signals: Vec<Arc<Signal>>) -> Self {
        self.signals.extend(signals);
        self
    }

    /// The counters of the links this change removed, summed. Final once
    /// [`is_complete`](Self::is_complete): no reader can add to them any more.
    pub fn counters(&self) -> Counters {
        self.removed
            .iter()
            .fold(Counters::default(), |a, r| a + r.counters.sum())
    }

    /// Each link this change removed, in the order the change removed them,
    /// with its own counters. Final once [`is_complete`](Self::is_complete)
    /// (after [`wait`](Self::wait)); their sum is
    /// [`counters`](Self::counters).
    ///
    /// # Examples
    /// ```
    /// use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
    ///
    /// let reg = Registry::new();
    /// let head = reg.register_head("h", PacketKind::Ethernet, Dirs::IN)?;
    /// reg.add_hook("a:x", PacketKind::Ethernet, Dirs::IN, |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Pass)?;
    /// reg.link("h", Dir::In, "a:x", Placement::Prepend)?;
    /// let mut w = reg.worker()?;
    /// let mut f = [0u8; 60];
    /// head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f));
    /// let done = reg.unlink("h", Dir::In, "a:x")?;
    /// done.wait();
    /// let links = done.links();
    /// assert_eq!((links[0].head.as_str(), links[0].dir, links[0].hook.as_str()), ("h", Dir::In, "a:x"));
    /// assert_eq!(links[0].counters.packets, 1);
    /// # Ok::<(), pfil::Error>(())
    /// ```
    pub fn links(&self) -> Vec<RetiredLink> {
        self.removed
            .iter()
            .map(|r| RetiredLink {
                head: r.head.clone(),
                dir: r.dir,
                hook: r.hook.clone(),
                fail: r.fail,
                counters: r.counters.sum(),
            })
            .collect()
    }

    /// Has the grace period passed?
    ///
    /// Asked of a ticket not complete yet, it drops what the registry
    /// retired and no reader can see any more (removed filters included)
    /// on the calling thread, as [`wait`](Self::wait) does; a datapath
    /// worker never does that work.
    pub fn is_complete(&self) -> bool {
        if self.fired() {
            return true;
        }
        self.bury_the_dead();
        self.fired()
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
        if self.is_complete() {
            return true;
        }
        if crossbeam_epoch::is_pinned() {
            return false;
        }
        // A timeout too large for an `Instant` is no timeout.
        let deadline = Instant::now().checked_add(timeout);
        for s in &self.signals {
            if !self.wait_signal(s, deadline) {
                return false;
            }
        }
        true
    }

    /// Wait for one signal until `deadline` (`None`: no deadline).
    fn wait_signal(&self, s: &Signal, deadline: Option<Instant>) -> bool {
        loop {
            if s.is_done() {
                return true;
            }
            // Pinning and flushing moves the global epoch on and runs the
            // deferred functions that are due (they bury generations); the
            // drain drops what they and other threads' collections buried.
            crossbeam_epoch::pin().flush();
            self.bury_the_dead();
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
            .field("complete", &self.fired())
            .field("links", &self.removed.len())
            .finish()
    }
}
