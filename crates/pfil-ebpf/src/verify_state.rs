//! The verifier's abstract state at an instruction: register types,
//! packet pointers with the identity of their variable part and the bytes
//! proven behind it (the kernel's `reg->id` and `reg->range`), and an
//! upper bound of each scalar (the kernel's `umax_value`).
//!
//! A packet pointer is `base + off`, `off` a constant below 2^28.
//! Its `id` names the base: 0 is `data` itself; any other id is a value
//! `data + v` with `0 <= v <= vmax`, made by adding a bounded scalar to a
//! packet pointer or by a join of two different packet pointers. Within
//! one state, every register with the same id holds the same base. The
//! bytes `[base, base + range)` are proven inside the packet by a
//! comparison with `data_end` (`range` for id 0, `vrange` for the
//! others), and only for a pointer with `vmax + off <= 0xffff` (the
//! kernel's `MAX_PACKET_OFF`, past which it grants no range). Bases are
//! at most `data + 0xffff`, offsets below 2^28: pointer arithmetic never
//! wraps (`data` is a user-space address), so `base + off <= data_end`
//! really proves those bytes.

use crate::insn::*;

/// Register types (a kind in the top bits, a map index below).
pub(super) const OTHER: u32 = 0;
pub(super) const CTX: u32 = 1;
/// The context pointer moved by arithmetic: the kernel refuses a
/// dereference of it ("dereference of modified ctx ptr").
pub(super) const CTX_MOD: u32 = 2;
/// The context pointer moved by a known amount (the low 16 bits, biased
/// by [`CTX_OFF_BIAS`]): moved back to 0 it is the context again.
pub(super) const CTX_OFF: u32 = 0x8000_0000;
/// [`CTX_OFF`]'s offset bias.
pub(super) const CTX_OFF_BIAS: i64 = 0x8000;
pub(super) const KIND: u32 = 0xf000_0000;
pub(super) const MAP: u32 = 0x1000_0000;
pub(super) const NULLABLE: u32 = 0x2000_0000;
/// A [`NULLABLE`]'s bit (beside the map's index): a lookup the kernel may
/// know is not null (an array's of a constant key inside it), whose
/// dereference before the null check is left to the run-time check
/// rather than refused (`verify_keys.rs`).
pub(super) const ELIDABLE: u32 = 0x0800_0000;
/// A map value checked for null: the map in the low bits
/// ([`VALUE_MAP`]), the pointer's constant offset from the value's start
/// above them ([`VALUE_OFF_SHIFT`]), the most a variable part adds in the
/// register's `vmax` (the kernel's `off` and `var_off` of a
/// `PTR_TO_MAP_VALUE`). Only at offset 0 with no variable part is an
/// access inside the value made unchecked ([`Access::Value`]); the
/// offsets are kept to refuse what the kernel refuses.
///
/// [`Access::Value`]: super::Access::Value
pub(super) const VALUE: u32 = 0x3000_0000;
/// [`VALUE`]'s map bits.
pub(super) const VALUE_MAP: u32 = 0xff;
/// [`VALUE`]'s offset shift.
pub(super) const VALUE_OFF_SHIFT: u32 = 8;
/// The largest offset, constant or variable, a [`VALUE`] keeps.
pub(super) const VALUE_OFF_MAX: u64 = 0xf_ffff;

/// A [`VALUE`]'s map and constant offset.
pub(super) fn value_at(t: u32) -> (usize, u64) {
    (
        (t & VALUE_MAP) as usize,
        u64::from((t & !KIND) >> VALUE_OFF_SHIFT),
    )
}
/// `base + k` (k in the low bits), the base named by the register's id.
pub(super) const PKT: u32 = 0x4000_0000;
pub(super) const PKT_END: u32 = 0x5000_0000;
/// `r10 - k` of the current frame (k in the low bits, 0..=512).
pub(super) const STACK: u32 = 0x6000_0000;
/// An address in a read-only directly addressed map value (a frozen
/// `.rodata`): the map in bits 20..28, the offset in the low 20 bits.
pub(super) const CONST: u32 = 0x7000_0000;
/// [`CONST`]'s offset bits.
pub(super) const CONST_OFF: u32 = (1 << 20) - 1;

