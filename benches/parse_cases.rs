//! The frame and the two reference extractions that `parse.rs`
//! (criterion) and `parse_ir.rs` (callgrind) both measure.

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use pfil::FiveTupleV4;

/// A frame buffer at the start of a cache line, as a NIC's DMA buffer or
/// an AF_XDP chunk's data is: where the allocator put a `Vec` (any 16
/// bytes) decided which of the loads straddled two lines, and so moved
/// every case's time from one run to the next.
#[repr(C, align(64))]
pub struct Frame([u8; 64]);

impl std::ops::Deref for Frame {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for Frame {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// The frame pfild's synthetic port sends by default, at 64 bytes.
pub fn frame() -> Box<Frame> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(4000, 53);
    let payload = [0xa5u8; 64 - 42];
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, &payload).expect("a frame");
    let mut f = Box::new(Frame([0; 64]));
    f.0.copy_from_slice(&v);
    f
}

/// The 5-tuple at fixed offsets, as a hand-written dataplane reads it.
#[inline]
pub fn fixed_offsets(f: &[u8]) -> Option<FiveTupleV4> {
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
pub fn etherparse_tuple(f: &[u8]) -> Option<FiveTupleV4> {
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
