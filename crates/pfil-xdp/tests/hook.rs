//! The `xdp` module as a hook in a registry: verdicts and counted
//! actions, a faulting program contained like a panicking hook, and a
//! `set` that keeps the maps whose definition did not change.

use std::sync::Arc;

use pfil::{
    Dir, Dirs, FailMode, Filter, LinkOptions, Packet, PacketKind, Placement, Registry, Verdict,
};
use pfil_xdp::XdpFilter;

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

    // A read 100000 bytes past the frame: stopped, counted, the link
    // quarantined; fail-closed drops from then on.
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
