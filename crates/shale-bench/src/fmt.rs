//! Number and time formatting that matches YCSB-cpp's output byte for byte.

/// Formats `x` as C++ `std::ostream << double` does by default (`%g` with six significant
/// digits): `3438.48`, `58165.3`, `1.23457e+06`, `0.000123`, `0`.
pub fn cpp_double(x: f64) -> String {
    const PRECISION: i32 = 6;
    if x == 0.0 {
        return "0".to_string();
    }
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    // Round to the precision first: the exponent is the one of the rounded value.
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, x);
    let (mantissa, exp) = sci.split_once('e').expect("{:e} always has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    if (-4..PRECISION).contains(&exp) {
        let decimals = (PRECISION - 1 - exp).max(0) as usize;
        strip_zeros(format!("{x:.decimals$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            strip_zeros(mantissa.to_string()),
            exp.abs()
        )
    }
}

fn strip_zeros(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The local time now as `YYYY-MM-DD HH:MM:SS` (C++ `std::put_time(..., "%F %T")`).
pub fn local_timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t = libc::time_t::try_from(now).unwrap_or(0);
    // SAFETY: `localtime_r` only reads `t` and writes the `tm` we own; both live on the stack for
    // the duration of the call.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return format!("@{now}");
        }
        tm
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_like_cpp_streams() {
        assert_eq!(cpp_double(3438.48), "3438.48");
        assert_eq!(cpp_double(58165.3), "58165.3");
        assert_eq!(cpp_double(58165.312345), "58165.3");
        assert_eq!(cpp_double(100.0), "100");
        assert_eq!(cpp_double(0.5), "0.5");
        assert_eq!(cpp_double(1234567.0), "1.23457e+06");
        assert_eq!(cpp_double(999999.7), "1e+06");
        assert_eq!(cpp_double(0.000123456), "0.000123456");
        assert_eq!(cpp_double(0.0000123456), "1.23456e-05");
        assert_eq!(cpp_double(0.0), "0");
        assert_eq!(cpp_double(12.0000001), "12");
    }

    #[test]
    fn timestamps_have_the_put_time_shape() {
        let t = local_timestamp();
        assert_eq!(t.len(), 19, "{t}");
        assert_eq!(&t[4..5], "-");
        assert_eq!(&t[10..11], " ");
    }
}
