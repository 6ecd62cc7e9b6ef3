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
//!
//! ## Writing a port: the contract
//! A second driver (a DPDK-style port, an in-memory ring) needs only this
//! section and the docs of [`Port`]; `tests/ring_port.rs` in this crate is
//! a complete example written from them (a ring-backed port that reaps
//! only when asked), with tests of each point below.
//!
//! **Frames.** [`Port::Frame`] is an ownership token (not `Clone`): the
//! only handle to its bytes. [`PortFrame::addr`] is unique in the pool and
//! below 2³² (it makes the cookies). [`Batch`] is an
//! [`arrayvec::ArrayVec`] of [`BATCH`] (64) frames; the crate re-exports
//! [`arrayvec`] so a driver names the same type.
//!
//! **Receiving.** [`Port::rx`] moves frames into the batch's spare room
//! and returns how many; 0 means "nothing now": no frame, *or no free
//! buffer to receive into*. It must not block. [`Port::rx_ended`] says an
//! endpoint will never receive again (a finite source); a loop returns
//! when all its receiving endpoints ended. [`Port::poll_rx`] may wait up
//! to its timeout in milliseconds; the loops pass
//! [`LoopConfig::idle_poll_ms`] clamped to 0 or more (never a negative
//! one, which poll(2) would take as "without bound"); a port may return
//! early, `true` meaning "look again".
//!
//! **Completions: who reaps, and when.** The loops call [`Port::reap`]
//! whenever a look at RX found nothing, at least every [`REAP_EVERY`]
//! batches while frames keep arriving, at the top of every generator
//! iteration, and once on exit. A port may also reap on its own inside
//! `rx`/`tx` (the AF_XDP port does, where it is one ring read), but it need
//! not: a port whose sent frames return to the pool only in `reap` works.
//!
//! **Sending.** [`Port::tx`] takes frames from the front of the batch as
//! long as it has room and leaves the rest; the loops count what left the
//! batch as sent, *even when `tx` returns an error* (a port may queue
//! frames and then fail to kick). The loops retry a full ring (with
//! [`Port::kick_tx`], bounded), then recycle what still does not fit
//! (`tx_dropped`). On an error the frames left in the batch are recycled,
//! the batch is counted, and the loop returns the error after its exit
//! path ([`Port::flush`] on every endpoint, `reap`).
//!
//! **Bytes.** While running the heads, the loops hold the slices of a
//! whole batch at once: [`Port::bytes`] (through `&self`) of distinct
//! frames must be disjoint and stay valid while the frames are not
//! moved; it returns the packet (the length `rx` or
//! [`Port::set_len`] gave it), [`Port::buffer`] the whole
//! [`Port::frame_size`] bytes.
//!
//! **Room.** The loops build each packet over [`Port::room`]: the frame's
//! buffer and where the packet lies in it, so hooks can grow it into the
//! bytes before (headroom) and after (tailroom), as XDP programs do. A
//! port whose packets sit after room (the synthetic port: 256 bytes;
//! AF_XDP: the kernel's 256 on RX) says so there, and takes back what the
//! hooks made of the packet with [`Port::set_span`]: the loops call it on
//! every frame to be sent (forward, generator) whose bounds a hook
//! changed ([`pfil::Packet::bounds_changed`]) and on every outbox
//! transmit of [`Outbox::transmit_packet`], and the frame goes out from
//! that start, that long; the generator also places each frame it builds
//! after 256 bytes of headroom with it, where the port can. The defaults
//! offer no room; a frame a hook moved or resized is then refused
//! (counted `refused`), never sent as it was.
//!
//! **The pool.** It must hold more frames than
//! [`LoopConfig::held_limit`] (frames hooks may keep) plus what the port
//! keeps posted for receiving (its fill depth: fill and RX rings) plus
//! the two batches a loop holds: below that, once hooks hold their
//! maximum, RX finds no buffer and the loop makes no progress. A port that
//! reaps only when asked also has the frames sent since the last reap out
//! of its pool (up to [`REAP_EVERY`] × [`BATCH`]): size for them too, or
//! the loop slows down (a look that finds no buffer reaps, so it is slower,
//! not stuck).
//!
//! **Held frames.** [`Port::held`] is the port's [`Held`] set; the loops
//! push consumed frames there and take them back for outbox requests and
//! evictions. When a loop returns, the frames still held *stay there*
//! (counted as `held` in [`FrameCounts`]): the caller drains them
//! ([`Held::pop_oldest`] then [`Port::recycle`]) or keeps them for the
//! next loop on the same port.
//!
//! **Counting.** [`Port::counts`] says where every frame is;
//! [`FrameCounts::adds_up`] must hold whenever no loop runs. The loops'
//! counters are in [`Stats`]: for [`forward_loop`] and [`gen_loop`]
//! `passed == tx + tx_dropped`; for [`sink_loop`] `passed` is frames
//! delivered (recycled after the heads). Outbox requests are counted in
//! the loop's [`LoopWorker::stats`] (the a→b stats of a forwarder,
//! whichever direction consumed the frame): `released`, `reinjected`
//! (queued for TX), `refused` (no endpoint on that interface, or the TX
//! ring full or failing: the frame was recycled), `stale`; they are not
//! counted in `tx`/`passed`.

#![warn(missing_docs)]

mod config;
mod error;
pub mod flows;
mod loops;
mod outbox;
mod port;
pub mod spawn;
mod stats;
pub mod synthetic;

/// The crate [`Batch`] comes from, re-exported so a driver names the same
/// `ArrayVec` type (`pfil_port::arrayvec::ArrayVec`).
pub use arrayvec;
pub use config::{GenConfig, LoopConfig, Window, DEFAULT_HELD_LIMIT, MAX_CATCH_UP_MS};
pub use error::{Error, Result};
pub use loops::{forward_loop, gen_loop, sink_loop, LoopWorker, REAP_EVERY};
pub use outbox::{Outbox, OutboxFull, Outboxes, Request, Span};
pub use port::{Batch, FrameCounts, Held, Origin, Port, PortFrame, PortId, BATCH};
pub use spawn::{head_for, Finished, Running};
pub use stats::{Stats, StatsSnapshot};
