//! LRU_HASH and LRU_PERCPU_HASH updates and deletes through the kernel's
//! LRU lists ([`super::lru`]): a node is taken (evicting what the lists
//! give up) before the key is looked at, as `htab_lru_map_update_elem`
//! does, so a failed update may still have evicted an entry, as in the
//! kernel. An LRU_PERCPU_HASH takes none for `BPF_EXIST`, and writes a
//! present key's values in place, giving the node taken back
//! (`__htab_lru_percpu_map_update_elem`).

use std::sync::atomic::Ordering;

use super::{Map, MapError, MapType, BPF_EXIST, BPF_NOEXIST};

impl Map {
    /// The CPU a control-side operation runs on (the kernel's syscall
    /// takes the calling CPU's local lists).
    pub(super) fn this_cpu() -> usize {
        // SAFETY: sched_getcpu takes nothing and returns a number or -1.
        usize::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(0)
    }

    /// Update `key` of an LRU map on `cpu`; `write` fills the new slot
    /// (or, for an LRU_PERCPU_HASH, the present key's in place).
    pub(super) fn lru_update(
        &self,
        key: &[u8],
        flags: u64,
        cpu: usize,
        write: impl FnOnce(u32, bool),
    ) -> Result<(), MapError> {
        let (Some(lists), Some(t)) = (&self.lru, &self.table) else {
            return Err(MapError::Invalid("not an lru map".into()));
        };
        let mut idx = self.index.write();
        let mut lru = lists.lock();
        let idx = &mut *idx;
        let (keys, owners) = (&mut idx.keys, &mut idx.owners);
        // Evict the entry of a node the lists give up.
        let mut evict = |node: u32| -> bool {
            let Some(k) = owners[node as usize].take() else {
                return false;
            };
            keys.remove(&k);
            t.remove(node, &k);
            self.evictions.fetch_add(1, Ordering::Relaxed);
            true
        };
        if self.kind == MapType::LruPercpuHash {
            let taken = if flags == BPF_EXIST {
                None
            } else {
                Some(lru.pop_free(cpu, &mut evict).ok_or(MapError::NoMemory)?)
            };
            let old = idx.keys.get(key).copied();
            match (old, taken) {
                (Some(o), taken) => {
                    if let Some(n) = taken {
                        lru.push_free(n);
                    }
                    if flags == BPF_NOEXIST {
                        return Err(MapError::Exists);
                    }
                    lru.set_ref(o);
                    write(o, false);
                }
                (None, None) => return Err(MapError::NotFound),
                (None, Some(slot)) => {
                    write(slot, true);
                    t.insert(slot, key);
                    let k: Box<[u8]> = key.into();
                    idx.owners[slot as usize] = Some(k.clone());
                    idx.keys.insert(k, slot);
                }
            }
            return Ok(());
        }
        let slot = lru.pop_free(cpu, &mut evict).ok_or(MapError::NoMemory)?;
        write(slot, true);
        let old = idx.keys.get(key).copied();
        match (old, flags) {
            (Some(_), BPF_NOEXIST) => {
                lru.push_free(slot);
                return Err(MapError::Exists);
            }
            (None, BPF_EXIST) => {
                lru.push_free(slot);
                return Err(MapError::NotFound);
            }
            _ => {}
        }
        let k: Box<[u8]> = key.into();
        match old {
            Some(o) => {
                // One link changes: a lock-free reader finds the old
                // entry or the new one.
                t.replace(o, slot, key);
                lru.set_ref(slot);
                idx.owners[o as usize] = None;
                lru.push_free(o);
            }
            None => t.insert(slot, key),
        }
        idx.owners[slot as usize] = Some(k.clone());
        idx.keys.insert(k, slot);
        Ok(())
    }

    /// Delete `key` of an LRU_HASH: its node back to the lists.
    pub(super) fn lru_delete(&self, key: &[u8]) -> Result<(), MapError> {
        let (Some(lists), Some(t)) = (&self.lru, &self.table) else {
            return Err(MapError::Invalid("not an lru map".into()));
        };
        let mut idx = self.index.write();
        let s = idx.keys.remove(key).ok_or(MapError::NotFound)?;
        t.remove(s, key);
        idx.owners[s as usize] = None;
        lists.lock().push_free(s);
        Ok(())
    }
}
