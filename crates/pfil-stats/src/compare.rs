//! Student's t comparison of two samples, as ministat does it.

use crate::cfmt::format_g;
use crate::student::{Confidence, TTable};
use crate::Sample;

/// The result of comparing a sample against a baseline with Student's t
/// test (pooled variance, two-sided).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// The confidence level of the test.
    pub confidence: Confidence,
    /// Degrees of freedom, `n_baseline + n_other - 2`.
    pub degrees_of_freedom: u64,
    /// The critical value of t that was used.
    pub t: f64,
    /// The pooled standard deviation
    /// `sqrt(((n1 - 1) s1² + (n2 - 1) s2²) / (n1 + n2 - 2))`.
    pub pooled_std_dev: f64,
    /// `mean(other) - mean(baseline)`.
    pub difference: f64,
    /// Half-width of the confidence interval of the difference,
    /// `t * pooled_std_dev * sqrt(1/n1 + 1/n2)`.
    pub half_width: f64,
    /// The difference in percent of the baseline mean.
    pub relative_difference: f64,
    /// The half-width in percent of the baseline mean.
    pub relative_half_width: f64,
    /// Whether `|difference| > half_width`, i.e. a difference is proven at
    /// this confidence level.
    pub significant: bool,
}

/// Compares `other` against `baseline` at `confidence` with ministat's
/// critical values ([`TTable::Ministat`]), so that the numbers are exactly
/// ministat's.
///
/// ```
/// use pfil_stats::{compare, Confidence, Sample};
/// let base = Sample::from_values([544.0, 544.0, 544.0]).unwrap();
/// let new = Sample::from_values([527.0, 528.0, 528.0]).unwrap();
/// let c = compare(&base, &new, Confidence::P95);
/// assert!(c.significant);
/// assert_eq!(c.degrees_of_freedom, 4);
/// assert_eq!(c.t, 2.776);
/// assert!((c.difference + 16.3333333).abs() < 1e-6);
/// ```
pub fn compare(baseline: &Sample, other: &Sample, confidence: Confidence) -> Comparison {
    compare_with(baseline, other, confidence, TTable::Ministat)
}

/// Like [`compare`], choosing the critical values: [`TTable::Exact`] uses
/// the exact quantile for the actual degrees of freedom.
pub fn compare_with(
    baseline: &Sample,
    other: &Sample,
    confidence: Confidence,
    table: TTable,
) -> Comparison {
    // The operations and their order follow ministat, so results agree to
    // the last bit.
    let n_other = other.n() as f64;
    let n_base = baseline.n() as f64;
    let df = (other.n() + baseline.n() - 2) as u64;
    let t = table.critical_value(confidence, df);
    let mut pooled = (n_other - 1.0) * other.variance() + (n_base - 1.0) * baseline.variance();
    pooled /= df as f64;
    let pooled = pooled.sqrt();
    let s = pooled * (1.0 / n_other + 1.0 / n_base).sqrt();
    let difference = other.mean() - baseline.mean();
    let half_width = t * s;
    let base_mean = baseline.mean();
    Comparison {
        confidence,
        degrees_of_freedom: df,
        t,
        pooled_std_dev: pooled,
        difference,
        half_width,
        relative_difference: difference * 100.0 / base_mean,
        relative_half_width: half_width * 100.0 / base_mean,
        significant: difference.abs() > half_width,
    }
}

impl Comparison {
    /// The text ministat prints for this comparison, with a trailing
    /// newline: either
    ///
    /// ```text
    /// Difference at 95.0% confidence
    ///         -16.3333 +/- 0.925333
    ///         -3.00245% +/- 0.170098%
    ///         (Student's t, pooled s = 0.408248)
    /// ```
    ///
    /// (the indented lines start with a tab) or
    /// `No difference proven at 95.0% confidence`.
    pub fn render(&self) -> String {
        if self.significant {
            format!(
                "Difference at {}% confidence\n\t{} +/- {}\n\t{}% +/- {}%\n\t(Student's t, pooled s = {})\n",
                self.confidence,
                format_g(self.difference, 6),
                format_g(self.half_width, 6),
                format_g(self.relative_difference, 6),
                format_g(self.relative_half_width, 6),
                format_g(self.pooled_std_dev, 6),
            )
        } else {
            format!("No difference proven at {}% confidence\n", self.confidence)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_page_example() {
        // ministat(1): iguana vs chameleon.
        let iguana = Sample::from_values([50.0, 200.0, 150.0, 400.0, 750.0, 400.0, 150.0]).unwrap();
        let chameleon = Sample::from_values([150.0, 400.0, 720.0, 500.0, 930.0]).unwrap();
        let c = compare(&iguana, &chameleon, Confidence::P95);
        assert_eq!(c.render(), "No difference proven at 95.0% confidence\n");
        let c = compare(&iguana, &chameleon, Confidence::P80);
        assert_eq!(
            c.render(),
            "Difference at 80.0% confidence\n\t240 +/- 212.215\n\t80% +/- 70.7384%\n\t(Student's t, pooled s = 264.159)\n"
        );
    }

    #[test]
    fn exact_table_differs_only_in_t() {
        let a = Sample::from_values([1.0, 2.0, 3.0, 4.0]).unwrap();
        let b = Sample::from_values([3.0, 4.0, 5.0, 7.0]).unwrap();
        let m = compare_with(&a, &b, Confidence::P99_5, TTable::Ministat);
        let e = compare_with(&a, &b, Confidence::P99_5, TTable::Exact);
        assert_eq!(m.t, 5.208);
        assert!((e.t - 4.316_827_104_210_3).abs() < 1e-6, "{}", e.t);
        assert_eq!(m.pooled_std_dev, e.pooled_std_dev);
        assert_eq!(m.difference, e.difference);
    }
}
