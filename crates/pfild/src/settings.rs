//! The daemon configuration file: `pfild --config FILE` (and
//! `--check-config FILE`) read its `[pfild]` table, the settings the
//! command line gives, besides the `[hooks]` and `[heads]` tables that
//! `pfilctl show`/`apply` read and write (pfil-ctl's `config` module).
//!
//! ```toml
//! [pfild]
//! mode = "sink"              # sink | forward | gen
//! interfaces = ["veth0"]     # one for sink and gen, two for forward
//! queues = "all"             # every long option of `pfild --help`,
//! xdp-mode = "native"        # without its dashes, with its value:
//! ring = 4096                # a string, a number, true for a flag,
//! cpus = "2-5"               # an array for a list (`cpus = [2, 3]`)
//! control = "/run/pfil/pfild.sock"
//! metrics = "127.0.0.1:9464"
//! log = "info"
//! ```
//!
//! A key is an option's long name; its value goes through the option's
//! own parser, so the file takes exactly what the command line takes and
//! the two cannot drift (pfild.toml(5) is generated from the same
//! definitions). Options given on the command line override the file's;
//! a mode given on the command line overrides the file's mode and
//! interfaces.
//!
//! What a reload ([`Settings::restart_needed`]) can change is the hooks
//! and chains; every `[pfild]` setting needs a restart, and a reload
//! says which changed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// Options the file does not take: they name the file, or they are
/// actions rather than settings.
pub const NOT_IN_FILE: &[&str] = &[
    "config",
    "check-config",
    "hook",
    "generate",
    "help",
    "version",
];

/// The keys of `[pfild]` besides the long options.
const MODE_KEYS: &[&str] = &["mode", "interfaces"];

/// The `[pfild]` table of a configuration file, checked: each key with
/// the command-line words it stands for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// `mode` and `interfaces`: the mode's words (`sink veth0`).
    pub mode: Option<Vec<String>>,
    /// Each option key (long name) with its words (`--ring=4096`).
    pub options: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    pfild: Option<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
    // Read by pfil-ctl's `Config` (hooks and chains): taken as they are
    // here, checked there.
    #[allow(dead_code)]
    version: Option<toml::Value>,
    #[allow(dead_code)]
    hooks: Option<toml::Value>,
    #[allow(dead_code)]
    heads: Option<toml::Value>,
}

/// 1-based line and column of byte `at` of `src`.
fn line_col(src: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(src.len());
    while !src.is_char_boundary(at) {
        at -= 1;
    }
    let before = &src[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn at(src: &str, span: Option<Range<usize>>, msg: impl std::fmt::Display) -> String {
    match span {
        Some(s) => {
            let (l, c) = line_col(src, s.start);
            format!("line {l}, column {c}: {msg}")
        }
        None => msg.to_string(),
    }
}

/// A TOML value as one command-line word: strings as they are, numbers
/// and booleans as written, arrays joined with commas.
fn word(v: &toml::Value) -> Result<String, &'static str> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Array(a) => {
            let parts: Result<Vec<String>, _> = a
                .iter()
                .map(|x| match x {
                    toml::Value::Array(_) | toml::Value::Table(_) => {
                        Err("expected a value or a list of values, found a nested list or table")
                    }
                    x => word(x),
                })
                .collect();
            Ok(parts?.join(","))
        }
        toml::Value::Table(_) => Err("expected a value, found a table"),
        toml::Value::Datetime(_) => Err("expected a value, found a date"),
    }
}

