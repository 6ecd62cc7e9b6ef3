//! Command-line parsing: `pfild MODE IFACE... [OPTIONS]`, derived with
//! clap from the definitions below, so `--help` is generated from what
//! parses. Every error names the option and what it expects; the list of
//! `--hook` filters in the help comes from the filter catalog
//! ([`crate::hooks::catalog`]).

use std::net::Ipv4Addr;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use pfil_afxdp::run::{GenConfig, UmemMode};
use pfil_afxdp::{BindMode, XdpMode};

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Receive, run heads, drop.
    Sink {
        /// Interface.
        iface: String,
    },
    /// Bump in the wire between two interfaces.
    Forward {
        /// First interface.
        a: String,
        /// Second interface.
        b: String,
    },
    /// Traffic generator.
    Gen {
        /// Interface.
        iface: String,
    },
}

impl Mode {
    /// The interfaces, in command-line order.
    pub fn ifaces(&self) -> Vec<&str> {
        match self {
            Mode::Sink { iface } | Mode::Gen { iface } => vec![iface],
            Mode::Forward { a, b } => vec![a, b],
        }
    }
}

/// `--engine`: how `gen` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Engine {
    /// An AF_XDP socket's TX ring, through the interface's out head.
    #[default]
    AfXdp,
    /// `BPF_PROG_RUN` with live frames: the kernel generates
    /// (`pfil_afxdp::live`); no hooks.
    XdpLive,
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Engine::AfXdp => "afxdp",
            Engine::XdpLive => "xdp-live",
        })
    }
}

/// `--queues`: a count or every queue of the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queues {
    /// Queues `0..n`.
    Count(u32),
    /// Every queue the interface has.
    All,
}

/// Everything the command line says.
#[derive(Clone, Debug)]
pub struct Args {
    /// Subcommand and interfaces.
    pub mode: Mode,
    /// Hook specs in command-line order.
    pub hooks: Vec<String>,
    /// `--config FILE` (or `--check-config FILE`): the configuration
    /// applied at start and on reload.
    pub config: Option<std::path::PathBuf>,
    /// `--check-config FILE`: check, do not run.
    pub check_only: bool,
    /// `--log FILTER`.
    pub log: Option<String>,
    /// `--pcap FILE`: the capture to replay.
    pub pcap: Option<std::path::PathBuf>,
    /// `--loop N`: times to play it (0: until stopped).
    pub loops: u64,
    /// `--sample-every N`: per-link cost sampling.
    pub sample_every: u32,
    /// `--metrics [ADDR]`: the OpenMetrics endpoint's address.
    pub metrics: Option<String>,
    /// `--metrics-filters`: what of the filters' statistics it serves.
    pub metrics_filters: pfil_ctl::metrics::FilterExport,
    /// Queues (None: the mode's default).
    pub queues: Option<Queues>,
    /// Namespace for the workers.
    pub netns: Option<String>,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// AF_XDP bind mode.
    pub bind: BindMode,
    /// Stop after this many seconds.
    pub seconds: Option<f64>,
    /// Stop after this many frames.
    pub count: Option<u64>,
    /// Ring entries.
    pub ring: Option<u32>,
    /// UMEM frames per worker.
    pub umem_frames: Option<u32>,
    /// One UMEM area for every queue or one per worker.
    pub umem_mode: UmemMode,
    /// `--cpus LIST`: pin AF_XDP worker `i` to the `i`-th CPU of the list.
    pub cpus: Option<Vec<usize>>,
    /// Busy-poll time after the last frame, in microseconds.
    pub spin_us: u32,
    /// No live status.
    pub quiet: bool,
    /// In-memory port.
    pub synthetic: bool,
    /// Generator settings (`count` is set per worker when the app starts).
    pub gen: GenConfig,
    /// Whether any generator option was given.
    pub gen_opts_given: bool,
    /// How `gen` sends.
    pub engine: Engine,
    /// In-kernel generator settings (`--threads`, `--repeat`,
    /// `--batch-size`; the netns is set when the app starts).
    pub live: pfil_afxdp::live::LiveConfig,
    /// The control server's socket.
    pub control: Control,
}

