//! Decimal integers as RESP writes them: a strict parser and allocation-free formatters.
//!
//! The parser accepts exactly the integers Redis's `string2ll` accepts, so a length line that Redis
//! refuses is refused here too: an optional `-`, then digits, no `+`, no spaces, no leading zeros
//! (`0` itself is fine, `-0` is not), and the value must fit in an `i64`.

// The parser decodes bytes from the wire: a bad byte is `None`, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

/// Most digits an `i64` has, not counting the sign (`9223372036854775807`).
const I64_MAX_DIGITS: usize = 19;

/// Longest decimal form of a `u128`, used for lengths computed by multiplication.
const U128_MAX_DIGITS: usize = 39;

/// Parses `text` as a strict decimal `i64`; `None` if it is not one.
pub(crate) fn parse_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some(_) => (false, text),
        None => return None,
    };
    let (&first, _) = digits.split_first()?;
    if digits.len() > I64_MAX_DIGITS {
        // Longer than any i64 could be; also bounds the loop below.
        return None;
    }
    if first == b'0' {
        // "0" is the only number allowed to start with a zero, and only unsigned.
        return if digits.len() == 1 && !negative {
            Some(0)
        } else {
            None
        };
    }
    // Accumulate as a negative number so i64::MIN parses without overflow.
    let mut value: i64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(digit))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// A decimal number formatted into a stack buffer.
pub(crate) struct Decimal {
    buf: [u8; U128_MAX_DIGITS + 1],
    start: usize,
}

// An encoder into its own buffer, sized for the longest value: every index is in bounds.
#[allow(clippy::indexing_slicing)]
impl Decimal {
    /// Formats an unsigned value.
    pub(crate) fn unsigned(value: u128) -> Self {
        let mut out = Decimal {
            buf: [0; U128_MAX_DIGITS + 1],
            start: U128_MAX_DIGITS + 1,
        };
        out.push_digits(value);
        out
    }

    /// Formats a signed value.
    pub(crate) fn signed(value: i64) -> Self {
        let mut out = Decimal::unsigned(u128::from(value.unsigned_abs()));
        if value < 0 {
            out.start -= 1;
            out.buf[out.start] = b'-';
        }
        out
    }

    fn push_digits(&mut self, mut value: u128) {
        loop {
            self.start -= 1;
            // `value % 10` is below 10, so the cast cannot truncate.
            self.buf[self.start] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
    }

    /// The formatted digits.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_what_string2ll_accepts() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"7"), Some(7));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn parse_refuses_what_string2ll_refuses() {
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"-01",
            b"1x",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999999",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn decimal_formats_extremes() {
        assert_eq!(Decimal::signed(0).as_bytes(), b"0");
        assert_eq!(
            Decimal::signed(i64::MIN).as_bytes(),
            b"-9223372036854775808"
        );
        assert_eq!(Decimal::signed(i64::MAX).as_bytes(), b"9223372036854775807");
        assert_eq!(
            Decimal::unsigned(u128::MAX).as_bytes(),
            u128::MAX.to_string().as_bytes()
        );
    }

    proptest::proptest! {
        #[test]
        fn decimal_then_parse_round_trips(v in proptest::num::i64::ANY) {
            proptest::prop_assert_eq!(parse_i64(Decimal::signed(v).as_bytes()), Some(v));
        }

        #[test]
        fn parse_agrees_with_std_on_canonical_forms(v in proptest::num::i64::ANY) {
            proptest::prop_assert_eq!(parse_i64(v.to_string().as_bytes()), Some(v));
        }
    }
}
