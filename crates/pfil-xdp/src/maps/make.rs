//! Making a map: checking its definition as the kernel does, sizing its
//! arena and index; or, for one its program does not use and pfil cannot
//! make, an inert map that says why.

use std::cell::UnsafeCell;
use std::sync::atomic::AtomicU64;

use parking_lot::RwLock;

use super::{lru, Index, Map, MapDef, MapError, MapType, Table, BPF_F_NO_COMMON_LRU, MAX_ARENA};

impl Map {
    /// Allocate the map `def` for `workers` workers and fill its initial
    /// value (global data).
    ///
    /// # Errors
    /// Sizes the kernel refuses (a zero key or value, a key that is not 4
    /// bytes for an array, an LPM key without its prefix) or an arena over
    /// [`MAX_ARENA`].
    pub fn new(def: &MapDef, workers: usize) -> Result<Map, MapError> {
        let inv = |m: String| MapError::Invalid(format!("map {:?}: {m}", def.name));
        let (ks, vs, n) = (
            def.key_size as usize,
            def.value_size as usize,
            def.max_entries as usize,
        );
        if !def.kind.runs() {
            return Err(inv(format!(
                "type {} ({}) is not one pfil runs",
                def.kind.raw(),
                def.kind.name()
            )));
        }
        if def.kind.holds_events() {
            return Self::of_events(def, workers);
        }
        if vs == 0 || ks == 0 {
            return Err(inv(format!(
                "key size {ks}, value size {vs}: neither may be 0"
            )));
        }
        if n == 0 {
            return Err(inv(format!(
                "max_entries 0 (a map its loader sizes: give it a size with `map {} \
                 max_entries N` in the hook's config)",
                def.name
            )));
        }
        if def.kind.is_array() && ks != 4 {
            return Err(inv(format!(
                "an {} has 4-byte keys, not {ks}",
                def.kind.name()
            )));
        }
        if def.kind.is_redirect() && vs != 4 && vs != 8 {
            return Err(inv(format!(
                "a {} value is 4 or 8 bytes, not {vs}",
                def.kind.name()
            )));
        }
        if def.kind == MapType::ProgArray && vs != 4 {
            return Err(inv(format!(
                "a prog_array value is 4 bytes (a program), not {vs}"
            )));
        }
        if def.kind == MapType::LpmTrie && (ks <= 4 || ks > 4 + 256) {
            return Err(inv(format!(
                "an lpm_trie key is 4 bytes of prefix length then 1-256 bytes, not {ks}"
            )));
        }
        // An LRU map's lists are per CPU (worker); with one set of lists
        // per CPU each has the same number of entries (the kernel rounds
        // max_entries up to a multiple of the CPUs).
        let lru_cpus = workers.max(1);
        let n = if def.kind.is_lru() && def.flags & BPF_F_NO_COMMON_LRU != 0 {
            n.div_ceil(lru_cpus) * lru_cpus
        } else {
            n
        };
        let workers = if def.kind.per_cpu() {
            workers.max(1)
        } else {
            1
        };
        let stride = vs.div_ceil(8) * 8;
        // HASH: one slot more than entries, the spare an update of a
        // present key writes into (see `Index::spare`); an LRU_HASH takes
        // a node from its lists instead, as the kernel's.
        let replaces = matches!(def.kind, MapType::Hash | MapType::DevmapHash);
        let slots = n + usize::from(replaces);
        // Per-CPU maps: one section per worker (the kernel's per-CPU
        // areas), a whole number of cache lines, so that workers updating
        // their own values do not share lines and a worker's values are
        // dense.
        let section =
            stride
                .checked_mul(slots)
                .map(|b| if workers > 1 { b.div_ceil(64) * 64 } else { b });
        let bytes = section
            .and_then(|b| b.checked_mul(workers))
            .filter(|&b| b <= MAX_ARENA)
            .ok_or_else(|| {
                inv(format!(
                    "{n} entries of {vs} bytes exceed {MAX_ARENA} bytes"
                ))
            })?;
        // Zeroed by the allocator (fresh pages are not touched until used:
        // a large map costs nothing at load).
        let zeroed: Box<[u64]> = vec![0u64; bytes / 8].into_boxed_slice();
        // SAFETY: UnsafeCell<u64> is repr(transparent) over u64, so the
        // slice has the same layout; ownership moves from one Box to the other.
        let arena: Box<[UnsafeCell<u64>]> =
            unsafe { Box::from_raw(Box::into_raw(zeroed) as *mut [UnsafeCell<u64>]) };
        let lru = def.kind.is_lru().then(|| {
            parking_lot::Mutex::new(lru::Lru::new(
                n,
                lru_cpus,
                def.flags & BPF_F_NO_COMMON_LRU != 0,
            ))
        });
        let lru_refs = lru
            .as_ref()
            .map_or_else(|| std::sync::Arc::from(Vec::new()), |l| l.lock().refs());
        let table = match def.kind {
            MapType::Hash
            | MapType::PercpuHash
            | MapType::LruHash
            | MapType::LruPercpuHash
            | MapType::DevmapHash => {
                Some(Table::new(slots, ks, MAX_ARENA).ok_or_else(|| {
                    inv(format!("{n} keys of {ks} bytes exceed {MAX_ARENA} bytes"))
                })?)
            }
            _ => None,
        };
        let index = Index {
            free: (0..n as u32).rev().collect(),
            spare: replaces.then_some(n as u32),
            owners: if def.kind.is_lru() {
                vec![None; n]
            } else {
                Vec::new()
            },
            ..Index::default()
        };
        let m = Map {
            name: def.name.clone(),
            kind: def.kind,
            key_size: ks,
            value_size: vs,
            max_entries: n,
            flags: def.flags,
            readonly: def.readonly,
            workers,
            stride,
            section: section.unwrap_or(0),
            arena,
            index: RwLock::new(index),
            table,
            lru,
            lru_refs,
            evictions: AtomicU64::new(0),
            inert: None,
            events: None,
        };
        if let Some(init) = &def.init {
            m.write_slot(0, 0, init);
        }
        Ok(m)
    }

