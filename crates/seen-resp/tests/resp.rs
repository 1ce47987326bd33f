//! The wire protocol end to end: pipelined requests cut at every byte,
//! Redis's error texts and limits, reply encoding checked against recorded
//! RedisBloom transcripts, and property tests that no input panics.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use seen_resp::{
    encode_request, parse_reply, parse_request, ErrorKind, Limits, Protocol, Reply, Request,
    RequestParser,
};
use serde_json::Value;

fn args(req: &Request) -> Vec<Vec<u8>> {
    req.args().iter().map(|a| a.to_vec()).collect()
}

fn strs(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Feeds `chunks` one after another into a parser, collecting every request.
fn feed<'a>(
    limits: Limits,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<Vec<Vec<u8>>>, seen_resp::ProtocolError> {
    let mut parser = RequestParser::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        while let Some(req) = parser.next(&mut buf)? {
            out.push(args(&req));
        }
    }
    assert!(buf.is_empty(), "left over: {:?}", &buf[..]);
    Ok(out)
}

/// Every request of `buf`, parsed with the stateless function.
fn parse_all(buf: &[u8], limits: &Limits) -> Result<Vec<Vec<Vec<u8>>>, seen_resp::ProtocolError> {
    let mut pos = 0;
    let mut out = Vec::new();
    while let Some((req, used)) = parse_request(&buf[pos..], limits)? {
        assert!(used > 0 && used <= buf.len() - pos);
        pos += used;
        if !req.is_empty() {
            out.push(args(&req));
        }
    }
    assert_eq!(pos, buf.len(), "incomplete tail");
    Ok(out)
}

const PIPELINE: &[u8] = b"*3\r\n$6\r\nBF.ADD\r\n$4\r\nurls\r\n$5\r\na\r\nb\0\r\n\
PING\r\n\
*0\r\n\
\r\n\
*2\r\n$9\r\nBF.EXISTS\r\n$0\r\n\r\n\
set k \"x\\ty\" 'it\\'s'\n\
*-1\r\n\
*1\r\n$4\r\nQUIT\r\n";

fn pipeline_commands() -> Vec<Vec<Vec<u8>>> {
    vec![
        vec![b"BF.ADD".to_vec(), b"urls".to_vec(), b"a\r\nb\0".to_vec()],
        strs(&["PING"]),
        vec![b"BF.EXISTS".to_vec(), b"".to_vec()],
        strs(&["set", "k", "x\ty", "it's"]),
        strs(&["QUIT"]),
    ]
}

#[test]
fn pipeline_parses_the_same_at_every_split_point() {
    let want = pipeline_commands();
    let limits = Limits::default();
    assert_eq!(parse_all(PIPELINE, &limits).unwrap(), want);
    assert_eq!(feed(limits, [PIPELINE]).unwrap(), want);
    for cut in 0..=PIPELINE.len() {
        let (a, b) = PIPELINE.split_at(cut);
        assert_eq!(feed(limits, [a, b]).unwrap(), want, "split at {cut}");
    }
    for cut1 in 0..=PIPELINE.len() {
        for cut2 in cut1..=PIPELINE.len() {
            let parts = [&PIPELINE[..cut1], &PIPELINE[cut1..cut2], &PIPELINE[cut2..]];
            assert_eq!(
                feed(limits, parts).unwrap(),
                want,
                "split at {cut1}, {cut2}"
            );
        }
    }
    assert_eq!(feed(limits, PIPELINE.chunks(1)).unwrap(), want);
}

#[test]
fn stateless_parse_never_consumes_a_partial_frame() {
    let limits = Limits::default();
    let (_, first) = parse_request(PIPELINE, &limits).unwrap().unwrap();
    for cut in 0..first {
        assert_eq!(
            parse_request(&PIPELINE[..cut], &limits).unwrap(),
            None,
            "cut {cut}"
        );
    }
}

