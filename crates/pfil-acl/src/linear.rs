//! Linear scan: the reference every classifier is checked against, and the
//! baseline it is measured against.

use crate::rule::{Key, Rule, Ruleset};
use crate::Classify;

/// First match by scanning every rule in order with [`Rule::matches`].
#[derive(Clone, Debug)]
pub struct Linear {
    rules: Vec<Rule>,
}

impl Linear {
    /// A scanner over `rs`'s rules.
    pub fn new(rs: &Ruleset) -> Linear {
        Linear {
            rules: rs.rules.clone(),
        }
    }
}

impl Classify for Linear {
    #[inline]
    fn classify(&self, k: &Key) -> Option<u32> {
        self.rules
            .iter()
            .position(|r| r.matches(k))
            .map(|i| i as u32)
    }
}
