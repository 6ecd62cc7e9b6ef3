//! The configuration file against a real registry and the built-in
//! catalog: errors with line and column, `show` → `apply` round trip,
//! plans that keep what they can (counters of kept links), one
//! transaction, conflicts that change nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use pfil::{
    Ctx, Dir, Dirs, FailMode, Filter, Head, Packet, PacketKind, Placement, Registry, Verdict,
};
use pfil_ctl::config::{ApplyError, Change, Config, ConfigError, Running};
use pfil_filters::{Catalog, Module};

fn pass(_: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    Verdict::Pass
}

/// Heads `syn0` (both directions) and `ip0` (IPv4, in only), an app hook
/// `app:own` (a closure: no spec), nothing linked.
fn setup() -> (Registry, Head, Head) {
    let reg = Registry::with_max_workers(2);
    let syn0 = reg
        .register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let ip0 = reg
        .register_head("ip0", PacketKind::Ipv4, Dirs::IN)
        .unwrap();
    reg.add_hook("app:own", PacketKind::Ethernet, Dirs::BOTH, pass)
        .unwrap();
    (reg, syn0, ip0)
}

fn apply(reg: &Registry, text: &str) -> Result<Vec<Change>, ApplyError> {
    let cfg = Config::parse(text)?;
    let plan = cfg.plan(reg, &Catalog::builtin(), None)?;
    let changes = plan.changes().to_vec();
    plan.commit(reg, false)?;
    Ok(changes)
}

fn parse_err(text: &str) -> ConfigError {
    Config::parse(text).expect_err(text)
}

fn plan_err(reg: &Registry, text: &str) -> ApplyError {
    Config::parse(text)
        .unwrap()
        .plan(reg, &Catalog::builtin(), None)
        .expect_err(text)
}

/// 64-byte UDP frames to `port`.
fn udp(port: u16) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(1000, port);
    let mut v = Vec::new();
    b.write(&mut v, &[0; 18]).unwrap();
    v
}

fn run(reg: &Registry, head: &Head, n: usize, port: u16) -> usize {
    let mut w = reg.worker().unwrap();
    let mut frames: Vec<Vec<u8>> = (0..n).map(|_| udp(port)).collect();
    let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    head.run(Dir::In, &mut w, &mut pkts);
    pkts.iter().filter(|p| p.verdict() == Verdict::Pass).count()
}

const FILE: &str = r#"
version = 1

[hooks."drop-udp:dns"]
config = "53"

[hooks."count:edge"]
dirs = "in"

[heads.syn0]
in = ["drop-udp:dns", { hook = "count:edge", fail = "closed" }, "app:own"]
out = ["drop-udp:dns"]
"#;

#[test]
fn syntax_and_type_errors_name_line_and_column() {
    let cases: &[(&str, (usize, usize), &str)] = &[
        ("[hooks.\"a:b\"\n", (1, 13), "unclosed table, expected `]`"),
        (
            "version = 1\nhooks = 3\n",
            (2, 9),
            "invalid type: integer `3`",
        ),
        (
            "version = 2\n",
            (1, 11),
            "reads version 1, the file is version 2",
        ),
        ("\n\nbogus = 1\n", (3, 1), "unknown field `bogus`"),
        (
            "[hooks.\"a:b\"]\nconfg = \"1\"\n",
            (2, 1),
            "unknown field `confg`",
        ),
        ("[hooks.count]\n", (1, 8), "a hook is named MODULE:INSTANCE"),
        ("[hooks.\"c:1\"]\nkind = \"ipx\"\n", (2, 8), "kind"),
        ("[hooks.\"c:1\"]\ndirs = \"sideways\"\n", (2, 8), "dirs"),
        (
            "[heads.h]\nin = [\"a:1\", { hook = \"b:1\", fail = \"maybe\" }]\n",
            (2, 14),
            "fail: expected \"open\" or \"closed\", got \"maybe\"",
        ),
        (
            "[heads.h]\nin = [\"a:1\", \"a:1\"]\n",
            (2, 14),
            "`a:1` is linked twice",
        ),
        (
            "[hooks.\"c:1\"]\ndirs = \"in\"\n[heads.h]\nout = [\"c:1\"]\n",
            (4, 8),
            "declares dirs = \"in\", not out",
        ),
        (
            "[heads.h]\nin = [3]\n",
            (2, 7),
            "expected a hook name or a table",
        ),
        (
            "[heads.h]\nin = [{ fail = \"open\" }]\n",
            (2, 7),
            "missing field `hook`",
        ),
    ];
    for (text, (line, column), want) in cases {
        let e = parse_err(text);
        assert_eq!(
            (e.line, e.column),
            (Some(*line), Some(*column)),
            "{text:?}: {e}"
        );
        assert!(e.message.contains(want), "{text:?}: {e}");
        assert!(e
            .to_string()
            .starts_with(&format!("line {line}, column {column}: ")));
    }
}

