//! Registers read where a path may leave them unset, decided path by path.
//!
//! `Flow::run` meets the states of every path at a join, so after
//! `if (c) x = ..;` the register holding `x` is not initialised, and a
//! later `if (c) use(x)` reads it. The kernel's verifier follows each
//! path (and prunes one only where an explored state covers it), so it
//! knows `c` is 0 on the path that left `x` unset, and that the second
//! jump is not taken there. This pass does the same, within a bound: the
//! states at a head are kept apart by the registers they have
//! initialised and by the flags they hold (registers known to be 0 or 1:
//! `c = a & b` of two such is known too); paths alike in both are met
//! as in `Flow::run`. So each state carries what its own jumps proved
//! (`c` is 0, the packet pointer is past the end: `decide.rs`) and a jump
//! those facts decide has one edge. A read of a register unset in any
//! state that reaches it is refused. Past [`SPLITS`] states at one head a
//! new one is met with the most alike (the same registers initialised),
//! so the pass ends, and answers at worst as `Flow::run` would.
//!
//! Packet accesses outside the bytes proven (`Flow::packet_rule`) are
//! decided here too: then paths that proved different bytes, or hold
//! their packet pointers elsewhere, are kept apart as well
//! (`packet_key`), each with the scalars its own jumps made exact (`if
//! (proto == 6)` on the path that compared 40 bytes). A state met past
//! [`SPLITS`] with another of different proofs, met with one where a
//! register held another exact value (a loop's counter), or widened in a
//! loop, refuses no packet access ([`State::lossy`]): the kernel's own
//! paths may each prove theirs, and the run-time check stays. The map
//! value and stack accesses at variable offsets are decided the same
//! way (`Flow::var_offset_rule`).
//!
//! Only programs `Flow::run` found such a read in come here, and only the
//! verdict is taken: the accesses and decided jumps the JIT uses are
//! `Flow::run`'s, which treat the register as a scalar nothing is known
//! of (what it is on the paths that set it, as far as they knew).

use std::collections::BTreeSet;

use super::super::state::*;
use super::{Flow, LoadOptions, Result, NONE};
use crate::verify::err;

/// The most states kept apart at one head.
const SPLITS: usize = 16;

/// What keeps states apart: the registers initialised, those known to
/// be 0 or 1 exactly (flags: two bits a register, 0 and 1 told apart),
/// the flags spilled to the stack (`State::slot_flags`),
/// and the records of `bpf_ringbuf_reserve` held and where they are
/// (registers and spilled slots holding one, by type: a release is
/// decided on each path's own).
fn key(st: &State) -> (u16, u32, u8, u64, u128) {
    let mut flags = 0u32;
    for r in 0..11 {
        if st.init & (1 << r) != 0 {
            if let Some(v @ (0 | 1)) = st.known(r) {
                flags |= (1 + v as u32) << (2 * r);
            }
        }
    }
    let ring = |t: u32| matches!(t & KIND, RING | RING_NULL | RING_GONE);
    let mut records = 0u64;
    for (i, &t) in st.ty.iter().chain(st.slot.iter()).enumerate() {
        if ring(t) {
            // (A register's record with its size: paths that reserved
            // different sizes are told apart.)
            let size = st.hi.get(i).copied().unwrap_or(0);
            records =
                records.rotate_left(7) ^ u64::from(t) ^ (i as u64) << 40 ^ size.rotate_left(17);
        }
    }
    (st.init, flags, st.refs, records, st.slot_flags)
}

