//! Batched lookups: breadth first over a chunk of keys (the AVX2 build
//! of it where the CPU has it), and the lockstep alternative.

use super::*;

/// Where a batch sends a key ([`Classifier::breadth`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// It walks the trees: its view is written.
    Trees,
    /// It is classified alone, in place
    /// ([`classify_slow`](Classifier::classify_slow)).
    Alone,
    /// Another pass classifies it: its result is left as it is.
    Later,
}

/// The trees a breadth-first pass walks, and whether a rule of theirs is
/// loose ([`Classifier::breadth`]).
#[derive(Clone, Copy)]
pub(super) struct Walk<'a> {
    trees: &'a [Tree],
    loose: bool,
}

impl Classifier {
    /// Classifies `keys` into `out`, [`GROUP`] keys at a time: in each
    /// tree the group's walks advance in lockstep, one level per step, with
    /// no branch per key (a key that reached its leaf re-reads a hot word
    /// and keeps its leaf), so the group's cache misses overlap. Same
    /// results as [`Classify::classify_batch`]; measured slower than it on
    /// the ClassBench sets (BENCHMARKS.md: a group waits for its deepest
    /// walk, where the breadth-first batch moves on only the keys still
    /// walking), so kept as the alternative `pfil-bench acl --lockstep`
    /// measures.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    pub fn classify_lockstep(&self, keys: &[Key], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        if self.mem.is_empty() {
            // No internal node anywhere: leaves only.
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.classify(k);
            }
            return;
        }
        for (ks, os) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            if ks.len() < GROUP {
                for (k, o) in ks.iter().zip(os.iter_mut()) {
                    *o = self.classify(k);
                }
                continue;
            }
            let mut k4 = [K4::default(); GROUP];
            let mut fast = [false; GROUP];
            for i in 0..GROUP {
                if let Some(k) = K4::of(&ks[i]) {
                    k4[i] = k;
                    fast[i] = true;
                }
            }
            let mut best = [NONE; GROUP];
            for t in &self.trees {
                let mut r = [EMPTY; GROUP];
                for i in 0..GROUP {
                    if fast[i] && t.min_id < best[i] {
                        r[i] = t.root;
                        if r[i] & LEAF == 0 {
                            r[i] = self.mem[(r[i] as usize) + t.cut.index(&k4[i])];
                        }
                    }
                }
                loop {
                    let mut inner = 0u64;
                    for i in 0..GROUP {
                        let leaf = r[i] & LEAF != 0;
                        let at = if leaf {
                            0
                        } else {
                            (r[i] as u32 as usize) + child_index(r[i], &k4[i])
                        };
                        let next = self.mem[at];
                        r[i] = if leaf { r[i] } else { next };
                        inner |= !next & !r[i] & LEAF;
                    }
                    if inner == 0 {
                        break;
                    }
                }
                for i in 0..GROUP {
                    best[i] = self.scan_key(r[i], &k4[i], &ks[i], best[i]);
                }
            }
            for i in 0..GROUP {
                os[i] = if fast[i] {
                    (best[i] != NONE).then_some(best[i])
                } else {
                    self.classify_slow(&ks[i])
                };
            }
        }
    }

    /// Classifies IPv4 keys ([`KeyV4`]) into `out`: the same results as
    /// [`Classify::classify_batch`] on the same keys as [`Key`]s
    /// ([`KeyV4::key`]), without the conversion from 128-bit addresses a
    /// [`Key`] takes (about 40 instructions of a 250-instruction lookup).
    /// Breadth first, 256 keys at a time, 64 in a batch that small (see the
    /// [module docs](super)). No
    /// allocation. On a CPU with AVX2 and BMI1/2 the same code runs
    /// compiled for them (a leaf block's eight 32-bit lanes in one
    /// register, the cuts' shifts without flags), chosen once when the
    /// classifier is built, as rte_acl picks its AVX2 path.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    pub fn classify_batch_v4(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only when the running CPU has AVX2,
            // BMI1 and BMI2 (`Classifier::with_config` checks them).
            #[allow(unsafe_code)]
            return unsafe { self.batch_v4_avx2(keys, out) };
        }
        self.batch_v4::<false>(keys, out);
    }

    /// [`classify_batch_v4`](Self::classify_batch_v4) compiled for the
    /// baseline CPU whatever this one has: for comparisons and tests.
    #[doc(hidden)]
    pub fn classify_batch_v4_portable(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        self.batch_v4::<false>(keys, out);
    }

    /// The body of [`classify_batch_v4`](Self::classify_batch_v4), for
    /// `out` at least as long as `keys`; `BMI2`: compiled with BMI2
    /// ([`breadth_in`](Self::breadth_in)).
    #[inline(always)]
    pub(super) fn batch_v4<const BMI2: bool>(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        if !self.mem.is_empty() {
            self.breadth::<_, BMI2>(&self.trees, self.loose, keys, out, |k, v| {
                *v = K4::of_v4(k);
                Route::Trees
            });
        } else {
            self.seq_v4(keys, out);
        }
    }

    /// [`batch_v4`](Self::batch_v4) compiled with AVX2 (everything below it
    /// is inlined, so all of it is).
    ///
    /// # Safety
    /// The CPU must have AVX2, BMI1 and BMI2. (An `unsafe fn`, not a safe
    /// function with a target feature: those need Rust 1.86, the workspace
    /// supports 1.85.)
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2")]
    #[allow(unsafe_code)]
    pub(super) unsafe fn batch_v4_avx2(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        self.batch_v4::<true>(keys, out);
    }

    /// [`Classify::classify_batch`]'s body, for a classifier with an
    /// internal node and `out` at least as long as `keys`: IPv4 keys on
    /// the IPv4 trees; then, if there are IPv6 keys and IPv6 trees, a
    /// second pass on those, the keys [`under`](V6Words::under) the upper
    /// words breadth first too, but for those without ports when an IPv6
    /// rule is loose (the others, which confirm every hit, alone). `BMI2`: compiled with BMI2
    /// ([`breadth_in`](Self::breadth_in)).
    #[inline(always)]
    pub(super) fn batch_keys<const BMI2: bool>(&self, keys: &[Key], out: &mut [Option<u32>]) {
        let is_v6 = |k: &Key| k.ethertype == ETHERTYPE_IPV6 && k.has & has::IP != 0;
        let later = std::cell::Cell::new(false);
        let v6_trees = !self.v6.is_empty();
        self.breadth::<_, BMI2>(&self.trees, self.loose, keys, out, |k, v| match K4::of(k) {
            Some(x) => {
                *v = x;
                Route::Trees
            }
            None if v6_trees && is_v6(k) => {
                later.set(true);
                Route::Later
            }
            None => Route::Alone,
        });
        if later.get() {
            let words = &self.v6_words;
            self.breadth::<_, BMI2>(&self.v6, false, keys, out, |k, v| {
                if !is_v6(k) {
                    return Route::Later;
                }
                *v = words.view(k);
                // Without ports, a loose rule's lanes may take the key
                // where the rule does not: alone, confirmed (the IPv4
                // pass looks such keys up again instead).
                if words.under(k) && (v.has_ports() || !self.loose6) {
                    Route::Trees
                } else {
                    Route::Alone
                }
            });
        }
    }

    /// [`batch_keys`](Self::batch_keys) compiled with AVX2 (everything
    /// below it is inlined, so all of it is).
    ///
    /// # Safety
    /// The CPU must have AVX2, BMI1 and BMI2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2")]
    #[allow(unsafe_code)]
    pub(super) unsafe fn batch_keys_avx2(&self, keys: &[Key], out: &mut [Option<u32>]) {
        self.batch_keys::<true>(keys, out);
    }

    /// [`classify_batch_v4`](Self::classify_batch_v4) one key after the
    /// other: for comparisons.
    #[doc(hidden)]
    pub fn classify_batch_v4_seq(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        self.seq_v4(keys, out);
    }

    #[inline(always)]
    pub(super) fn seq_v4(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.lookup_k4(&K4::of_v4(k), k);
        }
    }

    /// [`breadth_in`](Self::breadth_in) in chunks of [`CHUNK`] keys, or of
    /// [`SMALL_CHUNK`] for a batch that small (a datapath batch): a chunk's
    /// arrays are set up on every call, 14 KiB for [`CHUNK`] keys.
    ///
    /// `trees` are the IPv4 trees or the IPv6 ones; `loose`: some rule of
    /// theirs is [`BRule::loose`] (the keys without ports are then looked
    /// up again on the IPv4 trees, [`again_loose`](Self::again_loose):
    /// the IPv6 pass sends such keys alone instead).
    #[inline(always)]
    pub(super) fn breadth<F: FullKey, const BMI2: bool>(
        &self,
        trees: &[Tree],
        loose: bool,
        keys: &[F],
        out: &mut [Option<u32>],
        k4: impl Fn(&F, &mut K4) -> Route,
    ) {
        // One tree or several: each its own copy of the loop, so that
        // neither's registers pay for the other's branch.
        let w = Walk { trees, loose };
        match (keys.len() <= SMALL_CHUNK, trees.len() == 1) {
            (true, true) => self.breadth_in::<F, SMALL_CHUNK, true, BMI2>(w, keys, out, k4),
            (true, false) => self.breadth_in::<F, SMALL_CHUNK, false, BMI2>(w, keys, out, k4),
            (false, true) => self.breadth_in::<F, CHUNK, true, BMI2>(w, keys, out, k4),
            (false, false) => self.breadth_in::<F, CHUNK, false, BMI2>(w, keys, out, k4),
        }
    }

    /// Classifies `keys` into `out` breadth first, `C` keys at a
    /// time: per tree, every key of the chunk takes its root step, then
    /// every key still at an internal node one more level, and so on; then
    /// every key's leaf is scanned. Which keys go on is a list rebuilt each
    /// round without a branch (each key's index is written, and the count
    /// moves on only if it goes on), so no branch depends on a load: the
    /// loads of a round are independent (up to `C` in flight) and the
    /// only branches are the rounds' loops. Keys `k4` does not take (not
    /// IPv4, or without ports) are classified alone, in place. `ONE`: the
    /// classifier has one tree (its leaves' pass writes the results).
    /// `BMI2`: compiled with BMI2, whose shifts take their count from
    /// any register, so the root step takes the root cut's shift counts
    /// ([`RootCut::shifted`]); the baseline build its rotations and masks
    /// ([`RootCut::index`]: a shift there moves its count to `cl` first).
    #[inline(always)]
    pub(super) fn breadth_in<F: FullKey, const C: usize, const ONE: bool, const BMI2: bool>(
        &self,
        w: Walk<'_>,
        keys: &[F],
        out: &mut [Option<u32>],
        k4: impl Fn(&F, &mut K4) -> Route,
    ) {
        // Key indices are bytes.
        const { assert!(C <= 256) };
        // With small chunks a round has too few keys to hide its misses:
        // prefetch, if the structure is out of cache. (With 256 keys a
        // round the prefetches measured 1-3 % slower; in batches of 32,
        // acl1_10k 4 % faster.)
        let ahead = self.prefetch && C <= SMALL_CHUNK;
        let mut view = [K4::default(); C];
        let mut node = [EMPTY; C];
        let mut goes = [0usize; C];
        let mut best = [NONE; C];
        // The chunk's keys on the trees, the keys a tree may improve, and
        // the two lists of keys still walking.
        let (mut fast, mut on) = ([0u8; C], [0u8; C]);
        let (mut cur, mut nxt) = ([0u8; C], [0u8; C]);
        let out_lines = out.as_ptr().cast::<u8>();
        for (c, (ks, os)) in keys.chunks(C).zip(out.chunks_mut(C)).enumerate() {
            // The next chunk's keys and results, asked for now: the walks
            // leave the hardware prefetcher too long a gap between chunks.
            // (Nothing for the last chunk, the only one of a datapath
            // batch.)
            let next = (c + 1) * C;
            if next < keys.len() {
                let end = (next + C).min(keys.len());
                // The keys' lines, one prefetch each (not one every
                // `64 / size` keys, which asks for some lines twice).
                let size = std::mem::size_of::<F>();
                let key_lines = keys.as_ptr().cast::<u8>();
                for line in (next * size..end * size).step_by(64) {
                    prefetch_ptr(key_lines.wrapping_add(line));
                }
                let size = std::mem::size_of::<Option<u32>>();
                for line in (next * size..end * size).step_by(64) {
                    prefetch_ptr(out_lines.wrapping_add(line));
                }
            }
            let mut nf = 0;
            // Bit 0 clear: some key has no ports (the protocol lanes'
            // low bits, and-ed).
            let mut ports = 1;
            for (i, (k, o)) in ks.iter().zip(os.iter_mut()).enumerate() {
                match k4(k, &mut view[i]) {
                    Route::Trees => {
                        fast[nf % C] = i as u8;
                        nf += 1;
                        if !ONE {
                            // (One tree: the leaves' pass needs no best.)
                            best[i] = NONE;
                        }
                        ports &= view[i].f[PR];
                    }
                    Route::Alone => *o = self.classify_slow(&k.full()),
                    Route::Later => {}
                }
            }
            for (ti, t) in w.trees.iter().enumerate() {
                let mut n = 0;
                if ti == 0 {
                    // No key has matched yet: all of them walk.
                    on[..nf].copy_from_slice(&fast[..nf]);
                    n = nf;
                } else {
                    for &i in &fast[..nf] {
                        on[n % C] = i;
                        n += usize::from(t.min_id < best[usize::from(i) % C]);
                    }
                }
                if n == 0 {
                    // Trees are in order of their first rule: no later
                    // one can do better either.
                    break;
                }
                let mut m = 0;
                if t.root & LEAF != 0 {
                    for &i in &on[..n] {
                        node[usize::from(i) % C] = t.root;
                    }
                } else {
                    for &i in &on[..n] {
                        let i = usize::from(i) % C;
                        let v = &view[i];
                        let at = if BMI2 {
                            t.cut.shifted(v)
                        } else {
                            t.cut.index(v)
                        };
                        let r = self.mem[(t.root as usize) + at];
                        node[i] = r;
                        cur[m % C] = i as u8;
                        m += usize::from(r & LEAF == 0);
                    }
                }
                while m > 0 {
                    let mut m2 = 0;
                    if ahead {
                        // Where each key goes, and a prefetch of it: the
                        // children's loads overlap, and the loop that
                        // reads them finds them in cache (a load that
                        // misses holds up retirement, and with it the
                        // loads behind it; a prefetch does not).
                        for &i in &cur[..m] {
                            let i = usize::from(i) % C;
                            let r = node[i];
                            let at = (r as u32 as usize) + child_index(r, &view[i]);
                            goes[i] = at;
                            prefetch(&self.mem, at);
                        }
                        for &i in &cur[..m] {
                            let i = usize::from(i) % C;
                            let x = self.mem[goes[i]];
                            node[i] = x;
                            nxt[m2 % C] = i as u8;
                            m2 += usize::from(x & LEAF == 0);
                        }
                    } else {
                        for &i in &cur[..m] {
                            let i = usize::from(i) % C;
                            let r = node[i];
                            let x = self.mem[(r as u32 as usize) + child_index(r, &view[i])];
                            node[i] = x;
                            nxt[m2 % C] = i as u8;
                            m2 += usize::from(x & LEAF == 0);
                        }
                    }
                    std::mem::swap(&mut cur, &mut nxt);
                    m = m2;
                }
                if ahead {
                    // The leaves' first blocks, asked for before any is
                    // read.
                    for &i in &on[..n] {
                        let r = node[usize::from(i) % C];
                        prefetch_block(&self.blocks, (r & START_MASK) as usize);
                    }
                }
                if ONE {
                    // One tree (`ONE`): no key has matched before it,
                    // and its leaf's match is its result, written here
                    // (`on` is `fast`): no pass over the keys after the
                    // tree (with the loop's copy for one tree, acl4_1k
                    // 185.3 -> 175.6 instructions a lookup). Every key's
                    // first block without a branch, then the keys it
                    // leaves undecided: a branch on each key's first
                    // block mispredicts where about half the keys miss it
                    // (acl4_1k 0.74-0.82x the time of that scan,
                    // BENCHMARKS.md).
                    let mut rest = 0;
                    for &i in &on[..n] {
                        let i = usize::from(i) % C;
                        let (hit, more) = self.first_block(node[i], &view[i]);
                        os[i] = (hit != NONE).then_some(hit);
                        cur[rest % C] = i as u8;
                        rest += usize::from(more);
                    }
                    // The undecided keys' leaves one after the other:
                    // few keys, and the rounds of `later_blocks` measured
                    // slower here (acl4_1k 1.14x, acl2_1k 1.11x).
                    for &i in &cur[..rest] {
                        let i = usize::from(i) % C;
                        let from = usize::from(node[i] & EXTRA == 0);
                        let b = self.scan_from(node[i], from, &view[i], &ks[i], NONE);
                        os[i] = (b != NONE).then_some(b);
                    }
                    continue;
                }
                // Several trees: most walks end in a leaf that does not
                // match, and a branch on each block's result is a coin
                // toss. Every key's first block is tested without one; the
                // keys it does not decide (no hit and more blocks, or rules
                // to confirm) go on a list for the rest, whose later blocks
                // are tested a block a round, without a branch either
                // (ipc1_10k 0.89x, fw2_10k 0.91x the time of a scan of
                // each leaf in turn).
                let mut rest = 0;
                for &i in &on[..n] {
                    let i = usize::from(i) % C;
                    let (hit, more) = self.first_block(node[i], &view[i]);
                    best[i] = best[i].min(hit);
                    cur[rest % C] = i as u8;
                    rest += usize::from(more);
                }
                // (`on` is done with: scratch.)
                self.later_blocks(&cur[..rest], &mut nxt, &mut on, &node, &view, ks, &mut best);
            }
            if !ONE {
                // (One tree wrote the results in its leaves' pass.)
                for &i in &fast[..nf] {
                    let i = usize::from(i) % C;
                    os[i] = (best[i] != NONE).then_some(best[i]);
                }
            }
            if ports & 1 == 0 && w.loose {
                self.again_loose(&fast[..nf], &view, ks, os);
            }
        }
    }

    /// The later blocks of the leaves of the keys `list` (their first
    /// block tested, no match in it, more blocks or rules to confirm),
    /// into `best`: one block a round for every key still looking,
    /// without a branch on a block's result (the scan of each leaf in
    /// turn branched on every block's hit and on its first rule against
    /// the key's match: ipc1_10k 0.63 mispredictions a lookup in
    /// callgrind's branch simulation); leaves with rules to confirm
    /// scanned whole ([`scan_from`](Self::scan_from)). `a` and `b` are
    /// scratch.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn later_blocks<F: FullKey, const C: usize>(
        &self,
        list: &[u8],
        a: &mut [u8; C],
        b: &mut [u8; C],
        node: &[u64; C],
        view: &[K4; C],
        ks: &[F],
        best: &mut [u32; C],
    ) {
        let mut m = 0;
        for &i in list {
            let i = usize::from(i) % C;
            if node[i] & EXTRA != 0 {
                best[i] = self.scan_from(node[i], 0, &view[i], &ks[i], best[i]);
            } else {
                a[m % C] = i as u8;
                m += 1;
            }
        }
        // The list of keys a round reads, and the one it writes; swapped.
        let (mut cur, mut nxt) = (a, b);
        let mut at = 1;
        while m > 0 {
            let mut m2 = 0;
            for &i in &cur[..m] {
                let i = usize::from(i) % C;
                let (hit, more) = self.block_at(node[i], at, &view[i], best[i]);
                best[i] = best[i].min(hit);
                nxt[m2 % C] = i as u8;
                m2 += usize::from(more);
            }
            std::mem::swap(&mut cur, &mut nxt);
            m = m2;
            at += 1;
        }
    }

    /// The keys `fast` of a chunk without ports, looked up again, their
    /// loose leaves confirmed on the full rules: a loose rule's lane may
    /// hit such a key (rare: not TCP or UDP, or a fragment) where the rule
    /// does not match it.
    #[cold]
    #[inline(never)]
    fn again_loose<F: FullKey>(&self, fast: &[u8], view: &[K4], ks: &[F], os: &mut [Option<u32>]) {
        for &i in fast {
            let i = usize::from(i);
            if !view[i].has_ports() {
                os[i] = self.lookup_loose(&view[i], &ks[i].full());
            }
        }
    }
}
