//! The build of one tree: the rules as boxes, the builder's arrays, and
//! the cuts and leaves of each node (the family's trees around it:
//! `family.rs`).

use super::*;

/// A rule as boxes in the five tree fields.
#[derive(Clone, Copy, Debug)]
pub(super) struct BRule {
    pub(super) lo: [u32; DIMS],
    pub(super) hi: [u32; DIMS],
    pub(super) lane: Lane,
    /// Matches every IPv4 key in its box (no conditions beyond the box
    /// and IP): may prune the rules after it.
    pub(super) plain: bool,
    /// Needs ports and names a range of protocols: its protocol lane
    /// (`[lo << 1 | 1, hi << 1 | 1]`) is exact for keys with ports (odd
    /// lane values) and also takes keys without them whose protocol is
    /// above `lo`, which the full rule rejects. Its lanes carry no
    /// [`EXTRA_ID`]; a leaf holding one is marked [`LOOSE`].
    pub(super) loose: bool,
}

impl BRule {
    pub(super) fn of(i: usize, r: &Rule) -> BRule {
        let (s, d) = (
            r.src.v4_range().unwrap_or((0, 0)),
            r.dst.v4_range().unwrap_or((0, 0)),
        );
        BRule::with_addrs(i, r, s, d, false, false)
    }

    /// Rule `r` in the IPv6 tree: its addresses projected on the words
    /// `w`, confirmed on the full rule unless the projection is exact for
    /// the keys under `w`'s upper words ([`V6Words::exact`]; a key not
    /// under them confirms every hit, [`Classifier::lookup_v6`]).
    pub(super) fn of_v6(i: usize, r: &Rule, w: V6Words) -> BRule {
        let (s, d) = (v6_word_range(r.src, w.src), v6_word_range(r.dst, w.dst));
        // Exact only for the keys under the upper words: never prunes
        // the rules after it (a key not under them may match those).
        let exact = w.exact(r.src, r.dst);
        BRule::with_addrs(i, r, s, d, !exact, exact && w.names_above(r.src, r.dst))
    }

    /// Rule `r` with source and destination ranges `s` and `d` in the
    /// address fields; `confirm`: every lane hit is checked on the rule;
    /// `conditional`: the lanes are exact only for some keys (the others
    /// confirm every hit), so the rule prunes nothing.
    pub(super) fn with_addrs(
        i: usize,
        r: &Rule,
        s: (u32, u32),
        d: (u32, u32),
        confirm: bool,
        conditional: bool,
    ) -> BRule {
        let lo = [s.0, d.0, u32::from(r.sport.0), u32::from(r.dport.0), 0];
        let hi = [s.1, d.1, u32::from(r.sport.1), u32::from(r.dport.1), 0];
        let needs_ports = r.needs() & has::PORTS != 0;
        let (p0, p1) = (u16::from(r.proto.0) << 1, u16::from(r.proto.1) << 1 | 1);
        // The protocol lane holds `proto << 1 | has_ports`: a rule that
        // needs ports and names one protocol is exact; one with a range of
        // protocols that needs ports is a superset, confirmed on the rule.
        let pr = if needs_ports { (p0 | 1, p1) } else { (p0, p1) };
        // The fifth cut field is the protocol lane, so that a rule needing
        // ports is an exact box there and may prune the rules after it.
        let (mut lo, mut hi) = (lo, hi);
        lo[4] = u32::from(pr.0);
        hi[4] = u32::from(pr.1);
        let extra = confirm
            || r.vlan.is_some()
            || r.tcp_flags.1 != 0
            || r.icmp_type.is_some()
            || r.icmp_code.is_some();
        // Exact but for keys without ports: confirmed only for those
        // (every key of a TCP or UDP 5-tuple has them).
        let loose = !extra && needs_ports && r.proto.0 != r.proto.1;
        BRule {
            lo,
            hi,
            plain: !extra && !loose && !conditional,
            loose,
            lane: Lane {
                src: s,
                dst: d,
                sp: r.sport,
                dp: r.dport,
                pr,
                id: i as u32 | if extra { EXTRA_ID } else { 0 },
            },
        }
    }
}

