//! `ct`: connection tracking. Per-flow state for TCP (pf's states and
//! sequence windows, or flags only), UDP, ICMP/ICMPv6 echo and other IP
//! protocols, IPv4 and IPv6, keyed on the 5-tuple normalised for
//! direction. The hook annotates each packet ([`Packet::set_ct`]) with
//! its connection state (`new`, `established`, `related`, `invalid`, or
//! `untracked` for what is not IP) and whether it goes in the reply
//! direction, for later hooks of the chain to match on (the `acl`'s
//! `ct state established,related` and `ct dir reply`). Its verdict is
//! always pass, except for `invalid` packets with `drop-invalid`.
//!
//! # Config (`ct` or `ct:CONFIG`)
//! `[max N] [tcp strict|loose] [drop-invalid]`, each at most once, in any
//! order:
//! - `max N`: most flows tracked, 1 to 10 000 000 (`100k`, `1M` allowed;
//!   default 100 000, pf's `set limit states`).
//! - `tcp strict` (default): pf's tracking; a flow starts only with a SYN
//!   (without ACK); a segment outside its window, a RST not at the exact
//!   sequence, impossible flags, or a segment of no known flow is
//!   `invalid`. `tcp loose`: flags only (no sequence checks), and a flow
//!   may be picked up mid-stream by any segment but a SYN-ACK or a RST.
//! - `drop-invalid`: drop `invalid` packets (otherwise they pass with
//!   the annotation, for a later hook to decide).
//!
//! # States
//! A packet is `new` while its flow has not been seen in the reply
//! direction, `established` once it has (the first reply included, as
//! Linux's conntrack says it), `related` if it is an ICMP or ICMPv6 error
//! (destination unreachable, packet too big, time exceeded, parameter
//! problem, source quench, redirect) quoting a packet of a tracked flow
//! and sent back to that packet's sender, and `invalid` when it cannot
//! be placed: malformed or truncated, bad TCP flags or out of window, an
//! echo reply or a TCP segment (not a SYN) with no flow, an ICMP error
//! quoting no flow, or no room in the table. IP fragments are not
//! reassembled: they are `untracked`, as non-IP frames are.
//!
//! Flows: TCP, UDP and other protocols by their addresses, protocol and
//! ports (0 for protocols without ports); ICMP echo by the addresses and
//! the echo identifier (a request opens, its reply establishes); other
//! ICMP messages that are not errors like other protocols (addresses
//! only). A SYN on a TCP flow closed both ways reopens it as a new flow
//! (port reuse).
//!
//! # Timeouts
//! pf's defaults, in seconds ([`PF_TIMEOUTS`]): tcp.first 120,
//! tcp.opening 30, tcp.established 86400, tcp.closing 900, tcp.finwait
//! 45, tcp.closed 90, udp.first 60, udp.single 30, udp.multiple 60,
//! icmp.first 20, icmp.error 10, other.first 60, other.single 30,
//! other.multiple 60; scaled down as the table fills (pf's adaptive
//! timeouts: from 60 % of `max`, down to a third at `max`).
//!
//! # The table
//! See [`table`]: one table shared by all workers (right
//! whatever the RSS), in shards behind locks, at most `max` flows (new
//! flows are refused at the limit: their packet is `invalid`, reason
//! `limit`, counted `refused`), 96 bytes an entry plus 8-byte index
//! slots, expired incrementally (a shard's entries a chunk, at pf's pace of a
//! pass in 10 s until the table fills; never a scan).
//!
//! # Several workers
//! One table for all workers: with AF_XDP queues the two directions of a
//! flow arrive on different queues unless the NIC's RSS hash is
//! symmetric, and per-worker tables would then see each flow half, so
//! replies would be `new` or `invalid`. The shared table is right
//! whatever the RSS; its cost is a lock per packet on the packet's
//! entry (uncontended: a compare-and-swap and a store; two workers meet
//! on it only when both send on the flow at once), and on one of up to
//! 64 shards for a new flow, a removal, a lookup the lock-free probe
//! cannot settle, and the round-robin sweep (once a chunk of a batch).
//! The acl's `keep state` looks its packets up the same way
//! ([`Table::existing`]), in its own table; after a `ct` hook it keeps
//! its states in the hook's table instead, as a mark on the flows it
//! passed ([`table::KEPT`], handed on in the annotation's extra bits,
//! [`Packet::ct_ext`]; see `ct/keep.rs`).
//! Measured against per-worker tables (BENCHMARKS.md, "one shared table
//! vs per-worker tables"): two workers sending both directions of the
//! same flows cost 10 % more a packet at 1 000 flows and nothing
//! measurable at 1 million; per-worker tables would need symmetric RSS.
//!
//! A table only one worker runs batches on takes no entry lock at all:
//! it is biased to that worker (see `ct/bias.rs`), whose batches update live
//! entries with plain stores (the compare-and-swap was 6 of the hook's
//! 42 ns a packet at 1 000 flows). A second worker's first batch makes
//! the table shared for good (after the owner's batch in progress); the
//! control plane (`pfilctl states`, `--kill`) holds the bias while it
//! reads or removes entries. The table's public per-packet calls
//! ([`Table::track`], [`Table::existing`], [`Table::sweep_next`]...)
//! hold it too: they are right from any thread.
//!
//! # Where this differs from Linux's conntrack
//! Checked packet by packet: the test `tests/ct_oracle` sends the same
//! frames (generated cases and real captures) through Linux's conntrack
//! in namespaces of its own and through this hook, and fails on any
//! difference not listed here (its allow-list names each with the same
//! reason), once per TCP mode: `tcp strict` against Linux with
//! `nf_conntrack_tcp_loose=0`, `tcp loose` against `=1`.
//! - `tcp loose` is flags only (VPP's): a segment or RST outside the
//!   window passes on its flow; Linux's loose mode only picks flows up
//!   mid-stream and still checks windows. It also picks a flow up from a
//!   FIN-ACK, where Linux's takes an ACK without FIN only.
//! - A TCP segment wholly below the receiver's window (old data already
//!   acknowledged): Linux passes it as `established` without updating
//!   the flow ("SEQ is under the lower bound", `NFCT_TCP_IGNORE`); pf's
//!   tracking calls it a bad state: `invalid`. So for an ACK more than a
//!   window below the data the other way sent (Linux 6.1 on: "ACK under
//!   the lower bound"; pf's `ackskew` check).
//! - A TCP flow whose first answer is a RST: Linux deletes its entry at
//!   once (a RST before any reply), so the flow's later segments find
//!   none (`invalid`, or `new` when loose mode picks them up); pf's
//!   state stays, closing, and passes segments inside its window
//!   (`established`).
//! - Segments (not SYNs) from the originator before any answer (a
//!   one-sided capture, TCP Fast Open data): Linux's state table calls an
//!   ACK from the originator in `SYN_SENT` invalid; pf knows no window of
//!   the responder yet and lets them through: `new`.
//! - SCTP: Linux has an SCTP state machine and calls chunks outside it
//!   `invalid`; here SCTP is tracked like other protocols.
//! - ICMPv6 neighbour discovery (but redirects, which Linux calls
//!   `invalid`) and MLD are `untracked` in Linux; here
//!   they are tracked by address pair, as is every informational ICMP
//!   message that is not an echo (Linux tracks timestamp, information
//!   and address-mask requests by identifier and calls other
//!   informational messages `invalid`).
//! - State is created for every first packet the hook sees, also when a
//!   later hook drops it (Linux confirms an entry only when its packet
//!   leaves): unsolicited traffic takes table entries (`new`, short
//!   timeouts), and the limit is what bounds it.
//! - Strict TCP starts a flow only with a SYN (Linux's default,
//!   `nf_conntrack_tcp_loose=1`, picks up mid-stream: here `tcp loose`).
//! - IP fragments are not reassembled: `untracked` (Linux defragments
//!   first).
//! - An ICMP error is `related` if it quotes a tracked flow and goes
//!   back to the quoted packet's sender, without pf's check of a quoted
//!   TCP sequence number. An echo reply's code is not compared with its
//!   request's (Linux: `invalid` when they differ).
//! - pf's TCP rules where Linux's differ (each shown by a scenario
//!   capture of `tests/data/ct-oracle/scenarios`): a segment must end
//!   inside the receiver's window (Linux: start inside it); an ACK may
//!   be up to pf's MAXACKWINDOW (65 535) ahead of the data sent, a
//!   SYN-ACK's or RST-ACK's of the SYN too (Linux: not past it); a RST
//!   must be at the next sequence, one before or one after (Linux: any
//!   in the window, answered by a challenge ACK); SACK blocks are not
//!   checked; a SYN with a new ISN on a flow not closed both ways, or a
//!   SYN or SYN-ACK sent again with a new ISN, is `invalid` (Linux lets
//!   it through without changing the flow); flag combinations are pf's
//!   normaliser's
//!   (SYN with PSH or URG `invalid`; SYN-ACK-URG, RST-ACK-URG, FIN-RST-ACK
//!   valid); after the server's RST a new SYN starts a new flow (Linux
//!   keeps the closed entry); a blind SYN-ACK, or a blind RST-ACK acking
//!   the ISN itself, before the genuine SYN-ACK is `invalid` to both but
//!   throws Linux's flow out of step, not this hook's; a responder whose
//!   first segment seen is not a SYN-ACK gives its window (Linux stays
//!   in `SYN_SENT` and calls the originator's ACKs `invalid`). Unlike
//!   pf, a challenge ACK answering a SYN
//!   (RFC 5961: the server still holds a connection the table lost, as
//!   after a restart) passes and sets nothing, as in Linux, so the
//!   originator's RST and its next SYN reconnect.
//! - Protocols without a tracker here (SCTP, UDP-Lite, ...) are tracked
//!   by address pair, ports 0: two port pairs are one flow.
//!
//! # Reconfiguring
//! `pfilctl set` (in place, [`Filter::reconfigure`]) and `apply`
//! ([`Filter::derive`]: the new filter shares the table) keep every
//! state; `max` may change up to the `max` the table was built with,
//! and a config without `max` keeps that size (not the default).

