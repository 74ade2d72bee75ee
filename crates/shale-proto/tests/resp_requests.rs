//! Request decoding: round trips, pipelining, split reads, Redis's exact errors, limits, and
//! robustness on arbitrary bytes.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use shale_proto::resp::{
    encode_command, parse_request, parse_requests, Limits, ProtocolError, Request, RequestDecoder,
    DEFAULT_MAX_BULK_LEN, DEFAULT_MAX_INLINE_LEN,
};

fn argv(args: &[&[u8]]) -> Vec<Bytes> {
    args.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

fn request(args: &[&[u8]]) -> Request {
    Request::new(argv(args)).expect("non-empty")
}

fn encoded(argvs: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for argv in argvs {
        encode_command(&mut out, argv);
    }
    out.to_vec()
}

fn to_requests(argvs: &[Vec<Vec<u8>>]) -> Vec<Request> {
    argvs
        .iter()
        .map(|a| Request::new(a.iter().map(|x| Bytes::copy_from_slice(x)).collect()).unwrap())
        .collect()
}

/// Everything a decoder makes of `chunks` fed one after the other: the requests, then the error
/// that stopped it (if any).
fn decode_chunks(chunks: &[&[u8]], limits: &Limits) -> (Vec<Request>, Option<ProtocolError>) {
    let mut decoder = RequestDecoder::new(limits.clone());
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        if let Err(error) = decoder.decode_all(&mut buf, &mut out) {
            return (out, Some(error));
        }
    }
    (out, None)
}

/// The reply a server sends for `input`'s protocol error.
fn error_reply(input: &[u8], limits: &Limits) -> String {
    let mut decoder = RequestDecoder::new(limits.clone());
    let mut buf = BytesMut::from(input);
    let error = decoder
        .decode_all(&mut buf, &mut Vec::new())
        .expect_err("a protocol error");
    let mut out = BytesMut::new();
    error.write_reply(&mut out);
    String::from_utf8(out.to_vec()).unwrap()
}

fn arb_argv() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..48), 1..6)
}

/// A request stream in every form a client may send: multibulk, inline, empty requests.
fn arb_stream() -> impl Strategy<Value = (Vec<u8>, Vec<Request>)> {
    let word = "[a-zA-Z0-9_:.-]{1,8}";
    let piece = prop_oneof![
        arb_argv().prop_map(|a| {
            let requests = to_requests(std::slice::from_ref(&a));
            (encoded(&[a]), requests)
        }),
        (prop::collection::vec(word, 1..4), prop::bool::ANY).prop_map(|(words, crlf)| {
            let mut line = words.join(" ").into_bytes();
            line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            let request = Request::new(words.iter().map(|w| Bytes::from(w.clone())).collect());
            (line, request.into_iter().collect())
        }),
        prop::sample::select(vec![&b"\r\n"[..], b"*0\r\n", b"*-1\r\n", b"  \n"])
            .prop_map(|empty| (empty.to_vec(), Vec::<Request>::new())),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|pieces| {
        let mut bytes = Vec::new();
        let mut requests = Vec::new();
        for (b, r) in pieces {
            bytes.extend_from_slice(&b);
            requests.extend(r);
        }
        (bytes, requests)
    })
}

/// Bytes that look enough like RESP to reach deep into the parser.
fn arb_protocolish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"*".to_vec()),
        Just(b"$".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"1".to_vec()),
        Just(b"2".to_vec()),
        Just(b"3".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"0".to_vec()),
        Just(b"99".to_vec()),
        Just(b"SET".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"'".to_vec()),
        Just(b"\\x4".to_vec()),
        Just(b"\0".to_vec()),
        prop::collection::vec(any::<u8>(), 1..4),
    ];
    prop::collection::vec(token, 0..40).prop_map(|tokens| tokens.concat())
}

fn small_limits() -> Limits {
    Limits {
        max_bulk_len: 16,
        max_multibulk_len: 4,
        max_inline_len: 12,
        max_request_len: 48,
        auth_required: false,
    }
}

