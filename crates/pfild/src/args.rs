//! Command-line parsing: `pfild MODE IFACE... [options]`, by hand (the
//! grammar is small and every error names the option and what it expects).

use std::str::FromStr;

use pfil_afxdp::run::{GenConfig, UmemMode};
use pfil_afxdp::{BindMode, XdpMode};

/// The usage text printed by `--help` and after a usage error.
pub const USAGE: &str = "\
pfild: the pfil reference dataplane (AF_XDP sink, forwarder, generator)

USAGE:
    pfild sink IFACE [OPTIONS]             receive, run IFACE's in head, drop
    pfild forward IFACE_A IFACE_B [OPTIONS]
                                           A in -> B out and B in -> A out
    pfild gen IFACE [OPTIONS]              build UDP frames, run IFACE's out head, send

    Add --synthetic to run the same app on the built-in in-memory port
    (no root, no interface needed), e.g.
        pfild sink syn0 --synthetic --hook count --seconds 3

COMMON OPTIONS:
    --hook NAME         link a built-in filter at start (repeatable; chain
                        order = command-line order). Names: null, count,
                        drop-udp:PORT, mutex, rwlock, brlock, epoch.
                        sink/forward link on the in heads, gen on the out head.
    --queues N|all      queues 0..N (one worker each); default: all for
                        sink/forward, 1 for gen and --synthetic
    --netns NAME        run the workers inside network namespace NAME
    --xdp-mode MODE     auto|native|generic (default auto: native, then generic)
    --bind MODE         auto|copy|zerocopy AF_XDP bind mode (default auto)
    --seconds N         stop after N seconds (decimals allowed)
    --count N           stop after N frames (received; for gen: sent)
    --ring N            RX/TX/fill/completion ring entries (default 2048)
    --umem-frames N     UMEM frames per worker (default: what the rings need, at least 8192)
    --umem MODE         shared|per-queue (default shared: the workers of all
                        queues share one UMEM area, each owning its frames)
    --spin-us N         busy-poll the RX rings for N us after the last frame
                        before sleeping in poll(2) (default 1000; 0: sleep
                        at once, saves CPU, loses frames at high rates)
    --quiet             no live status line
    --synthetic         use the in-memory port instead of AF_XDP

GENERATOR OPTIONS (gen, and the frames of --synthetic):
    --rate PPS          frames per second (default 0: as fast as possible)
    --size BYTES        frame size without FCS, >= 60 (default 64)
    --src-mac MAC       default 02:00:00:00:00:01
    --dst-mac MAC       default 02:00:00:00:00:02
    --src-ip IP         default 198.18.0.1
    --dst-ip IP         default 198.18.0.2
    --src-port PORT     default 9
    --dst-port P[,P..]  destination ports used round robin (default 9)

Stops on SIGINT/SIGTERM (a second one exits at once), after --seconds or
--count; then drains the workers, prints totals and detaches XDP.
Logs: RUST_LOG=pfil_afxdp=debug for more detail.
";

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
    /// Busy-poll time after the last frame, in microseconds.
    pub spin_us: u32,
    /// No live status.
    pub quiet: bool,
    /// In-memory port.
    pub synthetic: bool,
    /// Generator settings.
    /// Generator settings (`count` is set per worker when the app starts).
    pub gen: GenConfig,
    /// Whether any generator option was given.
    pub gen_opts_given: bool,
}

/// Why the command line was refused (or `--help`).
#[derive(Debug, PartialEq, Eq)]
pub enum ArgError {
    /// `--help` / `-h`: print usage, exit 0.
    Help,
    /// A usage error, with its message.
    Usage(String),
}

fn usage<T>(msg: impl Into<String>) -> Result<T, ArgError> {
    Err(ArgError::Usage(msg.into()))
}