/// A `bpf_ringbuf_reserve` record that may be null: its reference (0-7)
/// in bits 24..27 ([`RING_REF_SHIFT`]), its offset from the record's
/// start, biased by [`RING_OFF_BIAS`], in the low 24 bits; the record's
/// size (or the most it may be) in the register's `hi`.
pub(super) const RING_NULL: u32 = 0x9000_0000;
/// A `bpf_ringbuf_reserve` record checked not null (bits as
/// [`RING_NULL`]'s).
pub(super) const RING: u32 = 0xa000_0000;
/// A record submitted or discarded: a pointer to it may not be used (the
/// kernel's "invalid mem access" after a release).
pub(super) const RING_GONE: u32 = 0xc000_0000;
/// [`RING_NULL`]'s and [`RING`]'s reference bits' shift.
pub(super) const RING_REF_SHIFT: u32 = 24;
/// The bias of a record pointer's offset (0 is the record's start).
pub(super) const RING_OFF_BIAS: i64 = 1 << 23;

/// A packet pointer (or `data_end`) from before a helper that moves the
/// packet (`bpf_xdp_adjust_head`, `_meta`, `_tail`; its number in the
/// low bits): the kernel makes every packet pointer a number then
/// (`clear_all_pkt_pointers`), so a dereference is refused. Not a
/// pointer for the rules of pointer arithmetic: what it is moved to is
/// a number of this state's own (checked at run time).
pub(super) const PKT_GONE: u32 = 0xd000_0000;

/// `r10 - k` of the current frame (k in the low bits, 0..=512) moved up
/// by a variable amount of at most the register's `vmax` (`&buf[i]`):
/// not a stack slot the spill rules know (its accesses are checked at run
/// time, its stores forget the spilled pointers); kept to refuse an
/// access that may leave the frame, as the kernel refuses it.
pub(super) const STACK_VAR: u32 = 0xe000_0000;

/// One of several maps, which paths joined here gave the register: the
/// maps' indexes as a set in the low 24 bits (bit `m`: map `m`). A
/// helper given one checks every map of the set (the kernel follows
/// each path apart, and refuses a map of the wrong type on any).
pub(super) const MAPS: u32 = 0xb000_0000;

/// The maps a [`MAP`] or [`MAPS`] register may hold, as a [`MAPS`] set;
/// `None` past the 24 a set holds.
pub(super) fn map_set(t: u32) -> Option<u32> {
    match t & KIND {
        MAP => (t & !KIND < 24).then(|| 1 << (t & !KIND)),
        MAPS => Some(t & !KIND),
        _ => None,
    }
}

/// The reference of a record type ([`RING_NULL`], [`RING`]).
pub(super) fn ring_ref(t: u32) -> u32 {
    (t >> RING_REF_SHIFT) & 7
}

/// The offset from its record's start of a record pointer.
pub(super) fn ring_off(t: u32) -> i64 {
    i64::from(t & 0xff_ffff) - RING_OFF_BIAS
}

/// The record pointer `t` moved by `k`, or `None` out of the range kept.
pub(super) fn ring_moved(t: u32, k: i64) -> Option<u32> {
    let off = ring_off(t).checked_add(k)?;
    (-RING_OFF_BIAS..RING_OFF_BIAS)
        .contains(&off)
        .then(|| (t & !0xff_ffff) | (off + RING_OFF_BIAS) as u32)
}

/// The constant offsets of packet pointers kept (the type's low bits; the
/// kernel refuses past 2^29): a larger one is a number.
pub(super) const PKT_OFF_LIMIT: i64 = 1 << 28;

/// The largest packet offset behind which bytes are proven (the kernel's
/// `MAX_PACKET_OFF`): a base's bound, and a pointer's offset from `data`
/// (`vmax + off`) at a comparison with `data_end`.
pub(super) const MAX_PKT_OFF: u64 = 0xffff;

