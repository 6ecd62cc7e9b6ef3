//! The configuration file: what `pfilctl show` prints, `pfilctl apply`
//! and `pfild --config` read. TOML; the format is documented in
//! PROTOCOL.md ("The configuration file").
//!
//! ```toml
//! version = 1
//!
//! [hooks."drop-udp:dns"]      # MODULE:INSTANCE, built from the catalog
//! config = "53"               # the module's config (omitted: none)
//! # kind = "ethernet"         # default
//! # dirs = "in,out"           # default
//!
//! [hooks."count:edge"]
//!
//! [heads.syn0]                # heads belong to the app: they must exist
//! in = ["drop-udp:dns", { hook = "count:edge", fail = "closed" }]
//! out = []                    # walk order; a chain not written is empty
//! ```
//!
//! A configuration is the **whole** configuration: applying it makes the
//! running registry equal to it in one transaction, based on the
//! generation it was planned from ([`Config::plan`], [`Plan::commit`]).
//! Hooks it does not declare are removed, chains it does not write are
//! emptied, except hooks the app built itself (no
//! [`spec`](pfil::Filter::spec)): those are never declared, never removed,
//! and chains may name them. Links kept from the running chains keep their
//! counters: the plan unlinks and links only what differs (the longest
//! common subsequence of each chain stays). A hook whose config changed
//! gets a new filter under its links, in the same transaction; an acl's
//! is derived from the running one ([`pfil::Filter::derive`]) and keeps
//! the hit counters of the rules both rulesets have.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use pfil::{Dir, Dirs, FailMode, HookInfo, LinkOptions, Op, PacketKind, Placement, Registry};
use pfil_filters::{BuildCtx, Catalog};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use toml::Spanned;

mod diff;

/// The `version` a configuration file has (optional in a file; `show`
/// writes it).
pub const CONFIG_VERSION: i64 = 1;

/// How long [`Plan::commit`] waits for the registry to let go of the
/// filters it replaced with derived ones, to free them itself.
const RETIRE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A configuration: hooks by name and chains by head, as declared.
#[derive(Clone, Debug, Default)]
pub struct Config {
    hooks: BTreeMap<String, HookDecl>,
    heads: BTreeMap<String, HeadDecl>,
    /// Where things were written, for errors found after parsing.
    spans: Spans,
}

/// Two configurations are equal when they declare the same hooks and
/// chains: where they were written does not matter, nor whether a head
/// with empty chains is written.
impl PartialEq for Config {
    fn eq(&self, other: &Config) -> bool {
        let empty = HeadDecl::default();
        self.hooks == other.hooks
            && self.heads.keys().chain(other.heads.keys()).all(|h| {
                self.heads.get(h).unwrap_or(&empty) == other.heads.get(h).unwrap_or(&empty)
            })
    }
}

impl Eq for Config {}

#[derive(Clone, Debug, Default)]
struct Spans {
    src: Option<Arc<str>>,
    hooks: HashMap<String, Range<usize>>,
    configs: HashMap<String, Range<usize>>,
    heads: HashMap<String, Range<usize>>,
    links: HashMap<(String, Dir, usize), Range<usize>>,
}

/// A declared hook.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HookDecl {
    /// The module's config (`53` for `drop-udp:53`), `None` for modules
    /// without one.
    pub config: Option<String>,
    /// The packet kind (default Ethernet).
    pub kind: PacketKind,
    /// The directions it may be linked in (default both).
    pub dirs: Dirs,
}

/// The chains of one head, in walk order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeadDecl {
    /// `[in, out]`, indexed by [`Dir::index`].
    pub chains: [Vec<LinkDecl>; 2],
}

/// One link of a chain.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkDecl {
    /// The hook.
    pub hook: String,
    /// What a panic of the hook does to the packet (default open).
    pub fail: FailMode,
}

