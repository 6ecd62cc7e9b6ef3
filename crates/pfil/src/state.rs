//! The writer's configuration and the pure operations on it: the copy a
//! writer edits ([`State`]), the operations a change is made of ([`Op`]
//! and [`apply`]), and the immutable [`Generation`] built from it that the
//! datapath walks. No lock is taken and nothing is published here:
//! `Registry::change` (registry.rs) does that.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::chain::{Chain, HookEntry, Link};
use crate::counters::LinkCounters;
use crate::retire::{Removed, Signal};
use crate::sync::{AtomicBool, AtomicPtr, AtomicU64, Mutex};
use crate::trace::{Trace, Traced};
use crate::{validate_name, Dir, Dirs, Error, FailMode, Filter, PacketKind};

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
    /// The next generation down in the [`Graveyard`], once buried.
    buried_next: AtomicPtr<Generation>,
}

// Generations are dropped on whichever thread drains the graveyard.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Generation>();
};

/// Generations past their grace period, waiting to be dropped.
///
/// Dropping a generation drops its chains, and with them possibly the last
/// reference to a removed or replaced filter: a whole ACL's tables, say,
/// and any `Drop` a filter has. The epoch runs a retired generation's
/// deferred function on whichever thread collects garbage, and a datapath
/// worker's pin may be that thread; so the deferred function only buries
/// the generation here (a lock-free push, no allocation, nothing dropped),
/// and the control plane drops it: the next writer after its change
/// (`Registry::change`), a [`Retirement`] waited for or asked whether it
/// is complete, and `Registry::reclaim`. Readers never pay for a removal.
pub(crate) struct Graveyard {
    /// Where the epoch buries: a stack linked through
    /// `Generation::buried_next`, pushed by any thread, taken whole by a
    /// drain.
    top: AtomicPtr<Generation>,
    /// What drains took from `top` and did not drop yet, oldest last. Only
    /// the control plane's drains take this lock, never for a drop.
    dead: Mutex<VecDeque<Box<Generation>>>,
}

impl Graveyard {
    pub(crate) fn new() -> Graveyard {
        Graveyard {
            top: AtomicPtr::new(std::ptr::null_mut()),
            dead: Mutex::new(VecDeque::new()),
        }
    }

    /// Push `g`, whose grace period is over. Lock-free (a CAS loop: the
    /// only other writers push too, and a drain takes the whole stack at
    /// once, so there is no ABA), allocates and drops nothing.
    pub(crate) fn bury(&self, g: Box<Generation>) {
        let g = Box::into_raw(g);
        let mut top = self.top.load(Ordering::Relaxed);
        loop {
            // SAFETY: `g` came from `Box::into_raw` above and is not
            // reachable by anyone else until the exchange below publishes
            // it.
            unsafe { (*g).buried_next.store(top, Ordering::Relaxed) };
            // Release: the drainer's Acquire swap sees `buried_next` and
            // the whole generation.
            match self
                .top
                .compare_exchange_weak(top, g, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(t) => top = t,
            }
        }
    }

    /// Drop every buried generation, on the calling thread (which completes
    /// their tickets). Call it outside the registry's locks and unpinned
    /// ([`drain_unpinned`](Self::drain_unpinned)): a filter's `Drop` may use
    /// the registry, or wait for a retirement.
    ///
    /// One generation at a time, each dropped outside the lock: so a
    /// `Drop` that waits for a retirement finds the generation it waits for
    /// still here (its own nested drain, or another thread's, drops it), and
    /// a `Drop` that panics leaves the rest here, not leaked. Linear in the
    /// number of generations.
    pub(crate) fn drain(&self) {
        loop {
            let next = {
                let mut dead = self.dead.lock();
                let mut p = self.top.swap(std::ptr::null_mut(), Ordering::Acquire);
                while !p.is_null() {
                    // SAFETY: every pointer on the stack came from
                    // `Box::into_raw` in `bury`, and the swap above took
                    // the whole stack: nobody else can reach these
                    // generations now.
                    let g = unsafe { Box::from_raw(p) };
                    p = g.buried_next.load(Ordering::Relaxed);
                    // Newest first (the stack's order), dropped first.
                    dead.push_back(g);
                }
                dead.pop_front()
            };
            match next {
                Some(g) => drop(g),
                None => return,
            }
        }
    }

    /// [`drain`](Self::drain), unless this thread is pinned: a pinned thread
    /// is a reader (a hook asking, a snapshot held), which never does this
    /// work, and a filter's `Drop` may wait for a retirement, which the pin
    /// would block. What writers, tickets and `Registry::reclaim` call.
    pub(crate) fn drain_unpinned(&self) {
        if !crossbeam_epoch::is_pinned() {
            self.drain();
        }
    }
}

