//! The in-kernel generator (`pfild gen --engine xdp-live`) into a `pfild
//! sink` on the veth peer, in namespaces the tests create (prefix `xl`):
//! exact counts, sizes and ports; every frame at full speed received or
//! counted by the kernel with its reason; unsupported targets and bad
//! interfaces explained. Root only (under CI, `CI=true`, not being root
//! fails).

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// pfild prints this on stderr once every worker is ready.
const READY: &str = "stop with Ctrl-C";

fn spawn(args: &[&str]) -> Proc {
    Proc::new(
        Command::new(PFILD)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pfild"),
    )
}

fn text(o: &std::process::Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether this kernel runs live frames (`pfil_afxdp::live::runs_live_frames`);
/// says so when it does not: some builds refuse them to root (Linux
/// 6.18.44-fc, a Firecracker guest's kernel, with EPERM), and the
/// generator cannot run there at all (`xl_live_gen_unsupported_target...`
/// checks that it says so).
fn live_here(test: &str) -> bool {
    match pfil_afxdp::live::runs_live_frames() {
        Ok(()) => true,
        Err(e @ pfil_afxdp::Error::LiveUnsupported { .. }) => {
            eprintln!("{test}: skipped: {e}");
            false
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

/// Generator namespace (`g0`) and sink namespace (`s0`), one veth pair.
struct Pair {
    g: Netns,
    s: Netns,
    queues: u32,
}

impl Pair {
    /// `queues` RX/TX queues per end. veth puts a frame redirected to `g0`
    /// on the ring of `s0`'s queue `cpu % queues`: with as many queues as
    /// generator threads (on distinct CPUs) every ring has one producer;
    /// two threads sharing one 256-entry ring overflow it now and then
    /// (counted as `xdp_xmit_errors`, so still accounted, but not exact).
    fn new(tag: &str, queues: u32) -> Pair {
        let g = Netns::new_prefixed("xl", &format!("{tag}g"));
        let s = Netns::new_prefixed("xl", &format!("{tag}s"));
        veth_queues(&g, "g0", &s, "s0", 0, queues);
        Pair { g, s, queues }
    }

    /// A sink on `s0` that stops by itself after `count` frames (or 30 s).
    fn sink(&self, count: Option<u64>, hooks: &[&str]) -> Proc {
        self.sink_with(count, hooks, &[])
    }

    /// [`Pair::sink`] with more options.
    fn sink_with(&self, count: Option<u64>, hooks: &[&str], extra: &[&str]) -> Proc {
        let c = count.map(|c| c.to_string());
        let q = self.queues.to_string();
        let mut args = vec![
            "sink",
            "s0",
            "--netns",
            &self.s.name,
            "--queues",
            &q,
            "--ring",
            "4096",
            "--seconds",
            "30",
            "--spin-us",
            "0",
            "--no-control",
            "--quiet",
        ];
        if let Some(c) = &c {
            args.extend_from_slice(&["--count", c]);
        }
        for h in hooks {
            args.extend_from_slice(&["--hook", h]);
        }
        args.extend_from_slice(extra);
        let mut p = spawn(&args);
        assert!(
            p.wait_stderr(READY, Duration::from_secs(20)),
            "sink ready: {}",
            p.stderr_so_far()
        );
        p
    }

    fn gen(&self, extra: &[&str]) -> std::process::Output {
        let mut args = vec![
            "gen",
            "g0",
            "--netns",
            &self.g.name,
            "--engine",
            "xdp-live",
            "--no-control",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        pfild(&args)
    }
}

/// The `port P: N` counts of the generator's thread lines, summed.
fn per_port(stdout: &[u8], port: u16) -> u64 {
    let s = String::from_utf8_lossy(stdout);
    let key = format!("port {port}: ");
    let mut sum = 0;
    for l in s.lines().filter(|l| l.trim_start().starts_with("thread ")) {
        for (i, _) in l.match_indices(key.as_str()) {
            let rest = &l[i + key.len()..];
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            sum += digits.parse::<u64>().unwrap();
        }
    }
    sum
}

/// gen --engine xdp-live -> sink, paced: every frame arrives, exactly;
/// the ports split as asked (the sink drops port 53 by filter), the size
/// is what the count hook's bytes say; then again with two threads (one
/// veth queue each).
#[test]
fn xl_live_gen_to_sink_exact_sizes_and_ports() {
    if !require_root("xl_live_gen_to_sink_exact_sizes_and_ports")
        || !live_here("xl_live_gen_to_sink_exact_sizes_and_ports")
    {
        return;
    }
    let _t = traffic();
    let p = Pair::new("e", 2);
    let (first, second) = (30_000u64, 20_001u64);
    let sink = p.sink(Some(first + second), &["count", "drop-udp:53"]);
    let g1 = p.gen(&[
        "--count",
        &first.to_string(),
        "--rate",
        "100000",
        "--size",
        "200",
        "--dst-port",
        "53,80,443",
    ]);
    assert!(g1.status.success(), "gen: {}", text(&g1));
    let g2 = p.gen(&[
        "--count",
        &second.to_string(),
        "--rate",
        "100000",
        "--size",
        "200",
        "--dst-port",
        "53,80",
        "--threads",
        "2",
    ]);
    assert!(g2.status.success(), "gen --threads 2: {}", text(&g2));
    let sink = sink.wait_output(Duration::from_secs(40));
    let ctx = format!(
        "gen1 {}\ngen2 {}\nsink {}",
        text(&g1),
        text(&g2),
        text(&sink)
    );
    assert!(sink.status.success(), "{ctx}");
    let (t1, t2, s) = (totals(&g1.stdout), totals(&g2.stdout), totals(&sink.stdout));
    for (t, n) in [(&t1, first), (&t2, second)] {
        assert_eq!(num(t, "generated"), n, "{ctx}");
        assert_eq!(num(t, "xdp_xmit"), n, "the driver took every frame\n{ctx}");
        assert_eq!(num(t, "xdp_xmit_errors"), 0, "{ctx}");
        assert_eq!(num(t, "not_reaching_driver"), 0, "{ctx}");
    }
    assert_eq!(per_port(&g1.stdout, 53), first / 3, "{ctx}");
    assert_eq!(per_port(&g1.stdout, 80), first / 3, "{ctx}");
    assert_eq!(per_port(&g1.stdout, 443), first / 3, "{ctx}");
    // Two threads, each rotating the two ports frame by frame on its CPU:
    // 10 001 frames -> 5 001 + 5 000, 10 000 -> 5 000 + 5 000.
    assert_eq!(per_port(&g2.stdout, 53), second / 2 + 1, "{ctx}");
    assert_eq!(per_port(&g2.stdout, 80), second / 2, "{ctx}");
    assert!(
        String::from_utf8_lossy(&g2.stdout).contains("rotate per frame"),
        "{ctx}"
    );
    let g2o = String::from_utf8_lossy(&g2.stdout);
    assert!(
        g2o.contains("thread 0") && g2o.contains("thread 1") && g2o.contains("2 thread(s)"),
        "{ctx}"
    );
    // End to end: everything generated arrived, and exactly the port-53
    // frames were dropped, by the filter.
    assert_eq!(num(&s, "rx"), first + second, "{ctx}");
    assert_eq!(num(&s, "kernel_rx_dropped"), 0, "{ctx}");
    assert_eq!(num(&s, "in_dropped"), first / 3 + second / 2 + 1, "{ctx}");
    let so = String::from_utf8_lossy(&sink.stdout);
    let bytes = (first + second) * 200;
    assert!(
        so.contains(&format!(
            "hook count:1: packets {} bytes {bytes} ",
            first + second
        )),
        "every frame {} bytes\n{ctx}",
        200
    );
    // The kernel detaches a closed bpf_link asynchronously: wait (bounded).
    let t = Instant::now();
    while p.g.has_xdp("g0") && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !p.g.has_xdp("g0"),
        "the generator's program left on g0\n{ctx}"
    );
}

/// The CPUs the threads of process `pid` named `name` may run on
/// (`Cpus_allowed_list` of /proc/PID/task/TID/status).
fn thread_cpus(pid: u32, name: &str) -> Option<String> {
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let st = std::fs::read_to_string(t.path().join("status")).ok()?;
            return st
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_owned());
        }
    }
    None
}

/// Two queues, one sink worker each, pinned by `--cpus 1,0` (worker 0 on
/// CPU 1, worker 1 on CPU 0); two generator threads on CPUs 0 and 1, so
/// veth puts thread i's frames on queue i: each worker receives exactly
/// its generator thread's frames, and the totals add up.
#[test]
fn xl_two_queues_pinned_workers_account_per_queue() {
    if !require_root("xl_two_queues_pinned_workers_account_per_queue")
        || !live_here("xl_two_queues_pinned_workers_account_per_queue")
    {
        return;
    }
    let _t = traffic();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("xl_two_queues_pinned_workers_account_per_queue: needs 2 CPUs, skipped");
        return;
    }
    let p = Pair::new("q", 2);
    let n = 40_000u64;
    let sink = p.sink_with(Some(n), &["count"], &["--cpus", "1,0"]);
    let pid = sink.pid() as u32;
    assert_eq!(thread_cpus(pid, "pfil-sink-0").as_deref(), Some("1"));
    assert_eq!(thread_cpus(pid, "pfil-sink-1").as_deref(), Some("0"));
    let g = p.gen(&[
        "--count",
        &n.to_string(),
        "--rate",
        "100000",
        "--threads",
        "2",
    ]);
    assert!(g.status.success(), "gen: {}", text(&g));
    let sink = sink.wait_output(Duration::from_secs(40));
    let ctx = format!("gen {}\nsink {}", text(&g), text(&sink));
    assert!(sink.status.success(), "{ctx}");
    let (t, s) = (totals(&g.stdout), totals(&sink.stdout));
    assert_eq!(num(&t, "xdp_xmit"), n, "{ctx}");
    assert_eq!(num(&s, "rx"), n, "{ctx}");
    assert_eq!(num(&s, "kernel_rx_dropped"), 0, "{ctx}");
    let so = String::from_utf8_lossy(&sink.stdout);
    for q in 0..2 {
        let want = format!("flow {q} (s0 in): received {}, passed {}", n / 2, n / 2);
        assert!(so.contains(&want), "queue {q}: `{want}`\n{ctx}");
    }
}

