//! The bytes a pointer may reach, as the kernel's verifier bounds them
//! (`check_packet_access`, `check_map_access`, the variable-offset
//! stack checks): a packet access outside the bytes a comparison with
//! `data_end` proved, through a packet pointer from before a helper that
//! moves the packet, or by a helper given packet memory; a map value or
//! stack access whose variable part may take it out of the value or the
//! frame. Each is refused with the kernel's rules, decided path by path
//! (`verify_paths.rs`); and which stores are proven inside the packet or
//! a map value (the others forget the spilled pointers).

use super::flow::Flow;
use super::rules::{amount, mem_args};
use super::state::*;
use super::Result;
use crate::env::STACK_FRAME;
use crate::insn::*;

/// The register a load or store at `i` accesses memory through.
pub(super) fn access_base(i: &Insn) -> Option<usize> {
    match i.class() {
        BPF_LDX => Some(i.src as usize),
        BPF_ST | BPF_STX => Some(i.dst as usize),
        _ => None,
    }
}

/// Where `size` bytes at `off` from the pointer in `r` lie, for the
/// packet rules.
enum Span {
    /// Not through a packet pointer.
    NotPacket,
    /// Inside the bytes a comparison with `data_end` proved.
    Inside,
    /// Through a packet pointer from before helper `.0`, which moves the
    /// packet ([`PKT_GONE`]).
    Gone(u32),
    /// Outside them: from `start` bytes past the base, `limit` proven.
    Outside { start: i64, limit: i64 },
    /// Outside them, through a pointer whose base has a copy on the stack
    /// ([`State::escaped`]): the kernel may prove the bytes through it.
    Escaped,
}

fn packet_span(st: &State, r: usize, off: i64, size: i64) -> Span {
    let t = st.ty[r];
    match t & KIND {
        PKT_GONE => Span::Gone(t & !KIND),
        PKT => {
            let (start, limit) = (i64::from(t & !KIND) + off, i64::from(st.limit(r)));
            if start >= 0 && start + size <= limit {
                Span::Inside
            } else if st.escaped(r) {
                Span::Escaped
            } else {
                Span::Outside { start, limit }
            }
        }
        _ => Span::NotPacket,
    }
}

/// What the base of packet pointer `r` is, in words.
fn packet_base(st: &State, r: usize) -> String {
    if st.id[r] == 0 {
        "data".to_string()
    } else {
        format!("a packet pointer r{r} moved by a variable amount")
    }
}

