//! The `bpf_conformance` suite (tests/conformance/*.data, see its
//! README.md) on the engine: each program is assembled, loaded (verified)
//! and run over its memory on the interpreter and (on x86-64) the JIT;
//! r0 must be the listed result on both.

use std::path::Path;

use pfil_ebpf::asm::assemble;
use pfil_ebpf::{Env, Helpers, LoadOptions, Program, Signature};

/// Files skipped, each with its reason.
const SKIP: &[(&str, &str)] = &[(
    "callx.data",
    "indirect calls (callx, `call %r2`) are not supported: the kernel has no such instruction for XDP programs",
)];

/// A parsed test file.
struct Case {
    asm: String,
    mem: Vec<u8>,
    result: Option<u64>,
    error: bool,
}

fn parse(text: &str) -> Case {
    let mut case = Case {
        asm: String::new(),
        mem: Vec::new(),
        result: None,
        error: false,
    };
    let mut section = "";
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- ") {
            section = match name.trim() {
                "asm" => "asm",
                "mem" => "mem",
                "result" => "result",
                "error" => {
                    case.error = true;
                    "error"
                }
                _ => "other",
            };
            continue;
        }
        let body = line.split('#').next().unwrap_or("").trim();
        match section {
            "asm" => {
                case.asm.push_str(line);
                case.asm.push('\n');
            }
            "mem" => case.mem.extend(
                body.split_whitespace()
                    .map(|b| u8::from_str_radix(b, 16).expect("mem byte")),
            ),
            "result" if !body.is_empty() => {
                let v = match body.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16),
                    None => body.parse(),
                };
                case.result = Some(v.expect("result"));
            }
            _ => {}
        }
    }
    case
}

/// Helper 5 of the suite's plugins (ubpf's "unwind"): returns r1, and
/// stops the program when r1 is 0 (no test exercises the stop).
unsafe extern "C" fn unwind(r1: u64, _: u64, _: u64, _: u64, _: u64, env: *mut Env) -> u64 {
    if r1 == 0 {
        // SAFETY: the engine passes the live Env (HelperFn contract).
        unsafe { &mut *env }.fault(pfil_ebpf::Fault::Helper {
            pc: 0,
            reason: "unwind",
        });
    }
    r1
}

#[test]
fn conformance_suite_on_the_interpreter_and_the_jit() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "data"));
    files.sort();
    assert!(files.len() >= 300, "suite missing: {} files", files.len());
    let mut helpers = Helpers::new();
    helpers.insert(5, unwind, Signature { args: 1 });
    let mut opts = LoadOptions::default();
    // The suite checks the ISA's defined results for a zero divisor and
    // out-of-range shift immediates, which the kernel refuses at load.
    opts.kernel_rules = false;
    opts.entry_args = 2;
    opts.xdp_ctx = false;
    let (mut passed, mut failures) = (0, Vec::new());
    for path in &files {
        let name = path.file_name().unwrap().to_str().unwrap();
        if SKIP.iter().any(|(s, _)| *s == name) {
            continue;
        }
        let case = parse(&std::fs::read_to_string(path).unwrap());
        let insns = match assemble(&case.asm) {
            Ok(i) => i,
            Err(e) => {
                failures.push(format!("{name}: does not assemble: {e}"));
                continue;
            }
        };
        let outcome = Program::load(insns, &[], &helpers, &opts)
            .map_err(|e| e.to_string())
            .and_then(|p| {
                // SAFETY: no extra regions.
                let mut env = unsafe { Env::new(Vec::new(), core::ptr::null_mut()) };
                let mut mem = case.mem.clone();
                let interpreted = p.run_mem_interpreted(&mut env, &mut mem);
                if cfg!(target_arch = "x86_64") {
                    assert!(p.is_jitted());
                    mem.copy_from_slice(&case.mem);
                    let jitted = p.run_mem(&mut env, &mut mem);
                    if jitted != interpreted {
                        return Err(format!(
                            "JIT gives {jitted:x?}, interpreter {interpreted:x?}"
                        ));
                    }
                }
                interpreted.map_err(|f| f.to_string())
            });
        match (outcome, case.result, case.error) {
            (Err(_), _, true) => passed += 1,
            (Ok(r0), Some(want), false) if r0 == want => passed += 1,
            (got, want, err) => failures.push(format!(
                "{name}: got {got:x?}, want {want:x?} (error expected: {err})"
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    assert_eq!(passed + SKIP.len(), files.len());
}
