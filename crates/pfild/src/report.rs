//! The live status line and the totals printed at exit.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pfil::{Dir, Registry};
use pfil_afxdp::run::{Stats, StatsSnapshot, WorkerReport};
use pfil_afxdp::FrameCounts;

/// One worker loop's stats and the heads its frames pass.
pub struct Flow {
    /// Live counters.
    pub stats: Arc<Stats>,
    /// Head run In on received frames (`None` for a generator).
    pub input: Option<String>,
    /// Head run Out before sending (`None` for a sink).
    pub output: Option<String>,
    /// Frames are built, not received.
    pub generator: bool,
}

impl Flow {
    /// Frames entering the loop: received or generated.
    fn frames(s: &StatsSnapshot, generator: bool) -> u64 {
        if generator {
            s.generated
        } else {
            s.rx
        }
    }
}

/// Per-head rates and counts derived from the flows.
#[derive(Clone, Copy, Debug, Default)]
struct HeadCounts {
    in_pkts: u64,
    in_dropped: u64,
    out_pkts: u64,
    out_dropped: u64,
}

fn per_head(flows: &[Flow], snaps: &[StatsSnapshot], head: &str) -> HeadCounts {
    let mut h = HeadCounts::default();
    for (f, s) in flows.iter().zip(snaps) {
        if f.input.as_deref() == Some(head) {
            h.in_pkts += s.rx;
            h.in_dropped += s.in_dropped + s.in_consumed;
        }
        if f.output.as_deref() == Some(head) {
            h.out_pkts += s.tx;
            h.out_dropped += s.out_dropped + s.out_consumed;
        }
    }
    h
}

/// Samples the counters every tick: the previous second for the status
/// line, and when frames first and last moved for the active rate.
pub struct Sampler {
    last: Vec<StatsSnapshot>,
    last_at: Instant,
    frames: u64,
    first_move: Option<Instant>,
    last_move: Option<Instant>,
    heads: Vec<String>,
}

impl Sampler {
    /// Start sampling at `t0`.
    pub fn new(flows: &[Flow], t0: Instant) -> Sampler {
        let mut heads: Vec<String> = Vec::new();
        for f in flows {
            for h in [&f.input, &f.output].into_iter().flatten() {
                if !heads.contains(h) {
                    heads.push(h.clone());
                }
            }
        }
        Sampler {
            last: flows.iter().map(|f| f.stats.snapshot()).collect(),
            last_at: t0,
            frames: 0,
            first_move: None,
            last_move: None,
            heads,
        }
    }

    /// Record whether frames moved since the last tick.
    pub fn tick(&mut self, flows: &[Flow], now: Instant) {
        let frames: u64 = flows
            .iter()
            .map(|f| Flow::frames(&f.stats.snapshot(), f.generator))
            .sum();
        if frames != self.frames {
            if self.first_move.is_none() {
                // The first frames arrived during the previous 10 ms tick.
                self.first_move = Some(now - Duration::from_millis(5));
            }
            self.last_move = Some(now);
            self.frames = frames;
        }
    }

    /// Frames received (or generated) so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Seconds between the first and the last tick at which frames moved.
    pub fn active_secs(&self) -> f64 {
        match (self.first_move, self.last_move) {
            (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// The status line for the interval since the previous call.
    pub fn status(&mut self, flows: &[Flow], since_start: Duration) -> String {
        let now = Instant::now();
        let snaps: Vec<StatsSnapshot> = flows.iter().map(|f| f.stats.snapshot()).collect();
        let dt = now.duration_since(self.last_at).as_secs_f64().max(1e-9);
        let mut line = format!("[{:>4}s]", since_start.as_secs());
        for h in &self.heads {
            let cur = per_head(flows, &snaps, h);
            let old = per_head(flows, &self.last, h);
            let r = |a: u64, b: u64| rate(a.saturating_sub(b) as f64 / dt);
            let _ = write!(line, " {h}:");
            if flows.iter().any(|f| f.input.as_ref() == Some(h)) {
                let _ = write!(
                    line,
                    " in {} (dropped {})",
                    r(cur.in_pkts, old.in_pkts),
                    r(cur.in_dropped, old.in_dropped)
                );
            }
            if flows.iter().any(|f| f.output.as_ref() == Some(h)) {
                let _ = write!(
                    line,
                    " out {} (dropped {})",
                    r(cur.out_pkts, old.out_pkts),
                    r(cur.out_dropped, old.out_dropped)
                );
            }
            line.push(';');
        }
        let gen: u64 = flows
            .iter()
            .zip(&snaps)
            .filter(|(f, _)| f.generator)
            .map(|(_, s)| s.generated)
            .sum();
        let gen_old: u64 = flows
            .iter()
            .zip(&self.last)
            .filter(|(f, _)| f.generator)
            .map(|(_, s)| s.generated)
            .sum();
        if flows.iter().any(|f| f.generator) {
            let _ = write!(line, " generated {}", rate((gen - gen_old) as f64 / dt));
        }
        line.truncate(line.trim_end_matches(';').len());
        self.last = snaps;
        self.last_at = now;
        line
    }
}

/// The link that has cost the datapath most so far (its ns/packet from
/// the timed batches, times the packets it saw), for the status line:
/// `costliest hook syn0 in bpf:1 (71.2 ns/pkt)`.
pub fn costliest(reg: &pfil::Registry) -> Option<String> {
    let mut best: Option<(f64, String)> = None;
    for h in reg.heads() {
        for d in pfil::Dir::ALL {
            for l in &h.chains[d.index()] {
                let Some(ns) = l.counters.ns_per_packet() else {
                    continue;
                };
                let cost = ns * l.counters.packets as f64;
                if best.as_ref().is_none_or(|(c, _)| cost > *c) {
                    best = Some((
                        cost,
                        format!("costliest hook {} {d} {} ({ns:.1} ns/pkt)", h.name, l.hook),
                    ));
                }
            }
        }
    }
    best.map(|(_, s)| s)
}

/// `12.34 Mpps` style.
pub fn rate(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.2} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.1} kpps", pps / 1e3)
    } else {
        format!("{pps:.0} pps")
    }
}

