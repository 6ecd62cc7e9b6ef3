//! The kernel as the reference: the same object loaded with bpf(2)
//! (`BPF_MAP_CREATE`, `BPF_PROG_LOAD`) and run on a frame with
//! `BPF_PROG_TEST_RUN`, so tests compare pfil's run with the kernel's
//! verdict, output bytes and map contents. Needs `CAP_BPF` (root).
//!
//! The kernel's own verifier is also a second opinion on a program
//! ([`KernelProgram::load`] returns its log on refusal); it is never the
//! only line of defence.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::object::{
    MapOrigin, Object, Program, CALL, LDDW, PSEUDO_CALL, PSEUDO_FUNC, PSEUDO_MAP_FD,
    PSEUDO_MAP_VALUE,
};
use crate::{MapDef, MapType};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_BTF_LOAD: libc::c_long = 18;
const BPF_MAP_FREEZE: libc::c_long = 22;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_RDONLY_PROG: u32 = 1 << 7;
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// `union bpf_attr`, as bytes large enough for every command used here.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_le_bytes());
        self
    }
    fn get_u32(&self, off: usize) -> u32 {
        u32::from_le_bytes([
            self.0[off],
            self.0[off + 1],
            self.0[off + 2],
            self.0[off + 3],
        ])
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr, what: &str) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, writable 128-byte bpf_attr whose
    // pointers (set by the callers) point to live buffers of the sizes
    // given beside them for the duration of the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        // Keep the errno (tests compare it with the maps' own errors) and
        // name the command.
        return Err(match e.raw_os_error() {
            Some(n) if what.starts_with("MAP_") => io::Error::from_raw_os_error(n),
            _ => io::Error::new(e.kind(), format!("bpf({what}): {e}")),
        });
    }
    Ok(r)
}

fn fd_of(r: libc::c_long) -> OwnedFd {
    // SAFETY: the bpf(2) command returned a new file descriptor we own.
    unsafe { OwnedFd::from_raw_fd(r as i32) }
}

/// CPUs the kernel sizes per-CPU values by (`/sys/devices/system/cpu/possible`).
pub fn possible_cpus() -> usize {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let mut n = 0;
    for part in s.trim().split(',') {
        let mut it = part.split('-').map(|x| x.parse::<usize>().ok());
        match (it.next().flatten(), it.next().flatten()) {
            (Some(a), Some(b)) if b >= a => n += b - a + 1,
            (Some(_), None) => n += 1,
            _ => {}
        }
    }
    n.max(1)
}

/// A map in the kernel.
#[derive(Debug)]
pub struct KernelMap {
    fd: OwnedFd,
    /// Its definition.
    pub def: MapDef,
    value_len: usize,
}

