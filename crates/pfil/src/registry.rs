//! The control path: the registry of heads and hooks and the writer path
//! that publishes generations. Writers serialize on one adaptive mutex,
//! build the next configuration copy-on-write (state.rs), publish it with
//! one atomic swap and retire the old generation through the epoch.
//! Links and transactions (transaction.rs) are built on top of it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_epoch::{self as epoch, Atomic, Owned};

use crate::chain::{HookEntry, Link, Quarantined};
use crate::counters::{Counters, Refused, RefusedCounters};
use crate::head::Snapshot;
use crate::retire::{Retirement, Signal};
use crate::shared::Shared;
use crate::state::{
    build_generation, reap, removed, Graveyard, HeadInner, HeadRec, Op, Reaped, State,
};
use crate::sync::{AtomicBool, AtomicU64, Condvar, Mutex};
use crate::{
    validate_name, witness, Dir, Dirs, Error, FailMode, Filter, FilterStat, Head, PacketKind,
    Worker,
};

/// Worker slots a registry has unless told otherwise.
pub const DEFAULT_MAX_WORKERS: usize = 64;

/// One batch in this many per worker is timed per link unless told
/// otherwise ([`Registry::set_sampling`]).
pub const DEFAULT_SAMPLING: u32 = 64;

/// The registry of heads, hooks and links.
///
/// Cloning is cheap and gives another handle to the same registry.
///
/// # Examples
/// ```
/// use pfil::{Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
///
/// let reg = Registry::new();
/// let head = reg.register_head("veth0", PacketKind::Ethernet, Dirs::BOTH)?;
/// reg.add_hook("drop:all", PacketKind::Ethernet, Dirs::IN, |_: &mut Packet<'_>, _: &pfil::Ctx<'_>| Verdict::Dropped)?;
/// reg.link("veth0", Dir::In, "drop:all", Placement::Prepend)?;
///
/// let mut worker = reg.worker()?;
/// let mut frame = [0u8; 64];
/// let mut batch = [Packet::new(&mut frame)];
/// assert!(head.is_hooked(Dir::In));
/// head.run(Dir::In, &mut worker, &mut batch);
/// assert_eq!(batch[0].verdict(), Verdict::Dropped);
/// # Ok::<(), pfil::Error>(())
/// ```
#[derive(Clone)]
pub struct Registry {
    pub(crate) shared: Arc<Shared>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// A registry with [`DEFAULT_MAX_WORKERS`] worker slots.
    pub fn new() -> Registry {
        Registry::with_max_workers(DEFAULT_MAX_WORKERS)
    }

    /// A registry whose datapath can be run by at most `max_workers`
    /// [`Worker`]s at once (each link keeps one cache-line-padded counter
    /// slot per worker). Any number works (one per NIC queue, more than 64
    /// included); `0` is taken as `1`: a registry always has a worker slot.
    pub fn with_max_workers(max_workers: usize) -> Registry {
        let max_workers = max_workers.max(1);
        let state = State::default();
        let gen = build_generation(&state);
        Registry {
            shared: Arc::new(Shared {
                current: Atomic::new(gen),
                graveyard: Arc::new(Graveyard::new()),
                writer: Mutex::new(state),
                quarantine: Mutex::new(Vec::new()),
                free_workers: Mutex::new((0..max_workers).rev().collect()),
                max_workers,
                number: AtomicU64::new(0),
                reaped: Mutex::new(Vec::new()),
                refused: RefusedCounters::new(max_workers),
                published: Mutex::new(()),
                published_cv: Condvar::default(),
                sample_every: std::sync::atomic::AtomicU32::new(DEFAULT_SAMPLING),
            }),
        }
    }

    /// The number of worker slots.
    pub fn max_workers(&self) -> usize {
        self.shared.max_workers
    }

    /// Batches and packets the datapath refused instead of running them (a
    /// head, worker or snapshot of different registries; packets of another
    /// kind than their head), summed over this registry's workers. See
    /// [`Refused`].
    pub fn refused(&self) -> Refused {
        self.shared.refused.sum()
    }

