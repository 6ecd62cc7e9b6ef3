//! Transactions and scoped links: how writers describe a change of hooks
//! and links. They are applied by the writer path of the registry
//! (registry.rs) with the operations of state.rs; the registry does not
//! know about them.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::counters::{Counters, LinkCounters};
use crate::quarantine::Reaped;
use crate::retire::{RetiredLink, Signal};
use crate::state::{apply, batched, removed, Effects, LinkOptions, Op};
use crate::{Dir, Dirs, Error, Filter, PacketKind, Registry, Retirement};

/// Several operations applied all-or-nothing in one generation: links,
/// unlinks, hooks added and removed, filters replaced under existing hooks
/// (see [`Op`]). If any operation fails, nothing is published and the
/// generation does not change.
///
/// # Examples
/// ```
/// # use pfil::{Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict, Ctx};
/// # let reg = Registry::new();
/// # reg.register_head("eth0", PacketKind::Ethernet, Dirs::BOTH)?;
/// # reg.add_hook("a:x", PacketKind::Ethernet, Dirs::BOTH, |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Pass)?;
/// let gen = reg.generation();
/// let done = reg
///     .transaction()
///     .expect_generation(gen)
///     .link("eth0", Dir::In, "a:x", Placement::Prepend)
///     .link("eth0", Dir::Out, "a:x", Placement::Append)
///     .commit()?;
/// assert_eq!(done.generation, gen + 1);
/// # Ok::<(), pfil::Error>(())
/// ```
#[must_use = "a transaction does nothing until committed"]
pub struct Transaction<'r> {
    pub(crate) registry: &'r Registry,
    pub(crate) ops: Vec<Op>,
    pub(crate) expect: Option<u64>,
    pub(crate) dry_run: bool,
}

/// The outcome of a committed change: a [`Transaction`],
/// [`Registry::link`], [`Registry::unlink`], [`Registry::replace_filter`].
///
/// The retirement's methods are repeated here, so `reg.unlink(..)?.wait()`
/// reads as before.
#[derive(Debug)]
#[non_exhaustive]
pub struct Commit {
    /// The generation the change was published as; for a dry run, the
    /// current generation (nothing was published).
    pub generation: u64,
    /// Completes when the previous generation is gone, and with it every
    /// link the change removed; for a change that removed a hook or
    /// replaced its filter, once the registry has dropped the old filter.
    pub retirement: Retirement,
    /// The quarantined fail-open links this change unlinked besides what
    /// it was asked to do (every writer call does that, see
    /// [`Registry::reap_quarantine`]), each with its own ticket and final
    /// counters. Empty for a dry run.
    pub reaped: Vec<Reaped>,
}

impl Commit {
    /// [`Retirement::is_complete`].
    pub fn is_complete(&self) -> bool {
        self.retirement.is_complete()
    }

    /// [`Retirement::wait`].
    ///
    /// # Panics
    /// As [`Retirement::wait`]: on a thread that holds an epoch pin.
    pub fn wait(&self) {
        self.retirement.wait()
    }

    /// [`Retirement::wait_timeout`].
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.retirement.wait_timeout(timeout)
    }

    /// [`Retirement::counters`]: the summed counters of the links the
    /// change removed.
    pub fn counters(&self) -> Counters {
        self.retirement.counters()
    }

    /// [`Retirement::links`]: each link the change removed, with its
    /// counters.
    pub fn links(&self) -> Vec<RetiredLink> {
        self.retirement.links()
    }
}

impl<'r> Transaction<'r> {
    /// Add a link operation.
    pub fn link(
        mut self,
        head: &str,
        dir: Dir,
        hook: &str,
        options: impl Into<LinkOptions>,
    ) -> Self {
        self.ops.push(Op::Link {
            head: head.to_owned(),
            dir,
            hook: hook.to_owned(),
            options: options.into(),
        });
        self
    }

