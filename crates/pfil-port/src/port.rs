//! The [`Port`] trait: what a worker loop needs from the I/O it drives.

use std::collections::VecDeque;

use arrayvec::ArrayVec;

use crate::error::Error;

/// Frames per batch of the worker loops.
pub const BATCH: usize = 64;

/// A batch of frames, as the loops move them: an
/// [`arrayvec::ArrayVec`] of [`BATCH`] frames (the crate re-exports
/// [`arrayvec`], so a driver can name it as
/// `pfil_port::arrayvec::ArrayVec<F, { pfil_port::BATCH }>` or simply
/// `pfil_port::Batch<F>`).
pub type Batch<F> = ArrayVec<F, BATCH>;

/// Index of one queue endpoint of a [`Port`] (an interface queue of an
/// AF_XDP UMEM, the source or sink side of the synthetic port), from 0 to
/// [`Port::ports`] − 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(usize);

impl PortId {
    /// The endpoint at `index`.
    #[inline]
    pub const fn new(index: usize) -> PortId {
        PortId(index)
    }

    /// Its index.
    #[inline]
    pub const fn index(self) -> usize {
        self.0
    }
}

/// Where the frames of an endpoint come from, as hooks see it
/// ([`pfil::Packet::ifindex`], [`pfil::Packet::queue`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// Interface index.
    pub ifindex: u32,
    /// Queue.
    pub queue: u32,
}

/// The ownership token of one frame of a port's pool.
pub trait PortFrame {
    /// The frame's address in its pool: unique among the frames of the pool
    /// and below 2³², so `epoch << 32 | addr` is a cookie
    /// ([`Held::next_epoch`]).
    fn addr(&self) -> u64;
}

/// Where every frame of a port's pool is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// In fill rings, waiting for the kernel to receive into them.
    pub fill: u64,
    /// In RX rings, received, not yet read by the application.
    pub rx: u64,
    /// Free in the application's pool.
    pub free: u64,
    /// Handed to the application as frame tokens.
    pub app: u64,
    /// In TX rings, not yet sent.
    pub tx: u64,
    /// In completion rings, sent, not yet reaped.
    pub completion: u64,
    /// Held because a hook returned `Consumed` ([`Held`]).
    pub held: u64,
    /// Frames in the pool.
    pub total: u64,
}

impl FrameCounts {
    /// Sum of every place.
    pub fn sum(&self) -> u64 {
        self.fill + self.rx + self.free + self.app + self.tx + self.completion + self.held
    }

    /// Does every frame have exactly one place?
    pub fn adds_up(&self) -> bool {
        self.sum() == self.total
    }
}

/// The frames hooks consumed, with their cookies, oldest first: every port
/// keeps one ([`Port::held`]) and the loops hold, give back and evict
/// through it (see [`crate::Outbox`]).
#[derive(Debug)]
pub struct Held<F> {
    frames: VecDeque<(u64, F)>,
    epoch: u32,
}

impl<F> Default for Held<F> {
    fn default() -> Self {
        Held {
            frames: VecDeque::new(),
            epoch: 0,
        }
    }
}

impl<F> Held<F> {
    /// An empty set with room for `capacity` frames.
    pub fn with_capacity(capacity: usize) -> Held<F> {
        Held {
            frames: VecDeque::with_capacity(capacity),
            epoch: 0,
        }
    }

    /// Keep `frame` under `cookie`.
    #[inline]
    pub fn push(&mut self, cookie: u64, frame: F) {
        self.frames.push_back((cookie, frame));
    }

