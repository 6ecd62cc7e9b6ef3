//! The lookup of one key: the trees' layout (node references, root
//! cuts), their walk and the leaves' scans.

use super::*;

#[derive(Clone, Copy, Debug)]
pub(super) struct Tree {
    /// The root's reference: a leaf, or (bit 31 clear) the offset of the
    /// root's children in `mem`, whose cut is `cut`.
    pub(super) root: u64,
    /// The root's cut, unpacked (it may be wider than a node's).
    pub(super) cut: RootCut,
    /// The smallest rule index in the tree: a lookup that already matched
    /// a smaller one skips the tree.
    pub(super) min_id: u32,
}

/// A root's cut, unpacked (it may be wider than a node's), in two
/// forms: rotations and masks, the child index `rotate_right(f[f0],
/// rot0) & m0 | rotate_right(f[f1], rot1) & m1` ([`RootCut::index`]);
/// and the shift counts of [`child_index`] ([`RootCut::shifted`]: each
/// field's bits shifted left to the top, `L = 32 - s - b`, and back down,
/// `R = 32 - b`, the first field's then left by the second's bits `b1`).
/// With BMI2 the counts stay in registers over a batch's root steps and
/// a step is two shifts a field and one more, where the rotations took a
/// move of each count to `cl` too (28 -> 24 instructions a root step in
/// the AVX2 batch of one tree); without BMI2 every shift moves its count
/// to `cl`, and the rotations are fewer (fw2_1k's `classify_batch` on
/// [`Key`]s, 381.8 instructions a lookup: 392.6 with the shifts). (With
/// the shifts alone, the AVX2 batch of several trees kept both field
/// numbers in registers: fw2_1k 275.1 instructions a lookup against
/// 283.2 with both forms, where two are reloaded each root step; every
/// form tried of the two kept the reload.)
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RootCut {
    pub(super) f0: u8,
    pub(super) rot0: u8,
    pub(super) f1: u8,
    pub(super) rot1: u8,
    pub(super) m0: u32,
    pub(super) m1: u32,
    pub(super) l0: u32,
    pub(super) r0: u32,
    pub(super) b1: u32,
    pub(super) l1: u32,
    pub(super) r1: u32,
}

impl RootCut {
    pub(super) fn of(d0: usize, s0: u8, b0: u8, d1: usize, s1: u8, b1: u8) -> RootCut {
        debug_assert!(b0 >= 1 && b0 + b1 <= ROOT_MAX_BITS && d0 < DIMS && d1 < DIMS);
        // One field: the second is the key's zero slot (its mask and its
        // bits none).
        let (d1, s1) = if b1 == 0 { (ZERO, 0) } else { (d1, s1) };
        let left = |s: u8, b: u8| (32 - u32::from(s) - u32::from(b)) & 31;
        let right = |b: u8| (32 - u32::from(b)) & 31;
        RootCut {
            f0: d0 as u8,
            rot0: (s0.wrapping_sub(b1)) & 31,
            f1: d1 as u8,
            rot1: s1 & 31,
            m0: ((1u32 << b0) - 1) << b1,
            m1: (1u32 << b1) - 1,
            l0: left(s0, b0),
            r0: right(b0),
            b1: u32::from(b1),
            l1: left(s1, b1),
            r1: right(b1),
        }
    }

    /// The child index of `k`, by rotations and masks.
    #[inline(always)]
    pub(super) fn index(&self, k: &K4) -> usize {
        let v0 = k.f[usize::from(self.f0 & 7)].rotate_right(u32::from(self.rot0)) & self.m0;
        let v1 = k.f[usize::from(self.f1 & 7)].rotate_right(u32::from(self.rot1)) & self.m1;
        (v0 | v1) as usize
    }

    /// The child index of `k`, by shifts (for code compiled with BMI2).
    #[inline(always)]
    pub(super) fn shifted(&self, k: &K4) -> usize {
        let v0 = k.f[usize::from(self.f0 & 7)]
            .wrapping_shl(self.l0)
            .wrapping_shr(self.r0);
        let v1 = k.f[usize::from(self.f1 & 7)]
            .wrapping_shl(self.l1)
            .wrapping_shr(self.r1);
        (v0.wrapping_shl(self.b1) | v1) as usize
    }
}

