//! CO-RE relocations (`.BTF.ext`'s `core_relo` records), as libbpf
//! applies them for the one kernel type an XDP program can reach: its
//! context.
//!
//! clang compiles every access it marks for CO-RE (`vmlinux.h` marks every
//! struct) with the value for the types it was compiled against, and
//! records where; libbpf then rewrites each against the running kernel's
//! BTF. In pfil an XDP program reaches three kinds of memory: its context
//! (`struct xdp_md`, pfil's own layout: relocated here by field name, as
//! libbpf would against a kernel with that layout), the packet (wire
//! formats: `ethhdr`, `iphdr`, ... have the same layout in every kernel, so
//! the compiled value is the answer) and its maps and stack (its own
//! types). A kernel-internal struct is reached only through helpers and
//! kfuncs pfil refuses by name, so the compiled values stand for the rest,
//! except `bpf_core_type_id_kernel` (a kernel BTF id pfil has none of),
//! which is refused.
//!
//! Only the relocations in the code a program links (its own function and
//! `.text`) are applied or refused: an object's other programs (the
//! `tp_btf` tracepoints beside xdp-bench's XDP programs) are not pfil's.

use crate::btf::Btf;
use crate::elf::Elf;
use crate::LoadError;

/// `bpf_core_relo_kind`: the field's byte offset.
const FIELD_BYTE_OFFSET: u32 = 0;
/// The field's size.
const FIELD_BYTE_SIZE: u32 = 1;
/// Whether the field exists.
const FIELD_EXISTS: u32 = 2;
/// The target's BTF type id (`bpf_core_type_id_kernel`).
const TYPE_ID_TARGET: u32 = 7;

/// The last relocation kind libbpf knows (`BPF_CORE_TYPE_MATCHES`).
const LAST_KIND: u32 = 12;

/// pfil's `struct xdp_md`: each field's name and byte offset (4 bytes
/// each), as the UAPI header has them.
const XDP_MD: [(&str, i32); 6] = [
    ("data", 0),
    ("data_end", 4),
    ("data_meta", 8),
    ("ingress_ifindex", 12),
    ("rx_queue_index", 16),
    ("egress_ifindex", 20),
];

/// One `bpf_core_relo` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relo {
    /// The ELF section of the instruction.
    sec: String,
    /// The instruction's byte offset in `sec`.
    insn_off: usize,
    /// The root type.
    type_id: u32,
    /// The access string (`0:1:3`: member indices from the root).
    access: String,
    /// `bpf_core_relo_kind`.
    kind: u32,
}

/// The object's CO-RE relocations (none without `.BTF.ext` or its
/// `core_relo` part).
///
/// # Errors
/// A truncated or inconsistent `.BTF.ext`, or records without `.BTF`.
pub(crate) fn parse(elf: &Elf<'_>, btf: Option<&Btf>) -> Result<Vec<Relo>, LoadError> {
    let Some(s) = elf.section(".BTF.ext") else {
        return Ok(Vec::new());
    };
    let d = elf.bytes_of(s)?;
    let bad = |what: &str| LoadError::Btf(format!(".BTF.ext: {what}"));
    let rd = |o: usize| {
        o.checked_add(4)
            .and_then(|e| d.get(o..e))
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| bad(&format!("record at {o} is truncated")))
    };
    // btf_ext_header: magic u16, version u8, flags u8, hdr_len u32,
    // func_info off/len, line_info off/len, then (hdr_len >= 32)
    // core_relo off/len, all from the end of the header.
    let hdr_len = rd(4)? as usize;
    if hdr_len < 32 {
        return Ok(Vec::new());
    }
    let (off, len) = (rd(24)? as usize, rd(28)? as usize);
    if len == 0 {
        return Ok(Vec::new());
    }
    let btf = btf.ok_or_else(|| bad("CO-RE relocations without .BTF"))?;
    let start = hdr_len
        .checked_add(off)
        .ok_or_else(|| bad("core_relo offset overflows"))?;
    let end = start
        .checked_add(len)
        .filter(|&e| e <= d.len())
        .ok_or_else(|| bad("core_relo lies outside the section"))?;
    let rec = rd(start)? as usize;
    if rec < 16 {
        return Err(bad(&format!("core_relo record size {rec} (< 16)")));
    }
    let mut out = Vec::new();
    let mut p = start + 4;
    while p < end {
        let sec = btf.string(rd(p)?)?;
        let n = rd(p + 4)? as usize;
        p += 8;
        let body = n
            .checked_mul(rec)
            .and_then(|b| p.checked_add(b))
            .filter(|&e| e <= end)
            .ok_or_else(|| bad(&format!("{n} relocations of {sec:?} run past the end")))?;
        for q in (p..body).step_by(rec) {
            out.push(Relo {
                sec: sec.clone(),
                insn_off: rd(q)? as usize,
                type_id: rd(q + 4)?,
                access: btf.string(rd(q + 8)?)?,
                kind: rd(q + 12)?,
            });
        }
        p = body;
    }
    Ok(out)
}

