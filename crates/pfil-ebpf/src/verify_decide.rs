//! What the dataflow decides at one instruction from its state: the
//! conditional jumps the state settles, the facts each edge of a jump
//! adds (scalar bounds, a pointer past the packet's end), the array
//! lookups the JIT inlines, the no-op masks.

use super::super::state::*;
use super::Flow;
use crate::insn::*;

impl Flow<'_> {
    /// An array lookup with its key in this frame, at `pc` in state
    /// `st`: (pc, map index, the key's depth), which the JIT inlines.
    pub(super) fn lookup(&self, pc: usize, st: &State) -> Option<(usize, u32, u32)> {
        let i = &self.insns[pc];
        let lookup = i.code == BPF_JMP | BPF_CALL
            && i.src == 0
            && i.imm as u32 == helper::MAP_LOOKUP_ELEM
            && st.ty[1] & KIND == MAP
            && st.ty[2] & KIND == STACK;
        if !lookup {
            return None;
        }
        let (m, k) = (st.ty[1] & !KIND, st.ty[2] & !KIND);
        let mr = self.maps.get(m as usize)?;
        let fits = mr
            .array
            .is_some_and(|l| l.stride % 8 == 0 && l.stride <= i32::MAX as u64);
        (fits && mr.key_size == 4 && k >= 4).then_some((pc, m, k))
    }

    /// A 4-byte store of a register into the stack at `pc`: (pc, the
    /// register's upper bound), what the JIT's inlined lookup reads its
    /// key from.
    pub(super) fn stack_word(&self, pc: usize, st: &State) -> Option<(usize, u64)> {
        let i = &self.insns[pc];
        (i.code == BPF_STX | BPF_MEM | BPF_W && i.dst == 10).then(|| (pc, st.bound(i.src as usize)))
    }

    /// A conditional jump at `pc` whose outcome state `st` decides:
    /// (pc, always taken). While `paths.rs` walks, only as the kernel
    /// decides it ([`Flow::decided_as`]).
    pub(super) fn decided(&self, pc: usize, st: &State) -> Option<(usize, bool)> {
        self.decided_as(pc, st, self.as_kernel.get())
    }

    /// [`Flow::decided`]: two numbers known exactly (any compare, signed
    /// too, made as the interpreter makes it); a scalar compared with a
    /// constant its bounds settle; a packet pointer compared with the
    /// packet's end where it is known past the end, or (not `as_kernel`:
    /// the kernel follows both edges there) where its bytes are proven.
    pub(super) fn decided_as(
        &self,
        pc: usize,
        st: &State,
        as_kernel: bool,
    ) -> Option<(usize, bool)> {
        let i = &self.insns[pc];
        let cond = matches!(i.class(), BPF_JMP | BPF_JMP32)
            && !matches!(i.op(), BPF_JA | BPF_CALL | BPF_EXIT);
        if let (true, Some(a)) = (cond, st.known(i.dst as usize)) {
            let b = if i.code & BPF_X != 0 {
                st.known(i.src as usize)
            } else {
                Some(0)
            };
            if let Some(taken) = b.and_then(|b| crate::interp::branch(i, a, b)) {
                return Some((pc, taken));
            }
        }
        if let Some(taken) = scalars_decided(i, st) {
            return Some((pc, taken));
        }
        if i.class() == BPF_JMP && i.code & BPF_X != 0 {
            let (p, op) = pkt_compare(i, st)?;
            let off = st.ty[p] & !KIND;
            // (As the kernel: only the register its compare marked.)
            let marked = !as_kernel || usize::from(st.past_reg) == p;
            if st.id[p] == 0 && st.past != 0 && off >= st.past && marked {
                // p > end: `p > end` and `p >= end` hold.
                return Some((pc, matches!(op, BPF_JGT | BPF_JGE)));
            }
            // `data + 0 <= data_end` always holds; a base with a variable
            // part is below the end only where a comparison proved bytes
            // behind it (0 there means none proven).
            let limit = st.limit(p);
            let proven = off <= limit && (st.id[p] == 0 || limit > 0);
            // p <= end decides `p > end` and `p <= end` only.
            return (proven && !as_kernel && matches!(op, BPF_JGT | BPF_JLE))
                .then_some((pc, op == BPF_JLE));
        }
        let jmp32 = i.class() == BPF_JMP32;
        if i.class() == BPF_JMP
            && i.code & BPF_X == 0
            && i.imm == 0
            && matches!(i.op(), BPF_JEQ | BPF_JNE)
            && st.ty[i.dst as usize] & KIND == RING
        {
            // A record checked not null is not 0 (the kernel prunes the
            // other edge: on it the record would be held for ever).
            return Some((pc, i.op() == BPF_JNE));
        }
        if !(i.class() == BPF_JMP || jmp32) || i.code & BPF_X != 0 || st.ty[i.dst as usize] != OTHER
        {
            return None;
        }
        let (hi, k) = (st.bound(i.dst as usize), i.imm as i64 as u64);
        let lo = st.low(i.dst as usize);
        // A 32-bit compare reads the low half: the same as the 64-bit one
        // of a value under 2^32 with the constant's low half.
        let (hi, k) = match jmp32 {
            false => (hi, k),
            true if hi <= u64::from(u32::MAX) => (hi, k & 0xffff_ffff),
            true => return None,
        };
        // (A value known exactly is decided above.)
        let taken = match i.op() {
            BPF_JEQ | BPF_JNE if k < lo => i.op() == BPF_JNE,
            BPF_JGT if lo > k => true,
            BPF_JGE if lo >= k => true,
            BPF_JLT if lo >= k => false,
            BPF_JLE if lo > k => false,
            BPF_JGT if hi <= k => false,
            BPF_JGE if hi < k => false,
            BPF_JEQ if hi < k => false,
            BPF_JLT if hi < k => true,
            BPF_JLE if hi <= k => true,
            BPF_JNE if hi < k => true,
            _ => return None,
        };
        Some((pc, taken))
    }

    /// `and d, 2^k - 1` at `pc` on a scalar already at most the mask: a
    /// no-op (the 32-bit form too: the value has no high bits to clear).
    pub(super) fn no_op_and(&self, pc: usize, st: &State) -> Option<usize> {
        let i = &self.insns[pc];
        let mask = i.imm;
        let and = (i.code == BPF_ALU64 | BPF_AND | BPF_K || i.code == BPF_ALU | BPF_AND | BPF_K)
            && i.off == 0
            && mask >= 0
            && mask & mask.wrapping_add(1) == 0;
        (and && st.bound(i.dst as usize) <= mask as u64).then_some(pc)
    }
}

