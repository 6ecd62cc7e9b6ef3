//! What a filter pays to look at the headers of a 64-byte
//! Ethernet/IPv4/UDP frame (issue 9), all in one run:
//!
//! - `fixed_offsets`: a hand-written extraction of the 5-tuple at fixed
//!   offsets (EtherType, version/IHL, protocol checked; one length check):
//!   the floor a parser is compared with;
//! - `first`: `Packet::five_tuple_v4()` on a fresh `Packet`
//!   (the fast path, building the packet included);
//! - `cached`: the same on a packet already parsed (what a second hook pays);
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
use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use pfil::{FiveTupleV4, Packet};

/// The frame pfild's synthetic port sends by default, at 64 bytes.
fn frame() -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(4000, 53);
    let payload = [0xa5u8; 64 - 42];
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, &payload).expect("a frame");
    assert_eq!(v.len(), 64);
    v
}

/// The 5-tuple at fixed offsets, as a hand-written dataplane reads it.
#[inline]
fn fixed_offsets(f: &[u8]) -> Option<FiveTupleV4> {
    let h: &[u8; 42] = f.first_chunk()?;
    if h[12..14] != [0x08, 0x00] || h[14] != 0x45 || h[23] != 17 {
        return None;
    }
    let be16 = |o: usize| u16::from_be_bytes([h[o], h[o + 1]]);
    let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    Some(FiveTupleV4 {
        src: be32(26),
        dst: be32(30),
        src_port: be16(34),
        dst_port: be16(36),
        protocol: 17,
    })
}

/// The 5-tuple through etherparse's slices.
#[inline]
fn etherparse_tuple(f: &[u8]) -> Option<FiveTupleV4> {
    let s = SlicedPacket::from_ethernet(f).ok()?;
    let Some(NetSlice::Ipv4(ip)) = &s.net else {
        return None;
    };
    let (src_port, dst_port) = match &s.transport {
        Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
        Some(TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port()),
        _ => (0, 0),
    };
    Some(FiveTupleV4 {
        src: u32::from(ip.header().source_addr()),
        dst: u32::from(ip.header().destination_addr()),
        src_port,
        dst_port,
        protocol: ip.payload().ip_number.0,
    })
}

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
