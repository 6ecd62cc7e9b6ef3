//! The key index of HASH, PERCPU_HASH and LRU_HASH maps as programs read
//! it: without a lock, with a keyed hash cheaper than SipHash.
//!
//! # Layout
//! Allocated once with the map and never moved (as the value arena):
//! a power of two of buckets, each the first slot of its chain; per
//! slot the next slot of its chain, a sequence number and the key
//! (zero-padded to 8-byte words). A chain ends in a *nulls* marker that
//! names its bucket (the kernel's `hlist_nulls`).
//!
//! # Concurrency
//! Writers (insert, delete) are serialised by the map's index lock and
//! publish with release stores. A reader takes no lock and writes
//! nothing shared:
//! - each slot's key and next link are read under its sequence number
//!   (odd while a writer rewrites the slot for a new key): a change
//!   between the two reads of the number sends the reader back to the
//!   bucket's head;
//! - a deleted slot keeps its next link until reused, so a reader
//!   standing on it walks on (the kernel's RCU readers do the same); a
//!   slot reused in another bucket leads the reader to that bucket's
//!   nulls marker, which is not its own: it starts over;
//! - a walk is bounded (at most as many steps as slots) and so are the
//!   restarts: after [`RETRIES`] the reader takes the index lock, so a
//!   program never spins on a writer.
//!
//! A lookup concurrent with a delete may find the deleted key, as in the
//! kernel; a key present throughout is always found.
//!
//! # Hash
//! Keys come from packets, so the hash is keyed per map (random seeds):
//! folded 64x64->128 multiplies of the key's words with the seeds
//! (foldhash's mixing step, as the connection tracker's), about 10
//! instructions a word.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Chain end: this bit, and the bucket's index below it.
const NULLS: u32 = 1 << 31;

/// Restarts of a lock-free walk before the reader takes the lock.
pub(super) const RETRIES: usize = 8;

/// A walk's outcome.
enum Walk {
    Found(u32),
    Absent,
    /// A writer changed what the walk read: start over.
    Retry,
}

/// One slot's link, sequence number and first key word: one load of a
/// cache line per slot walked.
#[repr(C, align(16))]
struct Node {
    seq: AtomicU32,
    next: AtomicU32,
    key0: AtomicU64,
}

/// The lock-free read side of a hash map's key index.
pub(super) struct Table {
    seeds: [u64; 4],
    mask: u32,
    heads: Box<[AtomicU32]>,
    nodes: Box<[Node]>,
    /// Each slot's key words after the first.
    rest: Box<[AtomicU64]>,
    /// 8-byte words per key.
    words: usize,
}

fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Word `i` of `key`, zero-padded: a whole word, or the tail's bytes
/// read in at most three loads (no byte loop).
#[inline(always)]
fn word(key: &[u8], i: usize) -> u64 {
    let c = key.get(i * 8..).unwrap_or_default();
    let le4 = |b: &[u8]| u64::from(u32::from_le_bytes(b.try_into().unwrap_or_default()));
    match c.len() {
        8.. => u64::from_le_bytes(c[..8].try_into().unwrap_or_default()),
        // Two overlapping 4-byte loads: the shared bytes land at the same
        // places.
        n @ 4..=7 => le4(&c[..4]) | le4(&c[n - 4..n]) << (8 * (n - 4)),
        0 => 0,
        n => {
            u64::from(c[0])
                | u64::from(c[n / 2]) << (8 * (n / 2))
                | u64::from(c[n - 1]) << (8 * (n - 1))
        }
    }
}

impl Table {
    /// A table for `slots` entries of `key_size`-byte keys, or `None` if
    /// it would take more than `max_bytes`.
    pub(super) fn new(slots: usize, key_size: usize, max_bytes: usize) -> Option<Table> {
        let words = key_size.div_ceil(8);
        let buckets = slots.checked_next_power_of_two()?;
        let bytes = slots
            .checked_mul(words * 8 + 16)?
            .checked_add(buckets.checked_mul(4)?)?;
        if words == 0 || bytes > max_bytes || slots >= NULLS as usize || buckets > NULLS as usize {
            return None;
        }
        let rs = std::hash::RandomState::new();
        let seed = |i: u64| {
            let mut h = rs.build_hasher();
            h.write_u64(i);
            // Odd: a multiply by it loses no bit.
            h.finish() | 1
        };
        Some(Table {
            seeds: [seed(0), seed(1), seed(2), seed(3)],
            mask: (buckets - 1) as u32,
            heads: (0..buckets as u32)
                .map(|b| AtomicU32::new(NULLS | b))
                .collect(),
            nodes: (0..slots)
                .map(|_| Node {
                    seq: AtomicU32::new(0),
                    next: AtomicU32::new(NULLS),
                    key0: AtomicU64::new(0),
                })
                .collect(),
            rest: (0..slots * (words - 1))
                .map(|_| AtomicU64::new(0))
                .collect(),
            words,
        })
    }

    #[inline]
    pub(super) fn bucket(&self, key: &[u8]) -> u32 {
        let s = &self.seeds;
        let mut h = s[0] ^ key.len() as u64;
        for i in 0..self.words {
            h = fold(h ^ word(key, i), s[1 + (i & 1)]);
        }
        (fold(h, s[3]) >> 32) as u32 & self.mask
    }

