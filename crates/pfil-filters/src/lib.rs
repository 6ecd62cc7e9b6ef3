//! Filters for pfil: the null hook, the counting hook, a UDP port filter
//! and the [`Acl`] classifier, and the [`Catalog`] that builds them from
//! text specs (`count`, `drop-udp:53`, `acl:@rules.txt`) for pfild's
//! `--hook` and a control plane.
//!
//! Every filter here follows the [`pfil::Filter`] contract: no blocking, no
//! allocation, no panic. The exception is [`ct`]: its table grows a
//! chunk of 1024 entries (96 KiB) at a time as flows come, allocated by
//! the packet that needs it (at most once per 1024 new flows of a
//! shard), and a packet waits for its shard's lock while another worker
//! or a `states` listing holds it. (The lock-study hooks, which block on purpose,
//! are benchmark fixtures and live in `pfil-bench`.)

// Unsafe code only where libpcap's compiler is forked off (bpf::sandbox).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod acl;
pub mod bpf;
mod catalog;
mod count;
pub mod ct;
mod port;
pub mod ratelimit;

pub use acl::{Acl, RuleHits};
pub use bpf::{Bpf, BpfAction};
pub use catalog::{BuildCtx, Catalog, CatalogError, Factory, FactoryError, Module};
pub use count::{Count, DirCount};
pub use ct::{Ct, CtConfig};
/// The `xdp` module's filter (an eBPF XDP object), from `pfil-xdp`.
pub use pfil_xdp::XdpFilter as Xdp;
pub use port::DropUdpPort;
pub use ratelimit::{RateConfig, RateLimit};

use pfil::{Ctx, Filter, Packet, Verdict};

/// The null hook: passes every packet and does nothing else. Measures the
/// cost of the framework itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Null;

impl Filter for Null {
    #[inline]
    fn filter(&self, _pkt: &mut Packet<'_>, _ctx: &Ctx<'_>) -> Verdict {
        Verdict::Pass
    }

    fn spec(&self) -> Option<String> {
        Some("null".into())
    }
}

/// `s` as an error message shows it: at most `max` characters, then `…`
/// and how long it was.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}… ({} bytes)", &s[..at], s.len()),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfil::{Dir, Dirs, PacketKind, Placement, Registry};

    #[test]
    fn null_passes_everything() {
        let reg = Registry::new();
        let head = reg
            .register_head("h", PacketKind::Ethernet, Dirs::BOTH)
            .unwrap();
        reg.add_hook("null:x", PacketKind::Ethernet, Dirs::BOTH, Null)
            .unwrap();
        reg.link("h", Dir::In, "null:x", Placement::Prepend)
            .unwrap();
        let mut w = reg.worker().unwrap();
        let mut f = [0u8; 1];
        assert_eq!(
            head.run_one(Dir::In, &mut w, &mut Packet::new(&mut f)),
            Verdict::Pass
        );
        assert_eq!(reg.chain("h", Dir::In).unwrap()[0].counters.passed, 1);
    }
}
