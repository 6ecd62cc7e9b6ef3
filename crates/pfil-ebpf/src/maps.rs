//! Maps as the engine sees them ([`MapRef`]) and the relocation of the
//! `LDDW` instructions that refer to them.

use crate::insn::*;
use crate::{Region, VerifyError};

/// What the loader tells the engine about one map of a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapRef {
    /// The loader's opaque handle, loaded by `LDDW dst, map` (src 1).
    pub handle: u64,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes.
    pub value_size: u32,
    /// Maximum number of entries.
    pub max_entries: u32,
    /// For maps whose value is addressed directly (global data: `.data`,
    /// `.rodata`, `.bss`), the value's memory, for `LDDW` with src 2. The
    /// region must also be given to [`Env::new`](crate::Env::new) for the program to reach it.
    /// A region that is not writable is a constant for the program's
    /// life (a frozen `.rodata`): the verifier reads it, to fold loads of
    /// it and decide the jumps they settle, so its bytes must not change
    /// after [`Program::load`](crate::Program::load).
    pub direct: Option<Region>,
    /// For array maps (ARRAY, PERCPU_ARRAY) whose lookups the JIT may
    /// compile inline, as the kernel's `array_map_gen_lookup`: no helper
    /// call. Requires `key_size` 4; the value addresses come from the
    /// run's [`Env`](crate::Env) ([`Env::set_array_bases`](crate::Env::set_array_bases)).
    pub array: Option<ArrayLayout>,
    /// The kernel's map type number (`enum bpf_map_type`; 0: not said).
    /// The verifier checks it against the helpers the map is given to, as
    /// the kernel's `check_map_func_compatibility` does: a prog array
    /// (3) goes to `bpf_tail_call` alone, a perf event array (4) to
    /// `bpf_perf_event_output` alone, a ring buffer (27) to the
    /// `bpf_ringbuf_*` helpers alone, and those helpers take no other map.
    pub map_type: u32,
    /// The map's flags (`map_flags`); the verifier reads two, as the
    /// kernel's does: [`BPF_F_RDONLY_PROG`] (the program may not write
    /// the map's values, nor update or delete its elements) and
    /// [`BPF_F_WRONLY_PROG`] (the program may not read its values).
    pub flags: u32,
}

/// `BPF_F_RDONLY_PROG`: a map the program only reads.
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;
/// `BPF_F_WRONLY_PROG`: a map the program only writes.
pub const BPF_F_WRONLY_PROG: u32 = 1 << 8;

/// `BPF_MAP_TYPE_PROG_ARRAY`.
pub const MAP_TYPE_PROG_ARRAY: u32 = 3;
/// `BPF_MAP_TYPE_PERF_EVENT_ARRAY`.
pub const MAP_TYPE_PERF_EVENT_ARRAY: u32 = 4;
/// `BPF_MAP_TYPE_RINGBUF`.
pub const MAP_TYPE_RINGBUF: u32 = 27;

/// The map types only some helpers take, with those helpers (the
/// kernel's `check_map_func_compatibility`, the map's side).
const ONLY: [(u32, &[u32]); 3] = [
    (MAP_TYPE_PROG_ARRAY, &[helper::TAIL_CALL]),
    (MAP_TYPE_PERF_EVENT_ARRAY, &[helper::PERF_EVENT_OUTPUT]),
    (
        MAP_TYPE_RINGBUF,
        &[
            helper::RINGBUF_OUTPUT,
            helper::RINGBUF_RESERVE,
            helper::RINGBUF_QUERY,
        ],
    ),
];

