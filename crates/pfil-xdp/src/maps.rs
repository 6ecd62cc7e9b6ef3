//! The maps a program shares with its workers and the control side.
//!
//! # Storage
//! Every value lives in one arena allocated when the map is made, sized
//! for `max_entries` entries (times the worker count for per-CPU maps),
//! each value padded to 8 bytes; a per-CPU map has one section per worker
//! (its values contiguous, as in the kernel's per-CPU areas), padded to
//! whole cache lines. The arena never moves or grows, so a
//! pointer a program got from `bpf_map_lookup_elem` stays inside it for
//! as long as the map lives: the engine is told the whole arena as one
//! region ([`Map::region`]).
//!
//! # Concurrency (the kernel's, in userspace)
//! - Values are read and written in place by programs and by the control
//!   side without locks, as in the kernel: two workers updating one value
//!   race, and a reader may see a torn value. Programs that need atomicity
//!   use per-CPU maps or atomic instructions, as they must in the kernel.
//! - ARRAY, PERCPU_ARRAY and DEVMAP lookups are an index computation: no
//!   lock, no shared write.
//! - HASH, PERCPU_HASH and LRU_HASH lookups take no lock: a chained
//!   index allocated with the map, read under per-slot sequence numbers,
//!   hashed with a keyed multiply-fold (see `maps/table.rs`). Inserts and
//!   deletes are serialised by the map's index lock (the kernel serialises
//!   them per bucket; here per map). LPM_TRIE lookups take that lock
//!   shared. The value slot of a deleted key goes back to a free list and may be reused
//!   by the next insert while a program still holds its pointer, as with
//!   the kernel's preallocated hash maps.
//! - Per-CPU maps have one value per worker; a program sees its worker's
//!   (`bpf_get_smp_processor_id` is the worker index), the control side
//!   reads and writes all of them, concatenated, as bpf(2) does.

use std::cell::UnsafeCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::object::MapDef;

pub(crate) use events::Events;
pub use events::{Drained, Event, PERF_RING_BYTES, RESERVE_AREA};
pub use types::{MapError, MapType, BPF_ANY, BPF_EXIST, BPF_F_NO_COMMON_LRU, BPF_NOEXIST};

mod arena;
mod control;
mod events;
mod lru;
mod lru_map;
mod make;
mod ring;
mod table;
#[cfg(test)]
mod table_tests;
mod types;

use table::Table;

/// The LPM_TRIE entries of one prefix length: masked data → (slot, data
/// as written).
type LpmLevel = HashMap<Box<[u8]>, (u32, Box<[u8]>)>;

/// Index of the hash-like maps: key → value slot.
#[derive(Default)]
struct Index {
    keys: HashMap<Box<[u8]>, u32>,
    free: Vec<u32>,
    /// LPM_TRIE: prefix length → masked data → (slot, the key's data as
    /// last written: the kernel keeps the bits past the prefix too and
    /// gives them back when iterating).
    lpm: BTreeMap<u32, LpmLevel>,
    /// HASH, LRU_HASH: the slot an update of a present key writes the new
    /// value into; the key then names it and the old slot becomes the
    /// spare. As the kernel swaps in a new element (its per-CPU extra
    /// element): a reader sees the old value or the new one, never a mix,
    /// and a pointer a program looked up before the update still reads
    /// the old value until the spare is used again.
    spare: Option<u32>,
    /// LRU_HASH: the key each slot holds (to evict it).
    owners: Vec<Option<Box<[u8]>>>,
}

/// One map: definition, value arena and key index.
pub struct Map {
    name: String,
    kind: MapType,
    key_size: usize,
    value_size: usize,
    max_entries: usize,
    flags: u32,
    readonly: bool,
    workers: usize,
    /// Bytes between two values (value size rounded up to 8).
    stride: usize,
    /// Bytes of one worker's values (per-CPU maps; worker w's value of
    /// slot s is at `w * section + s * stride`).
    section: usize,
    arena: Box<[UnsafeCell<u64>]>,
    index: RwLock<Index>,
    /// HASH, PERCPU_HASH, LRU_HASH: the index as programs read it,
    /// without the lock (the lock serialises its writers).
    table: Option<Table>,
    /// LRU_HASH: the kernel's LRU lists, changed under the index lock
    /// (and their own, uncontended), and their reference bits, which a
    /// program's lookup sets without a lock.
    lru: Option<parking_lot::Mutex<lru::Lru>>,
    lru_refs: std::sync::Arc<[std::sync::atomic::AtomicU8]>,
    /// LRU_HASH: entries evicted to make room.
    evictions: AtomicU64,
    /// Not made, and why (see [`Map::not_made`]).
    inert: Option<String>,
    /// A perf event array's or a ring buffer's rings.
    events: Option<events::Events>,
}

