//! A minimal XDP loader on raw bpf(2): an XSKMAP, a five-instruction
//! redirect program, and a bpf_link that detaches itself when the process
//! dies (the kernel closes the link fd).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::error::{Error, Result};
use crate::sys;

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native (driver) mode first, generic (skb) mode if the driver refuses.
    #[default]
    Auto,
    /// Native (driver) mode only.
    Native,
    /// Generic (skb) mode only.
    Generic,
}

impl std::fmt::Display for XdpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            XdpMode::Auto => "auto",
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        })
    }
}

/// The redirect program attached to one interface, with its XSKMAP.
///
/// Dropping it closes the link fd, which detaches the program; so does the
/// process dying. Share it (in an `Arc`) between the ports of the
/// interface's queues.
#[derive(Debug)]
pub struct XdpProgram {
    ifname: String,
    ifindex: u32,
    queues: u32,
    mode: XdpMode,
    map: OwnedFd,
    // Kept for the program's lifetime; the link holds its own reference.
    _prog: OwnedFd,
    link: OwnedFd,
}

impl XdpProgram {
    /// Attach the redirect program to `ifname` (in the calling thread's
    /// network namespace) with an XSKMAP of `queues` slots.
    ///
    /// # Errors
    /// [`Error::NoSuchInterface`], [`Error::Permission`],
    /// [`Error::XdpUnsupported`], [`Error::XdpBusy`].
    pub fn attach(ifname: &str, queues: u32, mode: XdpMode) -> Result<XdpProgram> {
        let ifindex = sys::if_nametoindex(ifname).map_err(|_| Error::NoSuchInterface {
            ifname: ifname.to_owned(),
        })?;
        if queues == 0 {
            return Err(Error::Config("an XSKMAP needs at least one queue".into()));
        }
        let map = sys::create_xskmap(queues).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Error::Permission {
                what: "bpf(BPF_MAP_CREATE)",
            },
            Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
                Error::XdpUnsupported {
                    ifname: ifname.to_owned(),
                    detail: format!("cannot create an XSKMAP: {e}"),
                }
            }
            _ => Error::Io {
                what: "bpf(BPF_MAP_CREATE)",
                source: e,
            },
        })?;
        let prog = sys::load_redirect_program(&map).map_err(|(e, log)| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) if log.is_empty() => Error::Permission {
                what: "bpf(BPF_PROG_LOAD)",
            },
            _ => Error::XdpUnsupported {
                ifname: ifname.to_owned(),
                detail: format!("the redirect program did not load: {e}; verifier: {log}"),
            },
        })?;
        let tries: &[(u32, XdpMode)] = match mode {
            XdpMode::Auto => &[
                (sys::XDP_FLAGS_DRV_MODE, XdpMode::Native),
                (sys::XDP_FLAGS_SKB_MODE, XdpMode::Generic),
            ],
            XdpMode::Native => &[(sys::XDP_FLAGS_DRV_MODE, XdpMode::Native)],
            XdpMode::Generic => &[(sys::XDP_FLAGS_SKB_MODE, XdpMode::Generic)],
        };
        let mut last = None;
        for &(flags, used) in tries {
            match sys::xdp_link_create(&prog, ifindex, flags) {
                Ok(link) => {
                    tracing::info!(target: "pfil_afxdp", ifname, ifindex, mode = %used, queues, "XDP redirect program attached (bpf_link)");
                    return Ok(XdpProgram {
                        ifname: ifname.to_owned(),
                        ifindex,
                        queues,
                        mode: used,
                        map,
                        _prog: prog,
                        link,
                    });
                }
                Err(e) => {
                    match e.raw_os_error() {
                        Some(libc::EBUSY) | Some(libc::EEXIST) => {
                            return Err(Error::XdpBusy {
                                ifname: ifname.to_owned(),
                            })
                        }
                        Some(libc::EPERM) | Some(libc::EACCES) => {
                            return Err(Error::Permission {
                                what: "bpf(BPF_LINK_CREATE)",
                            })
                        }
                        _ => {}
                    }
                    tracing::debug!(target: "pfil_afxdp", ifname, mode = %used, error = %e, "XDP attach refused");
                    last = Some((used, e));
                }
            }
        }
        let detail = match last {
            Some((m, e)) => format!("attaching in {m} mode failed: {e}"),
            None => "no attach mode tried".to_owned(),
        };
        Err(Error::XdpUnsupported {
            ifname: ifname.to_owned(),
            detail,
        })
    }

    /// Steer `queue`'s frames to the AF_XDP socket `fd`.
    ///
    /// # Errors
    /// [`Error::QueueOutOfRange`] if `queue` is not below the map size.
    pub fn set_socket(&self, queue: u32, fd: RawFd) -> Result<()> {
        if queue >= self.queues {
            return Err(Error::QueueOutOfRange {
                ifname: self.ifname.clone(),
                queue,
                count: self.queues,
            });
        }
        sys::map_update_u32(&self.map, queue, fd as u32)
            .map_err(|e| Error::io("bpf(BPF_MAP_UPDATE_ELEM) on the XSKMAP", e))
    }

    /// Stop steering `queue` (its frames go to the kernel stack again).
    pub fn clear_socket(&self, queue: u32) {
        let _ = sys::map_delete_u32(&self.map, queue);
    }

    /// The mode the program was attached in ([`XdpMode::Native`] or
    /// [`XdpMode::Generic`]).
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Number of XSKMAP slots.
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// The bpf_link fd (closing it detaches the program).
    pub fn link_fd(&self) -> RawFd {
        self.link.as_raw_fd()
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        tracing::info!(target: "pfil_afxdp", ifname = %self.ifname, "XDP redirect program detached");
    }
}

