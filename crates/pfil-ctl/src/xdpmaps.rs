//! The maps of `xdp` hooks, for operators (PROTOCOL.md, `map`,
//! `map_update`, `map_delete`): list them, dump them, look up, update
//! and delete entries with keys and values as bytes, the way bpftool
//! takes and shows them.
//!
//! Keys and values go in as arrays of integers 0-255 and come out as
//! arrays of `"0xNN"` strings (bpftool's `--json`). A per-CPU map's
//! value comes out as `values`, one `{cpu, value}` per worker; an update
//! with one worker's value sets every worker's, as bpftool does.

use pfil::Registry;
use serde::Deserialize;
use serde_json::{json, Map as JsonMap, Value};

use crate::rpc::{code, registry_error, RpcError};
use pfil_xdp::Map;

/// Params of `map`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MapParams {
    hook: String,
    #[serde(default)]
    map: Option<String>,
    #[serde(default)]
    key: Option<Vec<u8>>,
    #[serde(default)]
    limit: Option<usize>,
}

/// Entries one `map` dump lists by default.
pub const DEFAULT_MAP_LIMIT: usize = 1000;
/// Most entries one `map` dump lists.
pub const MAX_MAP_LIMIT: usize = 100_000;

/// Params of `map_update` and `map_delete`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MapWriteParams {
    hook: String,
    map: String,
    key: Vec<u8>,
    #[serde(default)]
    value: Option<Vec<u8>>,
    /// Instead of `value`, for a prog array: the program's name.
    #[serde(default)]
    program: Option<String>,
    #[serde(default)]
    flags: Option<String>,
}

pub(crate) fn bytes(b: &[u8]) -> Value {
    Value::Array(
        b.iter()
            .map(|x| Value::String(format!("0x{x:02x}")))
            .collect(),
    )
}

fn map_error(name: &str, e: &pfil_xdp::MapError) -> RpcError {
    RpcError::new(code::REGISTRY, "map_error", format!("map `{name}`: {e}"))
}

/// The xdp filter of `hook` and, if `name` is given, its map `name`.
pub(crate) fn with_map<T>(
    reg: &Registry,
    hook: &str,
    name: Option<&str>,
    f: impl FnOnce(&pfil_xdp::XdpProgram, Option<&Map>) -> Result<T, RpcError>,
) -> Result<T, RpcError> {
    let filter = reg.hook_filter(hook).map_err(|e| registry_error(&e))?;
    let Some(xdp) = filter
        .as_any()
        .and_then(|a| a.downcast_ref::<pfil_filters::Xdp>())
    else {
        return Err(RpcError::new(
            code::REGISTRY,
            "not_xdp",
            format!("hook `{hook}` has no maps: its filter is not `xdp`"),
        ));
    };
    let prog = xdp.program();
    match name {
        None => f(prog, None),
        Some(n) => match prog.map(n) {
            Some(m) => f(prog, Some(m)),
            None => {
                let names: Vec<&str> = prog.maps().iter().map(|m| m.name()).collect();
                Err(RpcError::new(
                    code::REGISTRY,
                    "no_such_map",
                    format!(
                        "hook `{hook}` has no map `{n}` (its maps: {})",
                        names.join(", ")
                    ),
                ))
            }
        },
    }
}

fn entry(m: &Map, k: &[u8], v: &[u8]) -> Value {
    if m.kind().per_cpu() {
        let stride = v.len() / m.workers().max(1);
        let values: Vec<Value> = v
            .chunks(stride.max(1))
            .enumerate()
            .map(|(cpu, c)| json!({"cpu": cpu, "value": bytes(&c[..m.value_size().min(c.len())])}))
            .collect();
        json!({"key": bytes(k), "values": values})
    } else {
        json!({"key": bytes(k), "value": bytes(v)})
    }
}

