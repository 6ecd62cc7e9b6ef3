//! What a packet is to the tracker: its flow key (the 5-tuple normalised
//! for direction), its TCP segment fields, or the flow an ICMP error
//! quotes. Everything is read from the frame with bounds checks: a
//! truncated or malformed packet is [`Class::Invalid`], never a panic.

use pfil::{Packet, L4};

use super::tcp::Seg;
use super::Invalid;

/// A flow's key: the two endpoints in a fixed order (the lower address,
/// then port, first), so that both directions of a flow have one key.
/// IPv4 addresses are in the first 4 bytes of their 16. ICMP echo flows
/// use the echo identifier as both ports and say which side sends the
/// requests (two hosts may ping each other with one identifier: two
/// flows); other protocols (and ICMP that is neither echo nor an error)
/// use ports 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// The lower endpoint's address.
    pub a: [u8; 16],
    /// The higher endpoint's address.
    pub b: [u8; 16],
    /// The lower endpoint's port.
    pub pa: u16,
    /// The higher endpoint's port.
    pub pb: u16,
    /// IP protocol (IPv6: the final next header).
    pub proto: u8,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// An ICMP echo flow whose requests the `b` side sends.
    pub echo_b: bool,
    /// An ICMP echo flow (keyed by its identifier): apart from the
    /// address pair's flow of other ICMP messages, whose ports are 0 as
    /// an echo of identifier 0's are.
    pub echo: bool,
}

impl FlowKey {
    /// The key of a packet from `src:sp` to `dst:dp`, and whether `src`
    /// is the key's `a` side.
    pub fn new(
        src: [u8; 16],
        sp: u16,
        dst: [u8; 16],
        dp: u16,
        proto: u8,
        v6: bool,
    ) -> (FlowKey, bool) {
        let src_is_a = (src, sp) <= (dst, dp);
        let (a, pa, b, pb) = if src_is_a {
            (src, sp, dst, dp)
        } else {
            (dst, dp, src, sp)
        };
        (
            FlowKey {
                a,
                b,
                pa,
                pb,
                proto,
                v6,
                echo_b: false,
                echo: false,
            },
            src_is_a,
        )
    }

    /// The key of an ICMP echo flow of identifier `id` whose requests
    /// `requester` sends to `responder`, and whether the packet's source
    /// (the requester for a request, else the responder) is the key's
    /// `a` side.
    pub fn echo(
        requester: [u8; 16],
        responder: [u8; 16],
        id: u16,
        proto: u8,
        v6: bool,
        request: bool,
    ) -> (FlowKey, bool) {
        let (mut k, requester_a) = FlowKey::new(requester, id, responder, id, proto, v6);
        k.echo_b = !requester_a;
        k.echo = true;
        (k, requester_a == request)
    }

    /// [`FlowKey::echo`] of an echo message from `src` to `dst`: a
    /// request's sender is the requester, a reply's is the responder.
    pub(super) fn echo_of(
        src: [u8; 16],
        dst: [u8; 16],
        id: u16,
        proto: u8,
        v6: bool,
        request: bool,
    ) -> (FlowKey, bool) {
        let (requester, responder) = if request { (src, dst) } else { (dst, src) };
        FlowKey::echo(requester, responder, id, proto, v6, request)
    }

    /// The key of an IPv4 packet from `src:sp` to `dst:dp` (addresses in
    /// host order, as [`pfil::FiveTupleV4`] has them), and whether `src` is
    /// the key's `a` side: [`FlowKey::new`] with the addresses' bytes,
    /// compared as integers (the same order: big-endian bytes, zeros
    /// after).
    #[inline(always)]
    pub fn v4(src: u32, sp: u16, dst: u32, dp: u16, proto: u8) -> (FlowKey, bool) {
        // Without a branch: the direction of a scattered mix of flows is
        // a coin toss to a branch predictor (half the packets of a
        // 2-way exchange mispredicted it, callgrind --branch-sim).
        let (s, d) = (
            u64::from(src) << 16 | u64::from(sp),
            u64::from(dst) << 16 | u64::from(dp),
        );
        let src_is_a = s <= d;
        let swap = (s ^ d) & u64::from(src_is_a).wrapping_sub(1);
        let (lo, hi) = (s ^ swap, d ^ swap);
        let (a, pa, b, pb) = ((lo >> 16) as u32, lo as u16, (hi >> 16) as u32, hi as u16);
        let wide = |x: u32| (u128::from(x) << 96).to_be_bytes();
        (
            FlowKey {
                a: wide(a),
                b: wide(b),
                pa,
                pb,
                proto,
                v6: false,
                echo_b: false,
                echo: false,
            },
            src_is_a,
        )
    }