impl Flow<'_> {
    /// A load or store at `pc` through a packet pointer, outside the
    /// bytes a comparison with `data_end` proved behind it: refused, as
    /// the kernel refuses it ("invalid access to packet"). Decided path
    /// by path (`paths.rs` keeps apart the paths that proved different
    /// bytes, as the kernel's verifier follows each): in `run`, where
    /// paths met, only noted ([`Flow::packet_deferred`]). A state where
    /// `paths.rs` had to meet such paths ([`State::lossy`]) refuses
    /// nothing: the access is checked at run time.
    pub(super) fn packet_rule(&self, pc: usize, st: &State) -> Result<()> {
        let i = &self.insns[pc];
        let Some(base) = access_base(i) else {
            return Ok(());
        };
        let (start, limit) = match packet_span(st, base, i64::from(i.off), i.size() as i64) {
            Span::Gone(id) => {
                // (Paths met only where each held it: `State::meet`.)
                self.packet_deferred.set(true);
                let name = helper::name(id).unwrap_or("helper");
                return self.path_rule(
                    pc,
                    format!(
                        "dereference of r{base}, a packet pointer from before bpf_{name}, which \
                         may move the packet (the kernel refuses it: every packet pointer is a \
                         number after it; load data from the context again and compare it with \
                         data_end)"
                    ),
                );
            }
            // (An atomic on the packet is refused on its own.)
            Span::Outside { start, limit }
                if i.code & 0xe0 != BPF_ATOMIC && !(st.lossy && self.as_kernel.get()) =>
            {
                (start, limit)
            }
            _ => return Ok(()),
        };
        self.packet_deferred.set(true);
        let (size, what) = (i.size(), packet_base(st, base));
        // (`start` counts the pointer's constant offset; the base's
        // variable part is at most `vmax`.)
        if i64::from(st.vmax[base]) + start + size as i64 > MAX_PKT_OFF as i64 {
            return self.path_rule(
                pc,
                format!(
                    "invalid access to packet: a {size}-byte access at offset {start} from {what}, \
                     which may end more than 0xffff bytes from data, where no comparison with \
                     data_end proves bytes (the kernel refuses it: R{base} offset is outside of \
                     the packet; bound the amount first, e.g. with `& 0x3fff`)"
                ),
            );
        }
        let (verb, what_end) = if i.class() == BPF_LDX {
            ("read", "load")
        } else {
            ("write", "store")
        };
        self.path_rule(
            pc,
            format!(
                "invalid access to packet: a {size}-byte {verb} at offset {start} from {what}, \
                 where a comparison with data_end proved {limit} bytes (the kernel refuses it: \
                 compare the end of the {what_end} with data_end first)"
            ),
        )
    }

    /// Whether the store at `pc` (if it is one) is proven inside the
    /// packet's bytes or a map value's: a store through a packet or map
    /// value pointer that is not is checked at run time, which lets it
    /// reach the stack, so it forgets the pointers spilled there
    /// (`spills`).
    pub(super) fn store_proven(&self, pc: usize, st: &State) -> bool {
        let i = &self.insns[pc];
        if !matches!(i.class(), BPF_ST | BPF_STX) {
            return true;
        }
        let (b, off, size) = (i.dst as usize, i64::from(i.off), i.size() as i64);
        let ty = st.ty[b];
        match ty & KIND {
            PKT => matches!(packet_span(st, b, off, size), Span::Inside),
            VALUE => {
                let (m, at) = value_at(ty);
                at == 0
                    && st.vmax[b] == 0
                    && off >= 0
                    && self
                        .maps
                        .get(m)
                        .is_some_and(|m| off + size <= i64::from(m.value_size))
            }
            _ => false,
        }
    }

    /// A load or store at `pc` through a pointer moved by a variable
    /// amount, where the amount at its largest takes it out of what it
    /// points into: a map value's pointer (`&v->counts[i]`) past the
    /// value's end, or before its start ("invalid access to map value";
    /// the run-time check would allow the map's other values), a stack
    /// pointer (`&buf[i]`) out of the function's frame. Refused, as the
    /// kernel refuses it, decided path by path as [`Flow::packet_rule`]
    /// is.
    pub(super) fn var_offset_rule(&self, pc: usize, st: &State) -> Result<()> {
        let i = &self.insns[pc];
        let Some(base) = access_base(i) else {
            return Ok(());
        };
        let (ty, var) = (st.ty[base], i64::from(st.vmax[base]));
        if ty & KIND == STACK_VAR && !(st.lossy && self.as_kernel.get()) {
            // r10 - k + [0, var]: the kernel's
            // `check_stack_access_within_bounds` of a variable offset.
            let (size, frame) = (i.size() as i64, STACK_FRAME as i64);
            let lo = i64::from(i.off) - i64::from(ty & !KIND);
            if lo >= -frame && lo + var + size <= 0 {
                return Ok(());
            }
            self.packet_deferred.set(true);
            return self.path_rule(
                pc,
                format!(
                    "invalid variable-offset stack access: a {size}-byte access at r10{lo:+} \
                     plus up to {var}, outside the function's frame of {frame} bytes (the \
                     kernel refuses it; bound the index first)"
                ),
            );
        }
        if ty & KIND != VALUE || var == 0 || (st.lossy && self.as_kernel.get()) {
            return Ok(());
        }
        let (m, at) = value_at(ty);
        let Some(value_size) = self.maps.get(m).map(|m| i64::from(m.value_size)) else {
            return Ok(());
        };
        let (size, lo) = (i.size() as i64, at as i64 + i64::from(i.off));
        if value_size == 0 || (lo >= 0 && lo + var + size <= value_size) {
            return Ok(());
        }
        self.packet_deferred.set(true);
        self.path_rule(
            pc,
            format!(
                "invalid access to map value: a {size}-byte access at offset {lo} plus up to \
                 {var}, in a map value of {value_size} bytes (past its end where the variable \
                 part is largest: the kernel refuses it; bound the index first)"
            ),
        )
    }

    /// A helper's memory argument through a packet pointer (`bpf_map_lookup_elem(&m,
    /// data + 26)`): its bytes inside the bytes a comparison with
    /// `data_end` proved, as [`Flow::packet_rule`] has a load's (the
    /// kernel's `check_helper_mem_access`), and not a pointer from before
    /// a helper that moves the packet.
    pub(super) fn packet_args(&self, pc: usize, id: u32, st: &State) -> Result<()> {
        // (`paths.rs` decides them only where `run` found one: it then
        // keeps the paths of different packet proofs apart.)
        if self.as_kernel.get() && !self.packet_deferred.get() {
            return Ok(());
        }
        let name = helper::name(id).unwrap_or("helper");
        for (r, size, what) in mem_args(id, st, self.maps).into_iter().flatten() {
            let (start, limit) = match packet_span(st, r, 0, i64::from(size)) {
                Span::Gone(before) => {
                    self.packet_deferred.set(true);
                    let before = helper::name(before).unwrap_or("helper");
                    self.path_rule(
                        pc,
                        format!(
                            "bpf_{name}'s {what} (r{r}) is a packet pointer from before \
                             bpf_{before}, which may move the packet (the kernel refuses it: \
                             every packet pointer is a number after it)"
                        ),
                    )?;
                    continue;
                }
                Span::Outside { start, limit } if !(st.lossy && self.as_kernel.get()) => {
                    (start, limit)
                }
                _ => continue,
            };
            self.packet_deferred.set(true);
            let from = packet_base(st, r);
            self.path_rule(
                pc,
                format!(
                    "invalid access to packet: bpf_{name}'s {what} (r{r}: {size} bytes at offset \
                     {start} from {from}), where a comparison with data_end proved {limit} bytes \
                     (the kernel refuses it: compare the end of the {what} with data_end first)"
                ),
            )?;
        }
        Ok(())
    }
}

