//! A minimal reader for the ELF files clang writes for `-target bpf`:
//! 64-bit, little-endian, relocatable (`ET_REL`), machine `EM_BPF`.
//!
//! Only what a BPF loader needs: section headers and names, the symbol
//! table and `SHT_REL` relocation sections. Every offset and size read
//! from the file is checked against the file before use, so a truncated
//! or hostile file gives an [`ElfError`] naming what was wrong, never a
//! panic.

use thiserror::Error;

/// What is wrong with an ELF file.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElfError {
    /// The file is not a 64-bit little-endian relocatable BPF ELF.
    #[error("not a BPF object: {0}")]
    NotBpf(&'static str),
    /// A header, table or string points outside the file.
    #[error("malformed ELF: {0}")]
    Malformed(String),
}

const SHT_SYMTAB: u32 = 2;
const SHT_REL: u32 = 9;
const EM_BPF: u16 = 247;
const ET_REL: u16 = 1;

/// One section: its name and where its bytes are.
#[derive(Debug, Clone)]
pub struct Section {
    /// Index in the section header table.
    pub index: usize,
    /// Name from the section header string table.
    pub name: String,
    /// `sh_type`.
    pub kind: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// Offset of the bytes in the file (meaningless for `SHT_NOBITS`).
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// `sh_link`.
    pub link: u32,
    /// `sh_info` (for `SHT_REL`: the section the relocations apply to).
    pub info: u32,
}

/// `SHT_NOBITS`: a section with a size and no bytes in the file (`.bss`).
pub const SHT_NOBITS: u32 = 8;
/// `SHF_EXECINSTR`: the section holds instructions.
pub const SHF_EXECINSTR: u64 = 4;
/// `STT_FUNC`.
pub const STT_FUNC: u8 = 2;
/// `STT_SECTION`.
pub const STT_SECTION: u8 = 3;
/// `STB_GLOBAL`.
pub const STB_GLOBAL: u8 = 1;

/// One symbol of `.symtab`.
#[derive(Debug, Clone)]
pub struct Symbol {
    /// Name (empty for section symbols).
    pub name: String,
    /// `st_info & 0xf`.
    pub kind: u8,
    /// `st_info >> 4`.
    pub bind: u8,
    /// Section index the symbol is defined in (0: undefined).
    pub shndx: u16,
    /// `st_value`: offset in its section.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
}

/// One `SHT_REL` entry.
#[derive(Debug, Clone, Copy)]
pub struct Rel {
    /// Offset in the target section.
    pub offset: u64,
    /// Index in the symbol table.
    pub sym: u32,
    /// Relocation type (`R_BPF_*`).
    pub kind: u32,
}

/// A parsed ELF file borrowing the bytes.
#[derive(Debug)]
pub struct Elf<'a> {
    data: &'a [u8],
    /// Every section, by index.
    pub sections: Vec<Section>,
    /// Every symbol of `.symtab`, by index.
    pub symbols: Vec<Symbol>,
}

fn rd<const N: usize>(d: &[u8], off: usize, what: &str) -> Result<[u8; N], ElfError> {
    off.checked_add(N)
        .and_then(|end| d.get(off..end))
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| ElfError::Malformed(format!("{what} at offset {off} is past the end")))
}
fn u16_at(d: &[u8], off: usize, what: &str) -> Result<u16, ElfError> {
    rd::<2>(d, off, what).map(u16::from_le_bytes)
}
fn u32_at(d: &[u8], off: usize, what: &str) -> Result<u32, ElfError> {
    rd::<4>(d, off, what).map(u32::from_le_bytes)
}
fn u64_at(d: &[u8], off: usize, what: &str) -> Result<u64, ElfError> {
    rd::<8>(d, off, what).map(u64::from_le_bytes)
}
fn usize_of(v: u64, what: &str) -> Result<usize, ElfError> {
    usize::try_from(v).map_err(|_| ElfError::Malformed(format!("{what} {v} is too large")))
}

/// The NUL-terminated string at `off` in `table`.
pub fn cstr(table: &[u8], off: usize) -> Result<String, ElfError> {
    let rest = table
        .get(off..)
        .ok_or_else(|| ElfError::Malformed(format!("string offset {off} is outside its table")))?;
    let end = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| ElfError::Malformed(format!("string at {off} is not terminated")))?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

