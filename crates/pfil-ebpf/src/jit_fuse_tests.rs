//! The JIT's fusions (`jit_plan`): each agrees with the interpreter,
//! also where a jump lands between the fused instructions (then they are
//! emitted one by one).

use crate::asm::assemble;
use crate::{Env, Helpers, LoadOptions, Program};

fn env() -> Env {
    // SAFETY: no extra regions.
    unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
}

/// Runs `text` on the interpreter and the JIT over `pkt` (XDP, proven
/// accesses): both results, which must agree.
fn both(text: &str, pkt: &[u8]) -> u64 {
    let mut out = Vec::new();
    for jit in [false, true] {
        let o = LoadOptions {
            jit,
            ..LoadOptions::default()
        };
        let p = Program::load(assemble(text).unwrap(), &[], &Helpers::new(), &o).unwrap();
        assert_eq!(p.is_jitted(), jit && cfg!(target_arch = "x86_64"));
        let mut frame = pkt.to_vec();
        out.push(
            p.run_xdp(&mut env(), &mut frame, 0, pkt.len(), 0, 0)
                .map(|o| o.action),
        );
    }
    assert_eq!(out[0], out[1], "{text}");
    out[0].unwrap()
}

/// The verifier's analysis of `insns` (no maps, no helpers).
fn verify_plain(
    insns: &[crate::insn::Insn],
) -> Result<crate::verify::Analysis, crate::VerifyError> {
    crate::verify::verify(
        insns,
        &Helpers::new(),
        &LoadOptions::default(),
        (&[], &[]),
        &[],
    )
}

/// `data + 16 <= data_end` proven, r2 = data; the body, then `out: exit`.
fn prog(body: &str) -> String {
    format!(
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r5, %r2\nadd %r5, 16\n\
         jgt %r5, %r3, out\n{body}\nout:\nexit"
    )
}

#[test]
fn byte_pairs_agree_and_a_jump_between_stops_the_fusion() {
    let pkt: Vec<u8> = (0..16).map(|i| 0x10 + i).collect();
    // pkt[0] selects: 1 jumps onto the pattern's instruction `at`.
    for order in [0, 1] {
        for at in [0, 1, 2, 3, 4] {
            for low_read in [false, true] {
                let mut body = vec!["ldxb %r4, [%r2+0]", "mov %r6, 0x7700", "mov %r7, 0x33"];
                let pat = if order == 0 {
                    [
                        "ldxb %r6, [%r2+13]",
                        "lsh %r6, 8",
                        "ldxb %r7, [%r2+12]",
                        "or %r6, %r7",
                    ]
                } else {
                    [
                        "ldxb %r7, [%r2+12]",
                        "ldxb %r6, [%r2+13]",
                        "lsh %r6, 8",
                        "or %r6, %r7",
                    ]
                };
                let jump = format!("jeq %r4, 1, +{at}");
                body.push(&jump);
                body.extend(pat);
                body.push("mov %r0, %r6");
                if low_read {
                    body.push("lsh %r0, 8\nadd %r0, %r7");
                }
                let text = prog(&body.join("\n"));
                for sel in [0u8, 1] {
                    let mut p = pkt.clone();
                    p[0] = sel;
                    let got = both(&text, &p);
                    let (b12, b13) = (u64::from(p[12]), u64::from(p[13]));
                    // Straight through: the 16-bit value.
                    if sel == 0 {
                        let v = b13 << 8 | b12;
                        let want = if low_read { v << 8 | b12 } else { v };
                        assert_eq!(got, want, "{text}");
                    }
                }
            }
        }
    }
}

