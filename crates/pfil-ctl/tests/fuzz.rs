//! The control protocol under a fuzzer (issue 23, "make it stay fixed"):
//! random and mutated JSON-RPC requests built from PROTOCOL.md's
//! examples, hostile framing (no newline, huge lines, binary, half-closed
//! and abandoned sockets, many connections at once), oversized and deeply
//! nested inputs, all against an in-process server on a registry with the
//! built-in catalog (and a module whose factory panics). After each batch
//! the server answers `heads` and `show`, `show` is unchanged unless a
//! write succeeded in the batch, and no capture tap is left linked; at the
//! end no descriptor or thread is left over.
//!
//! Deterministic from its seed, printed at the start:
//! `PFIL_CTL_FUZZ_SEED=N` replays a run, `PFIL_CTL_FUZZ_CASES=N` sets the
//! number of cases (default 240, a few seconds; `scripts/fuzz-long.sh`
//! runs many more in release mode).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pfil::{Dir, Dirs, PacketKind, Placement, Registry};
use pfil_ctl::{Client, ControlConfig, Server};
use pfil_filters::{BuildCtx, Catalog, Module};
use serde_json::{json, Map, Value};

const DOC: &str = include_str!("../PROTOCOL.md");
/// The server's request limit in this test (small, so that oversized
/// lines are cheap to send).
const MAX_REQUEST: usize = 64 * 1024;
const BATCH: usize = 16;

/// SplitMix64: small, fast, and the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The requests of PROTOCOL.md's `ndjson` blocks.
fn documented_requests() -> Vec<String> {
    DOC.lines()
        .filter_map(|l| l.strip_prefix("--> "))
        .map(str::to_owned)
        .collect()
}

const METHODS: &[&str] = &[
    "version",
    "heads",
    "hooks",
    "stats",
    "filter_stats",
    "show",
    "add",
    "set",
    "del",
    "link",
    "unlink",
    "apply",
    "sampling",
    "capture",
    "reap",
    "capture.stop",
    "reboot",
    "",
];
const KEYS: &[&str] = &[
    "head",
    "dir",
    "hook",
    "placement",
    "config",
    "kind",
    "dirs",
    "every",
    "toml",
    "dry_run",
    "expect_generation",
    "expr",
    "snaplen",
    "count",
    "seconds",
    "buffer",
    "verbose",
];
const STRINGS: &[&str] = &[
    "",
    "syn0",
    "syn9",
    "in",
    "out",
    "in,out",
    "sideways",
    "count:1",
    "count:f",
    "count:",
    ":x",
    "drop-udp:dns",
    "drop-udp:f",
    "boom:x",
    "bpf:f",
    "acl:f",
    "ratelimit:f",
    "53",
    "drop udp",
    "pass proto udp; default drop",
    "10k per src table 8",
    "prepend",
    "append",
    "first",
    "last",
    "ethernet",
    "ipv4",
    "udp port 53",
    "udp prot 53",
    "[hooks.\"count:f\"]\n[heads.syn0]\nin = [\"count:1\", \"count:f\"]\n",
    "[heads.syn0]\nin = [\"count:1\"\n",
    "[heads.syn0]\nin = [{ hook = \"count:1\", fail = \"closed\" }]\n",
    "é\u{0}\u{202e}\u{feff}",
    "\"quoted\" `ticks`",
];

fn random_string(r: &mut Rng) -> String {
    match r.below(6) {
        0 => "a".repeat(r.below(MAX_REQUEST + 4096)),
        1 => {
            let n = r.below(64);
            String::from_utf8_lossy(&r.bytes(n)).into_owned()
        }
        2 => format!("count:{}", r.next()),
        _ => (*r.pick(STRINGS)).to_owned(),
    }
}

