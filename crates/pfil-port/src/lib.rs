//! # pfil-port: the driver-facing layer of pfil
//!
//! What a dataplane driver (AF_XDP, the synthetic in-memory port, a capture
//! replay) implements, and what it gets for it:
//!
//! - [`Port`]: the frame I/O one worker drives: RX a batch, TX a batch,
//!   recycle, wait for readiness, frame accounting ([`FrameCounts`]), the
//!   frames hooks consumed ([`Held`]). One or more queue endpoints
//!   ([`PortId`]) share one frame pool, so a forwarder moves frames
//!   between them without a copy.
//! - The worker loops, written once and monomorphised per port type (no
//!   `dyn` on the datapath): [`sink_loop`], [`forward_loop`],
//!   [`gen_loop`]. Each takes a port, a worker context ([`LoopWorker`]:
//!   registry, registry worker, [`Stats`]) and a [`LoopConfig`]; each pins
//!   one epoch per batch and runs the heads inline.
//! - [`spawn`]: one thread per worker, started all or none, and the
//!   [`Running`] handle that stops and joins them with every frame
//!   accounted for.
//! - [`Outbox`]: how a hook that returned `Consumed` gives the frame back
//!   (release, or transmit on one of the worker's endpoints).
//! - [`synthetic`]: the in-memory port, which needs no privileges; also
//!   the smallest complete [`Port`] implementation.
//!
//! ## Frame ownership
//! A frame is always in exactly one place. Loops take frames from
//! [`Port::rx`] or [`Port::alloc`] and give every one back: sent
//! ([`Port::tx`]), recycled ([`Port::recycle`]) or, for `Consumed`, held
//! under the packet's cookie until the hook's outbox request or the
//! `held_limit` bound (counted as `held_evicted`).

#![warn(missing_docs)]

mod config;
mod error;
mod loops;
mod outbox;
mod port;
pub mod spawn;
mod stats;
pub mod synthetic;

pub use config::{GenConfig, LoopConfig, Window, DEFAULT_HELD_LIMIT, MAX_CATCH_UP_MS};
pub use error::{Error, Result};
pub use loops::{forward_loop, gen_loop, sink_loop, LoopWorker};
pub use outbox::{Outbox, OutboxFull, Outboxes, Request};
pub use port::{Batch, FrameCounts, Held, Origin, Port, PortFrame, PortId, BATCH};
pub use spawn::{head_for, Finished, Running};
pub use stats::{Stats, StatsSnapshot};
