//! SIGKILL of a process running a port leaves no XDP program behind: the
//! program is attached through a bpf_link whose fd dies with the process.

mod common;
use common::*;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn kill_9_leaves_no_xdp_program() {
    if !require_root("kill_9_leaves_no_xdp_program") {
        return;
    }
    let a = Netns::new("ka");
    let b = Netns::new("kb");
    veth_queues(&a, "k0", &b, "k1", 0, 1);
    let mut child = Command::new(env!("CARGO_BIN_EXE_pfil-afxdp-hold"))
        .args([&a.name, "k0", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn pfil-afxdp-hold");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    assert!(
        a.has_xdp("k0"),
        "{}",
        a.exec(&["ip", "-d", "link", "show", "k0"])
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let t = Instant::now();
    while a.has_xdp("k0") && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !a.has_xdp("k0"),
        "{}",
        a.exec(&["ip", "-d", "link", "show", "k0"])
    );
}
