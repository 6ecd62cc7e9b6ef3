//! Capture at a head, at any position of its chain, into pcapng.
//!
//! A [`Tap`] is a hook that never changes a verdict: linked at a head,
//! direction and position, it copies the frames that reach it (and match
//! its tcpdump expression, if any) into a bounded buffer per worker, up to
//! a snap length and a frame count. The buffers are lock-free queues of
//! records allocated when the tap is made: the datapath takes a free
//! record, fills it and queues it; a writer (the control connection that
//! asked for the capture) takes the filled records, writes them as pcapng
//! and gives them back. When no record is free the copy is dropped and
//! counted; the frame itself goes on, so a capture never blocks or loses
//! traffic.
//!
//! The pcapng written: a section header, one interface description per
//! tap (`if_name` = head, direction and position, `if_tsresol` = ns,
//! `if_filter` = the expression), an enhanced packet block per frame (the
//! batch's capture time, the original length, `epb_queue` = the queue it
//! arrived on), and at the end an interface statistics block
//! (`isb_ifrecv` = frames the tap saw, `isb_filteraccept` = those matching,
//! `isb_osdrop` = copies dropped for a full buffer, `isb_usrdeliv` =
//! written).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use pfil::{Ctx, Filter, Packet, PacketKind, Verdict};
use pfil_filters::bpf::{Link, Program};

/// The largest snap length (frames of the dataplane's ports are at most
/// this long).
pub const MAX_SNAPLEN: usize = 9216;
/// Records per worker buffer unless told otherwise.
pub const DEFAULT_BUFFER: usize = 4096;

/// One copied frame.
pub struct Record {
    ts_ns: u64,
    orig_len: u32,
    queue: u32,
    len: u32,
    data: Box<[u8]>,
}

/// One worker's buffer.
struct Ring {
    free: ArrayQueue<Box<Record>>,
    full: ArrayQueue<Box<Record>>,
}

/// One worker's counters (written by that worker alone).
#[derive(Default)]
struct Counts {
    seen: AtomicU64,
    matched: AtomicU64,
    dropped: AtomicU64,
}

impl Ring {
    fn new(records: usize, snaplen: usize) -> Ring {
        let free = ArrayQueue::new(records);
        for _ in 0..records {
            let _ = free.push(Box::new(Record {
                ts_ns: 0,
                orig_len: 0,
                queue: 0,
                len: 0,
                data: vec![0u8; snaplen].into_boxed_slice(),
            }));
        }
        Ring {
            free,
            full: ArrayQueue::new(records),
        }
    }
}

/// A single writer's counter: a load and a store.
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed) + n, Relaxed);
}

/// The capture hook.
pub struct Tap {
    program: Option<Program>,
    expr: Option<String>,
    snaplen: usize,
    /// Frames still to copy (over all workers); `u64::MAX`: no limit.
    left: AtomicU64,
    /// Buffers of the workers, made on demand by the writer (a worker
    /// without one counts its frames as dropped and asks for one).
    rings: Box<[CachePadded<std::sync::OnceLock<Ring>>]>,
    wanted: Box<[AtomicBool]>,
    counts: Box<[CachePadded<Counts>]>,
    records: usize,
}

/// What a tap saw, summed over workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames that reached the tap.
    pub seen: u64,
    /// Of those, the ones matching its expression (all without one).
    pub matched: u64,
    /// Matching frames not copied: no free record in the worker's buffer.
    pub dropped: u64,
}

impl Tap {
    /// A tap for a registry with `max_workers` worker slots; buffers of
    /// `records` frames are made at once for the workers `active`, and on
    /// demand (by [`Tap::drain`]) for the others. `count`: frames to copy
    /// at most (0: no limit).
    ///
    /// # Errors
    /// libpcap's message for a bad expression, or a snap length out of
    /// range.
    pub fn new(
        expr: Option<&str>,
        snaplen: usize,
        count: u64,
        records: usize,
        max_workers: usize,
        active: &[usize],
    ) -> Result<Tap, String> {
        if !(1..=MAX_SNAPLEN).contains(&snaplen) {
            return Err(format!("snaplen: 1 to {MAX_SNAPLEN} bytes, not {snaplen}"));
        }
        let records = records.clamp(16, 1 << 20);
        let program = expr
            .map(|e| Program::compile(e, Link::Ethernet).map_err(|m| format!("expression: {m}")))
            .transpose()?;
        let tap = Tap {
            program,
            expr: expr.map(str::to_owned),
            snaplen,
            left: AtomicU64::new(if count == 0 { u64::MAX } else { count }),
            rings: (0..max_workers)
                .map(|_| CachePadded::new(std::sync::OnceLock::new()))
                .collect(),
            wanted: (0..max_workers).map(|_| AtomicBool::new(false)).collect(),
            counts: (0..max_workers)
                .map(|_| CachePadded::new(Counts::default()))
                .collect(),
            records,
        };
        for &w in active {
            if let Some(r) = tap.rings.get(w) {
                let _ = r.set(Ring::new(records, snaplen));
            }
        }
        Ok(tap)
    }

