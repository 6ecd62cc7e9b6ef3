//! `ratelimit`: token buckets, per hook or per key; frames over the
//! limit are dropped.
//!
//! Config: `RATE [burst N] [per src|dst|flow] [table N]`
//! - RATE: frames per second, `1000`, `10k`, `2.5M`, optionally with
//!   `pps` (`10kpps`).
//! - `burst N`: frames that may pass at once after a quiet time (default
//!   64, one batch).
//! - `per src|dst|flow`: one bucket per source address, destination
//!   address or 5-tuple (IPv4 or IPv6; frames without an IP header share
//!   one bucket). Without it, one bucket for the hook.
//! - `table N`: buckets kept per worker in `per` mode (default 4096,
//!   rounded up to a power of two, at least 4). A worker's table
//!   (`N × 16 B`) is allocated on its first frame, not when the hook is
//!   added; `N × 16 B ×` the registry's worker slots may be at most
//!   [`TABLE_BYTES_CAP`] (256 MiB: `table 262144` with pfild's 64 slots).
//!
//! Caps ([`RateConfig::parse`], [`RateLimit::try_new`], the catalog): RATE
//! from [`MIN_RATE`] (one frame in 1000 s) to [`MAX_RATE`]; a full burst
//! refills in at most [`MAX_BURST_SECONDS`] (`burst / RATE`, 365 days);
//! a config over one gets an error naming the cap. The buckets'
//! arithmetic saturates whatever the config.
//!
//! The buckets are GCRA (the "virtual scheduling" form of a token
//! bucket, as the `governor` crate implements it): a bucket is one
//! number, the theoretical arrival time of the next frame. The hook's
//! bucket is shared by all workers and taken from **once per batch** (one
//! compare-and-swap admits as many frames of the batch as it can), so the
//! rate is exact across workers without a lock per frame. Keyed buckets
//! live in a table per worker (each worker's table behind an uncontended
//! lock taken once per batch): with RSS a flow stays on one queue, so
//! `per flow` is exact; `per src` and `per dst` limit each source or
//! destination per queue. `governor` itself was not used: its keyed
//! limiter takes a shard lock per frame, and its direct limiter a CAS per
//! frame, where one per batch does.
//!
//! The table is 4-way set associative: a key lives in one of the 4 slots
//! its hash picks; a new key takes a free slot, else evicts the slot whose
//! bucket has been idle longest (its theoretical arrival time is the
//! oldest: forgetting a full bucket loses nothing, forgetting an active
//! one gives that key a fresh burst). Evictions are counted
//! ([`RateLimit::evictions`]), and so are the slots in use
//! ([`RateLimit::occupancy`]); both are the filter's stats
//! ([`Filter::stats`]: `evictions`, `table_used`, `table_slots`,
//! `table_bytes`), which `pfilctl rules HOOK`, the OpenMetrics export and
//! pfild's final report show. They are per-worker atomics: reading them
//! takes no lock the workers take.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use pfil::{Ctx, Filter, FilterStat, Packet, Verdict};

mod config;

pub use config::{
    Per, RateConfig, MAX_BURST_SECONDS, MAX_RATE, MAX_TABLE, MIN_RATE, SLOT_BYTES, TABLE_BYTES_CAP,
};

/// Ways of the per-worker table.
const WAYS: usize = 4;

#[derive(Clone, Copy, Default)]
struct Slot {
    /// Key hash; 0: free.
    tag: u64,
    /// Theoretical arrival time of the next frame, ns since the filter's
    /// epoch.
    tat: u64,
}

/// A worker's table: its slots, allocated on the worker's first frame,
/// and its counts, kept apart so that reading them (`filter_stats`, a
/// metrics scrape) never takes the lock the worker takes per batch.
struct Table {
    slots: OnceLock<Mutex<Box<[Slot]>>>,
    /// Keys evicted for a new key (written under the lock by the one
    /// worker, read by anyone).
    evictions: AtomicU64,
    /// Slots holding a key (keys are never removed, only replaced).
    used: AtomicU64,
}

/// The `ratelimit` filter.
pub struct RateLimit {
    cfg: RateConfig,
    /// ns between frames at the rate (at least 1).
    interval: u64,
    /// `burst * interval`: how far ahead of now the bucket may run.
    tolerance: u64,
    epoch: Instant,
    shared: CachePadded<AtomicU64>,
    tables: Box<[CachePadded<Table>]>,
    hasher: std::hash::RandomState,
}