/// Asks for the cache line of `p` (nothing off x86_64). Any address will
/// do: a prefetch never faults.
#[inline(always)]
pub(super) fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no effect on memory or on the program's state
    // and cannot fault, whatever the address; SSE is part of x86_64.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the cache line of `mem[at]` (nothing if `at` is out of
/// bounds).
#[inline(always)]
pub(super) fn prefetch<T>(mem: &[T], at: usize) {
    if let Some(p) = mem.get(at) {
        prefetch_ptr((p as *const T).cast());
    }
}

/// Asks for the four cache lines of `blocks[at]`.
#[inline(always)]
pub(super) fn prefetch_block(blocks: &[Block], at: usize) {
    if let Some(b) = blocks.get(at) {
        let p = (b as *const Block).cast::<u8>();
        for line in 0..4 {
            prefetch_ptr(p.wrapping_add(64 * line));
        }
    }
}

/// Whether the running CPU has AVX2 and BMI1/BMI2 (every CPU with AVX2
/// but a few low-power ones has both).
pub(super) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The child of internal node `r` that `k` falls in. The cut is packed
/// in bits 32..64 of the reference as shift counts ([`node_ref`]): `L0`
/// (bits 0..5), `R0` (5..10), `B1` (10..15), `L1` (15..20), `R1`
/// (20..25), the first cut field (26..29) and the second (29..32). The
/// child index is `(bits s0..s0+b0 of d0) << b1 | (bits s1..s1+b1 of
/// d1)`: a field's bits are shifted left to the top (`L = 32 - s - b`)
/// and back down (`R = 32 - b`). Every shift takes its count modulo 32,
/// as BMI2's `shlx`/`shrx` do, so each count is the header shifted to
/// its place, with no mask, and the first field's count `L0` the header
/// itself (against the byte packing this replaced, whose bit lengths were
/// masked to 5 bits before `bzhi`: 42 -> 41 instructions a level in the
/// AVX2 batch). A node of one field names the key's zero slot
/// (`K4::f[ZERO]`) as its second, whose bits are then none.
#[inline(always)]
pub(super) fn child_index(r: u64, k: &K4) -> usize {
    let h = (r >> 32) as u32;
    let f0 = k.f[((h >> 26) & 7) as usize];
    let f1 = k.f[(h >> 29) as usize];
    let v0 = f0.wrapping_shl(h).wrapping_shr(h >> 5);
    let v1 = f1.wrapping_shl(h >> 15).wrapping_shr(h >> 20);
    (v0.wrapping_shl(h >> 10) | v1) as usize
}

/// The reference to an internal node whose children start at `o`: the
/// cut is packed into the reference ([`child_index`]), so a level costs
/// one load. The child index is `(bits s0..s0+b0 of d0) << b1 | (bits
/// s1..s1+b1 of d1)`, `b0 + b1 <= `[`ROOT_MAX_BITS`].
pub(super) fn node_ref(o: usize, d0: usize, s0: u8, b0: u8, d1: usize, s1: u8, b1: u8) -> u64 {
    debug_assert!(d0 < DIMS && d1 < DIMS && b0 >= 1 && b0 + b1 <= ROOT_MAX_BITS);
    debug_assert!(u32::from(s0) + u32::from(b0) <= 32);
    debug_assert!(b1 == 0 || u32::from(s1) + u32::from(b1) <= 32);
    debug_assert!((o as u64) < LEAF);
    // One field: the second is the key's zero slot, its bits none.
    let (d1, s1) = if b1 == 0 { (ZERO, 0) } else { (d1, s1) };
    let left = |s: u8, b: u8| (32 - u32::from(s) - u32::from(b)) & 31;
    let right = |b: u8| (32 - u32::from(b)) & 31;
    let h = left(s0, b0)
        | right(b0) << 5
        | u32::from(b1) << 10
        | left(s1, b1) << 15
        | right(b1) << 20
        | (d0 as u32) << 26
        | (d1 as u32) << 29;
    u64::from(h) << 32 | o as u64
}