/// Apply the relocations of code section `sec` whose instructions lie in
/// `range` (byte offsets in `sec`) to `insns`, where byte `range.start`
/// of `sec` is slot `base`. `prog` names the program in errors.
///
/// # Errors
/// A relocation pfil cannot answer (named), or one that points outside
/// the code or at an instruction it cannot rewrite.
pub(crate) fn apply(
    relos: &[Relo],
    btf: Option<&Btf>,
    (sec, range): (&str, std::ops::Range<usize>),
    base: usize,
    insns: &mut [u8],
    prog: &str,
) -> Result<(), LoadError> {
    for r in relos
        .iter()
        .filter(|r| r.sec == sec && range.contains(&r.insn_off))
    {
        let Some(btf) = btf else {
            return Err(LoadError::Malformed(
                "CO-RE relocations without .BTF".into(),
            ));
        };
        let here = || format!("CO-RE relocation at {sec} + {:#x} in {prog:?}", r.insn_off);
        if r.insn_off % 8 != 0 {
            return Err(LoadError::Malformed(format!(
                "{}: not on an instruction",
                here()
            )));
        }
        let slot = base + (r.insn_off - range.start) / 8;
        if slot * 8 + 8 > insns.len() {
            return Err(LoadError::Malformed(format!(
                "{}: outside the code",
                here()
            )));
        }
        if r.kind > LAST_KIND {
            return Err(LoadError::Unsupported(format!(
                "{}: relocation kind {}",
                here(),
                r.kind
            )));
        }
        if r.kind == TYPE_ID_TARGET {
            return Err(LoadError::Unsupported(format!(
                "{}: the kernel's BTF id of {:?} (bpf_core_type_id_kernel): pfil has no kernel types",
                here(),
                btf.name_of(r.type_id)?
            )));
        }
        // The context: a field of `struct xdp_md`, named by its index.
        let Some(("xdp_md", members)) = btf.record(r.type_id)? else {
            continue;
        };
        if !matches!(r.kind, FIELD_BYTE_OFFSET | FIELD_BYTE_SIZE | FIELD_EXISTS) {
            continue;
        }
        let field = match r.access.split(':').collect::<Vec<_>>().as_slice() {
            ["0", i] => i
                .parse::<usize>()
                .ok()
                .and_then(|i| members.get(i).copied()),
            _ => None,
        }
        .ok_or_else(|| {
            LoadError::Unsupported(format!(
                "{}: access {:?} into struct xdp_md (a field of it is all pfil relocates)",
                here(),
                r.access
            ))
        })?;
        let ours = XDP_MD.iter().find(|(n, _)| *n == field).map(|&(_, o)| o);
        let value = match (r.kind, ours) {
            (FIELD_EXISTS, o) => i32::from(o.is_some()),
            (FIELD_BYTE_SIZE, Some(_)) => 4,
            (_, Some(o)) => o,
            (_, None) => {
                return Err(LoadError::Unsupported(format!(
                    "{}: struct xdp_md has no field {field:?} in pfil",
                    here()
                )))
            }
        };
        patch(insns, slot, r.kind, value)
            .map_err(|what| LoadError::Malformed(format!("{}: {what}", here())))?;
    }
    Ok(())
}

/// Write `value` where libbpf would: a load's or store's offset for a
/// field's offset, else the immediate.
fn patch(insns: &mut [u8], slot: usize, kind: u32, value: i32) -> Result<(), &'static str> {
    let i = &mut insns[slot * 8..slot * 8 + 8];
    let class = i[0] & 0x07;
    let mem = matches!(class, 0x01..=0x03); // LDX, ST, STX
    if kind == FIELD_BYTE_OFFSET && mem {
        let v = i16::try_from(value).map_err(|_| "offset out of range")?;
        i[2..4].copy_from_slice(&v.to_le_bytes());
        return Ok(());
    }
    // ALU and ALU64 with an immediate, or the low half of an LDDW.
    let alu_k = matches!(class, 0x04 | 0x07) && i[0] & 0x08 == 0;
    if alu_k || i[0] == crate::object::LDDW {
        i[4..8].copy_from_slice(&value.to_le_bytes());
        return Ok(());
    }
    Err("not an instruction a CO-RE relocation rewrites")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_gets_its_offset_and_an_alu_its_immediate() {
        // ldxw r2, [r1 + 99]; mov64 r3, 99
        let mut insns = [0x61, 0x12, 99, 0, 0, 0, 0, 0, 0xb7, 0x03, 0, 0, 99, 0, 0, 0];
        patch(&mut insns, 0, FIELD_BYTE_OFFSET, 16).unwrap();
        patch(&mut insns, 1, FIELD_BYTE_OFFSET, 16).unwrap();
        assert_eq!(insns[2..4], [16, 0]);
        assert_eq!(insns[12..16], [16, 0, 0, 0]);
        // A jump is not rewritten.
        let mut j = [0x05, 0, 1, 0, 0, 0, 0, 0];
        assert!(patch(&mut j, 0, FIELD_EXISTS, 1).is_err());
    }
}