impl RateLimit {
    /// A limiter for a registry with `max_workers` worker slots.
    ///
    /// Any config is safe here: the rate and burst are taken as they are
    /// (the arithmetic saturates), `table` is rounded up to a power of two
    /// from 4 to [`MAX_TABLE`]. It does not check the memory cap
    /// ([`TABLE_BYTES_CAP`]): [`RateLimit::try_new`] does, as the catalog
    /// does. Nothing is allocated for the tables here: each worker's table
    /// (`table × 16 B`) is allocated on that worker's first frame.
    pub fn new(mut cfg: RateConfig, max_workers: usize) -> RateLimit {
        cfg.table = cfg.table.clamp(WAYS, MAX_TABLE).next_power_of_two();
        // 1e9 / rate: NaN, negative or below 1 ns all make 1; infinite
        // (rate 0) makes u64::MAX (`as` saturates).
        let interval = (1e9 / cfg.rate).round().max(1.0) as u64;
        let tables = (0..if cfg.per == Per::Hook { 0 } else { max_workers })
            .map(|_| {
                CachePadded::new(Table {
                    slots: OnceLock::new(),
                    evictions: AtomicU64::new(0),
                    used: AtomicU64::new(0),
                })
            })
            .collect();
        RateLimit {
            interval,
            tolerance: interval.saturating_mul(u64::from(cfg.burst)),
            cfg,
            epoch: Instant::now(),
            shared: CachePadded::new(AtomicU64::new(0)),
            tables,
            hasher: std::hash::RandomState::new(),
        }
    }

    /// A limiter for a registry with `max_workers` worker slots, its config
    /// held to the caps: RATE from [`MIN_RATE`] to [`MAX_RATE`],
    /// `burst / RATE` up to [`MAX_BURST_SECONDS`], and with `per` the
    /// tables of all worker slots within [`TABLE_BYTES_CAP`].
    ///
    /// # Errors
    /// Which value is over which cap.
    pub fn try_new(cfg: RateConfig, max_workers: usize) -> Result<RateLimit, String> {
        cfg.check_burst()?;
        if cfg.table == 0 || cfg.table > MAX_TABLE {
            return Err(format!(
                "table: 1 to {MAX_TABLE} buckets, not {}",
                cfg.table
            ));
        }
        let r = RateLimit::new(cfg, max_workers);
        r.cfg.check_memory(max_workers)?;
        Ok(r)
    }

    /// The config.
    pub fn config(&self) -> &RateConfig {
        &self.cfg
    }

    /// Buckets evicted from the per-worker tables so far.
    pub fn evictions(&self) -> u64 {
        self.tables
            .iter()
            .map(|t| t.evictions.load(Ordering::Relaxed))
            .sum()
    }

    /// Buckets in use and slots, summed over the per-worker tables
    /// allocated so far (a table is allocated on its worker's first
    /// frame; 0 and 0 without `per`).
    pub fn occupancy(&self) -> (u64, u64) {
        let used = self
            .tables
            .iter()
            .map(|t| t.used.load(Ordering::Relaxed))
            .sum();
        (used, self.slots())
    }

    /// Slots of the tables allocated so far.
    fn slots(&self) -> u64 {
        let n = self
            .tables
            .iter()
            .filter(|t| t.slots.get().is_some())
            .count();
        (n * self.cfg.table) as u64
    }

    /// Bytes of the per-worker tables allocated so far.
    pub fn table_bytes(&self) -> u64 {
        self.slots() * SLOT_BYTES as u64
    }

    /// How many of `n` frames arriving at `now` a bucket at `tat` admits,
    /// and its next `tat`. Never overflows: `now + tolerance` saturates,
    /// and `k * interval` is at most what that leaves above `t`.
    #[inline]
    fn admit(&self, tat: u64, now: u64, n: u64) -> (u64, u64) {
        let t = tat.max(now);
        let room = now.saturating_add(self.tolerance).saturating_sub(t) / self.interval;
        let k = room.min(n);
        (k, t + k * self.interval)
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn key(&self, p: &Packet<'_>) -> u64 {
        let mut h = self.hasher.build_hasher();
        // The 5-tuple the packet keeps (IPv4) or reads in place (IPv6):
        // no header structs built per packet. SipHash stays: keys are the
        // sender's to choose, and a weak hash would let them evict chosen
        // buckets.
        if let Some(t) = p.five_tuple_v4() {
            match self.cfg.per {
                Per::Src => t.src.hash(&mut h),
                Per::Dst => t.dst.hash(&mut h),
                _ => t.hash(&mut h),
            }
        } else if let Some(t) = p.parsed().and_then(|v| v.five_tuple_v6()) {
            match self.cfg.per {
                Per::Src => t.src.hash(&mut h),
                Per::Dst => t.dst.hash(&mut h),
                _ => t.hash(&mut h),
            }
        }
        // 0 marks a free slot.
        h.finish() | 1
    }
}

impl fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("cfg", &self.cfg)
            .field("evictions", &self.evictions())
            .finish()
    }
}

