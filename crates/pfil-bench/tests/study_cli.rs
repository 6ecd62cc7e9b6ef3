//! `pfil-bench study` end to end with a tiny matrix: the JSON structure,
//! ratios against the unsynchronized run of the same configuration, the
//! ministat text, the SVG, and errors for bad flags. No timing assertions:
//! runs are a few milliseconds and the numbers are whatever they are.

use std::process::{Command, Output};

use serde_json::Value;

const OURS: &str = env!("CARGO_BIN_EXE_pfil-bench");

fn study(args: &[&str]) -> Output {
    Command::new(OURS)
        .arg("study")
        .args(args)
        .output()
        .expect("run pfil-bench")
}

fn ok_stdout(args: &[&str]) -> String {
    let out = study(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

#[test]
fn quick_json_has_every_configuration_with_ratios_to_the_limit() {
    let text = ok_stdout(&["--quick", "--json", "--ms", "2", "--runs", "3"]);
    let doc: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(doc["tool"], "pfil-bench study");
    let params = &doc["parameters"];
    assert_eq!(params["quick"], true);
    assert_eq!(params["baseline"], "unsync");
    assert_eq!(params["runs"], 3);
    assert_eq!(params["ms_per_run"], 2);
    let strategies: Vec<&str> = params["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        strategies,
        [
            "unsync",
            "epoch",
            "rwlock-pkt",
            "mutex-pkt",
            "arcswap-batch"
        ]
    );
    let threads = params["threads"].as_array().unwrap().len();
    let configs = doc["configurations"].as_array().unwrap();
    // hooks null,count x chains 1,4 x batch 32 x threads x writer off,on.
    assert_eq!(configs.len(), 2 * 2 * threads * 2 * strategies.len());
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);

    for c in configs {
        for key in ["hook", "chain", "batch", "threads", "writer", "strategy"] {
            assert!(!c[key].is_null(), "{key} missing in {c}");
        }
        let runs = c["ns_per_packet"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "3 runs, the first discarded");
        assert_eq!(c["packets"].as_array().unwrap().len(), 2);
        let mut values: Vec<f64> = runs.iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(values.iter().all(|&v| v > 0.0));
        values.sort_by(f64::total_cmp);
        let median = num(c, "median_ns_per_packet");
        // ministat's median: the upper middle value.
        assert_eq!(median, values[values.len() / 2]);
        assert_eq!(num(c, "min_ns_per_packet"), values[0]);
        assert_eq!(num(c, "max_ns_per_packet"), values[1]);
        assert!((num(c, "mpps_per_thread") - 1e3 / median).abs() < 1e-9);
        assert!(num(c, "warmup_ns_per_packet") > 0.0);

        // The limit: the unsync entry of the very same configuration.
        let limit = configs
            .iter()
            .find(|o| {
                o["strategy"] == "unsync"
                    && ["hook", "chain", "batch", "threads", "writer"]
                        .iter()
                        .all(|k| o[*k] == c[*k])
            })
            .expect("an unsync run in every configuration");
        let limit_median = num(limit, "median_ns_per_packet");
        assert_eq!(num(c, "limit_median_ns_per_packet"), limit_median);
        let ratio = num(c, "ratio_to_limit");
        assert!((ratio - median / limit_median).abs() < 1e-12, "{c}");
        if c["strategy"] == "unsync" {
            assert_eq!(ratio, 1.0);
            assert!(c["vs_baseline"].is_null());
        } else {
            let vs = &c["vs_baseline"];
            assert_eq!(vs["baseline"], "unsync");
            assert_eq!(vs["confidence"], 95.0);
            assert!(vs["significant"].is_boolean());
            let rendered = vs["ministat"].as_str().unwrap();
            assert!(
                rendered.starts_with("Difference at 95.0% confidence")
                    || rendered.starts_with("No difference proven at 95.0% confidence"),
                "{rendered}"
            );
        }
        if c["writer"] == true {
            assert!(num(c, "writer_relinks_per_s") >= 0.0);
        } else {
            assert!(c["writer_relinks_per_s"].is_null());
        }
    }
}

#[test]
fn packet_mode_other_baseline_text_and_svg() {
    let dir = std::env::temp_dir().join(format!("pfil-study-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("study.svg");
    let args = [
        "--hooks",
        "brlock,mutex",
        "--chain",
        "0,2",
        "--batch",
        "1,8",
        "--threads",
        "1",
        "--writer",
        "on",
        "--writer-hz",
        "2000",
        "--strategies",
        "epoch,unsync,mutex-batch",
        "--baseline",
        "epoch",
        "--packets",
        "2000",
        "--runs",
        "3",
        "--confidence",
        "90",
    ];
    let text = ok_stdout(&[&args[..], &["--svg", svg.to_str().unwrap()]].concat());
    // chain 0 once (hook "-") plus 2 hooks x chain 2, each for 2 batches.
    assert_eq!(text.matches("\n== hook ").count(), (1 + 2) * 2, "{text}");
    assert!(text.contains("== hook - x0, batch 1, 1 thread, writer on =="));
    assert!(
        text.contains("x epoch\n+ unsync\n* mutex-batch\n"),
        "{text}"
    );
    assert!(text.contains("90.0% confidence"));
    assert!(text.contains("== summary: median ns/packet per thread =="));
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(chart.trim_end().ends_with("</svg>"));
    assert!(chart.contains("brlock x2, batch 8, writer on"));
    assert!(chart.contains("ns/packet"));

    let report = dir.join("report.txt");
    let json = ok_stdout(&[&args[..], &["--json", "--report", report.to_str().unwrap()]].concat());
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(
        report.contains("x epoch\n+ unsync\n* mutex-batch\n"),
        "{report}"
    );
    let doc: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["parameters"]["packets_per_run"], 2000);
    assert_eq!(doc["parameters"]["strategies"][0], "epoch");
    for c in doc["configurations"].as_array().unwrap() {
        let batch = c["batch"].as_u64().unwrap();
        // Whole batches: 2000 packets rounded up.
        let expect = 2000u64.div_ceil(batch) * batch;
        assert!(c["packets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.as_u64() == Some(expect)));
        // The ratio is still to unsync, the comparison to epoch.
        assert!(c["ratio_to_limit"].as_f64().unwrap() > 0.0);
        if c["strategy"] == "epoch" {
            assert!(c["vs_baseline"].is_null());
        } else {
            assert_eq!(c["vs_baseline"]["baseline"], "epoch");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn no_limit_in_the_run_means_no_ratio() {
    let json = ok_stdout(&[
        "--hooks",
        "null",
        "--chain",
        "1",
        "--batch",
        "4",
        "--threads",
        "1",
        "--writer",
        "off",
        "--strategies",
        "epoch,arcswap-batch",
        "--baseline",
        "epoch",
        "--packets",
        "100",
        "--runs",
        "3",
        "--json",
    ]);
    let doc: Value = serde_json::from_str(&json).unwrap();
    for c in doc["configurations"].as_array().unwrap() {
        assert!(c["ratio_to_limit"].is_null());
    }
}

#[test]
fn bad_flags_are_errors_naming_the_value() {
    for (args, needle) in [
        (&["--hooks", "null,spin"][..], "spin"),
        (&["--chain", "1,four"], "four"),
        (&["--batch", "0"], "batch size 0"),
        (&["--threads", "x"], "`x`"),
        (&["--strategies", "epoch,rcu"], "rcu"),
        (&["--writer", "sometimes"], "sometimes"),
        (&["--runs", "1"], "number of runs 1"),
        (&["--confidence", "42"], "42"),
        (&["--writer-hz", "0"], "0"),
        (
            &["--strategies", "epoch", "--baseline", "unsync"],
            "--baseline unsync is not among the strategies (epoch)",
        ),
    ] {
        let out = study(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
}
