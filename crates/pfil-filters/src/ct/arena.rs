//! Where a table's entries live: one reservation of address space for
//! every chunk the table can ever have, handed out in order to its
//! shards, backed by transparent huge pages where the kernel has them.
//!
//! A table larger than the TLB's reach (about 8 MB of 4 KiB pages on this
//! machine's cores) misses the TLB on almost every entry it touches, and
//! the page walks, not the cache misses, bound a lookup: measured with
//! a million flows, 102 ns a frame through `ct` + acl on 4 KiB pages and
//! 64 on 2 MiB ones (BENCHMARKS.md). Chunks from the heap (96 KiB each)
//! never get huge pages; one reservation, advised `MADV_HUGEPAGE` and
//! aligned to 2 MiB, does as it is touched. Nothing is committed until a
//! chunk is used (`MAP_NORESERVE`: a table built for ten million flows
//! reserves 1.4 GB of address space and uses what its flows need); the
//! chunks of all shards come from the front in turn, so a table with few
//! flows touches few huge pages (its shards' first chunks: up to 6 MiB
//! for 64 shards). Tables built for fewer than [`HUGE_FROM`] flows fit
//! the TLB's reach and are not advised. Where the reservation fails (a
//! strict overcommit policy, an address-space limit) chunks come from
//! the heap, as before.
//!
//! The shards' indexes come from a second reservation of the same kind
//! once they outgrow a page ([`Arena::index_block`]): at a million flows
//! they are 32 MB, 8 192 pages of 4 KiB, and a lookup's slot missed the
//! TLB as its entry did. An index is replaced as its shard grows, so its
//! blocks are handed out in order and never again: a block given back
//! has its pages returned to the kernel (`MADV_DONTNEED`), and the
//! reservation is sized for every index each shard can have in turn
//! (each twice the last, so less than twice the largest).
//!
//! Unsafe code: the mapping's system calls and the raw chunk pointers
//! (each block says why it is sound).
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use super::slot::Slot;
use super::table::CHUNK;

/// Tables built for this many flows or more get huge pages.
pub const HUGE_FROM: usize = 65_536;
/// A huge page (x86-64's 2 MiB).
const HUGE: usize = 2 << 20;
/// Bytes of a chunk.
const CHUNK_BYTES: usize = CHUNK * std::mem::size_of::<Slot>();

/// One anonymous private mapping of address space, nothing committed
/// until touched (`MAP_NORESERVE`), its usable part from a huge page's
/// start; unmapped on drop.
struct Reservation {
    /// The mapping as made (to unmap).
    start: NonNull<u8>,
    len: usize,
    /// The usable part's start (a huge page's start inside it).
    base: usize,
}

impl Reservation {
    /// `bytes` usable, advised `MADV_HUGEPAGE` with `huge`; `None` where
    /// the kernel refuses the mapping.
    fn new(bytes: usize, huge: bool) -> Option<Reservation> {
        let len = bytes.checked_add(HUGE)?;
        // SAFETY: a fresh anonymous private mapping at an address of the
        // kernel's choice: nothing else is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let start = NonNull::new(p.cast::<u8>())?;
        let base = (p as usize).next_multiple_of(HUGE);
        #[cfg(target_os = "linux")]
        if huge {
            // SAFETY: advice on pages of our own mapping (`base` and the
            // `bytes` after it lie inside it); failing (no THP) is harmless.
            unsafe { libc::madvise(base as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE) };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = huge;
        Some(Reservation { start, len, base })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; its owner (the arena)
        // goes last of the table, with every borrow of its memory.
        unsafe { libc::munmap(self.start.as_ptr().cast(), self.len) };
    }
}

// SAFETY: a Reservation is an address range it owns; it hands nothing
// out itself (the arena does, with its own reasons) and its fields are
// fixed at creation.
unsafe impl Send for Reservation {}
// SAFETY: as above: `&Reservation` reads fixed fields only.
unsafe impl Sync for Reservation {}

/// The chunks and the indexes of one table.
pub(super) struct Arena {
    /// The chunks' reservation (its first chunk at its `base`) and the
    /// chunks it holds.
    map: Option<Reservation>,
    chunks: usize,
    /// Chunks handed out.
    next: AtomicUsize,
    /// Chunks from the heap (no reservation, or it is spent), freed on
    /// drop.
    heap: Mutex<Vec<NonNull<Slot>>>,
    /// The indexes' reservation (tables built for [`HUGE_FROM`] flows or
    /// more), its usable bytes, and the bytes handed out.
    ix: Option<Reservation>,
    ix_bytes: usize,
    ix_next: AtomicUsize,
}

// SAFETY: the arena owns its mappings and heap chunks; what it hands out
// is memory of atomics (slots, index slots), shared by design; its own
// fields are atomics, a mutex and values fixed at creation.
unsafe impl Send for Arena {}
// SAFETY: as above: `&Arena` allows only `chunk`, `index_block` and
// `give_back` (atomic counters, a mutex, advice on blocks handed out)
// and reads of fixed fields.
unsafe impl Sync for Arena {}

/// A page (the least an index block is).
const PAGE: usize = 4096;

impl Arena {
    /// The chunks of a table whose shards hold at most `chunks` of them
    /// in all, built for `flows` flows, and (for a table of [`HUGE_FROM`]
    /// flows or more) `index_bytes` of room for its shards' indexes, all
    /// of them in turn.
    pub(super) fn new(chunks: usize, flows: usize, index_bytes: usize) -> Arena {
        let huge = flows >= HUGE_FROM;
        let map = chunks
            .checked_mul(CHUNK_BYTES)
            .and_then(|n| Reservation::new(n, huge));
        let ix = if huge {
            Reservation::new(index_bytes, true)
        } else {
            None
        };
        Arena {
            chunks: if map.is_some() { chunks } else { 0 },
            map,
            next: AtomicUsize::new(0),
            heap: Mutex::new(Vec::new()),
            ix_bytes: if ix.is_some() { index_bytes } else { 0 },
            ix,
            ix_next: AtomicUsize::new(0),
        }
    }

