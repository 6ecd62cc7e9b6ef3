//! The kernel helpers an XDP program may call, in userspace.
//!
//! Each helper is an `extern "C"` function with the engine's
//! [`HelperFn`] ABI. The run's loader state ([`RunState`]) comes from
//! [`Env::user`]; every pointer argument is checked with [`Env::check`]
//! before use; map handles are checked against the program's own maps. A
//! helper never panics: a bad argument is the kernel's error return, or
//! a [`Fault`] when the kernel's verifier would have refused the call.

use std::sync::Arc;
use std::time::Instant;

use pfil_ebpf::{Env, Fault, HelperFn, Helpers, Signature};

use crate::maps::{Map, MapType};
use crate::program::Redirect;

mod clock;
mod events;
mod packet;

pub(crate) use events::abandon as abandon_records;
mod printk;
mod tail;

use clock::{
    get_numa_node_id, jiffies64, ktime_get_boot_ns, ktime_get_coarse_ns, ktime_get_ns,
    ktime_get_tai_ns,
};
use packet::{
    csum_diff, xdp_adjust_head, xdp_adjust_meta, xdp_adjust_tail, xdp_get_buff_len, xdp_load_bytes,
    xdp_store_bytes,
};

/// XDP actions.
pub const XDP_ABORTED: u64 = 0;
/// `XDP_DROP`.
pub const XDP_DROP: u64 = 1;
/// `XDP_PASS`.
pub const XDP_PASS: u64 = 2;
/// `XDP_TX`.
pub const XDP_TX: u64 = 3;
/// `XDP_REDIRECT`.
pub const XDP_REDIRECT: u64 = 4;

const EINVAL: i64 = -22;
const EFAULT: i64 = -14;
/// `bpf_redirect_map` flags (devmap).
const BPF_F_BROADCAST: u64 = 1 << 3;
const BPF_F_EXCLUDE_INGRESS: u64 = 1 << 4;

/// trace_printk lines a worker may log per second.
const PRINTK_PER_SEC: u32 = 20;

/// What helpers of one worker's runs share: the program's maps, the
/// worker's index, the redirect target of the current run.
#[derive(Debug)]
pub struct RunState {
    /// The program's maps, by index (handles are their addresses).
    pub maps: Vec<Arc<Map>>,
    /// The worker running (`bpf_get_smp_processor_id`).
    pub worker: usize,
    /// Set by `bpf_redirect`/`bpf_redirect_map` (which make the run end
    /// `XdpEnd::Full`): where to send the frame; taken by the hook after
    /// such a run.
    pub redirect: Option<Redirect>,
    /// xorshift state for `bpf_get_prandom_u32`.
    pub rng: u64,
    /// trace_printk rate limit: (second of the window, lines in it,
    /// lines suppressed).
    pub printk: (u64, u32, u64),
    /// Program name, for trace_printk lines.
    pub program: String,
    /// Tail calls taken so far in the current run (`bpf_tail_call`; 0
    /// between runs).
    pub tail_calls: u32,
    /// Records of `bpf_ringbuf_reserve` held (not submitted or
    /// discarded): 0 after a run but one that faulted, whose records
    /// the hook then discards.
    pub reserved: u32,
    /// Which program numbers (`n - 1` indexes it) a tail call may run:
    /// the object's programs that loaded.
    pub tail_targets: Arc<[bool]>,
    epoch: Instant,
}

impl RunState {
    /// The state of worker `worker` of a program with `maps`.
    pub fn new(maps: Vec<Arc<Map>>, worker: usize, program: String) -> RunState {
        RunState {
            maps,
            worker,
            redirect: None,
            rng: 0x9E37_79B9_7F4A_7C15 ^ ((worker as u64 + 1) << 17),
            printk: (0, 0, 0),
            program,
            tail_calls: 0,
            reserved: 0,
            tail_targets: Arc::from(Vec::new()),
            epoch: Instant::now(),
        }
    }

    fn map(&self, handle: u64) -> Option<&Map> {
        self.maps
            .iter()
            .map(|m| &**m)
            .find(|m| std::ptr::from_ref(*m) as u64 == handle)
    }
}

fn state(env: &mut Env) -> &mut RunState {
    // SAFETY: the loader builds every Env it runs programs with from a
    // boxed RunState that outlives it (XdpProgram's worker slots), and a
    // worker's Env is used by one thread at a time.
    unsafe { &mut *env.user::<RunState>() }
}

