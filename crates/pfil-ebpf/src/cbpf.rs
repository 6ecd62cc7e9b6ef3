//! Classic BPF (tcpdump's, `struct sock_filter`) to eBPF, as the kernel's
//! `bpf_convert_filter` does, so that libpcap's programs run on the same
//! engine (and JIT) as XDP programs.
//!
//! Mapping: A is r0, X is r7, the scratch words `M[0..16]` are the 64
//! bytes below r10, r1 holds the packet's start, r2 its end, r8 the
//! bytes at hand and r9 the length on the wire. Loads at constant offsets
//! compare `data + end` with the end pointer, as XDP programs do, so
//! that the verifier proves them (load with
//! [`LoadOptions::packet_args`](crate::LoadOptions::packet_args)). All arithmetic is 32-bit, as in classic BPF.
//! A packet load beyond the bytes at hand, a division by a zero X, make
//! the program return 0, as libpcap's interpreter does; shifts by 32 or
//! more give 0 (libpcap's `checked_shl` semantics, not x86's masking).
//!
//! Run the result with [`Program::run_packet`](crate::Program::run_packet)
//! (r1 = packet start, r2 = packet end, r3 = the length on the wire).

use crate::insn::*;

/// One classic-BPF instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CInsn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant.
    pub k: u32,
}

/// Where a pending jump goes.
#[derive(Clone, Copy)]
enum Target {
    /// The first eBPF instruction of a classic instruction.
    Classic(usize),
    /// The shared `return 0`.
    Zero,
}

/// Scratch word `i`'s offset from r10.
fn mem_off(i: u32) -> i16 {
    -64 + 4 * (i as i16 & 15)
}

struct Out {
    code: Vec<Insn>,
    /// (index of a jump, its target): `off` (or `imm` for JMP32 JA) fixed
    /// at the end.
    jumps: Vec<(usize, Target)>,
}

impl Out {
    fn push(&mut self, i: Insn) {
        self.code.push(i);
    }
    fn jump(&mut self, i: Insn, t: Target) {
        self.jumps.push((self.code.len(), t));
        self.code.push(i);
    }
}

/// The largest packet offset the verifier tracks (the kernel's
/// `MAX_PACKET_OFF`, `verify_state.rs`).
const MAX_PKT_OFF: u32 = 0xffff;

const A: u8 = 0;
const X: u8 = 7;
/// The packet's start: r1 as the program gets it (nothing is called,
/// so nothing clobbers it).
const PKT: u8 = 1;
const CAPLEN: u8 = 8;
/// The packet's end pointer, as [`Program::run_packet`](crate::Program::run_packet) passes it.
const PKT_END: u8 = 2;
const WIRELEN: u8 = 9;

fn alu32(op: u8, dst: u8, imm: i32) -> Insn {
    Insn::new(BPF_ALU | op | BPF_K, dst, 0, 0, imm)
}
fn alu32x(op: u8, dst: u8, src: u8) -> Insn {
    Insn::new(BPF_ALU | op | BPF_X, dst, src, 0, 0)
}
fn alu64(op: u8, dst: u8, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | op | BPF_K, dst, 0, 0, imm)
}
fn alu64x(op: u8, dst: u8, src: u8) -> Insn {
    Insn::new(BPF_ALU64 | op | BPF_X, dst, src, 0, 0)
}

/// Loads `size` bytes (1, 2, 4) at packet offset `r4` (a 64-bit register
/// holding an offset below 2^33) into `dst`, big-endian, or returns 0.
fn load_at_r4(o: &mut Out, dst: u8, size: usize) {
    // r5 = r4 + size; if r5 > caplen: return 0.
    o.push(alu64x(BPF_MOV, 5, 4));
    o.push(alu64(BPF_ADD, 5, size as i32));
    o.jump(
        Insn::new(BPF_JMP | BPF_JGT | BPF_X, 5, CAPLEN, 0, 0),
        Target::Zero,
    );
    o.push(alu64x(BPF_ADD, 4, PKT));
    load_bytes(o, dst, 4, 0, size);
}

