//! ministat(1)-compatible statistics for comparing benchmark runs.
//!
//! FreeBSD's `ministat` is the customary way to show that a change to a
//! kernel path such as pfil(9) made a difference: for each data set it
//! prints N, min, max, median, mean and sample standard deviation, and for
//! each data set after the first a Student's t test against the first, plus
//! an ASCII-art plot of the distributions. This crate computes exactly the
//! same numbers the same way (same formulas, same order of floating-point
//! operations, same `printf` formatting) so that [`render`] reproduces
//! ministat's output byte for byte.
//!
//! ```
//! use pfil_stats::{render, DataSet, ReportOptions, Sample};
//!
//! let sets = vec![
//!     DataSet::new("r22807", Sample::from_values([544.0, 544.0, 544.0])?),
//!     DataSet::new("r22807M", Sample::from_values([527.0, 528.0, 528.0])?),
//! ];
//! let text = render(&sets, &ReportOptions { width: 40, ..ReportOptions::default() })?;
//! assert!(text.contains("Difference at 95.0% confidence\n\t-16.3333 +/- 0.925333\n"));
//! # Ok::<(), pfil_stats::Error>(())
//! ```
//!
//! ## Where this follows ministat, deliberately
//!
//! * The median of an even number of values is the *upper* middle value
//!   (`values[n / 2]`), not the average of the two middle ones.
//! * The variance comes from running sums, `(Σy² - (Σy)²/n)/(n-1)`, and is
//!   not clamped at zero: constant data that is not exactly representable
//!   can get a NaN standard deviation, printed `-nan`.
//! * The percentage line divides the half-width of the interval by the
//!   baseline mean (`e * 100 / mean`), like Debian's ministat (newer FreeBSD
//!   versions compute a different relative error there).
//! * Critical values: ministat's three-decimal table for 1..=100 degrees of
//!   freedom and its infinity row beyond (see [`ministat_critical_value`];
//!   [`t_quantile`] is the exact quantile for any degrees of freedom, and
//!   [`TTable::Exact`] makes comparisons use it).
//!
//! ## Where it does not
//!
//! * A data set needs [`MIN_VALUES`] (2) values; ministat asks for 3.
//! * Values must be finite: `inf`/`nan` in input is an error naming the file
//!   and line (ministat accepts them and prints nonsense). Hexadecimal
//!   floating-point input (`0x1p3`), which C's `strtod` accepts, is
//!   rejected as not a number.
//! * Lines are read whole; ministat splits lines longer than 8191 bytes.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cfmt;
mod compare;
mod error;
mod input;
pub mod plot;
mod report;
mod sample;
pub mod student;

pub use compare::{compare, compare_with, Comparison};
pub use error::Error;
pub use input::{parse_data_set, read_data_set, ParseOptions};
pub use plot::{render_plot, MAX_DATA_SETS, MIN_PLOT_WIDTH, SYMBOLS};
pub use report::{render, DataSet, Report, ReportOptions};
pub use sample::{Sample, Summary, MIN_VALUES};
pub use student::{
    exact_critical_value, ministat_critical_value, normal_quantile, t_cdf, t_quantile, Confidence,
    TTable,
};

#[cfg(test)]
mod seed_tests {
    //! The worked example of shared seed 003 (FreeBSD svn-src list, r226042
    //! follow-up): three `make buildkernel` timings per kernel.

    use super::*;

