//! The verifier's dataflow: register types, packet ranges and scalar
//! bounds (`verify_state.rs`) propagated to a fixpoint, then the access
//! each load and store needs (`Access`) and the lookups the JIT inlines.
//!
//! States are kept only at heads: function entries and jump targets
//! (every successor that is not a fall-through), as the kernel keeps its
//! explored states at jump targets. Any other instruction has exactly
//! one predecessor, the one before it, and its state is recomputed from
//! there by walking the block from its head: the memory is one state per
//! head, not one per instruction. Where every jump goes forward, a head's
//! state is final when the lowest-pc-first worklist takes it (all its
//! predecessors lie before it and are done): the accesses are decided on
//! that walk and the state dropped, so only the pending heads' states
//! are kept.

use super::bounds::{bounded_move, pkt_constant};
use super::rules::{amount, helper_args, pointer_alu, ring_args};
use super::state::*;
use super::{bit, err, Access, Result, Succ, Use, R1_R5};
use crate::insn::*;
use crate::{LoadOptions, MapRef};
use keys::{constant_key, keys, opaque_after};
use stack::{filled, filled_flag, fold, moves_packet, spills};

/// The program's structure, as `verify` found it.
pub(super) struct Flow<'a> {
    pub insns: &'a [Insn],
    pub uses: &'a [Use],
    pub succ: &'a [Succ],
    /// bpf-to-bpf calls: (pc, first pc of the callee), by pc.
    pub calls: &'a [(usize, usize)],
    /// First pcs of the functions, sorted.
    pub starts: &'a [usize],
    /// Functions, callers before callees.
    pub order: &'a [usize],
    /// LDDWs of map handles: (pc, map index), by pc.
    pub map_refs: &'a [(usize, u32)],
    /// LDDWs of addresses in a read-only directly addressed map value:
    /// (pc, map index, offset), by pc (`resolve_maps`).
    pub consts: &'a [(usize, u32, u32)],
    pub maps: &'a [MapRef],
    /// Refuse what the kernel refuses although it is checked here at run
    /// time ([`LoadOptions::kernel_rules`]; the rules: `verify_rules.rs`).
    pub kernel_rules: bool,
    /// Set while `paths.rs` walks: jumps are decided only as the kernel
    /// decides them (not by bytes a packet pointer has proven).
    pub as_kernel: std::cell::Cell<bool>,
    /// Functions an exit of which may leave r0 unset (a `void` one), by
    /// index: a caller's r0 is then unset after the call, as the kernel
    /// copies the callee's r0 back (`prepare_func_exit`). Found and used
    /// by `paths.rs`.
    pub void: std::cell::RefCell<Vec<bool>>,
    /// First pcs of the functions that are callbacks
    /// ([`LoadOptions::callbacks`]).
    pub callbacks: &'a [usize],
    /// Set by `run` where a rule of the records of `bpf_ringbuf_reserve`
    /// (released on every path, by a record's own pointer) fails on a
    /// state where paths met: `paths.rs` decides it path by path, as
    /// the kernel does (clang merges two releases of different records
    /// into one call).
    pub deferred: std::cell::Cell<bool>,
    /// Set by `run` where a packet access is outside the bytes the
    /// joined state proved ([`Flow::packet_rule`]): `paths.rs` then keeps
    /// apart the paths that proved different bytes, and refuses the
    /// access on a path that proved too few, as the kernel does.
    pub packet_deferred: std::cell::Cell<bool>,
}

/// What [`Flow::run`] found: each pc's access, the inlined lookups, the
/// bound of the value each `*(u32 *)(r10 + k) = rX` stores, the `and`s
/// of a mask the value is already within.
pub(super) struct Found {
    pub access: Vec<Access>,
    pub lookups: Vec<(usize, u32, u32)>,
    pub stack_words: Vec<(usize, u64)>,
    pub no_op_ands: Vec<usize>,
    /// Conditional jumps the bounds decide: (pc, always taken), by pc.
    pub decided: Vec<(usize, bool)>,
}

/// The state on each successor edge of one instruction, and the entry
/// state it gives a callee.
struct Step {
    out: [Option<State>; 2],
    call: Option<(usize, State)>,
}

/// No head at this pc (`Flow::run`'s index of heads).
const NONE: u32 = u32::MAX;

