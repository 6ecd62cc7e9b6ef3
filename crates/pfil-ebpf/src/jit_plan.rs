//! What the JIT learns about a verified program before emitting it:
//! jump targets (where two instructions may not be fused), the eBPF
//! callee-saved registers it uses (the prologue saves only their x86
//! registers), the definitions an inlined map lookup makes dead, the
//! instructions that call out of the JIT's code; the fusions that use
//! them are in `jit_fuse.rs`.

use crate::insn::*;
use crate::verify::Access;

/// The facts [`crate::jit::compile`] uses.
pub(crate) struct Plan {
    /// Instructions some jump, call or function entry lands on.
    pub target: Vec<bool>,
    /// Instructions not emitted: they only set r1 or r2 for an inlined
    /// `bpf_map_lookup_elem`, which reads neither (the key is read from
    /// the stack at the depth the verifier found) and after which the
    /// verifier lets no one read r1-r5.
    pub skip: Vec<bool>,
    /// Bit n: rn (n in 6..=10) appears in some instruction emitted.
    pub callee_saved: u16,
    /// Registers live after each instruction (`jit_live`).
    pub live: Vec<u16>,
    /// Instructions some path from a function's entry reaches (the
    /// verifier's decided jumps taking their one edge); the others are
    /// not emitted.
    pub reach: Vec<bool>,
    /// Unconditional jumps (and jumps decided always taken) over nothing
    /// but unreached code: not emitted.
    pub elided: Vec<bool>,
}

/// Builds the plan; `functions` are the first pcs of the functions,
/// `lookups` the pcs of the inlined lookups (sorted).
pub(crate) fn plan(
    insns: &[Insn],
    functions: &[usize],
    lookups: &[usize],
    helpers: &crate::Helpers,
    decided: &[(usize, bool)],
    reach: &[bool],
) -> Plan {
    let n = insns.len();
    let mut target = vec![false; n + 1];
    let mut elided = vec![false; n];
    for &f in functions {
        target[f] = true;
    }
    let mut pc = 0;
    while pc < n {
        let i = &insns[pc];
        let wide = if i.code == LDDW { 2 } else { 1 };
        let decision = decided
            .binary_search_by_key(&pc, |d| d.0)
            .ok()
            .map(|k| decided[k].1);
        let t = match (i.class(), i.op()) {
            _ if !reach[pc] => None,
            (BPF_JMP, BPF_EXIT) => None,
            (BPF_JMP, BPF_CALL) if i.src == PSEUDO_CALL => Some(pc as i64 + 1 + i.imm as i64),
            (BPF_JMP, BPF_CALL) => None,
            (BPF_JMP32, BPF_JA) => Some(pc as i64 + 1 + i.imm as i64),
            // A jump never taken lands nowhere.
            (BPF_JMP | BPF_JMP32, _) if decision == Some(false) => None,
            (BPF_JMP | BPF_JMP32, _) => Some(pc as i64 + 1 + i.off as i64),
            _ => None,
        };
        if let Some(t) = t.and_then(|t| usize::try_from(t).ok()) {
            let unconditional = i.op() == BPF_JA || decision == Some(true);
            if unconditional && t > pc && t <= n && !reach[pc + 1..t].iter().any(|&r| r) {
                // Over nothing but code no path reaches: not emitted, and
                // its target is where the code before it falls through.
                elided[pc] = true;
            } else if t <= n {
                target[t] = true;
            }
        }
        pc += wide;
    }
    let mut skip = vec![false; n];
    for &c in lookups {
        // Backwards from the call, straight-line code: a pure definition
        // of a register dead here (r1-r5 at the call) is skipped.
        let mut dead: u16 = 0b11_1110;
        let mut p = c;
        while p > 0 && !target[p] {
            // An LDDW's first slot two back: p - 1 is its second slot
            // (which never has the LDDW code).
            let q = if p >= 2 && insns[p - 2].code == LDDW {
                p - 2
            } else {
                p - 1
            };
            let i = &insns[q];
            let pure = matches!(i.class(), BPF_ALU | BPF_ALU64) || i.code == LDDW;
            if pure && dead & (1 << i.dst) != 0 && i.dst != 0 {
                skip[q] = true;
                if i.code == LDDW {
                    skip[q + 1] = true;
                }
            } else if pure || matches!(i.class(), BPF_ST | BPF_STX | BPF_LDX) {
                // Kept: whatever it reads is live above it.
                dead &= !(1 << i.dst) & !(1 << i.src);
                if i.class() == BPF_STX && i.code & 0xe0 == BPF_ATOMIC {
                    dead &= !1;
                }
            } else {
                break;
            }
            p = q;
        }
    }
    // Any other pure definition of a register no path reads is not
    // emitted either (the verifier's decided jumps cut the paths that
    // only lead to code no run reaches), until nothing more dies.
    let mut live = crate::jit_live::live_out_with(insns, helpers, decided, &skip);
    loop {
        let mut more = false;
        let mut pc = 0;
        while pc < n {
            let i = &insns[pc];
            let wide = if i.code == LDDW { 2 } else { 1 };
            let pure = matches!(i.class(), BPF_ALU | BPF_ALU64) || i.code == LDDW;
            if reach[pc] && pure && !skip[pc] && i.dst < 10 && live[pc] & (1 << i.dst) == 0 {
                skip[pc..pc + wide].fill(true);
                more = true;
            }
            pc += wide;
        }
        if !more {
            break;
        }
        live = crate::jit_live::live_out_with(insns, helpers, decided, &skip);
    }
    // The callee-saved registers the emitted code uses; an inlined
    // lookup reads its key through r10 (rbp) whether or not the
    // instructions that made r2 from it are emitted.
    let mut callee_saved = 0u16;
    for (pc, i) in insns.iter().enumerate() {
        if reach[pc] && !skip[pc] {
            for r in [i.dst, i.src] {
                if (6..=10).contains(&r) {
                    callee_saved |= 1 << r;
                }
            }
        }
    }
    if lookups.iter().any(|&c| reach[c]) {
        callee_saved |= 1 << 10;
    }
    Plan {
        target,
        skip,
        callee_saved,
        live,
        reach: reach.to_vec(),
        elided,
    }
}