proptest! {
    #[test]
    fn multibulk_request_round_trips(args in arb_argv()) {
        let bytes = encoded(std::slice::from_ref(&args));
        let parsed = parse_request(&bytes, &Limits::default()).unwrap();
        prop_assert_eq!(parsed, Some((to_requests(&[args])[0].clone(), bytes.len())));
    }

    #[test]
    fn pipelined_requests_decode_in_order(argvs in prop::collection::vec(arb_argv(), 0..20)) {
        let mut buf = BytesMut::from(&encoded(&argvs)[..]);
        let mut out = Vec::new();
        let n = RequestDecoder::default().decode_all(&mut buf, &mut out).unwrap();
        prop_assert_eq!(n, argvs.len());
        prop_assert_eq!(out, to_requests(&argvs));
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn every_split_point_yields_the_same_requests((bytes, expected) in arb_stream()) {
        for split in 0..=bytes.len() {
            let (first, second) = bytes.split_at(split);
            let (requests, error) = decode_chunks(&[first, second], &Limits::default());
            prop_assert_eq!(error, None);
            prop_assert_eq!(&requests, &expected, "split at {}", split);
        }
        let mut out = Vec::new();
        let consumed = parse_requests(&bytes, &Limits::default(), &mut out).unwrap();
        prop_assert_eq!(consumed, bytes.len());
        prop_assert_eq!(out, expected);
    }

    #[test]
    fn byte_by_byte_reads_yield_the_same_requests((bytes, expected) in arb_stream()) {
        let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
        let (requests, error) = decode_chunks(&chunks, &Limits::default());
        prop_assert_eq!(error, None);
        prop_assert_eq!(requests, expected);
    }

    #[test]
    fn inline_quoted_arguments_round_trip(args in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 1..5)) {
        let mut line = b"CMD".to_vec();
        for arg in &args {
            line.extend_from_slice(b" \"");
            for &byte in arg {
                if byte.is_ascii_graphic() && byte != b'"' && byte != b'\\' || byte == b' ' {
                    line.push(byte);
                } else {
                    line.extend_from_slice(format!("\\x{byte:02x}").as_bytes());
                }
            }
            line.push(b'"');
        }
        line.extend_from_slice(b"\r\n");
        let (parsed, consumed) = parse_request(&line, &Limits::default()).unwrap().unwrap();
        prop_assert_eq!(consumed, line.len());
        prop_assert_eq!(parsed.name().as_ref(), b"CMD");
        let got: Vec<Vec<u8>> = parsed.args().iter().map(|a| a.to_vec()).collect();
        prop_assert_eq!(got, args);
    }

    #[test]
    fn parsing_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        for limits in [Limits::default(), small_limits()] {
            let _ = parse_requests(&bytes, &limits, &mut Vec::new());
            let _ = parse_request(&bytes, &limits);
            let chunks: Vec<&[u8]> = bytes.chunks(7).collect();
            let _ = decode_chunks(&chunks, &limits);
        }
    }

    #[test]
    fn decoding_is_independent_of_how_bytes_are_split(bytes in arb_protocolish(), cut in any::<prop::sample::Index>()) {
        for limits in [Limits::default(), small_limits()] {
            let whole = decode_chunks(&[&bytes], &limits);
            let split = cut.index(bytes.len() + 1);
            let (first, second) = bytes.split_at(split);
            prop_assert_eq!(&decode_chunks(&[first, second], &limits), &whole, "split at {}", split);
            let chunks: Vec<&[u8]> = bytes.chunks(3).collect();
            prop_assert_eq!(&decode_chunks(&chunks, &limits), &whole, "3-byte reads");
            // The stateless parser agrees with the decoder.
            let mut out = Vec::new();
            let result = parse_requests(&bytes, &limits, &mut out);
            prop_assert_eq!((out, result.err()), whole);
        }
    }
}

