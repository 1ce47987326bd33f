//! Write-ahead log records (specified in docs/FORMAT.md, section 6).
//!
//! ```text
//! u32 len   bytes from `lsn` to the end of the payload
//! u32 crc   CRC-32 of those `len` bytes
//! u64 lsn   log sequence number, +1 per record
//! u8  type  1 create, 2 add, 3 remove, 4 delete, 5 expire,
//!           6 load RedisBloom dump header, 7 load RedisBloom dump chunk,
//!           8 the end of a segment (see [`encode_segment_end`])
//! payload
//! zero padding to a multiple of 8 bytes
//! ```
//!
//! An add of one hash to a filter whose id is below 2^31 (most adds of a
//! server) has a short form of 32 bytes instead of 48:
//!
//! ```text
//! u32 id | 1 << 31   the flag tells it from a long record's `len`
//! u32 crc            CRC-32 of bytes 8..32 starting from the first word
//!                    as the previous CRC (zlib's `crc32(word, b + 8, 24)`)
//! u64 lsn
//! u128 hash
//! ```
//!
//! Items are never logged, only their 128-bit hashes: the store never
//! writes users' URLs to disk in plain text.

use seen_core::{ItemHash, Layout};

/// Most hashes in one add/remove record (1 MiB of hashes).
pub(crate) const MAX_HASHES_PER_RECORD: usize = 65_536;

/// The flag, in a record's first word, of the short form of an add of one
/// hash; a long record's first word is its length, far below it.
pub(crate) const SHORT_FLAG: u32 = 1 << 31;

/// Bytes of a short add record.
pub(crate) const SHORT_RECORD: usize = 32;

/// Bytes of the record (type 8) that ends a segment a roll left: its
/// length and CRC, the lsn field, the type, the segment's `<seq>`, padded.
pub(crate) const SEGMENT_END: usize = 32;