/// Loads `size` bytes at packet offset `X + k` into A, or returns 0;
/// whether r4 holds `data + X` after it (on every path), as the bound of
/// X on the path that proves the load (`X <= 0xffff - k - size`).
///
/// Where `X + k` is below 64 KiB (every header of a packet that fits in
/// a frame) the load is `data + X` tested as a pointer against the
/// packet's end, as [`load_abs`] does: the verifier proves it and the
/// JIT emits no run-time check. The test `X > 0xffff - k - size` before
/// it, which sends larger offsets to [`load_at_r4`]'s checked load, is
/// decided by the verifier where X is bounded (`ldx 4*([k]&0xf)`), and
/// then neither it nor the checked load is emitted. `held`: r4 already
/// holds `data + X` with X at most this (an indirect load before this
/// one, X unchanged, no other way in), which is not computed again if
/// that bound is this load's or tighter: with a looser one, `data + X +
/// k + size` may pass 0xffff, past which a comparison with `data_end`
/// proves nothing (the kernel's rule, the verifier's).
fn load_ind(o: &mut Out, k: u32, size: usize, held: Option<u32>) -> Option<u32> {
    if k as usize + size > i16::MAX as usize {
        // r4 = X + k, both zero-extended: no overflow.
        o.push(alu32x(BPF_MOV, 4, X));
        o.push(alu32(BPF_MOV, 5, k as i32));
        o.push(alu64x(BPF_ADD, 4, 5));
        load_at_r4(o, A, size);
        return None;
    }
    let bound = MAX_PKT_OFF - size as u32 - k;
    let reuse = held.is_some_and(|b| b <= bound);
    // if X > MAX_PKT_OFF - k - size: the checked load below.
    let far = o.code.len();
    o.push(Insn::new(BPF_JMP | BPF_JGT | BPF_K, X, 0, 0, bound as i32));
    // r4 = data + X; if r4 + k + size > data_end: return 0.
    if !reuse {
        o.push(alu64x(BPF_MOV, 4, PKT));
        o.push(alu64x(BPF_ADD, 4, X));
    }
    o.push(alu64x(BPF_MOV, 5, 4));
    o.push(alu64(BPF_ADD, 5, (k as usize + size) as i32));
    o.jump(
        Insn::new(BPF_JMP | BPF_JGT | BPF_X, 5, PKT_END, 0, 0),
        Target::Zero,
    );
    load_bytes(o, A, 4, k as i16, size);
    let over = o.code.len();
    o.push(Insn::new(BPF_JMP | BPF_JA, 0, 0, 0, 0));
    o.code[far].off = (o.code.len() - far - 1) as i16;
    // r4 = X + k, both zero-extended: no overflow.
    o.push(alu32x(BPF_MOV, 4, X));
    o.push(alu32(BPF_MOV, 5, k as i32));
    o.push(alu64x(BPF_ADD, 4, 5));
    load_at_r4(o, A, size);
    // r4 = data + X, as on the other path.
    o.push(alu32x(BPF_MOV, 4, X));
    o.push(alu64x(BPF_ADD, 4, PKT));
    o.code[over].off = (o.code.len() - over - 1) as i16;
    Some(if reuse { held.unwrap_or(bound) } else { bound })
}

fn load_bytes(o: &mut Out, dst: u8, base: u8, off: i16, size: usize) {
    let sz = match size {
        1 => BPF_B,
        2 => BPF_H,
        _ => BPF_W,
    };
    o.push(Insn::new(BPF_LDX | BPF_MEM | sz, dst, base, off, 0));
    if size > 1 {
        o.push(Insn::new(
            BPF_ALU | BPF_END | BPF_X,
            dst,
            0,
            0,
            (size * 8) as i32,
        ));
    }
}

