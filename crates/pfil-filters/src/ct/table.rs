//! The state table: shards of an open-addressing index (8 bytes a slot:
//! a 32-bit hash tag and an entry id) over entries allocated in chunks
//! of [`CHUNK`] ([`Slot`]s of 96 bytes, two cache lines), each shard
//! behind its own lock and each entry with a lock of its own.
//!
//! - **Shared by all workers.** Both directions of a flow find the same
//!   entry whatever queue they arrive on, so the tracker is right
//!   without symmetric RSS. A packet of a live flow takes no shard lock:
//!   its worker probes the index lock-free, locks the entry (one
//!   compare-and-swap of a word of the entry's first cache line; a plain
//!   store releases it) and checks and updates it ([`Peek::find_live`]).
//!   Creating, removing (expiry, reopening, `kill`) and any lookup the
//!   lock-free probe could not settle take the shard's lock (shards are
//!   [`shards_for`] of them, up to 64), then the entry's. Counters stay
//!   exact: every write of a live entry holds its lock, except in the
//!   batches of a table's only worker, which no one else writes
//!   meanwhile (the table's bias, `ct/bias.rs`).
//! - **Capacity.** At most `max` entries over the table (one atomic
//!   count); at the limit a new flow is refused (its packet is `invalid`,
//!   reason `limit`, counted `refused`): pf refuses too, and evicting a
//!   live entry would break a running connection to admit a new one
//!   (the flood's). Before refusing, the shard sweeps a few more entries
//!   for expired ones, and timeouts shrink as the table fills (pf's
//!   adaptive timeouts, [`Adaptive`]).
//! - **Expiry.** No full scan, ever: a batch through the `ct` hook or
//!   the acl's `keep state` sweeps one shard a chunk, the next in turn
//!   (`Table::sweep_next`: one lock, the entries read in order): at pf's
//!   pace while the table is below the adaptive start (the whole table
//!   once in 10 s, a budget a second the workers share: nearly nothing
//!   a packet), [`SWEEP`] entries a packet from there on; a packet
//!   tracked on its own (`Table::track`) looks at [`SWEEP`] entries of
//!   its shard at the shard's cursor under its lock; expired entries are removed (judged from the
//!   entry's timeout and last-seen time read without its lock, again
//!   under it before removing). A lookup that finds an expired entry
//!   removes it. A table with no traffic keeps its expired entries until
//!   traffic comes (listing them marks them expired).
//! - **Memory.** An entry is 96 bytes; the index grows to at least 4/3
//!   slot per entry the shard can hold, rounded up to a power of two (8
//!   bytes each): it starts at [`FIRST_SLOTS`] and doubles when half
//!   full ([`super::index`]), so that a large table with few flows keeps
//!   their slots together. Entries
//!   come in chunks of [`CHUNK`], allocated as the shard grows and kept
//!   (freed entries are reused; the chunks are freed with the table):
//!   the table stays at its peak size. The chunks of all shards come in
//!   turn from one reservation of address space, on transparent huge
//!   pages for a table built for 65 536 flows or more (`ct/arena.rs`:
//!   at a million flows the page walks, not the cache misses, bounded a
//!   lookup: 102 ns a frame on 4 KiB pages, 69 on 2 MiB ones); the
//!   indexes of such a table, once they outgrow a page, come from a
//!   second reservation of the same kind. At 1 million flows, about 117
//!   bytes a flow in a table built for 1 million or for 2 million
//!   (`a_flow_costs_at_most_128_bytes_at_a_million`; resident memory in
//!   BENCHMARKS.md).
//! - **Lock-free reads.** A batch reads index slots and entries without
//!   the shard's lock to prefetch them and to track a live flow
//!   ([`Peek`]); the only unsafe code of the tracker is here and in
//!   [`super::index`]: the zeroed index seen as atomics, the index read
//!   under an epoch (a grown one replaces it), the chunks
//!   owned through raw pointers (so that workers may borrow their slots
//!   while the shard's lock holder adds chunks), and the raw addresses a
//!   [`Peek`] keeps.

// The crate denies unsafe code; this module needs it for the above, each
// block with its reason.
#![allow(unsafe_code)]

