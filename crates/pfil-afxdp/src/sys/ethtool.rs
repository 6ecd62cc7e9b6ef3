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
    // SAFETY: `req` is a valid `struct ifreq` that outlives the call; its
    // data pointer is the caller's ethtool struct, which the caller
    // guarantees is large enough for whatever the kernel writes for its
    // command (a fixed-size struct, or a `GuardedBuf` whose overflow
    // faults instead of landing in other memory: see `ethtool_stats`).
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Statistics a driver may report at most (`ethtool -S` of the largest
/// NICs has a few thousand); a count over it is refused.
const MAX_ETHTOOL_STATS: usize = 1 << 20;

/// Tries of [`ethtool_stats`] while the driver's count changes under it.
const ETHTOOL_STATS_TRIES: u32 = 4;

/// Memory the kernel writes a variable-length ethtool answer into:
/// anonymous pages followed by one `PROT_NONE` guard page. The kernel
/// writes as many entries as the driver has *now*, whatever the header
/// says (`net/ethtool/ioctl.c`), so a count that grew since it was read
/// makes `copy_to_user` run past the buffer; here it runs into the guard
/// page and the ioctl fails with `EFAULT` instead of overwriting other
/// memory.
struct GuardedBuf {
    map: super::Mmap,
    len: usize,
}

impl GuardedBuf {
    /// At least `len` zeroed, writable bytes, then the guard page.
    fn new(len: usize) -> io::Result<GuardedBuf> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize;
        let len = len.max(1).div_ceil(page) * page;
        let map = super::Mmap::anonymous(len + page)?;
        // SAFETY: the last page of a mapping this value owns (`len` is a
        // multiple of the page size, the mapping `len + page` bytes); only
        // its protection changes, and nothing refers to it.
        let r = unsafe {
            libc::mprotect(
                map.base().add(len) as *mut libc::c_void,
                page,
                libc::PROT_NONE,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(GuardedBuf { map, len })
    }

    fn ptr(&mut self) -> *mut libc::c_void {
        self.map.base() as *mut libc::c_void
    }

    /// The writable bytes (no call that writes them is running: the
    /// ioctl returned).
    fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of the mapping are readable and
        // writable, initialized (zeroed by mmap, then written by the
        // kernel), and borrowed from `self`, which owns the mapping.
        unsafe { std::slice::from_raw_parts(self.map.base(), self.len) }
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = self.bytes();
        u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    fn write(&mut self, at: usize, v: &[u8]) {
        // SAFETY: as in `bytes`, mutably (`&mut self`).
        let b = unsafe { std::slice::from_raw_parts_mut(self.map.base(), self.len) };
        b[at..at + v.len()].copy_from_slice(v);
    }
}

/// The driver's statistics of `name` (what `ethtool -S` prints), as
/// (name, value) pairs, read in the calling thread's namespace.
///
/// # Errors
/// The ioctl's error; `InvalidData` when the count is over
/// [`MAX_ETHTOOL_STATS`] or kept changing between the three calls (a
/// channel change, e.g. `ethtool -L`, changes per-queue statistics).
pub(crate) fn ethtool_stats(name: &str) -> io::Result<Vec<(String, u64)>> {
    ethtool_stats_with(&mut |data| ethtool_ioctl(name, data))
}

/// [`ethtool_stats`] over `ioctl` (one `SIOCETHTOOL` call with the given
/// ethtool struct; a fake kernel in the tests).
///
/// Three calls: the count (`ETHTOOL_GSSET_INFO`), the names
/// (`ETHTOOL_GSTRINGS`), the values (`ETHTOOL_GSTATS`). The kernel
/// ignores the length the caller gives and writes its current count, so
/// the names and values are read into [`GuardedBuf`]s with room for
/// `2n + 256` entries; the counts the kernel wrote back and the count read
/// again afterwards must all agree, else (or on `EFAULT`: the guard page)
/// everything is read again, [`ETHTOOL_STATS_TRIES`] times at most.
fn ethtool_stats_with(
    ioctl: &mut dyn FnMut(*mut libc::c_void) -> io::Result<()>,
) -> io::Result<Vec<(String, u64)>> {
    let mut seen = Vec::new();
    for _ in 0..ETHTOOL_STATS_TRIES {
        let n = sset_count(ioctl)?;
        seen.push(n);
        if n == 0 {
            return Ok(Vec::new());
        }
        if n > MAX_ETHTOOL_STATS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the driver reports {n} statistics, over the {MAX_ETHTOOL_STATS} read"),
            ));
        }
        let room = 2 * n + 256;
        // struct ethtool_gstrings { cmd, string_set, len, data[len * 32] }
        let mut strings = GuardedBuf::new(12 + room * ETH_GSTRING_LEN)?;
        strings.write(0, &ETHTOOL_GSTRINGS.to_ne_bytes());
        strings.write(4, &ETH_SS_STATS.to_ne_bytes());
        strings.write(8, &(n as u32).to_ne_bytes());
        match ioctl(strings.ptr()) {
            Err(e) if e.raw_os_error() == Some(libc::EFAULT) => continue,
            r => r?,
        }
        let n_strings = strings.u32_at(8) as usize;
        // struct ethtool_stats { cmd, n_stats, data[n_stats] (u64) }
        let mut stats = GuardedBuf::new(8 + room * 8)?;
        stats.write(0, &ETHTOOL_GSTATS.to_ne_bytes());
        stats.write(4, &(n as u32).to_ne_bytes());
        match ioctl(stats.ptr()) {
            Err(e) if e.raw_os_error() == Some(libc::EFAULT) => continue,
            r => r?,
        }
        let n_stats = stats.u32_at(4) as usize;
        let after = sset_count(ioctl)?;
        seen.extend([n_strings, n_stats, after]);
        if n_strings != n || n_stats != n || after != n {
            continue;
        }
        let names = &strings.bytes()[12..12 + n * ETH_GSTRING_LEN];
        let values = &stats.bytes()[8..8 + n * 8];
        return Ok(names
            .chunks(ETH_GSTRING_LEN)
            .zip(values.chunks(8))
            .map(|(s, v)| {
                let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
                let mut w = [0u8; 8];
                w.copy_from_slice(v);
                (
                    String::from_utf8_lossy(&s[..end]).into_owned(),
                    u64::from_ne_bytes(w),
                )
            })
            .collect());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "the driver's statistics count kept changing while read \
             ({ETHTOOL_STATS_TRIES} tries; counts seen {seen:?})"
        ),
    ))
}