    /// The expression, if any.
    pub fn expression(&self) -> Option<&str> {
        self.expr.as_deref()
    }

    /// The snap length.
    pub fn snaplen(&self) -> usize {
        self.snaplen
    }

    /// Has it copied as many frames as it was asked for?
    pub fn done(&self) -> bool {
        self.left.load(Relaxed) == 0
    }

    /// Counters so far.
    pub fn stats(&self) -> TapStats {
        let mut s = TapStats::default();
        for c in self.counts.iter() {
            s.seen += c.seen.load(Relaxed);
            s.matched += c.matched.load(Relaxed);
            s.dropped += c.dropped.load(Relaxed);
        }
        s
    }

    /// The writer's side: make the buffers workers asked for, then hand
    /// every filled record to `f` (in each worker's order) and recycle it.
    pub fn drain(&self, mut f: impl FnMut(&Record)) {
        for (w, want) in self.wanted.iter().enumerate() {
            if want.swap(false, Relaxed) {
                let _ = self.rings[w].set(Ring::new(self.records, self.snaplen));
            }
        }
        for r in self.rings.iter().filter_map(|r| r.get()) {
            while let Some(rec) = r.full.pop() {
                f(&rec);
                let _ = r.free.push(rec);
            }
        }
    }

    /// Take up to `n` of the frames still to copy; how many were granted.
    fn take(&self, n: u64) -> u64 {
        let mut cur = self.left.load(Relaxed);
        loop {
            if cur == u64::MAX {
                return n;
            }
            let k = cur.min(n);
            if k == 0 {
                return 0;
            }
            match self
                .left
                .compare_exchange_weak(cur, cur - k, Relaxed, Relaxed)
            {
                Ok(_) => return k,
                Err(v) => cur = v,
            }
        }
    }
}

impl Filter for Tap {
    fn filter(&self, pkt: &mut Packet<'_>, ctx: &Ctx<'_>) -> Verdict {
        self.filter_batch(std::slice::from_mut(pkt), ctx);
        Verdict::Pass
    }

    fn filter_batch(&self, pkts: &mut [Packet<'_>], ctx: &Ctx<'_>) {
        let (Some(slot), Some(counts)) = (self.rings.get(ctx.worker), self.counts.get(ctx.worker))
        else {
            return;
        };
        // A worker the tap made no buffer for: counted, copies dropped,
        // a buffer asked for (the writer makes it at its next drain).
        let ring = slot.get();
        if ring.is_none() {
            if let Some(w) = self.wanted.get(ctx.worker) {
                w.store(true, Relaxed);
            }
        }
        let (mut seen, mut matched, mut dropped) = (0, 0, 0);
        let mut ts = None;
        // Chunks of up to CHUNK frames: the matching ones first, then the
        // frame budget taken for all of them at once (one compare-and-swap
        // per chunk on the tap's shared count, not one per frame).
        const CHUNK: usize = 64;
        for chunk in pkts.chunks(CHUNK) {
            let mut hits = [0u8; CHUNK];
            let mut n = 0;
            for (i, p) in chunk.iter().enumerate() {
                if !p.verdict().is_pass() {
                    continue;
                }
                seen += 1;
                let hit = match (&self.program, p.kind()) {
                    (None, _) => true,
                    (Some(prog), PacketKind::Ethernet) => prog.matches(p.frame()),
                    (Some(_), _) => false,
                };
                if hit {
                    hits[n] = i as u8;
                    n += 1;
                }
            }
            matched += n as u64;
            let granted = self.take(n as u64) as usize;
            for &i in &hits[..granted] {
                let p = &chunk[usize::from(i)];
                let Some(mut rec) = ring.and_then(|r| r.free.pop()) else {
                    dropped += 1;
                    continue;
                };
                let ts = *ts.get_or_insert_with(|| {
                    SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64)
                });
                let f = p.frame();
                let len = f.len().min(self.snaplen);
                rec.data[..len].copy_from_slice(&f[..len]);
                rec.len = len as u32;
                rec.orig_len = f.len() as u32;
                rec.queue = p.queue();
                rec.ts_ns = ts;
                if let Some(ring) = ring {
                    if let Err(rec) = ring.full.push(rec) {
                        // Cannot happen (as many full slots as records);
                        // keep the record in the pool all the same.
                        let _ = ring.free.push(rec);
                        dropped += 1;
                    }
                }
            }
        }
        bump(&counts.seen, seen);
        bump(&counts.matched, matched);
        if dropped > 0 {
            bump(&counts.dropped, dropped);
        }
    }

