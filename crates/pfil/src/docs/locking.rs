//! # Locking: the one invariant
//!
//! > A generation is freed only after the epoch's deferred function for it
//! > ran, which it was handed after it was made unreachable from
//! > `Shared::current` by the swap that published its successor; a reader
//! > dereferences a generation only while the pin it loaded it under is
//! > alive.
//!
//! Everything else follows:
//! - **Readers** ([`Snapshot`](crate::Snapshot)) pin, `load(Acquire)` the
//!   current pointer, and keep the pin for the whole batch. The Acquire pairs
//!   with the writer's `swap(AcqRel)`: the chains of the new generation are
//!   fully built before any reader can see the pointer.
//! - **Writers** hold the writer mutex (parking_lot: spins briefly, then
//!   parks), clone the configuration, apply their operations, build the next
//!   generation, swap it in, and hand the old one to the epoch. Nothing is
//!   ever modified in place, so a reader never sees half a change.
//! - **Readers never free anything.** A pin may run crossbeam's
//!   `collect()`, on any thread, a datapath worker's included; the
//!   deferred function it runs for a retired generation only pushes it onto
//!   the registry's graveyard (`state::Graveyard`: a lock-free stack, no
//!   allocation, nothing dropped). Dropping a generation may drop the last
//!   reference to a filter (a 10 000-rule ACL's tables, a filter's own
//!   `Drop`), so only the control plane drains the graveyard: every writer
//!   after its change, and a [`Retirement`](crate::Retirement) that is
//!   waited for or asked [`is_complete`](crate::Retirement::is_complete),
//!   and [`Registry::reclaim`](crate::Registry::reclaim), which a
//!   dataplane's housekeeping calls (pfild: every second); never on a
//!   pinned thread. The drain moves what is buried under a control-plane
//!   mutex and drops one generation at a time outside it, so a filter's
//!   `Drop` that waits for a retirement finds the generation it waits for.
//!   One exception, at teardown: the generations whose deferred functions
//!   run after the registry is gone are dropped by the thread that runs
//!   the last of them.
//! - **No pin, flush or drop of a filter under a lock.** A filter's `Drop`
//!   may call the registry. Writers pin *before* taking the writer lock,
//!   flush after releasing it, drop the old configuration after releasing
//!   it and drain the graveyard after unpinning; the quarantine lock is
//!   only ever held for a push or a take (`tests/drop_reentry.rs` makes
//!   crossbeam collect at exactly a writer's pin).
//! - **Links** are `Arc`s shared by consecutive generations, so their
//!   counters survive republishing; the filter object behind a hook is an
//!   `Arc` too, held by the writer's state while the hook is registered and
//!   by every generation that links it; after `remove_hook` it is dropped
//!   when the last generation that held it is drained from the graveyard.
//! - **Counters** have a single writer per slot (the `&mut Worker` of the
//!   run), so a relaxed load and store replace a read-modify-write. Each
//!   batch's flush is bracketed by a per-slot sequence count (a seqlock of
//!   one writer): readers retry a slot caught mid-flush, so a sum keeps
//!   `packets == passed + dropped + consumed` (callgrind: +0.1 instruction
//!   a frame for one link, +0.3 for four, on the synthetic port).
//! - **`is_hooked`** is a relaxed hint: it may lag a publish by a moment, in
//!   which case a batch skips (or runs) a chain that just changed — the same
//!   as if the batch had arrived a moment earlier (or later).
//!
//! The loom tests (`crates/pfil/tests/loom.rs`) check the invariant's
//! consequences under every interleaving loom explores: no hook runs after
//! its object was dropped, no link runs after its ticket completed, every
//! ticket completes once no reader is left, and a quarantined link is reaped
//! exactly once with exact final counters while two readers race a writer.
//! Under `--cfg pfil_loom` every lock and atomic of the registry is loom's
//! (they all come from one module, `sync`), so loom checks the registry's
//! own synchronization, not only the epoch's.
