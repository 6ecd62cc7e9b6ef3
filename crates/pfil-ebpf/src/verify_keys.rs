//! The kernel's view of the stack bytes a map key is read from, for one
//! decision: whether the kernel may know that `bpf_map_lookup_elem` of an
//! ARRAY or PERCPU_ARRAY is not null. Linux 6.14 drops the null check of
//! a lookup whose key is a constant inside the array
//! (`can_elide_value_nullness`), and finds the constant in the stack's
//! bytes as its stack tracking left them (`get_constant_map_key`): four
//! bytes it knows are zero (`STACK_ZERO`), or exactly four bytes of a
//! scalar spilled at the start of an 8-byte slot, read from there, and
//! whose value is a constant (or the upper four of one spilled whole).
//! A dereference before the null check is then loaded by the kernel, and
//! refused otherwise: this verifier refuses it only where it is sure the
//! kernel does ([`constant_key`]); elsewhere pfil's run-time check
//! covers it, as it covers every lookup (the decision is never used to
//! drop a check).
//!
//! Each of the frame's first [`KEY_SLOTS`] 8-byte slots keeps, per byte
//! (byte 0 the slot's lowest address), what the kernel's `slot_type` is:
//! [`M`]isc (or never written), [`Z`]ero or [`S`]pilled on every path,
//! or not known ([`X`]: paths that differ, or what the kernel may know
//! and this verifier does not); and, for a spill, the largest constant
//! any path spilled, if every path spilled one.

use super::super::state::*;
use super::stack::WRITE_NONE;
use crate::insn::*;

/// A byte the kernel holds as `STACK_MISC` or `STACK_INVALID` on some
/// path: neither a known zero nor part of a spill (never a key's).
const M: u32 = 0;
/// A byte the kernel holds as `STACK_ZERO` on every path.
const Z: u32 = 1;
/// A byte of a spilled register (`STACK_SPILL`) on every path.
const S: u32 = 2;
/// A byte this verifier lost: any of the above.
const X: u32 = 3;
/// A slot's spilled register is a constant on every path, the largest
/// of them in the slot's bits from [`VALUE_SHIFT`] up (saturated at
/// [`VALUE_MAX`]: a key that large is refused only by an array no
/// larger, which it is outside of whatever it is).
const KNOWN: u32 = 1 << 16;
const VALUE_SHIFT: u32 = 17;
const VALUE_MAX: u32 = (1 << 15) - 1;

fn byte(w: u32, b: usize) -> u32 {
    (w >> (2 * b)) & 3
}

fn set_byte(w: &mut u32, b: usize, t: u32) {
    *w = (*w & !(3 << (2 * b))) | (t << (2 * b));
}

/// `v` as a slot keeps it ([`KNOWN`]).
fn constant(v: u64) -> u32 {
    KNOWN | (v.min(u64::from(VALUE_MAX)) as u32) << VALUE_SHIFT
}

/// A slot's constant, if it has one.
fn value(w: u32) -> Option<u32> {
    (w & KNOWN != 0).then_some(w >> VALUE_SHIFT)
}

/// The slot and byte of a stack offset, if the slot is followed.
fn place(at: i64) -> Option<(usize, usize)> {
    if !(-8 * KEY_SLOTS as i64..0).contains(&at) {
        return None;
    }
    let k = ((-at - 1) / 8) as usize;
    Some((k, (at + 8 * (k as i64 + 1)) as usize))
}

impl State {
    /// Every followed byte not known: after what may write the stack
    /// where this verifier does not follow it.
    fn keys_lost(&mut self) {
        for w in &mut self.keys {
            *w = 0xffff;
        }
    }

    /// The bytes known zero or spilled are not known any more (a helper
    /// may have written them; a byte misc stays so).
    fn keys_written(&mut self) {
        for w in &mut self.keys {
            for b in 0..8 {
                if byte(*w, b) != M {
                    set_byte(w, b, X);
                }
            }
            *w &= !KNOWN;
        }
    }

    /// What holds of the followed bytes on both `self` and `o`: equal
    /// bytes stay, any other is not known; a spilled constant on both
    /// paths is the larger.
    pub(in crate::verify) fn meet_keys(&mut self, o: &State) {
        for (w, &v) in self.keys.iter_mut().zip(&o.keys) {
            if *w == v {
                continue;
            }
            let mut m = 0;
            for b in 0..8 {
                let (x, y) = (byte(*w, b), byte(v, b));
                // (Misc on one path only is not a refusal: the kernel may
                // prune that path, which this verifier follows.)
                let t = if x == y { x } else { X };
                set_byte(&mut m, b, t);
            }
            if let (Some(a), Some(b)) = (value(*w), value(v)) {
                m |= KNOWN | a.max(b) << VALUE_SHIFT;
            }
            *w = m;
        }
    }

