//! Hostile programs: random and mutated instruction streams never panic in
//! load or run, and every access outside the run's regions faults.

use pfil_ebpf::asm::assemble;
use pfil_ebpf::insn::*;
use pfil_ebpf::{Env, Fault, Helpers, Insn, LoadOptions, Program, Signature};
use proptest::prelude::*;

fn env() -> Env {
    // SAFETY: no extra regions.
    unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
}

unsafe extern "C" fn echo(r1: u64, r2: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes the live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    match env.check_mut(r1, r2) {
        Ok(b) => {
            b.iter_mut().for_each(|x| *x = x.wrapping_add(1));
            r2
        }
        Err(f) => {
            env.fault(f);
            0
        }
    }
}

fn helpers() -> Helpers {
    let mut h = Helpers::new();
    h.insert(1, echo, Signature { args: 2 });
    h
}

fn opts() -> LoadOptions {
    let mut o = LoadOptions::default();
    o.max_insns_per_run = 10_000;
    o.kernel_rules = false;
    o.entry_args = 2;
    o.xdp_ctx = false;
    o
}

/// Loads and, if accepted, runs the program both ways (and on the
/// interpreter too, which must agree); only panics and disagreements count.
fn exercise(insns: Vec<Insn>) {
    let Ok(p) = Program::load(insns.clone(), &[], &helpers(), &opts()) else {
        return;
    };
    let mut e = env();
    let mut mem = [0x5au8; 64];
    let want = p.run_mem_interpreted(&mut e, &mut mem);
    let after = mem;
    mem = [0x5au8; 64];
    e.clear_stack();
    assert_eq!(p.run_mem(&mut e, &mut mem), want);
    assert_eq!(mem, after);
    let mut frame = [0u8; 256];
    let _ = p.run_xdp(&mut env(), &mut frame, 64, 100, 1, 0);
    // As an XDP program (r1 the context): both engines agree too.
    let mut o = opts();
    o.xdp_ctx = true;
    o.entry_args = 1;
    // One Env (same addresses), its stack cleared before each run.
    let mut e = env();
    let mut frame = [0x33u8; 256];
    let runs: Vec<_> = [false, true]
        .into_iter()
        .filter_map(|jit| {
            o.jit = jit;
            let p = Program::load(insns.clone(), &[], &helpers(), &o).ok()?;
            frame = [0x33u8; 256];
            e.clear_stack();
            let r = p.run_xdp(&mut e, &mut frame, 64, 100, 1, 0);
            Some((r.map_err(|f| f.to_string()), frame))
        })
        .collect();
    if let [a, b] = &runs[..] {
        assert_eq!(a.0, b.0);
        assert!(a.1 == b.1);
    }
}

/// Programs that pass the verifier, to mutate.
const SEEDS: &[&str] = &[
    "mov %r0, 0\nldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 14\njgt %r4, %r3, +3\nldxh %r0, [%r2+12]\nbe16 %r0\nexit\nmov %r0, 1\nexit",
    "mov %r0, 0\nl:\nadd %r0, 1\nstxdw [%r10-8], %r0\nlock fetch add [%r10-8], %r0\njlt %r0, 100, l\nexit",
    "mov %r6, %r1\nstdw [%r10-16], 3\nmov %r1, %r10\nadd %r1, -16\nmov %r2, 8\ncall 1\ncall local f\nexit\nf:\nmov %r0, %r10\nldxdw %r0, [%r0-8]\nexit",
    "lddw %r0, 0x1122334455667788\nmov32 %r1, 7\nsdiv32 %r0, %r1\nsmod %r0, %r1\nmovsx864 %r0, %r0\narsh %r0, 3\nexit",
];

/// Property cases: `PROPTEST_CASES` when set (`scripts/fuzz-long.sh`),
/// else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(2000), ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(insns) = Insn::decode_all(&bytes) {
            exercise(insns);
        }
    }

    #[test]
    fn random_plausible_insns_never_panic(
        prog in proptest::collection::vec((0u8..=255, 0u8..=11, 0u8..=11, -8i16..8, prop_oneof![Just(0i32), -600i32..600, any::<i32>()]), 1..40),
    ) {
        let mut insns: Vec<Insn> = prog.into_iter().map(|(c, d, s, o, i)| Insn::new(c, d, s, o, i)).collect();
        insns.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
        exercise(insns);
    }

    #[test]
    fn mutated_programs_never_panic(seed in 0..SEEDS.len(), muts in proptest::collection::vec((any::<usize>(), 0u8..5, any::<u32>()), 1..6)) {
        let mut insns = assemble(SEEDS[seed]).unwrap();
        for (at, field, v) in muts {
            let n = insns.len();
            let i = &mut insns[at % n];
            match field {
                0 => i.code = v as u8,
                1 => i.dst = (v % 16) as u8,
                2 => i.src = (v % 16) as u8,
                3 => i.off = v as i16,
                _ => i.imm = v as i32,
            }
        }
        exercise(insns);
    }

    #[test]
    fn accesses_outside_the_regions_fault(base in 0u8..3, off in -700i16..700, size in prop_oneof![Just(BPF_B), Just(BPF_H), Just(BPF_W), Just(BPF_DW)], store in any::<bool>()) {
        // The packet is the middle of `buf`; the guard bytes around it
        // must never change.
        let mut buf = [0u8; 96];
        let (lo, hi) = (32usize, 64usize);
        let mut e = env();
        let stack_top = e.stack_top();
        let pkt = buf[lo..].as_ptr() as u64;
        let (reg, base_addr) = match base {
            0 => (1u8, pkt),
            1 => (2u8, stack_top),
            _ => (3u8, pkt + 1000),
        };
        let setup = vec![
            Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0),
            Insn::new(LDDW, 3, 0, 0, (pkt + 1000) as u32 as i32),
            Insn::new(0, 0, 0, 0, ((pkt + 1000) >> 32) as u32 as i32),
            Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0),
        ];
        let access = if store {
            Insn::new(BPF_ST | BPF_MEM | size, reg, 0, off, -1)
        } else {
            Insn::new(BPF_LDX | BPF_MEM | size, 0, reg, off, 0)
        };
        let mut insns = setup;
        insns.push(access);
        insns.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
        let p = Program::load(insns, &[], &helpers(), &opts()).unwrap();
        let len = access.size() as u64;
        let addr = base_addr.wrapping_add(off as i64 as u64);
        let in_pkt = addr >= pkt && addr + len <= pkt + (hi - lo) as u64;
        let in_stack = addr >= stack_top - 4096 && addr + len <= stack_top;
        // The context follows the stack: its fields read whole, 4 bytes at
        // offsets 0 to 16 (the first three as the packet pointers), as the
        // kernel has them.
        let ctx = e.ctx_addr();
        let in_ctx = !store && len == 4 && [ctx, ctx + 4, ctx + 8, ctx + 12, ctx + 16].contains(&addr);
        let r = p.run_mem(&mut e, &mut buf[lo..hi]);
        if in_pkt || in_stack || in_ctx {
            prop_assert!(r.is_ok(), "{r:?}");
        } else {
            let ctx = matches!(r, Err(Fault::Context { .. }));
            prop_assert!(ctx || r == Err(Fault::OutOfBounds { pc: 4, addr, len: len as u32, write: store }), "{r:?}");
        }
        prop_assert!(buf[..lo].iter().chain(&buf[hi..]).all(|&b| b == 0));
    }
}
