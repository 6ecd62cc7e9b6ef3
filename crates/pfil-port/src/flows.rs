//! Many-flow traffic for the synthetic port ([`GenConfig::flows`]): the
//! frames of a connection tracker's benchmark. Flow `f` of `n` is UDP
//! (or TCP: [`GenConfig::flow_proto`]) from client `src_ip + 256 * (f /
//! 16384)` (the third octet counts up: 198.18.0.1, 198.18.1.1, ...
//! never meets the server), port `1024 + f % 16384`, to server `dst_ip`,
//! port `dst_ports[0]`. Frames `0 .. 2n` set the flows up in order, each
//! one frame from the client then one back from the server (the reply: a
//! tracker sees the flow established); after that every pair of frames
//! is one flow, client then server, the flows visited in a scattered
//! order (a stride coprime with `n` near `0.618 n`), so consecutive
//! frames touch far-apart table entries, as real traffic does, and every
//! flow comes back once every `2n` frames.
//!
//! The frame is the port's template with its addresses, ports and IPv4
//! header checksum rewritten (the UDP checksum is zero: none). A TCP
//! flow's set-up is its SYN and the server's SYN-ACK; each pair after is
//! the client's ACK and the server's, without data (sequence numbers
//! that stay in every window however often they come back: the
//! tracker's window checks run on each), the initial sequence numbers
//! derived from the flow's number. The TCP checksum is not computed
//! (zero): no tracker checks it.
#[cfg(doc)]
use crate::config::GenConfig;

/// The protocol of [`GenConfig::flows`] traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowProto {
    /// A UDP datagram each way.
    #[default]
    Udp,
    /// TCP: a handshake (SYN, SYN-ACK), then ACKs each way.
    Tcp,
}

impl std::str::FromStr for FlowProto {
    type Err = String;
    fn from_str(s: &str) -> Result<FlowProto, String> {
        match s {
            "udp" => Ok(FlowProto::Udp),
            "tcp" => Ok(FlowProto::Tcp),
            _ => Err(format!("`{s}`: the flows' protocol is udp or tcp")),
        }
    }
}

/// TCP flags of the frames [`FlowGen`] writes.
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

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
    proto: FlowProto,
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl FlowGen {
    /// `n` flows (at least 1) of `proto` from clients counting up from
    /// `client` to `server:server_port`.
    pub fn new(
        n: u32,
        client: [u8; 4],
        server: [u8; 4],
        server_port: u16,
        proto: FlowProto,
    ) -> FlowGen {
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
            proto,
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

    /// The flows' protocol.
    pub fn proto(&self) -> FlowProto {
        self.proto
    }

    /// Rewrite `frame` (an Ethernet IPv4 frame with a 20-byte IP header
    /// of the flows' protocol: UDP, at least 42 bytes; TCP, at least 54
    /// bytes with a 20-byte TCP header) as the next frame.
    pub fn write(&mut self, frame: &mut [u8]) {
        let setup = self.k < 2 * u64::from(self.n);
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
        match self.proto {
            FlowProto::Udp => {
                frame[40] = 0;
                frame[41] = 0;
            }
            FlowProto::Tcp => {
                // Initial sequence numbers of the flow's two sides.
                let c = f.wrapping_mul(0x9e37_79b9);
                let s = c ^ 0x5bd1_e995;
                let (seq, ack, flags) = match (setup, reply) {
                    (true, false) => (c, 0, SYN),
                    (true, true) => (s, c.wrapping_add(1), SYN | ACK),
                    (false, false) => (c.wrapping_add(1), s.wrapping_add(1), ACK),
                    (false, true) => (s.wrapping_add(1), c.wrapping_add(1), ACK),
                };
                frame[38..42].copy_from_slice(&seq.to_be_bytes());
                frame[42..46].copy_from_slice(&ack.to_be_bytes());
                frame[47] = flags;
                frame[50] = 0;
                frame[51] = 0;
            }
        }
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
            let mut g = FlowGen::new(n, [198, 18, 0, 1], [198, 18, 0, 2], 53, FlowProto::Udp);
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
        let mut g = FlowGen::new(20_000, [198, 18, 0, 1], [198, 18, 0, 2], 53, FlowProto::Udp);
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

    /// TCP flows: the set-up is each flow's SYN and SYN-ACK (the server
    /// acknowledging the client's sequence number), then ACKs each way
    /// whose numbers acknowledge the other side's SYN; the frames parse
    /// as TCP and the IP header's checksum is right.
    #[test]
    fn tcp_flows_shake_hands_then_acknowledge() {
        let cfg = crate::GenConfig {
            flows: 5,
            flow_proto: FlowProto::Tcp,
            ..crate::GenConfig::default()
        };
        let t = cfg.templates(2048).unwrap();
        let mut g = FlowGen::new(5, [198, 18, 0, 1], [198, 18, 0, 2], 80, FlowProto::Tcp);
        let mut isn = std::collections::HashMap::new();
        for k in 0..30 {
            let mut frame = t[0].clone();
            g.write(&mut frame);
            let p = etherparse::SlicedPacket::from_ethernet(&frame).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
                panic!("frame {k}: not IPv4")
            };
            assert_eq!(ip.header().total_len(), 40, "no data");
            let h = ip.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum(), "frame {k}");
            let Some(etherparse::TransportSlice::Tcp(tcp)) = &p.transport else {
                panic!("frame {k}: not TCP")
            };
            let server = tcp.source_port() == 80;
            let cport = if server {
                tcp.destination_port()
            } else {
                tcp.source_port()
            };
            let (syn, ack) = (tcp.syn(), tcp.ack());
            match (k < 10, server) {
                (true, false) => {
                    assert!(syn && !ack, "frame {k}: SYN");
                    isn.insert(cport, (tcp.sequence_number(), 0));
                }
                (true, true) => {
                    assert!(syn && ack, "frame {k}: SYN-ACK");
                    let c = isn.get_mut(&cport).unwrap();
                    assert_eq!(tcp.acknowledgment_number(), c.0.wrapping_add(1));
                    c.1 = tcp.sequence_number();
                }
                (false, false) => {
                    let (c, s) = isn[&cport];
                    assert!(!syn && ack, "frame {k}: ACK");
                    assert_eq!(tcp.sequence_number(), c.wrapping_add(1));
                    assert_eq!(tcp.acknowledgment_number(), s.wrapping_add(1));
                }
                (false, true) => {
                    let (c, s) = isn[&cport];
                    assert!(!syn && ack, "frame {k}: ACK back");
                    assert_eq!(tcp.sequence_number(), s.wrapping_add(1));
                    assert_eq!(tcp.acknowledgment_number(), c.wrapping_add(1));
                }
            }
        }
        assert_eq!(isn.len(), 5);
    }
}
