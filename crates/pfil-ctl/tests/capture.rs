//! Captures through the control server, with a datapath thread this test
//! drives: the pcapng opens in tcpdump with exactly the frames expected
//! (count, bytes, order), a capture with an expression equals tcpdump's
//! reading of a full capture taken at the same time, an overrun capture
//! reports its drops in the file and its answer while the datapath loses
//! nothing, and a client that goes away leaves no tap behind.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use pfil::{Dir, Dirs, Head, Packet, PacketKind, Placement, Registry};
use pfil_ctl::{ControlConfig, Server};
use pfil_filters::{BuildCtx, Catalog};
use serde_json::{json, Value};

struct Rig {
    dir: PathBuf,
    reg: Registry,
    head: Head,
    _server: Server,
}

impl Rig {
    fn new(tag: &str) -> Rig {
        let dir = std::env::temp_dir().join(format!("pfil-cap-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let reg = Registry::with_max_workers(2);
        let head = reg
            .register_head("syn0", PacketKind::Ethernet, Dirs::IN)
            .unwrap();
        let c = Catalog::builtin();
        let f = c.create("count", &BuildCtx::new(2)).unwrap();
        reg.add_hook_shared("count:1", PacketKind::Ethernet, Dirs::IN, f)
            .unwrap();
        reg.link("syn0", Dir::In, "count:1", Placement::Append)
            .unwrap();
        let server = Server::start(
            reg.clone(),
            Arc::new(c),
            ControlConfig::new("t").path(dir.join("ctl").join("t.sock")),
        )
        .unwrap();
        Rig {
            dir,
            reg,
            head,
            _server: server,
        }
    }

    fn sock(&self) -> PathBuf {
        self.dir.join("ctl").join("t.sock")
    }

    fn taps(&self) -> usize {
        self.reg
            .chain("syn0", Dir::In)
            .unwrap()
            .iter()
            .filter(|l| l.hook.starts_with("capture:"))
            .count()
    }

    fn wait_taps(&self, n: usize) {
        let t = Instant::now();
        while self.taps() != n {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{} taps, not {n}",
                self.taps()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// UDP frames to ports 53 / 80 / 443 in turn, each 64 + (i % 7) bytes;
/// the first 4 bytes of the payload number it.
fn frame(i: u32) -> Vec<u8> {
    let port = [53, 80, 443][i as usize % 3];
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(9, port);
    let mut payload = vec![0u8; 18 + (i as usize % 7)];
    payload[..4].copy_from_slice(&i.to_be_bytes());
    let mut v = Vec::new();
    b.write(&mut v, &payload).unwrap();
    v
}

/// Run frames `from..to` through the head in batches of 32.
fn traffic(w: &mut pfil::Worker, head: &Head, from: u32, to: u32, pause: Duration) {
    let mut i = from;
    while i < to {
        let end = (i + 32).min(to);
        let mut frames: Vec<Vec<u8>> = (i..end).map(frame).collect();
        let mut pkts: Vec<Packet<'_>> = frames.iter_mut().map(|f| Packet::new(f)).collect();
        head.run(Dir::In, w, &mut pkts);
        i = end;
        std::thread::sleep(pause);
    }
}

/// A capture session: the stream of pcapng bytes and the final answer.
struct Session {
    s: UnixStream,
    r: BufReader<UnixStream>,
}

impl Session {
    fn start(sock: &Path, params: Value) -> Session {
        let mut s = UnixStream::connect(sock).unwrap();
        let req = json!({"jsonrpc": "2.0", "id": 7, "method": "capture", "params": params});
        s.write_all(format!("{req}\n").as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let r = BufReader::new(s.try_clone().unwrap());
        Session { s, r }
    }

    /// Read until the answer: (pcapng bytes, result).
    fn finish(mut self) -> (Vec<u8>, Value) {
        let mut bytes = Vec::new();
        loop {
            let mut line = String::new();
            assert!(self.r.read_line(&mut line).unwrap() > 0, "closed early");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["method"] == "capture.data" {
                assert_eq!(v["params"]["id"], 7);
                let d = v["params"]["data"].as_str().unwrap();
                bytes.extend(base64::engine::general_purpose::STANDARD.decode(d).unwrap());
            } else {
                assert_eq!(v["id"], 7, "{v}");
                return (bytes, v["result"].clone());
            }
        }
    }

    fn stop(&mut self) {
        self.s
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"capture.stop\"}\n")
            .unwrap();
    }
}

/// The blocks of a pcapng file: (type, body).
fn blocks(b: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 12 <= b.len() {
        let t = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
        assert!(
            len >= 12 && len % 4 == 0 && at + len <= b.len(),
            "block at {at}"
        );
        let trail = u32::from_le_bytes(b[at + len - 4..at + len].try_into().unwrap()) as usize;
        assert_eq!(trail, len, "trailing length of the block at {at}");
        out.push((t, b[at + 8..at + len - 4].to_vec()));
        at += len;
    }
    assert_eq!(at, b.len(), "whole blocks");
    out
}

/// The frames of a pcapng: (frame number from the payload, caplen, origlen).
fn packets(b: &[u8]) -> Vec<(u32, u32, u32)> {
    blocks(b)
        .into_iter()
        .filter(|(t, _)| *t == 6)
        .map(|(_, body)| {
            let cap = u32::from_le_bytes(body[12..16].try_into().unwrap());
            let orig = u32::from_le_bytes(body[16..20].try_into().unwrap());
            let data = &body[20..20 + cap as usize];
            let n = u32::from_be_bytes(data[42..46].try_into().unwrap());
            (n, cap, orig)
        })
        .collect()
}

/// The interface statistics block's options: code -> value.
fn isb(b: &[u8]) -> std::collections::HashMap<u16, u64> {
    let (_, body) = blocks(b)
        .into_iter()
        .rfind(|(t, _)| *t == 5)
        .expect("an ISB");
    let mut o = std::collections::HashMap::new();
    let mut at = 12;
    while at + 4 <= body.len() {
        let code = u16::from_le_bytes(body[at..at + 2].try_into().unwrap());
        let len = u16::from_le_bytes(body[at + 2..at + 4].try_into().unwrap()) as usize;
        if code == 0 {
            break;
        }
        if len == 8 {
            o.insert(
                code,
                u64::from_le_bytes(body[at + 4..at + 12].try_into().unwrap()),
            );
        }
        at += 4 + len.div_ceil(4) * 4;
    }
    o
}

fn tcpdump_count(file: &Path, expr: &str) -> Option<usize> {
    let td = pfil_testnet::tcpdump()?;
    let mut args = vec!["-nn", "-r", file.to_str().unwrap()];
    if !expr.is_empty() {
        args.push(expr);
    }
    let o = std::process::Command::new(td).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(String::from_utf8_lossy(&o.stdout).lines().count())
}

#[test]
fn a_capture_after_a_hook_has_exactly_the_frames_expected() {
    let rig = Rig::new("count");
    // The datapath's worker exists before the capture, as in an app.
    let mut w = rig.reg.worker().unwrap();
    let sess = Session::start(
        &rig.sock(),
        json!({"head": "syn0", "dir": "in", "placement": {"after": "count:1"}, "count": 500, "snaplen": 50}),
    );
    rig.wait_taps(1);
    assert_eq!(
        rig.reg.chain_names("syn0", Dir::In).unwrap()[0],
        "count:1",
        "after count:1"
    );
    let done = Arc::new(AtomicBool::new(false));
    let head = rig.head.clone();
    let d = done.clone();
    let t = std::thread::spawn(move || {
        let mut i = 0;
        while !d.load(Ordering::Relaxed) && i < 100_000 {
            traffic(&mut w, &head, i, i + 64, Duration::from_millis(1));
            i += 64;
        }
    });
    let (bytes, res) = sess.finish();
    done.store(true, Ordering::Relaxed);
    t.join().unwrap();
    assert_eq!(res["captured"], 500, "{res}");
    assert_eq!(res["end"], "count", "{res}");
    let p = packets(&bytes);
    assert_eq!(p.len(), 500);
    let first = p[0].0;
    for (k, (n, cap, orig)) in p.iter().enumerate() {
        assert_eq!(*n, first + k as u32, "in order, none missing");
        assert_eq!(*cap, 50, "snap length");
        assert_eq!(*orig as usize, frame(*n).len(), "original length");
    }
    let file = rig.dir.join("c.pcapng");
    std::fs::write(&file, &bytes).unwrap();
    if let Some(n) = tcpdump_count(&file, "") {
        assert_eq!(n, 500, "tcpdump reads every frame");
    }
    rig.wait_taps(0);
}

#[test]
fn an_expression_capture_equals_tcpdump_on_a_full_capture() {
    let rig = Rig::new("expr");
    let expr = "udp dst port 53 or udp[8:4] & 0xff = 7";
    let mut w = rig.reg.worker().unwrap();
    let full = Session::start(&rig.sock(), json!({"head": "syn0", "dir": "in"}));
    let part = Session::start(
        &rig.sock(),
        json!({"head": "syn0", "dir": "in", "expr": expr}),
    );
    rig.wait_taps(2);
    traffic(&mut w, &rig.head, 0, 3000, Duration::from_millis(1));
    // Both taps saw the same 3000 frames: stop them after the traffic.
    let (mut full, mut part) = (full, part);
    full.stop();
    part.stop();
    let (fb, fr) = full.finish();
    let (pb, pr) = part.finish();
    assert_eq!(
        (fr["captured"].as_u64(), fr["end"].as_str()),
        (Some(3000), Some("stopped")),
        "{fr}"
    );
    let (ff, pf) = (rig.dir.join("full.pcapng"), rig.dir.join("part.pcapng"));
    std::fs::write(&ff, &fb).unwrap();
    std::fs::write(&pf, &pb).unwrap();
    let ours: Vec<u32> = packets(&pb).iter().map(|p| p.0).collect();
    assert_eq!(pr["captured"], ours.len(), "{pr}");
    assert_eq!(pr["seen"], 3000, "{pr}");
    if let Some(td) = pfil_testnet::tcpdump() {
        let kept = pfil_testnet::tcpdump_indices(td, &ff, expr);
        // tcpdump -tt names frames by time; compare counts and, frame by
        // frame, the numbers the payloads carry.
        assert_eq!(kept.len(), ours.len(), "tcpdump -r full.pcapng '{expr}'");
        assert_eq!(
            tcpdump_count(&pf, expr),
            Some(ours.len()),
            "every captured frame matches"
        );
    }
    let want: Vec<u32> = (0..3000).filter(|i| i % 3 == 0 || i & 0xff == 7).collect();
    assert_eq!(ours, want);
    rig.wait_taps(0);
}

#[test]
fn an_overrun_capture_counts_its_drops_and_the_datapath_loses_nothing() {
    let rig = Rig::new("overrun");
    let mut w = rig.reg.worker().unwrap();
    let sess = Session::start(
        &rig.sock(),
        json!({"head": "syn0", "dir": "in", "buffer": 16}),
    );
    rig.wait_taps(1);
    // 20 000 frames back to back: far more than 16 records between drains.
    traffic(&mut w, &rig.head, 0, 20_000, Duration::ZERO);
    let mut sess = sess;
    sess.stop();
    let (bytes, res) = sess.finish();
    let dropped = res["dropped"].as_u64().unwrap();
    let captured = res["captured"].as_u64().unwrap();
    assert!(dropped > 0, "{res}");
    assert_eq!(captured + dropped, 20_000, "{res}");
    let st = isb(&bytes);
    assert_eq!(st.get(&4), Some(&20_000), "isb_ifrecv");
    assert_eq!(st.get(&7), Some(&dropped), "isb_osdrop");
    assert_eq!(st.get(&8), Some(&captured), "isb_usrdeliv");
    assert_eq!(packets(&bytes).len() as u64, captured);
    let c = rig.reg.chain("syn0", Dir::In).unwrap()[0].counters;
    assert_eq!((c.packets, c.passed), (20_000, 20_000), "nothing lost");
}

#[test]
fn a_client_that_goes_away_leaves_no_tap() {
    let rig = Rig::new("gone");
    let mut sess = Session::start(&rig.sock(), json!({"head": "syn0", "dir": "in"}));
    rig.wait_taps(1);
    let mut first = String::new();
    sess.r.read_line(&mut first).unwrap();
    assert!(first.contains("capture.data"), "{first}");
    drop(sess);
    // A worker the tap has no buffer for: counted, not copied.
    traffic(
        &mut rig.reg.worker().unwrap(),
        &rig.head,
        0,
        64,
        Duration::ZERO,
    );
    rig.wait_taps(0);
    assert!(rig
        .reg
        .hooks()
        .iter()
        .all(|h| !h.name.starts_with("capture:")));
    // Bad requests are answered, and nothing is linked.
    for (p, want) in [
        (json!({"head": "nope", "dir": "in"}), "no such head"),
        (
            json!({"head": "syn0", "dir": "in", "expr": "udp prot 53"}),
            "syntax error",
        ),
        (
            json!({"head": "syn0", "dir": "in", "snaplen": 0}),
            "snaplen",
        ),
        (json!({"head": "syn0", "dir": "sideways"}), "dir"),
    ] {
        let s = Session::start(&rig.sock(), p.clone());
        let mut r = s.r;
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(
            line.contains("\"error\"") && line.contains(want),
            "{p}: {line}"
        );
    }
    assert_eq!(rig.taps(), 0);
}