    /// `bytes` of zeroed index memory, page-aligned, never handed out
    /// before, this arena's until [`give_back`](Self::give_back); `None`
    /// for less than a page, or without a reservation, or with it spent
    /// (the index then comes from the heap).
    pub(super) fn index_block(&self, bytes: usize) -> Option<NonNull<u64>> {
        let ix = self.ix.as_ref()?;
        if bytes < PAGE || bytes % PAGE != 0 {
            return None;
        }
        let at = self.ix_next.fetch_add(bytes, Relaxed);
        if at.checked_add(bytes)? > self.ix_bytes {
            return None;
        }
        // Untouched pages of the reservation read as zeros.
        NonNull::new((ix.base + at) as *mut u64)
    }

    /// Return the pages of an index block to the kernel; its addresses
    /// are not handed out again (a later read would see zeros).
    ///
    /// # Safety
    /// `p` and `bytes` are a block [`index_block`](Self::index_block) of
    /// this arena gave, given back once, and nothing reads or writes it
    /// any more.
    pub(super) unsafe fn give_back(&self, p: NonNull<u64>, bytes: usize) {
        #[cfg(target_os = "linux")]
        // SAFETY: whole pages of our own mapping (the caller's promise)
        // that nothing uses: dropping them loses nothing anyone reads.
        unsafe {
            libc::madvise(p.as_ptr().cast(), bytes, libc::MADV_DONTNEED)
        };
        #[cfg(not(target_os = "linux"))]
        let _ = (p, bytes);
    }

    /// A chunk of [`CHUNK`] free slots (zeroed: every field an atomic 0,
    /// `Slot::default()`), the arena's until it drops; `None` if neither
    /// the reservation nor the heap has one.
    pub(super) fn chunk(&self) -> Option<NonNull<Slot>> {
        let i = self.next.fetch_add(1, Relaxed);
        if let Some(m) = self.map.as_ref().filter(|_| i < self.chunks) {
            // The reservation's zero pages: `Slot::default()` is all
            // zeros (atomics of 0).
            return NonNull::new((m.base + i * CHUNK_BYTES) as *mut Slot);
        }
        let c: Box<[Slot]> = (0..CHUNK).map(|_| Slot::default()).collect();
        let c: Box<[Slot; CHUNK]> = c.try_into().ok()?;
        let p = NonNull::new(Box::into_raw(c).cast::<Slot>())?;
        self.heap.lock().unwrap_or_else(|e| e.into_inner()).push(p);
        Some(p)
    }

    /// Whether the chunks and the indexes come from reservations (not
    /// the heap).
    #[cfg(test)]
    pub(super) fn reserved(&self) -> bool {
        self.map.is_some() && self.ix.is_some()
    }

