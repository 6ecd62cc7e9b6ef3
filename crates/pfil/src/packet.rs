//! The packet a hook sees: the raw frame (mutable), where it came from, its
//! verdict so far, and headers parsed lazily with etherparse and cached.

use std::cell::Cell;
use std::fmt;
use std::net::IpAddr;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

use crate::{PacketKind, Verdict};

/// One frame in a batch.
///
/// The driver builds a `Packet` over the frame bytes it owns (an AF_XDP UMEM
/// slot, a synthetic buffer), runs a head over a slice of them, then reads
/// each [`verdict`](Packet::verdict). Hooks read and may rewrite the bytes;
/// [`headers`](Packet::headers) parses once per packet and only when asked,
/// so hooks that don't parse don't pay for it.
pub struct Packet<'a> {
    frame: &'a mut [u8],
    kind: PacketKind,
    ifindex: u32,
    queue: u32,
    verdict: Verdict,
    parsed: Cell<Layout>,
    cookie: u64,
}

/// The parse cache: where the layers start, in 14 bytes, so a `Packet`
/// stays a few words. Addresses and ports are read from the frame at these
/// offsets when asked for.
#[derive(Clone, Copy, Default)]
struct Layout {
    state: ParseState,
    /// 0: none, 4: IPv4, 6: IPv6.
    ip_version: u8,
    protocol: u8,
    l4: Option<L4>,
    ether_type: Option<u16>,
    ip_offset: u16,
    l4_offset: u16,
    payload_offset: u16,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum ParseState {
    #[default]
    NotYet,
    Malformed,
    Ok,
}

/// The network and transport headers of a packet, as far as they parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers {
    /// The EtherType of an Ethernet frame (after VLAN tags), `None` for IP heads.
    pub ether_type: Option<u16>,
    /// The IP layer, if the packet is IPv4 or IPv6.
    pub ip: Option<IpHeaders>,
    /// The transport layer, if it is UDP or TCP.
    pub transport: Option<Transport>,
}

/// The fields of an IPv4 or IPv6 header that filters commonly match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpHeaders {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Protocol (IPv4) or final next-header (IPv6) number, e.g. 17 for UDP.
    pub protocol: u8,
    /// Offset of the IP header in the frame.
    pub offset: usize,
}

/// A UDP or TCP header's ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport {
    /// `Udp` or `Tcp`.
    pub protocol: L4,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Offset of the transport payload in the frame.
    pub payload_offset: usize,
}

/// Transport protocols the parse cache understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L4 {
    /// UDP.
    Udp,
    /// TCP.
    Tcp,
}

impl<'a> Packet<'a> {
    /// An Ethernet frame received on interface 0, queue 0, verdict `Pass`.
    #[inline]
    pub fn new(frame: &'a mut [u8]) -> Self {
        Self::with_kind(frame, PacketKind::Ethernet)
    }

    /// A frame of the given kind: the kind of the head it will run on. A
    /// packet of another kind than its head is refused by the runner
    /// (dropped and counted in [`Registry::refused`](crate::Registry::refused)),
    /// never parsed as what it is not.
    #[inline]
    pub fn with_kind(frame: &'a mut [u8], kind: PacketKind) -> Self {
        Packet {
            frame,
            kind,
            ifindex: 0,
            queue: 0,
            verdict: Verdict::Pass,
            parsed: Cell::new(Layout::default()),
            cookie: 0,
        }
    }

    /// Record the ingress interface index and queue.
    #[inline]
    pub fn with_origin(mut self, ifindex: u32, queue: u32) -> Self {
        self.ifindex = ifindex;
        self.queue = queue;
        self
    }

    /// Attach the driver's handle for this frame (e.g. its UMEM address).
    /// A hook that returns [`Verdict::Consumed`] keeps the cookie to give
    /// that exact frame back to the driver later.
    #[inline]
    pub fn with_cookie(mut self, cookie: u64) -> Self {
        self.cookie = cookie;
        self
    }

    /// The driver's handle for this frame (0 if the driver set none).
    #[inline]
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// The frame bytes.
    #[inline]
    pub fn frame(&self) -> &[u8] {
        self.frame
    }

    /// The frame bytes, writable. Drops the parse cache, since the hook may
    /// change any header.
    #[inline]
    pub fn frame_mut(&mut self) -> &mut [u8] {
        self.parsed.set(Layout::default());
        self.frame
    }