fn random_value(r: &mut Rng, depth: usize) -> Value {
    match r.below(if depth > 3 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => json!(r.chance(50)),
        2 => json!(*r.pick(&[0i64, -1, 1, 16, 53, 4096, i64::MAX, i64::MIN])),
        3 => json!(*r.pick(&[u64::MAX, 1 << 20, 100_000, 9216, 9217])),
        4 => json!(*r.pick(&[0.5, 1e300, -1e300, 1e19, 0.01, -0.0])),
        5 => json!(random_string(r)),
        6 => Value::Array(
            (0..r.below(4))
                .map(|_| random_value(r, depth + 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..r.below(4))
                .map(|_| {
                    let k = if r.chance(80) {
                        (*r.pick(KEYS)).to_owned()
                    } else {
                        random_string(r)
                    };
                    (k, random_value(r, depth + 1))
                })
                .collect(),
        ),
    }
}

/// A request from a documented one, changed a little or a lot.
fn mutated_request(r: &mut Rng, docs: &[String]) -> Vec<u8> {
    let base = r.pick(docs).clone();
    match serde_json::from_str::<Value>(&base) {
        Ok(Value::Object(mut o)) if r.chance(75) => {
            for _ in 0..1 + r.below(3) {
                match r.below(8) {
                    0 => {
                        o.insert("method".into(), json!(*r.pick(METHODS)));
                    }
                    1 => {
                        o.remove("id");
                    }
                    2 => {
                        o.insert("id".into(), random_value(r, 3));
                    }
                    3 => {
                        let p = o
                            .entry("params")
                            .or_insert_with(|| Value::Object(Map::new()));
                        if let Value::Object(p) = p {
                            p.insert((*r.pick(KEYS)).to_owned(), random_value(r, 1));
                        }
                    }
                    4 => {
                        if let Some(Value::Object(p)) = o.get_mut("params") {
                            let keys: Vec<String> = p.keys().cloned().collect();
                            if !keys.is_empty() {
                                p.remove(r.pick(&keys));
                            }
                        }
                    }
                    5 => {
                        if let Some(Value::Object(p)) = o.get_mut("params") {
                            let keys: Vec<String> = p.keys().cloned().collect();
                            if !keys.is_empty() {
                                let k = r.pick(&keys).clone();
                                p.insert(k, random_value(r, 1));
                            }
                        }
                    }
                    6 => {
                        o.insert("params".into(), random_value(r, 2));
                    }
                    _ => {
                        o.insert(random_string(r), random_value(r, 2));
                    }
                }
            }
            let mut line = serde_json::to_vec(&Value::Object(o)).unwrap();
            line.push(b'\n');
            line
        }
        _ => {
            // Bytes: flips, insertions, deletions, a cut.
            let mut b = base.into_bytes();
            for _ in 0..1 + r.below(4) {
                if b.is_empty() {
                    break;
                }
                let at = r.below(b.len());
                match r.below(4) {
                    0 => b[at] ^= 1 << r.below(8),
                    1 => b.insert(at, *r.pick(b"{}[]\",:\\0123456789 \x00\xff")),
                    2 => {
                        b.remove(at);
                    }
                    _ => b.truncate(at),
                }
            }
            b.push(b'\n');
            b
        }
    }
}

/// One thing a client does on one connection.
enum Case {
    /// Send these bytes; half-close or not; read until EOF or idle.
    Send { bytes: Vec<u8>, half_close: bool },
    /// Open many connections at once and drop them.
    Crowd(usize),
}

fn random_case(r: &mut Rng, docs: &[String]) -> Case {
    let half_close = r.chance(50);
    let bytes = match r.below(20) {
        0 => {
            // Binary garbage, maybe without a newline.
            let n = 1 + r.below(512);
            let mut b = r.bytes(n);
            if r.chance(50) {
                b.push(b'\n');
            }
            b
        }
        1 => {
            // Deep nesting, in params or alone.
            let n = 64 + r.below(20_000);
            let (open, close) = if r.chance(50) {
                ("[", "]")
            } else {
                ("{\"a\":", "}")
            };
            let inner = format!("{}1{}", open.repeat(n), close.repeat(n));
            format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"add\",\"params\":{{\"hook\":{inner}}}}}\n")
                .into_bytes()
        }
        2 => {
            // Over the size limit, with or without a newline.
            let mut b = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"heads\",\"pad\":\"{}\"}}",
                "x".repeat(MAX_REQUEST + r.below(MAX_REQUEST))
            )
            .into_bytes();
            if r.chance(50) {
                b.push(b'\n');
            }
            b
        }
        3 => {
            // A request without its end (the server's read timeout).
            let d = mutated_request(r, docs);
            d[..r.below(d.len())].to_vec()
        }
        4 => return Case::Crowd(8 + r.below(32)),
        5 => {
            // Several requests on one connection.
            let mut b = Vec::new();
            for _ in 0..2 + r.below(4) {
                b.extend(mutated_request(r, docs));
            }
            b
        }
        6 => {
            // A capture with random parameters.
            let mut p = Map::new();
            p.insert("head".into(), json!("syn0"));
            p.insert("dir".into(), json!(*r.pick(&["in", "out", "x"])));
            for _ in 0..r.below(4) {
                p.insert(
                    (*r.pick(&["expr", "snaplen", "count", "seconds", "buffer", "placement"]))
                        .to_owned(),
                    random_value(r, 2),
                );
            }
            let mut b = serde_json::to_vec(
                &json!({"jsonrpc": "2.0", "id": r.below(1000), "method": "capture", "params": p}),
            )
            .unwrap();
            b.push(b'\n');
            b
        }
        7 | 8 => {
            // A documented request as it is (valid writes among them).
            let mut b = r.pick(docs).clone().into_bytes();
            b.push(b'\n');
            b
        }
        _ => mutated_request(r, docs),
    };
    Case::Send { bytes, half_close }
}

