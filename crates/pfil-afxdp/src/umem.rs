//! One UMEM and the AF_XDP sockets (ports) bound to it, owned by one worker
//! thread. Frames move between the rings and the application as [`Frame`]
//! tokens, so every frame is always in exactly one place ([`FrameCounts`]).
//!
//! A UMEM area can also be shared by several workers ([`SharedUmem`]): it
//! is registered once, each worker gets a [`Umem`] that owns a disjoint
//! range of its frames and its own sockets, each with its own fill and
//! completion rings, so frames never cross from one worker to another.

use std::ffi::CString;
use std::num::NonZeroU32;
use std::ops::Range;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use xdpilone::xdp::XdpDesc;
use xdpilone::{IfInfo, Socket, SocketConfig};

use crate::error::{Error, Result};
use crate::rings::{RealRings, Rings};
use crate::sys;
use crate::xdp::{queue_count, XdpMode, XdpProgram};

/// Frames that copy-mode TX sends per kick (the kernel's TX budget).
pub const COPY_TX_PER_KICK: u32 = 32;

/// Frames per batch of the worker loops ([`crate::run`]).
pub const BATCH: usize = 64;

/// Frames [`Umem::open`] keeps back for the application on top of every
/// port's fill target and TX ring: a loop's batch and its TX staging batch.
pub const APP_RESERVE: u64 = 2 * BATCH as u64;

/// Largest UMEM this crate will try to register (4 GiB).
pub const MAX_UMEM_BYTES: u64 = 1 << 32;

static NEXT_UMEM_ID: AtomicU32 = AtomicU32::new(1);

/// Size of a UMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UmemConfig {
    /// Number of frames (of each worker, for a [`SharedUmem`]).
    pub frames: u32,
    /// Bytes per frame: a power of two from 2048 to the page size.
    pub frame_size: u32,
    /// Entries of the UMEM's fill and completion rings (a power of two;
    /// a port's `fill_target` is capped by it).
    pub ring: u32,
}

impl Default for UmemConfig {
    fn default() -> Self {
        UmemConfig {
            // A forwarder's two ports at the default ring sizes (fill
            // target 1024, RX and TX 2048 each) plus batches and held
            // frames: 10 624; 32 MiB at 2 KiB frames.
            frames: 16384,
            frame_size: 2048,
            ring: 2048,
        }
    }
}

/// How the socket binds: zero-copy needs driver support (veth has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BindMode {
    /// Try zero-copy, fall back to copy.
    #[default]
    Auto,
    /// Copy mode only.
    Copy,
    /// Zero-copy only.
    ZeroCopy,
}

/// The mode a socket ended up bound in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundMode {
    /// Copy mode: the kernel copies frames; TX goes out only on kicks, at
    /// most [`COPY_TX_PER_KICK`] per kick.
    Copy,
    /// Zero-copy: the driver DMAs straight to and from the UMEM.
    ZeroCopy,
}

/// One AF_XDP socket to open on a UMEM: an (interface, queue) pair.
#[derive(Clone, Debug)]
pub struct PortConfig {
    /// Interface name, in the calling thread's network namespace.
    pub ifname: String,
    /// Queue id, below the interface's queue count.
    pub queue: u32,
    /// Copy / zero-copy.
    pub bind: BindMode,
    /// Receive on this port: attach (or reuse, see `program`) the redirect
    /// program and steer the queue to the socket. `false` for a TX-only
    /// port (a generator).
    pub rx: bool,
    /// XDP attach mode when this port attaches the program itself.
    pub xdp_mode: XdpMode,
    /// A program already attached to the interface (shared by the ports of
    /// its queues); `None` attaches one for this port when `rx` is set.
    pub program: Option<Arc<XdpProgram>>,
    /// RX ring entries (power of two).
    pub rx_size: u32,
    /// TX ring entries (power of two).
    pub tx_size: u32,
    /// Fill ring entries (power of two). The fill and completion rings
    /// belong to the UMEM and are sized by [`UmemConfig::ring`]; this
    /// bounds `fill_target`.
    pub fill_size: u32,
    /// Completion ring entries (power of two); see `fill_size`.
    pub comp_size: u32,
    /// Frames to keep in the fill ring (at most `fill_size`).
    pub fill_target: u32,
}

