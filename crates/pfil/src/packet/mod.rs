//! The packet a hook sees: the raw frame (mutable), where it came from, its
//! verdict so far, and headers parsed lazily and cached: common shapes
//! decoded at fixed offsets (`parse.rs`), the rest by etherparse, read in
//! place through [`Parsed`] (`view.rs`).

use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::{PacketKind, Verdict};

mod cache;
mod ct;
mod headers;
mod parse;
mod room;
#[cfg(test)]
mod tests;
mod view;

pub use ct::CtState;
pub use headers::{Headers, IpHeaders, Transport};
pub use room::RoomError;
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
    /// The frame's first byte, in the buffer the packet was built over
    /// (which `_buffer` borrows): the buffer holds `head` bytes before it
    /// and `tail` bytes after the frame's `len` ([`Packet::in_buffer`]).
    data: NonNull<u8>,
    /// The frame's length.
    len: u32,
    /// Bytes of the buffer before `data` (at most 64 KiB - 1).
    head: u16,
    /// Bytes of the buffer after the frame (at most 64 KiB - 1).
    tail: u16,
    /// The buffer, borrowed for as long as the packet lives.
    _buffer: PhantomData<&'a mut [u8]>,
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
    /// A hook moved the frame's bounds ([`Packet::bounds_changed`]).
    moved: bool,
}

/// Bit of [`Packet`]'s `ct` byte: the packet goes in the reply direction.
const CT_REPLY: u8 = 0x80;
/// Bits of [`Packet`]'s `ct` byte: the tracker's extra bits
/// ([`Packet::ct_ext`]).
const CT_EXT: u8 = 0x78;

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
        // A frame of 4 GiB or more is no port's: its first 4 GiB - 1
        // bytes, never past its end (one instruction, no branch).
        let len = frame.len().min(u32::MAX as usize) as u32;
        Packet::from_parts(NonNull::from(frame).cast(), len, 0, 0, kind)
    }

    /// A packet of `len` bytes at `data` with `head` and `tail` bytes of
    /// its buffer around it, every other field at its start value: what
    /// each constructor checked its way to.
    #[inline(always)]
    pub(super) fn from_parts(
        data: NonNull<u8>,
        len: u32,
        head: u16,
        tail: u16,
        kind: PacketKind,
    ) -> Self {
        Packet {
            data,
            len,
            head,
            tail,
            _buffer: PhantomData,
            kind,
            ifindex: 0,
            queue: 0,
            verdict: Verdict::Pass,
            parsed: Cell::new(0),
            tuple: UnsafeCell::new(MaybeUninit::uninit()),
            cookie: 0,
            mark: 0,
            ct: 0,
            moved: false,
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
        // SAFETY: `data..data + len` lies in the buffer the packet borrows
        // for 'a (every constructor and adjustment keeps it there), and
        // `&self` lends it shared for no longer than the packet.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len()) }
    }

    /// The frame bytes, writable. Drops the parse cache, since the hook may
    /// change any header.
    #[inline]
    pub fn frame_mut(&mut self) -> &mut [u8] {
        self.parsed.set(0);
        // SAFETY: as in `frame`; `&mut self` makes the loan exclusive (the
        // packet holds the buffer's only borrow).
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.len()) }
    }

    /// Frame length in bytes.
    #[inline]
    #[expect(
        clippy::len_without_is_empty,
        reason = "a frame is never looked at as a collection"
    )]
    pub fn len(&self) -> usize {
        self.len as usize
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
    /// value (0..=4) in bits 0..=2, bit 7 set in the reply direction
    /// (the tracker's extra bits, [`ct_ext`](Packet::ct_ext), left out).
    /// For classifiers that index tables by it.
    #[inline]
    pub fn ct_bits(&self) -> u8 {
        self.ct & !CT_EXT
    }

    /// Record the connection state and direction ([`ct`](Packet::ct));
    /// the extra bits cleared.
    #[inline]
    pub fn set_ct(&mut self, state: CtState, reply: bool) {
        self.ct = state as u8 | if reply { CT_REPLY } else { 0 };
    }

    /// Four bits the tracker that set the annotation left for later
    /// hooks of the walk (0 until one does; [`set_ct`](Packet::set_ct)
    /// clears them). The `ct` hook says there which of its tables it is
    /// and whether the flow has a `keep state` rule's mark, for an acl
    /// after it.
    #[inline]
    pub fn ct_ext(&self) -> u8 {
        (self.ct & CT_EXT) >> 3
    }

    /// [`set_ct`](Packet::set_ct) with the extra bits
    /// [`ct_ext`](Packet::ct_ext) (the low four bits of `ext`).
    #[inline]
    pub fn set_ct_ext(&mut self, state: CtState, reply: bool, ext: u8) {
        self.ct = state as u8 | if reply { CT_REPLY } else { 0 } | (ext & 0xf) << 3;
    }

    /// Clear the metadata: mark 0, untracked. A driver that runs a packet
    /// through a second, unrelated walk may call it; the runner never does.
    #[inline]
    pub fn clear_meta(&mut self) {
        self.mark = 0;
        self.ct = 0;
    }
}

impl fmt::Debug for Packet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("len", &self.len())
            .field("headroom", &self.headroom())
            .field("tailroom", &self.tailroom())
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
