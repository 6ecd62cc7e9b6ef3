//! # pfil: packet filter hooks for userspace dataplanes
//!
//! What pfil(9) is to the FreeBSD kernel, this crate is to a userspace
//! packet-processing application (an AF_XDP forwarder, a load balancer, a
//! capture box): named inspection points where filters are attached and
//! detached at run time, at almost no cost to the packets going through.
//!
//! ## Motivation
//! The chain of filters changes rarely; packets run through it millions of
//! times a second. The naive way puts the chain behind a lock:
//!
//! ```text
//! let chain = lock.read();          // a shared-line RMW per packet (or batch)
//! for hook in chain.iter() { .. }
//! ```
//!
//! With two cores reading, that cache line bounces on every acquisition and
//! the lock alone costs more than the filtering (FreeBSD measured this for
//! rmlocks in 2007; `BENCHMARKS.md` measures it here). pfil-rs publishes
//! every configuration as an immutable **generation** behind one atomic
//! pointer; a datapath thread pins an epoch once per batch (a store to its
//! own line), walks the chain, and unpins. Writers pay: they serialize,
//! copy, publish and retire the old generation after a grace period.
//!
//! ## Concepts
//! - **Head**: a named inspection point with a packet kind and the
//!   directions it supports ([`Registry::register_head`], [`Head`]).
//! - **Hook**: a named filter, `module:ruleset`, registered once
//!   ([`Registry::add_hook`], [`Filter`]).
//! - **Link**: a hook placed on a head in one direction at a position
//!   ([`Registry::link`], [`Placement`]).
//! - **Chain**: the ordered links a head runs for one direction.
//! - **Generation**: one immutable numbered snapshot of every chain. A batch
//!   sees exactly one ([`Snapshot`]), so a change to several heads is atomic
//!   ([`Transaction`]).
//! - **Verdict**: [`Verdict::Pass`], [`Verdict::Dropped`],
//!   [`Verdict::Consumed`].
//! - **Grace period**: the time after which no reader can still see a
//!   retired generation ([`Retirement`]). An unlinked link is gone for good
//!   only then (its counters are final). Unlinking does not drop the hook:
//!   it stays registered and can be linked again; a hook removed with
//!   [`Registry::remove_hook`] is dropped by the registry after the grace
//!   period.
//! - **Counters**: the registry counts every link's packets, bytes and
//!   verdicts per worker ([`LinkInfo::counters`]); a filter may keep
//!   statistics of its own (an ACL's per-rule hits), which it sums when
//!   asked ([`Filter::stats`], [`Registry::hook_stats`]), off the datapath.
//!
//! ## Example
//! ```
//! use pfil::{Ctx, Dir, Dirs, Packet, PacketKind, Placement, Registry, Verdict};
//!
//! let reg = Registry::new();
//! let head = reg.register_head("veth0", PacketKind::Ethernet, Dirs::BOTH)?;
//! // Drop frames shorter than 60 bytes on input.
//! reg.add_hook("runt:drop", PacketKind::Ethernet, Dirs::IN, |p: &mut Packet<'_>, _: &Ctx<'_>| {
//!     if p.len() < 60 { Verdict::Dropped } else { Verdict::Pass }
//! })?;
//! reg.link("veth0", Dir::In, "runt:drop", Placement::Prepend)?;
//!
//! let mut worker = reg.worker()?;
//! let (mut a, mut b) = ([0u8; 64], [0u8; 20]);
//! let mut batch = [Packet::new(&mut a), Packet::new(&mut b)];
//! if head.is_hooked(Dir::In) {
//!     head.run_in(&mut worker, &mut batch);
//! }
//! assert_eq!(batch[0].verdict(), Verdict::Pass);
//! assert_eq!(batch[1].verdict(), Verdict::Dropped);
//! let counters = reg.chain("veth0", Dir::In)?[0].counters;
//! assert_eq!((counters.packets, counters.dropped), (2, 1));
//! # Ok::<(), pfil::Error>(())
//! ```
//!
//! ## Read more
//! The [`docs`] module: [design](docs::design), [locking](docs::locking),
//! [performance](docs::performance), [limitations](docs::limitations).
//!
//! ## Features
//! - `witness`: debug checks: a writer call from inside a hook fails with
//!   [`Error::WriterInHook`], a hook batch slower than
//!   [`witness::SLOW_BATCH`] is reported. Compiles to nothing when off. (A
//!   batch hook changing a final verdict is repaired and counted always:
//!   that check is on the cold batch-hook path.)
//! - `serde`: `Serialize` and `Deserialize` for what a control plane
//!   reports and reads: [`HeadInfo`], [`HookInfo`], [`LinkInfo`],
//!   [`RetiredLink`], [`Counters`], [`Refused`], [`FilterStat`] (with
//!   [`StatSample`], [`StatKind`]), and the value types
//!   [`Dir`], [`Dirs`], [`PacketKind`], [`FailMode`], [`Verdict`],
//!   [`Placement`], [`LinkOptions`]. Names are lowercase (`"in"`,
//!   `"ethernet"`, `"closed"`); a [`Dirs`] is its text form (`"in"`,
//!   `"out"`, `"in,out"`, `"none"`); a [`Placement`] is `"prepend"`,
//!   `"append"`, `{"before": "hook"}` or `{"after": "hook"}`.

#![warn(missing_docs)]
#![doc(test(attr(deny(warnings))))]

mod chain;
mod counters;
pub mod docs;
mod error;
mod filter;
mod filters;
mod head;
mod info;
mod packet;
mod parse;
mod quarantine;
mod quota;
mod registry;
mod retire;
mod shared;
mod state;
mod sync;
pub mod trace;
mod transaction;
mod types;
pub mod witness;

pub use counters::{Counters, Refused};
pub use error::Error;
pub use filter::{Ctx, Filter, FilterStat, StatKind, StatSample};
pub use filters::Derived;
pub use head::{Head, Snapshot, Worker};
pub use info::{HeadInfo, HookInfo, LinkInfo};
pub use packet::{
    CtState, FiveTupleV4, FiveTupleV6, Headers, IpHeaders, Packet, Parsed, RoomError, Transport, L4,
};
pub use parse::validate_name;
pub use quarantine::{Reaped, MAX_KEPT_REAPED};
pub use quota::Quota;
pub use registry::{Registry, DEFAULT_MAX_WORKERS, DEFAULT_SAMPLING};
pub use retire::{RetiredLink, Retirement};
pub use state::{LinkOptions, Op, Placement};
pub use trace::{Hop, HopNote, Trace, TraceMatch, TraceRecord, TraceStats, Tracing};
pub use transaction::{Commit, LinkHandle, Transaction};
pub use types::{Dir, Dirs, FailMode, PacketKind, Verdict, MAX_NAME_LEN};

#[cfg(test)]
mod tests;
