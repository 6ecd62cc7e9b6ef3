//! The methods: each reads or changes the registry through its public
//! writer API and answers with JSON (PROTOCOL.md, "Methods").

use std::sync::Arc;

use pfil::{Dir, Dirs, FilterStat, LinkInfo, Op, PacketKind, Placement, Registry};
use pfil_filters::{BuildCtx, Catalog};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::config::{Config, Running};
use crate::rpc::{apply_error, catalog_error, code, registry_error, RpcError};
use crate::PROTOCOL_VERSION;

/// What a peer may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Every method (the owner's uid, root).
    Write,
    /// Only the read methods (the read-only group).
    Read,
}

/// The methods that only read.
pub const READ_METHODS: &[&str] = &[
    "version",
    "heads",
    "hooks",
    "stats",
    "filter_stats",
    "states",
    "show",
    "map",
];
/// The methods that change the configuration (`apply` even as a dry run:
/// planning builds filters).
pub const WRITE_METHODS: &[&str] = &[
    "add",
    "set",
    "del",
    "link",
    "unlink",
    "apply",
    "sampling",
    "capture",
    "reap",
    "reload",
    "trace",
    "kill_states",
    "map_update",
    "map_delete",
    "map_events",
];

/// What the methods work on.
pub(crate) struct Target {
    pub(crate) registry: Registry,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) app: String,
    pub(crate) grace_timeout: std::time::Duration,
    pub(crate) reload: Option<crate::server::Reload>,
}

