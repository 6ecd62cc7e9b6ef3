//! The buffer around a packet's frame: headroom before it and tailroom
//! after, which a hook may grow the frame into or give the frame's bytes
//! back to (an XDP program's `bpf_xdp_adjust_head` and `_tail`).

use std::fmt;
use std::ptr::NonNull;

use super::Packet;
use crate::PacketKind;

/// The most headroom or tailroom a packet offers (the rest of a larger
/// buffer is left alone): 64 KiB - 1, 256 times the kernel's XDP headroom.
const ROOM_MAX: usize = u16::MAX as usize;
/// The longest frame: 4 GiB - 1.
const LEN_MAX: usize = u32::MAX as usize;

/// Why a packet could not be built over a buffer or adjusted
/// ([`Packet::in_buffer`], [`Packet::adjust_head`],
/// [`Packet::adjust_tail`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RoomError {
    /// The frame `start..start + len` is not inside the buffer of
    /// `buffer` bytes (or is 4 GiB or longer).
    OutsideBuffer {
        /// Where the frame was to start.
        start: usize,
        /// Its length.
        len: usize,
        /// The buffer's length.
        buffer: usize,
    },
    /// Growing or shrinking the frame by `delta` bytes at its front
    /// (`head`) or back needs more bytes than the `room` there: the
    /// headroom or tailroom to grow into, the frame's length to shrink.
    NoRoom {
        /// `true` at the front (headroom), `false` at the back.
        head: bool,
        /// The change asked for, as the kernel's helpers take it.
        delta: isize,
        /// The bytes there were.
        room: usize,
    },
    /// The frame would start `headroom` bytes into its buffer: more than
    /// the 64 KiB - 1 of headroom a packet keeps count of (its start in
    /// the buffer would be lost, and a port would send the wrong bytes).
    TooMuchHeadroom {
        /// Where the frame would start in its buffer.
        headroom: usize,
    },
}

impl fmt::Display for RoomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RoomError::OutsideBuffer { start, len, buffer } => write!(
                f,
                "frame at {start}, {len} bytes, is not inside its {buffer}-byte buffer"
            ),
            RoomError::NoRoom { head, delta, room } => {
                let end = if head { "front" } else { "back" };
                write!(
                    f,
                    "cannot adjust the frame's {end} by {delta} bytes: {room} bytes of room"
                )
            }
            RoomError::TooMuchHeadroom { headroom } => write!(
                f,
                "the frame would start {headroom} bytes into its buffer: at most {ROOM_MAX} bytes of headroom"
            ),
        }
    }
}

impl std::error::Error for RoomError {}

/// `n` as a room: at most [`ROOM_MAX`] (a port with more offers that).
#[inline(always)]
fn room(n: usize) -> u16 {
    n.min(ROOM_MAX) as u16
}

impl<'a> Packet<'a> {
    /// An Ethernet frame `buffer[start..start + len]` with the bytes of
    /// `buffer` before it as headroom and those after as tailroom (each up
    /// to 64 KiB - 1; a larger buffer's farther bytes are left alone),
    /// received on interface 0, queue 0, verdict `Pass`. A port whose
    /// frames sit after the kernel's XDP headroom (256 bytes) gives it
    /// this way, so hooks can grow the frame ([`adjust_head`](Self::adjust_head),
    /// [`adjust_tail`](Self::adjust_tail)).
    ///
    /// # Errors
    /// [`RoomError::OutsideBuffer`] when the frame is not inside `buffer`,
    /// [`RoomError::TooMuchHeadroom`] when it starts more than 64 KiB - 1
    /// into it.
    #[inline(always)]
    pub fn in_buffer(buffer: &'a mut [u8], start: usize, len: usize) -> Result<Self, RoomError> {
        if start > ROOM_MAX {
            return Err(RoomError::TooMuchHeadroom { headroom: start });
        }
        let outside = RoomError::OutsideBuffer {
            start,
            len,
            buffer: buffer.len(),
        };
        let tail = match start.checked_add(len) {
            Some(end) if end <= buffer.len() && len <= LEN_MAX => buffer.len() - end,
            _ => return Err(outside),
        };
        let base = NonNull::from(buffer).cast::<u8>();
        Ok(Packet::from_parts(
            // SAFETY: start <= buffer.len() (checked above): the pointer
            // stays inside the buffer or one past its end.
            unsafe { base.add(start) },
            len as u32,
            room(start),
            room(tail),
            PacketKind::Ethernet,
        ))
    }

