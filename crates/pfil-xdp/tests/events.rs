//! Events for a reader (tests/c/events.c, and xdpdump's own program as
//! Debian's xdp-tools installs it): the records a program writes with
//! `bpf_perf_event_output` and `bpf_ringbuf_output`, and every error
//! those helpers return, the same in the kernel and in pfil, frame for
//! frame (the oracle reads the kernel's perf rings and ring buffer after
//! every run). Needs root for the kernel; under CI it must run.

mod clang;
mod oracle;

use oracle::{frames, Pair};
use pfil_xdp::{Object, XdpProgram};

/// Frames whose first three bytes take every selector, size and flag of
/// events.c, then the generated traffic.
fn traffic() -> Vec<(String, Vec<u8>)> {
    let mut t = Vec::new();
    for sel in 0u8..8 {
        for (len, b1, b2) in [
            (60, 0, 0),
            (60, 3, 7),
            (60, 16, 15),
            (200, 40, 9),
            (1500, 255, 3),
            (60, 58, 0),
            (60, 56, 1),
        ] {
            let mut f = vec![0u8; len];
            f[0] = sel | (b1 & 0x38);
            f[1] = b1;
            f[2] = b2 | (sel << 4);
            for (i, b) in f.iter_mut().enumerate().skip(3) {
                *b = i as u8;
            }
            t.push((format!("selector {sel}, bytes {b1} {b2}, {len} bytes"), f));
        }
    }
    t.extend(frames::generated());
    t
}

/// The return values `program` counted (events.c's `rets`), in pfil's
/// JIT copy (the oracle compared it with the kernel's).
fn returns(p: &Pair) -> Vec<i64> {
    let (_, x) = &p.oracle.ours[0];
    let mut v: Vec<i64> = x
        .map("rets")
        .unwrap()
        .keys()
        .into_iter()
        .map(|k| i64::from_le_bytes(k.try_into().unwrap()))
        .collect();
    v.sort_unstable();
    v
}

fn check(program: &str) -> Option<Vec<i64>> {
    if !oracle::kernel_here() {
        return None;
    }
    let path = clang::compile("events")?;
    oracle::pin_cpu();
    let mut p = Pair::new(&std::fs::read(path).unwrap(), Some(program));
    for (what, f) in traffic() {
        p.run(&f, &format!("{program}: {what}"));
    }
    p.same_maps(program);
    let r = returns(&p);
    eprintln!("{program}: {} frames agree, returns {r:?}", p.runs);
    Some(r)
}

#[test]
fn perf_event_output_writes_and_fails_as_the_kernels() {
    let Some(r) = check("perf_sample") else {
        return;
    };
    // Written; past max_entries (-E2BIG); an unknown flag (-EINVAL); more
    // packet bytes than the packet has (-EFAULT). (Another CPU's slot and
    // a slot past the CPUs, -EOPNOTSUPP and -ENOENT, depend on the CPUs.)
    for want in [0, -7, -22, -14] {
        assert!(r.contains(&want), "{want} never returned: {r:?}");
    }
}

#[test]
fn ringbuf_output_and_query_as_the_kernels() {
    let Some(r) = check("ring_sample") else {
        return;
    };
    // Written; full (-EAGAIN: 64 records of 64 bytes in 4096); a flag
    // that is not one (-EINVAL).
    for want in [0, -11, -22] {
        assert!(r.contains(&want), "{want} never returned: {r:?}");
    }
}

#[test]
fn ringbuf_reserve_submit_and_discard_as_the_kernels() {
    let Some(r) = check("ring_reserve") else {
        return;
    };
    // Submitted (0), discarded (1), null on a full ring (-1).
    for want in [-1, 0, 1] {
        assert!(r.contains(&want), "{want} never counted: {r:?}");
    }
}

#[test]
fn records_held_or_not_where_paths_meet_as_the_kernels() {
    // ring_joins: a null test again after a join, a record reserved on
    // some frames only, a cleanup behind `||`, a pointer moved and back,
    // two sizes by the path: all load and agree (records, counts).
    let Some(r) = check("ring_joins") else {
        return;
    };
    assert!(r.contains(&2), "{r:?}");
    for program in ["ring_flag", "ring_var_store", "ring_sampled"] {
        check(program);
    }
}

#[test]
fn xdpdumps_program_samples_as_the_kernels() {
    if !oracle::kernel_here() {
        return;
    }
    let path = "/usr/lib/x86_64-linux-gnu/bpf/xdpdump_xdp.o";
    let Ok(bytes) = std::fs::read(path) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{path} is missing (xdp-tools: scripts/setup.sh)"
        );
        return;
    };
    oracle::pin_cpu();
    // trace_cfg: the loopback (the test run's ingress), snap lengths of
    // all, 64 and 0 bytes.
    for snap in [0xffffu32, 64, 0] {
        let mut p = Pair::new(&bytes, None);
        let mut cfg = 1u32.to_le_bytes().to_vec();
        cfg.extend(snap.to_le_bytes());
        cfg.extend(0u32.to_le_bytes());
        p.set(".data", &0u32.to_le_bytes(), &cfg);
        for (what, f) in frames::generated() {
            p.run(&f, &format!("xdpdump, snaplen {snap}: {what}"));
        }
        p.same_maps("xdpdump");
        eprintln!("xdpdump, snaplen {snap}: {} frames agree", p.runs);
    }
}

