//! The `ct:` config: `[max N] [tcp strict|loose] [drop-invalid]`.

use std::fmt;

/// Entries a table holds by default (pf's `set limit states`).
pub const DEFAULT_MAX: usize = 100_000;
/// The largest `max`.
pub const MAX_MAX: usize = pfil_acl::STATE_LIMIT_MAX;

/// How TCP segments are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TcpMode {
    /// pf's tracking: flags and sequence windows (a segment outside its
    /// window is `invalid`); a flow is created only by a SYN.
    #[default]
    Strict,
    /// Flags only (as VPP's ACL plugin): states follow SYN, FIN, RST and
    /// ACK, sequence numbers are not checked, and a flow may be picked up
    /// in the middle (its first segment need not be a SYN).
    Loose,
}

/// A `ct` filter's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CtConfig {
    /// Most entries the table holds (1 to [`MAX_MAX`]).
    pub max: usize,
    /// TCP tracking.
    pub tcp: TcpMode,
    /// Drop `invalid` packets (else they pass, annotated `invalid`).
    pub drop_invalid: bool,
}

impl Default for CtConfig {
    fn default() -> Self {
        CtConfig {
            max: DEFAULT_MAX,
            tcp: TcpMode::Strict,
            drop_invalid: false,
        }
    }
}

/// The config syntax, as the catalog shows it.
pub const SYNTAX: &str = "[max N] [tcp strict|loose] [drop-invalid]";

impl CtConfig {
    /// Parses `[max N] [tcp strict|loose] [drop-invalid]` (any order, each
    /// at most once; empty: the defaults). `N` may be written `100k`,
    /// `1M`, or with `_` between digits.
    ///
    /// # Errors
    /// What was wrong, naming the word.
    pub fn parse(s: &str) -> Result<CtConfig, String> {
        let mut c = CtConfig::default();
        let mut seen = [false; 3];
        let mut once = |i: usize, w: &str| {
            if std::mem::replace(&mut seen[i], true) {
                Err(format!("`{w}` given twice"))
            } else {
                Ok(())
            }
        };
        let mut words = s.split_whitespace();
        while let Some(w) = words.next() {
            match w {
                "max" => {
                    once(0, w)?;
                    let n = words
                        .next()
                        .ok_or("`max` needs a number of entries after it")?;
                    c.max = pfil_acl::text::parse_count(n).ok_or_else(|| {
                        format!(
                            "max: a number of entries (1 to {MAX_MAX}), not `{}`",
                            crate::shorten(n, 32)
                        )
                    })?;
                    if c.max == 0 || c.max > MAX_MAX {
                        return Err(format!("max: 1 to {MAX_MAX} entries, not {}", c.max));
                    }
                }
                "tcp" => {
                    once(1, w)?;
                    c.tcp = match words.next() {
                        Some("strict") => TcpMode::Strict,
                        Some("loose") => TcpMode::Loose,
                        Some(o) => {
                            return Err(format!(
                                "tcp: `strict` or `loose`, not `{}`",
                                crate::shorten(o, 32)
                            ))
                        }
                        None => return Err("`tcp` needs `strict` or `loose` after it".into()),
                    };
                }
                "drop-invalid" => {
                    once(2, w)?;
                    c.drop_invalid = true;
                }
                o => {
                    return Err(format!(
                        "`max N`, `tcp strict|loose` or `drop-invalid`, not `{}`",
                        crate::shorten(o, 32)
                    ))
                }
            }
        }
        Ok(c)
    }
}

impl fmt::Display for CtConfig {
    /// The canonical config text (`max 100000 tcp strict`, `drop-invalid`
    /// when set).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tcp = match self.tcp {
            TcpMode::Strict => "strict",
            TcpMode::Loose => "loose",
        };
        write!(f, "max {} tcp {tcp}", self.max)?;
        if self.drop_invalid {
            f.write_str(" drop-invalid")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_and_errors_name_the_word() {
        assert_eq!(CtConfig::parse("").unwrap(), CtConfig::default());
        let c = CtConfig::parse("max 1M tcp loose drop-invalid").unwrap();
        assert_eq!(
            (c.max, c.tcp, c.drop_invalid),
            (1_000_000, TcpMode::Loose, true)
        );
        assert_eq!(CtConfig::parse(&c.to_string()).unwrap(), c);
        assert_eq!(CtConfig::parse("max 100_000").unwrap().max, 100_000);
        assert_eq!(CtConfig::parse("max 10000000").unwrap().max, MAX_MAX);
        for (bad, says) in [
            ("max", "needs a number"),
            ("max lots", "not `lots`"),
            ("max 0", "1 to 10000000 entries, not 0"),
            ("max 10000001", "not 10000001"),
            ("max 99999999999999999999999", "a number of entries"),
            ("tcp", "`strict` or `loose`"),
            ("tcp tight", "not `tight`"),
            ("max 5 max 6", "`max` given twice"),
            ("fw", "not `fw`"),
        ] {
            let e = CtConfig::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
