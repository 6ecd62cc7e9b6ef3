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
//! cap, or once it has cut [`Config::single_tree_work`] rules a unit of
//! it), with leaves of at most [`Config::leaf_bound`] times the number
//! of subsets it replaces (the same worst case as the subsets' trees): one walk per lookup is worth memory (acl1_10k, when it was
//! measured: one tree of 5.2 MiB, 264 instructions a lookup, against two
//! trees of 2.8 MiB and 279 with more mispredicted branches). Otherwise the
//! IPv4 rules are split by whether their source and destination prefixes
//! are at least [`Config::small_prefix`] long (/6: only near-wildcards
//! are wide): three subsets (source small, destination small, neither),
//! so that a wildcard address in one subset does not replicate the rules
//! of another when the tree cuts that address. A one-small subset with
//! under 1/[`Config::merge_below`] of the rules joins the general one;
//! the rules small in both addresses join the smaller one-small subset
//! left, however few they are (they replicate in neither tree: a fourth
//! subset of their own cost a tree walk, 15-28 % more instructions a
//! lookup on the sets that had one; in the general tree, a firewall's
//! first rules made every lookup walk it), or the general one when no
//! one-small subset is left and they are under that share.
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
//! block does not hold (VLAN, TCP flags, ICMP) carry a flag on their index
//! and are confirmed on the full rule. A rule that needs ports and names a
//! range of protocols (`proto any` with a port) is exact in the lanes for
//! a key with ports (`[lo << 1 | 1, hi << 1 | 1]` holds the odd lane
//! values of its protocols) and not for one without: its leaf is marked,
//! and only a key without ports confirms that leaf's hits on the full
//! rules (before, every hit on such a rule was confirmed: a fifth of
//! `adv-wild-8000`'s instructions).
//!
//! # Pruning and memory
//! A node keeps only the rules that meet its box, in priority order, and
//! drops every rule after the first one that covers the whole box
//! unconditionally. The fifth cut field is the blocks' protocol lane
//! (`proto << 1 | has_ports`), so a rule with port ranges and one protocol
//! is an exact box too and prunes the rules after it. Leaves with the same
//! rule list are stored once. A tree's trial checks each node's children
//! and each new leaf against its budget before adding them, and fails
//! (rolled back, then split) rather than pass it: a tree that is kept is
//! within [`Config::tree_budget`] and [`Config::max_entries`]. A tree
//! built when no split is left stops cutting at its share of
//! [`Config::max_entries`] and makes the remaining nodes leaves (slower,
//! never wrong; those leaves are stored past the cap).
//!
//! # Bounded worst case
//! A lookup compares at most one leaf per tree, so its worst case is the
//! sum over the trees of their largest leaf ([`Stats::worst_entries`]).
//! Every tree is built as a trial: within [`Config::tree_budget`] units
//! per rule of its family and with no leaf over [`Config::leaf_bound`] entries
//! (a subset's first tree: twice that, as the two trees it would be split
//! into, and it then counts as two against [`Config::max_trees`]). A
//! trial that fails is rolled back and its rules split in two trees (as
//! rte_acl splits a trie that grows too large): by shape when one splits
//! them evenly (the rules whose source is the narrower address against
//! the others, or whose source port range is the narrower: of the two,
//! the one whose parts' first cuts copy fewer rules; a
//! cross-product of wide sources with wide destinations comes apart into
//! two trees that each cut their narrow field), else the first and the
//! second half in rule order; breadth first, up to [`Config::max_trees`]
//! per family. A part of at least [`WIDE_LEAVES_MIN_RULES`] rules is cut
//! only down to leaves of [`Config::leaf_bound`] rules, not
//! [`Config::binth`]: its rules overlap where cuts cannot part them, and
//! cutting there replicates them for nothing (`adv-ports-8000`: 4 trees
//! instead of 6, 793 instructions a lookup instead of 958; the bound is
//! the same). With the defaults a lookup compares at most
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
//! and the subsets' trees at once, and a thread out of work builds the
//! halves of the trials still running; then the halves of the trees that
//! failed, if not built yet), and the serial order takes them: a tree that fits is moved
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
//! branch too (a classifier of one tree has its own copy of the loop, whose
//! leaves' pass writes the results). In chunks of 64 and past 1 MiB of
//! nodes and blocks, a round
//! first computes and prefetches every key's child, then reads them.
//! Measured on acl1_10k against the four-in-flight batch: 0.92x in chunks
//! of 64, 0.96x more with the prefetches, 0.91x more in chunks of 256
//! (without them); an AVX-512 round (gathers of eight children, compressed
//! lists) measured 1.12-1.16x slower than the scalar one and was not kept.
//!
//! # IPv6
//! The rules that can match IPv6 keys get trees of their own, built the
//! same way over a projection: one 32-bit word of each address (per
//! address, the word where the rules' prefixes differ most; `/48`s under
//! one `/32` differ in the second), ports and protocol. Per address, the
//! words above the chosen one that most rules name whole (`2001:db8` of
//! rules under `2001:db8::/32`) are kept too: for a key that has them,
//! the lanes of a rule whose prefix ends within its chosen word and names
//! those words above it are exact, as an IPv4 rule's are, and only the
//! other rules (a longer prefix, another upper word) carry
//! `EXTRA_ID` and are confirmed on the full rule. A key without those
//! words confirms every hit, in rule order (one without ports, those of
//! the leaves with `LOOSE` rules, as an IPv4 key); and since a rule
//! exact only for some keys may not match the others, it prunes
//! nothing. [`Classify::classify_batch`] takes the IPv6 keys that have
//! the words breadth first through the IPv6 trees, as it takes IPv4 keys
//! through theirs (those without ports too, unless an IPv6 rule is
//! loose; ClassBench sets moved into IPv6: 0.31-0.48x the time of one
//! key at a time with every hit confirmed, BENCHMARKS.md).
//! Non-IP keys scan the rules that can match them (a list built once),
//! with the reference semantics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::rule::{has, Key, Rule, Ruleset, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::Classify;

