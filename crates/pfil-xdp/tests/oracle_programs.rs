//! Programs written for the oracle (tests/c/oracle.c), run by the kernel
//! and by pfil on the same frames: rewrite with an incremental checksum
//! and XDP_TX, adjust head/tail/meta (shrinking and growing), LPM routes,
//! an LRU of sources, per-CPU counters. Needs root; under CI it must run.

mod clang;
mod oracle;

use oracle::frames::{self, V4_A, V4_B, V4_C};
use oracle::Pair;

fn traffic() -> Vec<(String, Vec<u8>)> {
    let mut t = frames::generated();
    // Sources from many addresses, so the LRU sees inserts and hits.
    for i in 0..200u8 {
        let mut f = frames::eth(frames::MAC_B, frames::MAC_A, 0, 0x0800);
        f.extend(frames::ipv4(
            [198, 18, 1, i % 50],
            [198, 18, (i % 3) * 64, i],
            17,
            &frames::l4(17, 1, 2),
        ));
        t.push((format!("source {i}"), f));
    }
    t
}

fn check(program: &str, setup: impl Fn(&Pair)) {
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("oracle") else {
        return;
    };
    oracle::pin_cpu();
    let bytes = std::fs::read(path).unwrap();
    let mut p = Pair::new(&bytes, Some(program));
    setup(&p);
    let mut actions = [0usize; 5];
    for (what, f) in traffic() {
        let a = p.run(&f, &format!("{program}: {what}"));
        if let Some(c) = actions.get_mut(a as usize) {
            *c += 1;
        }
    }
    p.same_maps(program);
    eprintln!(
        "{program}: {} frames agree, actions aborted/drop/pass/tx: {:?}",
        p.runs,
        &actions[..4]
    );
}

#[test]
fn reflect_rewrites_and_transmits_like_the_kernel() {
    check("reflect", |_| {});
}

#[test]
fn adjust_head_tail_and_meta_like_the_kernel() {
    if oracle::kernel_here() && !oracle::kernel_adjusts_meta("oracle.c's `adjust`") {
        return;
    }
    check("adjust", |_| {});
}

#[test]
fn grow_head_and_tail_like_the_kernel() {
    check("grow", |_| {});
}

#[test]
fn push_a_tag_into_the_headroom_like_the_kernel() {
    check("push_tx", |_| {});
    check("push_pass", |_| {});
    check("tagged_tx", |_| {});
}

#[test]
fn lpm_routes_lru_sources_and_per_cpu_counters_like_the_kernel() {
    check("route", |p| {
        let key = |plen: u32, a: [u8; 4]| {
            let mut k = plen.to_le_bytes().to_vec();
            k.extend_from_slice(&a);
            k
        };
        p.set("routes", &key(15, [198, 18, 0, 0]), &2u32.to_le_bytes());
        p.set("routes", &key(24, [198, 18, 0, 0]), &1u32.to_le_bytes());
        p.set("routes", &key(32, V4_A), &0u32.to_le_bytes());
        p.set("routes", &key(26, [198, 18, 128, 0]), &1u32.to_le_bytes());
        let _ = (V4_B, V4_C);
    });
}

/// Frames of random bytes (a fixed seed) for `csum_diff`: byte 14 picks
/// the sizes in turn; some frames' seeds are 0 or ~0, some `from`/`to`
/// are all zero, all ones, or equal.
fn random_frames() -> Vec<(String, Vec<u8>)> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..4000)
        .map(|i| {
            let n = 128 + (next() % 64) as usize;
            let mut f: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            f[14] = (i % 16) as u8;
            match next() % 6 {
                0 => f[16..20].fill(0),
                1 => f[16..20].fill(0xff),
                2 => f[24..104].fill(0),
                3 => f.copy_within(24..64, 64),
                4 => f[24..104].fill(0xff),
                _ => {}
            }
            (format!("random {i}"), f)
        })
        .collect()
}

#[test]
fn csum_diff_like_the_kernel() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("csum_diff") else {
        return;
    };
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), None);
    for (what, f) in random_frames() {
        assert_eq!(p.run(&f, &what), 2, "{what}");
    }
    assert_eq!(p.runs, 4000);
}

#[test]
fn packet_bytes_helpers_like_the_kernel() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("xdp_bytes") else {
        return;
    };
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), None);
    let mut frames = frames::generated();
    frames.extend(random_frames());
    for (what, f) in frames {
        p.run(&f, &what);
        p.same_maps(&what);
    }
    assert!(p.runs > 7000);
}

#[test]
fn lru_maps_evict_as_the_kernel_does() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("lru_kernel") else {
        return;
    };
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), None);
    // Every frame, then the maps: an eviction the kernel would not make
    // shows at the frame that made it.
    for (what, f) in random_frames() {
        p.run(&f, &what);
        p.same_maps(&what);
    }
    assert_eq!(p.runs, 4000);
}

#[test]
fn co_re_context_fields_like_the_kernel() {
    // tests/c/co_re.c: its own order of struct xdp_md's fields, relocated
    // by pfil; the kernel runs the object as pfil linked it.
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("co_re") else {
        return;
    };
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), None);
    for (what, f) in frames::generated() {
        assert_eq!(p.run(&f, &what), 2, "{what}");
    }
    assert!(p.runs > 100);
}

#[test]
fn a_program_beside_refused_neighbours_like_the_kernel() {
    // tests/c/neighbours.c: `plain` beside a jump table initialised the
    // libbpf way (made in the kernel, not in pfil) and a kfunc caller.
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("neighbours") else {
        return;
    };
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), Some("plain"));
    let mut actions = [0; 4];
    for (what, f) in frames::generated() {
        let a = p.run(&f, &what);
        if let Some(n) = actions.get_mut(a as usize) {
            *n += 1;
        }
    }
    assert!(
        p.runs > 100 && actions[2] > 0 && actions[3] > 0,
        "{actions:?}"
    );
    p.same_maps("neighbours");
}

