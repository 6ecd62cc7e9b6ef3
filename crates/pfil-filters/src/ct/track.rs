//! The [`Table`]: tracking a packet (a live flow's entry found without
//! a lock and updated under its own; creation, removal and lookups the
//! lock-free probe cannot settle under the shard's lock), its hash,
//! counters and sweeps. The per-state update of an entry is in
//! [`step`](super::step); lookups that never create (the acl's `keep
//! state`) in [`existing`](super::existing).

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

use crossbeam_epoch::{self as epoch, Guard};
use crossbeam_utils::CachePadded;
use pfil::CtState;
#[cfg(doc)]
use pfil::{Filter, Packet};

use super::tcp::Peer;
use super::*;

/// The state table, shared by all workers and by the filters derived
/// from one another.
pub struct Table {
    pub(super) shards: Shards,
    /// Each shard's lock-free view: to prefetch ([`Table::prefetch`]) and
    /// to find a live flow's slot without the shard's lock.
    pub(super) peeks: Box<[Peek]>,
    /// Shards - 1 (a power of two): a hash's shard is its bits 32 and up
    /// under this mask (its low 32 bits place it in the shard's index).
    pub(super) shard_mask: usize,
    /// Flows in the table. Apart from the fields every packet reads
    /// (seeds, mask, peeks): workers write it on every new flow.
    pub(super) entries: CachePadded<AtomicUsize>,
    pub(super) built_for: usize,
    /// Random seeds of the key hash.
    pub(super) seeds: [u64; 4],
    pub(super) epoch: Instant,
    /// Per worker: invalid packets by reason, then refused.
    pub(super) invalid: Box<[CachePadded<[AtomicU64; 8]>]>,
    /// Flows removed by an operator ([`Table::kill`]).
    pub(super) killed: AtomicU64,
    /// Where [`Table::sweep_next`] is and its pace. On a line of its own:
    /// workers write it once a chunk while they sweep.
    pub(super) sweep: CachePadded<Sweep>,
    /// Whose batches update live entries without their locks
    /// ([`super::bias`]). On a line of its own: the owner writes it
    /// once a batch.
    pub(super) bias: CachePadded<super::bias::Bias>,
    /// The acl whose `keep state` marks flows here (`KEPT`), by its
    /// keep id; 0: none yet (`ct/keep.rs`).
    pub(super) keeper: AtomicU64,
    /// This table's tag in the packets it annotates (1 to 7), so that an
    /// acl after it knows the annotation is this table's.
    pub(super) tag: u8,
}

/// What a batch fixes once for every packet it tracks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Batch {
    /// Its clock, TCP mode and limit.
    pub(crate) run: Run,
    /// The adaptive timeouts' scale (the table's size moves by at most
    /// the batch's new flows meanwhile).
    pub(crate) ad: Adaptive,
    /// The worker that runs it.
    pub(crate) worker: usize,
    /// The owner's biased batch (`bias.rs`): live entries are written
    /// without their locks.
    pub(crate) biased: bool,
}

/// What [`Table::hit`] found: the packet's state and direction (or why
/// it is invalid), and whether its flow carries a `keep state` mark.
pub(super) type Hit = (Result<(CtState, bool), Invalid>, bool);

/// The round-robin sweep's state (racy between workers: two may sweep
/// one shard, or both take a second's budget, no harm).
pub(super) struct Sweep {
    /// The shard swept next.
    at: AtomicUsize,
    /// The second the budget is for (high 32 bits) and the entries left
    /// to sweep in it (low 32 bits), below the adaptive start.
    pace: AtomicU64,
}

/// Below the adaptive start, the sweep covers the whole table once in
/// this many seconds (pf's purge `interval`, 10 s, passes over its
/// table at that rate): a batch's sweep is then nearly free where it
/// would otherwise stream [`table::SWEEP`] entries a packet through the
/// caches (at a million flows: 37 ns a frame of 167).
pub const SWEEP_PASS_SECONDS: usize = 10;
/// The least a second's sweep covers below the adaptive start.
pub const SWEEP_MIN_PER_SECOND: usize = 1024;