fn params<T: for<'de> Deserialize<'de>>(
    method: &str,
    p: Map<String, Value>,
) -> Result<T, RpcError> {
    serde_json::from_value(Value::Object(p)).map_err(|e| RpcError::params(format!("{method}: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatsParams {
    head: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterStatsParams {
    hook: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatesParams {
    hook: Option<String>,
    limit: Option<usize>,
    expr: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KillStatesParams {
    hook: Option<String>,
    expr: String,
}

/// Most states one `states` reply lists by default.
pub const DEFAULT_STATES_LIMIT: usize = 10_000;
/// Most states one `states` reply lists.
pub const MAX_STATES_LIMIT: usize = 1_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddParams {
    hook: String,
    config: Option<String>,
    kind: Option<String>,
    dirs: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HookParams {
    hook: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetParams {
    hook: String,
    config: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkParams {
    head: String,
    dir: String,
    hook: String,
    #[serde(default)]
    placement: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyParams {
    toml: String,
    #[serde(default)]
    dry_run: bool,
    expect_generation: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SamplingParams {
    every: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReapParams {
    head: Option<String>,
    dir: Option<String>,
    hook: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnlinkParams {
    head: String,
    dir: String,
    hook: String,
}

pub(crate) fn dir(s: &str) -> Result<Dir, RpcError> {
    match s {
        "in" => Ok(Dir::In),
        "out" => Ok(Dir::Out),
        _ => Err(RpcError::params(format!(
            "dir: expected \"in\" or \"out\", got {s:?}"
        ))),
    }
}

fn dirs_list(d: Dirs) -> Value {
    Value::Array(d.iter().map(|d| json!(d.to_string())).collect())
}

/// `placement`: `"prepend"` (default) / `"append"` as pfilctl(8), relative
/// to the wire; `"first"` / `"last"` in walk order; `{"before": H}` /
/// `{"after": H}` in walk order.
pub(crate) fn placement(v: Option<&Value>, d: Dir) -> Result<Placement, RpcError> {
    let expected = "placement: expected \"prepend\", \"append\", \"first\", \"last\", {\"before\": HOOK} or {\"after\": HOOK}";
    let Some(v) = v else {
        return Ok(Placement::Prepend);
    };
    match v {
        Value::String(s) => match (s.as_str(), d) {
            ("prepend", _) | ("first", Dir::In) | ("last", Dir::Out) => Ok(Placement::Prepend),
            ("append", _) | ("last", Dir::In) | ("first", Dir::Out) => Ok(Placement::Append),
            _ => Err(RpcError::params(format!("{expected}, got {v}"))),
        },
        Value::Object(o) if o.len() == 1 => match o.iter().next() {
            Some((k, Value::String(h))) if k == "before" => Ok(Placement::Before(h.clone())),
            Some((k, Value::String(h))) if k == "after" => Ok(Placement::After(h.clone())),
            _ => Err(RpcError::params(format!("{expected}, got {v}"))),
        },
        _ => Err(RpcError::params(format!("{expected}, got {v}"))),
    }
}

/// Split a hook name `module:ruleset`.
fn split_hook(name: &str) -> Result<(&str, &str), RpcError> {
    match name.split_once(':') {
        Some((m, r)) if !m.is_empty() && !r.is_empty() => Ok((m, r)),
        _ => Err(RpcError::params(format!(
            "hook: expected MODULE:INSTANCE (e.g. count:edge), got {name:?}"
        ))),
    }
}

/// A fail mode as the protocol and the TOML file say it: `open`, `closed`.
fn fail_word(f: pfil::FailMode) -> &'static str {
    match f {
        pfil::FailMode::Closed => "closed",
        _ => "open",
    }
}

fn link_json(l: &LinkInfo) -> Value {
    json!({"hook": l.hook, "fail": fail_word(l.fail), "quarantined": l.quarantined})
}

/// The quarantined links a write unlinked (PROTOCOL.md, "reaped"), each
/// with its final counters once its grace period passed (waited for at
/// most `timeout`; `complete` says whether it did).
/// A write's reply as the control protocol gives it: the generation,
/// whether its grace period completed within `grace` (then the `retired`
/// links' counters are final), and the links it (or a write since the
/// last reply) reaped, with their final counters.
pub fn committed_json(reg: &Registry, mut c: pfil::Commit, grace: std::time::Duration) -> Value {
    let complete = c.retirement.wait_timeout(grace);
    let retired: Vec<Value> = c
        .retirement
        .links()
        .iter()
        .map(|l| {
            let mut v = json!({"head": l.head, "dir": l.dir.to_string(), "hook": l.hook});
            final_counts(&mut v, &l.counters);
            v
        })
        .collect();
    let mut reaped = std::mem::take(&mut c.reaped);
    reaped.append(&mut reg.take_reaped());
    let reaped = reaped_json(reaped, grace);
    json!({"generation": c.generation, "complete": complete, "retired": retired, "reaped": reaped})
}

pub(crate) fn reaped_json(reaped: Vec<pfil::Reaped>, timeout: std::time::Duration) -> Vec<Value> {
    reaped
        .into_iter()
        .map(|r| {
            let complete = r.retirement.wait_timeout(timeout);
            let mut v = json!({
                "head": r.head,
                "dir": r.dir.to_string(),
                "hook": r.hook,
                "fail": fail_word(r.fail),
                "generation": r.generation,
                "complete": complete,
            });
            final_counts(&mut v, &r.retirement.counters());
            v
        })
        .collect()
}

/// A link's counters (packets, bytes, verdicts, faults), into `v`.
fn final_counts(v: &mut Value, k: &pfil::Counters) {
    for (key, n) in [
        ("packets", k.packets),
        ("bytes", k.bytes),
        ("passed", k.passed),
        ("dropped", k.dropped),
        ("consumed", k.consumed),
        ("faults", k.faults),
    ] {
        v[key] = json!(n);
    }
}

fn stats_json(l: &LinkInfo) -> Value {
    let c = &l.counters;
    let mut v = json!({"hook": l.hook});
    final_counts(&mut v, c);
    for (key, x) in [
        ("quarantined", json!(l.quarantined)),
        ("sampled_batches", json!(c.sampled_batches)),
        ("sampled_packets", json!(c.sampled_packets)),
        ("sampled_ns", json!(c.sampled_ns)),
    ] {
        v[key] = x;
    }
    v
}

/// The `stats` result: per head and direction, every link's counters and
/// cost, with the generation and the sampling in force (PROTOCOL.md).
///
/// # Errors
/// [`pfil::Error::NoSuchHead`] for an unknown `head`.
pub fn stats(reg: &Registry, head: Option<&str>) -> Result<Value, pfil::Error> {
    let generation = reg.generation();
    let mut heads = reg.heads();
    if let Some(want) = head {
        heads.retain(|h| h.name == want);
        if heads.is_empty() {
            return Err(pfil::Error::NoSuchHead(want.to_owned()));
        }
    }
    let heads: Vec<Value> = heads
        .iter()
        .map(|h| {
            json!({
                "name": h.name,
                "in": h.chains[0].iter().map(stats_json).collect::<Vec<_>>(),
                "out": h.chains[1].iter().map(stats_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(json!({"generation": generation, "sampling": reg.sampling(), "heads": heads}))
}

fn filter_stat_json(s: &FilterStat) -> Value {
    let samples: Vec<Value> = s
        .samples
        .iter()
        .map(|x| {
            let labels: Map<String, Value> = x
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            json!({"labels": labels, "value": x.value})
        })
        .collect();
    json!({"name": s.name, "kind": s.kind.to_string(), "help": s.help, "samples": samples})
}

fn filter_stats_json(hook: &str, stats: &[FilterStat]) -> Value {
    json!({"hook": hook, "stats": stats.iter().map(filter_stat_json).collect::<Vec<_>>()})
}

/// The `filter_stats` result: the filters' own statistics
/// ([`pfil::Filter::stats`]: an `acl`'s per-rule hits, a `ratelimit`'s
/// evictions) of one hook, or of every hook whose filter keeps some,
/// with the generation (PROTOCOL.md).
///
/// # Errors
/// `no_such_hook` for an unknown `hook`; `no_filter_stats` for a hook
/// whose filter keeps none.
pub fn filter_stats(reg: &Registry, hook: Option<&str>) -> Result<Value, RpcError> {
    let (generation, hooks) = match hook {
        Some(h) => {
            let generation = reg.generation();
            let stats = reg.hook_stats(h).map_err(|e| registry_error(&e))?;
            if stats.is_empty() {
                return Err(RpcError::new(
                    code::REGISTRY,
                    "no_filter_stats",
                    format!(
                        "hook `{h}` has no filter statistics: its filter keeps none beyond the link counters of `stats`"
                    ),
                ));
            }
            (generation, vec![filter_stats_json(h, &stats)])
        }
        None => {
            let (generation, all) = reg.filter_stats();
            let hooks = all.iter().map(|(h, s)| filter_stats_json(h, s)).collect();
            (generation, hooks)
        }
    };
    Ok(json!({"generation": generation, "hooks": hooks}))
}

/// The `states` result: the flows of one `ct` hook (or `acl` hook with
/// `keep state` rules), or of every one (PROTOCOL.md).
///
/// # Errors
/// `no_such_hook`; `not_a_tracker` for a hook whose filter is not `ct`;
/// `invalid_params` for a `limit` over [`MAX_STATES_LIMIT`].
pub fn states(
    reg: &Registry,
    hook: Option<&str>,
    limit: Option<usize>,
    expr: Option<&str>,
) -> Result<Value, RpcError> {
    let expr = expr.map(state_expr).transpose()?;
    let limit = limit.unwrap_or(DEFAULT_STATES_LIMIT);
    if limit > MAX_STATES_LIMIT {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            "invalid_params",
            format!("limit: at most {MAX_STATES_LIMIT} states a reply, not {limit}"),
        ));
    }
    let generation = reg.generation();
    let names: Vec<String> = match hook {
        Some(h) => vec![h.to_owned()],
        None => reg.hooks().into_iter().map(|h| h.name).collect(),
    };
    let mut hooks = Vec::new();
    for name in names {
        let f = reg.hook_filter(&name).map_err(|e| registry_error(&e))?;
        let any = f.as_any();
        let found = if let Some(ct) = any.and_then(|a| a.downcast_ref::<pfil_filters::Ct>()) {
            Some(match &expr {
                Some(x) => ct.list_matching(x, limit),
                None => ct.list_states(limit),
            })
        } else {
            any.and_then(|a| a.downcast_ref::<pfil_filters::Acl>())
                .and_then(|a| match &expr {
                    Some(x) => a.list_matching(x, limit),
                    None => a.list_states(limit),
                })
        };
        let Some((total, all)) = found else {
            if hook.is_some() {
                return Err(RpcError::new(
                    code::REGISTRY,
                    "not_a_tracker",
                    format!("hook `{name}` keeps no states: its filter is not `ct` (nor an `acl` with `keep state` rules)"),
                ));
            }
            continue;
        };
        let rows: Vec<Value> = all
            .into_iter()
            .map(|s| {
                json!({
                    "proto": s.proto,
                    "src": s.src.to_string(),
                    "sport": s.sport,
                    "dst": s.dst.to_string(),
                    "dport": s.dport,
                    "state": s.state,
                    "age": s.age,
                    "expires": s.expires,
                    "packets": s.packets,
                    "bytes": s.bytes,
                    "kept": s.kept,
                })
            })
            .collect();
        hooks.push(json!({"hook": name, "total": total, "states": rows}));
    }
    Ok(json!({"generation": generation, "hooks": hooks}))
}

fn state_expr(text: &str) -> Result<pfil_filters::ct::StateExpr, RpcError> {
    pfil_filters::ct::StateExpr::parse(text)
        .map_err(|e| RpcError::new(code::INVALID_PARAMS, "invalid_params", format!("expr: {e}")))
}

/// The `kill_states` result: the flows `expr` matched and removed, per
/// hook (one hook, or every `ct` hook and `acl` with keep state).
///
/// # Errors
/// `invalid_params` for a bad expression; `no_such_hook`;
/// `not_a_tracker`.
pub fn kill_states(reg: &Registry, hook: Option<&str>, expr: &str) -> Result<Value, RpcError> {
    let expr = state_expr(expr)?;
    let names: Vec<String> = match hook {
        Some(h) => vec![h.to_owned()],
        None => reg.hooks().into_iter().map(|h| h.name).collect(),
    };
    let mut hooks = Vec::new();
    for name in names {
        let f = reg.hook_filter(&name).map_err(|e| registry_error(&e))?;
        let any = f.as_any();
        let killed = if let Some(ct) = any.and_then(|a| a.downcast_ref::<pfil_filters::Ct>()) {
            Some(ct.kill_states(&expr))
        } else {
            any.and_then(|a| a.downcast_ref::<pfil_filters::Acl>())
                .and_then(|a| a.kill_states(&expr))
        };
        match killed {
            Some(n) => {
                tracing::info!(target: "pfil_ctl", hook = %name, killed = n, "control: states killed");
                hooks.push(json!({"hook": name, "killed": n}));
            }
            None if hook.is_some() => {
                return Err(RpcError::new(
                    code::REGISTRY,
                    "not_a_tracker",
                    format!("hook `{name}` keeps no states: its filter is not `ct` (nor an `acl` with `keep state` rules)"),
                ))
            }
            None => {}
        }
    }
    Ok(json!({"generation": reg.generation(), "hooks": hooks}))
}

impl Target {
    /// The result of a write: the generation it published, whether its
    /// grace period passed within the timeout (the previous configuration
    /// is gone from every datapath thread), the final counters of the
    /// links it removed, and the quarantined links it reaped
    /// ([`Target::reaped`]).
    fn committed(&self, c: pfil::Commit) -> Value {
        committed_json(&self.registry, c, self.grace_timeout)
    }

    /// `reaped` (a write's own) and what other writes without a commit
    /// reaped since (the app's, an in-place `set`): every reaped link is
    /// reported once, in the reply of the write that reaped it or of the
    /// next one.
    pub(crate) fn reaped(&self, mut reaped: Vec<pfil::Reaped>) -> Vec<Value> {
        reaped.append(&mut self.registry.take_reaped());
        reaped_json(reaped, self.grace_timeout)
    }

    /// Run one method for a peer with `access`.
    pub(crate) fn call(
        &self,
        access: Access,
        method: &str,
        p: Map<String, Value>,
    ) -> Result<Value, RpcError> {
        if WRITE_METHODS.contains(&method) && access != Access::Write {
            return Err(RpcError::new(
                code::PERMISSION_DENIED,
                "permission_denied",
                format!(
                    "`{method}` changes the configuration; this peer may only use {}",
                    READ_METHODS.join(", ")
                ),
            ));
        }
        let reg = &self.registry;
        match method {
            "version" => {
                params::<NoParams>(method, p)?;
                let methods: Vec<&str> =
                    READ_METHODS.iter().chain(WRITE_METHODS).copied().collect();
                Ok(json!({"protocol": PROTOCOL_VERSION, "app": self.app, "methods": methods}))
            }
            "heads" => {
                params::<NoParams>(method, p)?;
                let generation = reg.generation();
                let heads: Vec<Value> = reg
                    .heads()
                    .iter()
                    .map(|h| {
                        json!({
                            "name": h.name,
                            "kind": h.kind.to_string(),
                            "dirs": dirs_list(h.dirs),
                            "chains": {
                                "in": h.chains[0].iter().map(link_json).collect::<Vec<_>>(),
                                "out": h.chains[1].iter().map(link_json).collect::<Vec<_>>(),
                            },
                        })
                    })
                    .collect();
                Ok(json!({"generation": generation, "heads": heads}))
            }
            "hooks" => {
                params::<NoParams>(method, p)?;
                // Hooks and heads of one generation.
                let (generation, hooks, heads) = crate::config::snapshot(reg);
                let hooks: Vec<Value> = hooks
                    .iter()
                    .map(|h| {
                        let mut linked = Vec::new();
                        for head in &heads {
                            for d in Dir::ALL {
                                if let Some(l) =
                                    head.chains[d.index()].iter().find(|l| l.hook == h.name)
                                {
                                    linked.push(json!({
                                        "head": head.name,
                                        "dir": d.to_string(),
                                        "fail": fail_word(l.fail),
                                        "quarantined": l.quarantined,
                                    }));
                                }
                            }
                        }
                        json!({
                            "name": h.name,
                            "kind": h.kind.to_string(),
                            "dirs": dirs_list(h.dirs),
                            "linked": linked,
                            "faults": h.faults,
                            "spec": h.spec,
                        })
                    })
                    .collect();
                Ok(json!({"generation": generation, "hooks": hooks}))
            }
            "stats" => {
                let sp = params::<StatsParams>(method, p)?;
                stats(reg, sp.head.as_deref()).map_err(|e| registry_error(&e))
            }
            "filter_stats" => {
                let fp = params::<FilterStatsParams>(method, p)?;
                filter_stats(reg, fp.hook.as_deref())
            }
            "states" => {
                let sp = params::<StatesParams>(method, p)?;
                states(reg, sp.hook.as_deref(), sp.limit, sp.expr.as_deref())
            }
            "kill_states" => {
                let kp = params::<KillStatesParams>(method, p)?;
                kill_states(reg, kp.hook.as_deref(), &kp.expr)
            }
            "map" | "map_update" | "map_delete" => crate::xdpmaps::call(reg, method, p),
            "map_events" => crate::xdpevents::take(reg, params(method, p)?),
            "sampling" => {
                let sp = params::<SamplingParams>(method, p)?;
                reg.set_sampling(sp.every);
                tracing::info!(target: "pfil_ctl", every = reg.sampling(), "control: cost sampling set");
                Ok(json!({"sampling": reg.sampling()}))
            }
            "reload" => {
                params::<NoParams>(method, p)?;
                let Some(reload) = &self.reload else {
                    return Err(RpcError::new(
                        code::CONFIG,
                        "config",
                        format!("{} runs without a configuration file: there is nothing to reload (start it with --config FILE)", self.app),
                    ));
                };
                (reload.0)().map_err(|m| RpcError::new(code::CONFIG, "config", m))
            }
            "show" => {
                params::<NoParams>(method, p)?;
                let r = Running::read(reg);
                let app_hooks: Vec<&str> = r.app_hooks.iter().map(|h| h.name.as_str()).collect();
                Ok(json!({
                    "generation": r.generation,
                    "toml": r.to_toml(&self.app),
                    "app_hooks": app_hooks,
                }))
            }
            "apply" => {
                let ap = params::<ApplyParams>(method, p)?;
                let cfg = Config::parse(&ap.toml)
                    .map_err(|e| apply_error(&crate::config::ApplyError::Config(e)))?;
                let plan = cfg
                    .plan(reg, &self.catalog, ap.expect_generation)
                    .map_err(|e| apply_error(&e))?;
                let base = plan.base();
                let changes: Vec<Value> = plan
                    .changes()
                    .iter()
                    .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
                    .collect();
                let diff: Vec<String> = plan.changes().iter().map(ToString::to_string).collect();
                let commit = plan.commit(reg, ap.dry_run).map_err(|e| apply_error(&e))?;
                let mut r = match commit {
                    Some(c) if !ap.dry_run => {
                        tracing::info!(target: "pfil_ctl", base, generation = c.generation, changes = diff.len(), "control: configuration applied");
                        self.committed(c)
                    }
                    _ => json!({"generation": base, "complete": true, "retired": [], "reaped": []}),
                };
                r["base"] = json!(base);
                r["dry_run"] = json!(ap.dry_run);
                r["changes"] = Value::Array(changes);
                r["diff"] = json!(diff);
                Ok(r)
            }
            "add" => {
                let ap = params::<AddParams>(method, p)?;
                let (module, _) = split_hook(&ap.hook)?;
                let kind = match &ap.kind {
                    None => PacketKind::Ethernet,
                    Some(k) => k
                        .parse::<PacketKind>()
                        .map_err(|e| RpcError::params(format!("kind: {e}")))?,
                };
                let dirs = match &ap.dirs {
                    None => Dirs::BOTH,
                    Some(d) => d
                        .parse::<Dirs>()
                        .map_err(|e| RpcError::params(format!("dirs: {e}")))?,
                };
                let spec = match &ap.config {
                    Some(c) => format!("{module}:{c}"),
                    None => module.to_owned(),
                };
                let filter = self
                    .catalog
                    .create(&spec, &BuildCtx::new(reg.max_workers()))
                    .map_err(|e| catalog_error(&e))?;
                let c = reg
                    .transaction()
                    .op(Op::AddHook {
                        name: ap.hook.clone(),
                        kind,
                        dirs,
                        filter,
                    })
                    .commit()
                    .map_err(|e| registry_error(&e))?;
                tracing::info!(target: "pfil_ctl", hook = %ap.hook, spec = %spec, "control: hook added");
                Ok(self.committed(c))
            }
            "set" => {
                // A new filter from the same module with this config, put
                // under the hook's links in one generation: places, fail
                // modes and counters stay; the old filter is dropped after
                // the grace period.
                let sp = params::<SetParams>(method, p)?;
                let (module, _) = split_hook(&sp.hook)?;
                reg.hook(&sp.hook).map_err(|e| registry_error(&e))?;
                // A filter that takes a new config in place (acl: the hit
                // counters of rules in both rulesets carry over) does, and
                // the registry publishes a generation with the same chains
                // (an apply planned before then conflicts). The others are
                // rebuilt below.
                if let Some(c) = &sp.config {
                    match reg.reconfigure_hook(&sp.hook, c) {
                        Ok(true) => {
                            tracing::info!(target: "pfil_ctl", hook = %sp.hook, config = %c, "control: hook reconfigured in place");
                            return Ok(json!({
                                "generation": reg.generation(),
                                "complete": true,
                                "retired": [],
                                "reaped": self.reaped(Vec::new()),
                                "in_place": true,
                            }));
                        }
                        Ok(false) => {}
                        Err(pfil::Error::FilterConfig { reason, .. }) => {
                            // The same error as the catalog's for this spec.
                            let usage = self
                                .catalog
                                .get(module)
                                .map_or_else(|| module.to_owned(), |m| m.usage());
                            return Err(catalog_error(&pfil_filters::CatalogError::BadConfig {
                                spec: format!("{module}:{c}"),
                                usage,
                                expected: reason,
                            }));
                        }
                        Err(e) => return Err(registry_error(&e)),
                    }
                }
                let spec = match &sp.config {
                    Some(c) => format!("{module}:{c}"),
                    None => module.to_owned(),
                };
                // A filter that derives its successor carries over what it
                // keeps (an xdp hook: the maps whose definition did not
                // change); the others are built anew by the catalog.
                let derived = match &sp.config {
                    Some(c) => reg.derive_filter(&sp.hook, c).ok().flatten(),
                    None => None,
                };
                let filter = match derived {
                    Some(d) => d.filter,
                    None => self
                        .catalog
                        .create(&spec, &BuildCtx::new(reg.max_workers()))
                        .map_err(|e| catalog_error(&e))?,
                };
                let c = reg
                    .replace_filter_shared(&sp.hook, filter)
                    .map_err(|e| registry_error(&e))?;
                tracing::info!(target: "pfil_ctl", hook = %sp.hook, spec = %spec, "control: hook reconfigured");
                Ok(self.committed(c))
            }
            "del" => {
                let hp = params::<HookParams>(method, p)?;
                let c = reg
                    .transaction()
                    .remove_hook(&hp.hook)
                    .commit()
                    .map_err(|e| registry_error(&e))?;
                tracing::info!(target: "pfil_ctl", hook = %hp.hook, "control: hook removed");
                Ok(self.committed(c))
            }
            "link" => {
                let lp = params::<LinkParams>(method, p)?;
                let d = dir(&lp.dir)?;
                let pl = placement(lp.placement.as_ref(), d)?;
                let c = reg
                    .transaction()
                    .link(&lp.head, d, &lp.hook, pl)
                    .commit()
                    .map_err(|e| registry_error(&e))?;
                tracing::info!(target: "pfil_ctl", head = %lp.head, dir = %d, hook = %lp.hook, "control: linked");
                Ok(self.committed(c))
            }
            "reap" => {
                // Remove quarantined links on purpose: all of them, or the
                // one named. A fail-closed one drops everything until this
                // (no other write touches it); a fail-open one is reaped by
                // any write.
                let rp = params::<ReapParams>(method, p)?;
                let reaped = match (&rp.head, &rp.dir, &rp.hook) {
                    (None, None, None) => reg.reap_quarantine(),
                    (Some(head), Some(dir_name), Some(hook)) => {
                        let d = dir(dir_name)?;
                        match reg
                            .reap_link(head, d, hook)
                            .map_err(|e| registry_error(&e))?
                        {
                            Some(r) => vec![r],
                            None => {
                                return Err(RpcError::new(
                                    code::REGISTRY,
                                    "not_quarantined",
                                    format!(
                                        "{} on {} {d} is not quarantined: `unlink` removes a link that is not",
                                        crate::rpc::clip(hook),
                                        crate::rpc::clip(head),
                                    ),
                                ))
                            }
                        }
                    }
                    _ => {
                        return Err(RpcError::params(
                            "reap: give head, dir and hook (one link), or none (every quarantined link)",
                        ))
                    }
                };
                let reaped = self.reaped(reaped);
                tracing::info!(target: "pfil_ctl", reaped = reaped.len(), "control: quarantined links reaped");
                Ok(json!({"generation": reg.generation(), "reaped": reaped}))
            }
            "unlink" => {
                let up = params::<UnlinkParams>(method, p)?;
                let d = dir(&up.dir)?;
                let c = reg
                    .transaction()
                    .unlink(&up.head, d, &up.hook)
                    .commit()
                    .map_err(|e| registry_error(&e))?;
                tracing::info!(target: "pfil_ctl", head = %up.head, dir = %d, hook = %up.hook, "control: unlinked");
                Ok(self.committed(c))
            }
            _ => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                "method_not_found",
                format!(
                    "no method `{method}`: the methods are {}",
                    READ_METHODS
                        .iter()
                        .chain(WRITE_METHODS)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }
}
