//! # pfil-afxdp: AF_XDP ports for pfil
//!
//! A driver that moves frames between AF_XDP sockets and pfil heads:
//!
//! - [`XdpProgram`]: a small loader on raw bpf(2) (no libbpf): an XSKMAP,
//!   a five-instruction `bpf_redirect_map(&xsks, rx_queue_index, XDP_PASS)`
//!   program, attached with `BPF_LINK_CREATE` (native mode first, generic
//!   as fallback) so that it detaches by itself when the process dies.
//! - [`Umem`]: one UMEM (through `xdpilone`) and the sockets bound to it,
//!   one per (interface, queue), owned by one worker thread. Frames move as
//!   [`Frame`] tokens; [`Umem::counts`] says where every frame is
//!   ([`FrameCounts`]: fill, RX, free, app, TX, completion, held).
//! - [`SharedUmem`]: one UMEM area registered once and split between the
//!   workers of several queues, one [`Umem`] part (a disjoint frame range,
//!   its own sockets and fill/completion rings) per worker thread.
//! - [`live`]: the in-kernel traffic generator (`BPF_PROG_RUN` with live
//!   frames): a redirect program run over frame templates, no socket.
//! - [`run`]: the spawners that start one worker per queue running the
//!   loops of [`pfil_port`] (sink, forward, generate) over a [`Umem`],
//!   which implements [`pfil_port::Port`].
//!
//! ## Frame ownership and `Consumed`
//! A frame is always in exactly one place. When a hook returns
//! [`pfil::Verdict::Consumed`], the loop moves the frame to the UMEM's
//! *held* set under the packet's cookie ([`pfil_port::Held`]); it is not
//! recycled until the hook gives it back through its worker's [`Outbox`]
//! (release, or transmit on a port). At most `LoopConfig::held_limit`
//! frames are held per worker; past that the oldest go back to the pool,
//! counted as `held_evicted` (see [`Outbox`] for every bound).
//!
//! ## Frame budget
//! [`Umem::open`] refuses a port unless the UMEM (part) can stock every
//! port's fill ring to its target *and* fill every RX and TX ring at once, plus
//! [`APP_RESERVE`]: a backed-up TX ring (a slow peer) or an idle port's
//! fill ring then can never take the frames a busy fill ring needs
//! ([`Umem::frames_needed`]).
//!
//! ## Queues and CPUs
//! Workers share nothing they write: each has its own [`Umem`] (or part of
//! a [`SharedUmem`]: disjoint frames, its own fill and completion rings),
//! its own sockets and rings, its own loop counters
//! ([`run::Stats`], aligned to 128 bytes so two workers' counters never
//! share a line) and its own slot in every per-worker counter of the
//! registry and the filters (padded the same way). What they share is
//! read-mostly: the registry's current generation and the filters. So
//! queues scale with CPUs as long as each worker has a CPU of its own
//! ([`run::WorkerSetup::cpus`] pins worker `i` to the `i`-th CPU of a
//! list before it opens its ports, so its rings and frames are first
//! touched there); `benches/scaling.sh` measures it.
//!
//! ## Network namespaces
//! Interfaces are looked up in the calling thread's network namespace;
//! [`enter_netns`] moves one thread, so a process can drive interfaces of
//! several namespaces from different threads.

#![warn(missing_docs)]

mod config;
mod error;
mod frame;
mod io;
pub mod live;
#[cfg(test)]
mod loop_tests;
mod open;
mod rings;
pub mod run;
mod sys;
mod umem;
mod xdp;

pub use config::{
    BindMode, BoundMode, PortConfig, UmemConfig, APP_RESERVE, BATCH, COPY_TX_PER_KICK,
    MAX_UMEM_BYTES,
};
pub use error::{Error, Result};
pub use frame::{Frame, FrameArea};
pub use pfil_port::{FrameCounts, Outbox, OutboxFull, Outboxes, PortId, Request};
pub use sys::XdpStats;
pub use umem::{SharedUmem, Umem};
pub use xdp::{check_privileges, enter_netns, queue_count, XdpMode, XdpProgram};