impl Table {
    /// A table for up to `max` entries, with counter slots for `workers`.
    pub fn new(max: usize, workers: usize) -> Table {
        let n = table::shards_for(max);
        let per = max.div_ceil(n);
        let seeds = {
            let rs = std::hash::RandomState::new();
            [0u64, 1, 2, 3].map(|i| rs.hash_one(i) | 1)
        };
        // One reservation for every chunk of every shard (huge pages for
        // a large table: `arena`).
        let arena = std::sync::Arc::new(super::arena::Arena::new(n * Shard::chunks_for(per), max));
        let shards: Shards = (0..n)
            .map(|_| CachePadded::new(Mutex::new(Shard::with_arena(per, seeds, arena.clone()))))
            .collect();
        Table {
            peeks: shards.iter().map(|s| lock(s).peek()).collect(),
            shards,
            shard_mask: n - 1,
            entries: CachePadded::new(AtomicUsize::new(0)),
            built_for: max,
            seeds,
            epoch: Instant::now(),
            invalid: (0..workers.max(1))
                .map(|_| CachePadded::new(Default::default()))
                .collect(),
            killed: AtomicU64::new(0),
            // A first second's budget (the clock starts at 0).
            sweep: CachePadded::new(Sweep {
                at: AtomicUsize::new(0),
                pace: AtomicU64::new(SWEEP_MIN_PER_SECOND as u64),
            }),
            bias: CachePadded::default(),
            keeper: AtomicU64::new(0),
            tag: super::keep::next_tag(),
        }
    }

