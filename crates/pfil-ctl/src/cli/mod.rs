//! `pfilctl`'s command line and output, callable in-process
//! ([`run`]); the binary is a call of it.
//!
//! Exit codes: 0 success, 1 an error (the server's message, or why it
//! could not be reached), 2 a usage error.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::{ArgGroup, Parser, Subcommand};
use serde_json::{json, Value};

use crate::{default_socket_path, Client};
use live::{capture, top, watch};
pub(crate) use render::text;
use render::{arr, human, states_args, table};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "pfilctl",
    version,
    about = "pfilctl: inspect and change the hooks of a running pfil dataplane",
    infer_subcommands = true,
    disable_help_subcommand = true,
    max_term_width = 100,
    after_help = "`stats --watch [SECS]` refreshes with rates until Ctrl-C (or --count N).\n\
Subcommands may be abbreviated to a unique prefix: he(ads), ho(oks), st(ats), r(ules), re(ap), se(t), sh(ow), sa(mpling), to(p), tr(ace), ad(d), ap(ply), l(ink), u(nlink).\n\
                  Exit codes: 0 ok, 1 error (the server's message), 2 usage.\n\
                  The default socket is pfild's: /run/pfil/pfild.sock as root, $XDG_RUNTIME_DIR/pfil/pfild.sock otherwise."
)]
struct Cli {
    /// The control socket [default: pfild's]
    #[arg(long, value_name = "PATH", global = true)]
    socket: Option<PathBuf>,
    /// Print the result as the server returned it (JSON), not a table
    #[arg(long, global = true)]
    json: bool,
    /// Print and exit: man (pfilctl(8)), or the completions for bash,
    /// zsh or fish
    #[arg(long, value_name = "WHAT",
          value_parser = clap::builder::PossibleValuesParser::new(crate::generate::WHAT))]
    generate: Option<String>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Debug, Clone, clap::Args)]
#[command(group(ArgGroup::new("dir").required(true).args(["input", "output"])))]
struct DirArgs {
    /// Input direction
    #[arg(short = 'i', long = "in")]
    input: bool,
    /// Output direction
    #[arg(short = 'o', long = "out")]
    output: bool,
}