    /// Frame length in bytes.
    #[inline]
    #[expect(
        clippy::len_without_is_empty,
        reason = "a frame is never looked at as a collection"
    )]
    pub fn len(&self) -> usize {
        self.frame.len()
    }

    /// What the frame starts with.
    #[inline]
    pub fn kind(&self) -> PacketKind {
        self.kind
    }

    /// Change the kind (drops the parse cache), e.g. to run a frame's IP
    /// packet on an IP head after its Ethernet head. The runner never
    /// changes a kind: it refuses packets whose kind is not the head's.
    #[inline]
    pub fn set_kind(&mut self, kind: PacketKind) {
        if self.kind != kind {
            self.kind = kind;
            self.parsed.set(Layout::default());
        }
    }

    /// Index of the interface the frame arrived on (0 if unknown).
    #[inline]
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Queue the frame arrived on.
    #[inline]
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// The verdict so far: `Pass` until a hook decided otherwise.
    #[inline]
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Set the verdict. Runners do this with what hooks return; a batch hook
    /// does it itself. Turning `Dropped`/`Consumed` back into `Pass` breaks
    /// the verdict contract: when a batch hook does it, the runner puts the
    /// final verdict back and counts it in
    /// [`witness::violations`](crate::witness::violations), with or without
    /// the `witness` feature. This method itself checks nothing.
    #[inline]
    pub fn set_verdict(&mut self, verdict: Verdict) {
        self.verdict = verdict;
    }

    /// Reset the verdict to `Pass` to run the packet again (e.g. on another head).
    #[inline]
    pub fn reset(&mut self) {
        self.verdict = Verdict::Pass;
    }

    /// The parsed headers, computed on first call and cached for this packet.
    /// `None` if the frame does not parse as its kind.
    pub fn headers(&self) -> Option<Headers> {
        let mut l = self.parsed.get();
        if l.state == ParseState::NotYet {
            l = parse(self.frame, self.kind);
            self.parsed.set(l);
        }
        if l.state != ParseState::Ok {
            return None;
        }
        let f = &*self.frame;
        let at = |o: usize| -> u16 { u16::from_be_bytes([f[o], f[o + 1]]) };
        let ip = match l.ip_version {
            4 => {
                let o = l.ip_offset as usize;
                let a =
                    |o: usize| IpAddr::from(<[u8; 4]>::try_from(&f[o..o + 4]).unwrap_or_default());
                Some(IpHeaders {
                    src: a(o + 12),
                    dst: a(o + 16),
                    protocol: l.protocol,
                    offset: o,
                })
            }
            6 => {
                let o = l.ip_offset as usize;
                let a = |o: usize| {
                    IpAddr::from(<[u8; 16]>::try_from(&f[o..o + 16]).unwrap_or_default())
                };
                Some(IpHeaders {
                    src: a(o + 8),
                    dst: a(o + 24),
                    protocol: l.protocol,
                    offset: o,
                })
            }
            _ => None,
        };
        let transport = l.l4.map(|protocol| {
            let o = l.l4_offset as usize;
            Transport {
                protocol,
                src_port: at(o),
                dst_port: at(o + 2),
                payload_offset: l.payload_offset as usize,
            }
        });
        Some(Headers {
            ether_type: l.ether_type,
            ip,
            transport,
        })
    }
}

impl fmt::Debug for Packet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("len", &self.frame.len())
            .field("kind", &self.kind)
            .field("ifindex", &self.ifindex)
            .field("queue", &self.queue)
            .field("verdict", &self.verdict)
            .field("cookie", &self.cookie)
            .finish()
    }
}

/// Offset of `inner` inside `outer` (both from the same frame).
fn offset_in(outer: &[u8], inner: &[u8]) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}

/// Offset as stored in the cache (frames are far below 64 KiB).
fn off(outer: &[u8], inner: &[u8]) -> u16 {
    u16::try_from(offset_in(outer, inner)).unwrap_or(u16::MAX)
}

