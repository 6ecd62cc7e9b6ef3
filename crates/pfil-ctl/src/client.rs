//! A blocking client of the control protocol, as pfilctl uses it.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::rpc::RpcError;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Connecting to the socket failed.
    #[error("cannot connect to the control socket {}: {source}{hint}", path.display())]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The error.
        source: io::Error,
        /// A hint at the fix.
        hint: &'static str,
    },
    /// Reading or writing failed, or the server closed the connection.
    #[error("control connection: {0}")]
    Io(#[from] io::Error),
    /// The server's answer is not a JSON-RPC response.
    #[error("bad response from the server: {0}")]
    Protocol(String),
    /// The server answered with an error.
    #[error("{}", .0.message)]
    Rpc(RpcError),
}

/// A connection to a control server.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
}

impl Client {
    /// Connect to the server at `path` (30 s timeouts on every call).
    ///
    /// # Errors
    /// [`ClientError::Connect`], with a hint.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path).map_err(|source| {
            let hint = match source.kind() {
                io::ErrorKind::NotFound => {
                    " (is the dataplane running with its control server? pick the socket with --socket)"
                }
                io::ErrorKind::ConnectionRefused => " (no server is listening: a stale socket)",
                io::ErrorKind::PermissionDenied => {
                    " (only the dataplane's user, root or its read-only group may connect)"
                }
                _ => "",
            };
            ClientError::Connect {
                path: path.to_owned(),
                source,
                hint,
            }
        })?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        s.set_write_timeout(Some(Duration::from_secs(30)))?;
        Ok(Client {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
            next_id: 1,
        })
    }

    /// Call `method` with by-name `params` (an object, or `null` for none)
    /// and return its result.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with the server's error, or a transport error.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut req = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            req["params"] = params;
        }
        let mut line = req.to_string();
        line.push('\n');
        if let Err(e) = self.writer.write_all(line.as_bytes()) {
            // A server that refuses a peer answers at once and closes: its
            // error line may be waiting even though our write failed.
            return match self.read_response() {
                Ok(resp) if resp.get("error").is_some() => {
                    Err(ClientError::Rpc(rpc_error(&resp["error"])))
                }
                _ => Err(e.into()),
            };
        }
        let resp = self.read_response()?;
        if resp.get("id") != Some(&json!(id)) && resp.get("id") != Some(&Value::Null) {
            return Err(ClientError::Protocol(format!(
                "response for another id: {resp}"
            )));
        }
        if let Some(e) = resp.get("error") {
            return Err(ClientError::Rpc(rpc_error(e)));
        }
        resp.get("result")
            .cloned()
            .ok_or_else(|| ClientError::Protocol(format!("no result and no error: {resp}")))
    }

    /// Send a raw line (a newline is added) and read one response line.
    ///
    /// # Errors
    /// Transport errors; the server closing the connection is
    /// [`ClientError::Io`] of kind `UnexpectedEof`.
    pub fn raw(&mut self, line: &str) -> Result<Value, ClientError> {
        self.writer.write_all(line.as_bytes())?;
        self.writer.write_all(b"\n")?;
        self.read_response()
    }

    fn read_response(&mut self) -> Result<Value, ClientError> {
        let mut buf = String::new();
        if self.reader.read_line(&mut buf)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )
            .into());
        }
        serde_json::from_str(&buf).map_err(|e| ClientError::Protocol(format!("{e}: {buf}")))
    }
}

/// Read a JSON-RPC error object.
pub fn rpc_error(e: &Value) -> RpcError {
    RpcError {
        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)")
            .to_owned(),
        kind: e
            .pointer("/data/kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        data: e
            .get("data")
            .and_then(Value::as_object)
            .map(|d| {
                let mut d = d.clone();
                d.remove("kind");
                d
            })
            .unwrap_or_default(),
    }
}

/// A streaming method (`capture`, `trace`) from a command-line client:
/// send the request, hand each notification named `notification` to
/// `each`, and return the final result. SIGINT and SIGTERM send
/// `METHOD.stop` (the server ends the session and answers as usual).
///
/// # Errors
/// Connecting, reading or writing; the server's error (message and
/// kind); what `each` returns.
pub(crate) fn stream(
    path: &Path,
    method: &str,
    params: Value,
    notification: &str,
    mut each: impl FnMut(&Value) -> Result<(), String>,
) -> Result<Value, String> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| format!("signals: {e}"))?;
    }
    let mut s = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    s.write_all(format!("{req}\n").as_bytes())
        .map_err(|e| format!("sending the request: {e}"))?;
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    let mut line = String::new();
    let mut asked_stop = false;
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) && !asked_stop {
            asked_stop = true;
            let stop = json!({"jsonrpc": "2.0", "method": format!("{method}.stop")});
            let _ = s.write_all(format!("{stop}\n").as_bytes());
        }
        match r.read_line(&mut line) {
            Ok(0) => {
                return Err(format!(
                    "the server closed the connection before the {method} ended"
                ))
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(format!("reading from the server: {e}")),
        }
        let v: Value = serde_json::from_str(line.trim_end()).map_err(|e| format!("{e}: {line}"))?;
        line.clear();
        if v["method"] == notification {
            each(&v["params"])?;
            continue;
        }
        if let Some(e) = v.get("error") {
            let e = rpc_error(e);
            return Err(format!("{} ({})", e.message, e.kind));
        }
        return Ok(v["result"].clone());
    }
}
