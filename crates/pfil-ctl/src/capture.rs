//! Capture at a head, at any position of its chain, into pcapng.
//!
//! A [`Tap`] is a hook that never changes a verdict: linked at a head,
//! direction and position, it copies the frames that reach it (and match
//! its tcpdump expression, if any) into a bounded buffer per worker, up to
//! a snap length and a frame count. The buffers are lock-free queues of
//! records: the datapath takes a free record, fills it and queues it; a
//! writer (the control connection that asked for the capture) takes the
//! filled records, writes them as pcapng and gives them back. Records are
//! made by the writer, never on the datapath, as they are used: a worker's
//! buffer starts with up to [`FIRST_RECORDS`] and doubles when more than
//! half are in use, up to the records asked for, and all of a tap's
//! buffers together hold at most [`MAX_TAP_BYTES`] (all taps of the
//! process: [`MAX_ALL_TAPS_BYTES`]). When no record is free the copy is
//! dropped and counted; the frame itself goes on, so a capture never
//! blocks or loses traffic.
//!
//! The pcapng written: a section header, one interface description per
//! tap (`if_name` = head, direction and position, `if_tsresol` = ns,
//! `if_filter` = the expression), an enhanced packet block per frame (the
//! batch's capture time, the original length, `epb_queue` = the queue it
//! arrived on), and at the end an interface statistics block
//! (`isb_ifrecv` = frames the tap saw, `isb_filteraccept` = those matching,
//! `isb_osdrop` = copies dropped for a full buffer, `isb_usrdeliv` =
//! written).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
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
/// The fewest records per worker buffer (fewer asked for: this many).
pub const MIN_BUFFER: usize = 16;
/// The most records per worker buffer.
pub const MAX_BUFFER: usize = 1 << 20;
/// Records a worker's buffer starts with (or fewer, if fewer were asked
/// for: the default buffer is made whole when a worker first meets the
/// tap, so that a burst before the writer's first drain is not dropped);
/// a larger buffer doubles when more than half of it is in use.
pub const FIRST_RECORDS: usize = DEFAULT_BUFFER;
/// The bytes a record costs besides its snap length: its header and its
/// two queue slots.
pub const RECORD_OVERHEAD: usize = 64;
/// The most bytes the buffers of one tap (one capture) hold, over all
/// workers: 256 MiB. A capture whose one worker's buffer (`buffer` x
/// (`snaplen` + [`RECORD_OVERHEAD`])) would be larger is refused.
pub const MAX_TAP_BYTES: usize = 256 << 20;
/// The most bytes the buffers of all taps of the process hold together:
/// 1 GiB. Beyond it (many captures at once) buffers stop growing and
/// copies are dropped and counted.
pub const MAX_ALL_TAPS_BYTES: usize = 1 << 30;
/// The longest capture in seconds: a year.
pub const MAX_SECONDS: f64 = 365.0 * 86_400.0;

/// Bytes held by the buffers of every tap of the process.
static ALL_TAPS_BYTES: AtomicUsize = AtomicUsize::new(0);

/// One copied frame.
pub struct Record {
    ts_ns: u64,
    orig_len: u32,
    queue: u32,
    len: u32,
    data: Box<[u8]>,
}

/// One worker's buffer: queues for up to `records`, of which `made` exist.
struct Ring {
    free: ArrayQueue<Box<Record>>,
    full: ArrayQueue<Box<Record>>,
    made: AtomicUsize,
}

/// One worker's counters (written by that worker alone).
#[derive(Default)]
struct Counts {
    seen: AtomicU64,
    matched: AtomicU64,
    dropped: AtomicU64,
}

impl Ring {
    /// Queues for `records`, no record yet.
    fn new(records: usize) -> Ring {
        Ring {
            free: ArrayQueue::new(records),
            full: ArrayQueue::new(records),
            made: AtomicUsize::new(0),
        }
    }