#[test]
fn xdpdumps_records_are_its_metadata_then_the_frame() {
    // pfil alone (no root): a record is xdpdump's 20 bytes of metadata,
    // then the frame's first `snaplen` bytes.
    let path = "/usr/lib/x86_64-linux-gnu/bpf/xdpdump_xdp.o";
    let Ok(bytes) = std::fs::read(path) else {
        assert!(std::env::var_os("CI").is_none(), "{path} is missing");
        return;
    };
    let obj = Object::parse(&bytes).unwrap();
    let p = XdpProgram::load(&obj, None, 2, &[]).unwrap();
    let mut cfg = 7u32.to_le_bytes().to_vec(); // ifindex 7
    cfg.extend(64u32.to_le_bytes());
    cfg.extend(0u32.to_le_bytes());
    p.map(".data")
        .unwrap()
        .update(&0u32.to_le_bytes(), &cfg, 0)
        .unwrap();
    let frame: Vec<u8> = (0..100u8).collect();
    for (ifindex, len) in [(7, 100), (7, 30), (8, 100)] {
        let mut buf = vec![0u8; 2048];
        buf[256..256 + len].copy_from_slice(&frame[..len]);
        p.run(1, &mut buf, 256, len, ifindex, 0).unwrap();
    }
    let d = p.map("xdpdump_perf_map").unwrap().drain_events(10).unwrap();
    let got: Vec<(Option<u32>, usize, Vec<u8>)> = d
        .events
        .iter()
        .map(|e| (e.slot, e.data.len(), e.data[20..].to_vec()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some(1), 84, frame[..64].to_vec()),
            (Some(1), 50, frame[..30].to_vec())
        ],
        "the run on ifindex 8 is not sampled"
    );
}

#[test]
fn event_maps_are_refused_to_other_helpers_as_the_kernel_refuses_them() {
    let Some(path) = clang::compile("events") else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let obj = Object::parse(&bytes).unwrap();
    for (program, says) in [
        (
            "perf_on_array",
            "bpf_perf_event_output takes a perf_event_array",
        ),
        (
            "lookup_ringbuf",
            "bpf_map_lookup_elem on a ringbuf (the kernel refuses it: only bpf_ringbuf_output",
        ),
        ("ringbuf_on_hash", "bpf_ringbuf_output takes a ringbuf"),
        ("ring_leak", "neither submitted nor discarded"),
        ("ring_unchecked", "a record that may be null"),
        ("ring_size_var", "not a known constant"),
        ("ring_after_submit", "already submitted or discarded"),
        (
            "ring_past_end",
            "access of 8 bytes at offset 16 of a record of 16 bytes",
        ),
        (
            "ring_joined_past",
            "access of 8 bytes at offset 16 of a record of 8 bytes",
        ),
        (
            "ring_two_args",
            "records of bpf_ringbuf_reserve in r2 and r3",
        ),
    ] {
        let e = XdpProgram::load(&obj, Some(program), 1, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{program}: {e}");
        if oracle::kernel_here() {
            let p = obj.program(Some(program)).unwrap();
            let k = pfil_xdp::kernel::KernelProgram::load(&obj, p);
            assert!(k.is_err(), "{program}: the kernel loaded it");
        }
    }
    // The control side: events, not entries.
    let p = XdpProgram::load(&obj, Some("perf_sample"), 2, &[]).unwrap();
    let m = p.map("samples").unwrap();
    let e = m.lookup(&0u32.to_le_bytes()).unwrap_err().to_string();
    assert!(e.contains("event_pipe"), "{e}");
    assert!(m.update(&0u32.to_le_bytes(), &[0; 4], 0).is_err());
    assert!(m.keys().is_empty());
    assert!(m.drain_events(10).unwrap().events.is_empty());
    let e = p
        .map("rets")
        .unwrap()
        .drain_events(1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not events"), "{e}");
}

#[test]
fn a_run_that_faults_holding_a_record_discards_it() {
    // ring_fault reserves, then reads the frame 100 bytes in: a short
    // frame faults with the record held. A reader must not wait on it.
    let Some(path) = clang::compile("events") else {
        return;
    };
    let obj = Object::parse(&std::fs::read(path).unwrap()).unwrap();
    let p = XdpProgram::load(&obj, Some("ring_fault"), 1, &[]).unwrap();
    let run = |len: usize| {
        let mut buf = vec![0x5au8; 512];
        p.run(0, &mut buf, 256, len, 1, 0)
    };
    for _ in 0..3 {
        assert!(run(60).is_err(), "a 60-byte frame faults");
    }
    assert!(run(200).is_ok());
    let d = p.map("ring").unwrap().drain_events(10).unwrap();
    assert_eq!(d.events.len(), 1, "{d:?}");
    assert_eq!(d.events[0].data, 0x5au64.to_le_bytes());
}
