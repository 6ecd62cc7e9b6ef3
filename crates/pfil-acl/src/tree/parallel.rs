//! Trials built in parallel, each in arrays of its own, and taken into
//! the build in the serial order (see the module docs, "Build time").

use super::*;

/// What a trial built apart ([`Builder::apart`]) says of the serial
/// build's trial over the same rules, budget and leaf limit.
pub(super) enum Outcome {
    /// It fits: the tree in arrays of its own, for [`Builder::adopt`].
    Fits(Box<Apart>),
    /// It failed after `units`: on a leaf over the limit (`made` empty),
    /// which the serial trial meets the same way if `units` more fit
    /// under [`Config::max_entries`]; or on its budget, having made the
    /// leaves `made`, which the serial trial meets too if it shares none
    /// of them with the trees before it (then it uses the same units at
    /// every node) and the budget is not cut by `max_entries`.
    Fails { units: usize, made: Vec<Vec<u32>> },
    /// It was cancelled: the serial trial runs.
    Unknown,
}

/// A tree built in arrays of its own.
pub(super) struct Apart {
    pub(super) tree: Tree,
    pub(super) mem: Vec<u64>,
    pub(super) blocks: Vec<Block>,
    /// Its leaves in the order they were made: rule list and reference.
    pub(super) leaves: Vec<(Vec<u32>, u64)>,
    /// Its internal nodes and deepest leaf.
    pub(super) nodes: usize,
    pub(super) max_depth: usize,
    /// Entries of its largest leaf.
    pub(super) tree_worst: usize,
    /// The units it used.
    pub(super) units: usize,
    /// The tree was built again without its merges' growth
    /// ([`Builder::trial_root`]): here, with leaves the build already
    /// has, the first one may have fitted.
    pub(super) lean: bool,
}