    /// Make `n` more records of `snaplen` bytes (the writer's side).
    fn grow(&self, n: usize, snaplen: usize) {
        for _ in 0..n {
            let rec = Box::new(Record {
                ts_ns: 0,
                orig_len: 0,
                queue: 0,
                len: 0,
                data: vec![0u8; snaplen].into_boxed_slice(),
            });
            if self.free.push(rec).is_err() {
                break;
            }
            self.made.fetch_add(1, Relaxed);
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
    /// Bytes this tap's buffers hold (also counted in [`ALL_TAPS_BYTES`]).
    bytes: AtomicUsize,
}

impl Drop for Tap {
    fn drop(&mut self) {
        ALL_TAPS_BYTES.fetch_sub(*self.bytes.get_mut(), Relaxed);
    }
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
    /// up to `records` frames (at least [`MIN_BUFFER`]) are begun at once
    /// for the workers `active`, and on demand (by [`Tap::drain`]) for the
    /// others, and grow as they are used (see the module's doc). `count`:
    /// frames to copy at most (0: no limit).
    ///
    /// # Errors
    /// libpcap's message for a bad expression, a snap length out of range,
    /// more than [`MAX_BUFFER`] records, or one worker's buffer over
    /// [`MAX_TAP_BYTES`]; each names the limit.
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
        if records > MAX_BUFFER {
            return Err(format!(
                "buffer: at most {MAX_BUFFER} records per worker, not {records}"
            ));
        }
        let records = records.max(MIN_BUFFER);
        let per_worker = records.saturating_mul(snaplen + RECORD_OVERHEAD);
        if per_worker > MAX_TAP_BYTES {
            return Err(format!(
                "buffer: {records} records of {snaplen} + {RECORD_OVERHEAD} bytes is {per_worker} bytes per worker, over the capture buffer cap of {MAX_TAP_BYTES} bytes (256 MiB, over all workers): ask for fewer records or a shorter snaplen"
            ));
        }
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
            bytes: AtomicUsize::new(0),
        };
        for &w in active {
            tap.begin_ring(w);
        }
        Ok(tap)
    }

    /// Take `bytes` from this tap's budget and the process's; false (and
    /// nothing taken) when either would go over its cap.
    fn reserve(&self, bytes: usize) -> bool {
        let take = |a: &AtomicUsize, cap: usize| {
            a.fetch_update(Relaxed, Relaxed, |n| {
                n.checked_add(bytes).filter(|&t| t <= cap)
            })
            .is_ok()
        };
        if !take(&self.bytes, MAX_TAP_BYTES) {
            return false;
        }
        if !take(&ALL_TAPS_BYTES, MAX_ALL_TAPS_BYTES) {
            self.bytes.fetch_sub(bytes, Relaxed);
            return false;
        }
        true
    }

    /// Make worker `w`'s buffer, with its first records, if the budgets
    /// allow (the writer's side).
    fn begin_ring(&self, w: usize) {
        let Some(slot) = self.rings.get(w) else {
            return;
        };
        let first = self.records.min(FIRST_RECORDS);
        let queues = self.records * (RECORD_OVERHEAD / 2);
        let cost = queues + first * (self.snaplen + RECORD_OVERHEAD / 2);
        if slot.get().is_some() || !self.reserve(cost) {
            return;
        }
        let ring = Ring::new(self.records);
        ring.grow(first, self.snaplen);
        let _ = slot.set(ring);
    }

    /// Double `ring`'s records if more than half are in use, within the
    /// budgets (the writer's side).
    fn grow_ring(&self, ring: &Ring) {
        let made = ring.made.load(Relaxed);
        let in_use = made.saturating_sub(ring.free.len());
        if made >= self.records || in_use * 2 < made {
            return;
        }
        let n = made.max(1).min(self.records - made);
        if self.reserve(n * (self.snaplen + RECORD_OVERHEAD / 2)) {
            ring.grow(n, self.snaplen);
        }
    }

