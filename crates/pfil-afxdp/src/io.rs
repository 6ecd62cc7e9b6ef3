//! Moving frames through the rings: receive, refill, send, kick, flush,
//! reap; and the [`pfil_port::Port`] implementation the worker loops use.

use xdpilone::xdp::XdpDesc;

use crate::config::BoundMode;
use crate::error::{Error, Result};
use crate::frame::{Frame, FrameArea};
use crate::sys;
use crate::umem::Umem;
use pfil_port::PortId;

impl Umem {
    /// Reap completions of every port into the free pool.
    pub fn reap(&mut self) -> usize {
        let mut n = 0;
        for i in 0..self.ports.len() {
            n += self.reap_port(i);
        }
        n
    }

    fn reap_port(&mut self, i: usize) -> usize {
        let fs = u64::from(self.shared.area.frame_size());
        let range = self.range.clone();
        let p = &mut self.ports[i];
        if p.tx_out == 0 {
            return 0;
        }
        let free = &mut self.free;
        let n = p
            .rings
            .complete(p.tx_out.min(u64::from(u32::MAX)) as u32, |addr| {
                // A completion carries the address we sent: the packet's start,
                // after the RX headroom for a forwarded frame. Back to the frame
                // base, or `alloc` would hand out a window into the next frame.
                let base = addr - addr % fs;
                debug_assert!(
                    range.contains(&base),
                    "completion {addr:#x} outside {range:?}"
                );
                free.push(base);
            }) as usize;
        p.tx_out -= n as u64;
        n
    }

    /// Top up a port's fill ring from the free pool, up to its fill target.
    pub fn refill(&mut self, port: PortId) -> usize {
        self.refill_with(port, false)
    }

    /// [`Umem::refill`]; `rx_drained`: the RX ring was just read empty, so
    /// the fill ring holds exactly `fill_out` frames and the kernel's
    /// consumer index (a line the kernel writes) need not be read.
    fn refill_with(&mut self, port: PortId, rx_drained: bool) -> usize {
        let p = &mut self.ports[port.index()];
        // The target is what the *fill ring* holds, not fill + RX: frames
        // received and not yet read still leave the kernel a full fill
        // ring, so a worker that falls behind has the RX ring on top of the
        // fill ring before anything is dropped.
        let in_fill = if rx_drained {
            p.fill_out
        } else {
            u64::from(p.rings.fill_pending())
        };
        let want = u64::from(p.fill_target).saturating_sub(in_fill);
        // Top up in chunks: every producer write is a cache line the
        // kernel (on the sending CPU for veth) has to fetch back.
        if want < u64::from(p.fill_target / 8).clamp(1, 64) {
            return 0;
        }
        let n = want.min(self.free.len() as u64) as u32;
        if n == 0 {
            return 0;
        }
        let start = self.free.len();
        let done = p
            .rings
            .fill(n, self.free[start - n as usize..].iter().rev().copied());
        self.free.truncate(start - done as usize);
        p.fill_out += u64::from(done);
        done as usize
    }

    /// Receive up to `out`'s spare capacity of frames from `port`'s RX ring
    /// into `out` (they are the application's until given back), after
    /// reaping completions; then top up the fill ring. Returns how many.
    pub fn rx_batch<const N: usize>(
        &mut self,
        port: PortId,
        out: &mut arrayvec::ArrayVec<Frame, N>,
    ) -> usize {
        self.reap();
        let area = &self.shared.area;
        let frame_size = area.frame_size();
        let range = self.range.clone();
        let p = &mut self.ports[port.index()];
        let room = out.remaining_capacity() as u32;
        if room == 0 {
            return 0;
        }
        let n = u64::from(p.rings.receive(room, |addr, len| {
            // The kernel writes the packet after its XDP headroom: keep the
            // frame-aligned address as the identity and the offset apart.
            let base = addr - addr % u64::from(frame_size);
            // The kernel fills only from this part's fill rings.
            debug_assert!(range.contains(&base), "RX frame {base} outside {range:?}");
            let off = (addr - base) as u32;
            out.push(area.frame(base, off, len.min(frame_size - off)));
        }));
        p.fill_out -= n;
        self.out += n;
        // Fewer than asked for: the RX ring is empty (as of its producer
        // index, just read), so the fill ring holds `fill_out` frames.
        self.refill_with(port, n < u64::from(room));
        let p = &mut self.ports[port.index()];
        if n == 0 && p.rings.fill_needs_wakeup() {
            p.rings.kick_rx();
        }
        n as usize
    }

