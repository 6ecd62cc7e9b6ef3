//! A shard's lock-free view ([`Peek`]): what a worker reads without the
//! shard's lock, to prefetch and to find a live flow's entry
//! ([`Peek::find_live`]).
// Raw addresses of a shard's index pointer and chunks, read under the
// table's lifetime: each block says why it is sound.
#![allow(unsafe_code)]

use std::sync::atomic::{
    AtomicPtr,
    Ordering::{Acquire, Relaxed},
};

use crossbeam_epoch::{Atomic, Guard};

use super::index::Index;
use super::slot::Slot;
use super::table::CHUNK;

/// Where a shard's index slots and chunks are, read without its lock to
/// prefetch (VPP's way with a burst: the lookups of a batch are started
/// before any is done, so their cache misses overlap) and to track a live
/// flow under its entry's lock ([`find_live`](Self::find_live)). Valid while the
/// shard lives: the shard's index pointer and chunk-pointer array never
/// move (the index they name is replaced as the shard grows, and read
/// under an epoch guard); chunks are only added (published with
/// `Release`), never freed before the shard.
#[derive(Clone, Copy, Debug)]
pub struct Peek {
    pub(super) index: *const Atomic<Index>,
    pub(super) chunks: *const AtomicPtr<Slot>,
    pub(super) nchunks: usize,
}

// SAFETY: a Peek only reads atomics (the index pointer, index slots,
// chunk pointers, slots) of a shard that outlives it (the Table holding
// both; `find_live`'s contract): addresses to prefetch, and the `&Slot`s
// `find_live` lends, whose every field is an atomic, in chunks freed
// only with the shard; an index only under an epoch guard.
unsafe impl Send for Peek {}
// SAFETY: as for Send: shared reads of atomics only.
unsafe impl Sync for Peek {}

impl Peek {
    /// The index in force, for as long as `g` is held.
    ///
    /// # Safety
    /// The shard this view was made from must be alive.
    #[inline(always)]
    unsafe fn ix<'g>(&self, g: &'g Guard) -> &'g Index {
        // SAFETY: the shard is alive (the caller's promise), so its index
        // pointer is; Acquire pairs with the Release of `Shard::grow`, so
        // a grown index's slots are seen as written. The pointer is never
        // null, and the index it names is retired to the epoch only after
        // it was swapped out: `g` keeps it from being freed.
        unsafe { (*self.index).load(Acquire, g).deref() }
    }

    /// The address of `hash`'s home slot.
    ///
    /// # Safety
    /// The shard this view was made from must be alive.
    #[inline]
    pub unsafe fn slot(&self, hash: u32, g: &Guard) -> *const u8 {
        // SAFETY: the caller's promise.
        unsafe { self.ix(g) }.addr(hash as usize)
    }

    /// The entry the first slot tagged `hash` from its home on names (a
    /// racy read: a hint, possibly stale), else `None`: the probe
    /// [`find_live`](Self::find_live) makes, without its checks. A key
    /// pushed past its home slot (a quarter of them in a half-full
    /// index) is found too: its entry would otherwise not be prefetched
    /// at all.
    ///
    /// # Safety
    /// The shard this view was made from must outlive the returned
    /// borrow (the [`super::Table`] that owns both ties them).
    #[inline]
    pub unsafe fn entry(&self, hash: u32, g: &Guard) -> Option<&Slot> {
        // SAFETY: the caller's promise.
        let ix = unsafe { self.ix(g) };
        let slot = (hash as usize..hash as usize + PROBE)
            .map(|pos| ix.at(pos).load(Relaxed))
            .find(|&s| s == 0 || (s >> 32) as u32 == hash)?;
        if slot == 0 {
            return None;
        }
        let id = (slot as u32).wrapping_sub(1) as usize;
        if id / CHUNK >= self.nchunks {
            return None;
        }
        // SAFETY: `id / CHUNK` is below the array's length (checked).
        let c = unsafe { &*self.chunks.add(id / CHUNK) }.load(Acquire);
        if c.is_null() {
            return None;
        }
        // SAFETY: as in `find_live`: a published chunk holds CHUNK slots
        // (atomics) and lives as long as the shard.
        Some(unsafe { &*c.add(id % CHUNK) })
    }

    /// The live entry whose key has words `w` (`hash`: the low 32 bits of
    /// its [`key_hash`](super::table::key_hash)), locked, with its `tail` word; `None` if the
    /// index shows none, or it is locked, or the index changed under the
    /// probe (an insert or removal moving slots): then the caller takes
    /// the shard's lock and looks again. Without the shard's lock: a live
    /// entry's key changes only when it is removed, which takes the
    /// entry's lock, and the key is checked with the lock held.
    ///
    /// With `biased` the entry is not locked: the caller runs a batch
    /// of the table's only worker (its bias, `ct/bias.rs`), which no one
    /// else writes entries during; it then must not unlock it.
    ///
    /// # Safety
    /// The shard this view was made from must outlive the returned
    /// borrow (the [`super::Table`] that owns both ties them).
    #[inline(always)]
    pub unsafe fn find_live(
        &self,
        w: &[u64; 5],
        hash: u32,
        biased: bool,
        g: &Guard,
    ) -> Option<(&Slot, u64)> {
        // SAFETY: the shard is alive (the caller's promise).
        let ix = unsafe { self.ix(g) };
        // A bounded probe: the index may be changing under it.
        for pos in hash as usize..hash as usize + PROBE {
            let slot = ix.at(pos).load(Relaxed);
            if slot == 0 {
                return None;
            }
            if (slot >> 32) as u32 == hash {
                let id = (slot as u32).wrapping_sub(1) as usize;
                let ci = id / CHUNK;
                if ci >= self.nchunks {
                    return None;
                }
                // SAFETY: `ci` is below the array's length (checked).
                // Acquire: pairs with the Release that published the
                // chunk, so its slots are seen initialised.
                let c = unsafe { &*self.chunks.add(ci) }.load(Acquire);
                if c.is_null() {
                    return None;
                }
                // SAFETY: a published chunk holds CHUNK slots and lives
                // as long as the shard (freed only by its drop, the
                // caller's promise covers the borrow); slots are atomics.
                let s = unsafe { &*c.add(id % CHUNK) };
                // Biased (one worker's table, see `bias`): no lock to take.
                let t = s.claim(biased)?;
                if s.key_is(w, t) {
                    return Some((s, t));
                }
                if !biased {
                    s.unlock(t);
                }
            }
        }
        None
    }
}

