//! # Limitations
//!
//! - **Hooks can delay reclamation, not readers.** A batch that never ends (a
//!   hook that blocks) holds its pin and delays every retirement; use
//!   [`Retirement::wait_timeout`](crate::Retirement::wait_timeout) where that
//!   matters. It never blocks another reader or a writer.
//! - **Filter objects drop on whatever thread reclaims them.** The epoch runs
//!   deferred destructors on threads that pin, datapath threads included:
//!   keep a filter's `Drop` cheap.
//! - **A fault batch under-counts.** When a hook panics, the drops it decided
//!   earlier in the same batch cannot be told from earlier hooks' and are not
//!   added to its counters.
//! - **Transactions hold links and unlinks.** Registering heads and adding or
//!   removing hooks are single operations, each its own generation.
//! - **Fail-closed is until unlink.** A fail-closed link whose hook panicked
//!   drops everything it is shown until a writer unlinks it (any writer call,
//!   or [`Registry::reap_quarantine`](crate::Registry::reap_quarantine));
//!   after that the chain runs without it. Link a drop hook if the traffic
//!   must stay stopped.
//! - **Worker slots are fixed at construction**
//!   ([`Registry::with_max_workers`](crate::Registry::with_max_workers)): each
//!   link keeps one 64-byte counter slot per possible worker.
//! - **Batch 1 pays a pin per packet.** Run batches where you can.
