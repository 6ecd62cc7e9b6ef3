//! One UMEM and the AF_XDP sockets (ports) bound to it, owned by one worker
//! thread. Frames move between the rings and the application as [`Frame`]
//! tokens, so every frame is always in exactly one place ([`FrameCounts`]).
//!
//! A UMEM area can also be shared by several workers ([`SharedUmem`]): it
//! is registered once, each worker gets a [`Umem`] that owns a disjoint
//! range of its frames and its own sockets, each with its own fill and
//! completion rings, so frames never cross from one worker to another.

use std::ops::Range;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pfil_port::{FrameCounts, Held, PortId};

use crate::config::{BoundMode, PortConfig, UmemConfig, MAX_UMEM_BYTES};
use crate::error::{Error, Result};
use crate::frame::{Frame, FrameArea};
use crate::rings::Rings;
use crate::sys;
use crate::xdp::XdpProgram;

pub(crate) static NEXT_UMEM_ID: AtomicU32 = AtomicU32::new(1);

/// One AF_XDP socket on an (interface, queue).
pub(crate) struct Xsk {
    pub(crate) ifname: String,
    pub(crate) ifindex: u32,
    pub(crate) queue: u32,
    pub(crate) mode: BoundMode,
    pub(crate) rings: Rings,
    pub(crate) program: Option<Arc<XdpProgram>>,
    pub(crate) fill_target: u32,
    /// RX ring entries (0 for a TX-only port): frames received and not yet
    /// read, on top of the fill ring.
    pub(crate) rx_size: u32,
    /// TX ring entries: at most this many frames are sent and not yet
    /// reaped at a time ([`Umem::tx`]), so TX never takes more than its
    /// share of the UMEM.
    pub(crate) tx_size: u32,
    /// Frames put in the fill ring and not yet read from the RX ring.
    pub(crate) fill_out: u64,
    /// Frames put in the TX ring and not yet read from the completion ring.
    pub(crate) tx_out: u64,
    /// Kicks that hit EAGAIN/EBUSY (the kernel asked to try again).
    pub(crate) tx_busy: u64,
}

impl Drop for Xsk {
    fn drop(&mut self) {
        if let Some(p) = &self.program {
            p.clear_socket(self.queue);
        }
    }
}

/// The kernel registration of a UMEM area (the xdpilone `Umem`) and the
/// socket every later socket joins with `XDP_SHARED_UMEM`.
pub(crate) struct Reg {
    pub(crate) umem: xdpilone::Umem,
    /// fd and bind mode of the first bound socket (it uses the UMEM's own
    /// fd, which `umem` keeps open). Set only once that socket's open has
    /// fully succeeded.
    pub(crate) first: Option<(RawFd, BoundMode)>,
    /// What `umem` was registered with, to register the area again.
    pub(crate) ucfg: xdpilone::UmemConfig,
}

// SAFETY: (checked against xdpilone 1.3.0, the version Cargo.toml pins)
// `xdpilone::Umem` is `!Send` only because it holds the area as a
// `NonNull<[u8]>`; its other fields (an `Arc` of the socket fd, the config,
// an `Arc<dyn ControlSet + Send + Sync>`) are `Send`. That pointer is the
// mapping in the same `Shared` (dropped after `reg` by field order), which
// is plain memory not tied to a thread, and xdpilone only passes it to the
// kernel (`XDP_UMEM_REG`) and computes addresses from it; this crate never
// uses those. A `Reg` is only reached through `Shared::reg`'s mutex, so it
// is used by one thread at a time (the one opening a port).
unsafe impl Send for Reg {}

/// What every [`Umem`] of one area shares: the registration and the memory.
pub(crate) struct Shared {
    // Field order is drop order: the registration, then the memory.
    /// `None` only for the fake UMEM of the unit tests.
    pub(crate) reg: Mutex<Option<Reg>>,
    pub(crate) area: FrameArea,
    /// Workers the area is split between.
    pub(crate) parts: usize,
}