fn bad(env: &mut Env, reason: &'static str) -> u64 {
    env.fault(Fault::Helper { pc: 0, reason });
    0
}

/// A copy of the `len` bytes a program passed at `addr` (keys, values:
/// they may point into the very map being written).
fn copy_arg(env: &mut Env, addr: u64, len: usize) -> Result<ArgCopy, ()> {
    let Ok(src) = env.check(addr, len as u64) else {
        env.fault(Fault::OutOfBounds {
            pc: 0,
            addr,
            len: len as u32,
            write: false,
        });
        return Err(());
    };
    Ok(match len {
        0..=ARG_INLINE => {
            let mut b = [0u8; ARG_INLINE];
            b[..len].copy_from_slice(src);
            ArgCopy::Inline(b, len)
        }
        _ => ArgCopy::Heap(src.to_vec()),
    })
}

/// The bytes [`copy_arg`] keeps on the stack; past them (a map value can
/// be larger than a key, as the kernel's can: an ARRAY of 1 KiB values),
/// on the heap.
const ARG_INLINE: usize = 512;

/// A helper's memory argument, copied out of the program's memory (a
/// map's update may read from the map it writes).
#[allow(
    clippy::large_enum_variant,
    reason = "the inline copy keeps the common case (keys, small values) off the heap"
)]
enum ArgCopy {
    Inline([u8; ARG_INLINE], usize),
    Heap(Vec<u8>),
}

impl std::ops::Deref for ArgCopy {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ArgCopy::Inline(b, n) => &b[..*n],
            ArgCopy::Heap(v) => v,
        }
    }
}

unsafe extern "C" fn map_lookup_elem(
    map: u64,
    key: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let st = state(env) as *const RunState;
    // SAFETY: RunState is not the Env; the shared borrow lasts this call.
    let st = unsafe { &*st };
    let Some(m) = st.map(map) else {
        return bad(env, "not a map of this program");
    };
    // The engine compiles accesses to a looked-up value as writable
    // without checks (ebpf-api.md, helper 1): a read-only map (`.rodata`,
    // reached by programs through direct loads, not lookups) gives none.
    if m.readonly() {
        return 0;
    }
    // A lookup only reads the key and writes no value: the key is used
    // where it lies (no copy).
    let Ok(k) = env.check(key, m.key_size() as u64) else {
        env.fault(Fault::OutOfBounds {
            pc: 0,
            addr: key,
            len: m.key_size() as u32,
            write: false,
        });
        return 0;
    };
    m.prog_lookup(k, st.worker) as u64
}

unsafe extern "C" fn map_update_elem(
    map: u64,
    key: u64,
    value: u64,
    flags: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let st = state(env) as *const RunState;
    // SAFETY: RunState is not the Env; the shared borrow lasts this call.
    let Some(m) = (unsafe { &*st }).map(map) else {
        return bad(env, "not a map of this program");
    };
    // (The verifier refuses it; its folds of the frozen values rest on it.)
    if m.readonly() {
        return bad(env, "bpf_map_update_elem of read-only global data");
    }
    let Ok(k) = copy_arg(env, key, m.key_size()) else {
        return 0;
    };
    let Ok(v) = copy_arg(env, value, m.value_size()) else {
        return 0;
    };
    // SAFETY: as above.
    match m.prog_update(&k, &v, flags, unsafe { &*st }.worker) {
        Ok(()) => 0,
        Err(e) => e.errno() as u64,
    }
}

unsafe extern "C" fn map_delete_elem(
    map: u64,
    key: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let st = state(env) as *const RunState;
    // SAFETY: RunState is not the Env; the shared borrow lasts this call.
    let Some(m) = (unsafe { &*st }).map(map) else {
        return bad(env, "not a map of this program");
    };
    if m.readonly() {
        return bad(env, "bpf_map_delete_elem of read-only global data");
    }
    let Ok(k) = copy_arg(env, key, m.key_size()) else {
        return 0;
    };
    match m.delete(&k) {
        Ok(()) => 0,
        Err(e) => e.errno() as u64,
    }
}

unsafe extern "C" fn get_prandom_u32(_: u64, _: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let st = state(unsafe { &mut *env });
    let mut x = st.rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    st.rng = x;
    x >> 32
}

unsafe extern "C" fn get_smp_processor_id(
    _: u64,
    _: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    state(unsafe { &mut *env }).worker as u64
}

unsafe extern "C" fn redirect(
    ifindex: u64,
    flags: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    if flags != 0 {
        return XDP_ABORTED;
    }
    state(env).redirect = Some(Redirect::Device(ifindex as u32));
    // The hook reads (and clears) the target after such a run only.
    env.read_back();
    XDP_REDIRECT
}