    /// Add an unlink operation.
    pub fn unlink(mut self, head: &str, dir: Dir, hook: &str) -> Self {
        self.ops.push(Op::Unlink {
            head: head.to_owned(),
            dir,
            hook: hook.to_owned(),
        });
        self
    }

    /// Add an operation registering a hook ([`Op::AddHook`]); later
    /// operations of the transaction can link it.
    pub fn add_hook<F: Filter>(self, name: &str, kind: PacketKind, dirs: Dirs, filter: F) -> Self {
        self.op(Op::AddHook {
            name: name.to_owned(),
            kind,
            dirs,
            filter: Arc::new(filter),
        })
    }

    /// Add an operation unlinking a hook everywhere and unregistering it
    /// ([`Op::RemoveHook`]).
    pub fn remove_hook(self, name: &str) -> Self {
        self.op(Op::RemoveHook {
            name: name.to_owned(),
        })
    }

    /// Add an operation putting `filter` under the existing hook `hook`,
    /// its links kept in place with their fail modes and counters
    /// ([`Op::ReplaceFilter`]).
    ///
    /// # Examples
    /// A hot swap and a new link in one generation:
    /// ```
    /// # use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
    /// # let reg = Registry::new();
    /// # reg.register_head("eth0", PacketKind::Ethernet, Dirs::BOTH)?;
    /// # let pass = |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Pass;
    /// reg.add_hook("acl:edge", PacketKind::Ethernet, Dirs::BOTH, pass)?;
    /// reg.link("eth0", Dir::In, "acl:edge", Placement::Prepend)?;
    /// let gen = reg.generation();
    /// let done = reg
    ///     .transaction()
    ///     .replace_filter("acl:edge", |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Dropped)
    ///     .link("eth0", Dir::Out, "acl:edge", Placement::Append)
    ///     .commit()?;
    /// assert_eq!(done.generation, gen + 1);
    /// done.wait(); // the old filter has been dropped
    /// # Ok::<(), pfil::Error>(())
    /// ```
    pub fn replace_filter<F: Filter>(self, hook: &str, filter: F) -> Self {
        self.op(Op::ReplaceFilter {
            hook: hook.to_owned(),
            filter: Arc::new(filter),
        })
    }

