//! The packet a hook sees: the raw frame (mutable), where it came from, its
//! verdict so far, and headers parsed lazily and cached: common shapes
//! decoded at fixed offsets (`parse.rs`), the rest by etherparse, read in
//! place through [`Parsed`] (`view.rs`).

use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::mem::MaybeUninit;
use std::net::IpAddr;

use crate::{PacketKind, Verdict};

mod parse;
mod view;

pub use view::{FiveTupleV4, FiveTupleV6, Parsed};

/// One frame in a batch.
///
/// The driver builds a `Packet` over the frame bytes it owns (an AF_XDP UMEM
/// slot, a synthetic buffer), runs a head over a slice of them, then reads
/// each [`verdict`](Packet::verdict). Hooks read and may rewrite the bytes;
/// [`parsed`](Packet::parsed) (and [`headers`](Packet::headers)) parse once
/// per packet and only when asked, so hooks that don't parse don't pay for
/// it.
///
/// 64 bytes and aligned to 64: one cache line, never two. (Aligned to 8,
/// where a packet sat on the stack decided how fast a first look was, by
/// the stores that straddled two lines: 1.39-1.61x the fixed-offset
/// extraction with the stack moved 16 bytes at a time, 1.34-1.40x aligned.)
#[repr(align(64))]
pub struct Packet<'a> {
    frame: &'a mut [u8],
    kind: PacketKind,
    ifindex: u32,
    queue: u32,
    verdict: Verdict,
    /// The parse cache: a [`Layout`] as its [`word`](Layout::word).
    parsed: Cell<u64>,
    /// The 5-tuple of a plain frame, valid while `parsed` has
    /// [`LINK_TUPLE`]: the plain decoder's parse stores it
    /// ([`Packet::set_plain`]; a plain layout from another path, or from
    /// [`Packet::udp_dst_port`]'s first look, gets it on the first 5-tuple
    /// read), so a cached [`five_tuple_v4`](Packet::five_tuple_v4)
    /// is one bit test, and [`plain_five_tuple_v4`](Packet::plain_five_tuple_v4)
    /// lends it in place. The bytes of a [`FiveTupleV4`], as
    /// [`FiveTupleV4::words`] makes them; left uninitialised until then, so
    /// that a packet nobody parses costs nothing more to build.
    ///
    /// Written only while the bit is clear (through `&self`, by
    /// [`Packet::set_plain`]), and the bit is cleared only through
    /// `&mut self`: so a `&FiveTupleV4` lent while the bit is set, which
    /// borrows the packet, never sees a write.
    tuple: UnsafeCell<MaybeUninit<[u64; 2]>>,
    cookie: u64,
    /// The mark ([`Packet::mark`]): metadata a hook writes for later ones.
    mark: u32,
    /// The connection-tracking annotation ([`Packet::ct`]): bits 0..=2 a
    /// [`CtState`], bit 7 the reply direction. 0: untracked.
    ct: u8,
}

/// The connection state a tracker (the `ct` hook) gave a packet, in
/// netfilter's words ([`Packet::ct`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CtState {
    /// No tracker looked at the packet (the state of every packet until
    /// one does).
    #[default]
    Untracked = 0,
    /// The packet starts a flow, or belongs to one that has not seen a
    /// packet in the reply direction yet.
    New = 1,
    /// The packet belongs to a flow that has seen packets both ways.
    Established = 2,
    /// An ICMP error about a tracked flow (it quotes that flow's packet).
    Related = 3,
    /// The tracker could not place the packet: malformed or truncated,
    /// outside the TCP window, a reply to nothing, or no room to track it.
    Invalid = 4,
}

impl CtState {
    /// The state of code `c` (the low 3 bits of the packet's annotation).
    #[inline]
    const fn from_bits(c: u8) -> CtState {
        match c & 7 {
            1 => CtState::New,
            2 => CtState::Established,
            3 => CtState::Related,
            4 => CtState::Invalid,
            _ => CtState::Untracked,
        }
    }

    /// The state's name as rules write it: `untracked`, `new`,
    /// `established`, `related`, `invalid`.
    pub const fn name(self) -> &'static str {
        match self {
            CtState::Untracked => "untracked",
            CtState::New => "new",
            CtState::Established => "established",
            CtState::Related => "related",
            CtState::Invalid => "invalid",
        }
    }
}

impl fmt::Display for CtState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Bit of [`Packet`]'s `ct` byte: the packet goes in the reply direction.
const CT_REPLY: u8 = 0x80;

