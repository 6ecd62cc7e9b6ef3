//! The decision-tree classifier: one HyperCuts-style tree (equal-size
//! cuts on one or two fields per node) over the IPv4 rules when it is
//! small enough, else CutSplit/EffiCuts-style partitioning into subsets by
//! which address fields are large, one tree per subset; leaves are
//! structure-of-arrays blocks of 8 rules tested with SSE2 lane compares
//! (AVX2 in the IPv4 batch lookup, where the CPU has it).
//!
//! # Algorithm
//! With at most [`SINGLE_TREE_MAX_RULES`] IPv4 rules, the build first tries
//! one tree over all of them, and keeps it if it fits in
//! [`Config::single_tree_budget`] 32-byte units per rule, or
//! [`SINGLE_TREE_FLOOR`] units for a small set (the trial stops at that
//! cap), with leaves of at most [`Config::leaf_bound`] times the number
//! of subsets it replaces (the same worst case as the subsets' trees): one walk per lookup is worth memory (acl1_10k, when it was
//! measured: one tree of 5.2 MiB, 264 instructions a lookup, against two
//! trees of 2.8 MiB and 279 with more mispredicted branches). Otherwise the
//! IPv4 rules are split by whether their source and destination prefixes
//! are at least [`Config::small_prefix`] long: four subsets (both small,
//! one small, none), so that a wildcard address in one subset does not
//! replicate the rules of another when the tree cuts that address. Subsets
//! with under 1/[`Config::merge_below`] of the rules join the general one.
//! A lookup walks the trees in order of their smallest rule index and skips
//! a tree once it has matched a rule before that index.
//!
//! A node is cut into `2^b` equal parts of one field, or `2^(b0+b1)`
//! parts of two (`b0 + b1 <= `[`Config::max_cut_bits`]; a tree's root up to
//! [`Config::root_cut_bits`], 16 by default, with its own space factor
//! [`Config::root_spfac`], so that the first step of a lookup is one
//! table of up to 65 536 children): for each field, as many bits as the space
//! factor allows (children's rules plus children at most [`Config::spfac`]
//! times the node's rules); the field whose largest child is smallest
//! wins, then bits of a second field are added while they make the largest
//! child smaller. A node with at most [`Config::binth`] rules, or that no
//! cut separates, is a leaf. A set that small (a 2-rule ACL) is a single
//! leaf: a lookup is one block test, no tree level.
//!
//! # Layout
//! Everything is in two flat arrays. `mem` holds the child arrays of
//! internal nodes, as `u64` node references (a root's cut is held apart,
//! unpacked, so it may be wider); `blocks` the leaves. A
//! reference with bit 31 clear is an internal node: bits 0..31 the offset
//! of its children in `mem`, bits 32..64 its cut as four bytes (lowest
//! cut bit and field of the first cut field, its number of bits, the same
//! for the second; see `child_index`), packed so that BMI2's shifts read
//! them as they are: a level is two shifts, two masks, a shift, an or and
//! one load. Bit 31 set, a leaf: bits 0..31 its first block, bits
//! 32..62 its number of blocks, bit 62 whether some rule in it needs its
//! full check.
//!
//! A `Block` is 8 rules in rule order, one array per field (256 bytes):
//! source and destination as biased `lo`/`span` pairs of `u32` lanes, the
//! ports and the protocol lane (`proto << 1 | has_ports`) as 16-bit lanes.
//! With the bias a range test is a wrapping subtraction and a signed
//! compare (SSE2 has no unsigned one): `psubd`/`pcmpgtd` on two 4-lane
//! vectors per address, `packssdw`, `psubw`/`pcmpgtw` for the rest, all
//! emitted by the compiler from plain loops over the lanes (the one
//! intrinsic is the final `pmovmskb`). [`Classifier::classify_batch_v4`] also has the same code
//! compiled with AVX2 and BMI1/2 (one 8-lane vector per address), which it
//! runs when the CPU has them (checked once, when the classifier is
//! built). The first matching rule is the first zero pair of bits of the
//! miss vector's sign mask (`pmovmskb`, a bit scan). Rules with conditions the
//! block does not hold (VLAN, TCP flags, ICMP, a range of protocols with
//! ports) carry a flag on their index and are confirmed on the full rule.
//!
//! # Pruning and memory
//! A node keeps only the rules that meet its box, in priority order, and
//! drops every rule after the first one that covers the whole box
//! unconditionally. The fifth cut field is the blocks' protocol lane
//! (`proto << 1 | has_ports`), so a rule with port ranges and one protocol
//! is an exact box too and prunes the rules after it. Leaves with the same
//! rule list are stored once. When the structure reaches
//! [`Config::max_entries`] units, the remaining nodes become leaves
//! (slower, never wrong).
//!
//! # Bounded worst case
//! A lookup compares at most one leaf per tree, so its worst case is the
//! sum over the trees of their largest leaf ([`Stats::worst_entries`]).
//! Every tree is built as a trial: within [`Config::tree_budget`] units
//! per rule of its family and with no leaf over [`Config::leaf_bound`] entries. A
//! trial that fails is rolled back and its rules split in two trees (as
//! rte_acl splits a trie that grows too large): by shape when one splits
//! them evenly (the rules whose source is the narrower address against
//! the others, or whose source port range is the narrower; a
//! cross-product of wide sources with wide destinations comes apart into
//! two trees that each cut their narrow field), else the first and the
//! second half in rule order; breadth first, up to [`Config::max_trees`]
//! per family. With the defaults a lookup compares at most
//! [`WORST_ENTRIES`] = 16 × 64 leaf entries. A ruleset that cannot be cut
//! that way (thousands of overlapping port ranges, rules that differ only
//! in TCP flags) gets its last trees as large as the memory cap lets
//! them be, and the build says so: [`Stats::bounded`] false, with the
//! actual worst case in [`Stats::worst_entries`]. There is no linear-scan
//! fallback: every tree is cut as far as the cap allows.
//!
//! # Build time
//! A candidate cut is counted without a pass over the node's rules of
//! its own: per field, one pass counts where the rules' ranges start and
//! end among the finest children any cut that fits the space factor can
//! have (`Counts`), and every coarser cut's children are read off those
//! counts. The trees' trials are independent but for the leaves a tree
//! shares with the trees before it: with [`Config::threads`] above one,
//! a family of at least [`PARALLEL_MIN_RULES`] rules builds its trials
//! each in arrays of its own on up to that many threads (the single tree
//! and the subsets' trees at once; then the halves of the trees that
//! failed), and the serial order takes them: a tree that fits is moved
//! into the arrays (its nodes after the others, its leaves shared where
//! the build already has them), a trial that failed on a leaf over the
//! bound, or on its budget without a leaf in common with the earlier
//! trees, fails as it would have here; anything else is built again
//! here. The result is the serial build's, bit for bit.
//!
//! # Batches
//! [`Classifier::classify_batch_v4`] (and [`Classify::classify_batch`]) go
//! breadth first, 256 keys at a time (64 in a batch that small): per tree,
//! every key takes its root step, then every key still at an internal node
//! moves one level, round after round; then every key's leaf is scanned.
//! Which keys go on is a list rebuilt each round without a branch, so no
//! branch depends on what a load found and a round's loads are independent
//! (a walk one key after the other mispredicts its loop's exit on most
//! lookups; four lookups in flight, the batch before this one, branched on
//! every level). With several trees a key's first block is tested without a
//! branch too. In chunks of 64 and past 1 MiB of nodes and blocks, a round
//! first computes and prefetches every key's child, then reads them.
//! Measured on acl1_10k against the four-in-flight batch: 0.92x in chunks
//! of 64, 0.96x more with the prefetches, 0.91x more in chunks of 256
//! (without them); an AVX-512 round (gathers of eight children, compressed
//! lists) measured 1.12-1.16x slower than the scalar one and was not kept.
//!
//! # IPv6
//! The rules that can match IPv6 keys get a tree of their own, built the
//! same way over a projection: one 32-bit word of each address (per
//! address, the word where the rules' prefixes differ most; `/48`s under
//! one `/32` differ in the second), ports and protocol. A projection is a
//! superset of its rule, so every lane hit in an IPv6 leaf is confirmed on
//! the full rule, in rule order. Non-IP keys scan the rules that can match
//! them (a list built once), with the reference semantics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::rule::{has, Key, Rule, Ruleset, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::Classify;

