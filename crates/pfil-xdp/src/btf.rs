//! Just enough BTF (the BPF Type Format in `.BTF`) to read BTF-defined
//! maps: the variables of the `.maps` data section and their struct
//! members written with libbpf's `__uint(name, N)` (a pointer to an
//! array of `N` elements) and `__type(name, T)` (a pointer to `T`).
//!
//! Type records are decoded into a table once; sizes and the chains of
//! typedefs and qualifiers are followed with a depth bound, so a cyclic or
//! truncated `.BTF` is an error, never a hang or a panic.

use crate::elf::cstr;
use crate::LoadError;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// Depth bound for following typedefs, qualifiers and arrays.
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, Default)]
struct Type {
    name: String,
    kind: u32,
    vlen: u32,
    /// `size` or `type`, depending on the kind.
    size_type: u32,
    /// ARRAY: (elem type, nelems).
    array: (u32, u32),
    /// STRUCT/UNION: (name, type); DATASEC: (type, offset, size) as
    /// (String::new(), type) with offsets in `sec`.
    members: Vec<(String, u32)>,
}

/// The decoded type table of a `.BTF` section.
#[derive(Debug, Default)]
pub struct Btf {
    /// Index 0 is `void`.
    types: Vec<Type>,
    /// The string section (names, and `.BTF.ext`'s CO-RE access strings).
    strings: Vec<u8>,
}

fn err(msg: impl Into<String>) -> LoadError {
    LoadError::Btf(msg.into())
}

fn u32_at(d: &[u8], off: usize) -> Result<u32, LoadError> {
    off.checked_add(4)
        .and_then(|e| d.get(off..e))
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| err(format!("record at {off} is truncated")))
}

/// One `__uint`/`__type`/`__array` member of a BTF map definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapField {
    /// `__uint(name, N)`.
    Uint(u32),
    /// `__type(name, T)`: the size of `T`.
    Type(u32),
    /// `__array(values, T)`: a prog_array's or map-in-map's inner
    /// programs or maps (and, initialised, their first entries).
    Values,
}

impl Btf {
    /// Decode the `.BTF` section bytes.
    pub fn parse(d: &[u8]) -> Result<Btf, LoadError> {
        if d.get(0..2) != Some([0x9f, 0xeb].as_slice()) {
            return Err(err("bad magic (not little-endian BTF)"));
        }
        let hdr_len = u32_at(d, 4)? as usize;
        let (type_off, type_len) = (u32_at(d, 8)? as usize, u32_at(d, 12)? as usize);
        let (str_off, str_len) = (u32_at(d, 16)? as usize, u32_at(d, 20)? as usize);
        let slice = |off: usize, len: usize, what: &str| {
            hdr_len
                .checked_add(off)
                .and_then(|s| Some((s, s.checked_add(len)?)))
                .and_then(|(s, e)| d.get(s..e))
                .ok_or_else(|| err(format!("{what} section lies outside .BTF")))
        };
        let types = slice(type_off, type_len, "type")?;
        let strs = slice(str_off, str_len, "string")?;
        let mut out = Btf {
            types: vec![Type::default()],
            strings: strs.to_vec(),
        };
        let mut p = 0;
        while p < types.len() {
            let name = cstr(strs, u32_at(types, p)? as usize).map_err(|e| err(e.to_string()))?;
            let info = u32_at(types, p + 4)?;
            let size_type = u32_at(types, p + 8)?;
            p += 12;
            let (kind, vlen) = ((info >> 24) & 0x1f, info & 0xffff);
            let mut t = Type {
                name,
                kind,
                vlen,
                size_type,
                ..Type::default()
            };
            let vlen = vlen as usize;
            match kind {
                KIND_INT | KIND_VAR | 17 => p += 4,
                KIND_ARRAY => {
                    t.array = (u32_at(types, p)?, u32_at(types, p + 8)?);
                    p += 12;
                }
                KIND_STRUCT | KIND_UNION => {
                    for i in 0..vlen {
                        let m = p + 12 * i;
                        let mname = cstr(strs, u32_at(types, m)? as usize)
                            .map_err(|e| err(e.to_string()))?;
                        t.members.push((mname, u32_at(types, m + 4)?));
                    }
                    p += 12 * vlen;
                }
                KIND_DATASEC => {
                    for i in 0..vlen {
                        t.members.push((String::new(), u32_at(types, p + 12 * i)?));
                    }
                    p += 12 * vlen;
                }
                KIND_ENUM | 13 => p += 8 * vlen,
                KIND_ENUM64 => p += 12 * vlen,
                KIND_PTR | 7 | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | 12
                | KIND_FLOAT | KIND_TYPE_TAG => {}
                k => {
                    return Err(err(format!(
                        "unknown BTF kind {k} at type {}",
                        out.types.len()
                    )))
                }
            }
            out.types.push(t);
        }
        Ok(out)
    }

