//! The kernel's type rules the verifier applies with
//! [`LoadOptions::kernel_rules`](crate::LoadOptions::kernel_rules) where
//! it knows a register's type: arithmetic on pointers, and the pointer
//! arguments of the helpers that take a map or the context; and how each
//! load or store is made (`Flow::access`: inline, or checked at run time).

use super::bounds::access_base;
use super::flow::Flow;
use super::state::*;
use super::{err, Access, Result};
use crate::env::{CTX_SIZE, STACK_FRAME};
use crate::insn::*;
use crate::MapRef;

/// The kernel's rules for arithmetic on pointers
/// (`adjust_ptr_min_max_vals`, as for a privileged loader): a pointer
/// moves by adding or subtracting a scalar in 64 bits; two pointers may
/// only be subtracted; a 32-bit operation on a pointer may only be a
/// subtraction (a scalar results); nothing moves a map pointer or
/// data_end but by a known 0; bitwise and other operators
/// on a pointer are refused. `NEG`, `END` and `MOV` are not arithmetic
/// here (the kernel lets a privileged loader make scalars of pointers).
/// Only what is refused whatever the other operand is: a register this
/// verifier takes for a scalar may be a pointer the kernel tracks (one
/// filled from the stack), so a subtraction of a register is allowed.
pub(super) fn pointer_alu(pc: usize, i: &Insn, st: &State) -> Result<()> {
    let op = i.op();
    if matches!(op, BPF_MOV | BPF_NEG | BPF_END) {
        return Ok(());
    }
    let (d, s) = (i.dst as usize, i.src as usize);
    let dp = st.pointer(d);
    let sp = i.code & BPF_X != 0 && st.pointer(s);
    if !dp && !sp {
        return Ok(());
    }
    if i.class() == BPF_ALU64 && matches!(op, BPF_ADD | BPF_SUB) && !sp && amount(i, st) == Some(0)
    {
        // Moved by a known 0: the kernel allows it on any pointer.
        return Ok(());
    }
    let name = |op: u8| match op {
        BPF_ADD => "+=",
        BPF_SUB => "-=",
        BPF_MUL => "*=",
        BPF_DIV => "/=",
        BPF_OR => "|=",
        BPF_AND => "&=",
        BPF_LSH => "<<=",
        BPF_RSH => ">>=",
        BPF_MOD => "%=",
        BPF_XOR => "^=",
        BPF_ARSH => "s>>=",
        _ => "?",
    };
    let refuse = |what: String| err(pc, format!("{what} (the kernel refuses it)"));
    if i.class() == BPF_ALU {
        if op == BPF_SUB {
            return Ok(());
        }
        return refuse(format!("32-bit pointer arithmetic ({})", name(op)));
    }
    if dp && sp {
        if op == BPF_SUB {
            return Ok(());
        }
        return refuse(format!("pointer {} pointer", name(op)));
    }
    if op == BPF_SUB && i.code & BPF_X != 0 {
        // The other may be a pointer the verifier does not track (filled
        // from the stack): pointer - pointer is a scalar, allowed.
        return Ok(());
    }
    let r = if dp { d } else { s };
    let t = st.ty[r];
    // (A map value that may be null of which this verifier lost a copy,
    // whose null check the kernel applies to it, is left to the run-time
    // check: `State::escaped`.)
    if t & KIND == NULLABLE && !st.escaped(r) {
        return err(
            pc,
            format!(
                "pointer arithmetic ({}) on r{r}, a map value that may be null (the kernel \
                 refuses it: pointer arithmetic on map_value_or_null prohibited, null-check it \
                 first)",
                name(op)
            ),
        );
    }
    let kind = match t & KIND {
        MAP | MAPS => Some("a map pointer"),
        RING_NULL => Some("a record that may be null"),
        RING_GONE => Some("a record submitted or discarded"),
        PKT_END => Some("data_end"),
        _ => None,
    };
    if let Some(k) = kind {
        return refuse(format!("pointer arithmetic on {k}"));
    }
    match op {
        BPF_ADD | BPF_SUB => Ok(()),
        BPF_AND | BPF_OR | BPF_XOR => refuse(format!("bitwise {} on a pointer", name(op))),
        _ => refuse(format!("{} on a pointer", name(op))),
    }
}

