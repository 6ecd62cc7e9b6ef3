//! The control path: the registry of heads and hooks and the writer path
//! that publishes generations. Writers serialize on one adaptive mutex,
//! build the next configuration copy-on-write (state.rs), publish it with
//! one atomic swap and retire the old generation through the epoch.
//! Links and transactions (transaction.rs) are built on top of it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_epoch::{self as epoch, Atomic, Owned};

use crate::chain::Quarantined;
use crate::counters::{Refused, RefusedCounters};
use crate::head::Snapshot;
use crate::quarantine::{reap_open, report, still_pending, Reaped};
use crate::retire::{Retirement, Signal};
use crate::shared::Shared;
use crate::state::{build_generation, removed, Graveyard, HeadInner, HeadRec, Op, State};
use crate::sync::{AtomicBool, AtomicU64, Condvar, Mutex};
use crate::{validate_name, witness, Dir, Dirs, Error, Filter, Head, PacketKind, Worker};

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
                    traces: Default::default(),
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
            .map(|c| self.keep_reaped(c.reaped))
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
            .map(|c| {
                self.keep_reaped(c.reaped);
                c.retirement
            })
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

    /// The writer path: lock, copy the configuration, unlink the
    /// quarantined fail-open links, apply `op`, and publish the result as
    /// the next generation. What it reaped is kept for
    /// [`take_reaped`](Self::take_reaped); callers that return a `Commit`
    /// use [`change_inner`](Self::change_inner) and hand it out there.
    pub(crate) fn change<R>(
        &self,
        op: impl FnOnce(&mut State) -> Result<R, Error>,
    ) -> Result<(R, u64, Retirement), Error> {
        let c = self.change_inner(false, op)?;
        self.keep_reaped(c.reaped);
        Ok((c.value, c.number, c.retirement))
    }

    /// [`change`](Self::change), or a dry run of it (`op` is applied to a
    /// copy and nothing is published), returning what it reaped.
    ///
    /// If `op` fails (or for a dry run) nothing is published and the
    /// quarantine is put back. The epoch is pinned before the writer lock
    /// is taken (a pin may collect garbage, which buries retired
    /// generations), and old state and retired generations are dropped
    /// after it is released (and the pin), so a filter's `Drop` may use
    /// the registry.
    pub(crate) fn change_inner<R>(
        &self,
        dry_run: bool,
        op: impl FnOnce(&mut State) -> Result<R, Error>,
    ) -> Result<Changed<R>, Error> {
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
        // Fail-open links only: a fail-closed one stays, dropping, until
        // removed on purpose (quarantine.rs).
        let reaped = reap_open(&mut next, &pending);
        let r = match op(&mut next) {
            Ok(r) if !dry_run => r,
            Ok(r) => {
                let number = w.number;
                drop(w);
                self.shared.quarantine.lock().extend(pending);
                return Ok(Changed {
                    value: r,
                    number,
                    retirement: Retirement::complete(),
                    reaped: Vec::new(),
                });
            }
            Err(e) => {
                drop(w);
                self.shared.quarantine.lock().extend(pending);
                return Err(e);
            }
        };
        // What is left to reap: the fail-closed links still linked.
        let pending = still_pending(&next, pending);
        self.shared.quarantine.lock().extend(pending);
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
                rec.inner.hooked[d.index()].store(rec.hooked(d), Ordering::Relaxed);
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
        // Outside the lock: hooks dropped here (or by the drain) may call
        // the registry from their `Drop`.
        drop(old_state);
        // The flush buries what is due; the drain drops it, unpinned (a
        // filter's `Drop` may wait for a retirement).
        guard.flush();
        drop(guard);
        self.shared.graveyard.drain_unpinned();
        let retirement = Retirement::pending(signal, &self.shared.graveyard);
        Ok(Changed {
            value: r,
            number,
            reaped: report(reaped, number, &retirement),
            retirement,
        })
    }

    /// Pin the current generation for a batch that runs several heads.
    #[inline]
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot::pin(&self.shared)
    }
}

/// What a writer call published: `op`'s result, the generation number,
/// the ticket for the generation before, and the quarantined links it
/// unlinked.
pub(crate) struct Changed<R> {
    pub(crate) value: R,
    pub(crate) number: u64,
    pub(crate) retirement: Retirement,
    pub(crate) reaped: Vec<Reaped>,
}
