//! Maps: the control-side API against the kernel's own maps, operation
//! for operation (as root), and the sizes and errors without it.

use pfil_xdp::maps::{BPF_ANY, BPF_EXIST, BPF_NOEXIST};
use pfil_xdp::{kernel, Map, MapDef, MapError, MapType, Object};

mod clang;

fn defs() -> Option<Vec<MapDef>> {
    let path = clang::compile("features")?;
    Some(Object::parse(&std::fs::read(path).unwrap()).unwrap().maps)
}

fn def(defs: &[MapDef], name: &str) -> MapDef {
    defs.iter().find(|m| m.name == name).unwrap().clone()
}

#[test]
fn array_keys_are_indices_and_cannot_be_deleted() {
    let Some(defs) = defs() else { return };
    let m = Map::new(&def(&defs, "legacy_counts"), 2).unwrap();
    assert_eq!(m.keys().len(), 4);
    m.update(&2u32.to_le_bytes(), &9u64.to_le_bytes(), BPF_ANY)
        .unwrap();
    assert_eq!(
        m.lookup(&2u32.to_le_bytes()).unwrap().unwrap(),
        9u64.to_le_bytes()
    );
    assert_eq!(
        m.update(&2u32.to_le_bytes(), &9u64.to_le_bytes(), BPF_NOEXIST),
        Err(MapError::Exists)
    );
    assert_eq!(
        m.update(&4u32.to_le_bytes(), &[0; 8], BPF_ANY),
        Err(MapError::Range)
    );
    assert!(matches!(
        m.delete(&2u32.to_le_bytes()),
        Err(MapError::Invalid(_))
    ));
}