#[cfg(test)]
thread_local! {
    /// Trials this thread's builds took from the memo (adopted, or
    /// failures taken) instead of building them again: the tests check
    /// that the parallel path is taken, not only that its result is the
    /// serial build's.
    pub(super) static TAKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Builder<'_> {
    /// Whether the memo holds the trial `t` over `ids`.
    pub(super) fn taken(&self, ids: &[u32], t: Trial) -> bool {
        self.memo.iter().any(|m| m.0 == ids && m.1 == t)
    }

    /// [`trial`](Self::trial), or what the memo knows of it: a tree built
    /// apart that fits is adopted, one that failed on a leaf is a failure,
    /// without building anything again.
    pub(super) fn trial_or_take(&mut self, ids: &[u32], t: Trial) -> Option<Tree> {
        let budget = t.budget;
        let at = self.memo.iter().position(|m| m.0 == ids && m.1 == t);
        if let Some(at) = at {
            // The serial trial meets no memory cap the one apart did not:
            // it shares leaves with earlier trees, so it uses at most as
            // many units at every node; and at most `units` in all, which
            // must fit under `max_entries` too.
            let (used, max) = (self.used(), self.cfg.max_entries);
            let room = |units: usize| used + units.max(budget) < max;
            match self.memo.swap_remove(at).2 {
                Outcome::Fits(a)
                    if room(a.units)
                        && (!a.lean
                            || a.leaves.iter().all(|l| !self.leaves.contains_key(&l.0))) =>
                {
                    #[cfg(test)]
                    TAKEN.with(|t| t.set(t.get() + 1));
                    return Some(self.adopt(*a));
                }
                Outcome::Fails { units, made }
                    if room(units) && made.iter().all(|l| !self.leaves.contains_key(l)) =>
                {
                    #[cfg(test)]
                    TAKEN.with(|t| t.set(t.get() + 1));
                    return None;
                }
                _ => {}
            }
        }
        self.trial(ids, t)
    }

    /// Builds the trials `jobs` (rules, budget, leaf limit) apart
    /// ([`apart`](Self::apart)) on up to [`threads`](Self::threads)
    /// threads, into the memo. `first_wins`: once the first job fits, the
    /// others are cancelled (the build needs none of them), and it has no
    /// halves. A thread out of jobs takes the halves
    /// ([`halves`](Self::halves)) of the jobs still being built, which the
    /// build needs next if they fail (fw4_10k: a subset of 716 rules
    /// fails after most of the build's time, and its halves were built
    /// after it).
    pub(super) fn speculate(&mut self, mut jobs: Vec<(Vec<u32>, Trial)>, first_wins: bool) {
        let (br, cfg) = (self.br, self.cfg);
        let own = jobs.len();
        // The halves of each job (but a first that wins), after the jobs,
        // with the trials the build gives them ([`Builder::part`]).
        let mut parent = vec![usize::MAX; own];
        for k in usize::from(first_wins)..own {
            if jobs[k].0.len() >= 2 {
                let (a, b) = self.halves(&jobs[k].0);
                let (ta, tb) = (self.part(jobs[k].1, &a), self.part(jobs[k].1, &b));
                jobs.extend([(a, ta), (b, tb)]);
                parent.extend([k, k]);
            }
        }
        // The jobs built and found to fit: their halves are not needed.
        let fitted: Vec<AtomicBool> = (0..own).map(|_| AtomicBool::new(false)).collect();
        let next = AtomicUsize::new(0);
        let cancel = AtomicBool::new(false);
        let work = || {
            let mut done = Vec::new();
            loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some((ids, t)) = jobs.get(j) else {
                    break;
                };
                if cancel.load(Ordering::Relaxed) {
                    break;
                }
                if j >= own && fitted[parent[j]].load(Ordering::Relaxed) {
                    // Its job is built and fits: the build does not
                    // split it. (One that failed, or is still being
                    // built, is split next: its halves are built here.)
                    continue;
                }
                // Only a first that wins cancels the other jobs; a half
                // stops when its job is found to fit (it was started
                // while the job was being built: adv-wild-8000's three
                // subsets fit, and a thread building a half of one held
                // up the build's join).
                let stop = if j >= own {
                    Some(&fitted[parent[j]])
                } else {
                    (first_wins && j > 0).then_some(&cancel)
                };
                let out = Builder::apart(br, cfg, ids, *t, stop);
                if j < own && matches!(out, Outcome::Fits(_)) {
                    fitted[j].store(true, Ordering::Relaxed);
                }
                if j == 0 && first_wins && matches!(out, Outcome::Fits(_)) {
                    cancel.store(true, Ordering::Relaxed);
                    // No half is needed either.
                    for f in &fitted {
                        f.store(true, Ordering::Relaxed);
                    }
                }
                done.push((j, out));
            }
            done
        };
        // As many threads as jobs, the halves included (one subset that
        // fails: its halves are built beside it).
        let threads = self.threads.min(jobs.len()).max(1);
        let done: Vec<(usize, Outcome)> = std::thread::scope(|s| {
            let helpers: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
            let mut done = work();
            for h in helpers {
                match h.join() {
                    Ok(d) => done.extend(d),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            done
        });
        for (j, out) in done {
            let (ids, t) = &jobs[j];
            self.memo.push((ids.clone(), *t, out));
        }
    }

    /// The trial `t` over `ids`, built in arrays of its own (an empty
    /// builder), stopped when `cancel` is set.
    pub(super) fn apart(
        br: &[BRule],
        cfg: &Config,
        ids: &[u32],
        t: Trial,
        cancel: Option<&AtomicBool>,
    ) -> Outcome {
        let budget = t.budget;
        let mut b = Builder::new(br, cfg, cfg.max_entries);
        b.cancel = cancel;
        let start = b.used();
        b.leaf_limit = t.leaf_limit.max(BLOCK);
        b.binth = t.binth;
        b.cap = (start + budget).min(cfg.max_entries);
        b.trial = true;
        b.work_cap = t.work;
        let (root, cut, lean) = b.trial_root(ids);
        let units = b.real_used() - start;
        if b.cancelled || (b.budget_hit && start + budget >= cfg.max_entries) {
            return Outcome::Unknown;
        }
        if b.capped {
            let made = if b.budget_hit {
                b.leaves.into_keys().collect()
            } else {
                Vec::new()
            };
            return Outcome::Fails { units, made };
        }
        let mut leaves: Vec<(Vec<u32>, u64)> = b.leaves.into_iter().collect();
        leaves.sort_unstable_by_key(|&(_, r)| r & START_MASK);
        Outcome::Fits(Box::new(Apart {
            tree: Tree {
                root,
                cut,
                min_id: ids[0],
            },
            mem: b.mem,
            blocks: b.blocks,
            leaves,
            nodes: b.stats.nodes,
            max_depth: b.stats.max_depth,
            tree_worst: b.tree_worst,
            units,
            lean,
        }))
    }

    /// Takes a tree built apart into the build, as [`trial`](Self::trial)
    /// would have built it here: its nodes after the others (references
    /// moved by the offset), its leaves in the order it made them, each
    /// one the build already has shared instead of copied.
    pub(super) fn adopt(&mut self, a: Apart) -> Tree {
        let base = self.mem.len() as u64;
        debug_assert!(base + a.mem.len() as u64 <= START_MASK);
        // Its leaves' references here, by their first block there.
        let mut moved = vec![EMPTY; a.blocks.len()];
        for (ids, r) in a.leaves {
            let from = (r & START_MASK) as usize;
            moved[from] = match self.leaves.get(&ids) {
                Some(&here) => here,
                None => {
                    let blocks = ((r >> 32) & BLOCKS_MASK) as usize;
                    let start = self.blocks.len() as u64;
                    self.blocks
                        .extend_from_slice(&a.blocks[from..from + blocks]);
                    self.stats.leaves += 1;
                    self.stats.max_leaf = self.stats.max_leaf.max(ids.len());
                    let here = r & !START_MASK | start;
                    self.leaves.insert(ids, here);
                    here
                }
            };
        }
        let fix = |r: u64| {
            if r & LEAF == 0 {
                r + base
            } else if r == EMPTY {
                EMPTY
            } else {
                moved[(r & START_MASK) as usize]
            }
        };
        self.mem.extend(a.mem.iter().map(|&r| fix(r)));
        self.stats.nodes += a.nodes;
        self.stats.max_depth = self.stats.max_depth.max(a.max_depth);
        self.tree_worst = a.tree_worst;
        Tree {
            root: fix(a.tree.root),
            ..a.tree
        }
    }
}
