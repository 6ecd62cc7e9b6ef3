//! The guide's example program (examples/xdp/port_filter.c), compiled
//! with clang and run as an `xdp` hook with its map filled as the guide
//! fills it; as root, checked against the kernel frame for frame.

use pfil::{Ctx, Dir, Filter, Packet, Verdict};
use pfil_xdp::XdpFilter;

mod clang;
mod oracle;

#[test]
fn port_filter_example_drops_the_ports_in_its_map() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/xdp");
    let Some(obj) = clang::compile_in(&dir, "port_filter") else {
        return;
    };
    let f = XdpFilter::from_config(&format!("@{}", obj.display()), 1).unwrap();
    let ports = f.program().map("blocked_ports").unwrap();
    // `pfilctl map xdp:1 blocked_ports update key 0 53 value 1`
    ports.update(&[0, 53], &[1], 0).unwrap();
    let ctx = Ctx::new("h", Dir::In, 0);
    let verdict = |mut frame: Vec<u8>| f.filter(&mut Packet::new(&mut frame), &ctx);
    let udp = |dport: u16| {
        let mut fr = oracle::frames::eth([2; 6], [4; 6], 0, 0x0800);
        fr.extend(oracle::frames::ipv4(
            [198, 18, 0, 1],
            [198, 18, 0, 2],
            17,
            &oracle::frames::l4(17, 999, dport),
        ));
        fr
    };
    assert_eq!(verdict(udp(53)), Verdict::Dropped);
    assert_eq!(verdict(udp(54)), Verdict::Pass);
    let stats = f.program().map("stats").unwrap();
    let drops = stats.lookup(&1u32.to_le_bytes()).unwrap().unwrap();
    assert_eq!(drops[..8], 1u64.to_le_bytes());

    if !oracle::kernel_here() {
        return;
    }
    oracle::pin_cpu();
    let mut p = oracle::Pair::new(&std::fs::read(&obj).unwrap(), None);
    p.set("blocked_ports", &[0, 53], &[1]);
    p.set("blocked_ports", &[0, 22], &[1]);
    for (what, frame) in oracle::frames::generated() {
        p.run(&frame, &what);
    }
    p.same_maps("port_filter");
}
