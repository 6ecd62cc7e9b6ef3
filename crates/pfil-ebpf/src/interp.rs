//! The interpreter: the reference semantics of the engine.
//!
//! Every memory access is checked against the run's regions
//! ([`Env`]); division by zero follows eBPF (quotient 0, remainder the
//! dividend); every anomaly is a [`Fault`], never a panic.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::env::{Env, CTX_SIZE, MAX_FRAMES, STACK_FRAME};
use crate::insn::*;
use crate::{Fault, Program};

/// A caller's state saved by a bpf-to-bpf call.
#[derive(Clone, Copy, Default)]
struct Frame {
    ret: usize,
    saved: [u64; 4],
    fp: u64,
}

/// Reads `size` bytes at `addr` from a region, or the context.
#[inline]
pub(crate) fn load(env: &Env, pc: usize, addr: u64, size: usize) -> Result<u64, Fault> {
    if env.find(addr, size as u64).is_some() {
        // SAFETY: `find` proved `[addr, addr + size)` inside a region of
        // the run (see `Env::check`); unaligned reads are allowed.
        return Ok(unsafe {
            match size {
                1 => (addr as *const u8).read() as u64,
                2 => (addr as *const u16).read_unaligned() as u64,
                4 => (addr as *const u32).read_unaligned() as u64,
                _ => (addr as *const u64).read_unaligned(),
            }
        });
    }
    if env.in_ctx(addr, size as u64) {
        return load_ctx(env, pc, addr, size);
    }
    Err(Fault::OutOfBounds {
        pc,
        addr,
        len: size as u32,
        write: false,
    })
}

/// The kernel's context conversion: `data`, `data_end` and `data_meta`
/// (offsets 0, 4, 8, 4-byte loads) read as the 64-bit host pointers;
/// `ingress_ifindex` and `rx_queue_index` (12, 16) as stored. Any other
/// read of the context (a part of a field, `egress_ifindex`, a pointer
/// to it the verifier did not know for one) faults, as the kernel's
/// verifier refuses it.
#[cold]
fn load_ctx(env: &Env, pc: usize, addr: u64, size: usize) -> Result<u64, Fault> {
    let off = addr.wrapping_sub(env.ctx_addr());
    match (off, size) {
        (0, 4) => Ok(env.data),
        (4, 4) => Ok(env.data_end),
        (8, 4) => Ok(env.meta),
        (12 | 16, 4) if off + size as u64 <= CTX_SIZE as u64 => {
            // SAFETY: `[addr, addr + 4)` lies inside the context, which
            // the `Env` owns.
            Ok(unsafe { (addr as *const u32).read_unaligned() as u64 })
        }
        _ => Err(Fault::Context {
            pc,
            off: off as u32,
            len: size as u8,
        }),
    }
}

/// A context field the verifier found read through the context: the
/// packet pointers for 4-byte loads at 0, 4, 8, else the stored field
/// (the verifier allowed only those).
#[inline]
pub(crate) fn ctx_field(env: &Env, off: u64, size: usize) -> u64 {
    match off {
        0 => env.data,
        4 => env.data_end,
        8 => env.meta,
        _ => {
            let addr = env.ctx_addr() + off.min(CTX_SIZE as u64 - size as u64);
            // SAFETY: `[addr, addr + size)` lies inside the context (the
            // offset is clamped to it), which the `Env` owns.
            unsafe {
                match size {
                    1 => (addr as *const u8).read() as u64,
                    2 => (addr as *const u16).read_unaligned() as u64,
                    4 => (addr as *const u32).read_unaligned() as u64,
                    _ => (addr as *const u64).read_unaligned(),
                }
            }
        }
    }
}

/// Writes the low `size` bytes of `v` at `addr` in a writable region.
#[inline]
pub(crate) fn store(env: &Env, pc: usize, addr: u64, size: usize, v: u64) -> Result<(), Fault> {
    if env.find(addr, size as u64) == Some(true) {
        // SAFETY: `find` proved `[addr, addr + size)` inside a writable
        // region of the run.
        unsafe {
            match size {
                1 => (addr as *mut u8).write(v as u8),
                2 => (addr as *mut u16).write_unaligned(v as u16),
                4 => (addr as *mut u32).write_unaligned(v as u32),
                _ => (addr as *mut u64).write_unaligned(v),
            }
        }
        return Ok(());
    }
    Err(Fault::OutOfBounds {
        pc,
        addr,
        len: size as u32,
        write: true,
    })
}

