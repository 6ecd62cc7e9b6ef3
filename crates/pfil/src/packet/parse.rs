//! Filling the parse cache: a direct decoder at fixed offsets for the
//! shapes nearly all traffic has, etherparse for everything else.

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

use super::{Layout, L4, LINK_ETHERNET, LINK_MALFORMED, LINK_OK};
use crate::PacketKind;

/// Offset of `inner` inside `outer` (both from the same frame).
fn offset_in(outer: &[u8], inner: &[u8]) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}

/// Offset as stored in the cache (frames are far below 64 KiB).
fn off(outer: &[u8], inner: &[u8]) -> u16 {
    u16::try_from(offset_in(outer, inner)).unwrap_or(u16::MAX)
}

const MALFORMED: Layout = Layout {
    link: LINK_MALFORMED,
    ip_version: 0,
    protocol: 0,
    l4: 0,
    ether_type: 0,
    l4_offset: 0,
};

/// Parse `frame` as `kind`, for every shape but the commonest (untagged
/// IPv4 UDP/TCP, [`fast::ethernet_ipv4_plain`], which the packet decodes
/// inline first): the rest of the fast path, then etherparse.
#[inline(never)]
pub(super) fn parse_general(frame: &[u8], kind: PacketKind) -> Layout {
    match fast::general(frame, kind) {
        Some(l) => l,
        None => parse_etherparse(frame, kind),
    }
}

/// Direct decoding of the shapes that make up nearly all traffic, at fixed
/// offsets: Ethernet with up to two VLAN tags; IPv4 (any IHL) that is not a
/// fragment and carries no AH; IPv6 whose next header is UDP, TCP, ICMP or
/// ICMPv6 (no extension headers) with a non-zero payload length; UDP with
/// a length field in 8..=room, TCP with a data offset in 5..=room, ICMP
/// other than timestamps, ICMPv6; any other EtherType (no IP layer).
///
/// It answers `None` whenever etherparse could answer anything but a plain
/// success on such a shape (an error, a jumbogram, an extension header, a
/// fragment...), and the caller asks etherparse: so the answers are
/// etherparse's by construction, which the property tests check field by
/// field.
pub(super) mod fast {
    use super::super::{Layout, L4_ICMPV4, L4_ICMPV6, L4_TCP, L4_UDP, LINK_ETHERNET, LINK_OK};
    use crate::PacketKind;

    const IPV4: u16 = 0x0800;
    const IPV6: u16 = 0x86dd;

