//! The choice of a node's cut: the children's counts of every
//! candidate cut of a field from one pass over the rules.

use super::*;

impl Builder<'_> {
    /// The cut for a node: for each field, as many bits as the space
    /// factor allows (children's rules plus children at most `spfac` × the
    /// node's rules); the field whose largest child is smallest wins
    /// (fewer rules in total breaks ties); then bits of a second field are
    /// added while they shrink the largest child within the same budget.
    /// `None` if no cut separates anything.
    ///
    /// Every rule meets at least one child, so a cut of `2^b` children
    /// costs at least `n + 2^b`: the bits that can fit the budget are
    /// known before any count, and one pass over the rules per field
    /// ([`Counts`]) gives the children's counts of every such cut.
    pub(super) fn choose_cut(
        &mut self,
        bx: &Boxx,
        ids: &[u32],
        maxb: u8,
        spfac: f64,
    ) -> Option<Cut> {
        let n = ids.len();
        let limit = (spfac * n as f64) as usize;
        let mut cc = std::mem::take(&mut self.counts);
        // Each rule's range in each field, as offsets into the box: read
        // once here, not once per candidate cut (and again by
        // [`Builder::split`] for the cut it takes); per field, the sum of
        // the ranges' widths and the rules that span the whole box (they
        // are in every child of a cut of that field).
        let mut widths = [0u64; DIMS];
        let mut full = [0usize; DIMS];
        let br = self.br;
        for d in 0..DIMS {
            let (blo, top) = (bx[d].0, box_hi(bx[d]));
            let whole = top - blo;
            let offs = &mut cc.offs[d];
            offs.resize(ids.len(), (0, 0));
            let (mut width, mut whole_n) = (0u64, 0usize);
            for (o, &i) in offs.iter_mut().zip(ids) {
                let r = &br[i as usize];
                let (l, h) = (r.lo[d].max(blo) - blo, r.hi[d].min(top) - blo);
                *o = (l, h);
                width += u64::from(h - l);
                whole_n += usize::from(l == 0 && h == whole);
            }
            (widths[d], full[d]) = (width, whole_n);
        }
        // The most bits `b` (at least `least`, at most `most`) of field
        // `d` that may fit under `2^extra` children of another field,
        // whose cut has `total` rules in all: the children's rules are at
        // least `total` and at least the rules' widths over a child's
        // (each rule meets at least `width / child + 1` children), so
        // past that the cut is over the limit whatever the counts.
        let fits = |d: usize, total: usize, extra: u8, least: u8, most: u8| {
            (least + 1..=most)
                .take_while(|&b| {
                    let child = u32::from(bx[d].1 - b);
                    let least_total = (widths[d] >> child).max(total as u64);
                    least_total + (1u64 << (extra + b)) <= limit as u64
                })
                .last()
                .unwrap_or(least)
        };
        // (max child, total, field, bits): the least, the first field
        // among equals. A field's largest child has at least the rules
        // that span its whole box, so the fields go in order of those,
        // and a field with more of them than the best cut's largest child
        // cannot win and is not counted.
        let mut order: [usize; DIMS] = std::array::from_fn(|d| d);
        order.sort_by_key(|&d| (full[d], d));
        let mut best: Option<(usize, usize, usize, u8)> = None;
        for d in order {
            let w = bx[d].1;
            let most = maxb.min(w);
            if most == 0 || best.is_some_and(|bb| full[d] > bb.0) {
                continue;
            }
            // One bit is tried whatever it costs; more only within the
            // limit.
            let fine = fits(d, n, 0, 1, most);
            cc.one(d, w, fine);
            let mut found = None;
            for b in 1..=fine {
                let (total, max) = cc.level(fine, 0, b);
                if total + (1 << b) > limit && b > 1 {
                    break;
                }
                found = Some((max, total, d, b));
                if total + (1 << b) > limit || max <= 1 {
                    break;
                }
            }
            if let Some(f) = found {
                if best.is_none_or(|bb| (f.0, f.1, f.2) < (bb.0, bb.1, bb.2)) {
                    best = Some(f);
                }
            }
        }
        let Some((mut max, total0, d0, b0)) = best else {
            self.counts = cc;
            return None;
        };
        let (mut d1, mut b1) = (d0, 0u8);
        if max > self.binth {
            // A second field, one bit at a time.
            let mut best2: Option<(usize, usize, u8)> = None;
            for d in (0..DIMS).filter(|&d| d != d0) {
                let most = maxb.saturating_sub(b0).min(bx[d].1);
                let fine = fits(d, total0, b0, 0, most);
                if fine == 0 {
                    // Not one bit fits.
                    continue;
                }
                cc.two(d0, bx[d0].1, b0, d, bx[d].1, fine);
                let mut found = None;
                for b in 1..=fine {
                    let (total, m) = cc.level(fine, b0, b);
                    if total + (1 << (b0 + b)) > limit || m >= max {
                        break;
                    }
                    found = Some((m, d, b));
                }
                if let Some(f) = found {
                    if best2.is_none_or(|bb| f.0 < bb.0) {
                        best2 = Some(f);
                    }
                }
            }
            if let Some((m, d, b)) = best2 {
                max = m;
                d1 = d;
                b1 = b;
            }
        }
        self.counts = cc;
        (max < n).then_some((d0, b0, d1, b1))
    }
}

