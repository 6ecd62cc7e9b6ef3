//! The longest common subsequence of two chains in linear space
//! (Hirschberg, 1975): what `apply` keeps linked when a chain changes.
//!
//! Time is O(n·m) and memory O(n + m): a chain of [`MAX_CHAIN_LINKS`]
//! links against another is a million steps and a few kilobytes (the
//! table this replaces held n·m counters: 2.9 GB for two 27 000-link
//! chains).
//!
//! [`MAX_CHAIN_LINKS`]: super::MAX_CHAIN_LINKS

/// For each element of `a` and of `b`, whether it is in one longest common
/// subsequence of the two.
pub(super) fn lcs_keep<T: PartialEq>(a: &[T], b: &[T]) -> (Vec<bool>, Vec<bool>) {
    let (mut ka, mut kb) = (vec![false; a.len()], vec![false; b.len()]);
    split(a, b, 0, 0, &mut ka, &mut kb);
    (ka, kb)
}

/// `row[j]` = the LCS length of all of `a` and `b[..j]`.
fn forward<T: PartialEq>(a: &[T], b: &[T]) -> Vec<u32> {
    let mut prev = vec![0u32; b.len() + 1];
    let mut cur = vec![0u32; b.len() + 1];
    for x in a {
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y {
                prev[j] + 1
            } else {
                cur[j].max(prev[j + 1])
            };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev
}

/// `row[j]` = the LCS length of all of `a` and `b[j..]`.
fn backward<T: PartialEq>(a: &[T], b: &[T]) -> Vec<u32> {
    let m = b.len();
    let mut prev = vec![0u32; m + 1];
    let mut cur = vec![0u32; m + 1];
    for x in a.iter().rev() {
        for j in (0..m).rev() {
            cur[j] = if *x == b[j] {
                prev[j + 1] + 1
            } else {
                cur[j + 1].max(prev[j])
            };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev
}

fn split<T: PartialEq>(a: &[T], b: &[T], ao: usize, bo: usize, ka: &mut [bool], kb: &mut [bool]) {
    if a.is_empty() || b.is_empty() {
        return;
    }
    if a.len() == 1 {
        if let Some(j) = b.iter().position(|y| *y == a[0]) {
            ka[ao] = true;
            kb[bo + j] = true;
        }
        return;
    }
    let mid = a.len() / 2;
    let (l, r) = (forward(&a[..mid], b), backward(&a[mid..], b));
    // The first split point of b with the longest total (deterministic).
    let k = (0..=b.len())
        .max_by_key(|&j| (l[j] + r[j], std::cmp::Reverse(j)))
        .unwrap_or(0);
    split(&a[..mid], &b[..k], ao, bo, ka, kb);
    split(&a[mid..], &b[k..], ao + mid, bo + k, ka, kb);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The quadratic table this module replaced: the reference.
    fn lcs_len_table<T: PartialEq>(a: &[T], b: &[T]) -> usize {
        let (n, m) = (a.len(), b.len());
        let mut t = vec![vec![0usize; m + 1]; n + 1];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                t[i][j] = if a[i] == b[j] {
                    t[i + 1][j + 1] + 1
                } else {
                    t[i + 1][j].max(t[i][j + 1])
                };
            }
        }
        t[0][0]
    }

    #[test]
    fn keeps_the_longest_common_order() {
        let (a, b) = lcs_keep(&[1, 2, 3, 4], &[2, 4, 5]);
        assert_eq!(a, [false, true, false, true]);
        assert_eq!(b, [true, true, false]);
        let (a, b) = lcs_keep::<u8>(&[], &[1]);
        assert_eq!((a, b), (vec![], vec![false]));
    }

    /// Two 1024-link chains (the cap), one the reverse of the other with
    /// a common run of 100 in it: as long as the table's.
    #[test]
    fn chains_at_the_cap() {
        let a: Vec<u32> = (0..1024).collect();
        let mut b: Vec<u32> = (0..1024).rev().collect();
        b[100..200].copy_from_slice(&(300..400).collect::<Vec<_>>());
        let (ka, kb) = lcs_keep(&a, &b);
        let want = lcs_len_table(&a, &b);
        assert!(want > 100, "{want}");
        assert_eq!(ka.iter().filter(|&&k| k).count(), want);
        assert_eq!(kb.iter().filter(|&&k| k).count(), want);
    }

    proptest! {
        /// The kept elements are a common subsequence (same elements in
        /// the same order) of the longest length.
        #[test]
        fn a_longest_common_subsequence(
            a in proptest::collection::vec(0u8..6, 0..40),
            b in proptest::collection::vec(0u8..6, 0..40),
        ) {
            let (ka, kb) = lcs_keep(&a, &b);
            let sa: Vec<u8> = a.iter().zip(&ka).filter(|(_, &k)| k).map(|(x, _)| *x).collect();
            let sb: Vec<u8> = b.iter().zip(&kb).filter(|(_, &k)| k).map(|(x, _)| *x).collect();
            prop_assert_eq!(&sa, &sb);
            prop_assert_eq!(sa.len(), lcs_len_table(&a, &b));
        }
    }
}
