//! Interpreter tests, one group per instruction class.

use crate::asm::assemble;
use crate::env::{Signature, STACK_FRAME};
use crate::{Env, Fault, Helpers, LoadOptions, MapRef, Program, Region};

fn env() -> Env {
    // SAFETY: no extra regions.
    unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
}

/// Options that let the tests reach the interpreter's corner cases
/// (division by a zero immediate) and use r2 as `run_mem` sets it.
fn opts() -> LoadOptions {
    LoadOptions {
        kernel_rules: false,
        entry_args: 2,
        xdp_ctx: false,
        ..LoadOptions::default()
    }
}

fn load(text: &str) -> Program {
    Program::load(assemble(text).unwrap(), &[], &Helpers::new(), &opts()).unwrap()
}

/// Runs on the interpreter and (on x86-64) on the JIT, which must agree
/// on r0 or the fault and on the memory.
fn run(text: &str, mem: &mut [u8]) -> Result<u64, Fault> {
    let p = load(text);
    let orig = mem.to_vec();
    let want = p.run_mem_interpreted(&mut env(), mem);
    if p.is_jitted() {
        // Same buffer, so that fault addresses compare equal.
        let after = mem.to_vec();
        mem.copy_from_slice(&orig);
        let got = p.run_mem(&mut env(), mem);
        assert_eq!(got, want, "JIT and interpreter differ on {text:?}");
        assert_eq!(
            &after[..],
            &mem[..],
            "JIT and interpreter wrote differently: {text:?}"
        );
    }
    want
}

fn r0(text: &str) -> u64 {
    run(text, &mut []).unwrap()
}

#[test]
fn alu64_wraps_and_divides_as_ebpf() {
    assert_eq!(r0("lddw %r0, 0xffffffffffffffff\nadd %r0, 2\nexit"), 1);
    assert_eq!(r0("mov %r0, 3\nsub %r0, 5\nexit"), (-2i64) as u64);
    assert_eq!(
        r0("lddw %r0, 0x100000000\nmul %r0, 0x10\nexit"),
        0x10_0000_0000
    );
    assert_eq!(
        r0("mov %r0, 7\nmov %r1, 0\ndiv %r0, %r1\nexit"),
        0,
        "div by zero is 0"
    );
    assert_eq!(
        r0("mov %r0, 7\nmov %r1, 0\nmod %r0, %r1\nexit"),
        7,
        "mod by zero keeps dst"
    );
    assert_eq!(r0("mov %r0, -7\nsdiv %r0, 2\nexit"), (-3i64) as u64);
    assert_eq!(r0("mov %r0, -7\nsmod %r0, 2\nexit"), (-1i64) as u64);
    assert_eq!(
        r0("lddw %r0, 0x8000000000000000\nsdiv %r0, -1\nexit"),
        0x8000_0000_0000_0000
    );
    assert_eq!(r0("lddw %r0, 0x8000000000000000\nsmod %r0, -1\nexit"), 0);
    assert_eq!(
        r0("mov %r0, 1\nmov %r1, 65\nlsh %r0, %r1\nexit"),
        2,
        "shift count masked to 63"
    );
    assert_eq!(r0("mov %r0, -16\narsh %r0, 2\nexit"), (-4i64) as u64);
    assert_eq!(r0("mov %r0, -16\nrsh %r0, 60\nexit"), 0xf);
    assert_eq!(r0("mov %r0, 5\nneg %r0\nexit"), (-5i64) as u64);
    assert_eq!(
        r0("mov %r0, 0xf0\nor %r0, 0x0f\nand %r0, 0x3c\nxor %r0, 0xff\nexit"),
        0xc3
    );
    assert_eq!(
        r0("mov %r1, 0x80\nmovsx864 %r0, %r1\nexit"),
        (-128i64) as u64
    );
    assert_eq!(
        r0("lddw %r1, 0x80000000\nmovsx3264 %r0, %r1\nexit"),
        0xffff_ffff_8000_0000
    );
}