    /// The current generation number (0 before the first change).
    pub fn generation(&self) -> u64 {
        self.shared.number.load(Ordering::Acquire)
    }

    /// Wait until the generation number is no longer `seen`, at most
    /// `timeout`: a control plane's "watch" without polling. Returns the
    /// current generation if it differs from `seen`, `None` on time-out.
    /// Dry runs publish nothing and so wake no one.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use pfil::{Dirs, PacketKind, Registry};
    ///
    /// let reg = Registry::new();
    /// let seen = reg.generation();
    /// assert_eq!(reg.wait_generation(seen, Duration::from_millis(1)), None);
    /// let r2 = reg.clone();
    /// let t = std::thread::spawn(move || r2.register_head("h", PacketKind::Ethernet, Dirs::IN).map(drop));
    /// assert_eq!(reg.wait_generation(seen, Duration::from_secs(60)), Some(seen + 1));
    /// t.join().unwrap()?;
    /// # Ok::<(), pfil::Error>(())
    /// ```
    pub fn wait_generation(&self, seen: u64, timeout: Duration) -> Option<u64> {
        // A timeout too large for an `Instant` is no timeout.
        let deadline = Instant::now().checked_add(timeout);
        let mut g = self.shared.published.lock();
        loop {
            // Checked under `published`, which the writer takes to notify
            // after storing the number: no wake-up is lost.
            let now = self.generation();
            if now != seen {
                return Some(now);
            }
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return None;
            }
            self.shared.published_cv.wait_for(&mut g, left);
        }
    }

    /// Take a worker slot: the identity a datapath thread runs heads with.
    ///
    /// # Errors
    /// [`Error::NoWorkerSlot`] when `max_workers` workers are alive.
    pub fn worker(&self) -> Result<Worker, Error> {
        let index = self
            .shared
            .free_workers
            .lock()
            .pop()
            .ok_or(Error::NoWorkerSlot(self.shared.max_workers))?;
        Ok(Worker {
            index,
            shared: self.shared.clone(),
            tick: 0,
        })
    }

    /// The worker slots in use (taken by [`Registry::worker`] and not
    /// dropped), in index order.
    pub fn workers_in_use(&self) -> Vec<usize> {
        let free = self.shared.free_workers.lock();
        (0..self.shared.max_workers)
            .filter(|i| !free.contains(i))
            .collect()
    }

    /// Time one batch in `every` per worker (rounded up to a power of two;
    /// 0 turns timing off): each link's run of that batch is timed and
    /// counted in its [`Counters`](crate::Counters)' `sampled_*` fields,
    /// from which [`Counters::ns_per_packet`](crate::Counters::ns_per_packet)
    /// is the link's cost. The other batches pay one counter increment and
    /// one branch per head run, and one branch per link. Takes effect from
    /// each worker's next batch.
    pub fn set_sampling(&self, every: u32) {
        let every = if every == 0 {
            0
        } else {
            every.checked_next_power_of_two().unwrap_or(1 << 31)
        };
        self.shared
            .sample_every
            .store(every, std::sync::atomic::Ordering::Relaxed);
    }

    /// One batch in how many is timed per worker (0: none).
    pub fn sampling(&self) -> u32 {
        self.shared
            .sample_every
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Register an inspection point.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::DuplicateHead`].
    pub fn register_head(&self, name: &str, kind: PacketKind, dirs: Dirs) -> Result<Head, Error> {
        validate_name(name)?;
        let (inner, number, _) = self.change(|next| {
            if next.heads.contains_key(name) {
                return Err(Error::DuplicateHead(name.to_owned()));
            }
            let inner = Arc::new(HeadInner {
                name: name.to_owned(),
                kind,
                dirs,
                slot: next.next_slot,
                hooked: [AtomicBool::new(false), AtomicBool::new(false)],
            });
            next.next_slot += 1;
            next.heads.insert(
                name.to_owned(),
                HeadRec {
                    inner: inner.clone(),
                    links: Default::default(),
                },
            );
            Ok(inner)
        })?;
        tracing::info!(target: "pfil", head = name, %kind, %dirs, generation = number, "head registered");
        Ok(Head {
            shared: self.shared.clone(),
            inner,
        })
    }

    /// A handle to a registered head.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`].
    pub fn head(&self, name: &str) -> Result<Head, Error> {
        let w = self.shared.writer.lock();
        let rec = w
            .heads
            .get(name)
            .ok_or_else(|| Error::NoSuchHead(name.to_owned()))?;
        Ok(Head {
            shared: self.shared.clone(),
            inner: rec.inner.clone(),
        })
    }

    /// Unregister a head; its links go with it. Handles to it stay valid and
    /// run an empty chain.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`].
    pub fn unregister_head(&self, name: &str) -> Result<Retirement, Error> {
        let (rec, number, ticket) = self.change(|next| {
            next.heads
                .remove(name)
                .ok_or_else(|| Error::NoSuchHead(name.to_owned()))
        })?;
        for h in &rec.inner.hooked {
            h.store(false, Ordering::Relaxed);
        }
        let gone = Dir::ALL
            .into_iter()
            .flat_map(|d| {
                rec.links[d.index()]
                    .iter()
                    .map(move |l| removed(name, d, l))
            })
            .collect();
        tracing::info!(target: "pfil", head = name, generation = number, "head unregistered");
        Ok(ticket.with_removed(gone))
    }

    /// Register a hook (a named filter) for packets of `kind` in `dirs`.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::DuplicateHook`].
    pub fn add_hook<F: Filter>(
        &self,
        name: &str,
        kind: PacketKind,
        dirs: Dirs,
        filter: F,
    ) -> Result<(), Error> {
        self.add_hook_shared(name, kind, dirs, Arc::new(filter))
    }

    /// [`add_hook`](Self::add_hook) for a filter the caller keeps a handle
    /// to (or one chosen at run time). The registry holds its reference
    /// until the grace period after [`remove_hook`](Self::remove_hook); the
    /// removal's ticket completes then, while the caller's `Arc` keeps the
    /// object alive.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::DuplicateHook`].
    pub fn add_hook_shared(
        &self,
        name: &str,
        kind: PacketKind,
        dirs: Dirs,
        filter: Arc<dyn Filter>,
    ) -> Result<(), Error> {
        self.transaction()
            .op(Op::AddHook {
                name: name.to_owned(),
                kind,
                dirs,
                filter,
            })
            .commit()
            .map(drop)
    }

    /// Remove a hook, unlinking it from every head first (pfil's
    /// `pfil_remove_hook`). The ticket completes when the registry has let
    /// go of the filter object, which happens once no reader can still run
    /// it; the object is dropped then, unless the caller holds another
    /// reference (see [`add_hook_shared`](Self::add_hook_shared)).
    ///
    /// # Errors
    /// [`Error::NoSuchHook`].
    pub fn remove_hook(&self, name: &str) -> Result<Retirement, Error> {
        self.transaction()
            .op(Op::RemoveHook {
                name: name.to_owned(),
            })
            .commit()
            .map(|c| c.retirement)
    }

    /// Put `filter` under the existing hook `hook`, in one generation: its
    /// links keep their places, fail modes and counters and run the new
    /// filter from then on; the old filter is retired like a removed hook's
    /// (the ticket completes once the registry has dropped it). See
    /// [`Op::ReplaceFilter`]; in a [`Transaction`](crate::Transaction) use
    /// [`Transaction::replace_filter`](crate::Transaction::replace_filter).
    ///
    /// # Examples
    /// ```
    /// use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
    ///
    /// let reg = Registry::new();
    /// let head = reg.register_head("h", PacketKind::Ethernet, Dirs::IN)?;
    /// reg.add_hook("acl:edge", PacketKind::Ethernet, Dirs::IN, |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Pass)?;
    /// reg.link("h", Dir::In, "acl:edge", Placement::Prepend)?;
    /// let done = reg.replace_filter("acl:edge", |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Dropped)?;
    /// done.wait(); // the old filter is dropped now
    /// let mut w = reg.worker()?;
    /// let mut f = [0u8; 60];
    /// let mut p = Packet::new(&mut f);
    /// head.run_one(Dir::In, &mut w, &mut p);
    /// assert_eq!(p.verdict(), Verdict::Dropped);
    /// # Ok::<(), pfil::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NoSuchHook`].
    pub fn replace_filter<F: Filter>(&self, hook: &str, filter: F) -> Result<crate::Commit, Error> {
        self.replace_filter_shared(hook, Arc::new(filter))
    }

    /// [`replace_filter`](Self::replace_filter) with a filter the caller
    /// keeps a handle to (see [`add_hook_shared`](Self::add_hook_shared)).
    ///
    /// # Errors
    /// [`Error::NoSuchHook`].
    pub fn replace_filter_shared(
        &self,
        hook: &str,
        filter: Arc<dyn Filter>,
    ) -> Result<crate::Commit, Error> {
        self.transaction()
            .op(Op::ReplaceFilter {
                hook: hook.to_owned(),
                filter,
            })
            .commit()
    }

    /// Drop, on this thread, what retired generations left once their grace
    /// period is over: removed and replaced filters, and the tickets that
    /// wait for them complete. Writers and tickets
    /// ([`Retirement::wait`], [`Retirement::is_complete`]) do it as they go;
    /// a dataplane calls this from its housekeeping loop, so that what a
    /// ticket that timed out (a batch held open) left is not kept until the
    /// next change. A datapath worker never does it. On a pinned thread (a
    /// [`Snapshot`] held, inside a hook) it does nothing.
    pub fn reclaim(&self) {
        if epoch::is_pinned() {
            return;
        }
        // Runs the deferred functions that are due (they bury), then drops
        // (unpinned: checked above, and the pin is gone).
        epoch::pin().flush();
        self.shared.graveyard.drain();
    }

    /// Unlink every link that was quarantined after its hook panicked, and
    /// hand out every quarantined link unlinked since the last call.
    ///
    /// Every successful writer operation also unlinks the quarantined links
    /// as part of its own change; those are kept, with their tickets, and
    /// returned by the next call here. So each reaped link is returned
    /// exactly once, with a [`Retirement`] whose
    /// [`counters`](Retirement::counters) are the link's final counts once
    /// it [completes](Retirement::is_complete). A dataplane calls this from
    /// its housekeeping loop.
    ///
    /// # Examples
    /// ```
    /// use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
    ///
    /// let reg = Registry::new();
    /// let head = reg.register_head("h", PacketKind::Ethernet, Dirs::IN)?;
    /// reg.add_hook("bad:hook", PacketKind::Ethernet, Dirs::IN, |_: &mut Packet<'_>, _: &Ctx<'_>| -> Verdict {
    ///     panic!("a bug")
    /// })?;
    /// reg.link("h", Dir::In, "bad:hook", Placement::Prepend)?;
    /// let mut w = reg.worker()?;
    /// let mut f = [0u8; 60];
    /// head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)); // quarantined
    /// let reaped = reg.reap_quarantine();
    /// assert_eq!(reaped.len(), 1);
    /// assert_eq!((reaped[0].head.as_str(), reaped[0].hook.as_str()), ("h", "bad:hook"));
    /// assert!(reaped[0].retirement.wait_timeout(std::time::Duration::from_secs(10)));
    /// assert_eq!(reaped[0].retirement.counters().faults, 1);
    /// assert!(reg.reap_quarantine().is_empty());
    /// # Ok::<(), pfil::Error>(())
    /// ```
    pub fn reap_quarantine(&self) -> Vec<Reaped> {
        if !self.shared.quarantine.lock().is_empty() {
            // Fails only with the `witness` feature, inside a hook; what
            // was reaped before is still handed out.
            let _ = self.change(|_| Ok(()));
        }
        std::mem::take(&mut *self.shared.reaped.lock())
    }

    /// The writer path: lock, copy the configuration, unlink quarantined
    /// links, apply `op`, and publish the result as the next generation.
    ///
    /// If `op` fails nothing is published and the quarantine is put back.
    /// The epoch is pinned before the writer lock is taken (a pin may
    /// collect garbage, which buries retired generations), and old state
    /// and retired generations are dropped after it is released (and the
    /// pin), so a filter's `Drop` may use the registry.
    pub(crate) fn change<R>(
        &self,
        op: impl FnOnce(&mut State) -> Result<R, Error>,
    ) -> Result<(R, u64, Retirement), Error> {
        self.change_inner(false, op)
    }

    pub(crate) fn change_inner<R>(
        &self,
        dry_run: bool,
        op: impl FnOnce(&mut State) -> Result<R, Error>,
    ) -> Result<(R, u64, Retirement), Error> {
        witness::check_writer()?;
        // Pin before taking the writer lock, never under it: a pin may run
        // crossbeam's `collect()`, which runs deferred functions (they only
        // bury generations, but the epoch's own bookkeeping should not
        // run under our lock either); the pin is kept for the swap and the
        // deferral below.
        let guard = epoch::pin();
        let mut w = self.shared.writer.lock();
        let mut next = w.clone();
        let pending: Vec<Quarantined> = std::mem::take(&mut *self.shared.quarantine.lock());
        let reaped = reap(&mut next, &pending);
        let r = match op(&mut next) {
            Ok(r) if !dry_run => r,
            Ok(r) => {
                let number = w.number;
                drop(w);
                self.shared.quarantine.lock().extend(pending);
                return Ok((r, number, Retirement::complete()));
            }
            Err(e) => {
                drop(w);
                self.shared.quarantine.lock().extend(pending);
                return Err(e);
            }
        };
        next.number = w.number + 1;
        let number = next.number;
        let gen = build_generation(&next);
        let signal = Signal::new();
        // AcqRel: Release publishes the fully built generation to readers'
        // Acquire load; Acquire orders our later reclamation after it.
        let old = self
            .shared
            .current
            .swap(Owned::new(gen), Ordering::AcqRel, &guard);
        self.shared.number.store(number, Ordering::Release);
        for rec in next.heads.values() {
            for d in Dir::ALL {
                rec.inner.hooked[d.index()]
                    .store(!rec.links[d.index()].is_empty(), Ordering::Relaxed);
            }
        }
        // After the grace period the epoch buries the generation rather
        // than dropping it: it may do so on a datapath thread, and dropping
        // a generation may drop filters (see `Graveyard`). This writer, the
        // next ones and the tickets drop it.
        let grave = Arc::clone(&self.shared.graveyard);
        // SAFETY: `old` was the current generation and came from
        // `Owned::new`; it is unreachable from `current` now, so only readers
        // pinned before the swap can hold it, and the deferred function runs
        // after all of them unpinned; it takes `old` back as the `Owned` it
        // was, once (the epoch runs a deferred function once). It is not
        // null: `current` is never null.
        unsafe {
            old.deref().on_retire.lock().push(signal.clone());
            guard.defer_unchecked(move || grave.bury(old.into_owned().into_box()));
        }
        let old_state = std::mem::replace(&mut *w, next);
        drop(w);
        {
            // Under `published`: a `wait_generation` that saw the old number
            // is waiting already, so it gets this notification.
            let _g = self.shared.published.lock();
            self.shared.published_cv.notify_all();
        }
        if !reaped.is_empty() {
            let mut out = Vec::with_capacity(reaped.len());
            for (i, link) in &reaped {
                let q = &pending[*i];
                tracing::warn!(target: "pfil", head = %q.head, dir = %q.dir, hook = %q.hook, generation = number, "quarantined link unlinked");
                out.push(Reaped {
                    head: q.head.clone(),
                    dir: q.dir,
                    hook: q.hook.clone(),
                    fail: link.fail,
                    generation: number,
                    retirement: Retirement::pending(signal.clone(), &self.shared.graveyard)
                        .with_removed(vec![removed(&q.head, q.dir, link)]),
                });
            }
            self.shared.reaped.lock().extend(out);
        }
        // Outside the lock: hooks dropped here (or by the drain) may call
        // the registry from their `Drop`.
        drop(old_state);
        // The flush buries what is due; the drain drops it, unpinned (a
        // filter's `Drop` may wait for a retirement).
        guard.flush();
        drop(guard);
        self.shared.graveyard.drain_unpinned();
        Ok((
            r,
            number,
            Retirement::pending(signal, &self.shared.graveyard),
        ))
    }

    /// Pin the current generation for a batch that runs several heads.
    #[inline]
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot::pin(&self.shared)
    }

    /// Every head with its chains, in name order.
    pub fn heads(&self) -> Vec<HeadInfo> {
        let w = self.shared.writer.lock();
        w.heads.values().map(head_info).collect()
    }

    /// One head with its chains.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`].
    pub fn head_info(&self, name: &str) -> Result<HeadInfo, Error> {
        let w = self.shared.writer.lock();
        w.heads
            .get(name)
            .map(head_info)
            .ok_or_else(|| Error::NoSuchHead(name.to_owned()))
    }

    /// Every hook, in name order, with the number of links that place it.
    pub fn hooks(&self) -> Vec<HookInfo> {
        let w = self.shared.writer.lock();
        w.hooks.values().map(|h| hook_info(&w, h)).collect()
    }

    /// One hook, with the number of links that place it.
    ///
    /// # Errors
    /// [`Error::NoSuchHook`].
    pub fn hook(&self, name: &str) -> Result<HookInfo, Error> {
        let w = self.shared.writer.lock();
        w.hooks
            .get(name)
            .map(|h| hook_info(&w, h))
            .ok_or_else(|| Error::NoSuchHook(name.to_owned()))
    }

    /// The filter of hook `name` (the writer lock is held only to look it
    /// up: the caller calls the filter without it).
    fn hook_filter(&self, name: &str) -> Result<Arc<dyn Filter>, Error> {
        self.hook_filter_at(name).map(|(f, _)| f)
    }

    /// [`hook_filter`](Self::hook_filter) and the generation it was read at.
    fn hook_filter_at(&self, name: &str) -> Result<(Arc<dyn Filter>, u64), Error> {
        let w = self.shared.writer.lock();
        w.hooks
            .get(name)
            .map(|h| (h.filter.clone(), w.number))
            .ok_or_else(|| Error::NoSuchHook(name.to_owned()))
    }

    /// The filter's own statistics of hook `name` ([`Filter::stats`]):
    /// an ACL's per-rule hits, a rate limiter's evictions. Empty for a
    /// filter that keeps none. The filter is asked on this thread after
    /// the registry's lock is released; the datapath is not involved.
    ///
    /// # Examples
    /// ```
    /// use pfil::{Ctx, Dirs, Filter, FilterStat, Packet, PacketKind, Registry, Verdict};
    ///
    /// struct Seen(std::sync::atomic::AtomicU64);
    /// impl Filter for Seen {
    ///     fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    ///         self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ///         Verdict::Pass
    ///     }
    ///     fn stats(&self) -> Vec<FilterStat> {
    ///         let n = self.0.load(std::sync::atomic::Ordering::Relaxed);
    ///         vec![FilterStat::counter("seen", "Packets seen.", n)]
    ///     }
    /// }
    /// let reg = Registry::new();
    /// reg.add_hook("seen:x", PacketKind::Ethernet, Dirs::IN, Seen(Default::default()))?;
    /// assert_eq!(reg.hook_stats("seen:x")?[0].value(), Some(0));
    /// assert!(matches!(reg.hook_stats("nope:x"), Err(pfil::Error::NoSuchHook(h)) if h == "nope:x"));
    /// # Ok::<(), pfil::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NoSuchHook`].
    pub fn hook_stats(&self, name: &str) -> Result<Vec<FilterStat>, Error> {
        let filter = self.hook_filter(name)?;
        Ok(filter.stats())
    }

    /// Give the filter of hook `name` a new configuration in place
    /// ([`Filter::reconfigure`]): links, counters and what the filter keeps
    /// across it (an ACL's rule hits) stay. Returns `Ok(false)` if the
    /// filter cannot (rebuild it and [`replace_filter`](Self::replace_filter)
    /// instead), `Ok(true)` once the new configuration is in force and no
    /// batch runs on the old one.
    ///
    /// Then it publishes one generation with the same chains: the
    /// configuration changed (a hook's config, as a `show` lists it), so
    /// its number does too, and a transaction based on the generation
    /// before ([`Transaction::expect_generation`](crate::Transaction::expect_generation),
    /// e.g. a plan derived from the old configuration) is refused rather
    /// than undoing this change.
    ///
    /// The filter is called without the writer lock (it may take as long
    /// as building its new state takes); a filter replaced or removed
    /// meanwhile by another writer wins over this call, which then says so.
    ///
    /// # Errors
    /// [`Error::NoSuchHook`]; [`Error::FilterConfig`] with the filter's
    /// reason when it refuses the configuration (nothing changed);
    /// [`Error::GenerationConflict`] if another writer replaced or removed
    /// the hook's filter meanwhile (the new configuration went to the
    /// filter that no longer runs).
    pub fn reconfigure_hook(&self, name: &str, config: &str) -> Result<bool, Error> {
        let (filter, base) = self.hook_filter_at(name)?;
        match filter.reconfigure(config) {
            None => Ok(false),
            Some(Ok(())) => {
                // The generation before is retired like any other; nothing
                // is unlinked or removed, so there is nothing to wait for.
                let (_, _, nothing) = self.change(|s| match s.hooks.get(name) {
                    Some(h) if Arc::ptr_eq(&h.filter, &filter) => Ok(()),
                    _ => Err(Error::GenerationConflict {
                        expected: base,
                        current: s.number,
                    }),
                })?;
                drop(nothing);
                Ok(true)
            }
            Some(Err(reason)) => Err(Error::FilterConfig {
                hook: name.to_owned(),
                reason,
            }),
        }
    }

    /// A new filter for hook `name` with configuration `config`, derived
    /// from its running filter ([`Filter::derive`]: an ACL's keeps the hit
    /// counters of the rules both rulesets have, shared with the running
    /// one), to publish with [`Op::ReplaceFilter`] in a transaction.
    /// Nothing changes here: the hook runs its filter until that
    /// transaction commits. `Ok(None)` if the filter cannot derive (build
    /// the new one from a catalog instead).
    ///
    /// The filter is called without the writer lock. If another writer
    /// replaces or removes the hook's filter before the transaction that
    /// publishes the result, the result carries over from a filter that no
    /// longer runs; a transaction based on the generation read before the
    /// call ([`Transaction::expect_generation`](crate::Transaction::expect_generation))
    /// is refused then, and so it is after a
    /// [`reconfigure_hook`](Self::reconfigure_hook) in between (which
    /// publishes a generation for that): the result would carry over from
    /// the configuration the filter had when it was derived.
    ///
    /// # Examples
    /// ```
    /// use pfil::{Ctx, Dirs, Packet, PacketKind, Registry, Verdict};
    ///
    /// let reg = Registry::new();
    /// reg.add_hook("a:x", PacketKind::Ethernet, Dirs::IN, |_: &mut Packet<'_>, _: &Ctx<'_>| Verdict::Pass)?;
    /// // A closure keeps nothing across a change: it cannot derive.
    /// assert!(reg.derive_filter("a:x", "anything")?.is_none());
    /// # Ok::<(), pfil::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NoSuchHook`]; [`Error::FilterConfig`] with the filter's
    /// reason when it refuses the configuration.
    pub fn derive_filter(&self, name: &str, config: &str) -> Result<Option<Derived>, Error> {
        let from = self.hook_filter(name)?;
        match from.derive(config) {
            None => Ok(None),
            Some(Ok(filter)) => Ok(Some(Derived { filter, from })),
            Some(Err(reason)) => Err(Error::FilterConfig {
                hook: name.to_owned(),
                reason,
            }),
        }
    }

    /// [`hook_stats`](Self::hook_stats) of every hook whose filter keeps
    /// statistics, in hook name order, with the generation the hooks were
    /// read at.
    pub fn filter_stats(&self) -> (u64, Vec<(String, Vec<FilterStat>)>) {
        let (generation, filters) = {
            let w = self.shared.writer.lock();
            let filters: Vec<(String, Arc<dyn Filter>)> = w
                .hooks
                .values()
                .map(|h| (h.name.clone(), h.filter.clone()))
                .collect();
            (w.number, filters)
        };
        let stats = filters
            .into_iter()
            .map(|(name, f)| (name, f.stats()))
            .filter(|(_, s)| !s.is_empty())
            .collect();
        (generation, stats)
    }

    /// The chain of one head in one direction, in walk order.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`].
    pub fn chain(&self, head: &str, dir: Dir) -> Result<Vec<LinkInfo>, Error> {
        let w = self.shared.writer.lock();
        let rec = w
            .heads
            .get(head)
            .ok_or_else(|| Error::NoSuchHead(head.to_owned()))?;
        Ok(link_infos(&rec.links[dir.index()]))
    }

    /// The names of the hooks linked to `head` in `dir`, in walk order.
    ///
    /// # Errors
    /// [`Error::NoSuchHead`].
    pub fn chain_names(&self, head: &str, dir: Dir) -> Result<Vec<String>, Error> {
        Ok(self.chain(head, dir)?.into_iter().map(|l| l.hook).collect())
    }
}