/// After this many changes of an instruction's state, bounds that still
/// move are widened to unknown (loops would otherwise grow them for ever).
pub(super) const WIDEN_AFTER: u32 = 8;

/// The stack slots whose bytes [`State::keys`] follows (the 8-byte slots
/// at `r10 - 8`, `r10 - 16`, …): a map key deeper in the frame is left
/// to the run-time check.
pub(super) const KEY_SLOTS: usize = 16;

/// In [`State::escaped`]: more ids escaped than it holds, any may have.
pub(super) const ANY_ESCAPED: u32 = u32::MAX;

/// [`State::past_reg`] naming no register.
pub(super) const NO_REG: u8 = 0xff;

/// The dataflow state at an instruction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct State {
    /// Initialised registers.
    pub init: u16,
    /// Each register's type.
    pub ty: [u32; 11],
    /// Bytes from `data` known to lie in the packet (id 0).
    pub range: u32,
    /// An offset from `data` known to lie past the packet's end (0:
    /// none, as `data + 0` never does): the edge of `if data + n >
    /// data_end` where it holds (the kernel's `BEYOND_PKT_END`), so a
    /// second compare of the same pointer is decided.
    pub past: u32,
    /// The register whose compare set [`State::past`], while it holds
    /// that pointer ([`NO_REG`]: none): the kernel marks that register
    /// alone past the end (`BEYOND_PKT_END`) and decides a second compare
    /// of it only, where `past` decides any pointer at least as far.
    pub past_reg: u8,
    /// Stack slots of this frame known to hold a pointer spilled whole
    /// (bit `s`: the 8 bytes at `r10 - 8 * (s + 1)`), on every path here.
    pub spilled: u64,
    /// The type of the pointer in each slot of `spilled`, what a fill
    /// of the slot gives back ([`OTHER`]: a pointer not restored, and
    /// every slot not in `spilled`).
    pub slot: [u32; 64],
    /// Packet pointers: the id of the base (0: `data`).
    pub id: [u32; 11],
    /// Packet pointers with an id: the most `base - data` can be.
    pub vmax: [u32; 11],
    /// Packet pointers with an id: bytes from the base proven in the packet.
    pub vrange: [u32; 11],
    /// Scalars (`OTHER`): an upper bound, unsigned (`u64::MAX`: none).
    pub hi: [u64; 11],
    /// Stack slots of this frame holding a flag spilled whole: two bits
    /// a slot (bits `2k`, `2k + 1` for the 8 bytes at `r10 - 8 * (k +
    /// 1)`): 1, the value 0; 2, the value 1; 0, not known. A fill gives
    /// the value back, so that `paths.rs` keeps apart the paths a flag
    /// the compiler spilled tells apart (a sampler's `if (sampled)`).
    pub slot_flags: u128,
    /// Records `bpf_ringbuf_reserve` returned and no submit or discard
    /// has released yet (bit `n`: reference `n`; the kernel's acquired
    /// references). On a join, any path's.
    pub refs: u8,
    /// Scalars: a lower bound, unsigned (0: none). An exact value sets
    /// one (`lo == hi`: a constant moved in, a load of a frozen value),
    /// and so does a jump's edge (`if r > k`, `if r != 0` of an `r` at
    /// least 0); joins keep the least.
    pub lo: [u64; 11],
    /// On the way here (`paths.rs`) paths that proved different packet
    /// bytes were met past its bound, or paths on which a register held
    /// different exact values, or the state was widened: a packet, map
    /// value or stack access not proven here may be proven on each of
    /// the kernel's own paths, so it is checked at run time rather than
    /// refused.
    pub lossy: bool,
    /// Packet bases and map values that may be null (ids, 0 for none)
    /// of which this verifier lost a copy the kernel follows: spilled
    /// whole (a fill here is a number; the kernel's gives the pointer
    /// back, and a comparison of it with `data_end` proves bytes for every
    /// pointer of the base, with NULL checks every copy of the value),
    /// given to a function (whose null check the kernel applies to the
    /// caller's copies), or copies on one path met with others. An access
    /// through such a pointer that is not proven here may be proven on
    /// the kernel's paths: it is checked at run time rather than refused.
    /// More than four: [`ANY_ESCAPED`] (and [`State::lossy`]).
    pub escaped: [u32; 4],
    /// The kernel's view of the first [`KEY_SLOTS`] slots' bytes, where
    /// a map key may be a constant to it (`verify_keys.rs`).
    pub keys: [u32; KEY_SLOTS],
    /// Numbers just loaded from the context, the packet or a map value
    /// and untouched since (no arithmetic, no compare): ones the kernel
    /// knows nothing of either, so not a constant to it (bit `r`).
    pub opaque: u16,
}

