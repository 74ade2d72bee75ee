//! Mega-KV codec: round trips, split reads, the reference byte layout, limits, and robustness on
//! arbitrary bytes.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use shale_proto::megakv::{
    decode_batch, decode_reply, encode_batch, encode_reply, encode_value_reply_header, parse_batch,
    parse_reply, Batch, BatchEncoder, GetReply, Job, Limits, MegaKvError,
};

fn arb_job() -> impl Strategy<Value = Job> {
    let bytes = |max| prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from);
    prop_oneof![
        bytes(40).prop_map(|key| Job::Get { key }),
        (bytes(40), bytes(100)).prop_map(|(key, value)| Job::Set { key, value }),
    ]
}

fn arb_reply() -> impl Strategy<Value = GetReply> {
    prop_oneof![
        Just(GetReply::NotFound),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|v| GetReply::Value(v.into())),
    ]
}

fn encoded_batches(batches: &[Vec<Job>]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for jobs in batches {
        encode_batch(jobs, &mut out).unwrap();
    }
    out.to_vec()
}

/// Every batch a reader decodes from `chunks` read one after the other, then its error if any.
fn decode_batch_chunks(chunks: &[&[u8]], limits: &Limits) -> (Vec<Batch>, Option<MegaKvError>) {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match decode_batch(&mut buf, limits) {
                Ok(Some(batch)) => out.push(batch),
                Ok(None) => break,
                Err(error) => return (out, Some(error)),
            }
        }
    }
    (out, None)
}

fn small_limits() -> Limits {
    Limits {
        max_key_len: 4,
        max_value_len: 8,
        max_jobs: 3,
        max_batch_len: 40,
    }
}

proptest! {
    #[test]
    fn a_batch_round_trips(jobs in prop::collection::vec(arb_job(), 0..20)) {
        let mut out = BytesMut::new();
        let gets = encode_batch(&jobs, &mut out).unwrap();
        let (batch, consumed) = parse_batch(&out, &Limits::default()).unwrap().unwrap();
        prop_assert_eq!(consumed, out.len());
        prop_assert_eq!(batch.gets(), gets);
        prop_assert_eq!(batch.jobs, jobs);
    }

    #[test]
    fn every_split_point_yields_the_same_batches(batches in prop::collection::vec(prop::collection::vec(arb_job(), 0..4), 0..4)) {
        let bytes = encoded_batches(&batches);
        for split in 0..=bytes.len() {
            let (first, second) = bytes.split_at(split);
            let (decoded, error) = decode_batch_chunks(&[first, second], &Limits::default());
            prop_assert_eq!(error, None);
            let jobs: Vec<Vec<Job>> = decoded.into_iter().map(|b| b.jobs).collect();
            prop_assert_eq!(&jobs, &batches, "split at {}", split);
        }
    }

    #[test]
    fn replies_round_trip_in_sequence(replies in prop::collection::vec(arb_reply(), 0..10)) {
        let mut out = BytesMut::new();
        for reply in &replies {
            encode_reply(reply, &mut out).unwrap();
        }
        let bytes = out.to_vec();
        for split in 0..=bytes.len() {
            let mut buf = BytesMut::from(&bytes[..split]);
            let mut got = Vec::new();
            while let Some(reply) = decode_reply(&mut buf, &Limits::default()).unwrap() {
                got.push(reply);
            }
            buf.extend_from_slice(&bytes[split..]);
            while let Some(reply) = decode_reply(&mut buf, &Limits::default()).unwrap() {
                got.push(reply);
            }
            prop_assert_eq!(&got, &replies);
            prop_assert!(buf.is_empty());
        }
        let mut at = 0;
        for reply in &replies {
            let (parsed, used) = parse_reply(&bytes[at..], &Limits::default()).unwrap().unwrap();
            prop_assert_eq!(&parsed, reply);
            at += used;
        }
    }

    #[test]
    fn decoding_never_panics_on_arbitrary_bytes(mut bytes in prop::collection::vec(any::<u8>(), 0..300), magic in any::<bool>()) {
        if magic && bytes.len() >= 2 {
            bytes[0] = 0x34;
            bytes[1] = 0x12;
        }
        for limits in [Limits::default(), small_limits()] {
            let _ = parse_batch(&bytes, &limits);
            let _ = parse_reply(&bytes, &limits);
            let _ = decode_batch(&mut BytesMut::from(&bytes[..]), &limits);
            let _ = decode_reply(&mut BytesMut::from(&bytes[..]), &limits);
        }
    }

    #[test]
    fn a_prefix_is_incomplete_or_fails_as_the_whole_does(jobs in prop::collection::vec(arb_job(), 0..6), noise in prop::collection::vec(any::<u8>(), 0..12), at in any::<prop::sample::Index>()) {
        // A valid batch with a few bytes overwritten somewhere.
        let mut bytes = encoded_batches(&[jobs]);
        let start = at.index(bytes.len());
        for (i, b) in noise.iter().enumerate() {
            if let Some(slot) = bytes.get_mut(start + i) {
                *slot = *b;
            }
        }
        for limits in [Limits::default(), small_limits()] {
            let whole = parse_batch(&bytes, &limits);
            for end in 0..bytes.len() {
                match parse_batch(&bytes[..end], &limits) {
                    Ok(None) => {}
                    other => prop_assert_eq!(&other, &whole, "prefix of {}", end),
                }
            }
        }
    }
}

