//! The static verifier run by [`Program::load`](crate::Program::load).
//!
//! It refuses what the kernel's verifier refuses for structural reasons:
//! unknown or malformed opcodes (reserved fields must be zero), jumps and
//! calls that land outside the program, inside a 64-bit immediate or in
//! another function, fall-through off the end, writes to r10, reads of
//! registers a path reaching them leaves unset (paths told apart as the
//! kernel's verifier follows them: `verify_paths.rs`), helpers the program was not
//! given, `r10`-relative accesses outside the frame, recursion and calls
//! nested deeper than [`MAX_FRAMES`]. It finds the back-edges: a program
//! without any runs without an instruction counter; one with loops pays
//! for each taken back-edge.
//!
//! With [`LoadOptions::kernel_rules`](crate::LoadOptions::kernel_rules)
//! it refuses what the kernel's type rules refuse of the pointers it
//! tracks, though a run-time check would contain it (`verify_rules.rs`):
//! arithmetic on a pointer other than adding or subtracting a scalar in
//! 64 bits (two pointers only subtracted), any but a known 0 on a map
//! pointer or data_end; a dereference of data_end or of a moved context
//! pointer (moved back by known amounts, it is the context again); an
//! atomic on the packet; a misaligned stack access; a function
//! returning a pointer into its own frame; a context read other than a
//! whole field; an access at a constant offset outside a map value; a
//! known pointer of another kind where a helper takes a map or the
//! context; a stack access, or a helper's memory argument on the stack
//! of a size known here, outside the function's own frame; a packet
//! access through a pointer it tracks, outside the bytes a comparison
//! with `data_end` proved behind it (decided path by path:
//! `verify_paths.rs`). A register it does not track (a pointer filled from the
//! stack) is checked at run time instead.
//!
//! It also tracks register types (the context, map values checked for
//! null, stack pointers, packet pointers; see `verify_state.rs`) to find
//! the accesses that need no run-time check (`Access`): context fields
//! at valid offsets, map values at offsets below the value size, packet
//! bytes a comparison with `data_end` proved there, also behind a
//! pointer with a bounded variable offset (the kernel's packet ranges
//! and scalar bounds). Every other access is checked at run time (see
//! [`Env`](crate::Env)); the interpreter checks all of them.

use crate::env::{Helpers, MAX_FRAMES, STACK_FRAME};
use crate::insn::*;
use crate::{LoadOptions, MapRef, VerifyError};

#[path = "verify_bounds.rs"]
mod bounds;
#[path = "verify_flow.rs"]
mod flow;
#[path = "verify_rules.rs"]
mod rules;
#[path = "verify_state.rs"]
mod state;

/// The most instructions a program may have (the kernel's
/// `BPF_COMPLEXITY_LIMIT_INSNS`).
pub const MAX_INSNS: usize = 1_000_000;

/// How an instruction's memory access is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Access {
    /// Checked at run time against the run's regions.
    #[default]
    Checked,
    /// A field of the XDP context (a load; the offset checked at load).
    Ctx,
    /// Inside a map value returned by `bpf_map_lookup_elem` and checked
    /// for null: no run-time check.
    Value,
    /// Inside the packet bytes a comparison with `data_end` proved
    /// there: no run-time check.
    Packet,
}

/// What the verifier learnt about an accepted program.
#[derive(Debug, Clone, Default)]
pub(crate) struct Analysis {
    /// For each pc, the budget executing it costs: nonzero only for the
    /// targets of back-edges (loop heads), the length of the loop body.
    pub back_edge_cost: Vec<u32>,
    /// Whether any back-edge exists.
    pub has_loops: bool,
    /// The first pc of each function, in order (0 first).
    pub functions: Vec<usize>,
    /// For each pc, how its memory access is made; empty when every
    /// access is checked at run time.
    pub access: Vec<Access>,
    /// `bpf_map_lookup_elem` calls the JIT compiles inline: (pc, map
    /// index, the key's depth below r10), by pc. The map is an array
    /// ([`MapRef::array`]) with 4-byte keys and the key lies in the
    /// caller's frame.
    pub lookups: Vec<(usize, u32, u32)>,
    /// `*(u32 *)(r10 + k) = rX` stores: (pc, an upper bound of rX there),
    /// by pc.
    pub stack_words: Vec<(usize, u64)>,
    /// `and d, 2^k - 1` on a value the verifier knows within the mask:
    /// no-ops, by pc.
    pub no_op_ands: Vec<usize>,
    /// Conditional jumps the verifier's bounds decide: (pc, always
    /// taken), by pc. The JIT emits nothing for one never taken and a
    /// plain jump for one always taken.
    pub decided: Vec<(usize, bool)>,
}