impl DirArgs {
    fn name(&self) -> &'static str {
        if self.input {
            "in"
        } else {
            "out"
        }
    }
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// List heads with their chains (walk order)
    Heads,
    /// List hooks and where they are linked
    Hooks,
    /// Per head, direction and link: packets, bytes and verdict counts
    // `st` stays `stats` (it was before `states` came).
    #[command(alias = "st")]
    Stats {
        /// Only this head
        head: Option<String>,
        /// Refresh every SECS seconds (default 1) with packets/s and
        /// drops/s per link, until Ctrl-C or --count refreshes
        #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "1")]
        watch: Option<f64>,
        /// With --watch: stop after N tables
        #[arg(long, value_name = "N", requires = "watch")]
        count: Option<u64>,
        /// Print the counters and costs in the OpenMetrics text format
        /// (what Prometheus scrapes)
        #[arg(long, conflicts_with = "watch")]
        openmetrics: bool,
    },
    /// A filter's own counters, like `pfctl -vsr`: an acl's rules with
    /// their hits (rules marked `count`, then the default action), a
    /// ratelimit's evictions and table occupancy
    #[command(alias = "r")]
    Rules {
        /// Only this hook (an error if it keeps none) [default: every
        /// hook that keeps some]
        hook: Option<String>,
    },
    /// The flows a `ct` hook tracks, like `pfctl -ss` / `conntrack -L`:
    /// protocol, originator and responder, state, age, expiry, packets
    /// and bytes each way (originator:responder); with an EXPR only the
    /// flows it matches; with --kill, remove them (`pfctl -k`,
    /// `conntrack -D`).
    ///
    /// EXPR: MATCH [and MATCH]..., each MATCH optionally preceded by
    /// `not`: `all`; `proto tcp|udp|icmp|icmp6|N`; `src|dst|host [net]
    /// ADDR[/LEN]` (src: the originator, dst: the responder, host:
    /// either); `sport|dport|port N`; `state NAME` (new, established, or
    /// a TCP side's state as listed: syn_sent, fin_wait_2, closed, ...).
    /// E.g. `pfilctl states ct proto tcp and dst net 198.18.1.0/24`,
    /// `pfilctl states --kill src 198.18.0.7`.
    #[command(alias = "ss")]
    States {
        /// [HOOK] [EXPR...]: only this hook (an error if it keeps no
        /// states) [default: every `ct` hook and keep-state acl]; a first
        /// word that starts an EXPR (all, not, proto, src, dst, host,
        /// sport, dport, port, state) is not a hook
        #[arg(value_name = "HOOK|EXPR")]
        args: Vec<String>,
        /// List at most N states per hook (the total is always given)
        #[arg(long, value_name = "N", default_value_t = 10_000)]
        limit: usize,
        /// Remove the states EXPR matches (an EXPR is required: `all`
        /// for every one); a write: needs write access
        #[arg(long)]
        kill: bool,
    },
    /// The maps of an `xdp` hook, like bpftool map: without NAME, list
    /// them; `NAME dump`; `NAME lookup key BYTES`; `NAME update key BYTES
    /// value BYTES [any|noexist|exist]`; `NAME delete key BYTES`. BYTES
    /// as bpftool writes them: `key 0x35 0x00 0 0 value 10 0 0 0 0 0 0 0`
    /// (decimal or 0x hex, one byte each); a per-CPU map's update with
    /// one value sets every worker's
    Map {
        /// Hook name (`xdp:1`)
        hook: String,
        /// Map name (`filter_ports`)
        name: Option<String>,
        /// With dump: list at most N entries (the total is always given)
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// With event_pipe: stop after N records (else until Ctrl-C)
        #[arg(long, short = 'n', value_name = "N")]
        count: Option<u64>,
        /// dump | lookup key BYTES | update key BYTES value BYTES [FLAG] |
        /// delete key BYTES | event_pipe (a perf_event_array's or
        /// ringbuf's records as programs write them, as bpftool's)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        op: Vec<String>,
    },
    /// Live per-link cost, like top(1): packets/s, drops/s, ns/packet
    /// (from the timed batches) and the share of a CPU each link takes,
    /// most expensive first; refreshes until Ctrl-C or --count tables
    Top {
        /// Only this head
        head: Option<String>,
        /// Seconds between tables
        #[arg(long, short = 'd', value_name = "SECS", default_value_t = 1.0)]
        delay: f64,
        /// Stop after N tables
        #[arg(long, short = 'n', value_name = "N")]
        count: Option<u64>,
    },
    /// Capture the frames reaching a position of a head's chain into
    /// pcapng (a tap is linked there while it runs; tcpdump expression
    /// optional): `pfilctl capture syn0 -i -w - | tcpdump -r -`
    #[command(group(ArgGroup::new("place").args(["before", "after"])))]
    Capture {
        /// Head name
        head: String,
        #[command(flatten)]
        dir: DirArgs,
        /// Just before hook H in walk order [default: at the wire]
        #[arg(long, value_name = "H")]
        before: Option<String>,
        /// Just after hook H in walk order
        #[arg(long, value_name = "H")]
        after: Option<String>,
        /// Bytes to keep of each frame
        #[arg(short = 's', long, value_name = "SNAPLEN")]
        snaplen: Option<usize>,
        /// Stop after N frames
        #[arg(short = 'c', long, value_name = "N")]
        count: Option<u64>,
        /// Stop after SECS seconds
        #[arg(short = 'G', long, value_name = "SECS")]
        seconds: Option<f64>,
        /// Frames each worker's buffer holds (default 4096, 16 to 1048576
        /// and at most 256 MiB with the snap length; a full buffer drops
        /// copies, counted; never frames)
        #[arg(short = 'B', long, value_name = "N")]
        buffer: Option<usize>,
        /// Write pcapng to FILE (`-`: stdout)
        #[arg(short = 'w', value_name = "FILE", required = true)]
        write: PathBuf,
        /// A tcpdump expression (pcap-filter(7)): only matching frames
        expr: Vec<String>,
    },
    /// Trace the packets matching EXPR where they enter a head: every link
    /// they visit, in order, its verdict and time, and the final verdict
    /// (`--json`: one JSON object per packet), until Ctrl-C, -c or -G
    Trace {
        /// Head name
        head: String,
        /// Input direction (the default)
        #[arg(short = 'i', long = "in")]
        input: bool,
        /// Output direction
        #[arg(short = 'o', long = "out", conflicts_with = "input")]
        output: bool,
        /// Stop after N packets
        #[arg(short = 'c', long, value_name = "N")]
        count: Option<u64>,
        /// Stop after SECS seconds
        #[arg(short = 'G', long, value_name = "SECS")]
        seconds: Option<f64>,
        /// Records the trace's queue holds (default 1024, 1 to 65536; a
        /// full queue drops records, counted; never packets)
        #[arg(short = 'B', long, value_name = "N")]
        buffer: Option<usize>,
        /// A tcpdump expression (pcap-filter(7)): only matching packets
        /// [default: every packet]
        expr: Vec<String>,
    },
    /// Time one batch in N per worker and link (a power of two; 0: off)
    Sampling {
        /// One batch in N
        every: u32,
    },
    /// Add a hook MODULE:INSTANCE built by the filter catalog (e.g. count:edge)
    Add {
        /// MODULE:INSTANCE, e.g. count:edge or drop-udp:dns
        #[arg(value_name = "MODULE:INSTANCE")]
        spec: String,
        /// The module's config text (e.g. --set 53 for drop-udp)
        #[arg(long, value_name = "TEXT", conflicts_with = "config")]
        set: Option<String>,
        /// Read the module's config from FILE (`-`: stdin)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Reconfigure a hook: the filter takes the new config in place if it
    /// can (acl: rule counters of rules that stay are kept), else a new
    /// filter of its module with this config goes under the same links
    /// (link counters kept)
    Set {
        /// Hook name (MODULE:INSTANCE)
        #[arg(value_name = "HOOK")]
        hook: String,
        /// The module's config text (e.g. --set 5353 for drop-udp)
        #[arg(long, value_name = "TEXT", conflicts_with = "config")]
        set: Option<String>,
        /// Read the module's config from FILE (`-`: stdin)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Print the running configuration as a configuration file (TOML)
    Show,
    /// Make the running configuration equal to FILE (TOML, as `show`
    /// prints) in one transaction; prints the changes
    Apply {
        /// The configuration file (`-`: stdin)
        file: PathBuf,
        /// Print the changes and check them, change nothing
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Refuse unless the running configuration is still at generation
        /// N (e.g. the one `show` printed)
        #[arg(long, value_name = "N")]
        expect_generation: Option<u64>,
    },
    /// Remove a hook, unlinking it everywhere
    Del {
        /// Hook name
        hook: String,
    },
    /// Link HOOK to HEAD; prepend (closest to the wire) unless -a, --before or --after
    #[command(group(ArgGroup::new("place").args(["append", "before", "after"])))]
    Link {
        #[command(flatten)]
        dir: DirArgs,
        /// Append (farthest from the wire) instead of prepend
        #[arg(short = 'a', long = "append")]
        append: bool,
        /// Just before hook H in walk order
        #[arg(long, value_name = "H")]
        before: Option<String>,
        /// Just after hook H in walk order
        #[arg(long, value_name = "H")]
        after: Option<String>,
        /// Hook name
        hook: String,
        /// Head name
        head: String,
    },
    /// Unlink HOOK from HEAD (the hook stays registered)
    Unlink {
        #[command(flatten)]
        dir: DirArgs,
        /// Hook name
        hook: String,
        /// Head name
        head: String,
    },
    /// Remove quarantined links (their hook panicked): every one, or the
    /// link of HOOK on HEAD (as `unlink` names it). A fail-closed one drops
    /// all traffic until this (no other change removes it); prints their
    /// final counters
    Reap {
        /// Input direction
        #[arg(short = 'i', long = "in", requires = "head", conflicts_with = "output")]
        input: bool,
        /// Output direction
        #[arg(short = 'o', long = "out", requires = "head")]
        output: bool,
        /// Hook name (with HEAD and -i/-o: only that link)
        #[arg(requires = "head")]
        hook: Option<String>,
        /// Head name
        head: Option<String>,
    },
    /// The protocol version and methods of the server
    Version,
    /// Re-read the daemon's configuration file and apply its hooks and
    /// chains in one transaction (as SIGHUP does; pfild --config FILE);
    /// settings that need a restart are named and left as they run
    Reload,
}

/// Run pfilctl with `args` (the program name first), writing to `out` and
/// `err`; returns the exit code.
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = write!(out, "{}", e.render());
                return 0;
            }
            let _ = write!(err, "{}", e.render());
            return 2;
        }
    };
    if let Some(what) = &cli.generate {
        let extra = "\
.SH FILES\n\
.TP\n\
\\fI/run/pfil/pfild.sock\\fR\n\
pfild's control socket as root ($XDG_RUNTIME_DIR/pfil/pfild.sock otherwise).\n\
.SH SEE ALSO\n\
\\fBpfild\\fR(8), \\fBpfild.toml\\fR(5), \\fBtcpdump\\fR(8), \\fBpcap-filter\\fR(7)\n";
        return match crate::generate::generate(
            <Cli as clap::CommandFactory>::command(),
            what,
            extra,
            out,
        ) {
            Ok(()) => 0,
            Err(m) => {
                let _ = writeln!(err, "pfilctl: error: {m}");
                1
            }
        };
    }
    let Some(cmd) = &cli.cmd else {
        let _ = writeln!(
            err,
            "pfilctl: error: a command is required (pfilctl --help lists them)"
        );
        return 2;
    };
    match execute(&cli, cmd, out, err) {
        Ok(()) => 0,
        Err(msg) => {
            let _ = writeln!(err, "pfilctl: error: {msg}");
            1
        }
    }
}