impl Settings {
    /// Parse the `[pfild]` table of a configuration file's text, checking
    /// every value with its option's parser.
    ///
    /// # Errors
    /// Malformed TOML, an unknown top-level table, an unknown key, a value
    /// the option refuses, a bad mode or interface count: each with its
    /// line and column.
    pub fn parse(text: &str) -> Result<Settings, String> {
        let raw: RawFile =
            toml::from_str(text).map_err(|e| at(text, e.span(), e.message().trim_end()))?;
        let mut s = Settings::default();
        let Some(table) = raw.pfild else {
            return Ok(s);
        };
        let cmd = crate::args::command();
        let mut mode: Option<(String, Range<usize>)> = None;
        let mut ifaces: Option<(Vec<String>, Range<usize>)> = None;
        for (k, v) in table {
            let (kspan, key) = (k.span(), k.into_inner());
            let (vspan, value) = (v.span(), v.into_inner());
            let bad = |m: String| at(text, Some(vspan.clone()), format!("pfild.{key}: {m}"));
            match key.as_str() {
                "mode" => match value {
                    toml::Value::String(m) if ["sink", "forward", "gen"].contains(&m.as_str()) => {
                        mode = Some((m, vspan.clone()))
                    }
                    _ => return Err(bad("expected \"sink\", \"forward\" or \"gen\"".into())),
                },
                "interfaces" => match &value {
                    toml::Value::Array(a) => {
                        let names: Option<Vec<String>> =
                            a.iter().map(|x| x.as_str().map(str::to_owned)).collect();
                        match names {
                            Some(n) if n.iter().all(|i| !i.is_empty() && !i.starts_with('-')) => {
                                ifaces = Some((n, vspan.clone()))
                            }
                            _ => {
                                return Err(bad(
                                    "expected a list of interface names, e.g. [\"veth0\"]".into(),
                                ))
                            }
                        }
                    }
                    toml::Value::String(i) if !i.is_empty() && !i.starts_with('-') => {
                        ifaces = Some((vec![i.clone()], vspan.clone()))
                    }
                    _ => {
                        return Err(bad(
                            "expected a list of interface names, e.g. [\"veth0\"]".into()
                        ))
                    }
                },
                _ => {
                    let arg = cmd
                        .get_arguments()
                        .find(|a| a.get_long() == Some(key.as_str()))
                        .filter(|_| !NOT_IN_FILE.contains(&key.as_str()));
                    let Some(arg) = arg else {
                        return Err(at(
                            text,
                            Some(kspan),
                            format!(
                                "pfild.{key}: unknown setting; the keys are {} and the long \
                                 options of `pfild --help` without their dashes (except {})",
                                MODE_KEYS.join(", "),
                                NOT_IN_FILE.join(", ")
                            ),
                        ));
                    };
                    let flag = !arg.get_action().takes_values();
                    let words = match (&value, flag) {
                        (toml::Value::Boolean(true), true) => vec![format!("--{key}")],
                        (toml::Value::Boolean(false), true) => Vec::new(),
                        (_, true) => return Err(bad("expected true or false".into())),
                        // An option whose value is optional (`metrics`):
                        // true takes its default.
                        (toml::Value::Boolean(true), false)
                            if arg.get_num_args().is_some_and(|n| n.min_values() == 0) =>
                        {
                            vec![format!("--{key}")]
                        }
                        (toml::Value::Boolean(false), false)
                            if arg.get_num_args().is_some_and(|n| n.min_values() == 0) =>
                        {
                            Vec::new()
                        }
                        (v, false) => {
                            let w = word(v).map_err(|m| bad(m.into()))?;
                            // The option alone, with its own parser: what
                            // it needs of other options is checked with the
                            // whole command line.
                            let alone = clap::Command::new("pfild").arg(
                                clap::Arg::new("v")
                                    .long("v")
                                    .value_parser(arg.get_value_parser().clone())
                                    .allow_negative_numbers(true),
                            );
                            alone
                                .try_get_matches_from([
                                    OsString::from("pfild"),
                                    OsString::from(format!("--v={w}")),
                                ])
                                .map_err(|e| {
                                    bad(clap_message(&e).replace("'--v <v>'", &format!("`{key}`")))
                                })?;
                            vec![format!("--{key}={w}")]
                        }
                    };
                    s.options.insert(key, words);
                }
            }
        }
        match (mode, ifaces) {
            (None, None) => {}
            (Some((m, span)), Some((i, _))) => {
                let want = if m == "forward" { 2 } else { 1 };
                if i.len() != want {
                    return Err(at(
                        text,
                        Some(span),
                        format!(
                            "pfild.mode: `{m}` takes {want} interface(s), pfild.interfaces has {}",
                            i.len()
                        ),
                    ));
                }
                s.mode = Some(std::iter::once(m).chain(i).collect());
            }
            (Some((m, span)), None) => {
                return Err(at(
                    text,
                    Some(span),
                    format!("pfild.mode = \"{m}\" needs pfild.interfaces"),
                ))
            }
            (None, Some((_, span))) => {
                return Err(at(text, Some(span), "pfild.interfaces needs pfild.mode"))
            }
        }
        Ok(s)
    }

