//! Request decoding: the incremental, zero-copy [`RequestDecoder`] for servers, and stateless
//! [`parse_request`] / [`parse_requests`] over plain byte slices.
//!
//! # Contract
//! - `Ok(None)` (or zero requests) means "need more bytes"; it is never an error to be short.
//! - A [`ProtocolError`] is final for the connection: reply with it and close. Requests decoded
//!   before the error in the same call are returned too and, as in Redis, should be executed and
//!   answered before the error.
//! - Empty requests (`\r\n`, `*0\r\n`, `*-1\r\n`, a blank inline line) are skipped silently, as
//!   Redis skips them.
//! - The requests decoded do not depend on how the stream was split into reads.

// Decodes bytes read from disk or the wire: a bad byte is an error, never a panic.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use bytes::{Bytes, BytesMut};

use super::scan::{scan_batch, BatchEnd, Item, Scan, Span};
use super::{Limits, ProtocolError, Request};

/// Decodes the requests a client sends, from the connection's read buffer.
///
/// Give it the same `BytesMut` on every call, appending new bytes at the back; it removes every
/// request it returns (and skipped empty ones) from the front, and remembers how far it got
/// through an incomplete one, so a large request arriving in many reads is scanned once. The
/// arguments of multibulk requests are slices of the read buffer, not copies.
///
/// If anything other than appending changes the buffer between calls, call [`Self::reset`].
#[derive(Debug)]
pub struct RequestDecoder {
    limits: Limits,
    // INVARIANT: `scan` describes the request starting at offset 0 of the caller's buffer, and
    // `spans` holds exactly that request's argument spans found so far (from index 0).
    scan: Scan,
    spans: Vec<Span>,
    items: Vec<Item>,
    needed: usize,
}

impl RequestDecoder {
    /// A decoder enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        RequestDecoder {
            limits,
            scan: Scan::new(0, 0),
            spans: Vec::new(),
            items: Vec::new(),
            needed: 1,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Switches the unauthenticated limits on or off (see [`Limits::auth_required`]); takes
    /// effect from the next header line decoded.
    pub fn set_auth_required(&mut self, required: bool) {
        self.limits.auth_required = required;
    }

    /// Forgets any partially decoded request.
    pub fn reset(&mut self) {
        self.scan = Scan::new(0, 0);
        self.spans.clear();
        self.items.clear();
        self.needed = 1;
    }

    /// After a call that returned no request: at least how many more bytes must arrive before the
    /// next request can be complete (1 when only that much is known). A server can use it to size
    /// its next read for a large argument.
    pub fn bytes_needed(&self) -> usize {
        self.needed
    }

    /// Decodes the next complete request from the front of `buf`, removing it; `Ok(None)` if no
    /// complete request is there yet.
    ///
    /// # Errors
    /// A [`ProtocolError`] if the stream is malformed or breaks a limit; the connection should
    /// be answered with it and closed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        let mut out = Vec::new();
        self.decode_up_to(buf, 1, &mut out)?;
        Ok(out.pop())
    }

    /// Decodes every complete request in `buf`, appending them to `out` in order and removing them
    /// from `buf`; returns how many were appended. This is the pipelining path: all the requests
    /// share one frozen copy of the buffer's front, so each argument costs one reference count.
    ///
    /// # Errors
    /// A [`ProtocolError`] as for [`Self::decode`]; the requests before the error have been
    /// appended to `out` all the same.
    pub fn decode_all(
        &mut self,
        buf: &mut BytesMut,
        out: &mut Vec<Request>,
    ) -> Result<usize, ProtocolError> {
        self.decode_up_to(buf, usize::MAX, out)
    }

    fn decode_up_to(
        &mut self,
        buf: &mut BytesMut,
        max: usize,
        out: &mut Vec<Request>,
    ) -> Result<usize, ProtocolError> {
        self.items.clear();
        let end = scan_batch(
            buf,
            &self.limits,
            &mut self.scan,
            &mut self.spans,
            &mut self.items,
            max,
        );
        let complete_spans = self.scan.spans_from();
        let count = self.items.len();
        if end.consumed > 0 {
            let source = buf.split_to(end.consumed).freeze();
            materialize(&source, &self.spans, self.items.drain(..), out);
            self.spans.drain(..complete_spans);
            for span in &mut self.spans {
                span.0 = span.0.saturating_sub(end.consumed);
                span.1 = span.1.saturating_sub(end.consumed);
            }
            self.scan.rebase(end.consumed, complete_spans);
        }
        self.finish(end, count)
    }

    fn finish(&mut self, end: BatchEnd, count: usize) -> Result<usize, ProtocolError> {
        match end.error {
            Some(error) => {
                self.reset();
                Err(error)
            }
            None => {
                self.needed = end.needed.max(1);
                Ok(count)
            }
        }
    }
}

impl Default for RequestDecoder {
    /// A decoder with [`Limits::default`].
    fn default() -> Self {
        RequestDecoder::new(Limits::default())
    }
}

/// Parses the first complete request in `buf`, skipping empty requests before it. Returns the
/// request and the number of bytes it (and the skipped ones) took, or `Ok(None)` if `buf` holds
/// no complete request yet. The arguments are copied out of `buf` (one allocation per request).
///
/// # Errors
/// A [`ProtocolError`] if `buf` starts with a malformed request or one that breaks `limits`.
pub fn parse_request(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(Request, usize)>, ProtocolError> {
    let mut out = Vec::new();
    let consumed = parse_up_to(buf, limits, 1, &mut out)?;
    Ok(out.pop().map(|request| (request, consumed)))
}

/// Parses every complete request in `buf`, appending them to `out`; returns the number of bytes
/// they took (the rest is an incomplete request or nothing). All the requests share one copy of
/// those bytes.
///
/// # Errors
/// A [`ProtocolError`] as for [`parse_request`]; the requests before it are in `out` all the same.
pub fn parse_requests(
    buf: &[u8],
    limits: &Limits,
    out: &mut Vec<Request>,
) -> Result<usize, ProtocolError> {
    parse_up_to(buf, limits, usize::MAX, out)
}

fn parse_up_to(
    buf: &[u8],
    limits: &Limits,
    max: usize,
    out: &mut Vec<Request>,
) -> Result<usize, ProtocolError> {
    let mut scan = Scan::new(0, 0);
    let mut spans = Vec::new();
    let mut items = Vec::new();
    let end = scan_batch(buf, limits, &mut scan, &mut spans, &mut items, max);
    if !items.is_empty() {
        let source = Bytes::copy_from_slice(buf.get(..end.consumed).unwrap_or_default());
        materialize(&source, &spans, items.drain(..), out);
    }
    match end.error {
        Some(error) => Err(error),
        None => Ok(end.consumed),
    }
}

/// Turns scanned items into requests whose multibulk arguments are slices of `source`, which
/// holds the scanned buffer from offset 0.
fn materialize(
    source: &Bytes,
    spans: &[Span],
    items: impl Iterator<Item = Item>,
    out: &mut Vec<Request>,
) {
    for item in items {
        let argv = match item {
            Item::Inline(argv) => argv,
            Item::Multibulk(range) => {
                let spans = spans.get(range).unwrap_or_default();
                let mut argv = Vec::with_capacity(spans.len());
                argv.extend(spans.iter().map(|&(start, end)| source.slice(start..end)));
                argv
            }
        };
        // Scanned requests are never empty: empty ones are skipped as `Step::Empty`.
        if let Some(request) = Request::new(argv) {
            out.push(request);
        }
    }
}
