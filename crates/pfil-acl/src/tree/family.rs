//! A family's trees: the partition into subsets, each tree a trial
//! within a budget and a leaf bound, and the splits of the trials that
//! fail.

use super::*;

/// What a tree's trial must meet and how it cuts: the units it may use,
/// the most entries of a leaf, and the leaf threshold of its nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Trial {
    /// 32-byte units the tree may use.
    pub(super) budget: usize,
    /// The most entries a leaf may have.
    pub(super) leaf_limit: usize,
    /// A node with at most this many rules is a leaf.
    pub(super) binth: usize,
    /// The most rules it may cut, summed over its nodes, before it fails
    /// (`usize::MAX`: no limit; [`Config::single_tree_work`]).
    pub(super) work: usize,
}

/// Two parts of a tree's rules ([`Builder::halves`]).
type Parts = (Vec<u32>, Vec<u32>);

impl Builder<'_> {
    /// The trial of a part of `ids.len()` rules of a split tree whose
    /// trial was `t`: the same budget and leaf limit, and leaves up to
    /// the leaf bound if the part has at least [`WIDE_LEAVES_MIN_RULES`].
    pub(super) fn part(&self, t: Trial, ids: &[u32]) -> Trial {
        let binth = if ids.len() >= WIDE_LEAVES_MIN_RULES {
            self.cfg.binth.max(self.cfg.leaf_bound)
        } else {
            self.cfg.binth
        };
        Trial {
            binth,
            leaf_limit: self.cfg.leaf_bound,
            ..t
        }
    }

    /// The trees over one family's rules `ids` (sorted), in order of their
    /// first rule. With at most [`SINGLE_TREE_MAX_RULES`] rules, first one
    /// tree over all of them, kept if it fits in
    /// [`Config::single_tree_budget`] units per rule or
    /// [`SINGLE_TREE_FLOOR`] units (the trial stops at that cap and is
    /// rolled back); otherwise one tree per subset: the
    /// rules split by which of their address fields are small (at least
    /// [`Config::small_prefix`] long), so that wildcard addresses in one
    /// subset do not replicate the rules of another; the subsets small
    /// in one address under 1/[`Config::merge_below`] of the rules join
    /// the general one, and the rules small in both addresses join the
    /// smaller of the subsets small in one that are left (the general
    /// one if none is and they are under that share).
    pub(super) fn family(&mut self, ids: &[u32]) -> Vec<Tree> {
        let width = 1u64 << (32 - u32::from(self.cfg.small_prefix.min(32)));
        let mut subsets: [Vec<u32>; 4] = Default::default();
        for &i in ids {
            let r = &self.br[i as usize];
            let small = |d: usize| u64::from(r.hi[d] - r.lo[d]) < width;
            subsets[usize::from(small(0)) | usize::from(small(1)) << 1].push(i);
        }
        let floor = (ids.len() / self.cfg.merge_below.max(1)).max(16);
        // The one-small subsets under the floor join the general one.
        for s in 1..3 {
            if !subsets[s].is_empty() && subsets[s].len() < floor {
                let moved = std::mem::take(&mut subsets[s]);
                subsets[0].extend(moved);
            }
        }
        // A rule small in both addresses is small in the field the tree of
        // either one-small subset cuts most: it joins the smaller of the
        // two (that is not empty), one tree fewer to walk at little cost
        // in memory (acl2_10k: 4 trees, 441.5 instructions a lookup, 12.5
        // MB; 3 trees, 353.2, 11.9 MB; every set whose subsets changed
        // measured faster, by 15 to 28 %, and no larger: BENCHMARKS.md,
        // issue 24). However few they are: joined to the general subset
        // instead, they gave its tree their indices, the smallest of a
        // firewall set (its first 384 rules in fw3_10k, whose general
        // rules start at 8 403), so that no lookup could skip it (2.95
        // trees a lookup: BENCHMARKS.md, issue 24, "Small in both").
        let to = [1, 2]
            .into_iter()
            .filter(|&s| !subsets[s].is_empty())
            .min_by_key(|&s| subsets[s].len());
        if let Some(to) = to {
            let both = std::mem::take(&mut subsets[3]);
            subsets[to].extend(both);
        } else if !subsets[3].is_empty() && subsets[3].len() < floor {
            let moved = std::mem::take(&mut subsets[3]);
            subsets[0].extend(moved);
        }
        for s in &mut subsets {
            s.sort_unstable();
        }
        let parts = subsets.iter().filter(|s| !s.is_empty()).count();
        // Per tree, a budget in proportion to the family's rules, not the
        // tree's: a subset of a few rules that replicate may need more
        // than its share (acl2_10k: a 10 MiB tree over a third of the
        // rules, which 1 KiB per rule of its own split in two trees and
        // 1.22x the instructions a lookup).
        let budget = (ids.len() * self.cfg.tree_budget).max(SINGLE_TREE_FLOOR);
        let parallel = self.threads > 1 && ids.len() >= PARALLEL_MIN_RULES;
        // A subset's trial: leaves up to twice the bound, as the two trees
        // it would otherwise be split into (a tree whose leaves pass the
        // bound counts as two against `max_trees`, so the worst case
        // stays within `max_trees × leaf_bound`). One walk instead of two
        // where a few leaves are over the bound (a ClassBench ipc1 set
        // of 8 283 rules: 3 trees instead of 7, 23.7 entries compared a
        // lookup instead of 68.6 and a worst case of 152 instead of 352;
        // BENCHMARKS.md, issue 24). A split's parts meet the bound itself.
        let sub = Trial {
            budget,
            leaf_limit: self.cfg.leaf_bound.saturating_mul(2),
            binth: self.cfg.binth,
            work: usize::MAX,
        };
        if self.cfg.single_tree_budget > 0 && ids.len() <= SINGLE_TREE_MAX_RULES && parts > 1 {
            // One tree if it is small enough: the cap stops the build
            // early when it is not, and what it built is dropped.
            // It replaces up to four trees, so its leaves may be up to
            // four times the bound: the worst case of a lookup is the
            // same.
            let leaf_limit = self
                .cfg
                .leaf_bound
                .saturating_mul(parts.min(self.cfg.max_trees));
            let budget = (ids.len() * self.cfg.single_tree_budget).max(SINGLE_TREE_FLOOR);
            let work = match self.cfg.single_tree_work {
                0 => usize::MAX,
                w => budget.saturating_mul(w),
            };
            let single = Trial {
                budget,
                leaf_limit,
                binth: self.cfg.binth,
                work,
            };
            if parallel {
                // The single tree and the subsets' trees at once: the
                // subsets' are wasted if the single tree fits (and
                // cancelled when it does), but when it does not they are
                // built by then (acl2_10k: the failed single tree was
                // half the build).
                let mut jobs = vec![(ids.to_vec(), single)];
                jobs.extend(
                    subsets
                        .iter()
                        .filter(|s| !s.is_empty())
                        .map(|s| (s.clone(), sub)),
                );
                self.speculate(jobs, true);
            }
            if let Some(t) = self.trial_or_take(ids, single) {
                self.memo.clear();
                self.worst = self.worst.max(self.tree_worst);
                return vec![t];
            }
        }
        // Each subset a tree within its budget and the leaf bound, split
        // in halves (by rule order) while it is not and trees are left.
        let mut queue: std::collections::VecDeque<(Vec<u32>, Trial)> = subsets
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(|s| (s, sub))
            .collect();
        let mut trees = Vec::new();
        // Trees with leaves past the bound (each counts as two).
        let mut wide = 0;
        let mut worst = 0;
        while let Some((ids, trial)) = queue.pop_front() {
            if parallel && !self.taken(&ids, trial) {
                // This tree and every one queued after it, at once (the
                // halves of the trees that failed, breadth first).
                let jobs = std::iter::once((&ids, trial))
                    .chain(queue.iter().map(|(q, t)| (q, *t)))
                    .filter(|&(q, t)| !self.taken(q, t))
                    .map(|(q, t)| (q.clone(), t))
                    .collect();
                self.speculate(jobs, false);
            }
            if let Some(t) = self.trial_or_take(&ids, trial) {
                trees.push(t);
                wide += usize::from(self.tree_worst > self.cfg.leaf_bound);
                worst += self.tree_worst;
                continue;
            }
            if ids.len() >= 2 && trees.len() + wide + queue.len() + 2 <= self.cfg.max_trees.max(1) {
                // Breadth first: every subset that fails is split before
                // any part is split again, so the trees end up of about
                // the same size.
                let (a, b) = self.halves(&ids);
                self.stats.split_trees += 1;
                let (ta, tb) = (self.part(trial, &a), self.part(trial, &b));
                queue.push_back((a, ta));
                queue.push_back((b, tb));
                continue;
            }
            // Out of trees: this one as large as its share of what is
            // left under the memory cap lets it be; the build says so if
            // a leaf is over the bound.
            self.tree_worst = 0;
            let share = self.cfg.max_entries.saturating_sub(self.used()) / (queue.len() + 1);
            self.cap = (self.used() + share.max(budget)).min(self.cfg.max_entries);
            self.binth = trial.binth;
            let (root, cut) = self.build_root(FULL, &ids);
            self.binth = self.cfg.binth;
            self.cap = self.cfg.max_entries;
            self.capped = false;
            if self.tree_worst > self.cfg.leaf_bound.max(BLOCK) {
                self.stats.bounded = false;
            }
            trees.push(Tree {
                root,
                cut,
                min_id: ids[0],
            });
            worst += self.tree_worst;
        }
        self.memo.clear();
        self.worst = self.worst.max(worst);
        trees.sort_by_key(|t| t.min_id);
        trees
    }

    /// Two parts of `ids` (sorted) for two trees, each sorted: by shape,
    /// so that each part's rules are narrow in the same field (the rules
    /// whose source is the narrower address and the others; those whose
    /// source port range is the narrower and the others), if that splits
    /// them evenly enough (at least 1/8 on each side); of two such
    /// shapes, the one whose parts' first cuts copy fewer rules
    /// ([`first_copies`](Self::first_copies): a cheap forecast of how
    /// much the parts' trees replicate; the address shape on a tie).
    /// Else the first and the second half in rule order.
    ///
    /// Before, the more even shape won: fw4_10k's subset of 716 rules
    /// went by addresses (224 + 492 rules) where the port shape (175 +
    /// 541) gives 554 instructions a lookup instead of 575, and
    /// `adv-ports-8000` by port ranges first (4 trees, 793 instructions)
    /// where addresses first give 3 trees and 645 (19.7 MiB instead of
    /// 10.7; rte_acl's 118). Forecasting with the root's wider cut (16
    /// bits, space factor 64) chose the same for fw4_10k but not for
    /// `adv-ports-8000`, and cost a build more (a 64k-entry count per
    /// part). Rule order as a third candidate won on `adv-ports-8000`'s
    /// parts by the root forecast (718 instructions) but made trees of
    /// 61 MiB and doubled the build: not taken.
    pub(super) fn halves(&mut self, ids: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let br = self.br;
        let width = |i: u32, d: usize| br[i as usize].hi[d] - br[i as usize].lo[d];
        let mut best: Option<(usize, Parts)> = None;
        for (a, b) in [(0, 1), (2, 3)] {
            let n = ids.iter().filter(|&&i| width(i, a) < width(i, b)).count();
            if n.min(ids.len() - n) >= (ids.len() / 8).max(1) {
                let parts = ids.iter().partition(|&&i| width(i, a) < width(i, b));
                let copies = self.first_copies(&parts);
                if best.as_ref().is_none_or(|b| copies < b.0) {
                    best = Some((copies, parts));
                }
            }
        }
        if let Some((_, parts)) = best {
            return parts;
        }
        let (a, b) = ids.split_at(ids.len() / 2);
        (a.to_vec(), b.to_vec())
    }

    /// The rule copies in the children of a first cut of each of the two
    /// parts `p`: [`Builder::choose_cut`] over the whole space with an
    /// inner node's limits ([`Config::max_cut_bits`], [`Config::spfac`]);
    /// a part no cut separates counts its rules.
    fn first_copies(&mut self, p: &Parts) -> usize {
        let maxb = self.cfg.max_cut_bits;
        let mut sum = 0;
        for ids in [&p.0, &p.1] {
            let Some((d0, b0, d1, b1)) = self.choose_cut(&FULL, ids, maxb, self.cfg.spfac) else {
                sum += ids.len();
                continue;
            };
            let (s0, s1) = (FULL[d0].1 - b0, FULL[d1].1.saturating_sub(b1));
            let offs = &self.counts.offs;
            for (k, &(l0, h0)) in offs[d0][..ids.len()].iter().enumerate() {
                let n0 = ((h0 >> s0) - (l0 >> s0) + 1) as usize;
                let n1 = if b1 == 0 {
                    1
                } else {
                    let (l1, h1) = offs[d1][k];
                    ((h1 >> s1) - (l1 >> s1) + 1) as usize
                };
                sum += n0 * n1;
            }
        }
        sum
    }

    /// Builds a tree over `ids` if it fits in `t.budget` more units (and
    /// the memory cap) with no leaf over `t.leaf_limit` entries, cut down
    /// to `t.binth` rules a leaf; otherwise rolls back what it built and
    /// returns `None`.
    pub(super) fn trial(&mut self, ids: &[u32], t: Trial) -> Option<Tree> {
        self.leaf_limit = t.leaf_limit.max(BLOCK);
        let (mem, blocks, stats) = (self.mem.len(), self.blocks.len(), self.stats);
        self.cap = (self.used() + t.budget).min(self.cfg.max_entries);
        self.trial = true;
        self.tree_worst = 0;
        self.binth = t.binth;
        (self.work, self.work_cap) = (0, t.work);
        let (root, cut, _) = self.trial_root(ids);
        let fits = !self.capped;
        self.binth = self.cfg.binth;
        self.cap = self.cfg.max_entries;
        self.capped = false;
        self.trial = false;
        self.work_cap = usize::MAX;
        if fits {
            return Some(Tree {
                root,
                cut,
                min_id: ids[0],
            });
        }
        self.mem.truncate(mem);
        self.blocks.truncate(blocks);
        self.stats = stats;
        self.leaves
            .retain(|_, r| ((*r & START_MASK) as usize) < blocks);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adversarial::{self, Kind};
    use crate::{classbench, Action, Ruleset};

    /// ClassBench's acl1_1k from the repository's data.
    fn acl1_1k() -> Ruleset {
        let dir = classbench::data_dir().expect("data/classbench");
        let text = std::fs::read_to_string(dir.join("acl1_1k")).expect("reads the set");
        classbench::parse(&text, Action::Drop).expect("parses")
    }

    /// `rs`'s rules as boxes, and their ids.
    fn boxes(rs: &Ruleset) -> (Vec<BRule>, Vec<u32>) {
        let br: Vec<BRule> = rs
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| BRule::of(i, r))
            .collect();
        let ids = (0..br.len() as u32).collect();
        (br, ids)
    }

    /// A trial with room to spare and leaves of any size: only a budget
    /// set on it decides.
    fn roomy(cfg: &Config) -> Trial {
        Trial {
            budget: cfg.max_entries,
            leaf_limit: 1 << 16,
            binth: cfg.binth,
            work: usize::MAX,
        }
    }

    /// A trial given fewer rules to cut than its tree needs fails; given
    /// exactly as many, it is the same tree; and a build whose single
    /// tree would need more than `single_tree_work` rules a unit of its
    /// budget builds the subsets' trees instead (the same lookups).
    #[test]
    fn a_trial_past_its_work_gives_up() {
        let cfg = Config::default();
        let rs = acl1_1k();
        let (br, ids) = boxes(&rs);
        let t = roomy(&cfg);
        let mut b = Builder::new(&br, &cfg, cfg.max_entries);
        let start = b.used();
        assert!(b.trial(&ids, t).is_some());
        let (work, size) = (b.work, b.used() - start);
        assert!(work >= ids.len(), "the root's rules at least: {work}");
        let mut b = Builder::new(&br, &cfg, cfg.max_entries);
        assert!(b
            .trial(
                &ids,
                Trial {
                    work: work - 1,
                    ..t
                }
            )
            .is_none());
        assert_eq!(b.used(), start, "the failed trial is rolled back");
        let mut b = Builder::new(&br, &cfg, cfg.max_entries);
        assert!(b.trial(&ids, Trial { work, ..t }).is_some());
        assert_eq!(b.used() - start, size);
        // acl1_1k's single tree cuts 1.6 rules a unit of its budget.
        let one = Classifier::with_config(&rs, &cfg);
        let given_up = Classifier::with_config(
            &rs,
            &Config {
                single_tree_work: 1,
                ..cfg
            },
        );
        assert_eq!(one.stats().trees, 1);
        assert!(given_up.stats().trees > 1, "{:?}", given_up.stats());
        let lin = crate::Linear::new(&rs);
        for k in crate::classbench::trace(&rs.rules, 2000, 7) {
            use crate::Classify;
            let want = lin.classify(&k);
            assert_eq!((one.classify(&k), given_up.classify(&k)), (want, want));
        }
    }

    /// A trial that fits used at most its budget, whatever the budget:
    /// every node's children and every new leaf are checked before they
    /// are added (before, only nodes about to be cut were, and a tree
    /// could pass its budget by the leaves built after the last check).
    #[test]
    fn merges_never_cost_a_tree_its_trial() {
        // acl1_1k's tree with room to spare takes merges that add words;
        // in a budget just under its size it is built again without
        // them (`Builder::trial_root`), and fits.
        let cfg = Config::default();
        let (br, ids) = boxes(&acl1_1k());
        let t = roomy(&cfg);
        let mut b = Builder::new(&br, &cfg, cfg.max_entries);
        let (start, nodes) = (b.used(), b.stats.nodes);
        assert!(b.trial(&ids, t).is_some());
        let (size, merged) = (b.used() - start, b.stats.nodes - nodes);
        let mut b = Builder::new(&br, &cfg, cfg.max_entries);
        let start = b.used();
        assert!(b
            .trial(
                &ids,
                Trial {
                    budget: size - 1,
                    ..t
                }
            )
            .is_some());
        assert!(b.used() - start < size, "within the smaller budget");
        assert!(b.stats.nodes > merged, "built again with fewer merges");
    }

    #[test]
    fn a_tree_that_fits_is_within_its_budget() {
        let sets = [
            acl1_1k(),
            adversarial::generate(Kind::Ports, 600, 3),
            adversarial::generate(Kind::Wild, 300, 3),
        ];
        let cfg = Config::default();
        for rs in &sets {
            let (br, ids) = boxes(rs);
            let t = roomy(&cfg);
            // The tree's size with room to spare, then budgets around it.
            let mut b = Builder::new(&br, &cfg, cfg.max_entries);
            let start = b.used();
            assert!(
                b.trial(&ids, t).is_some(),
                "{} rules fit in {} units",
                ids.len(),
                cfg.max_entries
            );
            let size = b.used() - start;
            let (mut kept, mut failed) = (0, 0);
            for budget in (size.saturating_sub(600)..=size + 50).step_by(7) {
                let mut b = Builder::new(&br, &cfg, cfg.max_entries);
                let start = b.used();
                match b.trial(&ids, Trial { budget, ..t }) {
                    Some(_) => {
                        kept += 1;
                        let used = b.used() - start;
                        assert!(used <= budget, "{used} units in a budget of {budget}");
                    }
                    None => {
                        failed += 1;
                        assert_eq!(b.used(), start, "a failed trial is rolled back");
                    }
                }
            }
            assert!(
                kept > 0 && failed > 0,
                "budgets on both sides: {kept} {failed}"
            );
        }
    }
}
