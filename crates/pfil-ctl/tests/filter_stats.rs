//! Filters' own statistics through the control server: the
//! `filter_stats` method, `pfilctl rules` (its table and its errors) and
//! `pfilctl stats --openmetrics`, on a registry whose acl and ratelimit
//! hooks saw known traffic.

use std::sync::Arc;

use pfil::{Dir, Dirs, Packet, PacketKind, Placement, Registry};
use pfil_ctl::{Client, ClientError, ControlConfig, Server};
use pfil_filters::{BuildCtx, Catalog};
use serde_json::json;

fn udp(src: u8, dport: u16) -> Vec<u8> {
    let mut v = Vec::new();
    etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([10, 0, 0, src], [198, 18, 0, 1], 64)
        .udp(1000, dport)
        .write(&mut v, &[0; 8])
        .unwrap();
    v
}

/// `syn0` in: `count:1`, `acl:edge` (rule 0 drops UDP to port 53, rule
/// 1 passes other UDP, rule 2 passes ICMP uncounted, the default drops),
/// `ratelimit:src` (one 4-way set per worker, allocated on the worker's
/// first frame: one worker runs). 3 frames to port 53 from
/// 3 sources, then 6 to port 80 from 6 sources, then 4 runts.
fn registry() -> Registry {
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let cat = Catalog::builtin();
    let ctx = BuildCtx::new(reg.max_workers());
    for (name, spec) in [
        ("count:1", "count"),
        (
            "acl:edge",
            "acl:drop count proto udp to any port 53; pass count proto udp; pass proto icmp; default drop",
        ),
        ("ratelimit:src", "ratelimit:0.001 burst 1 per src table 4"),
    ] {
        let f = cat.create(spec, &ctx).unwrap();
        reg.add_hook_shared(name, PacketKind::Ethernet, Dirs::BOTH, f)
            .unwrap();
        reg.link("syn0", Dir::In, name, Placement::Append).unwrap();
    }
    let mut frames: Vec<Vec<u8>> = (0..3).map(|i| udp(i, 53)).collect();
    frames.extend((0..6).map(|i| udp(i, 80)));
    frames.extend((0..4).map(|_| vec![0u8; 20]));
    let mut w = reg.worker().unwrap();
    let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
    head.run(Dir::In, &mut w, &mut pkts);
    reg
}

struct Fixture {
    dir: std::path::PathBuf,
    server: Option<Server>,
    /// The registry the server serves, for more traffic.
    reg: Registry,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("pfil-ctl-fstats-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let reg = registry();
        let server = Server::start(
            reg.clone(),
            Arc::new(Catalog::builtin()),
            ControlConfig::new("t").path(dir.join("ctl").join("t.sock")),
        )
        .unwrap();
        Fixture {
            dir,
            server: Some(server),
            reg,
        }
    }

    /// One batch in through `syn0`.
    fn send(&self, mut frames: Vec<Vec<u8>>) {
        let head = self.reg.head("syn0").unwrap();
        let mut w = self.reg.worker().unwrap();
        let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
        head.run(Dir::In, &mut w, &mut pkts);
    }

    /// `pfilctl apply` of a file with `toml` in it.
    fn apply(&self, toml: &str) -> (u8, String, String) {
        let file = self.dir.join("apply.toml");
        std::fs::write(&file, toml).unwrap();
        self.pfilctl(&["apply", file.to_str().unwrap()])
    }

    fn sock(&self) -> std::path::PathBuf {
        self.server.as_ref().unwrap().path().to_owned()
    }