#[test]
fn alu32_zero_extends() {
    assert_eq!(r0("lddw %r0, 0xffffffffffffffff\nadd32 %r0, 2\nexit"), 1);
    assert_eq!(
        r0("lddw %r0, 0x1ffffffff\nmov32 %r0, %r0\nexit"),
        0xffff_ffff
    );
    assert_eq!(
        r0("lddw %r0, 0x100000007\nmov32 %r1, 0\nmod32 %r0, %r1\nexit"),
        7,
        "mod32 by zero zeroes the upper half"
    );
    assert_eq!(r0("mov32 %r0, 7\ndiv32 %r0, 0\nexit"), 0);
    assert_eq!(
        r0("mov32 %r0, -7\nsdiv32 %r0, 2\nexit"),
        (-3i32) as u32 as u64
    );
    assert_eq!(
        r0("mov32 %r0, 1\nlsh32 %r0, 33\nexit"),
        2,
        "shift count masked to 31"
    );
    assert_eq!(
        r0("mov32 %r0, -16\narsh32 %r0, 2\nexit"),
        (-4i32) as u32 as u64
    );
    assert_eq!(r0("mov32 %r0, 5\nneg32 %r0\nexit"), (-5i32) as u32 as u64);
    assert_eq!(r0("mov %r1, 0x8080\nmovsx1632 %r0, %r1\nexit"), 0xffff_8080);
}

#[test]
fn byte_swaps() {
    assert_eq!(r0("lddw %r0, 0x1122334455667788\nbe16 %r0\nexit"), 0x8877);
    assert_eq!(
        r0("lddw %r0, 0x1122334455667788\nbe32 %r0\nexit"),
        0x8877_6655
    );
    assert_eq!(
        r0("lddw %r0, 0x1122334455667788\nbe64 %r0\nexit"),
        0x8877_6655_4433_2211
    );
    assert_eq!(r0("lddw %r0, 0x1122334455667788\nle16 %r0\nexit"), 0x7788);
    assert_eq!(
        r0("lddw %r0, 0x1122334455667788\nle32 %r0\nexit"),
        0x5566_7788
    );
    assert_eq!(
        r0("lddw %r0, 0x1122334455667788\nbswap32 %r0\nexit"),
        0x8877_6655
    );
}

#[test]
fn jumps_signed_unsigned_and_32_bit() {
    let t = |cond: &str| r0(&format!("mov %r0, 0\n{cond}, +1\nexit\nmov %r0, 1\nexit"));
    assert_eq!(t("mov %r1, -1\njgt %r1, 1"), 1);
    assert_eq!(t("mov %r1, -1\njsgt %r1, 1"), 0);
    assert_eq!(t("mov %r1, -1\njslt %r1, 0"), 1);
    assert_eq!(t("mov %r1, 5\njset %r1, 4"), 1);
    assert_eq!(t("mov %r1, 5\njset %r1, 2"), 0);
    assert_eq!(t("lddw %r1, 0x100000001\njeq32 %r1, 1"), 1);
    assert_eq!(t("lddw %r1, 0x100000001\njeq %r1, 1"), 0);
    assert_eq!(t("mov %r1, 3\nmov %r2, 3\njle %r1, %r2"), 1);
    assert_eq!(t("mov32 %r1, -1\njsgt32 %r1, 0"), 0);
    assert_eq!(
        r0("mov %r0, 1\njeq %r1, 0, +1\nja32 +1\nmov %r0, 3\nexit"),
        1
    );
}