/// The parse cache, 8 bytes (one register, one load; the packet holds it as
/// one word, [`Layout::word`]): what the layers are and where the transport
/// header starts. (With the 16-byte 5-tuple of plain frames beside it, a
/// `Packet` is 64 bytes, one cache line.) The IP header starts right after the link header (14 bytes and 4
/// per VLAN tag; 0 on IP heads), the transport payload after the transport
/// header; addresses, ports, flags and ICMP type/code are read from the
/// frame at these offsets when asked for (one bounds check each), never
/// copied or rebuilt.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
#[repr(C, align(8))]
struct Layout {
    /// Bit 0: an Ethernet header was parsed (`ether_type` is valid); bits
    /// 1..=2: VLAN tags (0, 1 or 2); bit 5: in a packet's cached word only,
    /// the packet holds the 5-tuple ([`LINK_TUPLE`]); bit 6: malformed;
    /// bit 7: parsed. 0: not parsed yet.
    link: u8,
    /// 0: none, 4: IPv4, 6: IPv6.
    ip_version: u8,
    /// IPv4 protocol or IPv6 final next header (after extension headers).
    protocol: u8,
    /// The transport layer, as [`L4::code`].
    l4: u8,
    /// The EtherType after the VLAN tags, if `link & 1`.
    ether_type: u16,
    /// Where the transport header starts, if `l4 != 0`.
    l4_offset: u16,
}

const LINK_ETHERNET: u8 = 1;
/// In a packet's cached word only (never in a parsed [`Layout`]): the
/// layout is plain ([`Layout::is_plain_ipv4_word`]) and the packet holds
/// its 5-tuple.
const LINK_TUPLE: u8 = 1 << 5;
const LINK_MALFORMED: u8 = 1 << 6;
const LINK_OK: u8 = 1 << 7;

impl Layout {
    /// Where the cache stands.
    #[inline(always)]
    fn state(&self) -> ParseState {
        if self.link & LINK_OK != 0 {
            ParseState::Ok
        } else if self.link & LINK_MALFORMED != 0 {
            ParseState::Malformed
        } else {
            ParseState::NotYet
        }
    }

    /// Whether the layout whose [`word`](Self::word) is `w` is untagged
    /// Ethernet, IPv4 with a 20-byte header, UDP or TCP: the 5-tuple at
    /// fixed offsets (whichever path parsed it).
    #[inline(always)]
    fn is_plain_ipv4_word(w: u64) -> bool {
        w == PLAIN_UDP || w == PLAIN_TCP
    }

    /// The layout whose [`word`](Self::word) is `w`.
    #[inline(always)]
    const fn from_word(w: u64) -> Layout {
        let b = w.to_le_bytes();
        Layout {
            link: b[0],
            ip_version: b[1],
            protocol: b[2],
            l4: b[3],
            ether_type: u16::from_le_bytes([b[4], b[5]]),
            l4_offset: u16::from_le_bytes([b[6], b[7]]),
        }
    }

    /// The layout as one 64-bit word (its fields in memory order), for
    /// whole-layout compares.
    #[inline(always)]
    const fn word(&self) -> u64 {
        let [e0, e1] = self.ether_type.to_le_bytes();
        let [o0, o1] = self.l4_offset.to_le_bytes();
        u64::from_le_bytes([
            self.link,
            self.ip_version,
            self.protocol,
            self.l4,
            e0,
            e1,
            o0,
            o1,
        ])
    }

    /// The layout of an untagged Ethernet frame with a 20-byte IPv4 header
    /// and `protocol`'s transport header.
    const fn plain_ipv4(protocol: u8, l4: u8) -> Layout {
        Layout {
            link: LINK_OK | LINK_ETHERNET,
            ip_version: 4,
            protocol,
            l4,
            ether_type: 0x0800,
            l4_offset: 34,
        }
    }

    /// VLAN tags before the EtherType.
    #[inline(always)]
    fn tags(&self) -> u8 {
        (self.link >> 1) & 3
    }

    /// Where the IP header starts (if there is one): right after the
    /// Ethernet header and its tags, or at 0 on an IP head.
    #[inline(always)]
    fn ip_offset(&self) -> usize {
        if self.link & LINK_ETHERNET != 0 {
            14 + 4 * usize::from(self.tags())
        } else {
            0
        }
    }
}

#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
enum ParseState {
    #[default]
    NotYet,
    Malformed,
    Ok,
}

/// The network and transport headers of a packet, as far as they parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
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
#[non_exhaustive]
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

/// Transport protocols the parse cache understands. More may come (match
/// with a `_` arm): ICMP and ICMPv6 came after UDP and TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum L4 {
    /// UDP.
    Udp,
    /// TCP.
    Tcp,
    /// ICMP (protocol 1, over IPv4 or, as etherparse allows, IPv6).
    Icmpv4,
    /// ICMPv6 (next header 58, over IPv6 or IPv4).
    Icmpv6,
}

impl L4 {
    /// The cache's code for `l4` (0: none).
    #[inline]
    const fn code(l4: Option<L4>) -> u8 {
        match l4 {
            None => 0,
            Some(L4::Udp) => 1,
            Some(L4::Tcp) => 2,
            Some(L4::Icmpv4) => 3,
            Some(L4::Icmpv6) => 4,
        }
    }

