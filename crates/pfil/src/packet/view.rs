//! [`Parsed`]: the parse cache seen through the frame, and the 5-tuples an
//! ACL classifier keys on.

use std::fmt;
use std::net::IpAddr;

use super::{Layout, L4, L4_ICMPV4, L4_ICMPV6, L4_TCP, L4_UDP, LINK_ETHERNET};

/// The IPv4 5-tuple of a packet, as an ACL classifier keys on it: plain
/// integers, read from the frame at the cached offsets.
///
/// `repr(C)`: 16 bytes, the fields in this order and then 3 bytes of
/// padding. A [`Packet`](crate::Packet) keeps a plain frame's tuple in
/// exactly these bytes, so that [`Packet::plain_five_tuple_v4`](crate::Packet::plain_five_tuple_v4)
/// lends it in place and a copy of it is two 8-byte words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct FiveTupleV4 {
    /// Source address, host order (`u32::from(Ipv4Addr)`).
    pub src: u32,
    /// Destination address, host order.
    pub dst: u32,
    /// Source port; 0 unless the transport is UDP or TCP.
    pub src_port: u16,
    /// Destination port; 0 unless the transport is UDP or TCP.
    pub dst_port: u16,
    /// IP protocol number (17 for UDP).
    pub protocol: u8,
}

// `words` and `from_words` rest on this.
const _: () =
    assert!(std::mem::size_of::<FiveTupleV4>() == 16 && std::mem::align_of::<FiveTupleV4>() <= 8);

impl FiveTupleV4 {
    /// The tuple's 16 bytes as two native-endian words (padding zero):
    /// what a [`Packet`](crate::Packet) stores of a plain frame, two
    /// stores.
    #[inline(always)]
    pub(crate) const fn words(
        src: u32,
        dst: u32,
        src_port: u16,
        dst_port: u16,
        protocol: u8,
    ) -> [u64; 2] {
        #[cfg(target_endian = "little")]
        let w = [
            (dst as u64) << 32 | src as u64,
            (protocol as u64) << 32 | (dst_port as u64) << 16 | src_port as u64,
        ];
        #[cfg(target_endian = "big")]
        let w = [
            (src as u64) << 32 | dst as u64,
            (src_port as u64) << 48 | (dst_port as u64) << 32 | (protocol as u64) << 24,
        ];
        w
    }

    /// The tuple whose bytes [`words`](Self::words) made `w`.
    #[inline(always)]
    pub(crate) const fn from_words(w: [u64; 2]) -> FiveTupleV4 {
        // SAFETY: `FiveTupleV4` is `repr(C)` and 16 bytes (asserted above),
        // every field an integer (any bit pattern is one); `words` put each
        // field's bytes at its `repr(C)` offset, and the 3 padding bytes
        // may hold anything.
        unsafe { std::mem::transmute::<[u64; 2], FiveTupleV4>(w) }
    }
}

/// The IPv6 5-tuple of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FiveTupleV6 {
    /// Source address, network order.
    pub src: [u8; 16],
    /// Destination address, network order.
    pub dst: [u8; 16],
    /// Source port; 0 unless the transport is UDP or TCP.
    pub src_port: u16,
    /// Destination port; 0 unless the transport is UDP or TCP.
    pub dst_port: u16,
    /// Final next header (after extension headers), e.g. 6 for TCP.
    pub protocol: u8,
}

/// A view of a packet's parsed headers: the frame and its 8-byte parse
/// cache, built by [`Packet::parsed`](crate::Packet::parsed) without copying anything. Every
/// accessor reads its field from the frame at a cached offset; a field the
/// packet does not have is `None`.
///
/// It answers what etherparse's `SlicedPacket::from_ethernet` /
/// `from_ip` answer for the same bytes (the property tests check every
/// field on arbitrary, malformed and well-formed frames).
#[derive(Clone, Copy)]
pub struct Parsed<'p> {
    pub(super) frame: &'p [u8],
    pub(super) l: Layout,
}

impl fmt::Debug for Parsed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parsed")
            .field("ether_type", &self.ether_type())
            .field("vlan_ids", &self.vlan_ids())
            .field("src_ip", &self.src_ip())
            .field("dst_ip", &self.dst_ip())
            .field("protocol", &self.protocol())
            .field("l4", &self.l4())
            .field("ports", &self.ports())
            .finish()
    }
}

