//! Tests of the daemon configuration file's `[pfild]` table.

use super::*;
use crate::args::{Args, Control, Mode, Queues};

fn args_from(file: &str, cli: &[&str]) -> Result<Args, String> {
    let s = Settings::parse(file)?;
    let cli: Vec<String> = cli.iter().map(|w| (*w).to_owned()).collect();
    let cli_mode = crate::args::command()
        .ignore_errors(true)
        .try_get_matches_from(std::iter::once("pfild".to_owned()).chain(cli.iter().cloned()))
        .ok()
        .and_then(|m| m.subcommand_name().map(str::to_owned))
        .is_some();
    let mut argv = s.words(false);
    argv.extend(cli);
    if !cli_mode {
        argv.extend(s.mode.iter().flatten().cloned());
    }
    Args::parse(argv).map_err(|e| format!("{e:?}"))
}

const FILE: &str = r#"
[pfild]
mode = "forward"
interfaces = ["a0", "b0"]
queues = 2
xdp-mode = "native"
ring = 1024
cpus = [2, 3]
spin-us = 0
quiet = true
synthetic = false
control = "/run/x.sock"
metrics = true
log = "info"

[hooks."count:edge"]

[heads.a0]
in = ["count:edge"]
"#;

#[test]
fn every_setting_reaches_the_arguments() {
    let a = args_from(FILE, &[]).unwrap();
    assert_eq!(
        a.mode,
        Mode::Forward {
            a: "a0".into(),
            b: "b0".into()
        }
    );
    assert_eq!(a.queues, Some(Queues::Count(2)));
    assert_eq!(a.xdp_mode, pfil_afxdp::XdpMode::Native);
    assert_eq!(a.ring, Some(1024));
    assert_eq!(a.cpus, Some(vec![2, 3]));
    assert_eq!(a.spin_us, 0);
    assert!(a.quiet);
    assert!(!a.synthetic);
    assert_eq!(a.control, Control::Path("/run/x.sock".into()));
    assert_eq!(a.metrics.as_deref(), Some("127.0.0.1:9464"));
    assert_eq!(a.log.as_deref(), Some("info"));
}

#[test]
fn the_command_line_overrides_the_file() {
    let a = args_from(
        FILE,
        &["--queues", "4", "--ring=2048", "--metrics", "0.0.0.0:1"],
    )
    .unwrap();
    assert_eq!(a.queues, Some(Queues::Count(4)));
    assert_eq!(a.ring, Some(2048));
    assert_eq!(a.metrics.as_deref(), Some("0.0.0.0:1"));
    // Kept from the file.
    assert_eq!(a.cpus, Some(vec![2, 3]));
    // A mode on the command line replaces the file's mode and interfaces,
    // with options before and after it.
    let a = args_from(FILE, &["--ring", "4096", "sink", "x9", "--queues", "1"]).unwrap();
    assert_eq!(a.mode, Mode::Sink { iface: "x9".into() });
    assert_eq!((a.ring, a.queues), (Some(4096), Some(Queues::Count(1))));
}

#[test]
fn a_file_without_the_table_or_a_mode_leaves_the_command_line_alone() {
    assert_eq!(
        Settings::parse("[hooks.\"count:a\"]\n").unwrap(),
        Settings::default()
    );
    let s = Settings::parse("[pfild]\nquiet = true\n").unwrap();
    assert!(s.mode.is_none());
    let a = args_from("[pfild]\nquiet = true\n", &["sink", "syn0", "--synthetic"]).unwrap();
    assert!(a.quiet);
    let e = args_from("[pfild]\nquiet = true\n", &[]).unwrap_err();
    assert!(e.contains("missing mode"), "{e}");
}

fn err(file: &str) -> String {
    Settings::parse(file).unwrap_err()
}

#[test]
fn errors_name_the_key_the_line_and_the_column() {
    let e = err("[pfild]\nmode = \"sink\"\ninterfaces = [\"a\"]\nring = 100\n");
    assert_eq!(
        e,
        "line 4, column 8: pfild.ring: invalid value '100' for `ring`: must be a power of two from 64 to 32768"
    );
    let e = err("[pfild]\nqueus = 2\n");
    assert!(
        e.starts_with("line 2, column 1: pfild.queus: unknown setting"),
        "{e}"
    );
    for (file, want) in [
        ("[pfild]\nhook = \"count\"\n", "pfild.hook: unknown setting"),
        ("[pfild]\nconfig = \"x\"\n", "pfild.config: unknown setting"),
        (
            "[pfild]\nquiet = \"yes\"\n",
            "pfild.quiet: expected true or false",
        ),
        (
            "[pfild]\nmode = \"sinc\"\n",
            "pfild.mode: expected \"sink\"",
        ),
        ("[pfild]\nmode = \"sink\"\n", "needs pfild.interfaces"),
        (
            "[pfild]\ninterfaces = [\"a\"]\n",
            "pfild.interfaces needs pfild.mode",
        ),
        (
            "[pfild]\nmode = \"forward\"\ninterfaces = [\"a\"]\n",
            "`forward` takes 2 interface(s), pfild.interfaces has 1",
        ),
        (
            "[pfild]\nmode = \"sink\"\ninterfaces = [\"--quiet\"]\n",
            "expected a list of interface names",
        ),
        ("[pfild]\ncpus = [[1]]\n", "nested list"),
        ("[pfild]\nqueues = { n = 1 }\n", "found a table"),
        ("[pfild]\nqueues = 0\n", "must be at least 1"),
        (
            "[pfild]\nxdp-mode = \"fast\"\n",
            "expected auto, native or generic",
        ),
        ("[pfild]\nseconds = -1\n", "must be a positive number"),
        ("[pfeld]\n", "unknown field `pfeld`"),
        ("[pfild\n", "line 1"),
    ] {
        let e = err(file);
        assert!(e.contains(want), "{file:?}: {e}");
    }
}

#[test]
fn restart_needed_names_what_changed() {
    let a = Settings::parse(FILE).unwrap();
    let b = Settings::parse(
        &FILE
            .replace("queues = 2", "queues = \"all\"")
            .replace("quiet = true\n", "")
            .replace("\"b0\"", "\"b1\""),
    )
    .unwrap();
    assert_eq!(
        a.restart_needed(&b),
        [
            "mode/interfaces (forward a0 b0 -> forward a0 b1)",
            "queues (2 -> all)",
            "quiet (--quiet -> unset)",
        ]
    );
    assert!(a.restart_needed(&a).is_empty());
}

#[test]
fn option_value_finds_the_last_and_stops_at_double_dash() {
    let v = |w: &[&str]| {
        option_value(
            &w.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>(),
            "config",
        )
    };
    assert_eq!(v(&["--config", "a", "--config=b"]), Some("b".into()));
    assert_eq!(v(&["--", "--config", "a"]), None);
    assert_eq!(v(&["--configs", "a"]), None);
}

#[test]
fn the_generated_man_page_lists_every_setting() {
    let page = crate::generate::config_page();
    for a in crate::args::command().get_arguments() {
        let Some(long) = a.get_long() else { continue };
        let listed = page.contains(&format!(".TP\n\\fB{}\\fR", long.replace('-', "\\-")));
        assert_eq!(listed, !NOT_IN_FILE.contains(&long), "{long}");
    }
}
