//! Registers set on some paths and read only on those (`c/cond_paths.c`):
//! loaded by pfil where the kernel loads them, with the verdicts the
//! paths give; refused by both where a taken path reads one unset. And
//! packet reads proven on some paths only, at constant and variable
//! offsets: refused exactly where the kernel refuses them (6 000
//! generated programs agreed when the test was written; it runs 600).

use pfil_xdp::{kernel, Object, XdpProgram};

mod clang;

#[test]
fn a_register_read_only_where_it_was_set_loads_as_in_the_kernel() {
    let Some(path) = clang::compile("cond_paths") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    let kernel = kernel::available();
    // (program, [(ingress ifindex, frame length, action)])
    type Runs<'a> = &'a [(u32, usize, u64)];
    let runs: [(&str, Runs); 5] = [
        ("flag_then_use", &[(0, 64, 1), (5, 64, 2)]),
        ("flag32_then_use", &[(0, 64, 1), (5, 64, 2)]),
        ("range_then_use", &[(3, 64, 2), (8, 64, 1)]),
        ("flag_from_branch", &[(3, 64, 2), (4, 64, 1)]),
        ("past_end_twice", &[(0, 64, 1), (0, 13, 1), (1, 64, 2)]),
    ];
    for (name, cases) in runs {
        let p =
            XdpProgram::load(&obj, Some(name), 1, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        for &(ifindex, len, action) in cases {
            let mut frame = [0u8; 64];
            // past_end_twice's verdict is byte 12's low bit, plus 1.
            frame[12] = u8::from(ifindex == 1);
            let got = p.run(0, &mut frame, 0, len, ifindex, 0).unwrap().action;
            assert_eq!(got, action, "{name} on ifindex {ifindex}, {len} bytes");
        }
        if kernel {
            let k = obj.program(Some(name)).unwrap();
            let r = kernel::KernelProgram::load(&obj, k);
            assert!(r.is_ok(), "{name}: the kernel refuses it: {:?}", r.err());
        }
    }
    for (name, reg) in [
        ("unset_on_a_path", "r7"),
        ("unset_other_flag", "r7"),
        ("past_other_pointer", "r5"),
    ] {
        let e = XdpProgram::load(&obj, Some(name), 1, &[])
            .err()
            .unwrap_or_else(|| panic!("{name}: pfil loaded it"))
            .to_string();
        let why = format!("reads {reg}, which a path reaching here leaves unset");
        assert!(e.contains(&why), "{name}: {e}");
        if kernel {
            let k = obj.program(Some(name)).unwrap();
            assert!(
                kernel::KernelProgram::load(&obj, k).is_err(),
                "{name}: the kernel loads it"
            );
        }
    }
}

/// A random program of flags and a register set on some paths (`r8`),
/// in BPF assembly: r6 and r7 are bytes 12 and 13 of the frame, `r5` a
/// flag, r9 an accumulator the verdict comes from; jumps go forward to
/// labels placed at random.
fn flag_program(seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let n = 6 + next(10) as usize;
    // ops[k]: the text of op k; jumps name the op they land before.
    let mut ops: Vec<String> = Vec::new();
    let mut targets: Vec<(usize, usize)> = Vec::new(); // (label, op index)
    let mut label = 10;
    let mut called = false;
    let ops_cmp = ["==", "!=", ">", ">=", "<", "<="];
    for k in 0..n {
        let mut jump = |next: &mut dyn FnMut(u64) -> u64| {
            label += 1;
            let t = k + 1 + next((n - k) as u64) as usize;
            targets.push((label, t));
            format!("{label}f")
        };
        let op = match next(11) {
            0 => format!("r5 = {};", next(2)),
            1 => {
                let c = ops_cmp[next(6) as usize];
                format!("r5 = 1; if r6 {c} {} goto 1f; r5 = 0; 1:", next(4))
            }
            2 => ["r5 &= 1;", "r5 ^= 1;", "r5 &= r7;", "r5 |= 1;"][next(4) as usize].into(),
            3 | 4 => format!("r8 = {};", next(3)),
            5 | 6 => {
                let (r, w) = [("r5", "r"), ("r6", "r"), ("r6", "w"), ("r7", "r")][next(4) as usize];
                let c = ops_cmp[next(6) as usize];
                let l = jump(&mut next);
                format!("if {w}{} {c} {} goto {l};", &r[1..], next(4))
            }
            7 => "r9 += r8;".into(),
            8 if !called => {
                called = true;
                "call %[t];".into()
            }
            9 if !called => {
                let l = jump(&mut next);
                format!("r4 = r2; r4 += {}; if r4 > r3 goto {l};", 14 + next(8))
            }
            _ => "r0 = r5; r0 &= 1; r5 = r0;".into(),
        };
        ops.push(op);
    }
    let mut body = String::from(
        "r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 14; r0 = 2; \
         if r4 > r3 goto 9f; r6 = *(u8 *)(r2 + 12); r7 = *(u8 *)(r2 + 13); r9 = 0;",
    );
    if next(4) == 0 {
        body.push_str(" r8 = 1;");
    }
    for (k, op) in ops.iter().enumerate() {
        for (l, _) in targets.iter().filter(|t| t.1 == k) {
            body.push_str(&format!(" {l}:"));
        }
        body.push(' ');
        body.push_str(op);
    }
    for (l, _) in targets.iter().filter(|t| t.1 == n) {
        body.push_str(&format!(" {l}:"));
    }
    body.push_str(" r0 = r9; r0 &= 1; r0 += 1; 9: exit;");
    body
}

#[test]
fn random_flag_programs_load_and_run_as_in_the_kernel() {
    if !kernel::available() {
        return;
    }
    const N: u64 = 600;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flag_paths");
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from(
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         #define P(name) SEC(\"xdp\") __attribute__((naked)) int name(void)\n",
    );
    for s in 0..N {
        c.push_str(&format!(
            "P(f{s}) {{ asm volatile(\"{}\" :: [t]\"i\"(BPF_FUNC_ktime_get_ns)); }}\n",
            flag_program(s)
        ));
    }
    c.push_str("char LICENSE[] SEC(\"license\") = \"GPL\";\n");
    std::fs::write(dir.join("flag_paths.c"), c).unwrap();
    let Some(path) = clang::compile_in(&dir, "flag_paths") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    let (mut both, mut neither, mut over) = (0, 0, Vec::new());
    for s in 0..N {
        let name = format!("f{s}");
        let k = kernel::KernelProgram::load(&obj, obj.program(Some(&name)).unwrap());
        let p = XdpProgram::load(&obj, Some(&name), 1, &[]);
        match (&k, &p) {
            (Ok(k), Ok(p)) => {
                both += 1;
                for (b12, b13, len) in
                    [(0, 0, 64), (3, 1, 64), (1, 0, 60), (2, 255, 80), (7, 1, 14)]
                {
                    let mut frame = vec![0u8; len];
                    frame[12] = b12;
                    frame[13] = b13;
                    let want = k.test_run(&frame).unwrap().action;
                    let got = p.run(0, &mut frame, 0, len, 1, 0).unwrap().action;
                    assert_eq!(
                        got,
                        u64::from(want),
                        "{name} on bytes {b12} {b13}, {len} long: {}",
                        flag_program(s)
                    );
                }
            }
            (Err(_), Err(e)) => {
                neither += 1;
                assert!(e.to_string().contains("leaves unset"), "{name}: {e}");
            }
            (Err(k), Ok(_)) => panic!(
                "{name}: pfil loads what the kernel refuses ({k}): {}",
                flag_program(s)
            ),
            (Ok(_), Err(e)) => over.push(format!("{name}: {e}: {}", flag_program(s))),
        }
    }
    eprintln!(
        "{N} programs: {both} loaded by both, {neither} refused by both, {} refused by pfil only",
        over.len()
    );
    assert!(
        over.is_empty(),
        "refused by pfil only:\n{}",
        over.join("\n")
    );
}

/// A random program of packet comparisons and packet reads, in BPF
/// assembly: r6 is `data`, r7 `data_end`, r8 byte 12 of the frame, `r5`
/// a flag, r9 an accumulator the verdict comes from. Comparisons of
/// `data + N` with `data_end` prove N bytes on one edge; reads at random
/// offsets, and at byte 12 masked (the IHL pattern, compared again or
/// not), are proven on some paths, on all or on none; jumps (on the flag,
/// on byte 12, on the packet's end) go forward to labels placed at
/// random.
fn packet_program(seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let n = 5 + next(9) as usize;
    let mut ops: Vec<String> = Vec::new();
    let mut targets: Vec<(usize, usize)> = Vec::new();
    let mut label = 10;
    let ops_cmp = ["==", "!=", ">", ">=", "<", "<="];
    for k in 0..n {
        let mut jump = |next: &mut dyn FnMut(u64) -> u64| {
            label += 1;
            let t = k + 1 + next((n - k) as u64) as usize;
            targets.push((label, t));
            format!("{label}f")
        };
        let op = match next(14) {
            0 => format!("r5 = {};", next(2)),
            1 => {
                let c = ops_cmp[next(6) as usize];
                format!("r5 = 1; if r8 {c} {} goto 1f; r5 = 0; 1:", next(4))
            }
            // A variable offset (byte 12 masked), compared or not, read.
            10 | 11 => {
                let m = [3, 7, 15, 60][next(4) as usize];
                let l = jump(&mut next);
                let check = if next(4) == 0 {
                    String::new()
                } else {
                    format!("r0 = r3; r0 += {}; if r0 > r7 goto {l};", 1 + next(20))
                };
                format!(
                    "r4 = r8; r4 &= {m}; r3 = r6; r3 += {}; r3 += r4; {check} \
                     r0 = *(u8 *)(r3 + {}); r9 += r0;",
                    next(16),
                    next(20)
                )
            }
            12 => format!(
                "r4 = {}; r3 = r6; r3 += r4; r0 = *(u8 *)(r3 + 0); r9 += r0;",
                next(24)
            ),
            2 => {
                let l = jump(&mut next);
                format!("if r5 {} 0 goto {l};", ["==", "!="][next(2) as usize])
            }
            3 => {
                let c = ops_cmp[next(6) as usize];
                let l = jump(&mut next);
                format!("if r8 {c} {} goto {l};", next(4))
            }
            4 | 5 => {
                let l = jump(&mut next);
                format!("r4 = r6; r4 += {}; if r4 > r7 goto {l};", 14 + next(27))
            }
            6 => {
                let l = jump(&mut next);
                format!("r4 = r6; r4 += {}; if r4 <= r7 goto {l};", 14 + next(27))
            }
            _ => format!("r0 = *(u8 *)(r6 + {}); r9 += r0;", next(32)),
        };
        ops.push(op);
    }
    let mut body = String::from(
        "r6 = *(u32 *)(r1 + 0); r7 = *(u32 *)(r1 + 4); r4 = r6; r4 += 14; r0 = 2; \
         if r4 > r7 goto 9f; r8 = *(u8 *)(r6 + 12); r9 = 0; r5 = 0;",
    );
    for (k, op) in ops.iter().enumerate() {
        for (l, _) in targets.iter().filter(|t| t.1 == k) {
            body.push_str(&format!(" {l}:"));
        }
        body.push(' ');
        body.push_str(op);
    }
    for (l, _) in targets.iter().filter(|t| t.1 == n) {
        body.push_str(&format!(" {l}:"));
    }
    body.push_str(" r0 = r9; r0 &= 1; r0 += 1; 9: exit;");
    body
}

#[test]
fn random_packet_reads_are_refused_where_the_kernel_refuses_them() {
    if !kernel::available() {
        return;
    }
    const N: u64 = 600;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("packet_paths");
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from(
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         #define P(name) SEC(\"xdp\") __attribute__((naked)) int name(void)\n",
    );
    for s in 0..N {
        c.push_str(&format!(
            "P(p{s}) {{ asm volatile(\"{}\"); }}\n",
            packet_program(s)
        ));
    }
    c.push_str("char LICENSE[] SEC(\"license\") = \"GPL\";\n");
    std::fs::write(dir.join("packet_paths.c"), c).unwrap();
    let Some(path) = clang::compile_in(&dir, "packet_paths") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    let (mut both, mut neither) = (0, 0);
    let (mut over, mut under) = (Vec::new(), Vec::new());
    for s in 0..N {
        let name = format!("p{s}");
        let k = kernel::KernelProgram::load(&obj, obj.program(Some(&name)).unwrap());
        let p = XdpProgram::load(&obj, Some(&name), 1, &[]);
        match (&k, &p) {
            (Ok(k), Ok(p)) => {
                both += 1;
                for (b12, len) in [(0, 64), (3, 14), (1, 20), (2, 30), (7, 41), (255, 27)] {
                    let mut frame = vec![0u8; len];
                    frame[12] = b12;
                    for (i, b) in frame.iter_mut().enumerate().skip(13) {
                        *b = i as u8;
                    }
                    let want = k.test_run(&frame).unwrap().action;
                    let got = p.run(0, &mut frame, 0, len, 1, 0).unwrap().action;
                    assert_eq!(
                        got,
                        u64::from(want),
                        "{name} on byte 12 = {b12}, {len} long: {}",
                        packet_program(s)
                    );
                }
            }
            (Err(_), Err(e)) => {
                neither += 1;
                assert!(
                    e.to_string().contains("invalid access to packet"),
                    "{name}: {e}"
                );
            }
            (Err(k), Ok(_)) => under.push(format!("{name}: {k}: {}", packet_program(s))),
            (Ok(_), Err(e)) => over.push(format!("{name}: {e}: {}", packet_program(s))),
        }
    }
    eprintln!(
        "{N} programs: {both} loaded by both, {neither} refused by both, {} by pfil only, {} by \
         the kernel only",
        over.len(),
        under.len()
    );
    assert!(
        over.is_empty(),
        "refused by pfil only:\n{}",
        over.join("\n")
    );
    assert!(
        under.is_empty(),
        "refused by the kernel only:\n{}",
        under.join("\n")
    );
    // (Most programs read past what they compared somewhere: a tenth
    // load in both, enough to compare verdicts.)
    assert!(both > N / 10 && neither > N / 5, "{both} {neither}");
}
