//! Argument parsing shared by the handlers, with Redis's error texts.

use super::CmdError;

/// Redis's text for a bad integer.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Redis's text for a bad float.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";

pub use crate::store::strings::parse_i64;

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

/// An integer argument that must be at least `min`: Redis's `NOT_INTEGER` when it does not
/// parse, `error` when it is too small.
pub fn int_at_least(arg: &[u8], min: i64, error: &'static str) -> Result<i64, CmdError> {
    match parse_i64(arg) {
        Some(v) if v >= min => Ok(v),
        Some(_) => Err(CmdError::msg(error)),
        None => Err(CmdError::msg(NOT_INTEGER)),
    }
}

/// An integer argument that must be at least `min`, with `error` whether it does not parse or
/// is too small (Redis's `getRangeLongFromObjectOrReply` with a message).
pub fn int_in_range(arg: &[u8], min: i64, error: &'static str) -> Result<i64, CmdError> {
    parse_i64(arg)
        .filter(|&v| v >= min)
        .ok_or_else(|| CmdError::msg(error))
}

/// A COUNT argument of the pop commands: positive, or Redis's error.
pub fn positive_count(arg: &[u8]) -> Result<u64, CmdError> {
    int_in_range(arg, 1, "ERR count should be greater than 0").map(|v| v as u64)
}

/// A blocking command's timeout in seconds (a float, as Redis 6 and later accept): `None` for
/// 0, which blocks forever.
pub fn timeout(arg: &[u8]) -> Result<Option<std::time::Duration>, CmdError> {
    let secs = parse_f64(arg)
        .filter(|s| s.is_finite())
        .ok_or_else(|| CmdError::msg("ERR timeout is not a float or out of range"))?;
    if secs < 0.0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    if secs > 1e15 {
        return Err(CmdError::msg("ERR timeout is out of range"));
    }
    Ok((secs > 0.0).then(|| std::time::Duration::from_secs_f64(secs)))
}

/// Parses a `numkeys` argument and the keys after it: Redis's errors for a count that is not
/// positive or larger than the arguments left.
pub fn counted_keys(argv: &[bytes::Bytes], at: usize) -> Result<&[bytes::Bytes], CmdError> {
    let n = int_in_range(&argv[at], 1, "ERR numkeys should be greater than 0")? as usize;
    argv.get(at + 1..at + 1 + n)
        .ok_or_else(|| CmdError::msg("ERR Number of keys can't be greater than number of args"))
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