unsafe extern "C" fn redirect_map(
    map: u64,
    key: u64,
    flags: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let st = state(env);
    let Some(m) = st.map(map) else {
        return bad(env, "not a map of this program");
    };
    if !m.kind().is_redirect() {
        return bad(
            env,
            "bpf_redirect_map on a map that is not a devmap, devmap_hash, cpumap or xskmap",
        );
    }
    // The kernel's xsk_map_redirect: no broadcast flags; an empty slot
    // (every slot here: MapType::Xskmap) returns the flags' action.
    if m.kind() == MapType::Xskmap {
        return if flags & !3 != 0 {
            XDP_ABORTED
        } else {
            flags & 3
        };
    }
    // The kernel's __bpf_xdp_redirect_map: flags past the action bits and
    // BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS abort; a broadcast redirects
    // (to every device of the map: pfil sends to one target, so such a
    // frame is refused and counted by the hook).
    if flags & !(3 | BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS) != 0 {
        return XDP_ABORTED;
    }
    if flags & BPF_F_BROADCAST != 0 {
        st.redirect = None;
        env.read_back();
        return XDP_REDIRECT;
    }
    let Some(word) = m.redirect_word(&(key as u32).to_le_bytes()) else {
        return flags & 3;
    };
    st.redirect = Some(if m.kind() == MapType::Cpumap {
        Redirect::Cpu(key as u32)
    } else {
        Redirect::Device(word)
    });
    // The hook reads (and clears) the target after such a run only.
    env.read_back();
    XDP_REDIRECT
}

impl printk::Memory for Env {
    fn bytes(&self, addr: u64, len: u64) -> Option<Vec<u8>> {
        self.check(addr, len).ok().map(<[u8]>::to_vec)
    }
}

unsafe extern "C" fn trace_printk(
    fmt: u64,
    size: u64,
    a1: u64,
    a2: u64,
    a3: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let Ok(bytes) = env.check(fmt, size) else {
        return bad(env, "trace_printk: format outside the program's memory");
    };
    let Some(line) = printk::format(bytes, [a1, a2, a3], &*env) else {
        return EINVAL as u64;
    };
    let written = line.len() as u64;
    let line = String::from_utf8_lossy(line.bytes()).into_owned();
    let st = state(env);
    let sec = st.epoch.elapsed().as_secs();
    if st.printk.0 != sec {
        if st.printk.2 > 0 {
            tracing::warn!(program = %st.program, suppressed = st.printk.2, "trace_printk lines suppressed (rate limit)");
        }
        st.printk = (sec, 0, 0);
    }
    if st.printk.1 >= PRINTK_PER_SEC {
        st.printk.2 += 1;
    } else {
        st.printk.1 += 1;
        tracing::info!(program = %st.program, worker = st.worker, "{}", line.trim_end());
    }
    written
}

/// The helpers of an XDP program, by kernel id.
pub fn xdp_helpers() -> Helpers {
    let table: [(u32, HelperFn, u8); 28] = [
        (1, map_lookup_elem, 2),
        (2, map_update_elem, 4),
        (3, map_delete_elem, 2),
        (5, ktime_get_ns, 0),
        (6, trace_printk, 2),
        (7, get_prandom_u32, 0),
        (8, get_smp_processor_id, 0),
        (12, tail::tail_call, 3),
        (23, redirect, 2),
        (25, events::perf_event_output, 5),
        (28, csum_diff, 5),
        (42, get_numa_node_id, 0),
        (44, xdp_adjust_head, 2),
        (51, redirect_map, 3),
        (54, xdp_adjust_meta, 2),
        (65, xdp_adjust_tail, 2),
        (118, jiffies64, 0),
        (125, ktime_get_boot_ns, 0),
        (130, events::ringbuf_output, 4),
        (131, events::ringbuf_reserve, 3),
        (132, events::ringbuf_submit, 2),
        (133, events::ringbuf_discard, 2),
        (134, events::ringbuf_query, 2),
        (160, ktime_get_coarse_ns, 0),
        (188, xdp_get_buff_len, 1),
        (189, xdp_load_bytes, 4),
        (190, xdp_store_bytes, 4),
        (208, ktime_get_tai_ns, 0),
    ];
    let mut h = Helpers::new();
    for (id, f, args) in table {
        h.insert(id, f, Signature { args });
    }
    h
}
