//! XDP runs: the short path (JIT code that needs only the packet), the
//! full one, and what an `Env` still reaches after a run.

use crate::asm::assemble;
use crate::env::Signature;
use crate::{Env, Fault, Helpers, LoadOptions, Program, XdpEnd};

fn env() -> Env {
    // SAFETY: no extra regions.
    unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
}

/// `bpf_xdp_adjust_head(ctx, delta)`.
unsafe extern "C" fn adjust_head(_: u64, delta: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes the live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let (meta, data, end) = env.packet();
    let new = data.wrapping_add(delta as i32 as i64 as u64);
    let meta = if meta == data { new } else { meta };
    match env.set_packet(new, meta, end) {
        Ok(()) => 0,
        Err(_) => u64::MAX,
    }
}

/// A helper that always faults.
unsafe extern "C" fn fail(_: u64, _: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes the live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    env.fault(Fault::Helper {
        pc: 0,
        reason: "asked to",
    });
    0
}

fn helpers() -> Helpers {
    let mut h = Helpers::new();
    h.insert(44, adjust_head, Signature { args: 2 });
    h.insert(99, fail, Signature { args: 0 });
    h
}

fn load(text: &str, jit: bool) -> Program {
    let o = LoadOptions {
        jit,
        ..LoadOptions::default()
    };
    Program::load(assemble(text).unwrap(), &[], &helpers(), &o).unwrap()
}

/// Programs for every path of a run: proven packet reads only (the
/// short path), one that moves the packet, one that faults, one that
/// reads the context through a pointer the verifier cannot place.
const PROVEN: &str = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 2\n\
                      mov %r0, 0\njgt %r4, %r3, +1\nldxb %r0, [%r2+1]\nexit";
const MOVES: &str = "mov %r2, -4\ncall 44\nmov %r0, 2\nexit";
const FAULTS: &str = "call 99\nmov %r0, 2\nexit";
const CTX_PTR: &str = "stxdw [%r10-8], %r1\nldxdw %r2, [%r10-8]\nldxw %r0, [%r2+12]\nexit";

#[test]
fn the_short_path_is_taken_only_where_nothing_else_is_needed() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    assert!(load(PROVEN, true).plain());
    assert!(load(MOVES, true).plain());
    assert!(!load(PROVEN, false).plain());
    // A load the verifier cannot place may read ingress_ifindex.
    assert!(load(CTX_PTR, true).reads_ctx);
    assert!(!load(CTX_PTR, true).plain());
    assert!(!load("ldxw %r0, [%r1+12]\nexit", true).plain());
    assert!(load("ldxw %r0, [%r1+4]\nexit", true).plain());
}

#[test]
fn both_paths_give_the_same_outcomes() {
    for jit in [false, true] {
        let mut e = env();
        let mut frame = [0u8; 64];
        frame[17] = 0x5a;
        let p = load(PROVEN, jit);
        let o = p.run_xdp(&mut e, &mut frame, 16, 32, 0, 0).unwrap();
        assert_eq!((o.action, o.data, o.data_end), (0x5a, 16, 48), "jit {jit}");
        let quiet = |a: u64| {
            if jit && cfg!(target_arch = "x86_64") {
                XdpEnd::Quiet(a)
            } else {
                XdpEnd::Full(Ok(crate::RunOutcome {
                    action: a,
                    data_meta: 20,
                    data: 20,
                    data_end: 28,
                    tail_call: None,
                }))
            }
        };
        assert_eq!(p.run_xdp_quick(&mut e, &mut frame, 20, 8, 0, 0), quiet(0));
        // Too short for the proven read: action 0, still quiet.
        let o = p.run_xdp(&mut e, &mut frame, 16, 1, 0, 0).unwrap();
        assert_eq!((o.action, o.data, o.data_end), (0, 16, 17), "jit {jit}");
        // A moved packet is read back (and the next run is quiet again).
        let m = load(MOVES, jit);
        let o = m.run_xdp(&mut e, &mut frame, 16, 32, 0, 0).unwrap();
        assert_eq!((o.action, o.data_meta, o.data, o.data_end), (2, 12, 12, 48));
        assert!(matches!(
            m.run_xdp_quick(&mut e, &mut frame, 16, 32, 0, 0),
            XdpEnd::Full(Ok(_))
        ));
        frame[21] = 0x33;
        assert_eq!(
            p.run_xdp_quick(&mut e, &mut frame, 20, 8, 0, 0),
            quiet(0x33)
        );
        // A fault is reported, and does not stick to the next run.
        let f = load(FAULTS, jit);
        assert!(matches!(
            f.run_xdp(&mut e, &mut frame, 16, 32, 0, 0),
            Err(Fault::Helper { pc: 0, .. })
        ));
        assert_eq!(
            p.run_xdp(&mut e, &mut frame, 16, 32, 0, 0)
                .map(|o| o.action),
            Ok(0x5a)
        );
        // The context through an unplaced pointer: this run's ifindex.
        let c = load(CTX_PTR, jit);
        for ifindex in [7, 9] {
            let o = c.run_xdp(&mut e, &mut frame, 16, 32, ifindex, 0).unwrap();
            assert_eq!(o.action, u64::from(ifindex), "jit {jit}");
        }
    }
}