impl Shared {
    pub(crate) fn reg(&self) -> MutexGuard<'_, Option<Reg>> {
        self.reg.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A UMEM with the ports bound to it, owned and driven by one thread.
///
/// Frames are shared by all its ports: a frame received on one port can be
/// sent on another without a copy (the forwarder does this).
///
/// Sockets other than the first join the UMEM with `XDP_SHARED_UMEM` and
/// inherit its copy/zero-copy and need-wakeup mode (the kernel refuses
/// those flags on a joining socket).
///
/// A `Umem` may also be one worker's part of a [`SharedUmem`]: it then owns
/// only its range of the area's frames ([`Umem::frame_addrs`]); its counts
/// cover those frames.
pub struct Umem {
    // Field order is drop order: ports (rings, sockets) first, then this
    // part's hold on the registration and the memory (dropped with the
    // last part).
    pub(crate) ports: Vec<Xsk>,
    pub(crate) shared: Arc<Shared>,
    /// Byte offsets of the frames this part owns.
    pub(crate) range: Range<u64>,
    pub(crate) free: Vec<u64>,
    /// Frames hooks consumed, with their cookies, oldest first.
    pub(crate) held: Held<Frame>,
    /// Frames out of the pool and the rings: the application's and the
    /// held ones (`counts` tells them apart).
    pub(crate) out: u64,
}

/// One UMEM area registered once and split between several workers, one
/// [`Umem`] (a "part") each. Open each part's ports here, on one thread,
/// then move the parts to their worker threads ([`SharedUmem::into_parts`]).
///
/// Each part owns a disjoint range of frames; each socket gets its own fill
/// and completion rings (one pair per interface queue, a kernel rule), fed
/// and reaped only by the part that opened it, so a frame never moves from
/// one part to another and each part's [`FrameCounts`] add up by
/// themselves. The first socket binds with the requested mode, every other
/// one with `XDP_SHARED_UMEM` only.
pub struct SharedUmem {
    parts: Vec<Umem>,
}

impl SharedUmem {
    /// Allocate and register one area of `parts * cfg.frames` frames, split
    /// into `parts` parts of `cfg.frames` frames.
    ///
    /// # Errors
    /// As [`Umem::new`]; [`Error::Config`] for 0 parts.
    pub fn new(cfg: UmemConfig, parts: usize) -> Result<SharedUmem> {
        if parts == 0 {
            return Err(Error::Config(
                "a shared UMEM needs at least one part".into(),
            ));
        }
        let total = u32::try_from(parts)
            .ok()
            .and_then(|n| cfg.frames.checked_mul(n))
            .unwrap_or(u32::MAX);
        let shared = Arc::new(Shared::new(
            UmemConfig {
                frames: total,
                ..cfg
            },
            parts,
        )?);
        let per = u64::from(cfg.frames) * u64::from(cfg.frame_size);
        let parts = (0..parts as u64)
            .map(|i| Umem::part(shared.clone(), i * per..(i + 1) * per))
            .collect();
        Ok(SharedUmem { parts })
    }

    /// Part `i`, to open its ports.
    ///
    /// # Panics
    /// If `i` is not below the number of parts.
    pub fn part(&mut self, i: usize) -> &mut Umem {
        &mut self.parts[i]
    }

    /// Number of parts.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Never: a shared UMEM has at least one part.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The parts, in order, to hand to the workers.
    pub fn into_parts(self) -> Vec<Umem> {
        self.parts
    }
}

impl std::fmt::Debug for SharedUmem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedUmem")
            .field("parts", &self.parts)
            .finish()
    }
}

// A part (its rings, sockets, free list and its hold on the area) moves to
// its worker thread; keep that true.
const _: () = {
    const fn send<T: Send>() {}
    send::<Umem>();
};

/// Register `mem` (a `Shared`'s area) with the kernel as a UMEM.
fn register(
    ucfg: &xdpilone::UmemConfig,
    mem: &sys::Mmap,
) -> std::result::Result<xdpilone::Umem, xdpilone::Errno> {
    // SAFETY: `mem` is a page-aligned anonymous mapping, the area of a
    // `Shared` (its `area`), which by field order is dropped after
    // `Shared::reg`, where the registration is kept; every ring that
    // refers to it belongs to a `Umem` that holds an `Arc<Shared>` and
    // drops its ports first.
    unsafe { xdpilone::Umem::new(ucfg.clone(), mem.as_slice_ptr()) }
}