impl super::Table {
    /// The view of shard `shard` (`shard_at`'s: masked by `shard_mask`).
    #[inline(always)]
    fn peek(&self, shard: usize) -> &Peek {
        debug_assert_eq!(self.peeks.len(), self.shard_mask + 1);
        // SAFETY: the table has `shard_mask + 1` shards and a view of each
        // (`Table::new`, which makes `shard_mask` a power of two less
        // one); masked here, the index is below that length. (The callers
        // pass `shard_at`'s, masked already: the compiler folds the two.)
        unsafe { self.peeks.get_unchecked(shard & self.shard_mask) }
    }

    /// [`Peek::find_live`] in shard `shard` of this table.
    #[inline(always)]
    pub(super) fn find_live(
        &self,
        shard: usize,
        w: &[u64; 5],
        hash: u32,
        biased: bool,
        g: &Guard,
    ) -> Option<(&Slot, u64)> {
        // SAFETY: the view is of one of this table's shards, which live
        // as long as the table, and so as the borrow of `self`. This
        // holds only because a shard is never replaced inside its mutex
        // (see [`Shard`]): `*guard = Shard::new(..)` would drop the old
        // shard (freeing the index and chunks this view points into)
        // while the table, and this borrow, live on.
        unsafe { self.peek(shard).find_live(w, hash, biased, g) }
    }

    /// [`Peek::slot`] of hash `h` (its shard's view).
    #[inline(always)]
    pub(super) fn peek_slot(&self, h: u64, g: &Guard) -> *const u8 {
        // SAFETY: as in `find_live`: the view's shard lives as long as
        // the table.
        unsafe { self.peek(self.shard_at(h)).slot(h as u32, g) }
    }

    /// [`Peek::entry`] of hash `h` (its shard's view).
    #[inline(always)]
    pub(super) fn peek_entry(&self, h: u64, g: &Guard) -> Option<&Slot> {
        // SAFETY: as in `find_live`.
        unsafe { self.peek(self.shard_at(h)).entry(h as u32, g) }
    }

