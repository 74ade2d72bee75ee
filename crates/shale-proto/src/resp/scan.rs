//! The request scanner: finds where each request in a buffer ends and where its arguments are,
//! without copying or allocating per argument.
//!
//! # Invariants
//! - A [`Scan`] describes the request starting at `Scan::start` of the buffer it is run on. Its
//!   offsets stay valid while the caller only appends to that buffer; when the caller drops a
//!   prefix of `n` bytes it calls [`Scan::rebase`] with `n` (and rebases the spans it keeps).
//! - Everything between `start` and `cursor` has been validated. A request that arrives in pieces
//!   is therefore scanned once in total, not once per piece, and a header line that trickles in
//!   byte by byte is searched once (`line_scan` remembers how far the search got).
//! - The outcome never depends on how the bytes were split into reads: every limit is decided on
//!   bytes that every split would also have seen by then (tested in `tests/resp_requests.rs`).

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::ops::Range;

use bytes::Bytes;

use super::format::{ARRAY, BULK_STRING, CR, CRLF, LF};
use super::inline::split_inline;
use super::int::parse_i64;
use super::limits::{
    ARGV_PREALLOC_MAX, UNAUTHENTICATED_MAX_BULK_LEN, UNAUTHENTICATED_MAX_MULTIBULK_LEN,
};
use super::{Limits, ProtocolError};

/// Byte range `[start, end)` of one argument in the scanned buffer.
pub(crate) type Span = (usize, usize);

/// Progress through the request that starts at `start`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scan {
    /// Offset of the request's first byte.
    start: usize,
    /// Offset of the first byte not yet validated.
    cursor: usize,
    /// Offset where the search for the current line's terminator resumes (>= `cursor`).
    line_scan: usize,
    /// Arguments still expected; `None` until a multibulk count line has been parsed.
    remaining: Option<usize>,
    /// Length of the argument whose `$<len>` line has been parsed but whose data has not.
    bulk_len: Option<usize>,
    /// Index in the caller's span list where this request's argument spans begin.
    spans_from: usize,
}

/// A complete request found by [`scan_batch`].
#[derive(Debug)]
pub(crate) enum Item {
    /// A multibulk request; its arguments are these indexes into the span list.
    Multibulk(Range<usize>),
    /// An inline request, already split (inline arguments may contain escapes, so they are copied).
    Inline(Vec<Bytes>),
}

/// What [`scan_batch`] found.
#[derive(Debug)]
pub(crate) struct BatchEnd {
    /// End of the last complete request, or of the empty requests after it: this prefix of the
    /// buffer is fully accounted for by the items.
    pub(crate) consumed: usize,
    /// The error that stopped the scan, if one did; the items before it are still valid.
    pub(crate) error: Option<ProtocolError>,
    /// When the scan stopped for lack of bytes: how many more are needed at least (>= 1).
    pub(crate) needed: usize,
}

/// How one request ended.
enum Step {
    Multibulk { end: usize },
    Inline { end: usize, argv: Vec<Bytes> },
    Empty { end: usize },
    Incomplete { needed: usize },
}

impl Scan {
    /// Progress for a request that starts at `start`, whose spans will be pushed from index
    /// `spans_from` on.
    pub(crate) fn new(start: usize, spans_from: usize) -> Self {
        Scan {
            start,
            cursor: start,
            line_scan: start,
            spans_from,
            ..Scan::default()
        }
    }

    /// Shifts every offset down by `consumed` bytes, which the caller has dropped from the front
    /// of the buffer, and the span index down by `spans_dropped`.
    pub(crate) fn rebase(&mut self, consumed: usize, spans_dropped: usize) {
        self.start = self.start.saturating_sub(consumed);
        self.cursor = self.cursor.saturating_sub(consumed);
        self.line_scan = self.line_scan.saturating_sub(consumed);
        self.spans_from = self.spans_from.saturating_sub(spans_dropped);
    }

    /// Index in the span list where the request in progress begins.
    pub(crate) fn spans_from(&self) -> usize {
        self.spans_from
    }

    fn restart(&mut self, start: usize, spans_from: usize) {
        *self = Scan::new(start, spans_from);
    }
}

