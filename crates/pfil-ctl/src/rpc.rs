//! JSON-RPC 2.0 framing: error codes, the error object, and the parsing of
//! one request line into a method call (PROTOCOL.md, "Framing" and
//! "Errors").

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

/// A request id exactly as the request wrote it (a number, a string or
/// `null`), echoed byte for byte in the response: an id of
/// `18446744073709551617` comes back as that, not as a float.
pub type Id = Box<RawValue>;

/// The id `null` (errors before an id could be read, and notifications).
pub fn null_id() -> Id {
    RawValue::from_string("null".to_owned()).unwrap_or_else(|_| unreachable!())
}

/// The most characters of a piece of the request echoed in an error
/// message ([`clip`]).
pub const ECHO_MAX: usize = 96;
/// The longest error message, in bytes ([`clip_message`]).
pub const MESSAGE_MAX: usize = 1024;

/// `s` cut to [`ECHO_MAX`] characters, the cut marked with `…`: what an
/// error message may echo of the request.
pub fn clip(s: &str) -> Cow<'_, str> {
    clip_to(s, ECHO_MAX)
}

fn clip_to(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some((at, _)) => Cow::Owned(format!("{}…", &s[..at])),
    }
}

/// An error message as sent: every part quoted in it (between backticks
/// or double quotes, where messages put what they echo: names, values,
/// configs) cut to [`ECHO_MAX`] characters, and the whole to
/// [`MESSAGE_MAX`] bytes, each cut marked with `…`. Applied to every error
/// the server sends, whoever wrote the message (the registry, the catalog,
/// serde's "unknown field `...`").
pub fn clip_message(m: &str) -> Cow<'_, str> {
    let long_quote = |q: char| {
        m.split(q)
            .skip(1)
            .step_by(2)
            .any(|part| part.chars().nth(ECHO_MAX).is_some())
    };
    if m.len() <= MESSAGE_MAX && !long_quote('`') && !long_quote('"') {
        return Cow::Borrowed(m);
    }
    let mut out = String::with_capacity(MESSAGE_MAX.min(m.len()) + 8);
    let mut rest = m;
    // Text outside quotes is copied; a quoted part is clipped. A quote
    // that does not close leaves the rest to the overall cut.
    while let Some(open) = rest.find(['`', '"']) {
        let q = rest[open..].chars().next().unwrap_or('`');
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(q) else {
            rest = after;
            break;
        };
        out.push_str(&clip(&after[..close]));
        out.push(q);
        rest = &after[close + 1..];
        if out.len() > MESSAGE_MAX {
            break;
        }
    }
    out.push_str(rest);
    if out.len() > MESSAGE_MAX {
        let mut at = MESSAGE_MAX - '…'.len_utf8();
        while !out.is_char_boundary(at) {
            at -= 1;
        }
        out.truncate(at);
        out.push('…');
    }
    Cow::Owned(out)
}

/// JSON-RPC error codes of the protocol. The standard ones, then the
/// application range (-32000 and below), each with a stable `data.kind`.
pub mod code {
    /// Invalid JSON (`data.kind` `parse_error`).
    pub const PARSE_ERROR: i64 = -32700;
    /// Valid JSON, not a valid request object (`invalid_request`).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method (`method_not_found`).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Wrong, missing or unknown parameters (`invalid_params`).
    pub const INVALID_PARAMS: i64 = -32602;
    /// The registry refused the change (`data.kind` names the pfil error).
    pub const REGISTRY: i64 = -32000;
    /// The filter catalog refused the module or its config.
    pub const CATALOG: i64 = -32001;
    /// The peer may not call this method, or may not connect at all.
    pub const PERMISSION_DENIED: i64 = -32002;
    /// The request line is longer than the limit; the connection is closed.
    pub const REQUEST_TOO_LARGE: i64 = -32003;
    /// The server has its maximum of connections; this one is closed.
    pub const TOO_MANY_CONNECTIONS: i64 = -32004;
    /// No complete request line within the read timeout; closed.
    pub const TIMEOUT: i64 = -32005;
    /// A configuration file that does not parse or does not fit the
    /// registry (`apply`); `data` has its `line` and `column`.
    pub const CONFIG: i64 = -32006;
    /// A request handler panicked (a bug, in the server or in an app's
    /// filter module): the request was not done, or undone (a capture's
    /// tap is unlinked); the connection is closed (`internal_error`).
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A JSON-RPC error object: code, message and a stable `data.kind`.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    /// One of [`code`].
    pub code: i64,
    /// Human-readable, names what was wrong.
    pub message: String,
    /// The stable machine-readable kind (`data.kind`).
    pub kind: String,
    /// More members of `data` (e.g. `line` and `column`).
    pub data: Map<String, Value>,
}

