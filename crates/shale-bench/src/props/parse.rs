//! The Java-properties file syntax, as YCSB workload files use it.
//!
//! Supported: `#` and `!` comment lines, `key=value`, `key: value` and `key value`, white space
//! around keys and values, a trailing backslash that continues a logical line onto the next, and
//! the escapes `\t \n \r \f \\ \= \: \# \! \uXXXX` and `\ ` (space). Values are trimmed at both
//! ends (YCSB-cpp trims; Java keeps trailing blanks, which only ever hides mistakes).

use crate::error::{Error, Result};

/// Parses `text` (named `source` in errors) into `(line, key, value)` triples in file order,
/// where `line` is the 1-based line on which the logical line starts.
///
/// # Errors
/// `Property` for a malformed `\u` escape or an empty key.
pub fn parse_java_properties(text: &str, source: &str) -> Result<Vec<(usize, String, String)>> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((index, raw)) = lines.next() {
        let start_line = index + 1;
        let first = raw.trim_start();
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::from(first);
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key, source, start_line)?;
        let value = unescape(value, source, start_line)?;
        let key = key.trim().to_string();
        if key.is_empty() {
            return Err(Error::property(format!(
                "{source}:{start_line}: a property with an empty name"
            )));
        }
        out.push((start_line, key, value.trim().to_string()));
    }
    Ok(out)
}

/// A logical line continues when it ends in an odd number of backslashes.
fn ends_with_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or white space (white space around `=`/`:` belongs to
/// the separator).
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' => return (&line[..i], &line[i + 1..]),
            b' ' | b'\t' | b'\x0c' => {
                let rest = line[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                return (&line[..i], rest);
            }
            _ => i += 1,
        }
    }
    (line, "")
}

fn unescape(s: &str, source: &str, line: usize) -> Result<String> {
    if !s.contains('\\') {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .and_then(char::from_u32)
                    .ok_or_else(|| {
                        Error::property(format!("{source}:{line}: malformed \\u escape '\\u{hex}'"))
                    })?;
                out.push(code);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}
