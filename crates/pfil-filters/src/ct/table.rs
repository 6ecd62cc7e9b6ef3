//! The state table: shards of an open-addressing index (8 bytes a slot:
//! a 32-bit hash tag and an entry id) over entries allocated in chunks
//! of [`CHUNK`] (96 bytes each, two cache lines), each shard behind its own lock.
//!
//! - **Shared by all workers.** Both directions of a flow find the same
//!   entry whatever queue they arrive on, so the tracker is right
//!   without symmetric RSS. A packet takes its shard's lock for its
//!   lookup and update (uncontended: one atomic swap to take, one store
//!   to release; shards are [`shards_for`] of them, up to 64).
//! - **Capacity.** At most `max` entries over the table (one atomic
//!   count); at the limit a new flow is refused (its packet is `invalid`,
//!   reason `limit`, counted `refused`): pf refuses too, and evicting a
//!   live entry would break a running connection to admit a new one
//!   (the flood's). Before refusing, the shard sweeps a few more entries
//!   for expired ones, and timeouts shrink as the table fills (pf's
//!   adaptive timeouts, [`Adaptive`]).
//! - **Expiry.** No full scan, ever: a batch through the `ct` hook
//!   sweeps [`SWEEP`] entries per packet of one shard, the next in turn
//!   (`Table::sweep_next`: one lock a batch, the entries read in order),
//!   and a packet tracked on its own (`Table::track`, the acl's `keep
//!   state`) looks at [`SWEEP`] entries of its shard at the shard's cursor
//!   under its lock; expired entries are removed. A lookup that finds an
//!   expired entry removes it. A table with no traffic keeps its expired
//!   entries until traffic comes (listing them marks them expired).
//! - **Memory.** An entry is 96 bytes; the index has at least 4/3 slot
//!   per entry the shard can hold, rounded up to a power of two (8 bytes
//!   each, allocated zeroed: pages never touched cost nothing). Entries
//!   come in chunks of [`CHUNK`], allocated as the shard grows and kept
//!   (freed entries are reused): the table stays at its peak size. At 1
//!   million flows in a table built for 1 million, 125.6 bytes a flow
//!   (measured by `a_flow_costs_at_most_128_bytes_at_a_million`).
//! - **Prefetch.** A batch reads index slots and entries without the
//!   lock only to prefetch them ([`Peek`]); the only unsafe code of the
//!   tracker is here: the zeroed index seen as atomics (pages never
//!   touched stay free) and the raw addresses a [`Peek`] keeps.

// The crate denies unsafe code; this module needs it for the above, each
// block with its reason.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Relaxed, Ordering::Release};
use std::sync::Mutex;

use super::flow::FlowKey;
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

/// One tracked flow: 96 bytes, aligned to 32, so that it spans two
/// cache lines wherever it sits in its chunk (a 104-byte entry at 8-byte
/// alignment spanned three, one time in three). Its hash is not kept: the
/// index slot holds it, and a removal recomputes it from the key
/// ([`key_hash`]).
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

// The index is a zeroed `u64` allocation seen as atomics (same size and
// representation; the alignment is checked here).
const _: () = assert!(std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>());

/// One shard.
///
/// Its index slots are atomics and each chunk's address is published in
/// `chunk_ptrs`, so that a worker can read a slot and prefetch the entry
/// it names without the shard's lock ([`Peek`]): a hint only, every
/// lookup proper runs under the lock.
pub struct Shard {
    index: Box<[AtomicU64]>,
    /// The table's hash seeds ([`key_hash`]), for removals.
    seeds: [u64; 4],
    mask: usize,
    chunks: Vec<Box<[Entry; CHUNK]>>,
    /// The address of chunk `i` (null until allocated), for [`Peek`].
    chunk_ptrs: Box<[AtomicPtr<Entry>]>,
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

impl Shard {
    /// A shard that can hold about `cap` entries (the index is sized for
    /// 4/3 of it, a power of two; inserts stop at 7/8 of the index), its
    /// keys hashed with `seeds` ([`key_hash`]).
    pub fn new(cap: usize, seeds: [u64; 4]) -> Shard {
        let slots = (cap + cap / 3 + 1).next_power_of_two().max(8);
        let zeroed = Box::into_raw(vec![0u64; slots].into_boxed_slice());
        // SAFETY: AtomicU64 has the size, alignment (checked above) and
        // bit validity of u64, so the allocation is a valid [AtomicU64]
        // of the same length; ownership moves to the new Box.
        let index = unsafe { Box::from_raw(zeroed as *mut [AtomicU64]) };
        let room = slots / 8 * 7;
        Shard {
            index,
            seeds,
            mask: slots - 1,
            chunks: Vec::new(),
            chunk_ptrs: (0..room.div_ceil(CHUNK).max(1))
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            used: 0,
            free: Vec::new(),
            live: 0,
            cursor: 0,
            inserts: 0,
            expiries: 0,
        }
    }

