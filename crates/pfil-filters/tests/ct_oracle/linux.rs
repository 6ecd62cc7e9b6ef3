//! Linux's conntrack as the oracle: two namespaces of the test's own,
//! `pfil-ct-*e` (the edge: veths `i0` and `o0`, IPv6 off) and
//! `pfil-ct-*f` (a router: `f0` and `f1`, forwarding on, every test
//! address routed out of `f1`, which has ARP off so nothing waits for a
//! neighbour). A frame sent on `i0` arrives on `f0`, goes through
//! conntrack and the `inet` forward chain, whose rules write the
//! packet's state and direction into its DSCP, and leaves by `f1`; the
//! test reads it on `o0`. One frame at a time: the state of each packet
//! is known before the next is sent. Both namespaces (and so the veths)
//! are deleted on drop, also when the test fails.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use pfil_testnet::Netns;

/// The forward chain's tags (DSCP values): state and direction.
const RULES: &str = "table inet pfilct {
  chain c {
    type filter hook forward priority 0; policy accept;
    ct state new ct direction original ip dscp set 1
    ct state new ct direction reply ip dscp set 7
    ct state established ct direction original ip dscp set 2
    ct state established ct direction reply ip dscp set 3
    ct state related ct direction original ip dscp set 4
    ct state related ct direction reply ip dscp set 5
    ct state invalid ip dscp set 6
    ct state untracked ip dscp set 8
    ct state new ct direction original ip6 dscp set 1
    ct state new ct direction reply ip6 dscp set 7
    ct state established ct direction original ip6 dscp set 2
    ct state established ct direction reply ip6 dscp set 3
    ct state related ct direction original ip6 dscp set 4
    ct state related ct direction reply ip6 dscp set 5
    ct state invalid ip6 dscp set 6
    ct state untracked ip6 dscp set 8
  }
}
";

/// The veths' MTU: large, so that captures taken on loopback or with
/// segmentation offload (IP packets up to 64 KiB) go through whole.
pub const MTU: usize = 65_000;

/// Linux's verdict on one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The frame came out tagged with this DSCP.
    Tag(u8),
    /// It did not come out within the wait.
    Lost,
}

/// The two namespaces and the sockets on `i0` (send) and `o0` (receive).
pub struct Oracle {
    edge: Netns,
    router: Netns,
    tx: OwnedFd,
    rx: OwnedFd,
    f0_mac: [u8; 6],
}

fn mac_of(ns: &Netns, dev: &str) -> [u8; 6] {
    let out = ns.exec(&["cat", &format!("/sys/class/net/{dev}/address")]);
    let mut m = [0u8; 6];
    for (i, x) in out.trim().split(':').enumerate().take(6) {
        m[i] = u8::from_str_radix(x, 16).expect("a MAC address");
    }
    m
}

