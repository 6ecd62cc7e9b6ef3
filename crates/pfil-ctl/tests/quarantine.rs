//! Quarantined links through the control socket (review H3): an unrelated
//! write (`add`, `capture`) leaves a fail-closed link dropping, `heads` and
//! `hooks` show it quarantined with its fail mode, `reap` removes it and
//! reports its final counters; a fail-open one is reaped by any write,
//! whose reply names it.

use std::path::PathBuf;
use std::sync::Arc;

use pfil::{
    Ctx, Dir, Dirs, FailMode, Head, LinkOptions, Packet, PacketKind, Placement, Registry, Verdict,
    Worker,
};
use pfil_ctl::{Client, ClientError, ControlConfig, Server};
use pfil_filters::Catalog;
use serde_json::{json, Value};

/// A private temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("pfil-ctl-q-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Panics on frames starting with 9 (an app's buggy filter).
fn buggy(p: &mut Packet<'_>, _: &Ctx<'_>) -> Verdict {
    if p.frame()[0] == 9 {
        panic!("a bug in the app's filter");
    }
    Verdict::Pass
}

/// Head `syn0` with the app's hook `app:acl` linked on input with `fail`,
/// faulted once; a server on it.
fn faulted(dir: &TempDir, fail: FailMode) -> (Registry, Head, Worker, Server) {
    let reg = Registry::new();
    let head = reg
        .register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    reg.add_hook("app:acl", PacketKind::Ethernet, Dirs::BOTH, buggy)
        .unwrap();
    let fail_opts = LinkOptions {
        placement: Placement::Prepend,
        fail,
    };
    reg.link("syn0", Dir::In, "app:acl", fail_opts).unwrap();
    let mut w = reg.worker().unwrap();
    assert_eq!(run(&head, &mut w, 1), Verdict::Pass);
    assert_eq!(run(&head, &mut w, 9), fail.verdict());
    let server = Server::start(
        reg.clone(),
        Arc::new(Catalog::builtin()),
        ControlConfig::new("test").path(dir.0.join("ctl").join("t.sock")),
    )
    .unwrap();
    (reg, head, w, server)
}

fn run(head: &Head, w: &mut Worker, first: u8) -> Verdict {
    let mut f = [first; 64];
    head.run_one(Dir::In, w, &mut Packet::new(&mut f))
}

fn call(c: &mut Client, m: &str, p: Value) -> Value {
    c.call(m, p).unwrap_or_else(|e| panic!("{m}: {e}"))
}

fn chain_in(c: &mut Client) -> Value {
    call(c, "heads", Value::Null)["heads"][0]["chains"]["in"].clone()
}

