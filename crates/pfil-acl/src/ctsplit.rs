//! Rulesets with connection-tracking matches (`ct state`, `ct dir`).
//!
//! The connection state is a tiny domain (5 states × 2 directions), so
//! instead of a new dimension in the decision tree, [`CtClassifier`]
//! builds one [`Classifier`] per distinct set of rules a state and
//! direction can match (the rules whose `ct` parts accept it, the `ct`
//! parts cleared, in their order), shared between the states that have
//! the same set, and maps each one's answers back to the ruleset's rule
//! indices. First-match semantics are kept exactly: in a state, the rules
//! that cannot match it are out of the running, and the first of the
//! others that matches the packet's headers is the first rule of the
//! whole ruleset that matches. A ruleset without `ct` matches has one
//! classifier and no map: its lookups cost what they did.

use crate::tree::Classifier;
use crate::{Classify, Key, Ruleset};

/// States × directions: a [`Key::ct`] value's code is
/// `state * 2 + reply` ([`CtClassifier::code`]).
pub const CODES: usize = 10;

/// A first-match classifier that honours [`Rule::ct_state`] and
/// [`Rule::ct_dir`](crate::Rule::ct_dir).
///
/// [`Rule::ct_state`]: crate::Rule::ct_state
pub struct CtClassifier {
    /// Classifiers over subsets of the rules, and each one's map from
    /// its rule indices to the ruleset's (`None`: the whole ruleset).
    parts: Vec<(Classifier, Option<Box<[u32]>>)>,
    /// The part of each code.
    by_code: [u8; CODES],
}

impl CtClassifier {
    /// Builds the classifiers for `rs`.
    pub fn new(rs: &Ruleset) -> CtClassifier {
        if !rs.rules.iter().any(|r| r.uses_ct()) {
            return CtClassifier {
                parts: vec![(Classifier::new(rs), None)],
                by_code: [0; CODES],
            };
        }
        let mut subsets: Vec<Vec<u32>> = Vec::new();
        let mut by_code = [0u8; CODES];
        for (code, slot) in by_code.iter_mut().enumerate() {
            let ct = (code / 2) as u8 | if code % 2 == 1 { crate::ct::REPLY } else { 0 };
            let subset: Vec<u32> = (0..rs.rules.len() as u32)
                .filter(|&i| rs.rules[i as usize].ct_matches(ct))
                .collect();
            let at = match subsets.iter().position(|s| *s == subset) {
                Some(at) => at,
                None => {
                    subsets.push(subset);
                    subsets.len() - 1
                }
            };
            *slot = at as u8;
        }
        let parts = subsets
            .into_iter()
            .map(|s| {
                let sub = Ruleset {
                    rules: s
                        .iter()
                        .map(|&i| {
                            let mut r = rs.rules[i as usize];
                            r.ct_state = 0;
                            r.ct_dir = None;
                            r
                        })
                        .collect(),
                    default: rs.default,
                    state_limit: None,
                };
                (Classifier::new(&sub), Some(s.into_boxed_slice()))
            })
            .collect();
        CtClassifier { parts, by_code }
    }

    /// Whether any rule matches on `ct` (else [`base`](Self::base) is the
    /// whole classifier).
    #[inline]
    pub fn uses_ct(&self) -> bool {
        self.parts[0].1.is_some()
    }

    /// The classifier of the whole ruleset when no rule uses `ct`;
    /// otherwise the first part's.
    #[inline]
    pub fn base(&self) -> &Classifier {
        &self.parts[0].0
    }

    /// The code of a [`Key::ct`] value (0..[`CODES`]).
    #[inline]
    pub fn code(ct: u8) -> usize {
        usize::from((ct & 7).min(4)) * 2 + usize::from(ct >> 7)
    }

    /// The index of the part for packets annotated `ct`.
    #[inline]
    pub fn part_of(&self, ct: u8) -> usize {
        usize::from(self.by_code[Self::code(ct)])
    }

    /// Part `i`: its classifier and its map to rule indices.
    #[inline]
    pub fn part(&self, i: usize) -> (&Classifier, Option<&[u32]>) {
        let (c, m) = &self.parts[i];
        (c, m.as_deref())
    }

    /// How many parts there are.
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// A part's answer as a rule index of the ruleset.
    #[inline]
    pub fn global(map: Option<&[u32]>, m: Option<u32>) -> Option<u32> {
        match (map, m) {
            (Some(map), Some(i)) => map.get(i as usize).copied(),
            (_, m) => m,
        }
    }
}

impl Classify for CtClassifier {
    fn classify(&self, k: &Key) -> Option<u32> {
        let (c, map) = self.part(self.part_of(k.ct));
        Self::global(map, c.classify(k))
    }
}