impl Drop for Graveyard {
    fn drop(&mut self) {
        self.drain();
    }
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
    /// Per direction: the packet trace attached, if any (trace.rs).
    pub(crate) traces: [Option<Arc<Trace>>; 2],
}

impl HeadRec {
    /// Does the datapath run anything in `d` (links, or a trace)?
    pub(crate) fn hooked(&self, d: Dir) -> bool {
        !self.links[d.index()].is_empty() || self.traces[d.index()].is_some()
    }
}

/// Where a new link goes in its chain (chains are walked in order).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
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
///
/// Operations apply in order, each to the configuration the previous ones
/// left: a transaction can add a hook and link it, or replace one filter
/// and unlink another, all in one generation.
///
/// `PartialEq` compares filters by identity (the same `Arc`).
#[derive(Clone)]
#[non_exhaustive]
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
    /// Register a hook, as [`Registry::add_hook_shared`](crate::Registry::add_hook_shared).
    AddHook {
        /// Hook name, `module:ruleset`.
        name: String,
        /// The packet kind it filters.
        kind: PacketKind,
        /// The directions it accepts.
        dirs: Dirs,
        /// The filter.
        filter: Arc<dyn Filter>,
    },
    /// Unlink a hook everywhere and unregister it, as
    /// [`Registry::remove_hook`](crate::Registry::remove_hook).
    RemoveHook {
        /// Hook name.
        name: String,
    },
    /// Put `filter` under the existing hook `hook`: every link of the hook
    /// keeps its place, fail mode and counters (and a
    /// [`LinkHandle`](crate::LinkHandle) to it stays valid) and runs the new
    /// filter from this generation on. The hook keeps its kind and
    /// directions. A quarantined link of the hook runs the new filter, no
    /// longer quarantined (replacing the filter is a decision about it);
    /// a quarantined fail-open link is unlinked before, as by any writer
    /// call (see [`Registry::reap_quarantine`](crate::Registry::reap_quarantine)).
    /// The old filter is retired like a removed hook's: the commit's ticket
    /// completes once the registry has dropped it, after the grace period.
    ReplaceFilter {
        /// Hook name.
        hook: String,
        /// The new filter.
        filter: Arc<dyn Filter>,
    },
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Link {
                head,
                dir,
                hook,
                options,
            } => f
                .debug_struct("Link")
                .field("head", head)
                .field("dir", dir)
                .field("hook", hook)
                .field("options", options)
                .finish(),
            Op::Unlink { head, dir, hook } => f
                .debug_struct("Unlink")
                .field("head", head)
                .field("dir", dir)
                .field("hook", hook)
                .finish(),
            Op::AddHook {
                name, kind, dirs, ..
            } => f
                .debug_struct("AddHook")
                .field("name", name)
                .field("kind", kind)
                .field("dirs", dirs)
                .finish_non_exhaustive(),
            Op::RemoveHook { name } => f.debug_struct("RemoveHook").field("name", name).finish(),
            Op::ReplaceFilter { hook, .. } => f
                .debug_struct("ReplaceFilter")
                .field("hook", hook)
                .finish_non_exhaustive(),
        }
    }
}

impl PartialEq for Op {
    fn eq(&self, other: &Op) -> bool {
        match (self, other) {
            (
                Op::Link {
                    head,
                    dir,
                    hook,
                    options,
                },
                Op::Link {
                    head: h2,
                    dir: d2,
                    hook: k2,
                    options: o2,
                },
            ) => (head, dir, hook, options) == (h2, d2, k2, o2),
            (
                Op::Unlink { head, dir, hook },
                Op::Unlink {
                    head: h2,
                    dir: d2,
                    hook: k2,
                },
            ) => (head, dir, hook) == (h2, d2, k2),
            (
                Op::AddHook {
                    name,
                    kind,
                    dirs,
                    filter,
                },
                Op::AddHook {
                    name: n2,
                    kind: k2,
                    dirs: d2,
                    filter: f2,
                },
            ) => (name, kind, dirs) == (n2, k2, d2) && Arc::ptr_eq(filter, f2),
            (Op::RemoveHook { name }, Op::RemoveHook { name: n2 }) => name == n2,
            (
                Op::ReplaceFilter { hook, filter },
                Op::ReplaceFilter {
                    hook: h2,
                    filter: f2,
                },
            ) => hook == h2 && Arc::ptr_eq(filter, f2),
            _ => false,
        }
    }
}

impl Eq for Op {}

/// What applying operations did besides editing the state: the links they
/// removed and the hook entries they retired (removed, or replaced by a new
/// filter), whose drop the commit's ticket waits for.
#[derive(Default)]
pub(crate) struct Effects {
    pub(crate) removed: Vec<Removed>,
    pub(crate) retired_hooks: Vec<Arc<HookEntry>>,
}

