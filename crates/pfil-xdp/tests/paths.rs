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

/// Random programs of forward jumps: an xorshift stream, the ops in
/// order, and the labels the jumps land on, placed before later ops.
struct Gen {
    x: u64,
    n: usize,
    /// ops[k]: the text of op k; jumps name the op they land before.
    ops: Vec<String>,
    /// (label, op index)
    targets: Vec<(usize, usize)>,
    label: usize,
}

/// The compares the generators draw from.
const CMP: [&str; 6] = ["==", "!=", ">", ">=", "<", "<="];

impl Gen {
    /// A stream from `seed` (scrambled by `mul`), and `n` ops to come.
    fn new(seed: u64, mul: u64, n_base: usize, n_more: u64) -> Gen {
        let mut g = Gen {
            x: seed.wrapping_mul(mul) | 1,
            n: 0,
            ops: Vec::new(),
            targets: Vec::new(),
            label: 10,
        };
        g.n = n_base + g.next(n_more) as usize;
        g
    }

    fn next(&mut self, m: u64) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x % m
    }

    /// A label placed before an op after op `k` (or at the end).
    fn jump(&mut self, k: usize) -> String {
        self.label += 1;
        let t = k + 1 + self.next((self.n - k) as u64) as usize;
        self.targets.push((self.label, t));
        format!("{}f", self.label)
    }

    /// `prologue`, the ops with their labels, `epilogue`.
    fn body(&self, prologue: &str, epilogue: &str) -> String {
        let mut body = String::from(prologue);
        let labels = |k: usize| {
            self.targets
                .iter()
                .filter(move |t| t.1 == k)
                .map(|(l, _)| format!(" {l}:"))
        };
        for (k, op) in self.ops.iter().enumerate() {
            body.extend(labels(k));
            body.push(' ');
            body.push_str(op);
        }
        body.extend(labels(self.n));
        body.push_str(epilogue);
        body
    }
}

/// A random program of flags and a register set on some paths (`r8`),
/// in BPF assembly: r6 and r7 are bytes 12 and 13 of the frame, `r5` a
/// flag, r9 an accumulator the verdict comes from; jumps go forward to
/// labels placed at random.
fn flag_program(seed: u64) -> String {
    let mut g = Gen::new(seed, 0x9e37_79b9_7f4a_7c15, 6, 10);
    let mut called = false;
    for k in 0..g.n {
        let op = match g.next(11) {
            0 => format!("r5 = {};", g.next(2)),
            1 => {
                let c = CMP[g.next(6) as usize];
                format!("r5 = 1; if r6 {c} {} goto 1f; r5 = 0; 1:", g.next(4))
            }
            2 => ["r5 &= 1;", "r5 ^= 1;", "r5 &= r7;", "r5 |= 1;"][g.next(4) as usize].into(),
            3 | 4 => format!("r8 = {};", g.next(3)),
            5 | 6 => {
                let (r, w) =
                    [("r5", "r"), ("r6", "r"), ("r6", "w"), ("r7", "r")][g.next(4) as usize];
                let c = CMP[g.next(6) as usize];
                let l = g.jump(k);
                format!("if {w}{} {c} {} goto {l};", &r[1..], g.next(4))
            }
            7 => "r9 += r8;".into(),
            8 if !called => {
                called = true;
                "call %[t];".into()
            }
            9 if !called => {
                let l = g.jump(k);
                format!("r4 = r2; r4 += {}; if r4 > r3 goto {l};", 14 + g.next(8))
            }
            _ => "r0 = r5; r0 &= 1; r5 = r0;".into(),
        };
        g.ops.push(op);
    }
    let mut prologue = String::from(
        "r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 14; r0 = 2; \
         if r4 > r3 goto 9f; r6 = *(u8 *)(r2 + 12); r7 = *(u8 *)(r2 + 13); r9 = 0;",
    );
    if g.next(4) == 0 {
        prologue.push_str(" r8 = 1;");
    }
    g.body(&prologue, " r0 = r9; r0 &= 1; r0 += 1; 9: exit;")
}