impl State {
    /// The entry state: `init` registers initialised, all of type OTHER.
    pub fn new(init: u16) -> State {
        State {
            init,
            ty: [OTHER; 11],
            range: 0,
            past: 0,
            past_reg: NO_REG,
            spilled: 0,
            slot: [OTHER; 64],
            id: [0; 11],
            vmax: [0; 11],
            vrange: [0; 11],
            hi: [u64::MAX; 11],
            lo: [0; 11],
            refs: 0,
            slot_flags: 0,
            lossy: false,
            escaped: [0; 4],
            keys: [0; KEY_SLOTS],
            opaque: 0,
        }
    }

    /// `d` was made a copy of number `s` at `pc`: the two share an id
    /// (`s`'s, or a new one), as the kernel links them (`reg->id` of
    /// scalars), so that a compare's bounds on one are the other's
    /// ([`State::narrow`]). Any write to either (`set`, `copy`) unlinks
    /// it; where paths meet, a link both kept stays.
    pub fn link(&mut self, d: usize, s: usize, pc: usize) {
        if self.id[s] == 0 {
            let id = ((pc as u32 + 1) << 5) | 30;
            // Numbers left with this id by an earlier pass through `pc`
            // (an outer loop's) hold an older value: unlinked.
            for q in 0..11 {
                if self.ty[q] == OTHER && self.id[q] == id {
                    self.id[q] = 0;
                }
            }
            self.id[s] = id;
        }
        self.id[d] = self.id[s];
    }

    /// Number `r` is within `[lo, hi]` (a compare's edge), and so is every
    /// number linked to it ([`State::link`]).
    pub fn narrow(&mut self, r: usize, lo: u64, hi: u64) {
        let id = self.id[r];
        for q in 0..11 {
            if q == r || (id != 0 && self.ty[q] == OTHER && self.id[q] == id) {
                self.lo[q] = self.lo[q].max(lo);
                self.hi[q] = self.hi[q].min(hi);
            }
        }
    }

    /// `r` is what `bpf_map_lookup_elem` of map `m` returned at `pc`: the
    /// value or null, with an identity its copies share (the kernel's
    /// `reg->id`), so that a null check of one is one of all.
    pub fn nullable(&mut self, r: usize, m: u32, pc: usize) {
        let id = ((pc as u32 + 1) << 5) | 31;
        // Values left with this id by an earlier pass through `pc` (a
        // loop's) are other values: no longer known (a null check of the
        // new one says nothing of them).
        for q in 0..11 {
            if self.ty[q] & KIND == NULLABLE && self.id[q] == id {
                self.set(q, OTHER);
            }
        }
        self.set(r, NULLABLE | m);
        self.id[r] = id;
    }

    /// Notes that a copy of packet base `id` went to the stack
    /// ([`State::escaped`]).
    pub fn escape(&mut self, id: u32) {
        if id == 0 || self.escaped.contains(&id) || self.escaped.contains(&ANY_ESCAPED) {
            return;
        }
        match self.escaped.iter_mut().find(|e| **e == 0) {
            Some(e) => *e = id,
            None => {
                // More than the list holds: every id may have escaped.
                self.escaped[3] = ANY_ESCAPED;
                self.lossy = true;
            }
        }
    }

    /// Whether packet pointer `r`'s base has a copy on the stack this
    /// verifier does not follow ([`State::escaped`]).
    pub fn escaped(&self, r: usize) -> bool {
        self.id[r] != 0
            && (self.escaped.contains(&self.id[r]) || self.escaped.contains(&ANY_ESCAPED))
    }