    /// Add any operation.
    pub fn op(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// Fail with [`Error::GenerationConflict`] unless the current generation
    /// is `generation` when the transaction commits.
    pub fn expect_generation(mut self, generation: u64) -> Self {
        self.expect = Some(generation);
        self
    }

    /// Validate every operation but publish nothing.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// Apply every operation, or none.
    ///
    /// # Errors
    /// [`Error::GenerationConflict`], or [`Error::Transaction`] with the
    /// index and error of the first failing operation (for a single
    /// operation, that operation's error itself).
    pub fn commit(self) -> Result<Commit, Error> {
        let reg = self.registry;
        let max_workers = reg.shared.max_workers;
        let ops = &self.ops;
        let expect = self.expect;
        // User code (`Filter::batched`), asked before the writer lock.
        let batched: Vec<bool> = ops.iter().map(batched).collect();
        let changed = reg.change_inner(self.dry_run, |next| {
            if let Some(expected) = expect {
                if expected != next.number {
                    return Err(Error::GenerationConflict {
                        expected,
                        current: next.number,
                    });
                }
            }
            let mut fx = Effects::default();
            // Links each operation removed, for the log.
            let mut unlinked = Vec::with_capacity(ops.len());
            for (index, op) in ops.iter().enumerate() {
                let before = fx.removed.len();
                match apply(next, op, batched[index], max_workers, &mut fx) {
                    Ok(()) => unlinked.push(fx.removed.len() - before),
                    Err(e) if ops.len() == 1 => return Err(e),
                    Err(e) => {
                        return Err(Error::Transaction {
                            index,
                            source: Box::new(e),
                        })
                    }
                }
            }
            Ok((fx, unlinked))
        })?;
        let ((fx, unlinked), generation, retirement) =
            (changed.value, changed.number, changed.retirement);
        let reaped = changed.reaped;
        if self.dry_run {
            // The retired entries are the copy's; the registry keeps its own.
            drop(fx);
            return Ok(Commit {
                generation,
                retirement,
                reaped,
            });
        }
        // Tell the ticket when the registry lets go of each retired hook
        // entry (and so of its filter): it is dropped when the last
        // generation holding it is reclaimed, or right here if none does.
        let signals = fx
            .retired_hooks
            .iter()
            .map(|h| {
                let s = Signal::new();
                h.on_drop.0.lock().push(s.clone());
                s
            })
            .collect();
        drop(fx.retired_hooks);
        for (op, unlinked) in ops.iter().zip(unlinked) {
            match op {
                Op::Link {
                    head,
                    dir,
                    hook,
                    options,
                } => {
                    tracing::info!(target: "pfil", head, %dir, hook, placement = ?options.placement, fail = %options.fail, generation, "linked")
                }
                Op::Unlink { head, dir, hook } => {
                    tracing::info!(target: "pfil", head, %dir, hook, generation, "unlinked")
                }
                Op::AddHook {
                    name, kind, dirs, ..
                } => {
                    tracing::info!(target: "pfil", hook = name, %kind, %dirs, generation, "hook added")
                }
                Op::RemoveHook { name } => {
                    tracing::info!(target: "pfil", hook = name, unlinked, generation, "hook removed")
                }
                Op::ReplaceFilter { hook, .. } => {
                    tracing::info!(target: "pfil", hook, generation, "filter replaced")
                }
            }
        }
        Ok(Commit {
            generation,
            retirement: retirement.with_removed(fx.removed).with_signals(signals),
            reaped,
        })
    }
}

/// A link that unlinks itself when dropped, unless told to persist.
///
/// It refers to the very link it created: if someone else unlinks it and
/// links the same hook again, dropping the handle leaves the new link alone.
/// A [filter replacement](Op::ReplaceFilter) keeps the link, so the handle
/// stays valid across it.
#[must_use = "dropping a LinkHandle unlinks at once"]
pub struct LinkHandle {
    pub(crate) registry: Registry,
    pub(crate) head: String,
    pub(crate) dir: Dir,
    pub(crate) hook: String,
    /// Names the link: its counters live as long as the link, across filter
    /// replacements (which rebuild the `Link` around the same counters).
    pub(crate) link: Weak<LinkCounters>,
    pub(crate) persist: bool,
}

impl std::fmt::Debug for LinkHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkHandle")
            .field("head", &self.head)
            .field("dir", &self.dir)
            .field("hook", &self.hook)
            .field("persist", &self.persist)
            .finish()
    }
}

impl LinkHandle {
    /// The head the link was made on.
    pub fn head(&self) -> &str {
        &self.head
    }

    /// The direction of the link.
    pub fn dir(&self) -> Dir {
        self.dir
    }

    /// The hook the link places.
    pub fn hook(&self) -> &str {
        &self.hook
    }

    /// Keep the link after the handle is gone.
    pub fn persist(mut self) {
        self.persist = true;
    }

    /// Unlink now; the commit carries the new generation and the ticket
    /// with the link's final counters.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`] if the head was unregistered,
    /// [`Error::NotLinked`] if this link is not linked any more.
    pub fn unlink(mut self) -> Result<Commit, Error> {
        self.persist = true;
        self.unlink_exact()
    }

