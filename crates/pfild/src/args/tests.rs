//! The command line's tests.
use super::*;

fn p(s: &str) -> Result<Args, ArgError> {
    Args::parse(s.split_whitespace().map(String::from))
}

fn err(s: &str) -> String {
    match p(s) {
        Err(ArgError::Usage(m)) => m,
        other => panic!("{s:?}: {other:?}"),
    }
}

#[test]
fn the_clap_definitions_are_consistent() {
    command().debug_assert();
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
    assert_eq!(a.control, Control::Default);
    let a = p("sink syn0 --control /tmp/x/c.sock").unwrap();
    assert_eq!(a.control, Control::Path("/tmp/x/c.sock".into()));
    let a = p("sink syn0 --no-control").unwrap();
    assert_eq!(a.control, Control::Off);
    let a = p("forward v0 v1 --queues all --xdp-mode=generic --netns n1").unwrap();
    assert_eq!(a.queues, Some(Queues::All));
    assert_eq!(a.xdp_mode, XdpMode::Generic);
    assert_eq!(a.netns.as_deref(), Some("n1"));
    assert_eq!(a.umem_mode, UmemMode::Shared);
    let a = p("sink v0 --queues 4 --cpus 0,2-3").unwrap();
    assert_eq!(a.cpus, Some(vec![0, 2, 3]));
    let a = p("sink v0 --queues 2 --umem per-queue").unwrap();
    assert_eq!(a.umem_mode, UmemMode::PerQueue);
    let a =
        p("gen g0 --rate 1000 --count 5 --size 128 --dst-port 53,80 --dst-mac 02:aa:00:00:00:01")
            .unwrap();
    assert_eq!(a.gen.dst_ports, vec![53, 80]);
    assert_eq!(a.gen.dst_mac, [2, 0xaa, 0, 0, 0, 1]);
    assert_eq!((a.gen.rate, a.count, a.gen.size), (1000, Some(5), 128));
}

#[test]
fn parses_the_engine() {
    let a = p("gen g0").unwrap();
    assert_eq!(a.engine, Engine::AfXdp);
    let a =
        p("gen g0 --engine xdp-live --threads 2 --repeat 4096 --batch-size 128 --count 9").unwrap();
    assert_eq!(a.engine, Engine::XdpLive);
    assert_eq!(
        (a.live.threads, a.live.repeat, a.live.batch_size),
        (2, 4096, 128)
    );
    let a = p("gen g0 --engine live").unwrap();
    assert_eq!(
        (a.live.threads, a.live.repeat, a.live.batch_size),
        (
            1,
            pfil_afxdp::live::DEFAULT_REPEAT,
            pfil_afxdp::live::DEFAULT_BATCH_SIZE
        )
    );
}