#[test]
fn no_frame_is_reachable_after_a_run() {
    for jit in [false, true] {
        for text in [PROVEN, MOVES, FAULTS, CTX_PTR] {
            let p = load(text, jit);
            let mut e = env();
            let mut frame = vec![0u8; 64];
            let base = frame.as_ptr() as u64;
            let _ = p.run_xdp(&mut e, &mut frame, 16, 32, 3, 0);
            drop(frame);
            // Every byte of the old frame, every way in.
            for a in base..base + 64 {
                assert!(e.check(a, 1).is_err(), "{text} jit {jit}: {a:#x}");
                assert!(e.check_mut(a, 1).is_err(), "{text} jit {jit}: {a:#x}");
            }
            assert!(e.check(base + 16, 32).is_err());
            assert!(e.set_packet(base + 16, base + 16, base + 48).is_err());
            assert!(e.set_packet(base + 12, base + 12, base + 12).is_err());
            assert_eq!(e.packet(), (0, 0, 0));
            assert_eq!(e.frame(), (0, 0));
            // After a refused set_packet, still nothing.
            assert!(e.check(base + 16, 1).is_err());
        }
    }
}

/// `tcpdump -d 'udp port 53'`'s IPv4 half: every load proven (X from
/// `ldxb 4*([14]&0xf)` bounds the indirect ones), so the code is sealed;
/// with X from the length (unbounded) the indirect loads are checked and
/// it is not. Both give libpcap's answers.
#[test]
fn classic_programs_with_proven_loads_run_sealed() {
    use crate::cbpf::{convert, CInsn};
    let i = |code: u16, jt: u8, jf: u8, k: u32| CInsn { code, jt, jf, k };
    let prog = |ldx: CInsn| {
        vec![
            i(0x28, 0, 0, 12),
            i(0x15, 0, 8, 0x800),
            i(0x30, 0, 0, 23),
            i(0x15, 0, 6, 17),
            ldx,
            i(0x48, 0, 0, 14),
            i(0x15, 2, 0, 53),
            i(0x48, 0, 0, 16),
            i(0x15, 0, 1, 53),
            i(0x06, 0, 0, 0x40000),
            i(0x06, 0, 0, 0),
        ]
    };
    let o = LoadOptions {
        entry_args: 3,
        xdp_ctx: false,
        packet_args: true,
        ..LoadOptions::default()
    };
    let mut frame = vec![0u8; 64];
    frame[12..14].copy_from_slice(&[8, 0]);
    frame[14] = 0x45;
    frame[23] = 17;
    frame[36..38].copy_from_slice(&53u16.to_be_bytes());
    for (ldx, sealed) in [(i(0xb1, 0, 0, 14), true), (i(0x81, 0, 0, 0), false)] {
        let p = Program::load(convert(&prog(ldx)).unwrap(), &[], &Helpers::new(), &o).unwrap();
        assert_eq!(p.sealed, sealed && cfg!(target_arch = "x86_64"));
        let mut e = env();
        // msh: the port at 14 + 20 + 2; X = the length (64): 64 + 16 is
        // past the frame, so 0.
        let want = if sealed { 0x40000 } else { 0 };
        assert_eq!(p.run_packet(&mut e, &frame, 64), Ok(want));
        // A runner exactly for sealed code, with the same answers.
        let mut r = p.packet_runner(&mut e);
        assert_eq!(r.is_some(), p.sealed);
        if let Some(r) = &mut r {
            assert_eq!(r.run(&frame, 64), want);
            assert_eq!(r.run(&frame[..37], 37), 0);
        }
        // Cut inside the UDP header: 0 either way.
        assert_eq!(p.run_packet(&mut e, &frame[..37], 37), Ok(0));
        frame[36] = 1;
        assert_eq!(p.run_packet(&mut e, &frame, 64), Ok(0));
        frame[36] = 0;
    }
}

