//! A client's request: a command name and its arguments, and the encoder clients use to send one.

use bytes::{BufMut, Bytes, BytesMut};

use super::format::{ARRAY, BULK_STRING, CRLF};
use super::int::Decimal;

/// One command as a client sent it: `argv[0]` is the command name, the rest its arguments.
///
/// Arguments are [`Bytes`]: when decoded by [`super::RequestDecoder`] they share the read buffer
/// instead of copying it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    // INVARIANT: never empty; a request without arguments is not a request (Redis skips it).
    argv: Vec<Bytes>,
}

impl Request {
    /// A request from its argument vector; `None` if `argv` is empty.
    pub fn new(argv: Vec<Bytes>) -> Option<Self> {
        if argv.is_empty() {
            None
        } else {
            Some(Request { argv })
        }
    }

    /// The command name as sent (any letter case).
    pub fn name(&self) -> &Bytes {
        // INVARIANT above: argv is never empty.
        &self.argv[0]
    }

    /// The arguments after the command name.
    pub fn args(&self) -> &[Bytes] {
        &self.argv[1..]
    }

    /// The command name followed by its arguments.
    pub fn argv(&self) -> &[Bytes] {
        &self.argv
    }

    /// Takes the argument vector, command name first.
    pub fn into_argv(self) -> Vec<Bytes> {
        self.argv
    }

    /// Whether the command name equals `name`, ignoring ASCII letter case (as Redis does).
    pub fn is(&self, name: &str) -> bool {
        self.name().eq_ignore_ascii_case(name.as_bytes())
    }

    /// Appends this request to `out` as a RESP multibulk array.
    pub fn encode(&self, out: &mut BytesMut) {
        encode_command(out, &self.argv);
    }
}

/// Appends one command to `out` as a RESP multibulk array of bulk strings, the form every Redis
/// client sends: `*<n>\r\n` then `$<len>\r\n<arg>\r\n` per argument. Reserves the exact size first,
/// so it allocates at most once.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut BytesMut, argv: &[A]) {
    let count = Decimal::unsigned(argv.len() as u128);
    let mut size = 1 + count.as_bytes().len() + CRLF.len();
    for arg in argv {
        let len = arg.as_ref().len();
        size = size
            .saturating_add(1 + Decimal::unsigned(len as u128).as_bytes().len() + 2 * CRLF.len())
            .saturating_add(len);
    }
    out.reserve(size);
    out.put_u8(ARRAY);
    out.put_slice(count.as_bytes());
    out.put_slice(CRLF);
    for arg in argv {
        let arg = arg.as_ref();
        out.put_u8(BULK_STRING);
        out.put_slice(Decimal::unsigned(arg.len() as u128).as_bytes());
        out.put_slice(CRLF);
        out.put_slice(arg);
        out.put_slice(CRLF);
    }
}