// SAFETY: the arena is shared by design: programs and the control side
// read and write values in place without locks, exactly as the kernel's
// maps are shared between CPUs (see the module docs). Every access goes
// through raw pointers inside the arena's bounds; the key index is behind
// a lock.
unsafe impl Sync for Map {}
// SAFETY: nothing in Map is tied to a thread.
unsafe impl Send for Map {}

/// An arena region as the engine takes it: start address, length, write
/// permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaRegion {
    /// Host address of the first byte.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// Programs may store into it.
    pub writable: bool,
}

/// The most bytes one map's arena may take (a hostile object must not
/// make pfild allocate without bound).
pub const MAX_ARENA: usize = 1 << 30;

impl Map {
    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its type.
    pub fn kind(&self) -> MapType {
        self.kind
    }
    /// Key size in bytes.
    pub fn key_size(&self) -> usize {
        self.key_size
    }
    /// Value size in bytes, for one worker.
    pub fn value_size(&self) -> usize {
        self.value_size
    }
    /// Maximum number of entries.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    /// `map_flags`.
    pub fn flags(&self) -> u32 {
        self.flags
    }
    /// Programs may not write it (`.rodata`).
    pub fn readonly(&self) -> bool {
        self.readonly
    }
    /// Workers with their own value (1 unless per-CPU).
    pub fn workers(&self) -> usize {
        self.workers
    }
    /// Size of a value on the control side: the value, or for per-CPU
    /// maps one 8-byte-padded value per worker, as bpf(2) gives them.
    pub fn user_value_size(&self) -> usize {
        if self.kind.per_cpu() {
            self.stride * self.workers
        } else {
            self.value_size
        }
    }

    /// `key` is `key_size` bytes, or the error naming both.
    fn check_key(&self, key: &[u8]) -> Result<(), MapError> {
        self.check_runs()?;
        self.check_entries()?;
        if key.len() == self.key_size {
            return Ok(());
        }
        Err(MapError::Invalid(format!(
            "key of {} bytes, map {:?} has {}",
            key.len(),
            self.name,
            self.key_size
        )))
    }

    /// Why this map was not made, if it was not: an object's map that
    /// its program does not use and pfil could not make (a type pfil does
    /// not run, as an xskmap; `max_entries` 0, left for a loader to set).
    /// It holds nothing, and the control side refuses it.
    pub fn not_made(&self) -> Option<&str> {
        self.inert.as_deref()
    }

    /// A made map; else the refusal, saying why it was not.
    pub(crate) fn check_runs(&self) -> Result<(), MapError> {
        match &self.inert {
            None => Ok(()),
            Some(why) => Err(MapError::Invalid(format!(
                "{why}; the program does not use it, so it was not made and holds nothing"
            ))),
        }
    }

    fn array_index(&self, key: &[u8]) -> Option<u32> {
        let k = u32::from_le_bytes(key.get(..4)?.try_into().ok()?);
        ((k as usize) < self.max_entries).then_some(k)
    }