pub(crate) fn removed(head: &str, dir: Dir, link: &Link) -> Removed {
    Removed {
        head: head.to_owned(),
        dir,
        hook: link.hook.name.clone(),
        fail: link.fail,
        counters: link.counters.clone(),
    }
}

/// What [`apply`] needs of an operation's filter, asked before the writer
/// lock is taken: a filter's `batched()` is user code, which may use the
/// registry (under the lock it would deadlock).
pub(crate) fn batched(op: &Op) -> bool {
    match op {
        Op::AddHook { filter, .. } | Op::ReplaceFilter { filter, .. } => filter.batched(),
        _ => false,
    }
}

/// Apply one operation to a configuration under construction, recording
/// what it removed in `fx`. `batched` is [`batched`]`(op)`, asked before
/// the writer lock was taken.
pub(crate) fn apply(
    s: &mut State,
    op: &Op,
    batched: bool,
    max_workers: usize,
    fx: &mut Effects,
) -> Result<(), Error> {
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
            if !s.hooks.contains_key(hook) {
                return Err(Error::NoSuchHook(hook.clone()));
            }
            let links = &mut rec.links[dir.index()];
            let at = links
                .iter()
                .position(|l| l.hook.name == *hook)
                .ok_or_else(|| Error::NotLinked {
                    head: head.clone(),
                    dir: *dir,
                    hook: hook.clone(),
                })?;
            let gone = links.remove(at);
            fx.removed.push(removed(head, *dir, &gone));
        }
        Op::AddHook {
            name,
            kind,
            dirs,
            filter,
        } => {
            validate_name(name)?;
            if s.hooks.contains_key(name) {
                return Err(Error::DuplicateHook(name.clone()));
            }
            s.hooks.insert(
                name.clone(),
                Arc::new(HookEntry {
                    name: name.clone(),
                    kind: *kind,
                    dirs: *dirs,
                    filter: filter.clone(),
                    batched,
                    faults: AtomicU64::new(0),
                    on_drop: Default::default(),
                }),
            );
        }
        Op::RemoveHook { name } => {
            let hook = s
                .hooks
                .remove(name)
                .ok_or_else(|| Error::NoSuchHook(name.clone()))?;
            for rec in s.heads.values_mut() {
                for dir in Dir::ALL {
                    rec.links[dir.index()].retain(|l| {
                        let keep = !Arc::ptr_eq(&l.hook, &hook);
                        if !keep {
                            fx.removed.push(removed(&rec.inner.name, dir, l));
                        }
                        keep
                    });
                }
            }
            fx.retired_hooks.push(hook);
        }
        Op::ReplaceFilter { hook, filter } => {
            let old = s
                .hooks
                .get(hook)
                .ok_or_else(|| Error::NoSuchHook(hook.clone()))?
                .clone();
            let new = Arc::new(HookEntry {
                name: old.name.clone(),
                kind: old.kind,
                dirs: old.dirs,
                filter: filter.clone(),
                batched,
                // The hook's lifetime count goes on (panics the old filter
                // has during the grace period are not carried over).
                faults: AtomicU64::new(old.faults.load(std::sync::atomic::Ordering::Relaxed)),
                on_drop: Default::default(),
            });
            s.hooks.insert(hook.clone(), new.clone());
            for rec in s.heads.values_mut() {
                for links in &mut rec.links {
                    for l in links.iter_mut().filter(|l| Arc::ptr_eq(&l.hook, &old)) {
                        // Same counters: the link goes on counting, and a
                        // `LinkHandle` (which names its link by them) still
                        // finds it.
                        *l = Arc::new(Link {
                            hook: new.clone(),
                            fail: l.fail,
                            counters: l.counters.clone(),
                            quarantined: AtomicBool::new(false),
                        });
                    }
                }
            }
            fx.retired_hooks.push(old);
        }
    }
    Ok(())
}

pub(crate) fn build_generation(s: &State) -> Generation {
    let mut chains: Vec<[Chain; 2]> = (0..s.next_slot)
        .map(|_| [Chain::Empty, Chain::Empty])
        .collect();
    for rec in s.heads.values() {
        chains[rec.inner.slot] = Dir::ALL.map(|d| {
            let links = &rec.links[d.index()];
            let chain = Chain::from_links(links);
            match &rec.traces[d.index()] {
                None => chain,
                Some(trace) => {
                    trace.note_chain(s.number, links);
                    Chain::Traced(Box::new(Traced {
                        trace: trace.clone(),
                        inner: chain,
                        generation: s.number,
                    }))
                }
            }
        });
    }
    Generation {
        number: s.number,
        chains: chains.into_boxed_slice(),
        on_retire: Mutex::new(Vec::new()),
        buried_next: AtomicPtr::new(std::ptr::null_mut()),
    }
}