/// Scans up to `max_items` complete requests from `scan`'s position on, appending their argument
/// spans to `spans` and the requests to `items`. On return, `scan` describes the request after
/// the last complete one.
pub(crate) fn scan_batch(
    buf: &[u8],
    limits: &Limits,
    scan: &mut Scan,
    spans: &mut Vec<Span>,
    items: &mut Vec<Item>,
    max_items: usize,
) -> BatchEnd {
    let mut found = 0;
    let mut consumed = scan.start;
    while found < max_items {
        match step(buf, limits, scan, spans) {
            Ok(Step::Multibulk { end }) => {
                items.push(Item::Multibulk(scan.spans_from..spans.len()));
                found += 1;
                consumed = end;
                scan.restart(end, spans.len());
            }
            Ok(Step::Inline { end, argv }) => {
                items.push(Item::Inline(argv));
                found += 1;
                consumed = end;
                scan.restart(end, spans.len());
            }
            Ok(Step::Empty { end }) => {
                consumed = end;
                scan.restart(end, spans.len());
            }
            Ok(Step::Incomplete { needed }) => {
                return BatchEnd {
                    consumed,
                    error: None,
                    needed,
                }
            }
            Err(error) => {
                // Drop the spans of the request that failed; the items before it stand.
                spans.truncate(scan.spans_from);
                return BatchEnd {
                    consumed,
                    error: Some(error),
                    needed: 0,
                };
            }
        }
    }
    BatchEnd {
        consumed,
        error: None,
        needed: 0,
    }
}

/// Advances `scan` through one request.
fn step(
    buf: &[u8],
    limits: &Limits,
    scan: &mut Scan,
    spans: &mut Vec<Span>,
) -> Result<Step, ProtocolError> {
    match buf.get(scan.start) {
        None => Ok(Step::Incomplete { needed: 1 }),
        Some(&ARRAY) => step_multibulk(buf, limits, scan, spans),
        Some(_) => step_inline(buf, limits, scan),
    }
}

/// An inline request: one line ending in `\n` (a `\r` before it is dropped).
fn step_inline(buf: &[u8], limits: &Limits, scan: &mut Scan) -> Result<Step, ProtocolError> {
    let from = scan.start;
    // Room for the line, plus the `\r` that may precede the `\n`.
    let max_with_cr = limits.max_inline_len.saturating_add(1);
    let lf = match find_line_end(buf, from, &mut scan.line_scan, LF, max_with_cr) {
        Ok(Some(lf)) => lf,
        Ok(None) => return Ok(Step::Incomplete { needed: 1 }),
        Err(LineTooLong) => return Err(ProtocolError::TooBigInlineRequest),
    };
    let line_end = if lf > from && buf.get(lf - 1) == Some(&CR) {
        lf - 1
    } else {
        lf
    };
    if line_end - from > limits.max_inline_len {
        return Err(ProtocolError::TooBigInlineRequest);
    }
    let argv = split_inline(buf.get(from..line_end).unwrap_or_default())?;
    let end = lf + 1;
    if argv.is_empty() {
        Ok(Step::Empty { end })
    } else {
        Ok(Step::Inline { end, argv })
    }
}

