//! The `acl:` config: inline rules or a rules file (pf-like text or
//! ClassBench), with its limits.

use super::*;

/// Largest rules file `acl:@PATH` reads.
pub const MAX_RULES_FILE_BYTES: u64 = 16 << 20;
/// Most rules one `acl` filter takes (the classifier's build time and
/// memory grow with them: a 10k-rule set builds in tens of milliseconds).
pub const MAX_RULES: usize = 65_536;

/// Parses an `acl:` config (see the [module docs](crate::acl)).
pub(super) fn parse_config(config: &str) -> Result<Ruleset, String> {
    let rules = match config.strip_prefix('@') {
        Some(path) => parse_file(path.trim())?,
        None => text::parse(&config.replace(';', "\n")).map_err(|e| {
            let hint = if !config.trim().contains(char::is_whitespace) && !config.trim().is_empty()
            {
                " (a rules file is `acl:@PATH`)"
            } else {
                ""
            };
            format!("RULES: `@PATH` of a rules file or rules separated by `;` ({e}){hint}")
        })?,
    };
    if rules.rules.len() > MAX_RULES {
        return Err(format!(
            "RULES: {} rules, over the limit of {MAX_RULES}",
            rules.rules.len()
        ));
    }
    Ok(rules)
}

/// Reads a rules file: a regular file of at most
/// [`MAX_RULES_FILE_BYTES`]; a parse error gives the line, column and
/// what was expected, never the file's text (the daemon may read files
/// its client cannot).
pub(super) fn parse_file(path: &str) -> Result<Ruleset, String> {
    use std::io::Read;
    if path.is_empty() {
        return Err("RULES: `@` needs the path of a rules file after it".into());
    }
    let shown = crate::shorten(path, 200);
    let f = std::fs::File::open(path).map_err(|e| format!("RULES: @{shown}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("RULES: @{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("RULES: @{shown}: not a regular file"));
    }
    if meta.len() > MAX_RULES_FILE_BYTES {
        return Err(format!(
            "RULES: @{shown}: {} bytes, over the limit of {MAX_RULES_FILE_BYTES} bytes",
            meta.len()
        ));
    }
    let mut body = String::new();
    f.take(MAX_RULES_FILE_BYTES + 1)
        .read_to_string(&mut body)
        .map_err(|e| format!("RULES: @{shown}: {e}"))?;
    if body.len() as u64 > MAX_RULES_FILE_BYTES {
        return Err(format!(
            "RULES: @{shown}: over the limit of {MAX_RULES_FILE_BYTES} bytes"
        ));
    }
    let at = |e: text::ParseError| {
        format!(
            "line {}, column {}: expected {}",
            e.line, e.column, e.expected
        )
    };
    if body.trim_start().starts_with('@') {
        return classbench::parse(&body, Action::Drop)
            .map_err(|e| format!("RULES: @{shown} (ClassBench): {}", at(e)));
    }
    text::parse(&body).map_err(|e| format!("RULES: @{shown}: {}", at(e)))
}