#[test]
fn loads_and_stores_of_every_size() {
    let mut mem = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x80, 0];
    assert_eq!(run("ldxb %r0, [%r1+1]\nexit", &mut mem), Ok(0x22));
    assert_eq!(run("ldxh %r0, [%r1+1]\nexit", &mut mem), Ok(0x3322));
    assert_eq!(run("ldxw %r0, [%r1]\nexit", &mut mem), Ok(0x4433_2211));
    assert_eq!(
        run("ldxdw %r0, [%r1+2]\nexit", &mut mem),
        Ok(0x0080_8877_6655_4433)
    );
    assert_eq!(
        run("ldxsb %r0, [%r1+8]\nexit", &mut mem),
        Ok((-128i64) as u64)
    );
    assert_eq!(
        run("ldxsh %r0, [%r1+7]\nexit", &mut mem),
        Ok(0xffff_ffff_ffff_8088)
    );
    assert_eq!(
        run(
            "stb [%r1+9], 0x7f\nstxh [%r1], %r2\nmov %r0, 0\nexit",
            &mut mem
        ),
        Ok(0)
    );
    assert_eq!(
        (mem[9], mem[0], mem[1]),
        (0x7f, 10, 0),
        "r2 held the length"
    );
    assert_eq!(
        run("stdw [%r10-8], -1\nldxdw %r0, [%r10-8]\nexit", &mut mem),
        Ok(u64::MAX)
    );
}

#[test]
fn accesses_outside_the_regions_fault() {
    let mut mem = [0u8; 8];
    let base = mem.as_ptr() as u64;
    assert_eq!(
        run("ldxw %r0, [%r1+6]\nexit", &mut mem),
        Err(Fault::OutOfBounds {
            pc: 0,
            addr: base + 6,
            len: 4,
            write: false
        })
    );
    assert_eq!(
        run("mov %r0, 0\nstb [%r1-1], 1\nexit", &mut mem),
        Err(Fault::OutOfBounds {
            pc: 1,
            addr: base - 1,
            len: 1,
            write: true
        })
    );
    assert!(matches!(
        run("mov %r2, %r10\nldxdw %r0, [%r2+0]\nexit", &mut mem),
        Err(Fault::OutOfBounds { .. } | Fault::Context { .. })
    ));
    assert!(matches!(
        run("mov %r2, %r10\nldxdw %r0, [%r2-4097]\nexit", &mut mem),
        Err(Fault::OutOfBounds { .. })
    ));
    assert!(matches!(
        run("mov %r1, 0\nldxb %r0, [%r1]\nexit", &mut mem),
        Err(Fault::OutOfBounds { .. })
    ));
    assert!(matches!(
        run(
            "lddw %r1, 0xfffffffffffffffe\nldxw %r0, [%r1]\nexit",
            &mut mem
        ),
        Err(Fault::OutOfBounds { .. })
    ));
}

