//! A BPF object file turned into what a loader needs: its maps (legacy,
//! BTF-defined, global data) and its XDP programs, each linked into one
//! instruction stream with the `.text` subprograms it calls and its map
//! references relocated to map indices (see [`Program::insns`]).

use crate::btf::{Btf, MapField};
use crate::elf::{Elf, Symbol, SHF_EXECINSTR, STB_GLOBAL, STT_FUNC, STT_SECTION};
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
/// `src` of an `LDDW` of a function's address (`BPF_PSEUDO_FUNC`: a
/// callback), imm the offset to it as a call's; made a call by
/// `callbacks::lower` for `bpf_loop`.
pub const PSEUDO_FUNC: u8 = 4;

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
    /// A prog array's entries the object sets (`__array(values, ...)`
    /// initialised `{ [1] = &prog }`): slot and program name, written
    /// when the hook is built, as libbpf writes them at load.
    pub tails: Vec<(u32, String)>,
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
    /// The instructions as the kernel takes them, where pfil's differ:
    /// `bpf_loop` calls with their callbacks' `BPF_PSEUDO_FUNC` loads,
    /// which pfil runs as loops (`callbacks.rs`, as the kernel's
    /// verifier inlines them). `None`: the same as `insns`.
    pub kernel_insns: Option<Vec<u8>>,
    /// The first slots of `bpf_loop`'s callbacks in `insns` (their
    /// returns must be 0 or 1: `LoadOptions::callbacks`).
    pub callbacks: Vec<usize>,
}

/// A parsed BPF object.
#[derive(Debug, Clone)]
pub struct Object {
    /// The `license` section's string.
    pub license: String,
    /// Every map of the object, in index order.
    pub maps: Vec<MapDef>,
    /// Every XDP program that links (one that calls a kernel function,
    /// say, is refused when named: [`Object::program`]).
    pub programs: Vec<Program>,
    /// Functions of executable sections whose names give no program type
    /// (`xdp_patch_ports`, `prog`: what `ip link ... sec NAME` and
    /// `bpftool prog load ... type xdp` load as XDP, and libbpf 1.0 no
    /// longer guesses), each linked as an XDP program (or why it could not
    /// be): run only when named with `program NAME`.
    legacy: Vec<(String, Result<Program, LoadError>)>,
    /// Functions of sections of another program type (`kprobe/...`,
    /// `tp_btf/...`, `tc`), with their section: not XDP programs.
    other: Vec<(String, String)>,
    /// XDP programs that could not be linked (a kernel function called,
    /// a relocation pfil cannot answer), with why: refused when named,
    /// or when the only one, not for their neighbours.
    broken: Vec<(String, LoadError)>,
}

/// The section names libbpf gives a program type other than XDP (the part
/// before `/` or `.`, or a prefix of a family).
fn is_other_kind(name: &str) -> bool {
    const KINDS: [&str; 35] = [
        "socket",
        "kprobe",
        "uprobe",
        "kretprobe",
        "uretprobe",
        "ksyscall",
        "kretsyscall",
        "usdt",
        "tc",
        "tcx",
        "netkit",
        "classifier",
        "action",
        "tracepoint",
        "tp",
        "raw_tracepoint",
        "raw_tp",
        "tp_btf",
        "fentry",
        "fmod_ret",
        "fexit",
        "freplace",
        "lsm",
        "iter",
        "syscall",
        "perf_event",
        "sockops",
        "lirc_mode2",
        "flow_dissector",
        "struct_ops",
        "netfilter",
        "uprobe.s",
        "fentry.s",
        "lsm.s",
        "iter.s",
    ];
    let head = name.split(['/', '.']).next().unwrap_or(name);
    KINDS.contains(&head)
        || ["cgroup", "lwt_", "sk_", "seccomp"]
            .iter()
            .any(|p| head.starts_with(p))
}

fn is_xdp_section(name: &str) -> bool {
    (name == "xdp"
        || name == "xdp.frags"
        || name.starts_with("xdp/")
        || name.starts_with("xdp.frags/"))
        && !is_map_entry_section(name)
}