impl PortConfig {
    /// Defaults for `ifname` queue `queue`: RX on, auto modes, 2048-entry
    /// rings, 1024 frames kept in the fill ring.
    pub fn new(ifname: &str, queue: u32) -> PortConfig {
        PortConfig {
            ifname: ifname.to_owned(),
            queue,
            bind: BindMode::Auto,
            rx: true,
            xdp_mode: XdpMode::Auto,
            program: None,
            rx_size: 2048,
            tx_size: 2048,
            fill_size: 2048,
            comp_size: 2048,
            fill_target: 1024,
        }
    }

    /// TX only: no XDP program, nothing steered to the socket.
    pub fn tx_only(mut self) -> PortConfig {
        self.rx = false;
        self.fill_target = 0;
        self
    }
}

/// Index of a port within its [`Umem`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortId(pub(crate) usize);

/// Ownership token of one UMEM frame held by the application.
///
/// Not `Clone`: a `Frame` is the only handle to its bytes, which is what
/// makes [`FrameArea::bytes`] sound. Give every frame back, to
/// [`Umem::tx`], [`Umem::recycle`] or [`Umem::hold`]; a dropped token is
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

/// Where every frame of a UMEM is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// In fill rings, waiting for the kernel to receive into them.
    pub fill: u64,
    /// In RX rings, received, not yet read by the application.
    pub rx: u64,
    /// Free in the application's pool.
    pub free: u64,
    /// Handed to the application as [`Frame`] tokens.
    pub app: u64,
    /// In TX rings, not yet sent.
    pub tx: u64,
    /// In completion rings, sent, not yet reaped.
    pub completion: u64,
    /// Held because a hook returned `Consumed` ([`Umem::take_held`]).
    pub held: u64,
    /// Frames in the UMEM.
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

/// The frame memory of a UMEM. Bytes are reached only through a `&mut`
/// [`Frame`], so two live slices never alias.
pub struct FrameArea {
    mem: sys::Mmap,
    frame_size: u32,
    frames: u32,
    id: u32,
}

// SAFETY: `FrameArea` hands out bytes only through `bytes`/`buffer`, which
// need a `&mut Frame`. A `Frame` is the unique token of its frame across
// every thread: it is not `Clone`, only `Umem::alloc` (from a free list) and
// `Umem::rx_batch` (from the RX ring of a socket whose fill ring only that
// `Umem` stocks) make one, and the `Umem`s sharing an area own disjoint
// frame ranges. So two threads holding `&FrameArea` never reach the same
// bytes at once; the other methods only read immutable fields.
unsafe impl Sync for FrameArea {}