impl Filter for RateLimit {
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        self.filter_batch(std::slice::from_mut(pkt), ctx);
        pkt.verdict()
    }

    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        let now = self.now();
        if self.cfg.per == Per::Hook {
            let n = pkts.iter().filter(|p| p.verdict().is_pass()).count() as u64;
            let mut cur = self.shared.load(Ordering::Relaxed);
            let admitted = loop {
                let (k, next) = self.admit(cur, now, n);
                if k == 0 {
                    break 0;
                }
                match self.shared.compare_exchange_weak(
                    cur,
                    next,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break k,
                    Err(v) => cur = v,
                }
            };
            for p in pkts
                .iter_mut()
                .filter(|p| p.verdict().is_pass())
                .skip(admitted as usize)
            {
                p.set_verdict(Verdict::Dropped);
            }
            return;
        }
        let Some(table) = self.tables.get(ctx.worker) else {
            // A worker slot beyond the registry's: cannot happen with the
            // registry this filter was built for; the batch passes
            // unlimited rather than take another worker's table.
            return;
        };
        let slots = table
            .slots
            .get_or_init(|| Mutex::new(vec![Slot::default(); self.cfg.table].into_boxed_slice()));
        let Ok(mut t) = slots.lock() else {
            return;
        };
        let mask = t.len() / WAYS - 1;
        let (mut evicted, mut taken) = (0u64, 0u64);
        for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
            let key = self.key(p);
            let set = (key as usize & mask) * WAYS;
            let ways = &mut t[set..set + WAYS];
            let i = match ways.iter().position(|s| s.tag == key) {
                Some(i) => i,
                None => {
                    let (i, s) = ways
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, s)| (s.tag != 0, s.tat))
                        .expect("WAYS > 0");
                    let evict = s.tag != 0;
                    ways[i] = Slot { tag: key, tat: 0 };
                    evicted += u64::from(evict);
                    taken += u64::from(!evict);
                    i
                }
            };
            let (k, next) = self.admit(ways[i].tat, now, 1);
            if k == 1 {
                ways[i].tat = next;
            } else {
                p.set_verdict(Verdict::Dropped);
            }
        }
        if evicted | taken != 0 {
            // This worker is the only writer (it holds the lock): a load
            // and a store, no read-modify-write.
            let add =
                |a: &AtomicU64, v: u64| a.store(a.load(Ordering::Relaxed) + v, Ordering::Relaxed);
            add(&table.evictions, evicted);
            add(&table.used, taken);
        }
    }

    fn batched(&self) -> bool {
        true
    }

    /// `evictions` (counter, [`RateLimit::evictions`]; 0 without `per`);
    /// with `per`, `table_used`, `table_slots` (gauges,
    /// [`RateLimit::occupancy`]) and `table_bytes` (gauge,
    /// [`RateLimit::table_bytes`]). No lock is taken: a scrape does not
    /// contend with the workers.
    fn stats(&self) -> Vec<FilterStat> {
        let (used, slots) = self.occupancy();
        let mut s = vec![FilterStat::counter(
            "evictions",
            "Keyed buckets evicted from the per-worker tables to make room for a new key.",
            self.evictions(),
        )];
        if self.cfg.per != Per::Hook {
            s.push(FilterStat::gauge(
                "table_used",
                "Keyed buckets in use, over the per-worker tables.",
                used,
            ));
            s.push(FilterStat::gauge(
                "table_slots",
                "Bucket slots of the per-worker tables allocated so far (one per worker that ran).",
                slots,
            ));
            s.push(FilterStat::gauge(
                "table_bytes",
                "Bytes of the per-worker tables allocated so far.",
                self.table_bytes(),
            ));
        }
        s
    }

    fn spec(&self) -> Option<String> {
        let c = &self.cfg;
        let mut s = format!("ratelimit:{} burst {}", c.rate, c.burst);
        match c.per {
            Per::Hook => {}
            Per::Src => s += " per src",
            Per::Dst => s += " per dst",
            Per::Flow => s += " per flow",
        }
        if c.per != Per::Hook {
            s += &format!(" table {}", c.table);
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests;
