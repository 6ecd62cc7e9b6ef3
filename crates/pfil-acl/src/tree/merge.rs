//! Putting a node and its children into the tree's memory, and taking
//! its children's cuts into a node where that saves a level
//! ([`Builder::merge`]).

use super::builder::*;
use super::*;

/// How much larger than the node words it replaces a node that takes
/// its children's cut in may be ([`Builder::merge`]).
pub(super) const MERGE_GROWTH: usize = 4;

impl Builder<'_> {
    /// The reference to `k`, its node put in `mem` first if it is not
    /// there yet.
    pub(super) fn flush(&mut self, k: &mut Child) -> u64 {
        if let Child::Node((d0, s0, b0, d1, s1, b1), kids) = k {
            let o = self.mem.len();
            self.mem.extend_from_slice(kids);
            self.pending -= kids.len();
            *k = Child::Ref(node_ref(o, *d0, *s0, *b0, *d1, *s1, *b1));
        }
        match k {
            Child::Ref(r) => *r,
            Child::Node(..) => unreachable!("flushed"),
        }
    }

    /// The children of a node cut by `cut`, with the children's own
    /// children taken in where that saves a level: when children cut the
    /// bits right below this node's last cut field (the same field, the
    /// next lower bits, the second field of a two-field child only if this
    /// node has one field), the node cuts those bits too and its children
    /// are theirs (a leaf child, or a child cut otherwise, repeated over
    /// the bits added). The cut most such children share is taken, if the
    /// node's words are then at most [`MERGE_GROWTH`] × the words it
    /// replaces, within `maxb` bits ([`ROOT_MAX_BITS`]) and the cap. The
    /// leaves and the entries a lookup compares are the same; a lookup
    /// takes one level fewer through every child taken in (acl2_1k's
    /// wildcard-heavy nodes are cut 2-3 bits at a time by the space
    /// factor, several levels on the same field).
    pub(super) fn merge(&mut self, cut: Cut6, mut kids: Vec<Child>, maxb: u8) -> (Cut6, Vec<u64>) {
        let (d0, s0, b0, d1, s1, b1) = cut;
        let (dl, sl) = if b1 > 0 { (d1, s1) } else { (d0, s0) };
        let fits = |c: &Cut6| c.0 == dl && c.1 + c.2 == sl && (b1 == 0 || c.5 == 0);
        // The cuts of the children that fit, and how many have each.
        let mut tally: Vec<(Cut6, usize)> = Vec::new();
        for k in &kids {
            if let Child::Node(c, _) = k {
                if fits(c) {
                    match tally.iter_mut().find(|t| t.0 == *c) {
                        Some(t) => t.1 += 1,
                        None => tally.push((*c, 1)),
                    }
                }
            }
        }
        let best = tally.iter().max_by_key(|t| t.1).map(|t| (t.0, t.1));
        let here = kids.len();
        let merged = best.and_then(|(c, n)| {
            let more = c.2 + c.5;
            let words = here << more;
            let replaced = here + (n << more);
            let bits = b0 + b1 + more;
            let grow = words.saturating_sub(replaced);
            // A trial's growth is judged at its end; any other tree's
            // within its cap.
            let cap = if self.trial {
                self.cfg.max_entries
            } else {
                self.cap
            };
            let room = self.real_used() + grow.div_ceil(4) <= cap;
            let growth = if self.lean { 1 } else { MERGE_GROWTH };
            (bits <= maxb && words <= growth * replaced && room).then_some((c, n, more, grow))
        });
        let Some((c, n, more, grow)) = merged else {
            let refs = kids.iter_mut().map(|k| self.flush(k)).collect();
            return (cut, refs);
        };
        let mut refs = Vec::with_capacity(here << more);
        for k in &mut kids {
            match k {
                Child::Node(kc, v) if *kc == c => {
                    refs.extend_from_slice(v);
                    self.pending -= v.len();
                }
                _ => {
                    let r = self.flush(k);
                    refs.extend(std::iter::repeat_n(r, 1 << more));
                }
            }
        }
        self.pending = self.pending - here + refs.len();
        self.grown += grow;
        self.stats.nodes -= n;
        let cut = if b1 == 0 {
            (d0, c.1, b0 + c.2, c.3, c.4, c.5)
        } else {
            (d0, s0, b0, d1, c.1, b1 + c.2)
        };
        (cut, refs)
    }
}
