//! Compiling the tests' C programs with `clang -O2 -g -target bpf`.
#![allow(dead_code, reason = "each test binary uses part of this helper module")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The object compiled from `tests/c/NAME.c`, or `None` (with a message)
/// when clang is missing outside CI.
pub fn compile(name: &str) -> Option<PathBuf> {
    compile_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c"), name)
}

/// The object compiled from `DIR/NAME.c`.
pub fn compile_in(dir: &Path, name: &str) -> Option<PathBuf> {
    compile_with(dir, name, &[])
}

/// The object compiled from `DIR/NAME.c` with `flags` added (e.g.
/// `-mcpu=v3`).
pub fn compile_with(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bpf");
    std::fs::create_dir_all(&out_dir).expect("tmpdir");
    let out = out_dir.join(format!("{name}.o"));
    // Debian keeps <asm/types.h> under the multiarch directory, which
    // clang does not search for -target bpf.
    let multiarch = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let status = Command::new("clang")
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-c"])
        .args(flags)
        .arg(format!("-I{multiarch}"))
        .arg(dir.join(format!("{name}.c")))
        .arg("-o")
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("clang failed on {name}.c: {s}"),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "clang missing under CI: {e} (scripts/setup.sh installs it)"
            );
            eprintln!("skipped: clang not found ({e}); install clang to run this test");
            None
        }
    }
}

/// Program `name` of `obj` is refused by pfil with a reason containing
/// `why`, and by the kernel too where it is here (`kernel`).
pub fn refused_by_both(obj: &pfil_xdp::Object, name: &str, why: &str, kernel: bool) {
    let e = pfil_xdp::XdpProgram::load(obj, Some(name), 1, &[])
        .err()
        .unwrap_or_else(|| panic!("{name}: pfil loaded it"))
        .to_string();
    assert!(e.contains(why), "{name}: {e}");
    if kernel {
        let p = obj.program(Some(name)).unwrap();
        assert!(
            pfil_xdp::kernel::KernelProgram::load(obj, p).is_err(),
            "{name}: the kernel loads it"
        );
    }
}