#[test]
fn errors_against_the_registry_name_the_line_and_change_nothing() {
    let (reg, _syn0, _ip0) = setup();
    let g = reg.generation();
    let cases: &[(&str, usize, &str)] = &[
        (
            "[heads.nope]\nin = []\n",
            1,
            "no such head in this app (heads belong to the app; it has: ip0, syn0)",
        ),
        ("[hooks.\"acme:1\"]\n", 1, "unknown hook `acme`"),
        (
            "\n[hooks.\"drop-udp:x\"]\nconfig = \"dns\"\n",
            3,
            "drop-udp:PORT",
        ),
        (
            "[hooks.\"count:x\"]\nconfig = \"3\"\n",
            2,
            "`count` takes no config",
        ),
        (
            "[heads.syn0]\nin = [\"count:x\"]\n",
            2,
            "neither declared in [hooks] nor one of the app's own",
        ),
        ("[hooks.\"app:own\"]\n", 1, "the app's own"),
        (
            "[heads.ip0]\nout = [\"app:own\"]\n",
            2,
            "head `ip0` has no out direction",
        ),
    ];
    for (text, line, want) in cases {
        let e = plan_err(&reg, text);
        let ApplyError::Config(c) = &e else {
            panic!("{text:?}: {e:?}")
        };
        assert_eq!(c.line, Some(*line), "{text:?}: {e}");
        assert!(c.message.contains(want), "{text:?}: {e}");
    }
    // The registry refuses: an IPv4 hook on an Ethernet head. The error
    // names the link's line; nothing was applied, the hook not added.
    let text = "[hooks.\"count:v4\"]\nkind = \"ipv4\"\n[heads.syn0]\nin = [\"count:v4\"]\n";
    let e = apply(&reg, text).unwrap_err();
    let ApplyError::Registry { at, error } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(at.line, Some(4), "{e}");
    assert!(
        matches!(error, pfil::Error::KindMismatch { .. }),
        "{error:?}"
    );
    assert!(
        e.to_string().contains("heads.syn0.in[0] (`count:v4`)"),
        "{e}"
    );
    assert_eq!(reg.generation(), g);
    assert!(reg.hook("count:v4").is_err());
}

#[test]
fn show_then_apply_is_a_no_op() {
    let (reg, syn0, _ip0) = setup();
    apply(&reg, FILE).unwrap();
    let g = reg.generation();
    let shown = Running::read(&reg);
    assert_eq!(shown.generation, g);
    assert_eq!(shown.config, Config::parse(FILE).unwrap());
    let text = shown.to_toml("test");
    assert!(
        text.contains("# hook \"app:own\" (ethernet, in,out) is the app's own"),
        "{text}"
    );
    assert!(text.contains("at generation"), "{text}");
    let again = Config::parse(&text).unwrap();
    assert_eq!(again, shown.config, "{text}");
    let plan = again.plan(&reg, &Catalog::builtin(), Some(g)).unwrap();
    assert_eq!(plan.changes(), &[], "{text}");
    assert!(plan.commit(&reg, false).unwrap().is_none());
    assert_eq!(reg.generation(), g, "a no-op publishes nothing");
    // And the datapath runs what the file says: port 53 dropped first.
    assert_eq!(run(&reg, &syn0, 4, 53), 0);
    assert_eq!(run(&reg, &syn0, 4, 80), 4);
    let chain = reg.chain("syn0", Dir::In).unwrap();
    let names: Vec<_> = chain.iter().map(|l| (l.hook.as_str(), l.fail)).collect();
    assert_eq!(
        names,
        [
            ("drop-udp:dns", FailMode::Open),
            ("count:edge", FailMode::Closed),
            ("app:own", FailMode::Open)
        ]
    );
}

