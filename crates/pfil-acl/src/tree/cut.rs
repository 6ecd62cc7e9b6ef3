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
        let (widths, full) = self.offsets(&mut cc, bx, ids);
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

impl Builder<'_> {
    /// Each rule's range in each field, as offsets into the box, in
    /// `cc.offs`: read once per node, not once per candidate cut (and
    /// again by [`Builder::split`] for the cut it takes). Per field, the
    /// sum of the ranges' widths and the rules that span the whole box
    /// (they are in every child of a cut of that field).
    pub(super) fn offsets(
        &self,
        cc: &mut Counts,
        bx: &Boxx,
        ids: &[u32],
    ) -> ([u64; DIMS], [usize; DIMS]) {
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
        (widths, full)
    }

    /// A cut for a node small enough to be a leaf (at most `binth` rules)
    /// whose leaf would be more than one block: the one-field cut of at
    /// most `maxb` bits, within the space factor `spfac`, that costs the
    /// keys reaching the node least, if it costs them less than the leaf.
    ///
    /// The keys are modelled as a ClassBench trace is drawn: a share
    /// [`UNIFORM_KEYS`] anywhere (a node gets them in proportion to its
    /// box's volume, and they scan the whole leaf: most match no rule of
    /// it), the others in one rule's box each (a rule's key reaches the
    /// node with the share of its box inside the node's, and scans the
    /// leaf up to the rule's block). A cut costs each key
    /// [`REFINE_LEVEL`] blocks' worth for its level; a uniform key then
    /// scans its child's blocks (the children are equal parts of the
    /// box), a rule's key the blocks of the children its box meets, in
    /// proportion, or no more than before. In a leaf of rules with
    /// wildcard addresses and a few protocols and ports (acl2_1k: 31
    /// rules under one wide box, most of its keys matching none of them)
    /// a cut of the protocol or port parts them.
    pub(super) fn refine_cut(
        &mut self,
        bx: &Boxx,
        ids: &[u32],
        maxb: u8,
        spfac: f64,
    ) -> Option<Cut> {
        let n = ids.len();
        let limit = (spfac * n as f64) as usize;
        let br = self.br;
        let rules = br.len().max(1) as f64;
        // Key mass: the uniform keys in the box, and each rule's keys in
        // it.
        let bits: i32 = bx.iter().map(|f| i32::from(f.1)).sum();
        let full: i32 = FULL.iter().map(|f| i32::from(f.1)).sum();
        let uniform = UNIFORM_KEYS * 2f64.powi(bits - full);
        let mut mass = std::mem::take(&mut self.counts.mass);
        mass.clear();
        mass.extend(ids.iter().map(|&i| {
            let r = &br[i as usize];
            let share: f64 = (0..DIMS)
                .map(|d| {
                    let (blo, top) = (bx[d].0, box_hi(bx[d]));
                    let inside = u64::from(r.hi[d].min(top) - r.lo[d].max(blo)) + 1;
                    inside as f64 / (u64::from(r.hi[d] - r.lo[d]) + 1) as f64
                })
                .product();
            share * (1.0 - UNIFORM_KEYS) / rules
        }));
        let all = uniform + mass.iter().sum::<f64>();
        // A rule's keys scan the leaf up to its block.
        let upto = |p: usize| (p / BLOCK + 1) as f64;
        let leaf = uniform * n.div_ceil(BLOCK) as f64
            + mass
                .iter()
                .enumerate()
                .map(|(p, m)| m * upto(p))
                .sum::<f64>();
        // Below any cut's cost: every key pays the level, and a rule's
        // key scans at least the block of its rule. (Most small nodes
        // deep in a tree stop here: their keys are their rules', in
        // their first blocks.)
        if all * REFINE_LEVEL + mass.iter().sum::<f64>() >= leaf {
            self.counts.mass = mass;
            return None;
        }
        let mut cc = std::mem::take(&mut self.counts);
        let (_, full) = self.offsets(&mut cc, bx, ids);
        // (cost, field, bits): the least.
        let mut best: Option<(f64, usize, u8)> = None;
        let mut sums: Vec<u64> = Vec::new();
        // A field every rule spans whole parts none of them.
        for d in (0..DIMS).filter(|&d| full[d] < n) {
            let w = bx[d].1;
            let Some(fine) = (1..=maxb.min(w).min(REFINE_MAX_BITS))
                .take_while(|&b| n + (1usize << b) <= limit)
                .last()
            else {
                continue;
            };
            cc.one(d, w, fine);
            for b in 1..=fine {
                // The children's blocks, summed: `sums[c]` over the
                // children before `c`.
                let t = fine - b;
                sums.clear();
                sums.push(0);
                let mut total = 0;
                for c in 0..1usize << b {
                    let k = (cc.lo[(c + 1) << t] - cc.hi[c << t]) as usize;
                    total += k;
                    sums.push(sums[c] + k.div_ceil(BLOCK) as u64);
                }
                if total + (1 << b) > limit {
                    break;
                }
                let s = u32::from(w - b);
                let mut cost =
                    all * REFINE_LEVEL + uniform * sums[1 << b] as f64 / (1u64 << b) as f64;
                for (p, (&(l, h), m)) in cc.offs[d].iter().zip(&mass).enumerate() {
                    let (cl, ch) = ((l >> s) as usize, (h >> s) as usize);
                    let blocks = if cl == ch {
                        (sums[cl + 1] - sums[cl]) as f64
                    } else {
                        // Partial first and last children, whole ones
                        // between.
                        let len = (u64::from(h - l) + 1) as f64;
                        let first = (((cl as u64 + 1) << s) - u64::from(l)) as f64;
                        let last = (u64::from(h) - ((ch as u64) << s) + 1) as f64;
                        let mid = (sums[ch] - sums[cl + 1]) as f64 * (1u64 << s) as f64;
                        (first * (sums[cl + 1] - sums[cl]) as f64
                            + last * (sums[ch + 1] - sums[ch]) as f64
                            + mid)
                            / len
                    };
                    cost += m * blocks.min(upto(p));
                }
                if best.is_none_or(|bb| cost < bb.0) {
                    best = Some((cost, d, b));
                }
            }
        }
        cc.mass = mass;
        self.counts = cc;
        let (cost, d, b) = best?;
        (cost < leaf).then_some((d, b, d, 0))
    }
}