    /// [`FlowKey::v4`]'s key as its [`words`](Self::words), without the
    /// key: the same words, made from the addresses and ports directly.
    #[inline(always)]
    pub fn v4_words(src: u32, sp: u16, dst: u32, dp: u16, proto: u8) -> ([u64; 5], bool) {
        let (s, d) = (
            u64::from(src) << 16 | u64::from(sp),
            u64::from(dst) << 16 | u64::from(dp),
        );
        let src_is_a = s <= d;
        let swap = (s ^ d) & u64::from(src_is_a).wrapping_sub(1);
        let (lo, hi) = (s ^ swap, d ^ swap);
        // An IPv4 address's word: its 4 bytes in network order, zeros after.
        let word = |x: u64| {
            let [a, b, c, d] = ((x >> 16) as u32).to_be_bytes();
            u64::from_ne_bytes([a, b, c, d, 0, 0, 0, 0])
        };
        (
            [
                word(lo),
                0,
                word(hi),
                0,
                (lo & 0xffff) | (hi & 0xffff) << 16 | u64::from(proto) << 32,
            ],
            src_is_a,
        )
    }

    /// The key as five words (for hashing).
    #[inline]
    pub fn words(&self) -> [u64; 5] {
        let w = |x: &[u8; 16], i: usize| {
            u64::from_ne_bytes([
                x[i],
                x[i + 1],
                x[i + 2],
                x[i + 3],
                x[i + 4],
                x[i + 5],
                x[i + 6],
                x[i + 7],
            ])
        };
        [
            w(&self.a, 0),
            w(&self.a, 8),
            w(&self.b, 0),
            w(&self.b, 8),
            u64::from(self.pa)
                | u64::from(self.pb) << 16
                | u64::from(self.proto) << 32
                | u64::from(self.v6) << 40
                | u64::from(self.echo_b) << 41
                | u64::from(self.echo) << 42,
        ]
    }

    /// The key whose [`words`](Self::words) are `w` (the fifth word's
    /// bits from 43 up ignored).
    pub fn from_words(w: [u64; 5]) -> FlowKey {
        let addr = |lo: u64, hi: u64| {
            let mut x = [0u8; 16];
            x[..8].copy_from_slice(&lo.to_ne_bytes());
            x[8..].copy_from_slice(&hi.to_ne_bytes());
            x
        };
        FlowKey {
            a: addr(w[0], w[1]),
            b: addr(w[2], w[3]),
            pa: w[4] as u16,
            pb: (w[4] >> 16) as u16,
            proto: (w[4] >> 32) as u8,
            v6: (w[4] >> 40) & 1 != 0,
            echo_b: (w[4] >> 41) & 1 != 0,
            echo: (w[4] >> 42) & 1 != 0,
        }
    }

    /// An endpoint's address as text.
    pub fn addr(&self, b_side: bool) -> std::net::IpAddr {
        let x = if b_side { self.b } else { self.a };
        if self.v6 {
            std::net::IpAddr::from(x)
        } else {
            std::net::IpAddr::from([x[0], x[1], x[2], x[3]])
        }
    }
}

/// What the transport layer adds to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A TCP segment.
    Tcp(Seg),
    /// UDP.
    Udp,
    /// An ICMP or ICMPv6 echo request.
    EchoRequest,
    /// An ICMP or ICMPv6 echo reply.
    EchoReply,
    /// Anything else, tracked by its addresses and protocol.
    Other,
}

/// What a packet is to the tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A packet of a flow: its key, whether its source is the key's `a`
    /// side, and what it carries.
    Flow(FlowKey, bool, Kind),
    /// An ICMP error quoting a packet of flow `key`, sent from the key's
    /// `a` side if the bool is set.
    Error(FlowKey, bool),
    /// Not trackable: not IP, or an IP fragment (not reassembled).
    Untracked,
    /// Malformed or truncated.
    Invalid(Invalid),
}

fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(f.get(at..at + 2)?.try_into().ok()?))
}

fn be32(f: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(f.get(at..at + 4)?.try_into().ok()?))
}

fn addr(f: &[u8], at: usize, v6: bool) -> Option<[u8; 16]> {
    let mut a = [0u8; 16];
    let n = if v6 { 16 } else { 4 };
    a[..n].copy_from_slice(f.get(at..at + n)?);
    Some(a)
}