fn describe(m: &Map) -> Value {
    json!({
        "name": m.name(),
        "type": m.kind().name(),
        "key_size": m.key_size(),
        "value_size": m.value_size(),
        "max_entries": m.max_entries(),
        "flags": m.flags(),
        "not_made": m.not_made(),
    })
}

/// `map`: list the maps of a hook, dump one, or look up one key.
pub(crate) fn read(reg: &Registry, p: MapParams) -> Result<Value, RpcError> {
    let generation = reg.generation();
    with_map(reg, &p.hook, p.map.as_deref(), |prog, m| match (m, p.key) {
        (None, _) => {
            let maps: Vec<Value> = prog.maps().iter().map(|m| describe(m)).collect();
            let mut r = json!({"generation": generation, "hook": p.hook, "program": prog.name(), "maps": maps});
            // A program with a prog array: what its entries may name.
            let programs: Vec<Value> = prog
                .tail_programs()
                .enumerate()
                .map(|(i, (name, t))| json!({"number": i + 1, "name": name, "error": t.err()}))
                .collect();
            if !programs.is_empty() {
                r["programs"] = Value::Array(programs);
            }
            Ok(r)
        }
        (Some(m), None) => {
            m.check_entries().map_err(|e| map_error(m.name(), &e))?;
            let limit = p.limit.unwrap_or(DEFAULT_MAP_LIMIT);
            if limit > MAX_MAP_LIMIT {
                return Err(RpcError::params(format!(
                    "limit: at most {MAX_MAP_LIMIT} entries a reply, not {limit}"
                )));
            }
            let mut keys = m.keys();
            let total = keys.len();
            // Arrays list their indices in order already; the others in
            // key byte order, so a dump is stable.
            if !matches!(
                m.kind(),
                pfil_xdp::MapType::Array
                    | pfil_xdp::MapType::PercpuArray
                    | pfil_xdp::MapType::Devmap
                    | pfil_xdp::MapType::Cpumap
            ) {
                keys.sort();
            }
            keys.truncate(limit);
            let rows: Vec<Value> = keys
                .iter()
                .filter_map(|k| Some(entry(m, k, &m.lookup(k).ok().flatten()?)))
                .collect();
            Ok(
                json!({"generation": generation, "hook": p.hook, "map": describe(m), "total": total, "entries": rows}),
            )
        }
        (Some(m), Some(k)) => match m.lookup(&k).map_err(|e| map_error(m.name(), &e))? {
            Some(v) => Ok(
                json!({"generation": generation, "hook": p.hook, "map": describe(m), "entries": [entry(m, &k, &v)]}),
            ),
            None => Err(RpcError::new(
                code::REGISTRY,
                "no_such_key",
                format!("map `{}`: no entry for key {}", m.name(), bytes(&k)),
            )),
        },
    })
}

