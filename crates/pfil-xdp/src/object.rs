//! A BPF object file turned into what a loader needs: its maps (legacy,
//! BTF-defined, global data) and its XDP programs, each linked into one
//! instruction stream with the `.text` subprograms it calls and its map
//! references relocated to map indices (see [`Program::insns`]).

use crate::btf::{Btf, MapField};
use crate::elf::{Elf, Rel, Section, Symbol, SHF_EXECINSTR, STB_GLOBAL, STT_FUNC, STT_SECTION};
use crate::maps::MapType;
use crate::LoadError;

/// `BPF_LD | BPF_IMM | BPF_DW`: the 16-byte load of a 64-bit immediate.
pub const LDDW: u8 = 0x18;
/// `BPF_JMP | BPF_CALL`.
pub const CALL: u8 = 0x85;
/// `src` of an LDDW that loads a map (imm = map index after relocation).
pub const PSEUDO_MAP_FD: u8 = 1;
/// `src` of an LDDW that loads a pointer into a global-data map's value
/// (first imm = map index, second imm = offset).
pub const PSEUDO_MAP_VALUE: u8 = 2;
/// `src` of a CALL to a bpf-to-bpf subprogram (imm = relative pc).
pub const PSEUDO_CALL: u8 = 1;

const R_BPF_64_64: u32 = 1;
const R_BPF_64_32: u32 = 10;

/// Where a map definition came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapOrigin {
    /// A `struct bpf_map_def` in the legacy `maps` section.
    Legacy,
    /// A BTF-defined map in `.maps`.
    Btf,
    /// A global-data section (`.data`, `.rodata`, `.bss`, `.rodata.*`,
    /// `.data.*`) as a single-entry ARRAY.
    Global,
}

/// One map of the object, as defined (nothing allocated yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDef {
    /// The variable's name, or the section name for global data.
    pub name: String,
    /// The map type.
    pub kind: MapType,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes.
    pub value_size: u32,
    /// Maximum number of entries.
    pub max_entries: u32,
    /// `map_flags`.
    pub flags: u32,
    /// Where it was defined.
    pub origin: MapOrigin,
    /// Initial value of a global-data map (zeroes for `.bss`).
    pub init: Option<Vec<u8>>,
    /// Programs may not write it (`.rodata*`).
    pub readonly: bool,
    /// Offset of the definition in its section (relocations name it).
    pub(crate) sym_off: u64,
    /// Index of the section that defines it.
    pub(crate) section: usize,
}

/// One XDP program of the object, linked and relocated.
#[derive(Debug, Clone)]
pub struct Program {
    /// The function's name.
    pub name: String,
    /// The section it was in (`xdp`, `xdp/NAME`, `xdp.frags`).
    pub section: String,
    /// Instructions as 8-byte little-endian slots, the program's own
    /// followed by `.text` when it calls a subprogram. LDDWs that load a
    /// map have `src` [`PSEUDO_MAP_FD`] and imm = index into
    /// [`Object::maps`]; those that load global data have `src`
    /// [`PSEUDO_MAP_VALUE`], imm = map index and the second slot's imm =
    /// offset; bpf-to-bpf calls have their relative imm fixed.
    pub insns: Vec<u8>,
    /// Whether the section asked for multi-buffer (`xdp.frags`).
    pub frags: bool,
}

/// A parsed BPF object.
#[derive(Debug, Clone)]
pub struct Object {
    /// The `license` section's string.
    pub license: String,
    /// Every map of the object, in index order.
    pub maps: Vec<MapDef>,
    /// Every XDP program.
    pub programs: Vec<Program>,
}

fn is_xdp_section(name: &str) -> bool {
    name == "xdp"
        || name == "xdp.frags"
        || name.starts_with("xdp/")
        || name.starts_with("xdp.frags/")
}

fn is_global_data(name: &str) -> bool {
    matches!(name, ".data" | ".rodata" | ".bss")
        || name.starts_with(".rodata.")
        || name.starts_with(".data.")
}

fn set_imm(insns: &mut [u8], slot: usize, imm: i32) {
    insns[slot * 8 + 4..slot * 8 + 8].copy_from_slice(&imm.to_le_bytes());
}
fn imm_of(insns: &[u8], slot: usize) -> i32 {
    i32::from_le_bytes([
        insns[slot * 8 + 4],
        insns[slot * 8 + 5],
        insns[slot * 8 + 6],
        insns[slot * 8 + 7],
    ])
}
fn set_src(insns: &mut [u8], slot: usize, src: u8) {
    insns[slot * 8 + 1] = (insns[slot * 8 + 1] & 0x0f) | (src << 4);
}