/// Whether ICMP (`v6` false) or ICMPv6 type `t` is an error message.
fn is_error(t: u8, v6: bool) -> bool {
    if v6 {
        // RFC 4443: types 0-127 are errors.
        t < 128
    } else {
        matches!(t, 3 | 4 | 5 | 11 | 12)
    }
}

/// Echo request and reply types.
fn echo(v6: bool) -> (u8, u8) {
    if v6 {
        (128, 129)
    } else {
        (8, 0)
    }
}

/// Classify a packet.
#[inline]
pub fn classify(p: &Packet<'_>) -> Class {
    // The commonest shape, untagged Ethernet, IPv4 without options, not a
    // fragment, UDP or TCP: its 5-tuple is cached in the packet, every
    // check below is already made (the IP packet holds the transport
    // header and fits in the frame), and the TCP fields are at fixed
    // offsets.
    if let Some(t) = p.plain_five_tuple_v4() {
        let (k, a) = FlowKey::v4(t.src, t.src_port, t.dst, t.dst_port, t.protocol);
        if t.protocol == 17 {
            return Class::Flow(k, a, Kind::Udp);
        }
        let f = p.frame();
        let end = be16(f, 16).map_or(0, |l| 14 + usize::from(l));
        return match tcp_seg(f, 34, end.min(f.len())) {
            Some(seg) if t.protocol == 6 => Class::Flow(k, a, Kind::Tcp(seg)),
            _ => classify_general(p),
        };
    }
    classify_general(p)
}

/// The flow of a plain frame (untagged Ethernet, IPv4 without options,
/// not a fragment, UDP or TCP with a whole header: [`classify`]'s fast
/// path) as its key's [`FlowKey::words`], whether the source is the
/// key's `a` side, and what it carries; `None` for any other shape. The
/// key itself is not built: a lookup compares and hashes words.
#[inline(always)]
pub(super) fn plain_v4(p: &Packet<'_>) -> Option<([u64; 5], bool, Kind)> {
    let t = p.plain_five_tuple_v4()?;
    let (w, a) = FlowKey::v4_words(t.src, t.src_port, t.dst, t.dst_port, t.protocol);
    Some((w, a, plain_v4_kind(p, t.protocol)?))
}

/// The [`Kind`] of a plain IPv4 packet of protocol `proto` (one
/// [`Packet::plain_five_tuple_v4`] reads), as [`plain_v4`] gives it: UDP,
/// or TCP with its segment read; `None` for another protocol or a TCP
/// segment it refuses.
#[inline(always)]
pub(super) fn plain_v4_kind(p: &Packet<'_>, proto: u8) -> Option<Kind> {
    if proto == 17 {
        return Some(Kind::Udp);
    }
    if proto != 6 {
        return None;
    }
    let f = p.frame();
    let end = be16(f, 16).map_or(0, |l| 14 + usize::from(l));
    Some(Kind::Tcp(tcp_seg(f, 34, end.min(f.len()))?))
}

/// [`plain_v4`]'s key words, side and protocol (its TCP segment not read):
/// what a batch hashes ahead of tracking the packet. `Some` for every
/// packet `plain_v4` takes, and for a TCP one whose segment it would
/// refuse (the tracking finds that out).
#[inline(always)]
pub(super) fn plain_v4_key(p: &Packet<'_>) -> Option<([u64; 5], bool, u8)> {
    let t = p.plain_five_tuple_v4()?;
    if t.protocol != 17 && t.protocol != 6 {
        return None;
    }
    let (w, a) = FlowKey::v4_words(t.src, t.src_port, t.dst, t.dst_port, t.protocol);
    Some((w, a, t.protocol))
}

