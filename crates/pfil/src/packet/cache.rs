//! The parse cache of a packet: parsed once, on the first look, and the
//! 5-tuple of a plain frame kept beside it.

use std::mem::MaybeUninit;

use super::*;

impl Packet<'_> {
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
            if let Some((l, h)) = parse::fast::ethernet_ipv4_plain(self.frame()) {
                self.set_plain(l, h);
                return l;
            }
        }
        let l = parse::parse_general(self.frame(), self.kind);
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
        match self.frame().first_chunk::<42>() {
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
            frame: self.frame(),
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
        parse::fast::ethernet_ipv4_plain(self.frame())
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
            if let Some(h) = self.frame().first_chunk::<38>() {
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
