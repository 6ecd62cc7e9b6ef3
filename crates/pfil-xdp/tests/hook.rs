//! The `xdp` module as a hook in a registry: verdicts and counted
//! actions, a faulting program contained like a panicking hook, and a
//! `set` that keeps the maps whose definition did not change.

use std::sync::Arc;

use pfil::{
    Dir, Dirs, FailMode, Filter, LinkOptions, Packet, PacketKind, Placement, Registry, Verdict,
};
use pfil_xdp::{Redirect, XdpFilter};

mod clang;

fn counter(f: &XdpFilter, name: &str) -> u64 {
    f.stats()
        .iter()
        .find(|s| s.name == name)
        .and_then(|s| s.value())
        .unwrap()
}

#[test]
fn verdicts_faults_and_kept_maps() {
    let Some(obj) = clang::compile("hostile") else {
        return;
    };
    let config = format!("@{}", obj.display());
    let filter = Arc::new(XdpFilter::from_config(&config, 2).unwrap());
    let reg = Registry::with_max_workers(2);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    reg.add_hook_shared("xdp:t", PacketKind::Ethernet, Dirs::BOTH, filter.clone())
        .unwrap();
    let opts = LinkOptions {
        placement: Placement::Append,
        fail: FailMode::Closed,
    };
    reg.link("h", Dir::In, "xdp:t", opts).unwrap();
    let mut w = reg.worker().unwrap();
    let mut run = |first: u8| {
        let mut f = [first; 64];
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f))
    };
    assert_eq!(run(0x02), Verdict::Pass);
    assert_eq!(run(0x01), Verdict::Dropped);
    assert_eq!(run(0x00), Verdict::Dropped);
    assert_eq!(counter(&filter, "aborted"), 1);
    let seen = filter.program().map("seen").unwrap().clone();
    assert_eq!(seen.lookup(&[0; 4]).unwrap().unwrap(), 3u64.to_le_bytes());

    // A loop that never ends: stopped at the run-time budget, counted,
    // the link quarantined; fail-closed drops from then on.
    assert_eq!(run(0x99), Verdict::Dropped);
    assert_eq!(counter(&filter, "faults"), 1);
    assert!(reg.chain("h", Dir::In).unwrap()[0].quarantined);
    assert_eq!(run(0x02), Verdict::Dropped, "fail-closed after the fault");

    // `set` with the same object: a new filter that keeps `seen`.
    let derived = filter.derive(&config).unwrap().unwrap();
    let any = derived
        .as_any()
        .unwrap()
        .downcast_ref::<XdpFilter>()
        .unwrap();
    assert!(
        Arc::ptr_eq(any.program().map("seen").unwrap(), &seen),
        "map kept across set"
    );
    assert_eq!(derived.spec().unwrap(), format!("xdp:{config}"));

    // Bad configs name what is wrong.
    let e = XdpFilter::from_config("@/nonexistent.o", 1).err().unwrap();
    assert!(e.contains("/nonexistent.o"), "{e}");
    let e = XdpFilter::from_config(&format!("{config} program nope"), 1)
        .err()
        .unwrap();
    assert!(
        e.contains("no XDP program \"nope\"") && e.contains("hostile"),
        "{e}"
    );
}

#[test]
fn verify_kernel_asks_the_kernel_for_a_second_opinion() {
    let Some(obj) = clang::compile("hostile") else {
        return;
    };
    if !pfil_xdp::kernel::available() {
        let e = XdpFilter::from_config(&format!("@{}\nverify kernel", obj.display()), 1)
            .err()
            .unwrap();
        assert!(e.contains("needs bpf(2)"), "{e}");
        return;
    }
    // The kernel refuses the read 100000 bytes past the frame that pfil
    // only stops at run time.
    let e = XdpFilter::from_config(&format!("@{}\nverify kernel", obj.display()), 1)
        .err()
        .unwrap();
    assert!(e.contains("the kernel's verifier refused it"), "{e}");
    let Some(good) = clang::compile("oracle") else {
        return;
    };
    XdpFilter::from_config(
        &format!("@{}  program route\nverify kernel", good.display()),
        1,
    )
    .unwrap();
}