#[cfg(doc)]
use pfil::{Filter, Packet};

mod arena;
pub(crate) mod bias;
mod config;
mod existing;
pub mod expr;
mod filter;
pub mod flow;
mod hit;
pub mod index;
pub(crate) mod keep;
#[cfg(test)]
mod model;
mod peek;
pub mod slot;
mod states;
mod step;
mod sweep;
pub mod table;
pub mod tcp;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_batch;
#[cfg(test)]
mod tests_bias;
#[cfg(test)]
mod tests_edges;
#[cfg(test)]
mod tests_filter;
mod track;

pub use config::{CtConfig, TcpMode, DEFAULT_MAX, MAX_MAX, SYNTAX};
pub use existing::Existing;
pub use expr::StateExpr;
pub use filter::Ct;
pub(crate) use hit::Batch;
pub use states::StateInfo;
pub use step::expired;
pub use sweep::{SWEEP_MIN_PER_SECOND, SWEEP_PASS_SECONDS};
pub use track::Table;

use flow::{Class, FlowKey, Kind};
use step::*;
use sweep::*;
use table::{Adaptive, Entry, Peek, Shard, Shards, KEPT, LIVE, ORIG_A, ORIG_MORE, REPLY_SEEN};
use track::*;

/// Why a packet is `invalid` (the `reason` label of the `invalid` stat).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Invalid {
    /// Truncated or malformed headers.
    Malformed = 0,
    /// TCP flags no stack sends.
    TcpFlags = 1,
    /// A TCP segment outside its window (strict mode).
    TcpWindow = 2,
    /// A TCP RST not at the exact sequence (strict mode).
    TcpRst = 3,
    /// A packet that cannot start a flow and belongs to none: an echo
    /// reply, a TCP segment other than a SYN (strict), a SYN-ACK or a
    /// RST; an ICMP error quoting no tracked flow.
    NoState = 4,
    /// An ICMP error not sent back to the quoted packet's sender.
    IcmpMismatch = 5,
    /// A new flow refused: the table is at `max`.
    Limit = 6,
}

