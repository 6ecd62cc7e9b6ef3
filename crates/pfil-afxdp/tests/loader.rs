//! The raw bpf(2) loader: attach, see it in `ip link`, detach on drop.

mod common;
use common::*;
use pfil_afxdp::{XdpMode, XdpProgram};

#[test]
fn attach_shows_in_ip_link_and_detaches_on_drop() {
    if !require_root("attach_shows_in_ip_link_and_detaches_on_drop") {
        return;
    }
    init_tracing();
    let a = Netns::new("la");
    let b = Netns::new("lb");
    veth_queues(&a, "v0", &b, "v1", 0, 1);
    let prog = a
        .run(|| {
            assert_eq!(pfil_afxdp::queue_count("v0").unwrap(), 1);
            XdpProgram::attach("v0", 1, XdpMode::Auto).expect("attach")
        })
        .join()
        .unwrap();
    let mode = prog.mode();
    assert_eq!(mode, XdpMode::Native, "veth supports native XDP");
    assert!(
        a.has_xdp("v0"),
        "{}",
        a.exec(&["ip", "-d", "link", "show", "v0"])
    );
    drop(prog);
    // Closing the bpf_link fd detaches asynchronously (the kernel frees
    // the link from a work item): wait for it, bounded.
    assert!(
        wait_for(|| !a.has_xdp("v0")),
        "{}",
        a.exec(&["ip", "-d", "link", "show", "v0"])
    );
}

#[test]
fn generic_mode_attaches_and_detaches() {
    if !require_root("generic_mode_attaches_and_detaches") {
        return;
    }
    init_tracing();
    let a = Netns::new("ga");
    let b = Netns::new("gb");
    veth_queues(&a, "v0", &b, "v1", 0, 1);
    let prog = a
        .run(|| XdpProgram::attach("v0", 1, XdpMode::Generic).expect("attach generic"))
        .join()
        .unwrap();
    assert_eq!(prog.mode(), XdpMode::Generic);
    let link = a.exec(&["ip", "-d", "link", "show", "v0"]);
    assert!(link.contains("xdpgeneric"), "{link}");
    drop(prog);
    // Closing the bpf_link fd detaches asynchronously (the kernel frees
    // the link from a work item): wait for it, bounded.
    assert!(
        wait_for(|| !a.has_xdp("v0")),
        "{}",
        a.exec(&["ip", "-d", "link", "show", "v0"])
    );
}

#[test]
fn bad_input_errors() {
    if !require_root("bad_input_errors") {
        return;
    }
    let a = Netns::new("ea");
    let b = Netns::new("eb");
    veth_queues(&a, "v0", &b, "v1", 0, 1);
    a.run(|| {
        let e = XdpProgram::attach("nosuch0", 1, XdpMode::Auto).unwrap_err();
        assert!(
            matches!(e, pfil_afxdp::Error::NoSuchInterface { .. }),
            "{e}"
        );
        assert!(e.to_string().contains("ip link show"), "{e}");
        let mut u = pfil_afxdp::Umem::new(Default::default()).unwrap();
        let e = u.open(pfil_afxdp::PortConfig::new("v0", 5)).unwrap_err();
        assert!(
            matches!(e, pfil_afxdp::Error::QueueOutOfRange { count: 1, .. }),
            "{e}"
        );
        let e = u
            .open(pfil_afxdp::PortConfig::new("nosuch0", 0))
            .unwrap_err();
        assert!(
            matches!(e, pfil_afxdp::Error::NoSuchInterface { .. }),
            "{e}"
        );
        let e = pfil_afxdp::Umem::new(pfil_afxdp::UmemConfig {
            ring: 2048,
            frames: u32::MAX,
            frame_size: 4096,
        })
        .unwrap_err();
        assert!(matches!(e, pfil_afxdp::Error::UmemTooLarge { .. }), "{e}");
        let e = pfil_afxdp::Umem::new(pfil_afxdp::UmemConfig {
            ring: 2048,
            frames: 10,
            frame_size: 1000,
        })
        .unwrap_err();
        assert!(matches!(e, pfil_afxdp::Error::Config(_)), "{e}");
        // Two programs on one interface: the second is refused.
        let p = XdpProgram::attach("v0", 1, XdpMode::Auto).unwrap();
        let e = XdpProgram::attach("v0", 1, XdpMode::Auto).unwrap_err();
        assert!(matches!(e, pfil_afxdp::Error::XdpBusy { .. }), "{e}");
        drop(p);
    })
    .join()
    .unwrap();
}

/// A shared UMEM: parts own disjoint frames, refuse each other's frames,
/// cannot both take one queue, and are moved to other threads.
#[test]
fn shared_umem_parts() {
    if !require_root("shared_umem_parts") {
        return;
    }
    init_tracing();
    let a = Netns::new("sa");
    let b = Netns::new("sb");
    veth_queues(&a, "v0", &b, "v1", 0, 2);
    let cfg = pfil_afxdp::UmemConfig {
        frames: 256,
        frame_size: 2048,
        ring: 256,
    };
    let parts = a
        .run(move || {
            let mut s = pfil_afxdp::SharedUmem::new(cfg, 2).unwrap();
            assert_eq!(s.len(), 2);
            let mut pc = pfil_afxdp::PortConfig::new("v0", 0).tx_only();
            // Within the frame budget of a 256-frame part.
            pc.tx_size = 64;
            s.part(0).open(pc.clone()).unwrap();
            // Queue 0 belongs to part 0.
            let e = s.part(1).open(pc.clone()).unwrap_err();
            assert!(
                matches!(e, pfil_afxdp::Error::QueueBusy { queue: 0, .. }),
                "{e}"
            );
            pc.queue = 1;
            s.part(1).open(pc).unwrap();
            s.into_parts()
        })
        .join()
        .unwrap();
    let (r0, r1) = (parts[0].frame_addrs(), parts[1].frame_addrs());
    assert_eq!(
        (r0.clone(), r1.clone()),
        (0..256 * 2048, 256 * 2048..512 * 2048)
    );
    // Each part runs on its own thread; a frame of one is refused by the other.
    let (tx, rx) = std::sync::mpsc::channel();
    let handles: Vec<_> = parts
        .into_iter()
        .map(|mut u| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                assert_eq!(u.parts(), 2);
                let mut f = u.alloc().unwrap();
                assert!(u.frame_addrs().contains(&f.addr()));
                u.area().buffer(&mut f)[0] = 7;
                tx.send(f).unwrap();
                u
            })
        })
        .collect();
    drop(tx);
    let mut parts: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut frames: Vec<_> = rx.iter().collect();
    frames.sort_by_key(|f| f.addr());
    assert!(frames[0].addr() < frames[1].addr());
    let f1 = frames.pop().unwrap();
    let f0 = frames.pop().unwrap();
    let e = parts[0].recycle(f1).unwrap_err();
    assert!(matches!(e, pfil_afxdp::Error::ForeignFrame), "{e}");
    let e = parts[1].recycle(f0).unwrap_err();
    assert!(matches!(e, pfil_afxdp::Error::ForeignFrame), "{e}");
    // The refused tokens were dropped (leaked, still counted as app).
    for u in &parts {
        let c = u.counts();
        assert!(c.adds_up() && c.total == 256 && c.app == 1, "{c:?}");
    }
}