    /// A map the program does not use and that could not be made
    /// (`why`: a type pfil does not run, a size its loader was to set), as
    /// defined, holding nothing: the control side refuses it, saying why.
    pub(crate) fn inert(def: &MapDef, why: String) -> Map {
        Map {
            inert: Some(why),
            name: def.name.clone(),
            kind: def.kind,
            key_size: def.key_size as usize,
            value_size: def.value_size as usize,
            max_entries: def.max_entries as usize,
            flags: def.flags,
            readonly: def.readonly,
            workers: 1,
            stride: 0,
            section: 0,
            arena: Box::new([]),
            index: RwLock::new(Index::default()),
            table: None,
            lru: None,
            lru_refs: std::sync::Arc::from(Vec::new()),
            evictions: AtomicU64::new(0),
            events: None,
        }
    }

    /// A perf event array (`max_entries` 0: one slot a worker, as libbpf
    /// sizes it to the CPUs) or a ring buffer: rings, no value arena.
    fn of_events(def: &MapDef, workers: usize) -> Result<Map, MapError> {
        let mut def = def.clone();
        if def.kind == MapType::PerfEventArray && def.max_entries == 0 {
            def.max_entries = workers.max(1) as u32;
        }
        let events = super::events::Events::new(&def, workers)?;
        let mut m = Map::inert(&def, String::new());
        m.inert = None;
        m.events = Some(events);
        if def.kind == MapType::Ringbuf {
            // Each worker's reservation area (`bpf_ringbuf_reserve`'s
            // records until they are submitted), zeroed pages untouched
            // until used.
            let area = (def.max_entries as usize).min(super::events::RESERVE_AREA);
            let workers = workers.max(1);
            let zeroed: Box<[u64]> = vec![0u64; area * workers / 8].into_boxed_slice();
            // SAFETY: as in `Map::new`: UnsafeCell<u64> is
            // repr(transparent) over u64.
            m.arena = unsafe { Box::from_raw(Box::into_raw(zeroed) as *mut [UnsafeCell<u64>]) };
            m.section = area;
            m.workers = workers;
        }
        Ok(m)
    }
}