    /// Whether slot `slot`'s key is `key` (whose first word is `w0`).
    #[inline]
    fn key_eq(&self, node: &Node, slot: usize, w0: u64, key: &[u8]) -> bool {
        if node.key0.load(Ordering::Relaxed) != w0 {
            return false;
        }
        let n = self.words - 1;
        let rest = &self.rest[slot * n..(slot + 1) * n];
        rest.iter()
            .enumerate()
            .all(|(i, k)| k.load(Ordering::Relaxed) == word(key, i + 1))
    }

    fn walk(&self, key: &[u8], b: u32) -> Walk {
        let w0 = word(key, 0);
        let mut s = self.heads[b as usize].load(Ordering::Acquire);
        let mut steps = 0;
        while s & NULLS == 0 {
            steps += 1;
            let i = s as usize;
            let Some(node) = self.nodes.get(i) else {
                return Walk::Retry;
            };
            if steps > self.nodes.len() {
                return Walk::Retry;
            }
            let seq = node.seq.load(Ordering::Acquire);
            if seq & 1 == 1 {
                return Walk::Retry;
            }
            let eq = self.key_eq(node, i, w0, key);
            let next = node.next.load(Ordering::Acquire);
            fence(Ordering::Acquire);
            if node.seq.load(Ordering::Relaxed) != seq {
                return Walk::Retry;
            }
            if eq {
                return Walk::Found(s);
            }
            s = next;
        }
        if s == NULLS | b {
            Walk::Absent
        } else {
            Walk::Retry
        }
    }

    /// The slot of `key` (`key_size` bytes) without a lock: `Some(None)`
    /// if absent, `None` if writers kept changing the chain (the caller
    /// then asks [`Table::find_locked`] under the index lock).
    #[inline]
    pub(super) fn find(&self, key: &[u8]) -> Option<Option<u32>> {
        let b = self.bucket(key);
        for _ in 0..RETRIES {
            match self.walk(key, b) {
                Walk::Found(s) => return Some(Some(s)),
                Walk::Absent => return Some(None),
                Walk::Retry => {}
            }
        }
        None
    }

    /// The slot of `key`, the index lock held (no writer runs: one walk
    /// decides).
    pub(super) fn find_locked(&self, key: &[u8]) -> Option<u32> {
        match self.walk(key, self.bucket(key)) {
            Walk::Found(s) => Some(s),
            Walk::Absent | Walk::Retry => None,
        }
    }

    /// Write `key` and the link `next` into `slot` under its sequence
    /// number (odd meanwhile: a reader on it starts over).
    fn fill(&self, slot: u32, key: &[u8], next: u32) {
        let i = slot as usize;
        let node = &self.nodes[i];
        let seq = node.seq.load(Ordering::Relaxed);
        node.seq.store(seq.wrapping_add(1) | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        node.key0.store(word(key, 0), Ordering::Relaxed);
        let n = self.words - 1;
        for (w, k) in self.rest[i * n..(i + 1) * n].iter().enumerate() {
            k.store(word(key, w + 1), Ordering::Relaxed);
        }
        node.next.store(next, Ordering::Relaxed);
        node.seq.store((seq | 1).wrapping_add(1), Ordering::Release);
    }

    /// The link that points at `slot` in bucket `b`'s chain.
    fn link_to(&self, b: usize, slot: u32) -> Option<&AtomicU32> {
        let mut link = &self.heads[b];
        for _ in 0..=self.nodes.len() {
            let s = link.load(Ordering::Relaxed);
            if s & NULLS != 0 {
                return None;
            }
            if s == slot {
                return Some(link);
            }
            link = &self.nodes[s as usize].next;
        }
        None
    }

    /// Link `slot` (free, its value written) under `key`. The index
    /// lock must be held for writing.
    pub(super) fn insert(&self, slot: u32, key: &[u8]) {
        let b = self.bucket(key) as usize;
        self.fill(slot, key, self.heads[b].load(Ordering::Relaxed));
        self.heads[b].store(slot, Ordering::Release);
    }

    /// Put `new` (free, its value written) in the place of `old`, which
    /// holds `key`: one link changes, so a reader finds one or the other
    /// wherever it stands (linked at the chain's head and `old` unlinked,
    /// a reader already past the head would find neither). The index
    /// lock must be held for writing; `old` keeps its next link.
    pub(super) fn replace(&self, old: u32, new: u32, key: &[u8]) {
        let b = self.bucket(key) as usize;
        self.fill(
            new,
            key,
            self.nodes[old as usize].next.load(Ordering::Relaxed),
        );
        if let Some(link) = self.link_to(b, old) {
            link.store(new, Ordering::Release);
        }
    }

    /// Unlink `slot`, which holds `key`. The index lock must be held for
    /// writing. The slot keeps its next link (a reader on it walks on).
    pub(super) fn remove(&self, slot: u32, key: &[u8]) {
        let b = self.bucket(key) as usize;
        let after = self.nodes[slot as usize].next.load(Ordering::Relaxed);
        if let Some(link) = self.link_to(b, slot) {
            link.store(after, Ordering::Release);
        }
    }
}