impl Flow<'_> {
    /// Whether the jump at `pc` is decided in state `st` where the kernel's
    /// verifier follows both edges (by bytes a packet pointer has proven),
    /// with [`crate::LoadOptions::kernel_rules`]. If so, the packet rules
    /// are noted for `paths.rs` to decide too ([`Flow::packet_deferred`]):
    /// the edge the kernel follows and this pass does not may read packet
    /// bytes it did not prove (`if data + 14 > data_end` a second time,
    /// its taken edge).
    pub(super) fn unlike_kernel(&self, pc: usize, st: &State) -> bool {
        let unlike = self.kernel_rules
            && self.decided_as(pc, st, false).is_some()
            && self.decided_as(pc, st, true).is_none();
        if unlike {
            self.packet_deferred.set(true);
        }
        unlike
    }

    /// The state on one edge of the instruction at `pc` (`taken`: the
    /// jump's), from `out`, its state after the instruction, and `st`,
    /// before: what a conditional jump's outcome proves. `None` where the
    /// edge cannot be taken.
    ///
    /// - `if p > data_end` and its forms, `p` a packet pointer: `p`'s
    ///   bytes are in the packet on one edge (`State::prove`), and on the
    ///   other `p` lies past the end (`State::past`, `data`'s pointers).
    /// - `if rX == 0` on a map value maybe null: the value on one edge, 0
    ///   on the other.
    /// - `if rX OP k` on a scalar, unsigned (the 32-bit compare of a
    ///   value under 2^32 too): the bounds the edge proves (the kernel's
    ///   `reg_set_min_max`).
    pub(super) fn edge(&self, pc: usize, st: &State, mut o: State, taken: bool) -> Option<State> {
        let i = &self.insns[pc];
        let jmp32 = i.class() == BPF_JMP32;
        if !(i.class() == BPF_JMP || jmp32) || matches!(i.op(), BPF_JA | BPF_CALL | BPF_EXIT) {
            return Some(o);
        }
        let d = i.dst as usize;
        let dty = st.ty[d];
        if !jmp32 && i.code & BPF_X != 0 {
            if let Some((p, op)) = pkt_compare(i, st) {
                // The relation on this edge: `p OP end`, or its negation.
                let rel = match (op, taken) {
                    (op, true) => op,
                    (BPF_JGT, false) => BPF_JLE,
                    (BPF_JGE, false) => BPF_JLT,
                    (BPF_JLT, false) => BPF_JGE,
                    _ => BPF_JGT,
                };
                if matches!(rel, BPF_JLT | BPF_JLE) {
                    o.prove(p);
                } else if st.id[p] == 0 {
                    // data + off > data_end, or data + off + 1 > it.
                    let off = (st.ty[p] & !KIND) + u32::from(rel == BPF_JGE);
                    o.past = if o.past == 0 { off } else { o.past.min(off) };
                    o.past_reg = p as u8;
                }
                return Some(o);
            }
        }
        if i.code & BPF_X != 0 {
            return scalars_edge(i, st, o, taken);
        }
        if !jmp32 && matches!(i.op(), BPF_JEQ | BPF_JNE) && i.imm == 0 && dty & KIND == RING_NULL {
            // A record of bpf_ringbuf_reserve, and its copies: not null
            // on one edge, null (and so released: nothing was reserved)
            // on the other, as the kernel marks them.
            if taken == (i.op() == BPF_JNE) {
                let ring = RING | (dty & !KIND);
                for r in 0..11 {
                    if o.ty[r] == dty {
                        o.ty[r] = ring;
                    }
                }
                for k in 0..64 {
                    if o.slot[k] == dty {
                        o.slot[k] = ring;
                    }
                }
            } else {
                o.release(ring_ref(dty), true);
            }
            return Some(o);
        }
        if !jmp32 && matches!(i.op(), BPF_JEQ | BPF_JNE) && i.imm == 0 && dty & KIND == NULLABLE {
            // The value and its copies (the same identity), as the
            // kernel marks them.
            let id = st.id[d];
            for r in (0..11).filter(|&r| st.ty[r] == dty && st.id[r] == id) {
                if taken == (i.op() == BPF_JNE) {
                    let m = dty & !KIND & !ELIDABLE;
                    o.set(r, if m <= VALUE_MAP { VALUE | m } else { OTHER });
                } else {
                    o.exact(r, 0);
                }
            }
            return Some(o);
        }
        if dty != OTHER || (jmp32 && st.hi[d] > u64::from(u32::MAX)) {
            return Some(o);
        }
        let k = if jmp32 {
            u64::from(i.imm as u32)
        } else {
            i.imm as i64 as u64
        };
        let Some(op) = relation(i.op(), taken) else {
            return Some(o);
        };
        let (mut lo, mut hi) = (o.lo[d], o.hi[d]);
        match op {
            BPF_JEQ => (lo, hi) = (k.max(lo), k.min(hi)),
            BPF_JNE if lo == k && k < hi => lo = k + 1,
            BPF_JNE if hi == k && k > lo => hi = k - 1,
            BPF_JGT => lo = lo.max(k.checked_add(1)?),
            BPF_JGE => lo = lo.max(k),
            BPF_JLT => hi = hi.min(k.checked_sub(1)?),
            BPF_JLE => hi = hi.min(k),
            _ => {}
        }
        // An edge whose bounds cross is never taken (the decided jumps
        // already have one edge; this is what is left of them).
        if lo > hi {
            return None;
        }
        // (The numbers linked to `d` too: copies of it.)
        o.narrow(d, lo, hi);
        (o.lo[d] <= o.hi[d]).then_some(o)
    }
}