/// What [`against_kernel`] found.
struct Outcome {
    both: u64,
    neither: u64,
    /// Refused by pfil only (name, pfil's reason, the program).
    over: Vec<String>,
    /// Refused by the kernel only.
    under: Vec<String>,
}

/// Compiles `n` programs `program(seed)` (named `{prefix}{seed}`, in BPF
/// assembly, `asm_tail` after the text: its operands) into one object,
/// and loads each into the kernel and into pfil. Where both load, the
/// verdicts on `frames` must agree; where both refuse, pfil's reason must
/// contain `refusal`. `None` without clang.
fn against_kernel(
    prefix: &str,
    n: u64,
    program: fn(u64) -> String,
    asm_tail: &str,
    frames: &[Vec<u8>],
    refusal: &str,
) -> Option<Outcome> {
    let stem = format!("{prefix}_paths");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(&stem);
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from(
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         #define P(name) SEC(\"xdp\") __attribute__((naked)) int name(void)\n",
    );
    for s in 0..n {
        c.push_str(&format!(
            "P({prefix}{s}) {{ asm volatile(\"{}\"{asm_tail}); }}\n",
            program(s)
        ));
    }
    c.push_str("char LICENSE[] SEC(\"license\") = \"GPL\";\n");
    std::fs::write(dir.join(format!("{stem}.c")), c).unwrap();
    let path = clang::compile_in(&dir, &stem)?;
    let obj = Object::parse(&std::fs::read(&path).unwrap()).unwrap();
    let mut o = Outcome {
        both: 0,
        neither: 0,
        over: Vec::new(),
        under: Vec::new(),
    };
    for s in 0..n {
        let name = format!("{prefix}{s}");
        let k = kernel::KernelProgram::load(&obj, obj.program(Some(&name)).unwrap());
        let p = XdpProgram::load(&obj, Some(&name), 1, &[]);
        match (&k, &p) {
            (Ok(k), Ok(p)) => {
                o.both += 1;
                for f in frames {
                    let mut frame = f.clone();
                    let want = k.test_run(&frame).unwrap().action;
                    let got = p.run(0, &mut frame, 0, f.len(), 1, 0).unwrap().action;
                    assert_eq!(got, u64::from(want), "{name} on {f:02x?}: {}", program(s));
                }
            }
            (Err(_), Err(e)) => {
                o.neither += 1;
                assert!(e.to_string().contains(refusal), "{name}: {e}");
            }
            (Err(k), Ok(_)) => o.under.push(format!("{name}: {k}: {}", program(s))),
            (Ok(_), Err(e)) => o.over.push(format!("{name}: {e}: {}", program(s))),
        }
    }
    eprintln!(
        "{n} programs: {} loaded by both, {} refused by both, {} by pfil only, {} by the kernel \
         only",
        o.both,
        o.neither,
        o.over.len(),
        o.under.len()
    );
    Some(o)
}

