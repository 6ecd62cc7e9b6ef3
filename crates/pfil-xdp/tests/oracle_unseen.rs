//! Programs written apart from pfil's own tests (`tests/c/unseen/`, by
//! testers given only what pfil supports, in two rounds): each run by the
//! kernel, pfil's JIT and its interpreter on generated traffic, the
//! vendored captures and its own frames (`NAME.hex`), with its map
//! entries (`NAME.maps`, the `xdp` hook's syntax), compiled with
//! `NAME.cflags`; the program named in `NAME.program` where the object
//! has several. Needs root; under CI it must run. Those of `refuse/` use
//! what pfil does not run: each is refused, naming it.
//!
//! Found, and fixed, with them: `bpf_csum_diff`'s 16-bit result, LPM
//! prefixes past the key, empty DEVMAP slots, `bpf_redirect_map`'s
//! flags, the metadata and headroom limits, a HASH update's new element,
//! the LRU lists' evictions (`xdp_load_bytes`, written as one pfil would
//! refuse, runs since pfil has `bpf_xdp_get_buff_len`, `_load_bytes` and
//! `_store_bytes`); in the second round, an action is r0's low 32 bits
//! (`weird_ret`), a `void` subprogram's exit (`void_sub`), only the
//! `.text` functions a program calls are linked (`split_text`), the
//! kernel's verifier log outgrowing its buffer (`loop_budget`),
//! `bpf_trace_printk`'s formats and returns (`printk_ret`); and
//! load-acquire/store-release (`acq_rel`) and `may_goto` (`may_goto`),
//! refused at first, run since; `devmap_hash`, written to be refused,
//! runs since pfil has that map; in a third round, `rodata_dead_helper`
//! and `rodata_dead_uninit` (code a frozen `.rodata` setting rules out),
//! since pfil folds frozen settings as the kernel does; `cond_init` (a
//! register set and read under one condition), refused at first, runs
//! since pfil's verifier follows the paths that set different registers
//! apart; `tail_call` and `bpf_loop`, written to be refused, run since
//! pfil has tail calls and `bpf_loop`; and `ringbuf`, since pfil has
//! ring buffers (the oracle compares their records too). `lru_percpu`
//! (lru_big's workload on LRU_PERCPU_HASH maps) runs since pfil has that
//! map; its updates of present keys in place evict other entries than
//! an LRU_HASH's would, frame for frame against the kernel. A fourth
//! round imitated real projects (`katran_lb`, `cilium_pipe`,
//! `flow_bypass`, `tut_rewrite`, `synflood`, `portknock`, `dns_block`,
//! `srv6_end`, `gre_encap`, `pkt_sampler`): `pkt_sampler` and its
//! minimal form `rb_uninit` found a ring buffer record's unwritten bytes
//! were an earlier record's, where the kernel's are its ring's memory
//! (zero, or older records' bytes and headers where positions wrapped),
//! which pfil's ring now keeps as the kernel's.

mod clang;
mod oracle;

use std::path::{Path, PathBuf};

use pfil_xdp::config::XdpConfig;
use pfil_xdp::oracle::{hex, Oracle};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/unseen")
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[test]
fn programs_written_apart_run_as_the_kernel_runs_them() {
    if !oracle::kernel_here() {
        return;
    }
    let cpu = oracle::pin_cpu();
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "c").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 39, "{names:?}");
    let mut traffic = oracle::frames::generated();
    traffic.extend(oracle::frames::captures(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/captures"),
        500,
    ));
    for name in &names {
        let d = dir();
        let flags = read(&d.join(format!("{name}.cflags"))).unwrap_or_default();
        let flags: Vec<&str> = flags.split_whitespace().collect();
        let Some(obj) = clang::compile_with(&d, name, &flags) else {
            return;
        };
        let program = read(&d.join(format!("{name}.program"))).map(|p| p.trim().to_owned());
        let maps = read(&d.join(format!("{name}.maps"))).unwrap_or_default();
        let cfg = XdpConfig::parse(&format!("@{}\n{maps}", obj.display()))
            .unwrap_or_else(|e| panic!("{name}.maps: {e}"));
        let mut o = match Oracle::load(&std::fs::read(&obj).unwrap(), program.as_deref(), cpu) {
            Ok(o) => o,
            Err(e)
                if e.contains("cannot use helper bpf_xdp_adjust_meta#54")
                    && !oracle::kernel_adjusts_meta(name) =>
            {
                continue;
            }
            Err(e) => panic!("{name}: {e}"),
        };
        for e in &cfg.entries {
            o.set(e).unwrap_or_else(|err| panic!("{name}: {err}"));
        }
        let mut frames = traffic.clone();
        let own = read(&d.join(format!("{name}.hex"))).unwrap_or_default();
        for (n, line) in own.lines().enumerate() {
            let h: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            if h.is_empty() || h.starts_with('#') {
                continue;
            }
            let f = (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect();
            frames.push((format!("{name}.hex:{}", n + 1), f));
        }
        let mut actions = [0usize; 5];
        for (what, f) in &frames {
            match o.run(f) {
                Ok(Some(a)) => actions[(a.action as usize).min(4)] += 1,
                Ok(None) => {}
                Err(m) => panic!("{name}: {what}: {m}\n  frame  {}", hex(f)),
            }
        }
        o.compare_maps().unwrap_or_else(|m| panic!("{name}: {m}"));
        eprintln!(
            "{name}: {} frames agree (aborted/drop/pass/tx/redirect {actions:?})",
            o.runs()
        );
    }
}

#[test]
fn what_pfil_does_not_run_is_refused_by_name() {
    let d = dir().join("refuse");
    let (name, why) = ("fib_lookup", "helper 69 (bpf_fib_lookup)");
    let flags = read(&d.join(format!("{name}.cflags"))).unwrap_or_default();
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let Some(obj) = clang::compile_with(&d, name, &flags) else {
        return;
    };
    let bytes = std::fs::read(&obj).unwrap();
    let err = pfil_xdp::Object::parse(&bytes)
        .and_then(|o| pfil_xdp::XdpProgram::load(&o, None, 1, &[]).map(|_| ()))
        .expect_err(name)
        .to_string();
    assert!(err.contains(why), "{name}: {err}");
}