    /// The bytes its buffers hold (they only grow while it lives).
    pub fn buffer_bytes(&self) -> usize {
        self.bytes.load(Relaxed)
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
                self.begin_ring(w);
            }
        }
        for r in self.rings.iter().filter_map(|r| r.get()) {
            self.grow_ring(r);
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

/// One option; a value longer than an option may be (65535 bytes) is cut
/// to that (review L6.2: the length wrapped).
fn option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    let len = u16::try_from(value.len()).unwrap_or(u16::MAX);
    let value = &value[..usize::from(len)];
    b.extend_from_slice(&code.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
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
        // A libpcap filter string: a 0 byte, then the text, cut (on a
        // character) to what an option holds.
        let mut end = f.len().min(usize::from(u16::MAX) - 1);
        while !f.is_char_boundary(end) {
            end -= 1;
        }
        let mut v = vec![0u8];
        v.extend_from_slice(&f.as_bytes()[..end]);
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

/// A linked tap: removed (unlinked and unregistered) by [`Linked::unlink`]
/// or, if that was not called, when this is dropped, a panic's unwinding
/// included.
struct Linked<'a> {
    reg: &'a pfil::Registry,
    name: String,
    grace: std::time::Duration,
    done: bool,
    /// Quarantined links the tap's writes reaped, for the reply.
    reaped: Vec<pfil::Reaped>,
}

impl Linked<'_> {
    /// Remove the tap and wait for its grace period (true: it passed).
    fn unlink(&mut self) -> Result<bool, pfil::Error> {
        self.done = true;
        self.reg
            .transaction()
            .remove_hook(&self.name)
            .commit()
            .map(|mut c| {
                self.reaped.append(&mut c.reaped);
                c.retirement.wait_timeout(self.grace)
            })
    }
}

