//! The filters `--hook SPEC` knows, from one [`Catalog`]: pfil-filters'
//! built-ins plus the lock-study hooks of pfil-bench. The help text lists
//! the same catalog, so the names are written once.

use std::sync::{Arc, OnceLock};

use pfil::{Dir, Dirs, Filter, PacketKind, Placement, Registry};
use pfil_filters::{BuildCtx, Catalog};
use pfil_port::Outboxes;

/// The workers' outboxes: every loop drains them, and the filters the
/// catalog builds send consumed frames through them (an `xdp` hook's
/// `XDP_TX` and `XDP_REDIRECT`).
static OUTBOXES: OnceLock<Arc<Outboxes>> = OnceLock::new();
/// Requests one worker's outbox holds.
const OUTBOX_CAPACITY: usize = 4096;

/// Make the outboxes for a registry of `workers` slots (once; later
/// calls return the first ones).
pub fn init_outboxes(workers: usize) -> Arc<Outboxes> {
    OUTBOXES
        .get_or_init(|| Arc::new(Outboxes::new(workers, OUTBOX_CAPACITY)))
        .clone()
}

/// The outboxes, once made.
pub fn outboxes() -> Option<Arc<Outboxes>> {
    OUTBOXES.get().cloned()
}

/// pfild's catalog: [`Catalog::builtin`] and the lock-study hooks (`mutex`,
/// `rwlock`, `brlock`, `epoch`), which benchmarks link with `--hook`;
/// with the workers' outboxes once they are made.
pub fn catalog() -> Catalog {
    let mut c = Catalog::builtin();
    pfil_bench::lockstudy::register(&mut c).expect("lock-study names are not built-in names");
    match outboxes() {
        Some(ob) => c.with_outboxes(ob),
        None => c,
    }
}

/// Build the filter for one `--hook` spec. Returns its module (the hook
/// name's first part, e.g. `drop-udp` for `drop-udp:53`, so that
/// `pfilctl set drop-udp:1 --set 5353` rebuilds it) and the filter.
///
/// # Errors
/// A message naming the unknown module and the known ones, or the bad
/// config and what was expected.
pub fn build(
    catalog: &Catalog,
    spec: &str,
    max_workers: usize,
) -> Result<(String, Arc<dyn Filter>), String> {
    let f = catalog
        .create(spec, &BuildCtx::new(max_workers))
        .map_err(|e| format!("--hook: {e}"))?;
    let module = spec.split_once(':').map_or(spec, |(m, _)| m);
    Ok((module.to_owned(), f))
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
    let catalog = catalog();
    let mut names = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let (module, filter) = build(&catalog, spec, reg.max_workers())?;
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

/// Apply the configuration file `path` (`--config`) to the registry: the
/// format and the semantics of `pfilctl apply`, in one transaction.
/// Returns a line saying what was done.
///
/// # Errors
/// The file's name with what is wrong and where (line and column).
pub fn apply_file(reg: &Registry, path: &std::path::Path) -> Result<String, String> {
    let at = |e: &dyn std::fmt::Display| format!("--config {}: {e}", path.display());
    let text = pfil_ctl::config::read_file(path).map_err(|e| at(&e))?;
    let cfg = pfil_ctl::config::Config::parse(&text).map_err(|e| at(&e))?;
    let plan = cfg.plan(reg, &catalog(), None).map_err(|e| at(&e))?;
    let n = plan.changes().len();
    let generation = plan
        .commit(reg, false)
        .map_err(|e| at(&e))?
        .map_or(reg.generation(), |c| c.generation);
    Ok(format!(
        "configuration {}: {n} change(s), generation {generation} (pfilctl show prints it)",
        path.display()
    ))
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
        assert_eq!(names, ["count:1", "null:2", "drop-udp:3", "epoch:4"]);
        assert_eq!(reg.chain_names("a", Dir::In).unwrap(), names);

        let reg = Registry::new();
        reg.register_head("a", PacketKind::Ethernet, Dirs::BOTH)
            .unwrap();
        let names = link_all(&reg, &specs, &["a"], Dir::Out).unwrap();
        assert_eq!(reg.chain_names("a", Dir::Out).unwrap(), names);
    }

    #[test]
    fn specs_with_any_config_make_valid_hook_names() {
        let reg = Registry::new();
        reg.register_head("a", PacketKind::Ethernet, Dirs::BOTH)
            .unwrap();
        let long = format!(
            "acl:{}pass all",
            "drop proto udp to any port 53; ".repeat(4)
        );
        let specs = vec![
            "acl:drop proto tcp from 10.0.0.0/8 to any port 22; pass all".to_string(),
            long,
        ];
        // Hook names are MODULE:POSITION whatever the config holds (rule
        // text, paths), so they are always valid and `pfilctl set` can
        // rebuild them.
        let names = link_all(&reg, &specs, &["a"], Dir::In).unwrap();
        assert_eq!(names, ["acl:1", "acl:2"]);
        assert_eq!(
            reg.hook("acl:1").unwrap().spec.as_deref(),
            Some(specs[0].as_str()),
            "the spec is kept in the filter"
        );
    }

    #[test]
    fn unknown_hooks_are_named() {
        let c = catalog();
        let e = build(&c, "nope", 4).err().unwrap();
        assert!(
            e.contains("unknown hook `nope`") && e.contains("count") && e.contains("epoch"),
            "{e}"
        );
        let e = build(&c, "drop-udp:x", 4).err().unwrap();
        assert!(e.contains("drop-udp:PORT"), "{e}");
        for m in c.modules() {
            assert!(build(&c, m.example(), 4).is_ok(), "{}", m.example());
        }
    }

    #[test]
    fn every_hook_the_readme_shows_builds() {
        let readme = include_str!("../../../README.md");
        let c = catalog();
        let specs: Vec<&str> = readme
            .split("--hook")
            .skip(1)
            .filter_map(|rest| rest.split_whitespace().next())
            .map(|w| w.trim_matches(|ch: char| ch == '`' || ch == ',' || ch == ';'))
            .filter(|w| {
                !w.is_empty()
                    && w.chars().all(|ch| {
                        ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' || ch == ':'
                    })
            })
            .collect();
        assert!(
            specs.contains(&"count") && specs.contains(&"drop-udp:53"),
            "{specs:?}"
        );
        for spec in specs {
            assert!(build(&c, spec, 2).is_ok(), "README's --hook {spec}");
        }
    }
}
