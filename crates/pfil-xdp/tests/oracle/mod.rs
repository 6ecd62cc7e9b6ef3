//! The kernel as the oracle ([`pfil_xdp::oracle`]) for the tests: a
//! difference panics with the frame that showed it; under CI the oracle
//! must run.

#![allow(dead_code, reason = "each test binary uses part of this helper module")]

use pfil_xdp::config::MapEntry;
use pfil_xdp::kernel;
use pfil_xdp::oracle::{hex, Oracle};
use pfil_xdp::Object;

pub use pfil_xdp::oracle::{FRAME, HEADROOM};

/// Whether the oracle can run here; under CI it must.
pub fn kernel_here() -> bool {
    if kernel::available() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the kernel oracle must run under CI (as root)"
    );
    eprintln!("skipped: the kernel oracle needs root (bpf(2))");
    false
}

/// Whether the oracle can run programs that call `bpf_xdp_adjust_meta`:
/// this kernel lets XDP programs call it ([`kernel::adjusts_meta`]; some
/// builds do not). Says so when it cannot: the tests then leave those
/// programs out (pfil runs them; the kernel cannot be asked).
pub fn kernel_adjusts_meta(what: &str) -> bool {
    if kernel::adjusts_meta() {
        return true;
    }
    let mut release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    release.truncate(release.trim_end().len());
    eprintln!(
        "not compared: {what} calls bpf_xdp_adjust_meta, which this kernel ({release}) refuses \
         to XDP programs"
    );
    false
}

thread_local! {
    /// The CPU [`pin_cpu`] pinned this thread to.
    static CPU: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Pin the calling thread to one CPU ([`pfil_xdp::oracle::pin_cpu`]).
pub fn pin_cpu() -> usize {
    let cpu = pfil_xdp::oracle::pin_cpu().expect("pin to a CPU");
    CPU.with(|c| c.set(cpu));
    cpu
}

/// One object in the kernel and in pfil (JIT and interpreter).
pub struct Pair {
    pub oracle: Oracle,
    pub obj: Object,
    pub runs: usize,
}

impl Pair {
    pub fn new(bytes: &[u8], program: Option<&str>) -> Pair {
        let oracle = Oracle::load(bytes, program, CPU.with(|c| c.get())).expect("loads");
        Pair {
            obj: oracle.obj.clone(),
            oracle,
            runs: 0,
        }
    }

    /// Set `key` in `map` everywhere; `value` is one CPU's value.
    pub fn set(&self, map: &str, key: &[u8], value: &[u8]) {
        let e = MapEntry {
            map: map.into(),
            key: key.to_vec(),
            value: value.to_vec(),
            program: None,
        };
        self.oracle.set(&e).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Set prog array `map`'s `key` to program `prog` everywhere.
    pub fn set_program(&self, map: &str, key: &[u8], prog: &str) {
        let e = MapEntry {
            map: map.into(),
            key: key.to_vec(),
            value: Vec::new(),
            program: Some(prog.into()),
        };
        self.oracle.set(&e).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Run `frame` everywhere; panic with the frame on any difference.
    /// The kernel's action (`u32::MAX` for a frame too short to run).
    pub fn run(&mut self, frame: &[u8], what: &str) -> u32 {
        match self.oracle.run(frame) {
            Ok(Some(a)) => {
                self.runs = self.oracle.runs();
                a.action
            }
            Ok(None) => u32::MAX,
            Err(e) => panic!("{what}: {e}\n  frame  {}", hex(frame)),
        }
    }

    /// Every map's contents, compared.
    pub fn same_maps(&self, what: &str) {
        if let Err(e) = self.oracle.compare_maps() {
            panic!("{what}: after {} runs: {e}", self.runs);
        }
    }
}

/// Frames to test with ([`pfil_xdp::oracle::frames`]) and captures.
pub mod frames {
    #[allow(unused_imports, reason = "each test binary uses part of them")]
    pub use pfil_xdp::oracle::frames::*;

    /// Ethernet frames of every capture in `dir`, at most `max` a file,
    /// those the kernel's test run takes (one page with headroom).
    pub fn captures(dir: &std::path::Path, max: usize) -> Vec<(String, Vec<u8>)> {
        let mut v = pfil_xdp::oracle::pcap::dir(dir, max);
        v.retain(|(_, f)| f.len() <= super::FRAME - super::HEADROOM - 64);
        v
    }
}