    /// Forgets every register and spilled slot holding record `n` of
    /// `bpf_ringbuf_reserve` (released: submitted, discarded, or null),
    /// and its reference; on the null edge, `null` makes them 0.
    pub fn release(&mut self, n: u32, null: bool) {
        self.refs &= !(1u8 << n);
        let held = |t: u32| matches!(t & KIND, RING_NULL | RING) && ring_ref(t) == n;
        for r in 0..11 {
            if held(self.ty[r]) {
                if null {
                    self.exact(r, 0);
                } else {
                    self.set(r, RING_GONE);
                }
            }
        }
        for k in 0..64 {
            if held(self.slot[k]) {
                // A spilled copy found null stays a record that may be
                // null (what it is where this path joins the one where
                // it is not; a fill here is 0 at run time).
                self.slot[k] = if null {
                    RING_NULL | (self.slot[k] & !KIND)
                } else {
                    RING_GONE
                };
            }
        }
    }

    /// Gives `r` the type `ty` (no id, no bound).
    pub fn set(&mut self, r: usize, ty: u32) {
        self.forget_past(r);
        self.ty[r] = ty;
        self.id[r] = 0;
        self.vmax[r] = 0;
        self.vrange[r] = 0;
        self.hi[r] = u64::MAX;
        self.lo[r] = 0;
    }

    /// Makes `r` the scalar `v` exactly.
    pub fn exact(&mut self, r: usize, v: u64) {
        self.scalar(r, v);
        self.lo[r] = v;
    }

    /// `r`'s lower bound if it is a scalar.
    pub fn low(&self, r: usize) -> u64 {
        if self.ty[r] == OTHER {
            self.lo[r]
        } else {
            0
        }
    }

    /// Makes `r` a scalar of at most `hi`.
    pub fn scalar(&mut self, r: usize, hi: u64) {
        self.set(r, OTHER);
        self.hi[r] = hi;
    }

    /// Whether `r` holds a pointer of a kind the verifier tracks (the
    /// kernel's pointer types: arithmetic on them is restricted).
    pub fn pointer(&self, r: usize) -> bool {
        let t = self.ty[r];
        matches!(t, CTX | CTX_MOD) || (t & KIND != 0 && t & KIND != PKT_GONE)
    }

    /// `r`'s value if it is a scalar known exactly.
    pub fn known(&self, r: usize) -> Option<u64> {
        (self.ty[r] == OTHER && self.lo[r] == self.hi[r]).then_some(self.hi[r])
    }

    /// `r`'s upper bound if it is a scalar.
    pub fn bound(&self, r: usize) -> u64 {
        if self.ty[r] == OTHER {
            self.hi[r]
        } else {
            u64::MAX
        }
    }

    /// The offset from r10 of an access at `off` through register `r`,
    /// if it is the frame pointer or a stack pointer this verifier tracks.
    pub fn stack_at(&self, r: usize, off: i16) -> Option<i64> {
        if r == 10 {
            Some(i64::from(off))
        } else if self.ty[r] & KIND == STACK {
            Some(i64::from(off) - i64::from(self.ty[r] & !KIND))
        } else {
            None
        }
    }

    /// [`State::unspill`] of every slot but those holding a record of
    /// `bpf_ringbuf_reserve`: for a store whose address the verifier
    /// does not know, which the kernel follows into the stack slots it
    /// may hit only. (A record clobbered so is still one here: its
    /// accesses are checked at run time, and its release faults.)
    pub fn unspill_but_records(&mut self) {
        let mut keep = 0u64;
        for k in 0..64 {
            if matches!(self.slot[k] & KIND, RING | RING_NULL) {
                keep |= 1 << k;
            }
        }
        self.unspill(!keep);
    }

    /// Forgets the slots in `mask`: no pointer or flag known there.
    pub fn unspill(&mut self, mask: u64) {
        self.spilled &= !mask;
        for k in 0..64 {
            if mask & (1 << k) != 0 {
                self.slot[k] = OTHER;
                self.slot_flags &= !(3u128 << (2 * k));
            }
        }
    }

