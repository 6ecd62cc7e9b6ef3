//! # Limitations
//!
//! - **Hooks can delay reclamation, not readers.** A batch that never ends (a
//!   hook that blocks) holds its pin and delays every retirement; use
//!   [`Retirement::wait_timeout`](crate::Retirement::wait_timeout) where that
//!   matters. It never blocks another reader or a writer.
//! - **Filter objects drop on whatever thread reclaims them.** The epoch runs
//!   deferred destructors on threads that pin, datapath threads included:
//!   keep a filter's `Drop` cheap.
//! - **A batch hook's fault is coarse.** When a batch hook panics, the
//!   runner cannot tell which packet it died on: under fail-closed every
//!   packet of that chunk the hook was shown and left `Pass` is dropped.
//!   (A per-packet hook's fault is exact: the packets before keep the
//!   hook's verdicts, the one it panicked on gets the fail verdict.) The
//!   counters are exact either way ([`Counters`](crate::Counters)).
//! - **Heads are not part of transactions.** A transaction links, unlinks,
//!   adds and removes hooks and replaces filters
//!   ([`Op`](crate::Op)); registering and unregistering a head are single
//!   operations, each its own generation.
//! - **A filter replacement keeps the hook's kind and directions**
//!   ([`Op::ReplaceFilter`](crate::Op::ReplaceFilter)); to change those,
//!   remove the hook and add it again (one transaction), which gives its
//!   links new counters.
//! - **Fail-closed is until removed on purpose.** A fail-closed link whose
//!   hook panicked drops everything it is shown, without calling the hook,
//!   until it is removed on purpose:
//!   [`Registry::reap_quarantine`](crate::Registry::reap_quarantine),
//!   [`Registry::reap_link`](crate::Registry::reap_link), an unlink of it,
//!   the removal of its hook or head, or a replacement of its hook's filter
//!   (the link then runs the new filter). No other writer call touches it.
//!   A fail-open link whose hook panicked is skipped, and unlinked by the
//!   next writer call of any kind, which reports it
//!   ([`Commit::reaped`](crate::Commit::reaped),
//!   [`Registry::take_reaped`](crate::Registry::take_reaped)).
//! - **Worker slots are fixed at construction**
//!   ([`Registry::with_max_workers`](crate::Registry::with_max_workers)): each
//!   link keeps one cache-line-padded counter slot (128 bytes on x86-64) per
//!   possible worker. There is no other limit: more than 64 workers (a NIC
//!   with more queues) work.
//! - **Batch 1 pays a pin per packet.** Run batches where you can.
