//! The `xdp:` config: the object, the program, and map contents that are
//! configuration.
//!
//! ```text
//! @PATH [program NAME]
//! map MAP key BYTES value BYTES      (any number, one per line or after `;`)
//! map MAP key BYTES value name PROG  (a prog array's entry: a program)
//! map MAP max_entries N              (a map's size, as its loader sets it)
//! verify kernel                      (optional)
//! ```
//!
//! `@PATH` is a clang-compiled BPF object (a regular file of at most
//! [`MAX_OBJECT_BYTES`](crate::filter::MAX_OBJECT_BYTES)); `program NAME`
//! picks one when it has several XDP programs. Each `map` line sets one
//! entry when the hook is built, with bytes as bpftool writes them
//! (decimal or `0x` hex, one byte each); a per-CPU map's entry given one
//! value gets it for every worker. So a configuration file carries what
//! the program needs to run (the ports xdp-filter denies):
//!
//! ```toml
//! [hooks."xdp:dns"]
//! config = """@/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_dny_udp.o
//! map filter_ports key 0x00 0x35 0 0 value 10 0 0 0 0 0 0 0
//! """
//! ```
//!
//! A prog array's entry names a program of the object, as bpftool's
//! `value name PROG` does: `bpf_tail_call` on that key runs it.
//!
//! `map MAP max_entries N` sizes a map before it is made, as a loader's
//! `bpf_map__set_max_entries` does: objects leave some maps for their
//! loader to size (`max_entries` 0, which the kernel refuses, as pfil
//! does without the line).
//!
//! `verify kernel` asks the kernel's verifier too (`BPF_PROG_LOAD`, as
//! root), as a second opinion: the hook is refused when the kernel
//! refuses the program, with the end of the kernel's log. pfil's own
//! verifier and run-time checks apply either way.
//!
//! A `set` to a config naming the same object keeps the maps whose
//! definition did not change, with their contents, then applies the
//! config's `map` lines; an entry written at run time (`pfilctl map ...
//! update`) stays until deleted.

/// One `map` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    /// The map's name.
    pub map: String,
    /// The key's bytes.
    pub key: Vec<u8>,
    /// The value's bytes (empty with `program`).
    pub value: Vec<u8>,
    /// `value name PROG` (bpftool's words for a prog array entry): the
    /// value is that program's number, found when the hook is built.
    pub program: Option<String>,
}

/// The parts of an `xdp:` config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpConfig {
    /// The object's path.
    pub path: String,
    /// The program's name, if given.
    pub program: Option<String>,
    /// Map entries to set when the hook is built.
    pub entries: Vec<MapEntry>,
    /// Maps sized by the config (`map MAP max_entries N`), in order.
    pub sizes: Vec<(String, u32)>,
    /// Ask the kernel's verifier too (`verify kernel`).
    pub verify_kernel: bool,
}

/// One byte as bpftool takes it: decimal (`53`) or hex (`0x35`).
pub fn parse_byte(t: &str) -> Result<u8, String> {
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u8::from_str_radix(h, 16),
        None => t.parse::<u8>(),
    };
    r.map_err(|_| format!("`{t}` is not a byte (0-255, or 0x00-0xff)"))
}

/// `map MAP max_entries N`: `Some((MAP, N))`; `None` for another line.
fn max_entries(line: &str) -> Result<Option<(String, u32)>, String> {
    let t: Vec<&str> = line.split_whitespace().collect();
    let [map, name, max_entries, rest @ ..] = t.as_slice() else {
        return Ok(None);
    };
    if *map != "map" || *max_entries != "max_entries" {
        return Ok(None);
    }
    let usage = || format!("MAPS: expected `map {name} max_entries N` (N from 1), got `{line}`");
    match rest {
        [n] => match n.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Some(((*name).to_owned(), n))),
            _ => Err(usage()),
        },
        _ => Err(usage()),
    }
}

fn entry(line: &str) -> Result<MapEntry, String> {
    let t: Vec<&str> = line.split_whitespace().collect();
    let usage = "map MAP key BYTES value BYTES";
    let (Some(&"map"), Some(name)) = (t.first(), t.get(1)) else {
        return Err(format!("MAPS: expected `{usage}`, got `{line}`"));
    };
    let k = t.iter().position(|w| *w == "key");
    let v = t.iter().position(|w| *w == "value");
    let (Some(k), Some(v)) = (k, v) else {
        return Err(format!("MAPS: expected `{usage}`, got `{line}`"));
    };
    if k != 2 || v <= k + 1 || v + 1 >= t.len() {
        return Err(format!(
            "MAPS: expected `{usage}` with bytes after key and value, got `{line}`"
        ));
    }
    let bytes = |ws: &[&str]| {
        ws.iter()
            .map(|w| parse_byte(w))
            .collect::<Result<Vec<u8>, String>>()
    };
    let key = bytes(&t[k + 1..v]).map_err(|e| format!("MAPS: {name}: key: {e}"))?;
    if let ["name", prog] = t[v + 1..] {
        return Ok(MapEntry {
            map: (*name).to_owned(),
            key,
            value: Vec::new(),
            program: Some(prog.to_owned()),
        });
    }
    Ok(MapEntry {
        map: (*name).to_owned(),
        key,
        value: bytes(&t[v + 1..]).map_err(|e| format!("MAPS: {name}: value: {e}"))?,
        program: None,
    })
}

