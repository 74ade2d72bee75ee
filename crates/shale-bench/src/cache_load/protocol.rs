//! The load generator's side of the three cache protocols: request encoders and incremental
//! reply parsers that count hits and misses.

use bytes::BytesMut;
use shale_proto::megakv::{BatchEncoder, REPLY_NOT_FOUND, REPLY_VALUE};

/// Which protocol a load speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// The memcached text protocol.
    Memcache,
    /// RESP.
    Resp,
    /// Mega-KV's binary protocol over TCP: each pipeline of requests is one Mega-KV batch.
    MegaKv,
}

impl Wire {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Memcache => "memcache",
            Wire::Resp => "resp",
            Wire::MegaKv => "megakv",
        }
    }
}

/// What a reply said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A GET found a value of this length.
    Hit(usize),
    /// A GET found nothing.
    Miss,
    /// A SET was stored.
    Stored,
    /// Anything else (an error reply).
    Error,
}

/// Appends one pipeline of requests: each `(is_get, key index)` of `ops`, keys written by
/// `key_of`, values `value`. Mega-KV sends the pipeline as one batch.
pub fn encode(
    wire: Wire,
    ops: &[(bool, u32)],
    mut key_of: impl FnMut(u32, &mut [u8]) -> usize,
    value: &[u8],
    out: &mut BytesMut,
) {
    let mut key_buf = [0u8; 256];
    match wire {
        Wire::MegaKv => {
            let mut encoder = BatchEncoder::new(out);
            for &(get, index) in ops {
                let len = key_of(index, &mut key_buf);
                let key = &key_buf[..len];
                // Keys and values of the workloads fit their length fields.
                let _ = if get {
                    encoder.get(key)
                } else {
                    encoder.set(key, value)
                };
            }
            encoder.finish();
        }
        Wire::Memcache => {
            for &(get, index) in ops {
                let len = key_of(index, &mut key_buf);
                let key = &key_buf[..len];
                if get {
                    out.extend_from_slice(b"get ");
                    out.extend_from_slice(key);
                    out.extend_from_slice(b"\r\n");
                } else {
                    out.extend_from_slice(b"set ");
                    out.extend_from_slice(key);
                    out.extend_from_slice(b" 0 0 ");
                    push_decimal(out, value.len());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(value);
                    out.extend_from_slice(b"\r\n");
                }
            }
        }
        Wire::Resp => {
            for &(get, index) in ops {
                let len = key_of(index, &mut key_buf);
                let key = &key_buf[..len];
                out.extend_from_slice(if get {
                    b"*2\r\n$3\r\nGET\r\n$"
                } else {
                    b"*3\r\n$3\r\nSET\r\n$"
                });
                push_decimal(out, key.len());
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(key);
                out.extend_from_slice(b"\r\n");
                if !get {
                    out.extend_from_slice(b"$");
                    push_decimal(out, value.len());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(value);
                    out.extend_from_slice(b"\r\n");
                }
            }
        }
    }
}

fn push_decimal(out: &mut BytesMut, mut n: usize) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

/// Writes the key with index `i` into `out`: `k` and zero-padded digits, `len` bytes (at least
/// the digits); returns its length.
pub fn write_key(i: u32, len: usize, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut v = i;
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let digits = &digits[at..];
    let len = len.max(1 + digits.len()).min(out.len());
    // Keys too short for all the digits keep the last ones.
    let digits = &digits[digits.len().saturating_sub(len - 1)..];
    out[0] = b'k';
    let pad_end = len - digits.len();
    out[1..pad_end].fill(b'0');
    out[pad_end..len].copy_from_slice(digits);
    len
}