impl Object {
    /// Parse `data`, a clang `-target bpf` object.
    ///
    /// # Errors
    /// A malformed file, an unsupported map type or relocation, a CO-RE
    /// relocation, a non-GPL-compatible... anything the loader cannot do
    /// exactly as libbpf would, named.
    pub fn parse(data: &[u8]) -> Result<Object, LoadError> {
        let elf = Elf::parse(data)?;
        if let Some(s) = elf.has_rela() {
            return Err(LoadError::Unsupported(format!("RELA section {:?}", s.name)));
        }
        let license = match elf.section("license") {
            Some(s) => {
                let b = elf.bytes_of(s)?;
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                String::from_utf8_lossy(&b[..end]).into_owned()
            }
            None => String::new(),
        };
        let btf = match elf.section(".BTF") {
            Some(s) => Some(Btf::parse(elf.bytes_of(s)?)?),
            None => None,
        };
        check_btf_ext(&elf)?;
        let mut maps = Vec::new();
        legacy_maps(&elf, &mut maps)?;
        btf_maps(&elf, btf.as_ref(), &mut maps)?;
        for s in elf
            .sections
            .iter()
            .filter(|s| is_global_data(&s.name) && s.size > 0)
        {
            if s.size > u32::MAX as usize {
                return Err(LoadError::Unsupported(format!(
                    "section {:?} larger than 4 GiB",
                    s.name
                )));
            }
            let init = if s.kind == crate::elf::SHT_NOBITS {
                vec![0; s.size]
            } else {
                elf.bytes_of(s)?.to_vec()
            };
            maps.push(MapDef {
                name: s.name.clone(),
                kind: MapType::Array,
                key_size: 4,
                value_size: s.size as u32,
                max_entries: 1,
                flags: 0,
                origin: MapOrigin::Global,
                init: Some(init),
                readonly: s.name.starts_with(".rodata"),
                sym_off: 0,
                section: s.index,
            });
        }
        let text = elf.section(".text").filter(|s| s.size > 0).cloned();
        let mut programs = Vec::new();
        for s in elf
            .sections
            .iter()
            .filter(|s| s.flags & SHF_EXECINSTR != 0 && s.name != ".text")
        {
            let funcs: Vec<&Symbol> = elf
                .symbols
                .iter()
                .filter(|y| {
                    y.shndx as usize == s.index && y.kind == STT_FUNC && y.bind == STB_GLOBAL
                })
                .collect();
            if !is_xdp_section(&s.name) {
                // Kept out rather than refused: an object may carry
                // programs of other kinds beside its XDP ones. Asking for
                // one by name says why it is missing (Object::program).
                continue;
            }
            for f in funcs {
                programs.push(link_program(&elf, s, f, text.as_ref(), &maps)?);
            }
        }
        Ok(Object {
            license,
            maps,
            programs,
        })
    }

    /// The program named `name`, or the only XDP program when `name` is
    /// `None`.
    ///
    /// # Errors
    /// No such program, or several and no name given.
    pub fn program(&self, name: Option<&str>) -> Result<&Program, LoadError> {
        match name {
            Some(n) => self.programs.iter().find(|p| p.name == n).ok_or_else(|| {
                LoadError::NoProgram(format!(
                    "no XDP program {n:?} (XDP programs: {})",
                    self.program_names()
                ))
            }),
            None => match self.programs.as_slice() {
                [p] => Ok(p),
                [] => Err(LoadError::NoProgram(
                    "no XDP program (no function in a section named xdp, xdp/*, xdp.frags)".into(),
                )),
                _ => Err(LoadError::NoProgram(format!(
                    "several XDP programs, name one with `program NAME`: {}",
                    self.program_names()
                ))),
            },
        }
    }

    fn program_names(&self) -> String {
        let v: Vec<&str> = self.programs.iter().map(|p| p.name.as_str()).collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }
}

