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
/// `ratelimit:src` (one 4-way set per worker). 3 frames to port 53 from
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
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("pfil-ctl-fstats-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let server = Server::start(
            registry(),
            Arc::new(Catalog::builtin()),
            ControlConfig::new("t").path(dir.join("ctl").join("t.sock")),
        )
        .unwrap();
        Fixture {
            dir,
            server: Some(server),
        }
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
ratelimit:src  table_slots  -       8
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

/// `pfilctl set` on an acl swaps its ruleset in place: no new generation,
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
        "reconfigured acl:edge in place, its counters kept (generation 7)\n"
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
generation 7
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
    assert_eq!(out, "reconfigured ratelimit:src (generation 8)\n");
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