#[test]
fn a_change_is_one_generation_that_keeps_what_stays() {
    let (reg, syn0, _ip0) = setup();
    apply(&reg, FILE).unwrap();
    assert_eq!(run(&reg, &syn0, 10, 80), 10);
    let g = reg.generation();
    // Reconfigure dns to 80 (in place), drop nothing else; reorder: the
    // app hook first; add count:new last; out chain emptied; count:edge
    // becomes fail-open (relinked).
    let next = r#"
[hooks."drop-udp:dns"]
config = "80"
[hooks."count:new"]
[heads.syn0]
in = ["app:own", "drop-udp:dns", "count:new"]
"#;
    let changes = apply(&reg, next).unwrap();
    assert_eq!(reg.generation(), g + 1, "one transaction: {changes:?}");
    let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "- hook count:edge",
            "+ hook count:new (count)",
            "~ hook drop-udp:dns: drop-udp:53 -> drop-udp:80",
            "- link syn0 in drop-udp:dns",
            "- link syn0 out drop-udp:dns",
            "+ link syn0 in drop-udp:dns after app:own",
            "+ link syn0 in count:new after drop-udp:dns",
        ]
    );
    let chain = reg.chain("syn0", Dir::In).unwrap();
    let names: Vec<_> = chain.iter().map(|l| l.hook.as_str()).collect();
    assert_eq!(names, ["app:own", "drop-udp:dns", "count:new"]);
    // One of the two links in common stays (both orders have length 1):
    // app:own was kept, its counters carry the 10 packets; drop-udp:dns
    // was relinked after it.
    assert_eq!(chain[0].counters.packets, 10);
    assert_eq!(chain[1].counters.packets, 0, "drop-udp:dns was relinked");
    assert!(reg.chain("syn0", Dir::Out).unwrap().is_empty());
    assert!(reg.hook("count:edge").is_err());
    // The new config runs: 80 dropped, 53 passes.
    assert_eq!(run(&reg, &syn0, 3, 80), 0);
    assert_eq!(run(&reg, &syn0, 3, 53), 3);
    // A kind or dirs change re-registers the hook (and relinks it).
    let changes = apply(
        &reg,
        "[hooks.\"drop-udp:dns\"]\nconfig = \"80\"\ndirs = \"in\"\n[heads.syn0]\nin = [\"drop-udp:dns\"]\n",
    )
    .unwrap();
    let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "- hook count:new",
            "- hook drop-udp:dns",
            "+ hook drop-udp:dns (drop-udp:80)",
            "- link syn0 in app:own",
            "+ link syn0 in drop-udp:dns first",
        ]
    );
    assert_eq!(reg.hook("drop-udp:dns").unwrap().dirs, Dirs::IN);
    // The empty file: every catalog hook gone, every chain empty; the
    // app's own hook stays registered.
    apply(&reg, "").unwrap();
    assert_eq!(
        reg.hooks()
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>(),
        ["app:own"]
    );
    assert!(reg
        .heads()
        .iter()
        .all(|h| h.chains.iter().all(Vec::is_empty)));
}

#[test]
fn dry_runs_and_conflicts_change_nothing() {
    let (reg, _syn0, _ip0) = setup();
    let g = reg.generation();
    let cfg = Config::parse(FILE).unwrap();
    let plan = cfg.plan(&reg, &Catalog::builtin(), None).unwrap();
    assert_eq!(plan.base(), g);
    assert_eq!(plan.changes().len(), 2 + 4);
    plan.commit(&reg, true).unwrap();
    assert_eq!(reg.generation(), g, "dry run");
    assert!(reg.hook("count:edge").is_err());
    // A plan from a stale generation is refused, at plan or at commit.
    match cfg.plan(&reg, &Catalog::builtin(), Some(g + 7)) {
        Err(ApplyError::Conflict { expected, current }) => {
            assert_eq!((expected, current), (g + 7, g))
        }
        other => panic!("{other:?}"),
    }
    let plan = cfg.plan(&reg, &Catalog::builtin(), Some(g)).unwrap();
    reg.link("syn0", Dir::In, "app:own", Placement::Prepend)
        .unwrap();
    let e = plan.commit(&reg, false).unwrap_err();
    assert!(
        matches!(e, ApplyError::Conflict { expected, .. } if expected == g),
        "{e:?}"
    );
    assert!(e.to_string().contains("nothing was applied"), "{e}");
    assert!(reg.hook("count:edge").is_err());
    assert_eq!(reg.chain_names("syn0", Dir::In).unwrap(), ["app:own"]);
    // Even a plan with nothing to do says so when it is stale.
    let empty_ok = Config::parse(&Running::read(&reg).to_toml("t")).unwrap();
    let plan = empty_ok.plan(&reg, &Catalog::builtin(), None).unwrap();
    reg.unlink("syn0", Dir::In, "app:own").unwrap();
    assert!(matches!(
        plan.commit(&reg, false),
        Err(ApplyError::Conflict { .. })
    ));
}

