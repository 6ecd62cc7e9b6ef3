//! Errors of the AF_XDP port. Each names the cause and the fix.

use std::io;

/// What went wrong opening or running a port.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The interface does not exist in the calling thread's network namespace.
    #[error("no such interface `{ifname}` in this network namespace: check the name with `ip link show` (or enter its namespace first)")]
    NoSuchInterface {
        /// The name asked for.
        ifname: String,
    },
    /// The queue id is not below the interface's queue count.
    #[error("queue {queue} out of range: `{ifname}` has {count} queue(s) (0..{count}); pick a lower queue or raise the count with `ethtool -L {ifname}`")]
    QueueOutOfRange {
        /// Interface.
        ifname: String,
        /// Queue asked for.
        queue: u32,
        /// Queues the interface has.
        count: u32,
    },
    /// The process lacks the privileges for AF_XDP and bpf(2).
    #[error("permission denied for {what}: run as root or grant CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (e.g. `setcap cap_net_admin,cap_net_raw,cap_bpf+ep BINARY`)")]
    Permission {
        /// The operation that was refused.
        what: &'static str,
    },
    /// The kernel or the driver does not support XDP / AF_XDP here.
    #[error("XDP unsupported on `{ifname}`: {detail}; use a kernel with CONFIG_XDP_SOCKETS and CONFIG_BPF_SYSCALL (>= 5.9 for bpf_link XDP), or another interface")]
    XdpUnsupported {
        /// Interface.
        ifname: String,
        /// What failed.
        detail: String,
    },
    /// The kernel cannot run XDP programs over live frames.
    #[error("the in-kernel generator is unsupported here: {detail}; it needs Linux >= 5.18 (BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES) with CONFIG_BPF_SYSCALL; use the AF_XDP engine instead (--engine afxdp)")]
    LiveUnsupported {
        /// What failed.
        detail: String,
    },
    /// The interface does not take frames redirected to it by XDP.
    #[error("`{ifname}` cannot transmit redirected XDP frames: {detail}; for veth the peer needs an XDP program (start `pfild sink PEER` first, or `ip link set dev PEER xdp obj ...`) or GRO on the peer (`ethtool -K PEER gro on`), otherwise the kernel drops every frame before the driver (no counter shows them, only the xdp:xdp_redirect_err tracepoint); other drivers need ndo_xdp_xmit support (some only with an XDP program attached to the interface itself)")]
    NoRedirectTarget {
        /// Interface.
        ifname: String,
        /// What the probe saw.
        detail: String,
    },
    /// Another XDP program is already attached.
    #[error("`{ifname}` already has an XDP program attached; detach it with `ip link set dev {ifname} xdp off` (or stop the process that holds it)")]
    XdpBusy {
        /// Interface.
        ifname: String,
    },
    /// The queue is already bound by another AF_XDP socket.
    #[error("queue {queue} of `{ifname}` is already bound to another AF_XDP socket; stop that process or pick another queue")]
    QueueBusy {
        /// Interface.
        ifname: String,
        /// Queue.
        queue: u32,
    },
    /// The UMEM could not be allocated or registered.
    #[error("UMEM too large ({bytes} bytes, {frames} frames of {frame_size}): {detail}; use fewer frames, or raise `ulimit -l` (RLIMIT_MEMLOCK)")]
    UmemTooLarge {
        /// Requested bytes.
        bytes: u64,
        /// Frames requested.
        frames: u32,
        /// Frame size.
        frame_size: u32,
        /// What refused it.
        detail: String,
    },
    /// A configuration value is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A frame of another UMEM, or of another worker's part of a shared
    /// UMEM ([`crate::SharedUmem`]), was handed to this one.
    #[error("frame belongs to another UMEM (or to another worker's part of a shared one); give frames back to the port they came from")]
    ForeignFrame,
    /// The TX ring did not drain after the bounded number of kicks.
    #[error("TX on `{ifname}` queue {queue} stalled: {pending} frame(s) still in the TX ring after {kicks} kicks; the link may be down or the peer not reading")]
    TxStalled {
        /// Interface.
        ifname: String,
        /// Queue.
        queue: u32,
        /// Frames left in the ring.
        pending: u32,
        /// Kicks tried.
        kicks: u32,
    },
    /// A loop made no progress for too long and stopped instead of
    /// waiting forever.
    #[error("`{ifname}` queue {queue}: no progress for {ms} ms waiting for {what}; the link may be down or the peer not reading")]
    Stalled {
        /// What the loop waited for.
        what: &'static str,
        /// Interface.
        ifname: String,
        /// Queue.
        queue: u32,
        /// The bound, in milliseconds.
        ms: u64,
    },
    /// A pfil call failed (registering a head, taking a worker).
    #[error(transparent)]
    Pfil(#[from] pfil::Error),
    /// Any other system call failure.
    #[error("{what} failed: {source}")]
    Io {
        /// The call.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// The loops' and spawners' errors, as this crate's.
impl From<pfil_port::Error> for Error {
    fn from(e: pfil_port::Error) -> Error {
        match e {
            pfil_port::Error::Config(m) => Error::Config(m),
            pfil_port::Error::Stalled {
                what,
                ifname,
                queue,
                ms,
            } => Error::Stalled {
                what,
                ifname,
                queue,
                ms,
            },
            pfil_port::Error::Pfil(e) => Error::Pfil(e),
            pfil_port::Error::Io { what, source } => Error::io(what, source),
            // `pfil_port::Error` is non-exhaustive: keep its words.
            e => Error::Config(e.to_string()),
        }
    }
}

impl Error {
    pub(crate) fn io(what: &'static str, source: io::Error) -> Error {
        if matches!(
            source.raw_os_error(),
            Some(libc::EPERM) | Some(libc::EACCES)
        ) {
            return Error::Permission { what };
        }
        Error::Io { what, source }
    }
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;
