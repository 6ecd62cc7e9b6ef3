//! Reload (SIGHUP, `pfilctl reload`): re-read the `--config` file, apply
//! its hooks and chains in one transaction, name the `[pfild]` settings
//! that changed (they need a restart; they are left as they run). A file
//! that does not read, parse or fit changes nothing and says why. Like
//! `pfctl -f`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pfil::Registry;
use pfil_ctl::config::{ApplyError, Config};
use serde_json::{json, Value};

use crate::notify::Notifier;
use crate::settings::Settings;

/// How many times a reload plans again when another write (an `apply`,
/// a `pfilctl link`) committed between its plan and its commit.
const CONFLICT_RETRIES: usize = 5;

/// How long a reload waits for its grace period before answering.
const GRACE: Duration = Duration::from_secs(2);

/// A file modified less than this long ago is being written: a reload
/// waits until it has been left alone this long.
pub const SETTLE: Duration = Duration::from_millis(250);

/// How long a reload waits for the file to settle before it gives up.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// What identifies a version of the file: modification time, size, inode.
fn stamp(path: &std::path::Path) -> Result<(std::time::SystemTime, u64, u64), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let t = m
        .modified()
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok((t, m.len(), m.ino()))
}

/// The file's text once nothing has written it for [`SETTLE`]: read
/// between two equal stamps, the later at least `SETTLE` after the
/// modification time. Waits at most [`SETTLE_LIMIT`].
///
/// # Errors
/// The read's error; a file still changing after [`SETTLE_LIMIT`].
pub fn read_settled(path: &std::path::Path) -> Result<String, String> {
    let t0 = std::time::Instant::now();
    loop {
        let before = stamp(path)?;
        let text = pfil_ctl::config::read_file(path)?;
        let after = stamp(path)?;
        let age = std::time::SystemTime::now()
            .duration_since(after.0)
            .unwrap_or_default();
        if before == after && age >= SETTLE {
            return Ok(text);
        }
        if t0.elapsed() >= SETTLE_LIMIT {
            return Err(format!(
                "{}: still being written after {} s (write the new file beside it and rename it \
                 into place: a rename is atomic)",
                path.display(),
                SETTLE_LIMIT.as_secs()
            ));
        }
        std::thread::sleep(SETTLE.saturating_sub(age).max(Duration::from_millis(10)));
    }
}

/// What reloads the configuration file; shared by the signal path and
/// the control server's `reload` method, one reload at a time.
pub struct Reloader {
    path: PathBuf,
    running: Settings,
    reg: Registry,
    notifier: Arc<Notifier>,
    one: Mutex<()>,
}

impl Reloader {
    /// A reloader of `path`, whose settings `running` pfild started with.
    pub fn new(
        path: PathBuf,
        running: Settings,
        reg: Registry,
        notifier: Arc<Notifier>,
    ) -> Reloader {
        Reloader {
            path,
            running,
            reg,
            notifier,
            one: Mutex::new(()),
        }
    }

    /// Reload, tell systemd (RELOADING=1, then READY=1 whatever the
    /// outcome: the old configuration still runs) and log the outcome.
    ///
    /// # Errors
    /// What is wrong with the file (its name, line and column); nothing
    /// changed.
    pub fn reload(&self) -> Result<Value, String> {
        let _one = self.one.lock().unwrap_or_else(PoisonError::into_inner);
        self.notifier.reloading();
        let r = self.reload_locked();
        match &r {
            Ok(v) => {
                let changes = v["diff"].as_array().map_or(0, Vec::len);
                eprintln!(
                    "pfild: reloaded {}: generation {} -> {}, {changes} change(s)",
                    self.path.display(),
                    v["base"],
                    v["generation"]
                );
                for d in v["diff"].as_array().into_iter().flatten() {
                    eprintln!("pfild:   {}", d.as_str().unwrap_or_default());
                }
                if let Some(r) = v["restart_needed"].as_array().filter(|r| !r.is_empty()) {
                    let r: Vec<&str> = r.iter().filter_map(Value::as_str).collect();
                    eprintln!(
                        "pfild: reload: needs a restart, left as running: {}",
                        r.join(", ")
                    );
                }
                self.notifier.ready(&format!(
                    "running; reloaded, generation {}",
                    v["generation"]
                ));
            }
            Err(e) => {
                eprintln!("pfild: reload refused, nothing changed: {e}");
                self.notifier
                    .ready("running; the last reload was refused (see the log)");
            }
        }
        r
    }

    fn reload_locked(&self) -> Result<Value, String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", self.path.display());
        // A file being rewritten in place can be valid TOML cut short (a
        // configuration without its chains): read it only once it has
        // not changed for SETTLE.
        let text = read_settled(&self.path)?;
        let settings = Settings::parse(&text).map_err(|e| at(&e))?;
        let cfg = Config::parse(&text).map_err(|e| at(&e))?;
        let catalog = crate::hooks::catalog();
        let mut tries = 0;
        let (plan_diff, base, commit) = loop {
            let plan = cfg.plan(&self.reg, &catalog, None).map_err(|e| at(&e))?;
            let diff: Vec<String> = plan.changes().iter().map(ToString::to_string).collect();
            let base = plan.base();
            match plan.commit(&self.reg, false) {
                Ok(c) => break (diff, base, c),
                Err(ApplyError::Conflict { .. }) if tries < CONFLICT_RETRIES => tries += 1,
                Err(e) => return Err(at(&e)),
            }
        };
        let mut v = match commit {
            Some(c) => pfil_ctl::committed_json(&self.reg, c, GRACE),
            None => json!({"generation": base, "complete": true, "retired": [], "reaped": []}),
        };
        v["file"] = json!(self.path.display().to_string());
        v["base"] = json!(base);
        v["diff"] = json!(plan_diff);
        v["restart_needed"] = json!(self.running.restart_needed(&settings));
        Ok(v)
    }
}
