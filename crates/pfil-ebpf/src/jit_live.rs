//! Register liveness for the JIT's fusions: after each instruction, the
//! eBPF registers some path from it may still read. A value no path
//! reads need not be materialised (the reload after an in-memory add,
//! the low byte of a combined 16-bit load, an immediate only compared).
//!
//! Conservative: `bpf_map_lookup_elem` reads the arguments its
//! signature names, any other helper and a local call r1-r5, an exit
//! reads r0
//! (the JIT saves r6-r9 around local calls; the verifier lets no one
//! read r1-r5 after a call), anything unknown reads every register.

use crate::insn::*;
use crate::Helpers;

/// Every register r0-r10.
const ALL: u16 = 0x7ff;

fn bit(r: u8) -> u16 {
    1 << (r & 15)
}

/// (read, written) by `i`, as bit sets.
fn use_def(i: &Insn, helpers: &Helpers) -> (u16, u16) {
    let (d, s) = (bit(i.dst), bit(i.src));
    let x = i.code & BPF_X != 0;
    match i.class() {
        BPF_ALU | BPF_ALU64 => match i.op() {
            BPF_MOV => (if x { s } else { 0 }, d),
            BPF_NEG | BPF_END => (d, d),
            _ => (d | if x { s } else { 0 }, d),
        },
        BPF_LDX => (s, d),
        BPF_ST => (d, 0),
        BPF_STX if i.code & 0xe0 == BPF_MEM => (d | s, 0),
        BPF_STX if i.imm == BPF_CMPXCHG => (d | s | bit(0), bit(0)),
        BPF_STX if i.imm & BPF_FETCH != 0 => (d | s, s),
        BPF_STX => (d | s, 0),
        BPF_LD if i.code == LDDW => (0, d),
        BPF_JMP | BPF_JMP32 => match i.op() {
            BPF_JA => (0, 0),
            BPF_CALL => {
                // A signature names the registers that must be set, not
                // all a helper may read (`bpf_trace_printk` reads r3-r5
                // as its format asks): only `bpf_map_lookup_elem`'s
                // contract (`Helpers`) bounds it to r1 and r2.
                let lookup = i.src == 0 && i.imm as u32 == helper::MAP_LOOKUP_ELEM;
                let args = match helpers.get(i.imm as u32) {
                    Some((_, sig)) if lookup => sig.args.min(5),
                    _ => 5,
                };
                (((1u16 << (args + 1)) - 1) & !1, 0b11_1111)
            }
            BPF_EXIT => (bit(0), 0),
            _ => (d | if x { s } else { 0 }, 0),
        },
        _ => (ALL, 0),
    }
}

/// Live registers after each instruction (bit n: rn), for a verified
/// program (jump targets inside it, no fall-through off the end).
#[cfg(test)]
pub(crate) fn live_out(insns: &[Insn], helpers: &Helpers) -> Vec<u16> {
    live_out_with(insns, helpers, &[], &[])
}

/// Where control goes after `pc` (none after an exit; one edge for the
/// conditional jumps `decided` settles: (pc, always taken), by pc).
pub(crate) fn successors(
    insns: &[Insn],
    pc: usize,
    decided: &[(usize, bool)],
) -> [Option<usize>; 2] {
    let i = &insns[pc];
    let at = |off: i64| usize::try_from(pc as i64 + 1 + off).ok();
    match (i.class(), i.op()) {
        (BPF_JMP, BPF_EXIT) => [None, None],
        (BPF_JMP, BPF_JA) => [at(i.off.into()), None],
        (BPF_JMP32, BPF_JA) => [at(i.imm.into()), None],
        (BPF_JMP, BPF_CALL) => [Some(pc + 1), None],
        (BPF_JMP | BPF_JMP32, _) => match decided.binary_search_by_key(&pc, |d| d.0) {
            Ok(k) if decided[k].1 => [at(i.off.into()), None],
            Ok(_) => [Some(pc + 1), None],
            Err(_) => [Some(pc + 1), at(i.off.into())],
        },
        _ if i.code == LDDW => [Some(pc + 2), None],
        _ => [Some(pc + 1), None],
    }
}

