//! The one-pass dataflow of forward code decides what the two passes do.

use std::cell::Cell;

use crate::insn::*;
use crate::{Helpers, Insn, LoadOptions};

thread_local! {
    static TWO: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread's test asked for the two passes.
pub fn two_passes() -> bool {
    TWO.with(Cell::get)
}

/// A program of forward jumps only (packet bounds tests, joins, variable
/// offsets, loads), from `seed`; r2 = data, r3 = data_end.
fn program(seed: u64, len: usize) -> Vec<Insn> {
    let mut x = seed;
    let mut next = |m: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % m
    };
    let mut p = vec![
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0),
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 4, 0),
    ];
    for r in [0, 4, 5, 6, 7] {
        p.push(Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, r, 2, 0, 0));
    }
    let regs = [0u8, 4, 5, 6, 7];
    while p.len() < len {
        let (a, b) = (regs[next(5) as usize], regs[next(5) as usize]);
        let k = next(40) as i32;
        let room = (len - p.len()) as u64;
        let j = next(room.min(12)) as i16;
        let c = next(12);
        if c >= 9 && room > 4 {
            // A bounds test and a load it may prove, or r8 set on this
            // path only (read later: refused where it is not set).
            let group = match c {
                9 | 10 => [
                    Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, a, 2, 0, 0),
                    Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, a, 0, 0, k + 1),
                    Insn::new(BPF_JMP | BPF_JGT | BPF_X, a, 3, j.min(room as i16 - 4), 0),
                    Insn::new(BPF_LDX | BPF_MEM | BPF_B, b, 2, next(45) as i16, 0),
                ],
                _ => [
                    Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, 8, 0, 0, k),
                    Insn::new(BPF_JMP | BPF_JEQ | BPF_K, b, 0, 1, k),
                    Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, 9, 0, 0, k),
                    Insn::new(
                        BPF_ALU64 | BPF_ADD | BPF_X,
                        a,
                        if next(3) == 0 { 9 } else { 8 },
                        0,
                        0,
                    ),
                ],
            };
            p.extend(group);
            continue;
        }
        p.push(match c {
            0 => Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, a, 2, 0, 0),
            1 => Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, a, 0, 0, k),
            2 => Insn::new(BPF_JMP | BPF_JGT | BPF_X, a, 3, j, 0),
            3 => Insn::new(BPF_LDX | BPF_MEM | BPF_B, b, a, k as i16, 0),
            4 => Insn::new(BPF_ALU64 | BPF_AND | BPF_K, b, 0, 0, 60),
            5 => Insn::new(BPF_ALU64 | BPF_ADD | BPF_X, a, b, 0, 0),
            6 => Insn::new(BPF_JMP | BPF_JEQ | BPF_K, b, 0, j, k),
            7 => Insn::new(BPF_LDX | BPF_MEM | BPF_H, b, 2, k as i16, 0),
            _ => Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, a, b, 0, 0),
        });
    }
    p.push(Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 2));
    p.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    p
}

#[test]
fn one_pass_and_two_passes_agree_on_forward_code() {
    // Without the kernel's rules on pointer arithmetic (the programs mask
    // and add packet pointers freely): the dataflow is what is compared.
    let opts = LoadOptions {
        kernel_rules: false,
        ..LoadOptions::default()
    };
    let h = Helpers::new();
    let (mut packet, mut refused) = (0, 0);
    for seed in 0..400 {
        let p = program(seed, 20 + (seed as usize % 60));
        let verify = |two: bool| {
            TWO.with(|t| t.set(two));
            let r = crate::verify::verify(&p, &h, &opts, (&[], &[]), &[]);
            TWO.with(|t| t.set(false));
            r.map(|a| (a.access, a.lookups))
        };
        let (one, two) = (verify(false), verify(true));
        assert_eq!(one, two, "seed {seed}");
        match one {
            Ok((a, _)) => packet += a.iter().filter(|&&a| a == super::Access::Packet).count(),
            Err(_) => refused += 1,
        }
    }
    // The programs exercise both proven accesses and refusals.
    assert!(packet > 100 && refused > 10, "{packet} {refused}");
}
