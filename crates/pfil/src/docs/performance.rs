//! # Performance
//!
//! **Guarantees.** Per batch: one epoch pin (a store and a fence on the
//! calling thread's own record), one pointer load, and per link one counter
//! flush into the calling worker's own cache line. Per packet: a verdict
//! check, one indirect call per link that is shown the packet, a verdict
//! store and a few register additions. No lock, no allocation, no
//! read-modify-write on a line another core writes, no `Result`. Writers pay
//! a copy of the configuration and a swap per change.
//!
//! **Numbers** (BENCHMARKS.md has the commands and the full tables; 2-vCPU
//! Xeon KVM guest, Linux 6.18, Rust 1.95; ratios against the limit measured
//! in the same run):
//! - one null hook, batch 64: 1.04× (1 thread) and 1.05× (2 threads) a hand
//!   loop with no synchronization; 4 instructions per packet more
//!   (callgrind);
//! - a writer republishing 1000 times a second: +3.4 % at 2 threads;
//! - the same chain behind `std::sync::RwLock` taken per packet: 90× slower at
//!   2 threads (the cache line bounces on every packet);
//! - batch 1: the pin is paid per packet, 2.5–3.5× the hand loop.