/// A section of programs for a devmap's or cpumap's entries (libbpf's
/// `xdp/devmap`, `xdp/cpumap`, their `.frags` and legacy `xdp_devmap/`
/// forms): the kernel runs them on frames redirected into the map, not
/// on an interface's.
fn is_map_entry_section(name: &str) -> bool {
    let kind = name
        .strip_prefix("xdp.frags/")
        .or_else(|| name.strip_prefix("xdp/"))
        .map(|k| k.split('/').next().unwrap_or(k));
    matches!(kind, Some("devmap" | "cpumap"))
        || name.starts_with("xdp_devmap/")
        || name.starts_with("xdp_cpumap/")
}

pub(crate) fn is_global_data(name: &str) -> bool {
    matches!(name, ".data" | ".rodata" | ".bss")
        || name.starts_with(".rodata.")
        || name.starts_with(".data.")
}

impl Object {
    /// Parse `data`, a clang `-target bpf` object.
    ///
    /// # Errors
    /// A malformed file, an unsupported relocation, a CO-RE
    /// relocation pfil cannot answer, a call to a kernel function...
    /// anything the loader cannot do exactly as libbpf would, named.
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
        let relos = crate::co_re::parse(&elf, btf.as_ref())?;
        let core = (relos.as_slice(), btf.as_ref());
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
                // (libbpf's: a `.rodata` map is one the program only
                // reads, which the verifier enforces.)
                flags: if s.name.starts_with(".rodata") {
                    pfil_ebpf::BPF_F_RDONLY_PROG
                } else {
                    0
                },
                origin: MapOrigin::Global,
                init: Some(init),
                readonly: s.name.starts_with(".rodata"),
                tails: Vec::new(),
                sym_off: 0,
                section: s.index,
            });
        }
        let text = elf.section(".text").filter(|s| s.size > 0).cloned();
        let (mut programs, mut legacy, mut other) = (Vec::new(), Vec::new(), Vec::new());
        let mut broken = Vec::new();
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
                if is_map_entry_section(&s.name) {
                    other.extend(funcs.iter().map(|f| (f.name.clone(), s.name.clone())));
                    continue;
                }
                // Kept out rather than refused: an object may carry
                // programs of other kinds beside its XDP ones. Asking for
                // one by name says why it is missing (Object::program);
                // one of a section that names no type runs when named.
                for f in funcs {
                    if is_other_kind(&s.name) {
                        other.push((f.name.clone(), s.name.clone()));
                    } else {
                        let p = crate::link::link_program(&elf, s, f, text.as_ref(), &maps, core);
                        legacy.push((f.name.clone(), p));
                    }
                }
                continue;
            }
            for f in funcs {
                match crate::link::link_program(&elf, s, f, text.as_ref(), &maps, core) {
                    Ok(p) => programs.push(p),
                    Err(e) => broken.push((f.name.clone(), e)),
                }
            }
        }
        Ok(Object {
            license,
            maps,
            programs,
            legacy,
            other,
            broken,
        })
    }

    /// The XDP programs that could not be linked, with why.
    pub(crate) fn unlinked(&self) -> impl Iterator<Item = (&str, &LoadError)> {
        self.broken.iter().map(|(n, e)| (n.as_str(), e))
    }

    /// The program named `name`, or the only XDP program when `name` is
    /// `None`.
    ///
    /// # Errors
    /// No such program, or several and no name given.
    pub fn program(&self, name: Option<&str>) -> Result<&Program, LoadError> {
        match name {
            Some(n) => {
                if let Some(p) = self.programs.iter().find(|p| p.name == n) {
                    return Ok(p);
                }
                if let Some((_, e)) = self.broken.iter().find(|(f, _)| f == n) {
                    return Err(e.clone());
                }
                if let Some((_, p)) = self.legacy.iter().find(|(f, _)| f == n) {
                    return p.as_ref().map_err(Clone::clone);
                }
                Err(LoadError::NoProgram(
                    match self.other.iter().find(|(f, _)| f == n) {
                        Some((_, sec)) if is_map_entry_section(sec) => format!(
                            "{n:?} is in section {sec:?}: a program for a devmap's or cpumap's \
                             entries, which the kernel runs on frames redirected into the map; \
                             pfil runs XDP programs on an interface's frames"
                        ),
                        Some((_, sec)) => format!(
                            "{n:?} is in section {sec:?}, a program of another type than XDP"
                        ),
                        None => format!(
                            "no XDP program {n:?} (XDP programs: {})",
                            self.program_names()
                        ),
                    },
                ))
            }
            None => match (self.programs.as_slice(), self.broken.as_slice()) {
                ([p], []) => Ok(p),
                ([], [(_, e)]) => Err(e.clone()),
                ([], []) if !self.legacy.is_empty() => {
                    let v: Vec<String> = self
                        .legacy
                        .iter()
                        .map(|(f, p)| match p {
                            Ok(p) => format!("{f} (section {:?})", p.section),
                            Err(_) => f.clone(),
                        })
                        .collect();
                    Err(LoadError::NoProgram(format!(
                        "no function in a section named xdp, xdp/*, xdp.frags; name one of \
                         {} with `program NAME` to run it as XDP",
                        v.join(", ")
                    )))
                }
                ([], []) => Err(LoadError::NoProgram(
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
        let mut v: Vec<&str> = self.programs.iter().map(|p| p.name.as_str()).collect();
        v.extend(self.broken.iter().map(|(f, _)| f.as_str()));
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }
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
            kind: MapType::of_raw(w(0)),
            key_size: w(4),
            value_size: w(8),
            max_entries: w(12),
            flags: w(16),
            origin: MapOrigin::Legacy,
            init: None,
            readonly: false,
            tails: Vec::new(),
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
            tails: Vec::new(),
            sym_off: sym.value,
            section: sec.index,
        };
        let mut kind = None;
        let mut values = None;
        for (at, (field, v)) in btf.map_fields(ty)?.into_iter().enumerate() {
            let n = match v {
                MapField::Uint(n) | MapField::Type(n) => n,
                MapField::Values => 0,
            };
            match (field.as_str(), &v) {
                // Every member before it is a pointer (`__uint`,
                // `__type`): the array starts 8 bytes a member in.
                ("values", MapField::Values) => values = Some(8 * at as u64),
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
        def.kind = MapType::of_raw(kind);
        if values.is_some() && def.value_size == 0 {
            // A program's or inner map's fd, as libbpf sizes it.
            def.value_size = 4;
        }
        if let (Some(at), MapType::ProgArray) = (values, def.kind) {
            def.tails = prog_array_init(
                elf,
                sec.index,
                (sym.value + at, sym.value + sym.size),
                &name,
            )?;
        } else if values.is_some() && def.kind.runs() {
            return Err(LoadError::Unsupported(format!(
                "map {name:?}: inner programs or maps (`__array(values, ...)`) in a {}",
                def.kind.name()
            )));
        }
        maps.push(def);
    }
    Ok(())
}

/// A prog array's initial entries: the relocations of `.rel.maps` in the
/// map's `values` (`[start, end)` of the section: from the array to the
/// variable's end), each naming a program, 8 bytes a slot (libbpf's
/// `bpf_object__collect_map_relos`).
fn prog_array_init(
    elf: &Elf<'_>,
    maps_section: usize,
    (start, end): (u64, u64),
    name: &str,
) -> Result<Vec<(u32, String)>, LoadError> {
    let rels = elf
        .relocations_for(maps_section)
        .map_err(|e| LoadError::Malformed(e.to_string()))?;
    let mut out = Vec::new();
    for r in rels {
        if r.offset < start || r.offset.saturating_add(8) > end {
            continue;
        }
        let Some(y) = elf.symbols.get(r.sym as usize) else {
            continue;
        };
        let slot = u32::try_from((r.offset - start) / 8)
            .map_err(|_| LoadError::Map(format!("map {name:?}: a prog_array entry past 2^32")))?;
        out.push((slot, y.name.clone()));
    }
    Ok(out)
}