/// The kernel's argument types of the helpers a program's first argument
/// names a map or the context for (`bpf_func_proto`), where the
/// verifier knows the register's type: a known pointer of another kind
/// is refused (an untracked register, one filled from the stack, is
/// checked at run time). The packet helpers' length may not be 0
/// (`ARG_CONST_SIZE`).
pub(super) fn helper_args(pc: usize, id: u32, st: &State, maps: &[MapRef]) -> Result<()> {
    let map_arg = matches!(
        id,
        helper::MAP_LOOKUP_ELEM
            | helper::MAP_UPDATE_ELEM
            | helper::MAP_DELETE_ELEM
            | helper::REDIRECT_MAP
    );
    // bpf_tail_call, bpf_perf_event_output, bpf_xdp_adjust_head, _meta,
    // _tail, bpf_xdp_get_buff_len, bpf_xdp_load_bytes,
    // bpf_xdp_store_bytes.
    let ctx_arg = matches!(id, 12 | 25 | 44 | 54 | 65 | 188 | 189 | 190);
    let name = helper::name(id).unwrap_or("helper");
    let kind = |t: u32| match t & KIND {
        MAP => "a map",
        MAPS => "one of several maps",
        RING | RING_NULL | RING_GONE => "a record of bpf_ringbuf_reserve",
        NULLABLE => "a map value that may be null",
        VALUE | CONST => "a map value",
        PKT => "a packet pointer",
        PKT_END => "data_end",
        STACK => "a stack pointer",
        CTX_OFF => "a moved context pointer",
        _ if t == CTX_MOD => "a moved context pointer",
        _ if t == CTX => "the context",
        _ => "a scalar",
    };
    if let Some(r) = (1..6).find(|&r| st.ty[r] & KIND == RING_GONE) {
        return err(
            pc,
            format!(
                "bpf_{name}'s r{r} is a record submitted or discarded already (the kernel \
                 refuses it)"
            ),
        );
    }
    let t = st.ty[1];
    // The register a helper takes its map in (bpf_tail_call,
    // bpf_perf_event_output: the second; the others the first).
    let (mr, what) = match id {
        helper::TAIL_CALL | helper::PERF_EVENT_OUTPUT => (2, "second"),
        _ => (1, "first"),
    };
    let takes_map = map_arg
        || matches!(
            id,
            helper::TAIL_CALL
                | helper::PERF_EVENT_OUTPUT
                | helper::RINGBUF_OUTPUT
                | helper::RINGBUF_RESERVE
                | helper::RINGBUF_QUERY
        );
    // The map's type against the helper's (a prog array for
    // bpf_tail_call alone, a ring buffer for the bpf_ringbuf_* helpers
    // alone...).
    if takes_map {
        // Every map the register may hold (a set where paths joined).
        let set = map_set(st.ty[mr]).unwrap_or(0);
        for (_, m) in maps
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 24 && set & (1 << i) != 0)
        {
            if let Err(e) = crate::maps::map_fits(id, m.map_type) {
                let e = if st.ty[mr] & KIND == MAPS {
                    format!("{e}; the map is one of several, by the path that reaches here")
                } else {
                    e
                };
                return err(pc, e);
            }
        }
    }
    // A known number is no map (an untracked register, filled from the
    // stack, is checked at run time).
    if takes_map && st.known(mr).is_some() {
        return err(
            pc,
            format!(
                "bpf_{name}'s {what} argument must be a map, not a number (the kernel refuses it)"
            ),
        );
    }
    if takes_map && !map_arg && st.pointer(mr) && map_set(st.ty[mr]).is_none() {
        return err(
            pc,
            format!(
                "bpf_{name}'s {what} argument must be a map, not {} (the kernel refuses it)",
                kind(st.ty[mr])
            ),
        );
    }
    if map_arg && st.pointer(1) && map_set(t).is_none() {
        return err(
            pc,
            format!(
                "bpf_{name}'s first argument must be a map, not {} (the kernel refuses it)",
                kind(t)
            ),
        );
    }
    if ctx_arg && st.pointer(1) && t != CTX {
        return err(
            pc,
            format!(
                "bpf_{name}'s first argument must be the context, not {} (the kernel refuses it)",
                kind(t)
            ),
        );
    }
    if matches!(id, 189 | 190) && st.ty[4] == OTHER && st.bound(4) == 0 {
        return err(
            pc,
            format!("bpf_{name} of 0 bytes (the kernel refuses a zero-sized access)"),
        );
    }
    flag_args(pc, id, st, maps)?;
    stack_args(pc, id, st, maps)
}