/// What a tree level costs a lookup, in leaf blocks scanned
/// ([`Builder::refine_cut`]): about 35-45 instructions a level against
/// 25-33 a block, but 2 measured best on acl2_1k (1.5: more cuts, past
/// its single tree's budget; 3: fewer, 229 instructions a lookup against
/// 217).
pub(super) const REFINE_LEVEL: f64 = 2.0;

/// Most rules of a ruleset whose small nodes [`Builder::refine_cut`]
/// considers: its cost is about a build more on a 1k-rule set (acl2_1k
/// 187 -> 415 M instructions), half a build on fw4_10k (1.5 -> 2.2 G),
/// past the 10k-rule sets' build time.
pub(super) const REFINE_MAX_RULES: usize = 4096;

/// The most bits of a cut [`Builder::refine_cut`] tries (a node of at
/// most [`Config::binth`] rules).
pub(super) const REFINE_MAX_BITS: u8 = 5;

/// The share of a trace's keys drawn anywhere rather than in a rule's box
/// ([`Builder::refine_cut`]): ClassBench traces (`classbench::trace`,
/// and `pfil-bench acl`) draw half of each.
pub(super) const UNIFORM_KEYS: f64 = 0.5;

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
    /// [`Builder::refine_cut`]'s key mass of each rule.
    pub(super) mass: Vec<f64>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{classbench, Action, Classify, Key, Linear};

    #[test]
    fn a_leaf_of_wildcard_rules_is_cut_for_the_keys_it_does_not_match() {
        // 400 host rules, then 24 TCP rules on wildcard addresses (one
        // port each) and a catch-all: past the hosts' cuts, nodes of the
        // 25 wildcard rules, under `binth`. As one leaf of 4 blocks, a
        // key of another protocol (most keys anywhere) scans it whole;
        // refined, 2.3 on average (without: 4).
        let mut text = String::new();
        for h in 0..400u32 {
            let (a, b) = (h.wrapping_mul(2_654_435_761), h.wrapping_mul(40_503) + 7);
            text.push_str(&format!(
                "@{}/32\t{}/32\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\n",
                std::net::Ipv4Addr::from(a),
                std::net::Ipv4Addr::from(b)
            ));
        }
        for p in 0..24 {
            let port = 1000 + 7 * p;
            text.push_str(&format!(
                "@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t{port} : {port}\t0x06/0xFF\t0x0000/0x0000\n"
            ));
        }
        text.push_str("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\n");
        let rs = classbench::parse(&text, Action::Drop).expect("parses");
        let c = Classifier::new(&rs);
        let lin = Linear::new(&rs);
        let mut x = 1u64;
        let mut entries = 0;
        for _ in 0..1000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let k = Key::ipv4((x >> 32) as u32, x as u32, 55, 1234, (x >> 17) as u16);
            entries += c.lookup_cost(&k).2;
            assert_eq!(c.classify(&k), lin.classify(&k));
        }
        assert!(
            entries <= 1000 * 3 * BLOCK,
            "{entries} entries over 1000 keys"
        );
        for p in 0..24 {
            let k = Key::ipv4(1, 2, 6, 9, 1000 + 7 * p);
            assert_eq!(c.classify(&k), Some(400 + u32::from(p)));
        }
    }
}
