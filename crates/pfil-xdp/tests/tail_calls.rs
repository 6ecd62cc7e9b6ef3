//! `bpf_tail_call` through a prog array (tests/c/tail_calls.c): the
//! programs a root program jumps to, the packet and metadata they pass
//! on, the kernel's limit of 33 tail calls a run, and what fails (an
//! empty slot, an index past the array) going on after the call. Against
//! the kernel as root; on pfil's two engines everywhere.

mod clang;
mod oracle;

use oracle::frames::{self, MAC_A, MAC_B};
use oracle::Pair;
use pfil_xdp::helpers::{XDP_DROP, XDP_PASS, XDP_TX};
use pfil_xdp::{Engine, Object, XdpFilter, XdpProgram};

/// Slot -> program, as the test fills `jmp` (3 stays empty).
const SLOTS: [(u32, &str); 5] = [
    (0, "tail_drop"),
    (1, "tail_shift"),
    (2, "tail_loop"),
    (4, "tail_mark"),
    (5, "tail_probe"),
];

/// A UDP frame whose first byte (the destination MAC's) is `first`.
fn frame(first: u8) -> Vec<u8> {
    let mut dst = MAC_A;
    dst[0] = first;
    let mut f = frames::eth(dst, MAC_B, 0, 0x0800);
    f.extend(frames::ipv4(
        frames::V4_A,
        frames::V4_B,
        17,
        &frames::l4(17, 1000, 53),
    ));
    f
}

fn object() -> Option<Vec<u8>> {
    clang::compile("tail_calls").map(|p| std::fs::read(p).unwrap())
}

/// Each first byte & 7: the action, and how far the packet's start moved.
fn expected(first: u8) -> (u64, usize) {
    match first & 7 {
        0 | 2 | 5 => (XDP_DROP, 0),
        1 => (XDP_TX, 2),
        _ => (XDP_PASS, 0),
    }
}

#[test]
fn tail_calls_run_the_slots_programs_on_both_engines() {
    let Some(bytes) = object() else { return };
    let obj = Object::parse(&bytes).unwrap();
    for engine in [Engine::Jit, Engine::Interpreter] {
        let p = XdpProgram::load_on(&obj, Some("tail_entry"), 1, &[], engine).unwrap();
        let jmp = p.map("jmp").unwrap();
        for (slot, name) in SLOTS {
            let n = p.tail_number(name).unwrap();
            jmp.update(&slot.to_le_bytes(), &n.to_le_bytes(), 0)
                .unwrap();
        }
        let mut firsts = [0u64; 8];
        for first in 0u8..32 {
            let f = frame(first);
            let mut buf = vec![0u8; 256 + f.len()];
            buf[256..].copy_from_slice(&f);
            let r = p.run(0, &mut buf, 256, f.len(), 1, 0).unwrap();
            let (action, moved) = expected(first);
            assert_eq!(
                (r.action, r.data - 256, r.end - r.data),
                (action, moved, f.len() - moved),
                "{engine:?}: first byte {first}"
            );
            if first & 7 == 1 {
                // The metadata tail_shift left, tail_mark read.
                assert_eq!(r.meta, r.data - 4, "{engine:?}");
                assert_eq!(buf[r.meta..r.data], 0xabcd1234u32.to_ne_bytes());
                assert_eq!(buf[r.data], 0xee);
            }
            firsts[usize::from(first & 7)] += 1;
        }
        let counts = p.map("counts").unwrap();
        let count = |k: u32| {
            let v = counts.lookup(&k.to_le_bytes()).unwrap().unwrap();
            u64::from_le_bytes(v[..8].try_into().unwrap())
        };
        // Every frame, the misses (slot 3 empty, 6-7 past the end), 33
        // runs of tail_loop a frame (the 34th tail call fails), the
        // marked, 33 runs of tail_probe (its empty slot not counted).
        assert_eq!(count(0), 32, "{engine:?}");
        assert_eq!(count(1), firsts[3] + firsts[6] + firsts[7]);
        assert_eq!(count(2), 33 * firsts[2], "{engine:?}: the limit");
        assert_eq!(count(3), firsts[1], "{engine:?}");
        assert_eq!(count(4), 33 * firsts[5], "{engine:?}: empty slots");
    }
}

