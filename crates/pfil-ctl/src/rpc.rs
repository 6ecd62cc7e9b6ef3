//! JSON-RPC 2.0 framing: error codes, the error object, and the parsing of
//! one request line into a method call (PROTOCOL.md, "Framing" and
//! "Errors").

use serde_json::{json, Map, Value};

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

    /// The error object as JSON.
    pub fn to_json(&self) -> Value {
        let mut data = self.data.clone();
        data.insert("kind".into(), json!(self.kind));
        json!({"code": self.code, "message": self.message, "data": data})
    }
}

/// A registry error as an RPC error: `-32000`, the error's message, and
/// its kind in snake case.
pub fn registry_error(e: &pfil::Error) -> RpcError {
    use pfil::Error as E;
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
        E::Transaction { .. } => "transaction",
        E::NoWorkerSlot(_) => "no_worker_slot",
        E::WriterInHook => "writer_in_hook",
        E::Parse { .. } => "parse",
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
/// `bad_config` (or `catalog`).
pub fn catalog_error(e: &pfil_filters::CatalogError) -> RpcError {
    use pfil_filters::CatalogError as E;
    let kind = match e {
        E::UnknownModule { .. } => "unknown_module",
        E::BadConfig { .. } => "bad_config",
        _ => "catalog",
    };
    RpcError::new(code::CATALOG, kind, e.to_string())
}

/// A success response line (without the newline).
pub fn response(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error response line (without the newline).
pub fn error_response(id: &Value, e: &RpcError) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": e.to_json()}).to_string()
}

/// One well-formed call taken from a request line.
#[derive(Debug, PartialEq)]
pub struct Call {
    /// The request id; `None` for a notification (no response is sent).
    pub id: Option<Value>,
    /// The method name.
    pub method: String,
    /// The by-name parameters (empty when absent).
    pub params: Map<String, Value>,
}

/// Parse one request line. On error, returns the id to answer with (the
/// request's if it could be read, else `null`) and the error.
pub fn parse_call(line: &[u8]) -> Result<Call, (Value, RpcError)> {
    let v: Value = serde_json::from_slice(line).map_err(|e| {
        (
            Value::Null,
            RpcError::new(
                code::PARSE_ERROR,
                "parse_error",
                format!("request is not valid JSON: {e}"),
            ),
        )
    })?;
    let Value::Object(mut o) = v else {
        let what = if v.is_array() {
            "batch requests (arrays) are not supported: send one request object per line"
        } else {
            "a request must be a JSON object"
        };
        return Err((Value::Null, RpcError::request(what)));
    };
    let id = match o.remove("id") {
        None => None,
        Some(id @ (Value::Null | Value::Number(_) | Value::String(_))) => Some(id),
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::request("`id` must be a number, a string or null"),
            ))
        }
    };
    let answer = id.clone().unwrap_or(Value::Null);
    let bad = |m: &str| Err((answer.clone(), RpcError::request(m)));
    if o.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return bad("`jsonrpc` must be \"2.0\"");
    }
    let method = match o.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return bad("`method` must be a string"),
        None => return bad("`method` is missing"),
    };
    let params = match o.remove("params") {
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
    o.remove("jsonrpc");
    if let Some(k) = o.keys().next() {
        return bad(&format!("unknown member `{k}` in the request object"));
    }
    Ok(Call { id, method, params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> (Value, i64) {
        let (id, e) = parse_call(line.as_bytes()).unwrap_err();
        (id, e.code)
    }

    #[test]
    fn calls_and_their_errors() {
        let c = parse_call(br#"{"jsonrpc":"2.0","id":7,"method":"heads"}"#).unwrap();
        assert_eq!((c.id, c.method.as_str()), (Some(json!(7)), "heads"));
        let c = parse_call(br#"{"jsonrpc":"2.0","method":"x","params":{"a":1}}"#).unwrap();
        assert_eq!((c.id, c.params.len()), (None, 1));
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
    }
}