/// An atomic read-modify-write (`STX | ATOMIC`); returns the old value.
pub(crate) fn atomic(
    env: &Env,
    pc: usize,
    insn: &Insn,
    addr: u64,
    src: u64,
    r0: u64,
) -> Result<u64, Fault> {
    let size = insn.size();
    if env.find(addr, size as u64) != Some(true) {
        return Err(Fault::OutOfBounds {
            pc,
            addr,
            len: size as u32,
            write: true,
        });
    }
    if addr % size as u64 != 0 {
        return Err(Fault::Misaligned { pc, addr });
    }
    let op = insn.imm;
    let o = Ordering::SeqCst;
    if size == 8 {
        // SAFETY: the 8 bytes lie in a writable region of the run and are
        // 8-aligned; other workers only ever access them atomically or
        // through programs of their own (the kernel's model for maps).
        let a = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
        Ok(match op & !BPF_FETCH {
            x if x == BPF_ADD as i32 => a.fetch_add(src, o),
            x if x == BPF_OR as i32 => a.fetch_or(src, o),
            x if x == BPF_AND as i32 => a.fetch_and(src, o),
            x if x == BPF_XOR as i32 => a.fetch_xor(src, o),
            0xe0 => a.swap(src, o),
            _ => match a.compare_exchange(r0, src, o, o) {
                Ok(v) | Err(v) => v,
            },
        })
    } else {
        // SAFETY: as above, 4 bytes, 4-aligned.
        let a = unsafe { AtomicU32::from_ptr(addr as *mut u32) };
        let s = src as u32;
        Ok(match op & !BPF_FETCH {
            x if x == BPF_ADD as i32 => a.fetch_add(s, o),
            x if x == BPF_OR as i32 => a.fetch_or(s, o),
            x if x == BPF_AND as i32 => a.fetch_and(s, o),
            x if x == BPF_XOR as i32 => a.fetch_xor(s, o),
            0xe0 => a.swap(s, o),
            _ => match a.compare_exchange(r0 as u32, s, o, o) {
                Ok(v) | Err(v) => v,
            },
        } as u64)
    }
}

/// An ALU instruction's result (not `BPF_END`) from its destination's
/// value and its source register's (read by the `X` forms only); `None`
/// for an operation that does not exist. The verifier folds constants
/// with it, so the two agree by construction.
#[inline]
pub(crate) fn alu(insn: &Insn, dst: u64, src: u64) -> Option<u64> {
    let op = insn.code & 0xf0;
    let src = if insn.code & BPF_X != 0 {
        src
    } else if insn.class() == BPF_ALU64 {
        insn.imm as i64 as u64
    } else {
        insn.imm as u32 as u64
    };
    if insn.class() == BPF_ALU64 {
        alu64(op, insn.off, dst, src)
    } else {
        alu32(op, insn.off, dst as u32, src as u32).map(u64::from)
    }
}

/// 64-bit arithmetic; `None` for an operation that does not exist.
#[inline]
fn alu64(op: u8, off: i16, dst: u64, src: u64) -> Option<u64> {
    Some(match op {
        BPF_ADD => dst.wrapping_add(src),
        BPF_SUB => dst.wrapping_sub(src),
        BPF_MUL => dst.wrapping_mul(src),
        BPF_DIV if off == 1 => {
            if src == 0 {
                0
            } else {
                (dst as i64).wrapping_div(src as i64) as u64
            }
        }
        BPF_DIV => dst.checked_div(src).unwrap_or(0),
        BPF_MOD if off == 1 => {
            if src == 0 {
                dst
            } else {
                (dst as i64).wrapping_rem(src as i64) as u64
            }
        }
        BPF_MOD => dst.checked_rem(src).unwrap_or(dst),
        BPF_OR => dst | src,
        BPF_AND => dst & src,
        BPF_LSH => dst << (src & 63),
        BPF_RSH => dst >> (src & 63),
        BPF_NEG => (dst as i64).wrapping_neg() as u64,
        BPF_XOR => dst ^ src,
        BPF_MOV => match off {
            8 => src as i8 as i64 as u64,
            16 => src as i16 as i64 as u64,
            32 => src as i32 as i64 as u64,
            _ => src,
        },
        BPF_ARSH => ((dst as i64) >> (src & 63)) as u64,
        _ => return None,
    })
}

/// 32-bit arithmetic (the result is zero-extended).
#[inline]
fn alu32(op: u8, off: i16, dst: u32, src: u32) -> Option<u32> {
    Some(match op {
        BPF_ADD => dst.wrapping_add(src),
        BPF_SUB => dst.wrapping_sub(src),
        BPF_MUL => dst.wrapping_mul(src),
        BPF_DIV if off == 1 => {
            if src == 0 {
                0
            } else {
                (dst as i32).wrapping_div(src as i32) as u32
            }
        }
        BPF_DIV => dst.checked_div(src).unwrap_or(0),
        BPF_MOD if off == 1 => {
            if src == 0 {
                dst
            } else {
                (dst as i32).wrapping_rem(src as i32) as u32
            }
        }
        BPF_MOD => dst.checked_rem(src).unwrap_or(dst),
        BPF_OR => dst | src,
        BPF_AND => dst & src,
        BPF_LSH => dst << (src & 31),
        BPF_RSH => dst >> (src & 31),
        BPF_NEG => (dst as i32).wrapping_neg() as u32,
        BPF_XOR => dst ^ src,
        BPF_MOV => match off {
            8 => src as i8 as i32 as u32,
            16 => src as i16 as i32 as u32,
            _ => src,
        },
        BPF_ARSH => ((dst as i32) >> (src & 31)) as u32,
        _ => return None,
    })
}