/// An acl reconfigured in place between an apply's plan and its commit
/// (`pfilctl set` while the apply derives the acl's successor from its
/// old rules): the commit is refused and the set's rules stay, rather
/// than the apply undoing them without a word.
#[test]
fn a_set_between_plan_and_commit_makes_the_commit_conflict() {
    let (reg, _syn0, _ip0) = setup();
    apply(
        &reg,
        "version = 1\n[hooks.\"acl:edge\"]\nconfig = \"drop proto udp; default pass\"\n[heads.syn0]\nin = [\"acl:edge\"]\n",
    )
    .unwrap();
    let cfg = Config::parse(
        "version = 1\n[hooks.\"acl:edge\"]\nconfig = \"drop proto tcp; default pass\"\n[heads.syn0]\nin = [\"acl:edge\"]\n",
    )
    .unwrap();
    let plan = cfg.plan(&reg, &Catalog::builtin(), None).unwrap();
    assert_eq!(
        reg.reconfigure_hook("acl:edge", "drop proto icmp; default pass"),
        Ok(true)
    );
    let e = plan.commit(&reg, false).unwrap_err();
    assert!(matches!(e, ApplyError::Conflict { .. }), "{e:?}");
    let running = Running::read(&reg).to_toml("t");
    assert!(
        running.contains("config = \"drop proto icmp; default pass\""),
        "{running}"
    );
}

/// Where each [`Marked`] filter was dropped: its config and the thread.
type Drops = Arc<Mutex<Vec<(String, ThreadId)>>>;

/// A filter that passes everything, derives its successor (so `apply`
/// goes the way it goes for an acl) and records where it is dropped.
struct Marked {
    config: String,
    drops: Drops,
}

impl Filter for Marked {
    fn filter(&self, _: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }

    fn spec(&self) -> Option<String> {
        Some(format!("mark:{}", self.config))
    }

    fn derive(&self, config: &str) -> Option<Result<Arc<dyn Filter>, String>> {
        Some(Ok(Arc::new(Marked {
            config: config.to_owned(),
            drops: self.drops.clone(),
        })))
    }
}

impl Drop for Marked {
    fn drop(&mut self) {
        let mut d = self.drops.lock().unwrap_or_else(|e| e.into_inner());
        d.push((self.config.clone(), std::thread::current().id()));
    }
}

/// A filter `apply` replaced with one derived from it is freed by the
/// apply, on its thread, once the grace period is over: not left to the
/// epoch's reclamation, which a datapath worker pinning for every batch
/// runs as often as anyone.
#[test]
fn apply_frees_a_filter_it_derived_from_on_its_own_thread() {
    let drops: Drops = Arc::default();
    let mut catalog = Catalog::builtin();
    let d = drops.clone();
    catalog
        .register(Module::with_config(
            "mark",
            "TAG",
            "pass, derive, record drops",
            "mark:a",
            move |cfg, _| {
                Ok(Arc::new(Marked {
                    config: cfg.to_owned(),
                    drops: d.clone(),
                }) as Arc<dyn Filter>)
            },
        ))
        .unwrap();
    let (reg, syn0, _ip0) = setup();
    let file = |tag: &str| {
        format!("[hooks.\"mark:x\"]\nconfig = \"{tag}\"\n[heads.syn0]\nin = [\"mark:x\"]\n")
    };
    let apply = |tag: &str| {
        let plan = Config::parse(&file(tag))
            .unwrap()
            .plan(&reg, &catalog, None)
            .unwrap();
        let changes = plan.changes().to_vec();
        plan.commit(&reg, false).unwrap().unwrap();
        changes
    };
    apply("a");
    let stop = AtomicBool::new(false);
    let batches = AtomicU64::new(0);
    /// Stops the worker when dropped, also when an assertion fails (the
    /// scope would wait for it forever).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|t| {
        let _stop = Stop(&stop);
        t.spawn(|| {
            let mut w = reg.worker().unwrap();
            let mut f = udp(9);
            while !stop.load(Ordering::Relaxed) {
                syn0.run(Dir::In, &mut w, &mut [Packet::new(&mut f)]);
                batches.fetch_add(1, Ordering::Relaxed);
            }
        });
        while batches.load(Ordering::Relaxed) < 1000 {
            std::thread::yield_now();
        }
        for (i, tag) in ["b", "c", "d"].into_iter().enumerate() {
            let changes = apply(tag);
            assert!(
                matches!(&changes[..], [Change::SetHook { hook, .. }] if hook == "mark:x"),
                "{changes:?}"
            );
            // Dropped by the time the apply returned, here.
            let d = drops.lock().unwrap().clone();
            assert_eq!(d.len(), i + 1, "{d:?}");
            let old = ["a", "b", "c"][i];
            assert_eq!(d[i], (old.to_owned(), std::thread::current().id()));
        }
    });
    assert_eq!(reg.hook("mark:x").unwrap().spec.as_deref(), Some("mark:d"));
}