mod batch;
mod block;
mod builder;
mod cut;
mod family;
mod lookup;
mod merge;
mod parallel;
mod probe;

pub use block::KeyV4;
use block::*;
use builder::*;
use cut::*;
use family::*;
use lookup::*;
use parallel::*;

const DIMS: usize = 5;
/// In a node reference: a leaf (bit 31, so the test is on the low word).
const LEAF: u64 = 1 << 31;
/// In a leaf reference: its first block.
const START_MASK: u64 = LEAF - 1;
/// In a leaf reference: some entry needs its full rule checked.
const EXTRA: u64 = 1 << 62;
/// In a leaf reference: some entry is a rule that needs ports and names a
/// range of protocols ([`BRule::loose`]): its lanes are exact for keys
/// with ports, and a key without them checks the leaf's hits on the full
/// rules ([`K4::confirm`]).
const LOOSE: u64 = 1 << 63;
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
    /// over all trees. Every tree kept from a trial is within it (a
    /// trial that would pass it fails, as one over its
    /// [`tree_budget`](Self::tree_budget)). A tree built when no split is
    /// left ([`max_trees`](Self::max_trees) reached) stops cutting nodes
    /// at its share of it instead and still stores those nodes' leaves
    /// (lookups get slower, never wrong), so such a build, which
    /// [`Stats::bounded`] reports if a leaf is over the bound, may pass
    /// the cap by those leaves.
    pub max_entries: usize,
    /// A field is "small" for partitioning when its prefix is at least
    /// this long (its range at most 2^(32 - `small_prefix`) wide). The
    /// default, 6, keeps only the near-wildcards (/0 to /5) out of a
    /// field's subset: a /8 spans one or a few children of a root cut on
    /// that field and replicates little there, while counted as wide it
    /// joined the subset whose tree cuts the other field, and made it
    /// large. Swept over 33 sets (BENCHMARKS.md, "The small prefix"):
    /// /6 against /16, paired, 1.33-1.58x faster on the 10k-rule sets
    /// that had three or four trees with /16 (acl2, acl4, fw4, ipc1,
    /// ipc1_s8), fw4_10k 15.0 -> 5.4 MiB, no set slower beyond the noise
    /// but fw5_10k (0.92-0.98; since the rules small in both addresses
    /// no longer join the general subset, /6 is faster there too: 0.88x
    /// /16's time); /4 split adv-ports-8000 into five trees (0.73x), /8
    /// made fw4_30k_s8 slower (0.89x).
    pub small_prefix: u8,
    /// A subset small in one address with fewer than 1/`merge_below` of
    /// the rules (and fewer than 16 in any case) is merged into the
    /// general one; the rules small in both addresses are, only if no
    /// such subset is left (the module docs).
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
    /// The single-tree trial gives up once it has cut this many rules per
    /// unit of its budget (a node's rules, summed over the nodes it cut):
    /// a trial that fails costs its cap's worth of building, and the one
    /// tree of rules that replicate that much is not worth the wait. Over
    /// the 24 ClassBench sets, the 5 adversarial and the 2 generated ones
    /// of the repository, every single tree that fits cut at most 9.2
    /// rules a unit (fw3_1k; the 10k-rule sets at most 1.4), and the
    /// trials that fail 2.2 to 31.9 (ipc1_10k_s8: 20.6, 177 ms of a
    /// 233 ms serial build). 0: no limit.
    pub single_tree_work: usize,
    /// The most leaf entries (rule copies, padding included) a tree may
    /// have in one leaf: a tree whose build needs a larger leaf, or more
    /// than [`tree_budget`](Self::tree_budget) units, is split into two
    /// trees over the first and the second half of its rules (as rte_acl
    /// splits a trie that grows too large), up to
    /// [`max_trees`](Self::max_trees) trees per address family.
    pub leaf_bound: usize,
    /// The memory a tree may use before it is split: 32-byte units per
    /// rule of its address family (not of the tree), or
    /// [`SINGLE_TREE_FLOOR`] units if that is more. A strict bound on
    /// every tree built as a trial: each node's children and each new
    /// leaf are checked against it before they are added, and a trial
    /// that would pass it is rolled back and split.
    /// The last trees of a build out of splits are capped by
    /// [`max_entries`](Self::max_entries) instead.
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
    /// Probe a tree's root before building it (rulesets of up to 4 096
    /// rules): its children are cut, not built, and where their merges
    /// would widen the root's cut (by up to 3 bits), the tree is built
    /// under the wider cut, so that the children are cut for the boxes
    /// they end up in (acl4_1k and acl2_1k: 11 % fewer instructions a
    /// lookup, 3-5 % more memory). Such a build is made again without
    /// and the one whose lookups of a trace of the rules' keys cost less
    /// is kept (fewer levels can mean more leaf entries: acl3_1k). Off:
    /// the root's cut as chosen.
    pub probe_root: bool,
}

