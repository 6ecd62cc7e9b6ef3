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
/// context, r4 = the flags, as `bpf_loop`. The callback gets (i, ctx)
/// and a nonzero return stops the loop; r0 is the number of calls made;
/// flags other than 0 are -EINVAL. The kernel's verifier inlines a call
/// whose flags it knows are 0 (`inlined`): more than `BPF_MAX_LOOPS` is
/// then -E2BIG in 32 bits, of r1 whole. Otherwise the helper runs: it
/// takes the number as a u32, and -E2BIG is 64 bits.
fn loop_function(at: usize, cb: usize, inlined: bool) -> Vec<u8> {
    let e2big = [
        insn(0xb5, 1, 0, 2, MAX_LOOPS), // if r1 <= MAX goto +2
        if inlined {
            insn(0xb4, 0, 0, 0, -7) // w0 = -E2BIG
        } else {
            insn(0xb7, 0, 0, 0, -7) // r0 = -E2BIG
        },
        insn(0x95, 0, 0, 0, 0), // exit
    ];
    // The helper takes the number as a u32: w1 = w1 first.
    let u32_nr = (!inlined).then(|| insn(0xbc, 1, 1, 0, 0));
    let prefix = 1 + usize::from(!inlined) + e2big.len();
    let call = (cb as i64 - (at + prefix + 6) as i64 - 1) as i32;
    let mut f = vec![insn(0x55, 4, 0, (prefix + 11 - 1) as i16, 0)]; // if r4 != 0 goto -EINVAL
    f.extend(u32_nr);
    f.extend(e2big);
    f.extend([
        insn(0xbf, 6, 1, 0, 0),              // r6 = r1
        insn(0xb7, 7, 0, 0, 0),              // r7 = 0
        insn(0xbf, 8, 3, 0, 0),              // r8 = r3
        insn(0x3d, 7, 6, 5, 0),              // loop: if r7 >= r6 goto done
        insn(0xbf, 1, 7, 0, 0),              // r1 = r7
        insn(0xbf, 2, 8, 0, 0),              // r2 = r8
        insn(CALL, 0, PSEUDO_CALL, 0, call), // call the callback
        insn(0x07, 7, 0, 0, 1),              // r7 += 1
        insn(0x15, 0, 0, -6, 0),             // if r0 == 0 goto loop
        insn(0xbf, 0, 7, 0, 0),              // done: r0 = r7
        insn(0x95, 0, 0, 0, 0),              // exit
        insn(0xb7, 0, 0, 0, -22),            // r0 = -EINVAL
        insn(0x95, 0, 0, 0, 0),              // exit
    ]);
    f.concat()
}

