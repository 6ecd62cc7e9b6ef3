//! Raw system calls: bpf(2), the ethtool channel query, network namespaces,
//! anonymous memory for the UMEM, and the socket kicks. Every `unsafe`
//! block of the crate outside the UMEM wrapper lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

// ---- bpf(2) -------------------------------------------------------------

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// Helper number of `bpf_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS`, the default action when the map has no socket for a queue.
const XDP_PASS: i32 = 2;

/// `XDP_FLAGS_SKB_MODE`: generic XDP, run on the skb after allocation.
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BpfInsn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high nibble.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
    BpfInsn {
        code,
        regs: (dst & 0xf) | (src << 4),
        off,
        imm,
    }
}

/// The redirect program, hand-assembled:
///
/// ```text
/// r2 = *(u32 *)(r1 + 16)          ; ctx->rx_queue_index
/// r1 = map_fd ll                  ; BPF_PSEUDO_MAP_FD
/// r3 = XDP_PASS                   ; default action if no socket for the queue
/// call bpf_redirect_map           ; helper 51
/// exit                            ; return r0
/// ```
pub(crate) fn redirect_program(map_fd: RawFd) -> [BpfInsn; 6] {
    [
        // BPF_LDX | BPF_MEM | BPF_W
        insn(0x61, 2, 1, 16, 0),
        // BPF_LD | BPF_IMM | BPF_DW, two slots
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // BPF_JMP | BPF_CALL
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // BPF_JMP | BPF_EXIT
        insn(0x95, 0, 0, 0, 0),
    ]
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialized `repr(C)` struct laid out like
    // the prefix of `union bpf_attr` for `cmd`, and we pass its exact size;
    // the kernel reads (and for some commands writes) at most that many bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned_fd(fd: libc::c_long) -> OwnedFd {
    // SAFETY: `fd` is a file descriptor the kernel just returned to us from
    // a successful bpf(2) call; nobody else owns it.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().take(15).zip(name.bytes()) {
        *o = if b.is_ascii_alphanumeric() || b == b'_' {
            b
        } else {
            b'_'
        };
    }
    out
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// Create an XSKMAP with `entries` slots (key: queue id, value: socket fd).
pub(crate) fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_name: name16("pfil_xsks"),
        ..Default::default()
    };
    bpf(BPF_MAP_CREATE, &mut attr).map(owned_fd)
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `map[key] = value` for a u32 → u32 map.
pub(crate) fn map_update_u32(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Remove `key` from a u32-keyed map.
pub(crate) fn map_delete_u32(map: &OwnedFd, key: u32) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// Load the redirect program for `map`. On failure the verifier log is
/// returned with the error.
pub(crate) fn load_redirect_program(map: &OwnedFd) -> Result<OwnedFd, (io::Error, String)> {
    let prog = redirect_program(map.as_raw_fd());
    let license = c"GPL";
    let mut log = vec![0u8; 8192];
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name16("pfil_redirect"),
        expected_attach_type: BPF_XDP,
        ..Default::default()
    };
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => Ok(owned_fd(fd)),
        Err(first) => {
            // Load again with the verifier log on, to say why.
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            match bpf(BPF_PROG_LOAD, &mut attr) {
                Ok(fd) => Ok(owned_fd(fd)),
                Err(_) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    Err((first, String::from_utf8_lossy(&log[..end]).into_owned()))
                }
            }
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    _rest: [u64; 4],
}

/// Attach `prog` to `ifindex` as an XDP bpf_link with `flags`
/// (`XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE`). The program stays
/// attached exactly as long as the returned fd is open.
pub(crate) fn xdp_link_create(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
        ..Default::default()
    };
    bpf(BPF_LINK_CREATE, &mut attr).map(owned_fd)
}

// ---- interfaces ---------------------------------------------------------

/// The index of interface `name` in the calling thread's network namespace.
pub(crate) fn if_nametoindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    pub(crate) rx_count: u32,
    pub(crate) tx_count: u32,
    other_count: u32,
    pub(crate) combined_count: u32,
}

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// `ETHTOOL_GCHANNELS` on `name` (in the calling thread's namespace).
pub(crate) fn ethtool_channels(name: &str) -> io::Result<EthtoolChannels> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    // SAFETY: plain socket(2) call; the result is checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: &mut ch as *mut EthtoolChannels as *mut libc::c_void,
        _pad: [0; 16],
    };
    for (d, s) in req.name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid `struct ifreq` whose data pointer points to a
    // live `struct ethtool_channels`; both outlive the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ch)
    }
}

// ---- privileges ---------------------------------------------------------

/// Effective capability bits of the calling thread (from capget(2)).
pub(crate) fn effective_caps() -> io::Result<u64> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut hdr = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: `hdr` and `data` are the two-element v3 layout capget expects
    // and live across the call.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut hdr as *mut Header, data.as_mut_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from(data[0].effective) | (u64::from(data[1].effective) << 32))
}

/// CAP_NET_ADMIN.
pub(crate) const CAP_NET_ADMIN: u32 = 12;
/// CAP_NET_RAW.
pub(crate) const CAP_NET_RAW: u32 = 13;
/// CAP_SYS_ADMIN.
pub(crate) const CAP_SYS_ADMIN: u32 = 21;
/// CAP_BPF.
pub(crate) const CAP_BPF: u32 = 39;

// ---- network namespaces -------------------------------------------------

/// Move the calling thread into the network namespace `/run/netns/<name>`
/// (as made by `ip netns add`). Only this thread moves.
pub(crate) fn setns_net(path: &str) -> io::Result<()> {
    let c = CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a valid NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: setns(2) with a namespace fd we own; it only changes the
    // calling thread's network namespace.
    let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

// ---- memory -------------------------------------------------------------

/// Anonymous, page-aligned, zeroed memory that is unmapped on drop.
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving the owner
// to another thread moves nothing but the pointer.
unsafe impl Send for Mmap {}

impl Mmap {
    pub(crate) fn anonymous(len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // affected. The result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p as *mut u8).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        Ok(Mmap { ptr, len })
    }

    pub(crate) fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.ptr, self.len)
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `anonymous`,
        // unmapped only here, once.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

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
    fn program_encoding() {
        let p = redirect_program(7);
        // ldxw r2, [r1+16]
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        // lddw r1, map fd (src = pseudo map fd)
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x03, 2));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
        assert_eq!(std::mem::size_of::<BpfInsn>(), 8);
    }

    #[test]
    fn attr_sizes() {
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::size_of::<SockAddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<XdpStats>(), 48);
    }
}
