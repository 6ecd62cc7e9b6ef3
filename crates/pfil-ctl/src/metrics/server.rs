//! The HTTP endpoint of the metrics: `GET /metrics` for Prometheus.
//!
//! What it guarantees, whatever its clients do:
//! - **A deadline per request**, absolute, not per `read`: the request
//!   head must arrive within [`MetricsOptions::head_timeout`] (2 s) of the
//!   accept, and the whole exchange, head and response, must be done
//!   within [`MetricsOptions::response_timeout`] (5 s). Before each `read`
//!   and `write` the socket's timeout is set to what is left, so a client
//!   that trickles one byte a second (a slow loris) or reads the response
//!   through a tiny TCP window is cut off at the deadline.
//! - **Concurrency with a bound**: each connection is answered on a
//!   thread of its own, at most [`MetricsOptions::max_connections`] (4)
//!   at once. A connection over the cap makes room by closing the oldest
//!   connection that is still sending its request head (a scrape's head
//!   comes in one segment, so that is a slow or idle client); if every
//!   connection is past its head (rendering or writing), the new one gets
//!   `503 Service Unavailable` (written without blocking) and is closed.
//!   A slow client therefore delays a scrape by nothing, and a flood of
//!   them costs at most `max_connections` threads and sockets.
//! - **Shutdown never waits on a client**: the server keeps a clone of
//!   every connection in flight; dropping it stops the accept loop, shuts
//!   every such connection down (its `read` or `write` returns at once)
//!   and waits at most [`SHUTDOWN_WAIT`] for their threads, which then
//!   exit by themselves.
//!
//! Why hand-written and not an HTTP server crate: the endpoint serves
//! one path, one method, no body, no keep-alive; what it must get right
//! is exactly the three points above. `tiny_http` (0.12, the usual small
//! choice) has no request deadline (its timeouts, where set, are per
//! socket operation, which a slow loris defeats), and its connection
//! pool spawns a thread per busy connection with no cap; a stop of its
//! server does not close connections in flight. `hyper` gives
//! header-read timeouts and graceful shutdown, but needs an async
//! runtime (tokio) in a daemon whose other threads are all plain ones,
//! for a 200-line need. So the server is ~200 lines of std, tested for
//! each guarantee (`crates/pfil-ctl/tests/metrics.rs`).
//!
//! It has no authentication and **bypasses the control socket's access
//! control** (mode 0600 and the peer-credential check): anyone who can
//! reach the address reads what `stats` and `filter_stats` say, including
//! the text of every acl rule marked `count`. [`FilterExport`] keeps the
//! rule texts (or all filter statistics) out of it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{render_with_filters, CONTENT_TYPE};

/// How long dropping a [`MetricsServer`] waits, at most, for the threads
/// of the connections it has just shut down.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);

/// The most a request head may be (8 KiB); a longer one gets `431`.
const MAX_HEAD: usize = 8192;

/// What of the filters' own statistics (`filter_stats`) the endpoint
/// serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterExport {
    /// All of them, acl rule texts included (the `text` label of
    /// `pfil_filter_rule_hits_total`).
    #[default]
    All,
    /// All of them without any label named `text` (an acl counted rule is
    /// then told by its index, the `rule` label, alone).
    NoRuleText,
    /// None: only the links' counters and costs.
    Off,
}

impl FilterExport {
    /// The names [`FilterExport::from_str`](std::str::FromStr) takes, as
    /// pfild's `--metrics-filters` does.
    pub const NAMES: &'static [&'static str] = &["all", "no-rule-text", "off"];

    /// What of `filters` (a `filter_stats` result) is served.
    pub fn apply(self, mut filters: Value) -> Value {
        match self {
            FilterExport::All => filters,
            FilterExport::Off => Value::Null,
            FilterExport::NoRuleText => {
                for h in filters["hooks"].as_array_mut().into_iter().flatten() {
                    for st in h["stats"].as_array_mut().into_iter().flatten() {
                        for x in st["samples"].as_array_mut().into_iter().flatten() {
                            if let Some(l) = x["labels"].as_object_mut() {
                                l.remove("text");
                            }
                        }
                    }
                }
                filters
            }
        }
    }
}

