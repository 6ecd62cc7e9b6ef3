//! Reading data sets from text, the way ministat reads its files.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use crate::{DataSet, Error, Sample, MIN_VALUES};

/// How to pick the numbers out of a data file.
///
/// Each line is first stripped of trailing whitespace and then split into
/// fields at any of the [`delimiters`](ParseOptions::delimiters) (runs of
/// delimiters count as one, leading ones are skipped, like `strtok(3)`).
/// The field number [`column`](ParseOptions::column) is the value. A line is
/// skipped when it has fewer fields, or when a field up to and including
/// that one starts with `#` (so `#` comments and blank lines are ignored).
/// Anything else that is not entirely a number is an error naming the
/// file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOptions {
    /// The 1-based field number to read (ministat's `-C`, default 1).
    pub column: usize,
    /// The field separator characters (ministat's `-d`, default space and
    /// tab).
    pub delimiters: String,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            column: 1,
            delimiters: " \t".to_string(),
        }
    }
}

impl ParseOptions {
    fn validate(&self) -> Result<(), Error> {
        if self.column == 0 {
            return Err(Error::InvalidColumn(0));
        }
        if self.delimiters.is_empty() {
            return Err(Error::EmptyDelimiters);
        }
        Ok(())
    }
}

/// Reads a data set from `reader`; `name` is used as the data set's name
/// and in error messages.
///
/// ```
/// use pfil_stats::{parse_data_set, ParseOptions};
/// let text = "# seconds\n1.5 first run\n\n2.5\n3.5\t# tabbed\n";
/// let ds = parse_data_set(text.as_bytes(), "runs.txt", &ParseOptions::default()).unwrap();
/// assert_eq!(ds.name, "runs.txt");
/// assert_eq!(ds.sample.values(), &[1.5, 2.5, 3.5]);
///
/// let err = parse_data_set("1\n2\nfoo\n".as_bytes(), "bad.txt", &ParseOptions::default())
///     .unwrap_err();
/// assert_eq!(err.to_string(), "bad.txt:3: invalid data \"foo\": not a number");
/// ```
pub fn parse_data_set<R: BufRead>(
    mut reader: R,
    name: &str,
    options: &ParseOptions,
) -> Result<DataSet, Error> {
    options.validate()?;
    let delimiters = options.delimiters.as_bytes();
    let mut values = Vec::new();
    let mut buf = Vec::new();
    let mut line = 0usize;
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(|source| Error::Read {
                file: name.to_string(),
                line: line + 1,
                source,
            })?;
        if read == 0 {
            break;
        }
        line += 1;
        let Some(token) = select_field(&buf, delimiters, options.column) else {
            continue;
        };
        values.push(parse_number(token).map_err(|finite| {
            let file = name.to_string();
            let token = String::from_utf8_lossy(token).into_owned();
            if finite {
                Error::InvalidNumber { file, line, token }
            } else {
                Error::NonFiniteInput { file, line, token }
            }
        })?);
    }
    if values.len() < MIN_VALUES {
        return Err(Error::TooFewValuesInFile {
            file: name.to_string(),
            found: values.len(),
            required: MIN_VALUES,
            lines: line,
        });
    }
    let sample = Sample::from_values(values).expect("values were checked");
    Ok(DataSet::new(name, sample))
}

/// Reads a data set from the file at `path`, named by the path as given.
/// A path of `-` reads standard input, named `<stdin>` as in ministat.
pub fn read_data_set(path: impl AsRef<Path>, options: &ParseOptions) -> Result<DataSet, Error> {
    let path = path.as_ref();
    if path == Path::new("-") {
        return parse_data_set(io::stdin().lock(), "<stdin>", options);
    }
    let name = path.display().to_string();
    let file = File::open(path).map_err(|source| Error::Open {
        file: name.clone(),
        source,
    })?;
    parse_data_set(BufReader::new(file), &name, options)
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Picks field `column` (1-based) of a raw line, or `None` if the line is to
/// be skipped.
fn select_field<'a>(raw: &'a [u8], delimiters: &[u8], column: usize) -> Option<&'a [u8]> {
    // C string semantics: the line ends at a NUL byte.
    let raw = match raw.iter().position(|&b| b == 0) {
        Some(nul) => &raw[..nul],
        None => raw,
    };
    let end = raw
        .iter()
        .rposition(|&b| !is_c_space(b))
        .map_or(0, |last| last + 1);
    let line = &raw[..end];
    let fields = line
        .split(|b| delimiters.contains(b))
        .filter(|field| !field.is_empty());
    for (index, field) in fields.enumerate() {
        if field[0] == b'#' {
            return None;
        }
        if index + 1 == column {
            return Some(field);
        }
    }
    None
}

/// Parses a whole field as a number (leading whitespace allowed, as with
/// `strtod`). `Err(true)` means not a number, `Err(false)` a number that is
/// not finite.
fn parse_number(token: &[u8]) -> Result<f64, bool> {
    let start = token
        .iter()
        .position(|&b| !is_c_space(b))
        .unwrap_or(token.len());
    let text = std::str::from_utf8(&token[start..]).map_err(|_| true)?;
    // Rust's grammar also admits "inf"/"nan"; those are reported as
    // non-finite rather than accepted.
    let value: f64 = text.parse().map_err(|_| true)?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<f64>, Error> {
        parse_data_set(text.as_bytes(), "t", &ParseOptions::default())
            .map(|ds| ds.sample.values().to_vec())
    }

    #[test]
    fn ministat_line_rules() {
        let text = "# hi\n\n 5 x\n6\t7\n  7  \n#8\n1e1\r\n+2.5\n-.5 # c\n";
        assert_eq!(parse(text).unwrap(), vec![-0.5, 2.5, 5.0, 6.0, 7.0, 10.0]);
    }

    #[test]
    fn errors_name_file_and_line() {
        match parse("1\n2\n9#\n") {
            Err(Error::InvalidNumber { file, line, token }) => {
                assert_eq!((file.as_str(), line, token.as_str()), ("t", 3, "9#"));
            }
            other => panic!("{other:?}"),
        }
        match parse("1\ninf\n") {
            Err(Error::NonFiniteInput { line: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        match parse("# only a comment\n\n") {
            Err(
                e @ Error::TooFewValuesInFile {
                    found: 0, lines: 2, ..
                },
            ) => {
                assert_eq!(
                    e.to_string(),
                    "t: data set has 0 value(s) in 2 line(s); at least 2 are required"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse("1\n"),
            Err(Error::TooFewValuesInFile { found: 1, .. })
        ));
        assert!(matches!(
            parse(""),
            Err(Error::TooFewValuesInFile {
                found: 0,
                lines: 0,
                ..
            })
        ));
        let err = read_data_set("/nonexistent/x", &ParseOptions::default()).unwrap_err();
        assert!(matches!(err, Error::Open { .. }));
        assert!(err.to_string().starts_with("cannot open /nonexistent/x: "));
    }

    #[test]
    fn columns_and_delimiters() {
        let opts = ParseOptions {
            column: 2,
            delimiters: ",".into(),
        };
        let ds = parse_data_set("a,1\nb,2\nc\nd,#x\ne,3,9\n".as_bytes(), "csv", &opts).unwrap();
        assert_eq!(ds.sample.values(), &[1.0, 2.0, 3.0]);
        let bad = ParseOptions {
            column: 0,
            ..ParseOptions::default()
        };
        assert!(matches!(
            parse_data_set("1\n2\n".as_bytes(), "x", &bad),
            Err(Error::InvalidColumn(0))
        ));
    }
}
