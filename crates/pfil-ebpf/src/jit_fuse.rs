//! The JIT's fusions: short sequences of a verified program it emits as
//! fewer x86 instructions (two byte loads as one 16-bit load, a load and
//! a compare with swapped bytes, flags or-ed and tested, a flag set by a
//! jump as `setcc`, a load-add-store as one `add`), each recognised only
//! where no jump lands inside and the accesses cannot fault (the facts
//! of [`Plan`]).

use crate::insn::*;
use crate::jit_plan::Plan;
use crate::verify::Access;

/// Two byte loads from `p + k` and `p + k + 1` built into one 16-bit
/// little-endian value `a = b[k + 1] << 8 | b[k]` (the EtherType as
/// xdp-filter reads it), in either order, at `pc`: `(a, b, p, k)`,
/// `b` the register the low byte was loaded into. Both accesses need no
/// run-time check (proven, or the stack), so neither can fault.
pub(crate) fn byte_pair(
    insns: &[Insn],
    pc: usize,
    access: &[Access],
    plan: &Plan,
) -> Option<(u8, u8, u8, i16)> {
    let w = insns.get(pc..pc + 4)?;
    if !plan.plain_run(pc, 4) {
        return None;
    }
    let byte = |i: &Insn, q: usize| {
        i.code == BPF_LDX | BPF_MEM | BPF_B
            && (i.src == 10 || matches!(access.get(q), Some(Access::Value | Access::Packet)))
    };
    let lsh8 = |i: &Insn, a: u8| {
        matches!(i.class(), BPF_ALU | BPF_ALU64)
            && i.op() == BPF_LSH
            && i.code & BPF_X == 0
            && i.dst == a
            && i.imm == 8
            && i.off == 0
    };
    let or = |i: &Insn, a: u8, b: u8| {
        matches!(i.class(), BPF_ALU | BPF_ALU64)
            && i.op() == BPF_OR
            && i.code & BPF_X != 0
            && i.dst == a
            && i.src == b
            && i.off == 0
    };
    // a = b[k + 1]; a <<= 8; b = b[k]; a |= b
    let (hi, lo, lsh) = if byte(&w[0], pc) && byte(&w[2], pc + 2) {
        (&w[0], &w[2], &w[1])
    } else if byte(&w[0], pc) && byte(&w[1], pc + 1) {
        // b = b[k]; a = b[k + 1]; a <<= 8; a |= b
        (&w[1], &w[0], &w[2])
    } else {
        return None;
    };
    let (a, b, p) = (hi.dst, lo.dst, hi.src);
    let ok = lo.src == p
        && a != b
        && a != p
        && b != p
        && i32::from(hi.off) == i32::from(lo.off) + 1
        && lsh8(lsh, a)
        && or(&w[3], a, b);
    ok.then_some((a, b, p, lo.off))
}

/// `d = be16 d` at `pc` right after `d = *(u16 *)(p + k)` (so d's high
/// bits are zero), followed (the next instruction emitted, at the pc
/// returned) by `if d == k`, `!= k` or `& k` with
/// `0 <= k <= 0xffff` (not a jump the verifier decided), nothing jumping
/// onto either, `d` read by nothing after: the loaded value compared with
/// `k`'s bytes swapped is the same test (`d` is never swapped).
pub(crate) fn swapped_compare(
    insns: &[Insn],
    pc: usize,
    plan: &Plan,
    decided: &[(usize, bool)],
) -> Option<usize> {
    let q = plan.next_emitted(pc);
    let (Some(i), Some(j)) = (insns.get(pc), insns.get(q)) else {
        return None;
    };
    (pc > 0
        && i.code == BPF_ALU | BPF_END | BPF_X
        && i.imm == 16
        && insns[pc - 1].code == BPF_LDX | BPF_MEM | BPF_H
        && insns[pc - 1].dst == i.dst
        && plan.reach[pc - 1]
        && !plan.skip[pc - 1]
        && !plan.skip[pc]
        && !plan.target[pc]
        && (pc + 1..=q).all(|x| !plan.target[x])
        && matches!(j.class(), BPF_JMP | BPF_JMP32)
        && matches!(j.op(), BPF_JEQ | BPF_JNE | BPF_JSET)
        && j.code & BPF_X == 0
        && j.dst == i.dst
        && (0..=0xffff).contains(&j.imm)
        && decided.binary_search_by_key(&q, |d| d.0).is_err()
        && plan.dead_after(q, i.dst))
    .then_some(q)
}