/// Loads `size` bytes at the constant packet offset `k`, or returns 0.
fn load_abs(o: &mut Out, dst: u8, k: u32, size: usize) {
    let end = k as u64 + size as u64;
    if end > i32::MAX as u64 {
        // Beyond any packet, but the code after must stay reachable.
        o.push(Insn::new(LDDW, 4, 0, 0, end as u32 as i32));
        o.push(Insn::new(0, 0, 0, 0, (end >> 32) as i32));
        o.jump(
            Insn::new(BPF_JMP | BPF_JGT | BPF_X, 4, CAPLEN, 0, 0),
            Target::Zero,
        );
    } else if end <= 0xffff {
        // if data + end > data_end: return 0 (the verifier then knows the
        // bytes are there, and the load needs no run-time check).
        o.push(alu64x(BPF_MOV, 4, PKT));
        o.push(alu64(BPF_ADD, 4, end as i32));
        o.jump(
            Insn::new(BPF_JMP | BPF_JGT | BPF_X, 4, PKT_END, 0, 0),
            Target::Zero,
        );
    } else {
        o.jump(
            Insn::new(BPF_JMP | BPF_JLT | BPF_K, CAPLEN, 0, 0, end as i32),
            Target::Zero,
        );
    }
    if k <= i16::MAX as u32 {
        load_bytes(o, dst, PKT, k as i16, size);
    } else if end <= 0xffff {
        o.push(alu64x(BPF_MOV, 4, PKT));
        o.push(alu64(BPF_ADD, 4, k as i32));
        load_bytes(o, dst, 4, 0, size);
    } else {
        // Past 0xffff no comparison proves packet bytes: `k + data`, a
        // number to the verifier, its load checked at run time (after
        // the test of the captured length above).
        o.push(alu64(BPF_MOV, 4, k as i32));
        o.push(alu64x(BPF_ADD, 4, PKT));
        load_bytes(o, dst, 4, 0, size);
    }
}