impl RpcError {
    /// An error with this code, kind and message.
    pub fn new(code: i64, kind: impl Into<String>, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            kind: kind.into(),
            data: Map::new(),
        }
    }

    /// `-32602 invalid_params`.
    pub fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, "invalid_params", message)
    }

    /// `-32600 invalid_request`.
    pub fn request(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_REQUEST, "invalid_request", message)
    }

    /// `-32603 internal_error`: handling `method` panicked with `why`.
    pub fn internal(method: &str, why: &str) -> RpcError {
        RpcError::new(
            code::INTERNAL_ERROR,
            "internal_error",
            format!(
                "internal error while handling `{}`: {}; the request was not done and the connection is closed (the server goes on)",
                clip(method),
                clip(why)
            ),
        )
    }

    /// The error object as JSON, its message cut by [`clip_message`].
    pub fn to_json(&self) -> Value {
        let mut data = self.data.clone();
        data.insert("kind".into(), json!(self.kind));
        json!({"code": self.code, "message": clip_message(&self.message), "data": data})
    }
}

/// The text of a panic's payload.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_owned()
    }
}

/// A registry error as an RPC error: `-32000`, the error's message, and
/// its kind in snake case.
pub fn registry_error(e: &pfil::Error) -> RpcError {
    use pfil::Error as E;
    // A transaction's failed operation is reported as itself: which
    // operation of the server's own transaction it was means nothing to
    // the client.
    if let E::Transaction { source, .. } = e {
        return registry_error(source);
    }
    let kind = match e {
        E::NoSuchHead(_) => "no_such_head",
        E::NoSuchHook(_) => "no_such_hook",
        E::DuplicateHead(_) => "duplicate_head",
        E::DuplicateHook(_) => "duplicate_hook",
        E::InvalidName { .. } => "invalid_name",
        E::KindMismatch { .. } => "kind_mismatch",
        E::DirUnsupportedByHead { .. } => "dir_unsupported_by_head",
        E::DirNotDeclaredByHook { .. } => "dir_not_declared_by_hook",
        E::AlreadyLinked { .. } => "already_linked",
        E::NotLinked { .. } => "not_linked",
        E::GenerationConflict { .. } => "generation_conflict",
        E::NoWorkerSlot(_) => "no_worker_slot",
        E::WriterInHook => "writer_in_hook",
        E::Parse { .. } => "parse",
        E::AlreadyTraced { .. } => "already_traced",
        _ => "registry",
    };
    RpcError::new(code::REGISTRY, kind, e.to_string())
}

/// The error of a failed `apply`: [`code::CONFIG`] with `line` and
/// `column` for a bad file, the registry's kind (`generation_conflict`,
/// `kind_mismatch`, ...) for a refusal, located in the file.
pub fn apply_error(e: &crate::config::ApplyError) -> RpcError {
    use crate::config::ApplyError as E;
    let (mut r, at) = match e {
        E::Config(c) => (
            RpcError::new(code::CONFIG, "config", e.to_string()),
            Some(c),
        ),
        E::Conflict { .. } => (
            RpcError::new(code::REGISTRY, "generation_conflict", e.to_string()),
            None,
        ),
        E::Registry { at, error } => {
            let mut r = registry_error(error);
            r.message = e.to_string();
            (r, Some(at))
        }
    };
    if let Some(at) = at {
        for (k, v) in [("line", at.line), ("column", at.column)] {
            if let Some(v) = v {
                r.data.insert(k.into(), json!(v));
            }
        }
    }
    r
}

