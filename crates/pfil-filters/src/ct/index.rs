//! A shard's index: open addressing over 8-byte slots (a 32-bit hash tag
//! above an entry id + 1; 0 is a free slot), linear probing, deletion by
//! backward shift (no tombstones). It starts small ([`FIRST_SLOTS`]) and
//! doubles as its shard fills (once half its slots are taken), up to the size the shard was built for
//! ([`Shard::new`](super::table::Shard::new)): a table built for two
//! million flows that holds a thousand keeps its thousand index slots in
//! a few dozen cache lines, not scattered one a page over 32 MiB: a
//! `ct:max 10M` table with 100 000 flows took 155 MB of resident memory
//! with an index sized for its maximum and takes 29 MB with this one
//! (BENCHMARKS.md "A dense index"; no wall-clock difference measured at
//! 1 000 flows).
//!
//! The shard's lock holder changes the index; workers read it without
//! that lock ([`super::table::Peek`]). A grown index is published with
//! one pointer swap, and the one it replaces is freed only after every
//! reader that may hold it has moved on: readers pin a crossbeam epoch
//! (the default collector's, which the datapath pins once a batch) and
//! the old index is retired to it. A reader still on the old index finds
//! a flow's slot there or misses it: a miss sends it to the shard's lock,
//! a stale slot is caught by the entry's key check under the entry's
//! lock, as for any index changing under a lock-free probe.

// The slots behind a raw pointer (a heap slice or an arena block): each
// block says why it is sound.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::arena::Arena;

/// Slots of a new shard's index (2 KiB), or fewer when the shard is
/// built for fewer.
pub const FIRST_SLOTS: usize = 256;

/// One index: `mask + 1` slots, a power of two.
pub struct Index {
    mask: usize,
    /// The slots: a leaked `Box<[u64]>` (`home` `None`) or a block of
    /// `home`'s index reservation (huge pages in a large table).
    slots: NonNull<AtomicU64>,
    home: Option<Arc<Arena>>,
}

// The index is a zeroed `u64` allocation seen as atomics (same size and
// representation; the alignment is checked here).
const _: () = assert!(std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>());

// SAFETY: an Index owns its slots (a boxed slice or an arena block no one
// else is handed) and they are atomics: shared reads and writes through
// `&Index` are what they are for; `home` is an `Arc` of a Send + Sync
// arena.
unsafe impl Send for Index {}
// SAFETY: as above.
unsafe impl Sync for Index {}

impl Index {
    /// An empty index of `n` slots (a power of two), allocated zeroed
    /// from the heap: pages never touched cost nothing.
    pub fn new(n: usize) -> Index {
        Index::new_in(n, None)
    }

    /// [`new`](Self::new), from `arena`'s index reservation where it has
    /// room for them ([`Arena::index_block`]), else from the heap.
    pub(super) fn new_in(n: usize, arena: Option<&Arc<Arena>>) -> Index {
        debug_assert!(n.is_power_of_two());
        if let Some(a) = arena {
            if let Some(p) = a.index_block(n * 8) {
                return Index {
                    mask: n - 1,
                    // Atomics over u64s: same size and alignment (above).
                    slots: p.cast(),
                    home: Some(a.clone()),
                };
            }
        }
        let zeroed = Box::into_raw(vec![0u64; n].into_boxed_slice());
        Index {
            mask: n - 1,
            // A box's pointer is never null; its slice of `n` u64s is
            // owned by the index from here on (freed in `drop`).
            slots: NonNull::new(zeroed.cast::<AtomicU64>()).expect("a box is never null"),
            home: None,
        }
    }

    /// The slots.
    #[inline(always)]
    fn slots(&self) -> &[AtomicU64] {
        // SAFETY: `slots` names `mask + 1` initialised (zeroed, then
        // written only as atomics) slots the index owns while it lives
        // (see `new`); AtomicU64 has u64's size, alignment and validity.
        unsafe { std::slice::from_raw_parts(self.slots.as_ptr(), self.mask + 1) }
    }

    /// Slots - 1.
    #[inline(always)]
    pub fn mask(&self) -> usize {
        self.mask
    }

    /// Slots.
    pub fn len(&self) -> usize {
        self.mask + 1
    }

    /// Whether the index has no slot (never: at least one).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Entries it takes: 7/8 of its slots.
    pub fn room(&self) -> usize {
        self.len() / 8 * 7
    }

    /// Slot `pos` (masked).
    #[inline(always)]
    pub fn at(&self, pos: usize) -> &AtomicU64 {
        // SAFETY: `pos & mask` is at most `mask`, below the `mask + 1`
        // slots the index owns (`new_in`); unchecked because the bound
        // check cannot be proven away (`mask + 1` could wrap as far as
        // the compiler knows) and lookups take it on every probe.
        unsafe { &*self.slots.as_ptr().add(pos & self.mask) }
    }