/// Whether helper `id` may be given a map of type `map_type` (0: not
/// said, any map helper takes it), and if not, what the kernel says
/// instead: the helper's side (its map must be of one type) and the
/// map's (only some helpers take it).
pub(crate) fn map_fits(id: u32, map_type: u32) -> Result<(), String> {
    let name = helper::name(id).unwrap_or("helper");
    let type_name = |t: u32| match t {
        MAP_TYPE_PROG_ARRAY => "prog_array",
        MAP_TYPE_PERF_EVENT_ARRAY => "perf_event_array",
        MAP_TYPE_RINGBUF => "ringbuf",
        _ => "another type",
    };
    if map_type == 0 {
        return Ok(());
    }
    if let Some((_, takers)) = ONLY.iter().find(|(t, _)| *t == map_type) {
        if takers.contains(&id) {
            return Ok(());
        }
        let names: Vec<String> = takers
            .iter()
            .map(|&h| format!("bpf_{}", helper::name(h).unwrap_or("?")))
            .collect();
        return Err(format!(
            "bpf_{name} on a {} (the kernel refuses it: only {} take{} one)",
            type_name(map_type),
            names.join(", "),
            if names.len() == 1 { "s" } else { "" }
        ));
    }
    if let Some((t, _)) = ONLY.iter().find(|(_, takers)| takers.contains(&id)) {
        return Err(format!(
            "bpf_{name} takes a {}, not a map of {} (the kernel refuses it)",
            type_name(*t),
            format_args!("type {map_type}")
        ));
    }
    Ok(())
}

/// Where an array map's values lie, for lookups compiled inline: value
/// `k` (for `k < max_entries`) of the running worker is at
/// `base + k * stride`, `base` being the map's entry of
/// [`Env::set_array_bases`](crate::Env::set_array_bases) (per worker for per-CPU arrays).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayLayout {
    /// Bytes from one value to the next (at least `value_size`, a
    /// multiple of 8).
    pub stride: u64,
}

/// Rewrites `LDDW` with a map pseudo-source into a plain 64-bit immediate.
/// The map references of a program after [`resolve_maps`]: the LDDWs of
/// map handles (pc, map), and of addresses in a read-only directly
/// addressed value (pc, map, offset), whose bytes the verifier may read.
pub(crate) type Resolved = (Vec<(usize, u32)>, Vec<(usize, u32, u32)>);

pub(crate) fn resolve_maps(insns: &mut [Insn], maps: &[MapRef]) -> Result<Resolved, VerifyError> {
    let mut refs = Vec::new();
    let mut consts = Vec::new();
    let mut pc = 0;
    while pc < insns.len() {
        if insns[pc].code == LDDW {
            if pc + 1 >= insns.len() {
                return Err(VerifyError::new(
                    pc,
                    "64-bit immediate load missing its second slot",
                ));
            }
            let (src, imm, imm2) = (insns[pc].src, insns[pc].imm, insns[pc + 1].imm);
            let value = match src {
                0 => None,
                PSEUDO_MAP_FD | PSEUDO_MAP_VALUE => {
                    let m = maps.get(imm as u32 as usize).ok_or_else(|| {
                        VerifyError::new(
                            pc,
                            format!("map index {imm} out of range ({} maps)", maps.len()),
                        )
                    })?;
                    if src == PSEUDO_MAP_FD {
                        refs.push((pc, imm as u32));
                        if imm2 != 0 {
                            return Err(VerifyError::new(
                                pc,
                                "map reference with a nonzero second immediate",
                            ));
                        }
                        Some(m.handle)
                    } else {
                        let d = m.direct.ok_or_else(|| {
                            VerifyError::new(
                                pc,
                                format!("map {imm} has no directly addressable value"),
                            )
                        })?;
                        let off = imm2 as u32 as u64;
                        if !d.writable {
                            consts.push((pc, imm as u32, off as u32));
                        }
                        if off >= d.len {
                            return Err(VerifyError::new(
                                pc,
                                format!("offset {off} outside map {imm}'s {}-byte value", d.len),
                            ));
                        }
                        Some(d.start + off)
                    }
                }
                s => {
                    return Err(VerifyError::new(
                        pc,
                        format!("64-bit immediate load with unsupported pseudo-source {s}"),
                    ))
                }
            };
            if let Some(v) = value {
                insns[pc].src = 0;
                insns[pc].imm = v as u32 as i32;
                insns[pc + 1].imm = (v >> 32) as u32 as i32;
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    Ok((refs, consts))
}