/// `map_update` and `map_delete`.
pub(crate) fn write(reg: &Registry, method: &str, p: MapWriteParams) -> Result<Value, RpcError> {
    with_map(reg, &p.hook, Some(&p.map), |prog, m| {
        let Some(m) = m else {
            return Err(RpcError::params("map: missing"));
        };
        if method == "map_delete" {
            if p.value.is_some() || p.program.is_some() || p.flags.is_some() {
                return Err(RpcError::params("map_delete takes hook, map and key"));
            }
            m.delete(&p.key).map_err(|e| match e {
                pfil_xdp::MapError::NotFound => RpcError::new(
                    code::REGISTRY,
                    "no_such_key",
                    format!("map `{}`: no entry for key {}", m.name(), bytes(&p.key)),
                ),
                e => map_error(m.name(), &e),
            })?;
            return Ok(json!({"hook": p.hook, "map": m.name(), "deleted": bytes(&p.key)}));
        }
        let prog_array = m.kind() == pfil_xdp::MapType::ProgArray;
        let tail_error = |e: String| {
            RpcError::new(
                code::REGISTRY,
                "map_error",
                format!("map `{}`: {e}", m.name()),
            )
        };
        let mut value = match (p.value, p.program) {
            (Some(v), None) => v,
            (None, Some(name)) if prog_array => prog
                .tail_number(&name)
                .map_err(tail_error)?
                .to_le_bytes()
                .to_vec(),
            (None, Some(_)) => {
                return Err(RpcError::params(format!(
                    "program: map `{}` is a {}, not a prog_array",
                    m.name(),
                    m.kind().name()
                )))
            }
            (Some(_), Some(_)) => {
                return Err(RpcError::params("map_update: value or program, not both"))
            }
            (None, None) => return Err(RpcError::params("map_update: missing value")),
        };
        if prog_array {
            prog.check_tail_value(&value).map_err(tail_error)?;
        }
        let flags = match p.flags.as_deref() {
            None | Some("any") => pfil_xdp::maps::BPF_ANY,
            Some("noexist") => pfil_xdp::maps::BPF_NOEXIST,
            Some("exist") => pfil_xdp::maps::BPF_EXIST,
            Some(f) => {
                return Err(RpcError::params(format!(
                    "flags: any, noexist or exist, not `{f}`"
                )))
            }
        };
        if m.kind().per_cpu() && value.len() == m.value_size() {
            // One worker's value: every worker gets it (bpftool does so).
            let stride = m.user_value_size() / m.workers();
            value.resize(stride, 0);
            value = value.repeat(m.workers());
        }
        m.update(&p.key, &value, flags)
            .map_err(|e| map_error(m.name(), &e))?;
        Ok(json!({"hook": p.hook, "map": m.name(), "updated": bytes(&p.key)}))
    })
}

/// Parse `params` for a map method.
pub(crate) fn call(
    reg: &Registry,
    method: &str,
    p: JsonMap<String, Value>,
) -> Result<Value, RpcError> {
    let v = Value::Object(p);
    if method == "map" {
        let p: MapParams =
            serde_json::from_value(v).map_err(|e| RpcError::params(format!("{method}: {e}")))?;
        read(reg, p)
    } else {
        let p: MapWriteParams =
            serde_json::from_value(v).map_err(|e| RpcError::params(format!("{method}: {e}")))?;
        write(reg, method, p)
    }
}

/// The bytes after `word` in `op` up to the next keyword.
fn bytes_after(op: &[String], word: &str) -> Result<Option<Vec<u8>>, String> {
    let Some(i) = op.iter().position(|t| t == word) else {
        return Ok(None);
    };
    let v: Vec<u8> = op[i + 1..]
        .iter()
        .take_while(|t| !matches!(t.as_str(), "key" | "value" | "any" | "noexist" | "exist"))
        .map(|t| pfil_xdp::config::parse_byte(t))
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(format!("`{word}` needs bytes after it"));
    }
    Ok(Some(v))
}