#[test]
fn an_unrelated_write_leaves_a_fail_closed_link_dropping_until_reap() {
    let dir = TempDir::new("closed");
    let (_reg, head, mut w, server) = faulted(&dir, FailMode::Closed);
    let mut c = Client::connect(server.path()).unwrap();
    // `add count:x`: before the fix this unlinked the fail-closed link.
    let r = call(&mut c, "add", json!({"hook": "count:x"}));
    assert_eq!(r["reaped"], json!([]), "{r}");
    assert_eq!(run(&head, &mut w, 1), Verdict::Dropped, "still dropping");
    let r = call(
        &mut c,
        "link",
        json!({"head": "syn0", "dir": "out", "hook": "count:x"}),
    );
    assert_eq!(r["reaped"], json!([]));
    assert_eq!(run(&head, &mut w, 1), Verdict::Dropped);
    // Shown as quarantined, with its fail mode, in `heads` and `hooks`.
    assert_eq!(
        chain_in(&mut c),
        json!([{"hook": "app:acl", "fail": "closed", "quarantined": true}])
    );
    let hooks = call(&mut c, "hooks", Value::Null);
    let acl = hooks["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "app:acl")
        .unwrap()
        .clone();
    assert_eq!(
        acl["linked"],
        json!([{"head": "syn0", "dir": "in", "fail": "closed", "quarantined": true}])
    );
    assert_eq!(acl["faults"], 1);
    // A reap of a link that is not quarantined is refused.
    match c.call(
        "reap",
        json!({"head": "syn0", "dir": "out", "hook": "count:x"}),
    ) {
        Err(ClientError::Rpc(e)) => assert_eq!(e.kind, "not_quarantined", "{e:?}"),
        other => panic!("expected not_quarantined, got {other:?}"),
    }
    match c.call("reap", json!({"head": "syn0"})) {
        Err(ClientError::Rpc(e)) => assert_eq!(e.kind, "invalid_params", "{e:?}"),
        other => panic!("expected invalid_params, got {other:?}"),
    }
    // The operator reaps it: final counters in the reply.
    let r = call(
        &mut c,
        "reap",
        json!({"head": "syn0", "dir": "in", "hook": "app:acl"}),
    );
    let reaped = r["reaped"].as_array().unwrap();
    assert_eq!(reaped.len(), 1, "{r}");
    let l = &reaped[0];
    assert_eq!(
        (&l["head"], &l["dir"], &l["hook"], &l["fail"]),
        (
            &json!("syn0"),
            &json!("in"),
            &json!("app:acl"),
            &json!("closed")
        )
    );
    assert_eq!(l["complete"], true);
    assert_eq!(
        (&l["packets"], &l["passed"], &l["dropped"], &l["faults"]),
        (&json!(4), &json!(1), &json!(3), &json!(1)),
        "1 passed, the fault dropped, 2 dropped while quarantined: {l}"
    );
    assert_eq!(l["generation"], r["generation"]);
    assert_eq!(chain_in(&mut c), json!([]));
    assert_eq!(run(&head, &mut w, 1), Verdict::Pass);
    // Nothing left to reap.
    let r = call(&mut c, "reap", Value::Null);
    assert_eq!(r["reaped"], json!([]));
    // The CLI says it too.
    let mut out = Vec::new();
    let mut err = Vec::new();
    let sock = server.path().to_str().unwrap().to_owned();
    let code = pfil_ctl::cli::run(["pfilctl", "--socket", &sock, "reap"], &mut out, &mut err);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    assert!(String::from_utf8_lossy(&out).contains("no quarantined link"));
}

#[test]
fn a_fail_open_link_is_reaped_by_any_write_and_named_in_its_reply() {
    let dir = TempDir::new("open");
    let (_reg, head, mut w, server) = faulted(&dir, FailMode::Open);
    let mut c = Client::connect(server.path()).unwrap();
    assert_eq!(
        chain_in(&mut c),
        json!([{"hook": "app:acl", "fail": "open", "quarantined": true}])
    );
    let r = call(&mut c, "add", json!({"hook": "count:x"}));
    let reaped = r["reaped"].as_array().unwrap();
    assert_eq!(reaped.len(), 1, "{r}");
    assert_eq!(
        (&reaped[0]["hook"], &reaped[0]["fail"], &reaped[0]["faults"]),
        (&json!("app:acl"), &json!("open"), &json!(1))
    );
    assert_eq!(
        (&reaped[0]["packets"], &reaped[0]["passed"]),
        (&json!(2), &json!(2))
    );
    assert_eq!(chain_in(&mut c), json!([]));
    assert_eq!(run(&head, &mut w, 9), Verdict::Pass);
    // Reported once.
    let r = call(&mut c, "del", json!({"hook": "count:x"}));
    assert_eq!(r["reaped"], json!([]));
}

#[test]
fn the_cli_marks_quarantined_links_and_reaps_one() {
    let dir = TempDir::new("cli");
    let (_reg, _head, _w, server) = faulted(&dir, FailMode::Closed);
    let sock = server.path().to_str().unwrap().to_owned();
    let pfilctl = |args: &[&str]| {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut argv = vec!["pfilctl", "--socket", &sock];
        argv.extend_from_slice(args);
        let code = pfil_ctl::cli::run(argv, &mut out, &mut err);
        assert_eq!(code, 0, "{args:?}: {}", String::from_utf8_lossy(&err));
        String::from_utf8_lossy(&out).into_owned()
    };
    let heads = pfilctl(&["heads"]);
    assert!(
        heads.contains("app:acl (QUARANTINED, fail closed: dropping all until `pfilctl reap`)"),
        "{heads}"
    );
    let hooks = pfilctl(&["hooks"]);
    assert!(
        hooks.contains("syn0 in (QUARANTINED, fail closed"),
        "{hooks}"
    );
    let out = pfilctl(&["reap", "-i", "app:acl", "syn0"]);
    assert!(
        out.contains("reaped quarantined syn0 in app:acl (fail closed): final packets 2"),
        "{out}"
    );
    assert!(!pfilctl(&["heads"]).contains("app:acl"));
}
