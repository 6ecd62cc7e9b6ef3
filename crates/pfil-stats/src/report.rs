//! The full ministat report: legend, plot, summary table, comparisons.

use std::fmt;

use crate::compare::compare_with;
use crate::plot::{render_plot, MAX_DATA_SETS, MIN_PLOT_WIDTH, SYMBOLS};
use crate::student::{Confidence, TTable};
use crate::{Error, Sample, Summary};

/// A named sample: one file of ministat's input.
#[derive(Debug, Clone, PartialEq)]
pub struct DataSet {
    /// The name shown in the legend (ministat shows the file name).
    pub name: String,
    /// The values.
    pub sample: Sample,
}

impl DataSet {
    /// Names a sample.
    pub fn new(name: impl Into<String>, sample: Sample) -> DataSet {
        DataSet {
            name: name.into(),
            sample,
        }
    }
}

/// What a report contains and how it is laid out. The defaults are
/// ministat's defaults for output that is not a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportOptions {
    /// Plot width in characters between the frame's `|`s (ministat's `-w`;
    /// default 74).
    pub width: usize,
    /// Confidence level of the comparisons (ministat's `-c`; default 95).
    pub confidence: Confidence,
    /// Critical values of t: ministat's table (default) or exact.
    pub t_table: TTable,
    /// Draw the ASCII-art plot (off with ministat's `-A` or `-n`).
    pub plot: bool,
    /// Compare each data set after the first against the first (off with
    /// ministat's `-n`).
    pub comparisons: bool,
    /// Print the legend (`x name`) and the summary column header (off with
    /// FreeBSD ministat's `-q`).
    pub headers: bool,
    /// One mean/median/deviation bar line per data set instead of a shared
    /// one (ministat's `-s`).
    pub separate_bars: bool,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            width: 74,
            confidence: Confidence::P95,
            t_table: TTable::Ministat,
            plot: true,
            comparisons: true,
            headers: true,
            separate_bars: false,
        }
    }
}

/// A checked set of data sets with options, ready to render.
///
/// ```
/// use pfil_stats::{DataSet, Report, ReportOptions, Sample};
/// let sets = vec![
///     DataSet::new("before", Sample::from_values([544.0, 544.0, 544.0]).unwrap()),
///     DataSet::new("after", Sample::from_values([527.0, 528.0, 528.0]).unwrap()),
/// ];
/// let options = ReportOptions { plot: false, ..ReportOptions::default() };
/// let text = Report::new(&sets, options).unwrap().render();
/// assert_eq!(text, "\
/// x before
/// + after
///     N           Min           Max        Median           Avg        Stddev
/// x   3           544           544           544           544             0
/// +   3           527           528           528     527.66667    0.57735027
/// Difference at 95.0% confidence
/// \t-16.3333 +/- 0.925333
/// \t-3.00245% +/- 0.170098%
/// \t(Student's t, pooled s = 0.408248)
/// ");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Report<'a> {
    data_sets: &'a [DataSet],
    options: ReportOptions,
}

impl<'a> Report<'a> {
    /// Checks that there are 1 to [`MAX_DATA_SETS`] data sets and, if a
    /// plot is wanted, a width of at least [`MIN_PLOT_WIDTH`].
    pub fn new(data_sets: &'a [DataSet], options: ReportOptions) -> Result<Report<'a>, Error> {
        if data_sets.is_empty() {
            return Err(Error::NoDataSets);
        }
        if data_sets.len() > MAX_DATA_SETS {
            return Err(Error::TooManyDataSets(data_sets.len()));
        }
        if options.plot && options.width < MIN_PLOT_WIDTH {
            return Err(Error::WidthTooSmall(options.width));
        }
        Ok(Report { data_sets, options })
    }

    /// The data sets.
    pub fn data_sets(&self) -> &'a [DataSet] {
        self.data_sets
    }

    /// The options.
    pub fn options(&self) -> ReportOptions {
        self.options
    }

    /// The summary statistics of each data set, in order.
    pub fn summaries(&self) -> Vec<Summary> {
        self.data_sets.iter().map(|d| d.sample.summary()).collect()
    }

    /// The comparison of each data set after the first against the first.
    pub fn comparisons(&self) -> Vec<crate::Comparison> {
        let base = &self.data_sets[0].sample;
        self.data_sets[1..]
            .iter()
            .map(|d| {
                compare_with(
                    base,
                    &d.sample,
                    self.options.confidence,
                    self.options.t_table,
                )
            })
            .collect()
    }

    /// The report text, exactly as ministat prints it for the same input
    /// and options (every line ends in a newline).
    pub fn render(&self) -> String {
        let o = &self.options;
        let mut out = String::new();
        if o.headers {
            for (i, ds) in self.data_sets.iter().enumerate() {
                out.push(SYMBOLS[i + 1]);
                out.push(' ');
                out.push_str(&ds.name);
                out.push('\n');
            }
        }
        if o.plot {
            let samples: Vec<&Sample> = self.data_sets.iter().map(|d| &d.sample).collect();
            out.push_str(&render_plot(&samples, o.width, o.separate_bars));
        }
        if o.headers {
            out.push_str(Summary::HEADER);
            out.push('\n');
        }
        let base = &self.data_sets[0].sample;
        for (i, ds) in self.data_sets.iter().enumerate() {
            out.push_str(&ds.sample.summary().format_row(SYMBOLS[i + 1]));
            out.push('\n');
            if i > 0 && o.comparisons {
                out.push_str(&compare_with(base, &ds.sample, o.confidence, o.t_table).render());
            }
        }
        out
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// Renders the full ministat report for `data_sets` (the first is the
/// baseline): shorthand for [`Report::new`] followed by [`Report::render`].
pub fn render(data_sets: &[DataSet], options: &ReportOptions) -> Result<String, Error> {
    Report::new(data_sets, *options).map(|r| r.render())
}
