//! The transfer function's pieces that do not need the program: the
//! stack slots a spilled pointer is known in (`State::spilled`), and
//! the ALU results of numbers known exactly.

use super::super::state::*;
use crate::insn::*;

/// Helpers that write no memory a program hands them (the rest, and any
/// helper an embedding app adds, may write the stack).
pub(super) const WRITE_NONE: [i32; 26] = [
    1, 2, 3, 5, 6, 7, 8, 23, 25, 28, 42, 44, 51, 54, 65, 118, 125, 130, 131, 132, 133, 134, 160,
    188, 190, 208,
];

/// The stack slots holding a spilled pointer after `i` (`out.spilled`
/// and `out.slot`, from `st`): an 8-byte store of a tracked pointer at a
/// slot marks it with the pointer's type, any other store into a slot
/// clears it, and a store through any pointer but a record's that is not
/// proven inside a packet's or map value's bytes (`proven`,
/// [`Flow::store_proven`]; the run-time check lets it reach the stack),
/// a helper that may write memory or a function (which may write its
/// caller's frame) clears all. A helper that may move the packet leaves
/// its pointers in the slots unknown, as it leaves them in registers.
///
/// [`Flow::store_proven`]: super::Flow::store_proven
pub(super) fn spills(i: &Insn, st: &State, out: &mut State, proven: bool) {
    if i.class() == BPF_JMP && i.op() == BPF_CALL {
        if i.src != 0 || !WRITE_NONE.contains(&i.imm) {
            out.unspill(u64::MAX);
        } else if i.imm as u32 != helper::MAP_LOOKUP_ELEM {
            let gone = moves_packet(i).map_or(OTHER, |id| PKT_GONE | id);
            for k in 0..64 {
                if matches!(out.slot[k] & KIND, PKT | PKT_END) {
                    out.slot[k] = gone;
                }
            }
        }
        return;
    }
    if !matches!(i.class(), BPF_ST | BPF_STX) {
        return;
    }
    let d = i.dst as usize;
    let Some(at) = st.stack_at(d, i.off) else {
        // (A record's own stores are kept apart: `unspill_but_records`.)
        let record = matches!(st.ty[d] & KIND, RING | RING_NULL | RING_GONE);
        if !proven && !record {
            out.unspill_but_records();
        }
        return;
    };
    let size = i.size() as i64;
    out.unspill(State::slots(at, size));
    let whole = i.class() == BPF_STX && i.code & 0xe0 == BPF_MEM && size == 8 && at % 8 == 0;
    if whole && st.pointer(i.src as usize) && (-512..0).contains(&at) {
        let k = ((-at / 8) - 1) as usize;
        out.spilled |= 1u64 << k;
        out.slot[k] = st.spill_type(i.src as usize);
        if matches!(st.ty[i.src as usize] & KIND, PKT | NULLABLE) {
            // A pointer of a variable base, or a map value that may be
            // null: filled, a number here, whose compare with data_end or
            // NULL the kernel applies to the copies left in registers.
            out.escape(st.id[i.src as usize]);
        }
    }
    // A flag (a register known 0 or 1, or such an immediate) stored whole.
    let flag = match i.class() {
        BPF_STX if i.code & 0xe0 == BPF_MEM => st.known(i.src as usize),
        BPF_ST => Some(i.imm as i64 as u64),
        _ => None,
    };
    if let (Some(v @ (0 | 1)), 8, true) = (flag, size, at % 8 == 0 && (-512..0).contains(&at)) {
        let k = ((-at / 8) - 1) as usize;
        out.slot_flags |= u128::from(v as u8 + 1) << (2 * k);
    }
}

/// The helper `i` calls if it moves the packet (`bpf_xdp_adjust_head`,
/// `_meta`, `_tail`: the kernel's `bpf_helper_changes_pkt_data` for
/// XDP; not `bpf_tail_call`, `bpf_xdp_store_bytes`, or any other, after
/// which the kernel keeps the packet pointers).
pub(super) fn moves_packet(i: &Insn) -> Option<u32> {
    let id = i.imm as u32;
    (i.code == BPF_JMP | BPF_CALL
        && i.src == 0
        && matches!(
            id,
            helper::XDP_ADJUST_HEAD | helper::XDP_ADJUST_META | helper::XDP_ADJUST_TAIL
        ))
    .then_some(id)
}

/// The slot an 8-byte fill at `i` reads whole, if it does.
fn whole_slot(i: &Insn, st: &State) -> Option<usize> {
    if i.code != BPF_LDX | BPF_MEM | BPF_DW {
        return None;
    }
    let at = st.stack_at(i.src as usize, i.off)?;
    (at % 8 == 0 && (-512..0).contains(&at)).then(|| ((-at / 8) - 1) as usize)
}

/// The type an 8-byte fill at `i` gives its register: the pointer a
/// whole spill left in the slot ([`State::slot`]).
pub(super) fn filled(i: &Insn, st: &State) -> Option<u32> {
    let k = whole_slot(i, st)?;
    (st.spilled & (1 << k) != 0 && st.slot[k] != OTHER).then_some(st.slot[k])
}

/// The flag an 8-byte fill at `i` gives its register: the 0 or 1 a
/// whole spill left in the slot ([`State::slot_flags`]).
pub(super) fn filled_flag(i: &Insn, st: &State) -> Option<u64> {
    st.slot_flag(whole_slot(i, st)?)
}

/// The result of the ALU instruction `i` (not `BPF_END`) in state `st`
/// when its operands are scalars known exactly: computed as the
/// interpreter computes it.
pub(super) fn fold(i: &Insn, st: &State) -> Option<u64> {
    if !matches!(i.class(), BPF_ALU | BPF_ALU64) || i.op() == BPF_END {
        return None;
    }
    // A move reads no destination.
    let dst = if i.op() == BPF_MOV {
        0
    } else {
        st.known(i.dst as usize)?
    };
    let src = if i.code & BPF_X != 0 {
        st.known(i.src as usize)?
    } else {
        0
    };
    crate::interp::alu(i, dst, src)
}
