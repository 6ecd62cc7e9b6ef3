//! Verifier tests: each refusal, and what it accepts.

use crate::asm::assemble;
use crate::env::Signature;
use crate::{Env, Helpers, LoadOptions, Program, VerifyError};

fn refuse(text: &str) -> VerifyError {
    refuse_with(text, &Helpers::new())
}

fn refuse_with(text: &str, h: &Helpers) -> VerifyError {
    let e = Program::load(assemble(text).unwrap(), &[], h, &LoadOptions::default()).unwrap_err();
    eprintln!("{text:?} -> {e}");
    e
}

fn accept(text: &str) -> Program {
    Program::load(
        assemble(text).unwrap(),
        &[],
        &Helpers::new(),
        &LoadOptions::default(),
    )
    .unwrap()
}

unsafe extern "C" fn nop(_: u64, _: u64, _: u64, _: u64, _: u64, _: *mut Env) -> u64 {
    0
}

#[test]
fn structure_is_checked() {
    assert!(refuse("mov %r0, 0").reason.contains("falls off the end"));
    assert_eq!(refuse("mov %r0, 0\nja +5\nexit").pc, 1);
    assert!(refuse("mov %r0, 0\nexit\nexit")
        .reason
        .contains("unreachable"));
    assert!(refuse("mov %r10, 0\nexit").reason.contains("read-only"));
    assert!(refuse("mov %r0, 0\nldxdw %r10, [%r1+0]\nexit")
        .reason
        .contains("read-only"));
    let mut p = assemble("lddw %r0, 5\njeq %r1, 0, -3\nexit").unwrap();
    assert!(Program::load(p.clone(), &[], &Helpers::new(), &LoadOptions::default()).is_ok());
    p[2].off = -2;
    assert!(
        Program::load(p.clone(), &[], &Helpers::new(), &LoadOptions::default())
            .unwrap_err()
            .reason
            .contains("middle of the 64-bit")
    );
    p[0].off = 1;
    assert!(
        Program::load(p, &[], &Helpers::new(), &LoadOptions::default())
            .unwrap_err()
            .reason
            .contains("reserved")
    );
    assert!(Program::load(vec![], &[], &Helpers::new(), &LoadOptions::default()).is_err());
}

#[test]
fn reserved_fields_and_unknown_opcodes_are_refused() {
    let exit = assemble("exit").unwrap()[0];
    let mov0 = assemble("mov %r0, 0").unwrap()[0];
    let with = |i: crate::Insn| vec![mov0, i, exit];
    for bad in [
        crate::Insn::new(0xb7, 0, 1, 0, 0),  // mov K with a src register
        crate::Insn::new(0xbf, 0, 1, 0, 5),  // mov X with an imm
        crate::Insn::new(0x07, 0, 0, 3, 1),  // add with an offset
        crate::Insn::new(0xe7, 0, 0, 0, 0),  // ALU64 op 0xe0
        crate::Insn::new(0x8f, 0, 1, 0, 0),  // neg X
        crate::Insn::new(0xdc, 0, 0, 0, 8),  // be8
        crate::Insn::new(0xdf, 0, 0, 0, 16), // ALU64 END X
        crate::Insn::new(0x20, 0, 0, 0, 0),  // LD ABS
        crate::Insn::new(0x9d, 0, 0, 0, 0),  // exit in JMP32
        crate::Insn::new(0x8d, 1, 0, 0, 0),  // callx
        crate::Insn::new(0xe5, 0, 1, 0, 0),  // JMP op 0xe0, not may_goto
        crate::Insn::new(0xdb, 10, 1, -8, 0x02), // atomic op 2
        crate::Insn::new(0xd3, 10, 1, -8, 0), // atomic of 1 byte
        crate::Insn::new(0x99, 0, 1, 0, 0),  // ldxsdw
        crate::Insn::new(0xbf, 0, 11, 0, 0), // r11
    ] {
        let e = Program::load(with(bad), &[], &Helpers::new(), &LoadOptions::default());
        assert!(e.is_err(), "{bad:?} accepted");
        assert_eq!(e.unwrap_err().pc, 1, "{bad:?}");
    }
    // may_goto (+0), load-acquire and store-release (on the stack).
    let st = crate::Insn::new(0x7b, 10, 0, -8, 0); // *(u64 *)(r10 - 8) = r0
    for good in [
        vec![mov0, crate::Insn::new(0xe5, 0, 0, 0, 0), exit],
        vec![mov0, st, crate::Insn::new(0xdb, 0, 10, -8, 0x100), exit],
        vec![mov0, crate::Insn::new(0xd3, 10, 0, -4, 0x110), exit],
    ] {
        let p = Program::load(good.clone(), &[], &Helpers::new(), &LoadOptions::default());
        assert!(p.is_ok(), "{good:?}: {:?}", p.err());
    }
}