    /// The ministat output as posted (quoted-printable soft line breaks
    /// joined; the poster's width was 78).
    const POSTED: &str = "\
x r22807 with r226042 reverted
+ r22807
* r22807M with the proposed patch
+------------------------------------------------------------------------------+
|+    *                                                                       x|
|*    *                                                                       x|
||__A_M|                                                                      A|
+------------------------------------------------------------------------------+
    N           Min           Max        Median           Avg        Stddev
x   3           544           544           544           544             0
+   3           527           527           527           527             0
Difference at 95.0% confidence
\t-17 +/- 0
\t-3.125% +/- 0%
\t(Student's t, pooled s = 0)
*   3           527           528           528     527.66667    0.57735027
Difference at 95.0% confidence
\t-16.3333 +/- 0.925333
\t-3.00245% +/- 0.170098%
\t(Student's t, pooled s = 0.408248)
";

    fn seed_sets() -> Vec<DataSet> {
        // The post's labels do not match its data (x is the 544 s set);
        // the names are the post's, the values are what its table shows.
        vec![
            DataSet::new(
                "r22807 with r226042 reverted",
                Sample::from_values([544.0, 544.0, 544.0]).unwrap(),
            ),
            DataSet::new(
                "r22807",
                Sample::from_values([527.0, 527.0, 527.0]).unwrap(),
            ),
            DataSet::new(
                "r22807M with the proposed patch",
                Sample::from_values([527.0, 528.0, 528.0]).unwrap(),
            ),
        ]
    }

    #[test]
    fn seed_003_full_report_is_identical() {
        let options = ReportOptions {
            width: 78,
            ..ReportOptions::default()
        };
        assert_eq!(render(&seed_sets(), &options).unwrap(), POSTED);
    }

    #[test]
    fn seed_003_every_number() {
        let sets = seed_sets();
        let s: Vec<Summary> = sets.iter().map(|d| d.sample.summary()).collect();
        assert_eq!(
            (s[0].n, s[0].min, s[0].max, s[0].median, s[0].mean),
            (3, 544.0, 544.0, 544.0, 544.0)
        );
        assert_eq!(s[0].std_dev, 0.0);
        assert_eq!(
            (s[1].n, s[1].min, s[1].max, s[1].median, s[1].mean),
            (3, 527.0, 527.0, 527.0, 527.0)
        );
        assert_eq!(s[1].std_dev, 0.0);
        assert_eq!(
            (s[2].n, s[2].min, s[2].max, s[2].median),
            (3, 527.0, 528.0, 528.0)
        );
        assert_eq!(cfmt::format_g(s[2].mean, 8), "527.66667");
        assert_eq!(cfmt::format_g(s[2].std_dev, 8), "0.57735027");

        let c1 = compare(&sets[0].sample, &sets[1].sample, Confidence::P95);
        assert!(c1.significant);
        assert_eq!(c1.degrees_of_freedom, 4);
        assert_eq!(c1.t, 2.776);
        assert_eq!(c1.difference, -17.0);
        assert_eq!(c1.half_width, 0.0);
        assert_eq!(c1.relative_difference, -3.125);
        assert_eq!(c1.relative_half_width, 0.0);
        assert_eq!(c1.pooled_std_dev, 0.0);

        let c2 = compare(&sets[0].sample, &sets[2].sample, Confidence::P95);
        assert!(c2.significant);
        let g = |v: f64| cfmt::format_g(v, 6);
        assert_eq!(g(c2.difference), "-16.3333");
        assert_eq!(g(c2.half_width), "0.925333");
        assert_eq!(g(c2.relative_difference), "-3.00245");
        assert_eq!(g(c2.relative_half_width), "0.170098");
        assert_eq!(g(c2.pooled_std_dev), "0.408248");
    }

    #[test]
    fn seed_003_at_other_levels() {
        let sets = seed_sets();
        // -16.3333 stays significant down to 99.5 % (t = 7.173 for df 4:
        // half-width 2.3911).
        let c = compare(&sets[0].sample, &sets[2].sample, Confidence::P99_5);
        assert!(c.significant);
        assert_eq!(c.t, 7.173);
        assert_eq!(cfmt::format_g(c.half_width, 6), "2.391");
    }

    #[test]
    fn seed_000_numbers() {
        // Robert Watson's seed 000 table, 512-byte rows: only the summary
        // numbers are posted, so check that a 9-value set reproduces the
        // printed format of t and the pooled-s arithmetic: df 16 at 95 %.
        assert_eq!(ministat_critical_value(Confidence::P95, 16), 2.120);
        // pooled s = 0.00174025 from the two Stddevs (both n = 9).
        let (s1, s2) = (0.0018671501_f64, 0.0016033332_f64);
        let pooled = ((8.0 * s2 * s2 + 8.0 * s1 * s1) / 16.0).sqrt();
        assert_eq!(cfmt::format_g(pooled, 6), "0.00174025");
        let e = 2.120 * pooled * (1.0_f64 / 9.0 + 1.0 / 9.0).sqrt();
        assert_eq!(cfmt::format_g(e, 6), "0.00173916");
        assert_eq!(cfmt::format_g(e * 100.0 / 0.82346833, 6), "0.2112");
    }
}