/// `--control PATH` / `--no-control`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// The default socket; if a live pfild holds it, run without control.
    Default,
    /// This socket; busy is an error.
    Path(std::path::PathBuf),
    /// No control server.
    Off,
}

/// Why the command line was refused (or `--help`).
#[derive(Debug, PartialEq, Eq)]
pub enum ArgError {
    /// `--help` / `-h`: print this text on stdout, exit 0.
    Help(String),
    /// A usage error, with its message.
    Usage(String),
}

/// Parse `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn mac_text(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

mod values;
use values::*;

/// The help's epilogue: the filters `--hook` knows (from the catalog),
/// then how to try it and how it stops.
fn after_help() -> String {
    format!(
        "Hooks (--hook SPEC, SPEC is `module` or `module:config`):\n{}\n{AFTER_HELP}",
        crate::hooks::catalog().help_table(2)
    )
}

fn gen_default(what: impl std::fmt::Display) -> String {
    format!("[default: {what}]")
}

fn dst_ports_default() -> String {
    let d = GenConfig::default().dst_ports;
    let list: Vec<_> = d.iter().map(u16::to_string).collect();
    format!(
        "Destination ports, used round robin [default: {}]",
        list.join(",")
    )
}

const AFTER_HELP: &str = "\
Add --synthetic to run the same app on the built-in in-memory port (no root,
no interface needed), e.g.
    pfild sink syn0 --synthetic --hook count --seconds 3

Stops on SIGINT/SIGTERM (a second one exits at once), after --seconds or
--count; then drains the workers, prints totals (with each acl hook's
per-rule hits) and detaches XDP.
Logs: RUST_LOG=pfil_afxdp=debug for more detail.";

/// The command line, as clap sees it (options are global: they may come
/// before or after the mode).
#[derive(Debug, Parser)]
#[command(
    name = "pfild",
    version,
    about = "pfild: the pfil reference dataplane (AF_XDP sink, forwarder, generator)",
    after_help = after_help(),
    subcommand_required = true,
    disable_help_subcommand = true,
    args_override_self = true,
    subcommand_value_name = "MODE",
    subcommand_help_heading = "Modes",
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    mode: ModeCmd,
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    gen: GenOpts,
}

/// The modes.
#[derive(Debug, Subcommand)]
enum ModeCmd {
    /// IFACE: receive, run its in head, drop
    Sink {
        /// Interface to receive on
        #[arg(value_name = "IFACE")]
        iface: String,
    },
    /// IFACE_A IFACE_B: bump in the wire, A in -> B out and B in -> A out
    #[command(visible_alias = "fwd")]
    Forward {
        /// First interface
        #[arg(value_name = "IFACE_A")]
        a: String,
        /// Second interface
        #[arg(value_name = "IFACE_B")]
        b: String,
    },
    /// IFACE: build UDP frames, run its out head, send
    Gen {
        /// Interface to send on
        #[arg(value_name = "IFACE")]
        iface: String,
    },
}