type Result<T> = core::result::Result<T, VerifyError>;

fn err<T>(pc: usize, reason: impl Into<String>) -> Result<T> {
    Err(VerifyError::new(pc, reason))
}

/// Registers an instruction reads and writes, as bit sets (bit n = rn).
#[derive(Clone, Copy, Default)]
struct Use {
    reads: u16,
    writes: u16,
    /// Registers no longer initialised after it (a call clobbers r1-r5).
    kills: u16,
}

const R1_R5: u16 = 0b11_1110;

fn bit(r: u8) -> u16 {
    1 << r
}

/// Checks one instruction's encoding; returns the registers it uses.
fn check_insn(pc: usize, i: &Insn, helpers: &Helpers, kernel_rules: bool) -> Result<Use> {
    if i.dst > 10 || i.src > 10 {
        return err(
            pc,
            format!("invalid register (dst r{}, src r{})", i.dst, i.src),
        );
    }
    let (d, s) = (bit(i.dst), bit(i.src));
    let x = i.code & BPF_X != 0;
    let reserved = |cond: bool, what: &str| {
        if cond {
            Ok(())
        } else {
            err(
                pc,
                format!("opcode {:#04x}: reserved field {what} is not zero", i.code),
            )
        }
    };
    let no_write_r10 = || {
        if i.dst == 10 {
            err(pc, "r10 (the frame pointer) is read-only")
        } else {
            Ok(())
        }
    };
    let frame_access = |base: u8, size: usize| {
        if base == 10 {
            let off = i.off as i64;
            if off >= 0 || off < -(STACK_FRAME as i64) || off + size as i64 > 0 {
                return err(pc, format!("stack access [r10{off:+}] of {size} bytes outside the {STACK_FRAME}-byte frame"));
            }
            if kernel_rules && off % size as i64 != 0 {
                return err(
                    pc,
                    format!(
                        "misaligned stack access [r10{off:+}] of {size} bytes (the kernel \
                         requires the stack's accesses aligned to their size)"
                    ),
                );
            }
        }
        Ok(())
    };
    match i.class() {
        BPF_ALU | BPF_ALU64 => {
            let wide = i.class() == BPF_ALU64;
            let op = i.op();
            no_write_r10()?;
            if op == BPF_END {
                reserved(i.src == 0 && i.off == 0, "src/off")?;
                if wide && x {
                    return err(pc, "byte swap (ALU64 END) must use the immediate form");
                }
                if !matches!(i.imm, 16 | 32 | 64) {
                    return err(pc, format!("byte swap width {} is not 16, 32 or 64", i.imm));
                }
                return Ok(Use {
                    reads: d,
                    writes: d,
                    kills: 0,
                });
            }
            if op > BPF_END {
                return err(pc, format!("unknown ALU operation {:#04x}", i.code));
            }
            match op {
                BPF_DIV | BPF_MOD => reserved(i.off == 0 || i.off == 1, "off")?,
                BPF_MOV if x && wide => reserved(matches!(i.off, 0 | 8 | 16 | 32), "off")?,
                BPF_MOV if x => reserved(matches!(i.off, 0 | 8 | 16), "off")?,
                _ => reserved(i.off == 0, "off")?,
            }
            if op == BPF_NEG {
                if x {
                    return err(pc, "neg takes no source register");
                }
                reserved(i.src == 0 && i.imm == 0, "src/imm")?;
                return Ok(Use {
                    reads: d,
                    writes: d,
                    kills: 0,
                });
            }
            if x {
                reserved(i.imm == 0, "imm")?;
            } else {
                reserved(i.src == 0, "src")?;
                if kernel_rules && matches!(op, BPF_DIV | BPF_MOD) && i.imm == 0 {
                    return err(pc, "division by zero immediate (the kernel refuses it)");
                }
                let width = if wide { 64 } else { 32 };
                if kernel_rules
                    && matches!(op, BPF_LSH | BPF_RSH | BPF_ARSH)
                    && !(0..width).contains(&i.imm)
                {
                    return err(
                        pc,
                        format!(
                            "shift by {} outside 0..{width} (the kernel refuses it)",
                            i.imm
                        ),
                    );
                }
            }
            let src = if x { s } else { 0 };
            let reads = if op == BPF_MOV { src } else { src | d };
            Ok(Use {
                reads,
                writes: d,
                kills: 0,
            })
        }
        BPF_JMP | BPF_JMP32 => {
            let jmp32 = i.class() == BPF_JMP32;
            match i.op() {
                BPF_JA => {
                    reserved(!x && i.dst == 0 && i.src == 0, "dst/src")?;
                    if jmp32 {
                        reserved(i.off == 0, "off")?
                    } else {
                        reserved(i.imm == 0, "imm")?
                    }
                    Ok(Use::default())
                }
                BPF_CALL if !jmp32 => {
                    if x {
                        return err(pc, "indirect call (callx) is not supported");
                    }
                    reserved(i.dst == 0 && i.off == 0, "dst/off")?;
                    match i.src {
                        0 => {
                            let id = i.imm as u32;
                            let name = helper::name(id)
                                .map(|n| format!(" (bpf_{n})"))
                                .unwrap_or_default();
                            let (_, sig) = helpers.get(id).ok_or_else(|| VerifyError::new(pc, format!("call to helper {id}{name}, which this program was not given")))?;
                            let reads = R1_R5 & ((1u16 << (sig.args.min(5) + 1)) - 2);
                            // bpf_tail_call returns nothing (the kernel's
                            // RET_VOID): r0 is unset after one that failed.
                            let void = id == helper::TAIL_CALL;
                            Ok(Use {
                                reads,
                                writes: u16::from(!void),
                                kills: R1_R5 | u16::from(void),
                            })
                        }
                        PSEUDO_CALL => Ok(Use {
                            reads: 0,
                            writes: 1,
                            kills: R1_R5,
                        }),
                        s => err(
                            pc,
                            format!("call with unsupported source {s} (kfuncs are not supported)"),
                        ),
                    }
                }
                BPF_EXIT if !jmp32 => {
                    reserved(
                        !x && i.dst == 0 && i.src == 0 && i.off == 0 && i.imm == 0,
                        "dst/src/off/imm",
                    )?;
                    Ok(Use {
                        reads: 1,
                        writes: 0,
                        kills: 0,
                    })
                }
                BPF_JEQ | BPF_JGT | BPF_JGE | BPF_JSET | BPF_JNE | BPF_JSGT | BPF_JSGE
                | BPF_JLT | BPF_JLE | BPF_JSLT | BPF_JSLE => {
                    if x {
                        reserved(i.imm == 0, "imm")?;
                        Ok(Use {
                            reads: d | s,
                            writes: 0,
                            kills: 0,
                        })
                    } else {
                        reserved(i.src == 0, "src")?;
                        Ok(Use {
                            reads: d,
                            writes: 0,
                            kills: 0,
                        })
                    }
                }
                _ => err(pc, format!("unknown jump opcode {:#04x}", i.code)),
            }
        }
        BPF_LD => {
            if i.code != LDDW {
                return err(pc, format!("opcode {:#04x}: legacy packet loads (LD ABS/IND) are not allowed in XDP programs", i.code));
            }
            no_write_r10()?;
            reserved(i.src == 0 && i.off == 0, "src/off")?;
            Ok(Use {
                reads: 0,
                writes: d,
                kills: 0,
            })
        }
        BPF_LDX => {
            let mode = i.code & 0xe0;
            if !(mode == BPF_MEM || (mode == BPF_MEMSX && i.size() < 8)) {
                return err(pc, format!("unknown load opcode {:#04x}", i.code));
            }
            reserved(i.imm == 0, "imm")?;
            no_write_r10()?;
            frame_access(i.src, i.size())?;
            Ok(Use {
                reads: s,
                writes: d,
                kills: 0,
            })
        }
        BPF_ST => {
            if i.code & 0xe0 != BPF_MEM {
                return err(pc, format!("unknown store opcode {:#04x}", i.code));
            }
            reserved(i.src == 0, "src")?;
            frame_access(i.dst, i.size())?;
            Ok(Use {
                reads: d,
                writes: 0,
                kills: 0,
            })
        }
        _ => {
            // BPF_STX
            frame_access(i.dst, i.size())?;
            match i.code & 0xe0 {
                BPF_MEM => {
                    reserved(i.imm == 0, "imm")?;
                    Ok(Use {
                        reads: d | s,
                        writes: 0,
                        kills: 0,
                    })
                }
                BPF_ATOMIC if matches!(i.size(), 4 | 8) => {
                    let op = i.imm;
                    let fetch = op & BPF_FETCH != 0;
                    let known = matches!(op & !BPF_FETCH, 0x00 | 0x40 | 0x50 | 0xa0)
                        || op == BPF_XCHG
                        || op == BPF_CMPXCHG;
                    if !known {
                        return err(pc, format!("unknown atomic operation {op:#x}"));
                    }
                    if op == BPF_CMPXCHG {
                        return Ok(Use {
                            reads: d | s | 1,
                            writes: 1,
                            kills: 0,
                        });
                    }
                    if fetch && i.src == 10 {
                        return err(pc, "r10 (the frame pointer) is read-only");
                    }
                    Ok(Use {
                        reads: d | s,
                        writes: if fetch { s } else { 0 },
                        kills: 0,
                    })
                }
                _ => err(pc, format!("unknown store opcode {:#04x}", i.code)),
            }
        }
    }
}