    /// Frames held.
    #[inline]
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Is nothing held?
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Take the frame held under `cookie`; `None` if none is (never held,
    /// given back already, or evicted).
    pub fn take(&mut self, cookie: u64) -> Option<F> {
        let i = self.frames.iter().position(|(c, _)| *c == cookie)?;
        self.frames.remove(i).map(|(_, f)| f)
    }

    /// Take the oldest held frame.
    #[inline]
    pub fn pop_oldest(&mut self) -> Option<F> {
        self.frames.pop_front().map(|(_, f)| f)
    }

    /// Take the oldest frame if more than `limit` are held.
    #[inline]
    pub fn pop_over(&mut self, limit: usize) -> Option<F> {
        if self.frames.len() > limit {
            self.pop_oldest()
        } else {
            None
        }
    }

    /// A new cookie epoch for the next batch: cookies are
    /// `epoch << 32 | frame address`, so a frame reused after it was given
    /// back gets a new cookie and a stale request cannot reach it.
    #[inline]
    pub fn next_epoch(&mut self) -> u64 {
        self.epoch = self.epoch.wrapping_add(1);
        u64::from(self.epoch) << 32
    }
}

/// The frame I/O one worker drives: one or more queue endpoints
/// ([`PortId`]) over one pool of frames, so a frame received on one
/// endpoint can be sent on another without a copy (the forwarder does).
///
/// The worker loops ([`crate::sink_loop`], [`crate::forward_loop`],
/// [`crate::gen_loop`]) are written once over this trait and monomorphised
/// for each port type; a new port type is one implementation of it.
/// Frames move as `Self::Frame` tokens: a token is the only handle to its
/// bytes, and every token the loops take (from [`rx`](Port::rx),
/// [`alloc`](Port::alloc) or [`Held`]) goes back through
/// [`tx`](Port::tx), [`recycle`](Port::recycle) or [`Held::push`].
///
/// The whole contract a driver meets (who reaps completions and when, how
/// a TX error is counted, what `bytes` promises, how big the pool must
/// be, held frames after a loop returns) is in the crate docs, "Writing a
/// port: the contract"; `tests/ring_port.rs` is a complete example.
pub trait Port {
    /// The ownership token of one frame.
    type Frame: PortFrame;
    /// The port's error; the loops' own errors convert into it.
    type Error: From<Error> + std::fmt::Display + std::fmt::Debug + Send + 'static;

    /// `true` when [`rx`](Port::rx) builds frames in place (a synthetic
    /// source, a capture replay) instead of receiving them from a wire: the
    /// loops then count them as `generated` as well as `rx`.
    const BUILDS_FRAMES: bool = false;

    /// Number of endpoints.
    fn ports(&self) -> usize;
    /// Interface index and queue of an endpoint.
    fn origin(&self, port: PortId) -> Origin;
    /// Interface name of an endpoint (for errors and reports).
    fn name(&self, port: PortId) -> &str;
    /// Bytes a frame buffer holds.
    fn frame_size(&self) -> usize;

    /// Take received frames of `port` into `out`, up to its spare
    /// capacity; returns how many. Never blocks. 0 means nothing now: no
    /// frame, or no free buffer to receive into (the loops then call
    /// [`reap`](Port::reap) and look again).
    fn rx(&mut self, port: PortId, out: &mut Batch<Self::Frame>) -> usize;
    /// `true` when `port` will never receive again (a replay at its end, a
    /// synthetic source at its count): a loop whose receiving endpoints
    /// have all ended returns. A wire never ends.
    #[inline]
    fn rx_ended(&self, port: PortId) -> bool {
        let _ = port;
        false
    }
    /// Wait up to `timeout_ms` milliseconds for any of `ports` to have
    /// frames; `true` if one may have. The loops never pass a negative
    /// timeout (they clamp [`crate::LoopConfig::idle_poll_ms`] to 0 or
    /// more); called directly, a negative one may wait without bound, as
    /// poll(2) does (the AF_XDP port) or be taken as 0 (the synthetic
    /// port). Returning early is always allowed.
    fn poll_rx(&mut self, ports: &[PortId], timeout_ms: i32) -> bool;

    /// Queue frames for sending on `port`, from the front of `frames` as
    /// long as there is room; the rest stay in `frames`. Returns how many
    /// were queued. The frames queued go back to the pool through
    /// [`reap`](Port::reap) once sent (or at once, for a port that does
    /// not keep them).
    ///
    /// # Errors
    /// The port's error. The frames that left `frames` count as queued
    /// also then (a port may queue and fail to kick); the frames not
    /// queued stay in `frames`, and the loops recycle them (`tx_dropped`).
    fn tx(&mut self, port: PortId, frames: &mut Batch<Self::Frame>) -> Result<usize, Self::Error>;
    /// Push queued frames out, at most `max_kicks` times; returns the
    /// frames still queued.
    ///
    /// # Errors
    /// The port's error.
    fn kick_tx(&mut self, port: PortId, max_kicks: u32) -> Result<u32, Self::Error>;
    /// Send everything queued on `port` (bounded) and reap what was sent.
    ///
    /// # Errors
    /// The port's error, when frames are left after the bound.
    fn flush(&mut self, port: PortId) -> Result<(), Self::Error>;
    /// Take sent frames back into the free pool; returns how many. The
    /// loops call it whenever an RX look finds nothing, at least every
    /// [`crate::REAP_EVERY`] batches, every generator iteration and on
    /// exit; a port may also reap inside `rx`/`tx` on its own.
    fn reap(&mut self) -> usize;

