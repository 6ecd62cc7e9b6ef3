//! The four rings of one AF_XDP socket and its wakeup calls, behind one
//! seam: the real xdpilone rings, or (in unit tests) a fake kernel that
//! needs no privileges, so refill, receive, TX, kicks, completions and the
//! frame accounting built on them are tested with exact addresses.
//!
//! Outside `cfg(test)` the enum has one variant and every `match` is
//! irrefutable: the seam costs nothing on the datapath.

use std::io;
use std::os::fd::RawFd;

use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, RingRx, RingTx, Socket, User};

use crate::sys;

/// The real rings of a bound socket.
pub(crate) struct RealRings {
    pub(crate) fd: RawFd,
    pub(crate) rx: RingRx,
    pub(crate) tx: RingTx,
    pub(crate) fq: DeviceQueue,
    // Keep the socket configuration (and fd) alive.
    pub(crate) _user: User,
    pub(crate) _socket: Socket,
}

/// The rings of one port.
#[cfg_attr(
    test,
    expect(
        clippy::large_enum_variant,
        reason = "the fake exists only in unit tests; boxing the real rings would put an indirection on the datapath"
    )
)]
pub(crate) enum Rings {
    Real(RealRings),
    #[cfg(test)]
    Fake(fake::FakeKernel),
}

impl Rings {
    /// The socket fd (to poll on); -1 for a fake.
    #[inline]
    pub(crate) fn fd(&self) -> RawFd {
        match self {
            Rings::Real(r) => r.fd,
            #[cfg(test)]
            Rings::Fake(_) => -1,
        }
    }

    /// Descriptors in the RX ring, not yet read.
    #[inline]
    pub(crate) fn rx_available(&self) -> u32 {
        match self {
            Rings::Real(r) => r.rx.available(),
            #[cfg(test)]
            Rings::Fake(k) => k.rx_available(),
        }
    }

    /// Read up to `max` RX descriptors, calling `f(addr, len)` for each.
    #[inline]
    pub(crate) fn receive(&mut self, max: u32, mut f: impl FnMut(u64, u32)) -> u32 {
        match self {
            Rings::Real(r) => {
                let mut rd = r.rx.receive(max);
                let mut n = 0;
                while let Some(XdpDesc { addr, len, .. }) = rd.read() {
                    f(addr, len);
                    n += 1;
                }
                rd.release();
                n
            }
            #[cfg(test)]
            Rings::Fake(k) => k.receive(max, f),
        }
    }

    /// Entries in the fill ring the kernel has not taken yet.
    #[inline]
    pub(crate) fn fill_pending(&self) -> u32 {
        match self {
            Rings::Real(r) => r.fq.pending(),
            #[cfg(test)]
            Rings::Fake(k) => k.fill_pending(),
        }
    }

    /// Put up to `n` of `addrs` in the fill ring; returns how many went in.
    #[inline]
    pub(crate) fn fill(&mut self, n: u32, addrs: impl Iterator<Item = u64>) -> u32 {
        match self {
            Rings::Real(r) => {
                let mut w = r.fq.fill(n);
                let done = w.insert(addrs);
                w.commit();
                done
            }
            #[cfg(test)]
            Rings::Fake(k) => k.fill(n, addrs),
        }
    }

    /// Does the fill ring want a wakeup (need-wakeup mode)?
    #[inline]
    pub(crate) fn fill_needs_wakeup(&self) -> bool {
        match self {
            Rings::Real(r) => r.fq.needs_wakeup(),
            #[cfg(test)]
            Rings::Fake(_) => false,
        }
    }

    /// Completions not yet read.
    #[inline]
    pub(crate) fn comp_available(&self) -> u32 {
        match self {
            Rings::Real(r) => r.fq.available(),
            #[cfg(test)]
            Rings::Fake(k) => k.comp_available(),
        }
    }

    /// Read up to `max` completions, calling `f(addr)` for each.
    #[inline]
    pub(crate) fn complete(&mut self, max: u32, mut f: impl FnMut(u64)) -> u32 {
        match self {
            Rings::Real(r) => {
                let mut rd = r.fq.complete(max);
                let mut n = 0;
                while let Some(addr) = rd.read() {
                    f(addr);
                    n += 1;
                }
                rd.release();
                n
            }
            #[cfg(test)]
            Rings::Fake(k) => k.complete(max, f),
        }
    }

    /// Put up to `n` of `descs` on the TX ring; returns how many went on.
    #[inline]
    pub(crate) fn transmit(&mut self, n: u32, descs: impl Iterator<Item = XdpDesc>) -> u32 {
        match self {
            Rings::Real(r) => {
                let mut w = r.tx.transmit(n);
                let done = w.insert(descs);
                w.commit();
                done
            }
            #[cfg(test)]
            Rings::Fake(k) => k.transmit(n, descs),
        }
    }

    /// Descriptors on the TX ring the kernel has not taken yet.
    #[inline]
    pub(crate) fn tx_pending(&self) -> u32 {
        match self {
            Rings::Real(r) => r.tx.pending(),
            #[cfg(test)]
            Rings::Fake(k) => k.tx_pending(),
        }
    }

    /// Does the TX ring want a wakeup (need-wakeup mode)?
    #[inline]
    pub(crate) fn tx_needs_wakeup(&self) -> bool {
        match self {
            Rings::Real(r) => r.tx.needs_wakeup(),
            #[cfg(test)]
            Rings::Fake(_) => true,
        }
    }

