//! Instructions per header look-up, for callgrind: the cases of
//! `benches/parse.rs`, each run `PARSE_IR_N` times (default 1 000 000) in
//! its own `#[inline(never)]` loop, so `callgrind_annotate --inclusive=yes`
//! gives each loop's instruction count and that over N is the count per
//! look-up, exact and unaffected by other load on the machine.
//!
//! `benches/callgrind_parse.sh` runs and tabulates it. Run alone, it
//! prints each loop's time per look-up too (a cross-check of criterion).

use std::hint::black_box;

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use pfil::{FiveTupleV4, Packet};

fn frame() -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(4000, 53);
    let payload = [0xa5u8; 64 - 42];
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, &payload).expect("a frame");
    v
}

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

#[inline]
fn etherparse_tuple(f: &[u8]) -> Option<FiveTupleV4> {
    let s = SlicedPacket::from_ethernet(f).ok()?;
    let Some(NetSlice::Ipv4(ip)) = &s.net else {
        return None;
    };
    let (src_port, dst_port) = match &s.transport {
        Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
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
    timed("udp_dst_port_first", n, || ir_udp_dst_port_first(&mut f, n));
    timed("headers_first", n, || ir_headers_first(&mut f, n));
    timed("etherparse", n, || ir_etherparse(&mut f, n));
    let p = Packet::new(&mut f);
    assert!(p.parsed().is_some());
    timed("cached", n, || ir_cached(&p, n));
    timed("udp_dst_port_cached", n, || ir_udp_dst_port_cached(&p, n));
    timed("headers_cached", n, || ir_headers_cached(&p, n));
}