impl Reg {
    /// Register the area again, in place of the current registration,
    /// after an open bound the UMEM's own socket and then failed: that
    /// socket cannot be unbound, only closed, and a later open would find
    /// its queue taken. Only when no socket was kept (`first` is `None`):
    /// nothing else uses the old registration. On failure the UMEM is left
    /// unregistered (`None`: later opens say so).
    pub(crate) fn renew(slot: &mut Option<Reg>, area: &FrameArea) {
        let Some(reg) = slot.take() else { return };
        debug_assert!(reg.first.is_none(), "a UMEM with a socket is renewed");
        let ucfg = reg.ucfg.clone();
        // The old registration (and with it the half-opened socket) is
        // closed before the area is registered again.
        drop(reg);
        match register(&ucfg, &area.mem) {
            Ok(umem) => {
                *slot = Some(Reg {
                    umem,
                    first: None,
                    ucfg,
                })
            }
            Err(e) => {
                tracing::warn!(target: "pfil_afxdp", error = %e, "registering the UMEM again after a failed open failed: the UMEM can open no more ports");
            }
        }
    }
}

impl Shared {
    /// Allocate and register an area of `cfg.frames` frames.
    fn new(cfg: UmemConfig, parts: usize) -> Result<Shared> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u32;
        if !cfg.frame_size.is_power_of_two() || cfg.frame_size < 2048 || cfg.frame_size > page {
            return Err(Error::Config(format!(
                "frame size {} must be a power of two from 2048 to {page}",
                cfg.frame_size
            )));
        }
        if !cfg.ring.is_power_of_two() {
            return Err(Error::Config(format!(
                "fill/completion ring size {} must be a power of two",
                cfg.ring
            )));
        }
        if cfg.frames == 0 {
            return Err(Error::Config("a UMEM needs at least one frame".into()));
        }
        let bytes = u64::from(cfg.frames) * u64::from(cfg.frame_size);
        let too_large = |detail: String| Error::UmemTooLarge {
            bytes,
            frames: cfg.frames,
            frame_size: cfg.frame_size,
            detail,
        };
        if bytes > MAX_UMEM_BYTES {
            return Err(too_large(format!("above the {MAX_UMEM_BYTES}-byte limit")));
        }
        let mem =
            sys::Mmap::anonymous(bytes as usize).map_err(|e| too_large(format!("mmap: {e}")))?;
        let ucfg = xdpilone::UmemConfig {
            fill_size: cfg.ring,
            complete_size: cfg.ring,
            frame_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
        };
        let umem = register(&ucfg, &mem).map_err(|e| match e.get_raw() {
            libc::EPERM | libc::EACCES => Error::Permission {
                what: "AF_XDP socket / XDP_UMEM_REG",
            },
            libc::EAFNOSUPPORT => Error::XdpUnsupported {
                ifname: String::new(),
                detail: "AF_XDP sockets are not available (CONFIG_XDP_SOCKETS)".into(),
            },
            _ => too_large(format!("XDP_UMEM_REG: {e}")),
        })?;
        Ok(Shared {
            reg: Mutex::new(Some(Reg {
                umem,
                first: None,
                ucfg,
            })),
            area: FrameArea::new(
                mem,
                cfg.frame_size,
                cfg.frames,
                NEXT_UMEM_ID.fetch_add(1, Ordering::Relaxed),
            ),
            parts,
        })
    }
}

impl Umem {
    /// Allocate and register a UMEM (one part that owns every frame).
    ///
    /// # Errors
    /// [`Error::Config`] for a bad frame size, [`Error::UmemTooLarge`].
    pub fn new(cfg: UmemConfig) -> Result<Umem> {
        let shared = Arc::new(Shared::new(cfg, 1)?);
        let end = u64::from(cfg.frames) * u64::from(cfg.frame_size);
        Ok(Umem::part(shared, 0..end))
    }

    /// The part of `shared` that owns the frames at `range`.
    pub(crate) fn part(shared: Arc<Shared>, range: Range<u64>) -> Umem {
        let fs = u64::from(shared.area.frame_size());
        let free = (range.start / fs..range.end / fs)
            .rev()
            .map(|i| i * fs)
            .collect();
        Umem {
            ports: Vec::new(),
            shared,
            range,
            free,
            held: Held::default(),
            out: 0,
        }
    }

    /// Frames a UMEM (part) needs for `ports`: each port's fill target, RX
    /// ring (if it receives) and TX ring, plus `reserve` frames for the application (at least
    /// [`crate::APP_RESERVE`] for the worker loops, plus what hooks may hold).
    /// [`Umem::open`] refuses a port that would exceed it.
    pub fn frames_needed(ports: &[PortConfig], reserve: u64) -> u64 {
        ports
            .iter()
            .map(|p| {
                let rx = if p.rx { u64::from(p.rx_size) } else { 0 };
                u64::from(p.fill_target) + rx + u64::from(p.tx_size)
            })
            .sum::<u64>()
            + reserve
    }