/// A cut: field and bits of the first field, field and bits of the
/// second (0 bits: none).
pub(super) type Cut = (usize, u8, usize, u8);

/// An aligned box: per field, the low end and log2 of the width.
pub(super) type Boxx = [(u32, u8); DIMS];

/// The box of a tree's root: every field whole (the protocol lane is 9
/// bits).
pub(super) const FULL: Boxx = [(0, 32), (0, 32), (0, 16), (0, 16), (0, 9)];

pub(super) fn box_hi(b: (u32, u8)) -> u32 {
    if b.1 >= 32 {
        u32::MAX
    } else {
        b.0 + ((1u32 << b.1) - 1)
    }
}

/// The leaves' map hashes rule lists with a multiply-rotate hash (the
/// FxHash of rustc): the keys are the builder's own, not a sender's, and
/// SipHash cost a tenth of a 10k-rule build.
#[derive(Default)]
pub(super) struct ListHasher(u64);

impl std::hash::Hasher for ListHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for c in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

pub(super) struct Builder<'a> {
    pub(super) br: &'a [BRule],
    pub(super) cfg: &'a Config,
    pub(super) mem: Vec<u64>,
    pub(super) blocks: Vec<Block>,
    pub(super) leaves: HashMap<Vec<u32>, u64, std::hash::BuildHasherDefault<ListHasher>>,
    pub(super) stats: Stats,
    /// Memory cap in 32-byte units (block lanes plus node words / 4).
    pub(super) cap: usize,
    /// The cap was reached (or, in a trial, a leaf outgrew
    /// [`Config::leaf_bound`]): some nodes became leaves early.
    pub(super) capped: bool,
    /// A trial build ([`Builder::trial`]): stop at the cap or at a leaf
    /// over the bound, the tree will be thrown away.
    pub(super) trial: bool,
    /// Rules a trial has cut so far (a node's rules, summed over the
    /// nodes), and the most it may ([`Trial::work`]).
    pub(super) work: usize,
    pub(super) work_cap: usize,
    /// Entries of the largest leaf of the tree being built.
    pub(super) tree_worst: usize,
    /// In a trial, the most entries a leaf may have.
    pub(super) leaf_limit: usize,
    /// The most entries a lookup compares in the families built so far.
    pub(super) worst: usize,
    /// [`Builder::choose_cut`]'s counts and buffers.
    pub(super) counts: Counts,
    /// Threads the build may use ([`Config::threads`]).
    pub(super) threads: usize,
    /// Trials built apart ([`Builder::speculate`]), by rules, budget and
    /// leaf limit, until the serial build takes them.
    pub(super) memo: Vec<(Vec<u32>, Trial, Outcome)>,
    /// In a trial built apart: set when the build no longer needs it.
    pub(super) cancel: Option<&'a AtomicBool>,
    /// The memory cap stopped a node.
    pub(super) budget_hit: bool,
    /// The trial was cancelled ([`cancel`](Self::cancel)).
    pub(super) cancelled: bool,
    /// A node with at most this many rules is a leaf: [`Config::binth`],
    /// or a trial's ([`Trial::binth`]) while it is built.
    pub(super) binth: usize,
    /// Node words built and not yet in `mem` ([`Child::Node`]): counted
    /// against the cap as if they were.
    pub(super) pending: usize,
    /// Node words merges added to the tree being built beyond the words
    /// they replaced ([`Builder::merge`]).
    pub(super) grown: usize,
    /// Merges may not add words (a tree built again after its merges
    /// took it past its budget).
    pub(super) lean: bool,
    /// The root's cut, taken instead of [`Builder::choose_cut`]'s (a
    /// root built again with the cut its merges grew:
    /// [`Builder::build_root`]).
    pub(super) forced: Option<Cut>,
    /// The cut chosen for the last root split, before its merges.
    pub(super) chosen: Option<Cut>,
    /// A probe of the root's cut: its children are cut, not built
    /// ([`Builder::build_root`]).
    pub(super) probe: bool,
    /// A probe widened some tree's root cut ([`Builder::build_root`]).
    pub(super) probed: bool,
}