    /// A spilled constant still growing after many changes (a loop's
    /// counter) is not known: the dataflow ends.
    pub(in crate::verify) fn widen_keys(&mut self, old: &State) {
        for (w, &v) in self.keys.iter_mut().zip(&old.keys) {
            if value(*w).is_some() && value(*w) != value(v) {
                *w &= !KNOWN;
            }
        }
    }
}

/// The followed bytes after instruction `i` (in `out`, from `st`), as
/// the kernel's `check_stack_write_fixed_off` leaves them: a store of a
/// scalar (or an immediate) at the start of a slot is a spill of its
/// size, leaving the rest of the slot's bytes zero if they were and misc
/// otherwise; any other store makes its bytes zero (a known 0), misc (a
/// number the kernel cannot know is 0) or not known, and, into a spill's
/// slot, the slot's other bytes misc. A store whose
/// address this verifier does not know (and does not prove outside the
/// stack: `proven`), and a function call, lose every byte; a helper
/// that may write memory loses those not misc.
pub(super) fn keys(i: &Insn, st: &State, out: &mut State, proven: bool) {
    if i.class() == BPF_JMP && i.op() == BPF_CALL {
        if i.src != 0 || !WRITE_NONE.contains(&i.imm) {
            // (A helper that calls back, `bpf_loop`, may store through a
            // pointer into this frame as a function does.)
            if i.src != 0 || matches!(i.imm, 164 | 180 | 181 | 209) {
                out.keys_lost();
            } else {
                out.keys_written();
            }
        }
        return;
    }
    if !matches!(i.class(), BPF_ST | BPF_STX) {
        return;
    }
    let Some(at) = st.stack_at(i.dst as usize, i.off) else {
        let record = matches!(st.ty[i.dst as usize] & KIND, RING | RING_NULL | RING_GONE);
        if !proven && !record {
            out.keys_lost();
        }
        return;
    };
    let size = i.size();
    let atomic = i.class() == BPF_STX && i.code & 0xe0 == BPF_ATOMIC;
    let value = if i.class() == BPF_ST {
        Some(i.imm as i64 as u64)
    } else if atomic || st.pointer(i.src as usize) {
        None
    } else {
        st.known(i.src as usize)
    };
    if at % 8 == 0 && !atomic {
        // A spill (of a scalar, an immediate, or a whole pointer).
        let Some((k, _)) = place(at) else { return };
        let w = &mut out.keys[k];
        for b in 0..8 {
            let t = byte(*w, b);
            if b < size {
                set_byte(w, b, S);
            } else if t == S {
                set_byte(w, b, M);
            }
        }
        *w = (*w & 0xffff) | value.map_or(0, constant);
        return;
    }
    // Zero where this verifier knows the number is; misc where the kernel
    // cannot know it is (not zero here, or just loaded from the packet,
    // the context or a map value); else not known (the kernel may know a
    // zero this verifier does not: a filled spill, a `jset`, shifts).
    let src = i.src as usize;
    let written = match value {
        Some(0) => Z,
        Some(_) => M,
        None if atomic => M,
        None if i.class() == BPF_STX && (st.lo[src] > 0 || st.opaque & (1 << src) != 0) => M,
        None => X,
    };
    for at in at..at + size as i64 {
        let Some((k, b)) = place(at) else { continue };
        let w = &mut out.keys[k];
        // A regular write into a spill's slot makes its bytes misc
        // (`scrub_spilled_slot`), whatever the spill was.
        match byte(*w, 0) {
            S => *w = 0,
            X => {
                for c in 0..8 {
                    if byte(*w, c) != M {
                        set_byte(w, c, X);
                    }
                }
            }
            _ => {}
        }
        *w &= !KNOWN;
        set_byte(w, b, written);
    }
}

/// [`State::opaque`] after instruction `i` (from `st`), which writes the
/// registers of `written`: a load from the packet, the context or a map
/// value makes one, a copy copies it, a conditional jump (which may
/// narrow any linked number to a constant in the kernel) clears all.
pub(super) fn opaque_after(i: &Insn, st: &State, written: u16) -> u16 {
    let (d, s) = (i.dst as usize, i.src as usize);
    let mut o = st.opaque & !written;
    match i.class() {
        BPF_LDX if matches!(st.ty[s] & KIND, PKT | VALUE) || st.ty[s] == CTX => o |= 1 << d,
        BPF_ALU64 if i.code == BPF_ALU64 | BPF_MOV | BPF_X && i.off == 0 && s < 10 => {
            o = (o & !(1 << d)) | (st.opaque & (1 << s)) >> s << d;
        }
        // (`key & (N - 1)`: the bits kept of a number the kernel knows
        // none of, some of them maybe set, as its tnum says too.)
        BPF_ALU | BPF_ALU64
            if i.op() == BPF_AND
                && i.code & BPF_X == 0
                && st.opaque & (1 << d) != 0
                && kept_bits(i, st.hi[d]) != 0 =>
        {
            o |= 1 << d;
        }
        BPF_JMP | BPF_JMP32 if !matches!(i.op(), BPF_JA | BPF_CALL | BPF_EXIT) => o = 0,
        _ => {}
    }
    o
}