impl Drop for Linked<'_> {
    fn drop(&mut self) {
        if !self.done {
            let r = self.unlink();
            tracing::warn!(target: "pfil_ctl", tap = %self.name, removed = r.is_ok(), "control: capture ended abnormally; its tap is removed");
        }
    }
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
    id: &serde_json::value::RawValue,
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
    // Everything is checked before the tap is linked (review H2: a
    // deadline too far for an Instant panicked with the tap linked).
    let deadline = if p.seconds == 0.0 {
        None
    } else {
        let d = (p.seconds.is_finite() && p.seconds > 0.0 && p.seconds <= MAX_SECONDS)
            .then(|| std::time::Duration::try_from_secs_f64(p.seconds).ok())
            .flatten()
            .and_then(|d| std::time::Instant::now().checked_add(d));
        match d {
            Some(d) => Some(d),
            None => {
                let asked = if p.seconds.abs() < 1e16 {
                    format!("{}", p.seconds)
                } else {
                    format!("{:e}", p.seconds)
                };
                return Err(crate::RpcError::params(format!(
                    "seconds: 0 (no limit) or more, at most {MAX_SECONDS} (a year), not {asked}"
                )));
            }
        }
    };
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
    let mut c = reg
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
    // From here the tap is unlinked however the session ends, a panic
    // included.
    let mut linked = Linked {
        reg,
        name: name.clone(),
        grace: target.grace_timeout,
        done: false,
        reaped: std::mem::take(&mut c.reaped),
    };
    c.retirement.wait_timeout(target.grace_timeout);
    tracing::info!(target: "pfil_ctl", head = %p.head, dir = %d, tap = %name, %position, expr = ?p.expr, "control: capture started");
    let send = |s: &mut std::os::unix::net::UnixStream, bytes: &[u8]| {
        // The id as the request wrote it (base64 needs no escaping).
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        let line = format!(
            r#"{{"jsonrpc":"2.0","method":"capture.data","params":{{"data":"{data}","id":{}}}}}"#,
            id.get()
        );
        crate::server::send_line(s, &line)
    };
    let mut buf = Vec::new();
    pcapng_header(
        &mut buf,
        &format!("{} {d} {position}", p.head),
        p.expr.as_deref(),
        snaplen,
    );
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
    let removed = linked.unlink();
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
            "buffer_bytes": tap.buffer_bytes(),
            "reaped": target.reaped(std::mem::take(&mut linked.reaped)),
        });
        let _ = crate::server::send_line(s, &crate::rpc::response(id, r));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// The blocks of a pcapng stream, checked: (type, body).
    fn blocks(b: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < b.len() {
            let kind = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
            assert!(
                len >= 12 && len % 4 == 0 && at + len <= b.len(),
                "block length {len}"
            );
            let end = u32::from_le_bytes(b[at + len - 4..at + len].try_into().unwrap()) as usize;
            assert_eq!(end, len, "trailing block length");
            out.push((kind, b[at + 8..at + len - 4].to_vec()));
            at += len;
        }
        out
    }

    /// The options of a block body from `from`: (code, value); each must
    /// fit in the body.
    fn options(body: &[u8], from: usize) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = from;
        while at + 4 <= body.len() {
            let code = u16::from_le_bytes([body[at], body[at + 1]]);
            let len = usize::from(u16::from_le_bytes([body[at + 2], body[at + 3]]));
            assert!(
                at + 4 + len <= body.len(),
                "option {code} runs past its block"
            );
            out.push((code, body[at + 4..at + 4 + len].to_vec()));
            at += 4 + len.div_ceil(4) * 4;
            if code == 0 {
                break;
            }
        }
        assert_eq!(at, body.len(), "the options fill the block");
        out
    }

    /// Review L6.2: a filter string over 64 KiB made the option length
    /// wrap and the interface description unreadable.
    #[test]
    fn a_filter_over_64_kib_keeps_the_interface_description_valid() {
        for n in [10, 9_362, 9_363, 20_000] {
            let f = "udp or ".repeat(n) + "tcp";
            let mut out = Vec::new();
            pcapng_header(&mut out, "syn0 in at the wire", Some(&f), 128);
            let b = blocks(&out);
            assert_eq!(b.len(), 2);
            assert_eq!(b[1].0, 1, "an interface description");
            let opts = options(&b[1].1, 8);
            let (_, v) = opts.iter().find(|(c, _)| *c == 11).expect("if_filter");
            assert_eq!(v[0], 0, "a libpcap filter string");
            let s = std::str::from_utf8(&v[1..]).expect("cut on a character boundary");
            if f.len() < usize::from(u16::MAX) {
                assert_eq!(s, f);
            } else {
                assert!(
                    f.starts_with(s) && s.len() < usize::from(u16::MAX),
                    "{}",
                    s.len()
                );
            }
        }
    }

    /// Review H2: the session unlinks its tap however it ends, a panic
    /// included (before: the tap stayed linked for the life of the process).
    #[test]
    fn a_panic_in_a_session_leaves_no_tap_linked() {
        let reg = pfil::Registry::with_max_workers(2);
        reg.register_head("syn0", PacketKind::Ethernet, pfil::Dirs::BOTH)
            .unwrap();
        let target = crate::methods::Target {
            registry: reg.clone(),
            catalog: Arc::new(pfil_filters::Catalog::builtin()),
            app: "t".into(),
            grace_timeout: std::time::Duration::from_secs(1),
        };
        let (mut a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let params = serde_json::json!({"head": "syn0", "dir": "in"});
        let serde_json::Value::Object(params) = params else {
            unreachable!()
        };
        let r = catch_unwind(AssertUnwindSafe(|| {
            session(
                &target,
                &mut a,
                &mut |_, _| None,
                &|| panic!("a bug while the capture runs"),
                &crate::rpc::null_id(),
                params,
            )
        }));
        assert!(r.is_err(), "the panic went through");
        assert!(
            reg.hooks().iter().all(|h| !is_tap(&h.name)),
            "a tap is left: {:?}",
            reg.hooks()
                .iter()
                .map(|h| h.name.clone())
                .collect::<Vec<_>>()
        );
        assert!(reg.chain("syn0", pfil::Dir::In).unwrap().is_empty());
    }
}
