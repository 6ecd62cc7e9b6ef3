//! The error type of this crate.

use std::io;

/// Everything that can go wrong while reading data sets, building samples
/// or rendering a report.
///
/// Errors about input data name the data set ("file") and, where there is
/// one, the 1-based line number, so that a user can find the bad value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A data file could not be opened.
    #[error("cannot open {file}: {source}")]
    Open {
        /// The file name as given.
        file: String,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },

    /// Reading a data file failed part-way.
    #[error("{file}:{line}: read error: {source}")]
    Read {
        /// The file name as given.
        file: String,
        /// The 1-based number of the line that could not be read.
        line: usize,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },

    /// The selected column of a line is not a number.
    #[error("{file}:{line}: invalid data {token:?}: not a number")]
    InvalidNumber {
        /// The file name as given.
        file: String,
        /// The 1-based line number.
        line: usize,
        /// The offending text (lossily decoded as UTF-8).
        token: String,
    },

    /// The selected column of a line is a number, but not a finite one
    /// (`inf`, `nan`, or out of the range of `f64`).
    #[error("{file}:{line}: invalid data {token:?}: value is not finite")]
    NonFiniteInput {
        /// The file name as given.
        file: String,
        /// The 1-based line number.
        line: usize,
        /// The offending text.
        token: String,
    },

    /// A data file holds fewer values than a sample needs.
    #[error(
        "{file}: data set has {found} value(s) in {lines} line(s); at least {required} are required"
    )]
    TooFewValuesInFile {
        /// The file name as given.
        file: String,
        /// How many values were found.
        found: usize,
        /// How many values are needed ([`crate::MIN_VALUES`]).
        required: usize,
        /// How many lines the file has (the last line is `lines`).
        lines: usize,
    },

    /// A sample was built from fewer values than it needs.
    #[error("sample has {found} value(s); at least {required} are required")]
    TooFewValues {
        /// How many values were given.
        found: usize,
        /// How many values are needed ([`crate::MIN_VALUES`]).
        required: usize,
    },

    /// A sample was built from a value that is NaN or infinite.
    #[error("value #{index} ({value}) is not finite")]
    NonFiniteValue {
        /// 0-based position of the value in the input.
        index: usize,
        /// The value itself.
        value: f64,
    },

    /// The column to read is 0 (columns are numbered from 1).
    #[error("column number must be at least 1, got {0}")]
    InvalidColumn(usize),

    /// The delimiter set is empty.
    #[error("the delimiter set must not be empty")]
    EmptyDelimiters,

    /// A confidence level other than 80, 90, 95, 98, 99 or 99.5 was asked for.
    #[error("unsupported confidence level {0}% (supported: 80, 90, 95, 98, 99, 99.5)")]
    UnsupportedConfidence(String),

    /// A report needs at least one data set.
    #[error("no data sets to report on")]
    NoDataSets,

    /// A report has more data sets than there are plot symbols.
    #[error("too many data sets: {0} (at most {max})", max = crate::MAX_DATA_SETS)]
    TooManyDataSets(usize),

    /// The plot width is too small to draw anything.
    #[error("plot width {0} is too small (at least {min})", min = crate::MIN_PLOT_WIDTH)]
    WidthTooSmall(usize),
}
