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
mod plan;
mod running;

pub use plan::{Change, Plan};
pub(crate) use running::snapshot;
pub use running::Running;
use running::{key, managed_config};

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

#[cfg(test)]
mod tests {
    use super::running::quote;
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
