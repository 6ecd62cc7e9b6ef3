//! Counters of a worker loop.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one worker, updated once per batch, readable live.
///
/// Outbox counters (`held_evicted`, `released`, `reinjected`, `stale`,
/// `refused`) land in the loop's [`crate::LoopWorker::stats`]: the a→b
/// stats of a forwarder, whichever direction consumed the frame. A batch
/// is counted also when TX fails in it (the loop returns the error
/// after).
///
/// Aligned to 128 bytes (two cache lines: x86's adjacent-line prefetcher
/// pairs them), so the counters of two workers never share a line even
/// when their `Arc`s are allocated back to back: a worker writes its own
/// lines only.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Stats {
    /// Frames read from RX rings.
    pub rx: AtomicU64,
    /// Frames built by a generator.
    pub generated: AtomicU64,
    /// Frames dropped by the in head.
    pub in_dropped: AtomicU64,
    /// Frames consumed by the in head.
    pub in_consumed: AtomicU64,
    /// Frames dropped by the out head.
    pub out_dropped: AtomicU64,
    /// Frames consumed by the out head.
    pub out_consumed: AtomicU64,
    /// Frames that passed every head: delivered (sink), or handed to TX
    /// (forward, gen: `passed == tx + tx_dropped`).
    pub passed: AtomicU64,
    /// Frames put on a TX ring.
    pub tx: AtomicU64,
    /// Frames that passed but could not be queued for TX (ring full after
    /// bounded retries, or a TX error) and were recycled.
    pub tx_dropped: AtomicU64,
    /// Batches processed.
    pub batches: AtomicU64,
    /// Consumed frames given back to the pool because more than
    /// `LoopConfig::held_limit` were held (their cookies went stale).
    pub held_evicted: AtomicU64,
    /// Consumed frames a hook released through the outbox.
    pub released: AtomicU64,
    /// Consumed frames a hook had sent through the outbox (queued for TX;
    /// not counted in `tx`).
    pub reinjected: AtomicU64,
    /// Outbox requests for a cookie that was not held (nothing changed).
    pub stale: AtomicU64,
    /// Outbox transmits that did not go out: to an interface the worker
    /// has no port on, or not queued (TX ring full after bounded retries,
    /// or a TX error). The frame was released. Also passing frames a hook
    /// moved or resized that the port cannot send as they are now
    /// ([`crate::Port::set_span`]): dropped rather than sent as they were.
    pub refused: AtomicU64,
}

/// A plain copy of [`Stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// See [`Stats::rx`].
    pub rx: u64,
    /// See [`Stats::generated`].
    pub generated: u64,
    /// See [`Stats::in_dropped`].
    pub in_dropped: u64,
    /// See [`Stats::in_consumed`].
    pub in_consumed: u64,
    /// See [`Stats::out_dropped`].
    pub out_dropped: u64,
    /// See [`Stats::out_consumed`].
    pub out_consumed: u64,
    /// See [`Stats::passed`].
    pub passed: u64,
    /// See [`Stats::tx`].
    pub tx: u64,
    /// See [`Stats::tx_dropped`].
    pub tx_dropped: u64,
    /// See [`Stats::batches`].
    pub batches: u64,
    /// See [`Stats::held_evicted`].
    pub held_evicted: u64,
    /// See [`Stats::released`].
    pub released: u64,
    /// See [`Stats::reinjected`].
    pub reinjected: u64,
    /// See [`Stats::stale`].
    pub stale: u64,
    /// See [`Stats::refused`].
    pub refused: u64,
}

impl StatsSnapshot {
    /// Frames a filter dropped or consumed, in and out.
    pub fn filtered(&self) -> u64 {
        self.in_dropped + self.in_consumed + self.out_dropped + self.out_consumed
    }
}

impl std::ops::Add for StatsSnapshot {
    type Output = StatsSnapshot;
    fn add(self, o: StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            rx: self.rx + o.rx,
            generated: self.generated + o.generated,
            in_dropped: self.in_dropped + o.in_dropped,
            in_consumed: self.in_consumed + o.in_consumed,
            out_dropped: self.out_dropped + o.out_dropped,
            out_consumed: self.out_consumed + o.out_consumed,
            passed: self.passed + o.passed,
            tx: self.tx + o.tx,
            tx_dropped: self.tx_dropped + o.tx_dropped,
            batches: self.batches + o.batches,
            held_evicted: self.held_evicted + o.held_evicted,
            released: self.released + o.released,
            reinjected: self.reinjected + o.reinjected,
            stale: self.stale + o.stale,
            refused: self.refused + o.refused,
        }
    }
}

impl Stats {
    /// Read every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            rx: l(&self.rx),
            generated: l(&self.generated),
            in_dropped: l(&self.in_dropped),
            in_consumed: l(&self.in_consumed),
            out_dropped: l(&self.out_dropped),
            out_consumed: l(&self.out_consumed),
            passed: l(&self.passed),
            tx: l(&self.tx),
            tx_dropped: l(&self.tx_dropped),
            batches: l(&self.batches),
            held_evicted: l(&self.held_evicted),
            released: l(&self.released),
            reinjected: l(&self.reinjected),
            stale: l(&self.stale),
            refused: l(&self.refused),
        }
    }

    #[inline]
    pub(crate) fn add(a: &AtomicU64, n: u64) {
        if n != 0 {
            // Single writer (the worker); a relaxed RMW once per batch on
            // the worker's own counters.
            a.fetch_add(n, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Stats;
    use std::sync::Arc;

    /// Two workers' counters, allocated one after the other as the
    /// spawners do, share no 128-byte line.
    #[test]
    fn workers_counters_share_no_line() {
        assert_eq!(std::mem::align_of::<Stats>(), 128);
        let all: Vec<Arc<Stats>> = (0..8).map(|_| Arc::new(Stats::default())).collect();
        let lines = |s: &Arc<Stats>| {
            let a = Arc::as_ptr(s) as usize;
            (a / 128, (a + std::mem::size_of::<Stats>() - 1) / 128)
        };
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                let (a0, a1) = lines(a);
                let (b0, b1) = lines(b);
                assert!(a1 < b0 || b1 < a0, "lines {a0}..={a1} and {b0}..={b1}");
            }
        }
    }
}
