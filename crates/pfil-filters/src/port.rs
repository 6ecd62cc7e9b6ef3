//! Drop UDP packets to one destination port.

use pfil::{Ctx, Filter, Packet, Verdict};

/// Drops UDP packets whose destination port is the given one; passes the
/// rest, including frames that do not parse.
#[derive(Clone, Copy, Debug)]
pub struct DropUdpPort(pub u16);

impl Filter for DropUdpPort {
    #[inline]
    fn filter(&self, pkt: &mut Packet<'_>, _ctx: &Ctx<'_>) -> Verdict {
        // The parse cache's view: on a 64-byte UDP frame the first call
        // decodes at fixed offsets, later hooks read one cached offset.
        if pkt.udp_dst_port() == Some(self.0) {
            Verdict::Dropped
        } else {
            Verdict::Pass
        }
    }

    fn spec(&self) -> Option<String> {
        Some(format!("drop-udp:{}", self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfil::{Dir, Dirs, PacketKind, Placement, Registry};

    fn udp(dst: u16) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(1000, dst);
        let mut v = Vec::new();
        b.write(&mut v, &[0; 18]).unwrap();
        v
    }

    #[test]
    fn drops_only_that_port() {
        let reg = Registry::new();
        let head = reg
            .register_head("h", PacketKind::Ethernet, Dirs::IN)
            .unwrap();
        reg.add_hook("udp:9", PacketKind::Ethernet, Dirs::IN, DropUdpPort(9))
            .unwrap();
        reg.link("h", Dir::In, "udp:9", Placement::Prepend).unwrap();
        let mut w = reg.worker().unwrap();
        let (mut a, mut b, mut junk) = (udp(9), udp(10), vec![1u8; 30]);
        assert_eq!(
            head.run_one(Dir::In, &mut w, &mut Packet::new(&mut a)),
            Verdict::Dropped
        );
        assert_eq!(
            head.run_one(Dir::In, &mut w, &mut Packet::new(&mut b)),
            Verdict::Pass
        );
        assert_eq!(
            head.run_one(Dir::In, &mut w, &mut Packet::new(&mut junk)),
            Verdict::Pass
        );
    }
}