    /// Wait up to `timeout_ms` for any of `ports` (at most 8) to have
    /// frames to read.
    pub fn poll_rx(&mut self, ports: &[PortId], timeout_ms: i32) -> bool {
        let mut fds = [0; 8];
        let mut n = 0;
        for p in ports.iter().take(8) {
            let p = &self.ports[p.index()];
            if p.rings.rx_available() > 0 {
                return true;
            }
            fds[n] = p.rings.fd();
            n += 1;
        }
        sys::poll_in(&fds[..n], timeout_ms)
    }

    /// Put frames on `port`'s TX ring and kick the kernel. Takes frames
    /// from the front of `frames` as long as the ring has room; the rest
    /// stay in `frames` for a later call. Kicks at most a bounded number of
    /// times (copy mode sends [`crate::COPY_TX_PER_KICK`] per kick; EAGAIN/EBUSY
    /// mean "try again"); what is not sent yet stays in the TX ring and
    /// goes out on the next call or [`flush`](Umem::flush).
    ///
    /// # Errors
    /// [`Error::ForeignFrame`] (nothing is queued then); [`Error::Io`] for
    /// a kick that fails otherwise (the frames stay in the TX ring).
    pub fn tx<const N: usize>(
        &mut self,
        port: PortId,
        frames: &mut arrayvec::ArrayVec<Frame, N>,
    ) -> Result<usize> {
        if !frames.iter().all(|f| self.owns(f)) {
            return Err(Error::ForeignFrame);
        }
        self.reap_port(port.index());
        let p = &mut self.ports[port.index()];
        let mut n = 0u32;
        // Frames sent and not yet reaped stay within the TX ring's share
        // of the frame budget (see `open`), whatever the completion ring
        // holds.
        let room = u64::from(p.tx_size).saturating_sub(p.tx_out);
        let want = (frames.len() as u64).min(room) as u32;
        if want > 0 {
            n = p.rings.transmit(
                want,
                frames.iter().map(|f| {
                    let (addr, len) = FrameArea::desc(f);
                    XdpDesc {
                        addr,
                        len,
                        options: 0,
                    }
                }),
            );
        }
        frames.drain(..n as usize);
        p.tx_out += u64::from(n);
        self.out -= u64::from(n);
        self.kick_tx(port, 4)?;
        Ok(n as usize)
    }