/// A multibulk request: `*<count>\r\n` then `count` times `$<len>\r\n<data>\r\n`.
fn step_multibulk(
    buf: &[u8],
    limits: &Limits,
    scan: &mut Scan,
    spans: &mut Vec<Span>,
) -> Result<Step, ProtocolError> {
    if scan.remaining.is_none() {
        let Some((digits, next)) = header_line(buf, limits, scan)
            .map_err(|LineTooLong| ProtocolError::TooBigMbulkCountString)?
        else {
            return Ok(Step::Incomplete { needed: 1 });
        };
        let count = digits.ok_or(ProtocolError::InvalidMultibulkLength)?;
        if count > 0 && usize::try_from(count).map_or(true, |n| n > limits.max_multibulk_len) {
            return Err(ProtocolError::InvalidMultibulkLength);
        }
        if limits.auth_required && count > UNAUTHENTICATED_MAX_MULTIBULK_LEN as i64 {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        scan.cursor = next;
        scan.line_scan = next;
        check_request_len(limits, scan.start, next)?;
        // Redis treats a count of zero or less as an empty request and moves on.
        let Ok(count @ 1..) = usize::try_from(count) else {
            return Ok(Step::Empty { end: next });
        };
        scan.remaining = Some(count);
        spans.reserve(count.min(ARGV_PREALLOC_MAX));
    }

    while let Some(remaining @ 1..) = scan.remaining {
        let len = match scan.bulk_len {
            Some(len) => len,
            None => {
                let Some(first) = buf.get(scan.cursor).copied() else {
                    return Ok(Step::Incomplete { needed: 1 });
                };
                let Some((digits, next)) = header_line(buf, limits, scan)
                    .map_err(|LineTooLong| ProtocolError::TooBigBulkCountString)?
                else {
                    return Ok(Step::Incomplete { needed: 1 });
                };
                if first != BULK_STRING {
                    return Err(ProtocolError::ExpectedDollar(first));
                }
                let len = digits
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n <= limits.max_bulk_len)
                    .ok_or(ProtocolError::InvalidBulkLength)?;
                if limits.auth_required && len > UNAUTHENTICATED_MAX_BULK_LEN {
                    return Err(ProtocolError::UnauthenticatedBulkLength);
                }
                scan.cursor = next;
                scan.line_scan = next;
                scan.bulk_len = Some(len);
                len
            }
        };
        let too_big = ProtocolError::RequestTooBig {
            limit: limits.max_request_len,
        };
        let data_end = scan
            .cursor
            .checked_add(len)
            .ok_or_else(|| too_big.clone())?;
        let arg_end = data_end.checked_add(CRLF.len()).ok_or(too_big)?;
        check_request_len(limits, scan.start, arg_end)?;
        let Some(terminator) = buf.get(data_end..arg_end) else {
            let needed = arg_end.saturating_sub(buf.len()).max(1);
            return Ok(Step::Incomplete { needed });
        };
        if terminator != CRLF {
            return Err(ProtocolError::BulkNotTerminated);
        }
        spans.push((scan.cursor, data_end));
        scan.cursor = arg_end;
        scan.line_scan = arg_end;
        scan.bulk_len = None;
        scan.remaining = Some(remaining - 1);
    }
    Ok(Step::Multibulk { end: scan.cursor })
}

/// Reads the header line at `scan.cursor` (a type byte, digits, `\r\n`). Returns `None` while the
/// line is incomplete, else the parsed number (`None` if the digits, or the `\n` after the `\r`,
/// are malformed) and the offset after the line.
#[allow(clippy::type_complexity)]
fn header_line(
    buf: &[u8],
    limits: &Limits,
    scan: &mut Scan,
) -> Result<Option<(Option<i64>, usize)>, LineTooLong> {
    let from = scan.cursor;
    let Some(cr) = find_line_end(buf, from, &mut scan.line_scan, CR, limits.max_inline_len)? else {
        return Ok(None);
    };
    // Like Redis, wait until the byte after the `\r` is there; unlike Redis, insist it is `\n`.
    let Some(&after_cr) = buf.get(cr + 1) else {
        return Ok(None);
    };
    let digits = buf
        .get(from + 1..cr)
        .and_then(parse_i64)
        .filter(|_| after_cr == LF);
    Ok(Some((digits, cr + 2)))
}

/// A line is known to be longer than its limit.
struct LineTooLong;

/// Finds the first `terminator` at or after `from`, searching only the first `max + 1` bytes of
/// the line (a terminator there leaves at most `max` bytes before it). `Ok(None)` means not yet
/// there; [`LineTooLong`] means those bytes have all arrived without one. `resume` remembers how
/// far an unsuccessful search got.
fn find_line_end(
    buf: &[u8],
    from: usize,
    resume: &mut usize,
    terminator: u8,
    max: usize,
) -> Result<Option<usize>, LineTooLong> {
    let window_end = buf.len().min(from.saturating_add(max).saturating_add(1));
    let search_from = (*resume).max(from);
    if let Some(window) = buf.get(search_from..window_end) {
        if let Some(found) = memchr::memchr(terminator, window) {
            return Ok(Some(search_from + found));
        }
    }
    *resume = search_from.max(window_end);
    if buf.len().saturating_sub(from) > max {
        Err(LineTooLong)
    } else {
        Ok(None)
    }
}

/// Fails once a request that started at `start` reaches past `end` beyond the request limit.
fn check_request_len(limits: &Limits, start: usize, end: usize) -> Result<(), ProtocolError> {
    if end.saturating_sub(start) > limits.max_request_len {
        Err(ProtocolError::RequestTooBig {
            limit: limits.max_request_len,
        })
    } else {
        Ok(())
    }
}