impl Plan {
    /// The first instruction after `pc` that is emitted: past elided
    /// jumps and unreached code.
    pub fn next_emitted(&self, pc: usize) -> usize {
        let mut q = pc + 1;
        while q < self.reach.len() && (!self.reach[q] || self.elided[q]) {
            q += 1;
        }
        q
    }

    /// Whether register `r` is read on no path after `pc`.
    pub fn dead_after(&self, pc: usize, r: u8) -> bool {
        self.live.get(pc).is_some_and(|l| l & (1 << r) == 0)
    }

    /// Whether `pc..pc + k` may be emitted as one: no jump lands inside,
    /// nothing in it skipped or charged as a loop head.
    pub fn plain_run(&self, pc: usize, k: usize) -> bool {
        (pc + 1..pc + k).all(|q| q < self.skip.len() && !self.target[q] && !self.skip[q])
            && !self.skip[pc]
    }
}

/// The null test of r0 after the inlined lookup at `pc` (`if r0 == 0`
/// or `if r0 != 0`, nothing jumping onto it): its pc, and the one
/// register instruction between the two if any, which neither reads nor
/// writes r0 (nor can it read r1-r5: the call ended them).
pub(crate) fn null_test_after(
    insns: &[Insn],
    pc: usize,
    plan: &Plan,
) -> Option<(usize, Option<usize>)> {
    let test = |q: usize| {
        insns.get(q).is_some_and(|j| {
            (j.code == BPF_JMP | BPF_JEQ | BPF_K || j.code == BPF_JMP | BPF_JNE | BPF_K)
                && j.dst == 0
                && j.imm == 0
        }) && !plan.target[q]
            && !plan.skip[q]
    };
    if test(pc + 1) {
        return Some((pc + 1, None));
    }
    let m = insns.get(pc + 1)?;
    let reads_r0 = m.code & BPF_X != 0 && m.src == 0;
    let movable = matches!(m.class(), BPF_ALU | BPF_ALU64)
        && !matches!(m.dst, 0 | 10)
        && !reads_r0
        && !plan.target[pc + 1]
        && !plan.skip[pc + 1];
    (movable && test(pc + 2)).then_some((pc + 2, Some(pc + 1)))
}