const DIMS: usize = 5;
/// In a node reference: a leaf (bit 31, so the test is on the low word).
const LEAF: u64 = 1 << 31;
/// In a leaf reference: its first block.
const START_MASK: u64 = LEAF - 1;
/// In a leaf reference: some entry needs its full rule checked.
const EXTRA: u64 = 1 << 62;
/// In a leaf reference, after `>> 32`: the number of blocks.
const BLOCKS_MASK: u64 = (1 << 30) - 1;
/// Entries per leaf block.
const BLOCK: usize = 8;
const NONE: u32 = u32::MAX;
/// Size of the nodes and blocks past which a batch of small chunks
/// prefetches ([`Classifier::breadth_in`]): a typical L2 cache. Below it
/// the structure stays in cache and the prefetches only cost (fw1_1k's
/// four trees, 0.4 MiB: 5-8 % slower with them); above it they pay
/// (acl1_10k, 5 MiB: 4-8 % faster).
const PREFETCH_ABOVE: usize = 1 << 20;
/// Keys per chunk of the breadth-first batch ([`Classifier::breadth`]).
const CHUNK: usize = 256;
/// Keys per chunk of a batch of at most that many keys: about 10 % slower
/// a key than [`CHUNK`] on a long trace (fewer keys per round to overlap),
/// but a 32-packet batch does not set up 256 keys' arrays.
const SMALL_CHUNK: usize = 64;
/// Keys walked in lockstep by [`Classifier::classify_lockstep`].
pub const GROUP: usize = 8;
/// An empty leaf: a tree a key skips.
const EMPTY: u64 = LEAF;
/// Most IPv4 rules for which a build first tries a single tree
/// ([`Config::single_tree_budget`]): past it the trial would cost more
/// build time than it saves lookup time. A trial that fails costs about
/// its cap's worth of building (acl1_10k and fw1_10k concatenated, 19 152
/// rules: 88 ms instead of 31, then four trees); one that succeeds pays
/// (acl1_10k: 52 ms, one walk a lookup).
pub const SINGLE_TREE_MAX_RULES: usize = 32768;
/// The least a single-tree trial may use, in 32-byte units (2 MiB),
/// whatever [`Config::single_tree_budget`] gives: one walk instead of
/// several is worth that much on a small set (fw1_1k: one tree of 1.4 MiB,
/// 282 instructions a lookup, against four trees of 0.4 MiB and 465).
pub const SINGLE_TREE_FLOOR: usize = 1 << 16;
/// Most bits of a root cut ([`Config::root_cut_bits`]).
pub const ROOT_MAX_BITS: u8 = 16;
/// Deepest node; a subtree this deep becomes a leaf.
const MAX_DEPTH: usize = 32;

/// Build parameters of a [`Classifier`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// A node with at most this many rules is a leaf.
    pub binth: usize,
    /// Space factor: a cut may grow while the children hold at most
    /// `spfac` × the node's rules in total.
    pub spfac: f64,
    /// Most children of one node, as a power of two (clamped to
    /// [`ROOT_MAX_BITS`]; the space factor usually binds first).
    pub max_cut_bits: u8,
    /// Memory cap, in 32-byte units: leaf entries plus node words / 4,
    /// over all trees; past it, nodes stop being cut (lookups get slower,
    /// never wrong).
    pub max_entries: usize,
    /// A field is "small" for partitioning when its prefix is at least
    /// this long.
    pub small_prefix: u8,
    /// A subset with fewer than 1/`merge_below` of the rules (and fewer
    /// than 16 in any case) is merged into the general one.
    pub merge_below: usize,
    /// Most children of a tree's root, as a power of two (at most
    /// [`ROOT_MAX_BITS`]): the root is one table lookup with its cut held
    /// apart from the node references, so it may be wider than a node.
    pub root_cut_bits: u8,
    /// The space factor of a root cut (as [`spfac`](Self::spfac)).
    pub root_spfac: f64,
    /// With at most [`SINGLE_TREE_MAX_RULES`] IPv4 rules, first try one
    /// tree over all of them (one walk per lookup), kept if it needs at
    /// most this many 32-byte units (block lanes plus node words / 4) per
    /// rule, or [`SINGLE_TREE_FLOOR`] units if that is more; otherwise
    /// (or with 0) the rules are partitioned.
    pub single_tree_budget: usize,
    /// The most leaf entries (rule copies, padding included) a tree may
    /// have in one leaf: a tree whose build needs a larger leaf, or more
    /// than [`tree_budget`](Self::tree_budget) units, is split into two
    /// trees over the first and the second half of its rules (as rte_acl
    /// splits a trie that grows too large), up to
    /// [`max_trees`](Self::max_trees) trees per address family.
    pub leaf_bound: usize,
    /// The memory a tree may use before it is split: 32-byte units per
    /// rule of its address family (not of the tree), or
    /// [`SINGLE_TREE_FLOOR`] units if that is more; all trees together
    /// stay within [`max_entries`](Self::max_entries).
    pub tree_budget: usize,
    /// Most trees per address family. With every tree within
    /// [`leaf_bound`](Self::leaf_bound), a lookup compares at most
    /// `max_trees × leaf_bound` leaf entries ([`Stats::worst_entries`]
    /// gives the actual bound of a build, [`Stats::bounded`] whether it
    /// held).
    pub max_trees: usize,
    /// Most threads a build uses (0: [`std::thread::available_parallelism`],
    /// and never more than that). With more than one, a family of at
    /// least [`PARALLEL_MIN_RULES`] rules builds its trees' trials in
    /// parallel, each in arrays of its own, and takes them in the serial
    /// order: the classifier is the same, bit for bit, whatever the
    /// threads.
    pub threads: usize,
}

/// Fewest rules of a family for which a build runs its trees' trials in
/// parallel ([`Config::threads`]): below it a build takes milliseconds.
pub const PARALLEL_MIN_RULES: usize = 1024;

/// The bound on the leaf entries one lookup compares, with the default
/// [`Config`]: [`Config::max_trees`] × [`Config::leaf_bound`]. A build
/// that cannot meet it says so ([`Stats::bounded`] false).
pub const WORST_ENTRIES: usize = 16 * 64;

impl Default for Config {
    fn default() -> Config {
        Config {
            binth: 32,
            spfac: 4.0,
            max_cut_bits: 8,
            max_entries: 1 << 21,
            small_prefix: 16,
            merge_below: 16,
            single_tree_budget: 16,
            root_cut_bits: 16,
            root_spfac: 64.0,
            leaf_bound: 64,
            tree_budget: 64,
            max_trees: 16,
            threads: 0,
        }
    }
}

/// What a build produced: sizes, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Rules in the ruleset.
    pub rules: usize,
    /// Trees (non-empty subsets of the IPv4 rules).
    pub trees: usize,
    /// Internal nodes.
    pub nodes: usize,
    /// Distinct leaves.
    pub leaves: usize,
    /// Leaf entry slots (rule copies and the padding that fills each leaf's
    /// last 8-entry block) over all leaves.
    pub entries: usize,
    /// Largest leaf.
    pub max_leaf: usize,
    /// Deepest leaf (root = 0).
    pub max_depth: usize,
    /// Bytes of the lookup structure (nodes, entries, lists, rules).
    pub bytes: usize,
    /// The most leaf entries one lookup can compare (padding included):
    /// per address family, the sum over its trees of the tree's largest
    /// leaf; the larger of the two families.
    pub worst_entries: usize,
    /// Trees that came from splitting a tree that outgrew
    /// [`Config::leaf_bound`] or [`Config::tree_budget`] (0: none was
    /// split).
    pub split_trees: usize,
    /// Every tree met [`Config::leaf_bound`] within its budget. False: the
    /// build ran out of trees ([`Config::max_trees`]) or of memory
    /// ([`Config::max_entries`]) and some tree has larger leaves; lookups
    /// are still exact, [`worst_entries`](Self::worst_entries) says how
    /// slow they can get.
    pub bounded: bool,
}

/// Bias that maps unsigned order to signed order (`x ^ BIAS32 as i32`):
/// SSE2 has signed lane compares only.
const BIAS32: u32 = 1 << 31;
/// [`BIAS32`] for 16-bit lanes.
const BIAS16: u16 = 1 << 15;
/// In [`Block::id`]: the rule has conditions the block does not hold
/// (VLAN, TCP flags, ICMP, a protocol range with ports): a lane hit is
/// confirmed on the full rule.
const EXTRA_ID: u32 = 1 << 31;

/// Eight leaf rules, structure of arrays: each field test is a plain
/// array operation over the 8 lanes, which the compiler turns into SSE2
/// lane compares (two 4-lane vectors for the addresses, one 8-lane vector
/// for each 16-bit field).
///
/// A range `[lo, hi]` is stored as `lo` and `span = hi - lo`, both biased
/// (`lo - 2^(w-1)`, `span ^ 2^(w-1)` as signed), so that the test
/// `lo <= x <= hi` is one wrapping subtraction and one *signed* compare:
/// `(x - lo') as signed <= span'`. The protocol lane holds
/// `proto << 1 | has_ports`, so a rule that needs ports (a port range other
/// than the whole space) and names one protocol is the range
/// `[p << 1 | 1, p << 1 | 1]`, and one that does not need them
/// `[lo << 1, hi << 1 | 1]`.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Block {
    src_lo: [u32; BLOCK],
    src_span: [i32; BLOCK],
    dst_lo: [u32; BLOCK],
    dst_span: [i32; BLOCK],
    sp_lo: [u16; BLOCK],
    sp_span: [i16; BLOCK],
    dp_lo: [u16; BLOCK],
    dp_span: [i16; BLOCK],
    pr_lo: [u16; BLOCK],
    pr_span: [i16; BLOCK],
    /// Rule index, [`EXTRA_ID`] set if the full rule must confirm a hit;
    /// [`NONE`] in padding lanes.
    id: [u32; BLOCK],
}

/// One leaf rule, before it goes into a lane of a [`Block`] (unbiased).
#[derive(Clone, Copy, Debug, Default)]
struct Lane {
    src: (u32, u32),
    dst: (u32, u32),
    sp: (u16, u16),
    dp: (u16, u16),
    /// Range of the protocol lane (`proto << 1 | has_ports`).
    pr: (u16, u16),
    id: u32,
}

