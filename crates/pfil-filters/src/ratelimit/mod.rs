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
//!   rounded up to a power of two, at least 4).
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
//! ([`Filter::stats`]: `evictions`, `table_used`, `table_slots`), which
//! `pfilctl rules HOOK`, the OpenMetrics export and pfild's final report
//! show.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crossbeam_utils::CachePadded;
use pfil::{Ctx, Filter, FilterStat, Packet, Verdict};

/// What the buckets are kept per.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Per {
    /// One bucket for the hook.
    Hook,
    /// One per source address.
    Src,
    /// One per destination address.
    Dst,
    /// One per 5-tuple (addresses, protocol, ports).
    Flow,
}

/// A parsed `ratelimit` config.
#[derive(Clone, Debug, PartialEq)]
pub struct RateConfig {
    /// Frames per second.
    pub rate: f64,
    /// Frames that may pass at once.
    pub burst: u32,
    /// Buckets per hook or per key.
    pub per: Per,
    /// Slots per worker table (`per` modes).
    pub table: usize,
}

impl RateConfig {
    /// Parse `RATE [burst N] [per src|dst|flow] [table N]`.
    ///
    /// # Errors
    /// What was expected where.
    pub fn parse(text: &str) -> Result<RateConfig, String> {
        let mut words = text.split_whitespace();
        let rate = words.next().ok_or("RATE in frames per second (e.g. 10k)")?;
        let rate = parse_rate(rate)?;
        let mut c = RateConfig {
            rate,
            burst: 64,
            per: Per::Hook,
            table: 4096,
        };
        while let Some(w) = words.next() {
            let mut arg = |what: &str| {
                words
                    .next()
                    .ok_or_else(|| format!("a value after `{w}` ({what})"))
            };
            match w {
                "burst" => {
                    let v = arg("frames, 1 or more")?;
                    c.burst = v
                        .parse()
                        .ok()
                        .filter(|b| *b >= 1)
                        .ok_or_else(|| format!("burst: frames, 1 or more, not {v:?}"))?;
                }
                "per" => {
                    c.per = match arg("src, dst or flow")? {
                        "src" => Per::Src,
                        "dst" => Per::Dst,
                        "flow" => Per::Flow,
                        v => return Err(format!("per: src, dst or flow, not {v:?}")),
                    }
                }
                "table" => {
                    let v = arg("buckets per worker")?;
                    let n: usize = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=1 << 24).contains(n))
                        .ok_or_else(|| format!("table: 1 to 16777216 buckets, not {v:?}"))?;
                    c.table = n.next_power_of_two().max(WAYS);
                }
                _ => {
                    return Err(format!(
                        "`burst N`, `per src|dst|flow` or `table N`, not {w:?}"
                    ))
                }
            }
        }
        Ok(c)
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.strip_suffix("pps").unwrap_or(s);
    let (num, mult) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 1e3),
        Some(b'M') => (&t[..t.len() - 1], 1e6),
        Some(b'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .map(|v| v * mult)
        .filter(|r| r.is_finite() && *r > 0.0 && *r <= 1e9)
        .ok_or_else(|| {
            format!(
                "RATE: frames per second above 0 and up to 1G (e.g. 1000, 10k, 2.5Mpps), not {s:?}"
            )
        })
}

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

struct Table {
    slots: Box<[Slot]>,
    evictions: u64,
    /// Slots holding a key (keys are never removed, only replaced).
    used: usize,
}

/// The `ratelimit` filter.
pub struct RateLimit {
    cfg: RateConfig,
    /// ns between frames at the rate.
    interval: u64,
    /// `burst * interval`: how far ahead of now the bucket may run.
    tolerance: u64,
    epoch: Instant,
    shared: CachePadded<AtomicU64>,
    tables: Box<[CachePadded<Mutex<Table>>]>,
    hasher: std::hash::RandomState,
}

