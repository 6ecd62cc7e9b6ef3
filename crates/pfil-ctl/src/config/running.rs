//! The running configuration of a registry, read back as a
//! [`Config`]: what `pfilctl show` prints (TOML, hooks and chains in
//! order).

use super::*;
/// The running configuration of a registry, as `pfilctl show` prints it.
#[derive(Clone, Debug)]
pub struct Running {
    /// The generation it was read at.
    pub generation: u64,
    /// The hooks a catalog can rebuild and every head's chains.
    pub config: Config,
    /// Hooks the app built itself (no spec, or a spec of another module
    /// than the hook's name says): a configuration may link them but not
    /// declare them.
    pub app_hooks: Vec<HookInfo>,
}

/// The spec's config if `h` is a hook a configuration can declare: its
/// filter has a spec of the module its name starts with.
pub(super) fn managed_config(h: &HookInfo) -> Option<Option<String>> {
    let spec = h.spec.as_deref()?;
    let (module, _) = check_hook_name(&h.name).ok()?;
    match spec.split_once(':') {
        Some((m, c)) if m == module => Some(Some(c.to_owned())),
        None if spec == module => Some(None),
        _ => None,
    }
}

impl Running {
    /// Read the registry's configuration: hooks, heads, generation, all of
    /// one generation.
    pub fn read(reg: &Registry) -> Running {
        let (generation, hooks, heads) = snapshot(reg);
        let mut config = Config::default();
        let mut app_hooks = Vec::new();
        // Captures are transient: never part of a configuration.
        for h in hooks
            .into_iter()
            .filter(|h| !crate::capture::is_tap(&h.name))
        {
            match managed_config(&h) {
                Some(cfg) => {
                    config.hooks.insert(
                        h.name.clone(),
                        HookDecl {
                            config: cfg,
                            kind: h.kind,
                            dirs: h.dirs,
                        },
                    );
                }
                None => app_hooks.push(h),
            }
        }
        for head in heads {
            let mut decl = HeadDecl::default();
            for d in Dir::ALL {
                decl.chains[d.index()] = head.chains[d.index()]
                    .iter()
                    .filter(|l| !l.quarantined && !crate::capture::is_tap(&l.hook))
                    .map(|l| LinkDecl {
                        hook: l.hook.clone(),
                        fail: l.fail,
                    })
                    .collect();
            }
            config.heads.insert(head.name.clone(), decl);
        }
        Running {
            generation,
            config,
            app_hooks,
        }
    }

    /// The configuration file: `apply` of it changes nothing.
    pub fn to_toml(&self, app: &str) -> String {
        let mut s = format!(
            "# {app}: the running configuration at generation {} (pfilctl show).\n\
             # `pfilctl apply FILE` makes the running configuration equal to FILE.\n",
            self.generation
        );
        for h in &self.app_hooks {
            s += &format!(
                "# hook {} ({}, {}) is the app's own: a configuration links it, never declares it\n",
                quote(&h.name),
                h.kind,
                h.dirs
            );
        }
        s += &self.config.to_toml();
        s
    }
}

/// Hooks and heads of one generation (read again while writers publish
/// in between; after many tries, the first generation read, which makes
/// a plan based on it conflict rather than apply a mixed view).
pub(crate) fn snapshot(reg: &Registry) -> (u64, Vec<HookInfo>, Vec<pfil::HeadInfo>) {
    let first = reg.generation();
    for _ in 0..100 {
        let g = reg.generation();
        let hooks = reg.hooks();
        let heads = reg.heads();
        if reg.generation() == g {
            return (g, hooks, heads);
        }
    }
    (first, reg.hooks(), reg.heads())
}

/// A TOML basic string.
pub(super) fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            c if c.is_control() => q.push_str(&format!("\\u{:04X}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// A TOML key: bare when it can be, quoted otherwise.
pub(super) fn key(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        s.to_owned()
    } else {
        quote(s)
    }
}

impl Config {
    /// The configuration as a file ([`Config::parse`] reads it back equal).
    pub fn to_toml(&self) -> String {
        let mut s = format!("version = {CONFIG_VERSION}\n");
        for (name, h) in &self.hooks {
            s += &format!("\n[hooks.{}]\n", key(name));
            if let Some(c) = &h.config {
                s += &format!("config = {}\n", quote(c));
            }
            if h.kind != PacketKind::Ethernet {
                s += &format!("kind = {}\n", quote(&h.kind.to_string()));
            }
            if h.dirs != Dirs::BOTH {
                s += &format!("dirs = {}\n", quote(&h.dirs.to_string()));
            }
        }
        for (name, h) in &self.heads {
            s += &format!("\n[heads.{}]\n", key(name));
            for d in Dir::ALL {
                let links: Vec<String> = h.chains[d.index()]
                    .iter()
                    .map(|l| match l.fail {
                        FailMode::Open => quote(&l.hook),
                        FailMode::Closed => {
                            format!("{{ hook = {}, fail = \"closed\" }}", quote(&l.hook))
                        }
                    })
                    .collect();
                s += &format!("{d} = [{}]\n", links.join(", "));
            }
        }
        s
    }
}