impl FrameArea {
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
    /// of another UMEM (a token this area did not make).
    #[inline]
    pub fn buffer<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        let start = frame.addr as usize;
        let size = self.frame_size as usize;
        if frame.umem != self.id || start + size > self.mem.len() {
            return Default::default();
        }
        // SAFETY: `start..start + size` lies within the mapping (checked
        // above). The `Frame` token for this address is unique (not Clone,
        // only made by this UMEM for frames it owns and the kernel does not
        // hold), and we borrow it mutably for `'a`, so no other slice of
        // these bytes exists for `'a`; the mapping lives as long as `self`.
        unsafe { std::slice::from_raw_parts_mut(self.mem.base().add(start), size) }
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

/// One AF_XDP socket on an (interface, queue).
struct Port {
    ifname: String,
    ifindex: u32,
    queue: u32,
    mode: BoundMode,
    rings: Rings,
    program: Option<Arc<XdpProgram>>,
    fill_target: u32,
    /// RX ring entries (0 for a TX-only port): frames received and not yet
    /// read, on top of the fill ring.
    rx_size: u32,
    /// TX ring entries: at most this many frames are sent and not yet
    /// reaped at a time ([`Umem::tx`]), so TX never takes more than its
    /// share of the UMEM.
    tx_size: u32,
    /// Frames put in the fill ring and not yet read from the RX ring.
    fill_out: u64,
    /// Frames put in the TX ring and not yet read from the completion ring.
    tx_out: u64,
    /// Kicks that hit EAGAIN/EBUSY (the kernel asked to try again).
    tx_busy: u64,
}

impl Drop for Port {
    fn drop(&mut self) {
        if let Some(p) = &self.program {
            p.clear_socket(self.queue);
        }
    }
}

/// The kernel registration of a UMEM area (the xdpilone `Umem`) and the
/// socket every later socket joins with `XDP_SHARED_UMEM`.
struct Reg {
    umem: xdpilone::Umem,
    /// fd and bind mode of the first bound socket (it uses the UMEM's own
    /// fd, which `umem` keeps open).
    first: Option<(RawFd, BoundMode)>,
}

// SAFETY: `xdpilone::Umem` is `!Send` only because it holds the area as a
// `NonNull<[u8]>`; its other fields (an `Arc` of the socket fd, the config,
// an `Arc<dyn ControlSet + Send + Sync>`) are `Send`. That pointer is the
// mapping in the same `Shared` (dropped after `reg` by field order), which
// is plain memory not tied to a thread, and xdpilone only passes it to the
// kernel (`XDP_UMEM_REG`) and computes addresses from it; this crate never
// uses those. A `Reg` is only reached through `Shared::reg`'s mutex, so it
// is used by one thread at a time (the one opening a port).
unsafe impl Send for Reg {}

/// What every [`Umem`] of one area shares: the registration and the memory.
struct Shared {
    // Field order is drop order: the registration, then the memory.
    /// `None` only for the fake UMEM of the unit tests.
    reg: Mutex<Option<Reg>>,
    area: FrameArea,
    /// Workers the area is split between.
    parts: usize,
}

impl Shared {
    fn reg(&self) -> MutexGuard<'_, Option<Reg>> {
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
    ports: Vec<Port>,
    shared: Arc<Shared>,
    /// Byte offsets of the frames this part owns.
    range: Range<u64>,
    free: Vec<u64>,
    /// Frames hooks consumed, with their cookies, oldest first.
    held: std::collections::VecDeque<(u64, Frame)>,
    app: u64,
    cookie_epoch: u32,
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
        // SAFETY: `mem` is a page-aligned anonymous mapping of exactly
        // `bytes` bytes; it is stored in `Shared::area` and, by field order,
        // dropped after `Shared::reg`; every ring that refers to it belongs
        // to a `Umem` that holds an `Arc<Shared>` and drops its ports first.
        let umem = unsafe { xdpilone::Umem::new(ucfg, mem.as_slice_ptr()) }.map_err(|e| match e
            .get_raw()
        {
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
            reg: Mutex::new(Some(Reg { umem, first: None })),
            area: FrameArea {
                mem,
                frame_size: cfg.frame_size,
                frames: cfg.frames,
                id: NEXT_UMEM_ID.fetch_add(1, Ordering::Relaxed),
            },
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
    fn part(shared: Arc<Shared>, range: Range<u64>) -> Umem {
        let fs = u64::from(shared.area.frame_size);
        let free = (range.start / fs..range.end / fs)
            .rev()
            .map(|i| i * fs)
            .collect();
        Umem {
            ports: Vec::new(),
            shared,
            range,
            free,
            held: std::collections::VecDeque::new(),
            app: 0,
            cookie_epoch: 0,
        }
    }

    /// Frames a UMEM (part) needs for `ports`: each port's fill target, RX
    /// ring (if it receives) and TX ring, plus `reserve` frames for the application (at least
    /// [`APP_RESERVE`] for the worker loops, plus what hooks may hold).
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
        (self.range.end - self.range.start) / u64::from(self.shared.area.frame_size)
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

    /// The frame budget: every port's fill ring stocked to its target
    /// with its RX and TX rings full at once, plus the application's
    /// batches, must fit. Otherwise a backed-up TX ring (a slow peer) or an
    /// idle port's fill ring takes the frames a busy fill ring needs, and
    /// the kernel drops what it receives (`fill_ring_empty`).
    fn check_budget(&self, cfg: &PortConfig) -> Result<()> {
        let total = self.total_frames();
        let needed = self
            .ports
            .iter()
            .map(|p| u64::from(p.fill_target) + u64::from(p.rx_size) + u64::from(p.tx_size))
            .sum::<u64>()
            + Umem::frames_needed(std::slice::from_ref(cfg), APP_RESERVE);
        if needed > total {
            return Err(Error::Config(format!(
                "the UMEM{part} has {total} frames, but its ports need {needed}: the fill target plus \
                 the RX and TX rings of every port ({} port(s) with this one) plus {APP_RESERVE} for the \
                 application's batches; give the UMEM more frames or use smaller rings",
                self.ports.len() + 1,
                part = if self.shared.parts > 1 { " part" } else { "" },
            )));
        }
        Ok(())
    }

    /// Open a port (an AF_XDP socket on `cfg.ifname` queue `cfg.queue`) on
    /// this UMEM, in the calling thread's network namespace.
    ///
    /// # Errors
    /// [`Error::NoSuchInterface`], [`Error::QueueOutOfRange`],
    /// [`Error::Permission`], [`Error::XdpUnsupported`], [`Error::XdpBusy`],
    /// [`Error::QueueBusy`], [`Error::Config`].
    pub fn open(&mut self, cfg: PortConfig) -> Result<PortId> {
        for (what, v) in [
            ("rx_size", cfg.rx_size),
            ("tx_size", cfg.tx_size),
            ("fill_size", cfg.fill_size),
            ("comp_size", cfg.comp_size),
        ] {
            if !v.is_power_of_two() {
                return Err(Error::Config(format!("{what} {v} must be a power of two")));
            }
        }
        if cfg.fill_target > cfg.fill_size {
            return Err(Error::Config(format!(
                "fill_target {} exceeds fill_size {}",
                cfg.fill_target, cfg.fill_size
            )));
        }
        self.check_budget(&cfg)?;
        let ifname = cfg.ifname.as_str();
        let no_such = || Error::NoSuchInterface {
            ifname: ifname.to_owned(),
        };
        let ifindex = sys::if_nametoindex(ifname).map_err(|_| no_such())?;
        let count = queue_count(ifname)?;
        if cfg.queue >= count {
            return Err(Error::QueueOutOfRange {
                ifname: ifname.to_owned(),
                queue: cfg.queue,
                count,
            });
        }
        if self
            .ports
            .iter()
            .any(|p| p.ifindex == ifindex && p.queue == cfg.queue)
        {
            return Err(Error::QueueBusy {
                ifname: ifname.to_owned(),
                queue: cfg.queue,
            });
        }
        let program = match (&cfg.program, cfg.rx) {
            (Some(p), true) => Some(p.clone()),
            (None, true) => Some(Arc::new(XdpProgram::attach(ifname, count, cfg.xdp_mode)?)),
            (_, false) => None,
        };

        let cname = CString::new(ifname).map_err(|_| no_such())?;
        let mut info = IfInfo::invalid();
        info.from_name(&cname).map_err(|_| no_such())?;
        info.set_queue(cfg.queue);
        // Held until the socket is bound: the first socket of the area binds
        // in the requested mode, every other one joins it.
        let mut guard = self.shared.reg();
        let Some(reg) = guard.as_mut() else {
            return Err(Error::Config(
                "this UMEM is not registered with the kernel".into(),
            ));
        };
        let first = reg.first.is_none();
        let xerr = |what: &'static str| {
            move |e: xdpilone::Errno| match e.get_raw() {
                libc::EPERM | libc::EACCES => Error::Permission { what },
                libc::EAFNOSUPPORT => Error::XdpUnsupported {
                    ifname: String::new(),
                    detail: "AF_XDP sockets are not available (CONFIG_XDP_SOCKETS)".into(),
                },
                raw => Error::Io {
                    what,
                    source: std::io::Error::from_raw_os_error(raw.abs()),
                },
            }
        };
        let socket = if first {
            Socket::with_shared(&info, &reg.umem).map_err(xerr("AF_XDP socket"))?
        } else {
            Socket::new(&info).map_err(xerr("AF_XDP socket"))?
        };
        let fq = reg.umem.fq_cq(&socket).map_err(|e| match e.get_raw() {
            // xdpilone refuses a second fill/completion pair for a queue
            // (another part of a shared UMEM has it).
            libc::EINVAL => Error::QueueBusy {
                ifname: ifname.to_owned(),
                queue: cfg.queue,
            },
            _ => xerr("fill/completion ring setup")(e),
        })?;
        let user = reg
            .umem
            .rx_tx(
                &socket,
                &SocketConfig {
                    rx_size: NonZeroU32::new(cfg.rx_size),
                    tx_size: NonZeroU32::new(cfg.tx_size),
                    bind_flags: 0,
                },
            )
            .map_err(xerr("RX/TX ring setup"))?;
        let rx = user.map_rx().map_err(xerr("mmap of the RX ring"))?;
        let tx = user.map_tx().map_err(xerr("mmap of the TX ring"))?;
        let fd = user.as_raw_fd();

        let bind_err = |e: std::io::Error| match e.raw_os_error() {
            Some(libc::EBUSY) => Error::QueueBusy {
                ifname: ifname.to_owned(),
                queue: cfg.queue,
            },
            Some(libc::EPERM) | Some(libc::EACCES) => Error::Permission {
                what: "bind(AF_XDP)",
            },
            _ => Error::XdpUnsupported {
                ifname: ifname.to_owned(),
                detail: format!("bind of queue {}: {e}", cfg.queue),
            },
        };
        let mode = if first {
            let zc = sys::XDP_ZEROCOPY | sys::XDP_USE_NEED_WAKEUP;
            let copy = sys::XDP_COPY | sys::XDP_USE_NEED_WAKEUP;
            match cfg.bind {
                BindMode::ZeroCopy => {
                    sys::xsk_bind(fd, ifindex, cfg.queue, zc, None).map_err(bind_err)?;
                    BoundMode::ZeroCopy
                }
                BindMode::Copy => {
                    sys::xsk_bind(fd, ifindex, cfg.queue, copy, None).map_err(bind_err)?;
                    BoundMode::Copy
                }
                BindMode::Auto => match sys::xsk_bind(fd, ifindex, cfg.queue, zc, None) {
                    Ok(()) => BoundMode::ZeroCopy,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Err(bind_err(e)),
                    Err(e) => {
                        tracing::info!(target: "pfil_afxdp", ifname, queue = cfg.queue, error = %e, "zero-copy bind refused, falling back to copy mode");
                        sys::xsk_bind(fd, ifindex, cfg.queue, copy, None).map_err(bind_err)?;
                        BoundMode::Copy
                    }
                },
            }
        } else if let Some((umem_fd, mode)) = reg.first {
            // Joining: only XDP_SHARED_UMEM; the kernel refuses COPY,
            // ZEROCOPY and NEED_WAKEUP here and uses the first socket's.
            sys::xsk_bind(fd, ifindex, cfg.queue, sys::XDP_SHARED_UMEM, Some(umem_fd))
                .map_err(bind_err)?;
            mode
        } else {
            unreachable!("`first` is false only when a socket is bound")
        };
        if first {
            reg.first = Some((fd, mode));
        }
        drop(guard);
        tracing::info!(target: "pfil_afxdp", ifname, queue = cfg.queue, mode = ?mode, shared_umem = !first, umem_parts = self.shared.parts, rx = cfg.rx, "AF_XDP socket bound");
        if let Some(p) = &program {
            p.set_socket(cfg.queue, fd)?;
        }
        let rings = Rings::Real(RealRings {
            fd,
            rx,
            tx,
            fq,
            _user: user,
            _socket: socket,
        });
        Ok(self.push_port(&cfg, ifindex, mode, rings, program))
    }

    /// Add a bound port and stock its fill ring.
    fn push_port(
        &mut self,
        cfg: &PortConfig,
        ifindex: u32,
        mode: BoundMode,
        rings: Rings,
        program: Option<Arc<XdpProgram>>,
    ) -> PortId {
        self.ports.push(Port {
            ifname: cfg.ifname.clone(),
            ifindex,
            queue: cfg.queue,
            mode,
            rings,
            program,
            fill_target: cfg.fill_target,
            rx_size: if cfg.rx { cfg.rx_size } else { 0 },
            tx_size: cfg.tx_size,
            fill_out: 0,
            tx_out: 0,
            tx_busy: 0,
        });
        let id = PortId(self.ports.len() - 1);
        self.refill(id);
        id
    }

    /// The frame memory, to reach the bytes of [`Frame`]s.
    #[inline]
    pub fn area(&self) -> &FrameArea {
        &self.shared.area
    }

    /// Interface index of a port.
    pub fn ifindex(&self, port: PortId) -> u32 {
        self.ports[port.0].ifindex
    }

    /// Queue id of a port.
    pub fn queue(&self, port: PortId) -> u32 {
        self.ports[port.0].queue
    }

    /// Interface name of a port.
    pub fn ifname(&self, port: PortId) -> &str {
        &self.ports[port.0].ifname
    }

    /// Copy or zero-copy.
    pub fn mode(&self, port: PortId) -> BoundMode {
        self.ports[port.0].mode
    }

    /// The XDP program steering to this port, if it receives.
    pub fn program(&self, port: PortId) -> Option<&Arc<XdpProgram>> {
        self.ports[port.0].program.as_ref()
    }

    /// Kicks that the kernel answered with EAGAIN/EBUSY.
    pub fn tx_busy(&self, port: PortId) -> u64 {
        self.ports[port.0].tx_busy
    }

    /// The kernel's AF_XDP statistics for a port.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn statistics(&self, port: PortId) -> Result<sys::XdpStats> {
        sys::xdp_statistics(self.ports[port.0].rings.fd())
            .map_err(|e| Error::io("XDP_STATISTICS", e))
    }