impl KernelMap {
    /// Create `def` in the kernel (and fill global data).
    pub fn create(def: &MapDef) -> io::Result<KernelMap> {
        let mut a = Attr::new();
        let flags = def.flags | if def.readonly { BPF_F_RDONLY_PROG } else { 0 };
        // libbpf sizes a perf_event_array left at 0 to the CPUs.
        let max_entries = match (def.kind, def.max_entries) {
            (MapType::PerfEventArray, 0) => possible_cpus() as u32,
            (_, n) => n,
        };
        a.u32(0, def.kind.raw())
            .u32(4, def.key_size)
            .u32(8, def.value_size)
            .u32(12, max_entries)
            .u32(16, flags);
        let name: Vec<u8> = def
            .name
            .bytes()
            .filter(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.')
            .take(15)
            .collect();
        a.0[28..28 + name.len()].copy_from_slice(&name);
        let fd = fd_of(bpf(
            BPF_MAP_CREATE,
            &mut a,
            &format!("MAP_CREATE {}", def.name),
        )?);
        let value_len = if def.kind.per_cpu() {
            (def.value_size as usize).div_ceil(8) * 8 * possible_cpus()
        } else {
            def.value_size as usize
        };
        let m = KernelMap {
            fd,
            def: def.clone(),
            value_len,
        };
        if let Some(init) = &def.init {
            m.update(&0u32.to_le_bytes(), init)?;
            if def.readonly {
                let mut a = Attr::new();
                a.u32(0, m.fd.as_raw_fd() as u32);
                bpf(BPF_MAP_FREEZE, &mut a, "MAP_FREEZE")?;
            }
        }
        Ok(m)
    }

    /// The map's file descriptor (for its pages: a ring buffer's).
    pub(crate) fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Size of a value as bpf(2) takes it (per-CPU: one padded value per
    /// possible CPU).
    pub fn value_len(&self) -> usize {
        self.value_len
    }

    /// Set `key` to `value` (`BPF_ANY`).
    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.update_raw(key, value, 0)
    }

    /// Set `key` to `value` with `flags`; 0 or the negative errno.
    pub fn update_flags(&self, key: &[u8], value: &[u8], flags: u64) -> i64 {
        match self.update_raw(key, value, flags) {
            Ok(()) => 0,
            Err(e) => -i64::from(e.raw_os_error().unwrap_or(0)),
        }
    }

    fn update_raw(&self, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
        if key.len() != self.def.key_size as usize || value.len() != self.value_len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "key or value size",
            ));
        }
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, key.as_ptr() as u64)
            .u64(16, value.as_ptr() as u64)
            .u64(24, flags);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a, "MAP_UPDATE_ELEM").map(drop)
    }

    /// Delete `key`.
    pub fn delete(&self, key: &[u8]) -> io::Result<()> {
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, key.as_ptr() as u64);
        bpf(BPF_MAP_DELETE_ELEM, &mut a, "MAP_DELETE_ELEM").map(drop)
    }

    /// The value of `key`, `None` if absent.
    pub fn lookup(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        if key.len() != self.def.key_size as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "key size"));
        }
        let mut v = vec![0u8; self.value_len];
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, key.as_ptr() as u64)
            .u64(16, v.as_mut_ptr() as u64);
        match bpf(BPF_MAP_LOOKUP_ELEM, &mut a, "MAP_LOOKUP_ELEM") {
            Ok(_) => Ok(Some(v)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every key (bpf(2)'s `GET_NEXT_KEY` walk).
    pub fn keys(&self) -> io::Result<Vec<Vec<u8>>> {
        let ks = self.def.key_size as usize;
        let mut out: Vec<Vec<u8>> = Vec::new();
        loop {
            let mut next = vec![0u8; ks];
            let mut a = Attr::new();
            a.u32(0, self.fd.as_raw_fd() as u32);
            if let Some(prev) = out.last() {
                a.u64(8, prev.as_ptr() as u64);
            }
            a.u64(16, next.as_mut_ptr() as u64);
            match bpf(BPF_MAP_GET_NEXT_KEY, &mut a, "MAP_GET_NEXT_KEY") {
                Ok(_) => out.push(next),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
                Err(e) => return Err(e),
            }
            if out.len() > self.def.max_entries as usize {
                return Ok(out);
            }
        }
    }

    /// Every (key, value).
    pub fn entries(&self) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        for k in self.keys()? {
            if let Some(v) = self.lookup(&k)? {
                out.push((k, v));
            }
        }
        Ok(out)
    }
}

/// A program loaded into the kernel with its maps.
#[derive(Debug)]
pub struct KernelProgram {
    fd: OwnedFd,
    /// The object's maps, in the object's order.
    pub maps: Vec<KernelMap>,
    /// When the object has a prog array: each of its XDP programs
    /// (`Object::programs`) loaded with the same maps, a tail call's
    /// possible target (`None`: the kernel refused it).
    tails: Vec<Option<OwnedFd>>,
}

/// The result of one `BPF_PROG_TEST_RUN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRun {
    /// The XDP action the program returned.
    pub action: u32,
    /// The frame after the run (from data, or data_meta when the kernel
    /// includes metadata, to data_end).
    pub data: Vec<u8>,
}

