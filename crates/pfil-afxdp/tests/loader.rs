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
    assert!(
        !a.has_xdp("v0"),
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