/// How many RX queues `ifname` has (ETHTOOL_GCHANNELS: rx + combined;
/// 1 if the driver does not answer). Read in the calling thread's
/// network namespace.
///
/// # Errors
/// [`Error::NoSuchInterface`].
pub fn queue_count(ifname: &str) -> Result<u32> {
    sys::if_nametoindex(ifname).map_err(|_| Error::NoSuchInterface {
        ifname: ifname.to_owned(),
    })?;
    match sys::ethtool_channels(ifname) {
        Ok(ch) => Ok((ch.rx_count + ch.combined_count).max(1)),
        Err(e) => {
            tracing::debug!(target: "pfil_afxdp", ifname, error = %e, "ETHTOOL_GCHANNELS failed, assuming 1 queue");
            Ok(1)
        }
    }
}

/// Move the calling thread into the network namespace `name` (a file in
/// `/run/netns`, as `ip netns add` makes) or an absolute path to a netns
/// file. Other threads stay where they are.
///
/// # Errors
/// [`Error::Io`] (no such namespace), [`Error::Permission`].
pub fn enter_netns(name: &str) -> Result<()> {
    let path = if name.starts_with('/') {
        name.to_owned()
    } else {
        format!("/run/netns/{name}")
    };
    sys::setns_net(&path).map_err(|e| Error::io("setns(CLONE_NEWNET)", e))
}

/// Check that the calling thread has what AF_XDP needs (CAP_NET_ADMIN and
/// CAP_NET_RAW, and CAP_BPF or CAP_SYS_ADMIN).
///
/// # Errors
/// [`Error::Permission`] naming what is missing.
pub fn check_privileges() -> Result<()> {
    let caps = sys::effective_caps().map_err(|e| Error::io("capget", e))?;
    let has = |c: u32| caps & (1u64 << c) != 0;
    if !has(sys::CAP_NET_ADMIN) {
        return Err(Error::Permission {
            what: "CAP_NET_ADMIN (attach XDP)",
        });
    }
    if !has(sys::CAP_NET_RAW) {
        return Err(Error::Permission {
            what: "CAP_NET_RAW (AF_XDP socket)",
        });
    }
    if !has(sys::CAP_BPF) && !has(sys::CAP_SYS_ADMIN) {
        return Err(Error::Permission {
            what: "CAP_BPF (bpf(2))",
        });
    }
    Ok(())
}