    fn batched(&self) -> bool {
        true
    }
}

// ---- pcapng ----

fn pad4(b: &mut Vec<u8>) {
    while b.len() % 4 != 0 {
        b.push(0);
    }
}

fn option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    b.extend_from_slice(&code.to_le_bytes());
    b.extend_from_slice(&(value.len() as u16).to_le_bytes());
    b.extend_from_slice(value);
    pad4(b);
}

fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let len = (12 + body.len()) as u32;
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&len.to_le_bytes());
}

/// The section header and the tap's interface description.
pub fn pcapng_header(out: &mut Vec<u8>, if_name: &str, filter: Option<&str>, snaplen: usize) {
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    option(
        &mut shb,
        4,
        format!("pfil-ctl {}", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    option(&mut shb, 0, &[]);
    block(out, 0x0A0D_0D0A, &shb);
    let mut idb = Vec::new();
    idb.extend_from_slice(&1u16.to_le_bytes()); // LINKTYPE_ETHERNET
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&(snaplen as u32).to_le_bytes());
    option(&mut idb, 2, if_name.as_bytes());
    option(&mut idb, 9, &[9]); // if_tsresol: 10^-9 s
    if let Some(f) = filter {
        let mut v = vec![0u8]; // libpcap filter string
        v.extend_from_slice(f.as_bytes());
        option(&mut idb, 11, &v);
    }
    option(&mut idb, 0, &[]);
    block(out, 1, &idb);
}

/// One enhanced packet block.
pub fn pcapng_packet(out: &mut Vec<u8>, r: &Record) {
    let mut b = Vec::with_capacity(32 + r.len as usize);
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&((r.ts_ns >> 32) as u32).to_le_bytes());
    b.extend_from_slice(&(r.ts_ns as u32).to_le_bytes());
    b.extend_from_slice(&r.len.to_le_bytes());
    b.extend_from_slice(&r.orig_len.to_le_bytes());
    b.extend_from_slice(&r.data[..r.len as usize]);
    pad4(&mut b);
    option(&mut b, 6, &r.queue.to_le_bytes()); // epb_queue
    option(&mut b, 0, &[]);
    block(out, 6, &b);
}

/// The interface statistics block that ends a capture.
pub fn pcapng_stats(out: &mut Vec<u8>, s: &TapStats, written: u64) {
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut b = Vec::new();
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
    b.extend_from_slice(&(ts as u32).to_le_bytes());
    option(&mut b, 4, &s.seen.to_le_bytes()); // isb_ifrecv
    option(&mut b, 6, &s.matched.to_le_bytes()); // isb_filteraccept
    option(&mut b, 7, &s.dropped.to_le_bytes()); // isb_osdrop
    option(&mut b, 8, &written.to_le_bytes()); // isb_usrdeliv
    option(&mut b, 0, &[]);
    block(out, 5, &b);
}

/// Taps in use, to name them `capture:N`.
pub(crate) static NEXT_TAP: Mutex<u64> = Mutex::new(1);

/// Hooks that are captures: transient, never part of a configuration.
pub fn is_tap(hook: &str) -> bool {
    hook.starts_with("capture:")
}

// ---- the control method ----

/// `capture` params.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CaptureParams {
    head: String,
    dir: String,
    #[serde(default)]
    placement: Option<serde_json::Value>,
    expr: Option<String>,
    snaplen: Option<usize>,
    #[serde(default)]
    count: u64,
    #[serde(default)]
    seconds: f64,
    buffer: Option<usize>,
}

/// How a capture session ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Count,
    Time,
    Stopped,
    ClientGone,
    ServerStopping,
}