/// Two flags or'ed and tested, at `pc` (clang's form of `if (t == A ||
/// t == B)`, xdp-filter's VLAN test):
///
/// ```text
/// pc:     a = 1
/// pc+1:   b = 1
/// pc+2:   if c1 goto +1      b = c1
/// pc+3:   b = 0
/// pc+4:   if c2 goto +1      a = c2
/// pc+5:   a = 0
/// pc+6:   a |= b
///         (at most two register instructions that neither read a or b
///          nor write an operand of c1 or c2)
/// e:      if a != 1 goto T   (or == 0: neither; == 1, != 0: either)
/// ```
///
/// with `a` read by nothing after `e`, `b` by nothing after `pc+6`, no
/// jump landing inside but the pattern's own, none of its jumps decided
/// by the verifier: `(e, either)`. Emitted as the instructions between,
/// then `c1 -> L; !c2 -> T; L:` (neither) or `c1 -> T; c2 -> T`.
pub(crate) fn or_flags(
    insns: &[Insn],
    pc: usize,
    plan: &Plan,
    decided: &[(usize, bool)],
) -> Option<(usize, bool)> {
    let w = insns.get(pc..pc + 7)?;
    let mov = |m: &Insn, r: u8, v: i32| {
        (m.code == BPF_ALU64 | BPF_MOV | BPF_K || m.code == BPF_ALU | BPF_MOV | BPF_K)
            && m.off == 0
            && m.dst == r
            && m.imm == v
    };
    let (a, b) = (w[0].dst, w[1].dst);
    let flag_jump = |j: &Insn| {
        matches!(j.class(), BPF_JMP | BPF_JMP32)
            && !matches!(j.op(), BPF_JA | BPF_CALL | BPF_EXIT)
            && j.off == 1
            && j.dst != a
            && j.dst != b
            && (j.code & BPF_X == 0 || (j.src != a && j.src != b && j.src < 10))
    };
    let or = (w[6].code == BPF_ALU64 | BPF_OR | BPF_X || w[6].code == BPF_ALU | BPF_OR | BPF_X)
        && w[6].dst == a
        && w[6].src == b;
    if a == b
        || a >= 10
        || b >= 10
        || !mov(&w[0], a, 1)
        || !mov(&w[1], b, 1)
        || !flag_jump(&w[2])
        || !mov(&w[3], b, 0)
        || !flag_jump(&w[4])
        || !mov(&w[5], a, 0)
        || !or
    {
        return None;
    }
    // The compares' operands, which the instructions between must keep.
    let mut operands = 0u16;
    for j in [&w[2], &w[4]] {
        operands |= 1 << j.dst;
        if j.code & BPF_X != 0 {
            operands |= 1 << j.src;
        }
    }
    let mut e = pc + 7;
    while e < pc + 10 {
        let i = insns.get(e)?;
        if matches!(i.class(), BPF_JMP | BPF_JMP32) {
            break;
        }
        let x = i.code & BPF_X != 0;
        let plain = matches!(i.class(), BPF_ALU | BPF_ALU64)
            && i.op() != BPF_END
            && i.dst < 10
            && i.dst != a
            && operands & (1 << i.dst) == 0
            && (!x || (i.src != a && i.src != b && i.src <= 10));
        if !plain {
            return None;
        }
        e += 1;
    }
    let j = insns.get(e)?;
    let test = matches!(j.class(), BPF_JMP | BPF_JMP32)
        && j.code & BPF_X == 0
        && j.dst == a
        && matches!((j.op(), j.imm), (BPF_JNE | BPF_JEQ, 0 | 1));
    if !test {
        return None;
    }
    let either = matches!((j.op(), j.imm), (BPF_JEQ, 1) | (BPF_JNE, 0));
    let undecided = [pc + 2, pc + 4, e]
        .iter()
        .all(|q| decided.binary_search_by_key(q, |d| d.0).is_err());
    let emitted = (pc..=e).all(|q| plan.reach[q] && !plan.skip[q]);
    if !undecided || !emitted || !plan.dead_after(e, a) || !plan.dead_after(pc + 6, b) {
        return None;
    }
    // No jump lands inside but the pattern's own (pc+2 onto pc+4, pc+4
    // onto pc+6): every jump of the program looked at, where the plan's
    // targets say one lands.
    if (pc + 1..=e).any(|q| plan.target[q] && q != pc + 4 && q != pc + 6) {
        return None;
    }
    let lands_inside = |q: usize, i: &Insn| {
        if !matches!(i.class(), BPF_JMP | BPF_JMP32) || matches!(i.op(), BPF_CALL | BPF_EXIT) {
            return false;
        }
        let off = if i.class() == BPF_JMP32 && i.op() == BPF_JA {
            i.imm as i64
        } else {
            i.off as i64
        };
        let t = q as i64 + 1 + off;
        q != pc + 2 && q != pc + 4 && (pc as i64 + 1..=e as i64).contains(&t)
    };
    if insns
        .iter()
        .enumerate()
        .any(|(q, i)| plan.reach[q] && lands_inside(q, i))
    {
        return None;
    }
    Some((e, either))
}

