//! Lookups in array maps compiled inline by the JIT (`MapRef::array`,
//! `Env::set_array_bases`) give what the helper gives on the interpreter:
//! the same index bounds (`index < max_entries`, unsigned), the running
//! worker's values, and the helper call where the key is not in the frame.

use pfil_ebpf::insn::*;
use pfil_ebpf::{
    asm_exit, ArrayLayout, Env, Fault, Helpers, Insn, LoadOptions, MapRef, Program, Region,
    Signature,
};

const MAX: u32 = 5;
/// 16 bytes between values (an 8-byte value padded as a per-CPU section
/// would not be: any multiple of 8 works), unless a test says another:
/// the JIT scales the index by a stride of 8 with `lea`, by another
/// power of two with a shift, by anything else with a multiply.
const STRIDE: u64 = 16;

/// The reference helper: the key read through the Env's checks, the value
/// of the worker whose base and stride `user` points to.
unsafe extern "C" fn lookup(_map: u64, key: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes its live Env.
    let env = unsafe { &mut *env };
    let Ok(k) = env.check(key, 4) else {
        env.fault(Fault::Helper {
            pc: 0,
            reason: "bad key",
        });
        return 0;
    };
    let k = u32::from_le_bytes([k[0], k[1], k[2], k[3]]);
    // SAFETY: the tests make `user` point to the worker's base.
    let [base, stride] = unsafe { *env.user::<[u64; 2]>() };
    if k < MAX {
        base + u64::from(k) * stride
    } else {
        0
    }
}

/// `*(u32 *)(r10 - 8) = key; r2 = r10 - 8 (or a copy of the key in
/// the packet when `in_packet`, written there unchecked, which the
/// kernel's rules refuse); r0 = lookup(map 0, r2); r0 = r0 ?
/// *(u64 *)r0 : 999`.
fn program(key: u32, in_packet: bool) -> Vec<Insn> {
    program_at(key, in_packet, 8)
}

/// As [`program`], the key `depth` bytes below r10.
fn program_at(key: u32, in_packet: bool, depth: i16) -> Vec<Insn> {
    let mut p = vec![Insn::new(
        BPF_ST | BPF_MEM | BPF_W,
        10,
        0,
        -depth,
        key as i32,
    )];
    if in_packet {
        p.push(Insn::new(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0)); // r2 = data
        p.push(Insn::new(BPF_LDX | BPF_MEM | BPF_W, 3, 10, -depth, 0));
        p.push(Insn::new(BPF_STX | BPF_MEM | BPF_W, 2, 3, 0, 0));
    } else {
        p.push(Insn::new(BPF_MOV | BPF_X | BPF_ALU64, 2, 10, 0, 0));
        p.push(Insn::new(
            BPF_ADD | BPF_K | BPF_ALU64,
            2,
            0,
            0,
            -i32::from(depth),
        ));
    }
    p.extend([
        Insn::new(LDDW, 1, PSEUDO_MAP_FD, 0, 0),
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, 1),
        Insn::new(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2, 0),
        Insn::new(BPF_LDX | BPF_MEM | BPF_DW, 0, 0, 0, 0),
        asm_exit(),
        Insn::new(BPF_MOV | BPF_K | BPF_ALU64, 0, 0, 0, 999),
        asm_exit(),
    ]);
    p
}

fn load(insns: Vec<Insn>, jit: bool) -> Program {
    load_with(insns, jit, STRIDE)
}

/// [`load`] with `stride` bytes between the array's values.
fn load_with(insns: Vec<Insn>, jit: bool, stride: u64) -> Program {
    load_opts(insns, jit, stride, true)
}

/// [`load_with`], with or without the kernel's rules (without: a value
/// the lookup returned overwritten by a number and dereferenced, which
/// the kernel refuses, runs checked).
fn load_opts(insns: Vec<Insn>, jit: bool, stride: u64, kernel_rules: bool) -> Program {
    let mut h = Helpers::new();
    h.insert(1, lookup, Signature { args: 2 });
    let maps = [MapRef {
        handle: 0x1000,
        key_size: 4,
        value_size: 8,
        max_entries: MAX,
        direct: None,
        array: Some(ArrayLayout { stride }),
        map_type: 0,
        flags: 0,
    }];
    let mut o = LoadOptions::default();
    o.jit = jit;
    o.kernel_rules = kernel_rules;
    Program::load(insns, &maps, &h, &o).unwrap()
}

/// One worker's values (`worker * 100 + index`) and its Env.
struct Worker {
    arena: Box<[u64]>,
    /// The values' start and stride, for the reference helper.
    base: Box<[u64; 2]>,
    env: Env,
}

fn worker(w: u64) -> Worker {
    worker_with(w, STRIDE)
}

