//! The lock-free hash index (`table.rs`) under concurrent inserts,
//! deletes and lookups, and against a model.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Map, MapError, MapType, BPF_ANY};
use crate::object::{MapDef, MapOrigin};

fn def(kind: MapType, key: u32, n: u32) -> MapDef {
    MapDef {
        name: "t".into(),
        kind,
        key_size: key,
        value_size: 8,
        max_entries: n,
        flags: 0,
        origin: MapOrigin::Btf,
        init: None,
        readonly: false,
        tails: Vec::new(),
        sym_off: 0,
        section: 0,
    }
}

fn key(i: u64, size: usize) -> Vec<u8> {
    let mut k = vec![0u8; size];
    for (j, b) in k.iter_mut().enumerate() {
        *b = (i >> (8 * (j % 8))) as u8 ^ (j as u8);
    }
    k
}

fn value_at(m: &Map, k: &[u8]) -> Option<u64> {
    let p = m.prog_lookup(k, 0);
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null pointer from prog_lookup is a value of 8 bytes
    // inside the map's arena, which lives as long as `m`.
    Some(unsafe { std::ptr::read_volatile(p.cast::<u64>()) })
}

#[test]
fn lookups_during_inserts_and_deletes_find_every_stable_key_and_no_other() {
    // 13-byte keys (two words, the second partial); 64 slots: deleted
    // slots are reused at once, chains are long and change under the
    // readers.
    let (n, ks) = (64u32, 13usize);
    let m = Map::new(&def(MapType::Hash, ks as u32, n), 1).unwrap();
    // Stable keys 0..32 (value = key number + 1000), never deleted.
    for i in 0..32u64 {
        m.update(&key(i, ks), &(i + 1000).to_le_bytes(), BPF_ANY)
            .unwrap();
    }
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(3);
    let (found, churn_seen) = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (m, stop) = (&m, &stop);
                s.spawn(move || {
                    let (mut found, mut churn_seen) = (0u64, 0u64);
                    let mut i = r;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let stable = i % 32;
                        assert_eq!(
                            value_at(m, &key(stable, ks)),
                            Some(stable + 1000),
                            "stable key {stable} lost"
                        );
                        found += 1;
                        // Churned keys come and go; keys never inserted
                        // are never found.
                        if value_at(m, &key(100 + i % 64, ks)).is_some() {
                            churn_seen += 1;
                        }
                        assert_eq!(value_at(m, &key(10_000 + i % 997, ks)), None);
                    }
                    (found, churn_seen)
                })
            })
            .collect();
        // The writer: churn keys 100..164 in the 32 free slots, for at most
        // 200 000 operations or 3 seconds.
        let mut live: Vec<u64> = Vec::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200_000 {
            if Instant::now() > deadline {
                break;
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = 100 + x % 64;
            if live.contains(&k) {
                m.delete(&key(k, ks)).unwrap();
                live.retain(|&l| l != k);
            } else if live.len() < 32 {
                m.update(&key(k, ks), &k.to_le_bytes(), BPF_ANY).unwrap();
                live.push(k);
            }
        }
        stop.store(true, Ordering::Relaxed);
        readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    assert!(found > 1000, "readers ran {found} lookups");
    let _ = churn_seen;
    for i in 0..32u64 {
        assert_eq!(value_at(&m, &key(i, ks)), Some(i + 1000));
    }
}

#[test]
fn hash_maps_agree_with_a_model_op_for_op() {
    for kind in [
        MapType::Hash,
        MapType::PercpuHash,
        MapType::LruHash,
        MapType::LruPercpuHash,
    ] {
        for ks in [1usize, 4, 8, 16, 21] {
            let m = Map::new(&def(kind, ks as u32, 16), 1).unwrap();
            let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ ks as u64;
            for op in 0..5000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = key(x % 24, ks);
                match x >> 60 {
                    0..=7 => {
                        let r = m.update(&k, &op.to_le_bytes(), BPF_ANY);
                        if kind.is_lru() {
                            // Always taken; the kernel's lists may have
                            // evicted entries (a batch at a time): find
                            // which (none may come back).
                            r.unwrap();
                            model.retain(|mk, _| value_at(&m, mk).is_some());
                            model.insert(k.clone(), op);
                            assert!(m.keys().len() <= 16);
                        } else if model.contains_key(&k) || model.len() < 16 {
                            r.unwrap();
                            model.insert(k.clone(), op);
                        } else {
                            assert_eq!(r, Err(MapError::Full));
                        }
                    }
                    8..=11 => {
                        let r = m.delete(&k);
                        if model.remove(&k).is_some() {
                            r.unwrap();
                        } else {
                            assert_eq!(r, Err(MapError::NotFound));
                        }
                    }
                    _ => assert_eq!(value_at(&m, &k), model.get(&k).copied(), "{kind:?} {ks}"),
                }
            }
            let mut keys = m.keys();
            keys.sort();
            let mut want: Vec<Vec<u8>> = model.keys().cloned().collect();
            want.sort();
            assert_eq!(keys, want);
        }
    }
}

#[test]
fn the_hash_is_keyed_per_map() {
    let a = Map::new(&def(MapType::Hash, 4, 1024), 1).unwrap();
    let b = Map::new(&def(MapType::Hash, 4, 1024), 1).unwrap();
    let (ta, tb) = (a.table.as_ref().unwrap(), b.table.as_ref().unwrap());
    let differ = (0..64u32)
        .filter(|i| ta.bucket(&i.to_le_bytes()) != tb.bucket(&i.to_le_bytes()))
        .count();
    assert!(differ > 32, "only {differ} of 64 keys hash differently");
}