/// Encodes into `buf` ([`SEGMENT_END`] bytes) the record that a roll
/// writes after the last record of segment `seq` of a lane: its records
/// end there, and the lane goes on in its next segment. (Zeros where a
/// segment's records stop, with no such record, are where a lane's newest
/// segment stands, or what a power loss left.) `lsn` is that of the next
/// segment's name; replay uses none.
pub(crate) fn encode_segment_end(buf: &mut [u8], seq: u64, lsn: u64) {
    const LEN: usize = 8 + 1 + 8;
    buf[..SEGMENT_END].fill(0);
    buf[0..4].copy_from_slice(&(LEN as u32).to_le_bytes());
    buf[8..16].copy_from_slice(&lsn.to_le_bytes());
    buf[16] = SEGMENT_END_TYPE;
    buf[17..25].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32fast::hash(&buf[8..8 + LEN]);
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The type of the record [`encode_segment_end`] writes.
const SEGMENT_END_TYPE: u8 = 8;

/// Whether the add (`kind` 2) or remove (`kind` 3) record of `n` hashes
/// for filter `id` takes the short form.
pub(crate) const fn is_short(kind: u8, id: u64, n: usize) -> bool {
    kind == 2 && n == 1 && id < SHORT_FLAG as u64
}

/// The CRC of a short record (`b`, its 32 bytes): that of bytes 8..32
/// continued from the first word (zlib's `crc32(word, bytes + 8, 24)`),
/// so that it covers the id too, in one pass over contiguous bytes.
#[inline]
pub(crate) fn short_crc(b: &[u8]) -> u32 {
    let word = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"));
    let at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    crc32_words(word, [at(8), at(16), at(24)])
}

/// zlib's `crc32(prev, bytes, 24)` of three little-endian words, by
/// slicing-by-8 (the same value as `crc32fast`, which for so few bytes
/// spends more on choosing its method than on the bytes: 139 instructions
/// against about 60 here, on the path of every single-item add).
#[inline]
fn crc32_words(prev: u32, words: [u64; 3]) -> u32 {
    let t = &CRC_TABLES;
    let mut crc = !prev;
    for w in words {
        let v = w ^ crc as u64;
        crc = t[7][(v & 0xff) as usize]
            ^ t[6][((v >> 8) & 0xff) as usize]
            ^ t[5][((v >> 16) & 0xff) as usize]
            ^ t[4][((v >> 24) & 0xff) as usize]
            ^ t[3][((v >> 32) & 0xff) as usize]
            ^ t[2][((v >> 40) & 0xff) as usize]
            ^ t[1][((v >> 48) & 0xff) as usize]
            ^ t[0][(v >> 56) as usize];
    }
    !crc
}

/// Slicing-by-8 tables of zlib's CRC-32 (reflected polynomial
/// 0xEDB88320): `T[0]` is the byte table, `T[k][i]` the CRC of byte `i`
/// followed by `k` zero bytes.
static CRC_TABLES: [[u32; 256]; 8] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// Writes the short add record of `hash` for filter `id` (which
/// [`is_short`] allows) into `buf`, its 32 bytes.
pub(crate) fn encode_short(buf: &mut [u8], id: u64, lsn: u64, hash: ItemHash) {
    debug_assert!(is_short(2, id, 1));
    let buf: &mut [u8; SHORT_RECORD] = (&mut buf[..SHORT_RECORD]).try_into().expect("32 bytes");
    let word = id as u32 | SHORT_FLAG;
    // The CRC from the fields, not read back from the buffer.
    let crc = crc32_words(word, [lsn, hash.lo, hash.hi]);
    buf[0..4].copy_from_slice(&word.to_le_bytes());
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
    buf[8..16].copy_from_slice(&lsn.to_le_bytes());
    buf[16..24].copy_from_slice(&hash.lo.to_le_bytes());
    buf[24..32].copy_from_slice(&hash.hi.to_le_bytes());
}

/// How to create a filter: what a `create` record stores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FilterSpec {
    /// A fixed-size [`seen_core::BloomFilter`].
    Bloom {
        /// Items it is sized for.
        capacity: u64,
        /// False-positive rate at capacity.
        error_rate: f64,
        /// Layout.
        layout: Layout,
    },
    /// A [`seen_core::ScalableBloomFilter`].
    Scalable {
        /// Initial capacity.
        capacity: u64,
        /// Overall false-positive rate.
        error_rate: f64,
        /// Layout (`Classic` is RedisBloom's).
        layout: Layout,
        /// Growth factor.
        expansion: u32,
        /// Refuse to grow.
        nonscaling: bool,
    },
    /// A [`seen_core::CountingBloomFilter`].
    Counting {
        /// Items it is sized for.
        capacity: u64,
        /// False-positive rate at capacity.
        error_rate: f64,
    },
}

impl FilterSpec {
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let (kind, layout, nonscaling, expansion, capacity, error) = match *self {
            FilterSpec::Bloom {
                capacity,
                error_rate,
                layout,
            } => (1u8, layout.id(), 0u8, 0u32, capacity, error_rate),
            FilterSpec::Scalable {
                capacity,
                error_rate,
                layout,
                expansion,
                nonscaling,
            } => (
                2,
                layout.id(),
                nonscaling as u8,
                expansion,
                capacity,
                error_rate,
            ),
            FilterSpec::Counting {
                capacity,
                error_rate,
            } => (3, 3, 0, 0, capacity, error_rate),
        };
        out.extend_from_slice(&[kind, layout, nonscaling, 0]);
        out.extend_from_slice(&expansion.to_le_bytes());
        out.extend_from_slice(&capacity.to_le_bytes());
        out.extend_from_slice(&error.to_le_bytes());
    }

    pub(crate) fn decode(b: &[u8]) -> Option<FilterSpec> {
        if b.len() < 24 {
            return None;
        }
        let expansion = u32::from_le_bytes(b[4..8].try_into().ok()?);
        let capacity = u64::from_le_bytes(b[8..16].try_into().ok()?);
        let error_rate = f64::from_le_bytes(b[16..24].try_into().ok()?);
        match b[0] {
            1 => Some(FilterSpec::Bloom {
                capacity,
                error_rate,
                layout: Layout::from_id(b[1])?,
            }),
            2 => Some(FilterSpec::Scalable {
                capacity,
                error_rate,
                layout: Layout::from_id(b[1])?,
                expansion,
                nonscaling: b[2] != 0,
            }),
            3 => Some(FilterSpec::Counting {
                capacity,
                error_rate,
            }),
            _ => None,
        }
    }
}

