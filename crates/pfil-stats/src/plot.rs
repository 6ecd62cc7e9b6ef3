//! ministat's ASCII-art distribution plot.
//!
//! The plot spans the smallest and largest of every data set's minimum,
//! maximum and mean ± standard deviation, divided into `width` buckets.
//! Each value is drawn as its data set's symbol in its bucket, stacked
//! upwards when a data set has several values in one bucket; where data
//! sets overlap the symbol numbers are OR-ed (so `x` (1) and `+` (2) show
//! as `*` (3), as in ministat). Under the points each data set gets a bar
//! `|___A___M___|` spanning mean ± standard deviation, with `A` at the mean
//! and `M` at the median; without `separate_bars` all data sets share one
//! bar line, later ones drawn over earlier ones.
//!
//! The stacking height follows ministat exactly, including its quirk that
//! the plot height is that of the *last* data set's tallest stack (plus
//! one), so taller stacks of earlier data sets can be cut off, and rows
//! that a later, taller data set re-grows are cleared first.

use crate::Sample;

/// The plot symbols, indexed by data-set number (1-based; 0 is blank).
pub const SYMBOLS: [char; 8] = [' ', 'x', '+', '*', '%', '#', '@', 'O'];

/// The most data sets a plot (and a report) can show: one per symbol.
pub const MAX_DATA_SETS: usize = SYMBOLS.len() - 1;

/// The smallest usable plot width (ministat misbehaves below 2).
pub const MIN_PLOT_WIDTH: usize = 2;

/// Renders the plot for `samples` (at most [`MAX_DATA_SETS`]) with `width`
/// columns between the frame's `|`s (at least [`MIN_PLOT_WIDTH`]), every
/// line ending in a newline. If every value and mean ± deviation is the
/// same number, ministat's `[no plot, span is zero width]` line is
/// returned instead.
///
/// # Panics
///
/// If there are more than [`MAX_DATA_SETS`] samples or the width is below
/// [`MIN_PLOT_WIDTH`]; [`crate::Report`] checks both first.
pub fn render_plot(samples: &[&Sample], width: usize, separate_bars: bool) -> String {
    assert!(samples.len() <= MAX_DATA_SETS, "too many data sets");
    assert!(width >= MIN_PLOT_WIDTH, "plot width too small");
    let mut plot = Plot::new(samples, width, separate_bars);
    for (i, sample) in samples.iter().enumerate() {
        plot.add(sample, i as u8 + 1);
    }
    plot.dump()
}

struct Plot {
    width: usize,
    span: f64,
    x0: f64,
    dx: f64,
    /// Rows of point cells, row 0 (never shown) at the bottom.
    rows: Vec<Vec<u8>>,
    bars: Vec<Option<Vec<u8>>>,
    separate_bars: bool,
}

impl Plot {
    fn new(samples: &[&Sample], width: usize, separate_bars: bool) -> Plot {
        let mut min = 999e99;
        let mut max = -999e99;
        for s in samples {
            let mean = s.mean();
            let sd = s.std_dev();
            // NaN never compares, as in ministat.
            for v in [s.min(), s.max(), mean - sd, mean + sd] {
                if v < min {
                    min = v;
                }
                if v > max {
                    max = v;
                }
            }
        }
        let span = max - min;
        let dx = span / (width as f64 - 1.0);
        let x0 = min - 0.5 * dx;
        Plot {
            width,
            span,
            x0,
            dx,
            rows: Vec::new(),
            bars: vec![None; samples.len()],
            separate_bars,
        }
    }

    /// The bucket of `value` (truncating toward zero, as C's conversion).
    fn bucket(&self, value: f64) -> usize {
        let x = ((value - self.x0) / self.dx) as i64;
        x.clamp(0, self.width as i64 - 1) as usize
    }

    fn add(&mut self, sample: &Sample, symbol: u8) {
        if self.span == 0.0 {
            return;
        }
        // Tallest stack of this data set.
        let mut tallest = 1;
        let mut run = 0;
        let mut prev = None;
        for &v in sample.values() {
            let x = self.bucket(v);
            if prev == Some(x) {
                run += 1;
                tallest = tallest.max(run);
            } else {
                run = 1;
                prev = Some(x);
            }
        }
        let height = tallest + 1;
        // ministat's height follows the last data set; rows above it are
        // dropped and re-grown empty.
        self.rows.resize(height, vec![0; self.width]);
        let mut prev = None;
        let mut level = 0;
        for &v in sample.values() {
            let x = self.bucket(v);
            if prev == Some(x) {
                level += 1;
            } else {
                level = 1;
                prev = Some(x);
            }
            self.rows[level][x] |= symbol;
        }

        let index = if self.separate_bars {
            usize::from(symbol) - 1
        } else {
            0
        };
        let mean = sample.mean();
        let sd = sample.std_dev();
        let median_at = self.bucket(sample.median());
        let mean_at = self.bucket(mean);
        let (lo, hi) = (self.bucket(mean - sd), self.bucket(mean + sd));
        let width = self.width;
        let bar = self.bars[index].get_or_insert_with(|| vec![0; width]);
        if !sd.is_nan() {
            bar[hi] = b'|';
            bar[lo] = b'|';
            for cell in bar.iter_mut().take(hi).skip(lo + 1) {
                if *cell == 0 {
                    *cell = b'_';
                }
            }
        }
        bar[median_at] = b'M';
        bar[mean_at] = b'A';
    }

    fn dump(&self) -> String {
        if self.span == 0.0 {
            return "[no plot, span is zero width]\n".to_string();
        }
        let mut out = String::new();
        let border = format!("+{}+\n", "-".repeat(self.width));
        out.push_str(&border);
        for row in self.rows.iter().skip(1).rev() {
            out.push('|');
            out.extend(row.iter().map(|&k| SYMBOLS[usize::from(k)]));
            out.push_str("|\n");
        }
        for bar in self.bars.iter().flatten() {
            out.push('|');
            out.extend(
                bar.iter()
                    .map(|&k| if k == 0 { ' ' } else { char::from(k) }),
            );
            out.push_str("|\n");
        }
        out.push_str(&border);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(v: &[f64]) -> Sample {
        Sample::from_values(v.iter().copied()).unwrap()
    }

    #[test]
    fn overlapping_sets_or_their_symbols() {
        let a = sample(&[1.0, 2.0, 3.0, 4.0]);
        let b = sample(&[10.0, 30.0, 35.0, 70.0, 80.0]);
        // Checked against Debian's ministat -w 2.
        assert_eq!(
            render_plot(&[&a, &b], 2, false),
            "+--+\n|* |\n|*+|\n|*+|\n|MA|\n+--+\n"
        );
    }

    #[test]
    fn zero_span() {
        let a = sample(&[5.0, 5.0, 5.0]);
        assert_eq!(
            render_plot(&[&a, &a], 74, false),
            "[no plot, span is zero width]\n"
        );
    }
}
