//! Loads (verifies and compiles) one large XDP program, to measure the
//! verifier's peak memory: `/usr/bin/time -f %M cargo run --release -p
//! pfil-ebpf --example verify_big -- [INSNS] [mixed|jumps]`.
//!
//! `mixed`: blocks of 8 instructions (a bounds test, two byte loads, a
//! shift, an or, a compare), one forward jump each; `jumps`: every other
//! instruction a conditional jump to the next block (a join at each);
//! `loop-mixed`, `loop-jumps`: the same after a three-pass loop (a
//! back-edge: the verifier's two-pass dataflow).

use pfil_ebpf::insn::*;
use pfil_ebpf::{Helpers, Insn, LoadOptions, Program};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(500_000);
    let mode = args.next().unwrap_or_else(|| "mixed".into());
    let mut p = vec![
        Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0),
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, 2, 6, 0, 0),
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, 3, 6, 4, 0),
        Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 2),
    ];
    if mode.starts_with("loop-") {
        p.push(Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, 0, 0, 0, 1));
        p.push(Insn::new(BPF_JMP | BPF_JLT | BPF_K, 0, 0, -2, 5));
    }
    while p.len() + 10 < n {
        if mode.ends_with("jumps") {
            p.push(Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, 0, 0, 0, 1));
            p.push(Insn::new(BPF_JMP | BPF_JGT | BPF_K, 0, 0, 1, 1000));
        } else {
            p.extend([
                Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, 4, 2, 0, 0),
                Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, 4, 0, 0, 14),
                Insn::new(BPF_JMP | BPF_JGT | BPF_X, 4, 3, 5, 0),
                Insn::new(BPF_LDX | BPF_MEM | BPF_B, 5, 2, 12, 0),
                Insn::new(BPF_ALU64 | BPF_LSH | BPF_K, 5, 0, 0, 8),
                Insn::new(BPF_LDX | BPF_MEM | BPF_B, 0, 2, 13, 0),
                Insn::new(BPF_ALU64 | BPF_OR | BPF_X, 0, 5, 0, 0),
                Insn::new(BPF_ALU64 | BPF_AND | BPF_K, 0, 0, 0, 3),
            ]);
        }
    }
    p.push(Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 2));
    p.push(Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    let t = std::time::Instant::now();
    let prog = Program::load(p.clone(), &[], &Helpers::new(), &LoadOptions::default());
    match prog {
        Ok(prog) => println!(
            "{} instructions ({mode}): loaded in {:.1} ms, jitted {}",
            p.len(),
            t.elapsed().as_secs_f64() * 1e3,
            prog.is_jitted()
        ),
        Err(e) => println!("{} instructions ({mode}): refused: {e}", p.len()),
    }
}