/// The ALU instruction `i` moving a map value's pointer ([`VALUE`]) or a
/// stack pointer by a variable amount ([`STACK`] into [`STACK_VAR`]):
/// `Some(Some((type, vmax)))` the pointer it makes, `Some(None)` a number
/// (moved out of what is kept), `None` not such a move.
///
/// - A map value's pointer plus or minus a known amount: a new constant
///   offset; plus a bounded scalar: a variable part.
/// - `r10 - k` (or one already moved) plus a bounded scalar: a variable
///   part; one already moved, plus a constant: a new `k`.
pub(super) fn bounded_move(i: &Insn, st: &State) -> Option<Option<(u32, u32)>> {
    let (d, s) = (i.dst as usize, i.src as usize);
    let (dty, sty) = (st.ty[d], st.ty[s]);
    let x = i.code & BPF_X != 0;
    let add_sub = i.class() == BPF_ALU64 && matches!(i.op(), BPF_ADD | BPF_SUB);
    if add_sub && dty & KIND == VALUE && !(x && st.pointer(s)) {
        let (m, at) = value_at(dty);
        let moved = match amount(i, st) {
            Some(k) => {
                let k = if i.op() == BPF_SUB {
                    (k as i64).wrapping_neg()
                } else {
                    k as i64
                };
                (at as i64)
                    .checked_add(k)
                    .filter(|&n| (0..=VALUE_OFF_MAX as i64).contains(&n))
                    .map(|n| (n as u64, u64::from(st.vmax[d])))
            }
            None if i.op() == BPF_ADD && sty == OTHER => {
                Some((at, u64::from(st.vmax[d]).saturating_add(st.hi[s])))
            }
            None => None,
        };
        return Some(match moved {
            Some((at, var)) if var <= VALUE_OFF_MAX => Some((
                VALUE | (at as u32) << VALUE_OFF_SHIFT | m as u32,
                var as u32,
            )),
            _ => None,
        });
    }
    if i.code == BPF_ALU64 | BPF_ADD | BPF_X
        && matches!(dty & KIND, STACK | STACK_VAR)
        && sty == OTHER
        && st.known(s).is_none()
    {
        // (Past 0xffff, a number.)
        let var = u64::from(st.vmax[d]).saturating_add(st.hi[s]);
        return Some((var <= MAX_PKT_OFF).then_some((STACK_VAR | (dty & !KIND), var as u32)));
    }
    if i.code == BPF_ALU64 | BPF_ADD | BPF_K && dty & KIND == STACK_VAR {
        let k = i64::from(dty & !KIND) - i64::from(i.imm);
        return Some(
            (0..=STACK_FRAME as i64)
                .contains(&k)
                .then(|| (STACK_VAR | k as u32, st.vmax[d])),
        );
    }
    None
}

/// The constant `i` adds to a packet pointer: `d += k`, or `d += s` of
/// an `s` known exactly (not `d` itself).
pub(super) fn pkt_constant(i: &Insn, st: &State) -> Option<i64> {
    if st.ty[i.dst as usize] & KIND != PKT {
        return None;
    }
    if i.code == BPF_ALU64 | BPF_ADD | BPF_K {
        return Some(i64::from(i.imm));
    }
    (i.code == BPF_ALU64 | BPF_ADD | BPF_X && i.src != i.dst)
        .then(|| st.known(i.src as usize))
        .flatten()
        .map(|v| v as i64)
}