impl<'p> Parsed<'p> {
    #[inline]
    fn be16(&self, at: usize) -> Option<u16> {
        let b = self.frame.get(at..at + 2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    #[inline]
    fn bytes<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.frame.get(at..at + N)?.try_into().ok()
    }

    #[inline]
    fn has_l4(&self, l4: u8) -> bool {
        self.l.l4 == l4
    }

    /// The EtherType after the VLAN tags of an Ethernet frame; `None` on IP
    /// heads.
    #[inline]
    pub fn ether_type(&self) -> Option<u16> {
        (self.l.link & LINK_ETHERNET != 0).then_some(self.l.ether_type)
    }

    /// How many VLAN tags (802.1Q, 802.1ad, 0x9100) precede the EtherType:
    /// 0, 1 or 2 (etherparse reads at most two; a third stays the
    /// EtherType).
    #[inline]
    pub fn vlan_tags(&self) -> u8 {
        self.l.tags()
    }

    /// The VLAN ids (12 bits) of the outer and inner tag, if present.
    #[inline]
    pub fn vlan_ids(&self) -> (Option<u16>, Option<u16>) {
        let tag = |n: u8, at: usize| {
            if self.vlan_tags() > n {
                self.be16(at).map(|tci| tci & 0x0fff)
            } else {
                None
            }
        };
        (tag(0, 14), tag(1, 18))
    }

    /// The outer VLAN id (12 bits), if the frame is tagged.
    #[inline]
    pub fn vlan_id(&self) -> Option<u16> {
        self.vlan_ids().0
    }

    /// 4 or 6, if the packet has an IP layer.
    #[inline]
    pub fn ip_version(&self) -> Option<u8> {
        (self.l.ip_version != 0).then_some(self.l.ip_version)
    }

    /// Offset of the IP header in the frame.
    #[inline]
    pub fn ip_offset(&self) -> Option<usize> {
        (self.l.ip_version != 0).then_some(self.l.ip_offset())
    }

    /// IPv4 protocol or IPv6 final next header (after extension headers).
    #[inline]
    pub fn protocol(&self) -> Option<u8> {
        (self.l.ip_version != 0).then_some(self.l.protocol)
    }

    /// IPv4 source address, network order.
    #[inline]
    pub fn src_v4(&self) -> Option<[u8; 4]> {
        if self.l.ip_version != 4 {
            return None;
        }
        self.bytes(self.l.ip_offset() + 12)
    }

    /// IPv4 destination address, network order.
    #[inline]
    pub fn dst_v4(&self) -> Option<[u8; 4]> {
        if self.l.ip_version != 4 {
            return None;
        }
        self.bytes(self.l.ip_offset() + 16)
    }

    /// IPv6 source address, network order.
    #[inline]
    pub fn src_v6(&self) -> Option<[u8; 16]> {
        if self.l.ip_version != 6 {
            return None;
        }
        self.bytes(self.l.ip_offset() + 8)
    }

    /// IPv6 destination address, network order.
    #[inline]
    pub fn dst_v6(&self) -> Option<[u8; 16]> {
        if self.l.ip_version != 6 {
            return None;
        }
        self.bytes(self.l.ip_offset() + 24)
    }

    /// Source address, either version.
    #[inline]
    pub fn src_ip(&self) -> Option<IpAddr> {
        match self.l.ip_version {
            4 => self.src_v4().map(IpAddr::from),
            _ => self.src_v6().map(IpAddr::from),
        }
    }

    /// Destination address, either version.
    #[inline]
    pub fn dst_ip(&self) -> Option<IpAddr> {
        match self.l.ip_version {
            4 => self.dst_v4().map(IpAddr::from),
            _ => self.dst_v6().map(IpAddr::from),
        }
    }

    /// The transport layer etherparse decoded: UDP, TCP, ICMP, ICMPv6.
    /// `None` for other protocols, IP fragments and non-IP packets.
    #[inline]
    pub fn l4(&self) -> Option<L4> {
        L4::from_code(self.l.l4)
    }

    /// Offset of the transport header in the frame.
    #[inline]
    pub fn l4_offset(&self) -> Option<usize> {
        (self.l.l4 != 0).then_some(usize::from(self.l.l4_offset))
    }

    /// Offset of the transport payload in the frame (after the UDP, TCP
    /// or ICMP header); the payload ends where the IP packet (or the UDP
    /// length) says.
    #[inline]
    pub fn payload_offset(&self) -> Option<usize> {
        let t = usize::from(self.l.l4_offset);
        let header = match self.l.l4 {
            L4_UDP | L4_ICMPV6 => 8,
            L4_TCP => usize::from(self.frame.get(t + 12)? >> 4) * 4,
            // Timestamp (reply) messages have a 20-byte header.
            L4_ICMPV4 => match self.bytes(t)? {
                [13 | 14, 0] => 20,
                _ => 8,
            },
            _ => return None,
        };
        Some(t + header)
    }

    /// Source and destination port of a UDP or TCP packet.
    #[inline]
    pub fn ports(&self) -> Option<(u16, u16)> {
        if self.l.l4 != L4_UDP && self.l.l4 != L4_TCP {
            return None;
        }
        let [a, b, c, d] = self.bytes(usize::from(self.l.l4_offset))?;
        Some((u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d])))
    }

    /// Source port of a UDP or TCP packet.
    #[inline]
    pub fn src_port(&self) -> Option<u16> {
        self.ports().map(|p| p.0)
    }

    /// Destination port of a UDP or TCP packet.
    #[inline]
    pub fn dst_port(&self) -> Option<u16> {
        self.ports().map(|p| p.1)
    }

    /// Destination port of a UDP packet (`None` for anything else).
    #[inline]
    pub fn udp_dst_port(&self) -> Option<u16> {
        if !self.has_l4(L4_UDP) {
            return None;
        }
        self.be16(usize::from(self.l.l4_offset) + 2)
    }

    /// The flags byte of a TCP header (FIN 0x01, SYN 0x02, RST 0x04, PSH
    /// 0x08, ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80).
    #[inline]
    pub fn tcp_flags(&self) -> Option<u8> {
        if !self.has_l4(L4_TCP) {
            return None;
        }
        self.frame.get(usize::from(self.l.l4_offset) + 13).copied()
    }

    /// Type and code of an ICMP or ICMPv6 message.
    #[inline]
    pub fn icmp(&self) -> Option<(u8, u8)> {
        if self.l.l4 != L4_ICMPV4 && self.l.l4 != L4_ICMPV6 {
            return None;
        }
        let [t, c] = self.bytes(usize::from(self.l.l4_offset))?;
        Some((t, c))
    }

    /// Ports of a UDP or TCP packet, (0, 0) otherwise.
    #[inline]
    fn ports_or_zero(&self) -> (u16, u16) {
        self.ports().unwrap_or((0, 0))
    }

    /// The IPv4 5-tuple, if the packet is IPv4.
    #[inline]
    pub fn five_tuple_v4(&self) -> Option<FiveTupleV4> {
        if self.l.ip_version != 4 {
            return None;
        }
        let o = self.l.ip_offset();
        let a: [u8; 8] = self.bytes(o + 12)?;
        let (src_port, dst_port) = self.ports_or_zero();
        Some(FiveTupleV4 {
            src: u32::from_be_bytes([a[0], a[1], a[2], a[3]]),
            dst: u32::from_be_bytes([a[4], a[5], a[6], a[7]]),
            src_port,
            dst_port,
            protocol: self.l.protocol,
        })
    }

    /// The IPv6 5-tuple, if the packet is IPv6.
    #[inline]
    pub fn five_tuple_v6(&self) -> Option<FiveTupleV6> {
        let (src, dst) = (self.src_v6()?, self.dst_v6()?);
        let (src_port, dst_port) = self.ports_or_zero();
        Some(FiveTupleV6 {
            src,
            dst,
            src_port,
            dst_port,
            protocol: self.l.protocol,
        })
    }

    /// The frame these headers are from.
    #[inline]
    pub fn frame(&self) -> &'p [u8] {
        self.frame
    }
}