/// Unpaced for a second: the generator stops on time, and every frame it
/// sent is received by the sink or counted by the kernel with its reason
/// (peer ring full: xdp_xmit_errors; AF_XDP ring full or no fill buffer:
/// the sink's kernel_rx_dropped; refused before the driver).
#[test]
fn xl_live_gen_full_speed_accounts_every_frame() {
    if !require_root("xl_live_gen_full_speed_accounts_every_frame")
        || !live_here("xl_live_gen_full_speed_accounts_every_frame")
    {
        return;
    }
    let _t = traffic();
    let p = Pair::new("f", 1);
    let sink = p.sink(None, &[]);
    let t0 = Instant::now();
    let g = p.gen(&["--seconds", "1"]);
    let took = t0.elapsed();
    assert!(g.status.success(), "gen: {}", text(&g));
    // Let the peer's NAPI finish, then stop the sink.
    std::thread::sleep(Duration::from_millis(300));
    sink.signal(libc::SIGINT);
    let sink = sink.wait_output(Duration::from_secs(20));
    let ctx = format!("gen {}\nsink {}", text(&g), text(&sink));
    assert!(sink.status.success(), "{ctx}");
    assert!(
        took < Duration::from_secs(5),
        "stopped on time: {took:?}\n{ctx}"
    );
    let (t, s) = (totals(&g.stdout), totals(&sink.stdout));
    let sent = num(&t, "generated");
    assert!(sent > 10_000, "{ctx}");
    let (xmit, errs, lost) = (
        num(&t, "xdp_xmit"),
        num(&t, "xdp_xmit_errors"),
        num(&t, "not_reaching_driver"),
    );
    assert_eq!(sent, xmit + errs + lost, "{ctx}");
    assert_eq!(lost, 0, "the peer had its XDP program all along\n{ctx}");
    assert_eq!(
        xmit,
        num(&s, "rx") + num(&s, "kernel_rx_dropped"),
        "every frame on the peer's ring reached the sink or the AF_XDP drop counters\n{ctx}"
    );
}