#[test]
fn multibulk_args_are_slices_of_the_read_buffer() {
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$5\r\nhello\r\n"[..]);
    let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
    let req = RequestParser::new(Limits::default())
        .next(&mut buf)
        .unwrap()
        .unwrap();
    for arg in req.args() {
        assert!(
            range.contains(&(arg.as_ptr() as usize)),
            "argument was copied"
        );
    }
    assert_eq!(req.args(), ["GET", "hello"]);
}

#[test]
fn binary_args_survive() {
    let all: Vec<u8> = (0..=255).collect();
    let values: Vec<&[u8]> = vec![b"\r\n", b"$3\r\n*1\r\n", &all, b"", b"\n\r"];
    let mut wire = BytesMut::new();
    encode_request(&values, &mut wire);
    let (req, used) = parse_request(&wire, &Limits::default()).unwrap().unwrap();
    assert_eq!(used, wire.len());
    assert_eq!(req.args(), values.as_slice());
}

#[test]
fn inline_requests() {
    let limits = Limits::default();
    let one = |line: &[u8]| args(&parse_request(line, &limits).unwrap().unwrap().0);
    assert_eq!(
        one(b"BF.ADD key item\r\n"),
        strs(&["BF.ADD", "key", "item"])
    );
    assert_eq!(one(b"  ping  \n"), strs(&["ping"]));
    assert_eq!(
        one(b"set \"\\x00\\xFFa\\n\" 'a\\nb'\r\n"),
        vec![b"set".to_vec(), b"\x00\xffa\n".to_vec(), b"a\\nb".to_vec()]
    );
    assert_eq!(one(b"echo \"\"\n"), vec![b"echo".to_vec(), vec![]]);
    for bad in [&b"get \"unterminated\r\n"[..], b"get 'x\n", b"get \"a\"b\n"] {
        let err = parse_request(bad, &limits).unwrap_err();
        assert_eq!(err.kind(), &ErrorKind::UnbalancedQuotes);
        assert_eq!(
            err.to_string(),
            "Protocol error: unbalanced quotes in request"
        );
    }
}

fn error_wire(buf: &[u8], limits: &Limits) -> Vec<u8> {
    let err = parse_request(buf, limits).unwrap_err();
    // The stateful parser must agree with the stateless one.
    let mut bytes = BytesMut::from(buf);
    let again = RequestParser::new(*limits).next(&mut bytes).unwrap_err();
    assert_eq!(err, again);
    err.to_reply().to_bytes(Protocol::Resp2).to_vec()
}