impl Classifier {
    /// What a lookup of `key` costs: (trees walked, internal nodes
    /// visited, leaf entries compared, padding included). For tuning and reports.
    pub fn lookup_cost(&self, key: &Key) -> (usize, usize, usize) {
        let (k, trees_of): (K4, &[Tree]) = match K4::of(key) {
            Some(k) => (k, &self.trees),
            None if key.ethertype == ETHERTYPE_IPV6 && key.has & has::IP != 0 => {
                (self.v6_words.view(key), &self.v6)
            }
            None => return (0, 0, self.other.len()),
        };
        let (mut trees, mut nodes, mut entries) = (0, 0, 0);
        let mut best = NONE;
        for t in trees_of {
            if t.min_id >= best {
                break;
            }
            trees += 1;
            let mut r = t.root;
            if r & LEAF == 0 {
                nodes += 1;
                r = self.mem[(r as usize) + t.cut.index(&k)];
            }
            while r & LEAF == 0 {
                nodes += 1;
                r = self.mem[(r as u32 as usize) + child_index(r, &k)];
            }
            let (start, blocks) = (
                (r & START_MASK) as usize,
                ((r >> 32) & BLOCKS_MASK) as usize,
            );
            let b = best;
            best = self.scan_key(r, &k, key, best);
            // Blocks the scan tested: up to the one holding the match, and
            // none that start at or after the earlier match.
            entries += self.blocks[start..start + blocks]
                .iter()
                .take_while(|blk| {
                    let first = blk.id[0] & !EXTRA_ID;
                    first < b && first <= best
                })
                .count()
                * BLOCK;
        }
        (trees, nodes, entries)
    }

    /// The leaf of tree `t` that `k` falls in.
    #[inline(always)]
    pub(super) fn walk_tree(&self, t: &Tree, k: &K4) -> u64 {
        let mut r = t.root;
        if r & LEAF == 0 {
            r = self.mem[(r as usize) + t.cut.index(k)];
        }
        self.walk(r, k)
    }

    #[inline(always)]
    pub(super) fn walk(&self, mut r: u64, k: &K4) -> u64 {
        while r & LEAF == 0 {
            r = self.mem[(r as u32 as usize) + child_index(r, k)];
        }
        r
    }

    /// Best (smallest) matching rule index in leaf `r`, or `best`.
    ///
    /// A leaf is whole [`Block`]s of 8 rules (padded with lanes that never
    /// hit), so the common one-block leaf is a fixed-length, branch-free
    /// test of 8 lanes and a bit scan.
    #[inline(always)]
    pub(super) fn scan<F: FullKey>(&self, r: u64, k: &K4, key: &F, best: u32) -> u32 {
        self.scan_from(r, 0, k, key, best)
    }

    /// [`scan`](Self::scan) from block `from` of the leaf on (the blocks
    /// before it missed); a leaf with rules to confirm goes to
    /// [`scan_extra`](Self::scan_extra), whole.
    #[inline(always)]
    pub(super) fn scan_from<F: FullKey>(
        &self,
        r: u64,
        from: usize,
        k: &K4,
        key: &F,
        best: u32,
    ) -> u32 {
        if r & EXTRA != 0 {
            return self.scan_extra(r, k, key, best);
        }
        let start = (r & START_MASK) as usize;
        let blocks = ((r >> 32) & BLOCKS_MASK) as usize;
        let Some(leaf) = self.blocks.get(start + from..start + blocks) else {
            return best;
        };
        for blk in leaf {
            if blk.id[0] >= best {
                // Every rule here and after comes after the one matched.
                break;
            }
            // The probe is made here, not before the loop: so LLVM
            // hoists its broadcasts, each one load, out of the loop (made
            // before it, they went through general registers, 13
            // instructions a leaf instead of 5).
            if let Some(j) = blk.hit(&Probe::of(k)) {
                // Lanes are in rule order: the first hit is the best.
                return blk.id[j & (BLOCK - 1)].min(best);
            }
        }
        best
    }

