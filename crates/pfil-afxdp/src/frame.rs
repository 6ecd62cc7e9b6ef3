//! Frames as ownership tokens, and the memory they point into: the one
//! place of this crate that turns UMEM addresses into byte slices, with
//! its safety argument.

use crate::sys;

/// Ownership token of one UMEM frame held by the application.
///
/// Not `Clone`: a `Frame` is the only handle to its bytes, which is what
/// makes [`FrameArea::bytes`] sound. Give every frame back, to
/// [`crate::Umem::tx`], [`crate::Umem::recycle`] or [`crate::Umem::hold`]; a dropped token is
/// a leaked frame (it stays counted as `app`).
#[must_use = "a dropped Frame is a leaked UMEM frame: tx, recycle or hold it"]
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    /// Start of the frame (frame-aligned).
    addr: u64,
    /// Where the packet starts in the frame (RX puts it after the kernel's
    /// XDP headroom).
    off: u32,
    len: u32,
    umem: u32,
}

impl Frame {
    /// Offset of the frame in the UMEM.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length of the packet in the frame.
    #[expect(clippy::len_without_is_empty, reason = "a frame is not a collection")]
    pub fn len(&self) -> usize {
        self.len as usize
    }
}

impl pfil_port::PortFrame for Frame {
    #[inline]
    fn addr(&self) -> u64 {
        self.addr
    }
}

/// The frame memory of a UMEM. Bytes are reached only through a `&mut`
/// [`Frame`], so two live slices never alias.
pub struct FrameArea {
    pub(crate) mem: sys::Mmap,
    frame_size: u32,
    frames: u32,
    id: u32,
}

// SAFETY: `FrameArea` hands out bytes only through `bytes`/`buffer`, which
// need a `&mut Frame`. A `Frame` is the unique token of its frame across
// every thread: it is not `Clone`, its fields are private to this module,
// and its one constructor (`FrameArea::frame`, crate-private) is called
// only by `Umem::alloc` (from a free list) and `Umem::rx_batch` (from the
// RX ring of a socket whose fill ring only that `Umem` stocks); a frame
// re-enters a free list only by its token, checked against the part's
// range (`Umem::owns`), and the `Umem`s sharing an area own disjoint frame
// ranges. So two threads holding `&FrameArea` never reach the same
// bytes at once; the other methods only read immutable fields.
unsafe impl Sync for FrameArea {}

impl FrameArea {
    /// The area over `mem`: `frames` frames of `frame_size` bytes; `id`
    /// tells its tokens from those of other areas.
    pub(crate) fn new(mem: sys::Mmap, frame_size: u32, frames: u32, id: u32) -> FrameArea {
        FrameArea {
            mem,
            frame_size,
            frames,
            id,
        }
    }

    /// The token of the frame at `addr` (a frame base of this area), the
    /// packet at `off` for `len` bytes. Only the pool that owns `addr`
    /// makes it (from its free list or an RX descriptor), so the token is
    /// unique.
    #[inline]
    pub(crate) fn frame(&self, addr: u64, off: u32, len: u32) -> Frame {
        Frame {
            addr,
            off,
            len,
            umem: self.id,
        }
    }

    /// Did this area make `frame`?
    #[inline]
    pub(crate) fn made(&self, frame: &Frame) -> bool {
        frame.umem == self.id
    }

    /// Where the packet of `frame` is: (start in the UMEM, length), for a
    /// TX descriptor.
    #[inline]
    pub(crate) fn desc(frame: &Frame) -> (u64, u32) {
        (frame.addr + u64::from(frame.off), frame.len)
    }

