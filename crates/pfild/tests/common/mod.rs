//! Test helpers: run the real `pfild` binary; namespaces and veth pairs the
//! test creates and always deletes (RAII), addresses only from
//! 198.18.0.0/15, IPv6 off so the kernel sends nothing of its own.
#![allow(dead_code)]

use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
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

/// A child process killed (by its PID) if still running when dropped.
pub struct Proc(pub Option<Child>);

impl Proc {
    pub fn new(c: Child) -> Proc {
        Proc(Some(c))
    }

    pub fn pid(&self) -> i32 {
        self.0.as_ref().unwrap().id() as i32
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
            let c = self.0.as_mut().unwrap();
            if c.try_wait().expect("try_wait").is_some() {
                break;
            }
            if t.elapsed() > limit {
                let _ = c.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.0.take().unwrap().wait_with_output().expect("output")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
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

/// A numeric field of the totals.
pub fn num(t: &std::collections::HashMap<String, String>, k: &str) -> u64 {
    t.get(k)
        .unwrap_or_else(|| panic!("no `{k}` in totals {t:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("`{k}` not a number in {t:?}"))
}

/// Root and `ip` available? Under `CI` a missing prerequisite is a
/// failure, elsewhere the test is skipped with a message.
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if root && ip {
        return true;
    }
    let why = if !root {
        "not root"
    } else {
        "`ip` (iproute2) missing"
    };
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}; under CI this test must run (run as root with iproute2 installed)");
    }
    eprintln!("SKIP {test}: {why}");
    false
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A unique short name (fits IFNAMSIZ and namespace names).
pub fn unique(tag: &str) -> String {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("pd{}{}{}", std::process::id() % 100_000, n, tag)
}

/// Run a command, panic with its stderr if it fails.
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace deleted on drop (also on panic).
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = unique(tag);
        sh(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        for k in ["all", "default"] {
            ns.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{k}.disable_ipv6=1"),
            ]);
        }
        ns
    }

    pub fn exec(&self, args: &[&str]) -> String {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend_from_slice(args);
        sh(&v)
    }

    /// Does `ip -d link show dev` list an XDP program on `ifname`?
    pub fn has_xdp(&self, ifname: &str) -> bool {
        let out = self.exec(&["ip", "-d", "link", "show", "dev", ifname]);
        out.contains("prog/xdp") || out.contains(" xdp")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A veth pair `a` (in `ns_a`) <-> `b` (in `ns_b`), both up, with
/// `198.18.<net>.1/24` and `.2/24`. Deleted with the namespaces.
pub fn veth(ns_a: &Netns, a: &str, ns_b: &Netns, b: &str, net: u8) {
    ns_a.exec(&[
        "ip", "link", "add", a, "type", "veth", "peer", "name", b, "netns", &ns_b.name,
    ]);
    ns_a.exec(&["ip", "addr", "add", &format!("198.18.{net}.1/24"), "dev", a]);
    ns_b.exec(&["ip", "addr", "add", &format!("198.18.{net}.2/24"), "dev", b]);
    ns_a.exec(&["ip", "link", "set", a, "up"]);
    ns_b.exec(&["ip", "link", "set", b, "up"]);
}
