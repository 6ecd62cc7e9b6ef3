//! The x86-64 JIT: one pass over the verified program, same semantics as
//! the interpreter (which stays the reference).
//!
//! Register mapping (SysV, so helpers are called with r1-r5 in place and
//! the [`Env`] as sixth argument):
//!
//! | eBPF | r0  | r1  | r2  | r3  | r4  | r5 | r6  | r7  | r8  | r9  | r10 |
//! |------|-----|-----|-----|-----|-----|----|-----|-----|-----|-----|-----|
//! | x86  | rax | rdi | rsi | rdx | rcx | r8 | rbx | r13 | r14 | r15 | rbp |
//!
//! r12 holds the `Env`; r10 and r11 are scratch. Accesses through r10
//! are not checked at run time (the verifier proved them inside the
//! frame, and r10 is read-only). Other loads and stores are checked
//! inline against the packet (`data_meta..data_end`, read from the `Env`
//! so helpers may move it) and otherwise go to a slow path in Rust that
//! checks the stack, the context and the loader's regions, exactly as the
//! interpreter. Faults unwind to the entry with the native stack pointer
//! saved in the `Env`. Loop heads subtract their cost from a budget in the
//! `Env`. Division by zero follows eBPF (no `#DE`: zero divisors and
//! `INT_MIN / -1` are tested before `div`).
//!
//! What the verifier and `jit_plan` let it leave out: conditional jumps
//! the verifier's bounds decide (`Analysis::decided`: no compare, and no
//! code for what only the impossible edge reached), definitions no path
//! reads, rbp where the code neither uses its stack nor calls out, and
//! the fusions of `jit_plan` (each refused where a jump lands inside).

use core::mem::offset_of;

use crate::env::{Env, INLINE_BASES, STACK_FRAME, STACK_SIZE};
use crate::insn::*;
use crate::jit_live::reachable;
use crate::verify::Access;
use crate::x86::{cc, reg::*, Asm};
use crate::{Helpers, MapRef};

/// eBPF register → x86 register.
const MAP: [u8; 11] = [RAX, RDI, RSI, RDX, RCX, R8, RBX, R13, R14, R15, RBP];

const META: i32 = offset_of!(Env, meta) as i32;
const DATA: i32 = offset_of!(Env, data) as i32;
const DATA_END: i32 = offset_of!(Env, data_end) as i32;
const SCRATCH: i32 = offset_of!(Env, scratch) as i32;
const LAST: i32 = offset_of!(Env, last) as i32;
const FAULTED: i32 = (offset_of!(Env, flags) + crate::env::FAULT) as i32;
const BUDGET: i32 = offset_of!(Env, budget) as i32;
const JIT_RSP: i32 = offset_of!(Env, jit_rsp) as i32;
const BASES: i32 = offset_of!(Env, bases_ptr) as i32;
const FIRST_BASES: i32 = offset_of!(Env, first_bases) as i32;

use jit_rt::{rt_atomic, rt_fault, rt_mem, SIGN, WRITE};

#[path = "jit_alu.rs"]
mod jit_alu;
#[path = "jit_code.rs"]
mod jit_code;
#[path = "jit_emit.rs"]
mod jit_emit;
pub(crate) use jit_code::JitCode;
use jit_emit::*;
#[path = "jit_rt.rs"]
mod jit_rt;
use jit_alu::alu;

/// Out-of-line code emitted after the program.
enum Stub {
    /// A load or store that failed the inline packet check.
    Mem {
        jumps: [usize; 2],
        back: usize,
        pc: usize,
        flags: u64,
        dst: u8,
        value: Value,
    },
    /// A helper left a fault pending.
    Pending { jump: usize, pc: usize },
    /// A loop head ran out of budget.
    Budget { jump: usize, pc: usize },
    /// An inlined array lookup's index out of range: r0 = 0.
    Miss { jump: usize, back: Back },
}

/// Where a stub continues.
enum Back {
    /// At this code position.
    Here(usize),
    /// At this eBPF instruction.
    Pc(usize),
}

/// The value a slow-path store writes.
#[derive(Clone, Copy)]
enum Value {
    None,
    Reg(u8),
    Imm(i32),
}

