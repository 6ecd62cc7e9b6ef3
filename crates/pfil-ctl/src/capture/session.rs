//! The `capture` control method: a tap linked for the session, its
//! pcapng streamed on the connection, the tap unlinked however it ends.

use std::sync::Arc;

use pfil::PacketKind;

use super::{
    pcapng_header, pcapng_packet, pcapng_stats, Tap, DEFAULT_BUFFER, MAX_SECONDS, MAX_SNAPLEN,
    NEXT_TAP,
};

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

/// The deadline of a session of `seconds` (0: none), checked.
pub(crate) fn deadline(seconds: f64) -> Result<Option<std::time::Instant>, crate::RpcError> {
    if seconds == 0.0 {
        return Ok(None);
    }
    let d = (seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS)
        .then(|| std::time::Duration::try_from_secs_f64(seconds).ok())
        .flatten()
        .and_then(|d| std::time::Instant::now().checked_add(d));
    match d {
        Some(d) => Ok(Some(d)),
        None => {
            let asked = if seconds.abs() < 1e16 {
                format!("{seconds}")
            } else {
                format!("{seconds:e}")
            };
            Err(crate::RpcError::params(format!(
                "seconds: 0 (no limit) or more, at most {MAX_SECONDS} (a year), not {asked}"
            )))
        }
    }
}

/// How a capture (or trace) session ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
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
    let deadline = deadline(p.seconds)?;
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
    use crate::capture::is_tap;
    use std::panic::{catch_unwind, AssertUnwindSafe};

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
            reload: None,
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