fn execute(cli: &Cli, cmd: &Cmd, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), String> {
    let path = match &cli.socket {
        Some(p) => p.clone(),
        None => default_socket_path("pfild").map_err(|e| format!("{e} (use --socket PATH)"))?,
    };
    let (method, params) = request(cmd)?;
    let mut client = Client::connect(&path).map_err(|e| e.to_string())?;
    if let Cmd::Stats {
        watch: Some(secs),
        count,
        ..
    } = cmd
    {
        return watch(&mut client, params, *secs, *count, cli.json, out);
    }
    if let Cmd::Top { delay, count, .. } = cmd {
        return top(&mut client, params, *delay, *count, cli.json, out);
    }
    if let (Cmd::Map { count, op, .. }, "map_events") = (cmd, method) {
        let count = count.or(crate::xdpevents::count_in(op)?);
        return crate::xdpevents::follow(&mut client, params, count, cli.json, out);
    }
    if let Cmd::Capture { write, .. } = cmd {
        drop(client);
        return capture(&path, params, write, cli.json, out);
    }
    if let Cmd::Trace { .. } = cmd {
        drop(client);
        return crate::trace::follow(&path, params, cli.json, out, err);
    }
    let result = client.call(method, params).map_err(|e| match cmd {
        Cmd::Apply { file, .. } => format!("{}: {e}", file.display()),
        _ => e.to_string(),
    })?;
    let text = match cmd {
        Cmd::Stats {
            openmetrics: true, ..
        } => {
            // The filters' own counters too; a server older than
            // `filter_stats` has none to give.
            let filters = match client.call("filter_stats", Value::Null) {
                Ok(f) => f,
                Err(crate::ClientError::Rpc(e)) if e.kind == "method_not_found" => Value::Null,
                Err(e) => return Err(e.to_string()),
            };
            crate::metrics::render_with_filters(&result, &filters)
        }
        _ if cli.json => format!("{result}\n"),
        _ => human(cmd, &result),
    };
    out.write_all(text.as_bytes())
        .map_err(|e| format!("writing the output: {e}"))
}