    /// The address of slot `pos` (masked), to prefetch.
    #[inline(always)]
    pub fn addr(&self, pos: usize) -> *const u8 {
        self.slots.as_ptr().wrapping_add(pos & self.mask).cast()
    }

    /// Place `slot` (a tag and id, nonzero) at its home or the first free
    /// slot after it (the lock holder; the index not full).
    pub fn put(&self, slot: u64) {
        let mut pos = (slot >> 32) as usize & self.mask;
        while self.slots()[pos].load(Relaxed) != 0 {
            pos = (pos + 1) & self.mask;
        }
        self.slots()[pos].store(slot, Relaxed);
    }

    /// An index of twice the slots holding every slot of this one, each
    /// placed from its tag (no key is hashed again), on the heap.
    pub fn grown(&self) -> Index {
        self.grown_in(None)
    }

    /// [`grown`](Self::grown), from `arena` as [`new_in`](Self::new_in)
    /// places it.
    pub(super) fn grown_in(&self, arena: Option<&Arc<Arena>>) -> Index {
        let g = Index::new_in(self.len() * 2, arena);
        for s in self.slots().iter() {
            let v = s.load(Relaxed);
            if v != 0 {
                g.put(v);
            }
        }
        g
    }

    /// Remove `want` (a tag and id); backward-shift deletion. `false`
    /// when it is not there.
    pub fn remove(&self, want: u64) -> bool {
        let m = self.mask;
        let mut pos = (want >> 32) as usize & m;
        while self.slots()[pos].load(Relaxed) != want {
            if self.slots()[pos].load(Relaxed) == 0 {
                return false;
            }
            pos = (pos + 1) & m;
        }
        let mut hole = pos;
        let mut next = (hole + 1) & m;
        loop {
            let slot = self.slots()[next].load(Relaxed);
            if slot == 0 {
                break;
            }
            let home = (slot >> 32) as usize & m;
            // Move the slot back if its home is not in (hole, next].
            if (next.wrapping_sub(home) & m) >= (next.wrapping_sub(hole) & m) {
                self.slots()[hole].store(slot, Relaxed);
                hole = next;
            }
            next = (next + 1) & m;
        }
        self.slots()[hole].store(0, Relaxed);
        true
    }

