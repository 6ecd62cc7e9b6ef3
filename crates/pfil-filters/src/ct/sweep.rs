//! The round-robin sweep for expired flows, at pf's pace below the
//! adaptive start ([`Table::sweep_next`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::*;

/// The round-robin sweep's state (racy between workers: two may sweep
/// one shard, or both take a second's budget, no harm).
pub(super) struct Sweep {
    /// The shard swept next.
    pub(super) at: AtomicUsize,
    /// The second the budget is for (high 32 bits) and the entries left
    /// to sweep in it (low 32 bits), below the adaptive start.
    pub(super) pace: AtomicU64,
}

/// Below the adaptive start, the sweep covers the whole table once in
/// this many seconds (pf's purge `interval`, 10 s, passes over its
/// table at that rate): a batch's sweep is then nearly free where it
/// would otherwise stream [`table::SWEEP`] entries a packet through the
/// caches (at a million flows: 37 ns a frame of 167).
pub const SWEEP_PASS_SECONDS: usize = 10;
/// The least a second's sweep covers below the adaptive start.
pub const SWEEP_MIN_PER_SECOND: usize = 1024;

impl Table {
    /// Sweep up to `n` entries of the next shard (round robin) for
    /// expired ones: what a batch of `n / SWEEP` packets does once
    /// ([`track_hashed`](Self::track_hashed) sweeps nothing), a lock
    /// taken once and the entries read in order rather than a few at each
    /// packet's lock. From the adaptive start (60 % of `run.max`: the
    /// table fills, timeouts shrink, room matters) all `n`; below it, at
    /// pf's pace: the table's entries over [`SWEEP_PASS_SECONDS`] a
    /// second (at least [`SWEEP_MIN_PER_SECOND`]), shared by the workers,
    /// and nothing (no lock) once a second's budget is spent. An expired
    /// entry not yet swept is still expired to a lookup, which removes
    /// it; it only counts in `entries` meanwhile.
    pub fn sweep_next(&self, n: usize, run: Run) {
        let _hold = self.bias.hold();
        self.sweep_in(n, run);
    }

    /// [`sweep_next`](Self::sweep_next) in a batch of the table
    /// ([`Bias::enter`](super::bias::Bias::enter) taken).
    pub(crate) fn sweep_in(&self, n: usize, run: Run) {
        let len = self.len();
        let n = if len > run.max / 10 * 6 {
            n
        } else {
            self.paced(n, len, run.now)
        };
        if n == 0 {
            return;
        }
        let i = self.sweep.at.load(Relaxed);
        self.sweep.at.store(i.wrapping_add(1), Relaxed);
        let mut g = lock(&self.shards[i % self.shards.len()]);
        let ad = Adaptive::at(len, run.max);
        let cut = idle_limits(ad);
        let gone = g.sweep(n, |to, last| {
            u64::from(run.now.saturating_sub(last)) > cut[usize::from(to) & 15]
        });
        if gone > 0 {
            self.entries.fetch_sub(gone, Relaxed);
        }
    }

    /// Of `n` entries, how many a sweep at second `now` takes from the
    /// second's budget (`len` entries in the table).
    #[inline]
    fn paced(&self, n: usize, len: usize, now: u32) -> usize {
        let p = self.sweep.pace.load(Relaxed);
        let (sec, left) = ((p >> 32) as u32, p as u32 as usize);
        let left = if now > sec {
            (len / SWEEP_PASS_SECONDS).clamp(SWEEP_MIN_PER_SECOND, u32::MAX as usize)
        } else if left == 0 {
            return 0;
        } else {
            left
        };
        let take = n.min(left);
        let sec = sec.max(now);
        self.sweep
            .pace
            .store(u64::from(sec) << 32 | (left - take) as u64, Relaxed);
        take
    }
}