#[test]
fn random_flag_programs_load_and_run_as_in_the_kernel() {
    if !kernel::available() {
        return;
    }
    const N: u64 = 600;
    let frames: Vec<Vec<u8>> = [(0, 0, 64), (3, 1, 64), (1, 0, 60), (2, 255, 80), (7, 1, 14)]
        .into_iter()
        .map(|(b12, b13, len)| {
            let mut f = vec![0u8; len];
            (f[12], f[13]) = (b12, b13);
            f
        })
        .collect();
    let tail = " :: [t]\"i\"(BPF_FUNC_ktime_get_ns)";
    let Some(o) = against_kernel("f", N, flag_program, tail, &frames, "leaves unset") else {
        return;
    };
    assert!(
        o.under.is_empty(),
        "pfil loads what the kernel refuses:\n{}",
        o.under.join("\n")
    );
    assert!(
        o.both > N / 5 && o.neither > N / 5,
        "{} {}",
        o.both,
        o.neither
    );
    assert!(
        o.over.is_empty(),
        "refused by pfil only:\n{}",
        o.over.join("\n")
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
    let mut g = Gen::new(seed, 0x2545_f491_4f6c_dd1d, 5, 9);
    for k in 0..g.n {
        let op = match g.next(14) {
            0 => format!("r5 = {};", g.next(2)),
            1 => {
                let c = CMP[g.next(6) as usize];
                format!("r5 = 1; if r8 {c} {} goto 1f; r5 = 0; 1:", g.next(4))
            }
            // A variable offset (byte 12 masked), compared or not, read.
            10 | 11 => {
                let m = [3, 7, 15, 60][g.next(4) as usize];
                let l = g.jump(k);
                let check = if g.next(4) == 0 {
                    String::new()
                } else {
                    format!("r0 = r3; r0 += {}; if r0 > r7 goto {l};", 1 + g.next(20))
                };
                format!(
                    "r4 = r8; r4 &= {m}; r3 = r6; r3 += {}; r3 += r4; {check} \
                     r0 = *(u8 *)(r3 + {}); r9 += r0;",
                    g.next(16),
                    g.next(20)
                )
            }
            12 => format!(
                "r4 = {}; r3 = r6; r3 += r4; r0 = *(u8 *)(r3 + 0); r9 += r0;",
                g.next(24)
            ),
            2 => {
                let l = g.jump(k);
                format!("if r5 {} 0 goto {l};", ["==", "!="][g.next(2) as usize])
            }
            3 => {
                let c = CMP[g.next(6) as usize];
                let l = g.jump(k);
                format!("if r8 {c} {} goto {l};", g.next(4))
            }
            4 | 5 => {
                let l = g.jump(k);
                format!("r4 = r6; r4 += {}; if r4 > r7 goto {l};", 14 + g.next(27))
            }
            6 => {
                let l = g.jump(k);
                format!("r4 = r6; r4 += {}; if r4 <= r7 goto {l};", 14 + g.next(27))
            }
            _ => format!("r0 = *(u8 *)(r6 + {}); r9 += r0;", g.next(32)),
        };
        g.ops.push(op);
    }
    g.body(
        "r6 = *(u32 *)(r1 + 0); r7 = *(u32 *)(r1 + 4); r4 = r6; r4 += 14; r0 = 2; \
         if r4 > r7 goto 9f; r8 = *(u8 *)(r6 + 12); r9 = 0; r5 = 0;",
        " r0 = r9; r0 &= 1; r0 += 1; 9: exit;",
    )
}

#[test]
fn random_packet_reads_are_refused_where_the_kernel_refuses_them() {
    if !kernel::available() {
        return;
    }
    const N: u64 = 600;
    let frames: Vec<Vec<u8>> = [(0, 64), (3, 14), (1, 20), (2, 30), (7, 41), (255, 27)]
        .into_iter()
        .map(|(b12, len)| {
            let mut f: Vec<u8> = (0..len).map(|i| i as u8).collect();
            f[..12].fill(0);
            f[12] = b12;
            f
        })
        .collect();
    let refusal = "invalid access to packet";
    let Some(o) = against_kernel("p", N, packet_program, "", &frames, refusal) else {
        return;
    };
    assert!(
        o.over.is_empty(),
        "refused by pfil only:\n{}",
        o.over.join("\n")
    );
    assert!(
        o.under.is_empty(),
        "refused by the kernel only:\n{}",
        o.under.join("\n")
    );
    // (Most programs read past what they compared somewhere: a tenth
    // load in both, enough to compare verdicts.)
    assert!(
        o.both > N / 10 && o.neither > N / 5,
        "{} {}",
        o.both,
        o.neither
    );
}
