//! C `printf` number formatting, as ministat's output uses it.
//!
//! ministat prints its numbers with `%g` and `%13.8g`; Rust's `{}` picks a
//! different (shortest round-trip) representation, so the report goes
//! through [`format_g`] instead. Rust's fixed-precision formatting rounds
//! the exact binary value half-to-even, which is what glibc does in the
//! default rounding mode, so the digits agree with C's.

/// Formats `value` like C's `printf("%.*g", precision, value)`.
///
/// `precision` is the number of significant digits (0 is treated as 1,
/// as in C). Trailing zeros, and a trailing decimal point, are removed;
/// the exponent form (`1.5e+07`) is used when the decimal exponent is
/// below -4 or at least `precision`. Infinities print as `inf`/`-inf` and
/// NaN as `nan`, or `-nan` when its sign bit is set (glibc does the same;
/// `sqrt` of a negative number yields such a NaN on x86-64).
///
/// ```
/// use pfil_stats::cfmt::format_g;
/// assert_eq!(format_g(0.82346833333, 8), "0.82346833");
/// assert_eq!(format_g(-0.004452556, 6), "-0.00445256");
/// assert_eq!(format_g(1234567.0, 6), "1.23457e+06");
/// assert_eq!(format_g(0.00001234, 6), "1.234e-05");
/// assert_eq!(format_g(544.0, 8), "544");
/// ```
pub fn format_g(value: f64, precision: usize) -> String {
    let sign = if value.is_sign_negative() { "-" } else { "" };
    if value.is_nan() {
        return format!("{sign}nan");
    }
    if value.is_infinite() {
        return format!("{sign}inf");
    }
    let p = precision.max(1);
    let abs = value.abs();
    // The exponent C uses is the one of the %e conversion at precision p-1,
    // i.e. after rounding to p significant digits.
    let sci = format!("{:.*e}", p - 1, abs);
    let (mantissa, exp) = sci.split_once('e').expect("exponent form has an 'e'");
    let exp: i64 = exp.parse().expect("exponent is an integer");
    let p = p as i64;
    if exp < -4 || exp >= p {
        let mantissa = strip_fraction_zeros(mantissa);
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
    } else {
        let decimals = (p - 1 - exp) as usize;
        let fixed = format!("{abs:.decimals$}");
        format!("{sign}{}", strip_fraction_zeros(&fixed))
    }
}

/// Formats `value` like C's `printf("%*.*g", width, precision, value)`:
/// [`format_g`] right-aligned in a field of at least `width` characters.
pub fn format_g_width(value: f64, width: usize, precision: usize) -> String {
    format!("{:>width$}", format_g(value, precision))
}

/// Removes trailing zeros after a decimal point, and the point itself if
/// nothing is left after it.
fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_c_printf() {
        // Expected strings are what glibc's printf prints.
        let cases: &[(f64, usize, &str)] = &[
            (0.0, 6, "0"),
            (-0.0, 6, "-0"),
            (1.0, 6, "1"),
            (100000.0, 6, "100000"),
            (1000000.0, 6, "1e+06"),
            (123456.5, 6, "123456"),
            (123457.5, 6, "123458"),
            (0.0001, 6, "0.0001"),
            (0.00012345678, 6, "0.000123457"),
            (0.00001, 6, "1e-05"),
            (1e-300, 6, "1e-300"),
            (1.5e300, 6, "1.5e+300"),
            (-17.0, 6, "-17"),
            (-3.125, 6, "-3.125"),
            (0.92533, 6, "0.92533"),
            (527.666666666, 8, "527.66667"),
            (0.577350269, 8, "0.57735027"),
            (99999.95, 6, "99999.9"),
            (99999.96, 6, "100000"),
            (9.99999996, 8, "10"),
            (f64::INFINITY, 6, "inf"),
            (f64::NEG_INFINITY, 6, "-inf"),
            (f64::NAN, 6, "nan"),
            (-f64::NAN, 6, "-nan"),
            (2.5, 0, "2"),
            (3.5, 1, "4"),
        ];
        for &(v, p, want) in cases {
            assert_eq!(format_g(v, p), want, "format_g({v:e}, {p})");
        }
        assert_eq!(format_g_width(544.0, 13, 8), "          544");
    }
}