/// A configuration that cannot be read or does not fit the running
/// registry, with where in the file (when it came from a file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line, if known.
    pub line: Option<usize>,
    /// 1-based column (in characters), if known.
    pub column: Option<usize>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: {}", self.message),
            (Some(l), None) => write!(f, "line {l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why a configuration was not applied. Nothing was changed in any case.
#[derive(Debug)]
#[non_exhaustive]
pub enum ApplyError {
    /// The file is malformed or does not fit the registry.
    Config(ConfigError),
    /// The registry changed since the generation the plan was based on.
    Conflict {
        /// The generation the plan was made from (or the caller expected).
        expected: u64,
        /// The generation that is current.
        current: u64,
    },
    /// The registry refused an operation of the plan.
    Registry {
        /// Where in the file the refused operation comes from.
        at: ConfigError,
        /// The registry's error.
        error: pfil::Error,
    },
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyError::Config(e) => e.fmt(f),
            ApplyError::Conflict { expected, current } => write!(
                f,
                "the configuration changed meanwhile (planned from generation {expected}, \
                 current is {current}): nothing was applied; show and plan again"
            ),
            ApplyError::Registry { at, .. } => at.fmt(f),
        }
    }
}

impl std::error::Error for ApplyError {}

impl From<ConfigError> for ApplyError {
    fn from(e: ConfigError) -> ApplyError {
        ApplyError::Config(e)
    }
}

// ---- reading ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    version: Option<Spanned<i64>>,
    #[serde(default)]
    hooks: BTreeMap<Spanned<String>, Spanned<RawHook>>,
    #[serde(default)]
    heads: BTreeMap<Spanned<String>, Spanned<RawHead>>,
    /// pfild's own settings (pfild.toml(5)): read by pfild, taken as
    /// they are here.
    #[allow(dead_code)]
    pfild: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    config: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    dirs: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHead {
    #[serde(rename = "in", default)]
    input: Vec<Spanned<RawLink>>,
    #[serde(default)]
    out: Vec<Spanned<RawLink>>,
}

struct RawLink {
    hook: String,
    fail: FailMode,
}

