//! A map's value arena: where each worker's value of each slot lies.

use std::cell::UnsafeCell;

use super::{ArenaRegion, Map, MapType};

impl Map {
    /// The arena as a region for the engine (read-only for `.rodata`).
    pub fn region(&self) -> ArenaRegion {
        ArenaRegion {
            start: self.base() as u64,
            len: (self.arena.len() * 8) as u64,
            writable: !self.readonly,
        }
    }

    /// What worker `worker`'s programs may touch: the arena, or for a
    /// per-CPU map that worker's values only (a program reaches its own
    /// CPU's values, as in the kernel; another worker's are not its).
    pub fn worker_region(&self, worker: usize) -> ArenaRegion {
        let all = self.region();
        // A prog array is the tail call helper's, never a program's
        // memory (the kernel gives programs no access to it either); an
        // xskmap holds nothing.
        if matches!(self.kind, MapType::ProgArray | MapType::Xskmap) {
            return ArenaRegion { len: 0, ..all };
        }
        // A ring buffer's arena is its workers' reservation areas
        // (`bpf_ringbuf_reserve`'s records), one a worker.
        let areas = self.kind == MapType::Ringbuf;
        if !(self.kind.per_cpu() || areas) || self.workers <= 1 || self.section == 0 {
            return all;
        }
        let w = worker % self.workers;
        ArenaRegion {
            start: all.start + (w * self.section) as u64,
            len: self.section as u64,
            ..all
        }
    }

    /// For a writable ARRAY or PERCPU_ARRAY, where worker `worker`'s value
    /// 0 lies and the bytes from one of its values to the next: the
    /// engine compiles lookups in such maps inline (`MapRef::array`).
    pub(crate) fn array_layout(&self, worker: usize) -> Option<(u64, u64)> {
        let array = matches!(self.kind, MapType::Array | MapType::PercpuArray);
        if !array || self.readonly || worker >= self.workers && self.kind.per_cpu() {
            return None;
        }
        let w = if self.kind.per_cpu() { worker } else { 0 };
        Some((self.slot_ptr(0, w) as u64, self.stride as u64))
    }

    pub(super) fn base(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.arena.as_ptr()).cast::<u8>()
    }

    pub(super) fn slot_ptr(&self, slot: u32, worker: usize) -> *mut u8 {
        let off = worker * self.section + slot as usize * self.stride;
        debug_assert!(off + self.value_size <= self.arena.len() * 8);
        // SAFETY: slot < max_entries and worker < workers (callers), so
        // off + stride is within the arena allocation.
        unsafe { self.base().add(off) }
    }

    pub(super) fn write_slot(&self, slot: u32, worker: usize, v: &[u8]) {
        // Up to the padded stride: bpf(2) copies per-CPU values with their
        // padding, and so does the control side here.
        let n = v.len().min(self.stride);
        // SAFETY: slot_ptr is inside the arena with value_size bytes after
        // it; `v` is a separate Rust slice. Concurrent writers race on the
        // bytes as kernel maps do (module docs); plain byte copies.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), self.slot_ptr(slot, worker), n) };
    }

    pub(super) fn read_slot(&self, slot: u32, worker: usize, out: &mut Vec<u8>) {
        let n = if self.kind.per_cpu() {
            self.stride
        } else {
            self.value_size
        };
        let start = out.len();
        out.resize(start + n, 0);
        // SAFETY: as in write_slot; `out` has n bytes from start, n <= stride.
        unsafe {
            std::ptr::copy_nonoverlapping(self.slot_ptr(slot, worker), out[start..].as_mut_ptr(), n)
        };
    }

    /// A redirect map's slot's first word ([`MapType::is_redirect`]): a
    /// devmap's ifindex, a cpumap's queue size (0: empty).
    pub(crate) fn first_word(&self, slot: u32) -> u32 {
        // SAFETY: as in read_slot: a redirect map's or prog array's value is at least 4 bytes
        // (Map::new checks) inside the arena.
        unsafe { std::ptr::read_unaligned(self.slot_ptr(slot, 0).cast::<u32>()) }
    }

    pub(super) fn zero_slot(&self, slot: u32) {
        for w in 0..self.workers {
            // SAFETY: as in write_slot.
            unsafe { std::ptr::write_bytes(self.slot_ptr(slot, w), 0, self.stride) };
        }
    }
}
