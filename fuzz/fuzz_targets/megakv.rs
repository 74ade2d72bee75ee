//! Fuzzes the Mega-KV batch and reply decoders.
//!
//! Checks, beyond "never panics": the encoding is canonical (whatever decodes re-encodes to the
//! very same bytes); the zero-copy decoders agree with the copying parsers; a prefix of the input
//! is either incomplete or decodes exactly as the whole input does.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use shale_proto::megakv::{
    decode_batch, decode_reply, encode_batch, encode_reply, parse_batch, parse_reply, Limits,
};

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = if control & 1 == 0 {
        Limits::default()
    } else {
        Limits { max_key_len: 8, max_value_len: 16, max_jobs: 4, max_batch_len: 96 }
    };
    let cut = (usize::from(control >> 1) * input.len() / 127).min(input.len());

    let batch = parse_batch(input, &limits);
    assert_eq!(
        decode_batch(&mut BytesMut::from(input), &limits),
        batch.clone().map(|found| found.map(|(b, _)| b))
    );
    match parse_batch(&input[..cut], &limits) {
        Ok(None) => {}
        prefix => assert_eq!(prefix, batch),
    }
    if let Ok(Some((batch, used))) = &batch {
        let mut bytes = BytesMut::new();
        encode_batch(&batch.jobs, &mut bytes).unwrap();
        assert_eq!(&bytes[..], &input[..*used]);
    }

    let reply = parse_reply(input, &limits);
    assert_eq!(
        decode_reply(&mut BytesMut::from(input), &limits),
        reply.clone().map(|found| found.map(|(r, _)| r))
    );
    match parse_reply(&input[..cut], &limits) {
        Ok(None) => {}
        prefix => assert_eq!(prefix, reply),
    }
    if let Ok(Some((reply, used))) = &reply {
        let mut bytes = BytesMut::new();
        encode_reply(reply, &mut bytes).unwrap();
        assert_eq!(&bytes[..], &input[..*used]);
    }
});
