//! PROTOCOL.md's examples, run against a real server: every fenced block
//! tagged `ndjson` is a conversation on one connection, in document order
//! on one server; `-->` lines are sent, each `<--` line is the response
//! expected (compared as JSON values). So the document cannot drift.
//!
//! The fixture is what the document says: `pfild sink syn0 --hook count`
//! (head `syn0`, hook `count:1` appended on `in`, generation 3).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use pfil::{Dir, Dirs, PacketKind, Placement, Registry};
use pfil_ctl::{ControlConfig, Server};
use pfil_filters::{BuildCtx, Catalog};
use serde_json::Value;

const DOC: &str = include_str!("../PROTOCOL.md");

/// The `ndjson` blocks: per block, the (request, expected responses) pairs.
fn blocks() -> Vec<Vec<(String, Vec<String>)>> {
    let mut out = Vec::new();
    let mut lines = DOC.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "```ndjson" {
            continue;
        }
        let mut block: Vec<(String, Vec<String>)> = Vec::new();
        for l in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            if let Some(req) = l.strip_prefix("--> ") {
                block.push((req.to_owned(), Vec::new()));
            } else if let Some(resp) = l.strip_prefix("<-- ") {
                block
                    .last_mut()
                    .expect("a response follows a request")
                    .1
                    .push(resp.to_owned());
            } else {
                assert!(
                    l.trim().is_empty(),
                    "unexpected line in an ndjson block: {l}"
                );
            }
        }
        out.push(block);
    }
    out
}

#[test]
fn the_protocol_document_examples_run() {
    let reg = Registry::new();
    reg.register_head("syn0", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    let catalog = Catalog::builtin();
    let f = catalog
        .create("count", &BuildCtx::new(reg.max_workers()))
        .unwrap();
    reg.add_hook_shared("count:1", PacketKind::Ethernet, Dirs::BOTH, f)
        .unwrap();
    reg.link("syn0", Dir::In, "count:1", Placement::Append)
        .unwrap();
    assert_eq!(reg.generation(), 3, "the fixture PROTOCOL.md describes");
    let dir = std::env::temp_dir().join(format!("pfil-ctl-doc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let server = Server::start(
        reg,
        Arc::new(catalog),
        ControlConfig::new("pfild").path(dir.join("ctl").join("pfild.sock")),
    )
    .unwrap();
    let print = std::env::var_os("PROTOCOL_DOC_PRINT").is_some();
    // PROTOCOL_DOC_UPDATE=1: write the server's responses into the
    // document instead of comparing (review them with `git diff`).
    let update = std::env::var_os("PROTOCOL_DOC_UPDATE").is_some();
    let mut said: Vec<String> = Vec::new();
    let blocks = blocks();
    assert!(
        blocks.len() >= 9,
        "PROTOCOL.md has {} example blocks",
        blocks.len()
    );
    let mut failures = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let s = UnixStream::connect(server.path()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut w = s;
        for (req, want) in block {
            w.write_all(format!("{req}\n").as_bytes()).unwrap();
            for want in want {
                let mut got = String::new();
                r.read_line(&mut got).unwrap();
                let g: Value = serde_json::from_str(&got)
                    .unwrap_or_else(|e| panic!("block {i}: bad response {got:?}: {e}"));
                let wv: Value = serde_json::from_str(want)
                    .unwrap_or_else(|e| panic!("block {i}: PROTOCOL.md's `<-- {want}`: {e}"));
                if print {
                    println!("--> {req}\n<-- {}", got.trim_end());
                }
                said.push(got.trim_end().to_owned());
                if g != wv {
                    failures.push(format!(
                        "block {i}: for\n--> {req}\nthe document says\n<-- {want}\nthe server says\n<-- {}",
                        got.trim_end()
                    ));
                }
            }
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    if update {
        let mut said = said.into_iter();
        let mut in_block = false;
        let mut doc: String = DOC
            .lines()
            .map(|l| {
                match l.trim() {
                    "```ndjson" => in_block = true,
                    "```" => in_block = false,
                    _ => {}
                }
                match (in_block, l.starts_with("<-- ")) {
                    (true, true) => format!("<-- {}\n", said.next().expect("a response per line")),
                    _ => format!("{l}\n"),
                }
            })
            .collect();
        if !DOC.ends_with('\n') {
            doc.pop();
        }
        std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/PROTOCOL.md"), doc).unwrap();
        return;
    }
    assert!(
        failures.is_empty(),
        "{}\n\n(PROTOCOL_DOC_UPDATE=1 writes the server's answers into PROTOCOL.md)",
        failures.join("\n\n")
    );
}