fn num<T: FromStr>(opt: &str, v: &str, what: &str) -> Result<T, ArgError> {
    v.parse()
        .map_err(|_| ArgError::Usage(format!("{opt} {v:?}: expected {what}")))
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

impl Args {
    /// Parse the arguments after the program name.
    ///
    /// # Errors
    /// [`ArgError::Help`] for `--help`, [`ArgError::Usage`] otherwise.
    pub fn parse<I: IntoIterator<Item = String>>(argv: I) -> Result<Args, ArgError> {
        let mut positional = Vec::new();
        let mut a = Args {
            mode: Mode::Sink {
                iface: String::new(),
            },
            hooks: Vec::new(),
            queues: None,
            netns: None,
            xdp_mode: XdpMode::Auto,
            bind: BindMode::Auto,
            seconds: None,
            count: None,
            ring: None,
            umem_frames: None,
            umem_mode: UmemMode::Shared,
            spin_us: 1000,
            quiet: false,
            synthetic: false,
            gen: GenConfig::default(),
            gen_opts_given: false,
        };
        let mut it = argv.into_iter();
        while let Some(arg) = it.next() {
            // Accept both `--opt value` and `--opt=value`.
            let (opt, inline) = match arg.split_once('=') {
                Some((o, v)) if o.starts_with("--") => (o.to_owned(), Some(v.to_owned())),
                _ => (arg.clone(), None),
            };
            let takes_value = matches!(
                opt.as_str(),
                "--hook"
                    | "--queues"
                    | "--netns"
                    | "--xdp-mode"
                    | "--bind"
                    | "--seconds"
                    | "--count"
                    | "--ring"
                    | "--umem-frames"
                    | "--umem"
                    | "--spin-us"
                    | "--rate"
                    | "--size"
                    | "--src-mac"
                    | "--dst-mac"
                    | "--src-ip"
                    | "--dst-ip"
                    | "--src-port"
                    | "--dst-port"
            );
            let val = if takes_value {
                match inline.or_else(|| it.next()) {
                    Some(v) => v,
                    None => return usage(format!("{opt} needs a value")),
                }
            } else {
                if inline.is_some() {
                    return usage(format!("{opt} takes no value"));
                }
                String::new()
            };
            let v = val.as_str();
            match opt.as_str() {
                "-h" | "--help" => return Err(ArgError::Help),
                "--hook" => a.hooks.push(val.clone()),
                "--queues" => {
                    a.queues = Some(if v == "all" {
                        Queues::All
                    } else {
                        let n: u32 = num(&opt, v, "a queue count or `all`")?;
                        if n == 0 {
                            return usage("--queues must be at least 1 (or `all`)");
                        }
                        Queues::Count(n)
                    })
                }
                "--netns" => a.netns = Some(val.clone()),
                "--xdp-mode" => {
                    a.xdp_mode = match v {
                        "auto" => XdpMode::Auto,
                        "native" | "drv" => XdpMode::Native,
                        "generic" | "skb" => XdpMode::Generic,
                        _ => {
                            return usage(format!(
                                "--xdp-mode {v:?}: expected auto, native or generic"
                            ))
                        }
                    }
                }
                "--bind" => {
                    a.bind = match v {
                        "auto" => BindMode::Auto,
                        "copy" => BindMode::Copy,
                        "zerocopy" | "zero-copy" | "zc" => BindMode::ZeroCopy,
                        _ => {
                            return usage(format!("--bind {v:?}: expected auto, copy or zerocopy"))
                        }
                    }
                }
                "--seconds" => {
                    let s: f64 = num(&opt, v, "a number of seconds")?;
                    if !(s.is_finite() && s > 0.0) {
                        return usage("--seconds must be a positive number");
                    }
                    a.seconds = Some(s);
                }
                "--count" => {
                    let n: u64 = num(&opt, v, "a frame count")?;
                    if n == 0 {
                        return usage("--count must be at least 1");
                    }
                    a.count = Some(n);
                }
                "--ring" => {
                    let n: u32 = num(&opt, v, "a power of two")?;
                    if !n.is_power_of_two() || !(64..=32768).contains(&n) {
                        return usage("--ring must be a power of two from 64 to 32768");
                    }
                    a.ring = Some(n);
                }
                "--umem-frames" => {
                    let n: u32 = num(&opt, v, "a frame count")?;
                    if n < 64 {
                        return usage("--umem-frames must be at least 64");
                    }
                    a.umem_frames = Some(n);
                }
                "--umem" => {
                    a.umem_mode = match v {
                        "shared" => UmemMode::Shared,
                        "per-queue" | "perqueue" => UmemMode::PerQueue,
                        _ => return usage(format!("--umem {v:?}: expected shared or per-queue")),
                    }
                }
                "--spin-us" => a.spin_us = num(&opt, v, "microseconds")?,
                "--quiet" | "-q" => a.quiet = true,
                "--synthetic" => a.synthetic = true,
                "--rate" => {
                    a.gen.rate = num(&opt, v, "frames per second")?;
                    a.gen_opts_given = true;
                }
                "--size" => {
                    let n: usize = num(&opt, v, "a frame size in bytes")?;
                    if !(60..=2048).contains(&n) {
                        return usage("--size must be from 60 to 2048 bytes");
                    }
                    a.gen.size = n;
                    a.gen_opts_given = true;
                }
                "--src-mac" | "--dst-mac" => {
                    let mac = parse_mac(v).ok_or_else(|| {
                        ArgError::Usage(format!(
                            "{opt} {v:?}: expected a MAC like 02:00:00:00:00:01"
                        ))
                    })?;
                    if opt == "--src-mac" {
                        a.gen.src_mac = mac;
                    } else {
                        a.gen.dst_mac = mac;
                    }
                    a.gen_opts_given = true;
                }
                "--src-ip" => {
                    a.gen.src_ip = num(&opt, v, "an IPv4 address")?;
                    a.gen_opts_given = true;
                }
                "--dst-ip" => {
                    a.gen.dst_ip = num(&opt, v, "an IPv4 address")?;
                    a.gen_opts_given = true;
                }
                "--src-port" => {
                    a.gen.src_port = num(&opt, v, "a UDP port")?;
                    a.gen_opts_given = true;
                }
                "--dst-port" => {
                    a.gen.dst_ports = v
                        .split(',')
                        .map(|p| num(&opt, p, "UDP ports separated by commas"))
                        .collect::<Result<_, _>>()?;
                    a.gen_opts_given = true;
                }
                o if o.starts_with('-') && o.len() > 1 => {
                    return usage(format!("unknown option {o} (see --help)"))
                }
                _ => positional.push(arg),
            }
        }
        let mut pos = positional.into_iter();
        let mode = pos.next();
        let mut need = |what: &str| {
            pos.next()
                .ok_or_else(|| ArgError::Usage(format!("missing {what} (see --help)")))
        };
        a.mode = match mode.as_deref() {
            Some("sink") => Mode::Sink {
                iface: need("IFACE")?,
            },
            Some("forward") | Some("fwd") => Mode::Forward {
                a: need("IFACE_A")?,
                b: need("IFACE_B")?,
            },
            Some("gen") => Mode::Gen {
                iface: need("IFACE")?,
            },
            Some(m) => return usage(format!("unknown mode `{m}`: expected sink, forward or gen")),
            None => return usage("missing mode: sink, forward or gen (see --help)"),
        };
        if let Some(extra) = pos.next() {
            return usage(format!("unexpected argument `{extra}`"));
        }
        if let Mode::Forward { a: x, b: y } = &a.mode {
            if x == y {
                return usage("forward needs two different interfaces");
            }
        }
        if a.gen_opts_given && !a.synthetic && !matches!(a.mode, Mode::Gen { .. }) {
            return usage("generator options (--rate, --size, --src-*, --dst-*) apply to `gen` and to --synthetic only");
        }
        if a.synthetic && a.netns.is_some() {
            return usage("--netns has no meaning with --synthetic");
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Args, ArgError> {
        Args::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn parses_modes_and_options() {
        let a = p("sink syn0 --synthetic --hook count --hook null --seconds 3").unwrap();
        assert_eq!(
            a.mode,
            Mode::Sink {
                iface: "syn0".into()
            }
        );
        assert_eq!(a.hooks, vec!["count", "null"]);
        assert_eq!(a.seconds, Some(3.0));
        assert!(a.synthetic);
        let a = p("forward v0 v1 --queues all --xdp-mode=generic --netns n1").unwrap();
        assert_eq!(a.queues, Some(Queues::All));
        assert_eq!(a.xdp_mode, XdpMode::Generic);
        assert_eq!(a.netns.as_deref(), Some("n1"));
        assert_eq!(a.umem_mode, UmemMode::Shared);
        let a = p("sink v0 --queues 2 --umem per-queue").unwrap();
        assert_eq!(a.umem_mode, UmemMode::PerQueue);
        let a = p(
            "gen g0 --rate 1000 --count 5 --size 128 --dst-port 53,80 --dst-mac 02:aa:00:00:00:01",
        )
        .unwrap();
        assert_eq!(a.gen.dst_ports, vec![53, 80]);
        assert_eq!(a.gen.dst_mac, [2, 0xaa, 0, 0, 0, 1]);
        assert_eq!((a.gen.rate, a.count, a.gen.size), (1000, Some(5), 128));
    }

    #[test]
    fn refuses_bad_input() {
        assert_eq!(p("--help").unwrap_err(), ArgError::Help);
        for bad in [
            "",
            "sink",
            "forward a",
            "forward a a",
            "bogus x",
            "sink x --queues 0",
            "sink x --xdp-mode fast",
            "sink x --rate 5",
            "sink x --seconds -1",
            "sink x --wat",
            "sink x y",
            "gen x --size 10",
            "gen x --dst-mac 1:2:3",
            "sink x --hook",
            "sink x --umem both",
        ] {
            assert!(matches!(p(bad), Err(ArgError::Usage(_))), "{bad:?}");
        }
    }
}
