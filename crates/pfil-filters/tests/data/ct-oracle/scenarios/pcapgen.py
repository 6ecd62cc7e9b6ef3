"""Tiny pcap writer for the ct oracle scenarios (classic pcap, Ethernet,
link type 1): IPv4/IPv6, TCP (with options), UDP, ICMP/ICMPv6, checksums
computed."""
import ipaddress
import struct

FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80

MAC_A = bytes.fromhex("020000c70001")
MAC_B = bytes.fromhex("020000c70002")


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def addr(a):
    return ipaddress.ip_address(a).packed


def is6(a):
    return ipaddress.ip_address(a).version == 6


def pseudo(src, dst, proto, length):
    s, d = addr(src), addr(dst)
    if len(s) == 4:
        return s + d + struct.pack("!BBH", 0, proto, length)
    return s + d + struct.pack("!IxxxB", length, proto)


def ip4(src, dst, proto, payload, ident=1, df=True, frag_off=0, mf=False, ttl=64,
        options=b"", tos=0, total_len=None):
    ihl = 5 + len(options) // 4
    flags = (0x4000 if df else 0) | (0x2000 if mf else 0) | (frag_off // 8)
    tl = total_len if total_len is not None else ihl * 4 + len(payload)
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, tl, ident, flags, ttl, proto, 0,
                    addr(src), addr(dst)) + options
    c = csum(h)
    h = h[:10] + struct.pack("!H", c) + h[12:]
    return h + payload


def ip6(src, dst, nh, payload, hlim=64):
    return struct.pack("!IHBB16s16s", 0x60000000, len(payload), nh, hlim, addr(src),
                       addr(dst)) + payload


def ip(src, dst, proto, payload, **kw):
    if is6(src):
        return ip6(src, dst, proto, payload)
    return ip4(src, dst, proto, payload, **kw)


def opts(*o):
    """TCP options: tuples ('mss', n), ('sackok',), ('ts', val, ecr), ('ws', n),
    ('nop',), ('sack', [(l, r), ...]), ('tfo', cookie_bytes), ('raw', bytes)."""
    b = b""
    for x in o:
        k = x[0]
        if k == "mss":
            b += struct.pack("!BBH", 2, 4, x[1])
        elif k == "sackok":
            b += b"\x04\x02"
        elif k == "ts":
            b += struct.pack("!BBII", 8, 10, x[1], x[2])
        elif k == "ws":
            b += struct.pack("!BBB", 3, 3, x[1])
        elif k == "nop":
            b += b"\x01"
        elif k == "sack":
            b += struct.pack("!BB", 5, 2 + 8 * len(x[1]))
            for l, r in x[1]:
                b += struct.pack("!II", l & 0xFFFFFFFF, r & 0xFFFFFFFF)
        elif k == "tfo":
            b += struct.pack("!BB", 34, 2 + len(x[1])) + x[1]
        elif k == "raw":
            b += x[1]
    while len(b) % 4:
        b += b"\x00"
    return b


def tcp_seg(src, sp, dst, dp, flags, seq, ack=0, data=b"", win=65535, options=b"", urg=0):
    if isinstance(data, int):
        data = bytes((0x61 + i % 26) for i in range(data))
    off = (20 + len(options)) // 4
    h = struct.pack("!HHIIBBHHH", sp, dp, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, off << 4,
                    flags, win, 0, urg) + options
    seg = h + data
    c = csum(pseudo(src, dst, 6, len(seg)) + seg)
    return seg[:16] + struct.pack("!H", c) + seg[18:]


def udp_dgram(src, sp, dst, dp, data=b"hello", length=None, zero_csum=False):
    ln = 8 + len(data) if length is None else length
    d = struct.pack("!HHHH", sp, dp, ln, 0) + data
    if not zero_csum:
        c = csum(pseudo(src, dst, 17, len(d)) + d)
        if c == 0:
            c = 0xFFFF
        d = d[:6] + struct.pack("!H", c) + d[8:]
    return d


def icmp4(ty, code, rest=b"\0\0\0\0", body=b""):
    m = struct.pack("!BBH", ty, code, 0) + rest + body
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]


def icmp6(src, dst, ty, code, rest=b"\0\0\0\0", body=b""):
    m = struct.pack("!BBH", ty, code, 0) + rest + body
    c = csum(pseudo(src, dst, 58, len(m)) + m)
    return m[:2] + struct.pack("!H", c) + m[4:]


def eth(ippkt, rev=False):
    et = 0x86DD if (ippkt[0] >> 4) == 6 else 0x0800
    s, d = (MAC_B, MAC_A) if rev else (MAC_A, MAC_B)
    return d + s + struct.pack("!H", et) + ippkt


class Cap:
    """Frames of one scenario, written with timestamps 10 ms apart (a
    later `gap` call adds idle time)."""

    def __init__(self):
        self.frames = []
        self.t = 1_700_000_000.0

    def gap(self, secs):
        self.t += secs

    def raw(self, frame):
        self.t += 0.01
        self.frames.append((self.t, frame))
        return frame

    def tcp(self, src, sp, dst, dp, flags, seq, ack=0, data=b"", win=65535, options=b"",
            urg=0, **ipkw):
        seg = tcp_seg(src, sp, dst, dp, flags, seq, ack, data, win, options, urg)
        return self.raw(eth(ip(src, dst, 6, seg, **ipkw)))

    def udp(self, src, sp, dst, dp, data=b"hello", **kw):
        ipkw = {k: kw.pop(k) for k in list(kw) if k in ("df", "ident", "options")}
        return self.raw(eth(ip(src, dst, 17, udp_dgram(src, sp, dst, dp, data, **kw), **ipkw)))

    def echo(self, src, dst, reply, ident, seq, code=0, data=b"pingpong"):
        rest = struct.pack("!HH", ident, seq)
        if is6(src):
            m = icmp6(src, dst, 129 if reply else 128, code, rest, data)
            return self.raw(eth(ip6(src, dst, 58, m)))
        return self.raw(eth(ip4(src, dst, 1, icmp4(0 if reply else 8, code, rest, data))))

    def icmp_error(self, src, dst, quoted_frame, ty=None, code=None, quote_len=None,
                   rest=b"\0\0\0\0", quoted_ip=None):
        """An ICMP(v6) error from src to dst quoting the IP packet of
        `quoted_frame` (its first `quote_len` bytes; default: IPv4 header +
        8 bytes, IPv6: as much as fits 1280)."""
        inner = quoted_ip if quoted_ip is not None else quoted_frame[14:]
        if is6(src):
            ty = 1 if ty is None else ty
            code = 4 if code is None else code
            q = inner[: (quote_len if quote_len is not None else 1232)]
            m = icmp6(src, dst, ty, code, rest, q)
            return self.raw(eth(ip6(src, dst, 58, m)))
        ty = 3 if ty is None else ty
        code = 3 if code is None else code
        ihl = (inner[0] & 0xF) * 4
        q = inner[: (quote_len if quote_len is not None else ihl + 8)]
        return self.raw(eth(ip4(src, dst, 1, icmp4(ty, code, rest, q), df=False)))

    def write(self, path):
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
            for t, fr in self.frames:
                sec = int(t)
                usec = int(round((t - sec) * 1e6))
                f.write(struct.pack("<IIII", sec, usec, len(fr), len(fr)))
                f.write(fr)