#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Common options")]
struct Common {
    /// Link a filter at start (repeatable; chain order = command-line order):
    /// sink/forward link on the in heads, gen on the out head. SPECs: see
    /// Hooks below
    #[arg(long = "hook", value_name = "SPEC", global = true)]
    hooks: Vec<String>,
    // A help string, not a doc comment: rustdoc would read `[pfild]` as
    // a link.
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        conflicts_with = "hooks",
        help = "Run from configuration FILE (TOML, pfild.toml(5)): its [pfild] settings \
                  (options given here override them), then its hooks and chains (the format of \
                  `pfilctl show` and `pfilctl apply`), applied at start and again on SIGHUP or \
                  `pfilctl reload`"
    )]
    config: Option<std::path::PathBuf>,
    /// Check configuration FILE and exit (0: good): its settings with the
    /// options given here, its hooks built, its chains planned against
    /// the heads of its interfaces, its netns, interfaces and capture as
    /// this machine has them; nothing starts, nothing is attached
    #[arg(long, value_name = "FILE", global = true, conflicts_with = "hooks")]
    check_config: Option<std::path::PathBuf>,
    /// Log filter, RUST_LOG syntax (e.g. info, or warn,pfil_afxdp=debug)
    /// [default: $RUST_LOG, else warn,pfil_afxdp=info]
    #[arg(long, value_name = "FILTER", global = true)]
    log: Option<String>,
    /// Print and exit: man (pfild(8)), man-config (pfild.toml(5)), or the
    /// completions for bash, zsh or fish
    #[arg(long, value_name = "WHAT", global = true,
          value_parser = clap::builder::PossibleValuesParser::new(crate::generate::WHAT))]
    generate: Option<String>,
    /// Queues 0..N (one worker each) [default: all for sink/forward, 1 for gen and --synthetic]
    #[arg(long, value_name = "N|all", global = true, value_parser = queues)]
    queues: Option<Queues>,
    /// Run the workers inside network namespace NAME
    #[arg(long, value_name = "NAME", global = true)]
    netns: Option<String>,
    /// auto|native|generic [default: auto: native, then generic]
    #[arg(long, value_name = "MODE", global = true, value_parser = xdp_mode)]
    xdp_mode: Option<XdpMode>,
    /// auto|copy|zerocopy AF_XDP bind mode [default: auto]
    #[arg(long, value_name = "MODE", global = true, value_parser = bind_mode)]
    bind: Option<BindMode>,
    /// Stop after N seconds (decimals allowed)
    #[arg(
        long,
        value_name = "N",
        global = true,
        allow_negative_numbers = true,
        value_parser = seconds
    )]
    seconds: Option<f64>,
    /// Stop after N frames (received; for gen: sent)
    #[arg(long, value_name = "N", global = true, value_parser = frame_count)]
    count: Option<u64>,
    /// RX/TX/fill/completion ring entries [default: 4096 for sink, 2048 for forward and gen]
    #[arg(long, value_name = "N", global = true, value_parser = ring)]
    ring: Option<u32>,
    /// UMEM frames per worker [default: what the rings need, at least 8192]
    #[arg(long, value_name = "N", global = true, value_parser = umem_frames)]
    umem_frames: Option<u32>,
    /// shared|per-queue [default: shared: the workers of all queues share one UMEM area, each owning its frames]
    #[arg(long = "umem", value_name = "MODE", global = true, value_parser = umem_mode)]
    umem_mode: Option<UmemMode>,
    /// Pin the AF_XDP workers: worker i (queue order) to the i-th CPU of LIST (e.g. 1,3-5), wrapping around [default: not pinned]
    #[arg(long, value_name = "LIST", global = true, value_parser = cpus)]
    cpus: Option<Cpus>,
    /// Busy-poll the RX rings for N us after the last frame before sleeping in poll(2) (0: sleep at once, saves CPU, loses frames at high rates)
    #[arg(long, value_name = "N", global = true, default_value_t = 1000)]
    spin_us: u32,
    /// No live status line
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Use the in-memory port instead of AF_XDP
    #[arg(long, global = true)]
    synthetic: bool,
    /// Time one batch in N per worker and link, for per-hook costs (a power of two; 0: off)
    #[arg(long, value_name = "N", global = true, default_value_t = pfil::DEFAULT_SAMPLING)]
    sample_every: u32,
    /// Replay the frames of a capture (pcap or pcapng, Ethernet, frames up
    /// to 256 KiB, held in memory up to 1 GiB): sink and forward run them
    /// through the heads on the in-memory port, gen sends them
    #[arg(long, value_name = "FILE", global = true)]
    pcap: Option<std::path::PathBuf>,
    /// With --pcap: play the capture N times (0: until stopped)
    #[arg(
        long = "loop",
        value_name = "N",
        global = true,
        requires = "pcap",
        default_value_t = 1
    )]
    loops: u64,
    /// Control socket for pfilctl [default: /run/pfil/pfild.sock as root, $XDG_RUNTIME_DIR/pfil/pfild.sock otherwise; if a running pfild has it, run without control]
    #[arg(long, value_name = "PATH", global = true)]
    control: Option<std::path::PathBuf>,
    /// Run without the control server
    #[arg(long, global = true, conflicts_with = "control")]
    no_control: bool,
    /// Serve counters and per-hook costs for Prometheus (OpenMetrics) on
    /// http://ADDR/metrics [default ADDR: 127.0.0.1:9464]
    #[arg(long, value_name = "ADDR", global = true, num_args = 0..=1, default_missing_value = "127.0.0.1:9464")]
    metrics: Option<String>,
    /// What of the filters' own statistics --metrics serves: all (acl
    /// counted rules with their text), no-rule-text (rules by index
    /// only), off (only the links' counters). The endpoint has no
    /// authentication and bypasses the control socket's access control
    #[arg(long, value_name = "MODE", global = true, requires = "metrics", default_value = "all",
          value_parser = clap::builder::PossibleValuesParser::new(pfil_ctl::metrics::FilterExport::NAMES))]
    metrics_filters: String,
}