    /// Start a batch of `worker` on the table ([`super::bias`]): whether
    /// it updates live entries without their locks. The acl's `keep
    /// state` batch takes it as the `ct` hook's does.
    #[inline]
    pub(crate) fn bias(&self, worker: usize) -> super::bias::Section<'_> {
        self.bias.enter(worker)
    }

    /// Seconds since the table was made.
    pub fn now(&self) -> u32 {
        u32::try_from(self.epoch.elapsed().as_secs()).unwrap_or(u32::MAX)
    }

    /// Flows in the table.
    pub fn len(&self) -> usize {
        self.entries.load(Relaxed)
    }

    /// Whether the table holds no flow.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the table has allocated (indexes, entries, free lists).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Table>()
            + self
                .shards
                .iter()
                .map(|s| lock(s).bytes() + std::mem::size_of_val(s))
                .sum::<usize>()
    }

    /// The key's hash ([`table::key_hash`] with the table's seeds).
    #[inline]
    pub(super) fn hash(&self, k: &FlowKey) -> u64 {
        table::key_hash(&self.seeds, k)
    }

    pub(super) fn count(&self, worker: usize, r: Invalid) {
        if let Some(c) = self.invalid.get(worker) {
            let a = &c[r as usize];
            a.store(a.load(Relaxed) + 1, Relaxed);
        }
    }

    /// The hash of the flow a packet of class `c` is looked up by (an
    /// ICMP error's: the quoted flow's), for [`prefetch`](Self::prefetch)
    /// and [`track_hashed`](Self::track_hashed).
    #[inline]
    pub fn hash_of(&self, c: &Class) -> Option<u64> {
        match c {
            Class::Flow(k, ..) | Class::Error(k, _) => Some(self.hash(k)),
            Class::Untracked | Class::Invalid(_) => None,
        }
    }

    /// The hash of the key whose [`FlowKey::words`] are `w`.
    #[inline]
    pub(super) fn hash_words(&self, w: &[u64; 5]) -> u64 {
        table::words_hash(&self.seeds, w)
    }

    #[inline]
    pub(super) fn shard_at(&self, h: u64) -> usize {
        (h >> 32) as usize & self.shard_mask
    }

    /// Start bringing in what the lookup of hash `h` will read: with
    /// `entry` false its index slot, with `entry` true the entry that
    /// slot names (read without the lock: a hint). A batch prefetches
    /// slots a few packets ahead and entries fewer ahead, so that with a
    /// table larger than the caches the misses of a burst overlap
    /// instead of costing one DRAM latency each, in turn.
    #[inline]
    pub fn prefetch(&self, h: u64, entry: bool, g: &Guard) {
        if entry {
            if let Some(e) = self.peek_entry(h, g) {
                // A slot (96 bytes, aligned to 32) spans two lines.
                table::prefetch(e);
                table::prefetch(e.wrapping_add(std::mem::size_of::<table::Slot>() - 1));
            }
        } else {
            table::prefetch(self.peek_slot(h, g));
        }
    }

    /// [`track`](Self::track) with the hash [`hash_of`](Self::hash_of)
    /// gave for `c`.
    pub fn track_hashed(
        &self,
        c: Class,
        h: Option<u64>,
        len: u32,
        run: Run,
        worker: usize,
    ) -> (CtState, bool) {
        let _hold = self.bias.hold();
        match self.track_inner(c, h, len, run, false, true) {
            Ok(r) => r,
            Err(why) => {
                self.count(worker, why);
                (CtState::Invalid, false)
            }
        }
    }

    /// The batch path's [`track_hashed`](Self::track_hashed), `c` by
    /// reference, the adaptive scale `ad` computed and the epoch `g`
    /// pinned once a batch: a packet of a live flow is tracked under the
    /// entry's lock alone ([`hit`](Self::hit)), any other under its
    /// shard's.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn track_batch(
        &self,
        c: &Class,
        h: Option<u64>,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> (CtState, bool, bool) {
        let run = b.run;
        let (r, kept) = match (c, h) {
            (&Class::Flow(ref key, src_a, kind), Some(h)) => {
                match self.hit(&key.words(), h, src_a, kind, len, b, g) {
                    Some(r) => r,
                    None => {
                        let r = self.track_inner(*c, Some(h), len, run, false, false);
                        (r, self.kept_slow(c, Some(h)))
                    }
                }
            }
            _ => {
                let r = self.track_inner(*c, h, len, run, false, true);
                (r, self.kept_slow(c, h))
            }
        };
        let (s, reply) = r.unwrap_or_else(|why| {
            self.count(b.worker, why);
            (CtState::Invalid, false)
        });
        (s, reply, kept)
    }

    /// [`track_batch`](Self::track_batch) of a packet of flow `w` (its
    /// key's [`FlowKey::words`], `h` their hash) from side `src_a`,
    /// carrying `kind`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn track_words(
        &self,
        w: &[u64; 5],
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> (CtState, bool, bool) {
        let (r, kept) = match self.hit(w, h, src_a, kind, len, b, g) {
            Some(r) => r,
            None => self.track_miss(w, h, src_a, kind, len, b.run),
        };
        let (s, reply) = r.unwrap_or_else(|why| {
            self.count(b.worker, why);
            (CtState::Invalid, false)
        });
        (s, reply, kept)
    }

    /// A packet that is invalid for `why`: counted in `worker`'s slot.
    #[cold]
    #[inline(never)]
    pub(super) fn invalid(&self, why: Invalid, worker: usize) -> (CtState, bool) {
        self.count(worker, why);
        (CtState::Invalid, false)
    }

    /// The batch path of a packet [`hit`](Self::hit) did not settle (or
    /// did not see: not a plain IPv4 UDP or TCP packet), classified anew.
    #[cold]
    #[inline(never)]
    pub(super) fn track_cold(
        &self,
        p: &pfil::Packet<'_>,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> (CtState, bool, bool) {
        let c = flow::classify(p);
        self.track_batch(&c, self.hash_of(&c), len, b, g)
    }

    /// [`track_words`](Self::track_words) when the lock-free way did not
    /// settle it.
    #[inline(never)]
    fn track_miss(
        &self,
        w: &[u64; 5],
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        run: Run,
    ) -> (Result<(CtState, bool), Invalid>, bool) {
        let c = Class::Flow(FlowKey::from_words(*w), src_a, kind);
        let r = self.track_inner(c, Some(h), len, run, false, false);
        (r, self.kept_slow(&c, Some(h)))
    }

    /// Whether the flow of a packet of class `c` (`h`: its hash if
    /// known; an ICMP error's: the quoted flow's) carries a `keep state`
    /// mark ([`KEPT`]), read under its shard's lock: for the packets the
    /// lock-free way did not settle. A table no acl marks answers at once.
    pub(super) fn kept_slow(&self, c: &Class, h: Option<u64>) -> bool {
        if self.keeper.load(Relaxed) == 0 {
            return false;
        }
        let key = match c {
            Class::Flow(k, ..) | Class::Error(k, _) => k,
            Class::Untracked | Class::Invalid(_) => return false,
        };
        let h = h.unwrap_or_else(|| self.hash(key));
        let g = lock(self.shard(h));
        // The flag only goes on under the entry's lock and off with the
        // entry, under the shard's (held): a read without the entry's
        // lock is exact.
        g.find(key, h as u32)
            .is_some_and(|id| table::tail_flags(g.slot(id).tail()) & KEPT != 0)
    }

    /// Track a packet of a live flow without the shard's lock: the
    /// index probed lock-free ([`Peek::find_live`]), the entry locked,
    /// checked (its key, not expired) and updated. `None` when the
    /// packet needs the shard's lock: no live entry found (or the index
    /// changing under the probe, or the entry locked), the entry
    /// expired, or a SYN reopening a closed TCP flow; nothing changed.
    /// In the owner's biased batch (`b.biased`, [`super::bias`]) without
    /// the entry's lock (no one else writes entries meanwhile).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn hit(
        &self,
        w: &[u64; 5],
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        b: &Batch,
        g: &Guard,
    ) -> Option<Hit> {
        let (run, ad, biased) = (b.run, b.ad, b.biased);
        let (s, t) = self.find_live(self.shard_at(h), w, h as u32, biased, g)?;
        // Leave the entry as it was (unlocked if locked here).
        let leave = |t: u64| {
            if !biased {
                s.unlock(t)
            }
        };
        let (mut flags, mut timeout) = (table::tail_flags(t), super::slot::tail_timeout(t));
        if expired_at(timeout, s.last(), run.now, ad) {
            leave(t);
            return None;
        }
        let from = usize::from((flags & ORIG_A != 0) != src_a);
        // A UDP (or other) flow seen both ways and under its last
        // timeout already: the packet changes nothing but the counters
        // (and, biased, the `tail` word need not be written).
        if steady(kind, flags, timeout) {
            s.count(from, len, run.now);
            leave(t);
            return Some((Ok((CtState::Established, from == 1)), flags & KEPT != 0));
        }
        let tcp = matches!(kind, Kind::Tcp(_));
        let mut peers = if tcp { s.peers() } else { [Peer::default(); 2] };
        match step(&mut flags, &mut timeout, &mut peers, from, kind, run) {
            Err(Reopen) => {
                leave(t);
                return None;
            }
            Ok(Err(why)) => {
                leave(t);
                return Some((Err(why), flags & KEPT != 0));
            }
            Ok(Ok(())) => {}
        }
        if tcp {
            s.set_peers(&peers);
        }
        s.count(from, len, run.now);
        s.unlock(table::with_state(t, flags, timeout));
        Some((Ok(state_of(flags, from == 1)), flags & KEPT != 0))
    }

    /// Track one packet of class `c` and `len` bytes; its state and
    /// direction. Counts an invalid packet's reason in `worker`'s slot.
    pub fn track(&self, c: Class, len: u32, run: Run, worker: usize) -> (CtState, bool) {
        self.track_why(c, len, run, worker)
            .unwrap_or((CtState::Invalid, false))
    }

    /// [`track`](Self::track), with why a packet is invalid (counted in
    /// `worker`'s slot as there): a caller that treats a full table
    /// ([`Invalid::Limit`]) apart.
    pub fn track_why(
        &self,
        c: Class,
        len: u32,
        run: Run,
        worker: usize,
    ) -> Result<(CtState, bool), Invalid> {
        let _hold = self.bias.hold();
        self.track_why_in(c, len, run, worker)
    }

    /// [`track_why`](Self::track_why) in a batch of the table
    /// ([`Bias::enter`](super::bias::Bias::enter) taken).
    pub(crate) fn track_why_in(
        &self,
        c: Class,
        len: u32,
        run: Run,
        worker: usize,
    ) -> Result<(CtState, bool), Invalid> {
        self.track_inner(c, None, len, run, true, true)
            .inspect_err(|&why| {
                self.count(worker, why);
            })
    }

    /// Update live entry `id` under its lock (the shard's held): the
    /// packet's state and direction, or why it is invalid; a SYN
    /// reopening a closed TCP flow removes the entry.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_locked(
        &self,
        g: &mut Shard,
        id: u32,
        src_a: bool,
        kind: Kind,
        len: u32,
        run: Run,
    ) -> Result<Result<(CtState, bool), Invalid>, Reopen> {
        let s = g.slot(id);
        let t = s.lock();
        let mut e = s.load(t);
        let r = update(&mut e, src_a, kind, len, run);
        if r.is_err() {
            g.remove_locked(id);
            self.entries.fetch_sub(1, Relaxed);
        } else {
            s.store_unlock(&e);
        }
        r
    }

    /// Slots of shard `shard`'s index in force (0 past the shards).
    pub fn index_slots(&self, shard: usize) -> usize {
        self.shards.get(shard).map_or(0, |s| lock(s).index_slots())
    }

    /// The `max` the table was built for.
    pub fn built_for(&self) -> usize {
        self.built_for
    }

    /// Track `c` (`h`: its hash if known); with `sweep`, sweep its shard
    /// a little; with `try_hit`, try the lock-free way first.
    pub(super) fn track_inner(
        &self,
        c: Class,
        h: Option<u64>,
        len: u32,
        run: Run,
        sweep: bool,
        try_hit: bool,
    ) -> Result<(CtState, bool), Invalid> {
        let (key, src_a, kind) = match c {
            Class::Untracked => return Ok((CtState::Untracked, false)),
            Class::Invalid(why) => return Err(why),
            Class::Error(key, sender_a) => {
                let h = h.unwrap_or_else(|| self.hash(&key));
                let s = self.shard(h);
                let mut g = lock(s);
                let ad = Adaptive::at(self.len(), run.max);
                let id = self
                    .live(&mut g, &key, h as u32, run.now, ad)
                    .ok_or(Invalid::NoState)?;
                // ORIG_A is set when the entry is made, never changed.
                let orig_a = table::tail_flags(g.slot(id).tail()) & ORIG_A != 0;
                // The quoted packet went in the original direction: the
                // error comes back in the reply direction.
                let quoted_orig = orig_a == sender_a;
                return Ok((CtState::Related, quoted_orig));
            }
            Class::Flow(key, src_a, kind) => (key, src_a, kind),
        };
        let h = h.unwrap_or_else(|| self.hash(&key));
        let ad = Adaptive::at(self.len(), run.max);
        let hit = if try_hit {
            let b = Batch {
                run,
                ad,
                worker: 0,
                biased: false,
            };
            self.hit(&key.words(), h, src_a, kind, len, &b, &epoch::pin())
                .map(|(r, _)| r)
        } else {
            None
        };
        let r = match hit {
            Some(r) if !sweep => return r,
            Some(r) => r,
            None => self.track_locked(key, h, src_a, kind, len, run, ad),
        };
        if sweep {
            let mut g = lock(self.shard(h));
            let gone = g.sweep(table::SWEEP, |to, last| expired_at(to, last, run.now, ad));
            if gone > 0 {
                self.entries.fetch_sub(gone, Relaxed);
            }
        }
        r
    }

    /// Track a packet of flow `key` under its shard's lock: updated if
    /// live, created if not (or if expired, or reopened).
    #[allow(clippy::too_many_arguments)]
    fn track_locked(
        &self,
        key: FlowKey,
        h: u64,
        src_a: bool,
        kind: Kind,
        len: u32,
        run: Run,
        ad: Adaptive,
    ) -> Result<(CtState, bool), Invalid> {
        let mut g = lock(self.shard(h));
        match self.live(&mut g, &key, h as u32, run.now, ad) {
            Some(id) => match self.update_locked(&mut g, id, src_a, kind, len, run) {
                Err(Reopen) => self.create(&mut g, key, h as u32, src_a, kind, len, run, ad),
                Ok(r) => r,
            },
            None => self.create(&mut g, key, h as u32, src_a, kind, len, run, ad),
        }
    }

    /// Sweep up to `n` entries of the next shard (round robin) for
    /// expired ones: what a batch of `n / SWEEP` packets does once
    /// ([`track_hashed`](Self::track_hashed) sweeps nothing), a lock
    /// taken once and the entries read in order rather than a few at each
    /// packet's lock. From the adaptive start (60 % of `run.max`: the
    /// table fills, timeouts shrink, room matters) all `n`; below it, at
    /// pf's pace: the table's entries over [`SWEEP_PASS_SECONDS`] a
    /// second (at least [`SWEEP_MIN_PER_SECOND`]), shared by the workers,
    /// and nothing (no lock) once a second's budget is spent. An expired
    /// entry not yet swept is still expired to a lookup, which removes
    /// it; it only counts in `entries` meanwhile.
    pub fn sweep_next(&self, n: usize, run: Run) {
        let _hold = self.bias.hold();
        self.sweep_in(n, run);
    }

    /// [`sweep_next`](Self::sweep_next) in a batch of the table
    /// ([`Bias::enter`](super::bias::Bias::enter) taken).
    pub(crate) fn sweep_in(&self, n: usize, run: Run) {
        let len = self.len();
        let n = if len > run.max / 10 * 6 {
            n
        } else {
            self.paced(n, len, run.now)
        };
        if n == 0 {
            return;
        }
        let i = self.sweep.at.load(Relaxed);
        self.sweep.at.store(i.wrapping_add(1), Relaxed);
        let mut g = lock(&self.shards[i % self.shards.len()]);
        let ad = Adaptive::at(len, run.max);
        let cut = idle_limits(ad);
        let gone = g.sweep(n, |to, last| {
            u64::from(run.now.saturating_sub(last)) > cut[usize::from(to) & 15]
        });
        if gone > 0 {
            self.entries.fetch_sub(gone, Relaxed);
        }
    }

    /// Of `n` entries, how many a sweep at second `now` takes from the
    /// second's budget (`len` entries in the table).
    #[inline]
    fn paced(&self, n: usize, len: usize, now: u32) -> usize {
        let p = self.sweep.pace.load(Relaxed);
        let (sec, left) = ((p >> 32) as u32, p as u32 as usize);
        let left = if now > sec {
            (len / SWEEP_PASS_SECONDS).clamp(SWEEP_MIN_PER_SECOND, u32::MAX as usize)
        } else if left == 0 {
            return 0;
        } else {
            left
        };
        let take = n.min(left);
        let sec = sec.max(now);
        self.sweep
            .pace
            .store(u64::from(sec) << 32 | (left - take) as u64, Relaxed);
        take
    }

    pub(super) fn shard(&self, h: u64) -> &Mutex<Shard> {
        &self.shards[self.shard_at(h)]
    }

    /// The id of `key`'s entry if it has not expired (an expired one is
    /// removed).
    pub(super) fn live(
        &self,
        g: &mut Shard,
        key: &FlowKey,
        h: u32,
        now: u32,
        ad: Adaptive,
    ) -> Option<u32> {
        let id = g.find(key, h)?;
        let s = g.slot(id);
        let t = s.lock();
        if expired_at(super::slot::tail_timeout(t), s.last(), now, ad) {
            self.expire_locked(g, id);
            return None;
        }
        s.unlock(t);
        Some(id)
    }

    /// Remove entry `id`, expired, its lock held.
    #[cold]
    pub(super) fn expire_locked(&self, g: &mut Shard, id: u32) {
        g.remove_locked(id);
        g.expiries += 1;
        self.entries.fetch_sub(1, Relaxed);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn create(
        &self,
        g: &mut Shard,
        key: FlowKey,
        h: u32,
        src_a: bool,
        kind: Kind,
        len: u32,
        run: Run,
        ad: Adaptive,
    ) -> Result<(CtState, bool), Invalid> {
        let mut e = Entry {
            key,
            flags: LIVE | if src_a { ORIG_A } else { 0 },
            created: run.now,
            last: run.now,
            pkts: [1, 0],
            bytes: [u64::from(len), 0],
            ..Entry::default()
        };
        e.timeout = match kind {
            Kind::Tcp(seg) => {
                tcp::may_open(&seg, run.loose)?;
                e.peers = tcp::open(&seg);
                Timeout::TcpFirst
            }
            Kind::Udp => Timeout::UdpFirst,
            Kind::EchoRequest => Timeout::IcmpFirst,
            Kind::EchoReply => return Err(Invalid::NoState),
            Kind::Other => Timeout::OtherFirst,
        } as u8;
        if self.len() >= run.max {
            // Make room from this shard's expired entries first.
            let gone = g.sweep(64, |to, last| expired_at(to, last, run.now, ad));
            self.entries.fetch_sub(gone, Relaxed);
            if self.len() >= run.max {
                return Err(Invalid::Limit);
            }
        }
        g.insert(e, h).ok_or(Invalid::Limit)?;
        self.entries.fetch_add(1, Relaxed);
        Ok((CtState::New, false))
    }

    /// Every flow, as [`StateInfo`] ([`states_limited`](Self::states_limited)
    /// without a limit).
    pub fn states(&self, max: usize) -> Vec<StateInfo> {
        self.states_limited(max, usize::MAX)
    }

    /// At most `limit` flows, as [`StateInfo`], in table order (`max`: the
    /// limit in force, for the adaptive timeouts). Each shard's lock is
    /// held only to copy its entries (96 bytes each); they are turned
    /// into [`StateInfo`] after.
    pub fn states_limited(&self, max: usize, limit: usize) -> Vec<StateInfo> {
        // The owner's batches lock entries while they are read.
        let _hold = self.bias.hold();
        let now = self.now();
        let ad = Adaptive::at(self.len(), max);
        let mut copied: Vec<Entry> = Vec::new();
        for s in self.shards.iter() {
            if copied.len() >= limit {
                break;
            }
            let g = lock(s);
            let room = limit - copied.len();
            copied.extend(g.entries().take(room));
        }
        copied.iter().map(|e| StateInfo::of(e, now, ad)).collect()
    }

    /// Created, expired, and invalid packets by reason ([`Invalid`] as
    /// index; `limit` is the refused).
    pub fn counts(&self) -> (u64, u64, [u64; 7]) {
        let (mut ins, mut exp) = (0, 0);
        for s in self.shards.iter() {
            let g = lock(s);
            ins += g.inserts;
            exp += g.expiries;
        }
        let mut inv = [0u64; 7];
        for w in self.invalid.iter() {
            for (i, v) in inv.iter_mut().enumerate() {
                *v += w[i].load(Relaxed);
            }
        }
        (ins, exp, inv)
    }
}

/// A shard's lock, even if a panic poisoned it (the shard's data stays
/// consistent between operations).
pub(super) fn lock(s: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}
