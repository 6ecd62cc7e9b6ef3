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
        let arena = std::sync::Arc::new(super::arena::Arena::new(
            n * Shard::chunks_for(per),
            max,
            n * Shard::index_bytes_for(per),
        ));
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
    /// `entry` false its index slot, with `entry` true the entry the
    /// index names for `h` (the slot tagged `h` from its home on, read
    /// without the lock: a hint). A batch prefetches
    /// slots a few packets ahead and entries fewer ahead, so that with a
    /// table larger than the caches the misses of a burst overlap
    /// instead of costing one DRAM latency each, in turn.
    #[inline]
    pub fn prefetch(&self, h: u64, entry: bool, g: &Guard) {
        if entry {
            self.prefetch_entry(h, g);
        } else {
            table::prefetch(self.peek_slot(h, g));
        }
    }

    /// Start bringing in the entry the index slot of hash `h` names
    /// (read without the lock: a hint), and hand it back as one for the
    /// lookup ([`find_hinted`](Self::find_hinted)).
    #[inline]
    pub(super) fn prefetch_entry(&self, h: u64, g: &Guard) -> Option<&table::Slot> {
        let e = self.peek_entry(h, g)?;
        let p = (e as *const table::Slot).cast::<u8>();
        // A slot (96 bytes, aligned to 32) spans two lines.
        table::prefetch(p);
        table::prefetch(p.wrapping_add(std::mem::size_of::<table::Slot>() - 1));
        Some(e)
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
        match self.track_kept(c, h, len, run, false, true).0 {
            Ok(r) => r,
            Err(why) => {
                self.count(worker, why);
                (CtState::Invalid, false)
            }
        }
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
        self.track_kept(c, None, len, run, true, true)
            .0
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
    /// a little; with `try_hit`, try the lock-free way first. Also
    /// whether the packet's flow (an ICMP error's: the quoted flow)
    /// carries a `keep state` mark ([`KEPT`](table::KEPT)), read with the
    /// entry in hand (under the shard's lock, or the entry's on the
    /// lock-free way).
    pub(super) fn track_kept(
        &self,
        c: Class,
        h: Option<u64>,
        len: u32,
        run: Run,
        sweep: bool,
        try_hit: bool,
    ) -> (Result<(CtState, bool), Invalid>, bool) {
        let (key, src_a, kind) = match c {
            Class::Untracked => return (Ok((CtState::Untracked, false)), false),
            Class::Invalid(why) => return (Err(why), false),
            Class::Error(key, sender_a) => {
                let h = h.unwrap_or_else(|| self.hash(&key));
                let s = self.shard(h);
                let mut g = lock(s);
                let ad = Adaptive::at(self.len(), run.max);
                let Some(id) = self.live(&mut g, &key, h as u32, run.now, ad) else {
                    return (Err(Invalid::NoState), false);
                };
                // ORIG_A is set when the entry is made, never changed.
                let flags = table::tail_flags(g.slot(id).tail());
                let orig_a = flags & ORIG_A != 0;
                // The quoted packet went in the original direction: the
                // error comes back in the reply direction.
                let quoted_orig = orig_a == sender_a;
                return (
                    Ok((CtState::Related, quoted_orig)),
                    flags & table::KEPT != 0,
                );
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
    ) -> (Result<(CtState, bool), Invalid>, bool) {
        let mut g = lock(self.shard(h));
        // A flow made here carries no mark yet (an acl marks it later).
        match self.live(&mut g, &key, h as u32, run.now, ad) {
            Some(id) => match self.update_locked(&mut g, id, src_a, kind, len, run) {
                Err(Reopen) => (
                    self.create(&mut g, key, h as u32, src_a, kind, len, run, ad),
                    false,
                ),
                Ok(r) => (r, table::tail_flags(g.slot(id).tail()) & table::KEPT != 0),
            },
            None => (
                self.create(&mut g, key, h as u32, src_a, kind, len, run, ad),
                false,
            ),
        }
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
