//! `pfilctl`: inspect and change the hooks of a running pfil dataplane
//! (see `pfilctl --help` and the crate's PROTOCOL.md).

fn main() -> std::process::ExitCode {
    let code = pfil_ctl::cli::run(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::ExitCode::from(code)
}