    /// Frames this UMEM (part) owns.
    pub fn total_frames(&self) -> u64 {
        (self.range.end - self.range.start) / u64::from(self.shared.area.frame_size())
    }

    /// Byte offsets of the frames this UMEM (part) owns: the whole area,
    /// or this worker's range of a [`SharedUmem`].
    pub fn frame_addrs(&self) -> Range<u64> {
        self.range.clone()
    }

    /// How many parts the area is split between (1: not shared).
    pub fn parts(&self) -> usize {
        self.shared.parts
    }

    /// The frame memory, to reach the bytes of [`Frame`]s.
    #[inline]
    pub fn area(&self) -> &FrameArea {
        &self.shared.area
    }

    /// Interface index of a port.
    pub fn ifindex(&self, port: PortId) -> u32 {
        self.ports[port.index()].ifindex
    }

    /// Queue id of a port.
    pub fn queue(&self, port: PortId) -> u32 {
        self.ports[port.index()].queue
    }

    /// Interface name of a port.
    pub fn ifname(&self, port: PortId) -> &str {
        &self.ports[port.index()].ifname
    }

    /// Copy or zero-copy.
    pub fn mode(&self, port: PortId) -> BoundMode {
        self.ports[port.index()].mode
    }

    /// The XDP program steering to this port, if it receives.
    pub fn program(&self, port: PortId) -> Option<&Arc<XdpProgram>> {
        self.ports[port.index()].program.as_ref()
    }

    /// Kicks that the kernel answered with EAGAIN/EBUSY.
    pub fn tx_busy(&self, port: PortId) -> u64 {
        self.ports[port.index()].tx_busy
    }