impl RateLimit {
    /// A limiter for a registry with `max_workers` worker slots.
    pub fn new(cfg: RateConfig, max_workers: usize) -> RateLimit {
        let interval = (1e9 / cfg.rate).round().max(1.0) as u64;
        let tables = (0..if cfg.per == Per::Hook { 0 } else { max_workers })
            .map(|_| {
                CachePadded::new(Mutex::new(Table {
                    slots: vec![Slot::default(); cfg.table].into_boxed_slice(),
                    evictions: 0,
                    used: 0,
                }))
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

    /// The config.
    pub fn config(&self) -> &RateConfig {
        &self.cfg
    }

    /// Buckets evicted from the per-worker tables so far.
    pub fn evictions(&self) -> u64 {
        self.table_counts().0
    }

    /// Buckets in use and slots, summed over the per-worker tables (0
    /// and 0 without `per`).
    pub fn occupancy(&self) -> (u64, u64) {
        let (_, used, slots) = self.table_counts();
        (used, slots)
    }

    /// Evictions, buckets in use and slots over the tables, each table
    /// locked once (briefly: its worker takes the lock once per batch).
    fn table_counts(&self) -> (u64, u64, u64) {
        self.tables
            .iter()
            .fold((0, 0, 0), |(e, u, n), t| match t.lock() {
                Ok(t) => (e + t.evictions, u + t.used as u64, n + t.slots.len() as u64),
                Err(_) => (e, u, n),
            })
    }

    /// How many of `n` frames arriving at `now` a bucket at `tat` admits,
    /// and its next `tat`.
    #[inline]
    fn admit(&self, tat: u64, now: u64, n: u64) -> (u64, u64) {
        let t = tat.max(now);
        let room = (now + self.tolerance).saturating_sub(t) / self.interval;
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
        let Ok(mut t) = table.lock() else {
            return;
        };
        let mask = t.slots.len() / WAYS - 1;
        for p in pkts.iter_mut().filter(|p| p.verdict().is_pass()) {
            let key = self.key(p);
            let set = (key as usize & mask) * WAYS;
            let ways = &mut t.slots[set..set + WAYS];
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
                    t.evictions += u64::from(evict);
                    t.used += usize::from(!evict);
                    i
                }
            };
            let ways = &mut t.slots[set..set + WAYS];
            let (k, next) = self.admit(ways[i].tat, now, 1);
            if k == 1 {
                ways[i].tat = next;
            } else {
                p.set_verdict(Verdict::Dropped);
            }
        }
    }

    fn batched(&self) -> bool {
        true
    }

    /// `evictions` (counter, [`RateLimit::evictions`]; 0 without `per`);
    /// with `per`, `table_used` and `table_slots` (gauges,
    /// [`RateLimit::occupancy`]).
    fn stats(&self) -> Vec<FilterStat> {
        let (evictions, used, slots) = self.table_counts();
        let mut s = vec![FilterStat::counter(
            "evictions",
            "Keyed buckets evicted from the per-worker tables to make room for a new key.",
            evictions,
        )];
        if self.cfg.per != Per::Hook {
            s.push(FilterStat::gauge(
                "table_used",
                "Keyed buckets in use, over the per-worker tables.",
                used,
            ));
            s.push(FilterStat::gauge(
                "table_slots",
                "Bucket slots of the per-worker tables.",
                slots,
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
mod tests {
    use super::*;

    #[test]
    fn configs_parse_and_say_what_was_expected() {
        let c = RateConfig::parse("10kpps burst 32 per flow table 1000").unwrap();
        assert_eq!(
            c,
            RateConfig {
                rate: 10_000.0,
                burst: 32,
                per: Per::Flow,
                table: 1024
            }
        );
        assert_eq!(RateConfig::parse("2.5M").unwrap().rate, 2.5e6);
        for (bad, want) in [
            ("", "RATE in frames per second"),
            ("fast", "RATE: frames per second"),
            ("0", "above 0"),
            ("10k burst", "a value after `burst`"),
            ("10k burst 0", "burst: frames, 1 or more"),
            ("10k per port", "per: src, dst or flow"),
            ("10k table 0", "table: 1 to"),
            ("10k jitter 3", "`burst N`, `per src|dst|flow` or `table N`"),
        ] {
            let e = RateConfig::parse(bad).unwrap_err();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn gcra_admits_the_burst_then_the_rate() {
        let r = RateLimit::new(RateConfig::parse("1000 burst 10").unwrap(), 1);
        // 1 ms per frame, 10 at once.
        assert_eq!(r.admit(0, 0, 64), (10, 10_000_000));
        // Half a millisecond later: nothing; one ms later: one.
        assert_eq!(r.admit(10_000_000, 500_000, 5).0, 0);
        assert_eq!(r.admit(10_000_000, 1_000_000, 5), (1, 11_000_000));
        // Idle for long: the bucket is full again, no more.
        assert_eq!(r.admit(11_000_000, 1_000_000_000, 64).0, 10);
    }

    use pfil::{Dir, Dirs, PacketKind, Placement, Registry};

    fn udp(src: [u8; 4], sport: u16) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4(src, [198, 18, 0, 2], 64)
            .udp(sport, 53);
        let mut v = Vec::new();
        b.write(&mut v, &[0; 18]).unwrap();
        v
    }

    /// A registry with head `h` and the limiter linked; runs `frames` as
    /// one batch on worker `w`; returns how many passed.
    struct Rig {
        reg: Registry,
        head: pfil::Head,
        limiter: std::sync::Arc<RateLimit>,
    }

    impl Rig {
        fn new(cfg: &str, workers: usize) -> Rig {
            let reg = Registry::with_max_workers(workers);
            let head = reg
                .register_head("h", PacketKind::Ethernet, Dirs::IN)
                .unwrap();
            let limiter =
                std::sync::Arc::new(RateLimit::new(RateConfig::parse(cfg).unwrap(), workers));
            reg.add_hook_shared(
                "ratelimit:t",
                PacketKind::Ethernet,
                Dirs::IN,
                limiter.clone(),
            )
            .unwrap();
            reg.link("h", Dir::In, "ratelimit:t", Placement::Prepend)
                .unwrap();
            Rig { reg, head, limiter }
        }

        fn run(&self, w: &mut pfil::Worker, frames: &[Vec<u8>]) -> usize {
            let mut bufs = frames.to_vec();
            let mut pkts: Vec<Packet<'_>> = bufs.iter_mut().map(|b| Packet::new(b)).collect();
            self.head.run(Dir::In, w, &mut pkts);
            pkts.iter().filter(|p| p.verdict().is_pass()).count()
        }
    }

    // A rate of one frame per 1000 s: within a test, only the burst passes.
    #[test]
    fn the_hook_bucket_is_exact_across_workers() {
        let rig = Rig::new("0.001 burst 100", 4);
        let frames: Vec<Vec<u8>> = (0..32).map(|i| udp([198, 18, 1, i], 1000)).collect();
        let passed: usize = std::thread::scope(|s| {
            let ts: Vec<_> = (0..4)
                .map(|_| {
                    let mut w = rig.reg.worker().unwrap();
                    let (rig, frames) = (&rig, &frames);
                    s.spawn(move || (0..10).map(|_| rig.run(&mut w, frames)).sum::<usize>())
                })
                .collect();
            ts.into_iter().map(|t| t.join().unwrap()).sum()
        });
        assert_eq!(
            passed, 100,
            "exactly the burst, over 4 workers x 320 frames"
        );
        let c = rig.reg.chain("h", Dir::In).unwrap()[0].counters;
        assert_eq!((c.packets, c.dropped), (1280, 1180));
    }

    #[test]
    fn keyed_buckets_limit_each_key_and_count_evictions() {
        let rig = Rig::new("0.001 burst 2 per src table 4", 2);
        let mut w = rig.reg.worker().unwrap();
        // Three sources, five frames each: two of each pass.
        let frames: Vec<Vec<u8>> = (0..15)
            .map(|i| udp([198, 18, 2, i % 3], 1000 + u16::from(i)))
            .collect();
        assert_eq!(rig.run(&mut w, &frames), 6);
        assert_eq!(rig.limiter.evictions(), 0);
        // One set of 4 ways: a 4th and 5th source evict the idlest... all
        // three are exhausted and equally old, two of them go.
        let more: Vec<Vec<u8>> = (3..5).map(|i| udp([198, 18, 2, i], 1)).collect();
        assert_eq!(rig.run(&mut w, &more), 2);
        assert_eq!(rig.limiter.evictions(), 1, "the 5th key found no free way");
        // Worker 0's table is full (4 of 4), worker 1's empty (0 of 4).
        assert_eq!(rig.limiter.occupancy(), (4, 8));
        let stats = rig.reg.hook_stats("ratelimit:t").unwrap();
        let v: Vec<(&str, pfil::StatKind, Option<u64>)> = stats
            .iter()
            .map(|s| (s.name.as_str(), s.kind, s.value()))
            .collect();
        use pfil::StatKind::{Counter, Gauge};
        assert_eq!(
            v,
            [
                ("evictions", Counter, Some(1)),
                ("table_used", Gauge, Some(4)),
                ("table_slots", Gauge, Some(8))
            ]
        );
        // Another worker has its own table: the same source passes its
        // burst there too (per src limits apply per queue).
        let mut w2 = rig.reg.worker().unwrap();
        assert_eq!(
            rig.run(&mut w2, &frames),
            6,
            "two of each of the three sources"
        );
        // Per flow: ports tell flows apart.
        let rig = Rig::new("0.001 burst 1 per flow", 1);
        let mut w = rig.reg.worker().unwrap();
        let flows: Vec<Vec<u8>> = (0..4)
            .flat_map(|p| [udp([198, 18, 3, 1], p), udp([198, 18, 3, 1], p)])
            .collect();
        assert_eq!(rig.run(&mut w, &flows), 4);
    }

    fn udp6(src: u8, dst: u8, sport: u16) -> Vec<u8> {
        let addr = |x: u8| {
            let mut a = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            a[15] = x;
            a
        };
        let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv6(addr(src), addr(dst), 64)
            .udp(sport, 53);
        let mut v = Vec::new();
        b.write(&mut v, &[0; 18]).unwrap();
        v
    }

    /// IPv6 keys: a source, a destination or a flow, as for IPv4.
    #[test]
    fn ipv6_keys_are_the_source_the_destination_or_the_flow() {
        // Two sources to one destination, each with three ports, three
        // frames each, burst 1.
        let frames: Vec<Vec<u8>> = (0..18u16)
            .map(|i| udp6(1 + (i % 2) as u8, 9, 1000 + i % 3))
            .collect();
        for (per, passed) in [("src", 2), ("dst", 1), ("flow", 6)] {
            let rig = Rig::new(&format!("0.001 burst 1 per {per}"), 1);
            let mut w = rig.reg.worker().unwrap();
            assert_eq!(rig.run(&mut w, &frames), passed, "per {per}");
        }
    }

    #[test]
    fn a_hook_bucket_has_only_evictions_in_its_stats() {
        let rig = Rig::new("0.001 burst 1", 1);
        let s = rig.limiter.stats();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].name.as_str(), s[0].value()), ("evictions", Some(0)));
        assert_eq!(rig.limiter.occupancy(), (0, 0));
    }

    #[test]
    fn specs_rebuild_the_same_config() {
        for cfg in ["1000 burst 64", "10000 burst 8 per src table 4096"] {
            let r = RateLimit::new(RateConfig::parse(cfg).unwrap(), 2);
            let spec = r.spec().unwrap();
            let again = RateConfig::parse(spec.strip_prefix("ratelimit:").unwrap()).unwrap();
            assert_eq!(&again, r.config(), "{spec}");
        }
    }
}