impl XdpConfig {
    /// Parse a config (see the [module docs](self)).
    ///
    /// # Errors
    /// What the syntax expects.
    pub fn parse(config: &str) -> Result<XdpConfig, String> {
        let mut parts = config
            .split(['\n', ';'])
            .map(str::trim)
            .filter(|l| !l.is_empty());
        let c = parts.next().unwrap_or("");
        let Some(rest) = c.strip_prefix('@') else {
            return Err(format!("OBJECT: `@PATH` of a BPF object file (got {c:?})"));
        };
        if rest == "program" || rest.ends_with(" program") {
            return Err("OBJECT: `program` needs one program name after it".into());
        }
        let (path, program) = match rest.rsplit_once(" program ") {
            Some((p, n)) if !n.trim().contains(char::is_whitespace) => {
                (p.trim(), Some(n.trim().to_owned()))
            }
            Some(_) => return Err("OBJECT: `program` takes one program name".into()),
            None => (rest.trim(), None),
        };
        if path.is_empty() {
            return Err("OBJECT: `@` needs the path of a BPF object after it".into());
        }
        let mut verify_kernel = false;
        let mut entries = Vec::new();
        let mut sizes = Vec::new();
        for line in parts {
            if line.split_whitespace().eq(["verify", "kernel"]) {
                verify_kernel = true;
            } else if let Some(size) = max_entries(line)? {
                sizes.push(size);
            } else {
                entries.push(entry(line)?);
            }
        }
        Ok(XdpConfig {
            path: path.to_owned(),
            program,
            entries,
            sizes,
            verify_kernel,
        })
    }

    /// Write the entries of `obj`'s read-only global data (`.rodata`,
    /// libbpf's `const volatile` settings) into their initial values, as
    /// a skeleton sets them before it loads the program: such a map is
    /// frozen once loaded (the verifier folds its values), so it cannot
    /// be written after. The other entries, to set once loaded. The sizes
    /// (`map MAP max_entries N`) are set first.
    ///
    /// # Errors
    /// An entry of such a map whose key is not index 0 or whose value is
    /// not the whole section; a size for a map the object does not have,
    /// or for global data.
    pub fn preset<'c>(&'c self, obj: &mut crate::Object) -> Result<Vec<&'c MapEntry>, String> {
        for (name, n) in &self.sizes {
            let names: Vec<&str> = obj.maps.iter().map(|m| m.name.as_str()).collect();
            let names = names.join(", ");
            let def = obj
                .maps
                .iter_mut()
                .find(|m| m.name == *name)
                .ok_or_else(|| {
                    format!("map {name}: the object has no such map (its maps: {names})")
                })?;
            if def.origin == crate::object::MapOrigin::Global {
                return Err(format!(
                    "map {name}: global data is one value; its size is the section's"
                ));
            }
            def.max_entries = *n;
        }
        let mut rest = Vec::new();
        for e in &self.entries {
            let Some(def) = obj.maps.iter_mut().find(|m| m.name == e.map && m.readonly) else {
                rest.push(e);
                continue;
            };
            if e.key != [0; 4] || e.value.len() != def.value_size as usize {
                return Err(format!(
                    "map {}: read-only global data is one value of {} bytes at key 0 0 0 0",
                    e.map, def.value_size
                ));
            }
            def.init = Some(e.value.clone());
        }
        Ok(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_takes_a_path_an_optional_program_and_map_lines() {
        let c = XdpConfig::parse("@/x/y.o").unwrap();
        assert_eq!(
            (c.path.as_str(), c.program, c.entries.len()),
            ("/x/y.o", None, 0)
        );
        let c = XdpConfig::parse("@/x/y.o program first").unwrap();
        assert_eq!(c.program.as_deref(), Some("first"));
        assert!(XdpConfig::parse("/x/y.o").unwrap_err().contains("@PATH"));
        assert!(XdpConfig::parse("@").is_err());
        assert!(XdpConfig::parse("@/x.o program ").is_err());
        let c = XdpConfig::parse(
            "@/x.o\nmap ports key 0x00 0x35 0 0 value 10 0 0 0 0 0 0 0\n; map m key 1 value 2",
        )
        .unwrap();
        assert_eq!(c.entries.len(), 2);
        assert_eq!(c.entries[0].key, [0, 0x35, 0, 0]);
        assert_eq!(c.entries[0].value, [10, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            c.entries[1],
            MapEntry {
                map: "m".into(),
                key: vec![1],
                value: vec![2],
                program: None,
            }
        );
        let c = XdpConfig::parse("@/x.o\nmap jmp key 1 0 0 0 value name xdp_udp").unwrap();
        assert_eq!(
            (c.entries[0].value.len(), c.entries[0].program.as_deref()),
            (0, Some("xdp_udp"))
        );
        let c = XdpConfig::parse("@/x.o\nmap m max_entries 16; map n max_entries 0x10").err();
        assert!(c.unwrap().contains("max_entries N"));
        let c = XdpConfig::parse("@/x.o\nmap m max_entries 16\nmap m key 1 value 2").unwrap();
        assert_eq!((c.sizes, c.entries.len()), (vec![("m".into(), 16)], 1));
        for bad in [
            "@/x.o\nmap m max_entries 0",
            "@/x.o\nmap m max_entries",
            "@/x.o\nmap m max_entries 1 2",
            "@/x.o\nmap",
            "@/x.o\nmap m key value 1",
            "@/x.o\nmap m key 1 value",
            "@/x.o\nmap m key 256 value 1",
            "@/x.o\nports 1 2",
        ] {
            assert!(XdpConfig::parse(bad).is_err(), "{bad}");
        }
    }
}
