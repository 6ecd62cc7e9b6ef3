//! Packet classification for pfil's `acl` filter: an ordered list of
//! rules, first match wins, looked up by a decision-tree [`Classifier`]
//! and checked against the [`Linear`] scan it replaces.
//!
//! The crate is pure computation (no dependency on `pfil`), so it is
//! tested and benchmarked on its own.
//!
//! # Concepts
//! - A [`Rule`] matches on ethertype, VLAN id, IPv4 or IPv6 source and
//!   destination prefixes, a protocol range, source and destination port
//!   ranges, TCP flags (value/mask), ICMP type/code and the connection
//!   state a tracker gave the packet (`ct state`, `ct dir`); its [`Action`] is
//!   pass or drop. A [`Ruleset`] is rules in priority order plus a default
//!   action.
//! - A [`Key`] holds the fields of one packet. [`Rule::matches`] is the
//!   reference semantics; every [`Classify`] implementation returns the
//!   index of the first rule that matches, or `None`.
//! - Rulesets come from the pf-like text format ([`text::parse`], grammar
//!   below and in `FORMAT.md`) or from ClassBench files
//!   ([`classbench::parse`]).
//!
//! # The text format
//! One rule per line; `#` starts a comment; blank lines are ignored.
//!
//! ```text
//! ruleset  = { line } ;
//! line     = [ rule | "default" action ] [ "#" comment ] NEWLINE ;
//! rule     = action [ "count" ] [ family ] [ "vlan" VLAN ]
//!            [ "proto" proto ] ( "all" | [ "from" endpoint ] [ "to" endpoint ] )
//!            [ "flags" FLAGS ] [ "icmp-type" U8 [ "code" U8 ] | "icmp-code" U8 ]
//!            [ "ct" "state" STATE { "," STATE } ] [ "ct" "dir" ( "original" | "reply" ) ]
//!            [ "mark" MARK [ "/" MARK ] ] [ "keep" "state" ]  (* keep state: pass rules only *)
//!            [ "set" "mark" MARK ] ;
//! MARK     = U32 | "0x" HEX ;  (* mark V/M: the packet's mark & M == V *)
//! STATE    = "new" | "established" | "related" | "invalid" | "untracked" ;
//! action   = "pass" | "drop" | "block" ;
//! family   = "inet" | "inet6" | "arp" | "ethertype" HEX16 ;
//! proto    = "tcp" | "udp" | "icmp" | "icmp6" | "sctp" | "any" | U8 ;
//! endpoint = ( "any" | address ) [ "port" ports ] | "port" ports ;
//! address  = IPV4 [ "/" 0..32 ] | IPV6 [ "/" 0..128 ] ;
//! ports    = U16 | U16 ":" U16 ;          (* inclusive, low <= high *)
//! FLAGS    = { flag } "/" flag { flag } ; (* value/mask, value within mask *)
//! flag     = "F" | "S" | "R" | "P" | "A" | "U" | "E" | "C" ;
//! ```
//!
//! The parts of a rule come in this order, each at most once. An address
//! implies its family; `flags` implies `proto tcp`; ports, flags and ICMP
//! fields only match packets that have them (a port range other than
//! `0:65535` never matches ICMP). At most one `default` line; without one
//! the default is `pass`.
//!
//! ```
//! use pfil_acl::{text, Action, Classifier, Classify, Key};
//!
//! let rs = text::parse(
//!     "drop proto tcp from 10.0.0.0/8 to 198.18.0.0/15 port 22 flags S/SA\n\
//!      pass proto udp from any port 1024:65535 to 198.18.0.1\n\
//!      default drop  # everything else\n",
//! )?;
//! let acl = Classifier::new(&rs);
//! let dns_reply = Key::ipv4(0x0808_0808, 0xc612_0001, 17, 53000, 5353);
//! assert_eq!(acl.classify(&dns_reply), Some(1));
//! assert_eq!(rs.action(acl.classify(&dns_reply)), Action::Pass);
//! let other = Key::ipv4(0x0808_0808, 0xc612_0001, 17, 53, 5353);
//! assert_eq!(rs.action(acl.classify(&other)), Action::Drop);
//!
//! let e = text::parse("pass\ndrop proto tcp from any port http").unwrap_err();
//! assert_eq!((e.line, e.column), (2, 30));
//! assert_eq!(e.to_string(),
//!     "line 2, column 30: expected a port or port range (N or LOW:HIGH, 0-65535), found `http`");
//! # Ok::<(), pfil_acl::text::ParseError>(())
//! ```
//!
//! # The classifier
//! See [`tree`] for the algorithm (HyperCuts-style decision trees, one or
//! one per address-size partition, with leaves of 8-rule
//! structure-of-arrays blocks tested with SSE2 lane compares, AVX2 where
//! the CPU has it; batches walked breadth first, a round of every key's
//! next level at a time) and
//! `BENCHMARKS.md` for how it compares with linear scan and DPDK's
//! rte_acl.

// `unsafe` in a few places, allowed there one by one, each with its
// reason: the AVX2 build of the batch lookup (an `unsafe fn` with a
// target feature) and its call once the CPU is known to have AVX2; the
// SSE2 `pmovmskb` of a block's miss vector; prefetches (which cannot
// fault, whatever the address).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod adversarial;
pub mod classbench;
pub mod ctsplit;
mod linear;
mod rule;
pub mod text;
pub mod tree;

pub use ctsplit::CtClassifier;
pub use linear::Linear;
pub use rule::{
    ct, has, Action, Addr, Key, Rule, Ruleset, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6,
    STATE_LIMIT_MAX,
};
pub use tree::{Classifier, Config, KeyV4, Stats};

/// A first-match classifier over a [`Ruleset`].
pub trait Classify {
    /// The index of the first rule matching `k`, or `None`.
    fn classify(&self, k: &Key) -> Option<u32>;

    /// Classifies every key of `keys` into the same position of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than `keys`.
    fn classify_batch(&self, keys: &[Key], out: &mut [Option<u32>]) {
        assert!(out.len() >= keys.len(), "out is shorter than keys");
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.classify(k);
        }
    }
}