    /// Entries the index can take.
    pub fn room(&self) -> usize {
        (self.mask + 1) / 8 * 7
    }

    /// Bytes allocated: index, chunks, free list.
    pub fn bytes(&self) -> usize {
        self.index.len() * 8
            + self.chunks.len() * CHUNK * std::mem::size_of::<Entry>()
            + self.chunk_ptrs.len() * 8
            + self.free.capacity() * 4
    }

    /// The lock-free view of this shard for prefetching.
    pub fn peek(&self) -> Peek {
        Peek {
            index: self.index.as_ptr(),
            mask: self.mask,
            chunks: self.chunk_ptrs.as_ptr(),
            nchunks: self.chunk_ptrs.len(),
        }
    }

    /// The entry `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &Entry {
        &self.chunks[id as usize / CHUNK][id as usize % CHUNK]
    }

    /// The entry `id`, to update.
    #[inline]
    pub fn get_mut(&mut self, id: u32) -> &mut Entry {
        &mut self.chunks[id as usize / CHUNK][id as usize % CHUNK]
    }

    /// The id of `key`'s entry.
    #[inline]
    pub fn find(&self, key: &FlowKey, hash: u32) -> Option<u32> {
        let mut pos = hash as usize & self.mask;
        loop {
            let slot = self.index[pos].load(Relaxed);
            if slot == 0 {
                return None;
            }
            let id = (slot as u32).wrapping_sub(1);
            if (slot >> 32) as u32 == hash && self.get(id).key == *key {
                return Some(id);
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Store `e` (whose key is not in the shard; `hash`: the low 32 bits
    /// of its [`key_hash`]); its id, or `None` when the index is full.
    pub fn insert(&mut self, e: Entry, hash: u32) -> Option<u32> {
        if self.live >= self.room() {
            return None;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = self.used;
                if id as usize % CHUNK == 0 && id as usize / CHUNK == self.chunks.len() {
                    let mut c = Box::new([Entry::default(); CHUNK]);
                    if let Some(p) = self.chunk_ptrs.get(self.chunks.len()) {
                        p.store(c.as_mut_ptr(), Release);
                    }
                    self.chunks.push(c);
                }
                self.used += 1;
                id
            }
        };
        *self.get_mut(id) = e;
        let mut pos = hash as usize & self.mask;
        while self.index[pos].load(Relaxed) != 0 {
            pos = (pos + 1) & self.mask;
        }
        self.index[pos].store(u64::from(hash) << 32 | u64::from(id + 1), Relaxed);
        self.live += 1;
        self.inserts += 1;
        Some(id)
    }

    /// Remove entry `id` (backward-shift deletion: no tombstones).
    pub fn remove(&mut self, id: u32) {
        let hash = key_hash(&self.seeds, &self.get(id).key) as u32;
        let mut pos = hash as usize & self.mask;
        let want = u64::from(hash) << 32 | u64::from(id + 1);
        while self.index[pos].load(Relaxed) != want {
            if self.index[pos].load(Relaxed) == 0 {
                debug_assert!(false, "entry {id} not in the index");
                return;
            }
            pos = (pos + 1) & self.mask;
        }
        let mut hole = pos;
        let mut next = (hole + 1) & self.mask;
        loop {
            let slot = self.index[next].load(Relaxed);
            if slot == 0 {
                break;
            }
            let home = (slot >> 32) as usize & self.mask;
            // Move the slot back if its home is not in (hole, next].
            if (next.wrapping_sub(home) & self.mask) >= (next.wrapping_sub(hole) & self.mask) {
                self.index[hole].store(slot, Relaxed);
                hole = next;
            }
            next = (next + 1) & self.mask;
        }
        self.index[hole].store(0, Relaxed);
        self.get_mut(id).flags = 0;
        self.free.push(id);
        self.live -= 1;
    }

    /// Look at `n` entries from the cursor; remove those `expired` says
    /// are. Returns how many were removed.
    pub fn sweep(&mut self, n: usize, expired: impl Fn(&Entry) -> bool) -> usize {
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
            let e = self.get(id);
            if e.flags & LIVE != 0 && expired(e) {
                self.remove(id);
                self.expiries += 1;
                removed += 1;
            }
        }
        removed
    }

    /// Every live entry with its id, copied.
    pub fn live(&self) -> impl Iterator<Item = (u32, Entry)> + '_ {
        self.chunks
            .iter()
            .flat_map(|c| c.iter())
            .take(self.used as usize)
            .enumerate()
            .filter(|(_, e)| e.flags & LIVE != 0)
            .map(|(i, e)| (i as u32, *e))
    }

    /// Every live entry.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.chunks
            .iter()
            .flat_map(|c| c.iter())
            .take(self.used as usize)
            .filter(|e| e.flags & LIVE != 0)
    }
}