#[test]
fn defaults_options_anywhere_and_last_one_wins() {
    let a = p("sink v0").unwrap();
    assert_eq!((a.spin_us, a.quiet, a.synthetic), (1000, false, false));
    assert_eq!((a.xdp_mode, a.bind), (XdpMode::Auto, BindMode::Auto));
    assert_eq!(
        (a.queues, a.seconds, a.count, a.ring, a.umem_frames),
        (None, None, None, None, None)
    );
    assert!(!a.gen_opts_given);
    assert_eq!(a.gen.dst_ports, GenConfig::default().dst_ports);
    // Options before the mode, aliases, `=` values, repeats.
    let a = p("--synthetic -q fwd a b --hook count --seconds=1 --seconds 2 --dst-port 1 --dst-port 7,8 --bind zc --xdp-mode skb --spin-us 0").unwrap();
    assert_eq!(
        a.mode,
        Mode::Forward {
            a: "a".into(),
            b: "b".into()
        }
    );
    assert!(a.synthetic && a.quiet && a.gen_opts_given);
    assert_eq!(a.seconds, Some(2.0));
    assert_eq!(a.gen.dst_ports, vec![7, 8]);
    assert_eq!((a.bind, a.xdp_mode), (BindMode::ZeroCopy, XdpMode::Generic));
    assert_eq!(a.spin_us, 0);
    let a = p("gen g0 --src-ip 10.0.0.1 --src-port 7 --ring 64 --umem-frames 64").unwrap();
    assert_eq!(a.gen.src_ip, Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(
        (a.gen.src_port, a.ring, a.umem_frames),
        (7, Some(64), Some(64))
    );
}

#[test]
fn flows_on_the_synthetic_port() {
    let a = p("sink syn0 --synthetic --flows 1000000").unwrap();
    assert_eq!(a.gen.flows, 1_000_000);
    assert_eq!(p("sink syn0 --synthetic").unwrap().gen.flows, 0);
}

#[test]
fn refuses_bad_input_naming_the_option() {
    assert!(matches!(p("--help"), Err(ArgError::Help(_))));
    assert!(matches!(p("sink x -h"), Err(ArgError::Help(_))));
    for (bad, want) in [
        ("", "missing mode"),
        ("sink", "missing IFACE"),
        ("forward a", "missing IFACE_B"),
        ("forward a a", "two different interfaces"),
        ("bogus x", "unknown mode `bogus`"),
        ("sink x --queues 0", "--queues"),
        ("sink x --cpus 1,a", "--cpus"),
        ("sink x --cpus 3-1", "--cpus"),
        ("sink x --synthetic --cpus 1", "--cpus"),
        ("sink x --flows 10", "--flows applies to --synthetic only"),
        ("gen x --flows 10", "--flows applies to --synthetic only"),
        ("sink x --synthetic --flows 0", "--flows"),
        ("sink x --queues zero", "expected a queue count or `all`"),
        ("sink x --xdp-mode fast", "--xdp-mode"),
        ("sink x --bind fast", "--bind"),
        ("sink x --rate 5", "apply to `gen`"),
        ("sink x --seconds -1", "--seconds"),
        ("sink x --seconds -1", "must be a positive number"),
        ("sink x --count 0", "--count"),
        ("sink x --ring 100", "--ring"),
        ("sink x --umem-frames 8", "--umem-frames"),
        ("sink x --wat", "--wat"),
        ("sink x y", "'y'"),
        ("gen x --size 10", "--size"),
        ("gen x --dst-mac 1:2:3", "--dst-mac"),
        ("gen x --dst-port 1,x", "--dst-port"),
        ("sink x --hook", "--hook"),
        ("sink x --umem both", "--umem"),
        ("sink x --quiet=yes", "--quiet"),
        ("sink x --synthetic --netns n", "--netns"),
        ("sink x --control", "--control"),
        ("sink x --control /a --no-control", "--no-control"),
        ("gen x --engine fast", "--engine"),
        ("sink x --engine xdp-live", "apply to `gen`"),
        ("gen x --threads 2", "--engine xdp-live"),
        ("gen x --engine xdp-live --hook count", "cannot run hooks"),
        ("gen x --engine xdp-live --queues 2", "--threads"),
        ("gen x --engine xdp-live --synthetic", "--synthetic"),
        ("gen x --engine xdp-live --batch-size 300", "--batch-size"),
        ("gen x --engine xdp-live --repeat 0", "--repeat"),
    ] {
        let m = err(bad);
        assert!(m.contains(want), "{bad:?}: {m}");
        assert!(
            !m.contains("Usage:") && !m.starts_with("error:"),
            "{bad:?}: {m}"
        );
    }
}

#[test]
fn help_is_generated_and_lists_the_catalog() {
    let Err(ArgError::Help(h)) = p("--help") else {
        panic!("--help")
    };
    for want in [
        "sink",
        "forward",
        "gen",
        "--synthetic",
        "--dst-port",
        "02:00:00:00:00:01",
    ] {
        assert!(h.contains(want), "{want}: {h}");
    }
    // The help wraps long lines: compare with whitespace collapsed.
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let h = flat(&h);
    for m in crate::hooks::catalog().modules() {
        assert!(h.contains(&flat(&m.usage())), "{}: {h}", m.usage());
        assert!(h.contains(&flat(m.help())), "{}: {h}", m.help());
    }
}