/// Why the kernel refuses a program access to map `m`'s values that
/// reads (`read`) or writes (`write`) them, if it does: the map's
/// `BPF_F_RDONLY_PROG` or `BPF_F_WRONLY_PROG` (`check_map_access_type`).
fn map_forbids(m: &MapRef, read: bool, write: bool) -> Option<String> {
    if write && m.flags & crate::BPF_F_RDONLY_PROG != 0 {
        Some(
            "write into map forbidden (the kernel refuses it: the map's BPF_F_RDONLY_PROG lets \
             the program only read it)"
                .into(),
        )
    } else if read && m.flags & crate::BPF_F_WRONLY_PROG != 0 {
        Some(
            "read from map forbidden (the kernel refuses it: the map's BPF_F_WRONLY_PROG lets \
             the program only write it)"
                .into(),
        )
    } else {
        None
    }
}

/// A map a program may only read (`BPF_F_RDONLY_PROG`) given to
/// `bpf_map_update_elem` or `_delete_elem`, and a helper's memory
/// argument in the value of a map the program may not read or write as
/// the helper would (`bpf_xdp_load_bytes` writes its buffer, the others
/// read theirs): refused, as the kernel refuses them.
fn flag_args(pc: usize, id: u32, st: &State, maps: &[MapRef]) -> Result<()> {
    let name = helper::name(id).unwrap_or("helper");
    if matches!(id, helper::MAP_UPDATE_ELEM | helper::MAP_DELETE_ELEM) {
        let set = map_set(st.ty[1]).unwrap_or(0);
        for (_, m) in maps
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < 24 && set & (1 << i) != 0)
        {
            if let Some(e) = map_forbids(m, false, true) {
                return err(pc, format!("bpf_{name}: {e}"));
            }
        }
    }
    // The registers a helper reads memory through, and writes.
    let (reads, writes): (&[usize], &[usize]) = match id {
        helper::MAP_LOOKUP_ELEM | helper::MAP_DELETE_ELEM => (&[2], &[]),
        helper::MAP_UPDATE_ELEM => (&[2, 3], &[]),
        helper::CSUM_DIFF => (&[1, 3], &[]),
        helper::TRACE_PRINTK => (&[1], &[]),
        helper::PERF_EVENT_OUTPUT => (&[4], &[]),
        helper::RINGBUF_OUTPUT => (&[2], &[]),
        189 => (&[], &[3]),
        190 => (&[3], &[]),
        _ => (&[], &[]),
    };
    let args = reads.iter().map(|&r| (r, false));
    for (r, write) in args.chain(writes.iter().map(|&r| (r, true))) {
        if st.ty[r] & KIND != VALUE {
            continue;
        }
        if let Some(e) = maps
            .get(value_at(st.ty[r]).0)
            .and_then(|m| map_forbids(m, !write, write))
        {
            return err(pc, format!("bpf_{name}'s r{r} is a map value: {e}"));
        }
    }
    Ok(())
}

/// A helper's memory argument on the stack (`r10 - k`, tracked) with a
/// size known here runs no higher than `r10`: the kernel checks the
/// bytes a helper reads or writes lie in the function's frame
/// (`check_helper_mem_access`); the run-time check would allow the
/// callers' frames above it.
fn stack_args(pc: usize, id: u32, st: &State, maps: &[MapRef]) -> Result<()> {
    for (r, size, what) in mem_args(id, st, maps).into_iter().flatten() {
        let t = st.ty[r];
        let depth = t & !KIND;
        if t & KIND == STACK && size > depth {
            let name = helper::name(id).unwrap_or("helper");
            return err(
                pc,
                format!(
                    "bpf_{name}'s {what} (r{r}: {size} bytes at r10-{depth}) runs past the top \
                     of the function's stack frame (the kernel refuses it)"
                ),
            );
        }
    }
    Ok(())
}