/// A catalog error as an RPC error: `-32001`, kinds `unknown_module`,
/// `bad_config`, `refused` (or `catalog`).
pub fn catalog_error(e: &pfil_filters::CatalogError) -> RpcError {
    use pfil_filters::CatalogError as E;
    let kind = match e {
        E::UnknownModule { .. } => "unknown_module",
        E::BadConfig { .. } => "bad_config",
        E::Refused { .. } => "refused",
        _ => "catalog",
    };
    RpcError::new(code::CATALOG, kind, e.to_string())
}

#[derive(Serialize)]
struct Response<'a> {
    id: &'a RawValue,
    jsonrpc: &'static str,
    result: &'a Value,
}

#[derive(Serialize)]
struct ErrorResponse<'a> {
    error: Value,
    id: &'a RawValue,
    jsonrpc: &'static str,
}

/// A success response line (without the newline); `id` is echoed as
/// written.
pub fn response(id: &RawValue, result: Value) -> String {
    serde_json::to_string(&Response {
        id,
        jsonrpc: "2.0",
        result: &result,
    })
    .unwrap_or_else(|e| error_response(id, &RpcError::internal("the response", &e.to_string())))
}

/// An error response line (without the newline).
pub fn error_response(id: &RawValue, e: &RpcError) -> String {
    serde_json::to_string(&ErrorResponse {
        error: e.to_json(),
        id,
        jsonrpc: "2.0",
    })
    .unwrap_or_else(|_| {
        r#"{"error":{"code":-32603,"data":{"kind":"internal_error"},"message":"internal error: cannot write the response"},"id":null,"jsonrpc":"2.0"}"#.to_owned()
    })
}

/// One well-formed call taken from a request line.
#[derive(Debug)]
pub struct Call {
    /// The request id as written; `None` for a notification.
    pub id: Option<Id>,
    /// The method name.
    pub method: String,
    /// The by-name parameters (empty when absent).
    pub params: Map<String, Value>,
}