/// The bits `d & imm` (the AND `i`) may have set, `d` at most `hi`.
fn kept_bits(i: &Insn, hi: u64) -> u64 {
    if i.class() == BPF_ALU {
        ones(hi.min(u64::from(u32::MAX))) & u64::from(i.imm as u32)
    } else {
        ones(hi) & i.imm as i64 as u64
    }
}

/// Whether the kernel may know `bpf_map_lookup_elem` of an array of
/// `max_entries`, given the key in register `r`, not null: `false` only
/// where it does not on some path (the key is not on the stack, or its
/// bytes there are not a constant as the kernel finds one, or one
/// outside the array).
pub(super) fn constant_key(st: &State, r: usize, max_entries: u32) -> bool {
    let Some(at) = st.stack_at(r, 0) else {
        // A pointer into the packet, a map value or global data: not
        // the stack's. Any other (one this verifier lost, or one into
        // the stack by a variable amount, constant on each of the
        // kernel's paths) may be.
        return !matches!(st.ty[r] & KIND, PKT | VALUE | CONST | RING | CTX_OFF)
            && !matches!(st.ty[r], CTX | CTX_MOD);
    };
    let Some((k, b)) = place(at) else {
        return true;
    };
    if b > 4 {
        // Four bytes from here leave the slot: neither zero nor a
        // spill of four bytes to the kernel, whatever they hold.
        return false;
    }
    let w = st.keys[k];
    let key = [b, b + 1, b + 2, b + 3].map(|c| byte(w, c));
    if key.contains(&M) {
        return false;
    }
    if key.iter().all(|&t| t == Z) {
        return true;
    }
    if key.contains(&X) || byte(w, 0) == X {
        return true;
    }
    if key.contains(&Z) || byte(w, 0) != S {
        return false;
    }
    // Exactly four spilled bytes from the key's first.
    match (b + 4 < 8).then(|| byte(w, b + 4)) {
        Some(S) => false,
        Some(X) => true,
        _ => value(w).is_none_or(|v| v < max_entries),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;

    fn run(text: &str) -> State {
        let mut st = State::new(0x7ff);
        st.set(10, STACK);
        for i in assemble(text).unwrap() {
            let mut out = st;
            keys(&i, &st, &mut out, false);
            if let Some(v) = super::super::stack::fold(&i, &st) {
                out.exact(i.dst as usize, v);
            }
            st = out;
        }
        st
    }

    fn key_at(st: &State, at: i64, max: u32) -> bool {
        let mut st = *st;
        st.set(2, STACK | (-at) as u32);
        constant_key(&st, 2, max)
    }

    #[test]
    fn a_key_is_a_constant_where_the_kernel_sees_one() {
        let st = run("mov %r1, 0\nstxw [%r10-4], %r1\nmov %r1, 3\nstxw [%r10-8], %r1");
        assert!(key_at(&st, -4, 4), "zero bytes");
        assert!(key_at(&st, -8, 4), "a 4-byte spill of 3");
        assert!(!key_at(&st, -8, 3), "3 is outside 3 entries");
        assert!(!key_at(&st, -6, 4), "half spill, half zero");
        assert!(!key_at(&st, -12, 4), "never written");
        let st = run("mov %r1, 2\nstxw [%r10-4], %r1");
        assert!(!key_at(&st, -4, 4), "misc, not zero");
        let st = run("ldxw %r1, [%r10-16]\nstxw [%r10-4], %r1");
        assert!(key_at(&st, -4, 4), "a number the kernel may know is zero");
        let st = run("mov %r1, 2\nstxdw [%r10-8], %r1");
        assert!(!key_at(&st, -8, 4), "8 bytes spilled, 4 read");
        assert!(key_at(&st, -4, 4), "the top of a whole spill: its value");
    }

    #[test]
    fn paths_meet_to_what_any_path_refuses() {
        let zero = run("mov %r1, 0\nstxw [%r10-4], %r1\nmov %r1, 1\nstxw [%r10-8], %r1");
        let other = run("mov %r1, 7\nstxw [%r10-4], %r1\nmov %r1, 3\nstxw [%r10-8], %r1");
        let mut m = zero;
        m.meet_keys(&other);
        assert!(
            key_at(&m, -4, 4),
            "misc on one path only: the kernel may prune it"
        );
        let mut m = other;
        m.meet_keys(&other);
        assert!(!key_at(&m, -4, 4), "misc on both paths");
        assert!(key_at(&m, -8, 4), "1 and 3: inside 4 on both");
        assert!(!key_at(&m, -8, 2), "3 is not inside 2");
        // A helper that may write memory: zero bytes not known.
        let lost = run("mov %r1, 0\nstxw [%r10-4], %r1\ncall 189");
        assert!(key_at(&lost, -4, 4));
        let mut m = lost;
        m.meet_keys(&zero);
        assert!(
            key_at(&m, -4, 4),
            "not known on one path, zero on the other"
        );
    }
}
