//! Reply encoding and parsing: round trips in RESP2 and RESP3, Redis's exact bytes for each type,
//! limits, and robustness on arbitrary bytes.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use shale_proto::resp::{
    decode_reply, parse_reply, Reply, ReplyError, ReplyLimits, ReplyWriter, Version,
    DEFAULT_MAX_REPLY_DEPTH,
};

const VERSIONS: [Version; 2] = [Version::Resp2, Version::Resp3];

fn encode(reply: &Reply, version: Version) -> Vec<u8> {
    let mut out = BytesMut::new();
    reply.encode(version, &mut out);
    out.to_vec()
}

/// Equality that treats every NaN as equal to every other NaN.
fn same(a: &Reply, b: &Reply) -> bool {
    let all =
        |x: &[Reply], y: &[Reply]| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q));
    match (a, b) {
        (Reply::Double(x), Reply::Double(y)) => {
            x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan()
        }
        (Reply::Array(x), Reply::Array(y))
        | (Reply::Set(x), Reply::Set(y))
        | (Reply::Push(x), Reply::Push(y)) => all(x, y),
        (Reply::Map(x), Reply::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k1, v1), (k2, v2))| same(k1, k2) && same(v1, v2))
        }
        _ => a == b,
    }
}

fn line_text() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(
        any::<u8>().prop_filter("no line breaks", |b| *b != b'\r' && *b != b'\n'),
        0..24,
    )
    .prop_map(Bytes::from)
}

fn arb_reply() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        line_text().prop_map(Reply::Simple),
        line_text().prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|b| Reply::Bulk(b.into())),
        Just(Reply::Null),
        Just(Reply::NullArray),
        any::<f64>().prop_map(Reply::Double),
        prop::sample::select(vec![
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -0.0,
            1e17,
            1e-5,
            0.1
        ])
        .prop_map(Reply::Double),
        any::<bool>().prop_map(Reply::Boolean),
        "-?[0-9]{1,60}".prop_map(|d| Reply::BigNumber(d.into())),
        ("[a-z]{3}", prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(f, t)| {
            Reply::Verbatim {
                format: f.as_bytes().try_into().unwrap(),
                text: t.into(),
            }
        }),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Reply::Array),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Reply::Set),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Reply::Push),
            prop::collection::vec((inner.clone(), inner), 0..4).prop_map(Reply::Map),
        ]
    })
}

fn arb_protocolish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop::sample::select(vec![
        &b"*"[..],
        b"%",
        b"~",
        b">",
        b"$",
        b"!",
        b"=",
        b"+",
        b"-",
        b":",
        b"_",
        b",",
        b"#",
        b"(",
        b"\r\n",
        b"\r",
        b"1",
        b"2",
        b"4",
        b"-1",
        b"0",
        b"t",
        b"1.5",
        b"inf",
        b"txt:",
        b"abc",
    ])
    .prop_map(|t| t.to_vec());
    let token = prop_oneof![token, prop::collection::vec(any::<u8>(), 1..3)];
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

proptest! {
    #[test]
    fn every_reply_round_trips_in_both_versions(reply in arb_reply()) {
        for version in VERSIONS {
            let bytes = encode(&reply, version);
            let (parsed, consumed) = parse_reply(&bytes, &ReplyLimits::default()).unwrap().unwrap();
            let expected = reply.lowered(version);
            prop_assert!(same(&parsed, &expected), "{:?}: {:?} != {:?}", version, parsed, expected);
            prop_assert_eq!(consumed, bytes.len());
            let mut buf = BytesMut::from(&bytes[..]);
            let decoded = decode_reply(&mut buf, &ReplyLimits::default()).unwrap().unwrap();
            prop_assert!(same(&decoded, &expected));
            prop_assert!(buf.is_empty());
        }
    }

    #[test]
    fn a_double_reads_back_as_the_same_value(value in any::<f64>()) {
        let bytes = encode(&Reply::Double(value), Version::Resp3);
        let (parsed, _) = parse_reply(&bytes, &ReplyLimits::default()).unwrap().unwrap();
        prop_assert!(same(&parsed, &Reply::Double(value)));
    }

    #[test]
    fn a_truncated_reply_is_incomplete_not_an_error(reply in arb_reply(), version in prop::sample::select(VERSIONS.to_vec())) {
        let bytes = encode(&reply, version);
        for end in 0..bytes.len() {
            prop_assert_eq!(parse_reply(&bytes[..end], &ReplyLimits::default()), Ok(None), "prefix of {}", end);
        }
    }

    #[test]
    fn reply_parsing_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_reply(&bytes, &ReplyLimits::default());
        let _ = decode_reply(&mut BytesMut::from(&bytes[..]), &ReplyLimits::default());
    }

    #[test]
    fn a_prefix_never_parses_to_something_else(bytes in arb_protocolish()) {
        let limits = ReplyLimits { max_bulk_len: 8, max_aggregate_len: 4, max_line_len: 8, max_depth: 3 };
        for limits in [ReplyLimits::default(), limits] {
            let whole = parse_reply(&bytes, &limits);
            for end in 0..bytes.len() {
                match parse_reply(&bytes[..end], &limits) {
                    Ok(None) => {}
                    Ok(Some((reply, used))) => {
                        let Ok(Some((w, wused))) = &whole else { panic!("prefix parsed, whole did not") };
                        prop_assert!(same(&reply, w) && used == *wused);
                    }
                    Err(error) => prop_assert_eq!(&Err(error), &whole),
                }
            }
        }
    }
}