impl std::str::FromStr for FilterExport {
    type Err = String;

    fn from_str(s: &str) -> Result<FilterExport, String> {
        match s {
            "all" => Ok(FilterExport::All),
            "no-rule-text" => Ok(FilterExport::NoRuleText),
            "off" => Ok(FilterExport::Off),
            _ => Err(format!(
                "all, no-rule-text or off, not {:?}",
                s.chars().take(64).collect::<String>()
            )),
        }
    }
}

/// How a [`MetricsServer`] serves (`MetricsOptions::default()`, then set
/// the fields to change).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MetricsOptions {
    /// What of the filters' statistics it serves (default: all).
    pub filters: FilterExport,
    /// Connections answered at once (default 4, at least 1).
    pub max_connections: usize,
    /// From the accept to the end of the request head (default 2 s).
    pub head_timeout: Duration,
    /// From the accept to the last byte of the response (default 5 s).
    pub response_timeout: Duration,
}

impl Default for MetricsOptions {
    fn default() -> MetricsOptions {
        MetricsOptions {
            filters: FilterExport::All,
            max_connections: 4,
            head_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(5),
        }
    }
}

/// A connection in flight: a clone of its stream (to shut it down) and
/// whether it is still sending its head.
struct Conn {
    stream: TcpStream,
    in_head: bool,
}

/// What the accept loop and the connections' threads share.
struct Shared {
    reg: pfil::Registry,
    opts: MetricsOptions,
    stop: AtomicBool,
    /// Connections in flight by accept order (oldest first).
    conns: Mutex<(BTreeMap<u64, Conn>, u64)>,
    /// Signalled when a connection ends.
    ended: Condvar,
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, (BTreeMap<u64, Conn>, u64)> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A plain HTTP endpoint answering `GET /metrics` with
/// [`render_with_filters`] of the registry's `stats` and `filter_stats`
/// (for Prometheus to scrape); anything else gets 404 or 405. One request
/// per connection, each on a thread of its own, a bounded number at once,
/// each with a deadline; dropping it never waits on a client (see the
/// [module docs](self) for each guarantee). Bind it to a loopback
/// address unless the network it listens on is trusted: it has no
/// authentication and bypasses the control socket's access control
/// (see [`FilterExport`] to keep rule texts out).
pub struct MetricsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Listen on `addr` (port 0: any free port, see [`MetricsServer::addr`])
    /// with the default [`MetricsOptions`].
    ///
    /// # Errors
    /// The bind error, naming the address.
    pub fn start(reg: pfil::Registry, addr: &str) -> Result<MetricsServer, String> {
        MetricsServer::start_with(reg, addr, MetricsOptions::default())
    }

