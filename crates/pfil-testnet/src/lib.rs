//! Test support for the AF_XDP tests: network namespaces and veth pairs the
//! test creates and always deletes (RAII, also when the test panics).
//!
//! The rules it enforces: both ends of every veth pair live in namespaces
//! the test created, addresses come from 198.18.0.0/15 (the benchmarking
//! range), nothing touches the root namespace's interfaces. IPv6 is off in
//! the namespaces, so the kernel sends no ND/MLD frames of its own into
//! tests that count every frame.

#![warn(missing_docs)]

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Root and `ip` available? Under `CI` a missing prerequisite is a failure
/// (panic), elsewhere the test is skipped with a message.
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
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
    if under_ci() {
        panic!("{test}: {why}; under CI this test must run (run as root with iproute2 installed)");
    }
    eprintln!("SKIP {test}: {why}");
    false
}

/// Is this a CI run (`CI` set to `true`, `1` or `yes`, as CI services
/// do)? `CI=false` or an empty `CI` is not.
pub fn under_ci() -> bool {
    matches!(
        std::env::var("CI")
            .map(|v| v.to_ascii_lowercase())
            .as_deref(),
        Ok("true" | "1" | "yes")
    )
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Hold this while a test pushes traffic and counts it exactly: the tests
/// of one binary run in parallel, and two traffic tests at once on a
/// 2-core machine (generator, forwarder and sink threads each, plus the
/// kernel's veth work) overload the cores, so the kernel drops frames for
/// want of CPU (`rx_ring_full`), which is not what the tests check. A
/// poisoned lock (a failed test) is taken all the same.
pub fn traffic() -> std::sync::MutexGuard<'static, ()> {
    static TRAFFIC: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TRAFFIC.lock().unwrap_or_else(|e| e.into_inner())
}

/// A short name unique to this process and call, ending in `tag` (fits
/// IFNAMSIZ and namespace names).
pub fn unique(tag: &str) -> String {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("pt{}{}{}", std::process::id() % 100_000, n, tag)
}

/// Like [`unique`] but starting with `prefix` (a test family's own
/// prefix, so its names never clash with other tests').
pub fn unique_prefixed(prefix: &str, tag: &str) -> String {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}{}{}", std::process::id() % 100_000, n, tag)
}

/// Run a command; panic with its stderr if it fails.
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

/// A fresh directory under the system's temporary directory, removed
/// with everything in it on drop (also when the test panics).
pub struct TempDir {
    path: std::path::PathBuf,
}

impl TempDir {
    /// Create `$TMPDIR/<prefix>-<pid>-<n>`, removing a stale one of the
    /// same name first.
    pub fn new(prefix: &str) -> TempDir {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir { path }
    }

    /// Its path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// `path()` joined with `p`.
    pub fn join(&self, p: impl AsRef<std::path::Path>) -> std::path::PathBuf {
        self.path.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A network namespace that is deleted on drop (also on panic).
pub struct Netns {
    /// Its name, as `ip netns` knows it.
    pub name: String,
}

impl Netns {
    /// Create a namespace named `unique(tag)`, loopback up, IPv6 off.
    pub fn new(tag: &str) -> Netns {
        Netns::named(unique(tag))
    }

    /// Create a namespace named `unique_prefixed(prefix, tag)`.
    pub fn new_prefixed(prefix: &str, tag: &str) -> Netns {
        Netns::named(unique_prefixed(prefix, tag))
    }

    fn named(name: String) -> Netns {
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

    /// Run a command inside the namespace; panic if it fails.
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

/// A veth pair `a` (in `ns_a`) <-> `b` (in `ns_b`) with one queue each; see
/// [`veth_queues`].
pub fn veth(ns_a: &Netns, a: &str, ns_b: &Netns, b: &str, net: u8) {
    veth_queues(ns_a, a, ns_b, b, net, 1);
}

/// A veth pair `a` (in `ns_a`) <-> `b` (in `ns_b`), created inside `ns_a`
/// with the peer placed straight into `ns_b`; both up, with
/// `198.18.<net>.1/24` and `198.18.<net>.2/24`, `queues` RX and TX queues
/// each. Deleted with the namespaces.
pub fn veth_queues(ns_a: &Netns, a: &str, ns_b: &Netns, b: &str, net: u8, queues: u32) {
    let q = queues.to_string();
    #[rustfmt::skip]
    ns_a.exec(&[
        "ip", "link", "add", a, "numrxqueues", &q, "numtxqueues", &q,
        "type", "veth", "peer", "name", b, "numrxqueues", &q, "numtxqueues", &q,
        "netns", &ns_b.name,
    ]);
    ns_a.exec(&["ip", "addr", "add", &format!("198.18.{net}.1/24"), "dev", a]);
    ns_b.exec(&["ip", "addr", "add", &format!("198.18.{net}.2/24"), "dev", b]);
    ns_a.exec(&["ip", "link", "set", a, "up"]);
    ns_b.exec(&["ip", "link", "set", b, "up"]);
}

/// Three namespaces in a line, for generator → forwarder → sink tests:
/// `g:g0 <-> f:f0` (198.18.0.0/24) and `f:f1 <-> s:s0` (198.18.1.0/24).
pub struct Topo {
    /// The generator's namespace (`g0`).
    pub g: Netns,
    /// The forwarder's namespace (`f0`, `f1`).
    pub f: Netns,
    /// The sink's namespace (`s0`).
    pub s: Netns,
}

impl Topo {
    /// Create the namespaces and both veth pairs (one queue each).
    pub fn new(tag: &str) -> Topo {
        let g = Netns::new(&format!("{tag}g"));
        let f = Netns::new(&format!("{tag}f"));
        let s = Netns::new(&format!("{tag}s"));
        veth(&g, "g0", &f, "f0", 0);
        veth(&f, "f1", &s, "s0", 1);
        Topo { g, f, s }
    }
}

/// Write a classic pcap file (microsecond timestamps, snap length 65535)
/// of link type `linktype` (1: Ethernet): frame `i` is stamped `i + 1`
/// seconds, so `tcpdump -tt -r` names the frames by their number.
pub fn write_pcap(path: &std::path::Path, linktype: u32, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&linktype.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).expect("a frame under 4 GiB");
        b.extend_from_slice(&(i as u32 + 1).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).expect("write the pcap file");
}

/// The path of tcpdump, or `None` outside CI when it is not installed
/// (under CI, `CI=true`, a missing tcpdump fails: scripts/setup.sh
/// installs it).
pub fn tcpdump() -> Option<&'static str> {
    for p in ["/usr/bin/tcpdump", "/usr/sbin/tcpdump"] {
        if std::path::Path::new(p).exists() {
            return Some(p);
        }
    }
    assert!(
        !under_ci(),
        "tcpdump is missing under CI: scripts/setup.sh installs it"
    );
    eprintln!("skipped: no tcpdump (scripts/setup.sh installs it)");
    None
}

/// The frames of a pcap file that tcpdump keeps for `expr`, as indices
/// (0-based) into the file written by [`write_pcap`].
pub fn tcpdump_indices(tcpdump: &str, file: &std::path::Path, expr: &str) -> Vec<usize> {
    let out = Command::new(tcpdump)
        .args(["-nn", "-tt", "-r"])
        .arg(file)
        .arg(expr)
        .output()
        .expect("run tcpdump");
    assert!(
        out.status.success(),
        "tcpdump `{expr}`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('.').next()?.parse::<usize>().ok())
        .map(|s| s - 1)
        .collect()
}
