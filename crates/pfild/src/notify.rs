//! systemd's readiness protocol (sd_notify(3)), without libsystemd: one
//! datagram per state change to the socket `$NOTIFY_SOCKET` names (a
//! path, or an abstract name after `@`). Outside systemd the variable is
//! unset and every call does nothing.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// Where pfild tells systemd its state.
pub struct Notifier {
    sock: Option<(UnixDatagram, std::os::unix::net::SocketAddr)>,
    /// Half the watchdog interval systemd set (`$WATCHDOG_USEC`), if any.
    watchdog: Option<Duration>,
    last_ping: std::sync::Mutex<Instant>,
}

impl Notifier {
    /// The notifier `$NOTIFY_SOCKET` and `$WATCHDOG_USEC` describe (the
    /// watchdog only when `$WATCHDOG_PID` is unset or pfild's pid).
    pub fn from_env() -> Notifier {
        let sock = std::env::var_os("NOTIFY_SOCKET").and_then(|p| {
            let addr = address(p.as_encoded_bytes())?;
            let s = UnixDatagram::unbound().ok()?;
            Some((s, addr))
        });
        let ours = std::env::var("WATCHDOG_PID")
            .ok()
            .is_none_or(|p| p.parse() == Ok(std::process::id()));
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|&u| u > 0 && ours)
            .map(|u| Duration::from_micros(u / 2));
        Notifier {
            sock,
            watchdog,
            last_ping: std::sync::Mutex::new(Instant::now()),
        }
    }

    /// Whether systemd listens.
    pub fn active(&self) -> bool {
        self.sock.is_some()
    }

    /// Send `state` (newline-separated `KEY=VALUE` lines). A failed send
    /// is logged and otherwise ignored: the service manager's problem is
    /// not the dataplane's.
    pub fn send(&self, state: &str) {
        if let Some((s, addr)) = &self.sock {
            if let Err(e) = s.send_to_addr(state.as_bytes(), addr) {
                tracing::warn!("sd_notify {state:?}: {e}");
            }
        }
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}"));
    }

    /// `RELOADING=1` with the monotonic time systemd ≥ 253 asks for.
    pub fn reloading(&self) {
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()));
    }

    /// `STOPPING=1`.
    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=stopping: draining the workers");
    }

    /// `STATUS=` line.
    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={status}"));
    }

    /// `WATCHDOG=1` when half the watchdog interval has passed since the
    /// last one (call it from the main loop).
    pub fn tick(&self, now: Instant) {
        if let Some(every) = self.watchdog {
            let mut last = self
                .last_ping
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if now.duration_since(*last) >= every {
                self.send("WATCHDOG=1");
                *last = now;
            }
        }
    }
}

/// `$NOTIFY_SOCKET` as an address: a path, or `@name` in the abstract
/// namespace.
fn address(p: &[u8]) -> Option<std::os::unix::net::SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::ffi::OsStrExt;
    match p.split_first() {
        Some((b'@', name)) => std::os::unix::net::SocketAddr::from_abstract_name(name).ok(),
        Some((b'/', _)) => {
            std::os::unix::net::SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(p)).ok()
        }
        _ => None,
    }
}

fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration;
    // CLOCK_MONOTONIC is always available on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_path_socket_and_ignores_a_bad_variable() {
        let dir = std::env::temp_dir().join(format!("pfild-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        let n = Notifier {
            sock: Some((
                UnixDatagram::unbound().unwrap(),
                address(path.as_os_str().as_encoded_bytes()).unwrap(),
            )),
            watchdog: None,
            last_ping: std::sync::Mutex::new(Instant::now()),
        };
        n.ready("running");
        let mut buf = [0u8; 256];
        let k = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..k], b"READY=1\nSTATUS=running");
        n.reloading();
        let k = rx.recv(&mut buf).unwrap();
        let m = std::str::from_utf8(&buf[..k]).unwrap();
        assert!(m.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{m}");
        assert!(address(b"relative").is_none());
        assert!(address(b"").is_none());
        assert!(address(b"@abstract").is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
