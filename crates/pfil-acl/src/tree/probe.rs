//! The root probe ([`Config::probe_root`]): a tree's root children cut,
//! not built, and merged before the tree is built, so that a root cut
//! their merges widen is taken first and its children are cut for the
//! boxes they end up in; and the build's choice between such a tree and
//! the plain one, by the cost of a trace of the rules' own keys.

use super::*;

/// The most bits a probe ([`Builder::probe_root`]) adds to the root cut
/// chosen: the bits its children's merged cuts add past that (acl4_1k: 4,
/// acl3_1k: 5) cost memory (acl4_1k 1.10 MB with 3, 1.54 MB with 4) for
/// 2-8 % of its instructions.
pub(super) const PROBE_MAX_BITS: u8 = 3;

impl Builder<'_> {
    /// Probes the root of `ids` in box `bx` (cuts of at most `maxb`
    /// bits): its children are cut, not built, and their cuts taken in
    /// where they fit ([`Builder::merge`]). If that grew the root's cut,
    /// [`forced`](Self::forced) is the grown cut (at most
    /// [`PROBE_MAX_BITS`] more) for the build that follows: built under
    /// the chosen cut, the children were cut in boxes as wide as its
    /// parts. Everything the probe added is rolled back.
    pub(super) fn probe_root(&mut self, bx: Boxx, ids: &[u32], maxb: u8) {
        let (mem, blocks, stats, worst, capped, budget_hit) = (
            self.mem.len(),
            self.blocks.len(),
            self.stats,
            self.tree_worst,
            self.capped,
            self.budget_hit,
        );
        self.probe = true;
        let probed = self.split(bx, ids, 0, maxb, self.cfg.root_spfac);
        self.probe = false;
        self.forced = match probed {
            Ok((c, _)) if !self.capped => self.grew(&bx, c),
            _ => None,
        };
        self.probed |= self.forced.is_some();
        if let (Some((d0, b0, d1, b1)), Some((_, c0, _, c1))) = (self.forced, self.chosen) {
            // At most `PROBE_MAX_BITS` more: the bits merges add are
            // the last field's lowest.
            let extra = (b0 + b1 - c0 - c1).min(PROBE_MAX_BITS);
            self.forced = Some(if b1 > 0 {
                (d0, b0, d1, c1 + extra - (b0 - c0))
            } else {
                (d0, c0 + extra, d1, 0)
            });
        }
        self.mem.truncate(mem);
        self.blocks.truncate(blocks);
        self.stats = stats;
        self.leaves
            .retain(|_, r| ((*r & START_MASK) as usize) < blocks);
        self.tree_worst = worst;
        self.capped = capped;
        self.budget_hit = budget_hit;
        self.pending = 0;
        self.grown = 0;
        self.chosen = None;
    }

    /// The root cut `c` of box `bx` as [`Builder::choose_cut`] names it,
    /// if it cuts the top bits of each field (of two distinct fields) and
    /// more bits than the cut chosen for the root ([`chosen`](Self::chosen)):
    /// merges grew it.
    fn grew(&self, bx: &Boxx, c: Cut6) -> Option<Cut> {
        let (d0, s0, b0, d1, s1, b1) = c;
        let top = |d: usize, s: u8, b: u8| s + b == bx[d].1;
        let ok = top(d0, s0, b0) && (b1 == 0 || (d1 != d0 && top(d1, s1, b1)));
        let (_, c0, _, c1) = self.chosen?;
        (ok && b0 + b1 > c0 + c1).then_some((d0, b0, d1, b1))
    }
}

/// The leaf entries a lookup's visit of an internal node is worth in
/// time, when a build weighs a probed root against the plain one
/// ([`Config::probe_root`]): in instructions a level costs 14 entries
/// (40 against 22 a block of 8), but the leaf scans' branches and lines
/// cost more than they count. Measured: acl4_1k probed, 0.53 fewer
/// levels and 0.57 more entries a lookup, 6 % faster; acl3_1k, 0.32
/// fewer and 1.57 more, 10 % slower; so a level is worth between 1.1 and
/// 4.9 entries.
const LEVEL_ENTRIES: f64 = 2.5;

/// Keys of the trace a build weighs a probed root on.
const PROBE_TRACE: usize = 4000;

impl Classifier {
    /// This build, whose probe widened a root cut (fewer levels a
    /// lookup, but its leaves can hold more entries), or the same
    /// ruleset built plain: the one whose lookups of a trace of the
    /// rules' own keys cost less, a level weighed as [`LEVEL_ENTRIES`]
    /// leaf entries.
    pub(super) fn or_plain(self, rs: &Ruleset, cfg: &Config, threads: usize) -> Classifier {
        let plain = Config {
            probe_root: false,
            ..*cfg
        };
        let (p, _) = Classifier::with_threads(rs, &plain, threads);
        let keys = crate::classbench::trace(&rs.rules, PROBE_TRACE, 1);
        if self.trace_cost(&keys) <= p.trace_cost(&keys) {
            self
        } else {
            p
        }
    }

    /// What a lookup of each of `keys` costs, summed: internal nodes
    /// weighed as [`LEVEL_ENTRIES`] leaf entries each, and leaf entries.
    fn trace_cost(&self, keys: &[Key]) -> f64 {
        keys.iter()
            .map(|k| {
                let (_, nodes, entries) = self.lookup_cost(k);
                nodes as f64 * LEVEL_ENTRIES + entries as f64
            })
            .sum()
    }
}