#[test]
fn batches_have_the_reference_byte_layout() {
    let jobs = vec![
        Job::Get {
            key: Bytes::from_static(b"k1"),
        },
        Job::Set {
            key: Bytes::from_static(b"k"),
            value: Bytes::from_static(b"v"),
        },
    ];
    let mut out = BytesMut::new();
    assert_eq!(encode_batch(&jobs, &mut out), Ok(1));
    let expected: &[u8] = &[
        0x34, 0x12, // magic 0x1234, little-endian
        0x02, 0x00, 0x02, 0x00, b'k', b'1', // GET, key length 2, key
        0x03, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, b'k', b'v', // SET, 1, 1, key, value
        0xff, 0xff, // end mark
    ];
    assert_eq!(&out[..], expected);
}

#[test]
fn replies_have_the_reference_byte_layout() {
    let mut out = BytesMut::new();
    encode_reply(&GetReply::Value(Bytes::from_static(b"abc")), &mut out).unwrap();
    encode_reply(&GetReply::NotFound, &mut out).unwrap();
    assert_eq!(
        &out[..],
        &[0x01, 0x00, 0x03, 0x00, 0x00, 0x00, b'a', b'b', b'c', 0x02]
    );
}

#[test]
fn a_value_header_followed_by_the_value_is_the_value_reply() {
    for value in [&b""[..], b"abc", &[7u8; 70_000]] {
        let mut whole = BytesMut::new();
        encode_reply(&GetReply::Value(Bytes::copy_from_slice(value)), &mut whole).unwrap();
        let mut streamed = BytesMut::new();
        encode_value_reply_header(value.len(), &mut streamed).unwrap();
        streamed.extend_from_slice(value);
        assert_eq!(streamed, whole);
    }
}

#[test]
fn an_empty_batch_is_magic_then_end_mark() {
    let parsed = parse_batch(&[0x34, 0x12, 0xff, 0xff], &Limits::default()).unwrap();
    assert_eq!(parsed, Some((Batch::default(), 4)));
}

#[test]
fn malformed_batches_are_refused() {
    let limits = Limits::default();
    assert_eq!(
        parse_batch(&[0x12, 0x34], &limits),
        Err(MegaKvError::BadMagic { found: 0x3412 })
    );
    assert_eq!(
        parse_batch(&[0x34, 0x12, 0x04, 0x00], &limits),
        Err(MegaKvError::UnknownJobType {
            found: 4,
            offset: 2
        })
    );
    assert_eq!(parse_batch(&[0x34, 0x12, 0x02], &limits), Ok(None));
    assert_eq!(
        parse_reply(&[0x05, 0x00], &limits),
        Err(MegaKvError::BadReplyTag { found: 5 })
    );
    assert_eq!(
        parse_reply(&[0x01, 0x01], &limits),
        Err(MegaKvError::BadReplyTag { found: 0x0101 })
    );
    assert_eq!(parse_reply(&[0x01], &limits), Ok(None));
}

