//! The control side of a map (pfilctl, the TOML config, the oracle):
//! lookups that do not mark LRU entries used, updates of whole values
//! (every worker's for per-CPU maps), keys and entries in the kernel's
//! dump order, and whether a definition matches a map kept across a
//! program's swap.

use super::{Map, MapDef, MapError, MapType};

impl Map {
    /// Control side: the value of `key` (all workers' for per-CPU maps,
    /// each padded to 8 bytes), `None` if absent. An LPM_TRIE lookup is a
    /// longest-prefix match, as bpf(2)'s.
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>, MapError> {
        self.check_key(key)?;
        let Some(slot) = self.find(key) else {
            return Ok(None);
        };
        // A prog array's empty slot holds no entry (the kernel's dump
        // shows the programs set).
        if self.kind == MapType::ProgArray && self.first_word(slot) == 0 {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(self.user_value_size());
        for w in 0..self.workers {
            self.read_slot(slot, w, &mut out);
            if self.kind.per_cpu() {
                out.resize(out.len().div_ceil(8) * 8, 0);
            }
        }
        Ok(Some(out))
    }

    /// Control side: set `key` to `value` ([`Map::user_value_size`] bytes)
    /// with `flags` ([`BPF_ANY`](super::BPF_ANY),
    /// [`BPF_NOEXIST`](super::BPF_NOEXIST), [`BPF_EXIST`](super::BPF_EXIST)).
    /// A read-only map (`.rodata`) refuses: it is frozen at load, as the
    /// kernel freezes it (the program's verifier read its values); its
    /// initial value is the object's, or the hook config's
    /// ([`XdpConfig::preset`](crate::XdpConfig::preset)).
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        self.check_runs()?;
        self.check_entries()?;
        if self.readonly {
            // Frozen, as the kernel freezes it: the program's verifier
            // read its bytes as constants.
            return Err(MapError::Invalid(format!(
                "map {:?} is read-only global data, frozen at load (its values are constants \
                 to the program): set it in the hook's config",
                self.name
            )));
        }
        if value.len() != self.user_value_size() {
            return Err(MapError::Invalid(format!(
                "value of {} bytes, map {:?} takes {}",
                value.len(),
                self.name,
                self.user_value_size()
            )));
        }
        if self.kind == MapType::Xskmap {
            return Err(MapError::Invalid(format!(
                "map {:?}: an xskmap holds AF_XDP sockets, and a hook runs in userspace \
                 past them: there is none to set (redirects into it miss, as into an \
                 empty slot)",
                self.name
            )));
        }
        if self.kind == MapType::ProgArray && value == [0; 4] {
            return Err(MapError::Invalid(format!(
                "map {:?}: a prog_array entry names a program (1 or more; delete the key to \
                 empty it)",
                self.name
            )));
        }
        // The kernel's dev_map_hash_update_elem finds no device 0.
        if self.kind == MapType::DevmapHash && value.get(..4) == Some(&[0; 4][..]) {
            return Err(MapError::Invalid(format!(
                "map {:?}: a devmap_hash entry names a device (ifindex 0)",
                self.name
            )));
        }
        self.update_with(key, flags, Self::this_cpu(), |slot, _| {
            if self.kind.per_cpu() {
                for (w, chunk) in value.chunks(self.stride).enumerate() {
                    self.write_slot(slot, w, chunk);
                }
            } else {
                self.write_slot(slot, 0, value);
            }
        })
    }

    /// Control side: every key, in an unspecified order (for arrays every
    /// index).
    pub fn keys(&self) -> Vec<Vec<u8>> {
        if self.inert.is_some() || self.events.is_some() {
            return Vec::new();
        }
        if self.kind == MapType::ProgArray {
            return (0..self.max_entries as u32)
                .filter(|&i| self.first_word(i) != 0)
                .map(|i| i.to_le_bytes().to_vec())
                .collect();
        }
        if self.kind.is_array() {
            return (0..self.max_entries as u32)
                .map(|i| i.to_le_bytes().to_vec())
                .collect();
        }
        let idx = self.index.read();
        if self.kind == MapType::LpmTrie {
            let mut out = Vec::new();
            for (plen, t) in &idx.lpm {
                for (_, data) in t.values() {
                    let mut v = plen.to_le_bytes().to_vec();
                    v.extend_from_slice(data);
                    out.push(v);
                }
            }
            return out;
        }
        idx.keys.keys().map(|k| k.to_vec()).collect()
    }

    /// Control side: every (key, value) pair.
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.keys()
            .into_iter()
            .filter_map(|k| {
                let v = self.lookup(&k).ok().flatten()?;
                Some((k, v))
            })
            .collect()
    }

    /// Whether `def` describes this map (same type and sizes): a program
    /// swapped in by `pfilctl set` keeps such a map and its contents
    /// (not a prog array: the config sets it again).
    pub fn same_definition(&self, def: &MapDef) -> bool {
        // A prog array's entries are numbers of its object's programs,
        // which a new object may order otherwise: never kept.
        self.kind != MapType::ProgArray
            && self.name == def.name
            && self.kind == def.kind
            && self.key_size == def.key_size as usize
            && self.value_size == def.value_size as usize
            && self.max_entries == def.max_entries as usize
            && self.flags == def.flags
            && self.readonly == def.readonly
            && def.init.is_none()
    }
}