use std::sync::atomic::{
    AtomicPtr,
    Ordering::{Relaxed, Release},
};
use std::sync::{Arc, Mutex};

use crossbeam_epoch::{self as epoch, Atomic, Owned};

use super::arena::Arena;
use super::flow::FlowKey;
pub use super::index::{Index, FIRST_SLOTS};
pub use super::peek::{prefetch, Peek};
pub use super::slot::Slot;
pub(super) use super::slot::{tail_flags, with_state};
use super::slot::{tail_timeout, LIVE_BIT};
use super::tcp::Peer;

/// Entries per chunk.
pub const CHUNK: usize = 1024;
/// Entries a packet's visit to a shard sweeps.
pub const SWEEP: usize = 2;

/// `flags` bit: the entry holds a flow.
pub const LIVE: u8 = 1;
/// `flags` bit: the originator is the key's `a` side.
pub const ORIG_A: u8 = 2;
/// `flags` bit: a packet was seen in the reply direction.
pub const REPLY_SEEN: u8 = 4;
/// `flags` bit: the originator sent more than one packet.
pub const ORIG_MORE: u8 = 8;
/// `flags` bit: an acl's `keep state` rule passed the flow (the acl
/// after a `ct` hook keeps its states in the hook's table: `ct/keep.rs`).
pub const KEPT: u8 = 16;

/// One tracked flow, as a value: what [`Shard::entry`] copies out of
/// the table (the table itself keeps each flow in a [`Slot`]). Its hash
/// is not kept: the index slot holds it, and a removal recomputes it
/// from the key ([`key_hash`]).
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(32))]
pub struct Entry {
    /// The flow.
    pub key: FlowKey,
    /// [`LIVE`], [`ORIG_A`], [`REPLY_SEEN`], [`ORIG_MORE`].
    pub flags: u8,
    /// The timeout in force ([`super::Timeout`] as a number).
    pub timeout: u8,
    /// TCP: the originator's side and the responder's.
    pub peers: [Peer; 2],
    /// Seconds (of the table's clock) when created.
    pub created: u32,
    /// Seconds when last seen.
    pub last: u32,
    /// Packets from the originator, from the responder.
    pub pkts: [u32; 2],
    /// Bytes from the originator, from the responder.
    pub bytes: [u64; 2],
}

/// Timeouts shrink as the table fills, as pf's adaptive timeouts: from
/// 60 % of `max` entries they are scaled by `(120 % - n) / (120 % - 60 %)`
/// (a third at the limit). `num / den`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adaptive {
    /// Numerator.
    pub num: u64,
    /// Denominator.
    pub den: u64,
}

impl Adaptive {
    /// The scale at `n` entries of `max`.
    #[inline]
    pub fn at(n: usize, max: usize) -> Adaptive {
        let (n, max) = (n as u64, max as u64);
        let start = max * 6 / 10;
        if n <= start {
            return Adaptive { num: 1, den: 1 };
        }
        let end = max * 12 / 10;
        if end <= start {
            Adaptive { num: 1, den: 1 }
        } else {
            Adaptive {
                num: end.saturating_sub(n),
                den: end - start,
            }
        }
    }
}

/// One shard.
///
/// Its index ([`Index`], replaced by a grown one as the shard fills) is
/// atomics, and each chunk's address is published in `chunk_ptrs`, so
/// that a worker can read a slot and reach the entry it
/// names without the shard's lock: to prefetch it ([`Peek`]), and to
/// look up and update a live flow under the entry's own lock
/// ([`Peek::find_live`]). Everything that changes the index, the free
/// list or whether an entry is live holds the shard's lock.
///
/// A shard is never replaced inside its mutex (no `*guard =
/// Shard::new(..)`, no `mem::swap` or `mem::take` through the guard):
/// the table's [`Peek`]s keep raw addresses of its index pointer and chunks,
/// taken once when the table is built, and a replaced shard would free
/// them under the workers' lock-free lookups. A shard goes only with
/// its table.
pub struct Shard {
    /// The index in force; the shard's lock holder replaces it with a
    /// grown one, readers load it under an epoch guard.
    index: Atomic<Index>,
    /// Slots of the index when grown to the full size.
    full: usize,
    /// The table's hash seeds ([`key_hash`]), for removals.
    seeds: [u64; 4],
    /// Chunks allocated.
    nchunks: usize,
    /// The address of chunk `i` (null until allocated): what [`Peek`]
    /// reads.
    chunk_ptrs: Box<[AtomicPtr<Slot>]>,
    /// Where the chunks come from, and their owner (shared by the
    /// table's shards; freed when the last goes).
    pub(super) arena: Arc<Arena>,
    /// Ids handed out so far (ids below it are live or free).
    used: u32,
    free: Vec<u32>,
    /// Live entries.
    pub live: usize,
    cursor: u32,
    /// Flows created.
    pub inserts: u64,
    /// Entries removed on expiry.
    pub expiries: u64,
}