    /// The raw socket fd of a port (to poll on).
    pub fn fd(&self, port: PortId) -> RawFd {
        self.ports[port.0].rings.fd()
    }

    /// Take a free frame (length 0) to write a packet into.
    pub fn alloc(&mut self) -> Option<Frame> {
        let addr = self.free.pop()?;
        debug_assert!(self.is_frame_base(addr), "free list holds {addr:#x}");
        self.app += 1;
        Some(Frame {
            addr,
            off: 0,
            len: 0,
            umem: self.shared.area.id,
        })
    }

    /// Give a frame back to the free pool.
    ///
    /// # Errors
    /// [`Error::ForeignFrame`] if it came from another UMEM.
    pub fn recycle(&mut self, frame: Frame) -> Result<()> {
        self.own(&frame)?;
        self.put_free(frame.addr);
        self.app -= 1;
        Ok(())
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
        self.app -= 1;
        self.held.push_back((cookie, frame));
        Ok(())
    }

    /// Frames currently held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Take the oldest held frame back into the application (then send,
    /// recycle or hold it again).
    pub fn take_held(&mut self) -> Option<Frame> {
        let (_, f) = self.held.pop_front()?;
        self.app += 1;
        Some(f)
    }

    /// Take the frame held under `cookie` back into the application;
    /// `None` if no frame is held under it (never held, already given back,
    /// or evicted past the bound).
    pub fn take_held_cookie(&mut self, cookie: u64) -> Option<Frame> {
        let i = self.held.iter().position(|(c, _)| *c == cookie)?;
        let (_, f) = self.held.remove(i)?;
        self.app += 1;
        Some(f)
    }