pub(crate) const SPEC_BYTES: usize = 24;

/// A decoded log record.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Record {
    Create {
        id: u64,
        spec: FilterSpec,
        name: Vec<u8>,
    },
    /// Adds and removes are written by `Wal::append_hashes` and read as
    /// [`Rec::Hashes`]; these variants are their reference encoding,
    /// which the tests hold both to.
    #[cfg_attr(not(test), allow(dead_code))]
    Add {
        id: u64,
        hashes: Vec<ItemHash>,
    },
    #[cfg_attr(not(test), allow(dead_code))]
    Remove {
        id: u64,
        hashes: Vec<ItemHash>,
    },
    Delete {
        id: u64,
    },
    Expire {
        id: u64,
        /// Unix milliseconds; 0 removes the expiry.
        at_ms: i64,
    },
    /// `BF.LOADCHUNK name 1 header`: a new zeroed RedisBloom chain.
    LoadHeader {
        id: u64,
        name: Vec<u8>,
        header: Vec<u8>,
    },
    /// `BF.LOADCHUNK name iter data` (at most [`MAX_CHUNK_PER_RECORD`]
    /// bytes; larger chunks are logged as consecutive pieces).
    LoadChunk {
        id: u64,
        iter: u64,
        data: Vec<u8>,
    },
}

/// Most dump bytes in one `LoadChunk` record (keeps every record well under
/// a log segment).
pub(crate) const MAX_CHUNK_PER_RECORD: usize = 4 << 20;

impl Record {
    pub(crate) fn id(&self) -> u64 {
        match self {
            Record::Create { id, .. }
            | Record::Add { id, .. }
            | Record::Remove { id, .. }
            | Record::Delete { id }
            | Record::Expire { id, .. }
            | Record::LoadHeader { id, .. }
            | Record::LoadChunk { id, .. } => *id,
        }
    }

    /// Type byte and payload.
    fn payload(&self) -> (u8, Vec<u8>) {
        let mut p = Vec::new();
        let t = match self {
            Record::Create { id, spec, name } => {
                p.extend_from_slice(&id.to_le_bytes());
                spec.encode(&mut p);
                p.extend_from_slice(&(name.len() as u32).to_le_bytes());
                p.extend_from_slice(name);
                1
            }
            Record::Add { id, hashes } | Record::Remove { id, hashes } => {
                p.reserve(12 + 16 * hashes.len());
                p.extend_from_slice(&id.to_le_bytes());
                p.extend_from_slice(&(hashes.len() as u32).to_le_bytes());
                for h in hashes {
                    p.extend_from_slice(&h.to_le_bytes());
                }
                if matches!(self, Record::Add { .. }) {
                    2
                } else {
                    3
                }
            }
            Record::Delete { id } => {
                p.extend_from_slice(&id.to_le_bytes());
                4
            }
            Record::Expire { id, at_ms } => {
                p.extend_from_slice(&id.to_le_bytes());
                p.extend_from_slice(&at_ms.to_le_bytes());
                5
            }
            Record::LoadHeader { id, name, header } => {
                p.extend_from_slice(&id.to_le_bytes());
                p.extend_from_slice(&(name.len() as u32).to_le_bytes());
                p.extend_from_slice(name);
                p.extend_from_slice(&(header.len() as u32).to_le_bytes());
                p.extend_from_slice(header);
                6
            }
            Record::LoadChunk { id, iter, data } => {
                p.extend_from_slice(&id.to_le_bytes());
                p.extend_from_slice(&iter.to_le_bytes());
                p.extend_from_slice(&(data.len() as u32).to_le_bytes());
                p.extend_from_slice(data);
                7
            }
        };
        (t, p)
    }