    fn lpm_split<'k>(&self, key: &'k [u8]) -> (u32, &'k [u8]) {
        let plen = u32::from_le_bytes([key[0], key[1], key[2], key[3]]);
        (plen, &key[4..])
    }

    fn masked(data: &[u8], plen: u32) -> Box<[u8]> {
        let mut d = data.to_vec();
        for (i, b) in d.iter_mut().enumerate() {
            let bit = (i as u32) * 8;
            if bit >= plen {
                *b = 0;
            } else if plen - bit < 8 {
                *b &= 0xffu8 << (8 - (plen - bit));
            }
        }
        d.into_boxed_slice()
    }

    /// LRU_HASH: how many entries were evicted to make room for others
    /// (0 for other maps).
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// The slot holding `key`, for a program (LRU: marks it used).
    fn find(&self, key: &[u8]) -> Option<u32> {
        if self.kind.is_array() {
            let s = self.array_index(key)?;
            // A devmap slot without a device (ifindex 0) is empty, as the
            // kernel's NULL netdev_map entry; a cpumap's without a queue
            // (qsize 0) too.
            if self.kind.is_redirect() && self.first_word(s) == 0 {
                return None;
            }
            return Some(s);
        }
        let slot = if let Some(t) = &self.table {
            match t.find(key) {
                Some(found) => found,
                None => {
                    let _writers_out = self.index.read();
                    t.find_locked(key)
                }
            }
        } else if self.kind == MapType::LpmTrie {
            let idx = self.index.read();
            let (max, data) = self.lpm_split(key);
            // A prefix longer than the key's data matches nothing (the
            // kernel's trie_lookup_elem returns NULL).
            if max > data.len() as u32 * 8 {
                return None;
            }
            idx.lpm
                .range(..=max)
                .rev()
                .find_map(|(&plen, t)| t.get(&Self::masked(data, plen)).map(|e| e.0))
        } else {
            self.index.read().keys.get(key).copied()
        };
        slot
    }

    /// `bpf_redirect_map`'s look into a redirect map
    /// ([`MapType::is_redirect`]): the entry's first word (an ifindex, a
    /// cpumap's queue size), `None` for an empty or absent one.
    pub(crate) fn redirect_word(&self, key: &[u8]) -> Option<u32> {
        if key.len() != self.key_size || !self.kind.is_redirect() {
            return None;
        }
        self.find(key)
            .map(|s| self.first_word(s))
            .filter(|&w| w != 0)
    }

    /// `bpf_tail_call`'s read of a prog array: the program number at
    /// `index` (0: empty), `None` past `max_entries` (or for another type).
    pub(crate) fn tail_target(&self, index: u32) -> Option<u32> {
        (self.kind == MapType::ProgArray && (index as usize) < self.max_entries)
            .then(|| self.first_word(index))
    }

    /// `bpf_map_lookup_elem` for worker `worker`: the value's address, or
    /// null. `key` must be `key_size` bytes.
    pub fn prog_lookup(&self, key: &[u8], worker: usize) -> *mut u8 {
        // The kernel's verifier lets a program only redirect into a
        // cpumap (a lookup is refused at load): nothing to find here.
        if key.len() != self.key_size
            || worker >= self.workers && self.kind.per_cpu()
            || self.kind == MapType::Cpumap
            || self.kind == MapType::ProgArray
            || self.kind == MapType::Xskmap
            || self.inert.is_some()
        {
            return std::ptr::null_mut();
        }
        match self.find(key) {
            Some(s) => {
                // A program's lookup marks an LRU entry used (a control
                // side's does not, as the kernel's syscall).
                lru::set_ref(&self.lru_refs, s);
                self.slot_ptr(s, if self.kind.per_cpu() { worker } else { 0 })
            }
            None => std::ptr::null_mut(),
        }
    }

    /// `bpf_map_update_elem` from a program of worker `worker`: for
    /// per-CPU maps only that worker's value is written (a new entry's
    /// other values are zeroed), as in the kernel.
    pub fn prog_update(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        worker: usize,
    ) -> Result<(), MapError> {
        self.check_runs()?;
        if self.kind.is_redirect() || self.kind == MapType::ProgArray {
            return Err(MapError::Invalid(format!(
                "a {} is updated from the control side only",
                self.kind.name()
            )));
        }
        self.update_with(key, flags, worker, |slot, fresh| {
            if fresh {
                self.zero_slot(slot);
            }
            self.write_slot(
                slot,
                if self.kind.per_cpu() {
                    worker.min(self.workers - 1)
                } else {
                    0
                },
                value,
            );
        })
    }

    /// Update `key` on `cpu` (the worker, or the control side's CPU: an
    /// LRU_HASH's lists are per CPU); `write` fills the slot (fresh: a
    /// slot that held no value of this key).
    fn update_with(
        &self,
        key: &[u8],
        flags: u64,
        cpu: usize,
        write: impl FnOnce(u32, bool),
    ) -> Result<(), MapError> {
        self.check_key(key)?;
        if flags > BPF_EXIST {
            return Err(MapError::Invalid(format!("update flags {flags:#x}")));
        }
        if self.kind.is_array() {
            let slot = self.array_index(key).ok_or(MapError::Range)?;
            if flags == BPF_NOEXIST {
                return Err(MapError::Exists);
            }
            write(slot, false);
            return Ok(());
        }
        if self.kind.is_lru() {
            return self.lru_update(key, flags, cpu, write);
        }
        let mut idx = self.index.write();
        let (k, lpm_plen): (Box<[u8]>, Option<u32>) = if self.kind == MapType::LpmTrie {
            let (plen, data) = self.lpm_split(key);
            if plen > data.len() as u32 * 8 {
                return Err(MapError::Invalid(format!(
                    "prefix length {plen} > {} bits",
                    data.len() * 8
                )));
            }
            (Self::masked(data, plen), Some(plen))
        } else {
            (key.into(), None)
        };
        let existing = match lpm_plen {
            Some(p) => idx.lpm.get(&p).and_then(|t| t.get(&k)).map(|e| e.0),
            None => idx.keys.get(&k).copied(),
        };
        match (existing, flags) {
            (Some(_), BPF_NOEXIST) => return Err(MapError::Exists),
            (None, BPF_EXIST) => return Err(MapError::NotFound),
            (Some(old), _) if lpm_plen.is_none() && idx.spare.is_some() => {
                let Some(slot) = idx.spare.replace(old) else {
                    unreachable!("tested above");
                };
                write(slot, true);
                if let Some(t) = &self.table {
                    t.replace(old, slot, &k);
                }
                idx.keys.insert(k, slot);
                return Ok(());
            }
            (Some(slot), _) => {
                write(slot, false);
                if let Some(p) = lpm_plen {
                    if let Some(e) = idx.lpm.get_mut(&p).and_then(|t| t.get_mut(&k)) {
                        e.1 = key[4..].into();
                    }
                }
                return Ok(());
            }
            (None, _) => {}
        }
        let slot = match idx.free.pop() {
            Some(s) => s,
            None if self.kind == MapType::LpmTrie => return Err(MapError::NoSpace),
            None => return Err(MapError::Full),
        };
        write(slot, true);
        match lpm_plen {
            Some(p) => {
                idx.lpm
                    .entry(p)
                    .or_default()
                    .insert(k, (slot, key[4..].into()));
            }
            None => {
                if let Some(t) = &self.table {
                    t.insert(slot, &k);
                }
                idx.keys.insert(k, slot);
            }
        }
        Ok(())
    }

    /// Delete `key` (programs and control side).
    pub fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        self.check_key(key)?;
        if self.kind == MapType::ProgArray {
            // The kernel's fd_array_map_delete_elem: the slot emptied,
            // -ENOENT if it was.
            let s = self.array_index(key).ok_or(MapError::Range)?;
            if self.first_word(s) == 0 {
                return Err(MapError::NotFound);
            }
            self.write_slot(s, 0, &[0; 4]);
            return Ok(());
        }
        if self.kind.is_redirect() && self.kind.is_array() {
            // The kernel's dev_map_delete_elem (and cpu_map_delete_elem):
            // the slot's device (queue) removed, whether or not it had one.
            let s = self.array_index(key).ok_or_else(|| {
                MapError::Invalid(format!("index past max_entries {}", self.max_entries))
            })?;
            self.write_slot(s, 0, &vec![0; self.value_size]);
            return Ok(());
        }
        if self.kind.is_array() {
            return Err(MapError::Invalid(format!(
                "a {} cannot delete",
                self.kind.name()
            )));
        }
        if self.kind.is_lru() {
            return self.lru_delete(key);
        }
        let mut idx = self.index.write();
        let slot = if self.kind == MapType::LpmTrie {
            let (plen, data) = self.lpm_split(key);
            if plen > data.len() as u32 * 8 {
                // The kernel's trie_delete_elem: -EINVAL.
                return Err(MapError::Invalid(format!(
                    "prefix length {plen} > {} bits",
                    data.len() * 8
                )));
            }
            let k = Self::masked(data, plen);
            let t = idx.lpm.get_mut(&plen).ok_or(MapError::NotFound)?;
            let (s, _) = t.remove(&k).ok_or(MapError::NotFound)?;
            if t.is_empty() {
                idx.lpm.remove(&plen);
            }
            s
        } else {
            let s = idx.keys.remove(key).ok_or(MapError::NotFound)?;
            if let Some(t) = &self.table {
                t.remove(s, key);
            }
            s
        };
        idx.free.push(slot);
        Ok(())
    }
}

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Map")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("key_size", &self.key_size)
            .field("value_size", &self.value_size)
            .field("max_entries", &self.max_entries)
            .finish_non_exhaustive()
    }
}