/// An instruction's successors (fall-through or jump, jump target),
/// `u32::MAX` for none: 8 bytes an instruction.
#[derive(Clone, Copy)]
struct Succ([u32; 2]);

impl Succ {
    const NONE: Succ = Succ([u32::MAX; 2]);

    fn get(self) -> [Option<usize>; 2] {
        self.0.map(|t| (t != u32::MAX).then_some(t as usize))
    }
}

/// A control-flow successor list (at most two).
fn successors(pc: usize, i: &Insn) -> ([Option<i64>; 2], Option<i64>) {
    let p = pc as i64;
    match (i.class(), i.op()) {
        (BPF_JMP, BPF_JA) => ([Some(p + 1 + i.off as i64), None], None),
        (BPF_JMP32, BPF_JA) => ([Some(p + 1 + i.imm as i64), None], None),
        (BPF_JMP, BPF_EXIT) => ([None, None], None),
        (BPF_JMP, BPF_CALL) if i.src == PSEUDO_CALL => {
            ([Some(p + 1), None], Some(p + 1 + i.imm as i64))
        }
        (BPF_JMP, BPF_CALL) => ([Some(p + 1), None], None),
        (BPF_JMP | BPF_JMP32, _) => ([Some(p + 1), Some(p + 1 + i.off as i64)], None),
        _ if i.code == LDDW => ([Some(p + 2), None], None),
        _ => ([Some(p + 1), None], None),
    }
}

