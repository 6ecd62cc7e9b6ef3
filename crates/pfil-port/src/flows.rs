//! Many-flow traffic for the synthetic port ([`GenConfig::flows`]): the
//! frames of a connection tracker's benchmark. Flow `f` of `n` is UDP
//! from client `src_ip + 256 * (f / 16384)` (the third octet counts
//! up: 198.18.0.1, 198.18.1.1, ... never meets the server), port `1024 + f % 16384`, to server
//! `dst_ip`, port `dst_ports[0]`. Frames `0 .. 2n` set the flows up in
//! order, each one frame from the client then one back from the server
//! (the reply: a tracker sees the flow established); after that every
//! pair of frames is one flow, client then server, the flows visited in
//! a scattered order (a stride coprime with `n` near `0.618 n`), so
//! consecutive frames touch far-apart table entries, as real traffic
//! does, and every flow comes back once every `2n` frames.
//!
//! The frame is the port's template with its addresses, ports and IPv4
//! header checksum rewritten (the UDP checksum is zero: none).
#[cfg(doc)]
use crate::config::GenConfig;

/// Flows of 16 384 ports per client address.
const PORTS_PER_CLIENT: u32 = 16_384;

/// The next frames of `n` flows.
#[derive(Clone, Debug)]
pub struct FlowGen {
    n: u32,
    /// Frames written so far.
    k: u64,
    /// The flow of the established phase's current pair.
    cur: u32,
    stride: u32,
    client: u32,
    server: u32,
    server_port: u16,
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl FlowGen {
    /// `n` flows (at least 1) from clients counting up from `client` to
    /// `server:server_port`.
    pub fn new(n: u32, client: [u8; 4], server: [u8; 4], server_port: u16) -> FlowGen {
        let n = n.max(1);
        let mut stride = ((f64::from(n) * 0.618_034) as u32 | 1) % n;
        while n > 1 && gcd(stride, n) != 1 {
            stride = (stride + 2) % n;
        }
        FlowGen {
            n,
            k: 0,
            cur: 0,
            stride,
            client: u32::from_be_bytes(client),
            server: u32::from_be_bytes(server),
            server_port,
        }
    }

    /// The next frame's flow and direction (`true`: server to client);
    /// advances.
    pub fn next_flow(&mut self) -> (u32, bool) {
        let k = self.k;
        self.k += 1;
        let setup = 2 * u64::from(self.n);
        if k < setup {
            return ((k / 2) as u32, k % 2 == 1);
        }
        let f = self.cur;
        let reply = (k - setup) % 2 == 1;
        if reply {
            self.cur += self.stride;
            if self.cur >= self.n {
                self.cur -= self.n;
            }
        }
        (f, reply)
    }

    /// Rewrite `frame` (an Ethernet IPv4 UDP frame with a 20-byte IP
    /// header, at least 42 bytes) as the next frame.
    pub fn write(&mut self, frame: &mut [u8]) {
        let (f, reply) = self.next_flow();
        let client = self.client.wrapping_add((f / PORTS_PER_CLIENT) << 8);
        let cport = 1024 + (f % PORTS_PER_CLIENT) as u16;
        let (src, sp, dst, dp) = if reply {
            (self.server, self.server_port, client, cport)
        } else {
            (client, cport, self.server, self.server_port)
        };
        frame[26..30].copy_from_slice(&src.to_be_bytes());
        frame[30..34].copy_from_slice(&dst.to_be_bytes());
        frame[34..36].copy_from_slice(&sp.to_be_bytes());
        frame[36..38].copy_from_slice(&dp.to_be_bytes());
        frame[40] = 0;
        frame[41] = 0;
        frame[24] = 0;
        frame[25] = 0;
        let mut sum = 0u32;
        for c in frame[14..34].chunks_exact(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        frame[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn every_flow_is_set_up_then_visited_once_a_round_both_ways() {
        for n in [1u32, 2, 3, 10, 1000, 1024, 65_536, 100_003] {
            let mut g = FlowGen::new(n, [198, 18, 0, 1], [198, 18, 0, 2], 53);
            for f in 0..n {
                assert_eq!(g.next_flow(), (f, false), "n {n}");
                assert_eq!(g.next_flow(), (f, true), "n {n}");
            }
            let mut seen = HashMap::new();
            let mut last = None;
            for _ in 0..n {
                let (f, r) = g.next_flow();
                assert!(!r);
                assert_eq!(g.next_flow(), (f, true));
                *seen.entry(f).or_insert(0) += 1;
                if n > 10 {
                    assert_ne!(
                        last.map(|l: u32| l + 1),
                        Some(f),
                        "consecutive flows scattered"
                    );
                }
                last = Some(f);
            }
            assert_eq!(seen.len(), n as usize, "n {n}: every flow once a round");
        }
    }

    #[test]
    fn frames_carry_the_flow_and_a_right_header_checksum() {
        let mut g = FlowGen::new(20_000, [198, 18, 0, 1], [198, 18, 0, 2], 53);
        let mut frame = vec![0u8; 60];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[23] = 17;
        for _ in 0..2 * 16_385 {
            g.write(&mut frame);
        }
        // Flow 16 384: the second client, port 1024; this frame its reply.
        assert_eq!(&frame[26..30], &[198, 18, 0, 2]);
        assert_eq!(&frame[30..34], &[198, 18, 1, 1]);
        assert_eq!(u16::from_be_bytes([frame[36], frame[37]]), 1024);
        g.write(&mut frame);
        assert_eq!(&frame[26..30], &[198, 18, 1, 1]);
        assert_eq!(u16::from_be_bytes([frame[34], frame[35]]), 1025);
        let mut sum = 0u32;
        for c in frame[14..34].chunks_exact(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff, "the header sums to all ones");
    }
}
