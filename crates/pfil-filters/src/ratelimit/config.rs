//! The `ratelimit` config: `RATE [burst N] [per src|dst|flow] [table N]`,
//! and the caps a config is held to.

/// What the buckets are kept per.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Per {
    /// One bucket for the hook.
    Hook,
    /// One per source address.
    Src,
    /// One per destination address.
    Dst,
    /// One per 5-tuple (addresses, protocol, ports).
    Flow,
}

/// A parsed `ratelimit` config.
#[derive(Clone, Debug, PartialEq)]
pub struct RateConfig {
    /// Frames per second.
    pub rate: f64,
    /// Frames that may pass at once.
    pub burst: u32,
    /// Buckets per hook or per key.
    pub per: Per,
    /// Slots per worker table (`per` modes).
    pub table: usize,
}

/// The lowest `RATE`: one frame in 1000 s.
pub const MIN_RATE: f64 = 1e-3;

/// The highest `RATE`: 10^9 frames per second (one a nanosecond, the
/// buckets' clock).
pub const MAX_RATE: f64 = 1e9;

/// The longest a full burst may take to refill (`burst / RATE`): 365 days.
/// Longer is no limit anyone means, and it keeps the buckets' arithmetic
/// (ns since the filter started) far from `u64`'s end.
pub const MAX_BURST_SECONDS: f64 = 365.0 * 86400.0;

/// The most slots a worker's table may have (`table N`), before the
/// memory cap ([`TABLE_BYTES_CAP`]) over all worker slots.
pub const MAX_TABLE: usize = 1 << 24;

/// Bytes of one slot of a worker's table.
pub const SLOT_BYTES: usize = 16;

/// The memory the tables of one `per` limiter may take, over all the
/// registry's worker slots (`table × SLOT_BYTES × max_workers`): 256 MiB.
/// Tables are allocated per worker on its first frame, so a limiter
/// takes `table × 16 B` per worker that runs it; the cap is on what it
/// would take if every worker slot ran.
pub const TABLE_BYTES_CAP: usize = 256 << 20;

impl RateConfig {
    /// Parse `RATE [burst N] [per src|dst|flow] [table N]`.
    ///
    /// # Errors
    /// What was expected where, or which cap a value is over (RATE from
    /// [`MIN_RATE`] to [`MAX_RATE`], `burst / RATE` up to
    /// [`MAX_BURST_SECONDS`], `table` up to [`MAX_TABLE`]).
    pub fn parse(text: &str) -> Result<RateConfig, String> {
        let mut words = text.split_whitespace();
        let rate = words.next().ok_or("RATE in frames per second (e.g. 10k)")?;
        let rate = parse_rate(rate)?;
        let mut c = RateConfig {
            rate,
            burst: 64,
            per: Per::Hook,
            table: 4096,
        };
        while let Some(w) = words.next() {
            let mut arg = |what: &str| {
                words
                    .next()
                    .ok_or_else(|| format!("a value after `{}` ({what})", cut(w)))
            };
            match w {
                "burst" => {
                    let v = arg("frames, 1 or more")?;
                    c.burst = v.parse().ok().filter(|b| *b >= 1).ok_or_else(|| {
                        format!(
                            "burst: frames, 1 or more (up to {}), not {:?}",
                            u32::MAX,
                            cut(v)
                        )
                    })?;
                }
                "per" => {
                    c.per = match arg("src, dst or flow")? {
                        "src" => Per::Src,
                        "dst" => Per::Dst,
                        "flow" => Per::Flow,
                        v => return Err(format!("per: src, dst or flow, not {:?}", cut(v))),
                    }
                }
                "table" => {
                    let v = arg("buckets per worker")?;
                    let n: usize = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_TABLE).contains(n))
                        .ok_or_else(|| {
                            format!("table: 1 to {MAX_TABLE} buckets, not {:?}", cut(v))
                        })?;
                    c.table = n.next_power_of_two().max(super::WAYS);
                }
                _ => {
                    return Err(format!(
                        "`burst N`, `per src|dst|flow` or `table N`, not {:?}",
                        cut(w)
                    ))
                }
            }
        }
        c.check_burst()?;
        Ok(c)
    }

    /// The rate and the burst within their caps (a config built by hand
    /// need not be).
    pub(super) fn check_burst(&self) -> Result<(), String> {
        if !(MIN_RATE..=MAX_RATE).contains(&self.rate) {
            return Err(format!(
                "RATE: frames per second from {MIN_RATE} to 1G, not {}",
                self.rate
            ));
        }
        let refill = f64::from(self.burst) / self.rate;
        if self.burst == 0 || refill.is_nan() || refill > MAX_BURST_SECONDS {
            return Err(format!(
                "burst {} at {} frames per second takes {refill:.0} s to refill, over the cap of \
                 {MAX_BURST_SECONDS} s (365 days): a smaller burst or a higher RATE",
                self.burst, self.rate
            ));
        }
        Ok(())
    }

    /// The tables within [`TABLE_BYTES_CAP`] for a registry of
    /// `max_workers` worker slots (always, without `per`).
    ///
    /// # Errors
    /// The bytes asked and the cap, and the largest `table` that fits.
    pub fn check_memory(&self, max_workers: usize) -> Result<(), String> {
        if self.per == Per::Hook {
            return Ok(());
        }
        let w = max_workers.max(1);
        let bytes = self.table.saturating_mul(SLOT_BYTES).saturating_mul(w);
        if bytes > TABLE_BYTES_CAP {
            let fits = (TABLE_BYTES_CAP / SLOT_BYTES / w).max(1);
            // The largest power of two that fits (tables are rounded up).
            let fits = 1usize << fits.ilog2();
            return Err(format!(
                "table: {} buckets x {SLOT_BYTES} B x {w} worker slots = {} MiB, over the cap of \
                 {} MiB over all worker slots (at most table {fits} here)",
                self.table,
                bytes >> 20,
                TABLE_BYTES_CAP >> 20
            ));
        }
        Ok(())
    }
}

/// At most 64 characters of `s`, for an error message.
fn cut(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.strip_suffix("pps").unwrap_or(s);
    let (num, mult) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 1e3),
        Some(b'M') => (&t[..t.len() - 1], 1e6),
        Some(b'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .map(|v| v * mult)
        .filter(|r| r.is_finite() && (MIN_RATE..=MAX_RATE).contains(r))
        .ok_or_else(|| {
            format!(
                "RATE: frames per second from {MIN_RATE} to 1G (e.g. 1000, 10k, 2.5Mpps), not {:?}",
                cut(s)
            )
        })
}
