//! `pfil-bench control`: control-plane load and latency against a running
//! app's control socket. Cycles link / set / unlink of one hook at a
//! fixed rate for a while, over one connection (the protocol pfilctl
//! speaks), and reports each operation's round trip: the server answers
//! a write after its grace period, so the round trip includes it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pfil_ctl::Client;
use serde_json::{json, Value};

/// `pfil-bench control` options.
#[derive(Debug, clap::Args)]
pub struct ControlArgs {
    /// The control socket
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// The head to link on
    #[arg(long, default_value = "syn0")]
    head: String,
    /// The direction to link in: `out` on a sink (whose traffic runs the
    /// `in` chain) measures what the operations cost the datapath apart
    /// from the cost of the hook they link
    #[arg(long, default_value = "in", value_parser = ["in", "out"])]
    dir: String,
    /// The hook to add, link, reconfigure and unlink (a `count` or
    /// `null` instance: MODULE:INSTANCE of a module without config)
    #[arg(long, default_value = "count:bench")]
    hook: String,
    /// Operations per second (0: back to back)
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// How long to run
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Print the summary as JSON
    #[arg(long)]
    json: bool,
}

/// Round trips of one kind of operation, in microseconds.
#[derive(Default)]
struct Lat(Vec<f64>);

impl Lat {
    fn quantile(&self, q: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return f64::NAN;
        }
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        v[i]
    }

    fn summary(&self) -> Value {
        json!({
            "ops": self.0.len(),
            "median_us": self.quantile(0.5),
            "p99_us": self.quantile(0.99),
            "max_us": self.quantile(1.0),
        })
    }
}

fn call(c: &mut Client, method: &str, params: Value) -> Result<Duration, String> {
    let t = Instant::now();
    let r = c
        .call(method, params)
        .map_err(|e| format!("{method}: {e}"))?;
    let d = t.elapsed();
    if r.get("complete") == Some(&json!(false)) {
        return Err(format!("{method}: the grace period did not pass: {r}"));
    }
    Ok(d)
}

/// Run the load; returns the report.
pub fn run(a: &ControlArgs) -> Result<String, String> {
    if !(a.seconds.is_finite() && a.seconds > 0.0 && a.rate.is_finite() && a.rate >= 0.0) {
        return Err("--seconds must be > 0 and --rate >= 0".into());
    }
    let mut c = Client::connect(&a.socket).map_err(|e| e.to_string())?;
    call(&mut c, "add", json!({"hook": a.hook}))?;
    let link = json!({"head": a.head, "dir": a.dir, "hook": a.hook, "placement": "prepend"});
    let unlink = json!({"head": a.head, "dir": a.dir, "hook": a.hook});
    let set = json!({"hook": a.hook});
    let mut lat: [Lat; 3] = Default::default();
    let period = (a.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / a.rate));
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(a.seconds);
    let mut next = t0;
    let mut i = 0usize;
    let mut late = 0u64;
    while Instant::now() < end {
        if let Some(p) = period {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else if now - next > p {
                late += 1;
            }
            next += p;
        }
        let (m, p) = match i % 3 {
            0 => ("link", &link),
            1 => ("set", &set),
            _ => ("unlink", &unlink),
        };
        let d = call(&mut c, m, p.clone())?;
        lat[i % 3].0.push(d.as_secs_f64() * 1e6);
        i += 1;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    if i % 3 != 0 {
        // Linked (after a link or a set): leave the head as it was.
        call(&mut c, "unlink", unlink.clone())?;
    }
    call(&mut c, "del", json!({"hook": a.hook}))?;
    let all = Lat(lat.iter().flat_map(|l| l.0.iter().copied()).collect());
    let summary = json!({
        "ops": i,
        "seconds": elapsed,
        "rate": i as f64 / elapsed,
        "late": late,
        "all": all.summary(),
        "link": lat[0].summary(),
        "set": lat[1].summary(),
        "unlink": lat[2].summary(),
    });
    if a.json {
        return Ok(format!("{summary}\n"));
    }
    let mut s = format!(
        "control: {i} operations in {elapsed:.2} s ({:.0}/s, {late} late), round trips incl. the grace period:\n",
        i as f64 / elapsed
    );
    for (name, l) in [
        ("all", &all),
        ("link", &lat[0]),
        ("set", &lat[1]),
        ("unlink", &lat[2]),
    ] {
        s += &format!(
            "  {name:<6} n={:<6} median {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us\n",
            l.0.len(),
            l.quantile(0.5),
            l.quantile(0.99),
            l.quantile(1.0)
        );
    }
    Ok(s)
}