/// [`worker`] with `stride` bytes between values.
fn worker_with(w: u64, stride: u64) -> Worker {
    let mut arena: Box<[u64]> = vec![0; (u64::from(MAX) * stride / 8) as usize].into();
    for k in 0..MAX as usize {
        arena[k * stride as usize / 8] = w * 100 + k as u64;
    }
    let start = arena.as_ptr() as u64;
    let mut base = Box::new([start, stride]);
    let region = Region {
        start,
        len: arena.len() as u64 * 8,
        writable: true,
    };
    // SAFETY: the arena and the base outlive the Env (fields of Worker,
    // dropped together; the Env is not used after).
    let mut env = unsafe { Env::new(vec![region], (&mut *base as *mut [u64; 2]).cast()) };
    // SAFETY: value k < MAX is at start + k * stride, 8 bytes, in the arena.
    unsafe { env.set_array_bases(vec![start]) };
    Worker { arena, base, env }
}

fn run(p: &Program, w: &mut Worker) -> Result<u64, Fault> {
    let mut frame = [0u8; 64];
    p.run_xdp(&mut w.env, &mut frame, 0, 64, 1, 0)
        .map(|o| o.action)
}

#[test]
fn inline_array_lookups_agree_with_the_helper_at_the_bounds() {
    for stride in [8, STRIDE, 24] {
        at_the_bounds(stride);
    }
}

/// [`inline_array_lookups_agree_with_the_helper_at_the_bounds`] with
/// `stride` bytes between values.
fn at_the_bounds(stride: u64) {
    let mut workers = [worker_with(0, stride), worker_with(1, stride)];
    for key in [
        0,
        1,
        MAX - 1,
        MAX,
        MAX + 1,
        0x7fff_ffff,
        0x8000_0000,
        u32::MAX,
    ] {
        for in_packet in [false, true] {
            // (The copy into the packet is not proven: without the
            // kernel's rules, which refuse it, it is checked at run time.)
            let jit = load_opts(program(key, in_packet), true, stride, !in_packet);
            let reference = load_opts(program(key, in_packet), false, stride, !in_packet);
            for w in workers.iter_mut() {
                let want = run(&reference, w).unwrap();
                assert_eq!(run(&jit, w).unwrap(), want, "key {key}, stride {stride}");
                let expect = if key < MAX {
                    w.arena[key as usize * stride as usize / 8]
                } else {
                    999
                };
                assert_eq!(
                    want, expect,
                    "key {key}, stride {stride}, base {:#x}",
                    w.base[0]
                );
            }
        }
    }
}

#[test]
fn an_env_without_array_bases_faults_instead_of_guessing() {
    let jit = load(program(0, false), true);
    if !jit.is_jitted() {
        return;
    }
    let mut w = worker(0);
    // SAFETY: no bases: nothing to vouch for.
    unsafe { w.env.set_array_bases(Vec::new()) };
    assert!(matches!(run(&jit, &mut w), Err(Fault::Helper { .. })));
}

#[test]
fn inlined_lookups_are_not_helper_calls() {
    // The machine code of a stack key has no call; a packet key's has.
    let stack = load(program(1, false), true);
    let packet = load_opts(program(1, true), true, STRIDE, false);
    let (Some(s), Some(p)) = (stack.machine_code(), packet.machine_code()) else {
        return;
    };
    // `call r11` (41 ff d3) is how the JIT calls helpers.
    let calls = |c: &[u8]| c.windows(3).filter(|w| w == &[0x41, 0xff, 0xd3]).count();
    assert!(calls(p) > calls(s), "{} vs {}", calls(p), calls(s));
}

proptest::proptest! {
    /// Any key at any (4-aligned, as the kernel has the stack's 4-byte
    /// accesses) depth of the frame, values 8, 16 or 24 bytes apart: the
    /// JIT (inline) and the interpreter (helper) give the same value or
    /// the same miss.
    #[test]
    fn inline_lookups_match_the_interpreter(key in proptest::prelude::any::<u32>(), small in 0u32..8, words in 1i16..=128, w in 0u64..2, s in 0usize..3) {
        let key = if small < 6 { small } else { key };
        let stride = [8, STRIDE, 24][s];
        let insns = program_at(key, false, words * 4);
        let (jit, reference) = (load_with(insns.clone(), true, stride), load_with(insns, false, stride));
        let mut w = worker_with(w, stride);
        proptest::prop_assert_eq!(run(&jit, &mut w), run(&reference, &mut w));
    }
}

#[test]
fn a_callers_stack_key_in_a_callee_is_looked_up_by_the_helper() {
    // main: key 1 at its r10 - 8, r2 = that address, call f; f stores key
    // 3 at its own r10 - 8 and looks r2 up: the caller's key (1) counts.
    let insns = vec![
        Insn::new(BPF_ST | BPF_MEM | BPF_W, 10, 0, -8, 1),
        Insn::new(BPF_MOV | BPF_X | BPF_ALU64, 2, 10, 0, 0),
        Insn::new(BPF_ADD | BPF_K | BPF_ALU64, 2, 0, 0, -8),
        Insn::new(BPF_JMP | BPF_CALL, 0, PSEUDO_CALL, 0, 1),
        asm_exit(),
        Insn::new(BPF_ST | BPF_MEM | BPF_W, 10, 0, -8, 3),
        Insn::new(LDDW, 1, PSEUDO_MAP_FD, 0, 0),
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, 1),
        Insn::new(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2, 0),
        Insn::new(BPF_LDX | BPF_MEM | BPF_DW, 0, 0, 0, 0),
        asm_exit(),
        Insn::new(BPF_MOV | BPF_K | BPF_ALU64, 0, 0, 0, 999),
        asm_exit(),
    ];
    let mut w = worker(1);
    for jit in [true, false] {
        assert_eq!(run(&load(insns.clone(), jit), &mut w), Ok(101), "jit {jit}");
    }
}