    /// The packet bytes of `frame`. Empty for a frame of another UMEM
    /// (never a panic: the datapath calls this).
    #[inline]
    pub fn bytes<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        let (off, len) = (frame.off as usize, frame.len as usize);
        self.buffer(frame)
            .get_mut(off..off + len)
            .unwrap_or_default()
    }

    /// The whole buffer of `frame` (frame size), to write a new packet;
    /// then set the length with [`FrameArea::set_len`]. Empty for a frame
    /// of another UMEM (a token this area did not make) or whose address
    /// is not a frame base.
    #[inline]
    pub fn buffer<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        let start = frame.addr as usize;
        let size = self.frame_size as usize;
        // The frame size is a power of two (checked when the area is made):
        // a frame base is a multiple of it. The producers mask addresses to
        // their base (`io.rs`); checked here too, since the argument below
        // (two tokens never share bytes) holds for frame bases only.
        let aligned = start & (size - 1) == 0;
        if frame.umem != self.id
            || !aligned
            || start
                .checked_add(size)
                .is_none_or(|end| end > self.mem.len())
        {
            return Default::default();
        }
        // SAFETY: `start..start + size` lies within the mapping and starts
        // at a frame base (both checked above), so it is exactly one frame.
        // The `Frame` token for this address is unique (not Clone, only
        // made by this UMEM for frames it owns and the kernel does not
        // hold), and we borrow it mutably for `'a`, so no other slice of
        // these bytes exists for `'a`; the mapping lives as long as `self`.
        unsafe { std::slice::from_raw_parts_mut(self.mem.base().add(start), size) }
    }

    /// The whole buffer of `frame` and where its packet is in it:
    /// `(buffer, off, len)`; the bytes before are headroom (the kernel's
    /// XDP headroom on RX), those after tailroom. An empty buffer and an
    /// empty packet for a frame [`buffer`](FrameArea::buffer) refuses, or
    /// whose packet would not fit (never a panic).
    #[inline]
    pub fn room<'a>(&'a self, frame: &'a mut Frame) -> (&'a mut [u8], usize, usize) {
        let (off, len) = (frame.off as usize, frame.len as usize);
        let b = self.buffer(frame);
        if off + len > b.len() {
            return (Default::default(), 0, 0);
        }
        (b, off, len)
    }

    /// The packet of `frame` over its [`room`](FrameArea::room), for the
    /// loops (`Port::packet`): built without the clamps where the room is
    /// proven (`room` checked that the packet fits its buffer; a headroom
    /// past 64 KiB - 1, possible only with 64 KiB pages, is clamped).
    #[inline]
    pub fn packet<'a>(&'a self, frame: &'a mut Frame) -> pfil::Packet<'a> {
        let (b, off, len) = self.room(frame);
        if off > usize::from(u16::MAX) {
            return pfil::Packet::in_buffer_clamped(b, off, len);
        }
        // SAFETY: `room` gives `off + len <= b.len()` (it checked, or gave
        // an empty buffer and span), and `off <= 65 535` (just checked).
        unsafe { pfil::Packet::in_buffer_unchecked(b, off, len) }
    }

    /// Say that `frame` holds a packet of `len` bytes from `off` of its
    /// [`buffer`](FrameArea::buffer) (a hook moved or resized it, within
    /// its headroom and tailroom); `false` (and no change) if that leaves
    /// the frame or is empty (a TX descriptor of no bytes, or one at the
    /// frame's very end, would name the next frame of the UMEM when it
    /// completes). TX sends `off..off + len`.
    #[inline]
    pub fn set_span(&self, frame: &mut Frame, off: usize, len: usize) -> bool {
        if len == 0
            || off
                .checked_add(len)
                .is_none_or(|end| end > self.frame_size as usize)
        {
            return false;
        }
        frame.off = off as u32;
        frame.len = len as u32;
        true
    }

    /// Say that `frame` holds a packet of `len` bytes written at the start
    /// of its [`buffer`](FrameArea::buffer); `false` (and no change) if it
    /// exceeds the frame size.
    #[inline]
    pub fn set_len(&self, frame: &mut Frame, len: usize) -> bool {
        if len > self.frame_size as usize {
            return false;
        }
        frame.off = 0;
        frame.len = len as u32;
        true
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Frames in the area.
    pub fn frames(&self) -> u32 {
        self.frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token whose address is not a frame base (a bug elsewhere) gets
    /// no bytes: its window would overlap the next frame's (review L6.7).
    #[test]
    fn a_token_off_a_frame_base_gets_no_bytes() {
        let mem = sys::Mmap::anonymous(4 * 2048).unwrap();
        let area = FrameArea::new(mem, 2048, 4, 7);
        let mut ok = area.frame(2048, 0, 60);
        assert_eq!(area.buffer(&mut ok).len(), 2048);
        assert_eq!(area.bytes(&mut ok).len(), 60);
        let mut off = area.frame(2048 + 64, 0, 60);
        assert!(area.buffer(&mut off).is_empty());
        assert!(area.bytes(&mut off).is_empty());
        let mut past = area.frame(4 * 2048, 0, 60);
        assert!(area.buffer(&mut past).is_empty());
        let mut huge = area.frame(u64::MAX - 2047, 0, 60);
        assert!(area.buffer(&mut huge).is_empty());
    }

    /// A frame's room is its whole frame around the packet; a new span
    /// inside it is taken (and is what TX sends), one outside refused.
    #[test]
    fn room_and_span_stay_inside_the_frame() {
        let mem = sys::Mmap::anonymous(4 * 2048).unwrap();
        let area = FrameArea::new(mem, 2048, 4, 7);
        let mut f = area.frame(2048, 256, 60);
        let (b, off, len) = area.room(&mut f);
        assert_eq!((b.len(), off, len), (2048, 256, 60));
        assert!(area.set_span(&mut f, 248, 68));
        assert_eq!(FrameArea::desc(&f), (2048 + 248, 68));
        assert_eq!(area.bytes(&mut f).len(), 68);
        assert!(!area.set_span(&mut f, 2000, 49));
        assert!(!area.set_span(&mut f, usize::MAX, 2));
        // Empty, anywhere (at the frame's end it would name the next one).
        assert!(!area.set_span(&mut f, 2048, 0));
        assert!(!area.set_span(&mut f, 100, 0));
        assert!(area.set_span(&mut f, 2047, 1));
        assert!(area.set_span(&mut f, 248, 68));
        assert_eq!(FrameArea::desc(&f), (2048 + 248, 68));
        let mut bad = area.frame(2048, 2040, 60);
        assert_eq!(area.room(&mut bad).0.len(), 0);
    }
}
