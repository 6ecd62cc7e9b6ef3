//! Differential testing: random valid programs give identical results
//! (r0 or the fault, and the memory) on the interpreter and the JIT.
#![cfg(target_arch = "x86_64")]

use pfil_ebpf::insn::*;
use pfil_ebpf::{Env, Helpers, Insn, LoadOptions, Program, Signature};
use proptest::prelude::*;

fn env() -> Env {
    // SAFETY: no extra regions.
    unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
}

unsafe extern "C" fn mix(r1: u64, r2: u64, r3: u64, r4: u64, r5: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes the live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    if r2 > 64 {
        env.fault(pfil_ebpf::Fault::Helper {
            pc: 0,
            reason: "too long",
        });
        return 0;
    }
    match env.check_mut(r1, r2) {
        Ok(b) => {
            b.iter_mut().for_each(|x| *x ^= r3 as u8);
            r3.wrapping_mul(31) ^ r4.rotate_left(7) ^ r5
        }
        Err(f) => {
            env.fault(f);
            0
        }
    }
}

const ALU_OPS: &[u8] = &[
    BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV, BPF_OR, BPF_AND, BPF_LSH, BPF_RSH, BPF_NEG, BPF_MOD,
    BPF_XOR, BPF_MOV, BPF_ARSH, BPF_END,
];
const JMP_OPS: &[u8] = &[
    BPF_JEQ, BPF_JGT, BPF_JGE, BPF_JSET, BPF_JNE, BPF_JSGT, BPF_JSGE, BPF_JLT, BPF_JLE, BPF_JSLT,
    BPF_JSLE,
];
const SIZES: &[u8] = &[BPF_B, BPF_H, BPF_W, BPF_DW];

/// One generated instruction (or two for LDDW), from random numbers.
fn gen(k: u8, a: u32, b: u32, c: i32, left: usize) -> Vec<Insn> {
    let dst = (a % 10) as u8;
    let src = (b % 10) as u8;
    let x = a & 0x100 != 0;
    let w = a & 0x200 != 0;
    let class = if w { BPF_ALU64 } else { BPF_ALU };
    match k % 8 {
        0..=2 => {
            let op = ALU_OPS[(b as usize >> 8) % ALU_OPS.len()];
            // Biased towards the corner cases: 0, -1, small shifts.
            let imm = match c.rem_euclid(4) {
                0 => 0,
                1 => -1,
                2 => c % 70,
                _ => c,
            };
            match op {
                BPF_NEG => vec![Insn::new(class | op, dst, 0, 0, 0)],
                BPF_END => vec![Insn::new(
                    class | op | if w { 0 } else { (x as u8) * BPF_X },
                    dst,
                    0,
                    0,
                    [16, 32, 64][(c as u32 % 3) as usize],
                )],
                BPF_DIV | BPF_MOD => {
                    let off = (a >> 12 & 1) as i16;
                    if x {
                        vec![Insn::new(class | op | BPF_X, dst, src, off, 0)]
                    } else {
                        vec![Insn::new(class | op, dst, 0, off, imm)]
                    }
                }
                BPF_MOV if x && a & 0x400 != 0 => {
                    let offs: &[i16] = if w { &[8, 16, 32] } else { &[8, 16] };
                    vec![Insn::new(
                        class | op | BPF_X,
                        dst,
                        src,
                        offs[(c as u32 as usize) % offs.len()],
                        0,
                    )]
                }
                _ if x => vec![Insn::new(class | op | BPF_X, dst, src, 0, 0)],
                _ => vec![Insn::new(class | op, dst, 0, 0, imm)],
            }
        }
        3 => {
            let v = ((a as u64) << 32) | b as u64;
            vec![
                Insn::new(LDDW, dst, 0, 0, v as u32 as i32),
                Insn::new(0, 0, 0, 0, (v >> 32) as i32),
            ]
        }
        4 => {
            // A load or store through r1 (the 32-byte memory, sometimes
            // missing it) or r10 (the frame).
            let size = SIZES[(b as usize >> 4) % 4];
            let bytes = [1, 2, 4, 8][(b as usize >> 4) % 4] as i16;
            let (base, off) = if a & 0x800 != 0 {
                (10u8, -(((c.unsigned_abs() % 64) as i16 + 1) * bytes))
            } else {
                (1u8, (c % 40) as i16 - 4)
            };
            match b % 4 {
                0 => vec![Insn::new(BPF_LDX | BPF_MEM | size, dst, base, off, 0)],
                1 if size != BPF_DW => {
                    vec![Insn::new(BPF_LDX | BPF_MEMSX | size, dst, base, off, 0)]
                }
                2 => vec![Insn::new(BPF_ST | BPF_MEM | size, base, 0, off, c)],
                _ => vec![Insn::new(BPF_STX | BPF_MEM | size, base, src, off, 0)],
            }
        }
        5 => {
            // An atomic on the stack (always initialised first).
            let ops = [
                0x00,
                0x01,
                0x40,
                0x41,
                0x50,
                0x51,
                0xa0,
                0xa1,
                BPF_XCHG,
                BPF_CMPXCHG,
            ];
            let size = if w { BPF_DW } else { BPF_W };
            vec![
                Insn::new(BPF_ST | BPF_MEM | BPF_DW, 10, 0, -16, c),
                Insn::new(
                    BPF_STX | BPF_ATOMIC | size,
                    10,
                    src,
                    -16,
                    ops[(b as usize >> 8) % ops.len()],
                ),
                Insn::new(BPF_LDX | BPF_MEM | BPF_DW, dst, 10, -16, 0),
            ]
        }
        6 => {
            let op = JMP_OPS[(b as usize >> 8) % JMP_OPS.len()];
            let jclass = if w { BPF_JMP } else { BPF_JMP32 };
            let off = (c as u32 as usize % (left.max(1))) as i16;
            if x {
                vec![Insn::new(jclass | op | BPF_X, dst, src, off, 0)]
            } else {
                vec![Insn::new(jclass | op, dst, 0, off, c % 1000)]
            }
        }
        _ => {
            // The helper: r1 = memory + small offset, r2 = small length.
            vec![
                Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),
                Insn::new(BPF_ALU64 | BPF_ADD, 1, 0, 0, (c % 8).abs()),
                Insn::new(BPF_ALU64 | BPF_MOV, 2, 0, 0, (b % 40) as i32),
                Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, 1),
                // The call clobbered r1-r5: give them values again.
                Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),
                Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 2, 0, 0, 0),
                Insn::new(BPF_ALU64 | BPF_MOV, 3, 0, 0, c),
                Insn::new(BPF_ALU64 | BPF_MOV, 4, 0, 0, a as i32),
                Insn::new(BPF_ALU64 | BPF_MOV, 5, 0, 0, b as i32),
            ]
        }
    }
}