    /// The settings as command-line words, options first, then the mode
    /// (when `with_mode`).
    fn words(&self, with_mode: bool) -> Vec<String> {
        let mut w: Vec<String> = self.options.values().flatten().cloned().collect();
        if with_mode {
            w.extend(self.mode.iter().flatten().cloned());
        }
        w
    }

    /// What differs between `self` (the settings running) and `new` (a
    /// reloaded file's): each key that needs a restart to take effect,
    /// with its old and new value.
    pub fn restart_needed(&self, new: &Settings) -> Vec<String> {
        let show = |w: Option<&Vec<String>>| match w {
            None => "unset".to_owned(),
            Some(w) if w.is_empty() => "false".to_owned(),
            Some(w) => w
                .iter()
                .map(|x| x.split_once('=').map_or(x.as_str(), |(_, v)| v))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let mut out = Vec::new();
        if self.mode != new.mode {
            out.push(format!(
                "mode/interfaces ({} -> {})",
                show(self.mode.as_ref()),
                show(new.mode.as_ref())
            ));
        }
        let keys: std::collections::BTreeSet<&String> =
            self.options.keys().chain(new.options.keys()).collect();
        for k in keys {
            let (a, b) = (self.options.get(k), new.options.get(k));
            if a != b {
                out.push(format!("{k} ({} -> {})", show(a), show(b)));
            }
        }
        out
    }
}

/// A clap value error's own message, without its `error: ` prefix and
/// its footer.
fn clap_message(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    if let Some(ContextValue::String(s)) = e.get(ContextKind::Custom) {
        return s.clone();
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    text.lines().next().unwrap_or("").trim().to_owned()
}

/// The command line as pfild runs it: with `--config FILE` or
/// `--check-config FILE`, the file's `[pfild]` settings first and the
/// command line's after them (the last of an option wins); the file's
/// mode last, unless the command line gives one.
#[derive(Debug)]
pub struct Expanded {
    /// The words to parse (without the program name).
    pub argv: Vec<String>,
    /// The file and its settings, when one was given.
    pub file: Option<(PathBuf, Settings)>,
}

/// `--NAME FILE` or `--NAME=FILE` in `argv` (the last one), stopping at
/// `--`.
pub fn option_value(argv: &[String], name: &str) -> Option<PathBuf> {
    let (long, eq) = (format!("--{name}"), format!("--{name}="));
    let mut found = None;
    let mut it = argv.iter();
    while let Some(w) = it.next() {
        if w == "--" {
            break;
        }
        if *w == long {
            found = it.next().map(PathBuf::from);
        } else if let Some(v) = w.strip_prefix(&eq) {
            found = Some(PathBuf::from(v));
        }
    }
    found
}

/// Reads and parses the settings of `path`.
///
/// # Errors
/// The file's name with what is wrong and where.
pub fn read(path: &Path) -> Result<Settings, String> {
    let text = pfil_ctl::config::read_file(path)?;
    Settings::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Expand the command line with the configuration file it names.
///
/// # Errors
/// The file's error (unreadable, malformed, a bad setting).
pub fn expand(argv: Vec<String>) -> Result<Expanded, String> {
    let path = option_value(&argv, "check-config").or_else(|| option_value(&argv, "config"));
    let Some(path) = path else {
        return Ok(Expanded { argv, file: None });
    };
    let settings = read(&path)?;
    let cli_mode = crate::args::command()
        .ignore_errors(true)
        .try_get_matches_from(std::iter::once("pfild".to_owned()).chain(argv.iter().cloned()))
        .ok()
        .and_then(|m| m.subcommand_name().map(str::to_owned))
        .is_some();
    let mut out = settings.words(false);
    out.extend(argv);
    if !cli_mode {
        out.extend(settings.mode.iter().flatten().cloned());
    }
    Ok(Expanded {
        argv: out,
        file: Some((path, settings)),
    })
}

#[cfg(test)]
mod tests;