#[cold]
fn parse(frame: &[u8], kind: PacketKind) -> Layout {
    let malformed = Layout {
        state: ParseState::Malformed,
        ..Layout::default()
    };
    if frame.len() > usize::from(u16::MAX) {
        return malformed;
    }
    let sliced = match kind {
        PacketKind::Ethernet => SlicedPacket::from_ethernet(frame),
        PacketKind::Ipv4 | PacketKind::Ipv6 => SlicedPacket::from_ip(frame),
    };
    let Ok(sliced) = sliced else { return malformed };
    let mut l = Layout {
        state: ParseState::Ok,
        ..Layout::default()
    };
    if kind == PacketKind::Ethernet {
        l.ether_type = sliced.link.as_ref().and_then(|link| match link {
            etherparse::LinkSlice::Ethernet2(e) => Some(e.ether_type().0),
            _ => None,
        });
        if let Some(v) = &sliced.vlan {
            l.ether_type = Some(match v {
                etherparse::VlanSlice::SingleVlan(s) => s.ether_type().0,
                etherparse::VlanSlice::DoubleVlan(d) => d.inner().ether_type().0,
            });
        }
    }
    match &sliced.net {
        Some(NetSlice::Ipv4(v4)) => {
            l.ip_version = 4;
            l.protocol = v4.header().protocol().0;
            l.ip_offset = off(frame, v4.header().slice());
        }
        Some(NetSlice::Ipv6(v6)) => {
            l.ip_version = 6;
            l.protocol = v6.payload().ip_number.0;
            l.ip_offset = off(frame, v6.header().slice());
        }
        _ => {}
    }
    match &sliced.transport {
        Some(TransportSlice::Udp(u)) => {
            l.l4 = Some(L4::Udp);
            l.l4_offset = off(frame, u.slice());
            l.payload_offset = off(frame, u.payload());
        }
        Some(TransportSlice::Tcp(t)) => {
            l.l4 = Some(L4::Tcp);
            l.l4_offset = off(frame, t.slice());
            l.payload_offset = off(frame, t.payload());
        }
        _ => {}
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    #[test]
    fn parse_cache_is_14_bytes() {
        // As the docs of `Layout` say.
        assert_eq!(std::mem::size_of::<Layout>(), 14);
    }

    fn udp_frame(dst_port: u16, payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(4000, dst_port);
        let mut v = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut v, payload).unwrap();
        v
    }

    #[test]
    fn udp_headers_parse_and_cache() {
        let mut f = udp_frame(53, b"hello");
        let p = Packet::new(&mut f).with_origin(7, 3);
        let h = p.headers().unwrap();
        assert_eq!(h.ether_type, Some(0x0800));
        let ip = h.ip.unwrap();
        assert_eq!(ip.src, "198.18.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(ip.protocol, 17);
        assert_eq!(ip.offset, 14);
        let t = h.transport.unwrap();
        assert_eq!((t.protocol, t.src_port, t.dst_port), (L4::Udp, 4000, 53));
        assert_eq!(&p.frame()[t.payload_offset..], b"hello");
        assert_eq!((p.ifindex(), p.queue()), (7, 3));
        assert!(p.parsed.get().state == ParseState::Ok);
    }

    #[test]
    fn rewriting_the_frame_drops_the_cache() {
        let mut f = udp_frame(53, b"x");
        let mut p = Packet::new(&mut f);
        assert_eq!(p.headers().unwrap().transport.unwrap().dst_port, 53);
        // UDP destination port lives at 14 + 20 + 2.
        p.frame_mut()[36..38].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(p.headers().unwrap().transport.unwrap().dst_port, 80);
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        let mut f = vec![0xffu8; 9];
        let p = Packet::new(&mut f);
        assert_eq!(p.headers(), None);
        let mut f = vec![];
        assert_eq!(Packet::with_kind(&mut f, PacketKind::Ipv4).headers(), None);
    }

    #[test]
    fn ip_kind_heads_parse_from_the_ip_header() {
        let b = PacketBuilder::ipv6([0x20; 16], [0x21; 16], 8).tcp(1, 2, 3, 4);
        let mut v = Vec::new();
        b.write(&mut v, b"").unwrap();
        let p = Packet::with_kind(&mut v, PacketKind::Ipv6);
        let h = p.headers().unwrap();
        assert_eq!(h.ether_type, None);
        assert_eq!(h.ip.unwrap().protocol, 6);
        assert_eq!(h.transport.unwrap().protocol, L4::Tcp);
    }
}