    fn unlink_exact(&self) -> Result<Commit, Error> {
        let (head, dir, hook, link) = (&self.head, self.dir, &self.hook, &self.link);
        let changed = self.registry.change_inner(false, |next| {
            let links = next
                .heads
                .get_mut(head)
                .map(|rec| &mut rec.links[dir.index()])
                .ok_or_else(|| Error::NoSuchHead(head.clone()))?;
            let at = links
                .iter()
                .position(|l| std::ptr::eq(Arc::as_ptr(&l.counters), link.as_ptr()))
                .ok_or_else(|| Error::NotLinked {
                    head: head.clone(),
                    dir,
                    hook: hook.clone(),
                })?;
            Ok(links.remove(at))
        })?;
        let (gone, generation, ticket) = (changed.value, changed.number, changed.retirement);
        tracing::info!(target: "pfil", head = %head, %dir, hook = %gone.hook.name, generation, "unlinked (scoped)");
        Ok(Commit {
            generation,
            retirement: ticket.with_removed(vec![removed(head, dir, &gone)]),
            reaped: changed.reaped,
        })
    }
}

impl Drop for LinkHandle {
    fn drop(&mut self) {
        if !self.persist {
            // Already unlinked by someone else is fine here. What the
            // change reaped is kept for `Registry::take_reaped`.
            if let Ok(c) = self.unlink_exact() {
                self.registry.keep_reaped(c.reaped);
            }
        }
    }
}

impl Registry {
    /// Link a hook to a head in one direction. The commit carries the new
    /// generation (and a ticket for the previous one, which removed no
    /// link).
    ///
    /// # Errors
    /// [`Error::NoSuchHead`], [`Error::NoSuchHook`], [`Error::KindMismatch`],
    /// [`Error::DirUnsupportedByHead`], [`Error::DirNotDeclaredByHook`],
    /// [`Error::AlreadyLinked`], and [`Error::NotLinked`] when the hook named
    /// by `Before`/`After` is not in that chain.
    pub fn link(
        &self,
        head: &str,
        dir: Dir,
        hook: &str,
        options: impl Into<LinkOptions>,
    ) -> Result<Commit, Error> {
        self.transaction().link(head, dir, hook, options).commit()
    }

    /// Unlink a hook from a head in one direction. The rest of the chain
    /// keeps its order. The hook stays registered (its filter is not
    /// dropped) and can be linked again; the ticket completes when no reader
    /// can still run this link, with its final counters
    /// ([`Commit::links`]). The commit carries the new generation.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`], [`Error::NoSuchHook`] (no hook of that name
    /// is registered), [`Error::NotLinked`] (the hook exists but is not
    /// linked to that head in that direction).
    pub fn unlink(&self, head: &str, dir: Dir, hook: &str) -> Result<Commit, Error> {
        self.transaction().unlink(head, dir, hook).commit()
    }

    /// Link and get a handle that unlinks when dropped (unless
    /// [`persist`](LinkHandle::persist)ed).
    ///
    /// # Errors
    /// As [`link`](Self::link).
    pub fn link_scoped(
        &self,
        head: &str,
        dir: Dir,
        hook: &str,
        options: impl Into<LinkOptions>,
    ) -> Result<LinkHandle, Error> {
        let op = Op::Link {
            head: head.to_owned(),
            dir,
            hook: hook.to_owned(),
            options: options.into(),
        };
        let max_workers = self.shared.max_workers;
        let (link, generation, _) = self.change(|next| {
            apply(next, &op, false, max_workers, &mut Effects::default())?;
            let rec = &next.heads[head];
            let link = rec.links[dir.index()]
                .iter()
                .find(|l| l.hook.name == hook)
                .map(|l| Arc::downgrade(&l.counters))
                .unwrap_or_default();
            Ok(link)
        })?;
        tracing::info!(target: "pfil", head, %dir, hook, generation, "linked (scoped)");
        Ok(LinkHandle {
            registry: self.clone(),
            head: head.to_owned(),
            dir,
            hook: hook.to_owned(),
            link,
            persist: false,
        })
    }

    /// Start a transaction: several operations (links, unlinks, hooks
    /// added or removed, filters replaced) applied all-or-nothing in one
    /// generation.
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction {
            registry: self,
            ops: Vec::new(),
            expect: None,
            dry_run: false,
        }
    }
}