impl KernelProgram {
    /// Create the object's maps and load `prog` into the kernel.
    ///
    /// # Errors
    /// A bpf(2) failure; for `BPF_PROG_LOAD`, the verifier's log is in the
    /// message.
    pub fn load(obj: &Object, prog: &Program) -> io::Result<KernelProgram> {
        let maps: Vec<KernelMap> = obj
            .maps
            .iter()
            .map(|d| {
                KernelMap::create(d).map_err(|e| {
                    let hint = if d.max_entries == 0 {
                        " (max_entries 0: a map its loader sizes; give it a size with \
                         `map NAME max_entries N`)"
                    } else {
                        ""
                    };
                    io::Error::new(
                        e.kind(),
                        format!(
                            "creating map {:?} ({}, max_entries {}): {e}{hint}",
                            d.name,
                            d.kind.name(),
                            d.max_entries
                        ),
                    )
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        let fd = Self::load_one(obj, prog, &maps)?;
        let tails = if obj.maps.iter().any(|d| d.kind == MapType::ProgArray) {
            obj.programs
                .iter()
                .map(|t| Self::load_one(obj, t, &maps).ok())
                .collect()
        } else {
            Vec::new()
        };
        let k = KernelProgram { fd, maps, tails };
        // The entries the object sets, as libbpf sets them.
        for (m, d) in k.maps.iter().zip(&obj.maps) {
            for (slot, name) in &d.tails {
                let n = obj.programs.iter().position(|p| &p.name == name);
                if let Some(fd) = n.and_then(|n| k.tail_fd(n as u32 + 1)) {
                    m.update(&slot.to_le_bytes(), &fd.to_le_bytes())?;
                }
            }
        }
        Ok(k)
    }

    /// The fd of the object's program number `n` (1: the first of
    /// `Object::programs`), as a prog array entry of the kernel's names
    /// it; `None` when it did not load, or the object has no prog array.
    pub fn tail_fd(&self, n: u32) -> Option<i32> {
        let t = self.tails.get(n.checked_sub(1)? as usize)?;
        t.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Load `prog` of `obj` into the kernel with `maps` (the object's).
    fn load_one(obj: &Object, prog: &Program, maps: &[KernelMap]) -> io::Result<OwnedFd> {
        let mut insns = prog.kernel_insns.as_ref().unwrap_or(&prog.insns).clone();
        for slot in 0..insns.len() / 8 {
            let src = insns[slot * 8 + 1] >> 4;
            if insns[slot * 8] == LDDW && (src == PSEUDO_MAP_FD || src == PSEUDO_MAP_VALUE) {
                let idx = i32::from_le_bytes(
                    insns[slot * 8 + 4..slot * 8 + 8]
                        .try_into()
                        .unwrap_or_default(),
                );
                let m = maps
                    .get(idx as usize)
                    .ok_or_else(|| io::Error::other(format!("map index {idx}")))?;
                insns[slot * 8 + 4..slot * 8 + 8].copy_from_slice(&m.fd.as_raw_fd().to_le_bytes());
            }
        }
        let license = CString::new(obj.license.clone()).unwrap_or_default();
        // A callback's address needs the functions' BTF (`func_info`).
        let funcs = (0..insns.len() / 8)
            .any(|s| insns[s * 8] == LDDW && insns[s * 8 + 1] >> 4 == PSEUDO_FUNC)
            .then(|| function_starts(&insns));
        let btf = match &funcs {
            Some(f) => Some(functions_btf(f.len())?),
            None => None,
        };
        let func_info: Vec<u32> = funcs
            .iter()
            .flatten()
            .enumerate()
            .flat_map(|(i, &at)| [at, i as u32 + 3])
            .collect();
        let load = |log: &mut [u8]| {
            let mut a = Attr::new();
            a.u32(0, BPF_PROG_TYPE_XDP)
                .u32(4, (insns.len() / 8) as u32)
                .u64(8, insns.as_ptr() as u64)
                .u64(16, license.as_ptr() as u64)
                .u32(44, if prog.frags { BPF_F_XDP_HAS_FRAGS } else { 0 });
            if let Some(b) = &btf {
                a.u32(72, b.as_raw_fd() as u32)
                    .u32(76, 8)
                    .u64(80, func_info.as_ptr() as u64)
                    .u32(88, (func_info.len() / 2) as u32);
            }
            if !log.is_empty() {
                a.u32(24, 1)
                    .u32(28, log.len() as u32)
                    .u64(32, log.as_mut_ptr() as u64);
            }
            bpf(BPF_PROG_LOAD, &mut a, "PROG_LOAD")
        };
        // Without a log first (as libbpf does): a large program's log can
        // outgrow any buffer, and the kernel then fails the load with
        // ENOSPC although it verified the program.
        let e = match load(&mut []) {
            Ok(fd) => return Ok(fd_of(fd)),
            Err(e) => e,
        };
        // Refused: again with a log, for the verifier's reason (its last
        // lines; a log that outgrew the buffer still holds them up to its
        // end).
        let mut log = vec![0u8; 1 << 22];
        let _ = load(&mut log);
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        let tail: Vec<&str> = text.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(io::Error::new(
            e.kind(),
            format!("{e}; verifier: {}", tail.join(" | ")),
        ))
    }

    /// Run the program once on `frame` (`BPF_PROG_TEST_RUN`, on the
    /// calling CPU; the kernel gives the frame its XDP headroom and the
    /// loopback device as ingress, queue 0).
    pub fn test_run(&self, frame: &[u8]) -> io::Result<TestRun> {
        let mut out = vec![0u8; frame.len() + 4096];
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u32(8, frame.len() as u32)
            .u32(12, out.len() as u32)
            .u64(16, frame.as_ptr() as u64)
            .u64(24, out.as_mut_ptr() as u64)
            .u32(32, 1);
        bpf(BPF_PROG_TEST_RUN, &mut a, "PROG_TEST_RUN")?;
        let action = a.get_u32(4);
        let n = (a.get_u32(12) as usize).min(out.len());
        out.truncate(n);
        Ok(TestRun { action, data: out })
    }
}

/// Where each function of `insns` starts, in order: the program at 0,
/// the targets of bpf-to-bpf calls and of callbacks' address loads.
fn function_starts(insns: &[u8]) -> Vec<u32> {
    let mut at = vec![0u32];
    for s in 0..insns.len() / 8 {
        let (code, src) = (insns[s * 8], insns[s * 8 + 1] >> 4);
        if code == CALL && src == PSEUDO_CALL || code == LDDW && src == PSEUDO_FUNC {
            let imm =
                i32::from_le_bytes(insns[s * 8 + 4..s * 8 + 8].try_into().unwrap_or_default());
            at.push((s as i64 + 1 + i64::from(imm)) as u32);
        }
    }
    at.sort_unstable();
    at.dedup();
    at
}

/// A BTF of `n` functions `int fK(void)` (types 3..3+n), loaded: what
/// the kernel asks of a program that loads a callback's address (its
/// `func_info`, each function's type; "missing btf func_info"
/// otherwise). The functions are static: the kernel checks no argument
/// of theirs against it.
fn functions_btf(n: usize) -> io::Result<OwnedFd> {
    let mut strs = b"\0int\0".to_vec();
    let mut types: Vec<u32> = vec![
        1,
        1 << 24,
        4,
        1 << 24 | 32, // [1] int: INT, 4 bytes, signed, 32 bits
        0,
        13 << 24,
        1, // [2] FUNC_PROTO int (void)
    ];
    for k in 0..n {
        let name = strs.len() as u32;
        strs.extend_from_slice(format!("f{k}\0").as_bytes());
        types.extend([name, 12 << 24, 2]); // FUNC fK, static, [2]
    }
    let types: Vec<u8> = types.iter().flat_map(|t| t.to_le_bytes()).collect();
    let mut blob = Vec::new();
    for h in [0xeb9f_u16.to_le_bytes(), [1, 0]] {
        blob.extend_from_slice(&h); // magic; version 1, flags 0
    }
    for v in [
        24,
        0,
        types.len() as u32,
        types.len() as u32,
        strs.len() as u32,
    ] {
        blob.extend_from_slice(&v.to_le_bytes()); // hdr_len, type_off/len, str_off/len
    }
    blob.extend_from_slice(&types);
    blob.extend_from_slice(&strs);
    let mut a = Attr::new();
    a.u64(0, blob.as_ptr() as u64).u32(16, blob.len() as u32);
    bpf(BPF_BTF_LOAD, &mut a, "BTF_LOAD").map(fd_of)
}

/// Whether this kernel lets an XDP program call `bpf_xdp_adjust_meta`
/// (probed once with a 4-instruction program; `false` where bpf(2) is not
/// usable). Some builds refuse it (`program of this type cannot use
/// helper bpf_xdp_adjust_meta#54`: Linux 6.18.44-fc, a Firecracker
/// guest's kernel): the oracle cannot run a program that calls it there.
pub fn adjusts_meta() -> bool {
    static PROBE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROBE.get_or_init(|| {
        // r2 = 0; call bpf_xdp_adjust_meta (r1 is the context); r0 =
        // XDP_PASS; exit.
        let insns: [u8; 32] = [
            0xb7, 0x02, 0, 0, 0, 0, 0, 0, //
            0x85, 0x00, 0, 0, 54, 0, 0, 0, //
            0xb7, 0x00, 0, 0, 2, 0, 0, 0, //
            0x95, 0x00, 0, 0, 0, 0, 0, 0,
        ];
        let license = c"GPL";
        let mut a = Attr::new();
        a.u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, 4)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64);
        bpf(BPF_PROG_LOAD, &mut a, "PROG_LOAD").map(fd_of).is_ok()
    })
}

/// Whether bpf(2) is usable here (root with `CAP_BPF`): a 1-entry array
/// can be created.
pub fn available() -> bool {
    let def = MapDef {
        name: "probe".into(),
        kind: MapType::Array,
        key_size: 4,
        value_size: 4,
        max_entries: 1,
        flags: 0,
        origin: MapOrigin::Legacy,
        init: None,
        tails: Vec::new(),
        readonly: false,
        sym_off: 0,
        section: 0,
    };
    KernelMap::create(&def).is_ok()
}
