//! Classic BPF converted to eBPF gives what a classic interpreter gives,
//! on the eBPF interpreter and on the JIT: random valid classic programs
//! over random packets.

use pfil_ebpf::cbpf::{convert, CInsn};
use pfil_ebpf::{Env, Helpers, LoadOptions, Program};
use proptest::prelude::*;

/// The reference: libpcap's `bpf_filter` semantics (a load beyond the
/// packet or a division by a zero X returns 0; shifts of 32 or more
/// give 0), as pfil-filters' interpreter implements them.
fn reference(p: &[CInsn], pkt: &[u8], wirelen: u32) -> u32 {
    let (mut a, mut x, mut m) = (0u32, 0u32, [0u32; 16]);
    let mut pc = 0;
    let ld = |at: u64, n: usize| -> Option<u32> {
        let at = usize::try_from(at).ok()?;
        let b = pkt.get(at..at.checked_add(n)?)?;
        Some(b.iter().fold(0u32, |v, &c| v << 8 | c as u32))
    };
    loop {
        let i = p[pc];
        pc += 1;
        let k = i.k;
        let size = match i.code & 0x18 {
            0x00 => 4,
            0x08 => 2,
            _ => 1,
        };
        let r: Option<()> = (|| {
            match i.code & 0x07 {
                0x00 => match i.code & 0xe0 {
                    0x20 => a = ld(k as u64, size)?,
                    0x40 => a = ld(x as u64 + k as u64, size)?,
                    0x80 => a = wirelen,
                    0x60 => a = m[k as usize],
                    _ => a = k,
                },
                0x01 => match i.code & 0xe0 {
                    0x80 => x = wirelen,
                    0x60 => x = m[k as usize],
                    0xa0 => x = (ld(k as u64, 1)? & 0xf) << 2,
                    _ => x = k,
                },
                0x02 => m[k as usize] = a,
                0x03 => m[k as usize] = x,
                0x04 => {
                    let v = if i.code & 0x08 != 0 { x } else { k };
                    a = match i.code & 0xf0 {
                        0x00 => a.wrapping_add(v),
                        0x10 => a.wrapping_sub(v),
                        0x20 => a.wrapping_mul(v),
                        0x30 => a.checked_div(v)?,
                        0x40 => a | v,
                        0x50 => a & v,
                        0x60 => a.checked_shl(v).unwrap_or(0),
                        0x70 => a.checked_shr(v).unwrap_or(0),
                        0x80 => a.wrapping_neg(),
                        0x90 => a.checked_rem(v)?,
                        _ => a ^ v,
                    }
                }
                0x05 => {
                    let v = if i.code & 0x08 != 0 { x } else { k };
                    let t = match i.code & 0xf0 {
                        0x00 => {
                            pc += k as usize;
                            return Some(());
                        }
                        0x10 => a == v,
                        0x20 => a > v,
                        0x30 => a >= v,
                        _ => a & v != 0,
                    };
                    pc += if t { i.jt } else { i.jf } as usize;
                }
                0x06 => return None,
                _ => {
                    if i.code & 0x80 != 0 {
                        a = x
                    } else {
                        x = a
                    }
                }
            }
            Some(())
        })();
        if i.code & 0x07 == 0x06 {
            return if i.code & 0x10 != 0 { a } else { k };
        }
        if r.is_none() {
            return 0;
        }
    }
}