/// Parse one request line. On error, returns the id to answer with (the
/// request's if it could be read, else `null`) and the error.
pub fn parse_call(line: &[u8]) -> Result<Call, (Id, RpcError)> {
    // The members as written: the id is kept as its text, the others
    // are read as values below.
    let mut o: std::collections::BTreeMap<String, Box<RawValue>> =
        match serde_json::from_slice(line) {
            Ok(o) => o,
            Err(e) => {
                let e = match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
                Err(e) => RpcError::new(
                    code::PARSE_ERROR,
                    "parse_error",
                    format!("request is not valid JSON: {e}"),
                ),
                Ok(_) if line.trim_ascii_start().starts_with(b"[") => RpcError::request(
                    "batch requests (arrays) are not supported: send one request object per line",
                ),
                Ok(_) if line.trim_ascii_start().starts_with(b"{") => {
                    RpcError::request(format!("not a request object: {e}"))
                }
                Ok(_) => RpcError::request("a request must be a JSON object"),
            };
                return Err((null_id(), e));
            }
        };
    let id = match o.remove("id") {
        None => None,
        Some(id)
            if matches!(
                id.get().as_bytes().first(),
                Some(b'"' | b'n' | b'-' | b'0'..=b'9')
            ) =>
        {
            Some(id)
        }
        Some(_) => {
            return Err((
                null_id(),
                RpcError::request("`id` must be a number, a string or null"),
            ))
        }
    };
    let answer = id.clone().unwrap_or_else(null_id);
    let value = |raw: &RawValue| -> Result<Value, (Id, RpcError)> {
        serde_json::from_str(raw.get()).map_err(|e| {
            (
                answer.clone(),
                RpcError::new(
                    code::PARSE_ERROR,
                    "parse_error",
                    format!("request is not valid JSON: {e}"),
                ),
            )
        })
    };
    let bad = |m: &str| Err((answer.clone(), RpcError::request(m)));
    if o.remove("jsonrpc").map(|v| value(&v)).transpose()? != Some(Value::String("2.0".into())) {
        return bad("`jsonrpc` must be \"2.0\"");
    }
    let method = match o.remove("method").map(|m| value(&m)).transpose()? {
        Some(Value::String(m)) => m,
        Some(_) => return bad("`method` must be a string"),
        None => return bad("`method` is missing"),
    };
    let params = match o.remove("params").map(|p| value(&p)).transpose()? {
        None => Map::new(),
        Some(Value::Object(p)) => p,
        Some(Value::Array(_)) => {
            return Err((
                answer,
                RpcError::params("params must be an object (by name), not an array"),
            ))
        }
        Some(_) => return bad("`params` must be an object"),
    };
    if let Some(k) = o.keys().next() {
        return bad(&format!(
            "unknown member `{}` in the request object",
            clip(k)
        ));
    }
    Ok(Call { id, method, params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> (Value, i64) {
        let (id, e) = parse_call(line.as_bytes()).unwrap_err();
        (serde_json::from_str(id.get()).unwrap(), e.code)
    }

    #[test]
    fn calls_and_their_errors() {
        let c = parse_call(br#"{"jsonrpc":"2.0","id":7,"method":"heads"}"#).unwrap();
        assert_eq!(
            (c.id.as_ref().map(|i| i.get()), c.method.as_str()),
            (Some("7"), "heads")
        );
        let c = parse_call(br#"{"jsonrpc":"2.0","method":"x","params":{"a":1}}"#).unwrap();
        assert_eq!((c.id.is_none(), c.params.len()), (true, 1));
        assert_eq!(err("{"), (Value::Null, code::PARSE_ERROR));
        assert_eq!(err("[]"), (Value::Null, code::INVALID_REQUEST));
        assert_eq!(err("3"), (Value::Null, code::INVALID_REQUEST));
        assert_eq!(
            err(r#"{"jsonrpc":"1.0","id":"a","method":"x"}"#),
            (json!("a"), code::INVALID_REQUEST)
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":3}"#),
            (json!(1), code::INVALID_REQUEST)
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            (Value::Null, code::INVALID_REQUEST)
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
            (json!(1), code::INVALID_PARAMS)
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":2}"#),
            (json!(1), code::INVALID_REQUEST)
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","extra":2}"#),
            (json!(1), code::INVALID_REQUEST)
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#),
            (Value::Null, code::INVALID_REQUEST)
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1e400}}"#),
            (json!(1), code::PARSE_ERROR)
        );
        let c = parse_call(br#"{"jsonrpc":"2.0","id":1e400,"method":"x"}"#).unwrap();
        assert_eq!(c.id.unwrap().get(), "1e400");
    }

    #[test]
    fn messages_echo_a_bounded_part_of_the_input() {
        let long = "x".repeat(5000);
        assert_eq!(clip("abc"), "abc");
        assert_eq!(clip(&long).chars().count(), ECHO_MAX + 1);
        let m = format!("no such hook `{long}`, see \"{long}\" and {long}");
        let c = clip_message(&m);
        assert!(c.len() <= MESSAGE_MAX, "{}", c.len());
        assert!(
            c.starts_with(&format!(
                "no such hook `{}…`, see \"{}…\" and x",
                &long[..ECHO_MAX],
                &long[..ECHO_MAX]
            )),
            "{c}"
        );
        assert!(c.ends_with('…'));
        // Multi-byte characters are cut on their boundaries.
        let m = format!("bad `{}`", "é".repeat(3000));
        assert!(clip_message(&m).ends_with("…`"));
        let m = "é".repeat(3000);
        assert!(clip_message(&m).len() <= MESSAGE_MAX);
        // Short messages are untouched.
        assert!(matches!(
            clip_message("no such head `syn9`"),
            Cow::Borrowed(_)
        ));
        // An id is echoed exactly.
        let id = RawValue::from_string("18446744073709551617".into()).unwrap();
        assert_eq!(
            response(&id, json!(1)),
            r#"{"id":18446744073709551617,"jsonrpc":"2.0","result":1}"#
        );
    }
}