    /// Where the chunks' reservation starts (0 without one).
    #[cfg(test)]
    pub(super) fn base(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.base)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for p in self
            .heap
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            // SAFETY: from `Box::into_raw` of a `Box<[Slot; CHUNK]>` in
            // `chunk`, freed only here; the arena goes last of the table
            // (every shard holds it), with every borrow of its slots.
            drop(unsafe { Box::from_raw(p.as_ptr().cast::<[Slot; CHUNK]>()) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ct::Table;

    /// The `VmFlags` of the mapping that holds address `a` (Linux).
    fn vm_flags(a: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&a);
                    continue;
                }
            }
            if inside && line.starts_with("VmFlags:") {
                return line.to_string();
            }
        }
        panic!("no mapping holds {a:#x}")
    }

    /// Chunks come in order from the reservation, zeroed, apart, at a
    /// huge page's start, then from the heap once it is spent.
    #[test]
    fn chunks_come_from_the_reservation_then_the_heap() {
        let a = Arena::new(3, HUGE_FROM, PAGE);
        assert!(a.reserved());
        let cs: Vec<NonNull<Slot>> = (0..5).map(|_| a.chunk().unwrap()).collect();
        for w in cs[..3].windows(2) {
            assert_eq!(w[1].as_ptr() as usize - w[0].as_ptr() as usize, CHUNK_BYTES);
        }
        assert_eq!(cs[0].as_ptr() as usize % HUGE, 0, "at a huge page's start");
        for c in &cs {
            // SAFETY: a chunk of CHUNK slots the arena owns while it lives.
            let s = unsafe { std::slice::from_raw_parts(c.as_ptr(), CHUNK) };
            assert!(s.iter().all(|s| s.tail() == 0 && s.last() == 0), "zeroed");
        }
        assert_eq!(
            a.heap.lock().unwrap().len(),
            2,
            "the last two from the heap"
        );
    }

    /// Index blocks come in order from the index reservation, whole
    /// pages, zeroed, until it is spent; none for less than a page, none
    /// in a small table's arena (its indexes stay on the heap).
    #[test]
    fn index_blocks_come_in_order_until_spent() {
        let a = Arena::new(1, HUGE_FROM, 3 * PAGE);
        assert!(a.reserved());
        assert_eq!(a.index_block(100), None, "less than a page");
        assert_eq!(a.index_block(PAGE + 8), None, "not whole pages");
        let b1 = a.index_block(PAGE).unwrap();
        let b2 = a.index_block(2 * PAGE).unwrap();
        assert_eq!(b1.as_ptr() as usize % PAGE, 0);
        assert_eq!(b2.as_ptr() as usize - b1.as_ptr() as usize, PAGE);
        // SAFETY: two blocks of the arena's, PAGE and 2 * PAGE bytes.
        let (s1, s2) = unsafe {
            (
                std::slice::from_raw_parts(b1.as_ptr(), PAGE / 8),
                std::slice::from_raw_parts(b2.as_ptr(), PAGE / 4),
            )
        };
        assert!(s1.iter().chain(s2).all(|&w| w == 0), "zeroed");
        assert_eq!(a.index_block(PAGE), None, "spent");
        // SAFETY: the blocks above, given back once, not read after.
        unsafe {
            a.give_back(b1, PAGE);
            a.give_back(b2, 2 * PAGE);
        }
        assert_eq!(
            Arena::new(1, HUGE_FROM - 1, 3 * PAGE).index_block(PAGE),
            None
        );
    }

    /// A large shard's index, once it outgrows a page, lies in a mapping
    /// advised huge pages.
    #[test]
    fn a_large_shards_index_asks_for_huge_pages() {
        use super::super::table::{key_hash, Entry, Shard, LIVE};
        let seeds = [3, 5, 7, 11];
        let mut s = Shard::new(HUGE_FROM, seeds);
        for i in 0..400u32 {
            let mut a = [0u8; 16];
            a[..4].copy_from_slice(&i.to_be_bytes());
            let key = super::super::flow::FlowKey::new(a, 1, a, 2, 17, false).0;
            let e = Entry {
                key,
                flags: LIVE,
                ..Entry::default()
            };
            s.insert(e, key_hash(&seeds, &key) as u32).unwrap();
        }
        assert!(s.index_slots() * 8 > PAGE, "{} slots", s.index_slots());
        let g = crossbeam_epoch::pin();
        // SAFETY: the shard outlives the call.
        let at = unsafe { s.peek().slot(0, &g) } as usize;
        let flags = vm_flags(at);
        assert!(flags.contains(" hg"), "{flags}");
    }

    /// A table built for many flows advises huge pages for its chunks
    /// (`hg` in the mapping's flags, whether or not the kernel has any to
    /// give); a small one does not.
    #[test]
    fn large_tables_ask_for_huge_pages() {
        for (flows, huge) in [(2_000_000, true), (1000, false)] {
            let t = Table::new(flows, 1);
            let base = {
                let g = super::super::track::lock(&t.shards[0]);
                g.arena.base()
            };
            let flags = vm_flags(base);
            assert_eq!(flags.contains(" hg"), huge, "{flows} flows: {flags}");
        }
    }
}