#[test]
fn protocol_errors_use_redis_texts() {
    let limits = Limits::default();
    let long = vec![b'a'; 64 * 1024 + 1];
    let mut mbulk_count = b"*".to_vec();
    mbulk_count.extend_from_slice(&long);
    let mut bulk_count = b"*1\r\n$".to_vec();
    bulk_count.extend_from_slice(&long);
    let cases: Vec<(Vec<u8>, &[u8])> = vec![
        (
            b"*x\r\n".to_vec(),
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-1\r\n".to_vec(),
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n:1\r\n".to_vec(),
            b"-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        (
            long.clone(),
            b"-ERR Protocol error: too big inline request\r\n",
        ),
        (
            mbulk_count,
            b"-ERR Protocol error: too big mbulk count string\r\n",
        ),
        (
            bulk_count,
            b"-ERR Protocol error: too big bulk count string\r\n",
        ),
        (
            b"a 'b\r\n".to_vec(),
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (input, wire) in cases {
        assert_eq!(
            error_wire(&input, &limits),
            wire,
            "{:?}",
            String::from_utf8_lossy(&input[..input.len().min(20)])
        );
    }
}

#[test]
fn limits_are_enforced_at_their_edges() {
    let limits = Limits {
        max_bulk_len: 10,
        max_multibulk_len: 3,
        max_inline_len: 32,
    };
    let kind = |buf: &[u8]| parse_request(buf, &limits).unwrap_err().into_kind();
    let ok = |buf: &[u8]| parse_request(buf, &limits).unwrap();

    // Bulk length: 10 is fine, 11 is refused before any byte of it arrives.
    assert!(ok(b"*1\r\n$10\r\n0123456789\r\n").is_some());
    assert_eq!(kind(b"*1\r\n$11\r\n"), ErrorKind::InvalidBulkLength);
    // Multibulk count.
    assert!(ok(b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n").is_some());
    assert_eq!(kind(b"*4\r\n"), ErrorKind::InvalidMultibulkLength);
    // Inline: 32 bytes without a newline wait, 33 are too many.
    assert_eq!(ok(&[b'a'; 32]), None);
    assert_eq!(kind(&[b'a'; 33]), ErrorKind::TooBigInlineRequest);
    // Header lines have the same limit while unterminated.
    let mut header = b"*".to_vec();
    header.extend_from_slice(&[b'1'; 32]);
    assert_eq!(kind(&header), ErrorKind::TooBigMbulkCountString);
    assert_eq!(ok(&header[..32]), None);
    let mut header = b"*1\r\n$".to_vec();
    header.extend_from_slice(&[b'1'; 32]);
    assert_eq!(kind(&header), ErrorKind::TooBigBulkCountString);

    // Defaults are Redis's.
    let defaults = Limits::default();
    assert_eq!(defaults.max_bulk_len, 512 * 1024 * 1024);
    assert_eq!(defaults.max_multibulk_len, 1024 * 1024);
    assert_eq!(defaults.max_inline_len, 64 * 1024);
    assert!(parse_request(b"*1\r\n$536870912\r\n", &defaults)
        .unwrap()
        .is_none());
    assert_eq!(
        parse_request(b"*1\r\n$536870913\r\n", &defaults)
            .unwrap_err()
            .kind(),
        &ErrorKind::InvalidBulkLength
    );
    assert!(parse_request(b"*1048576\r\n", &defaults).unwrap().is_none());
    assert_eq!(
        parse_request(b"*1048577\r\n", &defaults)
            .unwrap_err()
            .kind(),
        &ErrorKind::InvalidMultibulkLength
    );
}

#[test]
fn redis_protocol_desync_inputs_end_in_errors() {
    // Redis's "Protocol desync regression" tests: garbage that never ends a
    // line must be refused once it passes the inline limit.
    let payload = b"payload".repeat(10_000);
    for (prefix, want) in [
        (&b"\x00"[..], ErrorKind::TooBigInlineRequest),
        (b"*\x00", ErrorKind::TooBigMbulkCountString),
        (b"$\x00", ErrorKind::TooBigInlineRequest),
    ] {
        let mut buf = prefix.to_vec();
        buf.extend_from_slice(&payload);
        let err = feed(Limits::default(), buf.chunks(1000)).unwrap_err();
        assert_eq!(err.kind(), &want);
    }
}

// ---- replies -------------------------------------------------------------

fn transcripts() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/vectors/redisbloom-2.8-replies.json"
    );
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {path}: {e} (shared/ must sit beside the checkout)"));
    serde_json::from_str(&text).expect("valid JSON")
}

/// The transcripts store bytes as Latin-1 characters.
fn latin1(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("latin-1"))
        .collect()
}

#[test]
fn redisbloom_transcripts_parse_and_reencode_byte_for_byte() {
    let vectors = transcripts();
    let mut checked = 0;
    for (section, proto) in [("resp2", Protocol::Resp2), ("resp3", Protocol::Resp3)] {
        let cases = vectors[section].as_array().expect("cases");
        assert!(!cases.is_empty());
        // Concatenated, as a pipelined connection would read them.
        let mut stream = Vec::new();
        for case in cases {
            let raw = latin1(case["reply_raw"].as_str().unwrap());
            let (reply, used) = parse_reply(&raw).unwrap().expect("complete reply");
            assert_eq!(used, raw.len());
            assert_eq!(reply.to_bytes(proto).to_vec(), raw, "{case}");
            stream.extend_from_slice(&raw);
            checked += 1;
        }
        let mut pos = 0;
        for case in cases {
            let raw = latin1(case["reply_raw"].as_str().unwrap());
            let (_, used) = parse_reply(&stream[pos..]).unwrap().unwrap();
            assert_eq!(&stream[pos..pos + used], &raw[..]);
            pos += used;
        }
        assert_eq!(pos, stream.len());
    }
    assert!(checked > 50);
}

#[test]
fn bf_info_and_madd_replies_match_redisbloom() {
    let info = Reply::Map(vec![
        (Reply::simple("Capacity"), Reply::Integer(50)),
        (Reply::simple("Size"), Reply::Integer(128)),
        (Reply::simple("Number of filters"), Reply::Integer(1)),
        (Reply::simple("Number of items inserted"), Reply::Integer(1)),
        (Reply::simple("Expansion rate"), Reply::Null),
    ]);
    assert_eq!(
        &info.to_bytes(Protocol::Resp2)[..],
        b"*10\r\n+Capacity\r\n:50\r\n+Size\r\n:128\r\n+Number of filters\r\n:1\r\n\
+Number of items inserted\r\n:1\r\n+Expansion rate\r\n$-1\r\n"
    );
    assert_eq!(
        &info.to_bytes(Protocol::Resp3)[..],
        b"%5\r\n+Capacity\r\n:50\r\n+Size\r\n:128\r\n+Number of filters\r\n:1\r\n\
+Number of items inserted\r\n:1\r\n+Expansion rate\r\n_\r\n"
    );
    let mut madd: Vec<Reply> = vec![Reply::Bool(true); 10];
    madd.push(Reply::error("ERR non scaling filter is full"));
    let madd = Reply::Array(madd);
    assert_eq!(
        &madd.to_bytes(Protocol::Resp2)[..],
        [
            &b"*11\r\n"[..],
            &b":1\r\n".repeat(10),
            b"-ERR non scaling filter is full\r\n"
        ]
        .concat()
    );
    assert_eq!(
        &madd.to_bytes(Protocol::Resp3)[..],
        [
            &b"*11\r\n"[..],
            &b"#t\r\n".repeat(10),
            b"-ERR non scaling filter is full\r\n"
        ]
        .concat()
    );
    assert_eq!(
        &Reply::error("ERR item exists").to_bytes(Protocol::Resp3)[..],
        b"-ERR item exists\r\n"
    );
}

// ---- property tests ------------------------------------------------------

fn arb_reply() -> impl Strategy<Value = Reply> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..24).prop_map(Bytes::from);
    let line = || "[ -~]{0,16}".prop_map(|s| Bytes::from(s.into_bytes()));
    let leaf = prop_oneof![
        line().prop_map(Reply::Simple),
        line().prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        bytes().prop_map(Reply::Bulk),
        Just(Reply::Null),
        Just(Reply::NullArray),
        any::<bool>().prop_map(Reply::Bool),
        any::<f64>()
            .prop_filter("NaN is not equal to itself", |d| !d.is_nan())
            .prop_map(Reply::Double),
        "-?[0-9]{1,40}".prop_map(|s| Reply::BigNumber(s.into())),
        bytes().prop_map(|text| Reply::Verbatim {
            format: *b"txt",
            text
        }),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let pairs = proptest::collection::vec((inner.clone(), inner.clone()), 0..4);
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Reply::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Reply::Set),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Reply::Push),
            pairs.clone().prop_map(Reply::Map),
            (pairs, inner).prop_map(|(attributes, value)| Reply::Attribute {
                attributes,
                value: Box::new(value),
            }),
        ]
    })
}