    /// [`find_live`](Self::find_live), `hint` tried first: the entry
    /// the first slot tagged `hash` named when it was prefetched
    /// ([`prefetch_entry`](Self::prefetch_entry)), the one the probe
    /// would try first if the index has not changed since. A hint not
    /// live or locked answers `None` as the probe would; one of another
    /// key is passed over for the probe.
    #[inline(always)]
    pub(super) fn find_hinted<'t>(
        &'t self,
        hint: Option<&'t Slot>,
        w: &[u64; 5],
        hash: u64,
        biased: bool,
        g: &Guard,
    ) -> Option<(&'t Slot, u64)> {
        if let Some(s) = hint {
            let t = s.claim(biased)?;
            if s.key_is(w, t) {
                return Some((s, t));
            }
            if !biased {
                s.unlock(t);
            }
        }
        self.find_live(self.shard_at(hash), w, hash as u32, biased, g)
    }
}

/// Index slots a lock-free lookup ([`Peek::find_live`]) probes at most.
const PROBE: usize = 8;

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

#[cfg(test)]
mod tests {
    use super::super::flow::{Class, FlowKey, Kind};
    use super::super::{Run, Table};

    fn key(i: u32) -> FlowKey {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&(0x0a00_0000 | i).to_be_bytes());
        let b = [198, 18, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        FlowKey::new(a, 1000, b, 53, 17, false).0
    }

    /// The hint of a key pushed past its home slot (taken by a key of
    /// another tag) is its entry: the probe goes on to the slot tagged
    /// with its hash, as the lookup's does.
    #[test]
    fn a_displaced_key_has_its_hint() {
        use super::super::table::{Entry, Shard, LIVE};
        let mut s = Shard::new(100, [3, 5, 7, 11]);
        let mask = s.index_slots() as u32 - 1;
        let (hx, hy) = (7u32, 7 + mask + 1);
        for (i, h) in [(0, hx), (1, hy)] {
            let e = Entry {
                key: key(i),
                flags: LIVE,
                ..Entry::default()
            };
            s.insert(e, h).unwrap();
        }
        let g = crossbeam_epoch::pin();
        let view = s.peek();
        for (i, h) in [(0, hx), (1, hy)] {
            // SAFETY: the shard outlives the borrow.
            let e = unsafe { view.entry(h, &g) }.expect("a hint");
            assert_eq!(e.key(), key(i), "hash {h}");
        }
        // SAFETY: as above.
        let none = unsafe { view.entry(8, &g) };
        assert!(none.is_none(), "no key of that hash");
    }

    /// A hint that is the flow's entry finds it without the index; a
    /// hint of another flow is passed over for the index; a hint whose
    /// flow is gone answers `None`, as the probe would, locked or not.
    #[test]
    fn a_hint_is_checked_before_it_is_used() {
        let t = Table::new(1000, 1);
        let run = Run {
            now: t.now(),
            loose: false,
            max: 1000,
        };
        for i in 0..2 {
            t.track(Class::Flow(key(i), true, Kind::Udp), 60, run, 0);
        }
        let g = crossbeam_epoch::pin();
        let (w0, w1) = (key(0).words(), key(1).words());
        let (h0, h1) = (t.hash(&key(0)), t.hash(&key(1)));
        let e0 = t.peek_entry(h0, &g).expect("flow 0 in the index");
        let e1 = t.peek_entry(h1, &g).expect("flow 1 in the index");
        assert!(!std::ptr::eq(e0, e1));
        for biased in [false, true] {
            for hint in [Some(e0), Some(e1), None] {
                let (s, tail) = t.find_hinted(hint, &w0, h0, biased, &g).expect("flow 0");
                assert!(
                    std::ptr::eq(s, e0),
                    "hint {:?}",
                    hint.map(|e| e as *const _)
                );
                if !biased {
                    s.unlock(tail);
                }
            }
        }
        assert_eq!(t.kill(1000, |s| s.dport == 53 && s.sport == 1000), 2);
        for biased in [false, true] {
            assert!(t.find_hinted(Some(e0), &w0, h0, biased, &g).is_none());
            assert!(t.find_hinted(Some(e1), &w1, h1, biased, &g).is_none());
        }
    }
}
