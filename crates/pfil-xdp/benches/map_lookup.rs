//! Map lookups as programs make them (`Map::prog_lookup`), by map type,
//! from 1 and 2 threads at once: what the concurrency design costs (an
//! index computation for arrays; a lock-free chained index for hash
//! maps; a shared read lock for LPM tries).
//!
//! `cargo bench -p pfil-xdp --bench map_lookup` (ns per lookup per
//! thread, median of 5 rounds; the types interleaved in each round).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use pfil_xdp::{Map, MapDef, MapType, Object};

fn def(kind: MapType, key: u32, value: u32, n: u32, flags: u32) -> MapDef {
    // A definition as the loader makes them (through a tiny object would
    // need clang here): take one from xdp-filter and change its fields.
    let bytes =
        std::fs::read("/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_all.o").expect("xdp-tools");
    let mut d = Object::parse(&bytes).unwrap().maps.remove(0);
    d.kind = kind;
    d.key_size = key;
    d.value_size = value;
    d.max_entries = n;
    d.flags = flags;
    d.name = format!("{kind:?}");
    d
}

fn round(m: &Arc<Map>, threads: usize, n: usize, key: impl Fn(u32) -> Vec<u8> + Sync) -> f64 {
    let keys: Vec<Vec<u8>> = (0..1024u32).map(&key).collect();
    let t = Instant::now();
    std::thread::scope(|s| {
        for w in 0..threads {
            let (m, keys) = (m.clone(), &keys);
            s.spawn(move || {
                for i in 0..n {
                    black_box(m.prog_lookup(&keys[i & 1023], w));
                }
            });
        }
    });
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    if !std::path::Path::new("/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_all.o").exists() {
        eprintln!("skipped: install xdp-tools");
        return;
    }
    let array = Arc::new(Map::new(&def(MapType::Array, 4, 8, 1024, 0), 2).unwrap());
    let percpu = Arc::new(Map::new(&def(MapType::PercpuArray, 4, 8, 1024, 0), 2).unwrap());
    let hash = Arc::new(Map::new(&def(MapType::Hash, 4, 8, 1024, 0), 2).unwrap());
    let lpm = Arc::new(Map::new(&def(MapType::LpmTrie, 8, 8, 1024, 1), 2).unwrap());
    for k in 0..1024u32 {
        hash.update(&k.to_le_bytes(), &[0; 8], 0).unwrap();
    }
    for p in [8u32, 16, 24] {
        let mut k = p.to_le_bytes().to_vec();
        k.extend_from_slice(&[198, 18, 0, 0]);
        lpm.update(&k, &[0; 8], 0).unwrap();
    }
    // MAP_LOOKUP_N: fewer lookups a round (for callgrind).
    let n = std::env::var("MAP_LOOKUP_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let lpm_key = |i: u32| {
        let mut k = 32u32.to_le_bytes().to_vec();
        k.extend_from_slice(&[198, 18, (i >> 8) as u8, i as u8]);
        k
    };
    for threads in [1, 2] {
        let mut r: Vec<[f64; 4]> = (0..5)
            .map(|_| {
                [
                    round(&array, threads, n, |i| i.to_le_bytes().to_vec()),
                    round(&percpu, threads, n, |i| i.to_le_bytes().to_vec()),
                    round(&hash, threads, n, |i| i.to_le_bytes().to_vec()),
                    round(&lpm, threads, n, lpm_key),
                ]
            })
            .collect();
        let med = |j: usize, r: &mut Vec<[f64; 4]>| {
            r.sort_by(|a, b| a[j].total_cmp(&b[j]));
            r[r.len() / 2][j]
        };
        let (a, p, h, l) = (
            med(0, &mut r),
            med(1, &mut r),
            med(2, &mut r),
            med(3, &mut r),
        );
        println!("{threads} thread(s): array {a:.1} ns, percpu_array {p:.1} ns, hash {h:.1} ns, lpm_trie (3 prefixes) {l:.1} ns per lookup");
    }
}
