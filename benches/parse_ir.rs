//! Instructions per header look-up, for callgrind: the cases of
//! `benches/parse.rs`, each run `PARSE_IR_N` times (default 1 000 000) in
//! its own `#[inline(never)]` loop, so `callgrind_annotate --inclusive=yes`
//! gives each loop's instruction count and that over N is the count per
//! look-up, exact and unaffected by other load on the machine.
//!
//! `benches/callgrind_parse.sh` runs and tabulates it. Run alone, it
//! prints each loop's time per look-up too (a cross-check of criterion).

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

fn main() {
    let n = std::env::var("PARSE_IR_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut f = frame();
    timed("empty", n, || ir_empty(&mut f, n));
    timed("fixed_offsets", n, || ir_fixed_offsets(&mut f, n));
    timed("first", n, || ir_first(&mut f, n));
    {
        let mut p = Packet::new(&mut f);
        timed("first_reused", n, || ir_first_reused(&mut p, n));
    }
    timed("udp_dst_port_first", n, || ir_udp_dst_port_first(&mut f, n));
    timed("headers_first", n, || ir_headers_first(&mut f, n));
    timed("etherparse", n, || ir_etherparse(&mut f, n));
    let p = Packet::new(&mut f);
    assert!(p.parsed().is_some());
    timed("cached", n, || ir_cached(&p, n));
    timed("udp_dst_port_cached", n, || ir_udp_dst_port_cached(&p, n));
    timed("headers_cached", n, || ir_headers_cached(&p, n));
}