#[test]
fn an_immediate_only_compared_agrees_and_is_kept_where_read() {
    let pkt: Vec<u8> = (0..16).map(|i| i * 17).collect();
    let ops = [
        "jgt", "jge", "jlt", "jle", "jsgt", "jsge", "jslt", "jsle", "jeq", "jne", "jset",
    ];
    for op in ops {
        for jmp32 in [false, true] {
            for imm in [-5, 0, 60, 200] {
                for swapped in [false, true] {
                    for onto_jump in [false, true] {
                        for read_after in [false, true] {
                            let j = if jmp32 {
                                format!("{op}32")
                            } else {
                                op.to_string()
                            };
                            let cmp = if swapped {
                                format!("{j} %r6, %r4, +1")
                            } else {
                                format!("{j} %r4, %r6, +1")
                            };
                            let body = format!(
                                "ldxb %r4, [%r2+1]\nadd %r4, -128\nldxb %r8, [%r2+0]\nmov %r6, 77\n\
                                 jeq %r8, 1, +{}\nmov %r6, {imm}\n{cmp}\nmov %r0, 1\n{}",
                                u8::from(onto_jump),
                                if read_after { "add %r0, %r6" } else { "" }
                            );
                            let text = prog(&body);
                            for v in [0u8, 1, 60, 127, 128, 129, 188, 200, 255] {
                                for sel in [0u8, 1] {
                                    let mut p = pkt.clone();
                                    p[0] = sel;
                                    p[1] = v;
                                    both(&text, &p);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn be16_after_a_16_bit_load_keeps_the_high_bits_zero() {
    // A jump lands on the swap with r6 holding high bits: not fused.
    let body = "ldxb %r4, [%r2+0]\nlddw %r6, 0x1234567800000000\njeq %r4, 1, +1\n\
                ldxh %r6, [%r2+2]\nbe16 %r6\nmov %r0, %r6";
    let text = prog(body);
    for sel in [0u8, 1] {
        let mut p = [0u8; 16];
        p[0] = sel;
        p[2..4].copy_from_slice(&[0xab, 0xcd]);
        assert_eq!(both(&text, &p), if sel == 0 { 0xabcd } else { 0 });
    }
}

#[test]
fn load_add_store_with_the_sum_dead_after_agrees() {
    let body = "ldxdw %r3, [%r2+8]\nadd %r3, 5\nstxdw [%r2+8], %r3\nmov %r3, 1\nldxdw %r0, [%r2+8]";
    let mut p = [0u8; 16];
    p[8] = 0x20;
    assert_eq!(both(&prog(body), &p), 0x25);
}

#[test]
fn a_flag_set_by_a_comparison_agrees_and_jumps_between_stop_it() {
    let pkt: Vec<u8> = (0..16u8).map(|i| i.wrapping_mul(19)).collect();
    for op in ["jeq", "jne", "jgt", "jsle", "jset", "jlt32"] {
        for rhs in ["%r5", "60"] {
            for onto in [0, 1, 2, 3] {
                // onto 0: straight; 1: a jump onto the comparison; 2: onto
                // `x = 0`; 3: x (r6) is an operand of the comparison.
                let cmp = if onto == 3 {
                    format!("{op} %r6, {rhs}, +1")
                } else {
                    format!("{op} %r4, {rhs}, +1")
                };
                let body = format!(
                    "ldxb %r4, [%r2+1]\nldxb %r5, [%r2+2]\nldxb %r8, [%r2+0]\nmov %r6, 9\n\
                     jeq %r8, 1, +{}\nmov %r6, 1\n{cmp}\nmov %r6, 0\nmov %r0, %r6",
                    match onto {
                        1 => 1,
                        2 => 2,
                        _ => 0,
                    }
                );
                let text = prog(&body);
                for v in [0u8, 59, 60, 61, 200] {
                    for (sel, r5) in [(0u8, 60u8), (1, 60), (0, 0), (0, 1)] {
                        let mut p = pkt.clone();
                        p[0] = sel;
                        p[1] = v;
                        p[2] = r5;
                        both(&text, &p);
                    }
                }
            }
        }
    }
}

#[test]
fn a_flag_on_a_jump_the_bounds_decide_is_not_fused() {
    // The comparison's operand is set only for it; the verifier decides
    // the jump (taken: a register that is 0 compared equal to 0; not
    // taken: one at most 5 compared above 100), so the JIT emits no
    // compare and not the operand's definition either: a fused `setcc`
    // would read whatever the register held (found with a folded
    // `.rodata` setting, `tests/c/co_re.c`).
    for (cmp, want) in [
        ("jeq %r1, 0, +1", 1),
        ("jne %r1, 0, +1", 0),
        ("jgt %r1, 100, +1", 0),
    ] {
        let set = if cmp.starts_with("jgt") {
            "ldxb %r1, [%r2+0]\nand %r1, 5"
        } else {
            "mov %r1, 0"
        };
        let text = prog(&format!(
            "{set}\nmov %r6, 1\n{cmp}\nmov %r6, 0\nmov %r0, %r6"
        ));
        assert_eq!(both(&text, &[0xff; 16]), want, "{cmp}");
    }
}

#[test]
fn an_and_within_the_verifiers_bound_agrees_also_after_a_join() {
    // r4 <= 0xff on the straight path (a no-op `and 0xff`), a wider
    // value where a jump joins it: not a no-op there.
    for join in [false, true] {
        for mask in [0xff, 0x7f, 0xffff] {
            let wide = if join {
                "jne %r8, 1, +2\nldxh %r4, [%r2+2]\nlsh %r4, 4"
            } else {
                ""
            };
            let body = format!(
                "ldxb %r4, [%r2+1]\nldxb %r8, [%r2+0]\n{wide}\nand %r4, {mask}\nmov %r0, %r4"
            );
            let text = prog(&body);
            let p = Program::load(
                assemble(&text).unwrap(),
                &[],
                &Helpers::new(),
                &LoadOptions::default(),
            )
            .unwrap();
            let and_pc = p
                .insns()
                .iter()
                .position(|i| {
                    i.code == crate::insn::BPF_ALU64 | crate::insn::BPF_AND | crate::insn::BPF_K
                })
                .unwrap();
            // A no-op where the bound holds (straight, mask 0xff or wider).
            let no_op = verify_plain(p.insns())
                .unwrap()
                .no_op_ands
                .contains(&and_pc);
            assert_eq!(no_op, !join && mask != 0x7f, "{text}");
            for sel in [0u8, 1] {
                let mut p = [0xe7u8; 16];
                p[0] = sel;
                let v = if sel == 1 && join {
                    0xe7e7u64 << 4
                } else {
                    0xe7
                };
                assert_eq!(both(&text, &p), v & mask, "{text}");
            }
        }
    }
}

#[test]
fn a_load_into_r0_agrees_and_is_kept_where_read_or_jumped_onto() {
    for (jump, read) in [(false, false), (true, false), (false, true)] {
        let body = format!(
            "ldxb %r8, [%r2+0]\nmov %r6, 5\nstxdw [%r10-8], %r6\nmov %r7, 3\njeq %r8, 1, +{}\n\
             ldxdw %r7, [%r10-8]\nmov %r0, %r7\n{}",
            u8::from(jump),
            if read { "add %r0, %r7" } else { "" }
        );
        let text = prog(&body);
        for sel in [0u8, 1] {
            let mut p = [0u8; 16];
            p[0] = sel;
            let v = if sel == 1 && jump { 3 } else { 5 };
            assert_eq!(both(&text, &p), if read { 2 * v } else { v }, "{text}");
        }
    }
}

/// Machine code size of `text` (XDP, JIT).
#[cfg(target_arch = "x86_64")]
fn code_len(text: &str) -> usize {
    let p = Program::load(
        assemble(text).unwrap(),
        &[],
        &Helpers::new(),
        &LoadOptions::default(),
    )
    .unwrap();
    p.machine_code().unwrap().len()
}

#[test]
fn jumps_the_bounds_decide_agree_and_emit_no_compare() {
    // r4 = pkt[0] & mask; then `if r4 OP k`: decided where the mask
    // bounds r4 (never or always taken), compared at run time elsewhere.
    // Each arm leaves its own r0; the jump's other edge is code no run
    // reaches when decided.
    for (op, k, mask) in [
        ("jgt", 300, 0xff),
        ("jgt", 255, 0xff),
        ("jgt", 254, 0xff),
        ("jge", 256, 0xff),
        ("jge", 255, 0xff),
        ("jeq", 256, 0xff),
        ("jeq", 7, 0xff),
        ("jlt", 256, 0xff),
        ("jlt", 255, 0xff),
        ("jle", 255, 0xff),
        ("jle", 254, 0xff),
        ("jne", 256, 0xff),
        ("jne", 7, 0x7),
        ("jgt", 200, 0xfff),
        // A 32-bit `and` bounds the value as well.
        ("jgt", 20, 0xf),
    ] {
        let text = prog(&format!(
            "ldxb %r4, [%r2+0]\nand %r4, {mask}\n{op} %r4, {k}, +2\nmov %r0, 1\nja out\n\
             mov %r0, 2\nmov %r6, 9"
        ));
        let decided = |v: u64| match op {
            "jgt" => v > k,
            "jge" => v >= k,
            "jeq" => v == k,
            "jlt" => v < k,
            "jle" => v <= k,
            _ => v != k,
        };
        for b in [0u8, 1, 7, 15, 20, 21, 200, 254, 255] {
            let mut pkt = [0u8; 16];
            pkt[0] = b;
            let v = u64::from(b) & mask;
            assert_eq!(
                both(&text, &pkt),
                if decided(v) { 2 } else { 1 },
                "{text} on {b}"
            );
        }
        // The verifier decides it exactly where the mask settles it.
        let always = (0..=mask).all(decided);
        let known = always || (0..=mask).all(|v| !decided(v));
        let insns = assemble(&text).unwrap();
        let a = verify_plain(&insns).unwrap();
        let want: Vec<(usize, bool)> = if known { vec![(8, always)] } else { vec![] };
        assert_eq!(a.decided, want, "{text}");
        // Decided: neither the compare nor the dead arm is emitted, so
        // the code is shorter than the same program with a constant the
        // bound does not settle (half the mask).
        #[cfg(target_arch = "x86_64")]
        if known {
            let open = text.replace(
                &format!("{op} %r4, {k},"),
                &format!("{op} %r4, {},", mask / 2),
            );
            let (a, b) = (code_len(&text), code_len(&open));
            assert!(a + 8 < b, "{op} {k} {mask}: {a} vs {b} bytes");
        }
    }
}

#[test]
fn a_compare_bounds_the_value_on_its_edge() {
    // `if r4 > 40 goto out` bounds r4 (a 32-bit load: too large to add
    // to a packet pointer) by 40 after it: `data + r4` is then a packet
    // pointer, and the test of it + 2 against the end proves the load
    // (without the bound it would be checked at run time). Both agree
    // with the interpreter.
    let text = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r5, %r2\nadd %r5, 42\n\
                jgt %r5, %r3, out\nldxw %r4, [%r2+0]\njgt %r4, 40, out\nmov %r6, %r2\n\
                add %r6, %r4\nmov %r7, %r6\nadd %r7, 2\njgt %r7, %r3, out\nldxh %r0, [%r6+0]\n\
                out:\nexit";
    let mut pkt: Vec<u8> = (0..70).map(|i| i as u8).collect();
    for at in [0u8, 3, 40, 41, 63] {
        pkt[..4].copy_from_slice(&u32::from(at).to_le_bytes());
        let want = if at > 40 {
            0
        } else {
            u64::from(u16::from_le_bytes([pkt[at as usize], pkt[at as usize + 1]]))
        };
        assert_eq!(both(text, &pkt[..42.max(at as usize + 2)]), want);
    }
    let insns = assemble(text).unwrap();
    let a = verify_plain(&insns).unwrap();
    assert_eq!(
        a.access[13],
        crate::verify::Access::Packet,
        "the load at 13"
    );
}

#[test]
fn or_ed_flags_agree_and_a_jump_inside_stops_the_fusion() {
    // pkt[0] is the value tested, pkt[1] selects the jump into the
    // pattern (at `into`, 0: none); the result tells which way it went
    // and what r4 (written between the `or` and the test) holds.
    for (test, either) in [
        ("jne %r6, 1", false),
        ("jeq %r6, 0", false),
        ("jeq %r6, 1", true),
        ("jne %r6, 0", true),
    ] {
        for into in 0..=8 {
            let pattern = [
                "mov %r6, 1".to_string(),
                "mov %r7, 1".to_string(),
                "jeq %r3, 5, +1".to_string(),
                "mov %r7, 0".to_string(),
                "jeq %r3, 9, +1".to_string(),
                "mov %r6, 0".to_string(),
                "or %r6, %r7".to_string(),
                "mov %r4, 40".to_string(),
                format!("{test}, hit"),
            ];
            let mut body = vec![
                "ldxb %r3, [%r2+0]".to_string(),
                "ldxb %r8, [%r2+1]".to_string(),
                "mov %r6, 0".to_string(),
                "mov %r7, 0".to_string(),
                "mov %r4, 3".to_string(),
            ];
            if into > 0 {
                body.push(format!("jeq %r8, 1, +{into}"));
            }
            body.extend(pattern);
            body.push("mov %r0, %r4".to_string());
            body.push("ja out".to_string());
            body.push("hit:".to_string());
            body.push("mov %r0, %r4".to_string());
            body.push("add %r0, 100".to_string());
            let text = prog(&body.join("\n"));
            for v in [5u8, 9, 7] {
                for sel in [0u8, 1] {
                    let mut pkt = [0u8; 16];
                    pkt[0] = v;
                    pkt[1] = sel;
                    let got = both(&text, &pkt);
                    if sel == 0 || into == 0 {
                        let set = v == 5 || v == 9;
                        let jumped = set == either;
                        assert_eq!(got, if jumped { 140 } else { 40 }, "{text} on {v}");
                    }
                }
            }
        }
    }
    // Fused where nothing jumps in: the code is shorter than with a jump
    // landing on the `or`.
    #[cfg(target_arch = "x86_64")]
    {
        let make = |into: &str| {
            prog(&format!(
                "ldxb %r3, [%r2+0]\nldxb %r8, [%r2+1]\nmov %r6, 0\nmov %r7, 0\n{into}\nmov %r6, 1\n\
                 mov %r7, 1\njeq %r3, 5, +1\nmov %r7, 0\njeq %r3, 9, +1\nmov %r6, 0\nor %r6, %r7\n\
                 jne %r6, 1, hit\nmov %r0, 1\nja out\nhit:\nmov %r0, 2"
            ))
        };
        let (fused, split) = (
            code_len(&make("jeq %r8, 7, +0")),
            code_len(&make("jeq %r8, 7, +6")),
        );
        assert!(fused + 8 < split, "{fused} vs {split} bytes");
    }
}

#[test]
fn a_loop_whose_head_is_a_dead_definition_still_spends_its_budget() {
    // The loop comes back to `mov %r3, 5`, which nothing reads (not
    // emitted): the head's charge must stay, or the run goes round all
    // 100 million times (and ends without the budget's fault).
    let text = "mov %r0, 0\nloop:\nmov %r3, 5\nadd %r0, 1\njlt %r0, 100000000, loop\nexit";
    for jit in [false, true] {
        let o = LoadOptions {
            jit,
            max_insns_per_run: 10_000,
            ..LoadOptions::default()
        };
        let p = Program::load(assemble(text).unwrap(), &[], &Helpers::new(), &o).unwrap();
        let mut frame = [0u8; 16];
        let r = p.run_xdp(&mut env(), &mut frame, 0, 16, 0, 0);
        assert!(
            matches!(r, Err(crate::Fault::Budget { .. })),
            "jit {jit}: {r:?}"
        );
    }
}