/// The states at heads: all of them (the final pass walks every block
/// again), or only those pending (forward jumps only: one pass).
enum Heads {
    All(Vec<Option<State>>),
    Pending(std::collections::BTreeMap<u32, State>),
}

impl Heads {
    fn get(&self, x: u32) -> Option<State> {
        match self {
            Heads::All(v) => v[x as usize],
            Heads::Pending(m) => m.get(&x).copied(),
        }
    }

    fn set(&mut self, x: u32, st: Option<State>) {
        match (self, st) {
            (Heads::All(v), st) => v[x as usize] = st,
            (Heads::Pending(m), Some(st)) => {
                m.insert(x, st);
            }
            (Heads::Pending(m), None) => {
                m.remove(&x);
            }
        }
    }

    /// The state to walk from: kept where a later pass needs it.
    fn take(&mut self, x: u32) -> Option<State> {
        match self {
            Heads::All(v) => v[x as usize],
            Heads::Pending(m) => m.remove(&x),
        }
    }
}

impl Flow<'_> {
    fn func_of(&self, pc: usize) -> usize {
        self.starts.partition_point(|&s| s <= pc) - 1
    }

    fn map_at(&self, pc: usize) -> Option<u32> {
        self.map_refs
            .binary_search_by_key(&pc, |m| m.0)
            .ok()
            .map(|k| self.map_refs[k].1)
    }

    /// The [`CONST`] type of the LDDW at `pc`, if it loads an address in a
    /// read-only map value that fits the type's bits.
    fn const_at(&self, pc: usize) -> Option<u32> {
        let k = self.consts.binary_search_by_key(&pc, |c| c.0).ok()?;
        let (_, m, off) = self.consts[k];
        (m < 256 && off <= CONST_OFF).then_some(CONST | m << 20 | off)
    }

    /// The bytes `[o, o + size)` of the read-only map value a [`CONST`]
    /// type names, at offset `o` from it, as an unsigned value.
    fn const_load(&self, ty: u32, delta: i64, size: usize) -> Option<u64> {
        let m = self.maps.get(((ty & !KIND) >> 20) as usize)?;
        let d = m.direct.filter(|d| !d.writable)?;
        let o = i64::from(ty & CONST_OFF) + delta;
        let o = u64::try_from(o).ok()?;
        if o.checked_add(size as u64)? > d.len {
            return None;
        }
        let mut b = [0u8; 8];
        // SAFETY: `d` is a read-only region the loader keeps alive and
        // unchanged for the program's life (`MapRef::direct`), and
        // `[o, o + size)` lies inside it (checked above; size <= 8).
        unsafe {
            std::ptr::copy_nonoverlapping((d.start + o) as *const u8, b.as_mut_ptr(), size);
        }
        Some(u64::from_le_bytes(b))
    }

    /// Whether successor `k` of `pc` is its fall-through.
    fn falls(&self, pc: usize, k: usize) -> bool {
        let i = &self.insns[pc];
        k == 0 && !(matches!(i.class(), BPF_JMP | BPF_JMP32) && i.op() == BPF_JA)
    }

    /// The heads (function entries and every target that is not a
    /// fall-through), numbered: `head[pc]` (`NONE` elsewhere), and how
    /// many there are.
    fn heads(&self) -> (Vec<u32>, u32) {
        let n = self.insns.len();
        let mut head = vec![NONE; n];
        let mut heads = 0u32;
        let mut mark = |pc: usize, head: &mut [u32]| {
            if head[pc] == NONE {
                head[pc] = heads;
                heads += 1;
            }
        };
        for &s in self.starts {
            mark(s, &mut head);
        }
        for pc in 0..n {
            for (k, t) in self.succ[pc].get().into_iter().enumerate() {
                if let Some(t) = t.filter(|_| !self.falls(pc, k)) {
                    mark(t, &mut head);
                }
            }
        }
        (head, heads)
    }

    /// The program's entry state.
    fn first(opts: &LoadOptions) -> State {
        let mut first = State::new(((1u16 << (opts.entry_args.min(5) + 1)) - 2) | bit(10));
        if opts.xdp_ctx {
            first.set(1, CTX);
        }
        if opts.packet_args {
            first.set(1, PKT);
            first.set(2, PKT_END);
        }
        first
    }

    /// Propagates states to a fixpoint, then decides every access.
    ///
    /// The states here meet where paths join, so a register set on one
    /// path only is not initialised after the join; one read there may
    /// still be read only on the paths that set it (`if (c) x = ..;
    /// ..; if (c) use(x)`). Such a read is noted, not refused (the value
    /// is a scalar nothing is known of, on every path), and then decided
    /// by following the paths apart (`paths.rs`): refused only where one
    /// can read it unset. So is a jump decided here where the kernel's
    /// verifier follows both edges (with [`LoadOptions::kernel_rules`]):
    /// the code behind the other edge is checked there, as the kernel
    /// checks it.
    pub fn run(&self, opts: &LoadOptions) -> Result<Found> {
        let n = self.insns.len();
        let (head, heads) = self.heads();
        let mut unset = false;
        // Forward jumps only: one pass, a head's state dropped once taken.
        let once = !tests::two_passes()
            && (0..n).all(|pc| self.succ[pc].get().into_iter().flatten().all(|t| t > pc));
        let mut states = if once {
            Heads::Pending(Default::default())
        } else {
            Heads::All(vec![None; heads as usize])
        };
        let mut taken = vec![false; if once { heads as usize } else { 0 }];
        let mut changes = vec![0u32; if once { 0 } else { heads as usize }];
        let mut access = vec![Access::Checked; n];
        let mut lookups = Vec::new();
        let mut words = Vec::new();
        let mut ands = Vec::new();
        let mut decided = Vec::new();
        // Initialised registers and register types (the context, map
        // pointers, map values maybe null, map values), meet =
        // intersection; callers before callees.
        let nf = self.starts.len();
        let mut entry = vec![None::<State>; nf];
        entry[0] = Some(Self::first(opts));
        for &f in self.order.iter().rev() {
            let s = self.starts[f];
            states.set(head[s], entry[f]);
            // Lowest pc first: in code without back-edges every
            // predecessor of a join is done before the join is (forward
            // jumps only), so a join meets final states once, and the
            // packet pointers that shared a base keep sharing it.
            let mut work = std::collections::BTreeSet::from([s]);
            while let Some(h) = work.pop_first() {
                let Some(mut st) = states.take(head[h]) else {
                    continue;
                };
                if once {
                    taken[head[h] as usize] = true;
                }
                let mut pc = h;
                // Along the block: a fall-through onto a non-head goes on.
                loop {
                    if once {
                        access[pc] = self.access(pc, &st)?;
                        lookups.extend(self.lookup(pc, &st));
                        words.extend(self.stack_word(pc, &st));
                        ands.extend(self.no_op_and(pc, &st));
                        decided.extend(self.decided(pc, &st));
                    }
                    unset |= self.uninit(pc, &st).is_some() || self.unlike_kernel(pc, &st);
                    let step = self.step(pc, &st)?;
                    if let Some((g, args)) = step.call {
                        let s = self.starts[g];
                        entry[g] = Some(entry[g].map_or(args, |e| e.meet(&args, s)));
                    }
                    let mut next = None;
                    for (k, t) in self.succ[pc].get().into_iter().enumerate() {
                        let (Some(t), Some(o)) = (t, step.out[k]) else {
                            continue;
                        };
                        let x = head[t];
                        if x == NONE {
                            next = Some((t, o));
                            continue;
                        }
                        if once && taken[x as usize] {
                            // Cannot be (t > pc >= every taken head's
                            // pc): refuse rather than decide on half a
                            // state.
                            return err(pc, "verifier: a jump onto a head already decided");
                        }
                        let old = states.get(x);
                        let mut new = old.map_or(o, |old| old.meet(&o, t));
                        if old != Some(new) {
                            if !once {
                                changes[x as usize] += 1;
                                if let (Some(old), true) = (old, changes[x as usize] > WIDEN_AFTER)
                                {
                                    new.widen(&old);
                                }
                            }
                            states.set(x, Some(new));
                            work.insert(t);
                        }
                    }
                    match next {
                        Some((t, o)) => (pc, st) = (t, o),
                        None => break,
                    }
                }
            }
        }
        // Accesses the types decide, now that the states are final: each
        // block walked once more from its head's final state (done on the
        // way in one pass).
        for h in 0..n {
            if once {
                break;
            }
            let Some(Some(mut st)) = (head[h] != NONE).then(|| states.get(head[h])) else {
                continue;
            };
            let mut pc = h;
            loop {
                access[pc] = self.access(pc, &st)?;
                lookups.extend(self.lookup(pc, &st));
                words.extend(self.stack_word(pc, &st));
                ands.extend(self.no_op_and(pc, &st));
                decided.extend(self.decided(pc, &st));
                unset |= self.uninit(pc, &st).is_some() || self.unlike_kernel(pc, &st);
                let step = self.step(pc, &st)?;
                let next = (0..2).find_map(|k| {
                    let t = self.succ[pc].get()[k].filter(|&t| head[t] == NONE)?;
                    Some((t, step.out[k]?))
                });
                match next {
                    Some((t, o)) => (pc, st) = (t, o),
                    None => break,
                }
            }
        }
        if unset || self.deferred.get() {
            self.as_kernel.set(true);
            let paths = self.paths(opts, &head);
            self.as_kernel.set(false);
            paths?;
        }
        lookups.sort_unstable();
        words.sort_unstable();
        ands.sort_unstable();
        decided.sort_unstable();
        Ok(Found {
            access,
            lookups,
            stack_words: words,
            no_op_ands: ands,
            decided,
        })
    }

    /// The first register the instruction at `pc` reads that `st` has not
    /// initialised.
    ///
    /// A subprogram's exit need not return anything (a `void` function:
    /// the kernel checks r0 at the program's exit only): r0 unset there
    /// is noted in [`Flow::void`] and is the caller's after the call (an
    /// unset r0 is `Some(0)` here then, as a read would be).
    fn uninit(&self, pc: usize, st: &State) -> Option<u32> {
        let mut reads = self.uses[pc].reads;
        if self.insns[pc].code == BPF_JMP | BPF_EXIT && self.func_of(pc) != 0 {
            if st.init & 1 == 0 {
                if let Some(v) = self.void.borrow_mut().get_mut(self.func_of(pc)) {
                    *v = true;
                }
                if !self.as_kernel.get() {
                    return Some(0);
                }
            }
            reads &= !1;
        }
        let missing = reads & !st.init;
        (missing != 0).then(|| missing.trailing_zeros())
    }

    /// The transfer function at `pc`: the state on each successor edge
    /// (`None` where there is no successor), the entry state of a callee.
    fn step(&self, pc: usize, st: &State) -> Result<Step> {
        let u = self.uses[pc];
        let insns = self.insns;
        let i = &insns[pc];
        if self.kernel_rules && matches!(i.class(), BPF_ALU | BPF_ALU64) {
            pointer_alu(pc, i, st)?;
        }
        if self.kernel_rules && i.code == BPF_JMP | BPF_CALL && i.src == 0 {
            helper_args(pc, i.imm as u32, st, self.maps)?;
            if let Some(e) = ring_args(i.imm as u32, st, self.maps, self.uses[pc].reads) {
                self.path_rule(pc, e)?;
            }
            self.packet_args(pc, i.imm as u32, st)?;
        }
        // A tail call ends the whole run (the engine unwinds every frame):
        // the kernel's, from a function, would return into its caller.
        if i.code == BPF_JMP | BPF_CALL
            && i.src == 0
            && i.imm as u32 == helper::TAIL_CALL
            && self.func_of(pc) != 0
        {
            return err(
                pc,
                "bpf_tail_call in a function other than the program's own body is not supported",
            );
        }
        if self.kernel_rules
            && i.code == BPF_JMP | BPF_EXIT
            && self.callbacks.contains(&self.starts[self.func_of(pc)])
            && st.init & 1 != 0
            && !(st.ty[0] == OTHER && st.bound(0) <= 1)
        {
            return err(
                pc,
                "a bpf_loop callback returns 0 or 1, and r0 here may be another value (the \
                 kernel refuses it)",
            );
        }
        if self.kernel_rules
            && i.code == BPF_JMP | BPF_EXIT
            && self.func_of(pc) != 0
            && st.ty[0] & KIND == STACK
        {
            return err(
                pc,
                "a function returns a pointer into its own stack frame (the kernel refuses it: \
                 the frame is gone once it returns)",
            );
        }
        if i.code == BPF_JMP | BPF_EXIT && st.refs != 0 {
            self.path_rule(
                pc,
                "a record of bpf_ringbuf_reserve is neither submitted nor discarded on a path \
                 to this exit (the kernel refuses it: an unreleased reference; pfil wants it \
                 released in the function that reserved it)",
            )?;
        }
        if i.code == BPF_JMP | BPF_CALL
            && i.src == 0
            && i.imm as u32 == helper::TAIL_CALL
            && st.refs != 0
        {
            self.path_rule(
                pc,
                "bpf_tail_call with a record of bpf_ringbuf_reserve not submitted or discarded \
                 (the kernel refuses it: the reference would leak)",
            )?;
        }
        let mut out = *st;
        out.init = (st.init & !u.kills) | u.writes | bit(10);
        let proven = self.store_proven(pc, st);
        spills(i, st, &mut out, proven);
        keys(i, st, &mut out, proven);
        for r in 0..11 {
            if (u.kills | u.writes) & bit(r) != 0 {
                out.set(r as usize, OTHER);
            }
        }
        out.opaque = opaque_after(i, st, u.kills | u.writes);
        // A helper may move the packet (adjust_head): forget it;
        // not bpf_map_lookup_elem (its contract, see `Helpers`). After
        // one that does move it, a packet pointer kept is one the
        // kernel makes a number ([`PKT_GONE`]).
        let lookup =
            i.code == BPF_JMP | BPF_CALL && i.src == 0 && i.imm as u32 == helper::MAP_LOOKUP_ELEM;
        if i.class() == BPF_JMP && i.op() == BPF_CALL && !lookup {
            out.range = 0;
            out.past = 0;
            out.past_reg = NO_REG;
            let gone = match moves_packet(i) {
                Some(id) => PKT_GONE | id,
                None => OTHER,
            };
            for r in 0..11 {
                if matches!(out.ty[r] & KIND, PKT | PKT_END) {
                    out.set(r, gone);
                }
            }
        }
        let (dty, sty) = (st.ty[i.dst as usize], st.ty[i.src as usize]);
        let (d, sr) = (i.dst as usize, i.src as usize);
        if i.code == BPF_ALU64 | BPF_MOV | BPF_X && i.off == 0 && i.src == 10 {
            // The frame pointer: a stack pointer at depth 0.
            out.set(d, STACK);
        } else if i.code == BPF_ALU64 | BPF_MOV | BPF_X && i.off == 0 {
            // A copy keeps the type (and the id, range, bound); a
            // number's copy is linked to it (`State::link`).
            out.copy(d, st, sr);
            if st.ty[sr] == OTHER && d != sr {
                out.link(d, sr, pc);
            }
        } else if i.code == BPF_ALU | BPF_MOV | BPF_X
            && i.off == 0
            && st.ty[sr] == OTHER
            && st.hi[sr] <= u64::from(u32::MAX)
        {
            // A 32-bit copy of a number under 2^32: the number itself.
            out.copy(d, st, sr);
            if d != sr {
                out.link(d, sr, pc);
            }
        } else if i.class() == BPF_ALU64
            && matches!(i.op(), BPF_ADD | BPF_SUB)
            && st.pointer(d)
            && amount(i, st) == Some(0)
        {
            // A pointer moved by a known 0 (the kernel's tnum): itself
            // (the register was forgotten with the others written above).
            out.copy(d, st, d);
        } else if i.class() == BPF_ALU64
            && matches!(i.op(), BPF_ADD | BPF_SUB)
            && (matches!(dty, CTX | CTX_MOD) || dty & KIND == CTX_OFF)
        {
            // The context pointer moved: by a known amount, tracked (back
            // at 0 it is the context again); else moved for good.
            let at = if dty & KIND == CTX_OFF {
                i64::from(dty & 0xffff) - CTX_OFF_BIAS
            } else {
                0
            };
            let k = amount(i, st).map(|k| {
                let k = k as i64;
                if i.op() == BPF_SUB {
                    at - k
                } else {
                    at + k
                }
            });
            out.set(
                d,
                match k {
                    _ if dty == CTX_MOD => CTX_MOD,
                    Some(0) => CTX,
                    Some(k) if (-CTX_OFF_BIAS..CTX_OFF_BIAS).contains(&k) => {
                        CTX_OFF | (k + CTX_OFF_BIAS) as u32
                    }
                    _ => CTX_MOD,
                },
            );
        } else if i.class() == BPF_ALU64
            && i.op() == BPF_ADD
            && i.code & BPF_X != 0
            && (matches!(sty, CTX | CTX_MOD) || sty & KIND == CTX_OFF)
        {
            // A scalar plus the context pointer: a moved one.
            out.set(d, CTX_MOD);
        } else if matches!(i.code, c if c == BPF_ALU64 | BPF_MOV | BPF_K || c == BPF_ALU | BPF_MOV | BPF_K)
            && i.off == 0
        {
            // A constant: exactly it (as the kernel's tnum), so a jump on
            // it is decided.
            let v = if i.class() == BPF_ALU64 {
                i.imm as i64 as u64
            } else {
                u64::from(i.imm as u32)
            };
            out.exact(d, v);
        } else if i.code == BPF_ALU64 | BPF_ADD | BPF_K && dty & KIND == STACK {
            // r10 - k: still in the frame while 0 <= k <= STACK_FRAME.
            let k = (dty & !KIND) as i64 - i.imm as i64;
            out.set(
                d,
                if (0..=crate::env::STACK_FRAME as i64).contains(&k) {
                    STACK | k as u32
                } else {
                    OTHER
                },
            );
        } else if i.code == BPF_ALU64 | BPF_ADD | BPF_K && dty & KIND == CONST {
            // An address in a frozen value, moved: still one while the
            // offset fits (a load past the value is checked at run time).
            let k = i64::from(dty & CONST_OFF) + i64::from(i.imm);
            out.set(
                d,
                if (0..=i64::from(CONST_OFF)).contains(&k) {
                    (dty & !CONST_OFF) | k as u32
                } else {
                    OTHER
                },
            );
        } else if i.class() == BPF_ALU64
            && matches!(i.op(), BPF_ADD | BPF_SUB)
            && dty & KIND == RING
            && !(i.code & BPF_X != 0 && st.pointer(sr))
        {
            // A record's pointer moved: by a known amount, still its
            // (the offset kept, so it may come back to the start); else
            // a number, its accesses checked at run time.
            let moved = amount(i, st)
                .map(|k| {
                    if i.op() == BPF_SUB {
                        (k as i64).wrapping_neg()
                    } else {
                        k as i64
                    }
                })
                .and_then(|k| ring_moved(dty, k));
            match moved {
                Some(t) => {
                    out.copy(d, st, d);
                    out.ty[d] = t;
                }
                None => out.set(d, OTHER),
            }
        } else if let Some(moved) = bounded_move(i, st) {
            // A map value's or a stack pointer moved, with a variable
            // part (`verify_bounds.rs`); else a number.
            match moved {
                Some((t, var)) => {
                    out.set(d, t);
                    out.vmax[d] = var;
                }
                None => out.set(d, OTHER),
            }
        } else if let Some(c) = pkt_constant(i, st) {
            // base + k: still a packet pointer while 0 <= k < 2^28 (k
            // an immediate, or a register known exactly: the kernel's
            // constant offset); past 0xffff, one behind which no bytes
            // are ever proven (`State::prove`), as in the kernel.
            let k = (dty & !KIND) as i64 + c;
            if (0..PKT_OFF_LIMIT).contains(&k) {
                out.copy(d, st, d);
                out.ty[d] = PKT | k as u32;
            } else {
                out.set(d, OTHER);
            }
        } else if i.code == BPF_ALU64 | BPF_ADD | BPF_X
            && dty & KIND == PKT
            && sty == OTHER
            && i.src != i.dst
        {
            // base + k + a bounded scalar: a new base.
            out.copy(d, st, d);
            out.add_var(pc, d, st.lo[sr], st.hi[sr]);
        } else if let Some(v) = fold(i, st) {
            // Scalars known exactly: the result, as the kernel's tnums
            // (so `flag = a & b; if flag` is decided on each path).
            out.exact(d, v);
        } else if matches!(i.class(), BPF_ALU | BPF_ALU64) && i.op() != BPF_END {
            // A scalar result: its upper bound.
            let b = match (i.code & BPF_X != 0, i.class() == BPF_ALU64) {
                (true, _) => st.bound(sr),
                (false, true) => i.imm as i64 as u64,
                (false, false) => u64::from(i.imm as u32),
            };
            out.scalar(d, alu_bound(i, st.bound(d), b));
            // A number plus a known amount that cannot wrap: its least
            // moves too (`lo`: what makes a packet pointer certainly
            // past 0xffff, `State::add_var`).
            let amount = match i.code & BPF_X != 0 {
                true => st.known(sr),
                false => u64::try_from(i.imm).ok(),
            };
            if let (BPF_ALU64, BPF_ADD, Some(k), true) = (
                i.class(),
                i.op(),
                amount,
                st.ty[d] == OTHER && out.hi[d] != u64::MAX,
            ) {
                out.lo[d] = st.lo[d].saturating_add(k).min(out.hi[d]);
            }
        } else if i.class() == BPF_LDX && sty == CTX && i.code & 0xe0 == BPF_MEM && i.size() == 4 {
            // Converted to the 64-bit pointers (data_meta at 8 too).
            match i.off {
                0 => out.set(d, PKT),
                4 => out.set(d, PKT_END),
                // ingress_ifindex, rx_queue_index: 32-bit numbers.
                12 | 16 => out.scalar(d, u32::MAX.into()),
                _ => out.set(d, OTHER),
            }
        } else if let Some(v) =
            (i.class() == BPF_LDX && i.code & 0xe0 == BPF_MEM && sty & KIND == CONST)
                .then(|| self.const_load(sty, i64::from(i.off), i.size()))
                .flatten()
        {
            // A load of a frozen value (a `const volatile` setting): the
            // value itself, as the kernel reads a frozen map.
            out.exact(d, v);
        } else if let Some(t) = filled(i, st) {
            // A pointer spilled whole, filled whole: the same pointer, as
            // the kernel restores a spilled register.
            out.set(d, t);
        } else if let Some(v) = filled_flag(i, st) {
            // A flag spilled whole: the same value.
            out.exact(d, v);
        } else if i.class() == BPF_LDX && i.code & 0xe0 == BPF_MEM && i.size() < 8 {
            // Zero-extended.
            out.scalar(d, (1u64 << (8 * i.size())) - 1);
        } else if let (LDDW, Some(m)) = (i.code, self.map_at(pc)) {
            out.set(d, MAP | m);
        } else if let (LDDW, Some(c)) = (i.code, self.const_at(pc)) {
            out.set(d, c);
        } else if i.code == LDDW {
            let hi = insns.get(pc + 1).map_or(0, |h| h.imm as u32 as u64);
            out.exact(d, (i.imm as u32 as u64) | (hi << 32));
        } else if lookup && st.ty[1] & KIND == MAP {
            // The helper's contract (see `Helpers`): null or the value;
            // one the kernel may know is the value, if the map is an
            // array (or of a type not said) and the key a constant.
            let m = st.ty[1] & !KIND;
            let elidable = self
                .maps
                .get(m as usize)
                .is_none_or(|map| match map.map_type {
                    0 => true,
                    2 | 6 => constant_key(st, 2, map.max_entries),
                    _ => false,
                });
            out.nullable(0, if elidable { m | ELIDABLE } else { m }, pc);
        } else if i.code == BPF_JMP | BPF_CALL && i.src == 0 {
            self.ring_call(pc, i.imm as u32, st, &mut out)?;
        }
        let mut call = None;
        if let Ok(k) = self.calls.binary_search_by_key(&pc, |c| c.0) {
            let g = self.func_of(self.calls[k].1);
            let mut args = State::new((st.init & R1_R5) | bit(10));
            for r in 1..6 {
                args.copy(r, st, r);
                args.vrange[r] = 0;
                // The caller's stack pointers are not the callee's r10.
                if args.ty[r] & KIND == STACK {
                    args.set(r, OTHER);
                }
            }
            call = Some((g, args));
            // A map value that may be null, given to the function: its
            // null check there is one of the caller's copies to the
            // kernel, which follows the call's paths (`State::escaped`).
            for r in 1..6 {
                if st.ty[r] & KIND == NULLABLE {
                    out.escape(st.id[r]);
                }
            }
            if self.void.borrow().get(g) == Some(&true) {
                out.init &= !1;
            }
        }
        let succ = self.succ[pc].get();
        let mut edges = [None, None];
        for (k, t) in succ.into_iter().enumerate() {
            if t.is_some() {
                // Both edges to one target: the compare tells it nothing.
                edges[k] = if succ[0] == succ[1] {
                    Some(out)
                } else {
                    self.edge(pc, st, out, k == 1)
                };
            }
        }
        // A jump the state decides has one edge: the other's state would
        // only blur what its target knows (code reached only through it
        // gets no state, and is not emitted).
        if let Some((_, taken)) = self.decided(pc, st) {
            edges[usize::from(!taken)] = None;
        }
        Ok(Step { out: edges, call })
    }
}