    #[inline]
    fn be16(b: &[u8], at: usize) -> Option<u16> {
        let b = b.get(at..at + 2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    #[inline]
    fn is_vlan(et: u16) -> bool {
        matches!(et, 0x8100 | 0x88a8 | 0x9100)
    }

    /// The whole fast path (what the unit tests check).
    #[cfg(test)]
    pub(in crate::packet) fn parse(f: &[u8], kind: PacketKind) -> Option<Layout> {
        match kind {
            PacketKind::Ethernet => ethernet_ipv4_plain(f)
                .map(|(l, _)| l)
                .or_else(|| general(f, kind)),
            _ => general(f, kind),
        }
    }

    /// The fast path but for [`ethernet_ipv4_plain`].
    #[inline]
    pub(super) fn general(f: &[u8], kind: PacketKind) -> Option<Layout> {
        if f.len() > usize::from(u16::MAX) {
            return None;
        }
        match kind {
            PacketKind::Ethernet => ethernet(f),
            PacketKind::Ipv4 | PacketKind::Ipv6 => {
                let l = Layout {
                    link: LINK_OK,
                    ..Layout::default()
                };
                match f.first()? >> 4 {
                    4 => ipv4(f, 0, l),
                    6 => ipv6(f, 0, l),
                    _ => None,
                }
            }
        }
    }

    /// The bytes of a frame's 6..22 (as a little-endian `u128`) that make
    /// it plain: EtherType (12, 13), version and IHL (14), the
    /// more-fragments flag and fragment offset (20 but its top two bits,
    /// 21). (The window ends before the protocol, byte 23, so that the
    /// protocol is a byte load: read out of the vector, it went through
    /// the stack.)
    const PLAIN_MASK: u128 = u128::from_le_bytes([
        0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0x3f, 0xff,
    ]);
    /// Those bytes in a plain frame.
    const PLAIN_BYTES: u128 =
        u128::from_le_bytes([0, 0, 0, 0, 0, 0, 0x08, 0, 0x45, 0, 0, 0, 0, 0, 0, 0]);

    /// Whether bytes 6..22 of `h`, under [`PLAIN_MASK`], are a plain
    /// frame's. One load, and, compare and move-mask where byte-wise tests
    /// were eight instructions (and LLVM splits a `u128` compare back into
    /// words and shifts).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    pub(in crate::packet) fn fixed_fields_plain(h: &[u8; 42]) -> bool {
        use std::arch::x86_64::{
            __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8,
        };
        // SAFETY: bytes 6..22 are inside the 42 of `h`; an unaligned
        // 16-byte load has no alignment requirement.
        let v = unsafe { _mm_loadu_si128(h.as_ptr().add(6).cast::<__m128i>()) };
        // SAFETY: `__m128i` is 16 plain bytes; any bit pattern is valid.
        let (mask, plain) = unsafe {
            (
                std::mem::transmute::<u128, __m128i>(PLAIN_MASK),
                std::mem::transmute::<u128, __m128i>(PLAIN_BYTES),
            )
        };
        // SAFETY: SSE2 is enabled at build time (the `cfg` above), which
        // is all these intrinsics require.
        let same = unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(v, mask), plain)) };
        same == 0xffff
    }

    /// The portable form of the x86_64 one (which the unit tests check
    /// against it).
    #[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
    #[inline(always)]
    pub(in crate::packet) fn fixed_fields_plain_portable(h: &[u8; 42]) -> bool {
        let x = u128::from_le_bytes(*h[6..].first_chunk::<16>().unwrap_or(&[0; 16]));
        x & PLAIN_MASK == PLAIN_BYTES
    }

    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    pub(in crate::packet) use fixed_fields_plain_portable as fixed_fields_plain;

    /// The commonest shape of all, untagged Ethernet, IPv4 without options
    /// and not a fragment, UDP or TCP, decoded from the first 42 bytes
    /// (one bounds check; TCP's data offset at byte 46 is one more).
    ///
    /// Gives the 42 header bytes back with the layout, so a caller can read
    /// the 5-tuple from them without another bounds check.
    #[inline(always)]
    pub(in crate::packet) fn ethernet_ipv4_plain(f: &[u8]) -> Option<(Layout, &[u8; 42])> {
        let h: &[u8; 42] = f.first_chunk()?;
        // Frames beyond 64 KiB are etherparse's (offsets are 16 bits).
        if f.len() > usize::from(u16::MAX) {
            return None;
        }
        // EtherType IPv4, version 4 and IHL 5, no more-fragments flag and
        // fragment offset 0: one masked 16-byte compare.
        if !fixed_fields_plain(h) {
            return None;
        }
        let protocol = h[23];
        // UDP whose IP packet fills the frame exactly (no Ethernet padding
        // or trailer) and whose datagram fills the IP packet: the total and
        // UDP lengths compared, big-endian as they are, with what the
        // frame's length makes them. Two compares of memory where the range
        // checks below are thirteen instructions; a frame that fails it
        // takes them.
        let len = f.len();
        if protocol == 17
            && h[16..18] == ((len - 14) as u16).to_be_bytes()
            && h[38..40] == ((len - 34) as u16).to_be_bytes()
        {
            return Some((const { Layout::plain_ipv4(17, L4_UDP) }, h));
        }
        // A total length that covers the header and at least a UDP header
        // (UDP and TCP both need that much) and fits in the frame:
        // 28 <= total <= len - 14, one unsigned compare (len >= 42).
        let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
        if total.wrapping_sub(28) > f.len() - 42 {
            return None;
        }
        let room = total - 20;
        // Each branch's layout is a constant (building it from the
        // protocol byte was four more instructions).
        let l = if protocol == 17 {
            // A UDP length in 8..=room, one unsigned compare (room >= 8).
            let udp_len = usize::from(u16::from_be_bytes([h[38], h[39]]));
            if udp_len.wrapping_sub(8) > room - 8 {
                return None;
            }
            const { Layout::plain_ipv4(17, L4_UDP) }
        } else if protocol == 6 {
            let hl = usize::from(*f.get(46)? >> 4) * 4;
            if room < 20 || hl < 20 || hl > room {
                return None;
            }
            const { Layout::plain_ipv4(6, L4_TCP) }
        } else {
            return None;
        };
        Some((l, h))
    }

    #[inline]
    fn ethernet(f: &[u8]) -> Option<Layout> {
        let mut et = be16(f, 12)?;
        let mut o = 14usize;
        let mut tags = 0u8;
        while is_vlan(et) {
            if tags == 2 {
                // etherparse stops after two tags; rare, let it say so.
                return None;
            }
            et = be16(f, o + 2)?;
            o += 4;
            tags += 1;
        }
        let l = Layout {
            link: LINK_OK | LINK_ETHERNET | tags << 1,
            ether_type: et,
            ..Layout::default()
        };
        match et {
            IPV4 => ipv4(f, o, l),
            IPV6 => ipv6(f, o, l),
            _ => Some(l),
        }
    }

    #[inline]
    fn ipv4(f: &[u8], o: usize, mut l: Layout) -> Option<Layout> {
        let h: &[u8; 20] = f.get(o..)?.first_chunk()?;
        let (version, ihl) = (h[0] >> 4, h[0] & 0xf);
        let hl = usize::from(ihl) * 4;
        let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let protocol = h[9];
        // Not IPv4, a header shorter than 20 bytes or than the total
        // length, a frame shorter than the total length, an
        // authentication header: etherparse's errors and extension.
        if version != 4 || ihl < 5 || total < hl || f.len() - o < total || protocol == 51 {
            return None;
        }
        l.ip_version = 4;
        l.protocol = protocol;
        // More fragments or an offset: no transport layer, as etherparse.
        if u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
            return Some(l);
        }
        transport(&f[..o + total], o + hl, l)
    }

    #[inline]
    fn ipv6(f: &[u8], o: usize, mut l: Layout) -> Option<Layout> {
        let h: &[u8; 40] = f.get(o..)?.first_chunk()?;
        let payload = usize::from(u16::from_be_bytes([h[4], h[5]]));
        let next = h[6];
        // Payload length 0 (jumbogram or empty), a frame shorter than the
        // payload length, anything but a transport header next
        // (extension headers included): etherparse decides.
        if h[0] >> 4 != 6
            || payload == 0
            || f.len() - o - 40 < payload
            || !matches!(next, 1 | 6 | 17 | 58)
        {
            return None;
        }
        l.ip_version = 6;
        l.protocol = next;
        transport(&f[..o + 40 + payload], o + 40, l)
    }

    /// The transport header at `t` in `ip` (the frame cut where the IP
    /// packet ends).
    #[inline]
    fn transport(ip: &[u8], t: usize, mut l: Layout) -> Option<Layout> {
        let room = ip.len() - t;
        let code = match l.protocol {
            17 => {
                let len = usize::from(be16(ip, t + 4)?);
                // 0 (rest of the packet) or < 8 (an error): etherparse.
                if len < 8 || len > room {
                    return None;
                }
                L4_UDP
            }
            6 => {
                let hl = usize::from(*ip.get(t + 12)? >> 4) * 4;
                if room < 20 || hl < 20 || hl > room {
                    return None;
                }
                L4_TCP
            }
            1 => {
                // Timestamp (reply) messages have their own length rules.
                if room < 8 || matches!(ip[t], 13 | 14) {
                    return None;
                }
                L4_ICMPV4
            }
            58 => {
                if room < 8 {
                    return None;
                }
                L4_ICMPV6
            }
            _ => return Some(l),
        };
        l.l4 = code;
        l.l4_offset = u16::try_from(t).ok()?;
        Some(l)
    }
}

