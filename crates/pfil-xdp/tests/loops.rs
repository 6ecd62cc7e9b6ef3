//! `bpf_loop` with callbacks (tests/c/loops.c), run as the kernel's
//! verifier inlines it: iterations and the callback's stop from the
//! frame's bytes, flags other than 0, more than 2^23 iterations, two
//! callbacks in one program. Against the kernel as root (every frame's
//! action, bytes and maps); on pfil's two engines everywhere, against
//! values worked out here.

mod clang;
mod oracle;

use oracle::frames::{self, MAC_A, MAC_B};
use oracle::Pair;
use pfil_xdp::helpers::{XDP_DROP, XDP_PASS};
use pfil_xdp::{Engine, Object, XdpProgram};

const PROGRAMS: [&str; 4] = ["loop_sum", "loop_flags", "loop_big", "loop_twice"];

/// A UDP frame whose first two bytes (the destination MAC's) are `b`.
fn frame(b: [u8; 2]) -> Vec<u8> {
    let mut dst = MAC_A;
    dst[..2].copy_from_slice(&b);
    let mut f = frames::eth(dst, MAC_B, 0, 0x0800);
    f.extend(frames::ipv4(
        frames::V4_A,
        frames::V4_B,
        17,
        &frames::l4(17, 1, 2),
    ));
    f
}

fn firsts() -> impl Iterator<Item = [u8; 2]> {
    (0u8..16).flat_map(|a| [0u8, 3, 15, 0x20].map(|b| [a, b]))
}

/// What `program` leaves in `out` (bpf_loop's return, the sum, the
/// calls) and returns, for a frame starting with `b`.
fn expected(program: &str, b: [u8; 2]) -> ([u64; 3], u64) {
    // `add`'s loop of n iterations stopping at `stop`: (calls, sum).
    let add = |n: u64, stop: u64, sum0: u64| {
        let calls = n.min(stop + 1);
        (calls, sum0 + (0..calls).map(|i| 3 * i + 1).sum::<u64>())
    };
    let (ret, sum, calls) = match program {
        "loop_sum" => {
            let (c, s) = add(u64::from(b[0] & 15), u64::from(b[1] & 15), 0);
            (c, s, c)
        }
        "loop_flags" if b[0] & 1 == 1 => ((-22i64) as u64, 0, 0),
        "loop_flags" => (4, 22, 4),
        // The kernel's inlined loop: -E2BIG in 32 bits.
        "loop_big" if b[0] & 1 == 1 => (0xffff_fff9, 0, 0),
        "loop_big" => (2, 5, 2),
        "loop_twice" => {
            let (c1, s1) = add(u64::from(b[0] & 7), 100, 0);
            let (c2, s2) = add(3, 100, s1);
            let n3 = u64::from(b[0] & 3);
            (
                c1 + c2 + n3,
                s2 + (0..n3).map(|i| i * i).sum::<u64>(),
                c1 + c2,
            )
        }
        p => panic!("{p}"),
    };
    (
        [ret, sum, calls],
        if sum & 1 == 1 { XDP_DROP } else { XDP_PASS },
    )
}

fn object() -> Option<Vec<u8>> {
    clang::compile("loops").map(|p| std::fs::read(p).unwrap())
}

#[test]
fn bpf_loop_runs_its_callbacks_on_both_engines() {
    let Some(bytes) = object() else { return };
    let obj = Object::parse(&bytes).unwrap();
    for engine in [Engine::Jit, Engine::Interpreter] {
        for program in PROGRAMS {
            let p = XdpProgram::load_on(&obj, Some(program), 1, &[], engine).unwrap();
            let out = p.map("out").unwrap();
            for b in firsts() {
                let mut f = frame(b);
                let len = f.len();
                let r = p.run(0, &mut f, 0, len, 1, 0).unwrap();
                let got: Vec<u64> = (0u32..3)
                    .map(|k| {
                        let v = out.lookup(&k.to_le_bytes()).unwrap().unwrap();
                        u64::from_le_bytes(v[..8].try_into().unwrap())
                    })
                    .collect();
                let (want, action) = expected(program, b);
                assert_eq!(
                    (got.as_slice(), r.action),
                    (&want[..], action),
                    "{engine:?} {program} {b:?}"
                );
            }
        }
    }
}

#[test]
fn bpf_loop_agrees_with_the_kernel() {
    if !oracle::kernel_here() {
        return;
    }
    let Some(bytes) = object() else { return };
    oracle::pin_cpu();
    for program in PROGRAMS {
        let mut p = Pair::new(&bytes, Some(program));
        for b in firsts() {
            let what = format!("{program} {b:?}");
            p.run(&frame(b), &what);
            p.same_maps(&what);
        }
        for (what, f) in frames::generated() {
            p.run(&f, &what);
        }
        p.same_maps(program);
        eprintln!("{program}: {} frames agree", p.runs);
    }
}

#[test]
fn callbacks_other_than_bpf_loops_are_refused_by_name() {
    let Some(bytes) = object() else { return };
    let obj = Object::parse(&bytes).unwrap();
    let e = obj.program(Some("loop_each")).unwrap_err().to_string();
    assert!(
        e.contains("not bpf_loop's callback") && e.contains("bpf_for_each_map_elem"),
        "{e}"
    );
    // Its neighbours run.
    XdpProgram::load(&obj, Some("loop_sum"), 1, &[]).unwrap();
}

#[test]
fn a_callback_returning_other_than_0_or_1_is_refused_as_by_the_kernel() {
    let Some(bytes) = object() else { return };
    let obj = Object::parse(&bytes).unwrap();
    let e = XdpProgram::load(&obj, Some("loop_bad_ret"), 1, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("a bpf_loop callback returns 0 or 1"), "{e}");
    if pfil_xdp::kernel::available() {
        let p = obj.program(Some("loop_bad_ret")).unwrap();
        let e = pfil_xdp::kernel::KernelProgram::load(&obj, p).unwrap_err();
        assert!(e.to_string().contains("R0"), "{e}");
    }
}