impl<'a> Elf<'a> {
    /// Parse the headers, section names and symbol table of `data`.
    pub fn parse(data: &'a [u8]) -> Result<Elf<'a>, ElfError> {
        if data.get(0..4) != Some(b"\x7fELF".as_slice()) {
            return Err(ElfError::NotBpf("no ELF magic"));
        }
        if data.get(4) != Some(&2) {
            return Err(ElfError::NotBpf("not a 64-bit ELF"));
        }
        if data.get(5) != Some(&1) {
            return Err(ElfError::NotBpf(
                "not little-endian (big-endian BPF is not supported)",
            ));
        }
        if u16_at(data, 16, "e_type")? != ET_REL {
            return Err(ElfError::NotBpf("not a relocatable object (ET_REL)"));
        }
        if u16_at(data, 18, "e_machine")? != EM_BPF {
            return Err(ElfError::NotBpf(
                "machine is not EM_BPF (compile with clang -target bpf)",
            ));
        }
        let shoff = usize_of(u64_at(data, 40, "e_shoff")?, "e_shoff")?;
        let shentsize = usize::from(u16_at(data, 58, "e_shentsize")?);
        let shnum = usize::from(u16_at(data, 60, "e_shnum")?);
        let shstrndx = usize::from(u16_at(data, 62, "e_shstrndx")?);
        if shentsize < 64 {
            return Err(ElfError::Malformed(format!(
                "section header size {shentsize} < 64"
            )));
        }
        let mut raw = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let h = shoff
                .checked_add(i.saturating_mul(shentsize))
                .ok_or_else(|| ElfError::Malformed("section header table overflows".into()))?;
            let what = "section header";
            raw.push((
                u32_at(data, h, what)?,
                Section {
                    index: i,
                    name: String::new(),
                    kind: u32_at(data, h + 4, what)?,
                    flags: u64_at(data, h + 8, what)?,
                    offset: usize_of(u64_at(data, h + 24, what)?, "sh_offset")?,
                    size: usize_of(u64_at(data, h + 32, what)?, "sh_size")?,
                    link: u32_at(data, h + 40, what)?,
                    info: u32_at(data, h + 44, what)?,
                },
            ));
        }
        let mut elf = Elf {
            data,
            sections: Vec::new(),
            symbols: Vec::new(),
        };
        let names = match raw.get(shstrndx) {
            Some((_, s)) => elf.bytes_of(s)?,
            None => {
                return Err(ElfError::Malformed(format!(
                    "e_shstrndx {shstrndx} is not a section"
                )))
            }
        };
        for (name_off, mut s) in raw {
            s.name = cstr(names, name_off as usize)?;
            elf.sections.push(s);
        }
        if let Some(symtab) = elf.sections.iter().find(|s| s.kind == SHT_SYMTAB).cloned() {
            elf.symbols = elf.parse_symbols(&symtab)?;
        }
        Ok(elf)
    }

    /// The bytes of section `s` (empty for `SHT_NOBITS`).
    pub fn bytes_of(&self, s: &Section) -> Result<&'a [u8], ElfError> {
        if s.kind == SHT_NOBITS {
            return Ok(&[]);
        }
        s.offset
            .checked_add(s.size)
            .and_then(|end| self.data.get(s.offset..end))
            .ok_or_else(|| {
                ElfError::Malformed(format!("section {:?} lies outside the file", s.name))
            })
    }

    /// The section named `name`, if any.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    fn parse_symbols(&self, symtab: &Section) -> Result<Vec<Symbol>, ElfError> {
        let bytes = self.bytes_of(symtab)?;
        let strtab = self.sections.get(symtab.link as usize).ok_or_else(|| {
            ElfError::Malformed("symbol string table index is not a section".into())
        })?;
        let strs = self.bytes_of(strtab)?;
        let mut out = Vec::with_capacity(bytes.len() / 24);
        for e in bytes.chunks_exact(24) {
            let what = "symbol";
            let info = e[4];
            out.push(Symbol {
                name: cstr(strs, u32_at(e, 0, what)? as usize)?,
                kind: info & 0xf,
                bind: info >> 4,
                shndx: u16_at(e, 6, what)?,
                value: u64_at(e, 8, what)?,
                size: u64_at(e, 16, what)?,
            });
        }
        Ok(out)
    }

    /// The `SHT_REL` relocations that apply to section index `target`.
    pub fn relocations_for(&self, target: usize) -> Result<Vec<Rel>, ElfError> {
        let mut out = Vec::new();
        for s in self
            .sections
            .iter()
            .filter(|s| s.kind == SHT_REL && s.info as usize == target)
        {
            for e in self.bytes_of(s)?.chunks_exact(16) {
                let info = u64_at(e, 8, "relocation")?;
                out.push(Rel {
                    offset: u64_at(e, 0, "relocation")?,
                    sym: (info >> 32) as u32,
                    kind: info as u32,
                });
            }
        }
        Ok(out)
    }

    /// Whether any `SHT_RELA` section exists (BPF objects never have one;
    /// refused rather than ignored).
    pub fn has_rela(&self) -> Option<&Section> {
        self.sections.iter().find(|s| s.kind == 4)
    }
}