/// A helper's memory arguments of a size known here, as the kernel's
/// `bpf_func_proto`s give them (a map's key and value; a buffer and its
/// constant length): the pointer's register, its size, what it is.
pub(super) fn mem_args(
    id: u32,
    st: &State,
    maps: &[MapRef],
) -> [Option<(usize, u32, &'static str)>; 2] {
    let map = map_set(st.ty[1])
        .filter(|s| s.count_ones() == 1)
        .and_then(|s| maps.get(s.trailing_zeros() as usize));
    let (key, value) = (map.map(|m| m.key_size), map.map(|m| m.value_size));
    let len = |r: usize| st.known(r).and_then(|v| u32::try_from(v).ok());
    match id {
        helper::MAP_LOOKUP_ELEM | helper::MAP_DELETE_ELEM => [key.map(|k| (2, k, "key")), None],
        helper::MAP_UPDATE_ELEM => [key.map(|k| (2, k, "key")), value.map(|v| (3, v, "value"))],
        helper::CSUM_DIFF => [len(2).map(|n| (1, n, "from")), len(4).map(|n| (3, n, "to"))],
        helper::TRACE_PRINTK => [len(2).map(|n| (1, n, "format")), None],
        helper::PERF_EVENT_OUTPUT => [len(5).map(|n| (4, n, "data")), None],
        helper::RINGBUF_OUTPUT => [len(3).map(|n| (2, n, "data")), None],
        189 | 190 => [len(4).map(|n| (3, n, "buffer")), None],
        _ => [None, None],
    }
}

/// The kernel's rules for records of `bpf_ringbuf_reserve` given to a
/// helper (of the registers `reads` names): one argument at most holds
/// a record; a record is checked for null first; the bytes a helper
/// reads or writes at a record lie in it. The message of the first
/// broken, if any (refused path by path: `Flow::path_rule`).
pub(super) fn ring_args(id: u32, st: &State, maps: &[MapRef], reads: u16) -> Option<String> {
    let name = helper::name(id).unwrap_or("helper");
    let record = |r: usize| reads & (1 << r) != 0 && matches!(st.ty[r] & KIND, RING | RING_NULL);
    let held: Vec<usize> = (1..6).filter(|&r| record(r)).collect();
    if held.len() > 1 {
        return Some(format!(
            "bpf_{name} given records of bpf_ringbuf_reserve in r{} and r{} (the kernel refuses \
             more than one argument holding a reference)",
            held[0], held[1]
        ));
    }
    let releases = matches!(id, helper::RINGBUF_SUBMIT | helper::RINGBUF_DISCARD);
    let &r = held.first()?;
    if st.ty[r] & KIND == RING_NULL && !releases {
        return Some(format!(
            "bpf_{name}'s r{r} is a record that may be null (the kernel refuses it: check it first)"
        ));
    }
    let (_, size, _) = mem_args(id, st, maps)
        .into_iter()
        .flatten()
        .find(|a| a.0 == r)?;
    let (at, mem) = (ring_off(st.ty[r]), st.hi[r]);
    (at < 0 || (at + i64::from(size)) as u64 > mem).then(|| {
        format!(
            "bpf_{name}'s r{r}: {size} bytes at offset {at} of a record of {mem} bytes (outside \
             it: the kernel refuses it)"
        )
    })
}

impl Flow<'_> {
    /// How the load or store at `pc` is made, in its final state `st`.
    pub(super) fn access(&self, pc: usize, st: &State) -> Result<Access> {
        let i = &self.insns[pc];
        let (off, size) = (i.off as i64, i.size() as i64);
        let Some(base) = access_base(i) else {
            return Ok(Access::Checked);
        };
        let ty = st.ty[base];
        if let (Some(at), true) = (st.stack_at(base, i.off), self.kernel_rules) {
            // r10 - k + off: in the function's frame, as the kernel
            // checks it (`check_stack_access_within_bounds`); the
            // run-time check would allow the callers' frames above it.
            // (r10's own offsets are checked with the instruction.)
            if at < -(STACK_FRAME as i64) || at + size > 0 {
                return err(
                    pc,
                    format!(
                        "stack access of {size} bytes at r10{at:+} is outside the function's \
                         frame of {STACK_FRAME} bytes (the kernel refuses it)"
                    ),
                );
            }
            // The kernel spills and fills a pointer whole
            // (`check_stack_write_fixed_off`, `check_stack_read_fixed_off`).
            let spilled = st.spilled & State::slots(at, size);
            if i.class() == BPF_LDX && size < 8 && spilled != 0 {
                return err(
                    pc,
                    format!(
                        "a {size}-byte load of the pointer spilled at r10-{} (the kernel \
                         refuses a partial fill of a spilled pointer)",
                        8 * (spilled.trailing_zeros() + 1)
                    ),
                );
            }
            if i.class() == BPF_STX && size < 8 && st.pointer(i.src as usize) {
                return err(
                    pc,
                    format!(
                        "a pointer stored in {size} bytes of the stack at r10{at:+} (the \
                         kernel spills a pointer whole, 8 bytes)"
                    ),
                );
            }
        }
        if base == 10 {
            return Ok(Access::Checked);
        }
        if let (Some(v @ 0..0x10000), true) = (st.known(base), self.kernel_rules) {
            // A number (a constant, or what a jump proved of a register):
            // no pointer the kernel tracks is one, and no address here is
            // below 64 KiB.
            return err(
                pc,
                format!(
                    "dereference of a number (r{base} is {v} here), not a pointer (the kernel \
                     refuses it: invalid mem access 'scalar')"
                ),
            );
        }
        if matches!(ty & KIND, RING | RING_NULL | RING_GONE) && self.kernel_rules {
            self.record_access(pc, st)?;
        }
        if (ty == CTX_MOD || ty & KIND == CTX_OFF) && self.kernel_rules {
            return err(
                pc,
                "dereference of a modified context pointer (the kernel refuses it: read \
                 struct xdp_md's fields through the pointer as the program was given it)",
            );
        }
        if ty & KIND == PKT_GONE && self.kernel_rules {
            self.packet_rule(pc, st)?;
        }
        if ty & KIND == CONST && i.class() != BPF_LDX && self.kernel_rules {
            // Global data the program may only read (a frozen `.rodata`).
            let m = ((ty & !KIND) >> 20) as usize;
            if let Some(d) = self.maps.get(m).and_then(|m| m.direct) {
                if !d.writable {
                    let at = i64::from(ty & CONST_OFF) + off;
                    return err(
                        pc,
                        format!(
                            "a {size}-byte store at offset {at} of read-only global data (the \
                             kernel refuses it: write into map forbidden; `const volatile` \
                             settings are set by the loader, `map .rodata ...` in the config)"
                        ),
                    );
                }
            }
        }
        if ty & KIND == VALUE && self.kernel_rules {
            let m = self.maps.get(value_at(ty).0);
            let (read, write) = match i.class() {
                BPF_LDX => (true, false),
                _ if i.code & 0xe0 == BPF_ATOMIC => (true, true),
                _ => (false, true),
            };
            if let Some(e) = m.and_then(|m| map_forbids(m, read, write)) {
                let what = if write { "store into" } else { "load from" };
                return err(pc, format!("a {what} a map value ({size} bytes): {e}"));
            }
        }
        // (Not one the kernel may know is not null, `ELIDABLE`: an
        // ARRAY's or PERCPU_ARRAY's lookup of a constant key inside it
        // (Linux 6.14), left to the run-time check.)
        if ty & KIND == NULLABLE && self.kernel_rules && ty & ELIDABLE == 0 && !st.escaped(base) {
            let array = self
                .maps
                .get((ty & !KIND) as usize)
                .is_some_and(|m| matches!(m.map_type, 2 | 6));
            let hint = if array {
                ", or key the array with a constant inside it the kernel sees: four bytes \
                 stored as 0, or stored as 4 bytes at the start of an 8-byte stack slot"
            } else {
                ""
            };
            return err(
                pc,
                format!(
                    "dereference of r{base}, a map value that may be null (the kernel refuses \
                     it: invalid mem access 'map_value_or_null'; compare what \
                     bpf_map_lookup_elem returned with NULL first{hint})"
                ),
            );
        }
        if ty & KIND == PKT_END && self.kernel_rules {
            return err(
                pc,
                "dereference of data_end (the packet's end, not its bytes)",
            );
        }
        if self.kernel_rules
            && i.code & 0xe0 == BPF_ATOMIC
            && matches!(ty & KIND, PKT | MAP | CONST)
        {
            return err(
                pc,
                "an atomic operation on the packet or a map pointer (the kernel allows them on \
                 the stack and in map values only)",
            );
        }
        if ty == CTX {
            if i.class() != BPF_LDX {
                return err(pc, "store into the context (struct xdp_md is read-only)");
            }
            // As the kernel's `xdp_is_valid_access`: whole 4-byte fields,
            // and not `egress_ifindex` (offset 20), which only a program
            // of a devmap's entries may read.
            let sx = i.code & 0xe0 == BPF_MEMSX;
            let pointer = matches!(off, 0 | 4 | 8) && !sx;
            let field = pointer || matches!(off, 12 | 16);
            if size != 4 || !field || off + size > CTX_SIZE as i64 {
                let why = if off == 20 && size == 4 {
                    "egress_ifindex, which only a program of a devmap's entries (SEC \"xdp/devmap\") reads"
                } else {
                    "its fields are read whole, 4 bytes at a time"
                };
                return err(
                    pc,
                    format!(
                        "invalid access to the context: {size} bytes at offset {off} of struct \
                         xdp_md ({why})"
                    ),
                );
            }
            return Ok(Access::Ctx);
        }
        if ty & KIND == PKT && i.code & 0xe0 != BPF_ATOMIC {
            // Inside the bytes a comparison with data_end proved there.
            let start = (ty & !KIND) as i64 + off;
            if start >= 0 && start + size <= st.limit(base) as i64 {
                return Ok(Access::Packet);
            }
            if self.kernel_rules {
                self.packet_rule(pc, st)?;
            }
        } else if ty & KIND == VALUE {
            // A map value (its helper returned value_size bytes,
            // 8-aligned): inside it, at the value's start, no run-time
            // check; elsewhere, the run-time check.
            let (m, at) = value_at(ty);
            let value_size = self.maps.get(m).map_or(0, |m| m.value_size as i64);
            let (lo, var) = (at as i64 + off, i64::from(st.vmax[base]));
            let inside = lo >= 0 && lo + var + size <= value_size;
            let atomic = i.code & 0xe0 == BPF_ATOMIC;
            let inline_atomic =
                !atomic || (i.imm & !BPF_FETCH == BPF_ADD as i32 && off % size == 0);
            if inside && at == 0 && var == 0 && inline_atomic {
                return Ok(Access::Value);
            }
            if !inside && self.kernel_rules && value_size > 0 && var == 0 {
                // The kernel's "invalid access to map value": the value
                // is all the program was handed (the run-time check
                // would allow the map's other values).
                return err(
                    pc,
                    format!(
                        "access of {size} bytes at offset {lo} of a map value of {value_size} \
                         bytes (outside it)"
                    ),
                );
            }
            if self.kernel_rules {
                self.var_offset_rule(pc, st)?;
            }
        } else if ty & KIND == STACK_VAR && self.kernel_rules {
            self.var_offset_rule(pc, st)?;
        }
        Ok(Access::Checked)
    }
}

