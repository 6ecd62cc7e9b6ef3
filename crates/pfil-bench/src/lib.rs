//! Benchmark fixtures for pfil, shared by the `pfil-bench` command (the
//! lock study, ministat) and the criterion benchmarks in `benches/`.
//!
//! - [`strategy`]: chain-publishing strategies (the pfil registry and the
//!   baselines it is measured against) running the same hooks over the
//!   same batches.
//! - [`lockstudy`]: the hooks of the lock study (mutex, rwlock, brlock,
//!   epoch), which block or pin per packet on purpose, and
//!   [`lockstudy::register`] to add them to a filter
//!   [`Catalog`](pfil_filters::Catalog) (pfild does, for `--hook mutex`).
//!
//! The library needs none of the command's dependencies: depend on it
//! with `default-features = false` (the `cli` feature builds the
//! `pfil-bench` binary).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod lockstudy;
pub mod strategy;

pub use lockstudy::{BrLockHook, EpochHook, MutexHook, RwLockHook};
pub use strategy::{SharedFilter, Strategy, Subject};