#[test]
fn each_type_has_redis_bytes_in_each_version() {
    let map = Reply::Map(vec![(Reply::bulk("a"), Reply::Integer(1))]);
    let cases: Vec<(Reply, &str, &str)> = vec![
        (Reply::ok(), "+OK\r\n", "+OK\r\n"),
        (Reply::error("ERR x"), "-ERR x\r\n", "-ERR x\r\n"),
        (Reply::Integer(-5), ":-5\r\n", ":-5\r\n"),
        (Reply::bulk("foo"), "$3\r\nfoo\r\n", "$3\r\nfoo\r\n"),
        (Reply::bulk(""), "$0\r\n\r\n", "$0\r\n\r\n"),
        (Reply::Null, "$-1\r\n", "_\r\n"),
        (Reply::NullArray, "*-1\r\n", "_\r\n"),
        (Reply::Array(vec![]), "*0\r\n", "*0\r\n"),
        (map, "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n$1\r\na\r\n:1\r\n"),
        (
            Reply::Set(vec![Reply::Integer(1)]),
            "*1\r\n:1\r\n",
            "~1\r\n:1\r\n",
        ),
        (
            Reply::Push(vec![Reply::bulk("m")]),
            "*1\r\n$1\r\nm\r\n",
            ">1\r\n$1\r\nm\r\n",
        ),
        (Reply::Double(1.5), "$3\r\n1.5\r\n", ",1.5\r\n"),
        (Reply::Double(3.0), "$1\r\n3\r\n", ",3\r\n"),
        (Reply::Double(1e300), "$6\r\n1e+300\r\n", ",1e+300\r\n"),
        (Reply::Double(f64::INFINITY), "$3\r\ninf\r\n", ",inf\r\n"),
        (
            Reply::Double(f64::NEG_INFINITY),
            "$4\r\n-inf\r\n",
            ",-inf\r\n",
        ),
        (Reply::Double(f64::NAN), "$3\r\nnan\r\n", ",nan\r\n"),
        (Reply::Boolean(true), ":1\r\n", "#t\r\n"),
        (Reply::Boolean(false), ":0\r\n", "#f\r\n"),
        (
            Reply::BigNumber("3492890328409238509324850943850943825024385".into()),
            "$43\r\n3492890328409238509324850943850943825024385\r\n",
            "(3492890328409238509324850943850943825024385\r\n",
        ),
        (
            Reply::Verbatim {
                format: *b"txt",
                text: "Some string".into(),
            },
            "$11\r\nSome string\r\n",
            "=15\r\ntxt:Some string\r\n",
        ),
    ];
    for (reply, resp2, resp3) in cases {
        assert_eq!(
            String::from_utf8(encode(&reply, Version::Resp2)).unwrap(),
            resp2,
            "{reply:?}"
        );
        assert_eq!(
            String::from_utf8(encode(&reply, Version::Resp3)).unwrap(),
            resp3,
            "{reply:?}"
        );
    }
}

#[test]
fn line_breaks_in_status_and_error_text_become_spaces() {
    let mut out = BytesMut::new();
    let mut writer = ReplyWriter::new(&mut out, Version::Resp2);
    writer.error(b"ERR bad\r\nthing");
    writer.simple(b"a\nb");
    assert_eq!(&out[..], b"-ERR bad  thing\r\n+a b\r\n");
}

