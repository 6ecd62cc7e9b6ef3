//! Packet pointers with variable offsets (ids, ranges, scalar bounds):
//! what the verifier proves, and that an access it cannot prove keeps its
//! run-time check (hostile programs fault, on the interpreter and the
//! JIT alike, inside a frame whose bytes beyond the packet are readable).

use crate::asm::assemble;
use crate::verify::Access;
use crate::{Env, Fault, Helpers, LoadOptions, Program};

/// Loads `text` without the kernel's rules: its accesses not proven are
/// checked at run time (with the rules they are refused, as the kernel
/// refuses them: [`refused`]).
fn load(text: &str, jit: bool) -> Program {
    let o = LoadOptions {
        jit,
        kernel_rules: false,
        ..LoadOptions::default()
    };
    Program::load(assemble(text).unwrap(), &[], &Helpers::new(), &o).unwrap()
}

/// The pc and reason the kernel's rules refuse `text` for.
fn refused(text: &str) -> (usize, String) {
    let e = Program::load(
        assemble(text).unwrap(),
        &[],
        &Helpers::new(),
        &LoadOptions::default(),
    )
    .unwrap_err();
    (e.pc, e.reason)
}

fn env() -> Env {
    // SAFETY: no extra regions.
    unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
}

fn access(p: &Program, pc: usize) -> Access {
    p.access.get(pc).copied().unwrap_or_default()
}

/// Runs `p` on a packet of `len` bytes at offset 8 of a 128-byte frame
/// (headroom before it, tailroom after it: readable memory a missing
/// check would read silently).
fn run(p: &Program, bytes: &[u8], len: usize, ifindex: u32) -> Result<u64, ()> {
    let mut frame = [0x11u8; 128];
    frame[8..8 + bytes.len()].copy_from_slice(bytes);
    p.run_xdp(&mut env(), &mut frame, 8, len, ifindex, 0)
        .map(|o| o.action)
        .map_err(|f| assert!(matches!(f, Fault::OutOfBounds { .. }), "{f:?}"))
}

fn be16(b: &[u8], at: usize) -> u64 {
    u64::from(b[at]) | u64::from(b[at + 1]) << 8
}

#[test]
fn a_bounded_variable_offset_is_proven_and_one_byte_more_is_checked() {
    // The IHL pattern: r8 = data + (byte & 60); if r8 + 4 > data_end out.
    let text = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r4, %r2\nadd %r4, 1\n\
                jgt %r4, %r3, out\nldxb %r5, [%r2+0]\nand %r5, 60\nmov %r8, %r2\nadd %r8, %r5\n\
                mov %r4, %r8\nadd %r4, 4\njgt %r4, %r3, out\nldxh %r0, [%r8+2]\n\
                ldxb %r6, [%r8+4]\nadd %r0, %r6\nout:\nexit";
    for jit in [false, true] {
        let p = load(text, jit);
        assert_eq!(access(&p, 6), Access::Packet);
        assert_eq!(access(&p, 13), Access::Packet, "jit {jit}");
        assert_eq!(access(&p, 14), Access::Checked, "jit {jit}");
        let (pc, why) = refused(text);
        assert_eq!(pc, 14, "{why}");
        assert!(
            why.contains(
                "a 1-byte read at offset 4 from a packet pointer r8 moved by a variable \
                 amount, where a comparison with data_end proved 4 bytes"
            ),
            "{why}"
        );
        for v in [0u8, 4, 20, 60, 0xff] {
            let o = usize::from(v & 60);
            let bytes: Vec<u8> = (0..100u8)
                .map(|i| if i == 0 { v } else { i.wrapping_mul(3) })
                .collect();
            for len in 0..80 {
                let want = if len < 1 || len < o + 4 {
                    Ok(0)
                } else if len < o + 5 {
                    Err(())
                } else {
                    Ok(be16(&bytes, o + 2) + u64::from(bytes[o + 4]))
                };
                assert_eq!(run(&p, &bytes, len, 0), want, "jit {jit} v {v} len {len}");
            }
        }
    }
}

#[test]
fn unbounded_or_wrapping_offsets_keep_the_run_time_check() {
    for setup in [
        "ldxdw %r5, [%r2+0]",
        "ldxw %r5, [%r2+0]",
        "ldxb %r5, [%r2+0]\nlsh %r5, 60",
        "ldxb %r5, [%r2+0]\nadd32 %r5, -1",
        "ldxb %r5, [%r2+0]\nneg %r5",
        "ldxb %r5, [%r2+0]\nsub %r5, 8",
        "ldxh %r5, [%r2+0]\nlsh %r5, 1",
    ] {
        let text = format!(
            "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r4, %r2\nadd %r4, 8\n\
             jgt %r4, %r3, out\n{setup}\nmov %r8, %r2\nadd %r8, %r5\nmov %r4, %r8\nadd %r4, 1\n\
             jgt %r4, %r3, out\nldxb %r0, [%r8+0]\nout:\nexit"
        );
        for jit in [false, true] {
            let p = load(&text, jit);
            let last = p.insns().len() - 2;
            assert_eq!(access(&p, last), Access::Checked, "{setup}");
            // r5 = -4: r8 = data - 4, r8 + 1 <= data_end; the byte lies in
            // the headroom, outside the packet.
            let bytes = (-4i64).to_le_bytes();
            if setup.starts_with("ldxdw") {
                assert_eq!(run(&p, &bytes, 16, 0), Err(()), "{setup} jit {jit}");
            }
            let bytes = [4u8, 0, 0, 0, 0, 0, 0, 0];
            if setup.ends_with("neg %r5") {
                assert_eq!(run(&p, &bytes, 16, 0), Err(()), "{setup} jit {jit}");
            }
        }
    }
}