    /// The flag spilled whole in slot `k`, if any ([`State::slot_flags`]).
    pub fn slot_flag(&self, k: usize) -> Option<u64> {
        match (self.slot_flags >> (2 * k)) & 3 {
            1 => Some(0),
            2 => Some(1),
            _ => None,
        }
    }

    /// The type a spill of register `r` keeps for its fill: the kinds
    /// whose meaning the rest of the state does not hold (not a packet
    /// pointer with a variable base, whose id could name another base
    /// by the time it is filled).
    pub fn spill_type(&self, r: usize) -> u32 {
        let t = self.ty[r];
        match t & KIND {
            PKT if self.id[r] != 0 => OTHER,
            VALUE if self.vmax[r] != 0 => OTHER,
            // (A fill is a pointer of no known kind, checked at run time:
            // the slot does not keep the value's identity, which its
            // null check needs.)
            NULLABLE => OTHER,
            STACK_VAR => OTHER,
            0 if t != CTX && t != CTX_MOD => OTHER,
            _ => t,
        }
    }

    /// The stack slots the bytes `[at, at + size)` from r10 touch.
    pub fn slots(at: i64, size: i64) -> u64 {
        let mut m = 0;
        for s in 0..64 {
            let lo = -8 * (s + 1);
            if at < lo + 8 && at + size > lo {
                m |= 1u64 << s;
            }
        }
        m
    }

    /// Copies register `s` of `from` into `d`.
    pub fn copy(&mut self, d: usize, from: &State, s: usize) {
        self.forget_past(d);
        self.ty[d] = from.ty[s];
        self.id[d] = from.id[s];
        self.vmax[d] = from.vmax[s];
        self.vrange[d] = from.vrange[s];
        self.hi[d] = from.hi[s];
        self.lo[d] = from.lo[s];
    }

    /// `r` written: no longer the register [`State::past_reg`] names.
    fn forget_past(&mut self, r: usize) {
        if usize::from(self.past_reg) == r {
            self.past_reg = NO_REG;
        }
    }

    /// Bytes from `r`'s base proven in the packet.
    pub fn limit(&self, r: usize) -> u32 {
        if self.id[r] == 0 {
            self.range
        } else {
            self.vrange[r]
        }
    }

    /// The most `r - data` can be (r a packet pointer).
    pub(super) fn reach(&self, r: usize) -> u64 {
        u64::from(self.vmax[r]) + u64::from(self.ty[r] & !KIND)
    }

    /// Packet pointer `r` (`base + off`) is at most `data_end`: the
    /// bytes `[base, base + off)` of every register of its id are in the
    /// packet.
    /// A base that may lie further than `MAX_PKT_OFF` from `data` with
    /// `off` (`vmax + off` past it) proves nothing: the kernel grants no
    /// range then (`find_good_pkt_pointers`: the sum could wrap).
    pub fn prove(&mut self, r: usize) {
        let (id, off) = (self.id[r], self.ty[r] & !KIND);
        if id == 0 {
            if u64::from(off) <= MAX_PKT_OFF {
                self.range = self.range.max(off);
            }
            return;
        }
        if self.reach(r) > MAX_PKT_OFF {
            return;
        }
        for q in 0..11 {
            if self.ty[q] & KIND == PKT && self.id[q] == id {
                self.vrange[q] = self.vrange[q].max(off);
            }
        }
    }

    /// `d += scalar of at least lo and at most hi`, `d` a packet pointer,
    /// at `pc`: a new base (no bytes proven behind it yet). One that could
    /// lie further than `MAX_PKT_OFF` from `data` is a packet pointer to
    /// the kernel, behind which no comparison proves bytes, so that an
    /// access through it is refused. So it is here where even the least
    /// the scalar can be takes it there (`lo`: the kernel's bound is at
    /// least as large; `vmax` saturated): where only this verifier's
    /// upper bound does, which may be looser than the kernel's (a spilled
    /// number's, for one), the pointer is OTHER, checked at run time.
    pub fn add_var(&mut self, pc: usize, d: usize, lo: u64, hi: u64) {
        let far = self.reach(d).saturating_add(lo) > MAX_PKT_OFF;
        let reach = self.reach(d).saturating_add(hi);
        if reach > MAX_PKT_OFF && !far {
            self.set(d, OTHER);
            return;
        }
        let id = ((pc as u32 + 1) << 5) | d as u32;
        // Registers left with this id from an earlier pass through `pc`
        // hold an older base.
        self.forget_id(id, d);
        self.set(d, PKT);
        self.id[d] = id;
        self.vmax[d] = reach.min(u64::from(u32::MAX)) as u32;
    }