#[test]
fn uninitialised_registers_are_refused_on_some_path() {
    assert_eq!(refuse("exit").pc, 0);
    assert!(refuse("mov %r0, %r2\nexit").reason.contains("r2"));
    let e = refuse("jeq %r1, 0, +1\nmov %r3, 1\nmov %r0, %r3\nexit");
    assert_eq!((e.pc, e.reason.contains("r3")), (2, true));
    accept("mov %r3, 2\njeq %r1, 0, +1\nmov %r3, 1\nmov %r0, %r3\nexit");
    let mut h = Helpers::new();
    h.insert(5, nop, Signature { args: 0 });
    h.insert(6, nop, Signature { args: 3 });
    assert!(refuse_with("mov %r6, %r1\ncall 5\nmov %r0, %r1\nexit", &h)
        .reason
        .contains("r1"));
    assert!(refuse_with("mov %r1, 0\nmov %r2, 0\ncall 6\nexit", &h)
        .reason
        .contains("r3"));
    // A callee sees only what every caller set.
    accept("mov %r2, 1\ncall local f\nexit\nf:\nmov %r0, %r2\nexit");
    let e = refuse(
        "jeq %r1, 0, +2\nmov %r2, 1\ncall local f\ncall local f\nexit\nf:\nmov %r0, %r2\nexit",
    );
    assert_eq!(e.pc, 5);
}

#[test]
fn helpers_must_be_given_and_are_named() {
    let e = refuse("call 44\nexit");
    assert!(
        e.reason.contains("44") && e.reason.contains("bpf_xdp_adjust_head"),
        "{e}"
    );
    assert!(refuse("call 9999\nexit").reason.contains("9999"));
    // Only where a path reaches it: behind a jump the bounds decide
    // (r1 is 0), as the kernel skips code a frozen setting rules out.
    accept("mov %r1, 0\njne %r1, 0, +1\nja +1\ncall 9999\nmov %r0, 2\nexit");
    assert!(
        refuse("mov %r1, 1\njne %r1, 0, +1\nja +1\ncall 9999\nmov %r0, 2\nexit")
            .reason
            .contains("9999")
    );
}

#[test]
fn stack_offsets_from_r10_stay_in_the_frame() {
    accept("stdw [%r10-512], 1\nldxdw %r0, [%r10-512]\nexit");
    assert!(refuse("stdw [%r10-513], 1\nmov %r0, 0\nexit")
        .reason
        .contains("stack"));
    assert!(refuse("mov %r0, 0\nstw [%r10-2], 1\nexit")
        .reason
        .contains("stack"));
    assert!(refuse("mov %r0, 0\nstxb [%r10+0], %r0\nexit")
        .reason
        .contains("stack"));
}

#[test]
fn call_graphs_without_cycles_and_at_most_eight_deep() {
    let e = refuse("call local f\nexit\nf:\ncall local f\nmov %r0, 0\nexit");
    assert!(e.reason.contains("recursive"), "{e}");
    let e = refuse("call local f\nexit\nf:\ncall local g\nexit\ng:\ncall local f\nexit");
    assert!(e.reason.contains("recursive"), "{e}");
    let chain = |n: usize| {
        let mut t = String::from("call local f1\nexit\n");
        for i in 1..n {
            t += &format!("f{i}:\ncall local f{}\nexit\n", i + 1);
        }
        t + &format!("f{n}:\nmov %r0, 7\nexit\n")
    };
    assert_eq!(accept(&chain(7)).run_mem(&mut env(), &mut []), Ok(7));
    assert!(refuse(&chain(8)).reason.contains("deeper"));
    assert!(refuse("mov %r0, 0\ncall local f\nf:\nexit")
        .reason
        .contains("falls through"));
    assert!(refuse("ja +2\nf:\nmov %r0, 0\nexit\ncall local f\nexit")
        .reason
        .contains("another function"));
}

fn env() -> Env {
    // SAFETY: no extra regions.
    unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
}

#[test]
fn loop_free_programs_are_not_counted() {
    let p = accept("mov %r0, 0\njeq %r1, 0, +1\nadd %r0, 1\nexit");
    assert!(!p.counted);
    let p = accept("mov %r0, 0\nl:\nadd %r0, 1\njlt %r0, 10, l\nexit");
    assert!(p.counted);
    assert_eq!(p.loop_cost[1], 2);
}

#[test]
fn kernel_rules_refuse_zero_divisors_and_wide_shifts() {
    assert!(refuse("mov %r0, 1\ndiv %r0, 0\nexit")
        .reason
        .contains("zero"));
    assert!(refuse("mov %r0, 1\nmod32 %r0, 0\nexit")
        .reason
        .contains("zero"));
    assert!(refuse("mov %r0, 1\nlsh32 %r0, 32\nexit")
        .reason
        .contains("shift"));
    assert!(refuse("mov %r0, 1\narsh %r0, -1\nexit")
        .reason
        .contains("shift"));
    accept("mov %r0, 1\nlsh %r0, 63\nexit");
}

