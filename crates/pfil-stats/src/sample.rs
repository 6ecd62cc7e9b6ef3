//! Samples and their summary statistics.

use crate::cfmt::format_g_width;
use crate::Error;

/// The fewest values a [`Sample`] accepts: the sample standard deviation
/// needs two. (ministat itself refuses data sets with fewer than three.)
pub const MIN_VALUES: usize = 2;

/// A set of measurements, with the running sums ministat keeps.
///
/// The sums are accumulated in the order the values were given (as ministat
/// does while reading a file), and the values are then kept sorted; the
/// mean and variance come from the sums, so the results are bit-for-bit
/// those of ministat.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    sorted: Vec<f64>,
    sum: f64,
    sum_sq: f64,
}

impl Sample {
    /// Builds a sample from values in input order.
    ///
    /// Fails with [`Error::TooFewValues`] for fewer than [`MIN_VALUES`]
    /// values and with [`Error::NonFiniteValue`] for NaN or infinities.
    ///
    /// ```
    /// use pfil_stats::Sample;
    /// let s = Sample::from_values([527.0, 528.0, 528.0]).unwrap();
    /// assert_eq!(s.n(), 3);
    /// assert_eq!(s.median(), 528.0);
    /// assert!(Sample::from_values([1.0]).is_err());
    /// ```
    pub fn from_values<I: IntoIterator<Item = f64>>(values: I) -> Result<Sample, Error> {
        let mut sorted = Vec::new();
        let mut sum = 0.0;
        let mut sum_sq = 0.0;
        for (index, value) in values.into_iter().enumerate() {
            if !value.is_finite() {
                return Err(Error::NonFiniteValue { index, value });
            }
            sorted.push(value);
            sum += value;
            sum_sq += value * value;
        }
        if sorted.len() < MIN_VALUES {
            return Err(Error::TooFewValues {
                found: sorted.len(),
                required: MIN_VALUES,
            });
        }
        // Stable, with -0.0 == 0.0 as in ministat's qsort comparator.
        sorted.sort_by(|a, b| a.partial_cmp(b).expect("values are finite"));
        Ok(Sample {
            sorted,
            sum,
            sum_sq,
        })
    }

    /// The number of values.
    pub fn n(&self) -> usize {
        self.sorted.len()
    }

    /// The values, sorted ascending.
    pub fn values(&self) -> &[f64] {
        &self.sorted
    }

    /// The smallest value.
    pub fn min(&self) -> f64 {
        self.sorted[0]
    }

    /// The largest value.
    pub fn max(&self) -> f64 {
        self.sorted[self.sorted.len() - 1]
    }

    /// The median as ministat computes it: the value at index `n / 2` of
    /// the sorted values. For an even count that is the *upper* of the two
    /// middle values (ministat does not average them), e.g. 3 for
    /// `1, 2, 3, 4`.
    pub fn median(&self) -> f64 {
        self.sorted[self.sorted.len() / 2]
    }

    /// The arithmetic mean, `sum / n`.
    pub fn mean(&self) -> f64 {
        self.sum / self.n() as f64
    }

    /// The sample variance (divisor `n - 1`), computed like ministat from
    /// the running sums: `(Σy² - (Σy)²/n) / (n - 1)`.
    ///
    /// Rounding can make this slightly negative for (nearly) constant data
    /// that is not exactly representable; like ministat it is not clamped,
    /// so [`Sample::std_dev`] is then NaN (ministat prints `-nan`).
    pub fn variance(&self) -> f64 {
        let n = self.n() as f64;
        (self.sum_sq - self.sum * self.sum / n) / (n - 1.0)
    }

    /// The sample standard deviation, `sqrt(variance)`.
    ///
    /// A negative variance (see [`Sample::variance`]) gives a NaN with the
    /// sign bit set, as `sqrt` produces on x86-64, so that it prints as
    /// `-nan` like ministat's output.
    pub fn std_dev(&self) -> f64 {
        let variance = self.variance();
        if variance < 0.0 {
            f64::NAN.copysign(-1.0)
        } else {
            variance.sqrt()
        }
    }

    /// All summary statistics at once.
    pub fn summary(&self) -> Summary {
        Summary {
            n: self.n(),
            min: self.min(),
            max: self.max(),
            median: self.median(),
            mean: self.mean(),
            std_dev: self.std_dev(),
        }
    }
}

/// The summary statistics ministat prints for a data set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Median (upper median for an even count; see [`Sample::median`]).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (NaN if rounding made the variance
    /// negative; see [`Sample::variance`]).
    pub std_dev: f64,
}

impl Summary {
    /// The column header line ministat prints above the summary rows
    /// (without a newline).
    pub const HEADER: &'static str =
        "    N           Min           Max        Median           Avg        Stddev";

    /// One summary row as ministat prints it (without a newline): the plot
    /// `symbol`, N in 3 columns, then the five statistics as `%13.8g`.
    ///
    /// ```
    /// use pfil_stats::Sample;
    /// let s = Sample::from_values([527.0, 528.0, 528.0]).unwrap();
    /// assert_eq!(
    ///     s.summary().format_row('*'),
    ///     "*   3           527           528           528     527.66667    0.57735027"
    /// );
    /// ```
    pub fn format_row(&self, symbol: char) -> String {
        format!(
            "{symbol} {:>3} {} {} {} {} {}",
            self.n,
            format_g_width(self.min, 13, 8),
            format_g_width(self.max, 13, 8),
            format_g_width(self.median, 13, 8),
            format_g_width(self.mean, 13, 8),
            format_g_width(self.std_dev, 13, 8),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics() {
        let s = Sample::from_values([4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.values(), &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.min(), 1.0);
        assert_eq!(s.max(), 4.0);
        assert_eq!(s.median(), 3.0, "ministat takes the upper median");
        assert_eq!(s.mean(), 2.5);
        assert!((s.variance() - 5.0 / 3.0).abs() < 1e-15);
        let odd = Sample::from_values([5.0, 1.0, 3.0]).unwrap();
        assert_eq!(odd.median(), 3.0);
    }

    #[test]
    fn rejects_bad_values() {
        assert!(matches!(
            Sample::from_values([]),
            Err(Error::TooFewValues {
                found: 0,
                required: 2
            })
        ));
        assert!(matches!(
            Sample::from_values([1.0]),
            Err(Error::TooFewValues { found: 1, .. })
        ));
        assert!(matches!(
            Sample::from_values([1.0, f64::NAN, 2.0]),
            Err(Error::NonFiniteValue { index: 1, .. })
        ));
        assert!(Sample::from_values([1.0, 2.0]).is_ok());
    }

    #[test]
    fn negative_rounding_variance_is_nan_like_ministat() {
        // ministat prints "-nan" for this data set.
        let s = Sample::from_values([0.1, 0.1, 0.1]).unwrap();
        assert!(s.variance() < 0.0);
        assert!(s.std_dev().is_nan());
        assert!(s.summary().format_row('x').ends_with("         -nan"));
    }
}