fn check_btf_ext(elf: &Elf<'_>) -> Result<(), LoadError> {
    let Some(s) = elf.section(".BTF.ext") else {
        return Ok(());
    };
    let d = elf.bytes_of(s)?;
    // btf_ext_header: magic u16, version u8, flags u8, hdr_len u32,
    // func_info off/len, line_info off/len, then (if hdr_len >= 32)
    // core_relo off/len.
    let rd = |o: usize| {
        d.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if let (Some(hdr_len), Some(core_len)) = (rd(4), rd(28)) {
        if hdr_len >= 32 && core_len > 0 {
            return Err(LoadError::Unsupported(
                "CO-RE relocations (.BTF.ext core_relo): the object needs the kernel's type info"
                    .into(),
            ));
        }
    }
    Ok(())
}

fn legacy_maps(elf: &Elf<'_>, maps: &mut Vec<MapDef>) -> Result<(), LoadError> {
    let Some(sec) = elf.section("maps") else {
        return Ok(());
    };
    let bytes = elf.bytes_of(sec)?;
    let mut syms: Vec<&Symbol> = elf
        .symbols
        .iter()
        .filter(|y| y.shndx as usize == sec.index && y.kind != STT_SECTION)
        .collect();
    syms.sort_by_key(|y| y.value);
    if syms.is_empty() {
        return Ok(());
    }
    let def_size = bytes.len() / syms.len();
    if def_size < 20 || bytes.len() % syms.len() != 0 {
        return Err(LoadError::Map(format!(
            "legacy maps section: {} bytes for {} maps",
            bytes.len(),
            syms.len()
        )));
    }
    for y in syms {
        let off = y.value as usize;
        let def = bytes.get(off..off + def_size).ok_or_else(|| {
            LoadError::Map(format!("map {:?} lies outside the maps section", y.name))
        })?;
        let w = |i: usize| u32::from_le_bytes([def[i], def[i + 1], def[i + 2], def[i + 3]]);
        if def[20..].iter().any(|&b| b != 0) {
            return Err(LoadError::Unsupported(format!(
                "map {:?}: legacy map definition fields past map_flags (pinning, inner map)",
                y.name
            )));
        }
        maps.push(MapDef {
            name: y.name.clone(),
            kind: MapType::from_raw(w(0))
                .map_err(|e| LoadError::Map(format!("map {:?}: {e}", y.name)))?,
            key_size: w(4),
            value_size: w(8),
            max_entries: w(12),
            flags: w(16),
            origin: MapOrigin::Legacy,
            init: None,
            readonly: false,
            sym_off: y.value,
            section: sec.index,
        });
    }
    Ok(())
}

fn btf_maps(elf: &Elf<'_>, btf: Option<&Btf>, maps: &mut Vec<MapDef>) -> Result<(), LoadError> {
    let Some(sec) = elf.section(".maps") else {
        return Ok(());
    };
    let btf =
        btf.ok_or_else(|| LoadError::Btf("a .maps section needs .BTF (compile with -g)".into()))?;
    for (name, ty) in btf.datasec_vars(".maps")? {
        let sym = elf
            .symbols
            .iter()
            .find(|y| y.shndx as usize == sec.index && y.name == name)
            .ok_or_else(|| LoadError::Map(format!("map {name:?} has no symbol in .maps")))?;
        let mut def = MapDef {
            name: name.clone(),
            kind: MapType::Array,
            key_size: 0,
            value_size: 0,
            max_entries: 0,
            flags: 0,
            origin: MapOrigin::Btf,
            init: None,
            readonly: false,
            sym_off: sym.value,
            section: sec.index,
        };
        let mut kind = None;
        for (field, v) in btf.map_fields(ty)? {
            let n = match v {
                MapField::Uint(n) | MapField::Type(n) => n,
            };
            match (field.as_str(), &v) {
                ("type", MapField::Uint(_)) => kind = Some(n),
                ("key_size" | "key", _) => def.key_size = n,
                ("value_size" | "value", _) => def.value_size = n,
                ("max_entries", MapField::Uint(_)) => def.max_entries = n,
                ("map_flags", MapField::Uint(_)) => def.flags = n,
                ("numa_node", MapField::Uint(_)) => {}
                // LIBBPF_PIN_BY_NAME (xdp-filter sets it): pinning shares a
                // map through bpffs between loads; here a hook's maps live
                // with the hook and `pfilctl map` reaches them, so the
                // request is taken and has nothing to do.
                ("pinning", MapField::Uint(0 | 1)) => {}
                (f, _) => {
                    return Err(LoadError::Unsupported(format!(
                        "map {name:?}: BTF map field {f:?}"
                    )));
                }
            }
        }
        let kind = kind.ok_or_else(|| LoadError::Map(format!("map {name:?} has no type")))?;
        def.kind =
            MapType::from_raw(kind).map_err(|e| LoadError::Map(format!("map {name:?}: {e}")))?;
        maps.push(def);
    }
    Ok(())
}

fn link_program(
    elf: &Elf<'_>,
    sec: &Section,
    func: &Symbol,
    text: Option<&Section>,
    maps: &[MapDef],
) -> Result<Program, LoadError> {
    let bytes = elf.bytes_of(sec)?;
    let (start, size) = (func.value as usize, func.size as usize);
    let own = start
        .checked_add(size)
        .and_then(|e| bytes.get(start..e))
        .filter(|b| b.len() % 8 == 0 && !b.is_empty())
        .ok_or_else(|| {
            LoadError::Malformed(format!(
                "program {:?} lies outside section {:?}",
                func.name, sec.name
            ))
        })?;
    let mut insns = own.to_vec();
    let own_slots = insns.len() / 8;
    let mut rels: Vec<(usize, Rel, usize)> = Vec::new(); // (slot in insns, rel, section of code)
    for r in elf.relocations_for(sec.index)? {
        let off = r.offset as usize;
        if off >= start && off < start + size {
            rels.push(((off - start) / 8, r, sec.index));
        }
    }
    // Append .text when any relocation or call goes there.
    let mut text_base = None;
    let calls_text = rels.iter().any(|(_, r, _)| r.kind == R_BPF_64_32);
    if calls_text {
        let t = text.ok_or_else(|| {
            LoadError::Malformed(format!(
                "program {:?} calls into a missing .text",
                func.name
            ))
        })?;
        let tb = elf.bytes_of(t)?;
        if tb.len() % 8 != 0 {
            return Err(LoadError::Malformed(
                ".text is not a whole number of instructions".into(),
            ));
        }
        text_base = Some(own_slots);
        insns.extend_from_slice(tb);
        for r in elf.relocations_for(t.index)? {
            rels.push((own_slots + r.offset as usize / 8, r, t.index));
        }
    }
    let nslots = insns.len() / 8;
    for (slot, r, code_sec) in rels {
        if slot >= nslots || r.offset % 8 != 0 {
            return Err(LoadError::Malformed(format!(
                "relocation at {:#x} outside {:?}",
                r.offset, func.name
            )));
        }
        let sym = elf.symbols.get(r.sym as usize).ok_or_else(|| {
            LoadError::Malformed(format!(
                "relocation names symbol {} that does not exist",
                r.sym
            ))
        })?;
        let code = insns[slot * 8];
        match r.kind {
            R_BPF_64_64 => {
                if code != LDDW || slot + 1 >= nslots {
                    return Err(LoadError::Malformed(format!(
                        "R_BPF_64_64 at pc {slot} is not on an LDDW"
                    )));
                }
                if sym.shndx == 0 {
                    return Err(LoadError::Unsupported(format!(
                        "extern symbol {:?} (kconfig/ksym)",
                        sym.name
                    )));
                }
                let target = elf
                    .sections
                    .get(sym.shndx as usize)
                    .map(|s| s.name.as_str())
                    .unwrap_or("?");
                if is_global_data(target) {
                    let idx = maps
                        .iter()
                        .position(|m| {
                            m.origin == MapOrigin::Global && m.section == sym.shndx as usize
                        })
                        .ok_or_else(|| {
                            LoadError::Malformed(format!("no global-data map for {target:?}"))
                        })?;
                    let off = i64::from(imm_of(&insns, slot)) + sym.value as i64;
                    let off = i32::try_from(off)
                        .map_err(|_| LoadError::Malformed(format!("offset {off} in {target:?}")))?;
                    set_src(&mut insns, slot, PSEUDO_MAP_VALUE);
                    set_imm(&mut insns, slot, idx as i32);
                    set_imm(&mut insns, slot + 1, off);
                } else if target == "maps" || target == ".maps" {
                    let idx = maps
                        .iter()
                        .position(|m| {
                            m.section == sym.shndx as usize
                                && m.sym_off == sym.value
                                && m.origin != MapOrigin::Global
                        })
                        .ok_or_else(|| {
                            LoadError::Malformed(format!(
                                "relocation to {:?}, which is not a map",
                                sym.name
                            ))
                        })?;
                    set_src(&mut insns, slot, PSEUDO_MAP_FD);
                    set_imm(&mut insns, slot, idx as i32);
                    set_imm(&mut insns, slot + 1, 0);
                } else if elf
                    .sections
                    .get(sym.shndx as usize)
                    .is_some_and(|s| s.flags & SHF_EXECINSTR != 0)
                {
                    // A static function is named by its section's symbol:
                    // say where it points instead.
                    let what = if sym.name.is_empty() {
                        format!(
                            "{target} + {}",
                            (i64::from(imm_of(&insns, slot)) + sym.value as i64)
                        )
                    } else {
                        sym.name.clone()
                    };
                    return Err(LoadError::Unsupported(format!(
                        "a function pointer (to {what}) in program {:?}: callbacks, \
                         as bpf_loop or bpf_for_each_map_elem take, are not run",
                        func.name
                    )));
                } else {
                    return Err(LoadError::Unsupported(format!(
                        "relocation against section {target:?}"
                    )));
                }
            }
            R_BPF_64_32 => {
                if code != CALL || (insns[slot * 8 + 1] >> 4) != PSEUDO_CALL {
                    return Err(LoadError::Unsupported(format!(
                        "R_BPF_64_32 at pc {slot} not on a bpf-to-bpf call"
                    )));
                }
                let tsec = elf
                    .sections
                    .get(sym.shndx as usize)
                    .map(|s| s.name.as_str())
                    .unwrap_or("?");
                if tsec != ".text" {
                    return Err(LoadError::Unsupported(format!(
                        "call into section {tsec:?} (only .text subprograms)"
                    )));
                }
                let base =
                    text_base.ok_or_else(|| LoadError::Malformed("call without .text".into()))?;
                // libbpf: target = sym.st_value / 8 + imm + 1, in .text.
                let t = (sym.value / 8) as i64 + i64::from(imm_of(&insns, slot)) + 1;
                if t < 0 || (base as i64 + t) as usize >= nslots {
                    return Err(LoadError::Malformed(format!(
                        "call at pc {slot} targets outside .text"
                    )));
                }
                let rel = base as i64 + t - slot as i64 - 1;
                set_imm(&mut insns, slot, rel as i32);
                let _ = code_sec;
            }
            k => {
                return Err(LoadError::Unsupported(format!(
                    "relocation type {k} at {:#x} in {:?} (only R_BPF_64_64 and R_BPF_64_32)",
                    r.offset, sec.name
                )))
            }
        }
    }
    if let (Some(base), Some(t)) = (text_base, text) {
        insns = keep_called(elf, t, insns, base);
    }
    Ok(Program {
        name: func.name.clone(),
        section: sec.name.clone(),
        insns,
        frags: sec.name.starts_with("xdp.frags"),
    })
}

/// `insns` (the program, then the whole of `.text` from slot `base`,
/// calls relocated) with only the `.text` functions the program calls,
/// directly or not, as libbpf appends them: a function no call reaches
/// would be an unreachable instruction to the verifiers, the kernel's
/// too. Without function symbols for `.text`, `insns` as they are.
fn keep_called(elf: &Elf<'_>, text: &Section, insns: Vec<u8>, base: usize) -> Vec<u8> {
    const STT_FUNC: u8 = 2;
    let n = insns.len() / 8;
    let mut funcs: Vec<(usize, usize)> = elf
        .symbols
        .iter()
        .filter(|y| y.shndx as usize == text.index && y.kind == STT_FUNC && y.size > 0)
        .map(|y| {
            (
                base + y.value as usize / 8,
                base + (y.value + y.size) as usize / 8,
            )
        })
        .filter(|&(a, b)| a < b && b <= n)
        .collect();
    funcs.sort_unstable();
    funcs.dedup();
    // The functions must tile .text, or the pruning could cut a function.
    let tiles = funcs.first().is_some_and(|f| f.0 == base)
        && funcs.last().is_some_and(|f| f.1 == n)
        && funcs.windows(2).all(|w| w[0].1 == w[1].0);
    if !tiles {
        return insns;
    }
    let is_call = |s: usize| insns[s * 8] == CALL && insns[s * 8 + 1] >> 4 == PSEUDO_CALL;
    let target = |s: usize| (s as i64 + 1 + i64::from(imm_of(&insns, s))) as usize;
    let mut keep = vec![false; funcs.len()];
    let mut todo = vec![(0usize, base)];
    while let Some((a, b)) = todo.pop() {
        for s in (a..b).filter(|&s| is_call(s)) {
            let t = target(s);
            if let Some(k) = funcs.iter().position(|f| f.0 == t) {
                if !keep[k] {
                    keep[k] = true;
                    todo.push(funcs[k]);
                }
            }
        }
    }
    if keep.iter().all(|&k| k) {
        return insns;
    }
    // New slot of each kept slot; the calls' offsets again.
    let mut at = vec![usize::MAX; n];
    let mut out = insns[..base * 8].to_vec();
    (0..base).for_each(|s| at[s] = s);
    for &(a, b) in funcs.iter().zip(&keep).filter(|(_, &k)| k).map(|(f, _)| f) {
        for s in a..b {
            at[s] = out.len() / 8;
            out.extend_from_slice(&insns[s * 8..s * 8 + 8]);
        }
    }
    for s in (0..n).filter(|&s| at[s] != usize::MAX && is_call(s)) {
        let t = at[target(s)];
        if t != usize::MAX {
            set_imm(&mut out, at[s], (t as i64 - at[s] as i64 - 1) as i32);
        }
    }
    out
}