    #[inline]
    const fn from_code(code: u8) -> Option<L4> {
        match code {
            1 => Some(L4::Udp),
            2 => Some(L4::Tcp),
            3 => Some(L4::Icmpv4),
            4 => Some(L4::Icmpv6),
            _ => None,
        }
    }
}

const L4_UDP: u8 = L4::code(Some(L4::Udp));
const L4_TCP: u8 = L4::code(Some(L4::Tcp));
/// [`Layout::word`] of a plain (untagged, 20-byte IPv4 header) UDP and TCP
/// frame.
const PLAIN_UDP: u64 = Layout::plain_ipv4(17, L4_UDP).word();
const PLAIN_TCP: u64 = Layout::plain_ipv4(6, L4_TCP).word();
/// [`LINK_TUPLE`] as a bit of the cached word.
const TUPLE: u64 = LINK_TUPLE as u64;
const L4_ICMPV4: u8 = L4::code(Some(L4::Icmpv4));

/// The 5-tuple of a plain frame (UDP or TCP right after a 20-byte IPv4
/// header after an untagged Ethernet header) from its first 42 bytes, as
/// [`FiveTupleV4::words`] makes them: both addresses in one big-endian
/// 8-byte read, both ports in one 4-byte read, and the protocol byte. On a
/// little-endian CPU, a byte swap and a rotate each (the addresses swap
/// halves, the ports too, each ending up in host order where
/// `FiveTupleV4` has it).
#[inline(always)]
fn plain_words(h: &[u8; 42]) -> [u64; 2] {
    let [a0, a1, a2, a3, a4, a5, a6, a7, p0, p1, p2, p3] =
        *h[26..].first_chunk::<12>().unwrap_or(&[0; 12]);
    let addrs = u64::from_be_bytes([a0, a1, a2, a3, a4, a5, a6, a7]);
    let ports = u32::from_be_bytes([p0, p1, p2, p3]);
    #[cfg(target_endian = "little")]
    let w = [
        addrs.rotate_left(32),
        u64::from(ports.rotate_left(16)) | u64::from(h[23]) << 32,
    ];
    #[cfg(not(target_endian = "little"))]
    let w = FiveTupleV4::words(
        (addrs >> 32) as u32,
        addrs as u32,
        (ports >> 16) as u16,
        ports as u16,
        h[23],
    );
    w
}
const L4_ICMPV6: u8 = L4::code(Some(L4::Icmpv6));

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
            parsed: Cell::new(0),
            tuple: UnsafeCell::new(MaybeUninit::uninit()),
            cookie: 0,
            mark: 0,
            ct: 0,
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
        self.parsed.set(0);
        self.frame
    }

    /// Narrow the frame to `frame[start..end]`: a hook removed bytes at
    /// the front or the back (an XDP program's `bpf_xdp_adjust_head` or
    /// `_tail`). Later hooks see the narrowed frame; drops the parse
    /// cache. Returns `false` and changes nothing when the range is not
    /// inside the frame.
    pub fn narrow(&mut self, start: usize, end: usize) -> bool {
        if start > end || end > self.frame.len() {
            return false;
        }
        self.parsed.set(0);
        let f = std::mem::take(&mut self.frame);
        self.frame = &mut f[start..end];
        true
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
            self.parsed.set(0);
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
    /// The metadata ([`mark`](Packet::mark), [`ct`](Packet::ct)) stays:
    /// [`clear_meta`](Packet::clear_meta) clears it.
    #[inline]
    pub fn reset(&mut self) {
        self.verdict = Verdict::Pass;
    }

    /// The packet's mark: a 32-bit value a hook sets
    /// ([`set_mark`](Packet::set_mark)) for later hooks of the same walk
    /// (and the driver) to read, as `skb->mark` or a pf tag. 0 until a
    /// hook sets one. The registry never reads or changes it.
    #[inline]
    pub fn mark(&self) -> u32 {
        self.mark
    }

    /// Set the packet's mark ([`mark`](Packet::mark)).
    #[inline]
    pub fn set_mark(&mut self, mark: u32) {
        self.mark = mark;
    }

    /// The connection state a tracker gave the packet, and whether the
    /// packet goes in the reply direction of its flow (`false` for the
    /// original direction, and for an untracked packet):
    /// `(CtState::Untracked, false)` until a tracker (the `ct` hook)
    /// sets it with [`set_ct`](Packet::set_ct). Later hooks of the same
    /// walk read it (the `acl`'s `ct state` and `ct dir` matches).
    #[inline]
    pub fn ct(&self) -> (CtState, bool) {
        (CtState::from_bits(self.ct), self.ct & CT_REPLY != 0)
    }

    /// The connection state alone ([`ct`](Packet::ct)).
    #[inline]
    pub fn ct_state(&self) -> CtState {
        CtState::from_bits(self.ct)
    }

    /// The annotation as one byte: the [`CtState`] as its `repr(u8)`
    /// value (0..=4) in bits 0..=2, bit 7 set in the reply direction.
    /// For classifiers that index tables by it.
    #[inline]
    pub fn ct_bits(&self) -> u8 {
        self.ct
    }

    /// Record the connection state and direction ([`ct`](Packet::ct)).
    #[inline]
    pub fn set_ct(&mut self, state: CtState, reply: bool) {
        self.ct = state as u8 | if reply { CT_REPLY } else { 0 };
    }

    /// Clear the metadata: mark 0, untracked. A driver that runs a packet
    /// through a second, unrelated walk may call it; the runner never does.
    #[inline]
    pub fn clear_meta(&mut self) {
        self.mark = 0;
        self.ct = 0;
    }

    /// The parse cache, filled on first call. Always inlined: a cached
    /// read is an 8-byte load and a test.
    #[inline(always)]
    fn layout(&self) -> Layout {
        let l = Layout::from_word(self.parsed.get());
        if l.state() != ParseState::NotYet {
            return l;
        }
        self.parse_now()
    }

    /// Fill the parse cache (and, for a plain frame, the 5-tuple).
    #[inline]
    fn parse_now(&self) -> Layout {
        if self.kind == PacketKind::Ethernet {
            if let Some((l, h)) = parse::fast::ethernet_ipv4_plain(self.frame) {
                self.set_plain(l, h);
                return l;
            }
        }
        let l = parse::parse_general(self.frame, self.kind);
        debug_assert_eq!(l.link & LINK_TUPLE, 0, "a parsed layout with LINK_TUPLE");
        // Masked too in release builds: the bit is the tuple's validity,
        // which only `set_plain` may claim.
        let l = Layout {
            link: l.link & !LINK_TUPLE,
            ..l
        };
        // A plain layout from here (a UDP length of 0, which the plain
        // decoder declines and etherparse takes) gets its tuple stored by
        // the first 5-tuple read (`store_plain_tuple`).
        self.parsed.set(l.word());
        l
    }

    /// Cache the plain layout `l` and the 5-tuple at its fixed offsets in
    /// `h`, the frame's first 42 bytes; the tuple's words.
    #[inline(always)]
    fn set_plain(&self, l: Layout, h: &[u8; 42]) -> [u64; 2] {
        // Every caller found the word without the bit: a parse not made
        // yet, or a plain layout cached without its tuple.
        debug_assert!(!self.has_tuple(), "a stored tuple written again");
        let w = plain_words(h);
        // SAFETY: `has_tuple` is false (every caller found the cached word
        // 0 or a plain layout without the bit, asserted above), so no
        // `&FiveTupleV4` into `tuple` is alive (`stored_tuple` lends one
        // only while the bit is set, and only `&mut self` clears it); the
        // packet is not `Sync`, so no other thread reads it either.
        unsafe { self.tuple.get().write(MaybeUninit::new(w)) };
        self.parsed.set(l.word() | TUPLE);
        w
    }

    /// Whether the packet holds the 5-tuple of a plain frame (the cache
    /// says so): one bit test.
    #[inline(always)]
    fn has_tuple(&self) -> bool {
        self.parsed.get() & TUPLE != 0
    }

    /// The words of the 5-tuple [`set_plain`](Self::set_plain) stored, if
    /// [`has_tuple`](Self::has_tuple).
    #[inline(always)]
    fn stored_words(&self) -> Option<[u64; 2]> {
        if !self.has_tuple() {
            return None;
        }
        // SAFETY: with the bit set, `tuple` is initialised (see
        // `stored_tuple`); reading a copy of it writes nothing.
        Some(unsafe { self.tuple.get().read().assume_init() })
    }

    /// The 5-tuple [`set_plain`](Self::set_plain) stored, in place, if
    /// [`has_tuple`](Self::has_tuple).
    #[inline(always)]
    fn stored_tuple(&self) -> Option<&FiveTupleV4> {
        if !self.has_tuple() {
            return None;
        }
        // SAFETY: `TUPLE` is set in the cached word only by `set_plain`,
        // right after it wrote `tuple` (the plain decoder's layouts never
        // carry the bit, `parse_now` clears it from the others), and every
        // other write of the word clears it; so with the bit set, `tuple`
        // holds the bytes `FiveTupleV4::words` made, which are a
        // `FiveTupleV4` (`repr(C)`, 16 bytes, align 4 <= 8: see
        // `FiveTupleV4::from_words`). `set_plain` writes `tuple` only while
        // the bit is clear and only `&mut self` clears it, so nothing
        // writes it while the returned borrow of `self` lives.
        Some(unsafe { &*self.tuple.get().cast::<FiveTupleV4>() })
    }

    /// The 5-tuple of a plain frame (untagged Ethernet, a 20-byte IPv4
    /// header, UDP or TCP: every field at a fixed offset), `None` for any
    /// other shape: the fast half of [`five_tuple_v4`](Self::five_tuple_v4),
    /// for callers that handle the other shapes themselves. Parses a
    /// packet not parsed yet.
    ///
    /// Lent in place, from the packet's copy: a cached read is a bit test,
    /// and the caller loads the fields it wants.
    #[inline(always)]
    pub fn plain_five_tuple_v4(&self) -> Option<&FiveTupleV4> {
        if self.stored_tuple().is_none()
            && self.first_look_words().is_none()
            && !self.store_plain_tuple()
        {
            return None;
        }
        self.stored_tuple()
    }

    /// For a packet parsed without its 5-tuple stored, or that the plain
    /// decoder declined: store the tuple if the frame is plain; whether it
    /// is.
    #[cold]
    #[inline(never)]
    fn store_plain_tuple(&self) -> bool {
        if self.parsed.get() == 0 {
            // Declined by the plain decoder (say, a UDP length of 0, which
            // etherparse takes), yet maybe plain: the whole parse decides.
            self.parse_now();
            if self.has_tuple() {
                return true;
            }
        }
        // Plain, parsed by another path than the plain decoder or first
        // looked at through `udp_dst_port`: store the tuple now.
        let w = self.parsed.get();
        match self.frame.first_chunk::<42>() {
            Some(h) if Layout::is_plain_ipv4_word(w) => {
                self.set_plain(Layout::from_word(w), h);
                true
            }
            _ => false,
        }
    }

    /// The parsed headers as a view that reads fields in place: the fast
    /// accessor for filters. Parses on first call (common shapes directly
    /// at fixed offsets, anything else through etherparse) and caches the
    /// layout in the packet; later calls cost a load of 8 bytes. `None` if
    /// the frame does not parse as its kind.
    #[inline(always)]
    pub fn parsed(&self) -> Option<Parsed<'_>> {
        let l = self.layout();
        (l.state() == ParseState::Ok).then_some(Parsed {
            frame: self.frame,
            l,
        })
    }

    /// On the first look at an untagged Ethernet/IPv4 UDP or TCP frame:
    /// parse it and hand back its layout and first 42 bytes, from which
    /// the caller reads its answer without another bounds check. The
    /// caller caches the layout (one store of the word, with or without
    /// the tuple's bit).
    #[inline(always)]
    fn first_look_plain(&self) -> Option<(Layout, &[u8; 42])> {
        if self.parsed.get() != 0 || self.kind != PacketKind::Ethernet {
            return None;
        }
        parse::fast::ethernet_ipv4_plain(self.frame)
    }

    /// [`first_look_plain`](Self::first_look_plain) that caches the
    /// 5-tuple too, and hands it back as [`FiveTupleV4::words`]' words.
    #[inline(always)]
    fn first_look_words(&self) -> Option<[u64; 2]> {
        let (l, h) = self.first_look_plain()?;
        Some(self.set_plain(l, h))
    }

    /// The destination port of a UDP packet (`None` for anything else):
    /// what a port filter asks, in one call. A first look caches the
    /// layout only (a later 5-tuple read stores the tuple then).
    #[inline(always)]
    pub fn udp_dst_port(&self) -> Option<u16> {
        if let Some((l, h)) = self.first_look_plain() {
            self.parsed.set(l.word());
            return (l.l4 == L4_UDP).then_some(u16::from_be_bytes([h[36], h[37]]));
        }
        let w = self.parsed.get();
        if w == PLAIN_UDP | TUPLE {
            return self.stored_tuple().map(|t| t.dst_port);
        }
        if w == PLAIN_UDP {
            if let Some(h) = self.frame.first_chunk::<38>() {
                return Some(u16::from_be_bytes([h[36], h[37]]));
            }
        }
        self.parsed()?.udp_dst_port()
    }

    /// Whether the packet, as parsed so far, is an untagged Ethernet frame
    /// with a 20-byte IPv4 header and UDP or TCP: the 5-tuple at fixed
    /// offsets, no VLAN tag, no IP options. One compare of the parse cache;
    /// false before the first parse (call it after, e.g.,
    /// [`five_tuple_v4`](Self::five_tuple_v4)).
    #[inline(always)]
    pub fn is_plain_ipv4(&self) -> bool {
        Layout::is_plain_ipv4_word(self.parsed.get() & !TUPLE)
    }

    /// The IPv4 5-tuple, if the packet is IPv4: what
    /// [`Parsed::five_tuple_v4`] answers, in one call. A plain frame's
    /// (untagged, 20-byte IPv4 header, UDP or TCP) is read from the header
    /// bytes in hand on the first look and from the packet's copy after.
    #[inline(always)]
    pub fn five_tuple_v4(&self) -> Option<FiveTupleV4> {
        // Every path gives the tuple's words, joined as words and stored
        // into the answer as two words. The first look's come from
        // registers, not read back from the two stores just made (a 16-byte
        // load of two 8-byte stores does not forward). The slow path answers
        // whether it stored a tuple, not the tuple: an
        // `Option<FiveTupleV4>` (20 bytes) from a call comes back through
        // memory, and merging it with the fast paths' made the compiler
        // build every answer on the stack field by field and copy it with
        // wide loads, a store-forwarding stall per call (10 ns for a cached
        // read). Fields joined with words split the words into halves and
        // put them back together (six instructions on every path).
        let w = if let Some(w) = self.stored_words() {
            w
        } else if let Some(w) = self.first_look_words() {
            w
        } else if self.store_plain_tuple() {
            self.stored_words()?
        } else {
            let t = self.parsed()?.five_tuple_v4()?;
            FiveTupleV4::words(t.src, t.dst, t.src_port, t.dst_port, t.protocol)
        };
        Some(FiveTupleV4::from_words(w))
    }

    /// The parsed headers, computed on first call and cached for this packet.
    /// `None` if the frame does not parse as its kind. Builds the structs
    /// from the cache on every call: filters on the hot path read
    /// [`parsed`](Packet::parsed) instead. `transport` is `Some` for UDP
    /// and TCP only (ICMP is in [`Parsed::icmp`]).
    #[inline]
    pub fn headers(&self) -> Option<Headers> {
        let p = self.parsed()?;
        let ip = match (p.ip_offset(), p.src_ip(), p.dst_ip()) {
            (Some(offset), Some(src), Some(dst)) => Some(IpHeaders {
                src,
                dst,
                protocol: p.l.protocol,
                offset,
            }),
            _ => None,
        };
        let transport = match (p.l4(), p.ports()) {
            (Some(protocol @ (L4::Udp | L4::Tcp)), Some((src_port, dst_port))) => Some(Transport {
                protocol,
                src_port,
                dst_port,
                payload_offset: p.payload_offset().unwrap_or(0),
            }),
            _ => None,
        };
        Some(Headers {
            ether_type: p.ether_type(),
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
            .field("mark", &self.mark)
            .field("ct", &self.ct())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    #[test]
    fn parse_cache_is_8_bytes_and_a_packet_one_cache_line() {
        // As the docs of `Layout` say; a `Packet` is built per frame.
        assert_eq!(std::mem::size_of::<Layout>(), 8);
        assert_eq!(std::mem::size_of::<Packet<'_>>(), 64);
        assert_eq!(std::mem::align_of::<Packet<'_>>(), 64);
    }

    fn udp_frame(dst_port: u16, payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(4000, dst_port);
        let mut v = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut v, payload).unwrap();
        v
    }

    /// The plain decoder's exact-length path (IP packet and datagram fill
    /// the frame) and the range checks behind it give the same answers;
    /// a frame beyond 64 KiB whose lengths match modulo 2^16 is not plain
    /// (etherparse's path calls it malformed), lengths off by one either
    /// way are refused or taken by the range checks, and another protocol
    /// than UDP or TCP is not plain, nor is TCP because bytes 38..40 happen
    /// to hold what a UDP length filling the frame would.
    #[test]
    fn the_plain_decoders_length_paths_agree() {
        let exact = udp_frame(53, &[0xa5; 22]);
        assert_eq!(exact.len(), 64);
        let smallest = udp_frame(53, &[]);
        assert_eq!(smallest.len(), 42);
        let mut padded = udp_frame(53, &[0xa5; 2]);
        padded.resize(60, 0);
        let with = |f: &[u8], at: usize, v: u16| {
            let mut f = f.to_vec();
            f[at..at + 2].copy_from_slice(&v.to_be_bytes());
            f
        };
        let short_udp = with(&exact, 38, 20);
        let udp_minus_one = with(&exact, 38, 29);
        let udp_plus_one = with(&exact, 38, 31);
        let total_minus_one = with(&exact, 16, 49);
        let total_plus_one = with(&exact, 16, 51);
        let mut huge = exact.clone();
        huge.resize(65536 + 64, 0);
        let mut largest = exact.clone();
        largest.resize(65535, 0);
        let largest = with(&with(&largest, 16, 65535 - 14), 38, 65535 - 34);
        // Plain but for the protocol (GRE): neither UDP nor TCP.
        let mut gre = exact.clone();
        gre[23] = 47;
        // TCP whose IP packet fills the frame and whose bytes 38..40 (its
        // acknowledgement number) read as a UDP length filling it.
        let mut tcp = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .tcp(4000, 80, 1, 1024)
            .write(&mut tcp, &[0x5a; 10])
            .unwrap();
        let tcp = with(&tcp, 38, (tcp.len() - 34) as u16);
        let cases: [(&str, &[u8], bool); 13] = [
            ("exact", &exact, true),
            ("smallest", &smallest, true),
            ("padded", &padded, true),
            ("short datagram", &short_udp, true),
            ("datagram one short", &udp_minus_one, true),
            ("datagram one long", &udp_plus_one, false),
            ("total one short", &total_minus_one, false),
            ("total one long", &total_plus_one, false),
            ("beyond 64 KiB", &huge, false),
            ("64 KiB - 1", &largest, true),
            ("gre", &gre, false),
            ("tcp", &tcp, true),
            ("tcp, total one long", &with(&tcp, 16, 51), false),
        ];
        for (name, f, plain) in cases {
            let reference = parse::parse_etherparse(f, PacketKind::Ethernet);
            let fast = parse::fast::ethernet_ipv4_plain(f).map(|(l, _)| l);
            assert_eq!(fast.is_some(), plain, "{name}");
            if let Some(l) = fast {
                assert_eq!(l, reference, "{name}");
            }
            let mut buf = f.to_vec();
            let p = Packet::new(&mut buf);
            let t = p.five_tuple_v4();
            assert_eq!(p.plain_five_tuple_v4().is_some(), plain, "{name}");
            let want = (reference.state() == ParseState::Ok).then(|| {
                Parsed {
                    frame: f,
                    l: reference,
                }
                .five_tuple_v4()
            });
            assert_eq!(t, want.flatten(), "{name}");
        }
    }

    /// The SSE2 test of the plain frame's fixed fields and the portable
    /// one agree, on frames that are plain but for one bit anywhere in
    /// bytes 0..42 and on a plain frame; and the bits that make a frame
    /// not plain are exactly the EtherType's, version and IHL's, and the
    /// more-fragments flag's and fragment offset's.
    #[test]
    fn the_fixed_fields_test_is_the_portable_one() {
        let f = udp_frame(53, &[0xa5; 22]);
        let h: [u8; 42] = *f.first_chunk().unwrap();
        assert!(parse::fast::fixed_fields_plain(&h));
        let mut differing = Vec::new();
        for bit in 0..42 * 8 {
            let mut x = h;
            x[bit / 8] ^= 1 << (bit % 8);
            let (fast, portable) = (
                parse::fast::fixed_fields_plain(&x),
                parse::fast::fixed_fields_plain_portable(&x),
            );
            assert_eq!(fast, portable, "bit {bit}");
            if !fast {
                differing.push(bit);
            }
        }
        let want: Vec<usize> = (12 * 8..15 * 8)
            .chain(20 * 8..20 * 8 + 6)
            .chain(21 * 8..22 * 8)
            .collect();
        assert_eq!(differing, want);
    }

    #[test]
    fn a_plain_frames_words_are_its_tuples_bytes() {
        let f = udp_frame(53, b"x");
        let t = FiveTupleV4 {
            src: 0xc612_0001,
            dst: 0xc612_0002,
            src_port: 4000,
            dst_port: 53,
            protocol: 17,
        };
        let w = plain_words(f.first_chunk().unwrap());
        assert_eq!(
            w,
            FiveTupleV4::words(t.src, t.dst, t.src_port, t.dst_port, t.protocol)
        );
        assert_eq!(FiveTupleV4::from_words(w), t);
        // The words are the tuple's bytes: the fields at their offsets,
        // the padding zero.
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&w[0].to_ne_bytes());
        bytes[8..].copy_from_slice(&w[1].to_ne_bytes());
        let mut want = [0u8; 16];
        want[0..4].copy_from_slice(&t.src.to_ne_bytes());
        want[4..8].copy_from_slice(&t.dst.to_ne_bytes());
        want[8..10].copy_from_slice(&t.src_port.to_ne_bytes());
        want[10..12].copy_from_slice(&t.dst_port.to_ne_bytes());
        want[12] = t.protocol;
        assert_eq!(bytes, want);
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
        assert!(Layout::from_word(p.parsed.get()).state() == ParseState::Ok);
    }

    fn eth(tags: &[(u16, u16)], et: u16, ip: &[u8]) -> Vec<u8> {
        let mut v = vec![2u8; 12];
        for (tpid, tci) in tags {
            v.extend_from_slice(&tpid.to_be_bytes());
            v.extend_from_slice(&tci.to_be_bytes());
        }
        v.extend_from_slice(&et.to_be_bytes());
        v.extend_from_slice(ip);
        v.resize(v.len().max(60), 0);
        v
    }

    /// The shapes the fast path decodes itself (the benchmark's and the
    /// sink's among them), each with etherparse's answer; and shapes it
    /// leaves to etherparse.
    #[test]
    fn the_fast_path_takes_the_common_shapes_and_agrees() {
        let mut v4_udp = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1, 53)
            .write(&mut v4_udp, &[0; 18])
            .unwrap();
        let mut v4_tcp = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1, 2, 3, 4)
            .syn()
            .write(&mut v4_tcp, &[])
            .unwrap();
        let mut v4_icmp = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .icmpv4_echo_request(1, 2)
            .write(&mut v4_icmp, &[7; 8])
            .unwrap();
        let mut v6_udp = Vec::new();
        PacketBuilder::ipv6([1; 16], [2; 16], 64)
            .udp(5, 6)
            .write(&mut v6_udp, &[1, 2, 3])
            .unwrap();
        let mut v6_icmp = Vec::new();
        PacketBuilder::ipv6([1; 16], [2; 16], 64)
            .icmpv6_echo_request(1, 2)
            .write(&mut v6_icmp, &[])
            .unwrap();
        let mut v4_frag = v4_udp.clone();
        v4_frag[6] = 0x20; // more fragments
        let q = (0x8100, 0x0123);
        let ad = (0x88a8, 0x0fff);
        let fast_ones: Vec<(PacketKind, Vec<u8>)> = vec![
            (PacketKind::Ethernet, eth(&[], 0x0800, &v4_udp)),
            (PacketKind::Ethernet, eth(&[], 0x0800, &v4_tcp)),
            (PacketKind::Ethernet, eth(&[q], 0x0800, &v4_tcp)),
            (PacketKind::Ethernet, eth(&[ad, q], 0x0800, &v4_icmp)),
            (PacketKind::Ethernet, eth(&[], 0x86dd, &v6_udp)),
            (PacketKind::Ethernet, eth(&[q], 0x86dd, &v6_icmp)),
            (PacketKind::Ethernet, eth(&[], 0x0800, &v4_frag)),
            (PacketKind::Ethernet, eth(&[], 0x0806, &[0; 28])),
            (PacketKind::Ipv4, v4_udp.clone()),
            (PacketKind::Ipv6, v6_icmp.clone()),
        ];
        for (i, (kind, f)) in fast_ones.iter().enumerate() {
            let fast = parse::fast::parse(f, *kind);
            assert!(fast.is_some(), "fast path declined {kind} {f:02x?}");
            // The one-word test of the 5-tuple's fixed offsets: the
            // untagged IPv4 UDP and TCP frames (the first two) only.
            assert_eq!(
                Layout::is_plain_ipv4_word(fast.unwrap().word()),
                i < 2,
                "{kind} {f:02x?}"
            );
            assert_eq!(
                fast.unwrap(),
                parse::parse_etherparse(f, *kind),
                "{kind} {f:02x?}"
            );
        }
        // Hop-by-hop extension header, jumbogram length 0, three VLAN
        // tags, an IPv4 packet cut short: etherparse's.
        let mut v6_hop = v6_udp.clone();
        v6_hop[6] = 0;
        let mut v6_zero = v6_udp.clone();
        v6_zero[4..6].copy_from_slice(&[0, 0]);
        let slow_ones = [
            (PacketKind::Ipv6, v6_hop),
            (PacketKind::Ipv6, v6_zero),
            (PacketKind::Ethernet, eth(&[ad, q, q], 0x0800, &v4_udp)),
            (PacketKind::Ipv4, v4_udp[..24].to_vec()),
        ];
        for (kind, f) in &slow_ones {
            assert_eq!(parse::fast::parse(f, *kind), None, "{kind} {f:02x?}");
        }
    }

    #[test]
    fn metadata_starts_clear_survives_reset_and_is_cleared_on_demand() {
        let mut f = udp_frame(53, b"x");
        let mut p = Packet::new(&mut f);
        assert_eq!((p.mark(), p.ct()), (0, (CtState::Untracked, false)));
        p.set_mark(0xdead_beef);
        p.set_ct(CtState::Established, true);
        assert_eq!(p.ct(), (CtState::Established, true));
        assert_eq!(p.ct_bits(), 0x82);
        p.set_verdict(Verdict::Dropped);
        p.reset();
        assert_eq!(
            (p.mark(), p.ct_state()),
            (0xdead_beef, CtState::Established)
        );
        for s in [
            CtState::Untracked,
            CtState::New,
            CtState::Established,
            CtState::Related,
            CtState::Invalid,
        ] {
            for r in [false, true] {
                p.set_ct(s, r);
                assert_eq!(p.ct(), (s, r));
            }
        }
        p.clear_meta();
        assert_eq!((p.mark(), p.ct()), (0, (CtState::Untracked, false)));
    }

    #[test]
    fn rewriting_the_frame_drops_the_cache() {
        let mut f = udp_frame(53, b"x");
        let mut p = Packet::new(&mut f);
        assert_eq!(p.headers().unwrap().transport.unwrap().dst_port, 53);
        // UDP destination port lives at 14 + 20 + 2.
        p.frame_mut()[36..38].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(p.headers().unwrap().transport.unwrap().dst_port, 80);
        // The 5-tuple the packet keeps of a plain frame goes with it.
        assert_eq!(p.five_tuple_v4().unwrap().dst_port, 80);
        assert!(p.is_plain_ipv4());
        p.frame_mut()[26..30].copy_from_slice(&[198, 18, 7, 7]);
        assert_eq!(p.udp_dst_port(), Some(80));
        assert_eq!(p.five_tuple_v4().unwrap().src, 0xc612_0707);
        assert_eq!(p.plain_five_tuple_v4().unwrap().src, 0xc612_0707);
        // An IPv4 header with options is not plain: no stored tuple.
        p.frame_mut()[14] = 0x46;
        assert_eq!(p.plain_five_tuple_v4(), None);
        assert!(!p.is_plain_ipv4());
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