impl Invalid {
    /// Every reason, in order.
    pub const ALL: [Invalid; 7] = [
        Invalid::Malformed,
        Invalid::TcpFlags,
        Invalid::TcpWindow,
        Invalid::TcpRst,
        Invalid::NoState,
        Invalid::IcmpMismatch,
        Invalid::Limit,
    ];

    /// The reason's name.
    pub fn name(self) -> &'static str {
        match self {
            Invalid::Malformed => "malformed",
            Invalid::TcpFlags => "tcp_flags",
            Invalid::TcpWindow => "tcp_window",
            Invalid::TcpRst => "tcp_rst",
            Invalid::NoState => "no_state",
            Invalid::IcmpMismatch => "icmp_mismatch",
            Invalid::Limit => "limit",
        }
    }
}

/// The timeout an entry is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Timeout {
    TcpFirst = 0,
    TcpOpening,
    TcpEstablished,
    TcpClosing,
    TcpFinWait,
    TcpClosed,
    UdpFirst,
    UdpSingle,
    UdpMultiple,
    IcmpFirst,
    IcmpError,
    OtherFirst,
    OtherSingle,
    OtherMultiple,
}

/// pf's default timeouts in seconds, indexed by [`Timeout`].
pub const PF_TIMEOUTS: [u32; 14] = [120, 30, 86400, 900, 45, 90, 60, 30, 60, 20, 10, 60, 30, 60];

/// What one run of the tracker needs besides the packet.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Seconds on the table's clock.
    pub now: u32,
    /// Flags-only TCP.
    pub loose: bool,
    /// The entry limit.
    pub max: usize,
}