/// The JIT decides a null test right after an inlined lookup itself (a
/// hit is never null, a miss always is): both forms of the test, both
/// outcomes, give what the interpreter gives.
#[test]
fn null_tests_after_inline_lookups_take_the_same_branch() {
    let mut w = worker(1);
    for key in [0, MAX - 1, MAX, u32::MAX] {
        for jne in [false, true] {
            let mut insns = program(key, false);
            if jne {
                // `if r0 != 0 goto +2; r0 = 999; exit; r0 = *r0; exit`
                let n = insns.len();
                insns.truncate(n - 5);
                insns.extend([
                    Insn::new(BPF_JMP | BPF_JNE | BPF_K, 0, 0, 2, 0),
                    Insn::new(BPF_MOV | BPF_K | BPF_ALU64, 0, 0, 0, 999),
                    asm_exit(),
                    Insn::new(BPF_LDX | BPF_MEM | BPF_DW, 0, 0, 0, 0),
                    asm_exit(),
                ]);
            }
            let (jit, reference) = (load(insns.clone(), true), load(insns, false));
            let want = if key < MAX { 100 + u64::from(key) } else { 999 };
            assert_eq!(run(&reference, &mut w), Ok(want), "key {key} jne {jne}");
            assert_eq!(run(&jit, &mut w), Ok(want), "key {key} jne {jne}");
        }
    }
}

/// A key from the packet's first byte `& mask`, stored at r10 - 8; when
/// the second byte is 1, the unmasked byte instead, jumping onto the
/// instructions between the store and the call (`jump_in`) or to the
/// end. `between` 1: a register instruction between the call and the
/// null test (the test stays fused); 2: one that writes r0 (not fused);
/// 3: one that writes r3, the register the key was stored from (fused,
/// so emitted before the lookup: the key is then read from the stack).
fn bounded_key(mask: u32, jump_in: bool, between: u8) -> Vec<Insn> {
    let text = format!(
        "ldxw %r6, [%r1+0]\nldxw %r7, [%r1+4]\nmov %r0, 0\nmov %r5, %r6\nadd %r5, 2\n\
         jgt %r5, %r7, out\nldxb %r3, [%r6+0]\nldxb %r8, [%r6+1]\nstxw [%r10-8], %r3\n\
         jeq %r8, 1, {}\nand %r3, {mask}\nstxw [%r10-8], %r3\nmid:\nmov %r2, %r10\n\
         add %r2, -8\nlddw %r1, 0\ncall 1\n{}\njeq %r0, 0, miss\nldxdw %r0, [%r0+0]\nexit\n\
         miss:\nmov %r0, 999\n{}\nout:\nexit",
        if jump_in { "mid" } else { "out" },
        ["", "mov %r4, 3", "mov %r0, 5", "mov %r3, 4"][usize::from(between)],
        ["", "add %r0, %r4", "", "add %r0, %r3"][usize::from(between)],
    );
    let mut p = pfil_ebpf::asm::assemble(&text).unwrap();
    for i in p.iter_mut().filter(|i| i.code == LDDW) {
        i.src = PSEUDO_MAP_FD;
    }
    p
}

#[test]
fn a_key_proven_below_max_entries_is_not_checked_and_a_jump_in_keeps_the_check() {
    let mut w = worker(1);
    for mask in [3, 4, 5, 7, 0xff] {
        for jump_in in [false, true] {
            for between in [0, 1, 2, 3] {
                let insns = bounded_key(mask, jump_in, between);
                // (between 2 dereferences the number 5 on the miss path)
                let rules = between != 2;
                let (jit, reference) = (
                    load_opts(insns.clone(), true, STRIDE, rules),
                    load_opts(insns, false, STRIDE, rules),
                );
                for key in 0..=255u8 {
                    for sel in [0u8, 1] {
                        let mut frame = [0u8; 64];
                        frame[0] = key;
                        frame[1] = sel;
                        let mut f2 = frame;
                        let a = jit.run_xdp(&mut w.env, &mut frame, 0, 64, 1, 0);
                        let b = reference.run_xdp(&mut w.env, &mut f2, 0, 64, 1, 0);
                        assert_eq!(a, b, "mask {mask} jump_in {jump_in} key {key} sel {sel}");
                    }
                }
            }
        }
    }
    // Below max_entries (3 < 5): no index check, no miss path.
    let len = |mask| {
        load(bounded_key(mask, false, 0), true)
            .machine_code()
            .map(<[u8]>::len)
    };
    if let (Some(proven), Some(checked)) = (len(3), len(7)) {
        assert!(proven + 13 <= checked, "{proven} vs {checked}");
    }
}