#[test]
fn per_cpu_values_are_one_padded_value_per_worker() {
    let Some(defs) = defs() else { return };
    let m = Map::new(&def(&defs, "pchash"), 3).unwrap();
    assert_eq!(m.user_value_size(), 24);
    let v: Vec<u8> = [1u64, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect();
    m.update(&5u64.to_le_bytes(), &v, BPF_ANY).unwrap();
    for w in 0..3 {
        let p = m.prog_lookup(&5u64.to_le_bytes(), w);
        assert!(!p.is_null());
        // SAFETY: a non-null lookup result points at value_size (4) bytes
        // inside the map's arena, which lives as long as `m`.
        let got = unsafe { std::ptr::read_unaligned(p.cast::<u32>()) };
        assert_eq!(got as usize, w + 1);
    }
    m.prog_update(&6u64.to_le_bytes(), &7u32.to_le_bytes(), BPF_ANY, 1)
        .unwrap();
    let got = m.lookup(&6u64.to_le_bytes()).unwrap().unwrap();
    assert_eq!(
        got,
        [0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn lru_evicts_as_the_kernel_lists_do() {
    let Some(defs) = defs() else { return };
    // 8 entries, one CPU: nodes are taken 4 at a time (half a CPU's
    // share), new entries wait on the CPU's pending list, and when no
    // node is free the inactive list gives up 4 unreferenced entries,
    // oldest first.
    let m = Map::new(&def(&defs, "lru"), 1).unwrap();
    for k in 0..8u32 {
        m.update(&k.to_le_bytes(), &k.to_le_bytes(), BPF_ANY)
            .unwrap();
    }
    assert_eq!(m.keys().len(), 8);
    // A program's lookup marks 0 used (a control-side lookup does not).
    assert!(!m.prog_lookup(&0u32.to_le_bytes(), 0).is_null());
    assert!(m.lookup(&1u32.to_le_bytes()).unwrap().is_some());
    m.update(&8u32.to_le_bytes(), &8u32.to_le_bytes(), BPF_ANY)
        .unwrap();
    let mut keys: Vec<u32> = m
        .keys()
        .iter()
        .map(|k| u32::from_le_bytes(k[..4].try_into().unwrap()))
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, [0, 5, 6, 7, 8]);
    assert_eq!(m.evictions(), 4);
}

/// A small deterministic generator (no dependency, reproducible).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn errno_of(r: &Result<(), MapError>) -> i64 {
    match r {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

#[test]
fn hash_lpm_and_array_agree_with_the_kernel_op_for_op() {
    let Some(defs) = defs() else { return };
    if !kernel::available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "bpf(2) unavailable under CI"
        );
        eprintln!("skipped: bpf(2) needs root");
        return;
    }
    let cpus = kernel::possible_cpus();
    // The kernel's syscalls run on the calling CPU, whose LRU lists an
    // LRU_HASH update takes from: pfil's control side the same.
    pfil_xdp::oracle::pin_cpu().unwrap();
    for name in ["hash", "lpm", "legacy_counts", "pchash", "ports", "lru"] {
        let d = def(&defs, name);
        let ours = Map::new(&d, cpus).unwrap();
        let theirs = kernel::KernelMap::create(&d).unwrap();
        let mut rng = Lcg(name.len() as u64);
        for step in 0..400 {
            let mut key = vec![0u8; d.key_size as usize];
            for b in key.iter_mut() {
                *b = (rng.next() % 3) as u8 * 0x40;
            }
            if d.kind == MapType::LpmTrie {
                // Prefix lengths past the key's 32 bits too: refused by an
                // update or a delete, matching nothing in a lookup.
                key[..4].copy_from_slice(&((rng.next() % 40) as u32).to_le_bytes());
            }
            if matches!(
                d.kind,
                MapType::Array | MapType::PercpuHash | MapType::Devmap
            ) {
                key[..4].copy_from_slice(&((rng.next() % 6) as u32).to_le_bytes());
            }
            let mut value: Vec<u8> = (0..ours.user_value_size())
                .map(|_| rng.next() as u8)
                .collect();
            if d.kind == MapType::Devmap {
                // An ifindex the kernel has (loopback) or none (0: the
                // slot emptied).
                value = ((rng.next() % 2) as u32).to_le_bytes().to_vec();
            }
            let flags = [BPF_ANY, BPF_NOEXIST, BPF_EXIST][(rng.next() % 3) as usize];
            match rng.next() % 4 {
                0 | 1 => {
                    let a = ours.update(&key, &value, flags);
                    let b = theirs.update_flags(&key, &value, flags);
                    assert_eq!(
                        errno_of(&a),
                        b,
                        "{name} step {step}: update {key:?} flags {flags}"
                    );
                }
                2 => {
                    let a = ours.delete(&key);
                    let b = theirs
                        .delete(&key)
                        .map_or_else(|e| -i64::from(e.raw_os_error().unwrap_or(0)), |_| 0);
                    assert_eq!(errno_of(&a), b, "{name} step {step}: delete {key:?}");
                }
                _ => {
                    let a = ours.lookup(&key).unwrap();
                    let b = theirs.lookup(&key).unwrap();
                    assert_eq!(a, b, "{name} step {step}: lookup {key:?}");
                }
            }
        }
        let mut a = ours.entries();
        let mut b = theirs.entries().unwrap();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{name}: contents after 400 operations");
    }
}

/// A u64 read through a value pointer a lookup returned.
fn read_u64(p: *mut u8) -> u64 {
    assert!(!p.is_null());
    // SAFETY: a non-null lookup result points at the value (8 bytes here)
    // inside the map's arena, which lives as long as the map.
    unsafe { std::ptr::read_unaligned(p.cast::<u64>()) }
}

#[test]
fn an_update_of_a_present_key_swaps_in_a_new_value() {
    let Some(defs) = defs() else { return };
    for name in ["hash", "lru"] {
        let d = def(&defs, name);
        let m = Map::new(&d, 1).unwrap();
        let v = |x: u64| x.to_le_bytes()[..d.value_size as usize].to_vec();
        let k = 1u32.to_le_bytes();
        m.update(&k, &v(5), BPF_ANY).unwrap();
        let before = m.prog_lookup(&k, 0);
        m.prog_update(&k, &v(6), BPF_ANY, 0).unwrap();
        // The kernel's HASH and LRU_HASH update a present key by linking
        // a new element: a pointer taken before still reads the old value.
        let after = m.prog_lookup(&k, 0);
        assert_ne!(before, after, "{name}");
        assert_eq!(read_u64(before) & 0xffff_ffff, 5, "{name}");
        assert_eq!(read_u64(after) & 0xffff_ffff, 6, "{name}");
        assert_eq!(m.lookup(&k).unwrap().unwrap(), v(6), "{name}");
        if name == "lru" {
            // Full, an LRU evicts (lru_evicts_as_the_kernel_lists_do).
            continue;
        }
        // Full: a present key is still updated (the spare is not an
        // entry), a new one refused.
        for i in 0..d.max_entries - 1 {
            m.update(&(100 + i).to_le_bytes(), &v(u64::from(i)), BPF_ANY)
                .unwrap();
        }
        assert_eq!(m.keys().len(), d.max_entries as usize, "{name}");
        let more = m.update(&99u32.to_le_bytes(), &v(1), BPF_ANY);
        assert_eq!(more, Err(MapError::Full), "{name}");
        let last = (100 + d.max_entries - 2).to_le_bytes();
        for round in 0..3 {
            m.update(&last, &v(round), BPF_ANY).unwrap();
            assert_eq!(m.lookup(&last).unwrap().unwrap(), v(round), "{name}");
        }
        assert_eq!(m.keys().len(), d.max_entries as usize, "{name}");
    }
}

#[test]
fn a_key_updated_throughout_is_always_found() {
    let Some(defs) = defs() else { return };
    let d = def(&defs, "hash");
    let m = std::sync::Arc::new(Map::new(&d, 1).unwrap());
    let k = 7u32.to_le_bytes();
    m.update(&k, &0u64.to_le_bytes(), BPF_ANY).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (m, stop) = (m.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 1000 {
                assert!(
                    !m.prog_lookup(&k, 0).is_null(),
                    "key 7 missed after {n} lookups"
                );
                n += 1;
            }
            n
        })
    };
    for i in 0..100_000u64 {
        m.prog_update(&k, &i.to_le_bytes(), BPF_ANY, 0).unwrap();
        // Other keys come and go in the same chains.
        let o = ((i % 13) as u32 + 20).to_le_bytes();
        if i % 2 == 0 {
            let _ = m.update(&o, &i.to_le_bytes(), BPF_ANY);
        } else {
            let _ = m.delete(&o);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let n = reader.join().unwrap();
    assert!(n >= 1000);
    assert_eq!(m.lookup(&k).unwrap().unwrap(), 99_999u64.to_le_bytes());
}
