//! The helpers that write events for a reader: `bpf_perf_event_output`
//! into a perf event array, `bpf_ringbuf_output` into a ring buffer, and
//! `bpf_ringbuf_query` (the rings: `crate::maps` `events.rs`).

use pfil_ebpf::Env;

use super::{bad, state, EFAULT, EINVAL};
use crate::maps::MapType;

/// `bpf_perf_event_output`'s flags: the slot (`BPF_F_INDEX_MASK`, with
/// `BPF_F_CURRENT_CPU` all ones) and the packet bytes to append
/// (`BPF_F_CTXLEN_MASK`).
const INDEX_MASK: u64 = 0xffff_ffff;
const CTXLEN_MASK: u64 = 0xf_ffff << 32;

/// The `len` bytes at `addr` if they are the program's to read (the
/// kernel's verifier proves them readable): one check, and the bytes
/// used where they lie.
fn view(env: &Env, addr: u64, len: u64) -> Option<&[u8]> {
    if len == 0 {
        return Some(&[]);
    }
    env.check(addr, len).ok()
}

/// The run's state and the event map `map` of type `kind` a helper
/// named `name` was given, or the fault of another (the verifier checks
/// the type of a map it tracks; this checks any).
fn event_map<'a>(
    env: &mut Env,
    map: u64,
    kind: MapType,
    what: &'static str,
) -> Option<(&'a super::RunState, &'a crate::Map, &'a crate::maps::Events)> {
    let st = state(env) as *const super::RunState;
    // SAFETY: RunState is not the Env, and the loader keeps it (with its
    // maps) alive for as long as the Env runs programs: the shared borrow
    // lasts the helper's call.
    let st = unsafe { &*st };
    let Some(m) = st.map(map) else {
        bad(env, "not a map of this program");
        return None;
    };
    match m.events().filter(|_| m.kind() == kind) {
        Some(e) => Some((st, m, e)),
        None => {
            bad(env, what);
            None
        }
    }
}

/// `bpf_perf_event_output(ctx, map, flags, data, size)`: a record of
/// `size` bytes of `data`, then the packet's first `flags >> 32` bytes,
/// into the perf event array's slot `flags & 0xffffffff`.
pub(super) unsafe extern "C" fn perf_event_output(
    _ctx: u64,
    map: u64,
    flags: u64,
    data: u64,
    size: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let Some((st, m, events)) = event_map(
        env,
        map,
        MapType::PerfEventArray,
        "bpf_perf_event_output on a map that is not a perf_event_array",
    ) else {
        return 0;
    };
    // The kernel's bpf_xdp_event_output: unknown flags, then a packet
    // length past the packet.
    if flags & !(INDEX_MASK | CTXLEN_MASK) != 0 {
        return EINVAL as u64;
    }
    let (_, start, end) = env.packet();
    let want = (flags & CTXLEN_MASK) >> 32;
    if want > end - start {
        return EFAULT as u64;
    }
    // (No copy but into the ring: the slices are where the program's
    // data and the packet lie.)
    let written = match (view(env, data, size), view(env, start, want)) {
        (Some(d), Some(p)) => {
            Some(events.perf_output(st.worker, flags & INDEX_MASK, m.max_entries(), d, p))
        }
        _ => None,
    };
    match written {
        Some(r) => r as u64,
        None if view(env, data, size).is_none() => bad(
            env,
            "bpf_perf_event_output: data outside the program's memory",
        ),
        None => bad(env, "bpf_perf_event_output: packet bytes out of reach"),
    }
}

/// `bpf_ringbuf_output(map, data, size, flags)`: a record of `size`
/// bytes of `data` into the ring buffer.
pub(super) unsafe extern "C" fn ringbuf_output(
    map: u64,
    data: u64,
    size: u64,
    flags: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let Some((_, _, events)) = event_map(
        env,
        map,
        MapType::Ringbuf,
        "bpf_ringbuf_output on a map that is not a ringbuf",
    ) else {
        return 0;
    };
    match view(env, data, size).map(|d| events.ring_output(d, flags)) {
        Some(r) => r as u64,
        None => bad(env, "bpf_ringbuf_output: data outside the program's memory"),
    }
}