impl<'de> Deserialize<'de> for RawLink {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawLink, D::Error> {
        struct V;
        const EXPECTED: &str = "a hook name or a table { hook = NAME, fail = \"open\"|\"closed\" }";
        impl<'de> Visitor<'de> for V {
            type Value = RawLink;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawLink, E> {
                Ok(RawLink {
                    hook: s.to_owned(),
                    fail: FailMode::Open,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<RawLink, A::Error> {
                let (mut hook, mut fail) = (None, FailMode::Open);
                while let Some(k) = m.next_key::<String>()? {
                    match k.as_str() {
                        "hook" => hook = Some(m.next_value::<String>()?),
                        "fail" => {
                            fail = match m.next_value::<String>()?.as_str() {
                                "open" => FailMode::Open,
                                "closed" => FailMode::Closed,
                                other => {
                                    return Err(de::Error::custom(format!(
                                        "fail: expected \"open\" or \"closed\", got {other:?}"
                                    )))
                                }
                            }
                        }
                        other => return Err(de::Error::unknown_field(other, &["hook", "fail"])),
                    }
                }
                let hook = hook.ok_or_else(|| de::Error::missing_field("hook"))?;
                Ok(RawLink { hook, fail })
            }
        }
        d.deserialize_any(V)
    }
}

fn line_col(src: &str, at: usize) -> (usize, usize) {
    let at = at.min(src.len());
    let before = &src[..src.floor_char_boundary_compat(at)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// `str::floor_char_boundary` is unstable; this is the same for our use.
trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

impl Spans {
    fn error(&self, span: Option<&Range<usize>>, message: String) -> ConfigError {
        match (&self.src, span) {
            (Some(src), Some(s)) => {
                let (line, column) = line_col(src, s.start);
                ConfigError {
                    line: Some(line),
                    column: Some(column),
                    message,
                }
            }
            _ => ConfigError {
                line: None,
                column: None,
                message,
            },
        }
    }
}

/// Longest configuration text [`Config::parse`] reads (the control
/// protocol's request limit too).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
/// Most hooks a configuration declares.
pub const MAX_HOOKS: usize = 4096;
/// Most links a configuration's chain (one head, one direction) holds.
pub const MAX_CHAIN_LINKS: usize = 1024;

/// Reads a configuration file (`-`: standard input) of at most
/// [`MAX_CONFIG_BYTES`] without reading more than that.
///
/// # Errors
/// The read error, or the limit, with the file's name.
pub fn read_file(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let mut text = String::new();
    let limit = MAX_CONFIG_BYTES as u64 + 1;
    let r = if path.as_os_str() == "-" {
        std::io::stdin().take(limit).read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_string(&mut text))
    };
    r.map_err(|e| format!("reading {}: {e}", path.display()))?;
    if text.len() > MAX_CONFIG_BYTES {
        return Err(format!(
            "reading {}: over the limit of {MAX_CONFIG_BYTES} bytes",
            path.display()
        ));
    }
    Ok(text)
}

impl Config {
    /// Read a configuration file.
    ///
    /// # Errors
    /// Over [`MAX_CONFIG_BYTES`], [`MAX_HOOKS`] or [`MAX_CHAIN_LINKS`];
    /// malformed TOML, unknown keys, wrong types, a bad kind, direction
    /// set or fail mode, a link named twice in a chain, a link in a
    /// direction its hook does not declare: each with its line and column.
    /// Whether hooks build and heads exist is checked by [`Config::plan`].
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let src: Arc<str> = Arc::from(text);
        let mut spans = Spans {
            src: Some(src.clone()),
            ..Spans::default()
        };
        if text.len() > MAX_CONFIG_BYTES {
            return Err(spans.error(
                None,
                format!(
                    "the configuration is {} bytes, over the limit of {MAX_CONFIG_BYTES} bytes",
                    text.len()
                ),
            ));
        }
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let at = e.span();
            spans.error(at.as_ref(), e.message().to_owned())
        })?;
        if let Some(v) = &raw.version {
            if *v.get_ref() != CONFIG_VERSION {
                return Err(spans.error(
                    Some(&v.span()),
                    format!(
                        "version: this pfil-ctl reads version {CONFIG_VERSION}, the file is version {}",
                        v.get_ref()
                    ),
                ));
            }
        }
        let mut hooks = BTreeMap::new();
        for (i, (name, h)) in raw.hooks.into_iter().enumerate() {
            let span = name.span();
            if i == MAX_HOOKS {
                return Err(spans.error(
                    Some(&span),
                    format!("more than {MAX_HOOKS} hooks, the limit of a configuration"),
                ));
            }
            let name = name.into_inner();
            let h = h.into_inner();
            check_hook_name(&name).map_err(|m| spans.error(Some(&span), m))?;
            let kind = match &h.kind {
                None => PacketKind::Ethernet,
                Some(k) => k.get_ref().parse().map_err(|e: pfil::Error| {
                    spans.error(Some(&k.span()), format!("hooks.\"{name}\".kind: {e}"))
                })?,
            };
            let dirs = match &h.dirs {
                None => Dirs::BOTH,
                Some(d) => d.get_ref().parse().map_err(|e: pfil::Error| {
                    spans.error(Some(&d.span()), format!("hooks.\"{name}\".dirs: {e}"))
                })?,
            };
            if let Some(c) = &h.config {
                spans.configs.insert(name.clone(), c.span());
            }
            spans.hooks.insert(name.clone(), span);
            let config = h.config.map(Spanned::into_inner);
            hooks.insert(name, HookDecl { config, kind, dirs });
        }
        let mut heads = BTreeMap::new();
        for (name, h) in raw.heads {
            let span = name.span();
            let name = name.into_inner();
            let h = h.into_inner();
            let mut decl = HeadDecl::default();
            for (d, list) in [(Dir::In, h.input), (Dir::Out, h.out)] {
                let mut seen = BTreeSet::new();
                for (i, l) in list.into_iter().enumerate() {
                    let lspan = l.span();
                    if i == MAX_CHAIN_LINKS {
                        return Err(spans.error(
                            Some(&lspan),
                            format!(
                                "heads.{}.{d}: more than {MAX_CHAIN_LINKS} links, the limit of a chain",
                                key(&name)
                            ),
                        ));
                    }
                    let l = l.into_inner();
                    if !seen.insert(l.hook.clone()) {
                        return Err(spans.error(
                            Some(&lspan),
                            format!(
                                "heads.{}.{d}: `{}` is linked twice in one chain",
                                key(&name),
                                l.hook
                            ),
                        ));
                    }
                    if let Some(hd) = hooks.get(&l.hook) {
                        if !hd.dirs.contains(d) {
                            return Err(spans.error(
                                Some(&lspan),
                                format!(
                                    "heads.{}.{d}: hook `{}` declares dirs = \"{}\", not {d}",
                                    key(&name),
                                    l.hook,
                                    hd.dirs
                                ),
                            ));
                        }
                    }
                    spans.links.insert((name.clone(), d, i), lspan);
                    decl.chains[d.index()].push(LinkDecl {
                        hook: l.hook,
                        fail: l.fail,
                    });
                }
            }
            spans.heads.insert(name.clone(), span);
            heads.insert(name, decl);
        }
        Ok(Config {
            hooks,
            heads,
            spans,
        })
    }