    /// The first block of leaf `r` for `k`, without a branch: the rule it
    /// matches ([`NONE`] if none, or if the leaf has rules to confirm), and
    /// whether the leaf needs [`scan_from`](Self::scan_from) too (no hit
    /// and more blocks, or rules to confirm). The empty leaf's first block
    /// is the padding block 0.
    #[inline(always)]
    pub(super) fn first_block(&self, r: u64, k: &K4) -> (u32, bool) {
        let start = (r & START_MASK) as usize;
        let blocks = (r >> 32) & BLOCKS_MASK;
        let blk = &self.blocks[start];
        let j = blk.first_hit(&Probe::of(k));
        let id = blk.id[j & (BLOCK - 1)];
        let confirm = r & EXTRA != 0;
        let undecided = j >= BLOCK || confirm;
        // `NONE` is all ones: or-ed in, not selected. LLVM made the
        // select a branch, which mispredicts where about half the keys
        // miss their first block (acl4_1k).
        let hit = id | u32::from(undecided).wrapping_neg();
        (hit, confirm | (j >= BLOCK) & (blocks > 1))
    }

    /// Block `b` of leaf `r` (which has more than `b` blocks and no rules
    /// to confirm) for `k`, whose match so far is `best`, without a
    /// branch: the rule it matches ([`NONE`] if none), and whether the
    /// leaf's next block is still to test (no hit here, a next block,
    /// and this block's first rule before `best`: if it is not, no
    /// later block's rules are either).
    #[inline(always)]
    pub(super) fn block_at(&self, r: u64, b: usize, k: &K4, best: u32) -> (u32, bool) {
        let start = (r & START_MASK) as usize;
        let blocks = ((r >> 32) & BLOCKS_MASK) as usize;
        let blk = &self.blocks[start + b];
        let j = blk.first_hit(&Probe::of(k));
        let miss = j >= BLOCK;
        let hit = blk.id[j & (BLOCK - 1)] | u32::from(miss).wrapping_neg();
        (hit, miss & (blk.id[0] < best) & (b + 1 < blocks))
    }

    /// [`scan`](Self::scan) for leaves holding rules with conditions the
    /// blocks do not hold (VLAN, TCP flags, ICMP): a hit on one of those
    /// is confirmed on the full rule. For a key without ports (in a leaf
    /// with [`LOOSE`] rules), every hit is.
    #[cold]
    pub(super) fn scan_extra<F: FullKey>(&self, r: u64, k: &K4, key: &F, best: u32) -> u32 {
        // No ports: a loose rule's lane may hit where the rule does not.
        self.scan_confirm(r, k, key, best, !k.has_ports())
    }

    /// [`scan_extra`](Self::scan_extra), every hit confirmed if `all`.
    #[inline(always)]
    fn scan_confirm<F: FullKey>(&self, r: u64, k: &K4, key: &F, best: u32, all: bool) -> u32 {
        let key = key.full();
        let start = (r & START_MASK) as usize;
        let blocks = ((r >> 32) & BLOCKS_MASK) as usize;
        let p = Probe::of(k);
        for blk in &self.blocks[start..start + blocks] {
            if blk.id[0] & !EXTRA_ID >= best {
                break;
            }
            let mut hits = blk.hit_mask(&p);
            while hits != 0 {
                let j = hits.trailing_zeros() as usize;
                hits &= hits - 1;
                let e = blk.id[j];
                let id = e & !EXTRA_ID;
                if id >= best {
                    return best;
                }
                if (e & EXTRA_ID == 0 && !all) || self.rules[id as usize].matches(&key) {
                    return id;
                }
            }
        }
        best
    }