/// No XDP program on the peer: the probe refuses with the reason and the
/// fix; a missing interface and hooks are explained too.
#[test]
fn xl_live_gen_unsupported_target_and_bad_input_are_explained() {
    if !require_root("xl_live_gen_unsupported_target_and_bad_input_are_explained") {
        return;
    }
    let p = Pair::new("u", 1);
    let out = p.gen(&["--count", "10"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    if live_here("xl_live_gen_unsupported_target_and_bad_input_are_explained") {
        assert!(
            e.contains("`g0` cannot transmit redirected XDP frames")
                && e.contains("NETDEV_XDP_ACT_NDO_XMIT")
                && e.contains("the peer needs an XDP program"),
            "{e}"
        );
    } else {
        // A kernel that refuses live frames is named as such, not as a
        // permission to grant.
        assert!(
            e.contains("the in-kernel generator is unsupported here")
                && e.contains("this kernel does not run live frames")
                && e.contains("--engine afxdp")
                && !e.contains("permission denied"),
            "{e}"
        );
    }
    let out = pfild(&[
        "gen",
        "nosuch0",
        "--netns",
        &p.g.name,
        "--engine",
        "xdp-live",
        "--no-control",
    ]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("no such interface `nosuch0`"), "{e}");
    let out = p.gen(&["--hook", "count"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("cannot run hooks"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

/// SIGINT stops an unbounded run with exact totals; `kill -9` leaves no
/// XDP program on the target (the kernel closes the generator's bpf_link).
#[test]
fn xl_live_gen_signal_and_kill_9_leave_nothing_behind() {
    if !require_root("xl_live_gen_signal_and_kill_9_leave_nothing_behind")
        || !live_here("xl_live_gen_signal_and_kill_9_leave_nothing_behind")
    {
        return;
    }
    let _t = traffic();
    let p = Pair::new("k", 1);
    let sink = p.sink(None, &[]);
    let args = [
        "gen",
        "g0",
        "--netns",
        &p.g.name,
        "--engine",
        "xdp-live",
        "--rate",
        "50000",
        "--seconds",
        "30",
        "--no-control",
        "--quiet",
    ];
    let mut g = spawn(&args);
    assert!(
        g.wait_stderr(READY, Duration::from_secs(20)),
        "{}",
        g.stderr_so_far()
    );
    std::thread::sleep(Duration::from_millis(300));
    g.signal(libc::SIGINT);
    let out = g.wait_output(Duration::from_secs(10));
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(signal)"),
        "{}",
        text(&out)
    );
    let t = totals(&out.stdout);
    assert!(num(&t, "generated") > 0, "{}", text(&out));
    assert_eq!(
        num(&t, "generated"),
        num(&t, "xdp_xmit") + num(&t, "xdp_xmit_errors"),
        "{}",
        text(&out)
    );
    let mut g = spawn(&args);
    assert!(
        g.wait_stderr(READY, Duration::from_secs(20)),
        "{}",
        g.stderr_so_far()
    );
    assert!(
        p.g.has_xdp("g0"),
        "the warm program is attached while it runs"
    );
    g.signal(libc::SIGKILL);
    let out = g.wait_output(Duration::from_secs(10));
    assert!(!out.status.success());
    let t0 = Instant::now();
    while p.g.has_xdp("g0") && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!p.g.has_xdp("g0"), "XDP left on g0 after kill -9");
    sink.signal(libc::SIGINT);
    let s = sink.wait_output(Duration::from_secs(10));
    assert!(s.status.success(), "{}", text(&s));
}

/// The program rewrites the destination port frame by frame and fixes the
/// UDP checksum: frames sent to the peer's kernel stack (queue 1 of a
/// 2-queue veth has no AF_XDP socket, so the sink's program passes them)
/// are all counted as UDP to a closed port (`NoPorts`), none as a
/// checksum error (`InCsumErrors`).
#[test]
fn xl_live_gen_rotated_ports_keep_valid_udp_checksums() {
    if !require_root("xl_live_gen_rotated_ports_keep_valid_udp_checksums")
        || !live_here("xl_live_gen_rotated_ports_keep_valid_udp_checksums")
    {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("SKIP xl_live_gen_rotated_ports_keep_valid_udp_checksums: needs 2 CPUs");
        return;
    }
    let _t = traffic();
    let p = Pair::new("c", 2);
    // The sink takes queue 0 only; CPU 1's frames land on queue 1.
    let sink = {
        let mut s = spawn(&[
            "sink",
            "s0",
            "--netns",
            &p.s.name,
            "--queues",
            "1",
            "--seconds",
            "30",
            "--spin-us",
            "0",
            "--no-control",
            "--quiet",
        ]);
        assert!(
            s.wait_stderr(READY, Duration::from_secs(20)),
            "{}",
            s.stderr_so_far()
        );
        s
    };
    let mac =
        p.s.exec(&["cat", "/sys/class/net/s0/address"])
            .trim()
            .to_owned();
    let udp = |ns: &Netns| -> std::collections::HashMap<String, u64> {
        let t = ns.exec(&["cat", "/proc/net/snmp"]);
        let l: Vec<&str> = t.lines().filter(|l| l.starts_with("Udp:")).collect();
        l[0].split_whitespace()
            .zip(l[1].split_whitespace())
            .skip(1)
            .map(|(k, v)| (k.to_owned(), v.parse().unwrap()))
            .collect()
    };
    let before = udp(&p.s);
    let n = 5_001u64;
    let out = Command::new("taskset")
        .args([
            "-c", "1", PFILD, "gen", "g0", "--netns", &p.g.name, "--engine", "xdp-live",
        ])
        .args([
            "--count",
            &n.to_string(),
            "--rate",
            "50000",
            "--dst-mac",
            &mac,
        ])
        .args([
            "--dst-port",
            "53,80,443,8080,9",
            "--size",
            "130",
            "--no-control",
            "--quiet",
        ])
        .output()
        .expect("taskset pfild gen");
    assert!(out.status.success(), "{}", text(&out));
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(o.contains("rotate per frame"), "{}", text(&out));
    assert!(o.contains("port 53: 1001, port 80: 1000"), "{}", text(&out));
    let t0 = Instant::now();
    let mut after = udp(&p.s);
    while after["NoPorts"] - before["NoPorts"] < n && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
        after = udp(&p.s);
    }
    sink.signal(libc::SIGINT);
    let s = sink.wait_output(Duration::from_secs(10));
    let ctx = format!(
        "gen {}\nsink {}\nudp {before:?} -> {after:?}",
        text(&out),
        text(&s)
    );
    assert_eq!(after["InCsumErrors"] - before["InCsumErrors"], 0, "{ctx}");
    assert_eq!(after["NoPorts"] - before["NoPorts"], n, "{ctx}");
}
