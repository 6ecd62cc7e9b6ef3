//! bpf(2): maps, program loading, XDP links, live test runs.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::programs::{redirect_program, BpfInsn};

// ---- bpf(2) -------------------------------------------------------------

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
/// `BPF_F_TEST_XDP_LIVE_FRAMES`: the test run sends its frames for real
/// (Linux >= 5.18).
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// The kernel's limit on a live test run's `batch_size` (`TEST_XDP_MAX_BATCH`).
pub(crate) const LIVE_MAX_BATCH: u32 = 256;

/// `XDP_FLAGS_SKB_MODE`: generic XDP, run on the skb after allocation.
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

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

/// Create an array map of `entries` u32 values (`per_cpu`: one array per
/// CPU, `BPF_MAP_TYPE_PERCPU_ARRAY`).
pub(crate) fn create_u32_array(entries: u32, per_cpu: bool, name: &str) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: if per_cpu {
            BPF_MAP_TYPE_PERCPU_ARRAY
        } else {
            BPF_MAP_TYPE_ARRAY
        },
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_name: name16(name),
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
    load_xdp_program(&redirect_program(map.as_raw_fd()), "pfil_redirect")
}

/// Load an XDP program. On failure the verifier log is returned with the
/// error.
pub(crate) fn load_xdp_program(
    prog: &[BpfInsn],
    name: &str,
) -> Result<OwnedFd, (io::Error, String)> {
    let license = c"GPL";
    let mut log = vec![0u8; 8192];
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name16(name),
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

/// `union bpf_attr` for `BPF_PROG_TEST_RUN` (the `test` struct).
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// What one live test run reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LiveRun {
    /// Average run time per frame in ns (the kernel's `duration`).
    pub(crate) ns_per_frame: u32,
}

/// `BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`: inject `repeat`
/// copies of `frame` into the XDP path (through `prog`), `batch_size` at a
/// time (1..=[`LIVE_MAX_BATCH`]). On success every one of the `repeat`
/// frames was run through the program; what the program's action then
/// did with it (a redirect the target refused) the kernel does not say
/// here.
pub(crate) fn prog_test_run_live(
    prog: &OwnedFd,
    frame: &[u8],
    repeat: u32,
    batch_size: u32,
) -> io::Result<LiveRun> {
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat,
        flags: BPF_F_TEST_XDP_LIVE_FRAMES,
        batch_size,
        ..Default::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok(LiveRun {
        ns_per_frame: attr.duration,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_sizes() {
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<TestRunAttr>(), 80);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
    }
}
