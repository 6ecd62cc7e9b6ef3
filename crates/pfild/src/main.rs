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
mod hooks;
mod report;

use std::process::ExitCode;

use args::{ArgError, Args};

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(ArgError::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(ArgError::Usage(msg)) => {
            eprintln!("pfild: error: {msg}");
            eprintln!(
                "usage: pfild sink|forward|gen IFACE... [OPTIONS]   (pfild --help for all options)"
            );
            return ExitCode::from(2);
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn,pfil_afxdp=info".to_owned()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
    match app::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("pfild: error: {msg}");
            ExitCode::FAILURE
        }
    }
}