#[test]
fn limits_are_enforced_as_soon_as_the_length_fields_arrive() {
    let limits = small_limits();
    // GET with a 5-byte key: refused from its header alone.
    assert_eq!(
        parse_batch(&[0x34, 0x12, 0x02, 0x00, 0x05, 0x00], &limits),
        Err(MegaKvError::KeyTooLong { len: 5, max: 4 })
    );
    // SET with a 9-byte value.
    assert_eq!(
        parse_batch(
            &[0x34, 0x12, 0x03, 0x00, 0x01, 0x00, 0x09, 0x00, 0x00, 0x00],
            &limits
        ),
        Err(MegaKvError::ValueTooLong { len: 9, max: 8 })
    );
    // A value reply of 4 GiB - 1 is refused before any of it arrives.
    assert_eq!(
        parse_reply(&[0x01, 0x00, 0xff, 0xff, 0xff, 0xff], &Limits::default()),
        Err(MegaKvError::ValueTooLong {
            len: u32::MAX as usize,
            max: 1024 * 1024
        })
    );
    // Four jobs where three are allowed.
    let get = Job::Get {
        key: Bytes::from_static(b"k"),
    };
    let bytes = encoded_batches(&[vec![get.clone(); 4]]);
    assert_eq!(
        parse_batch(&bytes, &limits),
        Err(MegaKvError::TooManyJobs { max: 3 })
    );
    assert!(parse_batch(&encoded_batches(&[vec![get; 3]]), &limits)
        .unwrap()
        .is_some());
    // Jobs that together pass the batch length.
    let set = Job::Set {
        key: Bytes::from_static(b"kkkk"),
        value: Bytes::from_static(b"vvvvvvvv"),
    };
    let bytes = encoded_batches(&[vec![set.clone(), set.clone()]]);
    assert_eq!(
        parse_batch(&bytes, &limits),
        Err(MegaKvError::BatchTooLong { max: 40 })
    );
    assert!(parse_batch(&encoded_batches(&[vec![set]]), &limits)
        .unwrap()
        .is_some());
}

#[test]
fn encoding_refuses_keys_that_do_not_fit_sixteen_bits() {
    let mut out = BytesMut::from(&b"prefix"[..]);
    let jobs = vec![
        Job::Get {
            key: Bytes::from_static(b"fine"),
        },
        Job::Get {
            key: Bytes::from(vec![0u8; 65_536]),
        },
    ];
    assert_eq!(
        encode_batch(&jobs, &mut out),
        Err(MegaKvError::KeyTooLong {
            len: 65_536,
            max: 65_535
        })
    );
    assert_eq!(&out[..], b"prefix");
}

#[test]
fn a_dropped_batch_encoder_still_ends_its_batch() {
    let mut out = BytesMut::new();
    {
        let mut encoder = BatchEncoder::new(&mut out);
        encoder.set(b"k", b"v").unwrap();
        assert!(encoder.get(&vec![0u8; 70_000]).is_err());
    }
    let (batch, _) = parse_batch(&out, &Limits::default()).unwrap().unwrap();
    assert_eq!(
        batch.jobs,
        vec![Job::Set {
            key: Bytes::from_static(b"k"),
            value: Bytes::from_static(b"v")
        }]
    );
}

#[test]
fn decoded_keys_and_values_share_the_read_buffer() {
    let jobs = vec![Job::Set {
        key: Bytes::from_static(b"key"),
        value: Bytes::from(vec![7u8; 64]),
    }];
    let bytes = encoded_batches(&[jobs]);
    let mut buf = BytesMut::from(&bytes[..]);
    let batch = decode_batch(&mut buf, &Limits::default()).unwrap().unwrap();
    let Job::Set { key, value } = &batch.jobs[0] else {
        panic!("a SET")
    };
    assert_eq!(value.as_ptr() as usize - key.as_ptr() as usize, 3);
}