    /// One lookup: the trees for IPv4 keys, the lists otherwise.
    #[inline(always)]
    pub(super) fn lookup(&self, key: &Key) -> Option<u32> {
        let Some(k) = K4::of(key) else {
            return self.classify_slow(key);
        };
        self.lookup_k4(&k, key)
    }

    /// The trees' walk and leaf scans for one IPv4 key; `key` gives the
    /// full key for the rules a leaf block cannot decide alone.
    #[inline(always)]
    pub(super) fn lookup_k4<F: FullKey>(&self, k: &K4, key: &F) -> Option<u32> {
        if !k.has_ports() {
            return self.lookup_loose(k, &key.full());
        }
        self.lookup_in(&self.trees, k, key)
    }

    /// [`lookup_k4`](Self::lookup_k4) for an IPv4 key without ports: the
    /// hits in [`LOOSE`] leaves are confirmed on the full rules too (a
    /// loose rule's lane takes such a key where the rule does not).
    #[cold]
    #[inline(never)]
    pub(super) fn lookup_loose(&self, k: &K4, key: &Key) -> Option<u32> {
        self.lookup_with(&self.trees, k, |leaf, best| {
            self.scan_key(leaf, k, key, best)
        })
    }

    /// [`scan`](Self::scan) for any IPv4 key: for one without ports a
    /// [`LOOSE`] leaf is confirmed on the full rules
    /// ([`scan_extra`](Self::scan_extra)).
    #[inline(always)]
    pub(super) fn scan_key<F: FullKey>(&self, r: u64, k: &K4, key: &F, best: u32) -> u32 {
        if !k.has_ports() && r & LOOSE != 0 {
            return self.scan_extra(r, k, key, best);
        }
        self.scan(r, k, key, best)
    }

    /// The walks and leaf scans of `trees` (in order of their first rule)
    /// for the tree view `k` of `key`: [`lookup_with`](Self::lookup_with)
    /// and [`scan`](Self::scan), written out (through the closure, the
    /// IPv4 keys' one-after-the-other batch took 8-13 % more
    /// instructions: callgrind, acl1_1k and fw1_10k).
    #[inline(always)]
    pub(super) fn lookup_in<F: FullKey>(&self, trees: &[Tree], k: &K4, key: &F) -> Option<u32> {
        let mut best = NONE;
        for t in trees {
            if t.min_id >= best {
                break;
            }
            let leaf = self.walk_tree(t, k);
            best = self.scan(leaf, k, key, best);
        }
        (best != NONE).then_some(best)
    }

    /// The walks of `trees` (in order of their first rule) for the tree
    /// view `k`, each leaf given to `scan` with the match so far; a tree
    /// whose first rule comes after the match is not walked, nor are the
    /// ones after it.
    #[inline(always)]
    pub(super) fn lookup_with(
        &self,
        trees: &[Tree],
        k: &K4,
        scan: impl Fn(u64, u32) -> u32,
    ) -> Option<u32> {
        let mut best = NONE;
        for t in trees {
            if t.min_id >= best {
                break;
            }
            best = scan(self.walk_tree(t, k), best);
        }
        (best != NONE).then_some(best)
    }

    /// An IPv6 key: the IPv6 trees' walks on the chosen address words.
    /// A key under the words above them ([`V6Words::under`]) is decided
    /// by the lanes as an IPv4 key is (the rules they do not hold
    /// exactly confirmed); any other key confirms every hit on its rule.
    #[inline(never)]
    pub(super) fn lookup_v6(&self, k: &Key) -> Option<u32> {
        let v = self.v6_words.view(k);
        if self.v6_words.under(k) {
            self.lookup_with(&self.v6, &v, |leaf, best| self.scan_key(leaf, &v, k, best))
        } else {
            self.lookup_with(&self.v6, &v, |leaf, best| {
                self.scan_confirm(leaf, &v, k, best, true)
            })
        }
    }

