//! Argument parsing shared by the handlers, with Redis's error texts.

use super::CmdError;

/// Redis's text for a bad integer.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Redis's text for a bad float.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";

/// Parses a signed 64-bit integer as Redis's `string2ll` does: optional `-`, digits, no spaces,
/// no `+`, no leading zeros (except `0` itself).
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    let (neg, digits) = match arg.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, arg),
    };
    if digits.is_empty() || digits.len() > 20 || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    if neg && digits == b"0" {
        return None;
    }
    let mut v: i128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(d - b'0');
    }
    i64::try_from(if neg { -v } else { v }).ok()
}

/// [`parse_i64`] with Redis's error.
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or_else(|| CmdError::msg(NOT_INTEGER))
}

/// Parses a float as Redis does for scores: a decimal number, `inf`, `+inf` or `-inf`; NaN and
/// text with spaces are refused.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(arg).ok()?;
    if text.is_empty() || text.trim() != text {
        return None;
    }
    let v = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => text.parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// [`parse_f64`] with Redis's error.
pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    parse_f64(arg).ok_or_else(|| CmdError::msg(NOT_FLOAT))
}

/// Whether `arg` equals `word`, ignoring ASCII case.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// `arg` as text for an error message: lossy UTF-8, cut at `max` characters, line breaks replaced.
pub fn printable(arg: &[u8], max: usize) -> String {
    String::from_utf8_lossy(arg)
        .chars()
        .take(max)
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

/// Formats an integer the way Redis stores `INCR` results.
pub fn int_bytes(v: i64) -> Vec<u8> {
    v.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_as_redis_parses_them() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"01",
            b"1.0",
            b"9223372036854775808",
            b"-0",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn floats_accept_infinities_and_refuse_nan() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
    }
}