#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Generator options (gen, and the frames of --synthetic)")]
struct GenOpts {
    #[arg(long, value_name = "PPS", global = true,
          help = format!("Frames per second (0: as fast as possible) {}", gen_default(GenConfig::default().rate)))]
    rate: Option<u64>,
    #[arg(long, value_name = "BYTES", global = true, value_parser = frame_size,
          help = format!("Frame size without FCS, 60 to 2048 {}", gen_default(GenConfig::default().size)))]
    size: Option<usize>,
    #[arg(long, value_name = "MAC", global = true, value_parser = mac,
          help = format!("Source MAC {}", gen_default(mac_text(GenConfig::default().src_mac))))]
    src_mac: Option<[u8; 6]>,
    #[arg(long, value_name = "MAC", global = true, value_parser = mac,
          help = format!("Destination MAC {}", gen_default(mac_text(GenConfig::default().dst_mac))))]
    dst_mac: Option<[u8; 6]>,
    #[arg(long, value_name = "IP", global = true,
          help = format!("Source IPv4 address {}", gen_default(GenConfig::default().src_ip)))]
    src_ip: Option<Ipv4Addr>,
    #[arg(long, value_name = "IP", global = true,
          help = format!("Destination IPv4 address {}", gen_default(GenConfig::default().dst_ip)))]
    dst_ip: Option<Ipv4Addr>,
    #[arg(long, value_name = "PORT", global = true,
          help = format!("UDP source port {}", gen_default(GenConfig::default().src_port)))]
    src_port: Option<u16>,
    #[arg(long, value_name = "P[,P..]", global = true, value_parser = ports,
          help = dst_ports_default())]
    dst_port: Option<Ports>,
    /// --synthetic: N UDP flows both ways (flow f: from --src-ip plus f/16384
    /// in the third octet, port 1024 + f%16384, to --dst-ip, the first
    /// --dst-port): first a frame each way of every flow in order (the
    /// flows set up), then the flows in a scattered order, a frame each
    /// way (established traffic) [default: off]
    #[arg(long, value_name = "N", global = true, value_parser = positive_u32)]
    flows: Option<u32>,
    /// --flows: udp, or tcp (each flow set up by a SYN and its SYN-ACK,
    /// then an ACK each way, without data) [default: udp]
    #[arg(long, value_name = "PROTO", global = true, value_parser = flow_proto)]
    flow_proto: Option<pfil_port::flows::FlowProto>,
    /// afxdp|xdp-live: send from an AF_XDP socket through the out head, or
    /// let the kernel generate (BPF_PROG_RUN with live frames, Linux >= 5.18;
    /// no hooks) [default: afxdp]
    #[arg(long, value_name = "ENGINE", global = true, value_parser = engine)]
    engine: Option<Engine>,
    /// xdp-live: generator threads, each pinned to one CPU of the process's
    /// affinity (choose them with taskset) [default: 1]
    #[arg(long, value_name = "N", global = true, value_parser = positive_u32)]
    threads: Option<u32>,
    #[arg(long, value_name = "N", global = true, value_parser = positive_u32,
          help = format!("xdp-live: frames per BPF_PROG_RUN call at most (a stop lands at most one call late) {}", gen_default(pfil_afxdp::live::DEFAULT_REPEAT)))]
    repeat: Option<u32>,
    #[arg(long, value_name = "N", global = true, value_parser = batch_size,
          help = format!("xdp-live: frames per batch inside a call, 1 to 256 {}", gen_default(pfil_afxdp::live::DEFAULT_BATCH_SIZE)))]
    batch_size: Option<u32>,
}

