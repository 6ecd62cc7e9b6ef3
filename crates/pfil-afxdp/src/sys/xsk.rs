//! AF_XDP socket calls: bind, the TX/RX kicks, poll, statistics.

use std::io;
use std::os::fd::RawFd;

// ---- AF_XDP socket calls ------------------------------------------------

/// `struct sockaddr_xdp`.
#[repr(C)]
struct SockAddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// XDP_SHARED_UMEM bind flag.
pub(crate) const XDP_SHARED_UMEM: u16 = 1 << 0;
/// XDP_COPY bind flag.
pub(crate) const XDP_COPY: u16 = 1 << 1;
/// XDP_ZEROCOPY bind flag.
pub(crate) const XDP_ZEROCOPY: u16 = 1 << 2;
/// XDP_USE_NEED_WAKEUP bind flag.
pub(crate) const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;

/// bind(2) an AF_XDP socket to `(ifindex, queue)`.
pub(crate) fn xsk_bind(
    fd: RawFd,
    ifindex: u32,
    queue: u32,
    flags: u16,
    shared_umem_fd: Option<RawFd>,
) -> io::Result<()> {
    let addr = SockAddrXdp {
        family: libc::AF_XDP as u16,
        flags,
        ifindex,
        queue_id: queue,
        shared_umem_fd: shared_umem_fd.unwrap_or(0) as u32,
    };
    // SAFETY: `addr` is a valid `sockaddr_xdp` living across the call and
    // its exact size is passed.
    let r = unsafe {
        libc::bind(
            fd,
            &addr as *const SockAddrXdp as *const libc::sockaddr,
            std::mem::size_of::<SockAddrXdp>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Kick the TX ring: `sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`.
pub(crate) fn kick_tx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send with null buffer and address is what the
    // AF_XDP TX wakeup expects; nothing is read from user memory.
    let r = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Wake the RX/fill side: `recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL)`.
pub(crate) fn kick_rx(fd: RawFd) {
    // SAFETY: a zero-length non-blocking receive with null buffer; the
    // kernel writes nothing to user memory.
    let _ = unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// Wait up to `timeout_ms` for one of `fds` (at most 8) to become readable.
pub(crate) fn poll_in(fds: &[RawFd], timeout_ms: i32) -> bool {
    let mut p = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 8];
    let n = fds.len().min(8);
    for (slot, fd) in p.iter_mut().zip(fds) {
        slot.fd = *fd;
    }
    // SAFETY: `p` holds `n` valid pollfd entries and lives across the call.
    let r = unsafe { libc::poll(p.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
    r > 0
}

/// `struct xdp_statistics` (v2 layout).
#[repr(C)]
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpStats {
    /// Frames dropped by the kernel for reasons other than invalid descriptors.
    pub rx_dropped: u64,
    /// Invalid RX descriptors.
    pub rx_invalid_descs: u64,
    /// Invalid TX descriptors.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was found empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was found empty.
    pub tx_ring_empty_descs: u64,
}

/// getsockopt(SOL_XDP, XDP_STATISTICS).
pub(crate) fn xdp_statistics(fd: RawFd) -> io::Result<XdpStats> {
    let mut s = XdpStats::default();
    let mut len = std::mem::size_of::<XdpStats>() as libc::socklen_t;
    // SAFETY: `s` is a writable `xdp_statistics` of `len` bytes; the kernel
    // writes at most `len` bytes and updates `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            283, // SOL_XDP
            7,   // XDP_STATISTICS
            &mut s as *mut XdpStats as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_sizes() {
        assert_eq!(std::mem::size_of::<SockAddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<XdpStats>(), 48);
    }
}
