//! `xdp-oracle`: check that pfil runs an XDP object as the kernel does.
//!
//! The object is loaded into the kernel (its verifier too) and into pfil
//! (its verifier, JIT and interpreter) with the same map entries; every
//! frame of the captures given (and of the generated set) is run by all
//! three, and the action, the output bytes and finally every map's
//! contents compared. Needs root (bpf(2)). Exit status 0 when everything
//! agrees, 1 on a difference, 2 when the object or an argument is bad.

use std::path::PathBuf;
use std::process::ExitCode;

use pfil_xdp::oracle::{self, action_name, frames, hex, pcap, Oracle};
use pfil_xdp::XdpConfig;

const USAGE: &str = "\
usage: xdp-oracle [--pcap FILE|DIR]... [--hex FILE]... [--generated] [--max N] [--show N]
                  [--maps-every N] (CONFIG | --config FILE)

CONFIG is what follows `xdp:` in a hook spec (pfild --hook, pfilctl add):
`@OBJECT.o [program NAME]`, then map entries `map NAME key BYTES value
BYTES` (bytes as bpftool writes them; a per-CPU map's value is one CPU's,
written for every CPU; a prog array's `value name PROG`, one of the
object's programs, a tail call's target) and sizes `map NAME
max_entries N` (a map its loader sizes), separated by `;` or new lines.

  --pcap FILE|DIR  run the frames of a capture (pcap or pcapng, Ethernet),
                   or of every capture in a directory; may be repeated
  --hex FILE       run frames written in hex, one a line (`#` starts a
                   comment); may be repeated
  --generated      run the built-in frames (Ethernet, VLAN, IPv4, IPv6,
                   ARP, UDP, TCP, ICMP, truncations); the default when no
                   --pcap or --hex is given
  --max N          at most N frames of each capture (default 100000)
  --show N         print the first N differences in full (default 10)
  --maps-every N   also compare the maps every N frames (default: at the
                   end only)
  --config FILE    read CONFIG from FILE";

struct Args {
    config: String,
    pcaps: Vec<PathBuf>,
    hex: Vec<PathBuf>,
    generated: bool,
    max: usize,
    show: usize,
    maps_every: usize,
}

fn number(v: Option<String>, what: &str) -> Result<usize, String> {
    let v = v.ok_or_else(|| format!("{what} needs a number"))?;
    v.parse()
        .map_err(|_| format!("{what}: `{v}` is not a number"))
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        config: String::new(),
        pcaps: Vec::new(),
        hex: Vec::new(),
        generated: false,
        max: 100_000,
        show: 10,
        maps_every: 0,
    };
    let mut config = None;
    let mut it = std::env::args().skip(1);
    while let Some(w) = it.next() {
        match w.as_str() {
            "--pcap" => a.pcaps.push(it.next().ok_or("--pcap needs a file")?.into()),
            "--hex" => a.hex.push(it.next().ok_or("--hex needs a file")?.into()),
            "--generated" => a.generated = true,
            "--max" => a.max = number(it.next(), "--max")?,
            "--show" => a.show = number(it.next(), "--show")?,
            "--maps-every" => a.maps_every = number(it.next(), "--maps-every")?,
            "--config" => {
                let f = it.next().ok_or("--config needs a file")?;
                let text = std::fs::read_to_string(&f).map_err(|e| format!("--config {f}: {e}"))?;
                config = Some(text);
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            s => {
                if config.is_some() {
                    return Err(format!("one CONFIG only (`{s}` is a second)"));
                }
                config = Some(s.strip_prefix("xdp:").unwrap_or(s).to_owned());
            }
        }
    }
    a.config = config.ok_or("CONFIG or --config FILE is needed")?;
    a.generated |= a.pcaps.is_empty() && a.hex.is_empty();
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("xdp-oracle: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("xdp-oracle: {e}");
            ExitCode::from(2)
        }
    }
}