/// The clap command pfild parses with (its `--help`).
pub fn command() -> clap::Command {
    Cli::command()
}

/// A clap error as pfild words it: the message without clap's `error: `
/// prefix and its usage / `--help` footer (main prints its own). A missing
/// or unknown mode and a missing interface keep pfild's wording.
fn usage_error(e: &clap::Error) -> ArgError {
    let modes = "sink, forward or gen";
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            return ArgError::Help(e.render().to_string())
        }
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            return ArgError::Usage(format!("missing mode: {modes} (see --help)"))
        }
        ErrorKind::InvalidSubcommand => {
            if let Some(ContextValue::String(m)) = e.get(ContextKind::InvalidSubcommand) {
                return ArgError::Usage(format!("unknown mode `{m}`: expected {modes}"));
            }
        }
        ErrorKind::MissingRequiredArgument => {
            if let Some(ContextValue::Strings(v)) = e.get(ContextKind::InvalidArg) {
                let names: Vec<_> = v
                    .iter()
                    .map(|s| s.trim_start_matches('<').trim_end_matches('>'))
                    .collect();
                return ArgError::Usage(format!("missing {} (see --help)", names.join(" and ")));
            }
        }
        _ => {}
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let kept: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .collect();
    ArgError::Usage(kept.join("\n").trim_end().to_owned())
}