    /// [`in_buffer`](Self::in_buffer) that cannot fail: the frame is cut
    /// to the buffer (a `start` past its end, or past 64 KiB - 1, is
    /// brought back to it; a `len` past the buffer's end is shortened).
    /// For drivers whose frames are in their buffers by construction, a
    /// few hundred bytes in: no branch, nothing to handle.
    #[inline(always)]
    pub fn in_buffer_clamped(buffer: &'a mut [u8], start: usize, len: usize) -> Self {
        let whole = buffer.len();
        let start = start.min(whole).min(ROOM_MAX);
        let len = len.min(whole - start).min(LEN_MAX);
        let base = NonNull::from(buffer).cast::<u8>();
        Packet::from_parts(
            // SAFETY: start <= buffer.len(): inside the buffer or one past
            // its end.
            unsafe { base.add(start) },
            len as u32,
            room(start),
            room(whole - start - len),
            PacketKind::Ethernet,
        )
    }

    /// [`in_buffer`](Self::in_buffer) for a driver that keeps its frames'
    /// bounds right by construction (checked where they are set: on RX,
    /// in `set_span`): no check, no clamp but the tailroom's (and the
    /// length's 4 GiB cap, never reached by a real buffer), where
    /// [`in_buffer_clamped`](Self::in_buffer_clamped) spends about ten
    /// instructions a packet on its clamps.
    ///
    /// # Safety
    /// `start <= 65_535` (the headroom, kept exact) and `start + len <=
    /// buffer.len()` (no overflow): the frame lies inside `buffer`.
    #[inline(always)]
    pub unsafe fn in_buffer_unchecked(buffer: &'a mut [u8], start: usize, len: usize) -> Self {
        debug_assert!(
            start <= ROOM_MAX && start.checked_add(len).is_some_and(|e| e <= buffer.len())
        );
        let whole = buffer.len();
        let base = NonNull::from(buffer).cast::<u8>();
        Packet::from_parts(
            // SAFETY: start <= start + len <= buffer.len() (the caller's
            // promise): inside the buffer or one past its end.
            unsafe { base.add(start) },
            // A buffer of 4 GiB or more: the frame's first 4 GiB - 1
            // bytes (shorter, never past its end).
            len.min(LEN_MAX) as u32,
            start as u16,
            room(whole - start - len),
            PacketKind::Ethernet,
        )
    }

    /// Record a frame of `len` bytes (at most [`LEN_MAX`]) with `head`
    /// (at most [`ROOM_MAX`]: where the frame starts in its buffer, kept
    /// exact) and `tail` bytes of room around it (offered up to
    /// [`ROOM_MAX`]).
    #[inline]
    fn set_bounds(&mut self, len: usize, head: usize, tail: usize) {
        debug_assert!(len <= LEN_MAX && head <= ROOM_MAX);
        self.moved = true;
        self.len = len as u32;
        self.head = room(head);
        self.tail = room(tail);
    }

    /// Whether a hook changed the frame's start or length since the
    /// packet was built ([`adjust_head`](Self::adjust_head),
    /// [`adjust_tail`](Self::adjust_tail), [`narrow`](Self::narrow),
    /// [`set_frame`](Self::set_frame)): a driver that sends the frame
    /// then takes its new bounds ([`headroom`](Self::headroom),
    /// [`len`](Self::len)).
    #[inline]
    pub fn bounds_changed(&self) -> bool {
        self.moved
    }

    /// Bytes of the buffer before the frame that
    /// [`adjust_head`](Self::adjust_head) can grow it into (0 for a packet
    /// made by [`new`](Self::new)).
    #[inline]
    pub fn headroom(&self) -> usize {
        usize::from(self.head)
    }

    /// Bytes of the buffer after the frame that
    /// [`adjust_tail`](Self::adjust_tail) can grow it into (0 for a packet
    /// made by [`new`](Self::new)).
    #[inline]
    pub fn tailroom(&self) -> usize {
        usize::from(self.tail)
    }