/// Run one case; the response lines it got.
fn run(path: &Path, case: &Case) -> Vec<Value> {
    match case {
        Case::Crowd(n) => {
            let conns: Vec<UnixStream> = (0..*n)
                .filter_map(|_| UnixStream::connect(path).ok())
                .collect();
            std::thread::sleep(Duration::from_millis(20));
            drop(conns);
            Vec::new()
        }
        Case::Send { bytes, half_close } => {
            let Ok(mut s) = UnixStream::connect(path) else {
                return Vec::new();
            };
            let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
            // The server may close before reading everything.
            let _ = s.write_all(bytes);
            if *half_close {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            // Read what comes: until EOF (the server closed) or an idle
            // pause (the server waits for more), at most a few seconds.
            let deadline = Instant::now() + Duration::from_secs(4);
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            while Instant::now() < deadline && got.len() < 256 * 1024 {
                let _ = s.set_read_timeout(Some(Duration::from_millis(if *half_close {
                    1000
                } else {
                    400
                })));
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(_) => break,
                }
            }
            // Complete lines only: a stream (a capture) cut by our
            // deadline ends in a partial one.
            let complete = got.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            got[..complete]
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| {
                    serde_json::from_slice(l).unwrap_or_else(|e| {
                        panic!(
                            "the server sent a line that is not JSON ({e}): {:?}",
                            String::from_utf8_lossy(&l[..l.len().min(300)])
                        )
                    })
                })
                .collect()
        }
    }
}

/// What a response says about the server: each must be a JSON-RPC 2.0
/// response or a `capture.data` notification, with a bounded message.
fn check_line(v: &Value) -> bool {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    if v["method"] == "capture.data" {
        assert!(v["params"]["data"].is_string(), "{v}");
        return false;
    }
    assert!(v.get("id").is_some(), "a response has an id: {v}");
    match (v.get("result"), v.get("error")) {
        (Some(res), None) => ["complete", "captured", "reaped"]
            .iter()
            .any(|k| res.get(k).is_some()),
        (None, Some(e)) => {
            let m = e["message"].as_str().expect("a message");
            assert!(
                !m.is_empty() && m.len() <= 1024,
                "message of {} bytes",
                m.len()
            );
            assert!(e["code"].is_i64(), "{v}");
            assert!(e["data"]["kind"].is_string(), "{v}");
            assert_ne!(e["data"]["kind"], "transaction", "{v}");
            false
        }
        _ => panic!("neither result nor error: {v}"),
    }
}

/// `show`'s configuration without its comments (which carry the
/// generation: a capture publishes two without changing it).
fn config_of(c: &mut Client) -> String {
    let v = c.call("show", Value::Null).expect("show answers");
    let toml: String = v["toml"]
        .as_str()
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    format!("{toml}\napp_hooks: {}", v["app_hooks"])
}

fn count_dir(p: &str) -> usize {
    std::fs::read_dir(p).map_or(0, Iterator::count)
}

