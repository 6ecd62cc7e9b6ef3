//! `pfil-bench ministat`: ministat(1) on files of numbers.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use pfil_stats::{
    read_data_set, Confidence, Error, ParseOptions, Report, ReportOptions, TTable, MAX_DATA_SETS,
};

/// ministat's plot width when standard output is not a terminal.
const DEFAULT_WIDTH: usize = 74;

/// Options of `pfil-bench ministat`; the short flags are ministat's.
#[derive(Debug, Args)]
#[command(
    after_help = "Each file holds one number per line (the first whitespace-separated field, \
or the one chosen with -C); blank lines and fields starting with '#' are ignored. \
The first file is the baseline the others are compared with. \
Output is identical to FreeBSD/Debian ministat(1) for the same input."
)]
pub struct MinistatArgs {
    /// Print statistics and comparisons only, no plot.
    #[arg(short = 'A')]
    pub no_plot: bool,

    /// The column of each line to use (1-based).
    #[arg(short = 'C', value_name = "COLUMN", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub column: u64,

    /// Confidence level of the Student's t test: 80, 90, 95, 98, 99 or 99.5.
    #[arg(short = 'c', value_name = "LEVEL", default_value = "95")]
    pub confidence: Confidence,

    /// Column delimiter characters [default: space and tab].
    #[arg(short = 'd', value_name = "DELIMITERS")]
    pub delimiters: Option<String>,

    /// Print summary statistics only: no plot and no comparisons.
    #[arg(short = 'n')]
    pub stats_only: bool,

    /// Do not print the data-set names and the summary header line
    /// (FreeBSD's -q; usually together with -n).
    #[arg(short = 'q')]
    pub quiet: bool,

    /// Print the average/median/stddev bars on separate lines.
    #[arg(short = 's')]
    pub separate_bars: bool,

    /// Width of the plot [default: the terminal's width minus 2 (or
    /// $COLUMNS) on a terminal, else 74].
    #[arg(short = 'w', value_name = "WIDTH")]
    pub width: Option<usize>,

    /// Use exact Student's t quantiles for the actual degrees of freedom
    /// instead of ministat's table (changes the numbers, so the output no
    /// longer matches ministat's).
    #[arg(long)]
    pub exact_t: bool,

    /// Data files, at most 7; "-" is standard input, which is also read
    /// when no file is given.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// Reads the files and renders the report.
pub fn run(args: &MinistatArgs) -> Result<String, Error> {
    if args.files.len() > MAX_DATA_SETS {
        return Err(Error::TooManyDataSets(args.files.len()));
    }
    let parse = ParseOptions {
        column: usize::try_from(args.column).unwrap_or(usize::MAX),
        delimiters: args
            .delimiters
            .clone()
            .unwrap_or_else(|| ParseOptions::default().delimiters),
    };
    let stdin = [PathBuf::from("-")];
    let files = if args.files.is_empty() {
        &stdin[..]
    } else {
        &args.files[..]
    };
    let data_sets = files
        .iter()
        .map(|path| read_data_set(path, &parse))
        .collect::<Result<Vec<_>, _>>()?;
    let options = ReportOptions {
        width: args.width.unwrap_or_else(default_width),
        confidence: args.confidence,
        t_table: if args.exact_t {
            TTable::Exact
        } else {
            TTable::Ministat
        },
        plot: !args.no_plot && !args.stats_only,
        comparisons: !args.stats_only,
        headers: !args.quiet,
        separate_bars: args.separate_bars,
    };
    Ok(Report::new(&data_sets, options)?.render())
}

/// ministat's default width: on a terminal `$COLUMNS` if set, else the
/// terminal's width minus 2; otherwise 74.
fn default_width() -> usize {
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return DEFAULT_WIDTH;
    }
    if let Some(columns) = std::env::var_os("COLUMNS").filter(|c| !c.is_empty()) {
        // atoi(): leading digits; an unusable value falls back to 74.
        let digits: String = columns
            .to_string_lossy()
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        return digits
            .parse::<usize>()
            .ok()
            .filter(|&w| w >= pfil_stats::MIN_PLOT_WIDTH)
            .unwrap_or(DEFAULT_WIDTH);
    }
    match terminal_size::terminal_size_of(&stdout) {
        Some((terminal_size::Width(w), _)) if usize::from(w) >= 2 + pfil_stats::MIN_PLOT_WIDTH => {
            usize::from(w) - 2
        }
        _ => DEFAULT_WIDTH,
    }
}
