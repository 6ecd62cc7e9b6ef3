//! Filters for pfil: the null hook, the counting hook, a UDP port filter,
//! and the hooks of the lock study (mutex, rwlock, read-mostly).
//!
//! Every filter here follows the [`pfil::Filter`] contract: no blocking
//! beyond the lock it exists to measure, no allocation, no panic.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod count;
mod lockstudy;
mod port;

pub use count::{Count, DirCount};
pub use lockstudy::{BrLockHook, EpochHook, MutexHook, RwLockHook};
pub use port::DropUdpPort;

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
}

/// The built-in filters by name, as `pfild --hook` knows them.
pub const BUILTIN: &[&str] = &["null", "count", "mutex", "rwlock", "brlock", "epoch"];

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