/// Review M3: a configuration is at most 1 MiB, 4096 hooks and 1024 links
/// a chain; over a limit is an error naming it (and where), before any
/// plan or diff runs. The review's case, 27 000 hooks in one chain applied
/// and then applied reversed, used a 2.9 GB table; a 1024-link chain
/// applied and then reversed (the worst the limits allow) is planned in
/// linear space.
#[test]
fn configurations_over_the_limits_are_refused_naming_them() {
    use pfil_ctl::config::{MAX_CHAIN_LINKS, MAX_CONFIG_BYTES, MAX_HOOKS};
    let hooks = |n: usize| {
        (0..n)
            .map(|i| format!("[hooks.\"count:a{i:05}\"]\n"))
            .collect::<String>()
    };
    let e = parse_err(&hooks(MAX_HOOKS + 1)).to_string();
    assert!(e.contains("more than 4096 hooks"), "{e}");
    let chain = |n: usize, rev: bool| {
        let mut names: Vec<String> = (0..n).map(|i| format!("\"count:a{i:05}\"")).collect();
        if rev {
            names.reverse();
        }
        format!("{}[heads.syn0]\nin = [{}]\n", hooks(n), names.join(", "))
    };
    let e = parse_err(&chain(MAX_CHAIN_LINKS + 1, false)).to_string();
    assert!(e.contains("heads.syn0.in: more than 1024 links"), "{e}");
    assert!(e.contains("line 1027"), "{e}");
    let big = format!("# {}\n", "x".repeat(MAX_CONFIG_BYTES));
    let e = parse_err(&big).to_string();
    assert!(e.contains("over the limit of 1048576 bytes"), "{e}");
    let (reg, _, _) = setup();
    apply(&reg, &chain(MAX_CHAIN_LINKS, false)).unwrap();
    let changes = apply(&reg, &chain(MAX_CHAIN_LINKS, true)).unwrap();
    assert!(!changes.is_empty());
    let names = reg.chain_names("syn0", Dir::In).unwrap();
    assert_eq!(names.len(), MAX_CHAIN_LINKS);
    assert_eq!(names[0], "count:a01023");
}

/// A running `xdp` hook's new config that names an object that cannot be
/// used is refused, and says why (not the module's syntax); nothing
/// changes.
#[test]
fn an_xdp_config_naming_what_cannot_be_loaded_is_refused_and_nothing_changes() {
    const OBJ: &str = "/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_udp.o";
    if !std::path::Path::new(OBJ).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{OBJ} missing under CI (scripts/setup.sh installs xdp-tools)"
        );
        eprintln!("skipped: {OBJ} missing (install xdp-tools)");
        return;
    }
    let (reg, _syn0, _ip0) = setup();
    let file = |obj: &str| {
        format!(
            "version = 1\n[hooks.\"xdp:f\"]\nconfig = \"@{obj}\"\n[heads.syn0]\nin = [\"xdp:f\"]\n"
        )
    };
    apply(&reg, &file(OBJ)).unwrap();
    let g = reg.generation();
    for (obj, why) in [
        (
            "/nonexistent/f.o".to_owned(),
            "@/nonexistent/f.o: No such file or directory",
        ),
        // A program the object does not have.
        (format!("{OBJ} program nope"), "no XDP program \"nope\""),
    ] {
        let e = apply(&reg, &file(&obj)).unwrap_err();
        let ApplyError::Config(c) = &e else {
            panic!("{obj}: {e:?}")
        };
        assert_eq!(c.line, Some(3), "{e}");
        assert!(
            c.message
                .starts_with(&format!("hooks.\"xdp:f\": cannot build `xdp:@{obj}`: "))
                && c.message.contains(why)
                && !c.message.contains("expected"),
            "{e}"
        );
        assert_eq!(reg.generation(), g, "{obj}");
    }
    // Not the syntax: what it expects.
    let e = apply(&reg, &file("").replace("\"@\"", "\"nope.o\"")).unwrap_err();
    assert!(e.to_string().contains("expected xdp:@PATH"), "{e}");
    assert_eq!(reg.generation(), g);
}
