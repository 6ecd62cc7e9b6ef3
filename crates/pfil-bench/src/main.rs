//! `pfil-bench`: benchmark tooling for pfil.
//!
//! Subcommands:
//!
//! * `ministat` — FreeBSD ministat(1) on files of numbers: summary
//!   statistics, Student's t comparisons against the first file and an
//!   ASCII-art plot, with output identical to ministat's.
//!
//! * `control` — control-plane load on a running app's control socket:
//!   link / set / unlink at a fixed rate, with each round trip's latency
//!   (grace period included).
//! * `acl` — ns/packet of the pfil-acl classifier against linear scan and
//!   DPDK's rte_acl (`dpdk-test-acl`) on the ClassBench sets, after
//!   checking that all of them pick the same rule for every header.
//!
//! * `study` — Max Laier's pfil lock study (seed 001) on the real
//!   registry: hooks × chain lengths × batch sizes × reader threads, with
//!   and without a background writer, for every chain-publishing strategy,
//!   compared with ministat against the unsynchronized limit; text, JSON
//!   and SVG output.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod acl;
mod control;
mod ministat;
mod study;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Command line of `pfil-bench`.
#[derive(Debug, Parser)]
#[command(name = "pfil-bench", version, about = "Benchmark tooling for pfil")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Compare data sets like FreeBSD's ministat(1): statistics, Student's t
    /// test against the first data set, and an ASCII-art plot.
    Ministat(ministat::MinistatArgs),
    /// The lock study: ns/packet of each hook, chain length, batch size and
    /// thread count under each chain-publishing strategy, compared with the
    /// unsynchronized limit.
    Study(study::StudyArgs),
    /// Control-plane load and latency: link / set / unlink of one hook at
    /// a fixed rate on a running app's control socket.
    Control(control::ControlArgs),
    /// ACL classification: ns/packet of our classifier, linear scan and
    /// DPDK's rte_acl on the ClassBench sets, same rules and trace, results
    /// checked header by header.
    Acl(acl::AclArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ministat(args) => ministat::run(&args).map_err(|e| e.to_string()),
        Command::Study(args) => study::run(&args),
        Command::Control(args) => control::run(&args),
        Command::Acl(args) => acl::run(&args),
    };
    match result {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                // A closed pipe (`| head`) is not worth a message.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("pfil-bench: error writing output: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("pfil-bench: {e}");
            ExitCode::from(2)
        }
    }
}