fn traffic(args: &Args) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut t = Vec::new();
    if args.generated {
        t.extend(frames::generated());
    }
    for p in &args.pcaps {
        if p.is_dir() {
            let before = t.len();
            t.extend(pcap::dir(p, args.max));
            if t.len() == before {
                return Err(format!("--pcap {}: no Ethernet capture in it", p.display()));
            }
        } else {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            let frames = pcap::read(p, args.max).map_err(|e| format!("--pcap {e}"))?;
            t.extend(
                frames
                    .into_iter()
                    .enumerate()
                    .map(|(n, f)| (format!("{name}#{n}"), f)),
            );
        }
    }
    for p in &args.hex {
        let text = std::fs::read_to_string(p).map_err(|e| format!("--hex {}: {e}", p.display()))?;
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        for (n, line) in text.lines().enumerate() {
            let h: String = line
                .split('#')
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            if h.is_empty() {
                continue;
            }
            let f = (0..h.len())
                .step_by(2)
                .map(|i| h.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| format!("--hex {}: line {}: not hex bytes", p.display(), n + 1))?;
            t.push((format!("{name}:{}", n + 1), f));
        }
    }
    Ok(t)
}

/// What pfil's loader says of the object the kernel refused.
fn pfil_alone(bytes: &[u8], cfg: &XdpConfig) -> String {
    let loaded = pfil_xdp::Object::parse(bytes)
        .map_err(|e| format!("object: {e}"))
        .and_then(|mut obj| {
            cfg.preset(&mut obj)?;
            pfil_xdp::XdpProgram::load(&obj, cfg.program.as_deref(), 1, &[])
                .map_err(|e| e.to_string())
        });
    match loaded {
        Ok(_) => "pfil: loads it (the kernel alone refuses it)".to_owned(),
        Err(e) => format!("pfil: refuses it too: {e}"),
    }
}

/// Whether everything agreed.
fn run(args: &Args) -> Result<bool, String> {
    let cfg = XdpConfig::parse(&args.config)?;
    let bytes = std::fs::read(&cfg.path).map_err(|e| format!("{}: {e}", cfg.path))?;
    if !pfil_xdp::kernel::available() {
        return Err("the kernel cannot be asked here: bpf(2) needs root (CAP_BPF)".into());
    }
    let cpu = oracle::pin_cpu().map_err(|e| format!("pin to a CPU: {e}"))?;
    let mut rest = Vec::new();
    let loaded = Oracle::load_with(&bytes, cfg.program.as_deref(), cpu, |obj| {
        rest = cfg.preset(obj)?.into_iter().cloned().collect();
        Ok(())
    });
    let mut o = match loaded {
        Ok(o) => o,
        // Refused by one side: what the other says, so that a refusal
        // shows whether both refuse.
        Err(e) if e.starts_with("the kernel:") => {
            return Err(format!("{e}\n{}", pfil_alone(&bytes, &cfg)));
        }
        Err(e) if e.starts_with("pfil:") => {
            return Err(format!("{e}\nthe kernel: loads it (pfil alone refuses it)"));
        }
        Err(e) => return Err(e),
    };
    let name = o.ours[0].1.name().to_owned();
    println!(
        "{}: program {name}: loaded by the kernel and by pfil (JIT and interpreter)",
        cfg.path
    );
    for e in &rest {
        o.set(e)?;
    }
    let traffic = traffic(args)?;
    println!(
        "{} map entries set; {} frames to run",
        cfg.entries.len(),
        traffic.len()
    );
    let (mut actions, mut skipped, mut diffs) = ([0usize; 6], 0usize, 0usize);
    for (i, (what, f)) in traffic.iter().enumerate() {
        match o.run(f) {
            Ok(Some(a)) => actions[(a.action as usize).min(5)] += 1,
            Ok(None) => skipped += 1,
            Err(m) => {
                diffs += 1;
                if diffs <= args.show {
                    println!("DIFFERENCE at frame {i} ({what}): {m}\n  frame  {}", hex(f));
                }
            }
        }
        if args.maps_every > 0 && (i + 1) % args.maps_every == 0 {
            if let Err(m) = o.compare_maps() {
                println!("DIFFERENCE in the maps after frame {i} ({what}): {m}");
                return Ok(false);
            }
        }
    }
    let named: Vec<String> = (0..5)
        .filter(|&a| actions[a] > 0)
        .map(|a| format!("{} {}", action_name(a as u64), actions[a]))
        .chain((actions[5] > 0).then(|| format!("other {}", actions[5])))
        .collect();
    println!(
        "{} frames agree ({}); {diffs} differ; {skipped} not run (shorter than Ethernet or longer than a test run's page)",
        o.runs(),
        if named.is_empty() { "none".into() } else { named.join(", ") }
    );
    let maps = o.compare_maps();
    match &maps {
        Ok(()) => println!("maps: {} compared, the same", o.obj.maps.len()),
        Err(m) => println!("DIFFERENCE in the maps at the end: {m}"),
    }
    Ok(diffs == 0 && maps.is_ok())
}
