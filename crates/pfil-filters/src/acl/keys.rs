//! The lookup key of a packet: the batch path's IPv4 keys and the
//! general one.

use super::*;

/// The lookup key of a packet (see the [module docs](crate::acl)).
pub fn key_of(p: &Packet<'_>) -> Key {
    key_v4_of(p).map_or_else(|| key_of_reference(p), |k| k.key())
}

/// The IPv4 key of an IPv4 packet (`None` for anything else): a plain
/// UDP frame's (untagged, 20-byte IPv4 header) straight from its 5-tuple,
/// read at fixed offsets on the first look and from the packet after;
/// every other shape through [`key_v4_general`].
#[inline]
pub fn key_v4_of(p: &Packet<'_>) -> Option<KeyV4> {
    let mut k = KeyV4::default();
    key_v4_into(p, &mut k).then_some(k)
}

/// [`key_v4_of`] written into `k` (false, `k` unchanged, for anything
/// but IPv4): the batch path, which writes each key where the classifier
/// reads it. (Returning the key went through a temporary on the stack,
/// written field by field and copied with wide loads, which stalled on
/// store forwarding once per packet.)
#[inline(always)]
pub fn key_v4_into(p: &Packet<'_>, k: &mut KeyV4) -> bool {
    if let Some(t) = p.plain_five_tuple_v4() {
        if t.protocol == 17 {
            // Plain UDP: the 5-tuple is the whole key.
            *k = KeyV4 {
                src: t.src,
                dst: t.dst,
                sport: t.src_port,
                dport: t.dst_port,
                proto: 17,
                has: has::PORTS,
                ..KeyV4::default()
            };
            return true;
        }
    }
    match key_v4_general(p) {
        Some(g) => {
            *k = g;
            true
        }
        None => false,
    }
}

/// [`key_v4_of`] for every shape: the 5-tuple in one call, then what the
/// shape adds (a VLAN id, TCP flags, ICMP type and code).
#[inline(never)]
pub fn key_v4_general(p: &Packet<'_>) -> Option<KeyV4> {
    let t = p.five_tuple_v4()?;
    let v = p.parsed()?;
    let mut k = KeyV4 {
        src: t.src,
        dst: t.dst,
        proto: t.protocol,
        ..KeyV4::default()
    };
    if v.vlan_tags() > 0 {
        k.vlan = v.vlan_id();
    }
    match v.l4() {
        Some(L4::Udp) => {
            (k.sport, k.dport) = (t.src_port, t.dst_port);
            k.has = has::PORTS;
        }
        Some(L4::Tcp) => {
            (k.sport, k.dport) = (t.src_port, t.dst_port);
            k.has = has::PORTS;
            if let Some(fl) = v.tcp_flags() {
                k.tcp_flags = fl;
                k.has |= has::TCP;
            }
        }
        _ => {
            if let Some((ty, c)) = v.icmp() {
                k.icmp_type = ty;
                k.icmp_code = c;
                k.has = has::ICMP;
            }
        }
    }
    Some(k)
}

/// [`key_of`] through the parse cache's accessors only, field by field,
/// for every shape: the reference its IPv4 fast path is tested against
/// (and the path it takes for everything else).
pub fn key_of_reference(p: &Packet<'_>) -> Key {
    let mut k = Key::default();
    let kind = p.kind();
    // The parse cache's view: fixed offsets for the common shapes, read
    // field by field, nothing rebuilt.
    let Some(v) = p.parsed() else {
        let f = p.frame();
        match kind {
            PacketKind::Ethernet if f.len() >= 14 => {
                let tpid = u16::from_be_bytes([f[12], f[13]]);
                if (tpid == 0x8100 || tpid == 0x88a8) && f.len() >= 16 {
                    k.vlan = Some(u16::from_be_bytes([f[14], f[15]]) & 0x0fff);
                }
                k.ethertype = tpid;
            }
            PacketKind::Ethernet => {}
            PacketKind::Ipv6 => k.ethertype = ETHERTYPE_IPV6,
            PacketKind::Ipv4 => k.ethertype = ETHERTYPE_IPV4,
        }
        return k;
    };
    k.vlan = v.vlan_id();
    if let Some(e) = v.ether_type() {
        k.ethertype = e;
    }
    match v.ip_version() {
        Some(4) => {
            let (Some(s), Some(d)) = (v.src_v4(), v.dst_v4()) else {
                return k;
            };
            k.ethertype = ETHERTYPE_IPV4;
            k.src = u128::from(u32::from_be_bytes(s));
            k.dst = u128::from(u32::from_be_bytes(d));
        }
        Some(6) => {
            let (Some(s), Some(d)) = (v.src_v6(), v.dst_v6()) else {
                return k;
            };
            k.ethertype = ETHERTYPE_IPV6;
            k.src = u128::from_be_bytes(s);
            k.dst = u128::from_be_bytes(d);
        }
        _ => {
            if kind != PacketKind::Ethernet {
                k.ethertype = match kind {
                    PacketKind::Ipv6 => ETHERTYPE_IPV6,
                    _ => ETHERTYPE_IPV4,
                };
            }
            return k;
        }
    }
    k.has = has::IP;
    k.proto = v.protocol().unwrap_or(0);
    if let Some((sp, dp)) = v.ports() {
        k.has |= has::PORTS;
        k.sport = sp;
        k.dport = dp;
        if let Some(fl) = v.tcp_flags() {
            k.tcp_flags = fl;
            k.has |= has::TCP;
        }
    } else if let Some((t, c)) = v.icmp() {
        k.icmp_type = t;
        k.icmp_code = c;
        k.has |= has::ICMP;
    }
    k
}