/// A file's text (`-`: stdin), at most the control protocol's request
/// size ([`crate::config::MAX_CONFIG_BYTES`]).
fn read_text(path: &std::path::Path) -> Result<String, String> {
    crate::config::read_file(path)
}

/// The config of `add`/`set`: `--set TEXT`, or `--config FILE` without
/// its final line break(s).
fn config_param(p: &mut Value, set: &Option<String>, file: &Option<PathBuf>) -> Result<(), String> {
    let text = match (set, file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(f)) => Some(read_text(f)?.trim_end_matches(['\n', '\r']).to_owned()),
        (None, None) => None,
    };
    if let Some(t) = text {
        p["config"] = json!(t);
    }
    Ok(())
}

fn request(cmd: &Cmd) -> Result<(&'static str, Value), String> {
    Ok(match cmd {
        Cmd::Heads => ("heads", Value::Null),
        Cmd::Hooks => ("hooks", Value::Null),
        Cmd::Version => ("version", Value::Null),
        Cmd::Reload => ("reload", Value::Null),
        Cmd::Stats { head, .. } | Cmd::Top { head, .. } => (
            "stats",
            head.as_ref().map_or(Value::Null, |h| json!({"head": h})),
        ),
        Cmd::Rules { hook } => (
            "filter_stats",
            hook.as_ref().map_or(Value::Null, |h| json!({"hook": h})),
        ),
        Cmd::Map {
            hook,
            name,
            op,
            limit,
            ..
        } => crate::xdpmaps::request(hook, name.as_deref(), op, *limit)?,
        Cmd::States { args, limit, kill } => {
            let (hook, expr) = states_args(args);
            let mut p = json!({});
            if let Some(h) = hook {
                p["hook"] = json!(h);
            }
            if *kill {
                let expr = expr.ok_or(
                    "states --kill: an expression is required (`all` removes every state)",
                )?;
                p["expr"] = json!(expr);
                return Ok(("kill_states", p));
            }
            p["limit"] = json!(limit);
            if let Some(e) = expr {
                p["expr"] = json!(e);
            }
            ("states", p)
        }
        Cmd::Sampling { every } => ("sampling", json!({"every": every})),
        Cmd::Capture {
            head,
            dir,
            before,
            after,
            snaplen,
            count,
            seconds,
            buffer,
            expr,
            ..
        } => {
            let mut p = json!({"head": head, "dir": dir.name()});
            p["placement"] = match (before, after) {
                (Some(h), _) => json!({"before": h}),
                (_, Some(h)) => json!({"after": h}),
                _ => json!("prepend"),
            };
            if !expr.is_empty() {
                p["expr"] = json!(expr.join(" "));
            }
            for (k, v) in [
                ("snaplen", snaplen.map(|v| v as u64)),
                ("count", *count),
                ("buffer", buffer.map(|v| v as u64)),
            ] {
                if let Some(v) = v {
                    p[k] = json!(v);
                }
            }
            if let Some(s) = seconds {
                p["seconds"] = json!(s);
            }
            ("capture", p)
        }
        Cmd::Trace {
            head,
            output,
            count,
            seconds,
            buffer,
            expr,
            ..
        } => {
            let dir = if *output { "out" } else { "in" };
            let mut p = json!({"head": head, "dir": dir});
            if !expr.is_empty() {
                p["expr"] = json!(expr.join(" "));
            }
            if let Some(c) = count {
                p["count"] = json!(c);
            }
            if let Some(b) = buffer {
                p["buffer"] = json!(b);
            }
            if let Some(s) = seconds {
                p["seconds"] = json!(s);
            }
            ("trace", p)
        }
        Cmd::Add { spec, set, config } => {
            let mut p = json!({"hook": spec});
            config_param(&mut p, set, config)?;
            ("add", p)
        }
        Cmd::Set { hook, set, config } => {
            let mut p = json!({"hook": hook});
            config_param(&mut p, set, config)?;
            ("set", p)
        }
        Cmd::Show => ("show", Value::Null),
        Cmd::Apply {
            file,
            dry_run,
            expect_generation,
        } => {
            let mut p = json!({"toml": read_text(file)?, "dry_run": dry_run});
            if let Some(g) = expect_generation {
                p["expect_generation"] = json!(g);
            }
            ("apply", p)
        }
        Cmd::Del { hook } => ("del", json!({"hook": hook})),
        Cmd::Link {
            dir,
            append,
            before,
            after,
            hook,
            head,
        } => {
            let placement = match (append, before, after) {
                (_, Some(h), _) => json!({"before": h}),
                (_, _, Some(h)) => json!({"after": h}),
                (true, _, _) => json!("append"),
                _ => json!("prepend"),
            };
            (
                "link",
                json!({"head": head, "dir": dir.name(), "hook": hook, "placement": placement}),
            )
        }
        Cmd::Unlink { dir, hook, head } => (
            "unlink",
            json!({"head": head, "dir": dir.name(), "hook": hook}),
        ),
        Cmd::Reap {
            head,
            hook,
            input,
            output,
        } => match (head, hook) {
            (Some(head), Some(hook)) => {
                let dir = match (input, output) {
                    (true, false) => "in",
                    (false, true) => "out",
                    _ => return Err("reap HEAD HOOK needs -i or -o".to_owned()),
                };
                ("reap", json!({"head": head, "dir": dir, "hook": hook}))
            }
            _ => ("reap", Value::Null),
        },
    })
}

mod live;
mod render;

#[cfg(test)]
mod tests;