/// Converts a classic program (validated as libpcap's `bpf_validate`
/// does: known opcodes, forward jumps inside the program, scratch
/// indices below 16, no division by a constant zero, a return at the
/// end) to eBPF.
///
/// # Errors
///
/// An unknown opcode, a jump out of the program, or a program whose
/// eBPF form would need a jump longer than 32767 instructions.
pub fn convert(prog: &[CInsn]) -> Result<Vec<Insn>, String> {
    let n = prog.len();
    // Reachability: libpcap may leave dead code, which the eBPF verifier
    // (rightly) refuses; it is simply not emitted.
    let mut live = vec![false; n];
    if n > 0 {
        live[0] = true;
    }
    let tgt = |pc: usize, off: u64| -> Result<usize, String> {
        let t = pc as u64 + 1 + off;
        if t >= n as u64 {
            return Err(format!("instruction {pc}: jump out of the program"));
        }
        Ok(t as usize)
    };
    for pc in 0..n {
        if !live[pc] {
            continue;
        }
        let i = prog[pc];
        match i.code & 0x07 {
            0x05 if i.code & 0xf0 == 0x00 => live[tgt(pc, i.k as u64)?] = true,
            0x05 => {
                live[tgt(pc, i.jt as u64)?] = true;
                live[tgt(pc, i.jf as u64)?] = true;
            }
            0x06 => {}
            _ => {
                if pc + 1 >= n {
                    return Err(format!(
                        "instruction {pc}: the program does not end with a return"
                    ));
                }
                live[pc + 1] = true;
            }
        }
    }
    let uses_mem = prog.iter().enumerate().any(|(pc, i)| {
        live[pc]
            && matches!(
                (i.code & 0x07, i.code & 0xe0),
                (0x00 | 0x01, 0x60) | (0x02 | 0x03, _)
            )
    });
    let mut o = Out {
        code: Vec::new(),
        jumps: Vec::new(),
    };
    o.push(alu64x(BPF_MOV, CAPLEN, PKT_END));
    o.push(alu64x(BPF_SUB, CAPLEN, PKT));
    o.push(alu64x(BPF_MOV, WIRELEN, 3));
    o.push(alu64(BPF_MOV, A, 0));
    o.push(alu64(BPF_MOV, X, 0));
    if uses_mem {
        for k in 0..8 {
            o.push(Insn::new(BPF_ST | BPF_MEM | BPF_DW, 10, 0, -64 + 8 * k, 0));
        }
    }
    // Each instruction's predecessors: how many, and the last one seen
    // (the only one where there is one).
    let mut preds = vec![(0u32, usize::MAX); n];
    for pc in (0..n).filter(|&pc| live[pc]) {
        let i = prog[pc];
        let succ: [Option<usize>; 2] = match i.code & 0x07 {
            0x05 if i.code & 0xf0 == 0x00 => [Some(tgt(pc, i.k as u64)?), None],
            0x05 => {
                let (t, f) = (tgt(pc, i.jt as u64)?, tgt(pc, i.jf as u64)?);
                [Some(t), (f != t).then_some(f)]
            }
            0x06 => [None, None],
            _ => [Some(pc + 1), None],
        };
        for s in succ.into_iter().flatten() {
            preds[s] = (preds[s].0 + 1, pc);
        }
    }
    // Whether r4 holds `data + X` after each instruction (`load_ind`).
    let mut pkt_x: Vec<Option<u32>> = vec![None; n];
    // The most X can be after each instruction, where a load of a
    // constant or `4*([k]&0xf)` bounds it.
    let mut x_max: Vec<Option<u32>> = vec![None; n];
    let mut start = vec![usize::MAX; n];
    for pc in 0..n {
        if !live[pc] {
            continue;
        }
        let (np, from) = preds[pc];
        let pkt_x_in = if np == 1 { pkt_x[from] } else { None };
        let x_in = if np == 1 { x_max[from] } else { None };
        start[pc] = o.code.len();
        // Kept by what touches neither r4 nor X (loads into A other than
        // from the packet, stores, ALU, jumps, TXA); an indirect load
        // sets it below.
        let c = prog[pc].code;
        pkt_x[pc] = pkt_x_in.filter(|_| match c & 0x07 {
            0x00 => matches!(c & 0xe0, 0x00 | 0x60 | 0x80),
            0x02..=0x05 => true,
            0x07 => c & 0xf8 == 0x80,
            _ => false,
        });
        let i = prog[pc];
        let (c, k) = (i.code, i.k);
        x_max[pc] = match (c & 0x07, c & 0xe0) {
            (0x01, 0xa0) => Some(60),
            (0x01, 0x00) => Some(k),
            (0x01, _) => None,
            (0x07, _) if c & 0xf8 == 0x00 => None,
            _ => x_in,
        };
        let bad = || Err(format!("instruction {pc} ({c:#06x}): unknown opcode"));
        let size = match c & 0x18 {
            0x00 => 4,
            0x08 => 2,
            0x10 => 1,
            _ => 0,
        };
        match c & 0x07 {
            0x00 | 0x01 => {
                let dst = if c & 0x07 == 0 { A } else { X };
                match (c & 0x07, c & 0xe0) {
                    (0x00, 0x20) if size > 0 => load_abs(&mut o, A, k, size),
                    (0x00, 0x40) if size > 0 => {
                        // (r4's base is X: no more than X's bound.)
                        let held = pkt_x_in.map(|h| h.min(x_in.unwrap_or(u32::MAX)));
                        pkt_x[pc] = load_ind(&mut o, k, size, held);
                    }
                    (_, 0x00) => o.push(alu32(BPF_MOV, dst, k as i32)),
                    (_, 0x80) => o.push(alu32x(BPF_MOV, dst, WIRELEN)),
                    (_, 0x60) => {
                        o.push(Insn::new(BPF_LDX | BPF_MEM | BPF_W, dst, 10, mem_off(k), 0))
                    }
                    (0x01, 0xa0) => {
                        load_abs(&mut o, X, k, 1);
                        o.push(alu32(BPF_AND, X, 0xf));
                        o.push(alu32(BPF_LSH, X, 2));
                    }
                    _ => return bad(),
                }
            }
            0x02 => o.push(Insn::new(BPF_STX | BPF_MEM | BPF_W, 10, A, mem_off(k), 0)),
            0x03 => o.push(Insn::new(BPF_STX | BPF_MEM | BPF_W, 10, X, mem_off(k), 0)),
            0x04 => {
                let op = (c & 0xf0) as u8;
                let x = c & 0x08 != 0;
                match op {
                    BPF_NEG => o.push(alu32(BPF_NEG, A, 0)),
                    BPF_LSH | BPF_RSH if !x => {
                        if k >= 32 {
                            o.push(alu32(BPF_MOV, A, 0));
                        } else {
                            o.push(alu32(op, A, k as i32));
                        }
                    }
                    BPF_LSH | BPF_RSH => {
                        // if X >= 32: A = 0 else A op= X.
                        o.push(Insn::new(BPF_JMP32 | BPF_JGE | BPF_K, X, 0, 2, 32));
                        o.push(alu32x(op, A, X));
                        o.push(Insn::new(BPF_JMP | BPF_JA, 0, 0, 1, 0));
                        o.push(alu32(BPF_MOV, A, 0));
                    }
                    BPF_DIV | BPF_MOD if x => {
                        o.jump(
                            Insn::new(BPF_JMP32 | BPF_JEQ | BPF_K, X, 0, 0, 0),
                            Target::Zero,
                        );
                        o.push(alu32x(op, A, X));
                    }
                    BPF_ADD | BPF_SUB | BPF_MUL | BPF_DIV | BPF_OR | BPF_AND | BPF_MOD
                    | BPF_XOR => {
                        if x {
                            o.push(alu32x(op, A, X));
                        } else if matches!(op, BPF_DIV | BPF_MOD) && k == 0 {
                            return Err(format!("instruction {pc}: division by a constant zero"));
                        } else {
                            o.push(alu32(op, A, k as i32));
                        }
                    }
                    _ => return bad(),
                }
            }
            0x05 => {
                let op = (c & 0xf0) as u8;
                if op == BPF_JA {
                    o.jump(
                        Insn::new(BPF_JMP | BPF_JA, 0, 0, 0, 0),
                        Target::Classic(tgt(pc, k as u64)?),
                    );
                    continue;
                }
                if !matches!(op, BPF_JEQ | BPF_JGT | BPF_JGE | BPF_JSET) {
                    return bad();
                }
                let (t, f) = (tgt(pc, i.jt as u64)?, tgt(pc, i.jf as u64)?);
                let cmp = if c & 0x08 != 0 {
                    Insn::new(BPF_JMP32 | op | BPF_X, A, X, 0, 0)
                } else {
                    Insn::new(BPF_JMP32 | op | BPF_K, A, 0, 0, k as i32)
                };
                if t == f {
                    o.jump(Insn::new(BPF_JMP | BPF_JA, 0, 0, 0, 0), Target::Classic(t));
                    continue;
                }
                // `if A op v goto next else goto f` is one inverted jump.
                let inverse = match op {
                    BPF_JEQ => Some(BPF_JNE),
                    BPF_JGT => Some(BPF_JLE),
                    BPF_JGE => Some(BPF_JLT),
                    _ => None,
                };
                if let (true, Some(inv)) = (t == pc + 1, inverse) {
                    o.jump(
                        Insn {
                            code: (cmp.code & !0xf0) | inv,
                            ..cmp
                        },
                        Target::Classic(f),
                    );
                    continue;
                }
                o.jump(cmp, Target::Classic(t));
                if f != pc + 1 {
                    o.jump(Insn::new(BPF_JMP | BPF_JA, 0, 0, 0, 0), Target::Classic(f));
                }
            }
            0x06 => {
                match c & 0x18 {
                    0x00 => o.push(alu32(BPF_MOV, A, k as i32)),
                    0x10 => o.push(alu32x(BPF_MOV, A, A)),
                    _ => return bad(),
                }
                o.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
            }
            _ => match c & 0xf8 {
                0x00 => o.push(alu32x(BPF_MOV, X, A)),
                0x80 => o.push(alu32x(BPF_MOV, A, X)),
                _ => return bad(),
            },
        }
    }
    // The shared `return 0`, if anything jumps to it.
    let zero = o.code.len();
    if o.jumps.iter().any(|(_, t)| matches!(t, Target::Zero)) {
        o.push(alu64(BPF_MOV, A, 0));
        o.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    }
    for &(at, t) in &o.jumps {
        let to = match t {
            Target::Classic(pc) => start[pc],
            Target::Zero => zero,
        };
        let rel = to as i64 - at as i64 - 1;
        o.code[at].off = i16::try_from(rel).map_err(|_| {
            format!(
                "program too long for eBPF jumps ({} instructions)",
                o.code.len()
            )
        })?;
    }
    Ok(o.code)
}