    fn get(&self, id: u32) -> Result<&Type, LoadError> {
        self.types
            .get(id as usize)
            .ok_or_else(|| err(format!("type id {id} does not exist")))
    }

    /// Follow typedefs and qualifiers.
    fn skip_mods(&self, mut id: u32) -> Result<u32, LoadError> {
        for _ in 0..MAX_DEPTH {
            let t = self.get(id)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_type
                }
                _ => return Ok(id),
            }
        }
        Err(err(format!("type chain from {id} is too deep (a cycle?)")))
    }

    /// The size in bytes of type `id`.
    pub fn size_of(&self, id: u32) -> Result<u32, LoadError> {
        self.size_depth(id, 0)
    }

    fn size_depth(&self, id: u32, depth: usize) -> Result<u32, LoadError> {
        if depth > MAX_DEPTH {
            return Err(err(format!("type {id} nests too deep")));
        }
        let t = self.get(self.skip_mods(id)?)?;
        match t.kind {
            KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 | KIND_FLOAT
            | KIND_DATASEC => Ok(t.size_type),
            KIND_PTR => Ok(8),
            KIND_ARRAY => self
                .size_depth(t.array.0, depth + 1)?
                .checked_mul(t.array.1)
                .ok_or_else(|| err(format!("array type {id} overflows"))),
            k => Err(err(format!("type {id} (kind {k}) has no size"))),
        }
    }

    /// The string at `off` of the string section.
    ///
    /// # Errors
    /// `off` outside the section, or no terminating NUL.
    pub fn string(&self, off: u32) -> Result<String, LoadError> {
        cstr(&self.strings, off as usize).map_err(|e| err(e.to_string()))
    }

    /// The name of type `id` past typedefs and qualifiers (empty for an
    /// anonymous type).
    ///
    /// # Errors
    /// No such type, or a chain too deep.
    pub fn name_of(&self, id: u32) -> Result<&str, LoadError> {
        Ok(self.get(self.skip_mods(id)?)?.name.as_str())
    }

    /// Type `id` past typedefs and qualifiers, when it is a struct or a
    /// union: its name and its members' names, in order.
    ///
    /// # Errors
    /// No such type, or a chain too deep.
    pub fn record(&self, id: u32) -> Result<Option<(&str, Vec<&str>)>, LoadError> {
        let t = self.get(self.skip_mods(id)?)?;
        Ok(matches!(t.kind, KIND_STRUCT | KIND_UNION).then(|| {
            (
                t.name.as_str(),
                t.members.iter().map(|(n, _)| n.as_str()).collect(),
            )
        }))
    }

    /// The variables of data section `sec` (e.g. `.maps`): (name, type).
    pub fn datasec_vars(&self, sec: &str) -> Result<Vec<(String, u32)>, LoadError> {
        let Some(ds) = self
            .types
            .iter()
            .find(|t| t.kind == KIND_DATASEC && t.name == sec)
        else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (_, var) in &ds.members {
            let v = self.get(*var)?;
            if v.kind != KIND_VAR {
                return Err(err(format!("member {var} of {sec} is not a variable")));
            }
            out.push((v.name.clone(), v.size_type));
        }
        Ok(out)
    }

    /// The members of a BTF map definition struct (type `id`): each
    /// `__uint` as its number, each `__type` as its size.
    pub fn map_fields(&self, id: u32) -> Result<Vec<(String, MapField)>, LoadError> {
        let t = self.get(self.skip_mods(id)?)?;
        if t.kind != KIND_STRUCT {
            return Err(err(format!("map definition type {id} is not a struct")));
        }
        let mut out = Vec::new();
        for (name, mt) in &t.members {
            let ptr = self.get(self.skip_mods(*mt)?)?;
            if name == "values" && ptr.kind == KIND_ARRAY {
                // `__array(values, T)`: `typeof(T) *values[]`.
                out.push((name.clone(), MapField::Values));
                continue;
            }
            if ptr.kind != KIND_PTR {
                return Err(err(format!(
                    "map field {name:?} is not written with __uint or __type"
                )));
            }
            let target_id = self.skip_mods(ptr.size_type)?;
            let target = self.get(target_id)?;
            let f = if target.kind == KIND_ARRAY && !matches!(name.as_str(), "key" | "value") {
                MapField::Uint(target.array.1)
            } else {
                MapField::Type(self.size_of(target_id)?)
            };
            out.push((name.clone(), f));
        }
        let _ = t.vlen;
        Ok(out)
    }
}