    /// Slots in use.
    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.slots().iter().filter(|s| s.load(Relaxed) != 0).count()
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        let n = self.mask + 1;
        match &self.home {
            // SAFETY: the block `index_block` gave for these `n` slots,
            // given back once (here), and no one reads it any more: the
            // index is going (a replaced one only after the epoch let every
            // reader go).
            Some(a) => unsafe { a.give_back(self.slots.cast(), n * 8) },
            // SAFETY: the slice `new` leaked from a `Box<[u64]>` of `n`,
            // freed once (here); no borrow of it outlives the index.
            None => drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.slots.as_ptr().cast::<u64>(),
                    n,
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Growing keeps every slot findable from its home, in an index of
    /// twice the slots, with wrapped probe runs and colliding tags.
    #[test]
    fn a_grown_index_keeps_every_slot() {
        let ix = Index::new(16);
        // Tags with homes 14, 15, 15, 0 (wrapping) and 3.
        let slots: Vec<u64> = [(14u64, 1u64), (15, 2), (31, 3), (16, 4), (3, 5)]
            .iter()
            .map(|&(tag, id)| tag << 32 | id)
            .collect();
        for &s in &slots {
            ix.put(s);
        }
        let g = ix.grown();
        assert_eq!((g.len(), g.used()), (32, slots.len()));
        for &s in &slots {
            assert!(g.remove(s), "{s:#x}");
        }
        assert_eq!(g.used(), 0);
        // The old one is unchanged, and a removal there shifts back.
        assert_eq!(ix.used(), slots.len());
        assert!(ix.remove(slots[1]));
        assert!(!ix.remove(slots[1]));
        for &s in [slots[0], slots[2], slots[3], slots[4]].iter() {
            assert!(ix.remove(s), "{s:#x} after a shift");
        }
    }

    use super::super::flow::{Class, FlowKey, Kind};
    use super::super::table::{key_hash, Entry, Shard, LIVE};
    use super::super::{Run, Table};
    use pfil::CtState::{Established, New};

    fn key(i: u32) -> FlowKey {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&(0x0a00_0000 | i).to_be_bytes());
        FlowKey::new(
            a,
            1000,
            [198, 18, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            53,
            17,
            false,
        )
        .0
    }

    /// A shard's index starts at FIRST_SLOTS and doubles as it fills, to
    /// the full size and no further; every entry stays findable across
    /// the growths, removals after them work, the room is the full
    /// size's from the start.
    /// A small shard's indexes come from the heap, a large one's from
    /// its arena's index reservation once they outgrow a page.
    #[test]
    fn a_shard_index_grows_as_it_fills() {
        grows_as_it_fills(10_000);
        grows_as_it_fills(super::super::arena::HUGE_FROM);
    }

    fn grows_as_it_fills(cap: usize) {
        let seeds = [3, 5, 7, 11];
        let mut s = Shard::new(cap, seeds);
        let full = (cap + cap / 3 + 1).next_power_of_two();
        assert_eq!(s.index_slots(), FIRST_SLOTS);
        assert_eq!(s.room(), full / 8 * 7);
        let mut ids = Vec::new();
        for i in 0..s.room() as u32 {
            let e = Entry {
                key: key(i),
                flags: LIVE,
                ..Entry::default()
            };
            ids.push(s.insert(e, key_hash(&seeds, &key(i)) as u32).unwrap());
            let slots = s.index_slots();
            assert!(s.live <= slots / 8 * 7, "{} live in {slots}", s.live);
            assert!(
                slots == full || s.live <= slots / 2,
                "{} live in {slots}: grown late",
                s.live
            );
            assert!(slots == FIRST_SLOTS || s.live > slots / 4, "grown early");
        }
        assert_eq!(s.index_slots(), full);
        let one_more = Entry {
            key: key(1 << 20),
            flags: LIVE,
            ..Entry::default()
        };
        assert!(s.insert(one_more, 1).is_none(), "full");
        for (i, &id) in ids.iter().enumerate() {
            let h = key_hash(&seeds, &key(i as u32)) as u32;
            assert_eq!(s.find(&key(i as u32), h), Some(id), "{i}");
            if i % 2 == 0 {
                s.remove(id);
            }
        }
        for (i, &id) in ids.iter().enumerate() {
            let h = key_hash(&seeds, &key(i as u32)) as u32;
            assert_eq!(s.find(&key(i as u32), h), (i % 2 == 1).then_some(id), "{i}");
        }
        // A small shard is built at its full size.
        assert_eq!(Shard::new(10, seeds).index_slots(), 16);
    }

    /// Workers track established flows lock-free while another creates
    /// flows fast enough to grow every shard's index several times: no
    /// established flow is ever seen as new (which a lookup lost in a
    /// growth and then not found under the shard's lock would give, as a
    /// second entry), and every flow is in the table once at the end.
    #[test]
    fn indexes_grow_under_lock_free_readers() {
        let table = Table::new(200_000, 3);
        let run = Run {
            now: 0,
            loose: false,
            max: 200_000,
        };
        let udp = |i: u32, from_a: bool| {
            let (k, a) = FlowKey::new(
                (0x0a00_0000 | i)
                    .to_be_bytes()
                    .iter()
                    .copied()
                    .chain([0; 12])
                    .collect::<Vec<_>>()
                    .try_into()
                    .unwrap(),
                1000,
                [198, 18, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                53,
                17,
                false,
            );
            Class::Flow(k, if from_a { a } else { !a }, Kind::Udp)
        };
        // 2 000 flows set up both ways first.
        for i in 0..2000 {
            assert_eq!(table.track(udp(i, true), 60, run, 0).0, New);
            assert_eq!(table.track(udp(i, false), 60, run, 0).0, Established);
        }
        let before = (0..64).map(|s| table.index_slots(s)).sum::<usize>();
        std::thread::scope(|sc| {
            let t = &table;
            sc.spawn(move || {
                for i in 2000..100_000 {
                    assert_eq!(t.track(udp(i, true), 60, run, 2).0, New, "{i}");
                }
            });
            for w in 0..2 {
                sc.spawn(move || {
                    let g = crossbeam_epoch::pin();
                    let b = super::super::Batch {
                        run,
                        ad: super::super::table::Adaptive { num: 1, den: 1 },
                        worker: w as usize,
                        biased: false,
                    };
                    for round in 0..40u32 {
                        for i in 0..2000u32 {
                            let c = udp(i, (i + round + w) % 2 == 0);
                            let h = t.hash_of(&c);
                            let (st, _, _) = t.track_batch(&c, h, 60, &b, &g);
                            assert_eq!(st, Established, "flow {i} round {round}");
                        }
                    }
                });
            }
        });
        let after = (0..64).map(|s| table.index_slots(s)).sum::<usize>();
        assert!(
            after >= 8 * before,
            "indexes grew: {before} -> {after} slots"
        );
        assert_eq!(table.len(), 100_000);
        assert_eq!(table.states(200_000).len(), 100_000, "each flow once");
        let (ins, _, _) = table.counts();
        assert_eq!(ins, 100_000);
    }
}