impl Block {
    /// A block of padding: no lane ever hits (the protocol lane of a key
    /// is at most 511).
    const PAD: Block = Block {
        src_lo: [0; BLOCK],
        src_span: [0; BLOCK],
        dst_lo: [0; BLOCK],
        dst_span: [0; BLOCK],
        sp_lo: [0; BLOCK],
        sp_span: [0; BLOCK],
        dp_lo: [0; BLOCK],
        dp_span: [0; BLOCK],
        pr_lo: [u16::MAX ^ BIAS16; BLOCK],
        pr_span: [i16::MIN; BLOCK],
        id: [NONE; BLOCK],
    };

    fn set(&mut self, j: usize, l: &Lane) {
        self.src_lo[j] = l.src.0 ^ BIAS32;
        self.src_span[j] = ((l.src.1 - l.src.0) ^ BIAS32) as i32;
        self.dst_lo[j] = l.dst.0 ^ BIAS32;
        self.dst_span[j] = ((l.dst.1 - l.dst.0) ^ BIAS32) as i32;
        self.sp_lo[j] = l.sp.0 ^ BIAS16;
        self.sp_span[j] = ((l.sp.1 - l.sp.0) ^ BIAS16) as i16;
        self.dp_lo[j] = l.dp.0 ^ BIAS16;
        self.dp_span[j] = ((l.dp.1 - l.dp.0) ^ BIAS16) as i16;
        self.pr_lo[j] = l.pr.0 ^ BIAS16;
        self.pr_span[j] = ((l.pr.1 - l.pr.0) ^ BIAS16) as i16;
        self.id[j] = l.id;
    }

    /// The lanes `k` misses, all-ones per lane. Branch-free; the compiler
    /// vectorises it (SSE2 `psubd`/`pcmpgtd` on the addresses, `packssdw`,
    /// then `psubw`/`pcmpgtw` on the 16-bit fields).
    #[inline(always)]
    fn misses(&self, k: &K4) -> [i16; BLOCK] {
        // Misses as all-ones lanes, one field at a time, so that each loop
        // is one vector operation.
        let mut m32 = [0i32; BLOCK];
        for (j, m) in m32.iter_mut().enumerate() {
            *m = -i32::from(k.f[0].wrapping_sub(self.src_lo[j]) as i32 > self.src_span[j]);
        }
        for (j, m) in m32.iter_mut().enumerate() {
            *m |= -i32::from(k.f[1].wrapping_sub(self.dst_lo[j]) as i32 > self.dst_span[j]);
        }
        let (sp, dp, pr) = (k.sp(), k.dp(), k.pr());
        let mut m16 = [0i16; BLOCK];
        for (j, m) in m16.iter_mut().enumerate() {
            *m = m32[j] as i16
                | -i16::from(sp.wrapping_sub(self.sp_lo[j]) as i16 > self.sp_span[j])
                | -i16::from(dp.wrapping_sub(self.dp_lo[j]) as i16 > self.dp_span[j])
                | -i16::from(pr.wrapping_sub(self.pr_lo[j]) as i16 > self.pr_span[j]);
        }
        m16
    }

    /// The first lane `k` hits, or [`BLOCK`] or more if none: the miss
    /// vector's sign bytes (`pmovmskb`, two bits a lane), inverted, and a
    /// bit scan.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn first_hit(&self, k: &K4) -> usize {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_movemask_epi8};
        let m = self.misses(k);
        // SAFETY: `m` is 16 bytes and `_mm_loadu_si128` reads 16 bytes
        // with no alignment requirement; both intrinsics need SSE2 only,
        // which every x86_64 CPU has.
        #[allow(unsafe_code)]
        let mask = unsafe { _mm_movemask_epi8(_mm_loadu_si128(m.as_ptr().cast())) };
        let hits = !(mask as u32) | 1 << 16;
        hits.trailing_zeros() as usize / 2
    }

    /// The first lane `k` hits, or [`BLOCK`] or more if none.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn first_hit(&self, k: &K4) -> usize {
        // The miss vector goes through memory as two words (without the
        // barrier, LLVM fuses the lane tests with the search and
        // scalarises both); the first hit is the first zero 16-bit group.
        let m = std::hint::black_box(self.misses(k));
        let w = |i: usize| {
            u64::from(m[i] as u16)
                | u64::from(m[i + 1] as u16) << 16
                | u64::from(m[i + 2] as u16) << 32
                | u64::from(m[i + 3] as u16) << 48
        };
        // Branch-free: a 128-bit bit scan is two scans and a select.
        let hits = !(u128::from(w(0)) | u128::from(w(4)) << 64);
        hits.trailing_zeros() as usize / 16
    }

    /// The lanes `k` hits, as bits (lane 0 = bit 0).
    #[inline(always)]
    fn hit_mask(&self, k: &K4) -> u32 {
        let m16 = self.misses(k);
        let mut h = 0;
        for (j, &m) in m16.iter().enumerate() {
            h |= u32::from(m == 0) << j;
        }
        h
    }
}

/// An IPv4 key as the trees see it: 32 bytes, two vector stores.
#[derive(Clone, Copy, Default)]
struct K4 {
    /// The cut fields src, dst, sport, dport and the protocol lane
    /// (`proto << 1 | has_ports`), then at [`PR`] the same protocol lane
    /// protocol lane of the blocks (`proto << 1 | has_ports`); 8 slots so
    /// that a field number masked with 7 needs no bounds check.
    f: [u32; 8],
}

/// In [`K4::f`]: the protocol lane (not a cut field).
const PR: usize = 5;

/// What a leaf's rules with conditions beyond the block's lanes (VLAN, TCP
/// flags, ICMP) are checked against: the whole key, built only then.
trait FullKey {
    fn full(&self) -> Key;
}

impl FullKey for Key {
    #[inline]
    fn full(&self) -> Key {
        *self
    }
}

impl FullKey for KeyV4 {
    #[inline]
    fn full(&self) -> Key {
        self.key()
    }
}

/// The fields of an IPv4 packet a [`Key`] holds, in plain integers: what
/// [`Classifier::classify_batch_v4`] classifies. Addresses are host order
/// (`u32::from(Ipv4Addr)`); `has` holds the [`has`] bits other than
/// [`has::IP`] (which an IPv4 key always has).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyV4 {
    /// Source address.
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The (outer) VLAN id, if the frame is tagged.
    pub vlan: Option<u16>,
    /// IP protocol.
    pub proto: u8,
    /// TCP flags byte.
    pub tcp_flags: u8,
    /// ICMP type.
    pub icmp_type: u8,
    /// ICMP code.
    pub icmp_code: u8,
    /// Which of ports, TCP flags and ICMP are valid: bits of [`has`].
    pub has: u8,
}

impl KeyV4 {
    /// The same key as a [`Key`] (EtherType IPv4, [`has::IP`] set).
    pub fn key(&self) -> Key {
        Key {
            src: u128::from(self.src),
            dst: u128::from(self.dst),
            ethertype: ETHERTYPE_IPV4,
            vlan: self.vlan,
            sport: self.sport,
            dport: self.dport,
            proto: self.proto,
            tcp_flags: self.tcp_flags,
            icmp_type: self.icmp_type,
            icmp_code: self.icmp_code,
            has: self.has | has::IP,
            ct: 0,
            mark: 0,
        }
    }

    /// `k` as an IPv4 key, if it is one (EtherType IPv4, [`has::IP`],
    /// addresses within 32 bits).
    pub fn of(k: &Key) -> Option<KeyV4> {
        let ipv4 =
            k.ethertype == ETHERTYPE_IPV4 && k.has & has::IP != 0 && (k.src | k.dst) >> 32 == 0;
        ipv4.then_some(KeyV4 {
            src: k.src as u32,
            dst: k.dst as u32,
            sport: k.sport,
            dport: k.dport,
            vlan: k.vlan,
            proto: k.proto,
            tcp_flags: k.tcp_flags,
            icmp_type: k.icmp_type,
            icmp_code: k.icmp_code,
            has: k.has & !has::IP,
        })
    }
}

impl K4 {
    #[inline(always)]
    fn sp(&self) -> u16 {
        self.f[2] as u16
    }

    #[inline(always)]
    fn dp(&self) -> u16 {
        self.f[3] as u16
    }

    #[inline(always)]
    fn pr(&self) -> u16 {
        self.f[PR] as u16
    }

    /// The tree view of an IPv4 key.
    #[inline(always)]
    fn of_v4(k: &KeyV4) -> K4 {
        K4::new(k.src, k.dst, k.sport, k.dport, k.proto, k.has)
    }

    /// The view of the address fields `src` and `dst` (32 bits of each)
    /// and the rest of a key, `has` its [`has`] bits.
    #[inline(always)]
    fn new(src: u32, dst: u32, sport: u16, dport: u16, proto: u8, has: u8) -> K4 {
        K4 {
            f: [
                src,
                dst,
                u32::from(sport),
                u32::from(dport),
                u32::from(proto) << 1 | u32::from(has & has::PORTS != 0),
                u32::from(proto) << 1 | u32::from(has & has::PORTS != 0),
                0,
                0,
            ],
        }
    }