    /// The kernel's AF_XDP statistics for a port.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn statistics(&self, port: PortId) -> Result<sys::XdpStats> {
        sys::xdp_statistics(self.ports[port.index()].rings.fd())
            .map_err(|e| Error::io("XDP_STATISTICS", e))
    }

    /// The raw socket fd of a port (to poll on).
    pub fn fd(&self, port: PortId) -> RawFd {
        self.ports[port.index()].rings.fd()
    }

    /// Take a free frame (length 0) to write a packet into.
    pub fn alloc(&mut self) -> Option<Frame> {
        let addr = self.free.pop()?;
        debug_assert!(self.is_frame_base(addr), "free list holds {addr:#x}");
        self.out += 1;
        Some(self.shared.area.frame(addr, 0, 0))
    }

    /// Give a frame back to the free pool.
    ///
    /// # Errors
    /// [`Error::ForeignFrame`] if it came from another UMEM.
    pub fn recycle(&mut self, frame: Frame) -> Result<()> {
        if self.put_back(frame) {
            Ok(())
        } else {
            Err(Error::ForeignFrame)
        }
    }

    /// [`Umem::recycle`] without an error to build or drop (the loops call
    /// it per frame): `false`, and nothing changes, for a foreign frame.
    #[inline]
    pub(crate) fn put_back(&mut self, frame: Frame) -> bool {
        if !self.owns(&frame) {
            return false;
        }
        self.put_free(frame.addr());
        self.out -= 1;
        true
    }

    /// Keep a frame a hook returned `Consumed` for, under `cookie` (the
    /// packet's [`pfil::Packet::cookie`]): it is counted as `held` until
    /// [`take_held_cookie`](Umem::take_held_cookie) (the hook's request,
    /// see [`crate::Outbox`]) or [`take_held`](Umem::take_held) gives it
    /// back to the application.
    ///
    /// # Errors
    /// [`Error::ForeignFrame`].
    pub fn hold(&mut self, frame: Frame, cookie: u64) -> Result<()> {
        self.own(&frame)?;
        self.held.push(cookie, frame);
        Ok(())
    }

    /// Frames currently held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Take the oldest held frame back into the application (then send,
    /// recycle or hold it again).
    pub fn take_held(&mut self) -> Option<Frame> {
        self.held.pop_oldest()
    }

    /// Take the frame held under `cookie` back into the application;
    /// `None` if no frame is held under it (never held, already given back,
    /// or evicted past the bound).
    pub fn take_held_cookie(&mut self, cookie: u64) -> Option<Frame> {
        self.held.take(cookie)
    }

    /// Give every held frame back to the free pool.
    pub fn release_held(&mut self) -> usize {
        self.evict_held(0)
    }

    /// Give the oldest held frames back to the free pool until at most
    /// `limit` are held; returns how many went back.
    pub fn evict_held(&mut self, limit: usize) -> usize {
        let mut n = 0;
        while let Some(f) = self.held.pop_over(limit) {
            // The held set is reachable through `Port::held`, so it may hold
            // a token of another UMEM: only this part's frames re-enter its
            // free list (a foreign one is dropped, never aliased).
            if self.put_back(f) {
                n += 1;
            }
        }
        n
    }

    /// A new cookie epoch for the next batch (see
    /// [`pfil_port::Held::next_epoch`]; a UMEM is at most 4 GiB, so frame
    /// addresses fit the low 32 bits).
    #[inline]
    pub fn next_cookie_epoch(&mut self) -> u64 {
        self.held.next_epoch()
    }

    /// Is `addr` the start of one of this part's frames?
    #[inline]
    pub(crate) fn is_frame_base(&self, addr: u64) -> bool {
        self.range.contains(&addr) && addr % u64::from(self.shared.area.frame_size()) == 0
    }

    /// The one way a frame re-enters the free pool: by its frame base,
    /// so [`Umem::alloc`] never hands out an address inside a frame.
    #[inline]
    fn put_free(&mut self, base: u64) {
        debug_assert!(
            self.is_frame_base(base),
            "{base:#x} is not a frame of {:?}",
            self.range
        );
        self.free.push(base);
    }

    /// Is `frame` one of this part's frames?
    #[inline]
    pub(crate) fn owns(&self, frame: &Frame) -> bool {
        self.shared.area.made(frame) && self.range.contains(&frame.addr())
    }

    fn own(&self, frame: &Frame) -> Result<()> {
        if !self.owns(frame) {
            return Err(Error::ForeignFrame);
        }
        Ok(())
    }

    /// Where every frame is now. The split between fill/RX and TX/completion
    /// races with the kernel while traffic flows; the sum does not.
    pub fn counts(&self) -> FrameCounts {
        let mut c = FrameCounts {
            free: self.free.len() as u64,
            app: self.out.saturating_sub(self.held.len() as u64),
            held: self.held.len() as u64,
            total: self.total_frames(),
            ..FrameCounts::default()
        };
        for p in &self.ports {
            let rx = u64::from(p.rings.rx_available()).min(p.fill_out);
            c.rx += rx;
            c.fill += p.fill_out - rx;
            let comp = u64::from(p.rings.comp_available()).min(p.tx_out);
            c.completion += comp;
            c.tx += p.tx_out - comp;
        }
        c
    }
}

#[cfg(test)]
impl Umem {
    /// A UMEM of plain memory, not registered with the kernel, for ports
    /// on a fake kernel ([`Umem::open_fake`]).
    pub(crate) fn fake(cfg: UmemConfig) -> Umem {
        let bytes = u64::from(cfg.frames) * u64::from(cfg.frame_size);
        let mem = sys::Mmap::anonymous(bytes as usize).expect("mmap");
        let shared = Arc::new(Shared {
            reg: Mutex::new(None),
            area: FrameArea::new(
                mem,
                cfg.frame_size,
                cfg.frames,
                NEXT_UMEM_ID.fetch_add(1, Ordering::Relaxed),
            ),
            parts: 1,
        });
        Umem::part(shared, 0..bytes)
    }

    /// A port on a fake kernel (interface index `ifindex`), within the
    /// frame budget like [`Umem::open`]; stocks its fill ring.
    pub(crate) fn open_fake(
        &mut self,
        cfg: &PortConfig,
        ifindex: u32,
        kernel: crate::rings::fake::FakeKernel,
    ) -> Result<PortId> {
        self.check_budget(cfg)?;
        Ok(self.push_port(cfg, ifindex, BoundMode::Copy, Rings::Fake(kernel), None))
    }
}

impl std::fmt::Debug for Umem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Umem")
            .field("frames", &self.counts().total)
            .field("frame_addrs", &self.range)
            .field("parts", &self.shared.parts)
            .field("frame_size", &self.shared.area.frame_size())
            .field("ports", &self.ports.len())
            .field("counts", &self.counts())
            .finish()
    }
}