/// The hash of key `k` under `seeds`: folded 64x64->128 multiplies of
/// its five words with random seeds (foldhash's mixing step), so that a
/// sender cannot choose keys that collide without knowing the seeds.
/// SipHash cost about 250 instructions a packet here; this about 30. The
/// low 32 bits place a key in its shard's index, the high bits choose
/// the shard.
#[inline]
pub fn key_hash(seeds: &[u64; 4], k: &FlowKey) -> u64 {
    let w = k.words();
    let s = seeds;
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

/// Where a shard's index slots and chunks are, read without its lock to
/// prefetch (VPP's way with a burst: the lookups of a batch are started
/// before any is done, so their cache misses overlap). Valid while the
/// shard lives: the index and the chunk-pointer array are allocated once
/// and never move; chunks are only added (published with `Release`),
/// never freed before the shard.
#[derive(Clone, Copy, Debug)]
pub struct Peek {
    index: *const AtomicU64,
    mask: usize,
    chunks: *const AtomicPtr<Entry>,
    nchunks: usize,
}

// SAFETY: a Peek only reads atomics (index slots, chunk pointers) of a
// shard that outlives it (the Table holding both), and hands out
// addresses to prefetch, never to dereference.
unsafe impl Send for Peek {}
// SAFETY: as for Send: shared reads of atomics only.
unsafe impl Sync for Peek {}

impl Peek {
    /// The address of `hash`'s home slot.
    #[inline]
    pub fn slot(&self, hash: u32) -> *const u8 {
        self.index.wrapping_add(hash as usize & self.mask).cast()
    }

    /// The address of the entry the home slot of `hash` names if its tag
    /// is `hash` (a racy read: a hint, possibly stale), else `None`.
    #[inline]
    pub fn entry(&self, hash: u32) -> Option<*const u8> {
        // SAFETY: the slot is in the index (masked offset), an atomic
        // the shard keeps alive as long as this Peek is used.
        let slot = unsafe { &*self.index.add(hash as usize & self.mask) }.load(Relaxed);
        if slot == 0 || (slot >> 32) as u32 != hash {
            return None;
        }
        let id = (slot as u32).wrapping_sub(1) as usize;
        if id / CHUNK >= self.nchunks {
            return None;
        }
        // SAFETY: `id / CHUNK` is below the array's length (checked).
        let c = unsafe { &*self.chunks.add(id / CHUNK) }.load(std::sync::atomic::Ordering::Acquire);
        if c.is_null() {
            return None;
        }
        Some(c.wrapping_add(id % CHUNK).cast())
    }
}

/// Hint the CPU to bring the cache line at `p` in (no fault, no effect
/// on memory; nothing on targets without the instruction).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The shards, each behind its lock.
pub type Shards = Box<[crossbeam_utils::CachePadded<Mutex<Shard>>]>;

#[cfg(test)]
mod tests {
    use super::*;

    /// 96 bytes at a multiple of 32: two cache lines, wherever it is.
    #[test]
    fn an_entry_is_96_bytes_on_two_cache_lines() {
        assert_eq!(std::mem::size_of::<Entry>(), 96);
        assert_eq!(std::mem::align_of::<Entry>(), 32);
        let c = Box::new([Entry::default(); CHUNK]);
        for e in c.iter() {
            let a = e as *const Entry as usize;
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
        let mask = Shard::new(100, [0; 4]).mask as u64;
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

    #[test]
    fn adaptive_timeouts_scale_from_60_to_120_percent() {
        assert_eq!(Adaptive::at(600, 1000), Adaptive { num: 1, den: 1 });
        assert_eq!(Adaptive::at(900, 1000), Adaptive { num: 300, den: 600 });
        assert_eq!(Adaptive::at(1000, 1000), Adaptive { num: 200, den: 600 });
        assert_eq!(Adaptive::at(5000, 1000).num, 0);
    }
}
