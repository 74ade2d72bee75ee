//! Fuzzes the RESP request decoder and the reply parser.
//!
//! Checks, beyond "never panics": decoding does not depend on where the bytes are split; the
//! stateless parser agrees with the incremental decoder; every decoded request re-encodes to
//! bytes that decode to the same request; every parsed reply re-encodes in both versions to bytes
//! that parse completely.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use shale_proto::resp::{
    decode_reply, encode_command, parse_reply, parse_requests, Limits, ProtocolError, Reply,
    ReplyLimits, Request, RequestDecoder, Version,
};

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

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = if control & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_bulk_len: 32,
            max_multibulk_len: 8,
            max_inline_len: 24,
            max_request_len: 128,
            auth_required: control & 2 != 0,
        }
    };

    // Requests.
    let whole = decode_chunks(&[input], &limits);
    let split = usize::from(control >> 2) * input.len() / 63;
    let (first, second) = input.split_at(split.min(input.len()));
    assert_eq!(decode_chunks(&[first, second], &limits), whole);
    let mut out = Vec::new();
    let result = parse_requests(input, &limits, &mut out);
    assert_eq!((out, result.err()), whole);
    for request in &whole.0 {
        let mut bytes = BytesMut::new();
        encode_command(&mut bytes, request.argv());
        let again = decode_chunks(&[&bytes], &Limits::default());
        assert_eq!(again, (vec![request.clone()], None));
    }

    // Replies.
    let reply_limits = ReplyLimits { max_depth: 32, ..ReplyLimits::default() };
    let parsed = parse_reply(input, &reply_limits);
    let decoded = decode_reply(&mut BytesMut::from(input), &reply_limits);
    match (&parsed, &decoded) {
        (Ok(Some((a, _))), Ok(Some(b))) => assert!(format!("{a:?}") == format!("{b:?}")),
        (Ok(None), Ok(None)) | (Err(_), Err(_)) => assert_eq!(parsed.clone().err(), decoded.err()),
        _ => panic!("parse_reply and decode_reply disagree"),
    }
    if let Ok(Some((reply, _))) = parsed {
        for version in [Version::Resp2, Version::Resp3] {
            let mut bytes = BytesMut::new();
            reply.encode(version, &mut bytes);
            let again: Option<(Reply, usize)> = parse_reply(&bytes, &reply_limits).unwrap();
            assert_eq!(again.map(|(_, used)| used), Some(bytes.len()));
        }
    }
});