fn build(ops: &[(u8, u32, u32, i32)], seeds: &[u64; 10]) -> Vec<Insn> {
    let mut p = Vec::new();
    // r6 keeps the memory pointer for the helper; the others get values.
    p.push(Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0));
    for r in [0u8, 3, 4, 5, 7, 8, 9] {
        let v = match seeds[r as usize] % 5 {
            0 => 0,
            1 => u64::MAX,
            2 => 1 << 63,
            _ => seeds[r as usize],
        };
        p.push(Insn::new(LDDW, r, 0, 0, v as u32 as i32));
        p.push(Insn::new(0, 0, 0, 0, (v >> 32) as i32));
    }
    let n = ops.len();
    for (i, &(k, a, b, c)) in ops.iter().enumerate() {
        p.extend(gen(k, a, b, c, n - i));
    }
    p.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    p
}

/// Property cases: `PROPTEST_CASES` when set (`scripts/fuzz-long.sh`),
/// else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(3000), ..ProptestConfig::default() })]

    #[test]
    fn jit_agrees_with_the_interpreter(
        ops in proptest::collection::vec((any::<u8>(), any::<u32>(), any::<u32>(), any::<i32>()), 1..40),
        seeds in any::<[u64; 10]>(),
        mem_seed in any::<[u8; 32]>(),
    ) {
        let insns = build(&ops, &seeds);
        let mut h = Helpers::new();
        h.insert(1, mix, Signature { args: 5 });
        let mut o = LoadOptions::default();
        o.kernel_rules = false;
        o.entry_args = 2;
        o.xdp_ctx = false;
        o.max_insns_per_run = 5000;
        let p = match Program::load(insns.clone(), &[], &h, &o) {
            Ok(p) => p,
            Err(e) => {
                // Only jumps into an LDDW's second slot may be refused.
                prop_assert!(e.reason.contains("64-bit immediate"), "{e}");
                return Ok(());
            }
        };
        prop_assert!(p.is_jitted());
        let mut mem = mem_seed;
        let want = p.run_mem_interpreted(&mut env(), &mut mem);
        let after = mem;
        mem = mem_seed;
        let got = p.run_mem(&mut env(), &mut mem);
        prop_assert_eq!(got, want, "{:?}", insns);
        prop_assert_eq!(mem, after);
    }
}