#[test]
fn tail_calls_agree_with_the_kernel() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(bytes) = object() else { return };
    oracle::pin_cpu();
    let mut p = Pair::new(&bytes, Some("tail_entry"));
    // `tail_shift` moves the metadata: where the kernel refuses that to
    // XDP programs, its slot stays empty on both sides (a call into it
    // fails, and the caller goes on, in both).
    let meta = oracle::kernel_adjusts_meta("tail_calls.c's `tail_shift`");
    for (slot, name) in SLOTS {
        if meta || name != "tail_shift" {
            p.set_program("jmp", &slot.to_le_bytes(), name);
        }
    }
    let mut t: Vec<(String, Vec<u8>)> = (0u8..16)
        .map(|b| (format!("first byte {b}"), frame(b)))
        .collect();
    t.extend(frames::generated());
    let mut actions = [0usize; 5];
    for (what, f) in &t {
        let a = p.run(f, what);
        if let Some(c) = actions.get_mut(a as usize) {
            *c += 1;
        }
    }
    p.same_maps("tail_calls");
    eprintln!(
        "tail_calls: {} frames agree, actions aborted/drop/pass/tx: {:?}",
        p.runs,
        &actions[..4]
    );
    // (`XDP_TX` comes from `tail_shift`.)
    assert!(
        actions[1] > 0 && actions[2] > 0 && (actions[3] > 0 || !meta),
        "{actions:?}"
    );
    // A slot emptied: the entry goes on past its call.
    p.oracle
        .set(&pfil_xdp::config::MapEntry {
            map: "jmp".into(),
            key: 1u32.to_le_bytes().to_vec(),
            value: Vec::new(),
            program: Some("tail_drop".into()),
        })
        .unwrap();
    assert_eq!(p.run(&frame(1), "slot 1 now tail_drop"), XDP_DROP as u32);
    p.same_maps("tail_calls, slot 1 changed");
}

#[test]
fn prog_arrays_are_refused_where_the_kernel_refuses_them() {
    let Some(bytes) = object() else { return };
    let obj = Object::parse(&bytes).unwrap();
    let e = XdpProgram::load(&obj, Some("tail_lookup"), 1, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("prog_array") && e.contains("only bpf_tail_call"),
        "{e}"
    );
    let e = XdpProgram::load(&obj, Some("tail_in_function"), 1, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("bpf_tail_call in a function"), "{e}");
    // The table one of several maps by the path: each is checked.
    let e = XdpProgram::load(&obj, Some("tail_map_per_path"), 1, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bpf_tail_call takes a prog_array") && e.contains("one of several"),
        "{e}"
    );
    if pfil_xdp::kernel::available() {
        let p = obj.program(Some("tail_map_per_path")).unwrap();
        assert!(pfil_xdp::kernel::KernelProgram::load(&obj, p).is_err());
    }
    // Neither can be a target; the others can.
    let p = XdpProgram::load(&obj, Some("tail_entry"), 1, &[]).unwrap();
    let loaded: Vec<(&str, bool)> = p.tail_programs().map(|(n, t)| (n, t.is_ok())).collect();
    assert!(loaded.contains(&("tail_loop", true)), "{loaded:?}");
    assert!(loaded.contains(&("tail_lookup", false)), "{loaded:?}");
    let e = p.tail_number("tail_in_function").unwrap_err();
    assert!(e.contains("cannot be a tail call's target"), "{e}");
    assert!(p
        .tail_number("nope")
        .unwrap_err()
        .contains("its programs: tail_entry"));
    let n = loaded.len() as u32;
    for bad in [0u32, n + 1] {
        let e = p.check_tail_value(&bad.to_le_bytes()).unwrap_err();
        assert!(e.contains("names a program 1-"), "{e}");
    }
    let jmp = p.map("jmp").unwrap();
    assert!(
        jmp.update(&0u32.to_le_bytes(), &[0; 4], 0).is_err(),
        "empty is a delete"
    );
    assert!(jmp.lookup(&0u32.to_le_bytes()).unwrap().is_none());
    assert!(
        jmp.delete(&0u32.to_le_bytes()).is_err(),
        "nothing to delete"
    );
    jmp.update(&0u32.to_le_bytes(), &1u32.to_le_bytes(), 0)
        .unwrap();
    assert_eq!(jmp.keys(), vec![0u32.to_le_bytes().to_vec()]);
    jmp.delete(&0u32.to_le_bytes()).unwrap();
    assert!(jmp.keys().is_empty());
}

#[test]
fn a_hook_config_fills_a_prog_array_by_name() {
    let Some(path) = clang::compile("tail_calls") else {
        return;
    };
    let path = path.display();
    let f = XdpFilter::from_config(
        &format!("@{path} program tail_entry\nmap jmp key 0 0 0 0 value name tail_drop"),
        1,
    )
    .unwrap();
    let jmp = f.program().map("jmp").unwrap();
    let n = f.program().tail_number("tail_drop").unwrap();
    assert_eq!(
        jmp.lookup(&0u32.to_le_bytes()).unwrap(),
        Some(n.to_le_bytes().to_vec())
    );
    let e = XdpFilter::from_config(
        &format!("@{path} program tail_entry\nmap jmp key 0 0 0 0 value name tail_lookup"),
        1,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("map jmp") && e.contains("cannot be a tail call's target"),
        "{e}"
    );
    let e = XdpFilter::from_config(
        &format!("@{path} program tail_entry\nmap jmp key 0 0 0 0 value 10 0 0 0"),
        1,
    )
    .err()
    .unwrap();
    assert!(e.contains("names a program 1-"), "{e}");
}
