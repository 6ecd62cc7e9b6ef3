//! The hook contract: what a filter implements and what it may do.

use crate::{Dir, Packet, Verdict};

/// Where a hook is being run: the head, the direction and the worker.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    /// Name of the head running the chain.
    pub head: &'a str,
    /// Direction of the chain.
    pub dir: Dir,
    /// Index of the calling worker, below [`Registry::max_workers`]. Hooks
    /// that keep statistics index per-worker slots with it, so they never
    /// write a cache line another worker writes.
    ///
    /// [`Registry::max_workers`]: crate::Registry::max_workers
    pub worker: usize,
}

/// A packet filter: the object behind a hook.
///
/// # Contract
/// - `filter` returns a [`Verdict`] and must not block, sleep or take a lock
///   that a writer holds for long: it runs inline on the datapath.
/// - It may rewrite the frame bytes; it must not hold on to them unless it
///   returns [`Verdict::Consumed`], in which case the driver's frame
///   ownership rules apply.
/// - It must not call registry writer methods ([`Registry::link`] and
///   friends); with the `witness` feature such a call fails with
///   [`Error::WriterInHook`].
/// - It should not panic. If it does, the panic is caught, the link is
///   quarantined (skipped at once, unlinked by the next writer), counted,
///   and the packet gets the link's [`FailMode`] verdict.
/// - It lives as long as its hook is registered, linked or not: unlinking
///   does not drop it, [`Registry::remove_hook`] does, on whatever thread
///   retires the last generation that referenced it (after the grace
///   period): keep `Drop` cheap. It may call the registry.
///
/// [`Registry::remove_hook`]: crate::Registry::remove_hook
///
/// [`Registry::link`]: crate::Registry::link
/// [`Error::WriterInHook`]: crate::Error::WriterInHook
/// [`FailMode`]: crate::FailMode
pub trait Filter: Send + Sync + 'static {
    /// Decide one packet. Only packets whose verdict is still `Pass` are shown.
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict;

    /// Decide a whole batch, writing verdicts with [`Packet::set_verdict`].
    ///
    /// Called instead of [`filter`](Filter::filter) when
    /// [`batched`](Filter::batched) returns `true`. The batch may hold
    /// packets that are already `Dropped`/`Consumed`: skip them and leave
    /// their verdict alone. If it panics, the hook is quarantined and every
    /// packet it was shown keeps its verdict, except under
    /// [`FailMode::Closed`](crate::FailMode::Closed), where they are dropped.
    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
            let v = self.filter(p, ctx);
            p.set_verdict(v);
        }
    }

    /// Whether the runner should call [`filter_batch`](Filter::filter_batch).
    /// Read once, when the hook is added.
    fn batched(&self) -> bool {
        false
    }

    /// The spec this filter was built from, as a filter catalog takes it
    /// (`module` or `module:config`, e.g. `drop-udp:53`), or `None` for a
    /// filter no catalog can rebuild (a closure, an app's own type).
    ///
    /// A control plane lists it ([`HookInfo::spec`](crate::HookInfo::spec))
    /// and writes it into a saved configuration, so building a filter from
    /// the returned spec must give one that behaves the same. Called only
    /// when hooks are listed, never on the datapath.
    fn spec(&self) -> Option<String> {
        None
    }
}

/// Closures are filters, which keeps tests and small programs short.
impl<F> Filter for F
where
    F: Fn(&mut Packet<'_>, &Ctx<'_>) -> Verdict + Send + Sync + 'static,
{
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        self(pkt, ctx)
    }
}