    /// The tree view of `k`, if it takes the IPv4 path.
    #[inline(always)]
    fn of(k: &Key) -> Option<K4> {
        KeyV4::of(k).map(|v| K4::of_v4(&v))
    }
}

/// Which 32-bit word of the source and of the destination address (0:
/// the top one) the IPv6 tree cuts and its blocks test: for each, the word
/// where the IPv6 rules' prefixes differ most.
#[derive(Clone, Copy, Debug, Default)]
struct V6Words {
    src: u8,
    dst: u8,
}

impl V6Words {
    /// The words that tell the rules `ids` apart best: per address, the
    /// word with the most distinct projections (the lowest on a tie).
    fn choose(rules: &[Rule], ids: &[u32]) -> V6Words {
        let best = |addr: fn(&Rule) -> crate::Addr| {
            (0..4u8)
                .map(|w| {
                    let mut seen: Vec<(u32, u32)> = ids
                        .iter()
                        .map(|&i| v6_word_range(addr(&rules[i as usize]), w))
                        .collect();
                    seen.sort_unstable();
                    seen.dedup();
                    (seen.len(), std::cmp::Reverse(w))
                })
                .max()
                .map_or(0, |(_, std::cmp::Reverse(w))| w)
        };
        V6Words {
            src: best(|r| r.src),
            dst: best(|r| r.dst),
        }
    }

    /// The tree view of an IPv6 key: the chosen words of its addresses,
    /// then ports and protocol as for IPv4.
    #[inline]
    fn view(&self, k: &Key) -> K4 {
        let word = |a: u128, w: u8| (a >> (96 - 32 * u32::from(w))) as u32;
        K4::new(
            word(k.src, self.src),
            word(k.dst, self.dst),
            k.sport,
            k.dport,
            k.proto,
            k.has,
        )
    }
}

/// The range of 32-bit word `w` (0: the top one) of the IPv6 addresses
/// `a` matches: a superset of `a` on that word (everything for an address
/// that is not an IPv6 prefix, which an IPv6 key's rule can only be
/// `Any`).
fn v6_word_range(a: crate::Addr, w: u8) -> (u32, u32) {
    match a {
        crate::Addr::V6(p, len) => {
            let start = 32 * u32::from(w);
            let bits = u32::from(len).saturating_sub(start).min(32);
            let v = (p >> (96 - start)) as u32;
            let m = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            (v & m, v | !m)
        }
        _ => (0, u32::MAX),
    }
}

#[derive(Clone, Copy, Debug)]
struct Tree {
    /// The root's reference: a leaf, or (bit 31 clear) the offset of the
    /// root's children in `mem`, whose cut is `cut`.
    root: u64,
    /// The root's cut, unpacked (it may be wider than a node's).
    cut: RootCut,
    /// The smallest rule index in the tree: a lookup that already matched
    /// a smaller one skips the tree.
    min_id: u32,
}

/// A root's cut: the child index is `rotate_right(f[f0], rot0) & m0 |
/// rotate_right(f[f1], rot1) & m1`, as [`child_index`] with masks of up
/// to [`ROOT_MAX_BITS`] bits.
#[derive(Clone, Copy, Debug, Default)]
struct RootCut {
    f0: u8,
    rot0: u8,
    f1: u8,
    rot1: u8,
    m0: u32,
    m1: u32,
}

impl RootCut {
    fn of(d0: usize, s0: u8, b0: u8, d1: usize, s1: u8, b1: u8) -> RootCut {
        RootCut {
            f0: d0 as u8,
            rot0: (s0.wrapping_sub(b1)) & 31,
            f1: d1 as u8,
            rot1: s1 & 31,
            m0: ((1u32 << b0) - 1) << b1,
            m1: (1u32 << b1) - 1,
        }
    }

    #[inline(always)]
    fn index(&self, k: &K4) -> usize {
        let v0 = k.f[usize::from(self.f0 & 7)].rotate_right(u32::from(self.rot0)) & self.m0;
        let v1 = k.f[usize::from(self.f1 & 7)].rotate_right(u32::from(self.rot1)) & self.m1;
        (v0 | v1) as usize
    }
}