    /// A free frame (length 0) to write a packet into.
    fn alloc(&mut self) -> Option<Self::Frame>;
    /// Give a frame back to the free pool.
    fn recycle(&mut self, frame: Self::Frame);
    /// Give every frame of `frames` back to the free pool (a sink's whole
    /// batch): one call per batch, so a port can do it in one sweep.
    #[inline]
    fn recycle_all(&mut self, frames: &mut Batch<Self::Frame>) {
        for f in frames.drain(..) {
            self.recycle(f);
        }
    }
    /// The packet bytes of `frame` (the length `rx` or
    /// [`set_len`](Port::set_len) gave it). The loops hold the slices of a
    /// whole batch at once (one per frame, all through `&self`): slices of
    /// distinct frames must not overlap.
    fn bytes<'a>(&'a self, frame: &'a mut Self::Frame) -> &'a mut [u8];
    /// The whole buffer of `frame` ([`frame_size`](Port::frame_size)
    /// bytes), to write a packet; then [`set_len`](Port::set_len).
    fn buffer<'a>(&'a self, frame: &'a mut Self::Frame) -> &'a mut [u8];
    /// Say `frame` holds `len` bytes written at the start of its buffer;
    /// `false` (no change) if that exceeds the frame size.
    fn set_len(&self, frame: &mut Self::Frame, len: usize) -> bool;

    /// The buffer of `frame` and where its packet lies in it: `(buffer,
    /// start, len)`, the packet being `buffer[start..start + len]`. The
    /// loops build each [`pfil::Packet`] over it
    /// ([`pfil::Packet::in_buffer`]), so hooks may grow the packet into
    /// the bytes before it (headroom) and after it (tailroom). The
    /// default: the packet alone ([`bytes`](Port::bytes)), no room.
    #[inline]
    fn room<'a>(&'a self, frame: &'a mut Self::Frame) -> (&'a mut [u8], usize, usize) {
        let b = self.bytes(frame);
        let len = b.len();
        (b, 0, len)
    }
    /// The [`pfil::Packet`] of `frame`, built over its buffer as
    /// [`room`](Port::room) gives it (the loops build every packet this
    /// way). The default clamps the room to the buffer
    /// ([`pfil::Packet::in_buffer_clamped`]); a port whose frames' bounds
    /// are right by construction builds it without the clamps
    /// ([`pfil::Packet::in_buffer_unchecked`]), as the synthetic and
    /// AF_XDP ports do.
    #[inline]
    fn packet<'a>(&'a self, frame: &'a mut Self::Frame) -> pfil::Packet<'a> {
        let (buf, start, len) = self.room(frame);
        pfil::Packet::in_buffer_clamped(buf, start, len)
    }
    /// Say `frame`'s packet is now `len` bytes from `start` of the buffer
    /// [`room`](Port::room) gave (a hook moved or resized it); `false`
    /// (no change) if that is outside the buffer. The default, for ports
    /// without room (whose [`room`](Port::room) is the packet alone):
    /// only the span the packet already has, `0..len` of
    /// [`bytes`](Port::bytes); any other is refused, since
    /// [`set_len`](Port::set_len) counts from the start of the
    /// [`buffer`](Port::buffer), which need not be where the packet is.
    #[inline]
    fn set_span(&self, frame: &mut Self::Frame, start: usize, len: usize) -> bool {
        start == 0 && len == self.bytes(frame).len()
    }

    /// The frames hooks consumed. The loops push and take frames here;
    /// frames still held when a loop returns stay here (counted as
    /// `held`) until the caller gives them back ([`Held::pop_oldest`],
    /// [`recycle`](Port::recycle)) or another loop runs.
    fn held(&mut self) -> &mut Held<Self::Frame>;
    /// Where every frame of the pool is; [`FrameCounts::adds_up`] holds
    /// whenever no loop runs.
    fn counts(&self) -> FrameCounts;

    /// The endpoint on interface `ifindex` (an outbox transmit's target).
    fn find(&self, ifindex: u32) -> Option<PortId> {
        (0..self.ports())
            .map(PortId::new)
            .find(|&p| self.origin(p).ifindex == ifindex)
    }
}
