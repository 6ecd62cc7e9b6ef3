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

/// The chunks of one table.
pub(super) struct Arena {
    /// The reservation: its start and length as mapped (to unmap).
    map: Option<(NonNull<u8>, usize)>,
    /// Its first chunk (at a huge page's start) and chunk count.
    pub(super) base: usize,
    chunks: usize,
    /// Chunks handed out.
    next: AtomicUsize,
    /// Chunks from the heap (no reservation, or it is spent), freed on
    /// drop.
    heap: Mutex<Vec<NonNull<Slot>>>,
}

// SAFETY: the arena owns its mapping and heap chunks; what it hands out
// is memory of atomics (slots), shared by design; its own fields are an
// atomic, a mutex and values fixed at creation.
unsafe impl Send for Arena {}
// SAFETY: as above: `&Arena` allows only `chunk` (an atomic counter, a
// mutex) and reads of fixed fields.
unsafe impl Sync for Arena {}

impl Arena {
    /// The chunks of a table whose shards hold at most `chunks` of them
    /// in all, built for `flows` flows.
    pub(super) fn new(chunks: usize, flows: usize) -> Arena {
        let mut a = Arena {
            map: None,
            base: 0,
            chunks: 0,
            next: AtomicUsize::new(0),
            heap: Mutex::new(Vec::new()),
        };
        let Some(len) = chunks
            .checked_mul(CHUNK_BYTES)
            .and_then(|n| n.checked_add(HUGE))
        else {
            return a;
        };
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
            return a;
        }
        let Some(start) = NonNull::new(p.cast::<u8>()) else {
            return a;
        };
        let base = (p as usize).next_multiple_of(HUGE);
        #[cfg(target_os = "linux")]
        if flows >= HUGE_FROM {
            // SAFETY: advice on pages of our own mapping (`base` and the
            // chunks after it lie inside it); failing (no THP) is harmless.
            unsafe {
                libc::madvise(
                    base as *mut libc::c_void,
                    chunks * CHUNK_BYTES,
                    libc::MADV_HUGEPAGE,
                )
            };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = flows;
        a.map = Some((start, len));
        a.base = base;
        a.chunks = chunks;
        a
    }

    /// A chunk of [`CHUNK`] free slots (zeroed: every field an atomic 0,
    /// `Slot::default()`), the arena's until it drops; `None` if neither
    /// the reservation nor the heap has one.
    pub(super) fn chunk(&self) -> Option<NonNull<Slot>> {
        let i = self.next.fetch_add(1, Relaxed);
        if i < self.chunks {
            // The reservation's zero pages: `Slot::default()` is all
            // zeros (atomics of 0).
            return NonNull::new((self.base + i * CHUNK_BYTES) as *mut Slot);
        }
        let c: Box<[Slot]> = (0..CHUNK).map(|_| Slot::default()).collect();
        let c: Box<[Slot; CHUNK]> = c.try_into().ok()?;
        let p = NonNull::new(Box::into_raw(c).cast::<Slot>())?;
        self.heap.lock().unwrap_or_else(|e| e.into_inner()).push(p);
        Some(p)
    }

    /// Whether the chunks come from a reservation (not the heap).
    #[cfg(test)]
    pub(super) fn reserved(&self) -> bool {
        self.map.is_some()
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
        if let Some((p, len)) = self.map {
            // SAFETY: our own mapping, unmapped once; no slot in it is
            // borrowed any more (as above).
            unsafe { libc::munmap(p.as_ptr().cast(), len) };
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
        let a = Arena::new(3, 10);
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

    /// A table built for many flows advises huge pages for its chunks
    /// (`hg` in the mapping's flags, whether or not the kernel has any to
    /// give); a small one does not.
    #[test]
    fn large_tables_ask_for_huge_pages() {
        for (flows, huge) in [(2_000_000, true), (1000, false)] {
            let t = Table::new(flows, 1);
            let base = {
                let g = super::super::track::lock(&t.shards[0]);
                g.arena.base
            };
            let flags = vm_flags(base);
            assert_eq!(flags.contains(" hg"), huge, "{flows} flows: {flags}");
        }
    }
}