/// The number of shards for a table of `max` entries: one per 1024
/// entries, a power of two, 1 to 64.
pub fn shards_for(max: usize) -> usize {
    (max / CHUNK).next_power_of_two().clamp(1, 64)
}

impl Drop for Shard {
    fn drop(&mut self) {
        // SAFETY: the shard is going, with every borrow of it and of its
        // Peeks (see below): no reader holds the index in force. Indexes
        // it replaced were retired to the epoch when replaced.
        drop(unsafe { self.index.load(Relaxed, epoch::unprotected()).into_owned() });
        // The chunks are the arena's, freed with the last shard of the
        // table (`Peek::find_live`'s borrows are tied to the table). That
        // assumes a shard is dropped only with its table, never replaced
        // inside its mutex while the table lives (see [`Shard`]): the
        // table's Peeks would then point into a shard that is gone.
    }
}

impl Shard {
    /// A shard that can hold about `cap` entries (the index grows to 4/3
    /// of it, a power of two; inserts stop at 7/8 of that), its keys
    /// hashed with `seeds` ([`key_hash`]). The index starts at
    /// [`FIRST_SLOTS`] (fewer if that is the full size).
    pub fn new(cap: usize, seeds: [u64; 4]) -> Shard {
        let arena = Arena::new(Shard::chunks_for(cap), cap, Shard::index_bytes_for(cap));
        Shard::with_arena(cap, seeds, Arc::new(arena))
    }

    /// The most chunks a shard for `cap` entries allocates.
    pub fn chunks_for(cap: usize) -> usize {
        (Shard::full_slots(cap) / 8 * 7).div_ceil(CHUNK).max(1)
    }

    /// Bytes of every index a shard for `cap` entries can have in turn
    /// (each twice the last: less than twice the largest).
    pub(super) fn index_bytes_for(cap: usize) -> usize {
        Shard::full_slots(cap) * 2 * 8
    }

    /// Slots of the index of a shard for `cap` entries at its full size:
    /// at least 4/3 slot per entry, a power of two.
    fn full_slots(cap: usize) -> usize {
        (cap + cap / 3 + 1).next_power_of_two().max(8)
    }

    /// [`new`](Self::new), its chunks from `arena` (a table's, shared by
    /// its shards).
    pub(super) fn with_arena(cap: usize, seeds: [u64; 4], arena: Arc<Arena>) -> Shard {
        let slots = Shard::full_slots(cap);
        Shard {
            index: Atomic::new(Index::new_in(slots.min(FIRST_SLOTS), Some(&arena))),
            full: slots,
            seeds,
            nchunks: 0,
            chunk_ptrs: (0..Shard::chunks_for(cap))
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            arena,
            used: 0,
            free: Vec::new(),
            live: 0,
            cursor: 0,
            inserts: 0,
            expiries: 0,
        }
    }

    /// Ids handed out so far (each live or free).
    pub fn used(&self) -> u32 {
        self.used
    }

    /// Whether entry `id` holds a flow (stable under the shard's lock).
    pub fn is_live(&self, id: u32) -> bool {
        id < self.used && self.slot(id).tail() & LIVE_BIT != 0
    }

    /// Entries the index can take, grown to its full size.
    pub fn room(&self) -> usize {
        self.full / 8 * 7
    }