    /// The whole record with `lsn`, padded to 8 bytes.
    pub(crate) fn encode(&self, lsn: u64) -> Vec<u8> {
        if let Record::Add { id, hashes } = self {
            if is_short(2, *id, hashes.len()) {
                let mut out = vec![0; SHORT_RECORD];
                encode_short(&mut out, *id, lsn, hashes[0]);
                return out;
            }
        }
        let (t, payload) = self.payload();
        let len = 9 + payload.len();
        let mut out = Vec::with_capacity((8 + len).next_multiple_of(8));
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&lsn.to_le_bytes());
        out.push(t);
        out.extend_from_slice(&payload);
        let crc = crc32fast::hash(&out[8..]);
        out[4..8].copy_from_slice(&crc.to_le_bytes());
        out.resize(out.len().next_multiple_of(8), 0);
        out
    }
}

/// The item hashes of an add or remove record, read in place (replay
/// decodes millions of them: no allocation per record).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct HashBytes<'a>(&'a [u8]);

impl<'a> HashBytes<'a> {
    /// Hashes held.
    pub(crate) fn len(&self) -> usize {
        self.0.len() / 16
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = ItemHash> + 'a {
        self.0
            .chunks_exact(16)
            .map(|c| ItemHash::from_le_bytes(c.try_into().expect("16")))
    }

    pub(crate) fn to_vec(self) -> Vec<ItemHash> {
        self.iter().collect()
    }
}

/// A record read from the log: an add or remove, its hashes read in place,
/// or any other record.
#[derive(Debug, PartialEq)]
pub(crate) enum Rec<'a> {
    Hashes {
        add: bool,
        id: u64,
        hashes: HashBytes<'a>,
    },
    Other(Record),
}

impl Rec<'_> {
    pub(crate) fn id(&self) -> u64 {
        match self {
            Rec::Hashes { id, .. } => *id,
            Rec::Other(r) => r.id(),
        }
    }
}

/// What is at an offset of a log segment.
#[derive(Debug, PartialEq)]
pub(crate) enum Parsed<'a> {
    /// A valid record, its lsn, and the padded length it occupies.
    Record(Rec<'a>, u64, usize),
    /// Zeroes: the end of the written part of the segment.
    End,
    /// The record that ends a segment a roll left (see
    /// [`encode_segment_end`]), naming the segment's `<seq>`.
    SegmentEnd(u64),
    /// Not a valid record.
    Bad(String),
}

