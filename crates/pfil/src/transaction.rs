//! Transactions and scoped links: how writers describe a change of links.
//! They are applied by the writer path of the registry (registry.rs) with
//! the operations of state.rs; the registry does not know about them.

use std::sync::{Arc, Weak};

use crate::chain::Link;
use crate::state::{apply, LinkOptions, Op};
use crate::{Dir, Error, Registry, Retirement};

/// Several operations applied all-or-nothing in one generation.
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

/// The outcome of a committed transaction.
#[derive(Debug)]
pub struct Commit {
    /// The generation the change was published as; for a dry run, the
    /// current generation (nothing was published).
    pub generation: u64,
    /// Completes when the previous generation is gone.
    pub retirement: Retirement,
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
        let (removed, generation, retirement) = reg.change_inner(self.dry_run, |next| {
            if let Some(expected) = expect {
                if expected != next.number {
                    return Err(Error::GenerationConflict {
                        expected,
                        current: next.number,
                    });
                }
            }
            let mut removed = Vec::new();
            for (index, op) in ops.iter().enumerate() {
                match apply(next, op, max_workers) {
                    Ok(gone) => removed.extend(gone.map(|l| l.counters.clone())),
                    Err(e) if ops.len() == 1 => return Err(e),
                    Err(e) => {
                        return Err(Error::Transaction {
                            index,
                            source: Box::new(e),
                        })
                    }
                }
            }
            Ok(removed)
        })?;
        if !self.dry_run {
            for op in ops {
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
                }
            }
        }
        Ok(Commit {
            generation,
            retirement: retirement.with_removed(if self.dry_run { Vec::new() } else { removed }),
        })
    }
}

/// A link that unlinks itself when dropped, unless told to persist.
///
/// It refers to the very link it created: if someone else unlinks it and
/// links the same hook again, dropping the handle leaves the new link alone.
#[must_use = "dropping a LinkHandle unlinks at once"]
pub struct LinkHandle {
    pub(crate) registry: Registry,
    pub(crate) head: String,
    pub(crate) dir: Dir,
    pub(crate) link: Weak<Link>,
    pub(crate) persist: bool,
}

impl LinkHandle {
    /// Keep the link after the handle is gone.
    pub fn persist(mut self) {
        self.persist = true;
    }

    /// Unlink now and get the retirement ticket.
    ///
    /// # Errors
    /// [`Error::NotLinked`] if this link is not linked any more.
    pub fn unlink(mut self) -> Result<Retirement, Error> {
        self.persist = true;
        self.unlink_exact()
    }

    fn unlink_exact(&self) -> Result<Retirement, Error> {
        let (head, dir, link) = (&self.head, self.dir, &self.link);
        let (gone, generation, ticket) = self.registry.change(|next| {
            let links = next
                .heads
                .get_mut(head)
                .map(|rec| &mut rec.links[dir.index()])
                .ok_or_else(|| Error::NoSuchHead(head.clone()))?;
            let at = links
                .iter()
                .position(|l| std::ptr::eq(Arc::as_ptr(l), link.as_ptr()))
                .ok_or_else(|| Error::NotLinked {
                    head: head.clone(),
                    dir,
                    hook: link
                        .upgrade()
                        .map(|l| l.hook.name.clone())
                        .unwrap_or_default(),
                })?;
            Ok(links.remove(at))
        })?;
        tracing::info!(target: "pfil", head = %head, %dir, hook = %gone.hook.name, generation, "unlinked (scoped)");
        Ok(ticket.with_removed(vec![gone.counters.clone()]))
    }
}

impl Drop for LinkHandle {
    fn drop(&mut self) {
        if !self.persist {
            // Already unlinked by someone else is fine here.
            let _ = self.unlink_exact();
        }
    }
}

impl Registry {
    /// Link a hook to a head in one direction. Returns the new generation.
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
    ) -> Result<u64, Error> {
        let c = self.transaction().link(head, dir, hook, options).commit()?;
        Ok(c.generation)
    }

    /// Unlink a hook from a head in one direction. The rest of the chain
    /// keeps its order. The hook stays registered (its filter is not
    /// dropped) and can be linked again; the ticket completes when no reader
    /// can still run this link, with its final counters.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`], [`Error::NotLinked`].
    pub fn unlink(&self, head: &str, dir: Dir, hook: &str) -> Result<Retirement, Error> {
        let c = self.transaction().unlink(head, dir, hook).commit()?;
        Ok(c.retirement)
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
            apply(next, &op, max_workers)?;
            let rec = &next.heads[head];
            let link = rec.links[dir.index()]
                .iter()
                .find(|l| l.hook.name == hook)
                .map(Arc::downgrade)
                .unwrap_or_default();
            Ok(link)
        })?;
        tracing::info!(target: "pfil", head, %dir, hook, generation, "linked (scoped)");
        Ok(LinkHandle {
            registry: self.clone(),
            head: head.to_owned(),
            dir,
            link,
            persist: false,
        })
    }

    /// Start a transaction: several link/unlink operations applied
    /// all-or-nothing in one generation.
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction {
            registry: self,
            ops: Vec::new(),
            expect: None,
            dry_run: false,
        }
    }
}