    /// The index in force (the lock holder's view: `&self` is a borrow
    /// of the shard under its lock, and only `&mut self` replaces it).
    #[inline(always)]
    fn ix(&self) -> &Index {
        // SAFETY: the pointer is never null (set in `new`, replaced by
        // `grow`), and the index it names is retired only by `grow`,
        // which takes `&mut self`: while `self` is borrowed it stays.
        unsafe { self.index.load(Relaxed, epoch::unprotected()).deref() }
    }

    /// Slots of the index in force.
    pub fn index_slots(&self) -> usize {
        self.ix().len()
    }

    /// Replace the index with one of twice the slots. Readers still on
    /// the old one may miss a flow (and take the shard's lock); it is
    /// freed once they have all unpinned.
    fn grow(&mut self) {
        let g = epoch::pin();
        let grown = Owned::new(self.ix().grown_in(Some(&self.arena)));
        // Release: a reader that loads the new index (Acquire) sees its
        // slots as written here.
        let old = self.index.swap(grown, Release, &g);
        // SAFETY: `old` is unreachable from now on (the pointer was
        // swapped out under the shard's lock, the only writer); readers
        // that loaded it hold epoch guards, and the epoch frees it only
        // after every such guard is gone.
        unsafe { g.defer_destroy(old) };
        // A large allocation: hand it to the global queue now rather
        // than when the thread's bag fills.
        g.flush();
    }

    /// Bytes allocated: index, chunks, free list.
    pub fn bytes(&self) -> usize {
        self.ix().len() * 8
            + self.nchunks * CHUNK * std::mem::size_of::<Slot>()
            + self.chunk_ptrs.len() * 8
            + self.free.capacity() * 4
    }

    /// The lock-free view of this shard.
    pub fn peek(&self) -> Peek {
        Peek {
            index: &self.index,
            chunks: self.chunk_ptrs.as_ptr(),
            nchunks: self.chunk_ptrs.len(),
        }
    }

    /// The slot of entry `id` (an id below the ids handed out).
    #[inline]
    pub fn slot(&self, id: u32) -> &Slot {
        assert!(id < self.used, "entry {id} not handed out");
        let c = self.chunk_ptrs[id as usize / CHUNK].load(Relaxed);
        // SAFETY: ids below `used` are in allocated chunks (`insert`
        // allocates a chunk before handing out its first id, and stores
        // its pointer first); a chunk lives as long as the shard, and a
        // slot is all atomics, so a shared borrow of it for as long as
        // `self` is borrowed is sound whatever other workers do.
        unsafe { &*c.add(id as usize % CHUNK) }
    }

    /// A copy of entry `id` (its lock taken for the copy).
    pub fn entry(&self, id: u32) -> Entry {
        let s = self.slot(id);
        let t = s.lock();
        let e = s.load(t);
        s.unlock(t);
        e
    }

    /// The id of `key`'s entry.
    #[inline]
    pub fn find(&self, key: &FlowKey, hash: u32) -> Option<u32> {
        self.find_words(&key.words(), hash)
    }

    /// The id of the entry whose key has words `w`.
    #[inline]
    pub fn find_words(&self, w: &[u64; 5], hash: u32) -> Option<u32> {
        let ix = self.ix();
        let mut pos = hash as usize;
        loop {
            let slot = ix.at(pos).load(Relaxed);
            if slot == 0 {
                return None;
            }
            let id = (slot as u32).wrapping_sub(1);
            if (slot >> 32) as u32 == hash {
                let s = self.slot(id);
                // Live entries' keys change only under the shard's lock.
                if s.key_is(w, s.tail()) {
                    return Some(id);
                }
            }
            pos += 1;
        }
    }