#[test]
fn streamed_writes_equal_the_encoded_tree() {
    let tree = Reply::Array(vec![
        Reply::Map(vec![(Reply::Simple("k".into()), Reply::Double(0.25))]),
        Reply::Boolean(true),
        Reply::Null,
    ]);
    for version in VERSIONS {
        let mut streamed = BytesMut::new();
        let mut w = ReplyWriter::new(&mut streamed, version);
        assert_eq!(w.version(), version);
        w.array(3);
        w.map(1);
        w.simple(b"k");
        w.double(0.25);
        w.boolean(true);
        w.null();
        assert_eq!(streamed.to_vec(), encode(&tree, version));
    }
}

#[test]
fn a_bulk_header_followed_by_the_data_is_the_bulk_reply() {
    for version in VERSIONS {
        for data in [&b""[..], b"abc", &[b'\n'; 70_000]] {
            let mut whole = BytesMut::new();
            ReplyWriter::new(&mut whole, version).bulk(data);
            let mut streamed = BytesMut::new();
            ReplyWriter::new(&mut streamed, version).bulk_header(data.len());
            streamed.extend_from_slice(data);
            streamed.extend_from_slice(b"\r\n");
            assert_eq!(streamed, whole);
        }
    }
}

#[test]
fn blob_errors_parse_as_errors() {
    let parsed = parse_reply(b"!21\r\nSYNTAX invalid syntax\r\n", &ReplyLimits::default()).unwrap();
    assert_eq!(parsed, Some((Reply::error("SYNTAX invalid syntax"), 28)));
}

#[test]
fn nesting_is_bounded_by_max_depth() {
    let nested = |depth: usize| {
        let mut bytes = b"*1\r\n".repeat(depth);
        bytes.extend_from_slice(b":1\r\n");
        bytes
    };
    let limits = ReplyLimits::default();
    assert!(parse_reply(&nested(DEFAULT_MAX_REPLY_DEPTH), &limits)
        .unwrap()
        .is_some());
    assert_eq!(
        parse_reply(&nested(DEFAULT_MAX_REPLY_DEPTH + 1), &limits),
        Err(ReplyError::TooDeep {
            max: DEFAULT_MAX_REPLY_DEPTH,
            offset: DEFAULT_MAX_REPLY_DEPTH * 4
        })
    );
    // Deep enough to overflow the stack if the limit were not checked.
    assert!(parse_reply(&nested(1_000_000), &limits).is_err());
}

#[test]
fn reply_lengths_are_checked_before_data_arrives() {
    let limits = ReplyLimits {
        max_bulk_len: 10,
        max_aggregate_len: 2,
        ..ReplyLimits::default()
    };
    assert_eq!(
        parse_reply(b"$11\r\n", &limits),
        Err(ReplyError::TooLong {
            what: "bulk string",
            max: 10,
            offset: 0
        })
    );
    assert_eq!(
        parse_reply(b"%3\r\n", &limits),
        Err(ReplyError::TooLong {
            what: "aggregate",
            max: 2,
            offset: 0
        })
    );
    assert_eq!(
        parse_reply(b"*-2\r\n", &limits),
        Err(ReplyError::Malformed {
            what: "length",
            offset: 0
        })
    );
    assert_eq!(
        parse_reply(b"$2\r\nabXY", &limits),
        Err(ReplyError::Malformed {
            what: "line end",
            offset: 0
        })
    );
    assert_eq!(
        parse_reply(b"#x\r\n", &limits),
        Err(ReplyError::Malformed {
            what: "boolean",
            offset: 0
        })
    );
    assert_eq!(
        parse_reply(b"|1\r\n", &limits),
        Err(ReplyError::UnknownType {
            byte: b'|',
            offset: 0
        })
    );
}

#[test]
fn version_follows_hello_protover() {
    assert_eq!(Version::from_protover(2), Some(Version::Resp2));
    assert_eq!(Version::from_protover(3), Some(Version::Resp3));
    assert_eq!(Version::from_protover(4), None);
    assert_eq!(Version::default(), Version::Resp2);
    assert_eq!(Version::Resp3.number(), 3);
}

#[test]
fn doubles_with_an_exponent_are_written_as_c_printf_writes_them() {
    for (value, text) in [
        (1e300, "1e+300"),
        (f64::MAX, "1.7976931348623157e+308"),
        (2.5e-7, "2.5e-07"),
        (-1e17, "-1e+17"),
        (1.5, "1.5"),
    ] {
        let mut out = BytesMut::new();
        ReplyWriter::new(&mut out, Version::Resp3).double(value);
        assert_eq!(out.to_vec(), format!(",{text}\r\n").into_bytes(), "{value}");
    }
}