    /// Keys off the IPv4 path: IPv6 ([`lookup_v6`](Self::lookup_v6)),
    /// non-IP keys (the rules that can match them, in order), and IPv4
    /// keys with an address beyond 32 bits (every rule).
    #[cold]
    #[inline(never)]
    pub(super) fn classify_slow(&self, k: &Key) -> Option<u32> {
        let list = if k.ethertype == ETHERTYPE_IPV6 && k.has & has::IP != 0 {
            return self.lookup_v6(k);
        } else if k.has & has::IP != 0 {
            // IPv4 with an address beyond 32 bits: not a real key; the
            // reference semantics decide over every rule.
            return self
                .rules
                .iter()
                .position(|r| r.matches(k))
                .map(|i| i as u32);
        } else {
            &self.other
        };
        list.iter()
            .copied()
            .find(|&i| self.rules[i as usize].matches(k))
    }
}

impl Classify for Classifier {
    #[inline]
    fn classify(&self, key: &Key) -> Option<u32> {
        self.lookup(key)
    }

    /// Classifies `keys` into `out`: IPv4 keys breadth first, 256 at a time
    /// (64 in a batch that small)
    /// (see [`Classifier::classify_batch_v4`]) when the classifier has an
    /// internal node, one [`classify`](Classify::classify) per key
    /// otherwise; then the IPv6 keys the same way on the IPv6 trees (but
    /// those not under the address words most IPv6 rules name above the
    /// words the trees cut, which confirm every hit, and, if an IPv6 rule
    /// is loose, those without ports: one by one); other keys one by one
    /// in place. Compiled with AVX2 where the CPU has it, as the IPv4
    /// batch. No allocation.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    fn classify_batch(&self, keys: &[Key], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        if !self.mem.is_empty() {
            #[cfg(target_arch = "x86_64")]
            if self.avx2 {
                // SAFETY: `avx2` is set only when the running CPU has
                // AVX2, BMI1 and BMI2 (`Classifier::with_config` checks
                // them).
                #[allow(unsafe_code)]
                return unsafe { self.batch_keys_avx2(keys, out) };
            }
            return self.batch_keys::<false>(keys, out);
        }
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.lookup(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bits `s..s+b` of `x`.
    fn bits(x: u32, s: u8, b: u8) -> usize {
        if b == 0 {
            0
        } else {
            ((u64::from(x) >> s) & ((1u64 << b) - 1)) as usize
        }
    }

    #[test]
    fn node_and_root_cuts_index_their_children_for_every_cut_shape() {
        // Every field pair, every width up to the root's, every shift up
        // to the field's top (a cut of the top bits: `L = 0`), one field
        // or two: the packed shift counts give the index the cut names,
        // for keys whose other fields are not zero (a one-field node must
        // not read them).
        let mut x = 7u64;
        let keys: Vec<K4> = (0..16)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let v = x;
                K4::new(
                    v as u32,
                    (v >> 32) as u32,
                    (v >> 7) as u16,
                    (v >> 23) as u16,
                    (v >> 40) as u8,
                    (v >> 50) as u8,
                )
            })
            .collect();
        let widths = [32u8, 32, 16, 16, 9];
        let o = 12_345;
        for d0 in 0..DIMS {
            for d1 in 0..DIMS {
                for b0 in 1..=ROOT_MAX_BITS.min(widths[d0]) {
                    for b1 in 0..=(ROOT_MAX_BITS - b0).min(widths[d1]) {
                        for s0 in [0, 1, widths[d0] - b0, 32 - b0] {
                            for s1 in [0, 3, 32 - b1] {
                                let r = node_ref(o, d0, s0, b0, d1, s1, b1);
                                let root = RootCut::of(d0, s0, b0, d1, s1, b1);
                                assert_eq!(r & LEAF, 0);
                                assert_eq!(r as u32 as usize, o);
                                for k in &keys {
                                    let want = bits(k.f[d0], s0, b0) << b1 | bits(k.f[d1], s1, b1);
                                    let cut = (d0, s0, b0, d1, s1, b1);
                                    assert_eq!(child_index(r, k), want, "cut {cut:?}");
                                    assert_eq!(root.index(k), want, "root cut {cut:?}");
                                    assert_eq!(root.shifted(k), want, "root shifts {cut:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