/// Byte swaps: `TO_LE` (a truncation on this little-endian host),
/// `TO_BE`, and the ALU64 unconditional `BSWAP`.
#[inline]
fn endian(class: u8, src_bit: u8, imm: i32, v: u64) -> Option<u64> {
    let swap = class == BPF_ALU64 || src_bit == BPF_X;
    Some(match (imm, swap) {
        (16, false) => v & 0xffff,
        (32, false) => v & 0xffff_ffff,
        (64, false) => v,
        (16, true) => (v as u16).swap_bytes() as u64,
        (32, true) => (v as u32).swap_bytes() as u64,
        (64, true) => v.swap_bytes(),
        _ => return None,
    })
}

/// Whether the conditional jump `insn` is taken, from its destination's
/// value and its source register's (read by the `X` forms only); `None`
/// for an operation that does not exist. The verifier decides jumps on
/// known values with it.
#[inline]
pub(crate) fn branch(insn: &Insn, dst: u64, src: u64) -> Option<bool> {
    let b = if insn.code & BPF_X != 0 {
        src
    } else {
        insn.imm as i64 as u64
    };
    cond(insn.code & 0xf0, insn.class() == BPF_JMP, dst, b)
}

/// Evaluates a conditional jump's condition; `None` for a bad operation.
#[inline]
fn cond(op: u8, wide: bool, a: u64, b: u64) -> Option<bool> {
    let (a, b, sa, sb) = if wide {
        (a, b, a as i64, b as i64)
    } else {
        (
            a as u32 as u64,
            b as u32 as u64,
            a as i32 as i64,
            b as i32 as i64,
        )
    };
    Some(match op {
        BPF_JEQ => a == b,
        BPF_JGT => a > b,
        BPF_JGE => a >= b,
        BPF_JSET => a & b != 0,
        BPF_JNE => a != b,
        BPF_JSGT => sa > sb,
        BPF_JSGE => sa >= sb,
        BPF_JLT => a < b,
        BPF_JLE => a <= b,
        BPF_JSLT => sa < sb,
        BPF_JSLE => sa <= sb,
        _ => return None,
    })
}