/// [`classify`] of any shape.
#[inline(never)]
pub(super) fn classify_general(p: &Packet<'_>) -> Class {
    let Some(v) = p.parsed() else {
        // Unparseable: invalid if it claims to be IP, else untracked.
        return match p.kind() {
            pfil::PacketKind::Ethernet => {
                let f = p.frame();
                match be16(f, 12) {
                    Some(0x0800 | 0x86dd) => Class::Invalid(Invalid::Malformed),
                    _ => Class::Untracked,
                }
            }
            _ => Class::Invalid(Invalid::Malformed),
        };
    };
    let f = v.frame();
    let (Some(ip), Some(ver)) = (v.ip_offset(), v.ip_version()) else {
        return match v.ether_type() {
            Some(0x0800 | 0x86dd) => Class::Invalid(Invalid::Malformed),
            _ => Class::Untracked,
        };
    };
    let v6 = ver == 6;
    let (Some(src), Some(dst)) = (
        addr(f, ip + if v6 { 8 } else { 12 }, v6),
        addr(f, ip + if v6 { 24 } else { 16 }, v6),
    ) else {
        return Class::Invalid(Invalid::Malformed);
    };
    let proto = v.protocol().unwrap_or(0);
    // Where the IP packet ends (padding after it is not payload).
    let ip_end = if v6 {
        be16(f, ip + 4).map(|l| ip + 40 + usize::from(l))
    } else {
        be16(f, ip + 2).map(|l| ip + usize::from(l))
    };
    let Some(ip_end) = ip_end.filter(|&e| e <= f.len()) else {
        return Class::Invalid(Invalid::Malformed);
    };
    let Some(l4) = v.l4() else {
        let fragment = if v6 {
            proto == 44
        } else {
            be16(f, ip + 6).is_some_and(|x| x & 0x3fff != 0)
        };
        if fragment {
            return Class::Untracked;
        }
        if matches!(proto, 1 | 6 | 17 | 58) {
            return Class::Invalid(Invalid::Malformed);
        }
        let (k, a) = FlowKey::new(src, 0, dst, 0, proto, v6);
        return Class::Flow(k, a, Kind::Other);
    };
    let Some(t) = v.l4_offset() else {
        return Class::Invalid(Invalid::Malformed);
    };
    match l4 {
        L4::Udp => {
            let (Some(sp), Some(dp)) = (be16(f, t), be16(f, t + 2)) else {
                return Class::Invalid(Invalid::Malformed);
            };
            if t + 8 > ip_end {
                return Class::Invalid(Invalid::Malformed);
            }
            let (k, a) = FlowKey::new(src, sp, dst, dp, proto, v6);
            Class::Flow(k, a, Kind::Udp)
        }
        L4::Tcp => {
            let Some(seg) = tcp_seg(f, t, ip_end) else {
                return Class::Invalid(Invalid::Malformed);
            };
            let (Some(sp), Some(dp)) = (be16(f, t), be16(f, t + 2)) else {
                return Class::Invalid(Invalid::Malformed);
            };
            let (k, a) = FlowKey::new(src, sp, dst, dp, proto, v6);
            Class::Flow(k, a, Kind::Tcp(seg))
        }
        L4::Icmpv4 | L4::Icmpv6 => {
            let icmp6 = l4 == L4::Icmpv6;
            if icmp6 != v6 {
                // ICMPv6 in IPv4 or ICMP in IPv6: no such flow (pf drops
                // it, Linux calls it invalid).
                return Class::Invalid(Invalid::Malformed);
            }
            let (Some(&ty), Some(_code)) = (f.get(t), f.get(t + 1)) else {
                return Class::Invalid(Invalid::Malformed);
            };
            if t + 8 > ip_end {
                return Class::Invalid(Invalid::Malformed);
            }
            let (req, rep) = echo(icmp6);
            if ty == req || ty == rep {
                let Some(id) = be16(f, t + 4) else {
                    return Class::Invalid(Invalid::Malformed);
                };
                let request = ty == req;
                let (k, a) = FlowKey::echo_of(src, dst, id, proto, v6, request);
                let kind = if request {
                    Kind::EchoRequest
                } else {
                    Kind::EchoReply
                };
                return Class::Flow(k, a, kind);
            }
            if is_error(ty, icmp6) {
                return quoted(&f[..ip_end], t + 8, src, dst);
            }
            let (k, a) = FlowKey::new(src, 0, dst, 0, proto, v6);
            Class::Flow(k, a, Kind::Other)
        }
        _ => {
            let (k, a) = FlowKey::new(src, 0, dst, 0, proto, v6);
            Class::Flow(k, a, Kind::Other)
        }
    }
}

/// The TCP segment at `t` of an IP packet ending at `end`.
fn tcp_seg(f: &[u8], t: usize, end: usize) -> Option<Seg> {
    let hl = usize::from(*f.get(t + 12)? >> 4) * 4;
    if hl < 20 || t + hl > end {
        return None;
    }
    let flags = *f.get(t + 13)?;
    let mut wscale = None;
    if flags & super::tcp::SYN != 0 {
        wscale = window_scale(f.get(t + 20..t + hl)?);
    }
    Some(Seg {
        flags,
        seq: be32(f, t + 4)?,
        ack: be32(f, t + 8)?,
        win: be16(f, t + 14)?,
        len: u32::try_from(end - t - hl).ok()?,
        wscale,
    })
}