    /// Move the frame's start by `delta` bytes, as the kernel's
    /// `bpf_xdp_adjust_head`: a negative `delta` grows the frame into the
    /// headroom (the bytes it gains are whatever the buffer held there),
    /// a positive one removes bytes from its front (they become
    /// headroom). Drops the parse cache.
    ///
    /// # Errors
    /// [`RoomError::NoRoom`], and nothing changes, when the headroom (to
    /// grow) or the frame (to shrink) is shorter than `delta`, or a shrink
    /// would leave more than 64 KiB - 1 of headroom.
    pub fn adjust_head(&mut self, delta: isize) -> Result<(), RoomError> {
        if delta == 0 {
            return Ok(());
        }
        let (len, head, tail) = (self.len(), self.headroom(), self.tailroom());
        let n = delta.unsigned_abs();
        let (room, fits) = if delta < 0 {
            (head, n <= head && len + n <= LEN_MAX)
        } else {
            let room = len.min(ROOM_MAX - head);
            (room, n <= room)
        };
        if !fits {
            return Err(RoomError::NoRoom {
                head: true,
                delta,
                room,
            });
        }
        self.parsed.set(0);
        if delta < 0 {
            // SAFETY: n <= headroom: the new start is in the buffer
            // (`head` bytes before `data` belong to it).
            self.data = unsafe { self.data.sub(n) };
            self.set_bounds(len + n, head - n, tail);
        } else {
            // SAFETY: n <= len: the new start is in the frame or one past
            // its end, inside the buffer.
            self.data = unsafe { self.data.add(n) };
            self.set_bounds(len - n, head + n, tail);
        }
        Ok(())
    }

    /// Move the frame's end by `delta` bytes, as the kernel's
    /// `bpf_xdp_adjust_tail`: a positive `delta` grows the frame into the
    /// tailroom (the bytes it gains are zeroed, as the kernel's helper
    /// does: a recycled buffer's old contents never show), a negative one
    /// removes bytes from its back (they become tailroom). Drops the parse
    /// cache.
    ///
    /// # Errors
    /// [`RoomError::NoRoom`], and nothing changes, when the tailroom (to
    /// grow) or the frame (to shrink) is shorter than `delta`.
    pub fn adjust_tail(&mut self, delta: isize) -> Result<(), RoomError> {
        if delta == 0 {
            return Ok(());
        }
        let (len, head, tail) = (self.len(), self.headroom(), self.tailroom());
        let n = delta.unsigned_abs();
        let (room, fits) = if delta > 0 {
            (tail, n <= tail && len + n <= LEN_MAX)
        } else {
            (len, n <= len)
        };
        if !fits {
            return Err(RoomError::NoRoom {
                head: false,
                delta,
                room,
            });
        }
        self.parsed.set(0);
        if delta > 0 {
            // SAFETY: n <= tailroom: `data + len .. data + len + n` is in
            // the buffer the packet borrows exclusively.
            unsafe { std::ptr::write_bytes(self.data.as_ptr().add(len), 0, n) };
            self.set_bounds(len + n, head, tail - n);
        } else {
            self.set_bounds(len - n, head, tail + n);
        }
        Ok(())
    }

    /// Narrow the frame to `frame[start..end]`: a hook removed bytes at
    /// the front or the back (they become headroom and tailroom). Later
    /// hooks see the narrowed frame; drops the parse cache. Returns
    /// `false` and changes nothing when the range is not inside the
    /// frame, or would leave more than 64 KiB - 1 of headroom.
    /// ([`adjust_head`](Self::adjust_head) and
    /// [`adjust_tail`](Self::adjust_tail) grow it too.)
    pub fn narrow(&mut self, start: usize, end: usize) -> bool {
        let (len, head, tail) = (self.len(), self.headroom(), self.tailroom());
        if start > end || end > len || head + start > ROOM_MAX {
            return false;
        }
        self.parsed.set(0);
        // SAFETY: start <= len: inside the frame or one past its end.
        self.data = unsafe { self.data.add(start) };
        self.set_bounds(end - start, head + start, tail + (len - end));
        true
    }