    fn forget_id(&mut self, id: u32, except: usize) {
        for q in 0..11 {
            if q != except && self.ty[q] & KIND == PKT && self.id[q] == id {
                self.set(q, OTHER);
            }
        }
    }

    /// Whether `r` holds a record known to be 0.
    pub fn null(&self, r: usize) -> bool {
        self.known(r) == Some(0)
    }

    /// `new` replaces `old` after many changes: bounds still moving are
    /// dropped, so that the dataflow ends.
    pub fn widen(&mut self, old: &State) {
        self.lossy = true;
        self.widen_keys(old);
        if self.past != old.past {
            self.past = 0;
            self.past_reg = NO_REG;
        }
        for r in 0..11 {
            if self.ty[r] == OTHER && self.hi[r] != old.hi[r] {
                self.hi[r] = u64::MAX;
            }
            if self.lo[r] != old.lo[r] {
                self.lo[r] = 0;
            }
            let moved =
                old.ty[r] != self.ty[r] || old.id[r] != self.id[r] || old.vmax[r] != self.vmax[r];
            if self.ty[r] & KIND == PKT && self.id[r] != 0 && moved {
                self.set(r, OTHER);
            }
            if matches!(self.ty[r] & KIND, VALUE | STACK_VAR) && moved {
                self.set(r, OTHER);
            }
        }
    }
}

/// An upper bound of an ALU instruction's result from upper bounds of
/// its operands (`b`: the immediate itself for the K forms); `u64::MAX`
/// when none is known.
pub(super) fn alu_bound(i: &Insn, a: u64, b: u64) -> u64 {
    let wide = i.class() == BPF_ALU64;
    let (a, b) = if wide {
        (a, b)
    } else {
        (a.min(u32::MAX.into()), b.min(u32::MAX.into()))
    };
    let width = if wide { 64 } else { 32 };
    let signed = i.off != 0;
    let r = match i.op() {
        BPF_MOV if !signed => Some(b),
        BPF_ADD => a.checked_add(b),
        BPF_MUL => a.checked_mul(b),
        // (No bit outside both operands' possible bits, the immediate's
        // exactly: `x & 60` of an x at most 3 is 0, as the kernel's
        // tnums know.)
        BPF_AND if i.code & BPF_X == 0 => Some(a.min(b).min(ones(a) & b)),
        BPF_AND => Some(a.min(b).min(ones(a) & ones(b))),
        BPF_OR | BPF_XOR => Some(ones(a.max(b))),
        BPF_LSH if b < width && u64::from(a.leading_zeros()) >= b => Some(a << b),
        BPF_RSH if i.code & BPF_X == 0 && b < width => Some(a >> b),
        BPF_RSH => Some(a),
        // Unsigned: never more than the dividend (a zero divisor gives 0
        // for div and the dividend for mod).
        BPF_DIV | BPF_MOD if !signed => Some(a),
        _ => None,
    };
    match r {
        Some(v) if wide => v,
        Some(v) => v.min(u32::MAX.into()),
        None if wide => u64::MAX,
        None => u32::MAX.into(),
    }
}

/// All ones up to `v`'s highest set bit.
pub(super) fn ones(v: u64) -> u64 {
    if v == 0 {
        0
    } else {
        u64::MAX >> v.leading_zeros()
    }
}

#[cfg(test)]
#[path = "verify_pkt_tests.rs"]
mod tests;

#[path = "verify_meet.rs"]
mod meet;
