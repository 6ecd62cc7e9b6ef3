//! Linux is the oracle (issue 26): the same frames go through Linux's
//! conntrack (namespaces of this test's own, see [`linux`]) and through
//! the `ct` hook, one at a time, and the state of every packet (new,
//! established, related, invalid, and the reply direction) must agree,
//! except where pf-style tracking differs from Linux's by design: each
//! such difference is in [`ALLOWED`], keyed by the kind of packet, with
//! its reason (the `ct` module's docs list the same).
//!
//! Frames: the generated cases of [`cases`] (IPv4 and IPv6) and real
//! captures: `tests/data/ct-oracle/*.pcap` (a few of tcpdump's test
//! captures, BSD licence beside them) and every capture of the directory
//! `$PFIL_CT_CAPTURES` (e.g. tcpdump's `tests/`; see
//! scripts/replay-corpus.sh), each rewritten to the test's addresses
//! (frames::Rewriter), at most [`FRAMES_PER_CAPTURE`] frames a capture
//! and [`CAPTURE_BUDGET`] for all of them (`PFIL_CT_CAPTURE_SECS`: another).
//!
//! A packet's kind for the allow-list is found from the frames as a
//! reader of the capture sees them ([`kinds`]: the test's own
//! bookkeeping of each TCP direction: data sent, acknowledged, the
//! window advertised, ISNs), so a documented difference is recognised in
//! a capture it was not written for: a segment before any answer, an ACK
//! (or a SACK block) of data the capture never showed, a segment below
//! what its receiver acknowledged or past the window it advertised, a
//! RST not at its sender's next sequence, a SYN with a new ISN, a flow
//! whose first answer was a RST or not a SYN-ACK, flags pf and Linux
//! judge apart, an echo reply of another code than its request's. In a capture, once a packet of a flow
//! differed by design, the flow's later packets are not compared (each
//! tracker goes on from its own state; counted apart).
//!
//! `PFIL_CT_ORACLE_DUMP=DIR` writes each capture's frames as sent to
//! `DIR` (frame `#i` of a message is stamped `i + 1` seconds);
//! `PFIL_CT_ORACLE_TRACE=1` prints every packet's kind and both states.
//!
//! Needs root (skipped with a message otherwise; under `CI=true` a skip
//! is a failure), `nft` and `conntrack` (scripts/setup.sh).

mod allowed;
mod cases;
mod frames;
mod kinds;
mod linux;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use pfil::{CtState, Ctx, Dir, Filter, Packet};
use pfil_filters::ct::Ct;

use allowed::{allowed, KNOCK_ON};
use kinds::{kind, Ways};
use linux::{Oracle, Seen};

/// Most frames taken from one capture.
const FRAMES_PER_CAPTURE: usize = 400;
/// Most time spent on captures (the generated cases always run);
/// `PFIL_CT_CAPTURE_SECS` sets another (a whole corpus takes longer).
const CAPTURE_BUDGET: Duration = Duration::from_secs(90);

fn capture_budget() -> Duration {
    std::env::var("PFIL_CT_CAPTURE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(CAPTURE_BUDGET, Duration::from_secs)
}

/// A state as both trackers can say it: `(state, reply)`, the direction
/// left out for invalid and untracked packets.
type State = (&'static str, bool);

fn linux_state(s: Seen) -> Option<State> {
    Some(match s {
        Seen::Tag(1) => ("new", false),
        Seen::Tag(7) => ("new", true),
        Seen::Tag(2) => ("established", false),
        Seen::Tag(3) => ("established", true),
        Seen::Tag(4) => ("related", false),
        Seen::Tag(5) => ("related", true),
        Seen::Tag(6) => ("invalid", false),
        Seen::Tag(8) => ("untracked", false),
        Seen::Tag(_) | Seen::Lost => return None,
    })
}

fn pfil_state((s, reply): (CtState, bool)) -> State {
    match s {
        CtState::New => ("new", reply),
        CtState::Established => ("established", reply),
        CtState::Related => ("related", reply),
        CtState::Invalid => ("invalid", false),
        CtState::Untracked => ("untracked", false),
    }
}

/// A frame Linux lost that carries IPv4 options.
const LOST_OPTIONS: &str = "a frame with IPv4 options Linux's IP layer drops (it cannot parse \
     them) after conntrack saw it and before the chain that tags it: not compared";

/// An IPv4 frame whose header carries options.
fn ipv4_options(f: &[u8]) -> bool {
    f.get(12..15)
        .is_some_and(|b| b[0] == 0x08 && b[1] == 0x00 && b[2] & 0x0f > 5)
}

/// What one case (or capture) gave.
#[derive(Default)]
struct Tally {
    frames: usize,
    agree: usize,
    allowed: BTreeMap<&'static str, usize>,
    lost: usize,
    differ: Vec<String>,
}

fn run_case(oracle: &Oracle, loose: bool, name: &str, frames: &[Vec<u8>], t: &mut Tally) {
    oracle.flush();
    let ct = Ct::from_config(if loose { "tcp loose" } else { "" }, 1).expect("a ct config");
    let mode = if loose { "loose" } else { "strict" };
    let ctx = Ctx::new("oracle", Dir::In, 0);
    let mut ways = Ways::default();
    for (i, f) in frames.iter().enumerate() {
        let kind = kind(f, &mut ways);
        let seen = oracle.see(f);
        let mut g = f.clone();
        let mut batch = [Packet::new(&mut g)];
        ct.filter_batch(&mut batch, &ctx);
        let ours = pfil_state(batch[0].ct());
        t.frames += 1;
        if std::env::var_os("PFIL_CT_ORACLE_TRACE").is_some() {
            eprintln!("{mode} {name} #{i} ({kind}): Linux {seen:?}, ct {ours:?}");
        }
        let Some(theirs) = linux_state(seen) else {
            if name.starts_with("capture:") && ipv4_options(f) {
                // Linux's IP layer drops a frame whose options it cannot
                // parse after conntrack saw it, before the chain that
                // tags it: not comparable, nor is its flow after it.
                *t.allowed.entry(LOST_OPTIONS).or_default() += 1;
                if let Some((w, b)) = Ways::of(f) {
                    ways.diverged.insert(w.min(b));
                }
                continue;
            }
            t.lost += 1;
            t.differ.push(format!(
                "{mode} {name} #{i}: Linux {seen:?} (lost or untagged), ct {ours:?}"
            ));
            continue;
        };
        let flow = Ways::of(f).map(|(w, b)| w.min(b));
        let diverged = flow.as_ref().is_some_and(|w| ways.diverged.contains(w));
        if theirs == ours {
            t.agree += 1;
        } else if let Some(why) = allowed(loose, name, i, kind, theirs, ours) {
            *t.allowed.entry(why).or_default() += 1;
            if let Some(w) = flow {
                ways.diverged.insert(w);
            }
        } else if diverged && name.starts_with("capture:") {
            // The two trackers' states of this flow parted by design at
            // an earlier packet: what they say after is not comparable.
            *t.allowed.entry(KNOCK_ON).or_default() += 1;
        } else {
            t.differ.push(format!(
                "{mode} {name} #{i} ({kind}): Linux {theirs:?}, ct {ours:?}"
            ));
        }
    }
}

/// The capture files to replay: the vendored ones and `$PFIL_CT_CAPTURES`.
fn captures() -> Vec<std::path::PathBuf> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ct-oracle");
    let mut dirs = vec![data.join("scenarios"), data];
    if let Some(d) = std::env::var_os("PFIL_CT_CAPTURES") {
        dirs.push(d.into());
    }
    let mut files = Vec::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut v: Vec<_> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("pcap" | "pcapng")
                )
            })
            .collect();
        v.sort();
        files.extend(v);
    }
    files
}