fn head_info(rec: &HeadRec) -> HeadInfo {
    HeadInfo {
        name: rec.inner.name.clone(),
        kind: rec.inner.kind,
        dirs: rec.inner.dirs,
        chains: [link_infos(&rec.links[0]), link_infos(&rec.links[1])],
    }
}

fn hook_info(w: &State, h: &Arc<HookEntry>) -> HookInfo {
    HookInfo {
        name: h.name.clone(),
        kind: h.kind,
        dirs: h.dirs,
        links: w
            .heads
            .values()
            .flat_map(|r| r.links.iter().flatten())
            .filter(|l| Arc::ptr_eq(&l.hook, h))
            .count(),
        faults: h.faults.load(Ordering::Relaxed),
        spec: h.filter.spec(),
    }
}

fn link_infos(links: &[Arc<Link>]) -> Vec<LinkInfo> {
    links
        .iter()
        .map(|l| LinkInfo {
            hook: l.hook.name.clone(),
            fail: l.fail,
            quarantined: l.quarantined.load(Ordering::Relaxed),
            counters: l.counters.sum(),
        })
        .collect()
}

/// A filter [derived](Filter::derive) from a hook's running filter, and
/// that running filter ([`Registry::derive_filter`]).
#[non_exhaustive]
pub struct Derived {
    /// The new filter, to publish with [`Op::ReplaceFilter`].
    pub filter: Arc<dyn Filter>,
    /// The filter it was derived from, the one the hook ran when it was
    /// derived. Once the replacement is published, the registry drops its
    /// reference with the last generation that ran it, on the control
    /// plane (see [`Registry::reclaim`]), never on a datapath thread;
    /// whoever holds this until the replacement's [`Retirement`] completes
    /// frees the old filter on its own thread, at a moment of its choosing.
    pub from: Arc<dyn Filter>,
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Derived")
            .field("filter", &self.filter.spec())
            .field("from", &self.from.spec())
            .finish()
    }
}

/// A head as listed by [`Registry::heads`] and [`Registry::head_info`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct HeadInfo {
    /// Name.
    pub name: String,
    /// Packet kind.
    pub kind: PacketKind,
    /// Supported directions.
    pub dirs: Dirs,
    /// The in and out chains, in walk order.
    pub chains: [Vec<LinkInfo>; 2],
}

/// A hook as listed by [`Registry::hooks`] and [`Registry::hook`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct HookInfo {
    /// Name.
    pub name: String,
    /// Packet kind.
    pub kind: PacketKind,
    /// Declared directions.
    pub dirs: Dirs,
    /// How many links place it.
    pub links: usize,
    /// Panics caught from it over its lifetime (across
    /// [filter replacements](Registry::replace_filter), up to the swap).
    pub faults: u64,
    /// What its filter was built from ([`Filter::spec`](crate::Filter::spec)), `None` for a
    /// filter no catalog can rebuild.
    pub spec: Option<String>,
}

/// A link as listed in a chain.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LinkInfo {
    /// Hook name.
    pub hook: String,
    /// Fail mode.
    pub fail: FailMode,
    /// Whether the hook panicked and the link awaits unlinking.
    pub quarantined: bool,
    /// Counters summed over workers.
    pub counters: Counters,
}
