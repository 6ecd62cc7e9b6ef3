//! The JIT's arithmetic: one eBPF ALU instruction to x86-64.

use crate::insn::*;
use crate::x86::{cc, reg::*, Asm};

/// Arithmetic.
pub(super) fn alu(a: &mut Asm, i: &Insn, d: u8, s: u8, x: bool) {
    let w = i.class() == BPF_ALU64;
    let op = i.op();
    match op {
        BPF_MOV => match (x, i.off) {
            (true, 0) => a.rr(0x89, w, d, s),
            (true, bits) => a.movsx(w, d, s, bits as u8),
            (false, _) if w => a.mov_imm64(d, i.imm as i64 as u64),
            (false, _) => a.mov_imm32(d, i.imm as u32),
        },
        BPF_ADD | BPF_SUB | BPF_OR | BPF_AND | BPF_XOR => {
            let (opc, ext) = match op {
                BPF_ADD => (0x01, 0),
                BPF_SUB => (0x29, 5),
                BPF_OR => (0x09, 1),
                BPF_AND => (0x21, 4),
                _ => (0x31, 6),
            };
            if x {
                a.rr(opc, w, d, s);
            } else {
                a.ri(ext, w, d, i.imm);
            }
        }
        BPF_MUL => {
            if x {
                a.imul(w, d, s);
            } else {
                a.mov_imm64(R11, i.imm as i64 as u64);
                a.imul(w, d, R11);
            }
        }
        BPF_NEG => a.unary(3, w, d),
        BPF_LSH | BPF_RSH | BPF_ARSH => {
            let ext = match op {
                BPF_LSH => 4,
                BPF_RSH => 5,
                _ => 7,
            };
            if !x {
                a.shift_i(ext, w, d, (i.imm as u8) & if w { 63 } else { 31 });
            } else if s == RCX {
                a.shift_cl(ext, w, d);
            } else {
                a.rr(0x89, true, R11, RCX);
                a.rr(0x89, true, RCX, s);
                if d == RCX {
                    a.shift_cl(ext, w, R11);
                    a.rr(0x89, true, RCX, R11);
                } else {
                    a.shift_cl(ext, w, d);
                    a.rr(0x89, true, RCX, R11);
                }
            }
        }
        BPF_DIV | BPF_MOD => divide(
            a,
            w,
            op == BPF_DIV,
            i.off == 1,
            d,
            if x { Some(s) } else { None },
            i.imm,
        ),
        _ => {
            // BPF_END
            let swap = w || x;
            match (i.imm, swap) {
                (16, false) => a.movzx16(d, d),
                (32, false) => a.rr(0x89, false, d, d),
                (16, true) => {
                    a.rol16_8(d);
                    a.movzx16(d, d);
                }
                (32, true) => a.bswap(false, d),
                (64, true) => a.bswap(true, d),
                _ => {}
            }
        }
    }
}

/// Division and remainder with eBPF's rules for zero and `INT_MIN / -1`.
fn divide(a: &mut Asm, w: bool, div: bool, signed: bool, d: u8, src: Option<u8>, imm: i32) {
    match src {
        Some(s) => a.rr(0x89, true, R11, s),
        None if w => a.mov_imm64(R11, imm as i64 as u64),
        None => a.mov_imm32(R11, imm as u32),
    }
    a.rr(0x85, w, R11, R11);
    let nonzero = a.jcc(cc::NE);
    if div {
        a.rr(0x31, false, d, d);
    } else if !w {
        a.rr(0x89, false, d, d);
    }
    let mut done = vec![a.jmp()];
    let p = a.pos();
    a.patch(nonzero, p);
    if signed {
        a.ri(7, w, R11, -1);
        let not_minus_one = a.jcc(cc::NE);
        if div {
            a.unary(3, w, d);
        } else {
            a.rr(0x31, false, d, d);
        }
        done.push(a.jmp());
        let p = a.pos();
        a.patch(not_minus_one, p);
    }
    a.push(RAX);
    a.push(RDX);
    if d != RAX {
        a.rr(0x89, true, RAX, d);
    }
    if signed {
        a.cqo(w);
    } else {
        a.rr(0x31, false, RDX, RDX);
    }
    a.unary(if signed { 7 } else { 6 }, w, R11);
    a.rr(0x89, true, R11, if div { RAX } else { RDX });
    a.pop(RDX);
    a.pop(RAX);
    a.rr(0x89, w, d, R11);
    let p = a.pos();
    for j in done {
        a.patch(j, p);
    }
}