/// Parses the record at the start of `b` (`b` runs to the segment's end).
pub(crate) fn parse(b: &[u8]) -> Parsed<'_> {
    if b.len() < 8 {
        return Parsed::End;
    }
    let word = u32::from_le_bytes(b[0..4].try_into().expect("4"));
    let crc = u32::from_le_bytes(b[4..8].try_into().expect("4"));
    if word == 0 && crc == 0 {
        return Parsed::End;
    }
    if word & SHORT_FLAG != 0 {
        if b.len() < SHORT_RECORD {
            return Parsed::Bad("short record does not fit".into());
        }
        if short_crc(b) != crc {
            return Parsed::Bad("record checksum mismatch".into());
        }
        let lsn = u64::from_le_bytes(b[8..16].try_into().expect("8"));
        let hashes = HashBytes(&b[16..SHORT_RECORD]);
        let id = u64::from(word & !SHORT_FLAG);
        return Parsed::Record(
            Rec::Hashes {
                add: true,
                id,
                hashes,
            },
            lsn,
            SHORT_RECORD,
        );
    }
    let len = word as usize;
    if len < 9 || 8 + len > b.len() {
        return Parsed::Bad(format!("record length {len} does not fit"));
    }
    let body = &b[8..8 + len];
    if crc32fast::hash(body) != crc {
        return Parsed::Bad("record checksum mismatch".into());
    }
    let lsn = u64::from_le_bytes(body[0..8].try_into().expect("8"));
    let p = &body[9..];
    let u64_at =
        |o: usize| -> Option<u64> { Some(u64::from_le_bytes(p.get(o..o + 8)?.try_into().ok()?)) };
    let id = match u64_at(0) {
        Some(id) => id,
        None => return Parsed::Bad("record too short for its type".into()),
    };
    let used = (8 + len).next_multiple_of(8);
    if body[8] == SEGMENT_END_TYPE {
        return match p.len() {
            8 => Parsed::SegmentEnd(id),
            _ => Parsed::Bad(format!("malformed record of type {SEGMENT_END_TYPE}")),
        };
    }
    if matches!(body[8], 2 | 3) {
        let hashes = (|| {
            let n = u32::from_le_bytes(p.get(8..12)?.try_into().ok()?) as usize;
            let data = p.get(12..12 + n.checked_mul(16)?)?;
            (data.len() + 12 == p.len()).then_some(HashBytes(data))
        })();
        return match hashes {
            Some(hashes) => Parsed::Record(
                Rec::Hashes {
                    add: body[8] == 2,
                    id,
                    hashes,
                },
                lsn,
                used,
            ),
            None => Parsed::Bad(format!("malformed record of type {}", body[8])),
        };
    }
    let rec = match body[8] {
        1 => (|| {
            let spec = FilterSpec::decode(p.get(8..8 + SPEC_BYTES)?)?;
            let o = 8 + SPEC_BYTES;
            let n = u32::from_le_bytes(p.get(o..o + 4)?.try_into().ok()?) as usize;
            let name = p.get(o + 4..o + 4 + n)?.to_vec();
            (o + 4 + n == p.len()).then_some(Record::Create { id, spec, name })
        })(),
        4 => (p.len() == 8).then_some(Record::Delete { id }),
        5 => u64_at(8).and_then(|at| {
            (p.len() == 16).then_some(Record::Expire {
                id,
                at_ms: at as i64,
            })
        }),
        6 => (|| {
            let n = u32::from_le_bytes(p.get(8..12)?.try_into().ok()?) as usize;
            let name = p.get(12..12 + n)?.to_vec();
            let o = 12 + n;
            let h = u32::from_le_bytes(p.get(o..o + 4)?.try_into().ok()?) as usize;
            let header = p.get(o + 4..o + 4 + h)?.to_vec();
            (o + 4 + h == p.len()).then_some(Record::LoadHeader { id, name, header })
        })(),
        7 => (|| {
            let iter = u64_at(8)?;
            let n = u32::from_le_bytes(p.get(16..20)?.try_into().ok()?) as usize;
            let data = p.get(20..20 + n)?.to_vec();
            (20 + n == p.len()).then_some(Record::LoadChunk { id, iter, data })
        })(),
        _ => None,
    };
    match rec {
        Some(r) => Parsed::Record(Rec::Other(r), lsn, used),
        None => Parsed::Bad(format!("malformed record of type {}", body[8])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_short_crc_is_crc32fasts(bytes in proptest::array::uniform32(proptest::num::u8::ANY)) {
            let word = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
            let mut h = crc32fast::Hasher::new_with_initial(word);
            h.update(&bytes[8..32]);
            proptest::prop_assert_eq!(short_crc(&bytes), h.finalize());
        }
    }

    #[test]
    fn a_short_add_has_the_layout_of_the_format_doc() {
        let h = ItemHash {
            lo: 0x0807_0605_0403_0201,
            hi: 0x100F_0E0D_0C0B_0A09,
        };
        let b = Record::Add {
            id: 7,
            hashes: vec![h],
        }
        .encode(5);
        let mut want = vec![7, 0, 0, 0x80, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0];
        want.extend(1..=16u8);
        // zlib's crc32(0x8000_0007, bytes 8..32), with zlib's own
        // definition, bit by bit, rather than the code under test.
        let mut crc = !0x8000_0007u32;
        for &byte in &want[8..32] {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        want[4..8].copy_from_slice(&(!crc).to_le_bytes());
        assert_eq!(b, want);
    }

    #[test]
    fn round_trip_every_type() {
        let h = ItemHash { lo: 1, hi: 2 };
        let recs = vec![
            Record::Create {
                id: 7,
                spec: FilterSpec::Scalable {
                    capacity: 100,
                    error_rate: 0.01,
                    layout: Layout::Classic,
                    expansion: 2,
                    nonscaling: true,
                },
                name: b"urls\0\r\n".to_vec(),
            },
            Record::Add {
                id: 7,
                hashes: vec![h; 3],
            },
            // The short form, and the long one of an id too large for it.
            Record::Add {
                id: 7,
                hashes: vec![h],
            },
            Record::Add {
                id: 1 << 31,
                hashes: vec![h],
            },
            Record::Remove {
                id: 7,
                hashes: vec![h],
            },
            Record::Delete { id: 7 },
            Record::Expire { id: 7, at_ms: -5 },
            Record::LoadHeader {
                id: 8,
                name: b"dumped".to_vec(),
                header: vec![1, 2, 3, 4, 5],
            },
            Record::LoadChunk {
                id: 8,
                iter: 1234,
                data: vec![0xAB; 77],
            },
        ];
        for (i, r) in recs.into_iter().enumerate() {
            let mut b = r.encode(100 + i as u64);
            assert_eq!(b.len() % 8, 0);
            let short = matches!(&r, Record::Add { id: 7, hashes } if hashes.len() == 1);
            assert_eq!(b[3] & 0x80 != 0, short);
            assert!(!short || b.len() == SHORT_RECORD);
            let n = b.len();
            b.extend_from_slice(&[0; 16]);
            let lsn = 100 + i as u64;
            match (&r, parse(&b)) {
                (
                    Record::Add { id, hashes } | Record::Remove { id, hashes },
                    Parsed::Record(
                        Rec::Hashes {
                            add,
                            id: pid,
                            hashes: got,
                        },
                        plsn,
                        used,
                    ),
                ) => {
                    assert_eq!(add, matches!(r, Record::Add { .. }));
                    assert_eq!(
                        (pid, got.to_vec(), plsn, used),
                        (*id, hashes.clone(), lsn, n)
                    );
                }
                (_, parsed) => assert_eq!(parsed, Parsed::Record(Rec::Other(r), lsn, n)),
            }
            assert_eq!(parse(&b[n..]), Parsed::End);
            let word = u32::from_le_bytes(b[0..4].try_into().unwrap());
            let unpadded = if word & SHORT_FLAG != 0 {
                SHORT_RECORD
            } else {
                8 + word as usize
            };
            for cut in 1..unpadded {
                if b[cut..unpadded].iter().all(|&x| x == 0) {
                    continue; // cutting zeros off leaves the same bytes
                }
                let mut torn = b[..cut].to_vec();
                torn.resize(n, 0);
                assert!(!matches!(parse(&torn), Parsed::Record(..)), "cut {cut}");
            }
        }
    }

    #[test]
    fn a_segment_end_reads_back_and_a_torn_one_does_not() {
        let mut b = [0u8; SEGMENT_END + 8];
        encode_segment_end(&mut b, 41, 9_000);
        assert_eq!(parse(&b), Parsed::SegmentEnd(41));
        assert_eq!(parse(&b[SEGMENT_END..]), Parsed::End);
        for cut in 1..25 {
            let mut torn = b;
            torn[cut..SEGMENT_END].fill(0);
            if torn[..SEGMENT_END] == b[..SEGMENT_END] {
                continue;
            }
            assert!(
                matches!(parse(&torn), Parsed::Bad(_)),
                "cut {cut}: {:?}",
                parse(&torn)
            );
        }
        // Another type's payload length is no segment end.
        let mut long = [0u8; 48];
        encode_segment_end(&mut long, 41, 9_000);
        long[0] = 25;
        let crc = crc32fast::hash(&long[8..33]);
        long[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(parse(&long), Parsed::Bad(_)));
    }
}
