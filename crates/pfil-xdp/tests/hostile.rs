//! Hostile objects: xdp-filter's objects with bytes flipped at random,
//! loaded and, when the loader and the verifier take them, run on frames.
//! Each is refused with an error or runs to an action or a contained
//! fault; the process never crashes. (`PFIL_XDP_MUTANTS=N` for more.)

use pfil_xdp::{Object, XdpProgram};

#[test]
fn mutated_objects_are_refused_or_contained() {
    let path = "/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_dny_all.o";
    let Ok(bytes) = std::fs::read(path) else {
        assert!(std::env::var_os("CI").is_none(), "{path} missing under CI");
        eprintln!("skipped: {path} (install xdp-tools)");
        return;
    };
    let n: usize = std::env::var("PFIL_XDP_MUTANTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let text = {
        let obj = Object::parse(&bytes).unwrap();
        obj.programs[0].insns.len()
    };
    // Where the code lies in the file, to mutate instructions more often
    // than headers (the `xdp` section).
    let code_at = bytes
        .windows(8)
        .position(|w| w == &Object::parse(&bytes).unwrap().programs[0].insns[..8])
        .unwrap_or(0);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut refused, mut ran, mut faulted) = (0, 0, 0);
    let frames: Vec<Vec<u8>> = (0..8u8)
        .map(|i| vec![i.wrapping_mul(37); 14 + usize::from(i) * 9])
        .collect();
    for _ in 0..n {
        let mut m = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let r = next();
            let i = if r & 1 == 0 {
                code_at + (r as usize >> 8) % text
            } else {
                (r as usize >> 8) % m.len()
            };
            m[i] ^= (r >> 40) as u8 | 1;
        }
        let Ok(obj) = Object::parse(&m) else {
            refused += 1;
            continue;
        };
        let Ok(prog) = XdpProgram::load(&obj, None, 1, &[]) else {
            refused += 1;
            continue;
        };
        for f in &frames {
            let mut buf = vec![0u8; 512];
            buf[256..256 + f.len()].copy_from_slice(f);
            match prog.run(0, &mut buf, 256, f.len(), 1, 0) {
                Ok(r) => {
                    assert!(r.meta <= r.data && r.data <= r.end && r.end <= buf.len());
                    ran += 1;
                }
                Err(_) => faulted += 1,
            }
        }
    }
    eprintln!("{n} mutants: {refused} refused, {ran} runs ended with an action, {faulted} runs faulted (contained)");
    assert!(
        refused > 0 && ran > 0,
        "the mutation must reach both refusal and running"
    );
}