/// The request for `pfilctl map HOOK [NAME OP...]`.
pub(crate) fn request(
    hook: &str,
    name: Option<&str>,
    op: &[String],
    limit: Option<usize>,
) -> Result<(&'static str, Value), String> {
    let Some(name) = name else {
        return Ok(("map", json!({"hook": hook})));
    };
    let key = bytes_after(op, "key")?;
    // A prog array's entry: `value name PROG`, as bpftool's.
    let program = op
        .windows(3)
        .find(|w| w[0] == "value" && w[1] == "name")
        .map(|w| w[2].clone());
    let value = if program.is_some() {
        None
    } else {
        bytes_after(op, "value")?
    };
    let usage = "map HOOK NAME dump | lookup key BYTES | update key BYTES (value BYTES | value name PROG) [any|noexist|exist] | delete key BYTES | event_pipe";
    match op.first().map(String::as_str) {
        Some("dump") | None if op.len() <= 1 => {
            let mut p = json!({"hook": hook, "map": name});
            if let Some(l) = limit {
                p["limit"] = json!(l);
            }
            Ok(("map", p))
        }
        Some("lookup") => {
            let key = key.ok_or(format!("lookup needs `key BYTES` ({usage})"))?;
            Ok(("map", json!({"hook": hook, "map": name, "key": key})))
        }
        Some("update") => {
            let key = key.ok_or(format!("update needs `key BYTES` ({usage})"))?;
            let flag = op
                .iter()
                .skip(1)
                .find(|t| matches!(t.as_str(), "any" | "noexist" | "exist"));
            let mut p = json!({"hook": hook, "map": name, "key": key});
            match (value, program) {
                (Some(v), _) => p["value"] = json!(v),
                (None, Some(prog)) => p["program"] = json!(prog),
                (None, None) => return Err(format!("update needs `value BYTES` ({usage})")),
            }
            if let Some(f) = flag {
                p["flags"] = json!(f);
            }
            Ok(("map_update", p))
        }
        // A perf event array's or ring buffer's records, as they come
        // (the loop is the client's: `xdpevents::follow`).
        Some("event_pipe") => {
            crate::xdpevents::count_in(op)?;
            Ok(("map_events", json!({"hook": hook, "map": name})))
        }
        Some("delete") => {
            let key = key.ok_or(format!("delete needs `key BYTES` ({usage})"))?;
            Ok(("map_delete", json!({"hook": hook, "map": name, "key": key})))
        }
        _ => Err(format!("expected {usage}")),
    }
}

fn hexes(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// What `pfilctl map` prints: the list of maps, or bpftool-style entries.
pub(crate) fn human(r: &Value) -> String {
    let mut o = String::new();
    if let Some(maps) = r["maps"].as_array() {
        o.push_str(&format!(
            "hook {} program {}:\n",
            r["hook"].as_str().unwrap_or(""),
            r["program"].as_str().unwrap_or("")
        ));
        for m in maps {
            o.push_str(&format!(
                "  {}  {}  key {}B  value {}B  max_entries {}  flags {:#x}",
                m["name"].as_str().unwrap_or(""),
                m["type"].as_str().unwrap_or(""),
                m["key_size"],
                m["value_size"],
                m["max_entries"],
                m["flags"].as_u64().unwrap_or(0)
            ));
            if let Some(why) = m["not_made"].as_str() {
                o.push_str(&format!("  (not made: {why})"));
            }
            o.push('\n');
        }
        if let Some(progs) = r["programs"].as_array() {
            o.push_str("programs a prog_array entry names (value N, or value name PROG):\n");
            for p in progs {
                o.push_str(&format!(
                    "  {}  {}",
                    p["number"],
                    p["name"].as_str().unwrap_or("")
                ));
                if let Some(e) = p["error"].as_str() {
                    o.push_str(&format!("  (not loaded: {e})"));
                }
                o.push('\n');
            }
        }
        return o;
    }
    if let Some(entries) = r["entries"].as_array() {
        for e in entries {
            o.push_str(&format!("key: {}", hexes(&e["key"])));
            if let Some(vals) = e["values"].as_array() {
                o.push('\n');
                for v in vals {
                    o.push_str(&format!(
                        "  value (CPU {:02}): {}\n",
                        v["cpu"],
                        hexes(&v["value"])
                    ));
                }
            } else {
                o.push_str(&format!("  value: {}\n", hexes(&e["value"])));
            }
        }
        let total = r["total"].as_u64().unwrap_or(entries.len() as u64);
        o.push_str(&format!(
            "Found {total} element{}{}\n",
            if total == 1 { "" } else { "s" },
            if total > entries.len() as u64 {
                format!(" ({} listed: --limit N for more)", entries.len())
            } else {
                String::new()
            }
        ));
        return o;
    }
    for (word, field) in [("updated", "updated"), ("deleted", "deleted")] {
        if r.get(field).is_some() {
            o.push_str(&format!(
                "{word} key {} in map {}\n",
                hexes(&r[field]),
                r["map"].as_str().unwrap_or("")
            ));
        }
    }
    o
}