fn gen(kind: u8, a: u32, b: u32, left: usize) -> CInsn {
    let sz = [0x00u16, 0x08, 0x10][(b % 3) as usize];
    let k_pkt = if a % 7 == 0 { a } else { a % 70 };
    let j = |v: u32| (v as usize % left.max(1)) as u8;
    let (code, jt, jf, k) = match kind % 12 {
        0 => (0x20 | sz, 0, 0, k_pkt),
        1 => (0x40 | sz, 0, 0, k_pkt),
        2 => (
            [0x80u16, 0x00, 0x60][(b % 3) as usize],
            0,
            0,
            if b % 3 == 2 { a % 16 } else { a },
        ),
        3 => {
            let k = match b % 4 {
                2 => a % 16,
                // X near 32, for shifts by X.
                1 if a % 2 == 0 => 28 + a % 8,
                _ => k_pkt,
            };
            ([0x81u16, 0x01, 0x61, 0xb1][(b % 4) as usize], 0, 0, k)
        }
        4 => ([0x02u16, 0x03][(b % 2) as usize], 0, 0, a % 16),
        5 | 6 => {
            let op = [
                0x00u16, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0,
            ][(b % 11) as usize];
            let x = (b >> 8) & 1 == 1 && op != 0x80;
            let k = if matches!(op, 0x30 | 0x90) && a == 0 {
                3
            } else if (0x60..=0x70).contains(&op) {
                a % 40
            } else {
                a
            };
            (0x04 | op | if x { 0x08 } else { 0 }, 0, 0, k)
        }
        7 | 8 => {
            let op = [0x10u16, 0x20, 0x30, 0x40][(b % 4) as usize];
            let x = (b >> 8) & 1 == 1;
            let k = if a % 3 == 0 { a % 256 } else { a };
            (
                0x05 | op | if x { 0x08 } else { 0 },
                j(b >> 10),
                j(b >> 20),
                k,
            )
        }
        9 => (0x05, 0, 0, j(a) as u32),
        10 => ([0x07u16, 0x87][(b % 2) as usize], 0, 0, 0),
        _ => ([0x06u16, 0x16][(b % 2) as usize], 0, 0, a),
    };
    CInsn { code, jt, jf, k }
}

/// Property cases: `PROPTEST_CASES` when set (`scripts/fuzz-long.sh`),
/// else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(2000), ..ProptestConfig::default() })]

    #[test]
    fn converted_classic_programs_agree(
        ops in proptest::collection::vec((any::<u8>(), any::<u32>(), any::<u32>()), 0..30),
        ret in any::<u32>(),
        pkt in proptest::collection::vec(any::<u8>(), 0..90),
        wire_extra in 0u32..3,
    ) {
        let n = ops.len();
        let mut prog: Vec<CInsn> = ops.iter().enumerate().map(|(i, &(k, a, b))| gen(k, a, b, n - i)).collect();
        prog.push(CInsn { code: 0x16, jt: 0, jf: 0, k: ret });
        let wirelen = pkt.len() as u32 + wire_extra;
        let want = reference(&prog, &pkt, wirelen) as u64;
        let ebpf = convert(&prog).unwrap();
        let mut o = LoadOptions::default();
        o.entry_args = 3;
        o.xdp_ctx = false;
        o.packet_args = true;
        for jit in [false, true] {
            o.jit = jit;
            let p = Program::load(ebpf.clone(), &[], &Helpers::new(), &o).map_err(|e| TestCaseError::fail(format!("{e}: {prog:?}")))?;
            prop_assert!(p.is_read_only());
            // SAFETY: no extra regions.
            let mut env = unsafe { Env::new(Vec::new(), core::ptr::null_mut()) };
            let got = p.run_packet(&mut env, &pkt, wirelen as u64);
            prop_assert_eq!(got, Ok(want), "jit {} {:?}", jit, prog);
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn proven_loads_compile_without_the_run_time_check() {
    // ldh [12]; ldb [23]; ret a
    let prog = [
        CInsn {
            code: 0x28,
            jt: 0,
            jf: 0,
            k: 12,
        },
        CInsn {
            code: 0x30,
            jt: 0,
            jf: 0,
            k: 23,
        },
        CInsn {
            code: 0x16,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    let ebpf = convert(&prog).unwrap();
    let size = |packet_args: bool| {
        let mut o = LoadOptions::default();
        o.entry_args = 3;
        o.xdp_ctx = false;
        o.packet_args = packet_args;
        let p = Program::load(ebpf.clone(), &[], &Helpers::new(), &o).unwrap();
        let mut env = Env::without_regions();
        let mut pkt = [0u8; 30];
        pkt[23] = 0x42;
        assert_eq!(p.run_packet(&mut env, &pkt, 30), Ok(0x42));
        assert_eq!(p.run_packet(&mut env, &pkt[..20], 20), Ok(0));
        p.machine_code().unwrap().len()
    };
    let (checked, proven) = (size(false), size(true));
    assert!(proven < checked, "{proven} >= {checked}");
}