    /// Store `e` (whose key is not in the shard; `hash`: the low 32 bits
    /// of its [`key_hash`]); its id, or `None` when the index is full.
    pub fn insert(&mut self, e: Entry, hash: u32) -> Option<u32> {
        if self.live >= self.room() {
            return None;
        }
        // A growing index doubles once half its slots are taken: at a
        // million flows in a table built for two million, 16 bytes a flow
        // less than at a quarter (134 -> 118 bytes a flow), and no
        // measurable time more, now that a batch reads every packet's
        // slot in a pass of its own (`Ct::batch`; when one packet's
        // lookup at a time waited on its probe, a half-full index
        // measured 16 ns a frame more). The full size takes up to 7/8
        // (`room`).
        while self.live >= self.ix().len() / 2 && self.ix().len() < self.full {
            self.grow();
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = self.used;
                if id as usize % CHUNK == 0 && id as usize / CHUNK == self.nchunks {
                    let p = self.chunk_ptrs.get(self.nchunks)?;
                    let c = self.arena.chunk()?;
                    // Release: a worker that reads the pointer (Acquire)
                    // sees the chunk's initialised slots.
                    p.store(c.as_ptr(), Release);
                    self.nchunks += 1;
                }
                self.used += 1;
                id
            }
        };
        // A free slot is not locked (only live ones are), and only the
        // shard's lock holder writes it.
        self.slot(id).store_unlock(&Entry {
            flags: e.flags | LIVE,
            ..e
        });
        self.ix().put(u64::from(hash) << 32 | u64::from(id + 1));
        self.live += 1;
        self.inserts += 1;
        Some(id)
    }

    /// Remove entry `id` (backward-shift deletion: no tombstones); takes
    /// its lock.
    pub fn remove(&mut self, id: u32) {
        self.slot(id).lock();
        self.remove_locked(id);
    }

    /// [`remove`](Self::remove) an entry whose lock the caller holds (it
    /// is released: the slot is free).
    pub fn remove_locked(&mut self, id: u32) {
        let hash = key_hash(&self.seeds, &self.slot(id).key()) as u32;
        // Free (not live, not locked) before the index forgets it: a
        // worker that still finds the slot sees it is not live.
        self.slot(id).clear();
        if !self.ix().remove(u64::from(hash) << 32 | u64::from(id + 1)) {
            debug_assert!(false, "entry {id} not in the index");
            return;
        }
        self.free.push(id);
        self.live -= 1;
    }

    /// Look at `n` entries from the cursor; remove those `expired` says
    /// are (given an entry's timeout and when it was last seen: read
    /// without its lock, then again under it before removing). Returns
    /// how many were removed.
    pub fn sweep(&mut self, n: usize, expired: impl Fn(u8, u32) -> bool) -> usize {
        let mut removed = 0;
        if self.used == 0 {
            return 0;
        }
        for _ in 0..n.min(self.used as usize) {
            if self.cursor >= self.used {
                self.cursor = 0;
            }
            let id = self.cursor;
            self.cursor += 1;
            let s = self.slot(id);
            let t = s.tail();
            if t & LIVE_BIT == 0 || !expired(tail_timeout(t), s.last()) {
                continue;
            }
            let t = s.lock();
            if expired(tail_timeout(t), s.last()) {
                self.remove_locked(id);
                self.expiries += 1;
                removed += 1;
            } else {
                s.unlock(t);
            }
        }
        removed
    }

    /// Every live entry with its id, copied (each under its lock).
    pub fn live(&self) -> impl Iterator<Item = (u32, Entry)> + '_ {
        (0..self.used)
            .filter(|&id| self.slot(id).tail() & LIVE_BIT != 0)
            .map(|id| (id, self.entry(id)))
    }

    /// Every live entry, copied.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        self.live().map(|(_, e)| e)
    }
}

/// The hash of key `k` under `seeds`: folded 64x64->128 multiplies of
/// its five words with random seeds (foldhash's mixing step), so that a
/// sender cannot choose keys that collide without knowing the seeds;
/// two words that are zero in every IPv4 key are left out of an IPv4
/// key's (two multiplies, not four).
/// SipHash cost about 250 instructions a packet here; this about 30. The
/// low 32 bits place a key in its shard's index, the high bits choose
/// the shard.
#[inline]
pub fn key_hash(seeds: &[u64; 4], k: &FlowKey) -> u64 {
    words_hash(seeds, &k.words())
}

