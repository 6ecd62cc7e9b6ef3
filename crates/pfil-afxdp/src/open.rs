//! Opening an AF_XDP socket on a UMEM: checks, the frame budget, bind.

use std::ffi::CString;
use std::num::NonZeroU32;
use std::sync::Arc;

use xdpilone::{IfInfo, Socket, SocketConfig};

use crate::config::{BindMode, BoundMode, PortConfig, APP_RESERVE};
use crate::error::{Error, Result};
use crate::rings::{RealRings, Rings};
use crate::sys;
use crate::umem::{Reg, Umem, Xsk};
use crate::xdp::{queue_count, XdpProgram};
use pfil_port::PortId;

/// How long the first bind of a UMEM retries a queue that is busy (its
/// previous socket's release is deferred work in the kernel).
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

impl Umem {
    /// The frame budget: every port's fill ring stocked to its target
    /// with its RX and TX rings full at once, plus the application's
    /// batches, must fit. Otherwise a backed-up TX ring (a slow peer) or an
    /// idle port's fill ring takes the frames a busy fill ring needs, and
    /// the kernel drops what it receives (`fill_ring_empty`).
    pub(crate) fn check_budget(&self, cfg: &PortConfig) -> Result<()> {
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
        // The socket is set up, bound and put in the XSKMAP with the
        // registration locked. The first socket of the area is the UMEM's
        // own fd, which cannot be unbound: if anything after it fails, the
        // area is registered again (`Reg::renew`), so a later open starts
        // from a clean UMEM instead of finding the queue taken (review
        // L6.3); `first` is set only after everything succeeded.
        let first_socket = reg.first;
        let opened = (|| -> Result<(Rings, std::os::fd::RawFd, BoundMode)> {
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
            // A queue whose socket was just closed (a failed open renewed
            // the UMEM, or a process that held it ended) is released by
            // deferred kernel work: EBUSY for a moment. Retried for at most
            // `BUSY_WAIT`, then it is the caller's error.
            let bind_first = |flags: u16| {
                let t0 = std::time::Instant::now();
                loop {
                    match sys::xsk_bind(fd, ifindex, cfg.queue, flags, None) {
                        Err(e)
                            if e.raw_os_error() == Some(libc::EBUSY)
                                && t0.elapsed() < BUSY_WAIT =>
                        {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
                        r => return r,
                    }
                }
            };
            let mode = if first {
                let zc = sys::XDP_ZEROCOPY | sys::XDP_USE_NEED_WAKEUP;
                let copy = sys::XDP_COPY | sys::XDP_USE_NEED_WAKEUP;
                match cfg.bind {
                    BindMode::ZeroCopy => {
                        bind_first(zc).map_err(bind_err)?;
                        BoundMode::ZeroCopy
                    }
                    BindMode::Copy => {
                        bind_first(copy).map_err(bind_err)?;
                        BoundMode::Copy
                    }
                    BindMode::Auto => match bind_first(zc) {
                        Ok(()) => BoundMode::ZeroCopy,
                        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Err(bind_err(e)),
                        Err(e) => {
                            tracing::info!(target: "pfil_afxdp", ifname, queue = cfg.queue, error = %e, "zero-copy bind refused, falling back to copy mode");
                            bind_first(copy).map_err(bind_err)?;
                            BoundMode::Copy
                        }
                    },
                }
            } else if let Some((umem_fd, mode)) = first_socket {
                // Joining: only XDP_SHARED_UMEM; the kernel refuses COPY,
                // ZEROCOPY and NEED_WAKEUP here and uses the first socket's.
                sys::xsk_bind(fd, ifindex, cfg.queue, sys::XDP_SHARED_UMEM, Some(umem_fd))
                    .map_err(bind_err)?;
                mode
            } else {
                unreachable!("`first` is false only when a socket is bound")
            };
            tracing::info!(target: "pfil_afxdp", ifname, queue = cfg.queue, mode = ?mode, shared_umem = !first, umem_parts = self.shared.parts, rx = cfg.rx, "AF_XDP socket bound");
            if let Some(p) = &program {
                p.set_socket(cfg.queue, fd)?;
            }
            Ok((
                Rings::Real(RealRings {
                    fd,
                    rx,
                    tx,
                    fq,
                    _user: user,
                    _socket: socket,
                }),
                fd,
                mode,
            ))
        })();
        let (rings, fd, mode) = match opened {
            Ok(o) => o,
            Err(e) => {
                if first {
                    Reg::renew(&mut guard, &self.shared.area);
                }
                return Err(e);
            }
        };
        if let Some(reg) = guard.as_mut() {
            if first {
                reg.first = Some((fd, mode));
            }
        }
        drop(guard);
        Ok(self.push_port(&cfg, ifindex, mode, rings, program))
    }

    /// Add a bound port and stock its fill ring.
    pub(crate) fn push_port(
        &mut self,
        cfg: &PortConfig,
        ifindex: u32,
        mode: BoundMode,
        rings: Rings,
        program: Option<Arc<XdpProgram>>,
    ) -> PortId {
        self.ports.push(Xsk {
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
        let id = PortId::new(self.ports.len() - 1);
        self.refill(id);
        id
    }
}
