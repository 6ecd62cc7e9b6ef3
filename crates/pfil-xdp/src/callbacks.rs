//! `bpf_loop` (helper 181) as the kernel's verifier inlines it
//! (`inline_bpf_loop`): a loop that calls the callback as a bpf-to-bpf
//! call, here a function appended to the program. The engine then
//! verifies and runs the callback as any function: its loop is charged
//! to the run's instruction budget, its accesses are checked.
//!
//! A callback is the function an `LDDW` of `BPF_PSEUDO_FUNC` names (the
//! linker's function pointers, `link.rs`). Each such load must feed r2
//! of a `bpf_loop` call further down the same straight-line code (what
//! clang emits for `bpf_loop(n, cb, ctx, flags)`): the load becomes
//! `r2 = 0` and the helper call a call of the loop function of that
//! callback. A function pointer used otherwise (`bpf_for_each_map_elem`,
//! `bpf_timer_set_callback`, a pointer stored or passed on) is refused,
//! naming it.

use crate::link::{imm_of, set_imm};
use crate::object::{CALL, LDDW, PSEUDO_CALL, PSEUDO_FUNC};
use crate::LoadError;

/// The kernel's `BPF_MAX_LOOPS`.
const MAX_LOOPS: i32 = 8 * 1024 * 1024;
/// `bpf_loop`'s helper number.
const BPF_LOOP: i32 = 181;
/// How far after the function pointer's load its `bpf_loop` call may be.
const REACH: usize = 32;

/// One instruction's 8 bytes.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let o = off.to_le_bytes();
    let i = imm.to_le_bytes();
    [code, dst | src << 4, o[0], o[1], i[0], i[1], i[2], i[3]]
}

/// The loop function of a callback at slot `cb`, appended at slot `at`:
/// called with r1 = the number of iterations, r3 = the callback's
/// context, r4 = the flags, as `bpf_loop`. As the kernel's inlined loop:
/// more than `BPF_MAX_LOOPS` is -E2BIG in 32 bits; the callback gets
/// (i, ctx) and a nonzero return stops the loop; r0 is the number of
/// calls made. Flags other than 0 are the helper's -EINVAL (the kernel
/// inlines only a call whose flags are 0).
fn loop_function(at: usize, cb: usize) -> Vec<u8> {
    let call = (cb as i64 - (at as i64 + 10) - 1) as i32;
    [
        insn(0x55, 4, 0, 14, 0),             // 0: if r4 != 0 goto 15
        insn(0xb5, 1, 0, 2, MAX_LOOPS),      // 1: if r1 <= MAX goto 4
        insn(0xb4, 0, 0, 0, -7),             // 2: w0 = -E2BIG
        insn(0x95, 0, 0, 0, 0),              // 3: exit
        insn(0xbf, 6, 1, 0, 0),              // 4: r6 = r1
        insn(0xb7, 7, 0, 0, 0),              // 5: r7 = 0
        insn(0xbf, 8, 3, 0, 0),              // 6: r8 = r3
        insn(0x3d, 7, 6, 5, 0),              // 7: if r7 >= r6 goto 13
        insn(0xbf, 1, 7, 0, 0),              // 8: r1 = r7
        insn(0xbf, 2, 8, 0, 0),              // 9: r2 = r8
        insn(CALL, 0, PSEUDO_CALL, 0, call), // 10: call the callback
        insn(0x07, 7, 0, 0, 1),              // 11: r7 += 1
        insn(0x15, 0, 0, -6, 0),             // 12: if r0 == 0 goto 7
        insn(0xbf, 0, 7, 0, 0),              // 13: r0 = r7
        insn(0x95, 0, 0, 0, 0),              // 14: exit
        insn(0xb7, 0, 0, 0, -22),            // 15: r0 = -EINVAL
        insn(0x95, 0, 0, 0, 0),              // 16: exit
    ]
    .concat()
}

/// Whether the instruction at slot `k` ends the straight line a function
/// pointer in r2 is followed along, or writes r2.
fn breaks(insns: &[u8], k: usize) -> bool {
    let (code, dst) = (insns[k * 8], insns[k * 8 + 1] & 0x0f);
    let class = code & 0x07;
    match class {
        // JMP, JMP32: a jump, a call, an exit.
        0x05 | 0x06 => true,
        // LD, LDX, ALU, ALU64: a write of their dst.
        0x00 | 0x01 | 0x04 | 0x07 => dst == 2,
        _ => false,
    }
}

/// `insns` (a linked program) with each `bpf_loop` of a callback made a
/// call of a loop function appended for that callback.
///
/// # Errors
/// A function pointer that does not feed r2 of a `bpf_loop` call down
/// the same straight line.
pub(crate) fn lower(mut insns: Vec<u8>, name: &str) -> Result<Vec<u8>, LoadError> {
    let n = insns.len() / 8;
    let mut loops: Vec<(usize, usize)> = Vec::new(); // (callback, loop function)
    let mut s = 0;
    while s < n {
        let code = insns[s * 8];
        if code != LDDW || insns[s * 8 + 1] >> 4 != PSEUDO_FUNC || s + 1 >= n {
            s += if code == LDDW { 2 } else { 1 };
            continue;
        }
        let cb = (s as i64 + 1 + i64::from(imm_of(&insns, s))) as usize;
        let call = (s + 2..n.min(s + 2 + REACH)).find(|&k| {
            insns[k * 8] == CALL && insns[k * 8 + 1] >> 4 == 0 && imm_of(&insns, k) == BPF_LOOP
        });
        let dst = insns[s * 8 + 1] & 0x0f;
        let Some(k) = call.filter(|&k| dst == 2 && !(s + 2..k).any(|j| breaks(&insns, j))) else {
            return Err(LoadError::Unsupported(format!(
                "a function pointer (to instruction {cb}) in program {name:?} that is not \
                 bpf_loop's callback: callbacks other than bpf_loop's (bpf_for_each_map_elem, \
                 timers) are not run"
            )));
        };
        let f = match loops.iter().find(|l| l.0 == cb) {
            Some(&(_, f)) => f,
            None => {
                let f = insns.len() / 8;
                insns.extend(loop_function(f, cb));
                loops.push((cb, f));
                f
            }
        };
        // r2 = 0 (the callback is the loop function's own).
        insns[s * 8 + 1] = 2;
        set_imm(&mut insns, s, 0);
        set_imm(&mut insns, s + 1, 0);
        insns[k * 8 + 1] = PSEUDO_CALL << 4;
        set_imm(&mut insns, k, (f as i64 - k as i64 - 1) as i32);
        s += 2;
    }
    Ok(insns)
}
