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