/// The store that wrote the key of the inlined lookup at `pc` (4 bytes
/// at `r10 - depth`): `*(u32 *)(r10 - depth) = rX` with only register
/// instructions and loads after it and nothing jumping in between. Its
/// pc, and the registers the instructions emitted between write.
fn key_store(insns: &[Insn], pc: usize, depth: u32, plan: &Plan) -> Option<(usize, u16)> {
    let mut written = 0u16;
    let mut q = pc;
    loop {
        if plan.target[q] || q == 0 {
            return None;
        }
        // An LDDW's first slot two back: q - 1 is its second slot.
        let p = if q >= 2 && insns[q - 2].code == LDDW {
            q - 2
        } else {
            q - 1
        };
        // (Code no path reaches, which an elided jump steps over, is
        // not what ran before: no store found.)
        if !plan.reach[p] || plan.elided[p] {
            return None;
        }
        let i = &insns[p];
        if i.code == BPF_STX | BPF_MEM | BPF_W && i.dst == 10 && i32::from(i.off) == -(depth as i32)
        {
            return Some((p, written));
        }
        if !(matches!(i.class(), BPF_ALU | BPF_ALU64 | BPF_LDX) || i.code == LDDW) {
            return None;
        }
        if !plan.skip[p] {
            written |= 1 << (i.dst & 15);
        }
        q = p;
    }
}

/// Whether the key of the inlined lookup at `pc` (4 bytes at `r10 -
/// depth`) is below `max`: stored there as [`key_store`] finds it, the
/// verifier's bound of the stored register there (`words`) below `max`.
pub(crate) fn key_below(
    insns: &[Insn],
    pc: usize,
    depth: u32,
    max: u32,
    words: &[(usize, u64)],
    plan: &Plan,
) -> bool {
    key_store(insns, pc, depth, plan).is_some_and(|(p, _)| {
        words
            .binary_search_by_key(&p, |w| w.0)
            .is_ok_and(|k| words[k].1 < u64::from(max))
    })
}

/// The register whose low 32 bits the inlined lookup at `pc` reads as
/// its key: the `rX` of the store [`key_store`] finds, where nothing
/// emitted after it writes rX. The key is then taken from rX, not
/// reloaded from the stack it was just stored to.
pub(crate) fn key_register(insns: &[Insn], pc: usize, depth: u32, plan: &Plan) -> Option<u8> {
    let (p, written) = key_store(insns, pc, depth, plan)?;
    let x = insns[p].src;
    (x < 10 && written & (1 << x) == 0).then_some(x)
}