/// The general path: etherparse slices the frame, the cache keeps where.
#[cold]
#[inline(never)]
pub(super) fn parse_etherparse(frame: &[u8], kind: PacketKind) -> Layout {
    if frame.len() > usize::from(u16::MAX) {
        return MALFORMED;
    }
    let sliced = match kind {
        PacketKind::Ethernet => SlicedPacket::from_ethernet(frame),
        PacketKind::Ipv4 | PacketKind::Ipv6 => SlicedPacket::from_ip(frame),
    };
    let Ok(sliced) = sliced else {
        return MALFORMED;
    };
    let mut l = Layout {
        link: LINK_OK,
        ..Layout::default()
    };
    if let Some(etherparse::LinkSlice::Ethernet2(e)) = &sliced.link {
        l.link |= LINK_ETHERNET;
        l.ether_type = e.ether_type().0;
    }
    match &sliced.vlan {
        Some(etherparse::VlanSlice::SingleVlan(s)) => {
            l.link |= 1 << 1;
            l.ether_type = s.ether_type().0;
        }
        Some(etherparse::VlanSlice::DoubleVlan(d)) => {
            l.link |= 2 << 1;
            l.ether_type = d.inner().ether_type().0;
        }
        None => {}
    }
    match &sliced.net {
        Some(NetSlice::Ipv4(v4)) => {
            l.ip_version = 4;
            l.protocol = v4.payload().ip_number.0;
            debug_assert_eq!(offset_in(frame, v4.header().slice()), l.ip_offset());
        }
        Some(NetSlice::Ipv6(v6)) => {
            l.ip_version = 6;
            l.protocol = v6.payload().ip_number.0;
            debug_assert_eq!(offset_in(frame, v6.header().slice()), l.ip_offset());
        }
        _ => {}
    }
    let (l4, at, payload) = match &sliced.transport {
        Some(TransportSlice::Udp(u)) => (Some(L4::Udp), u.slice(), u.payload()),
        Some(TransportSlice::Tcp(t)) => (Some(L4::Tcp), t.slice(), t.payload()),
        Some(TransportSlice::Icmpv4(i)) => (Some(L4::Icmpv4), i.slice(), i.payload()),
        Some(TransportSlice::Icmpv6(i)) => (Some(L4::Icmpv6), i.slice(), i.payload()),
        None => (None, &[][..], &[][..]),
    };
    if l4.is_some() {
        l.l4 = L4::code(l4);
        l.l4_offset = off(frame, at);
        debug_assert_eq!(off(frame, payload), {
            let p = super::Parsed { frame, l };
            p.payload_offset()
                .and_then(|o| u16::try_from(o).ok())
                .unwrap_or(0)
        });
    }
    l
}
