//! # Performance
//!
//! **Guarantees.** Per batch: one epoch pin (a store and a fence on the
//! calling thread's own record), one pointer load, and per link one counter
//! flush into the calling worker's own cache line. Per packet: a verdict
//! check (on the first link also a kind check, against a constant), one
//! indirect call per link that is shown the packet, a verdict store and a
//! few register additions. No lock, no allocation, no
//! read-modify-write on a line another core writes, no `Result`. Writers pay
//! a copy of the configuration and a swap per change.
//!
//! **Numbers** (BENCHMARKS.md has the commands and the full tables; 2-vCPU
//! Xeon KVM guest, Linux 6.18, Rust 1.95; ratios against the limit measured
//! in the same run):
//! - one null hook, batch 64: at the limit of a hand loop with no
//!   synchronization (0.87–0.93× measured; 3.4 instructions per packet more,
//!   counted with callgrind);
//! - a writer republishing 1000 times a second: +1.6 % (1 thread), +4.4 %
//!   (2 threads), of which the writer thread itself costs about 1 %;
//! - the same chain behind `std::sync::RwLock` taken per packet: 101× slower
//!   at 2 threads (the lock's cache line bounces on every packet);
//! - batch 1: the pin (6.7 ns) is paid per packet, 2.5–3.5× the hand loop.
