//! The built-in filters `--hook NAME` knows, registered and linked at start.

use std::sync::Arc;

use pfil::{Dir, Dirs, Filter, PacketKind, Placement, Registry};
use pfil_filters::{BrLockHook, Count, DropUdpPort, EpochHook, MutexHook, Null, RwLockHook};

/// Build the filter for one `--hook` spec. Returns the module name (the
/// part before `:` in the hook name) and the filter.
///
/// # Errors
/// A message naming the unknown spec and the known ones.
pub fn build(spec: &str, max_workers: usize) -> Result<(String, Arc<dyn Filter>), String> {
    let f: Arc<dyn Filter> = match spec {
        "null" => Arc::new(Null),
        "count" => Arc::new(Count::new(max_workers)),
        "mutex" => Arc::new(MutexHook::new()),
        "rwlock" => Arc::new(RwLockHook::new()),
        "brlock" => Arc::new(BrLockHook::new(max_workers)),
        "epoch" => Arc::new(EpochHook::new()),
        s => match s.strip_prefix("drop-udp:") {
            Some(p) => {
                let port: u16 = p.parse().map_err(|_| {
                    format!("--hook {s}: expected drop-udp:PORT with PORT a UDP port (0-65535)")
                })?;
                return Ok((format!("drop-udp-{port}"), Arc::new(DropUdpPort(port))));
            }
            None => {
                return Err(format!(
                    "unknown hook `{s}`: built-in hooks are {}, drop-udp:PORT",
                    pfil_filters::BUILTIN.join(", ")
                ))
            }
        },
    };
    Ok((spec.to_owned(), f))
}

/// Register every `--hook` (named `<module>:<position>`, e.g. `count:1`)
/// and link it to each head in `heads` in direction `dir`, so that the
/// chain walks them in command-line order. Returns the hook names.
///
/// # Errors
/// A message for an unknown hook or a registry refusal.
pub fn link_all(
    reg: &Registry,
    specs: &[String],
    heads: &[&str],
    dir: Dir,
) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let (module, filter) = build(spec, reg.max_workers())?;
        let name = format!("{module}:{}", i + 1);
        reg.add_hook_shared(&name, PacketKind::Ethernet, Dirs::BOTH, filter)
            .map_err(|e| format!("adding hook {name}: {e}"))?;
        // Walk order: Append puts a link last on input, Prepend puts it
        // last on output (pfil's placement is relative to the wire).
        let placement = match dir {
            Dir::In => Placement::Append,
            Dir::Out => Placement::Prepend,
        };
        for head in heads {
            reg.link(head, dir, &name, placement.clone())
                .map_err(|e| format!("linking {name} to {head} {dir}: {e}"))?;
        }
        names.push(name);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfil::Dirs;

    #[test]
    fn links_in_command_line_order_both_directions() {
        let reg = Registry::new();
        reg.register_head("a", PacketKind::Ethernet, Dirs::BOTH)
            .unwrap();
        let specs: Vec<String> = ["count", "null", "drop-udp:53", "epoch"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let names = link_all(&reg, &specs, &["a"], Dir::In).unwrap();
        assert_eq!(names, ["count:1", "null:2", "drop-udp-53:3", "epoch:4"]);
        assert_eq!(reg.chain_names("a", Dir::In).unwrap(), names);

        let reg = Registry::new();
        reg.register_head("a", PacketKind::Ethernet, Dirs::BOTH)
            .unwrap();
        let names = link_all(&reg, &specs, &["a"], Dir::Out).unwrap();
        assert_eq!(reg.chain_names("a", Dir::Out).unwrap(), names);
    }

    #[test]
    fn unknown_hooks_are_named() {
        let e = build("nope", 4).err().unwrap();
        assert!(
            e.contains("unknown hook `nope`") && e.contains("count"),
            "{e}"
        );
        assert!(build("drop-udp:x", 4).is_err());
        for b in pfil_filters::BUILTIN {
            assert!(build(b, 4).is_ok(), "{b}");
        }
    }
}