impl Flow<'_> {
    /// `bpf_ringbuf_reserve`'s record (a reference, r0 a record that may be
    /// null, of the size r2 says), and its release by `bpf_ringbuf_submit`
    /// or `_discard` (every copy of r1 forgotten), as the kernel tracks
    /// acquired references.
    fn ring_call(&self, pc: usize, id: u32, st: &State, out: &mut State) -> Result<()> {
        match id {
            helper::RINGBUF_RESERVE => {
                // The kernel wants a constant; pfil takes a bound, which a
                // join of the paths' constants gives (clang merges two
                // reserves of different sizes into one).
                if st.ty[2] != OTHER
                    || (st.known(2).is_none() && st.bound(2) > u64::from(u32::MAX / 4))
                {
                    return err(
                        pc,
                        "bpf_ringbuf_reserve of a size that is not a known constant (the kernel \
                         refuses it)",
                    );
                }
                let n = (!st.refs).trailing_zeros();
                if n >= 8 {
                    return err(
                        pc,
                        "more than 8 records of bpf_ringbuf_reserve held at once (pfil's limit)",
                    );
                }
                out.set(0, RING_NULL | (n << RING_REF_SHIFT) | RING_OFF_BIAS as u32);
                // The least it may be (paths that reserve more are told
                // apart by `paths.rs` where an access needs it).
                out.hi[0] = st.known(2).unwrap_or_else(|| st.low(2));
                out.refs |= 1 << n;
            }
            helper::RINGBUF_SUBMIT | helper::RINGBUF_DISCARD => {
                let t = st.ty[1];
                if t & KIND != RING || ring_off(t) != 0 {
                    let name = helper::name(id).unwrap_or("helper");
                    let what = match t & KIND {
                        RING_NULL => "a record that may be null (check it first)".to_owned(),
                        RING => format!("a record moved {} bytes from its start", ring_off(t)),
                        RING_GONE => "a record submitted or discarded already".to_owned(),
                        _ => "not a record bpf_ringbuf_reserve returned (or one reserved in \
                              another function, or moved by an amount not known)"
                            .to_owned(),
                    };
                    return self.path_rule(
                        pc,
                        format!("bpf_{name}'s first argument is {what} (the kernel refuses it)"),
                    );
                }
                out.release(ring_ref(t), false);
            }
            _ => {}
        }
        Ok(())
    }

    /// A rule broken at `pc` that the kernel decides path by path (the
    /// records of `bpf_ringbuf_reserve`, the packet bytes proven): refused
    /// in `paths.rs`; in `run`, where paths met, noted for `paths.rs` to
    /// decide ([`Flow::deferred`]).
    pub(super) fn path_rule(&self, pc: usize, msg: impl Into<String>) -> Result<()> {
        if self.as_kernel.get() {
            return err(pc, msg.into());
        }
        self.deferred.set(true);
        Ok(())
    }
}

#[path = "verify_decide.rs"]
mod decide;
#[path = "verify_keys.rs"]
mod keys;
#[path = "verify_paths.rs"]
mod paths;
#[path = "verify_stack.rs"]
mod stack;

#[cfg(not(test))]
mod tests {
    /// Whether a test asked for the two passes on forward code too.
    pub fn two_passes() -> bool {
        false
    }
}

#[cfg(test)]
#[path = "verify_flow_tests.rs"]
mod tests;
