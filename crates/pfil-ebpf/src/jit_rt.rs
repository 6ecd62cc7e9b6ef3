//! What JIT code calls back into Rust for: the slow path of checked
//! accesses, atomics, faults.

use crate::env::Env;
use crate::insn::*;
use crate::Fault;

/// Flags of a slow-path memory access.
pub(super) const WRITE: u64 = 1 << 8;
pub(super) const SIGN: u64 = 1 << 9;

/// The slow path of a load or store: the full region check.
pub(super) extern "C" fn rt_mem(env: *mut Env, addr: u64, flags: u64, value: u64, pc: u64) -> u64 {
    // SAFETY: the JIT passes the run's live Env; no Rust reference to it
    // is alive while JIT code runs (`run` only holds the raw pointer).
    let env = unsafe { &mut *env };
    let size = (flags & 0xff) as usize;
    let pc = pc as usize;
    if flags & WRITE != 0 {
        if let Err(f) = crate::interp::store(env, pc, addr, size, value) {
            env.fault(f);
        }
        return 0;
    }
    match crate::interp::load(env, pc, addr, size) {
        Ok(v) if flags & SIGN != 0 => match size {
            1 => v as i8 as i64 as u64,
            2 => v as i16 as i64 as u64,
            _ => v as i32 as i64 as u64,
        },
        Ok(v) => v,
        Err(f) => {
            env.fault(f);
            0
        }
    }
}

/// An atomic read-modify-write; returns the old value.
pub(super) extern "C" fn rt_atomic(
    env: *mut Env,
    addr: u64,
    src: u64,
    r0: u64,
    op_size: u64,
    pc: u64,
) -> u64 {
    // SAFETY: as in `rt_mem`.
    let env = unsafe { &mut *env };
    let size = if op_size >> 32 == 8 { BPF_DW } else { BPF_W };
    let insn = Insn::new(BPF_STX | BPF_ATOMIC | size, 0, 0, 0, op_size as u32 as i32);
    match crate::interp::atomic(env, pc as usize, &insn, addr, src, r0) {
        Ok(v) => v,
        Err(f) => {
            env.fault(f);
            0
        }
    }
}

/// Records a fault found by JIT code: `kind` 0 gives the pending
/// (helper) fault its pc, 1 is an exhausted budget.
pub(super) extern "C" fn rt_fault(env: *mut Env, kind: u64, pc: u64) {
    // SAFETY: as in `rt_mem`.
    let env = unsafe { &mut *env };
    let pc = pc as usize;
    let f = match (kind, env.take_fault()) {
        (0, Some(f)) => f.at(pc),
        _ => Fault::Budget { pc },
    };
    env.fault(f);
}
