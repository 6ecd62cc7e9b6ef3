//! What a filter pays to look at the headers of a 64-byte
//! Ethernet/IPv4/UDP frame (issue 9), all in one run:
//!
//! - `fixed_offsets`: a hand-written extraction of the 5-tuple at fixed
//!   offsets (EtherType, version/IHL, protocol checked; one length check):
//!   the floor a parser is compared with;
//! - `first`: `Packet::five_tuple_v4()` on a fresh `Packet`
//!   (the fast path, building the packet included);
//! - `first_reused`: the same first look on one packet whose parse cache
//!   was just dropped (`frame_mut`): what the accessor costs a hook
//!   without the driver's building of the packet, which every packet pays
//!   whether a hook parses it or not;
//! - `first_lent`: `Packet::plain_five_tuple_v4()` on that packet, the
//!   tuple lent in place (the accessor the acl filter keys on) rather than
//!   copied out;
//! - `cached`: the same on a packet already parsed (what a second hook pays);
//! - `cached_lent`: `Packet::plain_five_tuple_v4()` on it, the tuple lent
//!   in place rather than copied out;
//! - `udp_dst_port_first` / `_cached`: what `DropUdpPort` asks;
//! - `headers_first` / `_cached`: the older `headers()` API, built from the
//!   same cache;
//! - `etherparse`: `SlicedPacket::from_ethernet` and the 5-tuple from its
//!   slices, the path every parse took before.
//!
//! `cargo bench -p pfil-benches --bench parse`
//!
//! Every routine returns `()` and hands its result to
//! `std::hint::black_box` itself: criterion 0.5's own `black_box` reads the
//! returned value back with a volatile load, which on a struct written
//! field by field stalls store forwarding and added ~10 ns to every case
//! returning a 5-tuple, hiding the differences this bench is for.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use pfil::Packet;

#[path = "parse_cases.rs"]
mod cases;
use cases::{etherparse_tuple, fixed_offsets, frame};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    let mut f = frame();
    let want = fixed_offsets(&f);
    {
        let p = Packet::new(&mut f);
        assert_eq!(p.five_tuple_v4(), want);
        assert_eq!(p.parsed().and_then(|v| v.five_tuple_v4()), want);
    }
    assert_eq!(etherparse_tuple(&f), want);

    g.bench_function("fixed_offsets", |b| {
        b.iter(|| {
            black_box(fixed_offsets(black_box(&f[..])));
        })
    });
    g.bench_function("first", |b| {
        b.iter(|| {
            black_box(Packet::new(black_box(&mut f[..])).five_tuple_v4());
        })
    });
    {
        let mut p = Packet::new(&mut f);
        g.bench_function("first_reused", |b| {
            b.iter(|| {
                let p = black_box(&mut p);
                let _ = p.frame_mut();
                black_box(p.five_tuple_v4());
            })
        });
        g.bench_function("first_lent", |b| {
            b.iter(|| {
                let p = black_box(&mut p);
                let _ = p.frame_mut();
                black_box(p.plain_five_tuple_v4());
            })
        });
    }
    g.bench_function("udp_dst_port_first", |b| {
        b.iter(|| {
            black_box(Packet::new(black_box(&mut f[..])).udp_dst_port());
        })
    });
    g.bench_function("headers_first", |b| {
        b.iter(|| {
            black_box(Packet::new(black_box(&mut f[..])).headers());
        })
    });
    g.bench_function("etherparse", |b| {
        b.iter(|| {
            black_box(etherparse_tuple(black_box(&f[..])));
        })
    });
    let p = Packet::new(&mut f);
    let _ = p.parsed();
    g.bench_function("cached", |b| {
        b.iter(|| {
            black_box(black_box(&p).five_tuple_v4());
        })
    });
    g.bench_function("cached_lent", |b| {
        b.iter(|| {
            black_box(black_box(&p).plain_five_tuple_v4());
        })
    });
    g.bench_function("udp_dst_port_cached", |b| {
        b.iter(|| {
            black_box(black_box(&p).udp_dst_port());
        })
    });
    g.bench_function("headers_cached", |b| {
        b.iter(|| {
            black_box(black_box(&p).headers());
        })
    });
    g.finish();
}

/// Private, so the macro's undocumented `pub fn` is not public API.
mod group {
    use super::*;
    criterion_group!(benches, bench);
}
use group::benches;
criterion_main!(benches);