/// The children's rule counts of a node's candidate cuts
/// ([`Builder::choose_cut`]), every number of bits of a field at once,
/// and the buffers for them, kept from node to node.
///
/// The counts are over the `2^fine` finest children of the field cut
/// last: `lo[row * cols + x]` counts the rules (of child `row` of the
/// first field's cut, in a two-field cut) whose range starts before fine
/// child `x`, `hi` those whose range ends before it (`cols = 2^fine + 1`).
/// The rules meeting fine children `a..b` are then `lo[b] - hi[a]`: a
/// rule that ends before `a` starts before `b` too. A cut of `b <= fine`
/// bits groups `2^(fine - b)` fine children per child.
#[derive(Default)]
pub(super) struct Counts {
    /// Each rule's range in each field, as offsets into the node's box.
    pub(super) offs: [Vec<(u32, u32)>; DIMS],
    pub(super) lo: Vec<i32>,
    pub(super) hi: Vec<i32>,
    /// [`Builder::split`]'s buffers: each rule's children of the cut it
    /// takes (first and last of the first field, of the second), and a
    /// difference array, then a cursor, per child.
    pub(super) spans: Vec<[usize; 4]>,
    pub(super) fill: Vec<isize>,
}

impl Counts {
    /// The counts of the cuts of field `d` (of width `2^w`) alone, up to
    /// `fine` bits (`1 <= fine <= w`).
    pub(super) fn one(&mut self, d: usize, w: u8, fine: u8) {
        let s = u32::from(w - fine);
        let cols = (1usize << fine) + 1;
        let (lo, hi) = (&mut self.lo, &mut self.hi);
        lo.clear();
        lo.resize(cols, 0);
        hi.clear();
        hi.resize(cols, 0);
        for &(l, h) in &self.offs[d] {
            lo[(l >> s) as usize + 1] += 1;
            hi[(h >> s) as usize + 1] += 1;
        }
        for x in 1..cols {
            lo[x] += lo[x - 1];
            hi[x] += hi[x - 1];
        }
    }

    /// The counts of the cuts of `b0` bits of field `d0` (of width
    /// `2^w0`) and up to `fine` bits of field `d1` (of width `2^w1`;
    /// `1 <= b0 <= w0`, `1 <= fine <= w1`): per child of the first field,
    /// a difference array over its rows, then prefix sums down the rows
    /// and along each row.
    pub(super) fn two(&mut self, d0: usize, w0: u8, b0: u8, d1: usize, w1: u8, fine: u8) {
        let (s0, s1) = (u32::from(w0 - b0), u32::from(w1 - fine));
        let (rows, cols) = ((1usize << b0) + 1, (1usize << fine) + 1);
        let (lo, hi) = (&mut self.lo, &mut self.hi);
        lo.clear();
        lo.resize(rows * cols, 0);
        hi.clear();
        hi.resize(rows * cols, 0);
        for (&(l0, h0), &(l1, h1)) in self.offs[d0].iter().zip(&self.offs[d1]) {
            let (r0, r1) = ((l0 >> s0) as usize * cols, ((h0 >> s0) as usize + 1) * cols);
            let (xl, xh) = ((l1 >> s1) as usize + 1, (h1 >> s1) as usize + 1);
            lo[r0 + xl] += 1;
            lo[r1 + xl] -= 1;
            hi[r0 + xh] += 1;
            hi[r1 + xh] -= 1;
        }
        // The last row only takes the rules' ends: it is never read.
        let used = (rows - 1) * cols;
        for at in cols..used {
            lo[at] += lo[at - cols];
            hi[at] += hi[at - cols];
        }
        for row in 0..rows - 1 {
            for at in row * cols + 1..(row + 1) * cols {
                lo[at] += lo[at - 1];
                hi[at] += hi[at - 1];
            }
        }
    }

    /// Children's total and largest rule count of the cut of `b` bits of
    /// the field counted last (`b <= fine`), under the `2^b0` children of
    /// the first field's cut (`b0 = 0`: a one-field cut).
    pub(super) fn level(&self, fine: u8, b0: u8, b: u8) -> (usize, usize) {
        let cols = (1usize << fine) + 1;
        let t = fine - b;
        let (mut total, mut max) = (0usize, 0i32);
        for row in (0..1usize << b0).map(|r| r * cols) {
            let (lo, hi) = (&self.lo[row..row + cols], &self.hi[row..row + cols]);
            for c in 0..1usize << b {
                let k = lo[(c + 1) << t] - hi[c << t];
                total += k as usize;
                max = max.max(k);
            }
        }
        (total, max as usize)
    }
}