/// A runner exists exactly for contained code (no helper, nothing
/// checked inline, no context field past data_meta) and gives what
/// `run_xdp` gives, frame for frame; a packet outside its frame is not
/// run.
#[test]
fn xdp_runners_only_for_contained_code_and_agree_with_run_xdp() {
    for (text, contained) in [
        (PROVEN, true),
        (MOVES, false),
        (FAULTS, false),
        (CTX_PTR, false),
        ("ldxw %r0, [%r1+12]\nexit", false),
    ] {
        let p = load(text, true);
        let mut e = env();
        let has = p.xdp_runner(&mut e).is_some();
        assert_eq!(has, contained && cfg!(target_arch = "x86_64"), "{text}");
        if !has {
            continue;
        }
        for len in 0..4usize {
            let mut frame: Vec<u8> = (0..8).map(|i| 0x30 + i).collect();
            let mut copy = frame.clone();
            let want = p.run_xdp(&mut e, &mut copy, 2, len, 0, 0).map(|o| o.action);
            let got = p.xdp_runner(&mut e).unwrap().run(&mut frame, 2, len);
            assert_eq!(got.map(u64::from), want.ok(), "{text} len {len}");
        }
        let mut frame = [0u8; 8];
        assert_eq!(p.xdp_runner(&mut e).unwrap().run(&mut frame, 6, 3), None);
        assert_eq!(
            p.xdp_runner(&mut e).unwrap().run(&mut frame, usize::MAX, 2),
            None
        );
    }
}

#[test]
fn a_stack_atomic_that_faults_is_not_contained_code() {
    // `lock *(u32 *)(r10 - 14) += r1`: misaligned, refused as the kernel
    // refuses it; loaded without the kernel's rules, it faults in Rust,
    // and the JIT's code must not be taken for code that cannot fault
    // (it was: every run's verdict was whatever rax held, no fault).
    let text =
        "mov %r1, 0\nstxdw [%r10-16], %r1\nmov %r1, 1\nlock add32 [%r10-14], %r1\nmov %r0, 2\nexit";
    let e = Program::load(
        crate::asm::assemble(text).unwrap(),
        &[],
        &helpers(),
        &LoadOptions::default(),
    )
    .unwrap_err();
    assert!(e.reason.contains("misaligned stack access [r10-14]"), "{e}");
    for jit in [false, true] {
        let o = LoadOptions {
            jit,
            kernel_rules: false,
            ..LoadOptions::default()
        };
        let p = Program::load(crate::asm::assemble(text).unwrap(), &[], &helpers(), &o).unwrap();
        let mut frame = [0u8; 64];
        let r = p.run_xdp(&mut env(), &mut frame, 0, 64, 1, 0);
        assert!(
            matches!(r, Err(Fault::Misaligned { .. })),
            "jit {jit}: {r:?}"
        );
    }
    // Aligned, it runs on both.
    let text = "mov %r1, 0\nstxdw [%r10-16], %r1\nmov %r1, 1\nlock add32 [%r10-16], %r1\nldxw %r0, [%r10-16]\nadd %r0, 1\nexit";
    for jit in [false, true] {
        let p = load(text, jit);
        let mut frame = [0u8; 64];
        assert_eq!(
            p.run_xdp(&mut env(), &mut frame, 0, 64, 1, 0)
                .unwrap()
                .action,
            2
        );
    }
}

/// What the last `printk` call (helper 6) was given in r3-r5.
static PRINTK_ARGS: std::sync::Mutex<[u64; 3]> = std::sync::Mutex::new([u64::MAX; 3]);

/// `bpf_trace_printk` as far as its arguments: kept for the test.
unsafe extern "C" fn printk(_: u64, _: u64, a: u64, b: u64, c: u64, _: *mut Env) -> u64 {
    *PRINTK_ARGS.lock().unwrap() = [a, b, c];
    0
}

#[test]
fn printk_never_reads_a_host_value_in_its_unset_arguments() {
    // (A red team printed the stack top and a helper's leftovers with
    // `%lx %lx %lx` and no arguments: the kernel's verifier lets
    // bpf_trace_printk read r3-r5 unset.)
    let mut h = helpers();
    h.insert(6, printk, Signature { args: 2 });
    for text in [
        "mov %r2, 16\ncall 6\nmov %r0, 2\nexit",
        "mov %r2, 0\ncall 44\nmov %r1, 0\nmov %r2, 16\ncall 6\nmov %r0, 2\nexit",
    ] {
        for jit in [false, true] {
            let o = LoadOptions {
                jit,
                ..LoadOptions::default()
            };
            let p = Program::load(assemble(text).unwrap(), &[], &h, &o).unwrap();
            let mut e = env();
            let mut frame = [0u8; 64];
            *PRINTK_ARGS.lock().unwrap() = [u64::MAX; 3];
            let _ = p.run_xdp(&mut e, &mut frame, 16, 32, 0, 0);
            let got = *PRINTK_ARGS.lock().unwrap();
            assert_eq!(got, [0; 3], "jit {jit}: {text}");
        }
    }
}