#[test]
fn a_join_of_two_offsets_proves_only_what_both_paths_have() {
    // r8 = data + 14 or data + 18 (ingress_ifindex decides).
    let text = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nldxw %r5, [%r1+12]\n\
                mov %r8, %r2\nadd %r8, 14\njeq %r5, 0, join\nadd %r8, 4\njoin:\nmov %r4, %r8\n\
                add %r4, 2\njgt %r4, %r3, out\nldxh %r0, [%r8+0]\nldxb %r6, [%r8+2]\n\
                add %r0, %r6\nout:\nexit";
    for jit in [false, true] {
        let p = load(text, jit);
        assert_eq!(access(&p, 11), Access::Packet, "jit {jit}");
        assert_eq!(access(&p, 12), Access::Checked, "jit {jit}");
        assert_eq!(refused(text).0, 12);
        let bytes: Vec<u8> = (0..40u8).map(|i| i + 1).collect();
        for (ifindex, o) in [(0u32, 14usize), (1, 18)] {
            for len in 0..30 {
                let want = if len < o + 2 {
                    Ok(0)
                } else if len < o + 3 {
                    Err(())
                } else {
                    Ok(be16(&bytes, o) + u64::from(bytes[o + 2]))
                };
                assert_eq!(run(&p, &bytes, len, ifindex), want, "jit {jit} len {len}");
            }
        }
    }
}

#[test]
fn pointers_walked_in_a_loop_stay_safe() {
    // Sum the packet's bytes, one at a time: the proven read is right,
    // the read one byte further faults at the packet's end.
    for (read, proven_ok) in [("[%r8+0]", true), ("[%r8+1]", false)] {
        let text = format!(
            "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r5, 1\nmov %r8, %r2\n\
             loop:\nmov %r4, %r8\nadd %r4, 1\njgt %r4, %r3, out\nldxb %r6, {read}\n\
             add %r0, %r6\nadd %r8, %r5\nja loop\nout:\nexit"
        );
        for jit in [false, true] {
            let p = load(&text, jit);
            if !proven_ok {
                assert_eq!(access(&p, 8), Access::Checked);
            }
            let bytes: Vec<u8> = (0..60u8).collect();
            for len in 0..60 {
                let want = if proven_ok || len == 0 {
                    Ok(bytes[..len].iter().map(|&b| u64::from(b)).sum())
                } else {
                    Err(())
                };
                assert_eq!(run(&p, &bytes, len, 0), want, "{read} jit {jit} len {len}");
            }
        }
    }
}

#[test]
fn a_base_from_an_earlier_iteration_is_not_proven_by_a_later_check() {
    // First pass: r9 = data + 60 + v. Second pass: r8 = data + v is
    // checked for 8 bytes; reading 8 bytes at r9 is not proven by it.
    let text = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r4, %r2\nadd %r4, 1\n\
                jgt %r4, %r3, out\nldxb %r5, [%r2+0]\nand %r5, 7\nmov %r7, %r2\nmov %r6, 0\n\
                mov %r9, %r2\nmov %r8, %r7\nadd %r8, 60\nloop:\nadd %r8, %r5\njne %r6, 0, second\n\
                mov %r9, %r8\nmov %r6, 1\nmov %r8, %r7\nja loop\nsecond:\nmov %r4, %r8\n\
                add %r4, 8\njgt %r4, %r3, out\nldxdw %r0, [%r9+0]\nout:\nexit";
    for jit in [false, true] {
        let p = load(text, jit);
        assert_eq!(access(&p, 24), Access::Checked, "jit {jit}");
        assert_eq!(run(&p, &[0; 20], 20, 0), Err(()), "jit {jit}");
        let mut bytes = [0u8; 80];
        bytes[60] = 9;
        assert_eq!(run(&p, &bytes, 80, 0), Ok(9), "jit {jit}");
    }
}