/// A program's resolved map references (`resolve_maps`): the LDDWs of
/// map handles (pc, map), and of addresses in read-only values (pc, map,
/// offset).
pub(crate) type MapRefs<'a> = (&'a [(usize, u32)], &'a [(usize, u32, u32)]);

/// Verifies `insns` (map references already resolved).
pub(crate) fn verify(
    insns: &[Insn],
    helpers: &Helpers,
    opts: &LoadOptions,
    (map_refs, consts): MapRefs<'_>,
    maps: &[MapRef],
) -> Result<Analysis> {
    let kernel_rules = opts.kernel_rules;
    let n = insns.len();
    if n == 0 {
        return err(0, "empty program");
    }
    if n > MAX_INSNS {
        return err(
            MAX_INSNS,
            format!("program of {n} instructions, more than {MAX_INSNS}"),
        );
    }
    // Which slots are the second half of an LDDW.
    let mut second = vec![false; n];
    let mut pc = 0;
    while pc < n {
        if insns[pc].code == LDDW {
            if pc + 1 >= n {
                return err(pc, "64-bit immediate load missing its second slot");
            }
            let h = &insns[pc + 1];
            if h.code != 0 || h.dst != 0 || h.src != 0 || h.off != 0 {
                return err(
                    pc + 1,
                    "second slot of a 64-bit immediate load must have only imm set",
                );
            }
            second[pc + 1] = true;
            pc += 2;
        } else {
            pc += 1;
        }
    }
    // Per-instruction checks, successors, function starts.
    let mut uses = vec![Use::default(); n];
    let mut succ = vec![Succ::NONE; n];
    let mut calls: Vec<(usize, usize)> = Vec::new();
    let mut starts = vec![0usize];
    let mut unknown: Vec<usize> = Vec::new();
    let target = |pc: usize, t: i64, what: &str| -> Result<usize> {
        if t < 0 || t as usize >= n {
            return err(pc, format!("{what} to {t}, outside the program (0..{n})"));
        }
        if second[t as usize] {
            return err(
                pc,
                format!(
                    "{what} into the middle of the 64-bit immediate load at {}",
                    t - 1
                ),
            );
        }
        Ok(t as usize)
    };
    for pc in 0..n {
        if second[pc] {
            continue;
        }
        let i = &insns[pc];
        // (Reserved fields set: refused now, as any malformed call.)
        let well_formed = i.dst == 0 && i.off == 0;
        if i.code == BPF_JMP | BPF_CALL
            && i.src == 0
            && well_formed
            && helpers.get(i.imm as u32).is_none()
        {
            // A helper the program was not given: refused below if a path
            // reaches it (code a frozen `.rodata` setting rules out is
            // not, as in the kernel). Until then it reads nothing (its
            // arguments are not known) and ends r1-r5.
            unknown.push(pc);
            uses[pc] = Use {
                reads: 0,
                writes: 1,
                kills: R1_R5,
            };
        } else {
            uses[pc] = check_insn(pc, i, helpers, kernel_rules)?;
        }
        let (ss, call) = successors(pc, i);
        for (k, s) in ss.into_iter().enumerate() {
            if let Some(t) = s {
                let fall = k == 0
                    && !(i.class() == BPF_JMP && i.op() == BPF_JA)
                    && !(i.class() == BPF_JMP32 && i.op() == BPF_JA);
                if fall && t as usize >= n {
                    return err(pc, "control falls off the end of the program (the last instruction must be exit or a jump)");
                }
                succ[pc].0[k] = target(pc, t, "jump")? as u32;
            }
        }
        if let Some(c) = call {
            let t = target(pc, c, "call")?;
            calls.push((pc, t));
            starts.push(t);
        }
    }
    starts.sort_unstable();
    starts.dedup();
    let func_of = |pc: usize| starts.partition_point(|&s| s <= pc) - 1;
    // Jumps stay inside their function; nothing falls into the next one.
    for pc in 0..n {
        for t in succ[pc].get().into_iter().flatten() {
            if func_of(t) != func_of(pc) {
                let is_fall = t == pc + 1 || (insns[pc].code == LDDW && t == pc + 2);
                let why = if is_fall {
                    format!(
                        "control falls through into the function at {}",
                        starts[func_of(t)]
                    )
                } else {
                    format!("jump to {t}, in another function")
                };
                return err(pc, why);
            }
        }
    }
    // Call graph: no recursion, at most MAX_FRAMES deep.
    let nf = starts.len();
    let mut callees: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nf];
    for &(pc, t) in &calls {
        callees[func_of(pc)].push((pc, func_of(t)));
    }
    let mut depth = vec![0usize; nf];
    let mut state = vec![0u8; nf]; // 0 new, 1 on stack, 2 done
    let mut order = Vec::with_capacity(nf); // post-order
    fn visit(
        f: usize,
        callees: &[Vec<(usize, usize)>],
        state: &mut [u8],
        depth: &mut [usize],
        order: &mut Vec<usize>,
        starts: &[usize],
    ) -> Result<()> {
        state[f] = 1;
        let mut d = 1;
        for &(pc, g) in &callees[f] {
            match state[g] {
                1 => return err(pc, format!("recursive call to the function at {} (the kernel refuses call graphs with cycles)", starts[g])),
                0 => visit(g, callees, state, depth, order, starts)?,
                _ => {}
            }
            d = d.max(1 + depth[g]);
            if d > MAX_FRAMES {
                return err(pc, format!("calls nested deeper than {MAX_FRAMES} frames"));
            }
        }
        depth[f] = d;
        state[f] = 2;
        order.push(f);
        Ok(())
    }
    visit(0, &callees, &mut state, &mut depth, &mut order, &starts)?;
    if let Some(f) = (0..nf).find(|&f| state[f] == 0) {
        return err(starts[f], "function never called");
    }
    // Reachability and back-edges, per function (iterative DFS).
    let mut back_edge_cost = vec![0u32; n];
    let mut has_loops = false;
    let mut seen = vec![0u8; n]; // 0 new, 1 on stack, 2 done
    for &s in &starts {
        let mut stack: Vec<(usize, usize)> = vec![(s, 0)];
        seen[s] = 1;
        while let Some(&mut (pc, ref mut k)) = stack.last_mut() {
            if *k < 2 {
                let e = *k;
                *k += 1;
                if let Some(t) = succ[pc].get()[e] {
                    match seen[t] {
                        0 => {
                            seen[t] = 1;
                            stack.push((t, 0));
                        }
                        1 => {
                            // A back-edge: charge the loop at its head.
                            has_loops = true;
                            let body = (pc.abs_diff(t) + 1) as u32;
                            back_edge_cost[t] = back_edge_cost[t].max(body);
                        }
                        _ => {}
                    }
                }
            } else {
                seen[pc] = 2;
                stack.pop();
            }
        }
    }
    if let Some(pc) = (0..n).find(|&pc| !second[pc] && seen[pc] == 0) {
        return err(pc, "unreachable instruction");
    }
    // Register types, packet ranges, bounds: the accesses that need
    // no run-time check, the lookups the JIT inlines.
    let flow::Found {
        access,
        lookups,
        stack_words,
        no_op_ands,
        decided,
    } = flow::Flow {
        insns,
        uses: &uses,
        succ: &succ,
        calls: &calls,
        starts: &starts,
        order: &order,
        map_refs,
        consts,
        maps,
        kernel_rules,
        as_kernel: Default::default(),
        void: std::cell::RefCell::new(vec![false; starts.len()]),
        callbacks: &opts.callbacks,
        deferred: Default::default(),
        packet_deferred: Default::default(),
    }
    .run(opts)?;
    if !unknown.is_empty() {
        let reach = crate::jit_live::reachable(insns, &starts, &decided);
        if let Some(&pc) = unknown.iter().find(|&&pc| reach[pc]) {
            // The structural check's own refusal, with its message.
            check_insn(pc, &insns[pc], helpers, kernel_rules)?;
        }
    }
    let any = access.iter().any(|&a| a != Access::Checked);
    Ok(Analysis {
        back_edge_cost,
        has_loops,
        functions: starts,
        access: if any { access } else { Vec::new() },
        lookups,
        stack_words,
        no_op_ands,
        decided,
    })
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
