//! One ruleset version: its rules, classifier(s) and counter ids, and
//! how a packet's match becomes a verdict.

use super::*;

/// One ruleset version: the rules, their classifier, and which counter
/// of the filter's [`Slab`] each counted rule bumps.
pub(super) struct Version {
    pub(super) rules: Ruleset,
    /// One classifier, or one per connection state when rules match on
    /// `ct` ([`CtClassifier`]).
    pub(super) classifier: CtClassifier,
    /// Per rule: its counter id in the slab, or [`NO_COUNTER`] (rule
    /// without `count`).
    pub(super) counter_of: Vec<u32>,
    /// The default action's counter id.
    pub(super) default_counter: u32,
    /// The slab's segments when this version was built (every id above
    /// lives in one of them).
    pub(super) segments: Box<[Segment]>,
    /// What keeps this version's counters allocated, per rule (`None`:
    /// not counted): a counter shared with another version (an unchanged
    /// rule) has one lease, held by both, so it is freed only when
    /// neither can run any more.
    pub(super) leases: Vec<Option<Arc<Lease>>>,
    /// The default action's.
    pub(super) default_lease: Arc<Lease>,
    /// A rule has `keep state`: packets are looked up in the filter's
    /// state table first.
    pub(super) keep: bool,
    /// A rule matches or sets a mark: the marks path (rule by rule when
    /// a rule matches one, since the trees do not look at marks).
    pub(super) marks: bool,
    /// A rule matches a mark.
    pub(super) mark_match: bool,
    /// Per value of a packet's [`ct_bits`](pfil::Packet::ct_bits):
    /// what the ct path does with it without classifying, if the first
    /// rule of the part of its state matches any packet (a `pass ct state
    /// established,related` leading the ruleset). Indexed by the byte
    /// itself: one load a packet.
    pub(super) quick: [Quick; 256],
}

/// What the ct path does with a packet of a connection state whose part
/// has a catch-all rule (its first rule matches any packet), or that it
/// classifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Quick {
    /// No catch-all rule: classified.
    Classify,
    /// A catch-all `pass` rule, not counted: the verdict stays `Pass`.
    Pass,
    /// A catch-all `drop` rule, not counted.
    Drop,
    /// A counted catch-all rule: decided by it (its hit counted).
    Rule(u32),
}

/// Whether `r` matches every packet (whatever its connection state: the
/// part it is in decided that).
pub(super) fn matches_any(r: &pfil_acl::Rule) -> bool {
    *r == pfil_acl::Rule {
        count: r.count,
        ct_state: r.ct_state,
        ct_dir: r.ct_dir,
        keep_state: r.keep_state,
        ..pfil_acl::Rule::any(r.action)
    }
}

impl Version {
    /// A version of `rules` counting into `slab`; `carried` gives, per
    /// rule, a lease to reuse (an unchanged rule's counter), and then the
    /// default action's.
    pub(super) fn new(
        rules: Ruleset,
        slab: &Arc<Slab>,
        carried: Vec<Option<Arc<Lease>>>,
        default: Option<Arc<Lease>>,
    ) -> Version {
        let classifier = CtClassifier::new(&rules);
        let keep = rules.rules.iter().any(|r| r.keep_state);
        let mark_match = rules.rules.iter().any(|r| r.mark.is_some());
        let marks = mark_match || rules.rules.iter().any(|r| r.set_mark.is_some());
        let mut carried = carried.into_iter();
        let leases: Vec<Option<Arc<Lease>>> = rules
            .rules
            .iter()
            .map(|r| {
                let c = carried.next().flatten();
                r.count.then(|| c.unwrap_or_else(|| slab.lease()))
            })
            .collect();
        let counter_of: Vec<u32> = leases
            .iter()
            .map(|l| l.as_ref().map_or(NO_COUNTER, |l| l.id))
            .collect();
        let default_lease = default.unwrap_or_else(|| slab.lease());
        let catch_all: Box<[Option<u32>]> = (0..classifier.parts())
            .map(|pi| {
                let first = match classifier.part(pi).1 {
                    Some(map) => *map.first()?,
                    None => 0,
                };
                matches_any(rules.rules.get(first as usize)?).then_some(first)
            })
            .collect();
        let quick = std::array::from_fn(|ct| {
            match catch_all
                .get(classifier.part_of(ct as u8))
                .copied()
                .flatten()
            {
                None => Quick::Classify,
                Some(r) if counter_of[r as usize] != NO_COUNTER => Quick::Rule(r),
                Some(r) => match rules.rules[r as usize].action {
                    Action::Pass => Quick::Pass,
                    Action::Drop => Quick::Drop,
                },
            }
        });
        Version {
            quick,
            rules,
            classifier,
            counter_of,
            default_counter: default_lease.id,
            segments: slab.segments(),
            leases,
            default_lease,
            keep,
            marks,
            mark_match,
        }
    }

    /// The counters a version of `rules` takes over from this one: per
    /// rule of `rules` marked `count`, the lease of the first equal
    /// counted rule here not taken yet (`None`: a new rule, or not
    /// counted), then the default action's lease (always kept, whatever
    /// the new default action is).
    pub(super) fn carry(&self, rules: &Ruleset) -> (Vec<Option<Arc<Lease>>>, Option<Arc<Lease>>) {
        let mut used = vec![false; self.rules.rules.len()];
        let carried = rules
            .rules
            .iter()
            .map(|r| {
                if !r.count {
                    return None;
                }
                let j =
                    self.rules.rules.iter().enumerate().position(|(j, o)| {
                        !used[j] && o == r && self.counter_of[j] != NO_COUNTER
                    })?;
                used[j] = true;
                self.leases[j].clone()
            })
            .collect();
        (carried, Some(self.default_lease.clone()))
    }

    /// The first rule matching `k` (its `ct` and `mark` included).
    #[inline]
    pub(super) fn classify(&self, k: &pfil_acl::Key) -> Option<u32> {
        if self.mark_match {
            return self
                .rules
                .rules
                .iter()
                .position(|r| r.matches(k) && r.ct_matches(k.ct))
                .map(|i| i as u32);
        }
        self.classifier.classify(k)
    }

    /// Give `p` the mark rule `m` sets, if it sets one.
    #[inline]
    pub(super) fn set_mark(&self, m: Option<u32>, p: &mut Packet<'_>) {
        if let Some(v) = m.and_then(|i| self.rules.rules.get(i as usize)?.set_mark) {
            p.set_mark(v);
        }
    }

    /// The verdict for a classification result, counting the hit.
    #[inline]
    pub(super) fn decide(&self, m: Option<u32>, worker: usize) -> Verdict {
        let (action, c) = match m {
            Some(i) => (
                self.rules.rules[i as usize].action,
                self.counter_of[i as usize],
            ),
            None => (self.rules.default, self.default_counter),
        };
        if c != NO_COUNTER {
            if let Some(seg) = self.segments.get(c as usize / SEG) {
                bump(seg, worker, c as usize % SEG);
            }
        }
        match action {
            Action::Pass => Verdict::Pass,
            Action::Drop => Verdict::Dropped,
        }
    }

    pub(super) fn total(&self, c: u32) -> u64 {
        self.segments
            .get(c as usize / SEG)
            .map_or(0, |s| total(s, c as usize % SEG))
    }
}