    /// Give every held frame back to the free pool.
    pub fn release_held(&mut self) -> usize {
        let n = self.held.len();
        for (_, f) in std::mem::take(&mut self.held) {
            self.put_free(f.addr);
        }
        n
    }

    /// Give the oldest held frames back to the free pool until at most
    /// `limit` are held; returns how many went back.
    pub fn evict_held(&mut self, limit: usize) -> usize {
        let mut n = 0;
        while self.held.len() > limit {
            if let Some((_, f)) = self.held.pop_front() {
                self.put_free(f.addr);
                n += 1;
            }
        }
        n
    }

    /// A new cookie epoch for the next batch: cookies are
    /// `epoch << 32 | frame address` (a UMEM is at most 4 GiB), so a frame
    /// reused after it was given back gets a new cookie and a stale
    /// request cannot reach it.
    #[inline]
    pub fn next_cookie_epoch(&mut self) -> u64 {
        self.cookie_epoch = self.cookie_epoch.wrapping_add(1);
        u64::from(self.cookie_epoch) << 32
    }

    /// Is `addr` the start of one of this part's frames?
    #[inline]
    fn is_frame_base(&self, addr: u64) -> bool {
        self.range.contains(&addr) && addr % u64::from(self.shared.area.frame_size) == 0
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
    fn owns(&self, frame: &Frame) -> bool {
        frame.umem == self.shared.area.id && self.range.contains(&frame.addr)
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
            app: self.app,
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

    /// Reap completions of every port into the free pool.
    pub fn reap(&mut self) -> usize {
        let mut n = 0;
        for i in 0..self.ports.len() {
            n += self.reap_port(i);
        }
        n
    }

    fn reap_port(&mut self, i: usize) -> usize {
        let fs = u64::from(self.shared.area.frame_size);
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
        let p = &mut self.ports[port.0];
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
        let id = self.shared.area.id;
        let frame_size = self.shared.area.frame_size;
        let range = self.range.clone();
        let p = &mut self.ports[port.0];
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
            out.push(Frame {
                addr: base,
                off,
                len: len.min(frame_size - off),
                umem: id,
            });
        }));
        p.fill_out -= n;
        self.app += n;
        // Fewer than asked for: the RX ring is empty (as of its producer
        // index, just read), so the fill ring holds `fill_out` frames.
        self.refill_with(port, n < u64::from(room));
        let p = &mut self.ports[port.0];
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
            let p = &self.ports[p.0];
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
    /// times (copy mode sends [`COPY_TX_PER_KICK`] per kick; EAGAIN/EBUSY
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
        self.reap_port(port.0);
        let p = &mut self.ports[port.0];
        let mut n = 0u32;
        // Frames sent and not yet reaped stay within the TX ring's share
        // of the frame budget (see `open`), whatever the completion ring
        // holds.
        let room = u64::from(p.tx_size).saturating_sub(p.tx_out);
        let want = (frames.len() as u64).min(room) as u32;
        if want > 0 {
            n = p.rings.transmit(
                want,
                frames.iter().map(|f| XdpDesc {
                    addr: f.addr + u64::from(f.off),
                    len: f.len,
                    options: 0,
                }),
            );
        }
        frames.drain(..n as usize);
        p.tx_out += u64::from(n);
        self.app -= u64::from(n);
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
            let p = &mut self.ports[port.0];
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
                        self.reap_port(port.0);
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
            self.reap_port(port.0);
            if left == 0 {
                return Ok(());
            }
            kicks += 1;
            if kicks % 64 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
        let p = &self.ports[port.0];
        Err(Error::TxStalled {
            ifname: p.ifname.clone(),
            queue: p.queue,
            pending: p.rings.tx_pending(),
            kicks,
        })
    }

    /// Frames sent on `port` whose completion has not been reaped.
    pub fn tx_outstanding(&self, port: PortId) -> u64 {
        self.ports[port.0].tx_out
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// All port ids.
    pub fn port_ids(&self) -> impl Iterator<Item = PortId> {
        (0..self.ports.len()).map(PortId)
    }

    /// Free frames in the pool.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Close a port's RX side: stop steering its queue to the socket (so
    /// no new frames arrive) — used before draining at shutdown.
    pub fn stop_rx(&mut self, port: PortId) {
        if let Some(p) = &self.ports[port.0].program {
            p.clear_socket(self.ports[port.0].queue);
        }
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
            area: FrameArea {
                mem,
                frame_size: cfg.frame_size,
                frames: cfg.frames,
                id: NEXT_UMEM_ID.fetch_add(1, Ordering::Relaxed),
            },
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
            .field("frame_size", &self.shared.area.frame_size)
            .field("ports", &self.ports.len())
            .field("counts", &self.counts())
            .finish()
    }
}
