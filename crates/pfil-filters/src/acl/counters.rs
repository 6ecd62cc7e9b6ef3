//! Per-rule hit counters: per-worker rows in segments of a slab, leased
//! to the rules of a version and freed when no version holds them.

use super::*;

/// `SEG` counters of one worker, on cache lines of its own, so workers
/// never write a shared line.
pub(super) type Row = CachePadded<[AtomicU64; SEG]>;

/// One row per worker. A slice behind the `Arc` itself: a version's
/// table of segments holds the rows' address, one load from a counter.
pub(super) type Segment = Arc<[Row]>;

#[inline]
pub(super) fn bump(seg: &[Row], worker: usize, off: usize) {
    if let Some(row) = seg.get(worker) {
        let a = &row[off];
        // One writer per row (a worker runs one batch at a time, on
        // whichever version of whichever filter sharing the slab): a load
        // and a store, no read-modify-write.
        a.store(a.load(Relaxed) + 1, Relaxed);
    }
}

pub(super) fn total(seg: &[Row], off: usize) -> u64 {
    seg.iter().map(|r| r[off].load(Relaxed)).sum()
}

/// The counter storage of one filter, shared by all its versions and by
/// the filters made from it with [`Acl::with_rules`]: a counter is an id
/// into segments that never move; an unchanged rule keeps its id across
/// [`Acl::replace`] and into [`Acl::with_rules`], so batches still running
/// on the old version (or old filter) and those on the new one bump the
/// same counter: no hit is lost or counted twice. Ids of rules that went
/// are reused once no version that counted into them is left (their
/// [`Lease`] dropped), zeroed first.
pub(super) struct Slab {
    pub(super) workers: usize,
    pub(super) inner: std::sync::Mutex<SlabInner>,
}

#[derive(Default)]
pub(super) struct SlabInner {
    pub(super) segments: Vec<Segment>,
    pub(super) free: Vec<u32>,
}

/// An allocated counter id; freed when the last version holding it goes.
pub(super) struct Lease {
    pub(super) slab: Arc<Slab>,
    pub(super) id: u32,
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Runs where the last version using it is dropped, possibly a
        // datapath thread finishing a batch on a replaced version: a
        // push under a lock only writers of the control path share.
        let mut s = self.slab.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.free.push(self.id);
    }
}

impl Slab {
    pub(super) fn new(workers: usize) -> Arc<Slab> {
        Arc::new(Slab {
            workers: workers.max(1),
            inner: Default::default(),
        })
    }

    /// A zeroed counter.
    pub(super) fn lease(self: &Arc<Slab>) -> Arc<Lease> {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let id = match s.free.pop() {
            Some(id) => {
                // No live version uses it (its lease is gone): no worker
                // writes it, and a version that will is published after
                // this store (the ArcSwap store orders it).
                let seg = &s.segments[id as usize / SEG];
                for r in seg.iter() {
                    r[id as usize % SEG].store(0, Relaxed);
                }
                id
            }
            None => {
                let base = (s.segments.len() * SEG) as u32;
                s.segments.push(
                    (0..self.workers)
                        .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                        .collect(),
                );
                // Hand out the lowest first.
                s.free.extend((base + 1..base + SEG as u32).rev());
                base
            }
        };
        Arc::new(Lease {
            slab: self.clone(),
            id,
        })
    }

    pub(super) fn segments(&self) -> Box<[Segment]> {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.segments.iter().cloned().collect()
    }
}