/// Whether r4 (flags) is 0 as the kernel's verifier would know it at the
/// `bpf_loop` call at slot `k`: set to 0 (directly, or by copies) in the
/// straight line before the call, no jump landing in between.
fn flags_known_zero(insns: &[u8], targets: &[bool], k: usize) -> bool {
    let mut reg = 4u8;
    for j in (0..k).rev() {
        let (code, dst, src) = (insns[j * 8], insns[j * 8 + 1] & 0x0f, insns[j * 8 + 1] >> 4);
        let class = code & 0x07;
        // The second half of an LDDW.
        if j > 0 && insns[(j - 1) * 8] == LDDW {
            continue;
        }
        if matches!(class, 0x05 | 0x06) {
            return false; // a jump, call or exit: the block's start
        }
        let writes = matches!(class, 0x00 | 0x01 | 0x04 | 0x07) && dst == reg;
        if writes {
            match code {
                // mov reg, 0 (64 or 32 bits)
                0xb7 | 0xb4 if imm_of(insns, j) == 0 && insns[j * 8 + 2..j * 8 + 4] == [0, 0] => {
                    return true;
                }
                // mov reg, rX (64 bits): follow rX
                0xbf if insns[j * 8 + 2..j * 8 + 4] == [0, 0] => reg = src,
                _ => return false,
            }
        }
        if targets[j] {
            return false;
        }
    }
    false
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

/// Which slots of `insns[..n]` a jump lands on.
fn jump_targets(insns: &[u8], n: usize) -> Vec<bool> {
    let mut t = vec![false; n + 1];
    for j in 0..n {
        let (code, class) = (insns[j * 8], insns[j * 8] & 0x07);
        let op = code & 0xf0;
        // JMP and JMP32 but CALL (0x80) and EXIT (0x90).
        if !matches!(class, 0x05 | 0x06) || op == 0x80 || op == 0x90 {
            continue;
        }
        // `ja` of JMP32 (gotol) jumps by its imm, the others by off.
        let by = if class == 0x06 && op == 0x00 {
            i64::from(imm_of(insns, j))
        } else {
            i64::from(i16::from_le_bytes([insns[j * 8 + 2], insns[j * 8 + 3]]))
        };
        if let Some(x) = usize::try_from(j as i64 + 1 + by).ok().filter(|&x| x <= n) {
            t[x] = true;
        }
    }
    t
}

/// `insns` (a linked program) with each `bpf_loop` of a callback made a
/// call of a loop function appended for that callback; and the
/// callbacks' first slots (their returns must be 0 or 1).
///
/// # Errors
/// A function pointer that does not feed r2 of a `bpf_loop` call down
/// the same straight line.
pub(crate) fn lower(mut insns: Vec<u8>, name: &str) -> Result<(Vec<u8>, Vec<usize>), LoadError> {
    let n = insns.len() / 8;
    let targets = jump_targets(&insns, n);
    // ((callback, inlined), loop function)
    let mut loops: Vec<((usize, bool), usize)> = Vec::new();
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
        // Straight: nothing between writes r2 or jumps, and no jump lands
        // after the load (another path would reach the call with another
        // r2).
        let straight = |k: usize| {
            dst == 2
                && !(s + 2..k).any(|j| breaks(&insns, j))
                && !targets[s + 1..=k].contains(&true)
        };
        let Some(k) = call.filter(|&k| straight(k)) else {
            return Err(LoadError::Unsupported(format!(
                "a function pointer (to instruction {cb}) in program {name:?} that is not \
                 bpf_loop's callback: callbacks other than bpf_loop's (bpf_for_each_map_elem, \
                 timers) are not run"
            )));
        };
        let inlined = flags_known_zero(&insns, &targets, k);
        let f = match loops.iter().find(|l| l.0 == (cb, inlined)) {
            Some(&(_, f)) => f,
            None => {
                let f = insns.len() / 8;
                insns.extend(loop_function(f, cb, inlined));
                loops.push(((cb, inlined), f));
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
    let mut callbacks: Vec<usize> = loops.iter().map(|l| l.0 .0).collect();
    callbacks.sort_unstable();
    callbacks.dedup();
    Ok((insns, callbacks))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `r2 = &cb; r1 = 3; [r3 = 0 | a jump over the load]; call bpf_loop;
    /// exit; cb: r0 = 0; exit`.
    fn program(jump_in: bool) -> Vec<u8> {
        let mut v = vec![
            insn(0xb7, 3, 0, 0, 0),           // 0: r3 = 0 (or a jump)
            insn(LDDW, 2, PSEUDO_FUNC, 0, 5), // 1: r2 = cb (slot 7)
            insn(0, 0, 0, 0, 0),              // 2
            insn(0xb7, 1, 0, 0, 3),           // 3: r1 = 3
            insn(0xb7, 4, 0, 0, 0),           // 4: r4 = 0
            insn(CALL, 0, 0, 0, BPF_LOOP),    // 5: call bpf_loop
            insn(0x95, 0, 0, 0, 0),           // 6: exit
            insn(0xb7, 0, 0, 0, 0),           // 7: cb: r0 = 0
            insn(0x95, 0, 0, 0, 0),           // 8: exit
        ];
        if jump_in {
            v[0] = insn(0x05, 0, 0, 2, 0); // 0: goto 3, past the load
        }
        v.concat()
    }

    #[test]
    fn a_bpf_loop_call_becomes_a_call_of_its_loop_function() {
        let (out, cbs) = lower(program(false), "p").unwrap();
        assert_eq!(cbs, [7]);
        assert_eq!(out.len() / 8, 9 + 17, "one loop function appended");
        // The load is r2 = 0; the call goes to slot 9, which calls slot 7.
        assert_eq!((out[8 + 1] >> 4, imm_of(&out, 1)), (0, 0));
        assert_eq!(
            (out[5 * 8 + 1] >> 4, imm_of(&out, 5)),
            (PSEUDO_CALL, 9 - 5 - 1)
        );
        assert_eq!((out[19 * 8], 20 + i64::from(imm_of(&out, 19))), (CALL, 7));
    }

    #[test]
    fn flags_the_verifier_does_not_know_take_the_helpers_loop() {
        // r4 = r5 (not known): the helper's loop, nr as a u32 first.
        let mut p = program(false);
        p[4 * 8..5 * 8].copy_from_slice(&insn(0xbf, 4, 5, 0, 0));
        let out = lower(p, "p").unwrap().0;
        assert_eq!(out.len() / 8, 9 + 18);
        assert_eq!(out[10 * 8..10 * 8 + 2], [0xbc, 0x11], "w1 = w1");
        assert_eq!(out[12 * 8], 0xb7, "a 64-bit -E2BIG");
        assert_eq!(21 + i64::from(imm_of(&out, 20)), 7, "the callback");
        // r4 = r6 and r6 = 0 before: known, inlined.
        let mut p = program(false);
        p[..8].copy_from_slice(&insn(0xb7, 6, 0, 0, 0));
        p[4 * 8..5 * 8].copy_from_slice(&insn(0xbf, 4, 6, 0, 0));
        assert_eq!(lower(p, "p").unwrap().0.len() / 8, 9 + 17);
    }

    #[test]
    fn a_callback_not_straight_to_bpf_loop_is_refused() {
        let e = lower(program(true), "p").unwrap_err().to_string();
        assert!(e.contains("not bpf_loop's callback"), "{e}");
        // r2 written between the load and the call.
        let mut p = program(false);
        p[3 * 8 + 1] = 2;
        assert!(lower(p, "p").is_err());
    }
}
