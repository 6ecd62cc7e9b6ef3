//! Interfaces: name to index, and the ethtool ioctls (channels,
//! driver statistics).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    ethtool_ioctl(name, &mut ch as *mut EthtoolChannels as *mut libc::c_void)?;
    Ok(ch)
}

const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

/// One `SIOCETHTOOL` call on `name` with `data` as the ethtool struct.
fn ethtool_ioctl(name: &str, data: *mut libc::c_void) -> io::Result<()> {
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
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data,
        _pad: [0; 16],
    };
    for (d, s) in req.name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid `struct ifreq`; its data pointer is the
    // caller's ethtool struct, sized for the command it holds, and both
    // outlive the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The driver's statistics of `name` (what `ethtool -S` prints), as
/// (name, value) pairs, read in the calling thread's namespace.
pub(crate) fn ethtool_stats(name: &str) -> io::Result<Vec<(String, u64)>> {
    #[repr(C)]
    struct SsetInfo {
        cmd: u32,
        reserved: u32,
        sset_mask: u64,
        data: [u32; 1],
    }
    let mut info = SsetInfo {
        cmd: ETHTOOL_GSSET_INFO,
        reserved: 0,
        sset_mask: 1 << ETH_SS_STATS,
        data: [0],
    };
    ethtool_ioctl(name, &mut info as *mut SsetInfo as *mut libc::c_void)?;
    let n = if info.sset_mask & (1 << ETH_SS_STATS) != 0 {
        info.data[0] as usize
    } else {
        0
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    // struct ethtool_gstrings { cmd, string_set, len, data[len * 32] }
    let mut strings = vec![0u8; 12 + n * ETH_GSTRING_LEN];
    strings[0..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    strings[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    strings[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
    ethtool_ioctl(name, strings.as_mut_ptr() as *mut libc::c_void)?;
    // struct ethtool_stats { cmd, n_stats, data[n_stats] (u64) }
    let mut stats = vec![0u64; 1 + n];
    let mut hdr = [0u8; 8];
    hdr[0..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
    hdr[4..8].copy_from_slice(&(n as u32).to_ne_bytes());
    stats[0] = u64::from_ne_bytes(hdr);
    ethtool_ioctl(name, stats.as_mut_ptr() as *mut libc::c_void)?;
    Ok(strings[12..]
        .chunks(ETH_GSTRING_LEN)
        .zip(&stats[1..])
        .map(|(s, &v)| {
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            (String::from_utf8_lossy(&s[..end]).into_owned(), v)
        })
        .collect())
}
