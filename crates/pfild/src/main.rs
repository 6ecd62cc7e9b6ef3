//! # pfild: the pfil reference dataplane
//!
//! A thin CLI over `pfil-afxdp`: an AF_XDP **sink** (receive, run the
//! interface's in head, drop), a **forwarder** (bump in the wire: A in →
//! B out and back) and a UDP traffic **generator** (through the
//! interface's out head). Built-in filters are linked from the command
//! line (`--hook count`); `--synthetic` runs the same app on the
//! in-memory port, without root.
//!
//! ```text
//! pfild sink syn0 --synthetic --hook count --seconds 3
//! pfild forward veth0 veth1 --hook count --netns fw
//! pfild gen veth2 --rate 1000000 --count 10000000 --size 64
//! pfild gen veth2 --engine xdp-live --threads 2 --seconds 10
//! ```
//!
//! Output: a live status line per second on stderr; on exit (SIGINT,
//! SIGTERM, `--seconds`, `--count`) the workers are drained and the
//! totals are printed on stdout: per head and hook from the registry,
//! the filters' own counters (each acl hook's per-rule hits, a
//! ratelimit's evictions), per port the UMEM frame accounting and the
//! kernel's AF_XDP counters, and one machine-readable `totals:` line.

mod app;
mod args;
mod generate;
mod hooks;
mod notify;
mod reload;
mod report;
mod settings;

use std::process::ExitCode;

use args::{ArgError, Args};

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if let Some(what) = settings::option_value(&raw, "generate") {
        let what = what.to_string_lossy();
        return match generate::generate(&what, &mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(m) => {
                eprintln!("pfild: error: {m}");
                ExitCode::from(2)
            }
        };
    }
    // --config FILE / --check-config FILE: the file's settings, then the
    // command line's.
    let expanded = match settings::expand(raw) {
        Ok(e) => e,
        Err(m) => {
            eprintln!("pfild: error: {m}");
            return ExitCode::FAILURE;
        }
    };
    let args = match Args::parse(expanded.argv) {
        Ok(a) => a,
        Err(ArgError::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(ArgError::Usage(msg)) => {
            match &expanded.file {
                Some((path, _)) => eprintln!(
                    "pfild: error: {msg}\n       (the [pfild] settings of {} with the command line's)",
                    path.display()
                ),
                None => eprintln!("pfild: error: {msg}"),
            }
            eprintln!(
                "usage: pfild sink|forward|gen IFACE... [OPTIONS]   (pfild --help for all options)"
            );
            return ExitCode::from(2);
        }
    };
    let filter = args
        .log
        .clone()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "warn,pfil_afxdp=info".to_owned());
    // Under systemd the journal stamps each line: no time, no colours.
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(!journal && std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = if journal {
        fmt.without_time().try_init()
    } else {
        fmt.try_init()
    };
    let result = if args.check_only {
        app::check(&args).map(|line| println!("{line}"))
    } else {
        app::run(&args, expanded.file)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("pfild: error: {msg}");
            ExitCode::FAILURE
        }
    }
}