#[test]
fn read_only_regions_refuse_stores() {
    let ro = [7u8; 16];
    let region = Region {
        start: ro.as_ptr() as u64,
        len: 16,
        writable: false,
    };
    // SAFETY: `ro` outlives the Env and no reference is taken during the run.
    let mut e = unsafe { Env::new(vec![region], core::ptr::null_mut()) };
    let maps = [MapRef {
        handle: 0,
        key_size: 4,
        value_size: 16,
        max_entries: 1,
        direct: Some(region),
        array: None,
        map_type: 0,
        flags: 0,
    }];
    let text = "lddw %r1, 0\nmov %r0, 0\nldxb %r0, [%r1+15]\nexit";
    let mut insns = assemble(text).unwrap();
    insns[0].src = crate::insn::PSEUDO_MAP_VALUE;
    insns[1].imm = 0;
    let p = Program::load(
        insns.clone(),
        &maps,
        &Helpers::new(),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(p.run_mem(&mut e, &mut []), Ok(7));
    insns[3] = assemble("stb [%r1+0], 1").unwrap()[0];
    // The kernel's rules refuse the store at load ("write into map
    // forbidden"); without them, the run-time check refuses it.
    let why = Program::load(
        insns.clone(),
        &maps,
        &Helpers::new(),
        &LoadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(why.to_string().contains("read-only global data"), "{why}");
    let p = Program::load(
        insns.clone(),
        &maps,
        &Helpers::new(),
        &LoadOptions {
            kernel_rules: false,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    assert!(matches!(
        p.run_mem(&mut e, &mut []),
        Err(Fault::OutOfBounds { write: true, .. })
    ));
    insns[1].imm = 16;
    assert!(Program::load(insns, &maps, &Helpers::new(), &LoadOptions::default()).is_err());
}

/// An XDP program as the kernel sees it: r1 is the context.
fn load_xdp(text: &str, jit: bool) -> Result<Program, crate::VerifyError> {
    let o = LoadOptions {
        jit,
        ..LoadOptions::default()
    };
    Program::load(assemble(text).unwrap(), &[], &Helpers::new(), &o)
}

/// An XDP program whose unproven packet accesses a test runs: without
/// the kernel's rules, which refuse them ("invalid access to packet"),
/// they are checked at run time.
fn load_xdp_run_time_checks(text: &str, jit: bool) -> Program {
    let o = LoadOptions {
        jit,
        kernel_rules: false,
        ..LoadOptions::default()
    };
    Program::load(assemble(text).unwrap(), &[], &Helpers::new(), &o).unwrap()
}

#[test]
fn xdp_context_converts_pointers() {
    for jit in [false, true] {
        let p = load_xdp_run_time_checks(
            "mov %r9, %r1
ldxw %r2, [%r1+0]
ldxw %r3, [%r9+4]
ldxw %r4, [%r1+12]
ldxw %r5, [%r1+16]
\
             mov %r0, %r3
sub %r0, %r2
lsh %r4, 8
add %r0, %r4
lsh %r5, 16
add %r0, %r5
\
             ldxb %r2, [%r2+0]
lsh %r2, 24
add %r0, %r2
exit",
            jit,
        );
        let mut frame = [0u8; 128];
        frame[32] = 9;
        let out = p.run_xdp(&mut env(), &mut frame, 32, 60, 3, 5).unwrap();
        assert_eq!(
            out.action,
            60 + (3 << 8) + (5 << 16) + (9 << 24),
            "jit {jit}"
        );
        assert_eq!((out.data_meta, out.data, out.data_end), (32, 32, 92));
        let p = load_xdp_run_time_checks(
            "ldxw %r0, [%r1+0]
ldxb %r0, [%r0-1]
exit",
            jit,
        );
        let r = p.run_xdp(&mut env(), &mut frame, 10, 60, 0, 0);
        assert!(
            matches!(r, Err(Fault::OutOfBounds { .. })),
            "headroom is not the packet"
        );
    }
    // What the kernel refuses at load, so do we.
    let refuse = |t: &str| load_xdp(t, false).unwrap_err().reason;
    assert!(refuse(
        "mov %r0, 0
stw [%r1+12], 1
exit"
    )
    .contains("context"));
    assert!(refuse(
        "ldxh %r0, [%r1+0]
exit"
    )
    .contains("context"));
    assert!(refuse(
        "ldxw %r0, [%r1+22]
exit"
    )
    .contains("context"));
    assert!(refuse(
        "mov %r2, %r1
ldxdw %r0, [%r2+0]
exit"
    )
    .contains("context"));
    // A dereference of the context pointer moved is refused, as the
    // kernel refuses it; without the kernel's rules the moved pointer is
    // an ordinary one, checked at run time (so is a filled one the
    // verifier does not track).
    let moved = "mov %r2, %r1
add %r2, 4
ldxw %r0, [%r2+0]
exit";
    assert!(load_xdp(moved, true)
        .err()
        .unwrap()
        .reason
        .contains("dereference of a modified context pointer"));
    let o = LoadOptions {
        kernel_rules: false,
        ..LoadOptions::default()
    };
    let p = Program::load(assemble(moved).unwrap(), &[], &Helpers::new(), &o).unwrap();
    let mut frame = [0u8; 64];
    let r = p.run_xdp(&mut env(), &mut frame, 0, 60, 0, 0).unwrap();
    assert_eq!(
        r.action,
        frame.as_ptr() as u64 + 60,
        "runtime conversion of data_end"
    );
}

#[test]
fn atomics_32_and_64() {
    let t = |body: &str| r0(&format!("stdw [%r10-8], 10\nmov %r1, 3\n{body}\nexit"));
    assert_eq!(t("lock add [%r10-8], %r1\nldxdw %r0, [%r10-8]"), 13);
    assert_eq!(t("lock fetch add [%r10-8], %r1\nmov %r0, %r1"), 10);
    assert_eq!(t("lock fetch or32 [%r10-8], %r1\nldxdw %r0, [%r10-8]"), 11);
    assert_eq!(t("lock fetch and [%r10-8], %r1\nldxdw %r0, [%r10-8]"), 2);
    assert_eq!(t("lock fetch xor [%r10-8], %r1\nldxdw %r0, [%r10-8]"), 9);
    assert_eq!(
        t("lock xchg [%r10-8], %r1\nldxdw %r0, [%r10-8]\nlsh %r0, 8\nadd %r0, %r1"),
        (3 << 8) + 10
    );
    assert_eq!(
        t("mov %r0, 10\nlock cmpxchg [%r10-8], %r1\nldxdw %r0, [%r10-8]"),
        3
    );
    assert_eq!(
        t("mov %r0, 9\nlock cmpxchg [%r10-8], %r1\nldxdw %r1, [%r10-8]\nlsh %r0, 8\nadd %r0, %r1"),
        (10 << 8) + 10
    );
    assert!(matches!(
        run(
            "mov %r0, 0\nmov %r1, 1\nlock add [%r10-15], %r1\nexit",
            &mut []
        ),
        Err(Fault::Misaligned { pc: 2, .. })
    ));
}

unsafe extern "C" fn sum_helper(r1: u64, r2: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes the live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    match env.check(r1, r2) {
        Ok(b) => b.iter().map(|&x| x as u64).sum(),
        Err(f) => {
            env.fault(f);
            0
        }
    }
}

#[test]
fn helpers_get_checked_pointers() {
    let mut h = Helpers::new();
    h.insert(100, sum_helper, Signature { args: 2 });
    let p = Program::load(assemble("call 100\nexit").unwrap(), &[], &h, &opts()).unwrap();
    assert_eq!(p.run_mem(&mut env(), &mut [1, 2, 3]), Ok(6));
    let p = Program::load(
        assemble("add %r2, 1\ncall 100\nexit").unwrap(),
        &[],
        &h,
        &opts(),
    )
    .unwrap();
    assert!(matches!(
        p.run_mem(&mut env(), &mut [1, 2, 3]),
        Err(Fault::OutOfBounds { pc: 1, .. })
    ));
}

#[test]
fn local_calls_save_registers_and_get_their_own_frame() {
    let text = "mov %r6, 5\nstdw [%r10-8], 7\ncall local f\nldxdw %r1, [%r10-8]\nadd %r0, %r1\nadd %r0, %r6\nexit\n\
                f:\nmov %r6, 100\nstdw [%r10-8], 1000\nmov %r0, %r10\nexit";
    let e = &mut env();
    let top = e.stack_top();
    let got = load(text).run_mem(e, &mut []).unwrap();
    assert_eq!(got, top - STACK_FRAME as u64 + 7 + 5);
}

#[test]
fn loops_run_out_of_budget() {
    assert!(matches!(
        run("l:\nja l", &mut []),
        Err(Fault::Budget { .. })
    ));
    let count = |n: u32| format!("mov %r0, 0\nl:\nadd %r0, 1\njlt %r0, {n}, l\nexit");
    assert_eq!(run(&count(1000), &mut []), Ok(1000));
    let small = LoadOptions {
        max_insns_per_run: 100,
        ..opts()
    };
    let p = Program::load(
        assemble(&count(1000)).unwrap(),
        &[],
        &Helpers::new(),
        &small,
    )
    .unwrap();
    assert_eq!(
        p.run_mem(&mut env(), &mut []).err(),
        Some(Fault::Budget { pc: 1 })
    );
    let p = Program::load(assemble(&count(40)).unwrap(), &[], &Helpers::new(), &small).unwrap();
    assert_eq!(p.run_mem(&mut env(), &mut []), Ok(40));
}

/// `bpf_xdp_adjust_head(ctx, delta)`, as a loader would write it.
unsafe extern "C" fn adjust_head(_: u64, delta: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes the live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let (meta, data, end) = env.packet();
    let new = data.wrapping_add(delta as i32 as i64 as u64);
    let meta = if meta == data { new } else { meta };
    match env.set_packet(new, meta, end) {
        Ok(()) => 0,
        Err(_) => u64::MAX, // -EINVAL: the program sees the failure
    }
}

#[test]
fn moved_packet_bounds_hold_on_both_engines() {
    let mut h = Helpers::new();
    h.insert(44, adjust_head, Signature { args: 2 });
    // Adjust by r7, then load the 4 bytes at the new ctx->data + r8.
    let text = |delta: i32, at: i32| {
        format!(
            "mov %r6, %r1\nmov %r2, {delta}\ncall 44\nmov %r7, %r0\nldxw %r2, [%r6+0]\nadd %r2, {at}\n\
             ldxw %r0, [%r2+0]\nexit"
        )
    };
    for jit in [false, true] {
        // The reads after the adjust are not proven (the kernel's rules
        // refuse them): checked at run time.
        let o = LoadOptions {
            jit,
            kernel_rules: false,
            ..LoadOptions::default()
        };
        let run = |t: String| {
            let p = Program::load(assemble(&t).unwrap(), &[], &h, &o).unwrap();
            let mut frame = [0u8; 64];
            frame[12..16].copy_from_slice(&[1, 2, 3, 4]);
            p.run_xdp(&mut env(), &mut frame, 16, 32, 0, 0)
                .map(|o| (o.action, o.data, o.data_end))
        };
        // Grown into the headroom: the new first bytes are readable.
        assert_eq!(run(text(-4, 0)), Ok((0x0403_0201, 12, 48)), "jit {jit}");
        // Shrunk: the last 4 bytes of the old packet are no longer in it.
        assert_eq!(run(text(8, 20)), Ok((0, 24, 48)), "jit {jit}");
        assert!(
            matches!(run(text(8, 21)), Err(Fault::OutOfBounds { pc: 6, .. })),
            "jit {jit}"
        );
        // Beyond the frame: refused by the helper, bounds unchanged.
        assert!(
            matches!(run(text(-17, -1)), Err(Fault::OutOfBounds { pc: 6, .. })),
            "jit {jit}"
        );
    }
}

/// `bpf_xdp_adjust_tail(ctx, delta)`.
unsafe extern "C" fn adjust_tail(_: u64, delta: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes the live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let (meta, data, end) = env.packet();
    match env.set_packet(data, meta, end.wrapping_add(delta as i32 as i64 as u64)) {
        Ok(()) => 0,
        Err(_) => u64::MAX,
    }
}

#[test]
fn a_moved_tail_moves_the_jits_inline_bound() {
    let mut h = Helpers::new();
    h.insert(65, adjust_tail, Signature { args: 2 });
    let text = |delta: i32, at: i32| {
        format!("mov %r6, %r1\nmov %r2, {delta}\ncall 65\nldxw %r2, [%r6+0]\nldxdw %r0, [%r2+{at}]\nexit")
    };
    for jit in [false, true] {
        // The reads after the adjust are not proven (the kernel's rules
        // refuse them): checked at run time.
        let o = LoadOptions {
            jit,
            kernel_rules: false,
            ..LoadOptions::default()
        };
        let run = |t: String| {
            let p = Program::load(assemble(&t).unwrap(), &[], &h, &o).unwrap();
            let mut frame = [7u8; 64];
            p.run_xdp(&mut env(), &mut frame, 16, 32, 0, 0)
                .map(|o| (o.action, o.data_end))
        };
        assert_eq!(
            run(text(-8, 16)),
            Ok((0x0707_0707_0707_0707, 40)),
            "jit {jit}"
        );
        assert!(
            matches!(run(text(-8, 17)), Err(Fault::OutOfBounds { pc: 4, .. })),
            "jit {jit}"
        );
        assert_eq!(
            run(text(8, 32)),
            Ok((0x0707_0707_0707_0707, 56)),
            "jit {jit}"
        );
        assert!(
            matches!(run(text(8, 49)), Err(Fault::OutOfBounds { pc: 4, .. })),
            "jit {jit}"
        );
    }
}

/// `bpf_map_lookup_elem` over one 24-byte value (8-aligned), found for a
/// nonzero 4-byte key; the value arena is the `user` pointer.
unsafe extern "C" fn lookup(_: u64, key: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes the live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    match env.check(key, 4) {
        Ok(k) if k != [0; 4] => env.user::<u8>() as u64,
        Ok(_) => 0,
        Err(f) => {
            env.fault(f);
            0
        }
    }
}

#[test]
fn map_values_checked_for_null_are_accessed_directly() {
    use crate::verify::Access;
    let text = |key: u32, off: i32| {
        format!(
            "stw [%r10-4], {key}\nlddw %r1, 0\nmov %r2, %r10\nadd %r2, -4\ncall 1\njeq %r0, 0, miss\n\
             ldxdw %r3, [%r0+0]\nadd %r3, 5\nstxdw [%r0+0], %r3\nmov %r4, 1\nlock add [%r0+8], %r4\n\
             lock fetch add [%r0+8], %r4\nstw [%r0+{off}], 7\nldxw %r0, [%r0+16]\nadd %r0, %r4\nexit\n\
             miss:\nmov %r0, 99\nexit"
        )
    };
    let maps = [MapRef {
        handle: 0xfeed,
        key_size: 4,
        value_size: 24,
        max_entries: 1,
        direct: None,
        array: None,
        map_type: 0,
        flags: 0,
    }];
    let mut h = Helpers::new();
    h.insert(1, lookup, Signature { args: 2 });
    for jit in [false, true] {
        let o = LoadOptions {
            jit,
            ..LoadOptions::default()
        };
        let load = |t: String| {
            let mut insns = assemble(&t).unwrap();
            insns[1].src = crate::insn::PSEUDO_MAP_FD;
            Program::load(insns, &maps, &h, &o).unwrap()
        };
        let mut arena = [0u64; 3];
        arena[0] = 10;
        let region = Region {
            start: arena.as_ptr() as u64,
            len: 24,
            writable: true,
        };
        let p = load(text(1, 16));
        let marked: Vec<usize> = (0..p.insns.len())
            .filter(|&pc| p.access.get(pc) == Some(&Access::Value))
            .collect();
        assert_eq!(marked, [7, 9, 11, 12, 13, 14], "jit {jit}");
        // SAFETY: `arena` outlives the Env; no reference to it during runs.
        let mut e = unsafe { Env::new(vec![region], arena.as_mut_ptr().cast()) };
        let mut frame = [0u8; 64];
        let r = p.run_xdp(&mut e, &mut frame, 0, 60, 0, 0).unwrap();
        assert_eq!(r.action, 7 + 1, "jit {jit}");
        let r = load(text(0, 16))
            .run_xdp(&mut e, &mut frame, 0, 60, 0, 0)
            .unwrap();
        assert_eq!(r.action, 99);
        // Outside the value: refused as the kernel refuses it; without
        // the kernel's rules, checked at run time, and it faults.
        let e21 = Program::load(
            {
                let mut insns = assemble(&text(1, 21)).unwrap();
                insns[1].src = crate::insn::PSEUDO_MAP_FD;
                insns
            },
            &maps,
            &h,
            &o,
        )
        .unwrap_err();
        assert!(e21.reason.contains("outside it"), "{e21}");
        let lax = LoadOptions {
            kernel_rules: false,
            ..o.clone()
        };
        let mut insns = assemble(&text(1, 21)).unwrap();
        insns[1].src = crate::insn::PSEUDO_MAP_FD;
        let p = Program::load(insns, &maps, &h, &lax).unwrap();
        assert_eq!(p.access.get(13), Some(&Access::Checked));
        assert!(matches!(
            p.run_xdp(&mut e, &mut frame, 0, 60, 0, 0),
            Err(Fault::OutOfBounds { pc: 13, .. })
        ));
        drop(e);
        assert_eq!(arena, [10 + 5 + 5, 2 + 2, 7], "jit {jit}");
    }
}

#[test]
fn packet_bytes_proven_by_a_data_end_comparison_are_accessed_directly() {
    use crate::verify::Access;
    // Ethernet: if data + 14 > data_end, drop; else read the EtherType,
    // write a byte, and read 4 bytes at 20 (not proven: checked).
    let text = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 14\nmov %r0, 1\n\
                jgt %r4, %r3, out\nldxh %r0, [%r2+12]\nstb [%r2+0], 0xaa\nldxb %r5, [%r4-1]\n\
                add %r0, %r5\njlt %r3, %r4, out\nldxw %r5, [%r2+20]\nadd %r0, %r5\nout:\nexit";
    for jit in [false, true] {
        let p = load_xdp_run_time_checks(text, jit);
        let marked: Vec<Access> = (6..12)
            .map(|pc| p.access.get(pc).copied().unwrap_or_default())
            .collect();
        assert_eq!(
            marked,
            [
                Access::Packet,
                Access::Packet,
                Access::Packet,
                Access::Checked,
                Access::Checked,
                Access::Checked
            ],
            "jit {jit}"
        );
        for len in 0..40 {
            let mut frame = [0x11u8; 64];
            let r = p.run_xdp(&mut env(), &mut frame, 8, len, 0, 0);
            let want = if len < 14 {
                Ok(1)
            } else if len < 24 {
                Err(())
            } else {
                Ok(0x1111 + 0x11 + 0x1111_1111)
            };
            assert_eq!(
                r.map(|o| o.action).map_err(|_| ()),
                want,
                "jit {jit} len {len}"
            );
            assert_eq!(frame[8], if len >= 14 { 0xaa } else { 0x11 });
        }
    }
    // The reverse comparison, and a helper call forgetting what was proven.
    let p = load_xdp(
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 8\nmov %r0, 0\njge %r3, %r4, ok\nexit\n\
         ok:\nldxdw %r0, [%r2+0]\nexit",
        true,
    )
    .unwrap();
    assert_eq!(p.access.get(7), Some(&Access::Packet));
    // Each form, on the side where it proves nothing and where it does.
    for (cmp, proven_when_taken) in [
        ("jgt %r4, %r3", false),
        ("jge %r4, %r3", false),
        ("jlt %r4, %r3", true),
        ("jle %r4, %r3", true),
        ("jgt %r3, %r4", true),
        ("jge %r3, %r4", true),
        ("jlt %r3, %r4", false),
        ("jle %r3, %r4", false),
    ] {
        let t = format!(
            "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 4\nmov %r0, 0\n{cmp}, taken\n\
             ldxw %r0, [%r2+0]\nexit\ntaken:\nldxw %r0, [%r2+0]\nexit"
        );
        // The kernel's rules refuse the side that proves nothing.
        let e = load_xdp(&t, true).unwrap_err();
        assert_eq!(e.pc, if proven_when_taken { 6 } else { 8 }, "{cmp}");
        assert!(e.reason.contains("invalid access to packet"), "{e}");
        let p = load_xdp_run_time_checks(&t, true);
        let (fall, taken) = (
            p.access.get(6).copied().unwrap_or_default(),
            p.access.get(8).copied().unwrap_or_default(),
        );
        let want = |proven: bool| {
            if proven {
                Access::Packet
            } else {
                Access::Checked
            }
        };
        assert_eq!(
            (fall, taken),
            (want(!proven_when_taken), want(proven_when_taken)),
            "{cmp}"
        );
    }
}