/// A random XDP parse: packet pointers, comparisons with data_end in
/// every form, loads and stores at random offsets. What the verifier
/// proves in the packet is accessed unchecked by the JIT; the
/// interpreter checks everything: they must agree on every length.
fn parse_program(steps: &[(u8, u8, i16, u8)]) -> Vec<Insn> {
    let mut p = vec![
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0), // r2 = data
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, 3, 1, 4, 0), // r3 = data_end
        Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 4, 2, 0, 0),
        Insn::new(BPF_ALU64 | BPF_MOV, 0, 0, 0, 0),
    ];
    let n = steps.len();
    for (i, &(kind, a, off, b)) in steps.iter().enumerate() {
        let left = (n - i) as i16;
        // A stack slot (8-aligned) and a place in it.
        let slot = -8 * (i16::from(a % 4) + 1);
        match kind % 10 {
            0 => p.push(Insn::new(BPF_ALU64 | BPF_ADD, 4, 0, 0, (a % 24) as i32)),
            // Spill data, data_end or the moving pointer whole; fill a
            // slot whole into the moving pointer or r5; store part of a
            // slot (what a fill then gives is no pointer).
            7 => p.push(Insn::new(
                BPF_STX | BPF_MEM | BPF_DW,
                10,
                2 + b % 3,
                slot,
                0,
            )),
            8 => p.push(Insn::new(
                BPF_LDX | BPF_MEM | BPF_DW,
                4 + b % 2,
                10,
                slot,
                0,
            )),
            9 => {
                let size = [BPF_B, BPF_H, BPF_W][(b % 3) as usize];
                p.push(Insn::new(
                    BPF_ST | BPF_MEM | size,
                    10,
                    0,
                    slot,
                    i32::from(off),
                ));
            }
            // An exit, so that code after it is reached only by jumps.
            6 => p.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)),
            1 => p.push(Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 4, 2, 0, 0)),
            2 | 3 => {
                let op = [BPF_JGT, BPF_JGE, BPF_JLT, BPF_JLE][(a % 4) as usize];
                let (d, s) = if b % 2 == 0 { (4, 3) } else { (3, 4) };
                p.push(Insn::new(
                    BPF_JMP | op | BPF_X,
                    d,
                    s,
                    (b as i16 / 2) % left.max(1),
                    0,
                ));
            }
            4 => {
                let size = [BPF_B, BPF_H, BPF_W, BPF_DW][(a % 4) as usize];
                let base = if b % 2 == 0 { 2 } else { 4 };
                p.push(Insn::new(BPF_LDX | BPF_MEM | size, 5, base, off % 32, 0));
                p.push(Insn::new(BPF_ALU64 | BPF_ADD | BPF_X, 0, 5, 0, 0));
            }
            _ => {
                let size = [BPF_B, BPF_H, BPF_W, BPF_DW][(a % 4) as usize];
                let base = if b % 2 == 0 { 2 } else { 4 };
                p.push(Insn::new(
                    BPF_ST | BPF_MEM | size,
                    base,
                    0,
                    off % 32,
                    a as i32,
                ));
            }
        }
    }
    p.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(3000), ..ProptestConfig::default() })]

    #[test]
    fn proven_packet_accesses_agree_with_checked_ones(
        steps in proptest::collection::vec((any::<u8>(), any::<u8>(), -40i16..40, any::<u8>()), 1..16),
        len in 0usize..48,
    ) {
        let insns = parse_program(&steps);
        let mut results = Vec::new();
        for jit in [false, true] {
            let mut o = LoadOptions::default();
            o.jit = jit;
            let Ok(p) = Program::load(insns.clone(), &[], &Helpers::new(), &o) else { return Ok(()) };
            let mut frame = [0x5au8; 128];
            let mut e = env();
            let r = p.run_xdp(&mut e, &mut frame, 40, len, 0, 0);
            // Fault addresses differ between Envs only for the stack
            // (one Env a run, in the same place on the test's stack).
            results.push((r, frame));
        }
        prop_assert_eq!(&results[0], &results[1], "{:?}", insns);
    }
}