#[test]
fn map_lookups_keep_packet_proofs_other_helpers_do_not() {
    use crate::env::Signature;
    unsafe extern "C" fn nop(_: u64, _: u64, _: u64, _: u64, _: u64, _: *mut Env) -> u64 {
        0
    }
    let mut h = Helpers::new();
    h.insert(1, nop, Signature { args: 2 });
    h.insert(5, nop, Signature { args: 2 });
    h.insert(44, nop, Signature { args: 2 });
    for (call, kept) in [(1, true), (5, false), (44, false)] {
        let text = format!(
            "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r8, %r2\nmov %r4, %r2\n\
             add %r4, 4\njgt %r4, %r3, out\nldxw %r1, [%r1+12]\nmov %r2, 0\ncall {call}\n\
             ldxw %r0, [%r8+0]\nout:\nexit"
        );
        let load = |kernel_rules| {
            let o = LoadOptions {
                kernel_rules,
                ..LoadOptions::default()
            };
            Program::load(assemble(&text).unwrap(), &[], &h, &o)
        };
        if call == 44 {
            // bpf_xdp_adjust_head may move the packet: the kernel makes
            // r8 a number, so the kernel's rules refuse the read.
            let e = load(true).unwrap_err();
            assert_eq!(e.pc, 10);
            assert!(
                e.reason
                    .contains("r8, a packet pointer from before bpf_xdp_adjust_head"),
                "{e}"
            );
        }
        let p = load(call != 44).unwrap();
        let want = if kept {
            Access::Packet
        } else {
            Access::Checked
        };
        assert_eq!(access(&p, 10), want, "call {call}");
    }
}

#[test]
fn a_join_keeps_the_smaller_proof_of_the_two_paths() {
    // Path 0 proves 2 bytes at r8, path 1 proves 6; after the join a
    // 4-byte read is checked. With one base (the same add before the
    // branch), a base made on each path, constant offsets that differ.
    for (before, path0, path1) in [
        ("add %r8, %r5", "", ""),
        ("", "add %r8, %r5", "add %r8, %r5"),
        // data + 0 or data + 1: a base made at the join.
        ("", "", "add %r8, 1"),
    ] {
        let text = format!(
            "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r4, %r2\nadd %r4, 1\n\
             jgt %r4, %r3, out\nldxb %r5, [%r2+0]\nand %r5, 7\nldxw %r6, [%r1+12]\nmov %r8, %r2\n\
             {before}\njne %r6, 0, one\n{path0}\nmov %r4, %r8\nadd %r4, 2\njgt %r4, %r3, out\n\
             ja join\none:\n{path1}\nmov %r4, %r8\nadd %r4, 6\njgt %r4, %r3, out\njoin:\n\
             ldxw %r0, [%r8+0]\nldxb %r7, [%r8+1]\nadd %r0, %r7\nout:\nexit"
        );
        let text = text.replace("\n\n", "\n");
        for jit in [false, true] {
            let p = load(&text, jit);
            let n = p.insns().len();
            assert_eq!(access(&p, n - 4), Access::Checked, "{before:?} jit {jit}");
            assert_eq!(access(&p, n - 3), Access::Packet, "{before:?} jit {jit}");
            assert_eq!(refused(&text).0, n - 4, "{before:?}");
            let bytes = [0u8, 1, 2, 3, 4, 5, 6, 7];
            assert_eq!(run(&p, &bytes, 3, 0), Err(()), "{before:?} jit {jit}");
            assert_eq!(run(&p, &bytes, 3, 1), Ok(0), "{before:?} jit {jit}");
            assert_eq!(
                run(&p, &bytes, 8, 0),
                Ok(0x0302_0100 + 1),
                "{before:?} jit {jit}"
            );
        }
    }
}

#[test]
fn a_store_not_proven_in_the_packet_forgets_the_spilled_pointers() {
    // data spilled at r10-8, a byte stored through data (proven at 2,
    // not at 20: checked at run time, which would let it land in the
    // stack), data filled back and read through.
    for (at, kept) in [(2, true), (20, false)] {
        let text = format!(
            "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r4, %r2\nadd %r4, 8\n\
             jgt %r4, %r3, out\nstxdw [%r10-8], %r2\nstb [%r2+{at}], 1\nldxdw %r5, [%r10-8]\n\
             ldxb %r0, [%r5+0]\nout:\nexit"
        );
        for jit in [false, true] {
            let p = load(&text, jit);
            let want = if kept {
                Access::Packet
            } else {
                Access::Checked
            };
            assert_eq!(access(&p, 9), want, "store at {at} jit {jit}");
        }
        if !kept {
            assert_eq!(refused(&text).0, 7);
        }
    }
}

/// A copy linked at an instruction a loop passes again: the new link
/// does not take in a register still holding the older value, nor does a
/// new lookup's null check reach the older lookup's copy.
#[test]
fn links_made_again_at_an_instruction_leave_the_older_values_out() {
    use super::*;
    let mut s = State::new(0x7ff);
    s.scalar(1, 10);
    s.link(2, 1, 5);
    let first = s;
    s.copy(3, &first, 1);
    // The loop's next pass: r1 and r2 new values, linked again at pc 5;
    // r3 still the first pass's value.
    s.scalar(1, 100);
    s.scalar(2, 100);
    s.link(2, 1, 5);
    s.narrow(1, 0, 3);
    assert_eq!((s.hi[1], s.hi[2], s.hi[3]), (3, 3, 10));
    // A lookup at pc 7, copied to r6, then the same lookup again.
    s.nullable(0, 0, 7);
    let first = s;
    s.copy(6, &first, 0);
    s.nullable(0, 0, 7);
    assert_eq!(s.ty[0] & KIND, NULLABLE);
    assert_eq!(s.ty[6], OTHER, "the older value is not the new one's copy");
}