    /// Kick `port`'s TX up to `max_kicks` times while its ring holds
    /// frames (EAGAIN/EBUSY count as a kick and reap completions). Returns
    /// the frames still in the TX ring.
    ///
    /// # Errors
    /// [`Error::Io`] for a kick that fails with another error.
    pub fn kick_tx(&mut self, port: PortId, max_kicks: u32) -> Result<u32> {
        let mut kicks = 0;
        loop {
            let p = &mut self.ports[port.index()];
            let pending = p.rings.tx_pending();
            if pending == 0 || kicks >= max_kicks {
                return Ok(pending);
            }
            if p.mode == BoundMode::ZeroCopy && !p.rings.tx_needs_wakeup() {
                return Ok(pending);
            }
            kicks += 1;
            match p.rings.kick_tx() {
                Ok(()) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {
                        p.tx_busy += 1;
                        self.reap_port(port.index());
                    }
                    _ => return Err(Error::io("sendto (TX kick)", e)),
                },
            }
        }
    }

    /// Kick `port` until its TX ring is empty, reaping completions, for at
    /// most `max_kicks` kicks.
    ///
    /// # Errors
    /// [`Error::TxStalled`] if frames remain after that.
    pub fn flush(&mut self, port: PortId, max_kicks: u32) -> Result<()> {
        let mut kicks = 0;
        while kicks < max_kicks {
            let left = self.kick_tx(port, 1)?;
            self.reap_port(port.index());
            if left == 0 {
                return Ok(());
            }
            kicks += 1;
            if kicks % 64 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
        let p = &self.ports[port.index()];
        Err(Error::TxStalled {
            ifname: p.ifname.clone(),
            queue: p.queue,
            pending: p.rings.tx_pending(),
            kicks,
        })
    }

    /// Frames sent on `port` whose completion has not been reaped.
    pub fn tx_outstanding(&self, port: PortId) -> u64 {
        self.ports[port.index()].tx_out
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// All port ids.
    pub fn port_ids(&self) -> impl Iterator<Item = PortId> {
        (0..self.ports.len()).map(PortId::new)
    }

    /// Free frames in the pool.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Close a port's RX side: stop steering its queue to the socket (so
    /// no new frames arrive) — used before draining at shutdown.
    pub fn stop_rx(&mut self, port: PortId) {
        if let Some(p) = &self.ports[port.index()].program {
            p.clear_socket(self.ports[port.index()].queue);
        }
    }
}

/// Kicks [`Umem::flush`] may take when a loop stops.
const FLUSH_KICKS: u32 = 20_000;

/// The worker loops of [`pfil_port`] on a UMEM: its ports are the
/// endpoints, its frames the pool.
impl pfil_port::Port for Umem {
    type Frame = Frame;
    type Error = Error;

    #[inline]
    fn ports(&self) -> usize {
        self.ports.len()
    }

    #[inline]
    fn origin(&self, port: PortId) -> pfil_port::Origin {
        let p = &self.ports[port.index()];
        pfil_port::Origin {
            ifindex: p.ifindex,
            queue: p.queue,
        }
    }

    fn name(&self, port: PortId) -> &str {
        self.ifname(port)
    }

    #[inline]
    fn frame_size(&self) -> usize {
        self.shared.area.frame_size() as usize
    }

    #[inline]
    fn rx(&mut self, port: PortId, out: &mut pfil_port::Batch<Frame>) -> usize {
        self.rx_batch(port, out)
    }

    #[inline]
    fn poll_rx(&mut self, ports: &[PortId], timeout_ms: i32) -> bool {
        Umem::poll_rx(self, ports, timeout_ms)
    }

    #[inline]
    fn tx(&mut self, port: PortId, frames: &mut pfil_port::Batch<Frame>) -> Result<usize> {
        Umem::tx(self, port, frames)
    }

    #[inline]
    fn kick_tx(&mut self, port: PortId, max_kicks: u32) -> Result<u32> {
        Umem::kick_tx(self, port, max_kicks)
    }

    fn flush(&mut self, port: PortId) -> Result<()> {
        Umem::flush(self, port, FLUSH_KICKS)
    }

    #[inline]
    fn reap(&mut self) -> usize {
        Umem::reap(self)
    }

    #[inline]
    fn alloc(&mut self) -> Option<Frame> {
        Umem::alloc(self)
    }

    /// Every frame a loop holds came from its own UMEM (`rx`, `alloc`,
    /// `held`), so this cannot fail; a foreign frame would be a bug,
    /// caught in debug builds (and leaked, not misplaced, in release).
    #[inline]
    fn recycle(&mut self, frame: Frame) {
        let ok = self.put_back(frame);
        debug_assert!(ok, "a loop held a foreign frame");
    }

    #[inline]
    fn bytes<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        self.shared.area.bytes(frame)
    }

    #[inline]
    fn buffer<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        self.shared.area.buffer(frame)
    }

    #[inline]
    fn set_len(&self, frame: &mut Frame, len: usize) -> bool {
        self.shared.area.set_len(frame, len)
    }

    #[inline]
    fn room<'a>(&'a self, frame: &'a mut Frame) -> (&'a mut [u8], usize, usize) {
        self.shared.area.room(frame)
    }

    #[inline]
    fn packet<'a>(&'a self, frame: &'a mut Frame) -> pfil::Packet<'a> {
        self.shared.area.packet(frame)
    }

    #[inline]
    fn set_span(&self, frame: &mut Frame, start: usize, len: usize) -> bool {
        self.shared.area.set_span(frame, start, len)
    }

    #[inline]
    fn held(&mut self) -> &mut pfil_port::Held<Frame> {
        &mut self.held
    }

    fn counts(&self) -> pfil_port::FrameCounts {
        Umem::counts(self)
    }
}