impl Args {
    /// Parse the arguments after the program name.
    ///
    /// # Errors
    /// [`ArgError::Help`] for `--help`, [`ArgError::Usage`] otherwise.
    pub fn parse<I: IntoIterator<Item = String>>(argv: I) -> Result<Args, ArgError> {
        let argv = std::iter::once("pfild".to_owned()).chain(argv);
        let cli = command()
            .try_get_matches_from(argv)
            .and_then(|m| Cli::from_arg_matches(&m))
            .map_err(|e| usage_error(&e))?;
        let usage = |m: &str| Err(ArgError::Usage(m.to_owned()));
        let mode = match cli.mode {
            ModeCmd::Sink { iface } => Mode::Sink { iface },
            ModeCmd::Forward { a, b } => {
                if a == b {
                    return usage("forward needs two different interfaces");
                }
                Mode::Forward { a, b }
            }
            ModeCmd::Gen { iface } => Mode::Gen { iface },
        };
        let mode_is_gen = matches!(mode, Mode::Gen { .. });
        let (c, g) = (cli.common, cli.gen);
        let gen_opts_given = g.rate.is_some()
            || g.size.is_some()
            || g.src_mac.is_some()
            || g.dst_mac.is_some()
            || g.src_ip.is_some()
            || g.dst_ip.is_some()
            || g.src_port.is_some()
            || g.dst_port.is_some()
            || g.flows.is_some()
            || g.flow_proto.is_some()
            || g.engine.is_some();
        let g_built_opts = g.size.is_some()
            || g.src_mac.is_some()
            || g.dst_mac.is_some()
            || g.src_ip.is_some()
            || g.dst_ip.is_some()
            || g.src_port.is_some()
            || g.dst_port.is_some();
        let live_opts_given = g.threads.is_some() || g.repeat.is_some() || g.batch_size.is_some();
        let engine = g.engine.unwrap_or_default();
        let ld = pfil_afxdp::live::LiveConfig::default();
        let live = pfil_afxdp::live::LiveConfig {
            netns: None,
            threads: g.threads.unwrap_or(ld.threads),
            repeat: g.repeat.unwrap_or(ld.repeat),
            batch_size: g.batch_size.unwrap_or(ld.batch_size),
            per_frame_ports: ld.per_frame_ports,
        };
        let d = GenConfig::default();
        let gen = GenConfig {
            rate: g.rate.unwrap_or(d.rate),
            size: g.size.unwrap_or(d.size),
            src_mac: g.src_mac.unwrap_or(d.src_mac),
            dst_mac: g.dst_mac.unwrap_or(d.dst_mac),
            src_ip: g.src_ip.unwrap_or(d.src_ip),
            dst_ip: g.dst_ip.unwrap_or(d.dst_ip),
            src_port: g.src_port.unwrap_or(d.src_port),
            dst_ports: g.dst_port.map_or(d.dst_ports, |p| p.0),
            flows: g.flows.unwrap_or(0),
            flow_proto: g.flow_proto.unwrap_or_default(),
            ..GenConfig::default()
        };
        let a = Args {
            mode,
            hooks: c.hooks,
            check_only: c.check_config.is_some(),
            config: c.check_config.or(c.config),
            log: c.log,
            queues: c.queues,
            netns: c.netns,
            xdp_mode: c.xdp_mode.unwrap_or(XdpMode::Auto),
            bind: c.bind.unwrap_or(BindMode::Auto),
            seconds: c.seconds,
            count: c.count,
            ring: c.ring,
            umem_frames: c.umem_frames,
            umem_mode: c.umem_mode.unwrap_or(UmemMode::Shared),
            cpus: c.cpus.map(|c| c.0),
            spin_us: c.spin_us,
            quiet: c.quiet,
            // A capture replayed by sink or forward runs on the in-memory
            // port; gen sends it on the interface.
            synthetic: c.synthetic || (c.pcap.is_some() && !mode_is_gen),
            pcap: c.pcap,
            loops: c.loops,
            sample_every: c.sample_every,
            metrics: c.metrics,
            metrics_filters: c
                .metrics_filters
                .parse()
                .map_err(|e| ArgError::Usage(format!("--metrics-filters: {e}")))?,
            gen,
            gen_opts_given,
            engine,
            live,
            control: match (c.control, c.no_control) {
                (_, true) => Control::Off,
                (Some(p), false) => Control::Path(p),
                (None, false) => Control::Default,
            },
        };
        if a.gen.flows > 0 && (!a.synthetic || a.pcap.is_some()) {
            return usage("--flows applies to --synthetic only (not to `gen`, nor with --pcap)");
        }
        if g.flow_proto.is_some() && a.gen.flows == 0 {
            return usage("--flow-proto applies to --flows only");
        }
        if a.gen_opts_given && !a.synthetic && !matches!(a.mode, Mode::Gen { .. }) {
            return usage("generator options (--rate, --size, --src-*, --dst-*) apply to `gen` and to --synthetic only");
        }
        if live_opts_given && a.engine != Engine::XdpLive {
            return usage(
                "--threads, --repeat and --batch-size apply to `gen --engine xdp-live` only",
            );
        }
        if a.engine == Engine::XdpLive {
            if !matches!(a.mode, Mode::Gen { .. }) {
                return usage("--engine applies to `gen` only");
            }
            if a.synthetic {
                return usage(
                    "--engine xdp-live sends on a real interface; it has no --synthetic form",
                );
            }
            if !a.hooks.is_empty() {
                return usage("--engine xdp-live cannot run hooks: the kernel builds and sends the frames, pfild never sees them (use the afxdp engine for hooks on the out head)");
            }
            if a.queues.is_some() {
                return usage("--engine xdp-live has no queues: give --threads N instead");
            }
        }
        if a.cpus.is_some() && (a.synthetic || a.engine == Engine::XdpLive) {
            return usage(if a.synthetic {
                "--cpus pins AF_XDP workers; the in-memory port runs one worker: use taskset"
            } else {
                "--cpus pins AF_XDP workers; the xdp-live generator's threads take the CPUs of the process's affinity: use taskset"
            });
        }
        if a.synthetic && a.netns.is_some() {
            return usage(if a.pcap.is_some() && !mode_is_gen {
                "--netns has no meaning with --pcap (sink and forward replay on the in-memory port)"
            } else {
                "--netns has no meaning with --synthetic"
            });
        }
        if a.pcap.is_some() {
            let built = g_built_opts;
            if built {
                return usage("--pcap: the frames come from the capture; --size, --src-*, --dst-* do not apply (--rate does)");
            }
            if a.count.is_some() {
                return usage("--pcap: the capture says how many frames (times --loop N); --count does not apply");
            }
            if a.engine == Engine::XdpLive {
                return usage(
                    "--pcap replays with the afxdp engine (or --synthetic), not --engine xdp-live",
                );
            }
            if matches!(a.queues, Some(Queues::Count(n)) if n > 1)
                || matches!(a.queues, Some(Queues::All))
            {
                return usage("--pcap replays on one worker, in the capture's order: no --queues");
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests;
