//! The parsed headers as plain structs ([`Packet::headers`](super::Packet::headers)).

use std::net::IpAddr;

use super::L4;

/// The network and transport headers of a packet, as far as they parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Headers {
    /// The EtherType of an Ethernet frame (after VLAN tags), `None` for IP heads.
    pub ether_type: Option<u16>,
    /// The IP layer, if the packet is IPv4 or IPv6.
    pub ip: Option<IpHeaders>,
    /// The transport layer, if it is UDP or TCP.
    pub transport: Option<Transport>,
}

/// The fields of an IPv4 or IPv6 header that filters commonly match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IpHeaders {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Protocol (IPv4) or final next-header (IPv6) number, e.g. 17 for UDP.
    pub protocol: u8,
    /// Offset of the IP header in the frame.
    pub offset: usize,
}

/// A UDP or TCP header's ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transport {
    /// `Udp` or `Tcp`.
    pub protocol: L4,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Offset of the transport payload in the frame.
    pub payload_offset: usize,
}
