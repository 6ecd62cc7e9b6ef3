//! Instructions per header look-up, for callgrind: the cases of
//! `benches/parse.rs`, each run `PARSE_IR_N` times (default 1 000 000) in
//! its own `#[inline(never)]` loop, so `callgrind_annotate --inclusive=yes`
//! gives each loop's instruction count and that over N is the count per
//! look-up, exact and unaffected by other load on the machine.
//!
//! `benches/callgrind_parse.sh` runs and tabulates it. Run alone, it
//! prints each loop's time per look-up too (a cross-check of criterion).
//!
//! With `PARSE_IR_ROUNDS=R` it runs the cases the issue-9 targets name
//! (fixed offsets, first look fresh and reused, cached read) in turn, round
//! after round, and prints each one's median time and its ratio to the
//! fixed-offset extraction of the same round (median and range over the
//! rounds): on a machine whose speed drifts, a ratio within a round is what
//! a sequential run of criterion's cases cannot give.
//!
//! `PARSE_IR_ROUNDS=31 PARSE_IR_N=2000000 taskset -c 1 target/release/deps/parse_ir-*`

use std::hint::black_box;

use pfil::Packet;

#[path = "parse_cases.rs"]
mod cases;
use cases::{etherparse_tuple, fixed_offsets, frame};

#[inline(never)]
fn ir_empty(f: &mut [u8], n: u64) {
    for _ in 0..n {
        black_box(black_box(&mut *f).len());
    }
}

#[inline(never)]
fn ir_fixed_offsets(f: &mut [u8], n: u64) {
    for _ in 0..n {
        black_box(fixed_offsets(black_box(&*f)));
    }
}

#[inline(never)]
fn ir_first(f: &mut [u8], n: u64) {
    for _ in 0..n {
        black_box(Packet::new(black_box(&mut *f)).five_tuple_v4());
    }
}

#[inline(never)]
fn ir_first_reused(p: &mut Packet<'_>, n: u64) {
    for _ in 0..n {
        let p = black_box(&mut *p);
        let _ = p.frame_mut();
        black_box(p.five_tuple_v4());
    }
}

#[inline(never)]
fn ir_udp_dst_port_first(f: &mut [u8], n: u64) {
    for _ in 0..n {
        black_box(Packet::new(black_box(&mut *f)).udp_dst_port());
    }
}

#[inline(never)]
fn ir_headers_first(f: &mut [u8], n: u64) {
    for _ in 0..n {
        black_box(Packet::new(black_box(&mut *f)).headers());
    }
}

#[inline(never)]
fn ir_etherparse(f: &mut [u8], n: u64) {
    for _ in 0..n {
        black_box(etherparse_tuple(black_box(&*f)));
    }
}

#[inline(never)]
fn ir_cached(p: &Packet<'_>, n: u64) {
    for _ in 0..n {
        black_box(black_box(p).five_tuple_v4());
    }
}

#[inline(never)]
fn ir_first_lent(p: &mut Packet<'_>, n: u64) {
    for _ in 0..n {
        let p = black_box(&mut *p);
        let _ = p.frame_mut();
        black_box(p.plain_five_tuple_v4());
    }
}

#[inline(never)]
fn ir_cached_lent(p: &Packet<'_>, n: u64) {
    for _ in 0..n {
        black_box(black_box(p).plain_five_tuple_v4());
    }
}

#[inline(never)]
fn ir_udp_dst_port_cached(p: &Packet<'_>, n: u64) {
    for _ in 0..n {
        black_box(black_box(p).udp_dst_port());
    }
}

#[inline(never)]
fn ir_headers_cached(p: &Packet<'_>, n: u64) {
    for _ in 0..n {
        black_box(black_box(p).headers());
    }
}

/// Run `f` and print its time per look-up (meaningless under callgrind,
/// a cross-check of criterion's numbers outside it).
fn timed(name: &str, n: u64, f: impl FnOnce()) {
    let t = std::time::Instant::now();
    f();
    let ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
    println!("{name:24} {ns:7.2} ns");
}

/// Nanoseconds per look-up of `f` run `n` times.
fn ns_per(n: u64, f: impl FnOnce()) -> f64 {
    let t = std::time::Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e9 / n as f64
}

/// The rounds mode (see the top of the file).
fn rounds(f: &mut [u8], n: u64, rounds: usize) {
    const CASES: [&str; 6] = [
        "fixed_offsets",
        "first",
        "first_reused",
        "first_lent",
        "cached",
        "cached_lent",
    ];
    let mut ns: [Vec<f64>; 6] = Default::default();
    for _ in 0..rounds {
        ns[0].push(ns_per(n, || ir_fixed_offsets(f, n)));
        ns[1].push(ns_per(n, || ir_first(f, n)));
        let mut p = Packet::new(f);
        ns[2].push(ns_per(n, || ir_first_reused(&mut p, n)));
        ns[3].push(ns_per(n, || ir_first_lent(&mut p, n)));
        assert!(p.parsed().is_some());
        ns[4].push(ns_per(n, || ir_cached(&p, n)));
        ns[5].push(ns_per(n, || ir_cached_lent(&p, n)));
    }
    let sample = |v: &[f64]| pfil_stats::Sample::from_values(v.iter().copied()).expect("a sample");
    println!("{rounds} rounds of {n} look-ups each, the cases in turn; ratio: to fixed_offsets in the same round");
    println!(
        "{:14} {:>9} {:>9} {:>9}   {:>6} {:>6} {:>6}",
        "case", "median", "min", "max", "ratio", "min", "max"
    );
    for (name, v) in CASES.iter().zip(&ns) {
        let t = sample(v).summary();
        let r = sample(&v.iter().zip(&ns[0]).map(|(a, b)| a / b).collect::<Vec<_>>()).summary();
        println!(
            "{name:14} {:7.2}ns {:7.2}ns {:7.2}ns   {:6.2} {:6.2} {:6.2}",
            t.median, t.min, t.max, r.median, r.min, r.max
        );
    }
}

fn main() {
    let n = std::env::var("PARSE_IR_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut f = frame();
    if let Some(r) = std::env::var("PARSE_IR_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        rounds(&mut f, n, r);
        return;
    }
    timed("empty", n, || ir_empty(&mut f, n));
    timed("fixed_offsets", n, || ir_fixed_offsets(&mut f, n));
    timed("first", n, || ir_first(&mut f, n));
    {
        let mut p = Packet::new(&mut f);
        timed("first_reused", n, || ir_first_reused(&mut p, n));
        timed("first_lent", n, || ir_first_lent(&mut p, n));
    }
    timed("udp_dst_port_first", n, || ir_udp_dst_port_first(&mut f, n));
    timed("headers_first", n, || ir_headers_first(&mut f, n));
    timed("etherparse", n, || ir_etherparse(&mut f, n));
    let p = Packet::new(&mut f);
    assert!(p.parsed().is_some());
    timed("cached", n, || ir_cached(&p, n));
    timed("cached_lent", n, || ir_cached_lent(&p, n));
    timed("udp_dst_port_cached", n, || ir_udp_dst_port_cached(&p, n));
    timed("headers_cached", n, || ir_headers_cached(&p, n));
}
