//! Tests of the limiter: parsing, GCRA, the hook and keyed buckets.

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
        ("0", "from 0.001 to 1G"),
        ("0.0009", "from 0.001 to 1G"),
        ("2G", "from 0.001 to 1G"),
        ("nan", "RATE: frames per second"),
        ("infk", "RATE: frames per second"),
        ("0.1 burst 4000000000", "over the cap of 31536000 s"),
        ("0.001 burst 31537", "over the cap of 31536000 s"),
        (
            "10k burst 4294967296",
            "burst: frames, 1 or more (up to 4294967295)",
        ),
        ("10k table 16777217", "table: 1 to 16777216"),
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
        Rig::with(RateConfig::parse(cfg).unwrap(), workers)
    }

    fn with(cfg: RateConfig, workers: usize) -> Rig {
        let reg = Registry::with_max_workers(workers);
        let head = reg
            .register_head("h", PacketKind::Ethernet, Dirs::IN)
            .unwrap();
        let limiter = std::sync::Arc::new(RateLimit::new(cfg, workers));
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
    // Worker 0's table is full (4 of 4); worker 1's is not allocated
    // until worker 1 runs.
    assert_eq!(rig.limiter.occupancy(), (4, 4));
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
            ("table_slots", Gauge, Some(4)),
            ("table_bytes", Gauge, Some(64))
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

/// Review L1: a burst whose tolerance saturates u64 (`0.1 burst 4e9`, built
/// by hand: the parser refuses it now) admits its burst; before, `now +
/// tolerance` wrapped in release (0 of 5000 passed) and overflowed in
/// debug (a panic, the link quarantined).
#[test]
fn a_saturated_tolerance_admits_the_burst_and_never_overflows() {
    let cfg = RateConfig {
        rate: 0.1,
        burst: 4_000_000_000,
        per: Per::Hook,
        table: 4,
    };
    let r = RateLimit::new(cfg.clone(), 1);
    assert_eq!(r.tolerance, u64::MAX);
    // The arithmetic directly: any now, any tat.
    assert_eq!(r.admit(0, 1_000, 5000), (5000, 1_000 + 5000 * r.interval));
    assert_eq!(r.admit(u64::MAX - 1, u64::MAX - 1, 5000).0, 0);
    assert_eq!(r.admit(0, u64::MAX, 1), (0, u64::MAX));
    let near = u64::MAX - 3 * r.interval;
    assert_eq!(r.admit(near, near, 9), (3, u64::MAX));
    // Through a registry, one 5000-frame batch after the clock moved.
    let rig = Rig::with(cfg, 1);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let mut w = rig.reg.worker().unwrap();
    let frames: Vec<Vec<u8>> = (0..5000u16).map(|i| udp([198, 18, 5, 1], i)).collect();
    assert_eq!(rig.run(&mut w, &frames), 5000, "the burst passes");
    let c = rig.reg.chain("h", Dir::In).unwrap()[0].counters;
    assert_eq!((c.faults, c.dropped), (0, 0));
    // Rates that make the interval 1 ns or u64::MAX are as safe.
    for rate in [2e9, 0.0, -1.0, f64::NAN, f64::INFINITY] {
        let r = RateLimit::new(
            RateConfig {
                rate,
                burst: u32::MAX,
                per: Per::Hook,
                table: 4,
            },
            1,
        );
        let _ = r.admit(u64::MAX / 2, u64::MAX - 5, u64::MAX);
        assert!(r.interval >= 1);
    }
    // And the catalog's constructor refuses what is over a cap.
    for (rate, burst, want) in [
        (0.1, 4_000_000_000, "over the cap of 31536000 s"),
        (0.0, 1, "from 0.001 to 1G"),
        (f64::NAN, 1, "from 0.001 to 1G"),
        (10.0, 0, "to refill"),
    ] {
        let e = RateLimit::try_new(
            RateConfig {
                rate,
                burst,
                per: Per::Hook,
                table: 4,
            },
            1,
        )
        .unwrap_err();
        assert!(e.contains(want), "{rate} {burst}: {e}");
    }
}

/// Review M2: a table is allocated on its worker's first frame, not for
/// every registry slot when the hook is added; over the byte cap (over all
/// worker slots) the config is refused with the cap named.
#[test]
fn tables_are_allocated_per_worker_on_first_use_and_capped_by_bytes() {
    let r =
        RateLimit::try_new(RateConfig::parse("1000 per flow table 262144").unwrap(), 64).unwrap();
    assert_eq!(r.occupancy(), (0, 0), "nothing allocated yet");
    assert_eq!(r.table_bytes(), 0);
    let e = RateLimit::try_new(
        RateConfig::parse("1000 per flow table 1048576").unwrap(),
        64,
    )
    .unwrap_err();
    for want in [
        "1048576 buckets x 16 B x 64 worker slots = 1024 MiB",
        "cap of 256 MiB",
        "at most table 262144",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    // With one worker slot it fits (16 MiB), and the catalog says the same.
    assert!(
        RateLimit::try_new(RateConfig::parse("1000 per flow table 1048576").unwrap(), 1).is_ok()
    );
    let cat = crate::Catalog::builtin();
    let e = cat
        .create(
            "ratelimit:1000 per src table 16777216",
            &crate::BuildCtx::new(64),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("cap of 256 MiB"), "{e}");
    // A hook bucket has no tables: no cap.
    assert!(RateLimit::try_new(RateConfig::parse("1000 table 16777216").unwrap(), 64).is_ok());
    // Two of four workers run: two tables.
    let rig = Rig::new("1000 burst 1 per flow table 1024", 4);
    assert_eq!(rig.limiter.occupancy(), (0, 0));
    let frames = vec![udp([198, 18, 6, 1], 1)];
    let (mut a, mut b) = (rig.reg.worker().unwrap(), rig.reg.worker().unwrap());
    rig.run(&mut a, &frames);
    assert_eq!(rig.limiter.table_bytes(), 1024 * 16);
    rig.run(&mut b, &frames);
    rig.run(&mut a, &frames);
    assert_eq!(rig.limiter.occupancy(), (2, 2048));
    assert_eq!(rig.limiter.table_bytes(), 2 * 1024 * 16);
}

/// Review L6.5: reading the stats takes no lock a worker takes, so a
/// scrape cannot stall a worker's batch (nor wait behind one).
#[test]
fn stats_do_not_take_the_workers_table_lock() {
    let rig = Rig::new("1000 burst 1 per src table 4", 1);
    let mut w = rig.reg.worker().unwrap();
    rig.run(&mut w, &[udp([198, 18, 7, 1], 1), udp([198, 18, 7, 2], 1)]);
    let held = rig.limiter.tables[0].slots.get().unwrap().lock().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let limiter = rig.limiter.clone();
    std::thread::spawn(move || {
        let _ = tx.send((
            limiter.stats().len(),
            limiter.occupancy(),
            limiter.evictions(),
        ));
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(5));
    drop(held);
    assert_eq!(
        got,
        Ok((4, (2, 4), 0)),
        "stats while the worker holds its table"
    );
}

/// PROTOCOL.md's Limits table says the caps as they are.
#[test]
fn the_protocol_document_says_the_caps() {
    let doc = include_str!("../../../pfil-ctl/PROTOCOL.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `ratelimit:` |"))
        .expect("a ratelimit row in PROTOCOL.md's Limits");
    let fits = TABLE_BYTES_CAP / SLOT_BYTES / pfil::DEFAULT_MAX_WORKERS;
    for want in [
        format!("RATE {MIN_RATE} to 1G"),
        format!("at most {MAX_BURST_SECONDS} s"),
        format!("`table` (1 to {MAX_TABLE}) x {SLOT_BYTES} bytes"),
        format!("at most {} MiB", TABLE_BYTES_CAP >> 20),
        format!(
            "pfild's {} slots: `table {fits}`",
            pfil::DEFAULT_MAX_WORKERS
        ),
    ] {
        assert!(row.contains(&want), "{want:?} not in {row}");
    }
    assert_eq!(MAX_RATE, 1e9);
}