/// Parses the reply to a request of kind `get` at the front of `buf`: the answer and the bytes it
/// took, or `None` if it has not fully arrived. Mega-KV answers only GETs: a SET takes no bytes.
pub fn parse(wire: Wire, get: bool, buf: &[u8]) -> Option<(Answer, usize)> {
    match wire {
        Wire::Memcache => {
            if get {
                if buf.starts_with(b"END\r\n") {
                    return Some((Answer::Miss, 5));
                }
                let line_end = memchr::memchr(b'\n', buf)? + 1;
                let line = &buf[..line_end - 2];
                if !line.starts_with(b"VALUE ") {
                    return Some((Answer::Error, line_end));
                }
                let len: usize = std::str::from_utf8(line.rsplit(|&b| b == b' ').next()?)
                    .ok()?
                    .parse()
                    .ok()?;
                let total = line_end + len + 2 + 5;
                (buf.len() >= total).then_some((Answer::Hit(len), total))
            } else {
                let line_end = memchr::memchr(b'\n', buf)? + 1;
                let answer = if buf.starts_with(b"STORED\r\n") {
                    Answer::Stored
                } else {
                    Answer::Error
                };
                Some((answer, line_end))
            }
        }
        Wire::Resp => {
            let line_end = memchr::memchr(b'\n', buf)? + 1;
            match buf.first()? {
                b'+' => Some((Answer::Stored, line_end)),
                b'$' if buf.starts_with(b"$-1\r\n") => Some((Answer::Miss, line_end)),
                b'$' => {
                    let len: usize = std::str::from_utf8(&buf[1..line_end - 2])
                        .ok()?
                        .parse()
                        .ok()?;
                    let total = line_end + len + 2;
                    (buf.len() >= total).then_some((Answer::Hit(len), total))
                }
                _ => Some((Answer::Error, line_end)),
            }
        }
        Wire::MegaKv => {
            if !get {
                return Some((Answer::Stored, 0));
            }
            match *buf.first()? {
                REPLY_NOT_FOUND => Some((Answer::Miss, 1)),
                _ => {
                    let tag = u16::from_le_bytes(buf.get(..2)?.try_into().ok()?);
                    if tag != REPLY_VALUE {
                        return Some((Answer::Error, buf.len()));
                    }
                    let len = u32::from_le_bytes(buf.get(2..6)?.try_into().ok()?) as usize;
                    (buf.len() >= 6 + len).then_some((Answer::Hit(len), 6 + len))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_whole_or_not_at_all() {
        let cases: [(Wire, bool, &[u8], Answer); 7] = [
            (
                Wire::Memcache,
                true,
                b"VALUE k 0 3\r\nabc\r\nEND\r\n",
                Answer::Hit(3),
            ),
            (Wire::Memcache, true, b"END\r\n", Answer::Miss),
            (Wire::Memcache, false, b"STORED\r\n", Answer::Stored),
            (Wire::Resp, true, b"$3\r\nabc\r\n", Answer::Hit(3)),
            (Wire::Resp, true, b"$-1\r\n", Answer::Miss),
            (Wire::Resp, false, b"+OK\r\n", Answer::Stored),
            (
                Wire::MegaKv,
                true,
                b"\x01\x00\x03\x00\x00\x00abc",
                Answer::Hit(3),
            ),
        ];
        for (wire, get, bytes, want) in cases {
            assert_eq!(
                parse(wire, get, bytes),
                Some((want, bytes.len())),
                "{wire:?} {bytes:?}"
            );
            for cut in 0..bytes.len() {
                if let Some((_, used)) = parse(wire, get, &bytes[..cut]) {
                    panic!("{wire:?}: a cut reply of {cut} bytes parsed as {used}");
                }
            }
        }
    }

    #[test]
    fn requests_encode() {
        let key = |i: u32, out: &mut [u8]| write_key(i, 4, out);
        let mut out = BytesMut::new();
        encode(
            Wire::Memcache,
            &[(true, 1), (false, 22)],
            key,
            b"vv",
            &mut out,
        );
        assert_eq!(&out[..], b"get k001\r\nset k022 0 0 2\r\nvv\r\n");
        out.clear();
        encode(Wire::Resp, &[(false, 7)], key, b"v", &mut out);
        assert_eq!(&out[..], b"*3\r\n$3\r\nSET\r\n$4\r\nk007\r\n$1\r\nv\r\n");
        let mut buf = [0u8; 8];
        let n = write_key(1234567, 8, &mut buf);
        assert_eq!(&buf[..n], b"k1234567");
        // More digits than the length allows: the key is cut to the buffer.
        let n = write_key(12345678, 8, &mut buf);
        assert_eq!(n, 8);
    }
}