/// Descriptors and threads of this process, once they stop going down
/// to `want` (or after 10 s).
fn settle(want: (usize, usize)) -> (usize, usize) {
    let t = Instant::now();
    loop {
        let now = (count_dir("/proc/self/fd"), count_dir("/proc/self/task"));
        if (now.0 <= want.0 && now.1 <= want.1) || t.elapsed() > Duration::from_secs(10) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_control_protocol_survives_a_fuzzer() {
    let seed = env_u64("PFIL_CTL_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let cases = env_u64("PFIL_CTL_FUZZ_CASES").unwrap_or(240) as usize;
    println!("control fuzz: seed {seed} (PFIL_CTL_FUZZ_SEED={seed} replays), {cases} cases");
    let mut r = Rng(seed);
    let docs = documented_requests();
    assert!(docs.len() > 40, "{} documented requests", docs.len());

    let dir = std::env::temp_dir().join(format!("pfil-ctl-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let mut catalog = Catalog::builtin();
    catalog
        .register(Module::new("boom", "panics when built", |_| {
            panic!("the boom module's factory panicked")
        }))
        .unwrap();
    let f = catalog.create("count", &BuildCtx::new(2)).unwrap();
    reg.add_hook_shared("count:1", PacketKind::Ethernet, Dirs::BOTH, f)
        .unwrap();
    reg.link("syn0", Dir::In, "count:1", Placement::Append)
        .unwrap();
    let mut cfg = ControlConfig::new("pfild")
        .path(dir.join("ctl").join("f.sock"))
        .max_request(MAX_REQUEST)
        .max_connections(24)
        .read_timeout(Duration::from_millis(300));
    cfg.grace_timeout = Duration::from_millis(200);
    let server = Server::start(reg.clone(), Arc::new(catalog), cfg).unwrap();
    let path: PathBuf = server.path().to_owned();
    // Panics the fuzzer provokes on purpose (the `boom` module) are
    // answered; keep their messages out of the output.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let quiet = std::thread::current().name() == Some("pfil-ctl-conn")
            && info.to_string().contains("boom module");
        if !quiet {
            hook(info);
        }
    }));

    // A datapath: UDP frames through syn0 both ways, so that captures
    // copy and filters run while the fuzzer changes things.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let datapath = {
        let stop = stop.clone();
        let mut w = reg.worker().unwrap();
        std::thread::spawn(move || {
            let mut frames: Vec<Vec<u8>> = (0..32u16)
                .map(|i| {
                    let b = etherparse::PacketBuilder::ethernet2(
                        [2, 0, 0, 0, 0, 1],
                        [2, 0, 0, 0, 0, 2],
                    )
                    .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
                    .udp(1024 + i, [53, 80, 443][usize::from(i) % 3]);
                    let mut v = Vec::new();
                    b.write(&mut v, &[0u8; 18]).unwrap();
                    v
                })
                .collect();
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for d in Dir::ALL {
                    let mut f = frames.clone();
                    let mut pkts: Vec<pfil::Packet<'_>> =
                        f.iter_mut().map(|f| pfil::Packet::new(f)).collect();
                    head.run(d, &mut w, &mut pkts);
                    n += 32;
                }
                frames.rotate_left(1);
                std::thread::sleep(Duration::from_millis(1));
            }
            n
        })
    };
    let mut client = Client::connect(&path).unwrap();
    let mut config = config_of(&mut client);
    drop(client);
    std::thread::sleep(Duration::from_millis(300));
    let before = (count_dir("/proc/self/fd"), count_dir("/proc/self/task"));
    let started = Instant::now();
    let (mut writes, mut lines, mut done) = (0usize, 0usize, 0usize);
    while done < cases {
        let n = BATCH.min(cases - done);
        let batch: Vec<Case> = (0..n).map(|_| random_case(&mut r, &docs)).collect();
        done += n;
        // The batch's cases at once, each on its own connection(s).
        let results: Vec<Vec<Value>> = std::thread::scope(|s| {
            let hs: Vec<_> = batch.iter().map(|c| s.spawn(|| run(&path, c))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut wrote = false;
        for v in results.iter().flatten() {
            lines += 1;
            wrote |= check_line(v);
        }
        writes += usize::from(wrote);
        // The server answers, and changed only if a write succeeded.
        let mut c = Client::connect(&path)
            .unwrap_or_else(|e| panic!("seed {seed}: the server does not answer: {e}"));
        c.call("heads", Value::Null)
            .unwrap_or_else(|e| panic!("seed {seed}: heads: {e}"));
        let now = config_of(&mut c);
        assert!(
            wrote || now == config,
            "seed {seed}: the configuration changed without a successful write:\n{config}\n---\n{now}"
        );
        config = now;
        drop(c);
        // No tap outlives its session.
        let t = Instant::now();
        while reg.hooks().iter().any(|h| h.name.starts_with("capture:")) {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "seed {seed}: a capture tap is left: {:?}",
                reg.hooks()
                    .iter()
                    .map(|h| h.name.clone())
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let after = settle(before);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let frames = datapath.join().expect("the datapath thread never panics");
    println!(
        "control fuzz: {cases} cases, {lines} response lines, {writes} batches with a write, {frames} frames through the datapath, {:?}; fds {} -> {}, threads {} -> {}",
        started.elapsed(),
        before.0,
        after.0,
        before.1,
        after.1
    );
    assert!(
        after.0 <= before.0 && after.1 <= before.1,
        "seed {seed}: descriptors {} -> {}, threads {} -> {}",
        before.0,
        after.0,
        before.1,
        after.1
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
