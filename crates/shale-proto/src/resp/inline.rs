//! Splitting an inline request line into arguments, with Redis's quoting rules.
//!
//! An inline request is one line of text such as `SET key "a value"\r\n`, the form `telnet` and
//! `redis-cli` pipes send. Redis splits it with `sdssplitargs`; this module follows the same rules
//! so a line means the same thing to Shale as to Redis:
//!
//! - Arguments are separated by runs of C whitespace (space, `\t`, `\n`, `\v`, `\f`, `\r`); an
//!   unquoted argument ends at a space, `\t`, `\n` or `\r`.
//! - A double quote starts a quoted part in which `\n`, `\r`, `\t`, `\b`, `\a` are escapes,
//!   `\xHH` is a byte in hex, and a backslash before any other byte stands for that byte.
//! - A single quote starts a quoted part in which only `\'` is an escape.
//! - A quote may begin in the middle of an argument (`a"b c"` is one argument, `ab c`), but a
//!   closing quote must be followed by whitespace or the end of the line.
//! - An unterminated quote, or a closing quote followed by something else, is
//!   [`ProtocolError::UnbalancedQuotes`].
//! - Redis reads the line as a C string, so a NUL byte ends it; anything after it is ignored (and
//!   a quote still open there is unbalanced).

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use bytes::Bytes;

use super::ProtocolError;

/// Splits one inline request line (without its line terminator) into arguments. An empty result
/// means an empty request, which Redis ignores.
pub(crate) fn split_inline(line: &[u8]) -> Result<Vec<Bytes>, ProtocolError> {
    let line = match memchr::memchr(0, line) {
        Some(nul) => line.get(..nul).unwrap_or(line),
        None => line,
    };
    let mut args = Vec::new();
    let mut at = 0;
    loop {
        while line.get(at).is_some_and(|&b| is_c_space(b)) {
            at += 1;
        }
        if at >= line.len() {
            return Ok(args);
        }
        let (arg, next) = split_one(line, at)?;
        args.push(Bytes::from(arg));
        at = next;
    }
}

/// Where the scanner is inside one argument.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Double,
    Single,
}

/// Reads the argument starting at `at` (not whitespace); returns it and the offset after it.
fn split_one(line: &[u8], mut at: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut arg = Vec::new();
    let mut quote = Quote::None;
    loop {
        let Some(&byte) = line.get(at) else {
            // End of line: fine unquoted, unbalanced inside a quote.
            return match quote {
                Quote::None => Ok((arg, at)),
                Quote::Double | Quote::Single => Err(ProtocolError::UnbalancedQuotes),
            };
        };
        match quote {
            Quote::None => match byte {
                b' ' | b'\n' | b'\r' | b'\t' => return Ok((arg, at + 1)),
                b'"' => quote = Quote::Double,
                b'\'' => quote = Quote::Single,
                _ => arg.push(byte),
            },
            Quote::Double => {
                if byte == b'\\' {
                    if let Some(value) = hex_escape(line, at) {
                        arg.push(value);
                        at += 4;
                        continue;
                    }
                    if let Some(&escaped) = line.get(at + 1) {
                        arg.push(match escaped {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                        at += 2;
                        continue;
                    }
                    // A backslash at the very end is literal; the quote is then unbalanced.
                    arg.push(byte);
                } else if byte == b'"' {
                    return close_quote(line, at).map(|next| (arg, next));
                } else {
                    arg.push(byte);
                }
            }
            Quote::Single => {
                if byte == b'\\' && line.get(at + 1) == Some(&b'\'') {
                    arg.push(b'\'');
                    at += 2;
                    continue;
                } else if byte == b'\'' {
                    return close_quote(line, at).map(|next| (arg, next));
                } else {
                    arg.push(byte);
                }
            }
        }
        at += 1;
    }
}

/// Checks what follows the closing quote at `at`; returns the offset after the quote.
fn close_quote(line: &[u8], at: usize) -> Result<usize, ProtocolError> {
    match line.get(at + 1) {
        Some(&next) if !is_c_space(next) => Err(ProtocolError::UnbalancedQuotes),
        _ => Ok(at + 1),
    }
}

/// The byte of a `\xHH` escape starting at `at`, if there is one.
fn hex_escape(line: &[u8], at: usize) -> Option<u8> {
    if line.get(at + 1) != Some(&b'x') {
        return None;
    }
    let high = hex_value(*line.get(at + 2)?)?;
    let low = hex_value(*line.get(at + 3)?)?;
    Some(high << 4 | low)
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// C's `isspace` in the "C" locale.
fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Result<Vec<String>, ProtocolError> {
        split_inline(line.as_bytes()).map(|args| {
            args.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
    }

    #[test]
    fn plain_words_split_on_runs_of_whitespace() {
        assert_eq!(
            split("  SET\t key  value ").unwrap(),
            ["SET", "key", "value"]
        );
        assert!(split("").unwrap().is_empty());
        assert!(split(" \t\x0b\x0c ").unwrap().is_empty());
    }

    #[test]
    fn double_quotes_understand_escapes() {
        assert_eq!(
            split(r#"SET k "a b\n\r\t\x41\x7a\"\\\q""#).unwrap(),
            ["SET", "k", "a b\n\r\tAz\"\\q"]
        );
        assert_eq!(
            split_inline(br#""\b\a\x00""#).unwrap(),
            [Bytes::from_static(b"\x08\x07\x00")]
        );
        // An incomplete hex escape falls back to "backslash before any byte".
        assert_eq!(split(r#""\xZ1""#).unwrap(), ["xZ1"]);
    }

    #[test]
    fn single_quotes_only_escape_the_quote() {
        assert_eq!(split(r"'a\'b\n' c").unwrap(), [r"a'b\n", "c"]);
    }

    #[test]
    fn quotes_may_start_inside_an_argument() {
        assert_eq!(
            split(r#"a"b c"'d'"#).unwrap_err(),
            ProtocolError::UnbalancedQuotes
        );
        assert_eq!(split(r#"a"b c" d"#).unwrap(), ["ab c", "d"]);
        assert_eq!(split(r#""" ''"#).unwrap(), ["", ""]);
    }

    #[test]
    fn unbalanced_quotes_are_refused() {
        for line in [r#""abc"#, "'abc", r#""a"b"#, "'a'b", r#""abc\"#, r#""a\""#] {
            assert_eq!(
                split(line).unwrap_err(),
                ProtocolError::UnbalancedQuotes,
                "{line}"
            );
        }
    }

    #[test]
    fn a_nul_byte_ends_the_line() {
        assert_eq!(split("GET k\0ignored").unwrap(), ["GET", "k"]);
        assert_eq!(
            split("GET \"k\0\"").unwrap_err(),
            ProtocolError::UnbalancedQuotes
        );
    }

    #[test]
    fn closing_quote_may_be_followed_by_any_c_space() {
        assert_eq!(split("\"a\"\x0bb").unwrap(), ["a", "b"]);
    }
}
