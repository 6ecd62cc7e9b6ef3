//! Where paths meet: what holds on both of two states ([`State::meet`]).
//! Packet bases, map values that may be null and numbers linked to their
//! copies keep their identities where both paths agree on them, and get
//! new ones, or none, where they do not.

use super::*;

impl State {
    /// What holds on both `self` and `o`, at instruction `t` (a join).
    ///
    /// A packet pointer with the same id and offset on both sides keeps
    /// them. Pointers that differ get a new base: those with the same
    /// pair of ids and the same offset on both sides share one (they were
    /// one base on each side), any other its own at offset 0.
    pub fn meet(&self, o: &State, t: usize) -> State {
        // A lookup the kernel may know is not null on one path only: one
        // it may know is on both (a dereference is not refused).
        let one_sided =
            |r: usize| self.ty[r] & KIND == NULLABLE && self.ty[r] ^ o.ty[r] == ELIDABLE;
        if (0..11).any(one_sided) {
            let (mut x, mut y) = (*self, *o);
            for r in (0..11).filter(|&r| one_sided(r)) {
                x.ty[r] |= ELIDABLE;
                y.ty[r] |= ELIDABLE;
            }
            return x.meet(&y, t);
        }
        let mut m = *self;
        m.init &= o.init;
        m.refs = self.refs | o.refs;
        m.lossy = self.lossy || o.lossy;
        for &id in &o.escaped {
            m.escape(id);
        }
        // (Each slot's two bits: kept where both paths have the same.)
        m.slot_flags = self.slot_flags & o.slot_flags;
        m.meet_keys(o);
        m.opaque = self.opaque & o.opaque;
        m.range = self.range.min(o.range);
        m.spilled = self.spilled & o.spilled;
        for k in 0..64 {
            let (x, y) = (m.slot[k], o.slot[k]);
            if x != y {
                // A record spilled on both paths, null on one: one that
                // may be null.
                let ring = |t: u32| matches!(t & KIND, RING | RING_NULL);
                m.slot[k] = if ring(x) && ring(y) && x & !KIND == y & !KIND {
                    RING_NULL | (x & !KIND)
                } else {
                    OTHER
                };
            }
        }
        if self.past_reg != o.past_reg {
            m.past_reg = NO_REG;
        }
        m.past = if self.past == 0 || o.past == 0 {
            0
        } else {
            self.past.max(o.past)
        };
        let mut fresh = 0u16;
        let is_pkt = |s: &State, r: usize| s.ty[r] & KIND == PKT;
        for r in 0..11 {
            let (a, b) = (self.ty[r], o.ty[r]);
            let pkt = is_pkt(self, r) && is_pkt(o, r);
            if a == b && (!pkt || self.id[r] == o.id[r]) {
                if a == OTHER && self.id[r] != o.id[r] {
                    // Linked differently on the paths: not linked here.
                    m.id[r] = 0;
                }
                m.vmax[r] = self.vmax[r].max(o.vmax[r]);
                m.vrange[r] = if pkt && self.id[r] != 0 {
                    self.vrange[r].min(o.vrange[r])
                } else {
                    0
                };
                m.hi[r] = self.hi[r].max(o.hi[r]);
                m.lo[r] = self.lo[r].min(o.lo[r]);
            } else if pkt {
                let (oa, ob) = (a & !KIND, b & !KIND);
                // The first register of its group names the new base.
                let first = (0..r)
                    .find(|&q| {
                        is_pkt(self, q)
                            && is_pkt(o, q)
                            && self.id[q] == self.id[r]
                            && o.id[q] == o.id[r]
                            && self.ty[q] == o.ty[q]
                            && self.id[q] != o.id[q]
                    })
                    .filter(|_| oa == ob);
                let (off, base_a, base_b) = if oa == ob {
                    (oa, self.vmax[r], o.vmax[r])
                } else {
                    (0, self.reach(r) as u32, o.reach(r) as u32)
                };
                let vmax = u64::from(base_a.max(base_b));
                let avail = |s: &State| s.limit(r).saturating_sub(s.ty[r] & !KIND) + off;
                let vrange = if oa == ob {
                    self.limit(r).min(o.limit(r))
                } else {
                    avail(self).min(avail(o))
                };
                if vmax > MAX_PKT_OFF {
                    m.set(r, OTHER);
                    continue;
                }
                let name = match first {
                    Some(q) if fresh & (1 << q) != 0 => m.id[q],
                    _ => ((t as u32 + 1) << 5) | 16 | r as u32,
                };
                m.set(r, PKT | off);
                m.id[r] = name;
                m.vmax[r] = vmax as u32;
                m.vrange[r] = vrange;
                fresh |= 1 << r;
                if self.escaped(r) || o.escaped(r) {
                    m.escape(name);
                }
            } else if let Some(t) = ring_or_null(self, o, r) {
                // A record on one path, null (or none reserved) on the
                // other: a record that may be null, as the kernel's
                // paths give it, to be checked again.
                let ring = |t: u32| matches!(t & KIND, RING | RING_NULL);
                let size = match (ring(a), ring(b)) {
                    (true, true) => self.hi[r].min(o.hi[r]),
                    (true, false) => self.hi[r],
                    _ => o.hi[r],
                };
                m.set(r, t);
                m.hi[r] = size;
            } else if let (Some(x), Some(y)) = (map_set(a), map_set(b)) {
                // Two maps: the set of both.
                m.set(r, MAPS | x | y);
            } else {
                let hi = if a == OTHER && b == OTHER {
                    self.hi[r].max(o.hi[r])
                } else {
                    u64::MAX
                };
                m.scalar(r, hi);
            }
        }
        // Map values that may be null, of the same map on both paths:
        // registers that held one value on each side hold one value
        // here (a null check of one is a null check of the others); any
        // other its own.
        let nullable = |s: &State, r: usize| s.ty[r] & KIND == NULLABLE;
        let mut renamed = 0u16;
        for r in 0..11 {
            if !(nullable(self, r) && self.ty[r] == o.ty[r] && self.id[r] != o.id[r]) {
                continue;
            }
            renamed |= 1 << r;
            let group = (0..r).find(|&q| {
                nullable(self, q)
                    && self.ty[q] == o.ty[q]
                    && self.id[q] == self.id[r]
                    && o.id[q] == o.id[r]
            });
            m.id[r] = match group {
                Some(q) => m.id[q],
                None => ((t as u32 + 1) << 5) | 16 | r as u32,
            };
        }
        // A new name must not be one another register kept (one that had
        // it on both paths, from an earlier meet here, holds another
        // value): such a register is no longer known.
        for r in 0..11 {
            if renamed & (1 << r) != 0
                && (0..11).any(|q| renamed & (1 << q) == 0 && nullable(&m, q) && m.id[q] == m.id[r])
            {
                m.set(r, OTHER);
            }
        }
        // Registers that were copies on one path and not on the other: a
        // null check of either is one of the other on some path, which
        // the kernel follows; not here (`State::escaped`).
        for r in 0..11 {
            for q in 0..r {
                if nullable(&m, r)
                    && nullable(&m, q)
                    && (self.id[r] == self.id[q]) != (o.id[r] == o.id[q])
                {
                    m.escape(m.id[r]);
                    m.escape(m.id[q]);
                }
            }
        }
        // Registers holding a record that may be null of one reference
        // are one value to a null check, which marks them all: so they
        // must be on each path, the same record or all 0. A register made
        // one here from a record on one path and 0 on the other
        // (`ring_or_null`) that is not so with another of its type holds
        // another value (a record where that one is 0): no longer known.
        let same_on = |s: &State, r: usize, q: usize| s.ty[r] == s.ty[q] || s.null(r) && s.null(q);
        for r in 0..11 {
            let made = m.ty[r] & KIND == RING_NULL && self.ty[r] != o.ty[r];
            if made
                && (0..11).any(|q| {
                    q != r && m.ty[q] == m.ty[r] && !(same_on(self, r, q) && same_on(o, r, q))
                })
            {
                m.set(r, OTHER);
            }
        }
        // A record's size where paths met: the smaller (an access
        // past it is decided path by path, `paths.rs`).
        for r in 0..11 {
            if self.ty[r] == o.ty[r] && matches!(self.ty[r] & KIND, RING | RING_NULL) {
                m.hi[r] = self.hi[r].min(o.hi[r]);
            }
        }
        // A new id must not be one another register kept.
        for r in 0..11 {
            if fresh & (1 << r) != 0
                && (0..11).any(|q| fresh & (1 << q) == 0 && is_pkt(&m, q) && m.id[q] == m.id[r])
            {
                m.set(r, OTHER);
            }
        }
        m
    }
}

/// The join of `r` in `a` and `b` where one holds a record (null or not)
/// and the other that record's pointer that may be null, or 0: the
/// record that may be null.
fn ring_or_null(a: &State, b: &State, r: usize) -> Option<u32> {
    let (x, y) = (a.ty[r], b.ty[r]);
    let ring = |t: u32| matches!(t & KIND, RING | RING_NULL);
    let bits = |t: u32| t & !KIND;
    match (ring(x), ring(y)) {
        (true, true) if bits(x) == bits(y) => Some(RING_NULL | bits(x)),
        (true, false) if b.null(r) => Some(RING_NULL | bits(x)),
        (false, true) if a.null(r) => Some(RING_NULL | bits(y)),
        _ => None,
    }
}