/// [`key_hash`] of the key whose [`FlowKey::words`] are `w`.
#[inline]
pub fn words_hash(seeds: &[u64; 4], w: &[u64; 5]) -> u64 {
    let s = seeds;
    if w[1] | w[3] == 0 {
        // An IPv4 key (or an IPv6 one with zeros in both addresses' low
        // halves): three words, two multiplies.
        let h1 = fold(w[0] ^ s[0], w[2] ^ s[1]);
        return fold(h1 ^ s[2], w[4] ^ s[3]);
    }
    let h1 = fold(w[0] ^ s[0], w[1] ^ s[1]);
    let h2 = fold(w[2] ^ s[2], w[3] ^ s[3]);
    let h3 = fold(w[4] ^ s[1], h1 ^ s[2]);
    fold(h2 ^ s[3], h3 ^ s[0])
}

/// The high and low halves of `a × b` XORed.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The shards, each behind its lock.
pub type Shards = Box<[crossbeam_utils::CachePadded<Mutex<Shard>>]>;

#[cfg(test)]
mod tests {
    use super::*;

    /// 96 bytes at a multiple of 32: two cache lines, wherever it is.
    #[test]
    fn a_slot_is_96_bytes_on_two_cache_lines() {
        assert_eq!(std::mem::size_of::<Slot>(), 96);
        assert_eq!(std::mem::align_of::<Slot>(), 32);
        let c: Box<[Slot]> = (0..CHUNK).map(|_| Slot::default()).collect();
        for e in c.iter() {
            let a = e as *const Slot as usize;
            assert_eq!(a / 64 + 1, (a + 95) / 64, "entry at {a:#x}");
        }
    }

    /// Inserts and removals with colliding hashes keep every remaining
    /// key findable (backward-shift deletion), ids are reused, and the
    /// index refuses past 7/8.
    #[test]
    fn insert_find_remove_with_collisions() {
        // With seed 1 zero, a key's hash depends on its ports alone (the
        // `a` addresses' second word is zero): keys with one of 7 ports
        // have 7 hashes, long probe runs. Seed 0 chosen so that one run
        // starts near the end of the index and wraps.
        let pkey = |i: u32| {
            let mut a = [0u8; 16];
            a[..4].copy_from_slice(&i.to_be_bytes());
            FlowKey::new(a, (i % 7) as u16, [9; 16], 2, 17, false).0
        };
        let mask = Shard::new(100, [0; 4]).index_slots() as u64 - 1;
        let s0 = (1u64..)
            .find(|&s0| key_hash(&[s0, 0, 5, 7], &pkey(0)) & mask >= mask - 3)
            .unwrap();
        let seeds = [s0, 0, 5, 7];
        let h = |i: u32| key_hash(&seeds, &pkey(i)) as u32;
        let mut s = Shard::new(100, seeds);
        let room = s.room();
        let mut ids = Vec::new();
        for i in 0..room as u32 {
            let e = Entry {
                key: pkey(i),
                flags: LIVE,
                ..Entry::default()
            };
            ids.push((i, s.insert(e, h(i)).unwrap()));
        }
        let distinct: std::collections::HashSet<u32> = (0..room as u32).map(h).collect();
        assert_eq!(distinct.len(), 7);
        let full = Entry {
            key: pkey(99999),
            flags: LIVE,
            ..Entry::default()
        };
        assert!(s.insert(full, h(99999)).is_none());
        for (n, &(i, id)) in ids.iter().enumerate() {
            if n % 3 == 0 {
                s.remove(id);
            } else {
                assert_eq!(s.find(&pkey(i), h(i)), Some(id));
            }
        }
        for (n, &(i, id)) in ids.iter().enumerate() {
            assert_eq!(s.find(&pkey(i), h(i)), (n % 3 != 0).then_some(id), "{i}");
        }
        assert_eq!(s.live, room - room.div_ceil(3));
        let e = Entry {
            key: pkey(5000),
            flags: LIVE,
            ..Entry::default()
        };
        let id = s.insert(e, h(5000)).unwrap();
        assert!(ids.iter().any(|&(_, i)| i == id), "a freed id is reused");
        assert_eq!(s.entries().count(), s.live);
    }

