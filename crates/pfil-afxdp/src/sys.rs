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
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
/// Helper number of `bpf_map_lookup_elem`.
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// Helper number of `bpf_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS`, the default action when the map has no socket for a queue.
const XDP_PASS: i32 = 2;
/// `XDP_DROP`.
const XDP_DROP: i32 = 1;
/// Helper number of `bpf_redirect`.
const BPF_FUNC_REDIRECT: i32 = 23;
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

/// The in-kernel generator's program, hand-assembled: every frame the
/// test run injects (its ingress is the namespace's loopback) is
/// redirected out of `ifindex`; a frame that really arrived on `ifindex`
/// passes (so the program may stay attached to `ifindex` itself, which
/// keeps it in the kernel's XDP dispatcher between runs).
///
/// ```text
/// r2 = *(u32 *)(r1 + 12)          ; ctx->ingress_ifindex
/// if r2 == ifindex goto pass
/// r1 = ifindex                    ; target interface
/// r2 = 0                          ; flags
/// call bpf_redirect               ; helper 23, returns XDP_REDIRECT
/// exit
/// pass: r0 = XDP_PASS
/// exit
/// ```
pub(crate) fn live_redirect_program(ifindex: u32) -> [BpfInsn; 8] {
    let target = ifindex as i32;
    [
        // BPF_LDX | BPF_MEM | BPF_W
        insn(0x61, 2, 1, 12, 0),
        // BPF_JMP | BPF_JEQ | BPF_K, to `pass` (4 instructions on)
        insn(0x15, 2, 0, 4, target),
        // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0xb7, 1, 0, 0, target),
        insn(0xb7, 2, 0, 0, 0),
        // BPF_JMP | BPF_CALL
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT),
        // BPF_JMP | BPF_EXIT
        insn(0x95, 0, 0, 0, 0),
        insn(0xb7, 0, 0, 0, XDP_PASS),
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// A tiny assembler for the programs below: instructions plus jumps to
/// named labels, resolved by [`Asm::finish`].
struct Asm {
    insns: Vec<BpfInsn>,
    labels: Vec<(&'static str, usize)>,
    jumps: Vec<(usize, &'static str)>,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            insns: Vec::new(),
            labels: Vec::new(),
            jumps: Vec::new(),
        }
    }

    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Asm {
        self.insns.push(insn(code, dst, src, off, imm));
        self
    }

    /// A conditional or unconditional jump to `label`.
    fn jmp(&mut self, code: u8, dst: u8, src: u8, imm: i32, label: &'static str) -> &mut Asm {
        self.jumps.push((self.insns.len(), label));
        self.op(code, dst, src, 0, imm)
    }

    fn label(&mut self, name: &'static str) -> &mut Asm {
        self.labels.push((name, self.insns.len()));
        self
    }

    /// `dst = map fd` (two slots, BPF_PSEUDO_MAP_FD).
    fn map_fd(&mut self, dst: u8, fd: RawFd) -> &mut Asm {
        self.op(0x18, dst, BPF_PSEUDO_MAP_FD, 0, fd)
            .op(0, 0, 0, 0, 0)
    }

    fn finish(mut self) -> Vec<BpfInsn> {
        for &(at, label) in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(n, _)| *n == label)
                .map(|&(_, i)| i)
                .expect("jump to a defined label");
            self.insns[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.insns
    }
}

/// The in-kernel generator's program when destination ports rotate per
/// frame, hand-assembled. Like [`live_redirect_program`], plus: a per-CPU
/// counter (`counter`, one u32) picks the next entry of `ports` (`n`
/// u32 values, each a port's two network-order bytes as stored in a u16),
/// the program writes it into the UDP header of an Ethernet + IPv4
/// (20-byte header) frame and updates the UDP checksum incrementally
/// (RFC 1624) from the port and checksum the frame holds now: the kernel
/// keeps a frame's page, with what the program wrote, between runs, so
/// nothing may assume the template's values.
///
/// ```text
///     r2 = ctx->ingress_ifindex; if r2 == ifindex goto pass
///     r7 = ctx->data; r3 = ctx->data_end
///     if r7 + 42 > r3 goto redirect          ; too short: send as is
///     r8 = lookup(counter, 0); if !r8 goto redirect
///     r9 = *r8; r1 = r9 + 1; if r1 >= n: r1 = 0; *r8 = r1
///     r0 = lookup(ports, r9); if !r0 goto redirect
///     r1 = *(u32 *)r0                       ; new port (network order)
///     r2 = *(u16 *)(r7 + 36)                ; old port
///     if r2 == r1 goto redirect
///     *(u16 *)(r7 + 36) = r1
///     r3 = *(u16 *)(r7 + 40); if r3 == 0 goto redirect   ; no checksum
///     r3 = ~r3 + ~r2 + r1, folded twice, complemented (0 -> 0xffff)
///     *(u16 *)(r7 + 40) = r3
/// redirect: return bpf_redirect(ifindex, 0)
/// pass: return XDP_PASS
/// ```
pub(crate) fn live_rotate_program(
    ifindex: u32,
    counter: RawFd,
    ports: RawFd,
    n: u32,
) -> Vec<BpfInsn> {
    let target = ifindex as i32;
    let mut a = Asm::new();
    // Frames that really arrived on the target pass.
    a.op(0x61, 2, 1, 12, 0) // r2 = ctx->ingress_ifindex
        .jmp(0x15, 2, 0, target, "pass") // if r2 == ifindex
        .op(0x61, 7, 1, 0, 0) // r7 = ctx->data
        .op(0x61, 3, 1, 4, 0) // r3 = ctx->data_end
        .op(0xbf, 4, 7, 0, 0) // r4 = r7
        .op(0x07, 4, 0, 0, 42) // r4 += 42
        .jmp(0x2d, 4, 3, 0, "redirect") // if r4 > r3
        // The counter: key 0 on the stack.
        .op(0x62, 10, 0, -4, 0) // *(u32 *)(r10 - 4) = 0
        .op(0xbf, 2, 10, 0, 0) // r2 = r10
        .op(0x07, 2, 0, 0, -4) // r2 += -4
        .map_fd(1, counter)
        .op(0x85, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM)
        .jmp(0x15, 0, 0, 0, "redirect") // if r0 == NULL
        .op(0xbf, 8, 0, 0, 0) // r8 = r0
        .op(0x61, 9, 8, 0, 0) // r9 = *(u32 *)r8
        .op(0xbf, 1, 9, 0, 0) // r1 = r9
        .op(0x07, 1, 0, 0, 1) // r1 += 1
        .jmp(0xa5, 1, 0, n as i32, "store") // if r1 < n
        .op(0xb7, 1, 0, 0, 0) // r1 = 0
        .label("store")
        .op(0x63, 8, 1, 0, 0) // *(u32 *)r8 = r1
        // The port: key r9.
        .op(0x63, 10, 9, -8, 0) // *(u32 *)(r10 - 8) = r9
        .op(0xbf, 2, 10, 0, 0) // r2 = r10
        .op(0x07, 2, 0, 0, -8) // r2 += -8
        .map_fd(1, ports)
        .op(0x85, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM)
        .jmp(0x15, 0, 0, 0, "redirect") // if r0 == NULL
        .op(0x61, 1, 0, 0, 0) // r1 = *(u32 *)r0
        .op(0x57, 1, 0, 0, 0xffff) // r1 &= 0xffff
        .op(0x69, 2, 7, 36, 0) // r2 = *(u16 *)(r7 + 36): UDP dst port
        .jmp(0x1d, 2, 1, 0, "redirect") // if r2 == r1
        .op(0x6b, 7, 1, 36, 0) // *(u16 *)(r7 + 36) = r1
        .op(0x69, 3, 7, 40, 0) // r3 = *(u16 *)(r7 + 40): UDP checksum
        .jmp(0x15, 3, 0, 0, "redirect") // if r3 == 0: none
        .op(0xa7, 3, 0, 0, 0xffff) // r3 ^= 0xffff (~HC)
        .op(0xa7, 2, 0, 0, 0xffff) // r2 ^= 0xffff (~m)
        .op(0x0f, 3, 2, 0, 0) // r3 += r2
        .op(0x0f, 3, 1, 0, 0) // r3 += r1 (m')
        .op(0xbf, 2, 3, 0, 0) // fold: r2 = r3
        .op(0x77, 2, 0, 0, 16) // r2 >>= 16
        .op(0x57, 3, 0, 0, 0xffff) // r3 &= 0xffff
        .op(0x0f, 3, 2, 0, 0) // r3 += r2
        .op(0xbf, 2, 3, 0, 0) // fold again
        .op(0x77, 2, 0, 0, 16)
        .op(0x57, 3, 0, 0, 0xffff)
        .op(0x0f, 3, 2, 0, 0)
        .op(0xa7, 3, 0, 0, 0xffff) // r3 ^= 0xffff (HC')
        .jmp(0x55, 3, 0, 0, "csum") // if r3 != 0
        .op(0xb7, 3, 0, 0, 0xffff) // 0 means "no checksum": send 0xffff
        .label("csum")
        .op(0x6b, 7, 3, 40, 0) // *(u16 *)(r7 + 40) = r3
        .label("redirect")
        .op(0xb7, 1, 0, 0, target) // r1 = ifindex
        .op(0xb7, 2, 0, 0, 0) // r2 = 0
        .op(0x85, 0, 0, 0, BPF_FUNC_REDIRECT)
        .op(0x95, 0, 0, 0, 0)
        .label("pass")
        .op(0xb7, 0, 0, 0, XDP_PASS)
        .op(0x95, 0, 0, 0, 0);
    a.finish()
}

/// The same incremental UDP checksum update as [`live_rotate_program`],
/// in Rust, for the tests: `csum` and the ports are the raw u16s as
/// loaded from the frame.
#[cfg(test)]
pub(crate) fn csum_replace(csum: u16, old: u16, new: u16) -> u16 {
    let mut s = u32::from(!csum) + u32::from(!old) + u32::from(new);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    match !(s as u16) {
        0 => 0xffff,
        c => c,
    }
}

/// `r0 = XDP_DROP; exit`: what the live-frames probe runs (no frame
/// leaves the machine).
pub(crate) fn drop_program() -> [BpfInsn; 2] {
    [insn(0xb7, 0, 0, 0, XDP_DROP), insn(0x95, 0, 0, 0, 0)]
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

// ---- generic netlink: the netdev family's XDP features --------------------

const NETLINK_GENERIC: i32 = 16;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
/// `NETDEV_XDP_ACT_NDO_XMIT`: the device takes frames redirected to it.
pub(crate) const NETDEV_XDP_ACT_NDO_XMIT: u64 = 1 << 2;

fn nla_put(msg: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    msg.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(payload);
    while msg.len() % 4 != 0 {
        msg.push(0);
    }
}

/// One generic netlink request/answer on `sock`: the attributes of the
/// first answer, or its error.
fn genl_call(
    sock: &OwnedFd,
    family: u16,
    cmd: u8,
    attrs: &[u8],
) -> io::Result<Vec<(u16, Vec<u8>)>> {
    let mut msg = Vec::with_capacity(20 + attrs.len());
    msg.extend_from_slice(&((20 + attrs.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&family.to_ne_bytes());
    msg.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    msg.extend_from_slice(&[cmd, 1, 0, 0]); // genlmsghdr: cmd, version
    msg.extend_from_slice(attrs);
    // SAFETY: `msg` is a live buffer of `msg.len()` bytes; send(2) only reads it.
    let r = unsafe {
        libc::send(
            sock.as_raw_fd(),
            msg.as_ptr() as *const libc::c_void,
            msg.len(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 16384];
    // SAFETY: `buf` is writable for `buf.len()` bytes; recv(2) writes at most that.
    let r = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let buf = &buf[..r as usize];
    let bad = || io::Error::from_raw_os_error(libc::EPROTO);
    if buf.len() < 16 {
        return Err(bad());
    }
    let len =
        (u32::from_ne_bytes(buf[0..4].try_into().map_err(|_| bad())?) as usize).min(buf.len());
    let ty = u16::from_ne_bytes([buf[4], buf[5]]);
    if ty == NLMSG_ERROR {
        let e = i32::from_ne_bytes(
            buf.get(16..20)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        );
        return Err(io::Error::from_raw_os_error(-e));
    }
    let mut out = Vec::new();
    let mut at = 20;
    while at + 4 <= len {
        let alen = u16::from_ne_bytes([buf[at], buf[at + 1]]) as usize;
        let aty = u16::from_ne_bytes([buf[at + 2], buf[at + 3]]) & 0x3fff;
        if alen < 4 || at + alen > len {
            break;
        }
        out.push((aty, buf[at + 4..at + alen].to_vec()));
        at += (alen + 3) & !3;
    }
    Ok(out)
}

/// The XDP features (`NETDEV_XDP_ACT_*`) of `ifindex`, from the netdev
/// generic netlink family, in the calling thread's namespace. `Ok(None)`:
/// the kernel has no netdev family (before 6.3), so nothing is known.
pub(crate) fn xdp_features(ifindex: u32) -> io::Result<Option<u64>> {
    // SAFETY: plain socket(2) call; the result is checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_GENERIC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: `tv` is a valid timeval of the size passed; the kernel only reads it.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    let mut attrs = Vec::new();
    nla_put(&mut attrs, CTRL_ATTR_FAMILY_NAME, b"netdev\0");
    let family = match genl_call(&sock, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, &attrs) {
        Ok(a) => a,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(id) = family
        .iter()
        .find(|(t, v)| *t == CTRL_ATTR_FAMILY_ID && v.len() >= 2)
        .map(|(_, v)| u16::from_ne_bytes([v[0], v[1]]))
    else {
        return Ok(None);
    };
    let mut attrs = Vec::new();
    nla_put(&mut attrs, NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes());
    let dev = genl_call(&sock, id, NETDEV_CMD_DEV_GET, &attrs)?;
    Ok(dev
        .iter()
        .find(|(t, v)| *t == NETDEV_A_DEV_XDP_FEATURES && v.len() >= 8)
        .map(|(_, v)| u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8]))))
}

// ---- threads: CPU affinity and signals ------------------------------------

/// The CPUs the calling thread may run on.
pub(crate) fn affinity() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain bits; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a writable cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: every index is below the set's size in bits.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pin the calling thread to `cpu`.
pub(crate) fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain bits; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `cpu` was checked to be below the set's size in bits.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the
    // calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Block SIGINT and SIGTERM in the calling thread, so that the process's
/// signal handler runs on another thread and never interrupts a
/// `BPF_PROG_TEST_RUN` of this one (an interrupted live run returns
/// `EINTR` without saying how many of its frames it sent).
pub(crate) fn block_stop_signals() -> io::Result<()> {
    // SAFETY: sigset_t is plain bits; sigemptyset initializes it below.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t; these calls only write it.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
    }
    // SAFETY: `set` is initialized; the old mask is not wanted (null).
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        Err(io::Error::from_raw_os_error(r))
    } else {
        Ok(())
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
        let p = live_redirect_program(42);
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 12));
        assert_eq!(
            (p[1].code, p[1].regs, p[1].off, p[1].imm),
            (0x15, 0x02, 4, 42)
        );
        assert_eq!((p[2].code, p[2].regs, p[2].imm), (0xb7, 0x01, 42));
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x02, 0));
        assert_eq!((p[4].code, p[4].imm), (0x85, 23));
        assert_eq!(p[5].code, 0x95);
        // The jump lands on `r0 = XDP_PASS`.
        assert_eq!((p[1 + 1 + 4].code, p[6].imm), (0xb7, 2));
        assert_eq!(p[7].code, 0x95);
        let d = drop_program();
        assert_eq!((d[0].code, d[0].imm, d[1].code), (0xb7, 1, 0x95));
    }

    #[test]
    fn rotate_program_jumps_land_on_their_labels() {
        let p = live_rotate_program(7, 3, 4, 5);
        // The last two instructions are `pass`; the four before, `redirect`.
        let n = p.len();
        assert_eq!(n, 57);
        assert_eq!(
            (p[n - 2].code, p[n - 2].imm, p[n - 1].code),
            (0xb7, 2, 0x95)
        );
        assert_eq!((p[n - 6].code, p[n - 6].imm), (0xb7, 7));
        assert_eq!((p[n - 4].code, p[n - 4].imm), (0x85, 23));
        // The first jump goes to `pass`.
        assert_eq!(1 + 1 + p[1].off as usize, n - 2);
        // Every jump stays inside the program.
        for (i, x) in p.iter().enumerate() {
            if x.code & 0x07 == 0x05 && x.code != 0x85 && x.code != 0x95 {
                let t = i as isize + 1 + x.off as isize;
                assert!(t > i as isize && (t as usize) < n, "jump at {i} to {t}");
            }
        }
        // Two map loads (two slots each).
        assert_eq!(p.iter().filter(|x| x.code == 0x18).count(), 2);
    }

    #[test]
    fn the_incremental_checksum_matches_a_full_one() {
        // A UDP/IPv4 frame's checksum from scratch (etherparse) against
        // the incremental update for a new destination port.
        let build = |dport: u16| {
            let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
                .udp(9, dport);
            let mut v = Vec::new();
            b.write(&mut v, &[0xa5; 18]).unwrap();
            v
        };
        let ld = |f: &[u8], at: usize| u16::from_ne_bytes([f[at], f[at + 1]]);
        for (a, b) in [(53u16, 80u16), (9, 65535), (443, 8080), (1, 0), (0xfffe, 1)] {
            let (fa, fb) = (build(a), build(b));
            assert_eq!(
                csum_replace(ld(&fa, 40), ld(&fa, 36), ld(&fb, 36)),
                ld(&fb, 40),
                "{a} -> {b}"
            );
        }
    }

    #[test]
    fn netlink_attributes_are_padded() {
        let mut m = Vec::new();
        nla_put(&mut m, CTRL_ATTR_FAMILY_NAME, b"netdev\0");
        assert_eq!(m.len(), 12);
        assert_eq!(u16::from_ne_bytes([m[0], m[1]]), 11);
        assert_eq!(u16::from_ne_bytes([m[2], m[3]]), 2);
    }

    #[test]
    fn attr_sizes() {
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<TestRunAttr>(), 80);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::size_of::<SockAddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<XdpStats>(), 48);
    }
}