/// The window scale option of a SYN's options, if present (at most 14).
fn window_scale(mut o: &[u8]) -> Option<u8> {
    while let Some(&kind) = o.first() {
        match kind {
            0 => return None,
            1 => o = &o[1..],
            _ => {
                let len = usize::from(*o.get(1)?).max(2);
                if kind == 3 && len == 3 {
                    return Some((*o.get(2)?).min(14));
                }
                o = o.get(len..)?;
            }
        }
    }
    None
}

/// The flow an ICMP error (sent from `src` to `dst`) quotes, from the
/// quoted IP header at `q`: the quoted packet went from the flow's
/// endpoint `dst` (the error goes back to it) to the other. IPv6
/// extension headers of the quoted packet are skipped (as Linux's
/// `ipv6_skip_exthdr` and pf do); a quoted later fragment (IPv4 or IPv6)
/// has no transport header to relate it by: malformed.
fn quoted(f: &[u8], q: usize, src: [u8; 16], dst: [u8; 16]) -> Class {
    let _ = src;
    let bad = Class::Invalid(Invalid::Malformed);
    let Some(&vb) = f.get(q) else { return bad };
    let v6 = vb >> 4 == 6;
    let (qsrc, qdst, proto, l4) = match vb >> 4 {
        4 => {
            let ihl = usize::from(vb & 15) * 4;
            let (Some(s), Some(d), Some(&p), Some(frag)) = (
                addr(f, q + 12, false),
                addr(f, q + 16, false),
                f.get(q + 9),
                be16(f, q + 6),
            ) else {
                return bad;
            };
            if ihl < 20 || frag & 0x1fff != 0 {
                return bad;
            }
            (s, d, p, q + ihl)
        }
        6 => {
            let (Some(s), Some(d), Some(&p)) =
                (addr(f, q + 8, true), addr(f, q + 24, true), f.get(q + 6))
            else {
                return bad;
            };
            let Some((p, l4)) = skip_v6_ext(f, p, q + 40) else {
                return bad;
            };
            (s, d, p, l4)
        }
        _ => return bad,
    };
    // The error goes back to the quoted packet's sender.
    if qsrc != dst {
        return Class::Invalid(Invalid::IcmpMismatch);
    }
    let (k, a) = match proto {
        6 | 17 => {
            let (Some(sp), Some(dp)) = (be16(f, l4), be16(f, l4 + 2)) else {
                return bad;
            };
            FlowKey::new(qsrc, sp, qdst, dp, proto, v6)
        }
        1 | 58 => {
            let Some(&ty) = f.get(l4) else {
                return bad;
            };
            let (req, rep) = echo(proto == 58);
            if ty == req || ty == rep {
                let Some(id) = be16(f, l4 + 4) else {
                    return bad;
                };
                FlowKey::echo_of(qsrc, qdst, id, proto, v6, ty == req)
            } else if is_error(ty, proto == 58) {
                // An error about an error: nothing to relate it to.
                return Class::Invalid(Invalid::NoState);
            } else {
                // Other ICMP (a timestamp request...): its address pair's
                // flow, as the hook tracks such messages.
                FlowKey::new(qsrc, 0, qdst, 0, proto, v6)
            }
        }
        _ => FlowKey::new(qsrc, 0, qdst, 0, proto, v6),
    };
    Class::Error(k, a)
}

/// The transport protocol and its offset after IPv6 extension headers
/// starting with `next` at `at` (hop-by-hop, routing, destination
/// options, AH, and a first fragment's header), or `None` for a later
/// fragment or a header cut short. As many headers as the bytes hold, as
/// Linux's `ipv6_skip_exthdr` and pf's walk of a quoted packet take
/// them (each is at least 8 bytes: the walk ends with the frame).
fn skip_v6_ext(f: &[u8], mut next: u8, mut at: usize) -> Option<(u8, usize)> {
    loop {
        match next {
            0 | 43 | 60 => {
                let (&n, &len) = (f.get(at)?, f.get(at + 1)?);
                next = n;
                at += (usize::from(len) + 1) * 8;
            }
            51 => {
                let (&n, &len) = (f.get(at)?, f.get(at + 1)?);
                next = n;
                at += (usize::from(len) + 2) * 4;
            }
            44 => {
                if be16(f, at + 2)? & 0xfff8 != 0 {
                    return None;
                }
                next = *f.get(at)?;
                at += 8;
            }
            _ => return Some((next, at)),
        }
    }
}