/// Whether the code may call out of itself (a helper not inlined, a
/// local call, the Rust slow path of a checked access or an atomic, a
/// loop head's budget fault): then its stack is kept 16-byte aligned.
/// Instructions `reach` says no path reaches emit nothing and do not count.
pub(crate) fn calls_out(
    insns: &[Insn],
    loop_cost: &[u32],
    access: &[Access],
    inlined: &[usize],
    reach: &[bool],
) -> bool {
    let proven = |pc: usize| matches!(access.get(pc), Some(Access::Value | Access::Packet));
    loop_cost.iter().any(|&c| c != 0)
        || insns.iter().enumerate().any(|(pc, i)| match i.class() {
            _ if !reach.get(pc).copied().unwrap_or(true) => false,
            BPF_JMP => i.op() == BPF_CALL && inlined.binary_search(&pc).is_err(),
            BPF_LDX => i.src != 10 && !proven(pc) && access.get(pc) != Some(&Access::Ctx),
            // An atomic but a map value's inlined add goes through Rust,
            // on the stack too (a misaligned one faults there).
            BPF_STX if i.code & 0xe0 == BPF_ATOMIC => access.get(pc) != Some(&Access::Value),
            BPF_ST | BPF_STX => i.dst != 10 && !proven(pc),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;
    use crate::{Env, Fault, Helpers, LoadOptions, Program};

    fn env() -> Env {
        // SAFETY: no extra regions.
        unsafe { Env::new(Vec::new(), core::ptr::null_mut()) }
    }

    #[test]
    fn only_dead_definitions_before_a_lookup_are_skipped() {
        // 0: r2 = r10; 1: r2 += -8 (read by the store at 2: kept);
        // 3: r3 = 5, 4-5: r1 = map, 6: r4 = r0 (r1-r5 are dead at the
        // call: skipped); 7: call.
        let p = assemble(
            "mov %r2, %r10\nadd %r2, -8\nstw [%r2+0], 1\nmov %r3, 5\nlddw %r1, 0\n\
             mov %r4, %r0\ncall 1\nexit",
        )
        .unwrap();
        let found = plan_of(&p, &[7]);
        assert_eq!(
            found.skip,
            [false, false, false, true, true, true, true, false, false]
        );
        // r3 read by a kept instruction (r6 = r3, r6 read after the call)
        // is live above it.
        let p = assemble(
            "mov %r3, 5
mov %r6, %r3
mov %r2, 1
call 1
mov %r0, %r6
exit",
        )
        .unwrap();
        assert_eq!(plan_skips(&p, 3), [false, false, true, false, false, false]);
        // With r6 never read, r6 = r3 is a dead definition; r3 = 5 stays
        // (a helper the plan does not know reads r1-r5).
        let p = assemble("mov %r3, 5\nmov %r6, %r3\nmov %r2, 1\ncall 1\nexit").unwrap();
        assert_eq!(plan_skips(&p, 3), [false, true, true, false, false]);
        // A jump target stops the walk: nothing above it is skipped.
        let p = assemble("mov %r3, 5\nja +0\nmov %r1, 1\ncall 1\nexit").unwrap();
        assert_eq!(plan_skips(&p, 3), [false, false, true, false, false]);
        // No lookup there: nothing skipped.
        assert_eq!(plan_of(&p, &[]).skip, [false; 5]);
    }

    /// The plan of `p` (one function, every instruction reached, no
    /// decided jump) with inlined lookups at `lookups`.
    fn plan_of(p: &[Insn], lookups: &[usize]) -> Plan {
        plan(
            p,
            &[0],
            lookups,
            &crate::Helpers::new(),
            &[],
            &vec![true; p.len()],
        )
    }

    fn plan_skips(p: &[Insn], lookup: usize) -> Vec<bool> {
        plan_of(p, &[lookup]).skip
    }

    #[test]
    fn mov_add_is_fused_only_where_nothing_jumps_between() {
        // r2 (the length) == 0 jumps onto the add: r3 = 1 + 10, else
        // r3 = len + 10.
        let text = "mov %r0, 0\nmov %r3, 1\njeq %r2, 0, +1\nmov %r3, %r2\nadd %r3, 10\n\
                    mov %r4, %r3\nadd %r4, -3\nmov %r0, %r4\nexit";
        let o = LoadOptions {
            entry_args: 2,
            xdp_ctx: false,
            ..LoadOptions::default()
        };
        let p = Program::load(assemble(text).unwrap(), &[], &Helpers::new(), &o).unwrap();
        assert!(p.is_jitted());
        for len in [0usize, 4, 9] {
            let mut m = vec![0u8; len];
            let want = if len == 0 { 8 } else { len as u64 + 7 };
            assert_eq!(p.run_mem(&mut env(), &mut m), Ok(want));
            assert_eq!(p.run_mem_interpreted(&mut env(), &mut m), Ok(want));
        }
    }

    #[test]
    fn lsh_rsh_32_is_fused_only_where_nothing_jumps_between() {
        // r2 (the length) == 0 jumps onto the rsh: the high half, else
        // the low half.
        let text =
            "lddw %r3, 0x1234567887654321\nlsh %r3, 32\nmov %r0, 0\nlddw %r3, 0x1234567887654321\n\
                    jeq %r2, 0, +1\nlsh %r3, 32\nrsh %r3, 32\nmov %r0, %r3\nexit";
        let o = LoadOptions {
            entry_args: 2,
            xdp_ctx: false,
            ..LoadOptions::default()
        };
        let p = Program::load(assemble(text).unwrap(), &[], &Helpers::new(), &o).unwrap();
        assert!(p.is_jitted());
        for (len, want) in [(0usize, 0x1234_5678u64), (3, 0x8765_4321)] {
            let mut m = vec![0u8; len];
            assert_eq!(p.run_mem(&mut env(), &mut m), Ok(want));
            assert_eq!(p.run_mem_interpreted(&mut env(), &mut m), Ok(want));
        }
    }

    #[test]
    fn load_add_store_of_proven_words_agrees_with_the_interpreter() {
        // Packet words proven by `data + 16 <= data_end`: the immediate
        // form, the register form, and one where a jump lands on the add
        // (not fused: the add runs on whatever r3 held).
        for (add, x) in [
            ("add %r3, 5", false),
            ("add %r3, %r4", false),
            ("add %r3, 5", true),
        ] {
            let text = format!(
                "ldxw %r2, [%r1+0]\nldxw %r6, [%r1+4]\nmov %r0, 0\nmov %r5, %r2\nadd %r5, 16\n\
                 jgt %r5, %r6, out\nmov %r4, 7\nmov %r3, 100\njeq %r4, {}, +1\nldxdw %r3, [%r2+8]\n\
                 {add}\nstxdw [%r2+8], %r3\nmov %r0, %r3\nout:\nexit",
                if x { 7 } else { 0 }
            );
            let mut results = Vec::new();
            for jit in [false, true] {
                let o = LoadOptions {
                    jit,
                    ..LoadOptions::default()
                };
                let p = Program::load(assemble(&text).unwrap(), &[], &Helpers::new(), &o).unwrap();
                let mut frame = [3u8; 32];
                let r = p
                    .run_xdp(&mut env(), &mut frame, 0, 16, 0, 0)
                    .map(|o| o.action);
                results.push((r, frame));
            }
            assert_eq!(results[0], results[1], "{add} jump {x}");
            let want = if x {
                105
            } else {
                0x0303_0303_0303_0303 + if add.ends_with('5') { 5 } else { 7 }
            };
            assert_eq!(results[0].0, Ok(want), "{add} jump {x}");
        }
    }

    #[test]
    fn faults_unwind_with_only_the_used_registers_saved() {
        // One function, r6 and r9 used (an odd and an even count of
        // saved registers with r12 and rbp): a faulting load exits
        // through the epilogue; thousands of runs keep the stack whole.
        for more in ["", "mov %r9, 2\nadd %r0, %r9\n"] {
            let text = format!("mov %r0, 1\nmov %r6, %r1\nldxb %r0, [%r6+0]\n{more}exit");
            let o = LoadOptions {
                entry_args: 2,
                xdp_ctx: false,
                ..LoadOptions::default()
            };
            let p = Program::load(assemble(&text).unwrap(), &[], &Helpers::new(), &o).unwrap();
            let mut e = env();
            for k in 0..5000u32 {
                let mut m = vec![7u8; (k % 2) as usize];
                let r = p.run_mem(&mut e, &mut m);
                if k % 2 == 0 {
                    assert!(matches!(r, Err(Fault::OutOfBounds { .. })), "{r:?}");
                } else {
                    assert!(r.is_ok(), "{text}: {r:?}");
                }
            }
        }
    }
}