/// A capture's frames the oracle can use, rewritten; `None` if it is not
/// an Ethernet capture libpcap reads.
fn capture_frames(path: &Path) -> Option<Vec<Vec<u8>>> {
    let mut cap = pcap::Capture::from_file(path).ok()?;
    if cap.get_datalink() != pcap::Linktype::ETHERNET {
        return None;
    }
    let mut rw = frames::Rewriter::default();
    let mut out = Vec::new();
    while out.len() < FRAMES_PER_CAPTURE {
        match cap.next_packet() {
            Ok(p) => {
                if let Some(f) = rw.rewrite(p.data, p.header.len as usize) {
                    out.push(f);
                }
            }
            Err(_) => break,
        }
    }
    Some(out)
}

#[test]
fn linux_conntrack_and_the_ct_hook_agree_on_every_packet() {
    if !pfil_testnet::require_root("linux_conntrack_and_the_ct_hook_agree_on_every_packet") {
        return;
    }
    for tool in ["nft", "conntrack"] {
        if std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(
                !pfil_testnet::under_ci(),
                "{tool} is missing under CI: scripts/setup.sh installs it"
            );
            eprintln!("SKIP: no {tool} (scripts/setup.sh installs it)");
            return;
        }
    }
    let oracle = Oracle::new();
    let files = captures();
    let mut loaded = Vec::new();
    let mut skipped = 0;
    for path in &files {
        let name = format!(
            "capture:{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        match capture_frames(path) {
            Some(f) if !f.is_empty() => {
                if let Some(d) = std::env::var_os("PFIL_CT_ORACLE_DUMP") {
                    // The frames as sent (frame i stamped i + 1 s), to read
                    // a disagreement with `tcpdump -r`.
                    std::fs::create_dir_all(&d).expect("PFIL_CT_ORACLE_DUMP: a directory");
                    let out = Path::new(&d).join(path.file_name().unwrap_or_default());
                    pfil_testnet::write_pcap(&out.with_extension("pcap"), 1, &f);
                }
                loaded.push((name, f));
            }
            _ => skipped += 1,
        }
    }
    let (mut generated, mut captured) = (Tally::default(), Tally::default());
    let mut used = 0;
    let start = Instant::now();
    let budget = capture_budget();
    // Each TCP mode against Linux's: strict (pf's) with
    // nf_conntrack_tcp_loose=0, loose (flags only) with =1.
    for loose in [false, true] {
        oracle.set_tcp_loose(loose);
        for (name, frames) in cases::all() {
            run_case(&oracle, loose, &name, &frames, &mut generated);
        }
        for (name, f) in &loaded {
            if start.elapsed() > budget {
                break;
            }
            used += 1;
            run_case(&oracle, loose, name, f, &mut captured);
        }
    }
    let (e, r) = oracle.names();
    eprintln!(
        "oracle ({e}, {r}): generated: {} frames, {} agree, allowed {:?}; captures: {used} replays (both TCP modes) of {} \
         files ({skipped} unusable) in {:.1}s: {} frames, {} agree, allowed {:?}, {} lost",
        generated.frames,
        generated.agree,
        generated.allowed,
        files.len(),
        start.elapsed().as_secs_f64(),
        captured.frames,
        captured.agree,
        captured.allowed,
        captured.lost,
    );
    let mut differ = generated.differ;
    differ.extend(captured.differ);
    assert!(
        differ.is_empty(),
        "{} packets where Linux's conntrack and the ct hook disagree (not by design):\n{}",
        differ.len(),
        differ
            .iter()
            .take(200)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        generated.frames > 100
            && generated.agree == generated.frames - generated.allowed.values().sum::<usize>()
    );
}