/// `x = 1; if c goto +1; x = 0` at `pc`, nothing jumping between, `x`
/// no operand of the comparison: `x = c` (the JIT's `setcc`).
pub(crate) fn set_flag(insns: &[Insn], pc: usize, plan: &Plan, decided: &[(usize, bool)]) -> bool {
    let (Some(i), Some(j), Some(k)) = (insns.get(pc), insns.get(pc + 1), insns.get(pc + 2)) else {
        return false;
    };
    let mov = |m: &Insn, v: i32| {
        (m.code == BPF_ALU64 | BPF_MOV | BPF_K || m.code == BPF_ALU | BPF_MOV | BPF_K)
            && m.off == 0
            && m.imm == v
    };
    let x = i.dst;
    let operand = j.dst == x || (j.code & BPF_X != 0 && j.src == x);
    mov(i, 1)
        && mov(k, 0)
        && k.dst == x
        && matches!(j.class(), BPF_JMP | BPF_JMP32)
        && !matches!(j.op(), BPF_JA | BPF_CALL | BPF_EXIT)
        && j.off == 1
        && !operand
        && x != 10
        && plan.plain_run(pc, 3)
        // A jump the verifier decided compares nothing: its operands'
        // definitions may not be emitted (found with a folded `.rodata`
        // setting), so the flag is not computed from them.
        && decided.binary_search_by_key(&(pc + 1), |d| d.0).is_err()
}

/// `d = *(p + k); r0 = d` at `pc` with `d` read on no path after, the
/// load needing no run-time check (the stack, a proven packet or map
/// value access), nothing jumping onto the copy: one load into r0.
pub(crate) fn load_to_r0(insns: &[Insn], pc: usize, access: &[Access], plan: &Plan) -> bool {
    let (Some(i), Some(j)) = (insns.get(pc), insns.get(pc + 1)) else {
        return false;
    };
    matches!(i.code & 0xe0, BPF_MEM | BPF_MEMSX)
        && i.class() == BPF_LDX
        && (i.src == 10 || matches!(access.get(pc), Some(Access::Value | Access::Packet)))
        && j.code == BPF_ALU64 | BPF_MOV | BPF_X
        && j.off == 0
        && j.dst == 0
        && j.src == i.dst
        && i.dst != 0
        && plan.plain_run(pc, 2)
        && plan.dead_after(pc + 1, i.dst)
}

/// `x = imm; if y OP x goto` (or `if x OP y`) with `x` read on no path
/// after the jump: `(y, imm, swapped)` to compare `y` with the immediate
/// (`swapped`: x was the left operand, the condition is mirrored).
pub(crate) fn imm_compare(insns: &[Insn], pc: usize, plan: &Plan) -> Option<(u8, i32, bool)> {
    let (i, j) = (insns.get(pc)?, insns.get(pc + 1)?);
    let x = i.dst;
    let ok = i.code == BPF_ALU64 | BPF_MOV | BPF_K
        && i.off == 0
        && matches!(j.class(), BPF_JMP | BPF_JMP32)
        && j.code & BPF_X != 0
        && !matches!(j.op(), BPF_JA | BPF_CALL | BPF_EXIT)
        && j.dst != j.src
        && (j.dst == x || j.src == x)
        && plan.plain_run(pc, 2)
        && plan.dead_after(pc + 1, x);
    let pair = if j.src == x {
        (j.dst, i.imm, false)
    } else {
        (j.src, i.imm, true)
    };
    ok.then_some(pair)
}

/// Whether `pc` starts a load, add, store of one proven 8-byte word
/// with nothing jumping between.
pub(crate) fn rmw_at(insns: &[Insn], pc: usize, access: &[Access], plan: &Plan) -> bool {
    let (Some(i), Some(j), Some(k)) = (insns.get(pc), insns.get(pc + 1), insns.get(pc + 2)) else {
        return false;
    };
    let proven = |pc: usize| matches!(access.get(pc), Some(Access::Value | Access::Packet));
    i.code == BPF_LDX | BPF_MEM | BPF_DW
        && i.src != i.dst
        && i.src != 10
        && proven(pc)
        && (j.code == BPF_ALU64 | BPF_ADD | BPF_K
            || (j.code == BPF_ALU64 | BPF_ADD | BPF_X && j.src != i.dst))
        && j.dst == i.dst
        && k.code == BPF_STX | BPF_MEM | BPF_DW
        && k.dst == i.src
        && k.off == i.off
        && k.src == i.dst
        && proven(pc + 2)
        && !plan.target[pc + 1]
        && !plan.target[pc + 2]
        && !plan.skip[pc + 1]
        && !plan.skip[pc + 2]
}

#[cfg(test)]
#[path = "jit_fuse_tests.rs"]
mod fuse_tests;