/// Compiles a verified program.
/// (`analysis`: its functions, inlined lookups, stack words), and
/// whether the code checks accesses inline (reads `Env::last`), and
/// whether it is contained: it calls nothing (no helper left, no local
/// call, no slow path, no loop budget) and checks nothing inline, so it
/// reads of the Env only its context fields and array bases, and cannot
/// fault.
pub(crate) fn compile(
    insns: &[Insn],
    loop_cost: &[u32],
    access: &[Access],
    helpers: &Helpers,
    analysis: &crate::verify::Analysis,
    maps: &[MapRef],
) -> Result<(JitCode, bool, bool), String> {
    let (functions, lookups, stack_words) = (
        &analysis.functions[..],
        &analysis.lookups[..],
        &analysis.stack_words[..],
    );
    let mut a = Asm::default();
    let lookup_pcs: Vec<usize> = lookups.iter().map(|l| l.0).collect();
    let reach = reachable(insns, functions, &analysis.decided);
    let plan = crate::jit_plan::plan(
        insns,
        functions,
        &lookup_pcs,
        helpers,
        &analysis.decided,
        &reach,
    );
    // Code that calls out (helpers, the slow paths' Rust, local calls).
    let calls = crate::jit_plan::calls_out(insns, loop_cost, access, &lookup_pcs, &reach);
    // Prologue: save rbp (r10: where the code uses its stack or calls
    // out), rbx (r6) and r15 (r9) where used; r12 (the Env), r13 and r14
    // (r7, r8) are the caller's to save (`JitCode::call` declares them
    // clobbered).
    let frame = calls || plan.callee_saved & (1 << 10) != 0;
    let saved: Vec<u8> = [(10, RBP), (6, RBX), (9, R15)]
        .into_iter()
        .filter(|&(r, _)| {
            if r == 10 {
                frame
            } else {
                plan.callee_saved & (1 << r) != 0
            }
        })
        .map(|(_, x)| x)
        .collect();
    for &r in &saved {
        a.push(r);
    }
    // Code that calls out keeps the stack 16-byte aligned at its calls:
    // the return address and the pushes an even count of 8-byte slots.
    let pad = saved.len() % 2 == 0 && calls;
    if pad {
        a.ri(5, true, RSP, 8);
    }
    // The Env arrives in r12 (`JitCode::call`), the stack top in r8.
    if frame {
        a.rr(0x89, true, RBP, R8);
    }
    // `bpf_trace_printk` reads r3-r5 as its format asks, set or not (the
    // kernel's verifier lets it): a program calling it gets them (and r2)
    // zero at its start and after every helper call, never a host value
    // (the stack top arrives in r8, a helper leaves its own).
    let printk = insns
        .iter()
        .any(|i| i.code == BPF_JMP | BPF_CALL && i.src == 0 && i.imm == 6);
    let clear_args = |a: &mut Asm, from: usize| {
        for &x in &MAP[from..=5] {
            a.rr(0x31, false, x, x);
        }
    };
    if printk {
        clear_args(&mut a, 2);
    }
    // One function: every exit jump leaves from the entry's stack depth
    // (slow paths pop what they push first); with local calls a fault
    // unwinds from a callee's frame to the saved stack pointer.
    let single = functions.len() <= 1;
    if !single {
        a.store(8, R12, JIT_RSP, RSP);
        // r0 starts at 0, as the interpreter's: a `void` subprogram
        // returns whatever r0 held, never a host value left in rax.
        a.rr(0x31, false, RAX, RAX);
    }
    let mut inline_checks = false;
    let n = insns.len();
    let mut native = vec![0usize; n + 1];
    let mut fixups: Vec<(usize, usize)> = Vec::new();
    let mut exits: Vec<usize> = Vec::new();
    let mut stubs: Vec<Stub> = Vec::new();
    let main_end = functions.get(1).copied().unwrap_or(n);
    let mut pc = 0;
    while pc < n {
        native[pc] = a.pos();
        let i = insns[pc];
        if !reach[pc] {
            // Only a jump the verifier's bounds decide led here.
            pc += if i.code == LDDW { 2 } else { 1 };
            if pc <= n {
                native[pc - 1] = a.pos();
            }
            continue;
        }
        // A loop head is charged first, whatever its own instruction
        // becomes (a dead definition there is still where the loop
        // comes back to).
        if let Some(&cost) = loop_cost.get(pc) {
            if cost != 0 {
                a.sub_mem_imm(R12, BUDGET, cost as i32);
                stubs.push(Stub::Budget {
                    jump: a.jcc(cc::B),
                    pc,
                });
            }
        }
        if plan.skip[pc] {
            // A dead definition (see `jit_plan`): nothing emitted. Jumps
            // onto it land on its loop charge, if any (`native[pc]`, set
            // above); an LDDW's second slot is where it ends.
            if i.code == LDDW && pc + 1 < n {
                native[pc + 1] = a.pos();
            }
            pc += if i.code == LDDW { 2 } else { 1 };
            continue;
        }
        let d = MAP[(i.dst as usize).min(10)];
        let s = MAP[(i.src as usize).min(10)];
        let x = i.code & BPF_X != 0;
        let next = insns.get(pc + 1);
        match i.class() {
            // `mov d, s; add d, k` is `lea d, [s + k]` when nothing jumps
            // between the two.
            BPF_ALU64
                if i.code == BPF_ALU64 | BPF_MOV | BPF_X
                    && i.off == 0
                    && !plan.target[pc + 1]
                    && next.is_some_and(|j| {
                        j.code == BPF_ALU64 | BPF_ADD | BPF_K
                            && j.dst == i.dst
                            && loop_cost.get(pc + 1).copied().unwrap_or(0) == 0
                            && !plan.skip[pc + 1]
                    }) =>
            {
                a.lea(d, s, next.map_or(0, |j| j.imm));
                pc += 1;
                native[pc] = a.pos();
            }
            // `lsh d, 32; rsh d, 32` keeps the low half: `mov d32, d32`.
            BPF_ALU64
                if i.code == BPF_ALU64 | BPF_LSH | BPF_K
                    && i.imm == 32
                    && !plan.target[pc + 1]
                    && next.is_some_and(|j| {
                        j.code == BPF_ALU64 | BPF_RSH | BPF_K
                            && j.dst == i.dst
                            && j.imm == 32
                            && !plan.skip[pc + 1]
                    }) =>
            {
                a.rr(0x89, false, d, d);
                pc += 1;
                native[pc] = a.pos();
            }
            // `x = imm; if y OP x` with x dead after: `cmp y, imm`.
            BPF_ALU64 if crate::jit_fuse::imm_compare(insns, pc, &plan).is_some() => {
                let (y, imm, swapped) =
                    crate::jit_fuse::imm_compare(insns, pc, &plan).ok_or("imm_compare vanished")?;
                let j = insns[pc + 1];
                let op = if swapped { mirror(j.op()) } else { j.op() };
                compare_imm(&mut a, j.class() == BPF_JMP, MAP[y as usize], imm, op);
                pc += 1;
                native[pc] = a.pos();
                fixups.push((a.jcc(cond(op)), (pc as i64 + 1 + j.off as i64) as usize));
            }
            // `and d, 2^k - 1` on a value the verifier bounded by the mask.
            BPF_ALU | BPF_ALU64 if analysis.no_op_ands.binary_search(&pc).is_ok() => {}
            // Two flags or'ed and tested: two compares and jumps.
            BPF_ALU | BPF_ALU64
                if crate::jit_fuse::or_flags(insns, pc, &plan, &analysis.decided).is_some() =>
            {
                let (e, either) = crate::jit_fuse::or_flags(insns, pc, &plan, &analysis.decided)
                    .ok_or("or_flags vanished")?;
                for k in &insns[pc + 7..e] {
                    let (kd, ks) = (MAP[k.dst as usize], MAP[(k.src as usize).min(10)]);
                    alu(&mut a, k, kd, ks, k.code & BPF_X != 0);
                }
                let t = (e as i64 + 1 + insns[e].off as i64) as usize;
                compare(&mut a, &insns[pc + 2]);
                let first = a.jcc(cond(insns[pc + 2].op()));
                compare(&mut a, &insns[pc + 4]);
                if either {
                    fixups.push((first, t));
                    fixups.push((a.jcc(cond(insns[pc + 4].op())), t));
                } else {
                    // x86 condition codes negate by their low bit.
                    fixups.push((a.jcc(cond(insns[pc + 4].op()) ^ 1), t));
                    a.patch(first, a.pos());
                }
                native[pc + 1..=e].fill(a.pos());
                pc = e;
            }
            // `x = 1; if c goto +1; x = 0`: `xor x, x; cmp; setcc x`.
            BPF_ALU | BPF_ALU64
                if crate::jit_fuse::set_flag(insns, pc, &plan, &analysis.decided) =>
            {
                let j = insns[pc + 1];
                a.rr(0x31, false, d, d);
                compare(&mut a, &j);
                a.setcc(cond(j.op()), d);
                native[pc + 1..pc + 3].fill(a.pos());
                pc += 2;
            }
            // `d = *(p + k); r0 = d` with d dead after: loaded into r0.
            BPF_LDX if crate::jit_fuse::load_to_r0(insns, pc, access, &plan) => {
                let base = if i.src == 10 { RBP } else { s };
                a.load(
                    i.size(),
                    i.code & 0xe0 == BPF_MEMSX,
                    RAX,
                    base,
                    i.off as i32,
                );
                pc += 1;
                native[pc] = a.pos();
            }
            // `be16` of a 16-bit load just made, compared with a constant
            // by the next instruction and read by nothing after: the
            // loaded value compared with the constant's bytes swapped.
            BPF_ALU
                if crate::jit_fuse::swapped_compare(insns, pc, &plan, &analysis.decided)
                    .is_some() =>
            {
                let q = crate::jit_fuse::swapped_compare(insns, pc, &plan, &analysis.decided)
                    .ok_or("swapped_compare vanished")?;
                let j = insns[q];
                let k = (j.imm as u16).swap_bytes() as i32;
                native[pc + 1..=q].fill(a.pos());
                compare_imm(&mut a, j.class() == BPF_JMP, d, k, j.op());
                pc = q;
                fixups.push((a.jcc(cond(j.op())), (pc as i64 + 1 + j.off as i64) as usize));
            }
            // `be16` of a 16-bit load just made: the high bits are zero.
            BPF_ALU
                if i.code == BPF_ALU | BPF_END | BPF_X
                    && i.imm == 16
                    && pc > 0
                    && !plan.target[pc]
                    && plan.reach[pc - 1]
                    && !plan.skip[pc - 1]
                    && insns[pc - 1].code == BPF_LDX | BPF_MEM | BPF_H
                    && insns[pc - 1].dst == i.dst =>
            {
                a.rol16_8(d);
            }
            BPF_ALU | BPF_ALU64 => alu(&mut a, &i, d, s, x),
            BPF_JMP | BPF_JMP32 => {
                let w = i.class() == BPF_JMP;
                match i.op() {
                    BPF_JA => {
                        let off = if w { i.off as i64 } else { i.imm as i64 };
                        // Over nothing but code no path reaches: no jump.
                        if !plan.elided[pc] {
                            fixups.push((a.jmp(), (pc as i64 + 1 + off) as usize));
                        }
                    }
                    BPF_CALL if i.src == PSEUDO_CALL => {
                        for r in [RBX, R13, R14, R15, RBP] {
                            a.push(r);
                        }
                        a.ri(5, true, RBP, STACK_FRAME as i32);
                        fixups.push((a.call_rel(), (pc as i64 + 1 + i.imm as i64) as usize));
                        for r in [RBP, R15, R14, R13, RBX] {
                            a.pop(r);
                        }
                    }
                    BPF_CALL if lookup_at(lookups, pc).is_some() => {
                        // bpf_map_lookup_elem on an array, inline (the
                        // kernel's array_map_gen_lookup): r0 = index <
                        // max_entries ? base + index * stride : 0.
                        let (m, depth) = lookup_at(lookups, pc).unwrap_or_default();
                        let mr = maps
                            .get(m as usize)
                            .ok_or("inlined lookup of a missing map")?;
                        let stride = mr.array.map_or(0, |l| l.stride);
                        // `if r0 == 0 goto L` / `if r0 != 0 goto L` next,
                        // maybe after one register instruction that does
                        // not touch r0 (emitted first): decided here, a
                        // hit is never null and a miss is.
                        let null_test = crate::jit_plan::null_test_after(insns, pc, &plan);
                        if let Some((_, Some(m))) = null_test {
                            let j = insns[m];
                            let (jd, js) = (MAP[j.dst as usize], MAP[(j.src as usize).min(10)]);
                            alu(&mut a, &j, jd, js, j.code & BPF_X != 0);
                        }
                        // The key: from the register it was stored from
                        // where that still holds it, else from the stack.
                        // (Not where the instruction after the call, emitted
                        // above, wrote it.)
                        let moved = null_test.and_then(|(_, m)| m).map(|m| insns[m].dst);
                        match crate::jit_plan::key_register(insns, pc, depth, &plan)
                            .filter(|&x| Some(x) != moved)
                        {
                            Some(x) => a.rr(0x89, false, R11, MAP[x as usize]),
                            None => a.load(4, false, R11, RBP, -(depth as i32)),
                        }
                        // A miss (r0 = 0) out of line, unless the key is
                        // proven below max_entries.
                        let proven = crate::jit_plan::key_below(
                            insns,
                            pc,
                            depth,
                            mr.max_entries,
                            stack_words,
                            &plan,
                        );
                        let miss = (!proven).then(|| {
                            a.ri(7, false, R11, mr.max_entries as i32);
                            a.jcc(cc::AE)
                        });
                        // A stride of 8 or less is lea's scale.
                        let scaled = matches!(stride, 1 | 2 | 4 | 8);
                        if scaled {
                        } else if stride.is_power_of_two() {
                            a.shift_i(4, true, R11, stride.trailing_zeros() as u8);
                        } else {
                            a.mov_imm32(R10, stride as u32);
                            a.imul(true, R11, R10);
                        }
                        if (m as usize) < INLINE_BASES {
                            a.load64(RAX, R12, FIRST_BASES + m as i32 * 8);
                        } else {
                            a.load64(RAX, R12, BASES);
                            a.load64(RAX, RAX, m as i32 * 8);
                        }
                        if scaled {
                            a.lea_index(RAX, RAX, R11, stride as u8);
                        } else {
                            a.rr(0x01, true, RAX, R11);
                        }
                        match null_test {
                            Some((t, _)) => {
                                let j = insns[t];
                                let (jne, l) =
                                    (j.op() == BPF_JNE, (t as i64 + 1 + j.off as i64) as usize);
                                if jne {
                                    fixups.push((a.jmp(), l));
                                }
                                if let Some(jump) = miss {
                                    stubs.push(Stub::Miss {
                                        jump,
                                        back: if jne {
                                            Back::Here(a.pos())
                                        } else {
                                            Back::Pc(l)
                                        },
                                    });
                                }
                                native[pc + 1..=t].fill(a.pos());
                                pc = t;
                            }
                            None => {
                                if let Some(jump) = miss {
                                    stubs.push(Stub::Miss {
                                        jump,
                                        back: Back::Here(a.pos()),
                                    });
                                }
                            }
                        }
                    }
                    BPF_CALL => {
                        let (f, _) = helpers
                            .get(i.imm as u32)
                            .ok_or_else(|| format!("helper {} vanished", i.imm))?;
                        a.rr(0x89, true, R9, R12);
                        a.mov_imm64(R11, f as *const () as u64);
                        a.call_r(R11);
                        if printk {
                            clear_args(&mut a, 1);
                        }
                        a.cmp_mem8(R12, FAULTED, 0);
                        stubs.push(Stub::Pending {
                            jump: a.jcc(cc::NE),
                            pc,
                        });
                    }
                    BPF_EXIT => {
                        if pc < main_end && single {
                            // The epilogue in place (no jump to it).
                            epilogue(&mut a, false, pad, &saved);
                        } else if pc < main_end {
                            exits.push(a.jmp());
                        } else {
                            a.ret();
                        }
                    }
                    op => {
                        let t = (pc as i64 + 1 + i.off as i64) as usize;
                        match analysis.decided.binary_search_by_key(&pc, |d| d.0) {
                            // The verifier's bounds decide it: no compare,
                            // a plain jump if always taken (and not over
                            // unreached code only).
                            Ok(k) => {
                                if analysis.decided[k].1 && !plan.elided[pc] {
                                    fixups.push((a.jmp(), t));
                                }
                            }
                            Err(_) => {
                                compare(&mut a, &i);
                                fixups.push((a.jcc(cond(op)), t));
                            }
                        }
                    }
                }
            }
            BPF_LD => {
                let hi = insns.get(pc + 1).map_or(0, |h| h.imm as u32 as u64);
                a.mov_imm64(d, (i.imm as u32 as u64) | (hi << 32));
                pc += 1;
                native[pc] = a.pos();
            }
            // `d = *(u64 *)(p + k); d += v; *(u64 *)(p + k) = d` on memory
            // the verifier proved (a counter in a map value): `add [p + k],
            // v; mov d, [p + k]`.
            // Two byte loads made one 16-bit value: one 16-bit load (and
            // the low byte's where it is read later).
            BPF_LDX if crate::jit_fuse::byte_pair(insns, pc, access, &plan).is_some() => {
                let (hi, lo, p, k) = crate::jit_fuse::byte_pair(insns, pc, access, &plan)
                    .ok_or("byte_pair vanished")?;
                let base = MAP[p as usize];
                if !plan.dead_after(pc + 3, lo) {
                    a.load(1, false, MAP[lo as usize], base, k as i32);
                }
                a.load(2, false, MAP[hi as usize], base, k as i32);
                native[pc + 1..pc + 4].fill(a.pos());
                pc += 3;
            }
            BPF_LDX if crate::jit_fuse::rmw_at(insns, pc, access, &plan) => {
                let j = insns[pc + 1];
                if j.code & BPF_X != 0 {
                    a.add_mem(s, i.off as i32, MAP[j.src as usize]);
                } else {
                    a.add_mem_imm(s, i.off as i32, j.imm);
                }
                // The sum where it is read later.
                if !plan.dead_after(pc + 2, i.dst) {
                    a.load(8, false, d, s, i.off as i32);
                }
                native[pc + 1] = a.pos();
                pc += 2;
                native[pc] = a.pos();
            }
            BPF_LDX => {
                let size = i.size();
                let sx = i.code & 0xe0 == BPF_MEMSX;
                if i.src == 10 {
                    a.load(size, sx, d, RBP, i.off as i32);
                } else if matches!(access.get(pc), Some(Access::Value | Access::Packet)) {
                    // Inside a map value or the packet: the verifier proved it.
                    a.load(size, sx, d, s, i.off as i32);
                } else if access.get(pc) == Some(&Access::Ctx) {
                    // A context field (the verifier checked the offset).
                    match i.off {
                        0 => a.load64(d, R12, DATA),
                        4 => a.load64(d, R12, DATA_END),
                        8 => a.load64(d, R12, META),
                        off => {
                            a.load64(R10, R12, SCRATCH);
                            a.load(size, sx, d, R10, STACK_SIZE as i32 + off as i32);
                        }
                    }
                } else {
                    inline_checks = true;
                    let jumps = inline_check(&mut a, s, i.off, size);
                    a.load(size, sx, d, R11, 0);
                    let flags = size as u64 | if sx { SIGN } else { 0 };
                    stubs.push(Stub::Mem {
                        jumps,
                        back: a.pos(),
                        pc,
                        flags,
                        dst: d,
                        value: Value::None,
                    });
                }
            }
            BPF_ST | BPF_STX if i.code & 0xe0 == BPF_MEM => {
                let size = i.size();
                let value = if i.class() == BPF_ST {
                    Value::Imm(i.imm)
                } else {
                    Value::Reg(s)
                };
                let emit = |a: &mut Asm, base: u8, disp: i32| match value {
                    Value::Imm(v) => a.store_imm(size, base, disp, v),
                    Value::Reg(r) => a.store(size, base, disp, r),
                    Value::None => {}
                };
                if i.dst == 10 {
                    emit(&mut a, RBP, i.off as i32);
                } else if matches!(access.get(pc), Some(Access::Value | Access::Packet)) {
                    emit(&mut a, d, i.off as i32);
                } else {
                    inline_checks = true;
                    let jumps = inline_check(&mut a, d, i.off, size);
                    emit(&mut a, R11, 0);
                    stubs.push(Stub::Mem {
                        jumps,
                        back: a.pos(),
                        pc,
                        flags: size as u64 | WRITE,
                        dst: 0,
                        value,
                    });
                }
            }
            _ if access.get(pc) == Some(&Access::Value) => {
                // Add (or fetch-add) inside a map value: `lock add` or
                // `lock xadd` (which leaves the old value in the source).
                a.lock_add(i.size() == 8, d, i.off as i32, s, i.imm & BPF_FETCH != 0);
            }
            _ => {
                // STX | ATOMIC, through Rust.
                a.lea(R11, d, i.off as i32);
                a.rr(0x89, true, R10, s);
                save(&mut a);
                a.rr(0x89, true, RCX, RAX);
                a.rr(0x89, true, RDI, R12);
                a.rr(0x89, true, RSI, R11);
                a.rr(0x89, true, RDX, R10);
                a.mov_imm64(R8, (i.imm as u32 as u64) | ((i.size() as u64) << 32));
                a.mov_imm64(R9, pc as u64);
                a.mov_imm64(R11, rt_atomic as *const () as u64);
                a.call_r(R11);
                a.rr(0x89, true, R11, RAX);
                restore(&mut a);
                a.cmp_mem8(R12, FAULTED, 0);
                exits_on(&mut a, &mut exits);
                if i.imm == BPF_CMPXCHG {
                    a.rr(0x89, true, RAX, R11);
                } else if i.imm & BPF_FETCH != 0 {
                    a.rr(0x89, true, s, R11);
                }
            }
        }
        pc += 1;
    }
    native[n] = a.pos();
    // Stubs.
    for stub in stubs {
        match stub {
            Stub::Mem {
                jumps,
                back,
                pc,
                flags,
                dst,
                value,
            } => {
                let here = a.pos();
                for j in jumps {
                    a.patch(j, here);
                }
                match value {
                    Value::Reg(r) => a.rr(0x89, true, R10, r),
                    Value::Imm(v) => a.mov_imm64(R10, v as i64 as u64),
                    Value::None => {}
                }
                save(&mut a);
                a.rr(0x89, true, RDI, R12);
                a.rr(0x89, true, RSI, R11);
                a.mov_imm64(RDX, flags);
                a.rr(0x89, true, RCX, R10);
                a.mov_imm64(R8, pc as u64);
                a.mov_imm64(R11, rt_mem as *const () as u64);
                a.call_r(R11);
                a.rr(0x89, true, R11, RAX);
                restore(&mut a);
                a.cmp_mem8(R12, FAULTED, 0);
                exits_on(&mut a, &mut exits);
                if flags & WRITE == 0 {
                    a.rr(0x89, true, dst, R11);
                }
                let j = a.jmp();
                a.patch(j, back);
            }
            Stub::Miss { jump, back } => {
                let here = a.pos();
                a.patch(jump, here);
                a.rr(0x31, false, RAX, RAX);
                let j = a.jmp();
                match back {
                    Back::Here(at) => a.patch(j, at),
                    Back::Pc(t) => fixups.push((j, t)),
                }
            }
            Stub::Pending { jump, pc } | Stub::Budget { jump, pc } => {
                let kind = u64::from(matches!(stub, Stub::Budget { .. }));
                let here = a.pos();
                a.patch(jump, here);
                a.rr(0x89, true, RDI, R12);
                a.mov_imm64(RSI, kind);
                a.mov_imm64(RDX, pc as u64);
                a.mov_imm64(R11, rt_fault as *const () as u64);
                a.call_r(R11);
                exits.push(a.jmp());
            }
        }
    }
    // The exit: unwind to the entry's stack pointer, restore, return r0.
    let exit = a.pos();
    epilogue(&mut a, !single, pad, &saved);
    for j in exits {
        a.patch(j, exit);
    }
    for (at, t) in fixups {
        let to = *native
            .get(t)
            .ok_or_else(|| format!("jump target {t} outside the program"))?;
        a.patch(at, to);
    }
    // Code that calls nothing out of itself and checks nothing inline
    // touches the Env only for its context fields and array bases, and
    // cannot fault.
    let contained = !calls && !inline_checks && single;
    Ok((JitCode::new(&a.buf)?, inline_checks, contained))
}
