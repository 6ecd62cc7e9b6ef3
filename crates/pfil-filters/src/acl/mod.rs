//! The `acl` filter: an ordered rule list (first match wins) classified by
//! [`pfil_acl::Classifier`], per-rule hit counters in per-worker slots,
//! and a ruleset that can be swapped in place.
//!
//! # Counters
//! Rules marked `count` and the default action count the packets they
//! decide, per worker; [`Acl::hits`] sums them, and so do the filter's
//! stats ([`Filter::stats`]: `rule_hits`, one sample per counted rule
//! labelled `rule` and `text`, the default action's as `rule` =
//! `default`), which the registry, `pfilctl rules HOOK`, the OpenMetrics
//! export and pfild's final report read. [`Acl::replace`] keeps the
//! counters of the rules both rulesets have, exactly (see there); a
//! control plane's `set` goes through it ([`Filter::reconfigure`]).
//! [`Acl::with_rules`] keeps them the same way in a new filter that shares
//! them with the running one, which it leaves unchanged, for a
//! transaction to publish in its place ([`Filter::derive`]: a control
//! plane's `apply`).
//!
//! # Config (`acl:CONFIG`)
//! `CONFIG` is `@PATH`, a rules file, or the rules themselves with `;`
//! between lines: `acl:drop proto tcp to any port 22; pass all`. A rules
//! file is in the pf-like text format of `pfil-acl` (see its
//! `FORMAT.md`), or in the ClassBench format if its first non-blank
//! character is `@` (every rule then drops, the default passes); it must
//! be a regular file of at most [`MAX_RULES_FILE_BYTES`], and its parse
//! errors give the line, the column and what was expected, not the file's
//! text (the daemon may read a file its client cannot). A filter takes at
//! most [`MAX_RULES`] rules. Files are named explicitly: before 0.2 an
//! existing path was read as a file and anything else as rules, so an
//! inline ruleset that happened to name a file was replaced by it.
//!
//! # Connection state
//! Rules with `ct state` / `ct dir` match the annotation a `ct` hook
//! earlier in the chain gave the packet ([`Packet::ct`]; `untracked`,
//! original direction, when none ran): a ruleset with such rules is
//! classified per state ([`CtClassifier`]); one without them costs what
//! it did. The nft idiom: `ct`, then `acl:pass ct state
//! established,related; ...; default drop`.
//!
//! # Keep state
//! pf's idiom: `pass ... keep state` rules. A ruleset with one looks
//! every packet up in the filter's own state table first (a
//! [`crate::ct::Table`], made with the first such ruleset, shared with
//! the filters [`Acl::with_rules`] makes, so states survive `set` and
//! `apply`): a packet of a tracked flow passes on its state (or is
//! dropped if it fails the flow's checks, TCP as the `ct` hook's strict
//! mode), without the rules; other packets walk the rules, and a `keep
//! state` rule that passes one creates its flow's state. Such rulesets
//! run packet by packet (no batch classification).
//!
//! After a `ct` hook the acl keeps no second table: its `keep state`
//! marks the flows it passes in the hook's table, and a packet the hook
//! annotated with the mark passes on its state without a lookup (see
//! `ct/keep.rs`; one acl a hook's table, a second keeps its own).
//!
//! # Keys
//! The key is read from [`Packet::headers`]: EtherType, addresses,
//! protocol and UDP/TCP ports from there; the VLAN id (outer tag), TCP
//! flags and ICMP type/code from the frame bytes at the offsets it gives
//! (IPv4 options and the common IPv6 extension headers are skipped). A
//! frame that does not parse has only its EtherType: rules that need IP
//! fields do not match it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use arc_swap::ArcSwap;
use crossbeam_utils::CachePadded;
use pfil::{Ctx, Filter, FilterStat, Packet, PacketKind, StatKind, Verdict, L4};
use pfil_acl::{
    classbench, has, text, Action, Classify, CtClassifier, Key, KeyV4, Rule, Ruleset,
    ETHERTYPE_IPV4, ETHERTYPE_IPV6,
};

/// Keys classified per call of the batch lookup (a stack buffer).
const CHUNK: usize = 64;
const NO_COUNTER: u32 = u32::MAX;
/// Counters per [`Segment`] row.
const SEG: usize = 64;

mod config;
mod counters;
mod filter;
#[cfg(test)]
mod keep_ct_tests;
mod keys;
mod stateful;
#[cfg(test)]
mod stateful_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_derive;
mod version;

pub use config::{MAX_RULES, MAX_RULES_FILE_BYTES};
pub use filter::{Acl, RuleHits};
pub use keys::{key_of, key_of_reference, key_v4_general, key_v4_into, key_v4_of};

use config::*;
use counters::*;
use stateful::{filter_batch_ct, filter_batch_keep, filter_batch_marks};
use version::*;