    /// pfilctl in-process: exit code, stdout, stderr.
    fn pfilctl(&self, args: &[&str]) -> (u8, String, String) {
        let sock = self.sock();
        let mut argv = vec!["pfilctl", "--socket", sock.to_str().unwrap()];
        argv.extend_from_slice(args);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = pfil_ctl::cli::run(argv, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        drop(self.server.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn rules_prints_each_counted_rule_with_its_hits_like_pfctl_vsr() {
    let f = Fixture::new("rules");
    let (code, out, err) = f.pfilctl(&["rules", "acl:edge"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "\
HOOK      RULE     HITS  TEXT
acl:edge  0        3     drop count proto 17 from any to any port 53:53
acl:edge  1        6     pass count proto 17 from any to any
acl:edge  default  4     default drop
generation 7
"
    );
    // Every hook that keeps some: the acl's rules, then the limiter's
    // stats (6 sources into one 4-way set: 2 evictions).
    let (code, out, _) = f.pfilctl(&["rules"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "\
HOOK      RULE     HITS  TEXT
acl:edge  0        3     drop count proto 17 from any to any port 53:53
acl:edge  1        6     pass count proto 17 from any to any
acl:edge  default  4     default drop

HOOK           STAT         LABELS  VALUE
ratelimit:src  evictions    -       2
ratelimit:src  table_used   -       4
ratelimit:src  table_slots  -       4
ratelimit:src  table_bytes  -       64
generation 7
"
    );
    // A unique prefix is enough, and --json prints the result.
    let (code, out, _) = f.pfilctl(&["--json", "r", "ratelimit:src"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hooks"][0]["stats"][0]["name"], "evictions");
    assert_eq!(v["hooks"][0]["stats"][0]["samples"][0]["value"], 2);
}

/// `pfilctl set` on an acl swaps its ruleset in place (one generation with
/// the same chains),
/// the counted rules that stay keep their hits (whatever their new
/// position), a new rule starts at 0; a bad ruleset is refused with the
/// catalog's error and changes nothing.
#[test]
fn set_of_an_acl_swaps_its_rules_in_place_and_keeps_their_hits() {
    let f = Fixture::new("set");
    let rules = "pass count proto tcp; pass count proto udp; drop count proto udp to any port 53; default drop";
    let (code, out, err) = f.pfilctl(&["set", "acl:edge", "--set", rules]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert_eq!(
        out,
        "reconfigured acl:edge in place, its counters kept (generation 8)\n"
    );
    let (code, out, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "\
HOOK      RULE     HITS  TEXT
acl:edge  0        0     pass count proto 6 from any to any
acl:edge  1        6     pass count proto 17 from any to any
acl:edge  2        3     drop count proto 17 from any to any port 53:53
acl:edge  default  4     default drop
generation 8
"
    );
    // `show` lists the new rules as the hook's config.
    let (_, show, _) = f.pfilctl(&["show"]);
    assert!(show.contains("pass count proto tcp"), "{show}");
    // A bad ruleset: the catalog's error, the rules and hits unchanged.
    let (code, out, err) = f.pfilctl(&["set", "acl:edge", "--set", "pass proto tcp from nowhere"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.starts_with(
            "pfilctl: error: bad config in `acl:pass proto tcp from nowhere`: expected acl:"
        ),
        "{err}"
    );
    let (_, after, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert!(
        after.contains("acl:edge  1        6     pass count proto 17"),
        "{after}"
    );
    // A filter that cannot reconfigure in place is rebuilt: a new generation.
    let (code, out, _) = f.pfilctl(&["set", "ratelimit:src", "--set", "1000"]);
    assert_eq!(code, 0);
    assert_eq!(out, "reconfigured ratelimit:src (generation 9)\n");
}

/// The acl's rules as `registry` sets them up, and a change of them: the
/// port 53 rule stays (now rule 1), `pass count proto udp` goes, a tcp
/// rule comes first.
const ACL_RULES: &str =
    "drop count proto udp to any port 53; pass count proto udp; pass proto icmp; default drop";
const ACL_NEW_RULES: &str =
    "pass count proto tcp; drop count proto udp to any port 53; pass proto icmp; default drop";

/// `pfilctl show` with the acl's rules changed to [`ACL_NEW_RULES`].
fn new_rules_file(f: &Fixture) -> String {
    let (code, show, _) = f.pfilctl(&["show"]);
    assert_eq!(code, 0);
    let file = show.replace(
        &format!("config = \"{ACL_RULES}\""),
        &format!("config = \"{ACL_NEW_RULES}\""),
    );
    assert_ne!(file, show, "the acl's config is in\n{show}");
    file
}

/// `pfilctl apply` of a file that changes an acl's rules replaces its
/// filter in the apply's one generation, and the counted rules that stay
/// keep their hits exactly, whatever their new position: the new rule
/// starts at 0, the removed one is gone, the default keeps its count,
/// and traffic after it counts on from there. `show` then prints the new
/// rules, and applying it again changes nothing.
#[test]
fn apply_of_an_acl_keeps_the_hits_of_the_rules_that_stay() {
    let f = Fixture::new("apply");
    let (code, out, err) = f.apply(&new_rules_file(&f));
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert_eq!(
        out,
        format!(
            "~ hook acl:edge: acl:{ACL_RULES} -> acl:{ACL_NEW_RULES}\n\
             applied 1 change(s) in one transaction: generation 7 -> 8\n"
        )
    );
    let (code, out, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "\
HOOK      RULE     HITS  TEXT
acl:edge  0        0     pass count proto 6 from any to any
acl:edge  1        3     drop count proto 17 from any to any port 53:53
acl:edge  default  4     default drop
generation 8
"
    );
    // The new rules decide: port 53 by rule 1, port 80 (no longer passed
    // by a udp rule) by the default.
    f.send(vec![udp(7, 53), udp(7, 53), udp(7, 80)]);
    let mut c = Client::connect(&f.sock()).unwrap();
    let r = c.call("filter_stats", json!({"hook": "acl:edge"})).unwrap();
    assert_eq!(r["generation"], 8);
    let rows: Vec<(String, u64)> = r["hooks"][0]["stats"][0]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["labels"]["rule"].as_str().unwrap().to_owned(),
                s["value"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [("0".into(), 0), ("1".into(), 5), ("default".into(), 5)]
    );
    // `show` prints the new rules (the new filter's spec); applying them
    // again is a no-op.
    let (_, show, _) = f.pfilctl(&["show"]);
    assert!(
        show.contains(&format!("config = \"{ACL_NEW_RULES}\"")),
        "{show}"
    );
    let (code, out, _) = f.apply(&show);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "no changes: the running configuration equals the file (generation 8)\n"
    );
}

/// An apply that changes the acl's rules but fails after that change, in
/// the plan (a head the app does not have) or in the registry (a link of
/// a hook of another packet kind, an operation after the filter swap),
/// changes nothing: same generation, the old ruleset deciding, its hits
/// as they were. The same change without the bad part then carries over
/// the hits counted before and after the failures.
#[test]
fn an_apply_that_fails_after_the_acl_change_changes_nothing() {
    let f = Fixture::new("apply-fails");
    let good = new_rules_file(&f);
    let (_, before, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert!(before.ends_with("generation 7\n"), "{before}");

    let (code, out, err) = f.apply(&format!("{good}\n[heads.nope]\nin = []\n"));
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.contains("heads.nope: no such head in this app"),
        "{err}"
    );
    let (_, after, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert_eq!(after, before);

    let in_chain = "in = [\"count:1\", ";
    assert!(good.contains(in_chain), "{good}");
    let bad_link = good.replace(in_chain, "in = [\"count:1\", \"count:v4\", ")
        + "\n[hooks.\"count:v4\"]\nkind = \"ipv4\"\ndirs = \"in\"\n";
    let (code, out, err) = f.apply(&bad_link);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("heads.syn0.in[1] (`count:v4`)"), "{err}");
    assert!(
        err.contains("kind mismatch: hook `count:v4` filters"),
        "{err}"
    );
    let (_, after, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert_eq!(after, before);
    assert_eq!(f.reg.generation(), 7);
    let (_, show, _) = f.pfilctl(&["show"]);
    assert!(
        show.contains(&format!("config = \"{ACL_RULES}\"")),
        "{show}"
    );
    assert!(!show.contains("count:v4"), "{show}");

    // The old rules still decide and count: port 80 by `pass count proto
    // udp` (rule 1), port 53 by rule 0.
    f.send(vec![udp(8, 80), udp(8, 53)]);
    let (_, out, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert_eq!(
        out,
        "\
HOOK      RULE     HITS  TEXT
acl:edge  0        4     drop count proto 17 from any to any port 53:53
acl:edge  1        7     pass count proto 17 from any to any
acl:edge  default  4     default drop
generation 7
"
    );
    let (code, _, err) = f.apply(&good);
    assert_eq!((code, err.as_str()), (0, ""));
    let (_, out, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert_eq!(
        out,
        "\
HOOK      RULE     HITS  TEXT
acl:edge  0        0     pass count proto 6 from any to any
acl:edge  1        4     drop count proto 17 from any to any port 53:53
acl:edge  default  4     default drop
generation 8
"
    );
}

/// A bad acl config in an applied file: the error the catalog gives for
/// it, with the line and column of the config in the file; nothing
/// changes.
#[test]
fn apply_of_a_bad_acl_config_says_where() {
    let f = Fixture::new("apply-bad");
    let (_, show, _) = f.pfilctl(&["show"]);
    let (_, before, _) = f.pfilctl(&["rules", "acl:edge"]);
    let bad = show.replace(
        &format!("config = \"{ACL_RULES}\""),
        "config = \"pass proto tcp from nowhere\"",
    );
    let line = bad
        .lines()
        .position(|l| l.starts_with("config = \"pass proto tcp from nowhere"))
        .unwrap()
        + 1;
    let (code, out, err) = f.apply(&bad);
    assert_eq!((code, out.as_str()), (1, ""));
    let want = format!(
        "line {line}, column 10: hooks.\"acl:edge\": bad config in \
         `acl:pass proto tcp from nowhere`: expected acl:RULES, RULES: `@PATH` of a rules file"
    );
    assert!(err.contains(&want), "{want}\nnot in\n{err}");
    let (_, after, _) = f.pfilctl(&["rules", "acl:edge"]);
    assert_eq!(after, before);
}

#[test]
fn rules_of_an_unknown_hook_or_one_without_stats_say_which() {
    let f = Fixture::new("errors");
    let (code, out, err) = f.pfilctl(&["rules", "count:1"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        "pfilctl: error: hook `count:1` has no filter statistics: its filter keeps none beyond the link counters of `stats`\n"
    );
    let (code, _, err) = f.pfilctl(&["rules", "acl:nope"]);
    assert_eq!(code, 1);
    assert_eq!(err, "pfilctl: error: no such hook `acl:nope`\n");
    // The same errors over the protocol, with their kinds.
    let mut c = Client::connect(&f.sock()).unwrap();
    for (hook, kind) in [("count:1", "no_filter_stats"), ("acl:nope", "no_such_hook")] {
        match c.call("filter_stats", json!({"hook": hook})) {
            Err(ClientError::Rpc(e)) => assert_eq!((e.code, e.kind.as_str()), (-32000, kind)),
            other => panic!("{hook}: {other:?}"),
        }
    }
    match c.call("filter_stats", json!({"hook": 3})) {
        Err(ClientError::Rpc(e)) => assert_eq!(e.kind, "invalid_params"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn stats_openmetrics_includes_the_filters_counters() {
    let f = Fixture::new("om");
    let (code, out, err) = f.pfilctl(&["stats", "--openmetrics"]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    for want in [
        "# TYPE pfil_filter_rule_hits counter\n",
        "pfil_filter_rule_hits_total{hook=\"acl:edge\",rule=\"1\",text=\"pass count proto 17 from any to any\"} 6\n",
        "pfil_filter_rule_hits_total{hook=\"acl:edge\",rule=\"default\",text=\"default drop\"} 4\n",
        "pfil_filter_evictions_total{hook=\"ratelimit:src\"} 2\n",
        "pfil_filter_table_used{hook=\"ratelimit:src\"} 4\n",
    ] {
        assert!(out.contains(want), "{want:?} not in\n{out}");
    }
    assert!(out.ends_with("# EOF\n"));
}
