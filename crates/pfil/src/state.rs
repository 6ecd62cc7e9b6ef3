//! The writer's configuration and the pure operations on it: the copy a
//! writer edits ([`State`]), the operations a change is made of ([`Op`]
//! and [`apply`]), and the immutable [`Generation`] built from it that the
//! datapath walks. No lock is taken and nothing is published here:
//! `Registry::change` (registry.rs) does that.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::chain::{Chain, HookEntry, Link, Quarantined};
use crate::counters::LinkCounters;
use crate::retire::{Retirement, Signal};
use crate::sync::{AtomicBool, Mutex};
use crate::{Dir, Dirs, Error, FailMode, PacketKind};

/// The datapath side of a head, shared by its `Head` handles.
pub(crate) struct HeadInner {
    pub(crate) name: String,
    pub(crate) kind: PacketKind,
    pub(crate) dirs: Dirs,
    /// Index of this head's chains in every generation. Never reused.
    pub(crate) slot: usize,
    /// Per direction: is anything linked? Read relaxed by `is_hooked`.
    pub(crate) hooked: [AtomicBool; 2],
}

/// One immutable configuration: every head's chains, numbered.
pub(crate) struct Generation {
    pub(crate) number: u64,
    /// Indexed by head slot, then by direction.
    pub(crate) chains: Box<[[Chain; 2]]>,
    /// Tickets to complete when this generation is reclaimed. Only writers
    /// touch it, before retiring the generation.
    pub(crate) on_retire: Mutex<Vec<Arc<Signal>>>,
}

impl Drop for Generation {
    fn drop(&mut self) {
        for s in self.on_retire.get_mut().drain(..) {
            s.fire();
        }
    }
}

/// The writer's view of the configuration.
#[derive(Clone, Default)]
pub(crate) struct State {
    pub(crate) number: u64,
    pub(crate) heads: BTreeMap<String, HeadRec>,
    pub(crate) hooks: BTreeMap<String, Arc<HookEntry>>,
    pub(crate) next_slot: usize,
}

#[derive(Clone)]
pub(crate) struct HeadRec {
    pub(crate) inner: Arc<HeadInner>,
    pub(crate) links: [Vec<Arc<Link>>; 2],
}

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

/// One operation of a [`Transaction`](crate::Transaction).
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

/// Unlink the quarantined links still present; returns which of `pending`
/// were, with the links.
pub(crate) fn reap(s: &mut State, pending: &[Quarantined]) -> Vec<(usize, Arc<Link>)> {
    let mut reaped = Vec::new();
    for (i, q) in pending.iter().enumerate() {
        if let Some(rec) = s.heads.get_mut(&q.head) {
            let links = &mut rec.links[q.dir.index()];
            if let Some(at) = links
                .iter()
                .position(|l| std::ptr::eq(Arc::as_ptr(l), q.link.as_ptr()))
            {
                reaped.push((i, links.remove(at)));
            }
        }
    }
    reaped
}

pub(crate) fn build_generation(s: &State) -> Generation {
    let mut chains: Vec<[Chain; 2]> = (0..s.next_slot)
        .map(|_| [Chain::Empty, Chain::Empty])
        .collect();
    for rec in s.heads.values() {
        chains[rec.inner.slot] = [
            Chain::from_links(&rec.links[0]),
            Chain::from_links(&rec.links[1]),
        ];
    }
    Generation {
        number: s.number,
        chains: chains.into_boxed_slice(),
        on_retire: Mutex::new(Vec::new()),
    }
}

/// A quarantined link that a writer unlinked, as handed out (once) by
/// [`Registry::reap_quarantine`](crate::Registry::reap_quarantine).
#[derive(Debug)]
pub struct Reaped {
    /// Head name.
    pub head: String,
    /// Direction.
    pub dir: Dir,
    /// Hook name.
    pub hook: String,
    /// The link's fail mode.
    pub fail: FailMode,
    /// The first generation without the link.
    pub generation: u64,
    /// Completes when no reader can still run the link; its
    /// [`counters`](Retirement::counters) are then the link's final counts.
    pub retirement: Retirement,
}