/// Asks for the cache line of `p` (nothing off x86_64). Any address will
/// do: a prefetch never faults.
#[inline(always)]
fn prefetch_ptr(p: *const u8) {
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
fn prefetch<T>(mem: &[T], at: usize) {
    if let Some(p) = mem.get(at) {
        prefetch_ptr((p as *const T).cast());
    }
}

/// Asks for the four cache lines of `blocks[at]`.
#[inline(always)]
fn prefetch_block(blocks: &[Block], at: usize) {
    if let Some(b) = blocks.get(at) {
        let p = (b as *const Block).cast::<u8>();
        for line in 0..4 {
            prefetch_ptr(p.wrapping_add(64 * line));
        }
    }
}

/// Whether the running CPU has AVX2 and BMI1/BMI2 (every CPU with AVX2
/// but a few low-power ones has both).
fn has_avx2() -> bool {
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

/// The packet classifier: first matching rule of a [`Ruleset`], through
/// decision trees (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Classifier {
    rules: Vec<Rule>,
    trees: Vec<Tree>,
    mem: Vec<u64>,
    blocks: Vec<Block>,
    /// The trees over the rules that can match IPv6 keys, on one 32-bit
    /// word of each address (`v6_words`).
    v6: Vec<Tree>,
    v6_words: V6Words,
    /// Rules that can match keys off the IPv4 and IPv6 paths (non-IP).
    other: Vec<u32>,
    stats: Stats,
    /// The CPU has AVX2: [`Classifier::classify_batch_v4`] runs its AVX2
    /// build.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    avx2: bool,
    /// The nodes and blocks are larger than [`PREFETCH_ABOVE`]: a batch of
    /// small chunks prefetches each round's children and the leaves' first
    /// blocks.
    prefetch: bool,
}

/// The child of internal node `r` that `k` falls in. The cut is packed
/// in bits 32..64 of the reference, a byte each: the first cut field's
/// lowest cut bit (bits 0..5) and field (bits 5..8), its number of cut bits,
/// the same two bytes for the second field. The child index is `(bits
/// s0..s0+b0 of d0) << b1 | (bits s1..s1+b1 of d1)`, and the packing is
/// the one BMI2's shifts read as they are: `shrx` takes its count modulo
/// 32 (so the shift is the byte itself, the field bits above it ignored)
/// and `bzhi` its length from the low byte, so a level is two loads of key
/// fields, two shifts, two masks, one shift, an or and the child's load.
#[inline(always)]
fn child_index(r: u64, k: &K4) -> usize {
    let h = (r >> 32) as u32;
    let f0 = k.f[((h >> 5) & 7) as usize];
    let f1 = k.f[((h >> 21) & 7) as usize];
    let (b0, b1) = ((h >> 8) & 0xff, h >> 24);
    let v0 = f0.wrapping_shr(h) & !u32::MAX.wrapping_shl(b0);
    let v1 = f1.wrapping_shr(h >> 16) & !u32::MAX.wrapping_shl(b1);
    (v0.wrapping_shl(b1) | v1) as usize
}

/// The reference to an internal node whose children start at `o`: the
/// cut is packed into the reference ([`child_index`]), so a level costs
/// one load. The child index is `(bits s0..s0+b0 of d0) << b1 | (bits
/// s1..s1+b1 of d1)`, `b0 + b1 <= `[`ROOT_MAX_BITS`].
fn node_ref(o: usize, d0: usize, s0: u8, b0: u8, d1: usize, s1: u8, b1: u8) -> u64 {
    debug_assert!(d0 < 8 && d1 < 8 && s0 < 32 && s1 <= 32 && b0 >= 1 && b0 + b1 <= ROOT_MAX_BITS);
    debug_assert!((o as u64) < LEAF);
    let s1 = if b1 == 0 { 0 } else { u32::from(s1) };
    let h = u32::from(s0) | (d0 as u32) << 5 | u32::from(b0) << 8;
    let h = h | (s1 | (d1 as u32) << 5) << 16 | u32::from(b1) << 24;
    u64::from(h) << 32 | o as u64
}

impl Classifier {
    /// Builds the classifier for `rs` with the default [`Config`].
    pub fn new(rs: &Ruleset) -> Classifier {
        Classifier::with_config(rs, &Config::default())
    }

    /// Builds the classifier for `rs` with `cfg`.
    pub fn with_config(rs: &Ruleset, cfg: &Config) -> Classifier {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = match cfg.threads {
            0 => cores,
            t => t.min(cores),
        };
        Classifier::with_threads(rs, cfg, threads)
    }

    /// [`with_config`](Self::with_config) on up to `threads` threads.
    fn with_threads(rs: &Ruleset, cfg: &Config, threads: usize) -> Classifier {
        let rules = rs.rules.clone();
        let (mut v4, mut v6, mut other) = (Vec::new(), Vec::new(), Vec::new());
        for (i, r) in rules.iter().enumerate() {
            let i = i as u32;
            if r.applies_to(ETHERTYPE_IPV4) {
                v4.push(i);
            }
            if r.applies_to(ETHERTYPE_IPV6) {
                v6.push(i);
            }
            if r.needs() & has::IP == 0 {
                other.push(i);
            }
        }
        let cfg = &Config {
            max_cut_bits: cfg.max_cut_bits.clamp(1, ROOT_MAX_BITS),
            binth: cfg.binth.max(1),
            ..*cfg
        };
        let brules: Vec<BRule> = rules
            .iter()
            .enumerate()
            .map(|(i, r)| BRule::of(i, r))
            .collect();
        // The IPv6 rules: trees over a 32-bit word of each address, in the
        // same arrays. The projection of a rule on the words is a superset
        // of it, so every hit is confirmed on the full rule.
        let words = V6Words::choose(&rules, &v6);
        let brules6: Vec<BRule> = rules
            .iter()
            .enumerate()
            .map(|(i, r)| BRule::of_v6(i, r, words))
            .collect();
        let mut b = Builder::new(&brules, cfg, cfg.max_entries);
        b.threads = threads;
        let trees = b.family(&v4);
        b.br = &brules6;
        b.leaves.clear();
        let v6 = b.family(&v6);
        let mut stats = b.stats;
        stats.worst_entries = b.worst;
        let (mem, blocks) = (b.mem, b.blocks);
        stats.rules = rules.len();
        stats.trees = trees.len() + v6.len();
        stats.entries = (blocks.len() - 1) * BLOCK;
        let mem_bytes = mem.len() * 8 + blocks.len() * std::mem::size_of::<Block>();
        stats.bytes = mem.len() * 8
            + blocks.len() * std::mem::size_of::<Block>()
            + other.len() * 4
            + rules.len() * std::mem::size_of::<Rule>();
        Classifier {
            rules,
            trees,
            mem,
            blocks,
            v6,
            v6_words: words,
            other,
            stats,
            avx2: has_avx2(),
            prefetch: mem_bytes > PREFETCH_ABOVE,
        }
    }

    /// Sizes of the built structure.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The rules, in priority order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

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
            best = self.scan(r, &k, key, best);
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
    fn walk_tree(&self, t: &Tree, k: &K4) -> u64 {
        let mut r = t.root;
        if r & LEAF == 0 {
            r = self.mem[(r as usize) + t.cut.index(k)];
        }
        self.walk(r, k)
    }

    #[inline(always)]
    fn walk(&self, mut r: u64, k: &K4) -> u64 {
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
    fn scan<F: FullKey>(&self, r: u64, k: &K4, key: &F, best: u32) -> u32 {
        self.scan_from::<_, false>(r, 0, k, key, best)
    }

    /// [`scan`](Self::scan) from block `from` of the leaf on (the blocks
    /// before it missed); a leaf with rules to confirm goes to
    /// [`scan_extra`](Self::scan_extra), whole. `FIRST`: no match before
    /// this leaf (`best` is [`NONE`]), so blocks are not tested against it.
    #[inline(always)]
    fn scan_from<F: FullKey, const FIRST: bool>(
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
            if !FIRST && blk.id[0] >= best {
                // Every rule here and after comes after the one matched.
                break;
            }
            let j = blk.first_hit(k);
            // Lanes are in rule order: the first hit is the best.
            let id = blk.id[j & (BLOCK - 1)];
            if j < BLOCK {
                return id.min(best);
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
    fn first_block(&self, r: u64, k: &K4) -> (u32, bool) {
        let start = (r & START_MASK) as usize;
        let blocks = (r >> 32) & BLOCKS_MASK;
        let blk = &self.blocks[start];
        let j = blk.first_hit(k);
        let id = blk.id[j & (BLOCK - 1)];
        let confirm = r & EXTRA != 0;
        let hit = if j < BLOCK && !confirm { id } else { NONE };
        (hit, confirm | (j >= BLOCK) & (blocks > 1))
    }

    /// [`scan`](Self::scan) for leaves holding rules with conditions the
    /// blocks do not hold (VLAN, TCP flags, ICMP): a hit on one of those
    /// is confirmed on the full rule.
    #[cold]
    fn scan_extra<F: FullKey>(&self, r: u64, k: &K4, key: &F, best: u32) -> u32 {
        let key = key.full();
        let start = (r & START_MASK) as usize;
        let blocks = ((r >> 32) & BLOCKS_MASK) as usize;
        for blk in &self.blocks[start..start + blocks] {
            if blk.id[0] & !EXTRA_ID >= best {
                break;
            }
            let mut hits = blk.hit_mask(k);
            while hits != 0 {
                let j = hits.trailing_zeros() as usize;
                hits &= hits - 1;
                let e = blk.id[j];
                let id = e & !EXTRA_ID;
                if id >= best {
                    return best;
                }
                if e & EXTRA_ID == 0 || self.rules[id as usize].matches(&key) {
                    return id;
                }
            }
        }
        best
    }

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
                    best[i] = self.scan(r[i], &k4[i], &ks[i], best[i]);
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

    /// One lookup: the trees for IPv4 keys, the lists otherwise.
    #[inline(always)]
    fn lookup(&self, key: &Key) -> Option<u32> {
        let Some(k) = K4::of(key) else {
            return self.classify_slow(key);
        };
        self.lookup_k4(&k, key)
    }

    /// The trees' walk and leaf scans for one IPv4 key; `key` gives the
    /// full key for the rules a leaf block cannot decide alone.
    #[inline(always)]
    fn lookup_k4<F: FullKey>(&self, k: &K4, key: &F) -> Option<u32> {
        self.lookup_in(&self.trees, k, key)
    }

    /// The walks and leaf scans of `trees` (in order of their first rule)
    /// for the tree view `k` of `key`.
    #[inline(always)]
    fn lookup_in<F: FullKey>(&self, trees: &[Tree], k: &K4, key: &F) -> Option<u32> {
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

    /// Classifies IPv4 keys ([`KeyV4`]) into `out`: the same results as
    /// [`Classify::classify_batch`] on the same keys as [`Key`]s
    /// ([`KeyV4::key`]), without the conversion from 128-bit addresses a
    /// [`Key`] takes (about 40 instructions of a 250-instruction lookup).
    /// Breadth first, 256 keys at a time, 64 in a batch that small (see the
    /// [module docs](self)). No
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
        self.batch_v4(keys, out);
    }

    /// [`classify_batch_v4`](Self::classify_batch_v4) compiled for the
    /// baseline CPU whatever this one has: for comparisons and tests.
    #[doc(hidden)]
    pub fn classify_batch_v4_portable(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        self.batch_v4(keys, out);
    }

    /// The body of [`classify_batch_v4`](Self::classify_batch_v4), for
    /// `out` at least as long as `keys`.
    #[inline(always)]
    fn batch_v4(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        if !self.mem.is_empty() {
            self.breadth(keys, out, |k, v| {
                *v = K4::of_v4(k);
                true
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
    unsafe fn batch_v4_avx2(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        self.batch_v4(keys, out);
    }

    /// [`classify_batch_v4`](Self::classify_batch_v4) one key after the
    /// other: for comparisons.
    #[doc(hidden)]
    pub fn classify_batch_v4_seq(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        self.seq_v4(keys, out);
    }

    #[inline(always)]
    fn seq_v4(&self, keys: &[KeyV4], out: &mut [Option<u32>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.lookup_k4(&K4::of_v4(k), k);
        }
    }

    /// [`breadth_in`](Self::breadth_in) in chunks of [`CHUNK`] keys, or of
    /// [`SMALL_CHUNK`] for a batch that small (a datapath batch): a chunk's
    /// arrays are set up on every call, 14 KiB for [`CHUNK`] keys.
    #[inline(always)]
    fn breadth<F: FullKey>(
        &self,
        keys: &[F],
        out: &mut [Option<u32>],
        k4: impl Fn(&F, &mut K4) -> bool,
    ) {
        if keys.len() <= SMALL_CHUNK {
            self.breadth_in::<F, SMALL_CHUNK>(keys, out, k4);
        } else {
            self.breadth_in::<F, CHUNK>(keys, out, k4);
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
    /// IPv4) are classified alone, in place.
    #[inline(always)]
    fn breadth_in<F: FullKey, const C: usize>(
        &self,
        keys: &[F],
        out: &mut [Option<u32>],
        k4: impl Fn(&F, &mut K4) -> bool,
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
                let step = (64 / std::mem::size_of::<F>().max(1)).max(1);
                for at in (next..end).step_by(step) {
                    prefetch(keys, at);
                }
                let size = std::mem::size_of::<Option<u32>>();
                for line in (next * size..end * size).step_by(64) {
                    prefetch_ptr(out_lines.wrapping_add(line));
                }
            }
            let mut nf = 0;
            for (i, (k, o)) in ks.iter().zip(os.iter_mut()).enumerate() {
                if k4(k, &mut view[i]) {
                    fast[nf % C] = i as u8;
                    nf += 1;
                    best[i] = NONE;
                } else {
                    *o = self.classify_slow(&k.full());
                }
            }
            for (ti, t) in self.trees.iter().enumerate() {
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
                        let r = self.mem[(t.root as usize) + t.cut.index(&view[i])];
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
                if self.trees.len() == 1 {
                    // One tree: a key's first block nearly always decides
                    // it, and the branch on it is well predicted; no key
                    // has matched before it.
                    for &i in &on[..n] {
                        let i = usize::from(i) % C;
                        best[i] = self.scan_from::<_, true>(node[i], 0, &view[i], &ks[i], NONE);
                    }
                    continue;
                }
                // Several trees: most walks end in a leaf that does not
                // match, and a branch on each block's result is a coin
                // toss. Every key's first block is tested without one; the
                // keys it does not decide (no hit and more blocks, or rules
                // to confirm) go on a list for the rest.
                let mut rest = 0;
                for &i in &on[..n] {
                    let i = usize::from(i) % C;
                    let (hit, more) = self.first_block(node[i], &view[i]);
                    best[i] = best[i].min(hit);
                    cur[rest % C] = i as u8;
                    rest += usize::from(more);
                }
                for &i in &cur[..rest] {
                    let i = usize::from(i) % C;
                    let from = usize::from(node[i] & EXTRA == 0);
                    best[i] = self.scan_from::<_, false>(node[i], from, &view[i], &ks[i], best[i]);
                }
            }
            for &i in &fast[..nf] {
                let i = usize::from(i) % C;
                os[i] = (best[i] != NONE).then_some(best[i]);
            }
        }
    }

    /// An IPv6 key: the IPv6 tree's walk on the chosen address words, and
    /// its leaf's candidates confirmed on their rules.
    #[inline(never)]
    fn lookup_v6(&self, k: &Key) -> Option<u32> {
        self.lookup_in(&self.v6, &self.v6_words.view(k), k)
    }

    /// Keys off the IPv4 path: IPv6 ([`lookup_v6`](Self::lookup_v6)),
    /// non-IP keys (the rules that can match them, in order), and IPv4
    /// keys with an address beyond 32 bits (every rule).
    #[cold]
    #[inline(never)]
    fn classify_slow(&self, k: &Key) -> Option<u32> {
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
    /// otherwise; other keys one by one in place. No allocation.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    fn classify_batch(&self, keys: &[Key], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        if !self.mem.is_empty() {
            self.breadth(keys, out, |k, v| match K4::of(k) {
                Some(x) => {
                    *v = x;
                    true
                }
                None => false,
            });
            return;
        }
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.lookup(k);
        }
    }
}

/// A rule as boxes in the five tree fields.
#[derive(Clone, Copy, Debug)]
struct BRule {
    lo: [u32; DIMS],
    hi: [u32; DIMS],
    lane: Lane,
    /// Matches every IPv4 key in its box (no conditions beyond the box
    /// and IP): may prune the rules after it.
    plain: bool,
}

impl BRule {
    fn of(i: usize, r: &Rule) -> BRule {
        let (s, d) = (
            r.src.v4_range().unwrap_or((0, 0)),
            r.dst.v4_range().unwrap_or((0, 0)),
        );
        BRule::with_addrs(i, r, s, d, false)
    }

    /// Rule `r` in the IPv6 tree: its addresses projected on the words
    /// `w`, and always confirmed on the full rule (a projection is a
    /// superset).
    fn of_v6(i: usize, r: &Rule, w: V6Words) -> BRule {
        let (s, d) = (v6_word_range(r.src, w.src), v6_word_range(r.dst, w.dst));
        BRule::with_addrs(i, r, s, d, true)
    }

    /// Rule `r` with source and destination ranges `s` and `d` in the
    /// address fields; `confirm`: every lane hit is checked on the rule.
    fn with_addrs(i: usize, r: &Rule, s: (u32, u32), d: (u32, u32), confirm: bool) -> BRule {
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
            || r.icmp_code.is_some()
            || (needs_ports && r.proto.0 != r.proto.1);
        BRule {
            lo,
            hi,
            plain: !extra,
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
type Cut = (usize, u8, usize, u8);

/// An aligned box: per field, the low end and log2 of the width.
type Boxx = [(u32, u8); DIMS];

/// The box of a tree's root: every field whole (the protocol lane is 9
/// bits).
const FULL: Boxx = [(0, 32), (0, 32), (0, 16), (0, 16), (0, 9)];

fn box_hi(b: (u32, u8)) -> u32 {
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
struct ListHasher(u64);

impl std::hash::Hasher for ListHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
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

struct Builder<'a> {
    br: &'a [BRule],
    cfg: &'a Config,
    mem: Vec<u64>,
    blocks: Vec<Block>,
    leaves: HashMap<Vec<u32>, u64, std::hash::BuildHasherDefault<ListHasher>>,
    stats: Stats,
    /// Memory cap in 32-byte units (block lanes plus node words / 4).
    cap: usize,
    /// The cap was reached (or, in a trial, a leaf outgrew
    /// [`Config::leaf_bound`]): some nodes became leaves early.
    capped: bool,
    /// A trial build ([`Builder::trial`]): stop at the cap or at a leaf
    /// over the bound, the tree will be thrown away.
    trial: bool,
    /// Entries of the largest leaf of the tree being built.
    tree_worst: usize,
    /// In a trial, the most entries a leaf may have.
    leaf_limit: usize,
    /// The most entries a lookup compares in the families built so far.
    worst: usize,
    /// [`Builder::choose_cut`]'s counts and buffers.
    counts: Counts,
    /// Threads the build may use ([`Config::threads`]).
    threads: usize,
    /// Trials built apart ([`Builder::speculate`]), by rules, budget and
    /// leaf limit, until the serial build takes them.
    memo: Vec<(Vec<u32>, usize, usize, Outcome)>,
    /// In a trial built apart: set when the build no longer needs it.
    cancel: Option<&'a AtomicBool>,
    /// The memory cap stopped a node.
    budget_hit: bool,
    /// The trial was cancelled ([`cancel`](Self::cancel)).
    cancelled: bool,
}

/// What a trial built apart ([`Builder::apart`]) says of the serial
/// build's trial over the same rules, budget and leaf limit.
enum Outcome {
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
struct Apart {
    tree: Tree,
    mem: Vec<u64>,
    blocks: Vec<Block>,
    /// Its leaves in the order they were made: rule list and reference.
    leaves: Vec<(Vec<u32>, u64)>,
    /// Its internal nodes and deepest leaf.
    nodes: usize,
    max_depth: usize,
    /// Entries of its largest leaf.
    tree_worst: usize,
    /// The units it used.
    units: usize,
}

impl<'a> Builder<'a> {
    fn new(br: &'a [BRule], cfg: &'a Config, cap: usize) -> Builder<'a> {
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
            tree_worst: 0,
            leaf_limit: 0,
            worst: 0,
            counts: Counts::default(),
            threads: 1,
            memo: Vec::new(),
            cancel: None,
            budget_hit: false,
            cancelled: false,
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
    /// subset do not replicate the rules of another; subsets under
    /// 1/[`Config::merge_below`] of the rules join the general one.
    fn family(&mut self, ids: &[u32]) -> Vec<Tree> {
        let width = 1u64 << (32 - u32::from(self.cfg.small_prefix.min(32)));
        let mut subsets: [Vec<u32>; 4] = Default::default();
        for &i in ids {
            let r = &self.br[i as usize];
            let small = |d: usize| u64::from(r.hi[d] - r.lo[d]) < width;
            subsets[usize::from(small(0)) | usize::from(small(1)) << 1].push(i);
        }
        let floor = (ids.len() / self.cfg.merge_below.max(1)).max(16);
        for s in 1..4 {
            if !subsets[s].is_empty() && subsets[s].len() < floor {
                let moved = std::mem::take(&mut subsets[s]);
                subsets[0].extend(moved);
            }
        }
        subsets[0].sort_unstable();
        let parts = subsets.iter().filter(|s| !s.is_empty()).count();
        // Per tree, a budget in proportion to the family's rules, not the
        // tree's: a subset of a few rules that replicate may need more
        // than its share (acl2_10k: a 10 MiB tree over a third of the
        // rules, which 1 KiB per rule of its own split in two trees and
        // 1.22x the instructions a lookup).
        let budget = (ids.len() * self.cfg.tree_budget).max(SINGLE_TREE_FLOOR);
        let parallel = self.threads > 1 && ids.len() >= PARALLEL_MIN_RULES;
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
            let single = (ids.len() * self.cfg.single_tree_budget).max(SINGLE_TREE_FLOOR);
            if parallel {
                // The single tree and the subsets' trees at once: the
                // subsets' are wasted if the single tree fits (and
                // cancelled when it does), but when it does not they are
                // built by then (acl2_10k: the failed single tree was
                // half the build).
                let mut jobs = vec![(ids.to_vec(), single, leaf_limit)];
                jobs.extend(
                    subsets
                        .iter()
                        .filter(|s| !s.is_empty())
                        .map(|s| (s.clone(), budget, self.cfg.leaf_bound)),
                );
                self.speculate(jobs, true);
            }
            if let Some(t) = self.trial_or_take(ids, single, leaf_limit) {
                self.memo.clear();
                self.worst = self.worst.max(self.tree_worst);
                return vec![t];
            }
        }
        // Each subset a tree within its budget and the leaf bound, split
        // in halves (by rule order) while it is not and trees are left.
        let mut queue: std::collections::VecDeque<Vec<u32>> =
            subsets.into_iter().filter(|s| !s.is_empty()).collect();
        let mut trees = Vec::new();
        let mut worst = 0;
        let bound = self.cfg.leaf_bound;
        while let Some(ids) = queue.pop_front() {
            if parallel && !self.taken(&ids, budget, bound) {
                // This tree and every one queued after it, at once (the
                // halves of the trees that failed, breadth first).
                let jobs = std::iter::once(&ids)
                    .chain(&queue)
                    .filter(|q| !self.taken(q, budget, bound))
                    .map(|q| (q.clone(), budget, bound))
                    .collect();
                self.speculate(jobs, false);
            }
            if let Some(t) = self.trial_or_take(&ids, budget, bound) {
                trees.push(t);
                worst += self.tree_worst;
                continue;
            }
            if ids.len() >= 2 && trees.len() + queue.len() + 2 <= self.cfg.max_trees.max(1) {
                // Breadth first: every subset that fails is split before
                // any part is split again, so the trees end up of about
                // the same size.
                let (a, b) = self.halves(&ids);
                self.stats.split_trees += 1;
                queue.push_back(a);
                queue.push_back(b);
                continue;
            }
            // Out of trees: this one as large as its share of what is
            // left under the memory cap lets it be; the build says so if
            // a leaf is over the bound.
            self.tree_worst = 0;
            let share = self.cfg.max_entries.saturating_sub(self.used()) / (queue.len() + 1);
            self.cap = (self.used() + share.max(budget)).min(self.cfg.max_entries);
            let (root, cut) = self.build_root(FULL, &ids);
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

    /// Whether the memo holds the trial over `ids` with `budget` and
    /// `leaf_limit`.
    fn taken(&self, ids: &[u32], budget: usize, leaf_limit: usize) -> bool {
        self.memo
            .iter()
            .any(|m| m.0 == ids && m.1 == budget && m.2 == leaf_limit)
    }

    /// [`trial`](Self::trial), or what the memo knows of it: a tree built
    /// apart that fits is adopted, one that failed on a leaf is a failure,
    /// without building anything again.
    fn trial_or_take(&mut self, ids: &[u32], budget: usize, leaf_limit: usize) -> Option<Tree> {
        let at = self
            .memo
            .iter()
            .position(|m| m.0 == ids && m.1 == budget && m.2 == leaf_limit);
        if let Some(at) = at {
            // The serial trial meets no memory cap the one apart did not:
            // it shares leaves with earlier trees, so it uses at most as
            // many units at every node; and at most `units` in all, which
            // must fit under `max_entries` too.
            let (used, max) = (self.used(), self.cfg.max_entries);
            let room = |units: usize| used + units.max(budget) < max;
            match self.memo.swap_remove(at).3 {
                Outcome::Fits(a) if room(a.units) => return Some(self.adopt(*a)),
                Outcome::Fails { units, made }
                    if room(units) && made.iter().all(|l| !self.leaves.contains_key(l)) =>
                {
                    return None;
                }
                _ => {}
            }
        }
        self.trial(ids, budget, leaf_limit)
    }

    /// Builds the trials `jobs` (rules, budget, leaf limit) apart
    /// ([`apart`](Self::apart)) on up to [`threads`](Self::threads)
    /// threads, into the memo. `first_wins`: once the first job fits, the
    /// others are cancelled (the build needs none of them).
    fn speculate(&mut self, jobs: Vec<(Vec<u32>, usize, usize)>, first_wins: bool) {
        let (br, cfg) = (self.br, self.cfg);
        let next = AtomicUsize::new(0);
        let cancel = AtomicBool::new(false);
        let work = || {
            let mut done = Vec::new();
            loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some((ids, budget, limit)) = jobs.get(j) else {
                    break;
                };
                if cancel.load(Ordering::Relaxed) {
                    break;
                }
                let stop = (j > 0 || !first_wins).then_some(&cancel);
                let out = Builder::apart(br, cfg, ids, *budget, *limit, stop);
                if j == 0 && first_wins && matches!(out, Outcome::Fits(_)) {
                    cancel.store(true, Ordering::Relaxed);
                }
                done.push((j, out));
            }
            done
        };
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
            let (ids, budget, limit) = &jobs[j];
            self.memo.push((ids.clone(), *budget, *limit, out));
        }
    }

    /// The trial over `ids` with `budget` and `leaf_limit`, built in
    /// arrays of its own (an empty builder), stopped when `cancel` is set.
    fn apart(
        br: &[BRule],
        cfg: &Config,
        ids: &[u32],
        budget: usize,
        leaf_limit: usize,
        cancel: Option<&AtomicBool>,
    ) -> Outcome {
        let mut b = Builder::new(br, cfg, cfg.max_entries);
        b.cancel = cancel;
        let start = b.used();
        b.leaf_limit = leaf_limit.max(BLOCK);
        b.cap = (start + budget).min(cfg.max_entries);
        b.trial = true;
        let (root, cut) = b.build_root(FULL, ids);
        let units = b.used() - start;
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
        }))
    }

    /// Takes a tree built apart into the build, as [`trial`](Self::trial)
    /// would have built it here: its nodes after the others (references
    /// moved by the offset), its leaves in the order it made them, each
    /// one the build already has shared instead of copied.
    fn adopt(&mut self, a: Apart) -> Tree {
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

    /// Two parts of `ids` (sorted) for two trees, each sorted: by shape if
    /// a shape splits them evenly enough (at least 1/8 on each side), so
    /// that each part's rules are narrow in the same field (the rules
    /// whose source is the narrower address and the others; those whose
    /// source port range is the narrower and the others), else the first
    /// and the second half in rule order.
    fn halves(&self, ids: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let width = |r: &BRule, d: usize| r.hi[d] - r.lo[d];
        let shapes: [&dyn Fn(&BRule) -> bool; 2] = [&|r| width(r, 0) < width(r, 1), &|r| {
            width(r, 2) < width(r, 3)
        }];
        let best = shapes
            .iter()
            .map(|f| {
                let n = ids.iter().filter(|&&i| f(&self.br[i as usize])).count();
                (n.min(ids.len() - n), f)
            })
            .max_by_key(|&(m, _)| m);
        if let Some((m, f)) = best {
            if m >= ids.len() / 8 && m > 0 {
                return ids.iter().partition(|&&i| f(&self.br[i as usize]));
            }
        }
        let (a, b) = ids.split_at(ids.len() / 2);
        (a.to_vec(), b.to_vec())
    }

    /// Builds a tree over `ids` if it fits in `budget` more units (and
    /// the memory cap) with no leaf over `leaf_limit` entries; otherwise
    /// rolls back what it built and returns `None`.
    fn trial(&mut self, ids: &[u32], budget: usize, leaf_limit: usize) -> Option<Tree> {
        self.leaf_limit = leaf_limit.max(BLOCK);
        let (mem, blocks, stats) = (self.mem.len(), self.blocks.len(), self.stats);
        self.cap = (self.used() + budget).min(self.cfg.max_entries);
        self.trial = true;
        self.tree_worst = 0;
        let (root, cut) = self.build_root(FULL, ids);
        let fits = !self.capped;
        self.cap = self.cfg.max_entries;
        self.capped = false;
        self.trial = false;
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

    /// Builds a tree's root for `ids` (sorted): a leaf, or the offset of
    /// its children and its cut, which may be up to
    /// [`Config::root_cut_bits`] wide.
    fn build_root(&mut self, bx: Boxx, ids: &[u32]) -> (u64, RootCut) {
        let maxb = self.cfg.root_cut_bits.clamp(1, ROOT_MAX_BITS);
        match self.split(bx, ids, 0, maxb, self.cfg.root_spfac) {
            Ok((o, (d0, s0, b0, d1, s1, b1))) => (o as u64, RootCut::of(d0, s0, b0, d1, s1, b1)),
            Err(leaf) => (leaf, RootCut::default()),
        }
    }

    /// Builds the subtree for `ids` (sorted, all meeting `bx`), returns its
    /// child reference.
    fn build(&mut self, bx: Boxx, ids: &[u32], depth: usize) -> u64 {
        match self.split(bx, ids, depth, self.cfg.max_cut_bits, self.cfg.spfac) {
            Ok((o, (d0, s0, b0, d1, s1, b1))) => node_ref(o, d0, s0, b0, d1, s1, b1),
            Err(leaf) => leaf,
        }
    }

    /// Cuts the node for `ids` (sorted, all meeting `bx`) with at most
    /// `maxb` bits and space factor `spfac` and builds its children: their
    /// offset in `mem` and the cut as (field, shift, bits) twice; or the
    /// node's leaf reference if it is a leaf.
    #[allow(clippy::type_complexity)]
    fn split(
        &mut self,
        bx: Boxx,
        ids: &[u32],
        depth: usize,
        maxb: u8,
        spfac: f64,
    ) -> Result<(usize, (usize, u8, u8, usize, u8, u8)), u64> {
        if self.trial && self.capped {
            // A trial past its cap: it will be thrown away.
            return Err(EMPTY);
        }
        if self.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            self.capped = true;
            self.cancelled = true;
            return Err(EMPTY);
        }
        // Prune after the first rule covering the whole box.
        let ids = match ids.iter().position(|&i| {
            let r = &self.br[i as usize];
            r.plain && (0..DIMS).all(|d| r.lo[d] <= bx[d].0 && r.hi[d] >= box_hi(bx[d]))
        }) {
            Some(p) => &ids[..=p],
            None => ids,
        };
        if ids.len() <= self.cfg.binth || depth >= MAX_DEPTH || self.over_budget() {
            return Err(self.leaf(ids, depth));
        }
        let Some((d0, b0, d1, b1)) = self.choose_cut(&bx, ids, maxb, spfac) else {
            return Err(self.leaf(ids, depth));
        };
        let s0 = bx[d0].1 - b0;
        let s1 = bx[d1].1.saturating_sub(b1);
        let nchild = 1usize << (b0 + b1);
        // The children's rule lists, in one buffer: counted, then placed.
        let spans: Vec<[usize; 4]> = ids
            .iter()
            .map(|&i| {
                let r = &self.br[i as usize];
                let (l0, h0) = span(r, &bx, d0, s0, b0);
                let (l1, h1) = if b1 == 0 {
                    (0, 0)
                } else {
                    span(r, &bx, d1, s1, b1)
                };
                [l0, h0, l1, h1]
            })
            .collect();
        let mut at = vec![0usize; nchild + 1];
        for &[l0, h0, l1, h1] in &spans {
            for c0 in l0..=h0 {
                for c1 in l1..=h1 {
                    at[(c0 << b1 | c1) + 1] += 1;
                }
            }
        }
        if at[1..].iter().all(|&n| n == ids.len()) {
            // The cut separated nothing.
            return Err(self.leaf(ids, depth));
        }
        for c in 0..nchild {
            at[c + 1] += at[c];
        }
        let mut flat = vec![0u32; at[nchild]];
        let mut fill = at.clone();
        for (&i, &[l0, h0, l1, h1]) in ids.iter().zip(&spans) {
            for c0 in l0..=h0 {
                for c1 in l1..=h1 {
                    let c = c0 << b1 | c1;
                    flat[fill[c]] = i;
                    fill[c] += 1;
                }
            }
        }
        let o = self.mem.len();
        self.mem.resize(o + nchild, 0);
        self.stats.nodes += 1;
        // The previous child: its rules, box and what was built for it.
        let mut prev: Option<(&[u32], Boxx, u64)> = None;
        for (c, ch) in (0..nchild).map(|c| (c, &flat[at[c]..at[c + 1]])) {
            let mut cb = bx;
            let c0 = (c >> b1) as u32;
            cb[d0] = (bx[d0].0 + (c0 << s0), s0);
            if b1 > 0 {
                let c1 = (c & ((1 << b1) - 1)) as u32;
                cb[d1] = (bx[d1].0 + (c1 << s1), s1);
            }
            let r = match prev {
                // The same rules, each covering both boxes where they
                // differ: every cut and leaf below would be the same, so
                // the child is the previous one's subtree, shared (wide
                // rules make runs of such children; rte_acl shares
                // nodes too).
                Some((pch, pb, pr)) if pch == ch && self.covers(ch, &pb, &cb) => pr,
                _ => self.build(cb, ch, depth + 1),
            };
            self.mem[o + c] = r;
            prev = Some((ch, cb, r));
        }
        Ok((o, (d0, s0, b0, d1, s1, b1)))
    }

    /// Whether every rule of `ids` covers boxes `a` and `b` whole in each
    /// field where they differ: a subtree built for `ids` in one box is
    /// then the subtree for the other (the build sees a rule only through
    /// its part inside the box).
    fn covers(&self, ids: &[u32], a: &Boxx, b: &Boxx) -> bool {
        (0..DIMS).filter(|&d| a[d] != b[d]).all(|d| {
            let (lo, hi) = (a[d].0.min(b[d].0), box_hi(a[d]).max(box_hi(b[d])));
            ids.iter().all(|&i| {
                let r = &self.br[i as usize];
                r.lo[d] <= lo && r.hi[d] >= hi
            })
        })
    }

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
    fn choose_cut(&mut self, bx: &Boxx, ids: &[u32], maxb: u8, spfac: f64) -> Option<Cut> {
        let n = ids.len();
        let limit = (spfac * n as f64) as usize;
        let mut cc = std::mem::take(&mut self.counts);
        // Each rule's range in each field, as offsets into the box: read
        // once here, not once per candidate cut; and the sum of the
        // ranges' widths per field.
        let mut widths = [0u64; DIMS];
        for (d, offs) in cc.offs.iter_mut().enumerate() {
            let (blo, bhi) = (bx[d].0, box_hi(bx[d]));
            offs.clear();
            offs.extend(ids.iter().map(|&i| {
                let r = &self.br[i as usize];
                (r.lo[d].max(blo) - blo, r.hi[d].min(bhi) - blo)
            }));
            widths[d] = offs.iter().map(|&(l, h)| u64::from(h - l)).sum();
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
        // (max child, total, field, bits)
        let mut best: Option<(usize, usize, usize, u8)> = None;
        for (d, &(_, w)) in bx.iter().enumerate() {
            let most = maxb.min(w);
            if most == 0 {
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
                if best.is_none_or(|bb| (f.0, f.1) < (bb.0, bb.1)) {
                    best = Some(f);
                }
            }
        }
        let Some((mut max, total0, d0, b0)) = best else {
            self.counts = cc;
            return None;
        };
        let (mut d1, mut b1) = (d0, 0u8);
        if max > self.cfg.binth {
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

    /// Units used so far: a block lane is 32 bytes, a node word 8.
    fn used(&self) -> usize {
        self.blocks.len() * BLOCK + self.mem.len() / 4
    }

    /// Whether the memory cap is reached: a block lane is 32 bytes, a
    /// node word 8.
    fn over_budget(&mut self) -> bool {
        let over = self.used() >= self.cap;
        self.capped |= over;
        self.budget_hit |= over;
        over
    }

    fn leaf(&mut self, ids: &[u32], depth: usize) -> u64 {
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
        let extra = if ids
            .iter()
            .any(|&i| self.br[i as usize].lane.id & EXTRA_ID != 0)
        {
            EXTRA
        } else {
            0
        };
        let r = LEAF | extra | (blocks as u64) << 32 | start as u64;
        self.leaves.insert(ids.to_vec(), r);
        r
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
struct Counts {
    /// Each rule's range in each field, as offsets into the node's box.
    offs: [Vec<(u32, u32)>; DIMS],
    lo: Vec<i32>,
    hi: Vec<i32>,
}

impl Counts {
    /// The counts of the cuts of field `d` (of width `2^w`) alone, up to
    /// `fine` bits (`1 <= fine <= w`).
    fn one(&mut self, d: usize, w: u8, fine: u8) {
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
    fn two(&mut self, d0: usize, w0: u8, b0: u8, d1: usize, w1: u8, fine: u8) {
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
    fn level(&self, fine: u8, b0: u8, b: u8) -> (usize, usize) {
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

/// The children of a cut of field `d` (shift `s`, `b` bits) that rule `r`
/// meets, as an inclusive index range.
#[inline]
fn span(r: &BRule, bx: &Boxx, d: usize, s: u8, b: u8) -> (usize, usize) {
    let (blo, bhi) = (bx[d].0, box_hi(bx[d]));
    let lo = r.lo[d].max(blo) - blo;
    let hi = r.hi[d].min(bhi) - blo;
    let m = (1u64 << b) - 1;
    (
        ((u64::from(lo) >> s) & m) as usize,
        ((u64::from(hi) >> s) & m) as usize,
    )
}

/// Keeps a block at four cache lines (32 bytes a rule).
const _: () = assert!(std::mem::size_of::<Block>() == 256);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adversarial::{self, Kind};
    use crate::{classbench, Action};

    /// The whole structure, as `Debug` writes it.
    fn dump(c: &Classifier) -> String {
        format!("{c:?}")
    }

    /// The sets of the repository and adversarial ones: single trees that
    /// fit, single trees that fail, trees split in halves, IPv6 trees.
    fn sets() -> Vec<(String, Ruleset)> {
        let dir = classbench::data_dir().expect("data/classbench");
        let mut sets = Vec::new();
        for name in ["acl1_10k", "fw1_10k"] {
            let text = std::fs::read_to_string(dir.join(name)).expect("reads the set");
            let rs = classbench::parse(&text, Action::Drop).expect("parses the set");
            sets.push((format!("{name} v6"), classbench::to_ipv6(&rs)));
            sets.push((name.to_string(), rs));
        }
        for kind in [Kind::Cross, Kind::Ports, Kind::Wild, Kind::Mixed] {
            let rs = adversarial::generate(kind, 3000, 7);
            sets.push((format!("adv-{}-3000", kind.name()), rs));
        }
        sets
    }

    #[test]
    fn a_parallel_build_is_the_serial_build() {
        for (name, rs) in sets() {
            let cfg = Config::default();
            let serial = Classifier::with_threads(&rs, &cfg, 1);
            for threads in [2, 5] {
                let par = Classifier::with_threads(&rs, &cfg, threads);
                assert!(dump(&serial) == dump(&par), "{name}, {threads} threads");
            }
        }
    }

    #[test]
    fn a_parallel_build_is_the_serial_build_under_a_small_memory_cap() {
        // Trials built apart meet `max_entries`, and the serial build
        // runs them again.
        let rs = adversarial::generate(Kind::Mixed, 3000, 3);
        for max_entries in [1 << 14, 1 << 16, 1 << 18] {
            let cfg = Config {
                max_entries,
                ..Config::default()
            };
            let serial = Classifier::with_threads(&rs, &cfg, 1);
            let par = Classifier::with_threads(&rs, &cfg, 3);
            assert!(dump(&serial) == dump(&par), "max_entries {max_entries}");
        }
    }
}