/// A packet pointer compared with the packet's end at `i` (a 64-bit
/// jump of the register form): the pointer's register and the compare as
/// `p OP data_end` (`BPF_JGT`, `_JGE`, `_JLT` or `_JLE`), the operands
/// swapped where the end is the destination.
fn pkt_compare(i: &Insn, st: &State) -> Option<(usize, u8)> {
    let (d, s) = (i.dst as usize, i.src as usize);
    let op = i.op();
    if !matches!(op, BPF_JGT | BPF_JGE | BPF_JLT | BPF_JLE) {
        return None;
    }
    match (st.ty[d] & KIND, st.ty[s] & KIND) {
        (PKT, PKT_END) => Some((d, op)),
        (PKT_END, PKT) => Some((
            s,
            match op {
                BPF_JGT => BPF_JLT,
                BPF_JGE => BPF_JLE,
                BPF_JLT => BPF_JGT,
                _ => BPF_JGE,
            },
        )),
        _ => None,
    }
}

/// A compare of two scalars at `i` (the register form) as an unsigned
/// one of their bounds: `(dst, src, op)`, `op` one of `BPF_JEQ`, `_JNE`,
/// `_JGT`, `_JGE`, `_JLT`, `_JLE`. A signed compare is the unsigned one
/// where both are under 2^63, a 32-bit one where both are under 2^32
/// (the kernel's `reg_set_min_max` and `is_scalar_branch_taken` for two
/// scalars; pfil keeps unsigned bounds only).
fn scalars_compare(i: &Insn, st: &State) -> Option<(usize, usize, u8)> {
    let (d, s) = (i.dst as usize, i.src as usize);
    let jump =
        matches!(i.class(), BPF_JMP | BPF_JMP32) && !matches!(i.op(), BPF_JA | BPF_CALL | BPF_EXIT);
    if !jump || i.code & BPF_X == 0 || d == s || st.ty[d] != OTHER || st.ty[s] != OTHER {
        return None;
    }
    let hi = st.hi[d].max(st.hi[s]);
    if i.class() == BPF_JMP32 && hi > u64::from(u32::MAX) {
        return None;
    }
    let signed_ok = hi < 1 << 63 && (i.class() == BPF_JMP || hi < 1 << 31);
    let op = match i.op() {
        op @ (BPF_JEQ | BPF_JNE | BPF_JGT | BPF_JGE | BPF_JLT | BPF_JLE) => op,
        BPF_JSGT if signed_ok => BPF_JGT,
        BPF_JSGE if signed_ok => BPF_JGE,
        BPF_JSLT if signed_ok => BPF_JLT,
        BPF_JSLE if signed_ok => BPF_JLE,
        _ => return None,
    };
    Some((d, s, op))
}