/// `ETHTOOL_GSSET_INFO` for the statistics set: how many there are now.
fn sset_count(ioctl: &mut dyn FnMut(*mut libc::c_void) -> io::Result<()>) -> io::Result<usize> {
    let mut info = SsetInfo {
        cmd: ETHTOOL_GSSET_INFO,
        reserved: 0,
        sset_mask: 1 << ETH_SS_STATS,
        data: [0],
    };
    // The kernel writes one u32 per set asked for: one.
    ioctl(&mut info as *mut SsetInfo as *mut libc::c_void)?;
    Ok(if info.sset_mask & (1 << ETH_SS_STATS) != 0 {
        info.data[0] as usize
    } else {
        0
    })
}

/// `struct ethtool_sset_info` with room for one set.
#[repr(C)]
struct SsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: [u32; 1],
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A fake kernel answering the three ethtool calls the way
    /// `net/ethtool/ioctl.c` does (its current count, whatever the header
    /// says), with the count taken from `counts` call by call (the last
    /// one repeating): a driver whose queues change between the calls.
    /// It never writes more than the buffers `ethtool_stats_with`
    /// allocates (`2n + 256` entries) hold.
    struct FakeKernel {
        counts: Vec<usize>,
        calls: usize,
        /// Answer the `GSTRINGS` call with `EFAULT` this many times (what
        /// the guard page makes of an overflow).
        efaults: usize,
    }

    impl FakeKernel {
        fn call(&mut self, data: *mut libc::c_void) -> io::Result<()> {
            let n = self.counts[self.calls.min(self.counts.len() - 1)];
            self.calls += 1;
            let p = data as *mut u8;
            // SAFETY: (test) every buffer `ethtool_stats_with` passes starts
            // with the u32 command and holds what is written below for a
            // count up to its room (the counts used stay under it).
            unsafe {
                let cmd = (p as *const u32).read_unaligned();
                match cmd {
                    ETHTOOL_GSSET_INFO => (*(data as *mut SsetInfo)).data[0] = n as u32,
                    ETHTOOL_GSTRINGS => {
                        if self.efaults > 0 {
                            self.efaults -= 1;
                            return Err(io::Error::from_raw_os_error(libc::EFAULT));
                        }
                        (p.add(8) as *mut u32).write_unaligned(n as u32);
                        for i in 0..n {
                            let s = format!("stat_{i}");
                            std::ptr::copy_nonoverlapping(
                                s.as_ptr(),
                                p.add(12 + i * ETH_GSTRING_LEN),
                                s.len(),
                            );
                        }
                    }
                    ETHTOOL_GSTATS => {
                        (p.add(4) as *mut u32).write_unaligned(n as u32);
                        for i in 0..n {
                            (p.add(8 + i * 8) as *mut u64).write_unaligned(100 + i as u64);
                        }
                    }
                    c => panic!("unexpected ethtool command {c:#x}"),
                }
            }
            Ok(())
        }
    }

    fn read(counts: &[usize], efaults: usize) -> (io::Result<Vec<(String, u64)>>, usize) {
        let k = RefCell::new(FakeKernel {
            counts: counts.to_vec(),
            calls: 0,
            efaults,
        });
        let r = ethtool_stats_with(&mut |d| k.borrow_mut().call(d));
        let calls = k.borrow().calls;
        (r, calls)
    }

    /// A steady count: names and values in one pass (four calls).
    #[test]
    fn a_steady_count_reads_once() {
        let (r, calls) = read(&[3], 0);
        let r = r.unwrap();
        assert_eq!(calls, 4);
        assert_eq!(
            r,
            vec![
                ("stat_0".to_owned(), 100),
                ("stat_1".to_owned(), 101),
                ("stat_2".to_owned(), 102)
            ]
        );
    }

    /// The count grows between the names and the values (a channel
    /// change): the mismatch is seen and everything read again; no name is
    /// paired with another statistic's value.
    #[test]
    fn a_count_that_changes_between_calls_is_read_again() {
        // 3 (info), 3 (names), 5 (values): retry, then 5 throughout.
        let (r, calls) = read(&[3, 3, 5], 0);
        let r = r.unwrap();
        assert_eq!(calls, 8);
        assert_eq!(r.len(), 5);
        assert_eq!(r[4], ("stat_4".to_owned(), 104));
        // It shrinks after the values: read again too.
        let (r, _) = read(&[4, 4, 4, 2], 0);
        assert_eq!(r.unwrap().len(), 2);
        // The guard page's EFAULT: read again.
        let (r, _) = read(&[2], 1);
        assert_eq!(r.unwrap().len(), 2);
    }

    /// A count that never holds still is an error naming what was seen,
    /// after a bounded number of tries.
    #[test]
    fn a_count_that_keeps_changing_is_an_error() {
        let counts: Vec<usize> = (1..100).collect();
        let (r, calls) = read(&counts, 0);
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("kept changing"), "{e}");
        assert_eq!(calls, 4 * ETHTOOL_STATS_TRIES as usize);
        let (r, _) = read(&[MAX_ETHTOOL_STATS + 1], 0);
        assert!(r.unwrap_err().to_string().contains("over the"));
    }

    /// The guard page works against the kernel's own writes: a read(2)
    /// asked to fill more than the buffer stops at the guard (a short
    /// read or EFAULT), and nothing past the buffer is written.
    #[test]
    fn the_guard_page_stops_a_kernel_write() {
        let mut g = GuardedBuf::new(100).unwrap();
        let len = g.bytes().len();
        let zero = std::fs::File::open("/dev/zero").unwrap();
        // SAFETY: (test) `g.ptr()` is the start of `len` writable bytes
        // followed by a PROT_NONE page: the kernel's copy faults there
        // instead of writing on.
        let r = unsafe { libc::read(zero.as_raw_fd(), g.ptr(), len + 3 * 4096) };
        let err = io::Error::last_os_error();
        assert!(
            (r >= 0 && r as usize <= len) || (r < 0 && err.raw_os_error() == Some(libc::EFAULT)),
            "read returned {r} ({err}) for a {len}-byte buffer"
        );
    }
}