fn counts_line(c: &FrameCounts) -> String {
    format!(
        "fill {} rx {} free {} app {} tx {} completion {} held {} = {}/{}",
        c.fill,
        c.rx,
        c.free,
        c.app,
        c.tx,
        c.completion,
        c.held,
        c.sum(),
        c.total
    )
}

/// The filters' own counters ([`pfil::Filter::stats`]) of every hook
/// that keeps some, for the totals: an acl's counted rules with their
/// hits, the default action last (what replaying a capture through a
/// ruleset is for), and one line of a hook's single values (a
/// ratelimit's evictions):
///
/// ```text
///   hook acl:1 rules:
///     rule 0: 30 hits: drop count proto 17 from any to any port 53:53
///     default: 90 hits: default pass
///   hook ratelimit:2: evictions 2, table_used 4, table_slots 8, table_bytes 128
/// ```
pub fn filter_stats(reg: &Registry) -> String {
    let mut o = String::new();
    for (hook, stats) in reg.filter_stats().1 {
        let mut single = Vec::new();
        for st in &stats {
            if let Some(v) = st.value() {
                single.push(format!("{} {v}", st.name));
                continue;
            }
            let title = if st.name == "rule_hits" {
                "rules".to_owned()
            } else {
                st.name.clone()
            };
            let _ = writeln!(o, "  hook {hook} {title}:");
            for x in &st.samples {
                match (x.label("rule"), x.label("text")) {
                    (Some("default"), Some(t)) => {
                        let _ = writeln!(o, "    default: {} hits: {t}", x.value);
                    }
                    (Some(r), Some(t)) => {
                        let _ = writeln!(o, "    rule {r}: {} hits: {t}", x.value);
                    }
                    _ => {
                        let labels: Vec<String> =
                            x.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        let _ = writeln!(o, "    {}: {}", labels.join(" "), x.value);
                    }
                }
            }
        }
        if !single.is_empty() {
            let _ = writeln!(o, "  hook {hook}: {}", single.join(", "));
        }
    }
    o
}

/// What a finished run prints its totals from.
pub struct Summary<'a> {
    /// The registry (heads, chains, counters).
    pub reg: &'a Registry,
    /// The heads of the run.
    pub ifaces: &'a [&'a str],
    /// Every loop's stats and the heads its frames pass.
    pub flows: &'a [Flow],
    /// The workers' reports (AF_XDP only).
    pub reports: &'a [WorkerReport],
    /// Rates over the run.
    pub sampler: &'a Sampler,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// AF_XDP ports (frame accounting and kernel counters to print).
    pub xdp: bool,
    /// The in-kernel generator's end, if it ran.
    pub live: Option<Live<'a>>,
}

/// What the in-kernel generator reports at the end.
pub struct Live<'a> {
    /// Its threads and the driver's counters.
    pub done: &'a pfil_afxdp::live::LiveFinished,
    /// The interface it sent on.
    pub ifname: &'a str,
    /// Frames per call at most.
    pub repeat: u32,
    /// Frames per batch.
    pub batch_size: u32,
    /// The program stayed in the XDP dispatcher.
    pub warm: bool,
}

