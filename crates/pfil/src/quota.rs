//! A count shared by the workers of a session: how many more packets a
//! trace records, or a capture copies.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// At most `count` grants over all threads (0: no limit), taken in
/// batches without a lock. Costs its users a compare-and-swap per take,
/// so take once per batch, or only for the packets that need it.
#[derive(Debug)]
pub struct Quota {
    /// What is left; `u64::MAX`: no limit.
    left: AtomicU64,
}

impl Quota {
    /// A quota of `count` (0: no limit).
    pub fn new(count: u64) -> Quota {
        Quota {
            left: AtomicU64::new(if count == 0 { u64::MAX } else { count }),
        }
    }

    /// Take up to `n`; returns how many were granted (all of `n` without
    /// a limit).
    pub fn take(&self, n: u64) -> u64 {
        let mut cur = self.left.load(Relaxed);
        loop {
            if cur == u64::MAX {
                return n;
            }
            let k = cur.min(n);
            if k == 0 {
                return 0;
            }
            match self
                .left
                .compare_exchange_weak(cur, cur - k, Relaxed, Relaxed)
            {
                Ok(_) => return k,
                Err(v) => cur = v,
            }
        }
    }

    /// Has everything been granted?
    pub fn done(&self) -> bool {
        self.left.load(Relaxed) == 0
    }

    /// What is left (`u64::MAX`: no limit).
    pub fn left(&self) -> u64 {
        self.left.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::Quota;

    #[test]
    fn grants_at_most_the_count_over_threads() {
        let q = Quota::new(1000);
        let got: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..500).map(|_| q.take(3)).sum::<u64>()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(got, 1000);
        assert!(q.done());
        assert_eq!(q.take(5), 0);
        let free = Quota::new(0);
        assert_eq!(free.take(7), 7);
        assert!(!free.done());
    }
}