/// What a RESP3 reply reads back as: RESP3 has one null.
fn resp3_view(reply: &Reply) -> Reply {
    let pairs = |ps: &[(Reply, Reply)]| {
        ps.iter()
            .map(|(k, v)| (resp3_view(k), resp3_view(v)))
            .collect()
    };
    match reply {
        Reply::NullArray => Reply::Null,
        Reply::Array(items) => Reply::Array(items.iter().map(resp3_view).collect()),
        Reply::Set(items) => Reply::Set(items.iter().map(resp3_view).collect()),
        Reply::Push(items) => Reply::Push(items.iter().map(resp3_view).collect()),
        Reply::Map(ps) => Reply::Map(pairs(ps)),
        Reply::Attribute { attributes, value } => Reply::Attribute {
            attributes: pairs(attributes),
            value: Box::new(resp3_view(value)),
        },
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn multibulk_round_trip(
        commands in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..8),
            1..6,
        ),
        chunk in 1usize..64,
    ) {
        let mut wire = BytesMut::new();
        for command in &commands {
            encode_request(command, &mut wire);
        }
        prop_assert_eq!(&parse_all(&wire, &Limits::default()).unwrap(), &commands);
        prop_assert_eq!(&feed(Limits::default(), wire.chunks(chunk)).unwrap(), &commands);
    }

    #[test]
    fn reply_round_trip(reply in arb_reply()) {
        for proto in [Protocol::Resp2, Protocol::Resp3] {
            let wire = reply.to_bytes(proto);
            let (parsed, used) = parse_reply(&wire).unwrap().expect("complete");
            prop_assert_eq!(used, wire.len());
            // Parsing then encoding again gives the very same bytes.
            prop_assert_eq!(&parsed.to_bytes(proto)[..], &wire[..]);
            if proto == Protocol::Resp3 {
                prop_assert_eq!(parsed, resp3_view(&reply));
            }
            for cut in 0..wire.len() {
                prop_assert_eq!(parse_reply(&wire[..cut]).unwrap(), None);
            }
        }
    }

    #[test]
    fn random_bytes_never_panic_the_request_parsers(
        data in proptest::collection::vec(any::<u8>(), 0..256),
        chunk in 1usize..32,
    ) {
        let limits = Limits { max_bulk_len: 64, max_multibulk_len: 8, max_inline_len: 64 };
        let mut pos = 0;
        while let Ok(Some((_, used))) = parse_request(&data[pos..], &limits) {
            prop_assert!(used > 0 && used <= data.len() - pos);
            pos += used;
        }
        let mut parser = RequestParser::new(limits);
        let mut buf = BytesMut::new();
        'outer: for piece in data.chunks(chunk) {
            buf.extend_from_slice(piece);
            loop {
                match parser.next(&mut buf) {
                    Ok(Some(req)) => prop_assert!(!req.is_empty()),
                    Ok(None) => break,
                    Err(_) => break 'outer,
                }
            }
        }
    }

    #[test]
    fn random_bytes_with_resp_shape_never_panic(
        parts in proptest::collection::vec(
            prop_oneof![
                Just(&b"*"[..]), Just(&b"$"[..]), Just(&b"\r\n"[..]), Just(&b"\r"[..]),
                Just(&b"\n"[..]), Just(&b"-1"[..]), Just(&b"3"[..]), Just(&b"0"[..]),
                Just(&b"\""[..]), Just(&b"'"[..]), Just(&b"\\x"[..]), Just(&b" "[..]),
                Just(&b"\0"[..]), Just(&b"%"[..]), Just(&b"|"[..]), Just(&b"="[..]),
                Just(&b"_"[..]), Just(&b","[..]), Just(&b"#t"[..]), Just(&b"ab"[..]),
            ],
            0..64,
        ),
    ) {
        let data = parts.concat();
        let limits = Limits::default();
        let mut pos = 0;
        while let Ok(Some((_, used))) = parse_request(&data[pos..], &limits) {
            prop_assert!(used > 0 && used <= data.len() - pos);
            pos += used;
        }
        let mut pos = 0;
        while let Ok(Some((_, used))) = parse_reply(&data[pos..]) {
            prop_assert!(used > 0 && used <= data.len() - pos);
            pos += used;
        }
    }

    #[test]
    fn random_bytes_never_panic_the_reply_parser(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut pos = 0;
        while let Ok(Some((_, used))) = parse_reply(&data[pos..]) {
            prop_assert!(used > 0 && used <= data.len() - pos);
            pos += used;
        }
    }
}