    /// Listen on `addr` and serve as `opts` says.
    ///
    /// # Errors
    /// The bind error, naming the address.
    pub fn start_with(
        reg: pfil::Registry,
        addr: &str,
        mut opts: MetricsOptions,
    ) -> Result<MetricsServer, String> {
        opts.max_connections = opts.max_connections.max(1);
        let l = TcpListener::bind(addr).map_err(|e| format!("metrics endpoint {addr}: {e}"))?;
        let addr = l
            .local_addr()
            .map_err(|e| format!("metrics endpoint: {e}"))?;
        l.set_nonblocking(true)
            .map_err(|e| format!("metrics endpoint {addr}: {e}"))?;
        let shared = Arc::new(Shared {
            reg,
            opts,
            stop: AtomicBool::new(false),
            conns: Mutex::new((BTreeMap::new(), 0)),
            ended: Condvar::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("pfil-metrics".into())
            .spawn(move || {
                while !s.stop.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((conn, _)) => admit(&s, conn),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) => {
                            tracing::warn!(target: "pfil_ctl", error = %e, "metrics endpoint: accept failed");
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            })
            .map_err(|e| format!("metrics endpoint: starting its thread: {e}"))?;
        Ok(MetricsServer {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections in flight now (at most
    /// [`MetricsOptions::max_connections`]).
    pub fn connections(&self) -> usize {
        self.shared.conns().0.len()
    }
}

impl Drop for MetricsServer {
    /// Stop accepting (the accept loop wakes every 20 ms), shut down every
    /// connection in flight, and wait at most [`SHUTDOWN_WAIT`] for their
    /// threads.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // No connection is admitted any more: shut down those in flight.
        let mut g = self.shared.conns();
        for c in g.0.values() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        while !g.0.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(target: "pfil_ctl", n = g.0.len(), "metrics endpoint: connections still ending at shutdown, not waited for");
                break;
            }
            g = self
                .shared
                .ended
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Take a new connection: over the cap, close the oldest one still in its
/// head or refuse this one; then answer it on a thread of its own.
fn admit(sh: &Arc<Shared>, conn: TcpStream) {
    let mut g = sh.conns();
    if g.0.len() >= sh.opts.max_connections {
        let oldest = g.0.iter().find(|(_, c)| c.in_head).map(|(id, _)| *id);
        match oldest.and_then(|id| g.0.remove(&id)) {
            // Its thread sees the shutdown and ends; it is no longer
            // counted (its socket goes with the thread).
            Some(c) => {
                let _ = c.stream.shutdown(Shutdown::Both);
            }
            None => {
                drop(g);
                refuse(conn);
                return;
            }
        }
    }
    let Ok(clone) = conn.try_clone() else {
        // No descriptor for the clone: close this one.
        return;
    };
    let id = g.1;
    g.1 += 1;
    g.0.insert(
        id,
        Conn {
            stream: clone,
            in_head: true,
        },
    );
    drop(g);
    let s = sh.clone();
    let spawned = std::thread::Builder::new()
        .name("pfil-metrics-conn".into())
        .stack_size(256 << 10)
        .spawn(move || {
            answer(&s, id, conn);
            let mut g = s.conns();
            g.0.remove(&id);
            drop(g);
            s.ended.notify_all();
        });
    if spawned.is_err() {
        // The closure (and the connection) is gone; so is its clone.
        sh.conns().0.remove(&id);
    }
}

/// Answer `503` without blocking, and close.
fn refuse(mut conn: TcpStream) {
    let _ = conn.set_nonblocking(true);
    let body = "too many connections\n";
    let _ = write!(
        conn,
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.shutdown(Shutdown::Both);
}

/// What is left until `deadline`, if anything (a socket timeout cannot be
/// zero: at least 1 ms).
fn left(deadline: Instant) -> Option<Duration> {
    let d = deadline.saturating_duration_since(Instant::now());
    (!d.is_zero()).then_some(d.max(Duration::from_millis(1)))
}

/// Write all of `bytes` before `deadline`.
fn write_by(conn: &mut TcpStream, bytes: &[u8], deadline: Instant) -> std::io::Result<()> {
    let mut off = 0;
    while off < bytes.len() {
        let Some(d) = left(deadline) else {
            return Err(std::io::ErrorKind::TimedOut.into());
        };
        conn.set_write_timeout(Some(d))?;
        match conn.write(&bytes[off..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => off += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How reading the head ended.
enum Head {
    /// The head, complete or cut by the client's end of sending.
    Read(Vec<u8>),
    /// Over [`MAX_HEAD`].
    TooLarge,
    /// Not complete by the head deadline, or the connection failed.
    Gone,
}

fn read_head(conn: &mut TcpStream, deadline: Instant) -> Head {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return Head::Read(head);
        }
        if head.len() >= MAX_HEAD {
            return Head::TooLarge;
        }
        let Some(d) = left(deadline) else {
            return Head::Gone;
        };
        if conn.set_read_timeout(Some(d)).is_err() {
            return Head::Gone;
        }
        match conn.read(&mut buf) {
            Ok(0) if head.is_empty() => return Head::Gone,
            Ok(0) => return Head::Read(head),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Head::Gone,
        }
    }
}

/// Answer connection `id`: read the request head (at most 8 KiB, by the
/// head deadline), render, write the response (by the response
/// deadline), close.
fn answer(sh: &Shared, id: u64, mut conn: TcpStream) {
    let t0 = Instant::now();
    let response_deadline = t0 + sh.opts.response_timeout;
    let head_deadline = (t0 + sh.opts.head_timeout).min(response_deadline);
    let _ = conn.set_nonblocking(false);
    let head = read_head(&mut conn, head_deadline);
    match sh.conns().0.get_mut(&id) {
        Some(c) => c.in_head = false,
        // Closed to make room for a newer connection, or at shutdown.
        None => return,
    }
    let (status, ctype, body) = match head {
        Head::Gone => return,
        Head::TooLarge => (
            "431 Request Header Fields Too Large",
            "text/plain",
            "request head over 8 KiB\n".to_owned(),
        ),
        Head::Read(head) => respond(sh, &head),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    if write_by(&mut conn, &out, response_deadline).is_ok() {
        let _ = conn.shutdown(Shutdown::Write);
    }
}

/// Status, content type and body for a request head.
fn respond(sh: &Shared, head: &[u8]) -> (&'static str, &'static str, String) {
    let line = String::from_utf8_lossy(head);
    let mut words = line.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => {
            let filters = match sh.opts.filters {
                FilterExport::Off => Ok(Value::Null),
                f => crate::filter_stats(&sh.reg, None).map(|v| f.apply(v)),
            };
            match (crate::stats(&sh.reg, None), filters) {
                (Ok(v), Ok(f)) => ("200 OK", CONTENT_TYPE, render_with_filters(&v, &f)),
                (_, Err(e)) => (
                    "500 Internal Server Error",
                    "text/plain",
                    format!("{}\n", e.message),
                ),
                (Err(e), _) => ("500 Internal Server Error", "text/plain", format!("{e}\n")),
            }
        }
        ("GET", _) => ("404 Not Found", "text/plain", "GET /metrics\n".to_owned()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n".to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The response's deadline is absolute: a client that reads a little
    /// now and then (a tiny TCP window, making progress so that no single
    /// `write` times out) is cut off at the deadline.
    #[test]
    fn a_slowly_reading_client_is_cut_at_the_response_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut conn, _) = l.accept().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut client = client;
                let mut buf = [0u8; 512];
                while !stop.load(Ordering::Relaxed) {
                    if matches!(client.read(&mut buf), Ok(0) | Err(_)) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let t = Instant::now();
        let r = write_by(
            &mut conn,
            &vec![0u8; 32 << 20],
            t + Duration::from_millis(700),
        );
        let took = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        drop(conn);
        reader.join().unwrap();
        assert_eq!(r.map_err(|e| e.kind()), Err(std::io::ErrorKind::TimedOut));
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    /// Clients that connect and send nothing fill every slot: a scrape
    /// is still served at once (the oldest idle one is closed for it), and
    /// the idle ones are cut off at their head deadline.
    #[test]
    fn idle_clients_filling_every_slot_do_not_delay_a_scrape() {
        let reg = pfil::Registry::new();
        let opts = MetricsOptions {
            max_connections: 2,
            head_timeout: Duration::from_millis(800),
            ..MetricsOptions::default()
        };
        let srv = MetricsServer::start_with(reg, "127.0.0.1:0", opts).unwrap();
        let addr = srv.addr();
        let mut idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let t = Instant::now();
        while srv.connections() < 2 {
            assert!(t.elapsed() < Duration::from_secs(5), "slots not taken");
            std::thread::sleep(Duration::from_millis(5));
        }
        let t = Instant::now();
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut r = String::new();
        let _ = c.read_to_string(&mut r);
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        // The oldest idle client was closed at once, the other at its
        // head deadline: both read end of file.
        for c in &mut idle {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 16];
            assert!(matches!(c.read(&mut buf), Ok(0) | Err(_)), "still open");
        }
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }

    #[test]
    fn no_rule_text_removes_only_the_text_labels() {
        let f = serde_json::json!({"hooks": [{"hook": "acl:a", "stats": [
            {"name": "rule_hits", "kind": "counter", "help": "h", "samples": [
                {"labels": {"rule": "0", "text": "drop all"}, "value": 1}]}]}]});
        let g = FilterExport::NoRuleText.apply(f.clone());
        assert_eq!(
            g["hooks"][0]["stats"][0]["samples"][0]["labels"],
            serde_json::json!({"rule": "0"})
        );
        assert_eq!(FilterExport::All.apply(f.clone()), f);
        assert_eq!(FilterExport::Off.apply(f), Value::Null);
    }
}