/// Runs `prog` from pc 0 with r1-r3 = `args`; returns r0.
pub(crate) fn run_with(prog: &Program, env: &mut Env, args: [u64; 3]) -> Result<u64, Fault> {
    let insns = &prog.insns[..];
    let mut reg = [0u64; 11];
    reg[1..4].copy_from_slice(&args);
    reg[10] = env.stack_top();
    let mut frames = [Frame::default(); MAX_FRAMES];
    let mut depth = 0usize;
    let mut budget = prog.max_insns;
    let counted = prog.counted;
    let mut pc = 0usize;
    loop {
        let Some(&insn) = insns.get(pc) else {
            return Err(Fault::PcOutOfRange { pc });
        };
        if counted {
            let cost = prog.loop_cost.get(pc).copied().unwrap_or(0) as u64;
            if cost != 0 {
                if budget < cost {
                    return Err(Fault::Budget { pc });
                }
                budget -= cost;
            }
        }
        let dst = insn.dst as usize;
        let srcr = insn.src as usize;
        if dst > 10 || srcr > 10 {
            return Err(Fault::InvalidInsn { pc });
        }
        let class = insn.class();
        let mut next = pc + 1;
        match class {
            BPF_ALU | BPF_ALU64 => {
                let op = insn.op();
                if op == BPF_END {
                    let v = endian(class, insn.code & BPF_X, insn.imm, reg[dst])
                        .ok_or(Fault::InvalidInsn { pc })?;
                    reg[dst] = v;
                } else {
                    reg[dst] = alu(&insn, reg[dst], reg[srcr]).ok_or(Fault::InvalidInsn { pc })?;
                }
                if dst == 10 {
                    return Err(Fault::InvalidInsn { pc });
                }
            }
            BPF_JMP | BPF_JMP32 => {
                let op = insn.op();
                match op {
                    BPF_JA => {
                        let off = if class == BPF_JMP32 {
                            insn.imm as i64
                        } else {
                            insn.off as i64
                        };
                        next = jump(pc, off)?;
                    }
                    BPF_CALL if class == BPF_JMP => {
                        if insn.src == PSEUDO_CALL {
                            if depth + 1 >= MAX_FRAMES {
                                return Err(Fault::CallDepth { pc });
                            }
                            frames[depth] = Frame {
                                ret: pc + 1,
                                saved: [reg[6], reg[7], reg[8], reg[9]],
                                fp: reg[10],
                            };
                            depth += 1;
                            reg[10] -= STACK_FRAME as u64;
                            next = jump(pc, insn.imm as i64)?;
                        } else {
                            let id = insn.imm as u32;
                            let (f, _) = prog
                                .helpers
                                .get(id)
                                .ok_or(Fault::UnknownHelper { pc, id })?;
                            // SAFETY: the helper contract (`HelperFn`): `env`
                            // is the live `Env` of this run and nothing else
                            // borrows it during the call.
                            reg[0] = unsafe {
                                f(reg[1], reg[2], reg[3], reg[4], reg[5], env as *mut Env)
                            };
                            if let Some(fault) = env.take_fault() {
                                return Err(fault.at(pc));
                            }
                        }
                    }
                    BPF_EXIT if class == BPF_JMP => {
                        if depth == 0 {
                            return Ok(reg[0]);
                        }
                        depth -= 1;
                        let f = frames[depth];
                        reg[6..10].copy_from_slice(&f.saved);
                        reg[10] = f.fp;
                        next = f.ret;
                    }
                    _ => {
                        if branch(&insn, reg[dst], reg[srcr]).ok_or(Fault::InvalidInsn { pc })? {
                            next = jump(pc, insn.off as i64)?;
                        }
                    }
                }
            }
            BPF_LDX => {
                let addr = reg[srcr].wrapping_add(insn.off as i64 as u64);
                let size = insn.size();
                let v = if prog.access.get(pc) == Some(&crate::verify::Access::Ctx) {
                    ctx_field(env, insn.off as u64, size)
                } else {
                    load(env, pc, addr, size)?
                };
                reg[dst] = match insn.code & 0xe0 {
                    BPF_MEM => v,
                    BPF_MEMSX => match size {
                        1 => v as i8 as i64 as u64,
                        2 => v as i16 as i64 as u64,
                        4 => v as i32 as i64 as u64,
                        _ => return Err(Fault::InvalidInsn { pc }),
                    },
                    _ => return Err(Fault::InvalidInsn { pc }),
                };
                if dst == 10 {
                    return Err(Fault::InvalidInsn { pc });
                }
            }
            BPF_ST | BPF_STX => {
                let addr = reg[dst].wrapping_add(insn.off as i64 as u64);
                match insn.code & 0xe0 {
                    BPF_MEM => {
                        let v = if class == BPF_ST {
                            insn.imm as i64 as u64
                        } else {
                            reg[srcr]
                        };
                        store(env, pc, addr, insn.size(), v)?;
                    }
                    BPF_ATOMIC if class == BPF_STX && matches!(insn.size(), 4 | 8) => {
                        let op = insn.imm;
                        let ok = matches!(op & !BPF_FETCH, 0x00 | 0x40 | 0x50 | 0xa0)
                            || op == BPF_XCHG
                            || op == BPF_CMPXCHG;
                        if !ok {
                            return Err(Fault::InvalidInsn { pc });
                        }
                        let old = atomic(env, pc, &insn, addr, reg[srcr], reg[0])?;
                        if op == BPF_CMPXCHG {
                            reg[0] = old;
                        } else if op & BPF_FETCH != 0 {
                            if srcr == 10 {
                                return Err(Fault::InvalidInsn { pc });
                            }
                            reg[srcr] = old;
                        }
                    }
                    _ => return Err(Fault::InvalidInsn { pc }),
                }
            }
            _ => {
                // BPF_LD: only LDDW (resolved at load to an immediate).
                if insn.code != LDDW || insn.src != 0 || dst == 10 {
                    return Err(Fault::InvalidInsn { pc });
                }
                let hi = insns.get(pc + 1).ok_or(Fault::InvalidInsn { pc })?;
                reg[dst] = (insn.imm as u32 as u64) | ((hi.imm as u32 as u64) << 32);
                next = pc + 2;
            }
        }
        pc = next;
    }
}

/// The target of a jump from `pc` by `off`.
#[inline]
fn jump(pc: usize, off: i64) -> Result<usize, Fault> {
    let t = pc as i64 + 1 + off;
    if t < 0 {
        return Err(Fault::PcOutOfRange { pc });
    }
    Ok(t as usize)
}

#[cfg(test)]
#[path = "interp_tests.rs"]
mod tests;