/// An AF_PACKET socket bound to `dev`, made inside namespace `ns` (a
/// thread of its own enters it, so the test's threads stay where they
/// are; the socket stays in the namespace it was made in).
fn packet_socket(ns: &str, dev: &str) -> OwnedFd {
    let (ns, dev) = (ns.to_string(), dev.to_string());
    std::thread::spawn(move || {
        let path = std::ffi::CString::new(format!("/run/netns/{ns}")).expect("no NUL");
        // SAFETY: open(2) of a NUL-terminated path; the fd is owned below.
        let nsfd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(
            nsfd >= 0,
            "open /run/netns/{ns}: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: nsfd was just opened and is owned by nobody else.
        let nsfd = unsafe { OwnedFd::from_raw_fd(nsfd) };
        // SAFETY: setns(2) with a namespace fd we own; it changes only
        // this (short-lived) thread's network namespace.
        let r = unsafe { libc::setns(nsfd.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {ns}: {}", std::io::Error::last_os_error());
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: fd was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = std::ffi::CString::new(dev.clone()).expect("no NUL");
        // SAFETY: if_nametoindex reads a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(ifindex > 0, "no {dev} in {ns}");
        // SAFETY: sockaddr_ll is plain data; all zero is a valid value.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto;
        sa.sll_ifindex = ifindex as i32;
        // SAFETY: bind(2) with a sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind {dev}: {}", std::io::Error::last_os_error());
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 300_000,
        };
        // SAFETY: setsockopt(2) with a timeval of the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        assert_eq!(r, 0, "SO_RCVTIMEO: {}", std::io::Error::last_os_error());
        fd
    })
    .join()
    .expect("the socket thread")
}

impl Oracle {
    /// Build the namespaces, veths, routes, sysctls and rules. Linux's
    /// TCP tracking is set to pick up no flow mid-stream
    /// (`nf_conntrack_tcp_loose=0`, pf's strict behaviour) and not to
    /// check checksums (the `ct` hook does not either; the frames'
    /// checksums are right all the same).
    pub fn new() -> Oracle {
        let edge = Netns::new_prefixed("pfil-ct-", "e");
        let router = Netns::new_prefixed("pfil-ct-", "f");
        for (a, b) in [("i0", "f0"), ("o0", "f1")] {
            edge.exec(&[
                "ip",
                "link",
                "add",
                a,
                "type",
                "veth",
                "peer",
                "name",
                b,
                "netns",
                &router.name,
            ]);
        }
        for k in ["all", "default"] {
            router.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{k}.disable_ipv6=0"),
            ]);
        }
        for d in ["f0", "f1"] {
            router.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{d}.disable_ipv6=0"),
            ]);
            router.exec(&["sysctl", "-qw", &format!("net.ipv4.conf.{d}.rp_filter=0")]);
            router.exec(&["ip", "link", "set", d, "up"]);
        }
        router.exec(&["ip", "link", "set", "f1", "arp", "off"]);
        for d in ["i0", "o0"] {
            edge.exec(&["ip", "link", "set", d, "mtu", &MTU.to_string(), "up"]);
        }
        for d in ["f0", "f1"] {
            router.exec(&["ip", "link", "set", d, "mtu", &MTU.to_string()]);
        }
        #[rustfmt::skip]
        router.exec(&[
            "sysctl", "-qw",
            "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
            "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
            "net.netfilter.nf_conntrack_checksum=0", "net.netfilter.nf_conntrack_tcp_loose=0",
        ]);
        router.exec(&["ip", "route", "add", "198.18.0.0/15", "dev", "f1"]);
        router.exec(&["ip", "-6", "route", "add", "2001:2::/48", "dev", "f1"]);
        let rules = std::env::temp_dir().join(format!("pfil-ct-oracle-{}.nft", std::process::id()));
        std::fs::write(&rules, RULES).expect("write the nft rules");
        router.exec(&["nft", "-f", rules.to_str().expect("a UTF-8 path")]);
        let _ = std::fs::remove_file(&rules);
        let f0_mac = mac_of(&router, "f0");
        let tx = packet_socket(&edge.name, "i0");
        let rx = packet_socket(&edge.name, "o0");
        Oracle {
            edge,
            router,
            tx,
            rx,
            f0_mac,
        }
    }

    /// Linux's TCP pick-up: mid-stream too (`nf_conntrack_tcp_loose=1`,
    /// against the hook's `tcp loose`) or from a SYN only (`=0`, against
    /// `tcp strict`). Flushes the table.
    pub fn set_tcp_loose(&self, loose: bool) {
        let v = format!("net.netfilter.nf_conntrack_tcp_loose={}", u8::from(loose));
        self.router.exec(&["sysctl", "-qw", &v]);
        self.flush();
    }

    /// Forget every flow (between cases).
    pub fn flush(&self) {
        // `conntrack -F` exits 1 when the table was empty on some
        // versions: ignore its status, check the table is empty after.
        let _ = std::process::Command::new("ip")
            .args(["netns", "exec", &self.router.name, "conntrack", "-F"])
            .output();
        self.drain();
    }

    fn drain(&self) {
        let mut buf = vec![0u8; MTU + 14];
        // SAFETY: recv(2) into a buffer of the size passed, non-blocking.
        while unsafe {
            libc::recv(
                self.rx.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        } > 0
        {}
    }

    /// Send `frame` (its destination MAC set to `f0`'s) and wait for it on
    /// `o0`: the DSCP Linux's forward chain wrote, or `Lost`.
    pub fn see(&self, frame: &[u8]) -> Seen {
        let mut f = frame.to_vec();
        f[..6].copy_from_slice(&self.f0_mac);
        // SAFETY: send(2) of a buffer of the length passed.
        let n = unsafe { libc::send(self.tx.as_raw_fd(), f.as_ptr().cast(), f.len(), 0) };
        assert_eq!(
            n,
            f.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
        let want = key(&f);
        let deadline = std::time::Instant::now() + Duration::from_millis(300);
        let mut buf = vec![0u8; MTU + 14];
        while std::time::Instant::now() < deadline {
            // SAFETY: recv(2) into a buffer of the size passed (the
            // socket has a receive timeout).
            let n =
                unsafe { libc::recv(self.rx.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                break;
            }
            let g = &buf[..n as usize];
            if key(g) == want {
                return Seen::Tag(dscp(g));
            }
        }
        Seen::Lost
    }

    /// The edge namespace's name (for messages).
    pub fn names(&self) -> (&str, &str) {
        (&self.edge.name, &self.router.name)
    }
}

/// What forwarding keeps of a frame: its addresses and its payload past
/// the IP header (TTL, DSCP and the header checksum change).
fn key(f: &[u8]) -> Option<Vec<u8>> {
    match u16::from_be_bytes([*f.get(12)?, *f.get(13)?]) {
        0x0800 => {
            let ihl = usize::from(f.get(14)? & 0xf) * 4;
            let mut k = f.get(26..34)?.to_vec();
            k.extend_from_slice(f.get(14 + ihl..)?);
            Some(k)
        }
        0x86dd => Some(f.get(22..)?.to_vec()),
        _ => None,
    }
}

fn dscp(f: &[u8]) -> u8 {
    if f[12] == 0x08 {
        f[15] >> 2
    } else {
        ((f[14] & 0x0f) << 2) | (f[15] >> 6)
    }
}
