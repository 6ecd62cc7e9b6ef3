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
        /// dump | lookup key BYTES | update key BYTES value BYTES [FLAG] |
        /// delete key BYTES
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

/// `stats --watch`: a table per period with packets/s and drops/s per
/// link (from the difference to the previous table), or with `--json` one
/// `stats` result per line.
fn watch(
    client: &mut Client,
    params: Value,
    secs: f64,
    count: Option<u64>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let mut prev: std::collections::HashMap<(String, String, String), (u64, u64)> =
        Default::default();
    every(client, params, ("--watch", secs), count, out, |r, dt| {
        if json {
            format!("{r}\n")
        } else {
            let mut rows = vec![[
                "HEAD", "DIR", "HOOK", "PACKETS", "PKT/S", "DROPPED", "DROP/S",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()];
            let mut seen = std::collections::HashMap::new();
            for h in arr(r, "heads") {
                for d in ["in", "out"] {
                    for l in arr(&h, d) {
                        let key = (text(&h["name"]), d.to_owned(), text(&l["hook"]));
                        let pk = l["packets"].as_u64().unwrap_or(0);
                        let dr = l["dropped"].as_u64().unwrap_or(0);
                        let rate = |now: u64, before: Option<u64>| match (dt, before) {
                            (Some(dt), Some(b)) if dt > 0.0 => {
                                format!("{:.0}", now.saturating_sub(b) as f64 / dt)
                            }
                            _ => "-".to_owned(),
                        };
                        let p = prev.get(&key).copied();
                        rows.push(vec![
                            key.0.clone(),
                            key.1.clone(),
                            key.2.clone(),
                            pk.to_string(),
                            rate(pk, p.map(|x| x.0)),
                            dr.to_string(),
                            rate(dr, p.map(|x| x.1)),
                        ]);
                        seen.insert(key, (pk, dr));
                    }
                }
            }
            prev = seen;
            format!("{}generation {}\n\n", table(&rows), text(&r["generation"]))
        }
    })
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

/// `capture`: stream the pcapng the server sends into `write` (`-`:
/// stdout); Ctrl-C asks the server to stop (the tap is unlinked and the
/// file ends with the counters); the summary goes to stderr.
fn capture(
    path: &std::path::Path,
    params: Value,
    write: &std::path::Path,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    use base64::Engine;
    let mut file: Box<dyn Write> = if write.as_os_str() == "-" {
        Box::new(std::io::stdout())
    } else {
        Box::new(std::fs::File::create(write).map_err(|e| format!("-w {}: {e}", write.display()))?)
    };
    let res = crate::client::stream(path, "capture", params, "capture.data", |p| {
        let data = base64::engine::general_purpose::STANDARD
            .decode(p["data"].as_str().unwrap_or(""))
            .map_err(|e| format!("capture data: {e}"))?;
        file.write_all(&data)
            .and_then(|()| file.flush())
            .map_err(|e| format!("-w {}: {e}", write.display()))
    })?;
    let res = &res;
    let summary = if json {
        format!("{res}\n")
    } else {
        format!(
            "capture {}: {} frames written ({} reached the tap, {} matched, {} copies dropped for a full buffer; ended: {})\n",
            text(&res["hook"]),
            text(&res["captured"]),
            text(&res["seen"]),
            text(&res["matched"]),
            text(&res["dropped"]),
            text(&res["end"]),
        )
    };
    if write.as_os_str() == "-" {
        eprint!("{summary}");
    } else {
        out.write_all(summary.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One row of `top`: a link over the last period.
struct TopRow {
    head: String,
    dir: &'static str,
    hook: String,
    pps: f64,
    drops: f64,
    ns_per_packet: Option<f64>,
    /// Percent of one CPU: ns/packet times packets/s.
    cpu: f64,
}

/// `top`: a `stats` call per period; rates and costs from the difference
/// to the previous call (cost from all timed batches so far until a period
/// has its own).
fn top(
    client: &mut Client,
    params: Value,
    secs: f64,
    count: Option<u64>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout()) && !json;
    type Key = (String, &'static str, String);
    let mut prev: std::collections::HashMap<Key, [u64; 4]> = Default::default();
    every(client, params, ("--delay", secs), count, out, |r, dt| {
        let mut rows = Vec::new();
        let mut seen = std::collections::HashMap::new();
        for h in arr(r, "heads") {
            for d in ["in", "out"] {
                for l in arr(&h, d) {
                    let k: Key = (text(&h["name"]), d, text(&l["hook"]));
                    let v = |f: &str| l[f].as_u64().unwrap_or(0);
                    let cur = [
                        v("packets"),
                        v("dropped"),
                        v("sampled_packets"),
                        v("sampled_ns"),
                    ];
                    let p = prev.get(&k).copied();
                    let rate = |i: usize| match (dt, p) {
                        (Some(dt), Some(p)) if dt > 0.0 => cur[i].saturating_sub(p[i]) as f64 / dt,
                        _ => 0.0,
                    };
                    let (sp, sn) = match p {
                        Some(p) if cur[2] > p[2] => (cur[2] - p[2], cur[3].saturating_sub(p[3])),
                        _ => (cur[2], cur[3]),
                    };
                    let nspp = (sp > 0).then(|| sn as f64 / sp as f64);
                    let pps = rate(0);
                    rows.push(TopRow {
                        head: k.0.clone(),
                        dir: d,
                        hook: k.2.clone(),
                        pps,
                        drops: rate(1),
                        ns_per_packet: nspp,
                        cpu: nspp.map_or(0.0, |ns| ns * pps / 1e7),
                    });
                    seen.insert(k, cur);
                }
            }
        }
        prev = seen;
        rows.sort_by(|a, b| b.cpu.total_cmp(&a.cpu).then(b.pps.total_cmp(&a.pps)));
        if json {
            let rows: Vec<Value> = rows
                    .iter()
                    .map(|t| {
                        json!({"head": t.head, "dir": t.dir, "hook": t.hook, "packets_per_s": t.pps,
                               "drops_per_s": t.drops, "ns_per_packet": t.ns_per_packet, "cpu_percent": t.cpu})
                    })
                    .collect();
            format!(
                "{}\n",
                json!({"generation": r["generation"], "sampling": r["sampling"], "links": rows})
            )
        } else {
            let total: f64 = rows.iter().map(|t| t.cpu).sum();
            let mut rows_text = vec![["HEAD", "DIR", "HOOK", "PKT/S", "DROP/S", "NS/PKT", "CPU%"]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()];
            for t in &rows {
                rows_text.push(vec![
                    t.head.clone(),
                    t.dir.to_owned(),
                    t.hook.clone(),
                    format!("{:.0}", t.pps),
                    format!("{:.0}", t.drops),
                    t.ns_per_packet.map_or("-".into(), |v| format!("{v:.1}")),
                    format!("{:.1}", t.cpu),
                ]);
            }
            format!(
                    "{}pfilctl top: generation {}, 1 batch in {} timed, hooks take {total:.1}% of a CPU{}\n{}\n",
                    if tty { "\x1b[H\x1b[2J" } else { "" },
                    text(&r["generation"]),
                    text(&r["sampling"]),
                    if dt.is_none() { " (rates from the next table on)" } else { "" },
                    table(&rows_text),
                )
        }
    })
}

/// Call `stats` every `secs` (`flag` names the option in errors) until
/// `count` calls or an error, writing what `render` makes of each result
/// and the seconds since the previous one (`None` the first time).
fn every(
    client: &mut Client,
    params: Value,
    (flag, secs): (&str, f64),
    count: Option<u64>,
    out: &mut dyn Write,
    mut render: impl FnMut(&Value, Option<f64>) -> String,
) -> Result<(), String> {
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!(
            "{flag} {secs}: the period must be a positive number of seconds"
        ));
    }
    let period = std::time::Duration::from_secs_f64(secs);
    let mut last: Option<std::time::Instant> = None;
    let mut n = 0u64;
    loop {
        let r = client
            .call("stats", params.clone())
            .map_err(|e| e.to_string())?;
        let now = std::time::Instant::now();
        let dt = last.map(|t| now.duration_since(t).as_secs_f64());
        let shown = render(&r, dt);
        out.write_all(shown.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| format!("writing the output: {e}"))?;
        last = Some(now);
        n += 1;
        if count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        std::thread::sleep(period);
    }
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

/// Aligned columns, two spaces apart.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:w$}  ", w = widths[c]));
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn arr(v: &Value, key: &str) -> Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn human(cmd: &Cmd, r: &Value) -> String {
    let generation = r.get("generation").map(text).unwrap_or_default();
    match cmd {
        Cmd::Heads => {
            let mut rows = vec![vec![
                "HEAD".into(),
                "KIND".into(),
                "DIR".into(),
                "CHAIN (walk order)".into(),
            ]];
            for h in arr(r, "heads") {
                for d in arr(&h, "dirs") {
                    let d = text(&d);
                    let chain: Vec<String> = h
                        .pointer(&format!("/chains/{d}"))
                        .and_then(Value::as_array)
                        .map(|c| {
                            c.iter()
                                .map(|l| format!("{}{}", text(&l["hook"]), quarantined(l)))
                                .collect()
                        })
                        .unwrap_or_default();
                    let chain = if chain.is_empty() {
                        "-".to_owned()
                    } else {
                        chain.join(" -> ")
                    };
                    rows.push(vec![text(&h["name"]), text(&h["kind"]), d, chain]);
                }
            }
            format!("{}generation {generation}\n", table(&rows))
        }
        Cmd::Hooks => {
            let mut rows = vec![vec![
                "HOOK".into(),
                "KIND".into(),
                "DIRS".into(),
                "FAULTS".into(),
                "LINKED".into(),
            ]];
            for h in arr(r, "hooks") {
                let linked: Vec<String> = arr(&h, "linked")
                    .iter()
                    .map(|l| format!("{} {}{}", text(&l["head"]), text(&l["dir"]), quarantined(l)))
                    .collect();
                rows.push(vec![
                    text(&h["name"]),
                    text(&h["kind"]),
                    text(&h["dirs"]),
                    text(&h["faults"]),
                    if linked.is_empty() {
                        "-".into()
                    } else {
                        linked.join(", ")
                    },
                ]);
            }
            format!("{}generation {generation}\n", table(&rows))
        }
        Cmd::Stats { .. } => {
            let cols = [
                "packets", "bytes", "passed", "dropped", "consumed", "faults",
            ];
            let mut rows = vec![["HEAD", "DIR", "HOOK"]
                .iter()
                .map(|s| s.to_string())
                .chain(cols.iter().map(|c| c.to_uppercase()))
                .collect::<Vec<_>>()];
            for h in arr(r, "heads") {
                for d in ["in", "out"] {
                    for l in arr(&h, d) {
                        let mut row = vec![text(&h["name"]), d.to_owned(), text(&l["hook"])];
                        row.extend(cols.iter().map(|c| text(&l[*c])));
                        rows.push(row);
                    }
                }
            }
            format!("{}generation {generation}\n", table(&rows))
        }
        Cmd::Rules { .. } => rules(r),
        Cmd::States { kill: true, .. } => {
            let mut o = String::new();
            for h in arr(r, "hooks") {
                o.push_str(&format!(
                    "hook {}: {} states killed\n",
                    text(&h["hook"]),
                    text(&h["killed"])
                ));
            }
            o
        }
        Cmd::States { .. } => states(r),
        Cmd::Map { .. } => crate::xdpmaps::human(r),
        Cmd::Reload => {
            let diff = arr(r, "diff");
            let mut s = format!(
                "reloaded {}: generation {} -> {generation}, {} change(s)\n",
                text(&r["file"]),
                text(&r["base"]),
                diff.len()
            );
            for d in &diff {
                s += &format!("  {}\n", text(d));
            }
            let restart = arr(r, "restart_needed");
            if !restart.is_empty() {
                let r: Vec<String> = restart.iter().map(text).collect();
                s += &format!("needs a restart, left as running: {}\n", r.join(", "));
            }
            if !arr(r, "reaped").is_empty() {
                s += &reaped(r);
            }
            s
        }
        Cmd::Version => format!(
            "pfilctl {}, protocol {}; server: {} protocol {}, methods {}\n",
            env!("CARGO_PKG_VERSION"),
            crate::PROTOCOL_VERSION,
            text(&r["app"]),
            text(&r["protocol"]),
            arr(r, "methods")
                .iter()
                .map(text)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Cmd::Add { spec, .. } => format!("added {spec} (generation {generation})\n{}", reaped(r)),
        Cmd::Set { hook, .. } if r["in_place"] == json!(true) => format!(
            "reconfigured {hook} in place, its counters kept (generation {generation})\n{}",
            reaped(r)
        ),
        Cmd::Set { hook, .. } => format!(
            "reconfigured {hook} (generation {generation})\n{}",
            reaped(r)
        ),
        Cmd::Del { hook } => format!(
            "removed {hook} (generation {generation}){}{}",
            retired(r),
            reaped(r)
        ),
        Cmd::Link {
            dir, hook, head, ..
        } => format!(
            "linked {hook} to {head} {} (generation {generation})\n{}",
            dir.name(),
            reaped(r)
        ),
        Cmd::Unlink { dir, hook, head } => format!(
            "unlinked {hook} from {head} {} (generation {generation}){}{}",
            dir.name(),
            retired(r),
            reaped(r)
        ),
        Cmd::Reap { .. } if arr(r, "reaped").is_empty() => {
            format!("no quarantined link (generation {generation})\n")
        }
        Cmd::Reap { .. } => format!("reaped (generation {generation}):\n{}", reaped(r)),
        Cmd::Show => text(&r["toml"]),
        Cmd::Top { .. } | Cmd::Capture { .. } | Cmd::Trace { .. } => String::new(),
        Cmd::Sampling { .. } => match r["sampling"].as_u64() {
            Some(0) => "sampling: off (no link is timed)\n".to_owned(),
            _ => format!(
                "sampling: 1 batch in {} timed per worker and link\n",
                text(&r["sampling"])
            ),
        },
        Cmd::Apply { dry_run, .. } => {
            let diff = arr(r, "diff");
            let mut s: String = diff.iter().map(|l| format!("{}\n", text(l))).collect();
            let base = text(&r["base"]);
            s += &match (diff.len(), dry_run) {
                (n, false) if n > 0 && r["complete"] == json!(false) => format!(
                    "applied {n} change(s) in one transaction: generation {base} -> {generation} \
                     (a datapath thread still held the previous one at the answer)\n"
                ),
                (0, _) => format!(
                    "no changes: the running configuration equals the file (generation {base})\n"
                ),
                (n, true) => format!(
                    "dry run: {n} change(s) checked against generation {base}, nothing applied\n"
                ),
                (n, false) => format!(
                    "applied {n} change(s) in one transaction: generation {base} -> {generation}\n"
                ),
            };
            s
        }
    }
}

/// The end of a write's line: the final counters of the links it removed
/// (one per line), or that the grace period had not passed yet.
/// `rules`: the `rule_hits` of every hook as one table (HOOK, RULE,
/// HITS, TEXT, in rule order), then every other stat (HOOK, STAT,
/// LABELS, VALUE).
/// `pfilctl states` words: the hook (a first word that does not start an
/// expression) and the expression (the rest, joined), each if given.
fn states_args(args: &[String]) -> (Option<&str>, Option<String>) {
    let (hook, rest) = match args.first() {
        Some(w) if !pfil_filters::ct::expr::KEYWORDS.contains(&w.as_str()) => {
            (Some(w.as_str()), &args[1..])
        }
        _ => (None, args),
    };
    let expr = (!rest.is_empty()).then(|| rest.join(" "));
    (hook, expr)
}

/// `states`: one table per `ct` hook, originator first.
fn states(r: &Value) -> String {
    let mut o = String::new();
    for h in arr(r, "hooks") {
        let mut rows = vec![[
            "PROTO", "SRC", "DST", "STATE", "AGE", "EXPIRES", "PACKETS", "BYTES",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        let ep = |a: &Value, p: &Value| {
            let a = text(a);
            if a.contains(':') {
                format!("[{a}]:{}", text(p))
            } else {
                format!("{a}:{}", text(p))
            }
        };
        for x in arr(&h, "states") {
            let proto = match x["proto"].as_u64() {
                Some(6) => "tcp".to_owned(),
                Some(17) => "udp".to_owned(),
                Some(1) => "icmp".to_owned(),
                Some(58) => "icmp6".to_owned(),
                _ => text(&x["proto"]),
            };
            rows.push(vec![
                proto,
                ep(&x["src"], &x["sport"]),
                ep(&x["dst"], &x["dport"]),
                text(&x["state"]),
                format!("{}s", text(&x["age"])),
                format!("{}s", text(&x["expires"])),
                format!("{}:{}", text(&x["packets"][0]), text(&x["packets"][1])),
                format!("{}:{}", text(&x["bytes"][0]), text(&x["bytes"][1])),
            ]);
        }
        let total = x_total(&h);
        o.push_str(&format!("hook {}: {total} states\n", text(&h["hook"])));
        if rows.len() > 1 {
            o.push_str(&table(&rows));
        }
        if (rows.len() - 1) < total as usize {
            o.push_str(&format!(
                "({} listed, --limit N lists more)\n",
                rows.len() - 1
            ));
        }
    }
    o
}

fn x_total(h: &Value) -> u64 {
    h["total"].as_u64().unwrap_or(0)
}

fn rules(r: &Value) -> String {
    let mut hits = vec![vec![
        "HOOK".to_owned(),
        "RULE".into(),
        "HITS".into(),
        "TEXT".into(),
    ]];
    let mut other = vec![vec![
        "HOOK".to_owned(),
        "STAT".into(),
        "LABELS".into(),
        "VALUE".into(),
    ]];
    for h in arr(r, "hooks") {
        for st in arr(&h, "stats") {
            let is_hits = st["name"] == "rule_hits";
            for x in arr(&st, "samples") {
                if is_hits {
                    hits.push(vec![
                        text(&h["hook"]),
                        text(&x["labels"]["rule"]),
                        text(&x["value"]),
                        text(&x["labels"]["text"]),
                    ]);
                    continue;
                }
                let labels: Vec<String> = x["labels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={}", text(v)))
                    .collect();
                other.push(vec![
                    text(&h["hook"]),
                    text(&st["name"]),
                    if labels.is_empty() {
                        "-".into()
                    } else {
                        labels.join(",")
                    },
                    text(&x["value"]),
                ]);
            }
        }
    }
    let mut s = String::new();
    if hits.len() > 1 {
        s += &table(&hits);
    }
    if other.len() > 1 {
        if !s.is_empty() {
            s.push('\n');
        }
        s += &table(&other);
    }
    if s.is_empty() {
        s = "no hook keeps filter statistics\n".into();
    }
    let generation = r.get("generation").map(text).unwrap_or_default();
    format!("{s}generation {generation}\n")
}

/// How `heads` and `hooks` mark a quarantined link: a fail-closed one
/// drops everything until `pfilctl reap`; a fail-open one is skipped until
/// the next change.
fn quarantined(l: &Value) -> &'static str {
    match (l["quarantined"] == json!(true), l["fail"].as_str()) {
        (false, _) => "",
        (true, Some("closed")) => " (QUARANTINED, fail closed: dropping all until `pfilctl reap`)",
        (true, _) => " (quarantined, fail open: skipped)",
    }
}

/// The quarantined links a write reaped, with their final counters, one
/// per line (nothing if none).
fn reaped(r: &Value) -> String {
    let mut s = String::new();
    for l in arr(r, "reaped") {
        s += &format!(
            "  reaped quarantined {} {} {} (fail {}): final packets {} bytes {} passed {} dropped {} consumed {} faults {}\n",
            text(&l["head"]),
            text(&l["dir"]),
            text(&l["hook"]),
            text(&l["fail"]),
            text(&l["packets"]),
            text(&l["bytes"]),
            text(&l["passed"]),
            text(&l["dropped"]),
            text(&l["consumed"]),
            text(&l["faults"]),
        );
    }
    s
}

fn retired(r: &Value) -> String {
    let mut s = String::from("\n");
    for l in arr(r, "retired") {
        s += &format!(
            "  {} {} {}: final packets {} bytes {} passed {} dropped {} consumed {}\n",
            text(&l["head"]),
            text(&l["dir"]),
            text(&l["hook"]),
            text(&l["packets"]),
            text(&l["bytes"]),
            text(&l["passed"]),
            text(&l["dropped"]),
            text(&l["consumed"]),
        );
    }
    if r["complete"] == json!(false) {
        s += "  (a datapath thread still ran the previous chain at the answer: counters may still grow)\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_clap_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    fn parse(s: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("pfilctl").chain(s.split_whitespace()))
    }

    #[test]
    fn verbs_abbreviations_and_placements() {
        let c = parse("--socket /x li -i -a count:a syn0").unwrap();
        assert_eq!(c.socket, Some(PathBuf::from("/x")));
        let (m, p) = request(c.cmd.as_ref().unwrap()).unwrap();
        assert_eq!(m, "link");
        assert_eq!(
            p,
            json!({"head": "syn0", "dir": "in", "hook": "count:a", "placement": "append"})
        );
        let (_, p) = request(
            parse("link -o --before count:1 count:a syn0")
                .unwrap()
                .cmd
                .as_ref()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(p["placement"], json!({"before": "count:1"}));
        assert_eq!(p["dir"], "out");
        let (_, p) = request(parse("link -i count:a syn0").unwrap().cmd.as_ref().unwrap()).unwrap();
        assert_eq!(p["placement"], "prepend");
        assert_eq!(
            request(parse("he").unwrap().cmd.as_ref().unwrap())
                .unwrap()
                .0,
            "heads"
        );
        assert_eq!(
            request(parse("ho --json").unwrap().cmd.as_ref().unwrap())
                .unwrap()
                .0,
            "hooks"
        );
        assert_eq!(
            request(parse("st syn0").unwrap().cmd.as_ref().unwrap())
                .unwrap()
                .1,
            json!({"head": "syn0"})
        );
        let (m, p) = request(
            parse("add drop-udp:dns --set 53")
                .unwrap()
                .cmd
                .as_ref()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (m, p),
            ("add", json!({"hook": "drop-udp:dns", "config": "53"}))
        );
        assert_eq!(
            request(
                parse("set drop-udp:dns --set 5353")
                    .unwrap()
                    .cmd
                    .as_ref()
                    .unwrap()
            )
            .unwrap(),
            ("set", json!({"hook": "drop-udp:dns", "config": "5353"}))
        );
        assert_eq!(
            request(parse("unl -o h x").unwrap().cmd.as_ref().unwrap())
                .unwrap()
                .0,
            "unlink"
        );
        let dir = std::env::temp_dir().join(format!("pfilctl-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("port");
        std::fs::write(&f, "5353\n\n").unwrap();
        let (m, p) = request(
            &parse(&format!("set drop-udp:dns --config {}", f.display()))
                .unwrap()
                .cmd
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (m, p),
            ("set", json!({"hook": "drop-udp:dns", "config": "5353"})),
            "final line breaks dropped"
        );
        std::fs::write(&f, "[hooks.\"count:1\"]\n").unwrap();
        let (m, p) = request(
            &parse(&format!("ap -n {}", f.display()))
                .unwrap()
                .cmd
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (m, p),
            (
                "apply",
                json!({"toml": "[hooks.\"count:1\"]\n", "dry_run": true})
            )
        );
        let (m, p) = request(
            &parse(&format!("apply --expect-generation 7 {}", f.display()))
                .unwrap()
                .cmd
                .unwrap(),
        )
        .unwrap();
        assert_eq!((m, p["expect_generation"].clone()), ("apply", json!(7)));
        assert_eq!(
            request(parse("sh").unwrap().cmd.as_ref().unwrap())
                .unwrap()
                .0,
            "show"
        );
        let e = request(
            parse("apply /nonexistent/x.toml")
                .unwrap()
                .cmd
                .as_ref()
                .unwrap(),
        )
        .unwrap_err();
        assert!(e.contains("reading /nonexistent/x.toml"), "{e}");
        assert!(
            parse("add count:a --set 1 --config /x").is_err(),
            "--set or --config"
        );
        assert!(parse("a x").is_err(), "a is add or apply");
        std::fs::remove_dir_all(&dir).unwrap();
        for bad in [
            "link count:a syn0",
            "link -i -o count:a syn0",
            "link -i -a --after x count:a syn0",
            "unlink -i h",
            "h",
            "frobnicate",
            "stats a b",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn usage_errors_exit_2_and_help_0() {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        assert_eq!(run(["pfilctl", "link", "x"], &mut o, &mut e), 2);
        assert!(!e.is_empty());
        let (mut o, mut e) = (Vec::new(), Vec::new());
        assert_eq!(run(["pfilctl", "stats", "--count", "3"], &mut o, &mut e), 2);
        assert!(String::from_utf8_lossy(&e).contains("--watch"));
        let (mut o, mut e) = (Vec::new(), Vec::new());
        assert_eq!(run(["pfilctl", "--help"], &mut o, &mut e), 0);
        assert!(String::from_utf8_lossy(&o).contains("unlink"));
        let (mut o, mut e) = (Vec::new(), Vec::new());
        let code = run(
            ["pfilctl", "--socket", "/nonexistent/pfil.sock", "heads"],
            &mut o,
            &mut e,
        );
        assert_eq!(code, 1);
        let e = String::from_utf8_lossy(&e);
        assert!(e.contains("/nonexistent/pfil.sock"), "{e}");
    }

    #[test]
    fn tables_align() {
        let t = table(&[
            vec!["A".into(), "BB".into(), "C".into()],
            vec!["long".into(), "x".into(), "y".into()],
        ]);
        assert_eq!(t, "A     BB  C\nlong  x   y\n");
    }
}