    /// The declared hooks, by name.
    pub fn hooks(&self) -> &BTreeMap<String, HookDecl> {
        &self.hooks
    }

    /// The declared heads, by name.
    pub fn heads(&self) -> &BTreeMap<String, HeadDecl> {
        &self.heads
    }
}

fn check_hook_name(name: &str) -> Result<(&str, &str), String> {
    match name.split_once(':') {
        Some((m, i)) if !m.is_empty() && !i.is_empty() => Ok((m, i)),
        _ => Err(format!(
            "hooks.\"{name}\": a hook is named MODULE:INSTANCE (e.g. \"count:edge\"), the module picking the filter"
        )),
    }
}

// ---- the running configuration ----

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
fn managed_config(h: &HookInfo) -> Option<Option<String>> {
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
fn quote(s: &str) -> String {
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
fn key(s: &str) -> String {
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

// ---- planning ----

/// One change of a plan, in the order the transaction makes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// A hook is built and registered.
    AddHook {
        /// Its name.
        hook: String,
        /// The catalog spec it is built from.
        spec: String,
    },
    /// A hook's filter is replaced by one with a new config, under its
    /// links: derived from the running filter when that can carry over
    /// what it keeps (an acl: the hit counters of the rules both rulesets
    /// have), else built from the catalog.
    SetHook {
        /// Its name.
        hook: String,
        /// The spec it runs now.
        from: String,
        /// The spec it will run.
        to: String,
    },
    /// A hook is unlinked everywhere and unregistered.
    RemoveHook {
        /// Its name.
        hook: String,
    },
    /// A link is removed.
    Unlink {
        /// The head.
        head: String,
        /// `in` or `out`.
        dir: String,
        /// The hook.
        hook: String,
    },
    /// A link is made.
    Link {
        /// The head.
        head: String,
        /// `in` or `out`.
        dir: String,
        /// The hook.
        hook: String,
        /// `first` (in walk order) or `after HOOK`.
        position: String,
        /// `open` or `closed`.
        fail: String,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::AddHook { hook, spec } => write!(f, "+ hook {hook} ({spec})"),
            Change::SetHook { hook, from, to } => write!(f, "~ hook {hook}: {from} -> {to}"),
            Change::RemoveHook { hook } => write!(f, "- hook {hook}"),
            Change::Unlink { head, dir, hook } => write!(f, "- link {head} {dir} {hook}"),
            Change::Link {
                head,
                dir,
                hook,
                position,
                fail,
            } => {
                write!(f, "+ link {head} {dir} {hook} {position}")?;
                if fail != "open" {
                    write!(f, " (fail {fail})")?;
                }
                Ok(())
            }
        }
    }
}

/// What applying a configuration does to a registry: the changes, and the
/// transaction that makes them, based on one generation.
pub struct Plan {
    base: u64,
    ops: Vec<Op>,
    changes: Vec<Change>,
    /// For each op, where in the file it comes from.
    at: Vec<ConfigError>,
    /// The running filters the plan's derived ones replace
    /// ([`pfil::Derived::from`]): held until the commit's grace period has
    /// passed, then dropped by [`Plan::commit`], so that an old acl's
    /// classifier is freed by the apply itself, on its thread, before it
    /// answers. (The registry would free it on the control plane too, never
    /// on a datapath thread, but at its next drain.)
    retiring: Vec<Arc<dyn pfil::Filter>>,
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("base", &self.base)
            .field("changes", &self.changes)
            .finish()
    }
}

fn fail_text(f: FailMode) -> String {
    match f {
        FailMode::Open => "open".into(),
        FailMode::Closed => "closed".into(),
    }
}

impl Config {
    /// Plan making `reg` equal to this configuration, building new hooks
    /// from `catalog`, and hooks whose config changed too unless their
    /// running filter derives its successor ([`Registry::derive_filter`]:
    /// an acl's keeps the hit counters of the rules both rulesets have).
    /// Read-only: nothing changes until [`Plan::commit`] (a derived filter
    /// shares counters with the running one but leaves it alone).
    ///
    /// `expect` is the generation the caller based the file on (e.g. that
    /// of a `show`); `None` plans from the current one.
    ///
    /// # Errors
    /// [`ApplyError::Conflict`] if `expect` is not current;
    /// [`ApplyError::Config`] for an unknown head, a hook that does not
    /// build (unknown module, bad config), a chain naming a hook that is
    /// neither declared nor the app's own, the declaration of an app's own
    /// hook, or a non-empty chain in a direction the head lacks.
    pub fn plan(
        &self,
        reg: &Registry,
        catalog: &Catalog,
        expect: Option<u64>,
    ) -> Result<Plan, ApplyError> {
        let (base, hooks, heads) = snapshot(reg);
        if let Some(e) = expect {
            if e != base {
                return Err(ApplyError::Conflict {
                    expected: e,
                    current: base,
                });
            }
        }
        let sp = &self.spans;
        let ctx = BuildCtx::new(reg.max_workers());
        let running: BTreeMap<&str, &HookInfo> =
            hooks.iter().map(|h| (h.name.as_str(), h)).collect();
        let mut plan = Plan::empty(base);
        let mut removed: BTreeSet<String> = BTreeSet::new();
        let mut adds = Vec::new();
        let mut sets = Vec::new();
        let mut retiring = Vec::new();
        for (name, d) in &self.hooks {
            let (module, _) = check_hook_name(name).map_err(|m| sp.error(sp.hooks.get(name), m))?;
            let spec = match &d.config {
                Some(c) => format!("{module}:{c}"),
                None => module.to_owned(),
            };
            let at = sp.error(
                sp.configs.get(name).or(sp.hooks.get(name)),
                format!("hooks.\"{name}\""),
            );
            let build = || {
                catalog.create(&spec, &ctx).map_err(|e| {
                    ApplyError::Config(sp.error(
                        sp.configs.get(name).or(sp.hooks.get(name)),
                        format!("hooks.\"{name}\": {e}"),
                    ))
                })
            };
            match running.get(name.as_str()) {
                None => adds.push((name.clone(), d, spec.clone(), build()?, at)),
                Some(h) => match managed_config(h) {
                    None => {
                        return Err(sp
                            .error(
                                sp.hooks.get(name),
                                format!(
                                "hooks.\"{name}\": this hook is the app's own (not built from the \
                                     catalog); a configuration may link it but not declare it"
                            ),
                            )
                            .into())
                    }
                    Some(_) if h.kind != d.kind || h.dirs != d.dirs => {
                        removed.insert(name.clone());
                        adds.push((name.clone(), d, spec.clone(), build()?, at));
                    }
                    Some(cfg) if cfg != d.config => {
                        let from = h.spec.clone().unwrap_or_default();
                        let filter = match derive(reg, name, d.config.as_deref()) {
                            Ok(Some(derived)) => {
                                retiring.push(derived.from);
                                derived.filter
                            }
                            Ok(None) => build()?,
                            Err(reason) => {
                                let e = pfil_filters::CatalogError::BadConfig {
                                    spec: spec.clone(),
                                    usage: catalog
                                        .get(module)
                                        .map_or_else(|| module.to_owned(), |m| m.usage()),
                                    expected: reason,
                                };
                                return Err(ApplyError::Config(sp.error(
                                    sp.configs.get(name).or(sp.hooks.get(name)),
                                    format!("hooks.\"{name}\": {e}"),
                                )));
                            }
                        };
                        sets.push((name.clone(), from, spec.clone(), filter, at));
                    }
                    Some(_) => {}
                },
            }
        }
        for h in &hooks {
            if managed_config(h).is_some() && !self.hooks.contains_key(&h.name) {
                removed.insert(h.name.clone());
            }
        }
        for name in &removed {
            plan.push(
                Op::RemoveHook { name: name.clone() },
                Change::RemoveHook { hook: name.clone() },
                sp.error(sp.hooks.get(name), format!("removing hook `{name}`")),
            );
        }
        for (name, d, spec, filter, at) in adds {
            plan.push(
                Op::AddHook {
                    name: name.clone(),
                    kind: d.kind,
                    dirs: d.dirs,
                    filter,
                },
                Change::AddHook { hook: name, spec },
                at,
            );
        }
        for (name, from, to, filter, at) in sets {
            plan.push(
                Op::ReplaceFilter {
                    hook: name.clone(),
                    filter,
                },
                Change::SetHook {
                    hook: name,
                    from,
                    to,
                },
                at,
            );
        }
        // Chains: every running head, written or not.
        let known = |hook: &str| {
            self.hooks.contains_key(hook)
                || running
                    .get(hook)
                    .is_some_and(|h| managed_config(h).is_none())
        };
        for name in self.heads.keys() {
            if !heads.iter().any(|h| &h.name == name) {
                let names: Vec<&str> = heads.iter().map(|h| h.name.as_str()).collect();
                return Err(sp
                    .error(
                        sp.heads.get(name),
                        format!(
                            "heads.{}: no such head in this app (heads belong to the app; it has: {})",
                            key(name),
                            if names.is_empty() { "none".into() } else { names.join(", ") }
                        ),
                    )
                    .into());
            }
        }
        let empty = HeadDecl::default();
        let mut unlinks = Plan::empty(base);
        let mut links = Plan::empty(base);
        for head in &heads {
            let want = self.heads.get(&head.name).unwrap_or(&empty);
            for d in Dir::ALL {
                let desired = &want.chains[d.index()];
                if !head.dirs.contains(d) {
                    if let Some(l) = desired.first() {
                        return Err(sp
                            .error(
                                sp.links.get(&(head.name.clone(), d, 0)),
                                format!(
                                    "heads.{}.{d}: head `{}` has no {d} direction (it has {}); \
                                     link `{}` in another",
                                    key(&head.name),
                                    head.name,
                                    head.dirs,
                                    l.hook
                                ),
                            )
                            .into());
                    }
                    continue;
                }
                for (i, l) in desired.iter().enumerate() {
                    if !known(&l.hook) {
                        return Err(sp
                            .error(
                                sp.links.get(&(head.name.clone(), d, i)),
                                format!(
                                    "heads.{}.{d}: hook `{}` is neither declared in [hooks] nor one of the app's own",
                                    key(&head.name),
                                    l.hook
                                ),
                            )
                            .into());
                    }
                }
                sp.diff_chain(head, d, desired, &removed, &mut unlinks, &mut links);
            }
        }
        plan.append(unlinks);
        plan.append(links);
        plan.retiring = retiring;
        Ok(plan)
    }
}

/// The successor of hook `name`'s running filter with `config`
/// ([`Registry::derive_filter`]), carrying over what it keeps (an acl:
/// the hit counters of the rules both rulesets have); `Ok(None)` when it
/// cannot (or has no config to derive with, or was removed since the
/// plan's snapshot, which the commit's generation check refuses), for the
/// catalog to build it. `Err`: the filter's reason for refusing `config`.
fn derive(
    reg: &Registry,
    name: &str,
    config: Option<&str>,
) -> Result<Option<pfil::Derived>, String> {
    let Some(config) = config else {
        return Ok(None);
    };
    match reg.derive_filter(name, config) {
        Ok(d) => Ok(d),
        Err(pfil::Error::FilterConfig { reason, .. }) => Err(reason),
        Err(_) => Ok(None),
    }
}

impl Spans {
    /// The unlinks and links that turn the running chain of `head` in `d`
    /// into `desired`: the longest common subsequence stays linked (with
    /// its counters); hooks in `removed` are unlinked by their removal
    /// already; quarantined links are never kept (they are on their way
    /// out).
    fn diff_chain(
        &self,
        head: &pfil::HeadInfo,
        d: Dir,
        desired: &[LinkDecl],
        removed: &BTreeSet<String>,
        unlinks: &mut Plan,
        links: &mut Plan,
    ) {
        // Captures stay where they are, whatever the file says.
        let current: Vec<&pfil::LinkInfo> = head.chains[d.index()]
            .iter()
            .filter(|l| !removed.contains(&l.hook) && !crate::capture::is_tap(&l.hook))
            .collect();
        let cur: Vec<Option<(&str, FailMode)>> = current
            .iter()
            .map(|l| (!l.quarantined).then_some((l.hook.as_str(), l.fail)))
            .collect();
        let des: Vec<Option<(&str, FailMode)>> = desired
            .iter()
            .map(|l| Some((l.hook.as_str(), l.fail)))
            .collect();
        let (keep_cur, keep_des) = diff::lcs_keep(&cur, &des);
        let name = &head.name;
        for (l, _) in current.iter().zip(keep_cur).filter(|(_, keep)| !keep) {
            unlinks.push(
                Op::Unlink {
                    head: name.clone(),
                    dir: d,
                    hook: l.hook.clone(),
                },
                Change::Unlink {
                    head: name.clone(),
                    dir: d.to_string(),
                    hook: l.hook.clone(),
                },
                self.error(
                    self.heads.get(name),
                    format!("unlinking `{}` from heads.{}.{d}", l.hook, key(name)),
                ),
            );
        }
        for (i, (l, _)) in desired
            .iter()
            .zip(keep_des)
            .enumerate()
            .filter(|(_, (_, keep))| !keep)
        {
            let (placement, position) = match (i, d) {
                (0, Dir::In) => (Placement::Prepend, "first".to_owned()),
                (0, Dir::Out) => (Placement::Append, "first".to_owned()),
                _ => {
                    let prev = &desired[i - 1].hook;
                    (Placement::After(prev.clone()), format!("after {prev}"))
                }
            };
            links.push(
                Op::Link {
                    head: name.clone(),
                    dir: d,
                    hook: l.hook.clone(),
                    options: LinkOptions {
                        placement,
                        fail: l.fail,
                    },
                },
                Change::Link {
                    head: name.clone(),
                    dir: d.to_string(),
                    hook: l.hook.clone(),
                    position,
                    fail: fail_text(l.fail),
                },
                self.error(
                    self.links.get(&(name.clone(), d, i)),
                    format!("heads.{}.{d}[{i}] (`{}`)", key(name), l.hook),
                ),
            );
        }
    }
}

impl Plan {
    fn empty(base: u64) -> Plan {
        Plan {
            base,
            ops: Vec::new(),
            changes: Vec::new(),
            at: Vec::new(),
            retiring: Vec::new(),
        }
    }

