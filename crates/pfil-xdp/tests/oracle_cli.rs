//! The `xdp-oracle` command: an object, map entries and captures of the
//! user's choosing, checked against the kernel. Needs root; under CI it
//! must run.

mod clang;
mod oracle;

use std::process::Command;

fn oracle_cmd(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xdp-oracle"))
        .args(args)
        .output()
        .expect("xdp-oracle runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn captures() -> String {
    format!("{}/tests/captures", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn an_object_its_map_entries_and_captures_agree_with_the_kernel() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(obj) = clang::compile("oracle") else {
        return;
    };
    let config = format!(
        "xdp:@{} program route; map routes key 24 0 0 0 198 18 0 0 value 1 0 0 0; \
         map routes key 32 0 0 0 198 18 0 1 value 1 0 0 0",
        obj.display()
    );
    let (code, out) = oracle_cmd(&[&config, "--generated", "--pcap", &captures()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("program route: loaded by the kernel and by pfil"),
        "{out}"
    );
    assert!(out.contains("2 map entries set"), "{out}");
    // The routes decide drops and passes: both occur, none differs.
    assert!(
        out.contains("XDP_DROP") && out.contains("XDP_PASS"),
        "{out}"
    );
    assert!(out.contains("; 0 differ;"), "{out}");
    assert!(out.contains("maps: 5 compared, the same"), "{out}");
}

#[test]
fn a_difference_is_reported_with_its_frame() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(obj) = clang::compile("nondet") else {
        return;
    };
    let config = format!("@{}", obj.display());
    let (code, out) = oracle_cmd(&[&config, "--show", "2"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("DIFFERENCE at frame 0"), "{out}");
    assert!(
        out.contains("output bytes differ (pfil: Jit) from byte 0"),
        "{out}"
    );
    assert_eq!(out.matches("DIFFERENCE at").count(), 2, "{out}");
    // The counter agrees: the maps are compared apart from the frames.
    assert!(out.contains("maps: 1 compared, the same"), "{out}");
}

#[test]
fn bad_input_is_named() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(obj) = clang::compile("oracle") else {
        return;
    };
    let (code, out) = oracle_cmd(&[&format!(
        "@{} program route; map nope key 1 value 2",
        obj.display()
    )]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no map \"nope\""), "{out}");
    let (code, out) = oracle_cmd(&[&format!("@{}", obj.display())]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("several XDP programs"), "{out}");
    let (code, out) = oracle_cmd(&[
        &format!("@{} program route", obj.display()),
        "--pcap",
        "/nonexistent.pcap",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("/nonexistent.pcap"), "{out}");
    let (code, out) = oracle_cmd(&["--max"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--max needs a number"), "{out}");
}

/// A program the kernel refuses: the kernel's reason, and pfil's own
/// decision on the same object (here a refusal too, with its reason).
#[test]
fn a_refusal_says_what_both_sides_decide() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(obj) = clang::compile("kernel_refuses") else {
        return;
    };
    let (code, out) = oracle_cmd(&[&format!("@{} program pkt_unchecked", obj.display())]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("the kernel: bpf(PROG_LOAD)")
            && out.contains("pfil: refuses it too: ")
            && out.contains("invalid access to packet"),
        "{out}"
    );
}