/// The packet bytes a state has proven, and where its packet pointers
/// are (registers and spilled slots), and its map values' pointers with
/// a variable part: with such accesses to decide, paths that differ in
/// these are kept apart as well.
fn packet_key(st: &State) -> u64 {
    let mut h = u64::from(st.range) << 32 | u64::from(st.past) | u64::from(st.past_reg) << 24;
    let mut mix = |v: u64| h = (h.rotate_left(13) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for r in 0..11 {
        if st.ty[r] & KIND == PKT {
            mix(u64::from(st.ty[r]) << 8 | r as u64);
            mix(u64::from(st.id[r]) << 32 | u64::from(st.vrange[r]));
            mix(u64::from(st.vmax[r]));
        } else if matches!(st.ty[r] & KIND, VALUE | STACK_VAR) && st.vmax[r] != 0 {
            mix(u64::from(st.ty[r]) << 8 | r as u64);
            mix(u64::from(st.vmax[r]));
        }
    }
    for (k, &t) in st.slot.iter().enumerate() {
        if t & KIND == PKT {
            mix(u64::from(t) << 8 | k as u64);
        }
    }
    h
}

/// The states at one head, each with how often it changed (widened past
/// [`WIDEN_AFTER`]).
#[derive(Default)]
struct Slot(Vec<(State, u32)>);

impl Slot {
    /// Adds `o`, reaching the head at `t`: met with the state of its key
    /// (with `pkt`, of its [`packet_key`] too), or kept apart, or past
    /// [`SPLITS`] met with the state that has the most of its registers
    /// initialised (with `pkt`, a meet that makes the packet accesses
    /// after it undecided: [`State::lossy`]). The index of the state it
    /// changed, if any.
    fn add(&mut self, mut o: State, t: usize, pkt: bool) -> Option<usize> {
        let (ko, po) = (key(&o), pkt.then(|| packet_key(&o)));
        let same = |s: &State| key(s) == ko && (po.is_none() || Some(packet_key(s)) == po);
        let k = match self.0.iter().position(|(s, _)| same(s)) {
            Some(k) => k,
            None if self.0.len() < SPLITS => {
                self.0.push((o, 0));
                return Some(self.0.len() - 1);
            }
            None => {
                o.lossy |= pkt;
                (0..self.0.len())
                    .max_by_key(|&k| {
                        let s = &self.0[k].0;
                        (s.init == o.init, (s.init & o.init).count_ones())
                    })
                    .unwrap_or(0)
            }
        };
        let (old, changes) = self.0[k];
        let mut new = old.meet(&o, t);
        // A register exact on both paths, with different values, is a
        // range after the meet: the kernel, exact on each path (a loop's
        // counter, a constant per branch), may prove what the range
        // cannot.
        new.lossy |= pkt
            && (0..11).any(|r| matches!((old.known(r), o.known(r)), (Some(a), Some(b)) if a != b));
        if new == old {
            return None;
        }
        if changes + 1 > WIDEN_AFTER {
            new.widen(&old);
        }
        self.0[k] = (new, changes + 1);
        Some(k)
    }
}

impl Flow<'_> {
    /// Refuses the program if a path reads a register it did not set;
    /// `head` as [`Flow::heads`] numbers them.
    ///
    /// Functions that may return with r0 unset ([`Flow::void`]) are found
    /// on the way; the walk is made again while it finds more (a caller
    /// whose r0 is its callee's may be one), from none.
    pub(super) fn paths(&self, opts: &LoadOptions, head: &[u32]) -> Result<()> {
        self.void.borrow_mut().fill(false);
        loop {
            let before = self.void.borrow().clone();
            self.walk_paths(opts, head)?;
            if *self.void.borrow() == before {
                return Ok(());
            }
        }
    }

    fn walk_paths(&self, opts: &LoadOptions, head: &[u32]) -> Result<()> {
        // Packet accesses to decide: paths that proved different bytes
        // are kept apart too.
        let pkt = self.kernel_rules && self.packet_deferred.get();
        let heads = head.iter().filter(|&&h| h != NONE).count();
        let mut slots: Vec<Slot> = (0..heads).map(|_| Slot::default()).collect();
        let entry = self.starts[0];
        let mut work = BTreeSet::new();
        if let Some(k) = slots[head[entry] as usize].add(Self::first(opts), entry, pkt) {
            work.insert((entry, k));
        }
        while let Some((h, k)) = work.pop_first() {
            let Some(&(mut st, _)) = slots[head[h] as usize].0.get(k) else {
                continue;
            };
            let mut pc = h;
            loop {
                if let Some(r) = self.uninit(pc, &st) {
                    return err(
                        pc,
                        format!(
                            "reads r{r}, which a path reaching here leaves unset (the \
                             kernel's verifier refuses a read of an unset register too; this \
                             one does not follow values through the stack or other registers \
                             to rule a path out: set the variable where it is declared)"
                        ),
                    );
                }
                if self.kernel_rules {
                    self.record_access(pc, &st)?;
                    if pkt {
                        self.packet_rule(pc, &st)?;
                        self.var_offset_rule(pc, &st)?;
                    }
                }
                let step = self.step(pc, &st)?;
                if let Some((g, args)) = step.call {
                    let s = self.starts[g];
                    if let Some(k) = slots[head[s] as usize].add(args, s, pkt) {
                        work.insert((s, k));
                    }
                }
                let mut next = None;
                for (e, t) in self.succ[pc].get().into_iter().enumerate() {
                    let (Some(t), Some(o)) = (t, step.out[e]) else {
                        continue;
                    };
                    if head[t] == NONE {
                        next = Some((t, o));
                    } else if let Some(k) = slots[head[t] as usize].add(o, t, pkt) {
                        work.insert((t, k));
                    }
                }
                match next {
                    Some((t, o)) => (pc, st) = (t, o),
                    None => break,
                }
            }
        }
        Ok(())
    }
}
