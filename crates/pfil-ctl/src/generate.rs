//! Man pages and shell completions generated from a program's clap
//! definitions (`pfilctl --generate`, `pfild --generate`), so that what
//! they document is what parses.

use std::io::Write;

/// What `--generate` prints: a man page (section 8) or the completions
/// of a shell.
pub const WHAT: &[&str] = &["man", "bash", "zsh", "fish"];

/// Writes `what` ([`WHAT`]) for `cmd` to `out`: the man page in section
/// 8 with `extra` appended (roff, e.g. FILES and SEE ALSO sections), or
/// a completion script.
///
/// # Errors
/// An unknown `what`, or the write's error.
pub fn generate(
    mut cmd: clap::Command,
    what: &str,
    extra: &str,
    out: &mut dyn Write,
) -> Result<(), String> {
    use clap_complete::Shell;
    let name = cmd.get_name().to_owned();
    let shell = match what {
        "man" => {
            let man = clap_mangen::Man::new(cmd)
                .section("8")
                .manual("pfil-rs")
                .source(format!("pfil-rs {}", env!("CARGO_PKG_VERSION")));
            let mut buf = Vec::new();
            man.render(&mut buf).map_err(|e| e.to_string())?;
            out.write_all(&buf).map_err(|e| e.to_string())?;
            return out.write_all(extra.as_bytes()).map_err(|e| e.to_string());
        }
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        other => {
            return Err(format!(
                "--generate: unknown `{other}`, expected one of {}",
                WHAT.join(", ")
            ))
        }
    };
    clap_complete::generate(shell, &mut cmd, name, out);
    Ok(())
}