/// A node's cut as it is stored: field, lowest bit and bits of the first
/// cut field, the same for the second (0 bits: none).
pub(super) type Cut6 = (usize, u8, u8, usize, u8, u8);

/// A child built by [`Builder::split`]: a reference (a leaf, or a node
/// already in `mem`), or an internal node whose children's references
/// are not in `mem` yet, so that its parent may take them into its own
/// cut ([`Builder::merge`]).
pub(super) enum Child {
    Ref(u64),
    Node(Cut6, Vec<u64>),
}

impl<'a> Builder<'a> {
    pub(super) fn new(br: &'a [BRule], cfg: &'a Config, cap: usize) -> Builder<'a> {
        Builder {
            br,
            cfg,
            mem: Vec::new(),
            // Block 0 is padding: the first block of the empty leaf
            // ([`EMPTY`], no blocks), which a batch tests without a branch.
            blocks: vec![Block::PAD],
            leaves: HashMap::default(),
            stats: Stats {
                bounded: true,
                ..Stats::default()
            },
            cap,
            capped: false,
            trial: false,
            work: 0,
            work_cap: usize::MAX,
            tree_worst: 0,
            leaf_limit: 0,
            worst: 0,
            counts: Counts::default(),
            threads: 1,
            memo: Vec::new(),
            cancel: None,
            budget_hit: false,
            cancelled: false,
            binth: cfg.binth,
            pending: 0,
            grown: 0,
            lean: false,
            forced: None,
            chosen: None,
            probe: false,
            probed: false,
        }
    }

    /// Builds a tree's root for `ids` (sorted): a leaf, or the offset of
    /// its children and its cut, which may be up to
    /// [`Config::root_cut_bits`] wide.
    pub(super) fn build_root(&mut self, bx: Boxx, ids: &[u32]) -> (u64, RootCut) {
        let maxb = self.cfg.root_cut_bits.clamp(1, ROOT_MAX_BITS);
        self.grown = 0;
        self.chosen = None;
        if self.cfg.probe_root && self.br.len() <= REFINE_MAX_RULES {
            self.probe_root(bx, ids, maxb);
        }
        let root = match self.split(bx, ids, 0, maxb, self.cfg.root_spfac) {
            Ok(((d0, s0, b0, d1, s1, b1), kids)) => {
                let o = self.mem.len();
                self.mem.extend_from_slice(&kids);
                (o as u64, RootCut::of(d0, s0, b0, d1, s1, b1))
            }
            Err(leaf) => (leaf, RootCut::default()),
        };
        self.pending = 0;
        self.forced = None;
        root
    }

    /// [`build_root`](Self::build_root) in a trial: if the tree fits
    /// only without the words its merges added ([`used`](Self::used)),
    /// it is rolled back and built again with merges that add none
    /// ([`lean`](Self::lean)); whether it was is the third value. The
    /// same leaves, so the same fit, up to the merges that shrink.
    pub(super) fn trial_root(&mut self, ids: &[u32]) -> (u64, RootCut, bool) {
        let (mem, blocks, stats) = (self.mem.len(), self.blocks.len(), self.stats);
        let (root, cut) = self.build_root(FULL, ids);
        if self.capped || self.real_used() <= self.cap {
            return (root, cut, false);
        }
        self.mem.truncate(mem);
        self.blocks.truncate(blocks);
        self.stats = stats;
        self.leaves
            .retain(|_, r| ((*r & START_MASK) as usize) < blocks);
        self.tree_worst = 0;
        self.lean = true;
        let (root, cut) = self.build_root(FULL, ids);
        self.lean = false;
        (root, cut, true)
    }

    /// Builds the subtree for `ids` (sorted, all meeting `bx`): a leaf's
    /// reference, or an internal node not yet in `mem`.
    pub(super) fn build(&mut self, bx: Boxx, ids: &[u32], depth: usize) -> Child {
        match self.split(bx, ids, depth, self.cfg.max_cut_bits, self.cfg.spfac) {
            Ok((cut, kids)) => Child::Node(cut, kids),
            Err(leaf) => Child::Ref(leaf),
        }
    }

    /// Cuts the node for `ids` (sorted, all meeting `bx`) with at most
    /// `maxb` bits and space factor `spfac` and builds its children: the
    /// cut as (field, shift, bits) twice and the children's references,
    /// not yet in `mem` (with its children's cuts taken in where that
    /// saves a level: [`merge`](Self::merge)); or the node's leaf
    /// reference if it is a leaf.
    #[allow(clippy::type_complexity)]
    pub(super) fn split(
        &mut self,
        bx: Boxx,
        ids: &[u32],
        depth: usize,
        maxb: u8,
        spfac: f64,
    ) -> Result<(Cut6, Vec<u64>), u64> {
        if self.trial && self.capped {
            // A trial past its cap: it will be thrown away.
            return Err(EMPTY);
        }
        if self.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            self.capped = true;
            self.cancelled = true;
            return Err(EMPTY);
        }
        if self.trial {
            self.work += ids.len();
            if self.work > self.work_cap {
                // Past the rules a trial may cut: it fails.
                self.capped = true;
                return Err(EMPTY);
            }
        }
        // Prune after the first rule covering the whole box.
        let ids = match ids.iter().position(|&i| {
            let r = &self.br[i as usize];
            r.plain && (0..DIMS).all(|d| r.lo[d] <= bx[d].0 && r.hi[d] >= box_hi(bx[d]))
        }) {
            Some(p) => &ids[..=p],
            None => ids,
        };
        if depth >= MAX_DEPTH || self.over_budget() {
            return Err(self.leaf(ids, depth));
        }
        let cut = if ids.len() <= self.binth {
            // A leaf, unless it is more than a block and a cut leaves
            // fewer to scan (in a small ruleset; not in a part cut to
            // wide leaves on purpose).
            if ids.len() <= BLOCK
                || self.binth != self.cfg.binth
                || self.br.len() > REFINE_MAX_RULES
            {
                return Err(self.leaf(ids, depth));
            }
            self.refine_cut(&bx, ids, maxb, spfac)
        } else if let (0, Some(c)) = (depth, self.forced) {
            // The offsets `choose_cut` would have left.
            let mut cc = std::mem::take(&mut self.counts);
            self.offsets(&mut cc, &bx, ids);
            self.counts = cc;
            Some(c)
        } else {
            self.choose_cut(&bx, ids, maxb, spfac)
        };
        if depth == 0 {
            self.chosen = cut;
        }
        let Some((d0, b0, d1, b1)) = cut else {
            return Err(self.leaf(ids, depth));
        };
        let s0 = bx[d0].1 - b0;
        let s1 = bx[d1].1.saturating_sub(b1);
        let nchild = 1usize << (b0 + b1);
        // The children's rule lists, in one buffer: counted, then placed.
        // Each rule's children are read off the offsets into the box that
        // `choose_cut` left in `counts` (those of `ids`, in order).
        let mut cc = std::mem::take(&mut self.counts);
        let spans = &mut cc.spans;
        spans.clear();
        let (z0, z1) = (u32::from(s0), u32::from(s1));
        if b1 == 0 {
            spans.extend(
                cc.offs[d0]
                    .iter()
                    .map(|&(l, h)| [(l >> z0) as usize, (h >> z0) as usize, 0, 0]),
            );
        } else {
            spans.extend(
                cc.offs[d0]
                    .iter()
                    .zip(&cc.offs[d1])
                    .map(|(&(l0, h0), &(l1, h1))| {
                        [
                            (l0 >> z0) as usize,
                            (h0 >> z0) as usize,
                            (l1 >> z1) as usize,
                            (h1 >> z1) as usize,
                        ]
                    }),
            );
        }
        // Per child, its rules: a difference array along each row (child
        // of the first field), summed; then `at` is where each child's
        // rules start in `flat`.
        let cols = (1usize << b1) + 1;
        let diff = &mut cc.fill;
        diff.clear();
        diff.resize((1usize << b0) * cols, 0);
        for &[l0, h0, l1, h1] in spans.iter() {
            for row in l0..=h0 {
                diff[row * cols + l1] += 1;
                diff[row * cols + h1 + 1] -= 1;
            }
        }
        let mut at = Vec::with_capacity(nchild + 1);
        at.push(0usize);
        let (mut sum, mut all) = (0usize, true);
        for row in diff.chunks_exact(cols) {
            let mut k = 0isize;
            for &x in &row[..cols - 1] {
                k += x;
                sum += k as usize;
                all &= k as usize == ids.len();
                at.push(sum);
            }
        }
        if all {
            // The cut separated nothing.
            self.counts = cc;
            return Err(self.leaf(ids, depth));
        }
        if self.probe && depth > 0 {
            // A probe: the cut, not the children.
            self.counts = cc;
            if !self.room(nchild, 0) {
                return Err(self.leaf(ids, depth));
            }
            self.pending += nchild;
            self.stats.nodes += 1;
            return Ok(((d0, s0, b0, d1, s1, b1), vec![EMPTY; nchild]));
        }
        let mut flat = vec![0u32; at[nchild]];
        let fill = &mut cc.fill;
        fill.clear();
        fill.extend(at[..nchild].iter().map(|&a| a as isize));
        for (&i, &[l0, h0, l1, h1]) in ids.iter().zip(spans.iter()) {
            for c0 in l0..=h0 {
                for c in c0 << b1 | l1..=c0 << b1 | h1 {
                    flat[fill[c] as usize] = i;
                    fill[c] += 1;
                }
            }
        }
        self.counts = cc;
        if !self.room(nchild, 0) {
            // The children's references would pass the cap: a trial
            // fails, any other tree gets a leaf here.
            return Err(self.leaf(ids, depth));
        }
        self.pending += nchild;
        self.stats.nodes += 1;
        let mut kids: Vec<Child> = Vec::with_capacity(nchild);
        // The previous child: its rules and box.
        let mut prev: Option<(&[u32], Boxx)> = None;
        for (c, ch) in (0..nchild).map(|c| (c, &flat[at[c]..at[c + 1]])) {
            let mut cb = bx;
            let c0 = (c >> b1) as u32;
            cb[d0] = (bx[d0].0 + (c0 << s0), s0);
            if b1 > 0 {
                let c1 = (c & ((1 << b1) - 1)) as u32;
                cb[d1] = (bx[d1].0 + (c1 << s1), s1);
            }
            let k = match prev {
                // No rules: an empty leaf (as `build` would make it).
                _ if ch.is_empty() => {
                    self.stats.max_depth = self.stats.max_depth.max(depth + 1);
                    Child::Ref(EMPTY)
                }
                // The same rules, each covering both boxes where they
                // differ: every cut and leaf below would be the same, so
                // the child is the previous one's subtree, shared (wide
                // rules make runs of such children; rte_acl shares
                // nodes too).
                Some((pch, pb)) if pch == ch && self.covers(ch, &pb, &cb) => {
                    let last = kids.last_mut().expect("a previous child");
                    Child::Ref(self.flush(last))
                }
                _ => self.build(cb, ch, depth + 1),
            };
            kids.push(k);
            prev = Some((ch, cb));
        }
        let limit = if depth == 0 { maxb } else { ROOT_MAX_BITS };
        Ok(self.merge((d0, s0, b0, d1, s1, b1), kids, limit))
    }

    /// Whether every rule of `ids` covers boxes `a` and `b` whole in each
    /// field where they differ: a subtree built for `ids` in one box is
    /// then the subtree for the other (the build sees a rule only through
    /// its part inside the box).
    pub(super) fn covers(&self, ids: &[u32], a: &Boxx, b: &Boxx) -> bool {
        (0..DIMS).filter(|&d| a[d] != b[d]).all(|d| {
            let (lo, hi) = (a[d].0.min(b[d].0), box_hi(a[d]).max(box_hi(b[d])));
            ids.iter().all(|&i| {
                let r = &self.br[i as usize];
                r.lo[d] <= lo && r.hi[d] >= hi
            })
        })
    }

    /// Units used so far: a block lane is 32 bytes, a node word 8.
    ///
    /// In a trial, the words merges added ([`grown`](Self::grown)) are
    /// not counted: the trial is judged on the tree as it would be
    /// without them (so a merge never makes a trial fail), and a tree
    /// that fits is built again without that growth if it passed its
    /// budget with it ([`Builder::trial_root`]).
    pub(super) fn used(&self) -> usize {
        let grown = if self.trial { self.grown } else { 0 };
        self.blocks.len() * BLOCK + (self.mem.len() + self.pending - grown) / 4
    }

    /// [`used`](Self::used), the words merges added counted.
    pub(super) fn real_used(&self) -> usize {
        self.blocks.len() * BLOCK + (self.mem.len() + self.pending) / 4
    }

    /// Whether `words` more node words and `blocks` more blocks fit under
    /// the cap; if not, the cap is reached ([`capped`](Self::capped)). A
    /// trial checks every array it adds before adding it, so one that
    /// fits used at most its budget ([`Config::tree_budget`] is a strict
    /// bound on a tree).
    pub(super) fn room(&mut self, words: usize, blocks: usize) -> bool {
        let grown = if self.trial { self.grown } else { 0 };
        let fits = (self.blocks.len() + blocks) * BLOCK
            + (self.mem.len() + self.pending - grown + words) / 4
            <= self.cap;
        self.capped |= !fits;
        self.budget_hit |= !fits;
        fits
    }

    /// Whether the memory cap is reached: a block lane is 32 bytes, a
    /// node word 8.
    pub(super) fn over_budget(&mut self) -> bool {
        let over = self.used() >= self.cap;
        self.capped |= over;
        self.budget_hit |= over;
        over
    }

    pub(super) fn leaf(&mut self, ids: &[u32], depth: usize) -> u64 {
        self.stats.max_depth = self.stats.max_depth.max(depth);
        if ids.is_empty() {
            // Its first block is the padding block 0, which a batch tests
            // without looking at the number of blocks.
            return EMPTY;
        }
        let entries = ids.len().div_ceil(BLOCK) * BLOCK;
        self.tree_worst = self.tree_worst.max(entries);
        if self.trial && entries > self.leaf_limit {
            // Over the bound: the trial fails.
            self.capped = true;
            return EMPTY;
        }
        if let Some(&r) = self.leaves.get(ids) {
            return r;
        }
        if !self.room(0, ids.len().div_ceil(BLOCK)) && self.trial {
            // Past the cap: the trial fails. (Any other tree stores the
            // leaf: its rules must be somewhere.)
            return EMPTY;
        }
        let start = self.blocks.len();
        for chunk in ids.chunks(BLOCK) {
            let mut blk = Block::PAD;
            for (j, &i) in chunk.iter().enumerate() {
                blk.set(j, &self.br[i as usize].lane);
            }
            self.blocks.push(blk);
        }
        let blocks = self.blocks.len() - start;
        self.stats.leaves += 1;
        self.stats.max_leaf = self.stats.max_leaf.max(ids.len());
        let mut extra = 0;
        for &i in ids {
            let r = &self.br[i as usize];
            if r.lane.id & EXTRA_ID != 0 {
                extra |= EXTRA;
            }
            if r.loose {
                extra |= LOOSE;
            }
        }
        let r = LEAF | extra | (blocks as u64) << 32 | start as u64;
        self.leaves.insert(ids.to_vec(), r);
        r
    }
}