/// [`live_out`] where the conditional jumps in `decided` (pc, always
/// taken) take their one edge, and the instructions `skip` marks are not
/// emitted (they read and write nothing).
pub(crate) fn live_out_with(
    insns: &[Insn],
    helpers: &Helpers,
    decided: &[(usize, bool)],
    skip: &[bool],
) -> Vec<u16> {
    let n = insns.len();
    let mut second = vec![false; n];
    let mut pc = 0;
    while pc < n {
        if insns[pc].code == LDDW && pc + 1 < n {
            second[pc + 1] = true;
            pc += 2;
        } else {
            pc += 1;
        }
    }
    let succ = |pc: usize| successors(insns, pc, decided);
    let mut live_in = vec![0u16; n + 2];
    let mut out = vec![ALL; n];
    loop {
        let mut changed = false;
        for pc in (0..n).rev() {
            if second[pc] {
                continue;
            }
            let o = succ(pc)
                .into_iter()
                .flatten()
                .fold(0, |l, t| l | live_in.get(t).copied().unwrap_or(ALL));
            // A decided jump emits no compare: it reads nothing.
            let decided_here = decided.binary_search_by_key(&pc, |d| d.0).is_ok();
            let (u, d) = if decided_here || skip.get(pc).copied().unwrap_or(false) {
                (0, 0)
            } else {
                use_def(&insns[pc], helpers)
            };
            let inn = u | (o & !d);
            out[pc] = o;
            if inn != live_in[pc] {
                live_in[pc] = inn;
                changed = true;
            }
        }
        if !changed {
            return out;
        }
    }
}

/// The instructions some path reaches from a function's entry, the
/// jumps in `decided` (pc, always taken) taking their one edge: what the
/// JIT emits, and where the verifier refuses a helper call it cannot
/// run.
pub(crate) fn reachable(
    insns: &[Insn],
    functions: &[usize],
    decided: &[(usize, bool)],
) -> Vec<bool> {
    let n = insns.len();
    let mut reach = vec![false; n];
    let mut work: Vec<usize> = functions.to_vec();
    while let Some(pc) = work.pop() {
        if pc >= n || reach[pc] {
            continue;
        }
        reach[pc] = true;
        work.extend(successors(insns, pc, decided).into_iter().flatten());
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;

    #[test]
    fn liveness_follows_every_path() {
        let p = assemble(
            "mov %r2, 1\nmov %r3, 2\njeq %r1, 0, +2\nmov %r0, %r2\nexit\nmov %r0, %r3\nexit",
        )
        .unwrap();
        let h = Helpers::new();
        let l = live_out(&p, &h);
        // After the jump: r2 on one path, r3 on the other.
        assert_eq!(l[2], bit(2) | bit(3));
        assert_eq!(l[3], bit(0));
        assert_eq!(l[0], bit(1) | bit(2));
        // A loop keeps its counter live around the back-edge.
        let p = assemble("mov %r0, 0\nadd %r0, 1\njlt %r0, 5, -2\nmov %r4, 3\nexit").unwrap();
        let l = live_out(&p, &h);
        assert_eq!(l[2], bit(0));
        assert_eq!(l[3], bit(0));
        // A call of an unknown helper reads r1-r5 and ends them; a known
        // lookup its arguments; any other helper r1-r5 whatever its
        // signature.
        let p = assemble("mov %r1, 1\nmov %r6, 2\ncall 1\nmov %r0, %r6\nexit").unwrap();
        let l = live_out(&p, &h);
        assert_eq!(l[0], 0b11_1110);
        assert_eq!(l[2], bit(6));
        let mut two = Helpers::new();
        // SAFETY: never called (liveness only).
        unsafe extern "C" fn f(_: u64, _: u64, _: u64, _: u64, _: u64, _: *mut crate::Env) -> u64 {
            0
        }
        two.insert(1, f, crate::Signature { args: 2 });
        let l = live_out(&p, &two);
        assert_eq!(l[0], bit(1) | bit(2));
        assert_eq!(l[1], bit(1) | bit(2) | bit(6));
        two.insert(6, f, crate::Signature { args: 2 });
        let p = assemble("mov %r1, 1\nmov %r6, 2\ncall 6\nmov %r0, %r6\nexit").unwrap();
        let l = live_out(&p, &two);
        assert_eq!(l[0], 0b11_1110);
    }
}