#[test]
fn the_context_is_read_as_the_kernel_lets_an_interfaces_program() {
    // Whole 4-byte fields: data, data_end, data_meta, ingress_ifindex,
    // rx_queue_index.
    for off in [0, 4, 8, 12, 16] {
        accept(&format!("ldxw %r0, [%r1+{off}]\nmov %r0, 2\nexit"));
    }
    // Part of a field, more than one, egress_ifindex (a devmap entry
    // program's), past the end, misaligned: the kernel's
    // `xdp_is_valid_access` refuses each.
    for (load, why) in [
        ("ldxb %r0, [%r1+12]", "1 bytes at offset 12"),
        ("ldxh %r0, [%r1+16]", "2 bytes at offset 16"),
        ("ldxdw %r0, [%r1+12]", "8 bytes at offset 12"),
        (
            "ldxw %r0, [%r1+20]",
            "offset 20 of struct xdp_md (egress_ifindex",
        ),
        ("ldxw %r0, [%r1+24]", "4 bytes at offset 24"),
        ("ldxw %r0, [%r1+14]", "4 bytes at offset 14"),
    ] {
        let e = refuse(&format!("{load}\nmov %r0, 2\nexit"));
        assert!(e.reason.contains(why), "{load}: {e}");
    }
}

#[test]
fn pointer_arithmetic_is_what_the_kernel_allows() {
    // Allowed: a pointer plus or minus a scalar, two pointers subtracted
    // (a scalar), a subtraction of a register the verifier takes for a
    // scalar (it may be a pointer filled from the stack), 32-bit
    // subtraction (a scalar), the frame pointer copied.
    for ok in [
        "ldxw %r2, [%r1+0]\nadd %r2, 14\nmov %r0, 2\nexit",
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nsub %r3, %r2\nmov %r0, 2\nexit",
        "stxdw [%r10-8], %r1\nldxdw %r3, [%r10-8]\nldxw %r2, [%r1+4]\nsub %r2, %r3\nmov %r0, 2\nexit",
        "ldxw %r2, [%r1+0]\nsub32 %r2, 1\nmov %r0, 2\nexit",
        "mov %r2, %r10\nadd %r2, -8\nsub %r2, 8\nstdw [%r2+0], 1\nmov %r0, 2\nexit",
    ] {
        accept(ok);
    }
    for (bad, why) in [
        (
            "ldxw %r2, [%r1+0]\nmul %r2, 2\nmov %r0, 2\nexit",
            "*= on a pointer",
        ),
        (
            "mov %r2, %r10\nand %r2, -8\nmov %r0, 2\nexit",
            "bitwise &= on a pointer",
        ),
        (
            "ldxw %r2, [%r1+0]\nadd32 %r2, 1\nmov %r0, 2\nexit",
            "32-bit pointer arithmetic",
        ),
        (
            "ldxw %r2, [%r1+0]\nadd %r2, %r1\nmov %r0, 2\nexit",
            "pointer += pointer",
        ),
        (
            "ldxw %r2, [%r1+4]\nadd %r2, 1\nmov %r0, 2\nexit",
            "pointer arithmetic on data_end",
        ),
        (
            "ldxw %r2, [%r1+4]\nldxb %r0, [%r2-1]\nexit",
            "dereference of data_end",
        ),
        (
            "add %r1, 12\nldxw %r0, [%r1+0]\nexit",
            "dereference of a modified context pointer",
        ),
    ] {
        let e = refuse(bad);
        assert!(e.reason.contains(why), "{bad}: {e}");
        // Without the kernel's rules: accepted, checked at run time.
        let o = LoadOptions {
            kernel_rules: false,
            ..LoadOptions::default()
        };
        Program::load(assemble(bad).unwrap(), &[], &Helpers::new(), &o).unwrap();
    }
}

#[test]
fn a_number_as_a_map_helpers_map_is_refused() {
    // The kernel: "R1 type=scalar expected=map_ptr" (R2 for a tail call).
    let mut h = Helpers::new();
    h.insert(1, nop, Signature { args: 2 });
    h.insert(12, nop, Signature { args: 3 });
    let e = refuse_with(
        "mov %r1, 0\nmov %r2, %r10\nadd %r2, -8\nstdw [%r10-8], 0\ncall 1\nmov %r0, 0\nexit",
        &h,
    );
    assert!(
        e.reason
            .contains("bpf_map_lookup_elem's first argument must be a map, not a number"),
        "{e:?}"
    );
    let e = refuse_with("mov %r2, 7\nmov %r3, 0\ncall 12\nmov %r0, 0\nexit", &h);
    assert!(
        e.reason
            .contains("bpf_tail_call's second argument must be a map, not a number"),
        "{e:?}"
    );
}
