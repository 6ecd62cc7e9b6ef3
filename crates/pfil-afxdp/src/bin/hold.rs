//! `pfil-afxdp-hold NETNS IFNAME [SECONDS]`: enter the namespace, open a
//! sink port on queue 0 of IFNAME (attaching the XDP redirect program),
//! print `ready`, and run the sink for at most SECONDS (default 60).
//! Tests kill it with SIGKILL to check that the kernel detaches the program.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: pfil-afxdp-hold NETNS IFNAME [SECONDS]");
        std::process::exit(2);
    }
    let secs: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(60);
    if let Err(e) = pfil_afxdp::enter_netns(&args[1]) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    let reg = pfil::Registry::new();
    let lc = pfil_afxdp::run::LoopConfig::new();
    let setup = pfil_afxdp::run::WorkerSetup {
        queues: Some(vec![0]),
        ..Default::default()
    };
    let running = match pfil_afxdp::run::spawn_sink(&reg, &args[2], &setup, lc) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    println!("ready");
    let _ = std::io::stdout().flush();
    let stop = Arc::new(AtomicBool::new(false));
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(secs) && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = running.join();
}
