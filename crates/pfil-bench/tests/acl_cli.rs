//! `pfil-bench acl` end to end on one ClassBench set and one generated
//! set, IPv4 and moved into IPv6: our classifier, linear scan and
//! rte_acl (`dpdk-test-acl`, installed by `scripts/setup.sh`) give the
//! same rule for every header, and the report says so. No timing
//! assertions.

use std::process::Command;

const OURS: &str = env!("CARGO_BIN_EXE_pfil-bench");

/// Whether dpdk-test-acl runs here. In CI it must (setup installs it);
/// elsewhere the test says it skipped.
fn have_dpdk() -> bool {
    let found = Command::new("dpdk-test-acl")
        .arg("--version")
        .output()
        .is_ok();
    assert!(
        found || std::env::var_os("CI").is_none(),
        "dpdk-test-acl is missing in CI: scripts/setup.sh installs it (dpdk)"
    );
    if !found {
        eprintln!("skipped: no dpdk-test-acl (scripts/setup.sh installs it)");
    }
    found
}

fn acl(extra: &[&str]) -> String {
    let out = Command::new(OURS)
        .args([
            "acl",
            "--sets",
            "acl1_1k,adv-cross-300",
            "--runs",
            "1",
            "--iters",
            "1",
            "--trace",
            "3000",
            "--linear-keys",
            "100",
            "--algs",
            "scalar,sse",
        ])
        .args(extra)
        .output()
        .expect("run pfil-bench acl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "pfil-bench acl {extra:?} failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Every set's every rte_acl algorithm ran and agreed, and so did ours
/// with linear scan.
fn assert_all_agree(text: &str) {
    for set in ["acl1_1k", "adv-cross-300"] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{set}: "))
                && l.contains("vs linear: 0 differ; ours (single) vs linear: 0 differ")),
            "{set}: ours against linear scan not reported agreeing:\n{text}"
        );
        for alg in ["scalar", "sse"] {
            let line = format!("{set}: rte_acl {alg} vs ours: 3000 results, 0 differ");
            assert!(text.contains(&line), "missing `{line}`:\n{text}");
        }
    }
}

#[test]
fn ipv4_and_ipv6_sets_agree_with_rte_acl_and_linear_scan() {
    if !have_dpdk() {
        return;
    }
    assert_all_agree(&acl(&[]));
    let v6 = acl(&["--ipv6"]);
    assert!(v6.contains("dpdk-test-acl --ipv6"), "{v6}");
    assert_all_agree(&v6);
}