    /// Make the frame `buffer[start..end]` of the buffer
    /// [`buffer_mut`](Self::buffer_mut) lends (headroom, frame and
    /// tailroom): what code that moved the frame's bounds in that buffer
    /// (an XDP program's `data` and `data_end`) made of it. Drops the
    /// parse cache.
    ///
    /// # Errors
    /// [`RoomError::OutsideBuffer`], and nothing changes, when the range
    /// is not inside that buffer; [`RoomError::TooMuchHeadroom`] when it
    /// starts more than 64 KiB - 1 into it.
    pub fn set_frame(&mut self, start: usize, end: usize) -> Result<(), RoomError> {
        let (len, head, tail) = (self.len(), self.headroom(), self.tailroom());
        let whole = head + len + tail;
        if start > ROOM_MAX && start <= end && end <= whole {
            return Err(RoomError::TooMuchHeadroom { headroom: start });
        }
        if start > end || end > whole || end - start > LEN_MAX {
            return Err(RoomError::OutsideBuffer {
                start,
                len: end.saturating_sub(start),
                buffer: whole,
            });
        }
        self.parsed.set(0);
        // SAFETY: `data - head .. data + len + tail` is in the buffer (see
        // `buffer_mut`) and start <= end <= head + len + tail (checked):
        // the new start is in it or one past its end.
        self.data = unsafe { self.data.sub(head).add(start) };
        self.set_bounds(end - start, start, whole - end);
        Ok(())
    }

    /// The whole buffer the packet may use, writable: headroom, frame and
    /// tailroom, and where the frame starts in it (the headroom). For a
    /// hook that runs code expecting the kernel's view (an XDP program's
    /// `data_meta`, `data`, `data_end` over its buffer); it tells the
    /// packet what became of the frame with
    /// [`adjust_head`](Self::adjust_head) and
    /// [`adjust_tail`](Self::adjust_tail). Drops the parse cache.
    pub fn buffer_mut(&mut self) -> (&mut [u8], usize) {
        self.parsed.set(0);
        let head = self.headroom();
        let whole = head + self.len() + self.tailroom();
        // SAFETY: `data - head .. data + len + tail` lies in the buffer the
        // packet borrows exclusively for 'a (the constructors take at most
        // the bytes they were given, adjustments move within them), and
        // `&mut self` lends it for no longer than the packet.
        let b = unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr().sub(head), whole) };
        (b, head)
    }
}

impl Packet<'_> {
    /// The address of the start of the packet's buffer (the frame's start
    /// less its headroom): the same whatever a hook does to the frame's
    /// bounds, distinct for the packets of a batch (their buffers are
    /// disjoint). What the chain tells a batch's packets apart by.
    #[inline(always)]
    pub(crate) fn buffer_addr(&self) -> usize {
        self.data.as_ptr() as usize - self.headroom()
    }
}