impl Flow<'_> {
    /// A load or store at `pc` through a record of `bpf_ringbuf_reserve`:
    /// refused where the kernel refuses it (released; null, or outside
    /// the record, decided path by path where paths met:
    /// `Flow::path_rule`); inside it, checked at run time as any other.
    pub(super) fn record_access(&self, pc: usize, st: &State) -> Result<()> {
        let i = &self.insns[pc];
        let Some(base) = access_base(i) else {
            return Ok(());
        };
        let (ty, off, size) = (st.ty[base], i64::from(i.off), i.size() as i64);
        match ty & KIND {
            RING_NULL => self.path_rule(
                pc,
                "access through a record of bpf_ringbuf_reserve that may be null (the kernel \
                 refuses it: check it first)",
            ),
            RING_GONE => err(
                pc,
                "access through a record already submitted or discarded (the kernel refuses \
                 it: invalid mem access after a release)",
            ),
            RING => {
                let (at, mem) = (ring_off(ty) + off, st.hi[base]);
                if at < 0 || (at + size) as u64 > mem {
                    return self.path_rule(
                        pc,
                        format!(
                            "access of {size} bytes at offset {at} of a record of {mem} bytes \
                             (outside it: the kernel refuses it)"
                        ),
                    );
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// The known amount an `ADD`/`SUB` at `i` moves its destination by: the
/// immediate, or the source register's exact value.
pub(super) fn amount(i: &Insn, st: &State) -> Option<u64> {
    if i.code & BPF_X == 0 {
        Some(i.imm as i64 as u64)
    } else {
        st.known(i.src as usize)
    }
}