/// Through the hook, a program grows the packet into the room its buffer
/// has (16 bytes of head, 8 of tail, as tests/c/oracle.c's `grow`), and
/// the next hook sees the grown frame; a packet without room
/// (`Packet::new`) makes the growth fail as on a kernel driver without
/// headroom (the program aborts). `adjust` (shrink, tag, metadata) works
/// in both.
#[test]
fn programs_grow_into_the_packets_room() {
    let Some(obj) = clang::compile("oracle") else {
        return;
    };
    let filter = |prog: &str| {
        Arc::new(XdpFilter::from_config(&format!("@{} program {prog}", obj.display()), 1).unwrap())
    };
    let (grow, adjust) = (filter("grow"), filter("adjust"));
    let reg = Registry::with_max_workers(1);
    let head = reg
        .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
        .unwrap();
    reg.add_hook_shared("xdp:grow", PacketKind::Ethernet, Dirs::BOTH, grow.clone())
        .unwrap();
    let opts = LinkOptions {
        placement: Placement::Append,
        fail: FailMode::Closed,
    };
    reg.link("h", Dir::In, "xdp:grow", opts.clone()).unwrap();
    let mut w = reg.worker().unwrap();
    let frame: Vec<u8> = (0..64u8).collect();
    let mut buf = vec![0xeeu8; 256 + 64 + 256];
    buf[256..320].copy_from_slice(&frame);
    let mut p = Packet::in_buffer(&mut buf, 256, 64).unwrap();
    assert_eq!(head.run_one(Dir::In, &mut w, &mut p), Verdict::Pass);
    let mut want = vec![0x5a; 16];
    want.extend_from_slice(&frame);
    want.extend_from_slice(&[0; 8]);
    assert_eq!(p.frame(), &want[..]);
    assert_eq!((p.headroom(), p.tailroom()), (240, 248));
    let mut bare = frame.clone();
    assert_eq!(
        head.run_one(Dir::In, &mut w, &mut Packet::new(&mut bare)),
        Verdict::Dropped
    );
    assert_eq!(counter(&grow, "aborted"), 1);

    reg.add_hook_shared(
        "xdp:adjust",
        PacketKind::Ethernet,
        Dirs::BOTH,
        adjust.clone(),
    )
    .unwrap();
    reg.unlink("h", Dir::In, "xdp:grow").unwrap();
    reg.link("h", Dir::In, "xdp:adjust", opts).unwrap();
    let mut tagged = 0xfeed_0000u32.to_be_bytes().to_vec();
    tagged[2..4].copy_from_slice(&frame[12..14]);
    tagged.extend_from_slice(&frame[14..60]);
    for room in [false, true] {
        let mut buf = vec![0u8; 256 + 64 + 256];
        let at = if room { 256 } else { 0 };
        buf[at..at + 64].copy_from_slice(&frame);
        let mut p = if room {
            Packet::in_buffer(&mut buf, 256, 64).unwrap()
        } else {
            Packet::new(&mut buf[..64])
        };
        assert_eq!(
            head.run_one(Dir::In, &mut w, &mut p),
            Verdict::Pass,
            "room {room}"
        );
        assert_eq!(p.frame(), &tagged[..], "room {room}");
    }
    assert_eq!(counter(&adjust, "aborted"), 0);
}

#[test]
fn a_redirect_target_lives_for_its_run_only() {
    let Some(obj) = clang::compile("redirect") else {
        return;
    };
    let filter = XdpFilter::from_config(&format!("@{}", obj.display()), 1).unwrap();
    let prog = filter.program();
    let run = |first: u8| {
        let mut f = [first; 64];
        let r = prog.run(0, &mut f, 0, 64, 1, 0).unwrap();
        (r.action, r.redirect)
    };
    // Asked for, then passed: the target is seen with that run.
    assert_eq!(run(1), (2, Some(Redirect::Device(7))));
    // XDP_REDIRECT without asking: no target (not the last run's).
    assert_eq!(run(2), (4, None));
    assert_eq!(run(3), (4, Some(Redirect::Device(9))));
    assert_eq!(run(0), (1, None));
    assert_eq!(run(2), (4, None));
    // Through the hook: a redirect without a target is refused.
    let ctx = pfil::Ctx::new("t", Dir::In, 0);
    for first in [1u8, 2] {
        let mut f = [first; 64];
        let v = filter.filter(&mut Packet::new(&mut f), &ctx);
        let want = if first == 1 {
            Verdict::Pass
        } else {
            Verdict::Dropped
        };
        assert_eq!(v, want);
    }
    assert_eq!(counter(&filter, "redirect_refused"), 1);
}

#[test]
fn a_cpumap_redirect_passes_and_a_devmap_hash_one_goes_to_its_device() {
    let Some(obj) = clang::compile("redirect_maps") else {
        return;
    };
    let filter = XdpFilter::from_config(
        &format!(
            "@{}; map cpus key 0 0 0 0 value 64 0 0 0 0 0 0 0; \
             map ports key 9 0 0 0 value 4 0 0 0 0 0 0 0",
            obj.display()
        ),
        1,
    )
    .unwrap();
    let frame = |first: u8, b5: u8| {
        let mut f = [0u8; 64];
        f[0] = first;
        f[5] = b5;
        f
    };
    let prog = filter.program();
    let run = |first: u8, b5: u8| {
        let mut f = frame(first, b5);
        let r = prog.run(0, &mut f, 0, 64, 1, 0).unwrap();
        (r.action, r.redirect)
    };
    assert_eq!(run(1, 0), (4, Some(Redirect::Cpu(0))));
    assert_eq!(
        run(1, 1),
        (2, None),
        "an empty cpumap entry: the flags' XDP_PASS"
    );
    assert_eq!(run(1, 3), (2, None), "past the cpumap's end");
    assert_eq!(run(2, 9), (4, Some(Redirect::Device(4))));
    assert_eq!(run(2, 8), (1, None), "no such key: the flags' XDP_DROP");
    // Through the hook: the cpumap's frame passes on, counted; the
    // device's is refused here (no outboxes), counted.
    let mut f = frame(1, 0);
    let ctx = pfil::Ctx::new("h", Dir::In, 0);
    assert_eq!(filter.filter(&mut Packet::new(&mut f), &ctx), Verdict::Pass);
    assert_eq!(counter(&filter, "to_cpu"), 1);
    let mut f = frame(2, 9);
    assert_eq!(
        filter.filter(&mut Packet::new(&mut f), &ctx),
        Verdict::Dropped
    );
    assert_eq!(counter(&filter, "redirect_refused"), 1);
    // Programs cannot write either map (the kernel's verifier refuses
    // it; here the control side alone can), and a devmap_hash entry
    // names a device.
    let ports = filter.program().map("ports").unwrap();
    let e = ports.update(&[1, 0, 0, 0], &[0; 8], 0).unwrap_err();
    assert!(format!("{e:?}").contains("ifindex 0"), "{e:?}");
}