#[test]
fn redirect_into_a_cpumap_and_a_devmap_hash_like_the_kernel() {
    // tests/c/redirect_maps.c: the first byte picks the map, byte 5 the
    // entry; hits, empty entries, misses and keys past a cpumap's end.
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("redirect_maps") else {
        return;
    };
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), None);
    // A queue on CPU 0 (the kernel starts its kthread), none on CPU 1.
    let cpu_val = |qsize: u32| [qsize.to_le_bytes(), [0; 4]].concat();
    p.set("cpus", &0u32.to_le_bytes(), &cpu_val(192));
    // Devices by ifindex: the loopback (1) under two keys.
    let dev = [1u32.to_le_bytes(), [0; 4]].concat();
    p.set("ports", &7u32.to_le_bytes(), &dev);
    p.set("ports", &0x56u32.to_le_bytes(), &dev);
    let mut actions = [0usize; 5];
    let mut frames = frames::generated();
    for first in [0x01u8, 0x02] {
        for b5 in [0u8, 1, 2, 3, 7, 0x56, 0x57] {
            let mut f = vec![0u8; 60];
            f[0] = first;
            f[5] = b5;
            frames.push((format!("first {first:#x}, byte 5 {b5:#x}"), f));
        }
    }
    for (what, f) in frames {
        let a = p.run(&f, &what);
        if let Some(c) = actions.get_mut(a as usize) {
            *c += 1;
        }
    }
    p.same_maps("redirect_maps");
    let [_, drop, pass, _, redirect] = actions;
    assert!(drop > 0 && pass > 0 && redirect > 0, "{actions:?}");
}

#[test]
fn redirect_into_an_xskmap_misses_as_the_kernels_empty_one() {
    // tests/c/xsk.c: libxdp's default program, and redirects with every
    // flag byte (action bits, broadcast bits, others) and slot.
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("xsk") else {
        return;
    };
    oracle::pin_cpu();
    for program in ["xsk_default", "xsk_flags"] {
        let mut p = Pair::new(&std::fs::read(&path).unwrap(), Some(program));
        let mut actions = [0usize; 5];
        let mut frames = frames::generated();
        for flags in 0u8..=32 {
            for slot in [0u8, 3, 4, 7] {
                let mut f = vec![0u8; 60];
                f[0] = flags;
                f[1] = slot;
                frames.push((format!("flags {flags:#x}, slot {slot}"), f));
            }
        }
        for (what, f) in frames {
            let a = p.run(&f, &format!("{program}: {what}"));
            if let Some(c) = actions.get_mut(a as usize) {
                *c += 1;
            }
        }
        p.same_maps(program);
        eprintln!("{program}: {} frames agree, {actions:?}", p.runs);
        if program == "xsk_flags" {
            let [aborted, drop, pass, tx, _] = actions;
            assert!(aborted > 0 && drop > 0 && pass > 0 && tx > 0, "{actions:?}");
        }
    }
}

#[test]
fn jiffies_tai_and_the_numa_node_like_the_kernel() {
    // tests/c/clocks.c: times, so compared within a tolerance (the
    // engines run a few microseconds after the kernel), and the node.
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("clocks") else {
        return;
    };
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), None);
    let frame = frames::generated().remove(0).1;
    // The kernel's tick: the coarse clock's resolution.
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_getres writes the timespec we own.
    let got = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) };
    assert_eq!(got, 0);
    let tick = res.tv_nsec;
    for round in 0..20 {
        p.run(&frame, "clocks");
        let value = |bytes: Option<Vec<u8>>| -> i64 {
            i64::from_le_bytes(bytes.unwrap()[..8].try_into().unwrap())
        };
        let kernel: Vec<i64> = (0..4u32)
            .map(|k| value(p.oracle.kernel.maps[0].lookup(&k.to_le_bytes()).unwrap()))
            .collect();
        for (engine, x) in &p.oracle.ours {
            let ours: Vec<i64> = (0..4u32)
                .map(|k| value(x.maps()[0].lookup(&k.to_le_bytes()).unwrap()))
                .collect();
            let what = format!("round {round}, {engine:?}: kernel {kernel:?}, pfil {ours:?}");
            // Ran after the kernel, within a second.
            let later = ours[3] - kernel[3];
            assert!((0..1_000_000_000).contains(&later), "{what}");
            // The jiffies: the kernel's, moved on by the ticks between the
            // runs, give or take two (pfil's come from the coarse clock).
            let ticks = ours[0] - kernel[0];
            assert!(
                (ticks - later / tick).abs() <= 2,
                "{what}: {ticks} ticks apart"
            );
            // TAI is the monotonic clock plus a constant: the same one.
            assert!(
                (ours[1] - kernel[1]).abs() < 1_000_000,
                "{what}: TAI offsets"
            );
            assert_eq!(ours[2], kernel[2], "{what}: NUMA node");
        }
        std::thread::sleep(std::time::Duration::from_millis(7));
    }
}

#[test]
fn map_values_over_512_bytes_like_the_kernel() {
    // tests/c/big_values.c: 1 KiB values copied by bpf_map_update_elem
    // (a helper's argument was copied into 512 bytes and faulted past).
    if !oracle::kernel_here() {
        return;
    }
    let Some(path) = clang::compile("big_values") else {
        return;
    };
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), None);
    // (u32::MAX: a frame too short for the kernel's test run.)
    for (what, f) in frames::generated().into_iter().take(200) {
        let a = p.run(&f, &what);
        assert!(a == 2 || a == u32::MAX, "{what}: action {a}");
    }
    p.same_maps("big_values");
}
