//! Arbitrary bytes from a client into the request parsers.
//!
//! Beyond "no panic": the stateless and stateful parsers must agree, every
//! frame must consume at least one byte and no more than there is, and
//! feeding the same bytes in pieces may only end earlier, on a size limit.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use seen_resp::{parse_request, ErrorKind, Limits, ProtocolError, RequestParser};

type Outcome = (Vec<Vec<Vec<u8>>>, Option<ProtocolError>, usize);

fn stateless(data: &[u8], limits: &Limits) -> Outcome {
    let mut requests = Vec::new();
    let mut pos = 0;
    loop {
        match parse_request(&data[pos..], limits) {
            Ok(Some((req, used))) => {
                assert!(used > 0, "no progress");
                assert!(used <= data.len() - pos, "consumed past the end");
                pos += used;
                if !req.is_empty() {
                    requests.push(req.args().iter().map(|a| a.to_vec()).collect());
                }
            }
            Ok(None) => return (requests, None, data.len() - pos),
            Err(e) => return (requests, Some(e), data.len() - pos),
        }
    }
}

fn stateful<'a>(chunks: impl Iterator<Item = &'a [u8]>, limits: Limits) -> Outcome {
    let mut parser = RequestParser::new(limits);
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            match parser.next(&mut buf) {
                Ok(Some(req)) => {
                    assert!(!req.is_empty(), "empty request not skipped");
                    assert!(buf.len() < before, "no progress");
                    requests.push(req.args().iter().map(|a| a.to_vec()).collect());
                }
                Ok(None) => break,
                Err(e) => return (requests, Some(e), buf.len()),
            }
        }
    }
    (requests, None, buf.len())
}

fn is_size_limit(e: &ProtocolError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::TooBigInlineRequest
            | ErrorKind::TooBigMbulkCountString
            | ErrorKind::TooBigBulkCountString
    )
}

fuzz_target!(|input: &[u8]| {
    let Some((&knob, data)) = input.split_first() else {
        return;
    };
    // Small limits so that every limit is reachable by short inputs.
    let limits = Limits {
        max_bulk_len: 1 << 12,
        max_multibulk_len: 64,
        max_inline_len: 256,
    };
    let whole = stateless(data, &limits);

    let (requests, error, left) = stateful(std::iter::once(data), limits);
    assert_eq!(requests, whole.0, "parsers disagree");
    assert_eq!(error, whole.1, "parsers disagree on the error");
    if error.is_none() {
        // Both stop at the same partial frame (the stateless loop also
        // steps over empty frames, reporting them as empty requests).
        assert_eq!(left, whole.2, "parsers stopped at different places");
    }

    let chunk = usize::from(knob % 64) + 1;
    let (requests, error, _) = stateful(data.chunks(chunk), limits);
    assert!(whole.0.starts_with(&requests), "pieces changed a request");
    match &error {
        None => {
            assert_eq!(requests, whole.0);
            assert_eq!(whole.1, None);
        }
        Some(e) if is_size_limit(e) => {}
        Some(e) => {
            assert_eq!(Some(e), whole.1.as_ref());
            assert_eq!(requests, whole.0);
        }
    }
});
