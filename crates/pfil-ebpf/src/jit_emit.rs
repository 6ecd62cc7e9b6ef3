//! Small emitters the JIT shares between instructions: conditions,
//! compares, the epilogue, saves around calls into Rust, inline checks.

use super::{JIT_RSP, LAST, META};
use crate::insn::*;
use crate::x86::{cc, reg::*, Asm};

/// Restores the stack (from the `Env` when `unwind`) and the saved
/// registers; returns r0.
pub(super) fn epilogue(a: &mut Asm, unwind: bool, pad: bool, saved: &[u8]) {
    if unwind {
        a.load64(RSP, R12, JIT_RSP);
    }
    if pad {
        a.ri(0, true, RSP, 8);
    }
    for &r in saved.iter().rev() {
        a.pop(r);
    }
    a.ret();
}

/// The compare (or `test`, for `JSET`) of conditional jump `j`'s
/// operands, setting the flags its [`cond`] reads.
pub(super) fn compare(a: &mut Asm, j: &Insn) {
    let d = super::MAP[j.dst as usize];
    let w = j.class() == BPF_JMP;
    if j.code & BPF_X != 0 {
        let s = super::MAP[(j.src as usize).min(10)];
        a.rr(if j.op() == BPF_JSET { 0x85 } else { 0x39 }, w, d, s);
    } else {
        compare_imm(a, w, d, j.imm, j.op());
    }
}

/// The x86 condition of a conditional jump's operation.
pub(super) fn cond(op: u8) -> u8 {
    match op {
        BPF_JEQ => cc::E,
        BPF_JNE | BPF_JSET => cc::NE,
        BPF_JGT => cc::A,
        BPF_JGE => cc::AE,
        BPF_JLT => cc::B,
        BPF_JLE => cc::BE,
        BPF_JSGT => cc::G,
        BPF_JSGE => cc::GE,
        BPF_JSLT => cc::L,
        _ => cc::LE,
    }
}

/// The operation with its operands swapped (`a > b` is `b < a`).
pub(super) fn mirror(op: u8) -> u8 {
    match op {
        BPF_JGT => BPF_JLT,
        BPF_JLT => BPF_JGT,
        BPF_JGE => BPF_JLE,
        BPF_JLE => BPF_JGE,
        BPF_JSGT => BPF_JSLT,
        BPF_JSLT => BPF_JSGT,
        BPF_JSGE => BPF_JSLE,
        BPF_JSLE => BPF_JSGE,
        op => op,
    }
}

/// Sets the flags for `if d OP imm` (`test` for JSET, else `cmp`).
pub(super) fn compare_imm(a: &mut Asm, w: bool, d: u8, imm: i32, op: u8) {
    if op == BPF_JSET {
        a.test_ri(w, d, imm);
    } else {
        a.ri(7, w, d, imm);
    }
}

/// The inlined lookup at `pc`: (map index, key depth below r10).
pub(super) fn lookup_at(lookups: &[(usize, u32, u32)], pc: usize) -> Option<(u32, u32)> {
    lookups
        .binary_search_by_key(&pc, |l| l.0)
        .ok()
        .map(|k| (lookups[k].1, lookups[k].2))
}

/// `jne exit` after a `cmp byte [r12 + FAULTED], 0`.
pub(super) fn exits_on(a: &mut Asm, exits: &mut Vec<usize>) {
    exits.push(a.jcc(cc::NE));
}

/// Saves the caller-saved eBPF registers (r0-r5) around a call into Rust;
/// 48 bytes, so the stack stays 16-byte aligned.
pub(super) fn save(a: &mut Asm) {
    for r in [RAX, RDI, RSI, RDX, RCX, R8] {
        a.push(r);
    }
}

pub(super) fn restore(a: &mut Asm) {
    for r in [R8, RCX, RDX, RSI, RDI, RAX] {
        a.pop(r);
    }
}

/// `r11 = base + off`, then jumps (to be patched to the slow path) unless
/// `[r11, r11 + size)` lies in the packet.
pub(super) fn inline_check(a: &mut Asm, base: u8, off: i16, size: usize) -> [usize; 2] {
    a.lea(R11, base, off as i32);
    a.cmp_mem(R11, R12, META);
    let j1 = a.jcc(cc::B);
    // r11 <= data_end - size (not r11 + size <= data_end, which wraps).
    let idx = size.trailing_zeros() as i32;
    a.cmp_mem(R11, R12, LAST + 8 * idx);
    let j2 = a.jcc(cc::A);
    [j1, j2]
}