/// Serve a `capture` request on its connection: link a tap, stream the
/// pcapng as `capture.data` notifications (base64, in order) until the
/// count or time is reached, the client sends any line (stop) or goes
/// away, then unlink the tap and answer with its counters. Always unlinks
/// the tap, whichever way it ends.
pub(crate) fn session(
    target: &crate::methods::Target,
    s: &mut std::os::unix::net::UnixStream,
    next_line: &mut dyn FnMut(
        &mut std::os::unix::net::UnixStream,
        std::time::Duration,
    ) -> Option<bool>,
    stopping: &dyn Fn() -> bool,
    id: serde_json::Value,
    params: serde_json::Map<String, serde_json::Value>,
) -> Result<(), crate::RpcError> {
    use base64::Engine;
    use serde_json::json;
    let reg = &target.registry;
    let p: CaptureParams = serde_json::from_value(serde_json::Value::Object(params))
        .map_err(|e| crate::RpcError::params(format!("capture: {e}")))?;
    let d = crate::methods::dir(&p.dir)?;
    let placement = crate::methods::placement(p.placement.as_ref(), d)?;
    let position = match &placement {
        pfil::Placement::Before(h) => format!("before {h}"),
        pfil::Placement::After(h) => format!("after {h}"),
        pfil::Placement::Prepend => "at the wire".to_owned(),
        pfil::Placement::Append => "far from the wire".to_owned(),
    };
    if !(p.seconds.is_finite() && p.seconds >= 0.0) {
        return Err(crate::RpcError::params("seconds: 0 (no limit) or more"));
    }
    let snaplen = p.snaplen.unwrap_or(MAX_SNAPLEN);
    let tap = Arc::new(
        Tap::new(
            p.expr.as_deref(),
            snaplen,
            p.count,
            p.buffer.unwrap_or(DEFAULT_BUFFER),
            reg.max_workers(),
            &reg.workers_in_use(),
        )
        .map_err(crate::RpcError::params)?,
    );
    let name = {
        let mut n = NEXT_TAP.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        format!("capture:{}", *n - 1)
    };
    let c = reg
        .transaction()
        .op(pfil::Op::AddHook {
            name: name.clone(),
            kind: PacketKind::Ethernet,
            dirs: pfil::Dirs::BOTH,
            filter: tap.clone(),
        })
        .link(&p.head, d, &name, placement)
        .commit()
        .map_err(|e| crate::rpc::registry_error(&e))?;
    c.retirement.wait_timeout(target.grace_timeout);
    tracing::info!(target: "pfil_ctl", head = %p.head, dir = %d, tap = %name, %position, expr = ?p.expr, "control: capture started");
    let send = |s: &mut std::os::unix::net::UnixStream, bytes: &[u8]| {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        let line =
            json!({"jsonrpc": "2.0", "method": "capture.data", "params": {"id": id, "data": data}});
        crate::server::send_line(s, &line.to_string())
    };
    let mut buf = Vec::new();
    pcapng_header(
        &mut buf,
        &format!("{} {d} {position}", p.head),
        p.expr.as_deref(),
        snaplen,
    );
    let deadline = (p.seconds > 0.0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_secs_f64(p.seconds));
    let mut written = 0u64;
    let end = loop {
        tap.drain(|r| {
            pcapng_packet(&mut buf, r);
            written += 1;
        });
        if !buf.is_empty() {
            if send(s, &buf).is_err() {
                break End::ClientGone;
            }
            buf.clear();
        }
        if tap.done() {
            break End::Count;
        }
        if deadline.is_some_and(|t| std::time::Instant::now() >= t) {
            break End::Time;
        }
        if stopping() {
            break End::ServerStopping;
        }
        match next_line(s, std::time::Duration::from_millis(10)) {
            Some(true) => break End::Stopped,
            Some(false) => break End::ClientGone,
            None => {}
        }
    };
    // Unlink, wait for the grace period (no worker runs the tap any
    // more), then write what it copied last and its counters.
    let removed = reg
        .transaction()
        .remove_hook(&name)
        .commit()
        .map(|c| c.retirement.wait_timeout(target.grace_timeout));
    tap.drain(|r| {
        pcapng_packet(&mut buf, r);
        written += 1;
    });
    let st = tap.stats();
    pcapng_stats(&mut buf, &st, written);
    tracing::info!(target: "pfil_ctl", tap = %name, end = ?end, written, seen = st.seen, dropped = st.dropped, removed = ?removed.is_ok(), "control: capture ended");
    if end == End::ClientGone {
        return Ok(());
    }
    if send(s, &buf).is_ok() {
        let r = json!({
            "hook": name,
            "captured": written,
            "seen": st.seen,
            "matched": st.matched,
            "dropped": st.dropped,
            "end": format!("{end:?}").to_lowercase(),
        });
        let _ = crate::server::send_line(s, &crate::rpc::response(&id, r));
    }
    Ok(())
}