/// `bpf_ringbuf_query(map, flags)`: the ring buffer's available data,
/// size, consumer or producer position.
pub(super) unsafe extern "C" fn ringbuf_query(
    map: u64,
    flags: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    event_map(
        env,
        map,
        MapType::Ringbuf,
        "bpf_ringbuf_query on a map that is not a ringbuf",
    )
    .map_or(0, |(_, _, e)| e.ring_query(flags))
}

/// `bpf_ringbuf_reserve(map, size, flags)`: a record of `size` bytes the
/// program writes in place, in its worker's reservation area; null when
/// the ring is full, `flags` is not 0, or the area is.
pub(super) unsafe extern "C" fn ringbuf_reserve(
    map: u64,
    size: u64,
    flags: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    let env = unsafe { &mut *env };
    let Some((st, m, events)) = event_map(
        env,
        map,
        MapType::Ringbuf,
        "bpf_ringbuf_reserve on a map that is not a ringbuf",
    ) else {
        return 0;
    };
    let worker = st.worker;
    let (start, area) = m.reserve_area(worker);
    // (The record starts as the kernel's does: the ring's bytes there.)
    let e = &mut *env;
    match events.reserve(worker, size, flags, area, move |off| {
        e.check_mut(start + off as u64, size).ok()
    }) {
        Some(off) => {
            state(env).reserved += 1;
            start + off as u64
        }
        None => 0,
    }
}

/// `bpf_ringbuf_submit` and `_discard`: the record at `rec` (which
/// `bpf_ringbuf_reserve` gave this worker) goes to the reader, or away.
fn commit(env: &mut Env, rec: u64, discard: bool) -> u64 {
    let st = state(env) as *const super::RunState;
    // SAFETY: RunState is not the Env; the shared borrow lasts this call.
    let st = unsafe { &*st };
    for m in st.maps.iter().filter(|m| m.kind() == MapType::Ringbuf) {
        let (start, area) = m.reserve_area(st.worker);
        if !(start..start + area as u64).contains(&rec) {
            continue;
        }
        let Some(events) = m.events() else { continue };
        let off = (rec - start) as usize;
        // The record's bytes lie in the worker's area (a region of its
        // own), copied into the ring here (a discard's too: they stay in
        // the kernel's ring memory, where a later record may see them).
        let bytes = |len: usize| view(env, rec, len as u64);
        if events.commit(st.worker, off, discard, bytes) {
            state(env).reserved -= 1;
            return 0;
        }
    }
    bad(
        env,
        "bpf_ringbuf_submit or _discard of a record bpf_ringbuf_reserve did not give this \
         run, or gave back already",
    )
}

/// `bpf_ringbuf_submit(data, flags)` (the flags are wake-up hints).
pub(super) unsafe extern "C" fn ringbuf_submit(
    rec: u64,
    _flags: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    commit(unsafe { &mut *env }, rec, false)
}

/// `bpf_ringbuf_discard(data, flags)`.
pub(super) unsafe extern "C" fn ringbuf_discard(
    rec: u64,
    _flags: u64,
    _: u64,
    _: u64,
    _: u64,
    env: *mut Env,
) -> u64 {
    // SAFETY: the engine passes its live Env (HelperFn contract).
    commit(unsafe { &mut *env }, rec, true)
}

/// After a run that faulted holding records (`RunState::reserved`):
/// discard them, so that a reader does not wait on them for ever.
pub(crate) fn abandon(st: &mut super::RunState) {
    for m in st.maps.iter().filter(|m| m.kind() == MapType::Ringbuf) {
        if let Some(e) = m.events() {
            e.abandon(st.worker);
        }
    }
    st.reserved = 0;
}