#[test]
fn redis_error_strings_are_exact() {
    let default = Limits::default();
    let cases: &[(&[u8], &str)] = &[
        (
            b"*abc\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*3000000000\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*01\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$x\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$536870913\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
            "-ERR Protocol error: expected '$', got 'f'\r\n",
        ),
        (
            b"*1\r\n\r\n",
            "-ERR Protocol error: expected '$', got ' '\r\n",
        ),
        (
            b"SET k \"abc\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"SET k 'a'b\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"*1\r\n$3\r\nfooXY",
            "-ERR Protocol error: bulk data not followed by CRLF\r\n",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(
            error_reply(input, &default),
            *expected,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
    let long_line = vec![b'a'; DEFAULT_MAX_INLINE_LEN + 2];
    assert_eq!(
        error_reply(&long_line, &default),
        "-ERR Protocol error: too big inline request\r\n"
    );
    let mut long_count = b"*".to_vec();
    long_count.resize(DEFAULT_MAX_INLINE_LEN + 1, b'1');
    assert_eq!(
        error_reply(&long_count, &default),
        "-ERR Protocol error: too big mbulk count string\r\n"
    );
    let mut long_bulk = b"*1\r\n$".to_vec();
    long_bulk.resize(4 + DEFAULT_MAX_INLINE_LEN + 1, b'1');
    assert_eq!(
        error_reply(&long_bulk, &default),
        "-ERR Protocol error: too big bulk count string\r\n"
    );
}

#[test]
fn unauthenticated_limits_use_redis_messages() {
    let limits = Limits {
        auth_required: true,
        ..Limits::default()
    };
    assert_eq!(
        error_reply(b"*11\r\n", &limits),
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert_eq!(
        error_reply(b"*1\r\n$16385\r\n", &limits),
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    // At the limits themselves, nothing is refused.
    let mut buf = BytesMut::from(&b"*10\r\n$16384\r\n"[..]);
    let mut decoder = RequestDecoder::new(limits);
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    // Authentication lifts them.
    decoder.reset();
    decoder.set_auth_required(false);
    let mut buf = BytesMut::from(&b"*11\r\n"[..]);
    assert_eq!(decoder.decode(&mut buf), Ok(None));
}

#[test]
fn the_expected_dollar_error_shows_the_raw_byte_except_line_breaks() {
    let error = ProtocolError::ExpectedDollar(0xff);
    assert_eq!(
        error.message().as_ref(),
        b"Protocol error: expected '$', got '\xff'"
    );
    assert_eq!(
        error.to_string(),
        "Protocol error: expected '$', got '\\xff'"
    );
    assert_eq!(
        ProtocolError::ExpectedDollar(b'\n').message().as_ref(),
        b"Protocol error: expected '$', got ' '"
    );
}

#[test]
fn empty_requests_are_skipped_like_redis_does() {
    let bytes = b"\r\n*-10\r\n*0\r\n   \r\n\nPING\r\n";
    let (requests, error) = decode_chunks(&[bytes], &Limits::default());
    assert_eq!(error, None);
    assert_eq!(requests, vec![request(&[b"PING"])]);
    // The decoder drops them from the buffer even when no request follows.
    let mut buf = BytesMut::from(&b"\r\n*0\r\n"[..]);
    assert_eq!(RequestDecoder::default().decode(&mut buf), Ok(None));
    assert!(buf.is_empty());
}

#[test]
fn inline_requests_accept_a_bare_line_feed() {
    let parsed = parse_request(b"GET key\nGET", &Limits::default()).unwrap();
    assert_eq!(parsed, Some((request(&[b"GET", b"key"]), 8)));
}

#[test]
fn a_request_at_each_limit_is_accepted_and_one_byte_more_is_refused() {
    let limits = Limits {
        max_bulk_len: 10,
        max_multibulk_len: 3,
        ..Limits::default()
    };
    let at_limit = encoded(&[vec![b"a".to_vec(), vec![b'x'; 10], b"c".to_vec()]]);
    assert!(parse_request(&at_limit, &limits).unwrap().is_some());
    let long_arg = encoded(&[vec![vec![b'x'; 11]]]);
    assert_eq!(
        parse_request(&long_arg, &limits),
        Err(ProtocolError::InvalidBulkLength)
    );
    let many_args = encoded(&[vec![b"a".to_vec(); 4]]);
    assert_eq!(
        parse_request(&many_args, &limits),
        Err(ProtocolError::InvalidMultibulkLength)
    );

    let limits = Limits {
        max_inline_len: 8,
        ..Limits::default()
    };
    assert!(parse_request(b"12345678\r\n", &limits).unwrap().is_some());
    assert_eq!(
        parse_request(b"123456789\r\n", &limits),
        Err(ProtocolError::TooBigInlineRequest)
    );
    assert_eq!(
        parse_request(b"123456789\n", &limits),
        Err(ProtocolError::TooBigInlineRequest)
    );
    assert_eq!(parse_request(b"12345678\r", &limits), Ok(None));
}

#[test]
fn an_oversized_request_is_refused_before_its_data_arrives() {
    let limits = Limits {
        max_request_len: 64,
        ..Limits::default()
    };
    // Only the headers have arrived; the announced argument would take the request past 64 bytes.
    let partial = b"*2\r\n$3\r\nSET\r\n$100\r\n";
    assert_eq!(
        parse_request(partial, &limits),
        Err(ProtocolError::RequestTooBig { limit: 64 })
    );
    assert_eq!(
        error_reply(partial, &limits),
        "-ERR Protocol error: request exceeds the 64 byte limit\r\n"
    );
}

#[test]
fn the_default_bulk_limit_is_redis_proto_max_bulk_len() {
    assert_eq!(DEFAULT_MAX_BULK_LEN, 512 * 1024 * 1024);
    let header = format!("*1\r\n${DEFAULT_MAX_BULK_LEN}\r\n");
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(header.as_bytes());
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    assert_eq!(decoder.bytes_needed(), DEFAULT_MAX_BULK_LEN + 2);
}

#[test]
fn requests_before_an_error_are_still_returned() {
    let mut buf = BytesMut::from(&b"PING\r\n*1\r\n$4\r\nECHO\r\n*x\r\n"[..]);
    let mut out = Vec::new();
    let result = RequestDecoder::default().decode_all(&mut buf, &mut out);
    assert_eq!(result, Err(ProtocolError::InvalidMultibulkLength));
    assert_eq!(out, vec![request(&[b"PING"]), request(&[b"ECHO"])]);
}

#[test]
fn decode_takes_one_request_at_a_time() {
    let mut buf = BytesMut::from(&b"*1\r\n$4\r\nPING\r\nGET k\r\n*1\r\n$3\r\nab"[..]);
    let mut decoder = RequestDecoder::default();
    assert_eq!(decoder.decode(&mut buf), Ok(Some(request(&[b"PING"]))));
    assert_eq!(decoder.decode(&mut buf), Ok(Some(request(&[b"GET", b"k"]))));
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    assert_eq!(decoder.bytes_needed(), 3);
    buf.extend_from_slice(b"c\r\n");
    assert_eq!(decoder.decode(&mut buf), Ok(Some(request(&[b"abc"]))));
    assert!(buf.is_empty());
}

#[test]
fn decoded_arguments_share_the_read_buffer() {
    let bytes = encoded(&[
        vec![b"SET".to_vec(), b"key".to_vec(), vec![b'v'; 100]],
        vec![b"GET".to_vec(), b"key".to_vec()],
    ]);
    let mut buf = BytesMut::from(&bytes[..]);
    let mut out = Vec::new();
    RequestDecoder::default()
        .decode_all(&mut buf, &mut out)
        .unwrap();
    let first = out[0].name().as_ptr() as usize;
    let last = out[1].args()[0].as_ptr() as usize;
    let expected = bytes.windows(3).rposition(|w| w == b"key").unwrap()
        - bytes.windows(3).position(|w| w == b"SET").unwrap();
    assert_eq!(last - first, expected);
}

#[test]
fn request_accessors_describe_the_command() {
    let r = request(&[b"get", b"k"]);
    assert!(r.is("GET"));
    assert!(!r.is("GETSET"));
    assert_eq!(r.name().as_ref(), b"get");
    assert_eq!(r.args(), &argv(&[b"k"])[..]);
    assert_eq!(r.argv().len(), 2);
    assert!(Request::new(Vec::new()).is_none());
    let mut out = BytesMut::new();
    r.encode(&mut out);
    assert_eq!(&out[..], b"*2\r\n$3\r\nget\r\n$1\r\nk\r\n");
}
