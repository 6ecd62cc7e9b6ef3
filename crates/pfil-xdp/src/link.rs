//! Linking one program of an object: its function, the `.text`
//! subprograms it calls (only those, as libbpf appends them), map and
//! global-data references turned into the engine's pseudo loads, calls
//! relocated, CO-RE relocations applied (`co_re.rs`).

use crate::btf::Btf;
use crate::elf::{Elf, Rel, Section, Symbol, SHF_EXECINSTR};
use crate::object::{
    is_global_data, MapDef, MapOrigin, Program, CALL, LDDW, PSEUDO_CALL, PSEUDO_FUNC,
    PSEUDO_MAP_FD, PSEUDO_MAP_VALUE,
};
use crate::LoadError;

const R_BPF_64_64: u32 = 1;
const R_BPF_64_32: u32 = 10;

pub(crate) fn set_imm(insns: &mut [u8], slot: usize, imm: i32) {
    insns[slot * 8 + 4..slot * 8 + 8].copy_from_slice(&imm.to_le_bytes());
}
pub(crate) fn imm_of(insns: &[u8], slot: usize) -> i32 {
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

pub(crate) fn link_program(
    elf: &Elf<'_>,
    sec: &Section,
    func: &Symbol,
    text: Option<&Section>,
    maps: &[MapDef],
    (relos, btf): (&[crate::co_re::Relo], Option<&Btf>),
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
    // A call to a function no section defines: a kernel function
    // (`extern ... __ksym`, a kfunc), which pfil does not have.
    for (_, r, _) in rels.iter().filter(|(_, r, _)| r.kind == R_BPF_64_32) {
        if let Some(y) = elf.symbols.get(r.sym as usize).filter(|y| y.shndx == 0) {
            return Err(LoadError::Unsupported(format!(
                "program {:?} calls kernel function {:?} (a kfunc, `extern ... __ksym`): \
                 pfil runs helpers only",
                func.name, y.name
            )));
        }
    }
    // Append .text when any call, or function pointer (a callback), goes
    // there.
    let mut text_base = None;
    let into_text = |r: &Rel| {
        text.is_some_and(|t| {
            elf.symbols
                .get(r.sym as usize)
                .is_some_and(|y| y.shndx as usize == t.index)
        })
    };
    let calls_text = rels
        .iter()
        .any(|(_, r, _)| r.kind == R_BPF_64_32 || r.kind == R_BPF_64_64 && into_text(r));
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
                } else if let (Some(base), true) = (text_base, into_text(&r)) {
                    // A function pointer into .text (a callback, as
                    // bpf_loop takes): the kernel's `BPF_PSEUDO_FUNC`
                    // load, its imm the offset to the function as a
                    // call's (`lower_callbacks` makes it a call).
                    let t = (i64::from(imm_of(&insns, slot)) + sym.value as i64) / 8;
                    if t < 0 || base + t as usize >= nslots {
                        return Err(LoadError::Malformed(format!(
                            "function pointer at pc {slot} outside .text"
                        )));
                    }
                    set_src(&mut insns, slot, PSEUDO_FUNC);
                    set_imm(&mut insns, slot, (base as i64 + t - slot as i64 - 1) as i32);
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
                        "a function pointer (to {what}) in program {:?}: a callback \
                         outside .text is not run",
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
    crate::co_re::apply(
        relos,
        btf,
        (&sec.name, start..start + size),
        0,
        &mut insns,
        &func.name,
    )?;
    let (mut kernel_insns, mut callbacks) = (None, Vec::new());
    if let (Some(base), Some(t)) = (text_base, text) {
        crate::co_re::apply(
            relos,
            btf,
            (".text", 0..t.size),
            base,
            &mut insns,
            &func.name,
        )?;
        insns = keep_called(elf, t, insns, base);
        let (lowered, cbs) = crate::callbacks::lower(insns.clone(), &func.name)?;
        if lowered != insns {
            kernel_insns = Some(std::mem::replace(&mut insns, lowered));
        }
        callbacks = cbs;
    }
    Ok(Program {
        name: func.name.clone(),
        section: sec.name.clone(),
        insns,
        kernel_insns,
        callbacks,
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
    // A callback's pointer reaches its function as a call does.
    let is_call = |s: usize| {
        insns[s * 8] == CALL && insns[s * 8 + 1] >> 4 == PSEUDO_CALL
            || insns[s * 8] == LDDW && insns[s * 8 + 1] >> 4 == PSEUDO_FUNC
    };
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