/// Print the totals on stdout. Returns whether every UMEM frame was
/// accounted for.
pub fn totals(title: &str, run: &Summary<'_>) -> bool {
    let Summary {
        reg,
        ifaces,
        flows,
        reports,
        sampler,
        elapsed,
        xdp,
        ref live,
    } = *run;
    let snaps: Vec<StatsSnapshot> = flows.iter().map(|f| f.stats.snapshot()).collect();
    let t = snaps.iter().fold(StatsSnapshot::default(), |a, b| a + *b);
    let secs = elapsed.as_secs_f64().max(1e-9);
    let active = sampler.active_secs();
    let frames = sampler.frames();
    let mut o = String::new();
    let _ = writeln!(o, "{title}");
    let gen = flows.iter().any(|f| f.generator);
    let entered = if gen { t.generated } else { t.rx };
    let _ = writeln!(
        o,
        "  frames: {} {entered}, passed {}, dropped by filters {}, consumed {}, sent {}, tx failed {}",
        if gen { "generated" } else { "received" },
        t.passed,
        t.in_dropped + t.out_dropped,
        t.in_consumed + t.out_consumed,
        t.tx,
        t.tx_dropped
    );
    let _ = writeln!(
        o,
        "  rate: {} over the run, {} while frames flowed ({active:.2} s)",
        rate(frames as f64 / secs),
        rate(if active > 0.0 {
            frames as f64 / active
        } else {
            0.0
        }),
    );
    // Per flow (a worker's direction; in queue order), when there are
    // several: how the queues shared the traffic.
    if flows.len() > 1 {
        for (i, (f, s)) in flows.iter().zip(&snaps).enumerate() {
            let path = match (&f.input, &f.output) {
                (Some(a), Some(b)) => format!("{a} in -> {b} out"),
                (Some(a), None) => format!("{a} in"),
                (None, Some(b)) => format!("-> {b} out"),
                (None, None) => String::new(),
            };
            let _ = writeln!(
                o,
                "  flow {i} ({path}): {} {}, passed {}, dropped by filters {}, sent {}",
                if f.generator { "generated" } else { "received" },
                Flow::frames(s, f.generator),
                s.passed,
                s.in_dropped + s.out_dropped,
                s.tx
            );
        }
    }
    // Consumed frames and what hooks did with them (the outbox), and the
    // packets the runner refused: shown only when something happened.
    if t.in_consumed + t.out_consumed + t.held_evicted + t.stale + t.refused > 0 {
        let _ = writeln!(
            o,
            "  consumed frames: released {}, sent {}, evicted past the held limit {}, stale requests {}, refused transmits {}",
            t.released, t.reinjected, t.held_evicted, t.stale, t.refused
        );
    }
    let r = reg.refused();
    if r.foreign_batches + r.kind_batches > 0 {
        let _ = writeln!(
            o,
            "  refused by the runner: {} packet(s) of another kind than their head (in {} batches), {} of another registry (in {} batches)",
            r.kind_packets, r.kind_batches, r.foreign_packets, r.foreign_batches
        );
    }
    for head in ifaces {
        let h = per_head(flows, &snaps, head);
        for dir in Dir::ALL {
            let (pk, dr) = match dir {
                Dir::In => (h.in_pkts, h.in_dropped),
                Dir::Out => (h.out_pkts, h.out_dropped),
            };
            let chain = reg.chain(head, dir).unwrap_or_default();
            let _ = writeln!(
                o,
                "  head {head} {dir}: {pk} frames, {dr} dropped/consumed by filters, {} hook(s)",
                chain.len()
            );
            for l in chain {
                let c = l.counters;
                let _ = writeln!(
                    o,
                    "    hook {}: packets {} bytes {} passed {} dropped {} consumed {} faults {}{}",
                    l.hook,
                    c.packets,
                    c.bytes,
                    c.passed,
                    c.dropped,
                    c.consumed,
                    c.faults,
                    if l.quarantined { " QUARANTINED" } else { "" }
                );
            }
        }
    }
    o.push_str(&filter_stats(reg));
    let mut ok = true;
    if xdp {
        for r in reports {
            let good = r.counts.adds_up() && r.counts.app == 0;
            ok &= good;
            let ports: Vec<String> = r
                .ports
                .iter()
                .map(|p| format!("{}/{}", p.ifname, p.queue))
                .collect();
            let _ = writeln!(
                o,
                "  umem of worker queue {}{} ({}): {} ({})",
                r.queue,
                if r.umem_parts > 1 {
                    format!(
                        ", its part of one shared by {} workers (frames at {}..{})",
                        r.umem_parts, r.frame_addrs.start, r.frame_addrs.end
                    )
                } else {
                    String::new()
                },
                ports.join(" + "),
                counts_line(&r.counts),
                if good {
                    "every frame accounted for"
                } else {
                    "FRAMES UNACCOUNTED"
                }
            );
            for p in &r.ports {
                let mode = match p.xdp_mode {
                    Some(m) => format!("XDP {m}, "),
                    None => "TX only, ".to_owned(),
                };
                let k = p
                    .kernel
                    .map(|k| {
                        format!(
                            "rx_dropped {} rx_ring_full {} fill_ring_empty {} rx_invalid {} tx_invalid {} tx_ring_empty {}",
                            k.rx_dropped,
                            k.rx_ring_full,
                            k.rx_fill_ring_empty_descs,
                            k.rx_invalid_descs,
                            k.tx_invalid_descs,
                            k.tx_ring_empty_descs
                        )
                    })
                    .unwrap_or_else(|| "kernel counters unavailable".into());
                let _ = writeln!(
                    o,
                    "    port {}/{} ({mode}{:?} mode): {k}, tx busy kicks {}",
                    p.ifname, p.queue, p.bound, p.tx_busy
                );
            }
        }
        let detached: Vec<String> = {
            let mut v: Vec<String> = reports
                .iter()
                .flat_map(|r| r.ports.iter())
                .filter(|p| p.xdp_mode.is_some())
                .map(|p| p.ifname.clone())
                .collect();
            v.dedup();
            v
        };
        if !detached.is_empty() {
            let _ = writeln!(
                o,
                "  XDP program detached from {} (bpf_link closed)",
                detached.join(", ")
            );
        }
    }
    let mut live_fields = String::new();
    if let Some(l) = live {
        let d = l.done;
        let _ = writeln!(
            o,
            "  in-kernel generator on {}: {} thread(s), up to {} frames per BPF_PROG_RUN call, batch {}, destination ports rotate per {}, program {}",
            l.ifname,
            d.reports.len(),
            l.repeat,
            l.batch_size,
            if d.per_frame { "frame" } else { "call" },
            if l.warm {
                "kept warm (attached to the interface, passing its own RX)"
            } else {
                "cold (not attachable: two RCU grace periods per call)"
            }
        );
        for r in &d.reports {
            let ports: Vec<String> = r
                .per_port
                .iter()
                .map(|(p, n)| format!("port {p}: {n}"))
                .collect();
            let _ = writeln!(
                o,
                "    thread {}{}: {} calls, {} frames ({}), kernel {:.1} ns/frame",
                r.thread,
                r.cpu.map(|c| format!(" on cpu {c}")).unwrap_or_default(),
                r.calls,
                r.frames,
                ports.join(", "),
                if r.frames > 0 {
                    r.kernel_ns as f64 / r.frames as f64
                } else {
                    0.0
                }
            );
        }
        ok &= d.frames() == t.generated;
        match (d.xmit, d.not_reaching_driver()) {
            (Some(x), Some(lost)) => {
                let _ = writeln!(
                    o,
                    "  driver counters of {} over the run (ethtool -S): xdp_xmit {} (on the peer's ring), xdp_xmit_errors {} (refused: ring full or too long); not reaching the driver {lost}{}",
                    l.ifname,
                    x.xmit,
                    x.errors,
                    if lost > 0 {
                        " (redirect refused before the driver: for veth the peer has no XDP program)"
                    } else {
                        ""
                    }
                );
                let _ = write!(
                    live_fields,
                    " xdp_xmit={} xdp_xmit_errors={} not_reaching_driver={lost}",
                    x.xmit, x.errors
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    "  driver counters of {}: unavailable (the driver reports no xdp_xmit counters): what the kernel did with the frames is not known here",
                    l.ifname
                );
            }
        }
    }
    let kdrop: u64 = reports
        .iter()
        .flat_map(|r| r.ports.iter())
        .filter_map(|p| p.kernel)
        .map(|k| k.rx_dropped + k.rx_ring_full)
        .sum();
    let _ = writeln!(
        o,
        "totals: seconds={secs:.3} active_seconds={active:.3} generated={} rx={} passed={} in_dropped={} in_consumed={} out_dropped={} out_consumed={} filtered={} tx={} tx_failed={} batches={} kernel_rx_dropped={kdrop} accounted={}",
        t.generated,
        t.rx,
        t.passed,
        t.in_dropped,
        t.in_consumed,
        t.out_dropped,
        t.out_consumed,
        t.filtered(),
        t.tx,
        t.tx_dropped,
        t.batches,
        if ok { "yes" } else { "no" }
    );
    if !live_fields.is_empty() {
        // The in-kernel generator's driver counters, after the common fields.
        o.truncate(o.trim_end_matches('\n').len());
        o.push_str(&live_fields);
        o.push('\n');
    }
    print!("{o}");
    ok
}