/// Fewest rules of a part of a split tree for which the part is cut with
/// leaves up to [`Config::leaf_bound`] entries (its `binth`) rather than
/// [`Config::binth`]: a tree that large failed its budget because its
/// rules overlap where the cuts cannot part them, and cutting those nodes
/// down to `binth` replicates them for little (`adv-ports-8000`: 6 trees
/// and 957 instructions a lookup with `binth` 32, 4 trees and 793 with
/// 64; fw4_10k's parts of 224 and 492 rules are 1 % faster at 32).
pub const WIDE_LEAVES_MIN_RULES: usize = 1024;

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
            small_prefix: 6,
            merge_below: 16,
            single_tree_budget: 16,
            single_tree_work: 12,
            root_cut_bits: 16,
            root_spfac: 64.0,
            leaf_bound: 64,
            tree_budget: 64,
            max_trees: 16,
            threads: 0,
            probe_root: true,
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
    /// Deepest leaf (root = 0), counted before levels are merged into
    /// their parents (`Builder::merge`): a bound on the levels a lookup
    /// walks.
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
    /// Some IPv4 rule is loose ([`LOOSE`]): a batch looks its keys without
    /// ports up again ([`Classifier::lookup_loose`]).
    loose: bool,
    /// Some IPv6 rule is loose: a batch classifies its IPv6 keys without
    /// ports alone (otherwise they go breadth first with the others).
    loose6: bool,
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
        let (c, probed) = Classifier::with_threads(rs, cfg, threads);
        if probed {
            c.or_plain(rs, cfg, threads)
        } else {
            c
        }
    }

    /// [`with_config`](Self::with_config) on up to `threads` threads;
    /// whether a root probe widened a cut ([`Config::probe_root`]).
    fn with_threads(rs: &Ruleset, cfg: &Config, threads: usize) -> (Classifier, bool) {
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
        // of it: exact for the keys under the upper words `words` keeps
        // (the module docs), confirmed on the full rule otherwise.
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
        let loose6 = v6.iter().any(|&i| brules6[i as usize].loose);
        let v6 = b.family(&v6);
        let probed = b.probed;
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
        let c = Classifier {
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
            loose: v4.iter().any(|&i| brules[i as usize].loose),
            loose6,
        };
        (c, probed)
    }

    /// Sizes of the built structure.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The rules, in priority order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

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
        super::parallel::TAKEN.with(|t| t.set(0));
        for (name, rs) in sets() {
            let cfg = Config::default();
            let before = super::parallel::TAKEN.with(|t| t.get());
            let serial = Classifier::with_threads(&rs, &cfg, 1).0;
            assert_eq!(
                super::parallel::TAKEN.with(|t| t.get()),
                before,
                "{name}: serial"
            );
            for threads in [2, 5] {
                let par = Classifier::with_threads(&rs, &cfg, threads).0;
                assert!(dump(&serial) == dump(&par), "{name}, {threads} threads");
            }
        }
        // The trials built apart were used (adopted or their failure
        // taken), not all built again serially.
        assert!(super::parallel::TAKEN.with(|t| t.get()) > 0);
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
            let serial = Classifier::with_threads(&rs, &cfg, 1).0;
            let par = Classifier::with_threads(&rs, &cfg, 3).0;
            assert!(dump(&serial) == dump(&par), "max_entries {max_entries}");
        }
    }
}