    fn append(&mut self, other: Plan) {
        self.ops.extend(other.ops);
        self.changes.extend(other.changes);
        self.at.extend(other.at);
        self.retiring.extend(other.retiring);
    }

    fn push(&mut self, op: Op, change: Change, at: ConfigError) {
        self.ops.push(op);
        self.changes.push(change);
        self.at.push(at);
    }

    /// The generation the plan was made from.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The changes, in the order the transaction makes them; empty when
    /// the registry already equals the configuration.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Make the changes in one transaction based on [`Plan::base`] (with
    /// `dry_run`, only check that the registry would take them). Returns
    /// the generation published (the base when there was nothing to do or
    /// for a dry run) and the commit, if one was made.
    ///
    /// A plan that replaces filters with ones derived from them (an acl
    /// whose rules changed) returns once the registry has let go of the
    /// old filters (the commit's grace period, at most 2 s), which it then
    /// drops: what they do not share with their successors (an old
    /// ruleset's classifier) is freed on this thread, not on the datapath.
    /// After 2 s they are left to the registry, which drops them with the
    /// last generation that ran them.
    ///
    /// # Errors
    /// [`ApplyError::Conflict`] if the registry changed since the plan;
    /// [`ApplyError::Registry`] naming where in the file the refused
    /// operation comes from. Nothing changes in either case.
    pub fn commit(self, reg: &Registry, dry_run: bool) -> Result<Option<pfil::Commit>, ApplyError> {
        if self.ops.is_empty() {
            let current = reg.generation();
            if current != self.base {
                return Err(ApplyError::Conflict {
                    expected: self.base,
                    current,
                });
            }
            return Ok(None);
        }
        let Plan {
            base,
            ops,
            at,
            retiring,
            ..
        } = self;
        let mut t = reg.transaction().expect_generation(base);
        if dry_run {
            t = t.dry_run();
        }
        for op in ops {
            t = t.op(op);
        }
        let committed = t.commit();
        if let Ok(c) = &committed {
            if !dry_run && !retiring.is_empty() {
                // Bounded, like `Acl::replace`: a datapath thread stuck in
                // a batch must not hold the apply forever.
                c.wait_timeout(RETIRE_WAIT);
            }
        }
        // Dropped here in every case: after a commit, as the old filters'
        // last owner once the grace period is over (unless the wait timed
        // out); after a failure, one reference of filters that still run.
        drop(retiring);
        committed.map(Some).map_err(|e| match e {
            pfil::Error::GenerationConflict { expected, current } => {
                ApplyError::Conflict { expected, current }
            }
            pfil::Error::Transaction { index, source } => {
                let mut at = at.get(index).cloned().unwrap_or(ConfigError {
                    line: None,
                    column: None,
                    message: format!("operation #{index}"),
                });
                at.message = format!("{}: {source}", at.message);
                ApplyError::Registry { at, error: *source }
            }
            error => ApplyError::Registry {
                at: ConfigError {
                    line: None,
                    column: None,
                    message: error.to_string(),
                },
                error,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_col("ab\ncé d", 7), (2, 4));
        assert_eq!(line_col("x", 0), (1, 1));
        assert_eq!(line_col("x", 99), (1, 2));
    }

    #[test]
    fn keys_are_bare_or_quoted() {
        assert_eq!(key("syn0"), "syn0");
        assert_eq!(key("count:1"), "\"count:1\"");
        assert_eq!(quote("a\"b\\c\u{1}"), "\"a\\\"b\\\\c\\u0001\"");
    }
}