    /// An entry refreshed between the sweep's look without its lock and
    /// its look under the lock (a worker counting a packet lock-free in
    /// between) survives: the sweep judges it again under the lock.
    #[test]
    fn an_entry_refreshed_before_the_sweep_locks_it_survives() {
        let seeds = [1, 2, 3, 4];
        let key = FlowKey::new([1; 16], 1000, [2; 16], 53, 17, false).0;
        let w = key.words();
        let h = key_hash(&seeds, &key) as u32;
        let mut s = Shard::new(100, seeds);
        let e = Entry {
            key,
            flags: LIVE,
            last: 10,
            ..Entry::default()
        };
        let id = s.insert(e, h).unwrap();
        let peek = s.peek();
        let calls = std::cell::Cell::new(0);
        // Expired when last seen before 50; on its first call (the look
        // without the lock) a packet at 100 refreshes the entry through
        // the lock-free path first.
        let removed = s.sweep(1, |_, last| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                assert_eq!(last, 10);
                // SAFETY: the shard outlives the borrow (both in this
                // test's scope, the shard never replaced).
                let (slot, t) = unsafe { peek.find_live(&w, h, false, &crossbeam_epoch::pin()) }
                    .expect("live, unlocked");
                slot.count(0, 60, 100);
                slot.unlock(t);
            }
            last < 50
        });
        assert_eq!(removed, 0, "refreshed: not removed");
        assert_eq!(calls.get(), 2, "judged again under the lock");
        assert_eq!(s.expiries, 0);
        assert_eq!(s.find(&key, h), Some(id));
        let e = s.entry(id);
        assert_eq!((e.last, e.pkts, e.bytes), (100, [1, 0], [60, 0]));
        // Not refreshed: removed.
        assert_eq!(s.sweep(1, |_, last| last < 200), 1);
        assert_eq!(s.find(&key, h), None);
    }

    /// A lock-free lookup that reaches a slot reused by another flow
    /// under the same index tag (what a lookup racing a removal and an
    /// insert sees) does not take it: the key is checked under the
    /// entry's lock, and the lock is released.
    #[test]
    fn a_lock_free_lookup_does_not_take_a_reused_slot() {
        let seeds = [1, 2, 3, 4];
        let kx = FlowKey::new([1; 16], 1000, [2; 16], 53, 17, false).0;
        let ky = FlowKey::new([1; 16], 1001, [2; 16], 53, 17, false).0;
        let h = key_hash(&seeds, &kx) as u32;
        let mut s = Shard::new(100, seeds);
        let entry = |key| Entry {
            key,
            flags: LIVE,
            ..Entry::default()
        };
        let id = s.insert(entry(kx), h).unwrap();
        let peek = s.peek();
        // SAFETY: the shard outlives the borrows (both in this test's
        // scope, the shard never replaced); so below.
        let (slot, t) =
            unsafe { peek.find_live(&kx.words(), h, false, &crossbeam_epoch::pin()) }.unwrap();
        slot.unlock(t);
        s.remove(id);
        // Y in X's slot under X's tag (as if the lookup had read the
        // index before the removal).
        assert_eq!(s.insert(entry(ky), h), Some(id));
        // SAFETY: as above.
        let gone = unsafe { peek.find_live(&kx.words(), h, false, &crossbeam_epoch::pin()) };
        assert!(gone.is_none());
        // SAFETY: as above.
        let (slot, t) = unsafe { peek.find_live(&ky.words(), h, false, &crossbeam_epoch::pin()) }
            .expect("Y, unlocked");
        assert_eq!(slot.key(), ky);
        slot.unlock(t);
    }

    #[test]
    fn adaptive_timeouts_scale_from_60_to_120_percent() {
        assert_eq!(Adaptive::at(600, 1000), Adaptive { num: 1, den: 1 });
        assert_eq!(Adaptive::at(900, 1000), Adaptive { num: 300, den: 600 });
        assert_eq!(Adaptive::at(1000, 1000), Adaptive { num: 200, den: 600 });
        assert_eq!(Adaptive::at(5000, 1000).num, 0);
    }
}