    /// Wake the kernel's TX (copy mode sends a budget of frames).
    #[inline]
    pub(crate) fn kick_tx(&mut self) -> io::Result<()> {
        match self {
            Rings::Real(r) => sys::kick_tx(r.fd),
            #[cfg(test)]
            Rings::Fake(k) => k.kick_tx(),
        }
    }

    /// Wake the kernel's RX.
    #[inline]
    pub(crate) fn kick_rx(&mut self) {
        match self {
            Rings::Real(r) => sys::kick_rx(r.fd),
            #[cfg(test)]
            Rings::Fake(_) => {}
        }
    }
}

/// A fake kernel for one socket: plain queues standing for the rings, a
/// NIC that writes delivered packets into fill frames after a headroom,
/// and a TX that completes (or not) on each kick, failing on demand.
#[cfg(test)]
pub(crate) mod fake {
    use std::collections::VecDeque;
    use std::io;
    use std::sync::{Arc, Mutex, MutexGuard};

    use xdpilone::xdp::XdpDesc;

    /// The kernel's RX headroom in copy mode (XDP_PACKET_HEADROOM).
    pub(crate) const HEADROOM: u32 = 256;

    /// What the test sets and reads.
    #[derive(Debug, Default)]
    pub(crate) struct State {
        pub(crate) fill: VecDeque<u64>,
        pub(crate) rx: VecDeque<(u64, u32)>,
        pub(crate) tx: VecDeque<XdpDesc>,
        pub(crate) comp: VecDeque<u64>,
        pub(crate) fill_size: usize,
        pub(crate) rx_size: usize,
        pub(crate) tx_size: usize,
        pub(crate) comp_size: usize,
        /// Move TX descriptors to the completion ring on a kick (up to 32).
        pub(crate) complete_on_kick: bool,
        /// Kicks that succeed before every later one fails with EIO.
        pub(crate) kicks_ok: Option<u32>,
        pub(crate) kicks: u32,
        /// What the "NIC" sent: (address, length).
        pub(crate) sent: Vec<(u64, u32)>,
        pub(crate) fill_ring_empty: u64,
        pub(crate) rx_ring_full: u64,
    }

    /// One socket's fake kernel; clones share the state (the test keeps
    /// one, the port the other).
    #[derive(Clone, Debug)]
    pub(crate) struct FakeKernel(pub(crate) Arc<Mutex<State>>);

    impl FakeKernel {
        pub(crate) fn new(ring: usize) -> FakeKernel {
            FakeKernel(Arc::new(Mutex::new(State {
                fill_size: ring,
                rx_size: ring,
                tx_size: ring,
                comp_size: ring,
                complete_on_kick: true,
                ..State::default()
            })))
        }

        pub(crate) fn state(&self) -> MutexGuard<'_, State> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// The NIC receives a packet of `len` bytes: into the next fill
        /// frame after the headroom, onto the RX ring. Returns the address
        /// of the packet, or `None` if it was dropped (counted).
        pub(crate) fn deliver(&self, len: u32) -> Option<u64> {
            let mut s = self.state();
            if s.rx.len() >= s.rx_size {
                s.rx_ring_full += 1;
                return None;
            }
            let Some(base) = s.fill.pop_front() else {
                s.fill_ring_empty += 1;
                return None;
            };
            let addr = base + u64::from(HEADROOM);
            s.rx.push_back((addr, len));
            Some(addr)
        }

        pub(super) fn rx_available(&self) -> u32 {
            self.state().rx.len() as u32
        }

        pub(super) fn receive(&mut self, max: u32, mut f: impl FnMut(u64, u32)) -> u32 {
            let mut s = self.state();
            let mut n = 0;
            while n < max {
                let Some((a, l)) = s.rx.pop_front() else {
                    break;
                };
                f(a, l);
                n += 1;
            }
            n
        }

        pub(super) fn fill_pending(&self) -> u32 {
            self.state().fill.len() as u32
        }

        pub(super) fn fill(&mut self, n: u32, addrs: impl Iterator<Item = u64>) -> u32 {
            let mut s = self.state();
            let room = s.fill_size - s.fill.len();
            let mut done = 0;
            for a in addrs.take((n as usize).min(room)) {
                s.fill.push_back(a);
                done += 1;
            }
            done
        }

        pub(super) fn comp_available(&self) -> u32 {
            self.state().comp.len() as u32
        }

        pub(super) fn complete(&mut self, max: u32, mut f: impl FnMut(u64)) -> u32 {
            let mut s = self.state();
            let mut n = 0;
            while n < max {
                let Some(a) = s.comp.pop_front() else { break };
                f(a);
                n += 1;
            }
            n
        }

        pub(super) fn transmit(&mut self, n: u32, descs: impl Iterator<Item = XdpDesc>) -> u32 {
            let mut s = self.state();
            let room = s.tx_size - s.tx.len();
            let mut done = 0;
            for d in descs.take((n as usize).min(room)) {
                s.tx.push_back(d);
                done += 1;
            }
            done
        }

        pub(super) fn tx_pending(&self) -> u32 {
            self.state().tx.len() as u32
        }

        pub(super) fn kick_tx(&mut self) -> io::Result<()> {
            let mut s = self.state();
            s.kicks += 1;
            if s.kicks_ok.is_some_and(|ok| s.kicks > ok) {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            if s.complete_on_kick {
                for _ in 0..32 {
                    if s.comp.len() >= s.comp_size {
                        break;
                    }
                    let Some(d) = s.tx.pop_front() else { break };
                    s.sent.push((d.addr, d.len));
                    s.comp.push_back(d.addr);
                }
            }
            Ok(())
        }
    }
}