// SAFETY: a packet holds its buffer's one exclusive borrow (`&'a mut
// [u8]`, which is `Send`) as a pointer; moving it to another thread moves
// that borrow with it. (It stays `!Sync` through its `Cell`s.)
unsafe impl Send for Packet<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn udp_frame(dst_port: u16) -> Vec<u8> {
        let mut v = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(4000, dst_port)
            .write(&mut v, b"payload")
            .unwrap();
        v
    }

    #[test]
    fn a_packet_knows_its_buffer_and_new_gives_no_room() {
        let mut f = udp_frame(53);
        let n = f.len();
        let p = Packet::new(&mut f);
        assert_eq!((p.len(), p.headroom(), p.tailroom()), (n, 0, 0));
        let mut buf = vec![0u8; 256 + n + 64];
        buf[256..256 + n].copy_from_slice(&udp_frame(53));
        let mut p = Packet::in_buffer(&mut buf, 256, n).unwrap();
        assert_eq!((p.len(), p.headroom(), p.tailroom()), (n, 256, 64));
        assert!(!p.bounds_changed());
        let _ = p.buffer_mut();
        p.frame_mut()[0] = 2;
        assert!(!p.bounds_changed(), "writing is not moving");
        assert_eq!(p.frame(), &udp_frame(53)[..]);
        assert_eq!(p.udp_dst_port(), Some(53));
        // Outside the buffer, or overflowing: refused with what was asked.
        let mut small = [0u8; 10];
        for (start, len) in [(0, 11), (11, 0), (5, 6), (9, usize::MAX)] {
            assert_eq!(
                Packet::in_buffer(&mut small, start, len).err(),
                Some(RoomError::OutsideBuffer {
                    start,
                    len,
                    buffer: 10
                })
            );
        }
        // Clamped: cut to the buffer, never outside it.
        for (start, len, want) in [(2, 5, (2, 5, 3)), (8, 5, (8, 2, 0)), (12, 1, (10, 0, 0))] {
            let p = Packet::in_buffer_clamped(&mut small, start, len);
            assert_eq!((p.headroom(), p.len(), p.tailroom()), want);
        }
        // A frame more than 64 KiB - 1 into its buffer is refused (its
        // start could not be told to the port); tailroom beyond it is left
        // alone.
        let mut big = vec![7u8; 70_000 + 100 + 70_000];
        assert_eq!(
            Packet::in_buffer(&mut big, 70_000, 100).err(),
            Some(RoomError::TooMuchHeadroom { headroom: 70_000 })
        );
        assert_eq!(
            Packet::in_buffer(&mut [0u8; 4], usize::MAX, 2).err(),
            Some(RoomError::TooMuchHeadroom {
                headroom: usize::MAX
            })
        );
        let p = Packet::in_buffer_clamped(&mut big, 70_000, 100);
        assert_eq!((p.headroom(), p.len()), (ROOM_MAX, 100));
        let p = Packet::in_buffer(&mut big, 256, 100).unwrap();
        assert_eq!((p.len(), p.headroom(), p.tailroom()), (100, 256, ROOM_MAX));
    }

    /// Where the bounds hold (the promise a port keeps), the unchecked
    /// constructor builds the packet `in_buffer` builds: same bytes, same
    /// rooms (the tailroom offered up to 64 KiB - 1).
    #[test]
    fn unchecked_agrees_with_in_buffer_where_the_bounds_hold() {
        for whole in [0usize, 1, 60, 2048 + 512, 70_000, 200_000] {
            let mut buf: Vec<u8> = (0..whole).map(|i| i as u8).collect();
            for start in [0usize, 1, 256, 2048, ROOM_MAX] {
                for len in [0usize, 1, 64, 1500, 65_536, 150_000] {
                    if start + len > whole {
                        continue;
                    }
                    let (b, h, t) = {
                        let p = Packet::in_buffer(&mut buf, start, len).unwrap();
                        (p.frame().as_ptr(), p.headroom(), p.tailroom())
                    };
                    let want: Vec<u8> = buf[start..start + len].to_vec();
                    // SAFETY: start <= ROOM_MAX and start + len <= whole
                    // (the cases past them are skipped above).
                    let p = unsafe { Packet::in_buffer_unchecked(&mut buf, start, len) };
                    assert_eq!(
                        (p.frame().as_ptr(), p.len(), p.headroom(), p.tailroom()),
                        (b, len, h, t),
                        "buffer {whole}, frame {start}+{len}"
                    );
                    assert_eq!(p.frame(), &want[..]);
                }
            }
        }
    }

    /// The headroom is where the frame starts in its buffer, exact: a
    /// shrink that would push it past 64 KiB - 1 is refused, and the
    /// buffer's address stays the same whatever moves the frame.
    #[test]
    fn headroom_stays_exact_and_the_buffer_does_not_move() {
        let mut big = vec![0u8; 100_000];
        let mut p = Packet::in_buffer(&mut big, 256, 90_000).unwrap();
        let addr = p.buffer_addr();
        let past = (ROOM_MAX - 256 + 1) as isize;
        assert!(matches!(
            p.adjust_head(past),
            Err(RoomError::NoRoom { head: true, .. })
        ));
        assert!(!p.narrow(past as usize, 90_000));
        assert_eq!(
            p.set_frame(ROOM_MAX + 1, ROOM_MAX + 2),
            Err(RoomError::TooMuchHeadroom {
                headroom: ROOM_MAX + 1
            })
        );
        assert_eq!((p.headroom(), p.len()), (256, 90_000));
        assert!(!p.bounds_changed(), "refused changes change nothing");
        p.adjust_head(past - 1).unwrap();
        assert_eq!(p.headroom(), ROOM_MAX);
        assert_eq!(p.buffer_addr(), addr);
        assert!(p.narrow(0, 10));
        p.adjust_head(-1000).unwrap();
        p.set_frame(5, 50).unwrap();
        assert_eq!(p.buffer_addr(), addr);
        // No change is no change.
        let mut q = Packet::in_buffer(&mut big, 10, 10).unwrap();
        q.adjust_head(0).unwrap();
        q.adjust_tail(0).unwrap();
        assert!(!q.bounds_changed());
    }

    /// Growing and shrinking at both ends, against a model of the buffer:
    /// the frame is always the model's range of the one buffer, the rooms
    /// what is left around it, and a change that does not fit is refused
    /// and changes nothing.
    #[test]
    fn adjusting_moves_the_frame_within_its_buffer() {
        let mut buf: Vec<u8> = (0..=255u8).cycle().take(300).collect();
        let mut copy = buf.clone();
        let mut p = Packet::in_buffer(&mut buf, 100, 50).unwrap();
        let (mut start, mut end) = (100usize, 150usize);
        let steps: [(bool, isize); 12] = [
            (true, -8),
            (true, -92),
            (true, -1),
            (false, 150),
            (false, 1),
            (true, 300),
            (true, 200),
            (false, -300),
            (false, -250),
            (true, -50),
            (false, 20),
            (false, -70),
        ];
        for (head, delta) in steps {
            let r = if head {
                p.adjust_head(delta)
            } else {
                p.adjust_tail(delta)
            };
            let (ns, ne) = if head {
                (start as isize + delta, end as isize)
            } else {
                (start as isize, end as isize + delta)
            };
            let fits = ns >= 0 && ne <= 300 && ns <= ne;
            assert_eq!(r.is_ok(), fits, "{head} {delta}: {r:?}");
            if fits {
                if !head && delta > 0 {
                    // Tail growth zeroes what it gains, as the kernel does.
                    copy[end..ne as usize].fill(0);
                }
                (start, end) = (ns as usize, ne as usize);
            } else {
                assert!(
                    matches!(r, Err(RoomError::NoRoom { head: h, delta: d, .. }) if h == head && d == delta)
                );
            }
            assert_eq!(p.frame(), &copy[start..end], "{head} {delta}");
            assert_eq!((p.headroom(), p.tailroom()), (start, 300 - end));
            let (b, at) = p.buffer_mut();
            assert_eq!((b.len(), at), (300, start));
        }
        assert!(p.bounds_changed());
        // The bytes it grew into are the buffer's, writable in place.
        p.adjust_head(-4).unwrap();
        p.frame_mut()[..4].copy_from_slice(b"TAG!");
        let s = 300 - p.tailroom() - p.len();
        assert_eq!(&buf[s..s + 4], b"TAG!");
    }

    #[test]
    fn set_frame_places_the_frame_anywhere_in_its_buffer() {
        let mut buf: Vec<u8> = (0..64u8).collect();
        let copy = buf.clone();
        let mut p = Packet::in_buffer(&mut buf, 16, 8).unwrap();
        for (start, end, ok) in [
            (0, 64, true),
            (60, 64, true),
            (64, 64, true),
            (10, 9, false),
            (3, 65, false),
            (2, 40, true),
        ] {
            assert_eq!(p.set_frame(start, end).is_ok(), ok, "{start}..{end}");
            if ok {
                assert_eq!(p.frame(), &copy[start..end]);
                assert_eq!((p.headroom(), p.tailroom()), (start, 64 - end));
            }
        }
    }

    #[test]
    fn adjusting_drops_the_parse_cache_and_narrow_keeps_the_room() {
        let f = udp_frame(53);
        let n = f.len();
        let mut buf = vec![0u8; 8 + n + 8];
        buf[8..8 + n].copy_from_slice(&f);
        let mut p = Packet::in_buffer(&mut buf, 8, n).unwrap();
        assert_eq!(p.udp_dst_port(), Some(53));
        assert!(p.five_tuple_v4().is_some());
        // Push a 4-byte tag in front: no longer an Ethernet/IPv4 frame
        // at the cached offsets.
        p.adjust_head(-4).unwrap();
        p.frame_mut()[..4].copy_from_slice(&[0xff; 4]);
        assert_eq!(p.udp_dst_port(), None);
        assert_eq!(p.five_tuple_v4(), None);
        p.adjust_head(4).unwrap();
        assert_eq!(p.udp_dst_port(), Some(53));
        assert!(p.narrow(14, n));
        assert_eq!((p.headroom(), p.tailroom(), p.len()), (22, 8, n - 14));
        assert!(!p.narrow(1, 0) && !p.narrow(0, n));
        p.adjust_head(-14).unwrap();
        assert_eq!(p.frame(), &f[..]);
        assert_eq!(p.udp_dst_port(), Some(53));
    }
}
