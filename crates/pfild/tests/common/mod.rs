//! Test helpers: run the real `pfild` binary; namespaces and veth pairs the
//! test creates and always deletes (RAII), addresses only from
//! 198.18.0.0/15, IPv6 off so the kernel sends nothing of its own.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub const PFILD: &str = env!("CARGO_BIN_EXE_pfild");

/// Run pfild to completion with a bound on its run time.
pub fn pfild(args: &[&str]) -> Output {
    let child = Command::new(PFILD)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pfild");
    Proc::new(child).wait_output(Duration::from_secs(60))
}

/// A child process killed (by its PID) if still running when dropped. Its
/// stderr is read by a thread as it comes, so a test can wait for a line.
pub struct Proc {
    child: Option<Child>,
    stderr: Arc<(Mutex<String>, Condvar)>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Proc {
    pub fn new(mut c: Child) -> Proc {
        let stderr = Arc::new((Mutex::new(String::new()), Condvar::new()));
        let reader = c.stderr.take().map(|pipe| {
            let buf = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    let (m, cv) = &*buf;
                    let mut s = m.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                    cv.notify_all();
                }
            })
        });
        Proc {
            child: Some(c),
            stderr,
            reader,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Wait (bounded) until stderr has a line containing `what`; `false`
    /// on timeout or if the process ended first.
    pub fn wait_stderr(&mut self, what: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let (m, cv) = &*self.stderr;
        let mut s = m.lock().unwrap();
        loop {
            if s.contains(what) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            if let Some(c) = self.child.as_mut() {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    // Let the reader catch up, then look once more.
                    drop(s);
                    std::thread::sleep(Duration::from_millis(50));
                    return m.lock().unwrap().contains(what);
                }
            }
            s = cv
                .wait_timeout(s, (deadline - now).min(Duration::from_millis(50)))
                .unwrap()
                .0;
        }
    }

    /// What stderr held so far.
    pub fn stderr_so_far(&self) -> String {
        self.stderr.0.lock().unwrap().clone()
    }

    /// Send a signal to this child.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the PID of a child we spawned and have not
        // reaped yet (so the PID cannot have been reused).
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// Wait (bounded; SIGKILL after `limit`) and collect the output.
    pub fn wait_output(mut self, limit: Duration) -> Output {
        let t = Instant::now();
        loop {
            let c = self.child.as_mut().unwrap();
            if c.try_wait().expect("try_wait").is_some() {
                break;
            }
            if t.elapsed() > limit {
                let _ = c.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = self
            .child
            .take()
            .unwrap()
            .wait_with_output()
            .expect("output");
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        out.stderr = self.stderr_so_far().into_bytes();
        out
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Parse the `totals:` line of pfild's stdout into `key=value` pairs.
pub fn totals(stdout: &[u8]) -> std::collections::HashMap<String, String> {
    let s = String::from_utf8_lossy(stdout);
    let line = s
        .lines()
        .find(|l| l.starts_with("totals:"))
        .unwrap_or_else(|| panic!("no totals line in:\n{s}"));
    line["totals:".len()..]
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Run pfild with `args` to its end, which must be a success (stdout and
/// stderr shown if not): its totals and its stdout.
pub fn pfild_totals(args: &[&str]) -> (std::collections::HashMap<String, String>, String) {
    let out = pfild(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (totals(&out.stdout), stdout)
}

/// A numeric field of the totals.
pub fn num(t: &std::collections::HashMap<String, String>, k: &str) -> u64 {
    t.get(k)
        .unwrap_or_else(|| panic!("no `{k}` in totals {t:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("`{k}` not a number in {t:?}"))
}

#[allow(unused_imports, reason = "the synthetic tests need no namespaces")]
pub use pfil_testnet::*;

/// Run pfilctl in-process (`pfil_ctl::cli::run`, which is all the
/// binary's `main` does): always the code under test, where a `pfilctl`
/// binary next to pfild's could be left over from an older build.
pub fn pfilctl(args: &[&str]) -> (u8, String, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let argv = std::iter::once("pfilctl").chain(args.iter().copied());
    let code = pfil_ctl::cli::run(argv, &mut o, &mut e);
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (code, s(&o), s(&e))
}

/// Run pfilctl on socket `sock`; it must succeed. Returns its stdout.
pub fn ctl_ok(sock: &str, args: &[&str]) -> String {
    let mut all = vec!["--socket", sock];
    all.extend_from_slice(args);
    let (code, out, err) = pfilctl(&all);
    assert_eq!(code, 0, "pfilctl {args:?}: {err}");
    out
}

/// `ctl_ok` with `--json`, parsed.
pub fn ctl_json(sock: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ctl_ok(sock, &all)).expect("--json prints JSON")
}

/// A counter of `hook`'s link on the first head's in chain, from `stats --json`.
pub fn link_field(stats: &serde_json::Value, hook: &str, field: &str) -> u64 {
    stats["heads"][0]["in"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["hook"] == hook)
        .and_then(|l| l[field].as_u64())
        .unwrap_or_else(|| panic!("{hook}.{field} in {stats}"))
}

/// Start pfild in the background, stdout and stderr piped.
pub fn spawn_pfild(args: &[&str]) -> Proc {
    Proc::new(
        std::process::Command::new(PFILD)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Start pfild with `args` and a control socket at `sock` (30 s at most,
/// no status line); returns once the socket is announced.
pub fn spawn_controlled(args: &[&str], sock: &str) -> Proc {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--control", sock, "--seconds", "30", "--quiet"]);
    let mut p = spawn_pfild(&all);
    assert!(
        p.wait_stderr(&format!("control socket {sock}"), Duration::from_secs(20)),
        "{}",
        p.stderr_so_far()
    );
    p
}

/// The configuration the churn tests start from: a counter on the in
/// head; drop-udp:dns declared, unlinked.
pub const CHURN_START: &str = r#"# pfild --config: a counter on HEAD in; drop-udp:dns declared, unlinked
[hooks."count:all"]

[hooks."drop-udp:dns"]
config = "53"
dirs = "in"

[heads.HEAD]
in = ["count:all"]
"#;

/// What the incarnations of drop-udp:dns saw, summed from the retired
/// counters that writes return.
#[derive(Debug, Default)]
pub struct Churned {
    /// Packets shown to it.
    pub packets: u64,
    /// Packets it dropped.
    pub dropped: u64,
}

/// The unsigned integer member `k` of `v`.
pub fn u(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// `ops` control operations from pfilctl on head `head` of the pfild at
/// `sock`, started from `cfg` (CHURN_START for `head`): cycles of link
/// drop-udp:dns before count:all, set it to port 53 again, unlink it;
/// the last operation applies `cfg` (unlinking it). Every answer must
/// come after its grace period; every retired link's counters add up.
pub fn churn(sock: &str, head: &str, cfg: &std::path::Path, ops: usize) -> Churned {
    let mut c = Churned::default();
    let mut account = |r: &serde_json::Value| {
        assert_eq!(r["complete"], true, "grace period passed: {r}");
        for l in r["retired"].as_array().unwrap() {
            assert_eq!(l["hook"], "drop-udp:dns", "{r}");
            assert_eq!(u(l, "passed") + u(l, "dropped"), u(l, "packets"), "{r}");
            c.packets += u(l, "packets");
            c.dropped += u(l, "dropped");
        }
    };
    let link = ["link", "-i", "--before", "count:all", "drop-udp:dns", head];
    let unlink = ["unlink", "-i", "drop-udp:dns", head];
    let set = ["set", "drop-udp:dns", "--set", "53"];
    for i in 0..ops.saturating_sub(1) {
        account(&ctl_json(sock, [&link[..], &set, &unlink][i % 3]));
    }
    // Linked at the end (if the last cycle unlinked it): the apply
    // unlinks it, its last counters come with the answer.
    if (ops.saturating_sub(1)) % 3 == 0 {
        account(&ctl_json(sock, &link));
    }
    std::thread::sleep(Duration::from_millis(50));
    let r = ctl_json(sock, &["apply", cfg.to_str().unwrap()]);
    assert_eq!(
        r["diff"],
        serde_json::json!([format!("- link {head} in drop-udp:dns")]),
        "{r}"
    );
    account(&r);
    c
}

/// A hook's final `packets` in pfild's report.
pub fn final_packets(stdout: &str, hook: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix(&format!("hook {hook}: packets "))
        })
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{hook}'s final counters: {stdout}"))
}

/// Tests that push traffic through real interfaces take turns: two
/// dataplanes and their generators at once overload a 2-core machine
/// into kernel drops that are not the code's.
pub fn traffic_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}
