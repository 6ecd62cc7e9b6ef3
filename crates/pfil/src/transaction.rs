//! Link placement, transactions and scoped links: how writers describe a
//! change. `Registry::change` (registry.rs) publishes it.

use std::sync::{Arc, Weak};

use crate::chain::Link;
use crate::counters::LinkCounters;
use crate::registry::State;
use crate::sync::AtomicBool;
use crate::{Dir, Error, FailMode, Registry, Retirement};

/// Where a new link goes in its chain (chains are walked in order).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// Closest to the wire, pfil's default: first on input, last on output.
    #[default]
    Prepend,
    /// Farthest from the wire: last on input, first on output.
    Append,
    /// Just before the named hook, in walk order.
    Before(String),
    /// Just after the named hook, in walk order.
    After(String),
}

/// How to link: placement and what to do if the hook panics.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LinkOptions {
    /// Where the link goes.
    pub placement: Placement,
    /// Verdict for the packet a panicking hook was looking at.
    pub fail: FailMode,
}

impl From<Placement> for LinkOptions {
    fn from(placement: Placement) -> Self {
        LinkOptions {
            placement,
            fail: FailMode::default(),
        }
    }
}

/// One operation of a [`Transaction`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Link `hook` to `head` in `dir`.
    Link {
        /// Head name.
        head: String,
        /// Direction.
        dir: Dir,
        /// Hook name.
        hook: String,
        /// Placement and fail mode.
        options: LinkOptions,
    },
    /// Unlink `hook` from `head` in `dir`.
    Unlink {
        /// Head name.
        head: String,
        /// Direction.
        dir: Dir,
        /// Hook name.
        hook: String,
    },
}

/// Apply one operation to a configuration under construction; an unlink
/// hands back the link it removed.
pub(crate) fn apply(
    s: &mut State,
    op: &Op,
    max_workers: usize,
) -> Result<Option<Arc<Link>>, Error> {
    match op {
        Op::Link {
            head,
            dir,
            hook,
            options,
        } => {
            let entry = s
                .hooks
                .get(hook)
                .ok_or_else(|| Error::NoSuchHook(hook.clone()))?
                .clone();
            let rec = s
                .heads
                .get_mut(head)
                .ok_or_else(|| Error::NoSuchHead(head.clone()))?;
            if entry.kind != rec.inner.kind {
                return Err(Error::KindMismatch {
                    head: head.clone(),
                    head_kind: rec.inner.kind,
                    hook: hook.clone(),
                    hook_kind: entry.kind,
                });
            }
            if !rec.inner.dirs.contains(*dir) {
                return Err(Error::DirUnsupportedByHead {
                    head: head.clone(),
                    dir: *dir,
                });
            }
            if !entry.dirs.contains(*dir) {
                return Err(Error::DirNotDeclaredByHook {
                    hook: hook.clone(),
                    dir: *dir,
                });
            }
            let links = &mut rec.links[dir.index()];
            if links.iter().any(|l| l.hook.name == *hook) {
                return Err(Error::AlreadyLinked {
                    head: head.clone(),
                    dir: *dir,
                    hook: hook.clone(),
                });
            }
            let find = |name: &str| {
                links
                    .iter()
                    .position(|l| l.hook.name == name)
                    .ok_or_else(|| Error::NotLinked {
                        head: head.clone(),
                        dir: *dir,
                        hook: name.to_owned(),
                    })
            };
            let at = match (&options.placement, dir) {
                (Placement::Prepend, Dir::In) | (Placement::Append, Dir::Out) => 0,
                (Placement::Prepend, Dir::Out) | (Placement::Append, Dir::In) => links.len(),
                (Placement::Before(other), _) => find(other)?,
                (Placement::After(other), _) => find(other)? + 1,
            };
            links.insert(
                at,
                Arc::new(Link {
                    hook: entry,
                    fail: options.fail,
                    counters: Arc::new(LinkCounters::new(max_workers)),
                    quarantined: AtomicBool::new(false),
                }),
            );
        }
        Op::Unlink { head, dir, hook } => {
            let rec = s
                .heads
                .get_mut(head)
                .ok_or_else(|| Error::NoSuchHead(head.clone()))?;
            let links = &mut rec.links[dir.index()];
            let at = links
                .iter()
                .position(|l| l.hook.name == *hook)
                .ok_or_else(|| Error::NotLinked {
                    head: head.clone(),
                    dir: *dir,
                    hook: hook.clone(),
                })?;
            return Ok(Some(links.remove(at)));
        }
    }
    Ok(None)
}

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
