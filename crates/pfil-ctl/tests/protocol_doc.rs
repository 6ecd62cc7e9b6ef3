//! PROTOCOL.md's examples, run against a real server: every fenced block
//! tagged `ndjson` is a conversation on one connection, in document order
//! on one server; `-->` lines are sent, each `<--` line is the response
//! expected (compared as JSON values). So the document cannot drift.
//!
//! The fixture is what the document says: `pfild sink syn0 --hook count`
//! (head `syn0`, hook `count:1` appended on `in`, generation 3).
//!
//! Beyond the examples: ids are compared as written (a value comparison
//! would take `18446744073709551617` and its float for equal), and the
//! errors table and the limits table are checked against the server's
//! source and constants (every code and kind the server can send is in
//! the table; every cap is written with its value).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use pfil::{Dir, Dirs, PacketKind, Placement, Registry};
use pfil_ctl::{ControlConfig, Server};
use pfil_filters::{BuildCtx, Catalog};
use serde_json::Value;

const DOC: &str = include_str!("../PROTOCOL.md");
/// The sources whose error kinds the document must list.
const SOURCES: &[(&str, &str)] = &[
    ("rpc.rs", include_str!("../src/rpc.rs")),
    ("methods.rs", include_str!("../src/methods.rs")),
    ("server/mod.rs", include_str!("../src/server/mod.rs")),
    ("server/peer.rs", include_str!("../src/server/peer.rs")),
    ("server/dir.rs", include_str!("../src/server/dir.rs")),
    ("capture/mod.rs", include_str!("../src/capture/mod.rs")),
    (
        "capture/session.rs",
        include_str!("../src/capture/session.rs"),
    ),
    ("trace.rs", include_str!("../src/trace.rs")),
    ("xdpmaps.rs", include_str!("../src/xdpmaps.rs")),
];

/// The `id` of a JSON-RPC line as written (`None`: no id member).
fn raw_id(line: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Id<'a> {
        #[serde(borrow, default)]
        id: Option<&'a serde_json::value::RawValue>,
    }
    let has = serde_json::from_str::<serde_json::Map<String, Value>>(line)
        .map_or(true, |m| m.contains_key("id"));
    let id: Id<'_> = serde_json::from_str(line).ok()?;
    has.then(|| id.id.map_or("null".to_owned(), |r| r.get().to_owned()))
}

/// The section of the document under `## {title}`.
fn section(title: &str) -> &'static str {
    let start = DOC
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("PROTOCOL.md has no section {title}"));
    let rest = &DOC[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

/// The error codes (`pub const NAME: i64 = CODE;` in `mod code`) and the
/// kinds the server's sources send: the string after a `code::NAME,` and
/// the `=> "kind"` arms of the error mappings.
fn source_codes_and_kinds() -> (Vec<i64>, Vec<String>) {
    let mut codes = Vec::new();
    let mut kinds = vec!["invalid_params".to_owned(), "invalid_request".to_owned()];
    for (name, src) in SOURCES {
        for l in src.lines() {
            let l = l.trim();
            if let Some(rest) = l.strip_prefix("pub const ") {
                if let Some((_, v)) = rest.split_once(": i64 = ") {
                    codes.push(v.trim_end_matches(';').parse().unwrap());
                }
            }
        }
        let mut at = 0;
        while let Some(i) = src[at..].find("code::") {
            at += i + 6;
            let rest = &src[at..];
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                .collect();
            let after = rest[ident.len()..].trim_start();
            if ident.is_empty() || !after.starts_with(',') {
                continue;
            }
            let after = after[1..].trim_start();
            if let Some(lit) = after.strip_prefix('"') {
                let k = &lit[..lit.find('"').unwrap()];
                kinds.push(k.to_owned());
            }
        }
        if *name == "rpc.rs" {
            for l in src.lines() {
                if let Some((_, k)) = l.split_once("=> \"") {
                    if let Some(k) = k.strip_suffix("\",") {
                        kinds.push(k.to_owned());
                    }
                }
            }
        }
    }
    kinds.sort();
    kinds.dedup();
    (codes, kinds)
}

#[test]
fn the_errors_table_lists_every_code_and_kind_the_server_sends() {
    let table = section("Errors");
    let (codes, kinds) = source_codes_and_kinds();
    assert!(codes.len() >= 12, "codes found: {codes:?}");
    assert!(kinds.len() >= 20, "kinds found: {kinds:?}");
    let mut missing = Vec::new();
    for c in codes {
        if !table.contains(&format!("\n| {c} |")) {
            missing.push(format!("code {c}"));
        }
    }
    for k in kinds {
        if !table.contains(&format!("`{k}`")) {
            missing.push(format!("kind `{k}`"));
        }
    }
    assert!(
        missing.is_empty(),
        "PROTOCOL.md's errors table lacks {}",
        missing.join(", ")
    );
}

#[test]
fn the_limits_table_says_the_caps_of_the_server() {
    use pfil_ctl::capture as c;
    use pfil_ctl::rpc;
    let limits = section("Limits");
    let capture = section("Methods");
    let read_slots = pfil_ctl::DEFAULT_MAX_CONNECTIONS - pfil_ctl::DEFAULT_MAX_CONNECTIONS / 4;
    for (what, text) in [
        ("request line", format!("{} MiB", pfil_ctl::DEFAULT_MAX_REQUEST >> 20)),
        ("connections", format!("| {} (`max_connections`)", pfil_ctl::DEFAULT_MAX_CONNECTIONS)),
        ("read-only connections", format!("| {read_slots}: `max_connections` less a quarter")),
        ("echo", format!("{} characters per quoted name or value, {} bytes per message", rpc::ECHO_MAX, rpc::MESSAGE_MAX)),
        ("seconds", format!("| {} (a year)", c::MAX_SECONDS)),
        ("buffer", format!("{} to {} records per worker (fewer than {}: {}), at most {} MiB per worker as `buffer` x (`snaplen` + {} bytes)", c::MIN_BUFFER, c::MAX_BUFFER, c::MIN_BUFFER, c::MIN_BUFFER, c::MAX_TAP_BYTES >> 20, c::RECORD_OVERHEAD)),
        ("one capture", format!("| memory of one capture, all workers | {} MiB |", c::MAX_TAP_BYTES >> 20)),
        ("all captures", format!("| memory of all captures at once | {} GiB |", c::MAX_ALL_TAPS_BYTES >> 30)),
    ] {
        assert!(limits.contains(&text), "Limits: {what}: PROTOCOL.md should say {text:?}");
    }
    for text in [
        format!(
            "`buffer` (records per worker buffer, default {}; {} to\n{}",
            c::DEFAULT_BUFFER,
            c::MIN_BUFFER,
            c::MAX_BUFFER
        ),
        format!("with\nup to {} records", c::FIRST_RECORDS),
        format!("at most {}", c::MAX_SECONDS),
    ] {
        assert!(
            capture.contains(&text),
            "capture: PROTOCOL.md should say {text:?}"
        );
    }
}

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
                // Ids as written: a value comparison would take an id and
                // its rounding to a float for equal.
                let (gi, wi) = (raw_id(&got), raw_id(want));
                if g != wv || gi != wi {
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
