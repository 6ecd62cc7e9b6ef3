//! # Design: pfil(9), kept and changed
//!
//! **Kept.** pfil's three nouns — head, hook, link — and its verbs:
//! `register_head`, `add_hook`, `link`, `unlink`, `remove_hook`. Prepend
//! means "closest to the wire": first on input, last on output, as with
//! pfil's default (no `PFIL_APPEND`). `is_hooked` is `PFIL_HOOKED_IN`: one
//! load, so an inspection point skips the call when nothing is linked.
//! Verdicts mirror `pfil_return_t` (`PFIL_PASS`, `PFIL_DROPPED`,
//! `PFIL_CONSUMED`). Removing a hook unlinks it everywhere first, like
//! `pfil_remove_hook`, and the hook is freed only after the grace period, like
//! pfil's `NET_EPOCH_CALL`.
//!
//! **Changed.**
//! - *Generations instead of per-head lists.* pfil keeps a `CK_STAILQ` per head
//!   and direction; a reader may see one head's old chain and another head's
//!   new one. Here every configuration is one immutable, numbered
//!   [generation](crate::Snapshot::generation) behind one pointer, so a
//!   [`Transaction`](crate::Transaction) across several heads is atomic to a
//!   batch, and writers can do optimistic concurrency
//!   ([`expect_generation`](crate::Transaction::expect_generation)).
//! - *Batches.* A userspace dataplane receives 32–64 frames at a time. The
//!   epoch is pinned once per batch; each link walks the whole batch (one
//!   indirect call per packet, one counter flush per batch).
//! - *Counters per link, per worker.* pfil leaves statistics to the filters.
//!   Here every link counts packets, bytes, verdicts and faults, in a
//!   cache-line-padded slot per [`Worker`](crate::Worker), summed on read.
//! - *Fault containment.* A native pfil hook that crashes takes the kernel
//!   with it. Here a panic is caught per link, the packet gets the link's
//!   [`FailMode`](crate::FailMode) verdict, the link is skipped at once and
//!   unlinked by the next writer.
//! - *Retirement tickets.* An unlink returns a
//!   [`Retirement`](crate::Retirement) that completes when no reader can still
//!   run the hook, with each removed link's final counters
//!   ([`Retirement::links`](crate::Retirement::links)).
//! - *Hot swap.* A filter is replaced under its hook name in one generation
//!   ([`Registry::replace_filter`](crate::Registry::replace_filter),
//!   [`Op::ReplaceFilter`](crate::Op::ReplaceFilter)): links keep their
//!   places, fail modes and counters; the old filter is dropped after the
//!   grace period. A filter may make its successor itself
//!   ([`Filter::derive`](crate::Filter::derive),
//!   [`Registry::derive_filter`](crate::Registry::derive_filter)),
//!   carrying over what it keeps (an ACL's rule hits) without changing the
//!   running one until the swap is published.