/// A compare of two scalars that their bounds settle: whether it jumps.
fn scalars_decided(i: &Insn, st: &State) -> Option<bool> {
    let (d, s, op) = scalars_compare(i, st)?;
    let (alo, ahi, blo, bhi) = (st.lo[d], st.hi[d], st.lo[s], st.hi[s]);
    match op {
        BPF_JGT if alo > bhi => Some(true),
        BPF_JGT if ahi <= blo => Some(false),
        BPF_JGE if alo >= bhi => Some(true),
        BPF_JGE if ahi < blo => Some(false),
        BPF_JLT if ahi < blo => Some(true),
        BPF_JLT if alo >= bhi => Some(false),
        BPF_JLE if ahi <= blo => Some(true),
        BPF_JLE if alo > bhi => Some(false),
        BPF_JEQ | BPF_JNE if ahi < blo || bhi < alo => Some(op == BPF_JNE),
        _ => None,
    }
}

/// The bounds of two scalars compared at `i` on the edge `taken`: each
/// narrowed by the other's (`a < b`: `a <= b.hi - 1`, `b >= a.lo + 1`);
/// `None` where they cross (the edge is never taken).
fn scalars_edge(i: &Insn, st: &State, mut o: State, taken: bool) -> Option<State> {
    let Some((d, s, op)) = scalars_compare(i, st) else {
        return Some(o);
    };
    // `d REL s` on this edge.
    let Some(rel) = relation(op, taken) else {
        return Some(o);
    };
    let (alo, ahi, blo, bhi) = (st.lo[d], st.hi[d], st.lo[s], st.hi[s]);
    let ((alo, ahi), (blo, bhi)) = match rel {
        BPF_JEQ => {
            let (lo, hi) = (alo.max(blo), ahi.min(bhi));
            ((lo, hi), (lo, hi))
        }
        BPF_JGT => (
            (alo.max(blo.checked_add(1)?), ahi),
            (blo, bhi.min(ahi.checked_sub(1)?)),
        ),
        BPF_JGE => ((alo.max(blo), ahi), (blo, bhi.min(ahi))),
        BPF_JLT => (
            (alo, ahi.min(bhi.checked_sub(1)?)),
            (blo.max(alo.checked_add(1)?), bhi),
        ),
        BPF_JLE => ((alo, ahi.min(bhi)), (blo.max(alo), bhi)),
        // (`!=` narrows only an end equal to a value known exactly.)
        _ => ((alo, ahi), (blo, bhi)),
    };
    if alo > ahi || blo > bhi {
        return None;
    }
    o.narrow(d, alo, ahi);
    o.narrow(s, blo, bhi);
    // (Linked to each other: both narrowed by both.)
    (o.lo[d] <= o.hi[d] && o.lo[s] <= o.hi[s]).then_some(o)
}

/// The relation a compare `op` holds on its edge `taken`: the jump's, or
/// its negation (`None`: a compare whose negation is not one of these).
fn relation(op: u8, taken: bool) -> Option<u8> {
    Some(match (op, taken) {
        (op, true) => op,
        (BPF_JEQ, false) => BPF_JNE,
        (BPF_JNE, false) => BPF_JEQ,
        (BPF_JGT, false) => BPF_JLE,
        (BPF_JLE, false) => BPF_JGT,
        (BPF_JGE, false) => BPF_JLT,
        (BPF_JLT, false) => BPF_JGE,
        _ => return None,
    })
}
