//! Sizes and modes: of a UMEM ([`UmemConfig`]) and of each AF_XDP socket
//! opened on it ([`PortConfig`]).

use std::sync::Arc;

use crate::xdp::{XdpMode, XdpProgram};

pub use pfil_port::BATCH;

/// Frames that copy-mode TX sends per kick (the kernel's TX budget).
pub const COPY_TX_PER_KICK: u32 = 32;

/// Frames [`crate::Umem::open`] keeps back for the application on top of every
/// port's fill target and TX ring: a loop's batch and its TX staging batch.
pub const APP_RESERVE: u64 = 2 * BATCH as u64;

/// Largest UMEM this crate will try to register (4 GiB).
pub const MAX_UMEM_BYTES: u64 = 1 << 32;

/// Size of a UMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UmemConfig {
    /// Number of frames (of each worker, for a [`crate::SharedUmem`]).
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
