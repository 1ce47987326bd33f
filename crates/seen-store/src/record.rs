//! Log records (docs/FORMAT.md, section 6.1).
//!
//! ```text
//! u32 len   bytes from `lsn` to the end of the payload (9 + payload)
//! u32 crc   CRC-32 of those `len` bytes
//! u64 lsn   log sequence number: rises from record to record
//! u8  type  1 create, 2 add, 3 remove, 4 delete, 5 expire,
//!           6 load RedisBloom dump header, 7 load RedisBloom dump chunk,
//!           8 a piece of an imported filter
//! payload
//! zero padding to a multiple of 8 bytes
//! ```
//!
//! Items are never logged, only their 128-bit hashes: the store never
//! writes users' URLs to disk in plain text.

use seen_core::{ItemHash, Layout};

/// Most hashes in one add or remove record (1 MiB of hashes).
pub(crate) const MAX_HASHES_PER_RECORD: usize = 65_536;

/// Most dump bytes in one load-chunk record; a larger chunk is logged as
/// consecutive pieces, each a valid chunk of its own. Also the most bytes
/// of an imported filter in one import record.
pub(crate) const MAX_CHUNK_PER_RECORD: usize = 4 << 20;

/// The longest filter name the store takes (a longer one could not be
/// logged within the longest record the log takes).
pub const MAX_NAME_LEN: usize = 1 << 20;

/// The longest a record can be (a load chunk's, a create's with the
/// longest name): a length field above it is damage, whatever follows.
const MAX_RECORD_LEN: usize = 8 << 20;

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

/// Bytes of an encoded [`FilterSpec`].
const SPEC_BYTES: usize = 24;

impl FilterSpec {
    fn encode(&self, out: &mut Vec<u8>) {
        let (kind, layout, nonscaling, expansion, capacity, error) = match *self {
            FilterSpec::Bloom {
                capacity,
                error_rate,
                layout,
            } => (1u8, layout.id(), false, 0u32, capacity, error_rate),
            FilterSpec::Scalable {
                capacity,
                error_rate,
                layout,
                expansion,
                nonscaling,
            } => (2, layout.id(), nonscaling, expansion, capacity, error_rate),
            FilterSpec::Counting {
                capacity,
                error_rate,
            } => (3, 3, false, 0, capacity, error_rate),
        };
        out.extend_from_slice(&[kind, layout, u8::from(nonscaling), 0]);
        out.extend_from_slice(&expansion.to_le_bytes());
        out.extend_from_slice(&capacity.to_le_bytes());
        out.extend_from_slice(&error.to_le_bytes());
    }

    fn decode(b: &[u8]) -> Option<FilterSpec> {
        let b: &[u8; SPEC_BYTES] = b.get(..SPEC_BYTES)?.try_into().ok()?;
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

/// The item hashes of an add or remove record, 16 bytes each (`lo`, `hi`,
/// little-endian): read in place from the log, so that replay decodes
/// millions without allocating.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hashes<'a>(pub(crate) &'a [u8]);

impl<'a> Hashes<'a> {
    /// The bytes of `hashes`, as a record holds them.
    pub(crate) fn bytes_of(hashes: impl IntoIterator<Item = ItemHash>) -> Vec<u8> {
        hashes.into_iter().flat_map(ItemHash::to_le_bytes).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len() / 16
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = ItemHash> + Clone + 'a {
        (self.0.chunks_exact(16)).map(|c| ItemHash::from_le_bytes(c.try_into().expect("16 bytes")))
    }
}

/// A log record.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Record<'a> {
    Create {
        id: u64,
        spec: FilterSpec,
        name: &'a [u8],
    },
    Add {
        id: u64,
        hashes: Hashes<'a>,
    },
    /// Of a counting filter.
    Remove {
        id: u64,
        hashes: Hashes<'a>,
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
        name: &'a [u8],
        header: &'a [u8],
    },
    /// `BF.LOADCHUNK name iter data`, at most [`MAX_CHUNK_PER_RECORD`]
    /// bytes.
    LoadChunk {
        id: u64,
        iter: u64,
        data: &'a [u8],
    },
    /// Bytes `offset..offset + data.len()` of a whole filter in seen's
    /// byte format, `total` bytes long (`Store::import`). The filter comes
    /// to be under `name` when the piece that completes it is applied, and
    /// only if no other filter holds the name then; one never completed
    /// never was.
    Import {
        id: u64,
        name: &'a [u8],
        total: u64,
        offset: u64,
        data: &'a [u8],
    },
}

impl Record<'_> {
    pub(crate) fn id(&self) -> u64 {
        match *self {
            Record::Create { id, .. }
            | Record::Add { id, .. }
            | Record::Remove { id, .. }
            | Record::Delete { id }
            | Record::Expire { id, .. }
            | Record::LoadHeader { id, .. }
            | Record::LoadChunk { id, .. }
            | Record::Import { id, .. } => id,
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Record::Create { .. } => 1,
            Record::Add { .. } => 2,
            Record::Remove { .. } => 3,
            Record::Delete { .. } => 4,
            Record::Expire { .. } => 5,
            Record::LoadHeader { .. } => 6,
            Record::LoadChunk { .. } => 7,
            Record::Import { .. } => 8,
        }
    }

    /// Appends the record, with `lsn`, padded to 8 bytes, to `out`.
    pub(crate) fn encode(&self, lsn: u64, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&lsn.to_le_bytes());
        out.push(self.kind());
        out.extend_from_slice(&self.id().to_le_bytes());
        let bytes = |out: &mut Vec<u8>, b: &[u8]| {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        };
        match *self {
            Record::Create { spec, name, .. } => {
                spec.encode(out);
                bytes(out, name);
            }
            Record::Add { hashes, .. } | Record::Remove { hashes, .. } => {
                out.extend_from_slice(&(hashes.len() as u32).to_le_bytes());
                out.extend_from_slice(hashes.0);
            }
            Record::Delete { .. } => {}
            Record::Expire { at_ms, .. } => out.extend_from_slice(&at_ms.to_le_bytes()),
            Record::LoadHeader { name, header, .. } => {
                bytes(out, name);
                bytes(out, header);
            }
            Record::LoadChunk { iter, data, .. } => {
                out.extend_from_slice(&iter.to_le_bytes());
                bytes(out, data);
            }
            Record::Import {
                name,
                total,
                offset,
                data,
                ..
            } => {
                bytes(out, name);
                out.extend_from_slice(&total.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
                bytes(out, data);
            }
        }
        let len = out.len() - start - 8;
        let crc = crc32fast::hash(&out[start + 8..]);
        out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
        out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        out.resize(start + (8 + len).next_multiple_of(8), 0);
    }
}

/// What is at an offset of a log segment.
#[derive(Debug)]
pub(crate) enum Parsed<'a> {
    /// A valid record, its lsn, and the padded length it occupies.
    Record(Record<'a>, u64, usize),
    /// Not a valid record: what is wrong.
    Bad(String),
}

/// Reads little-endian integers off a payload, `None` past its end.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

/// Parses the record at the start of `b`, which runs to the end of what was
/// read.
pub(crate) fn parse<'a>(b: &'a [u8]) -> Parsed<'a> {
    let Some(head) = b.get(..8) else {
        return Parsed::Bad(format!("{} bytes where a record starts", b.len()));
    };
    let len = u32::from_le_bytes(head[0..4].try_into().expect("4")) as usize;
    let crc = u32::from_le_bytes(head[4..8].try_into().expect("4"));
    let Some(body) = b
        .get(8..)
        .and_then(|rest| rest.get(..len))
        .filter(|_| (9..=MAX_RECORD_LEN).contains(&len))
    else {
        return Parsed::Bad(format!("record length {len} does not fit"));
    };
    if crc32fast::hash(body) != crc {
        return Parsed::Bad("record checksum mismatch".into());
    }
    let lsn = u64::from_le_bytes(body[0..8].try_into().expect("8"));
    let kind = body[8];
    let mut f = Fields(&body[9..]);
    let record = (|| {
        let id = f.u64()?;
        let hashes = |f: &mut Fields<'a>| -> Option<Hashes<'a>> {
            let n = f.u32()? as usize;
            Some(Hashes(f.take(n.checked_mul(16)?)?))
        };
        let r = match kind {
            1 => Record::Create {
                id,
                spec: FilterSpec::decode(f.take(SPEC_BYTES)?)?,
                name: f.bytes()?,
            },
            2 => Record::Add {
                id,
                hashes: hashes(&mut f)?,
            },
            3 => Record::Remove {
                id,
                hashes: hashes(&mut f)?,
            },
            4 => Record::Delete { id },
            5 => Record::Expire {
                id,
                at_ms: f.u64()? as i64,
            },
            6 => Record::LoadHeader {
                id,
                name: f.bytes()?,
                header: f.bytes()?,
            },
            7 => Record::LoadChunk {
                id,
                iter: f.u64()?,
                data: f.bytes()?,
            },
            8 => Record::Import {
                id,
                name: f.bytes()?,
                total: f.u64()?,
                offset: f.u64()?,
                data: f.bytes()?,
            },
            _ => return None,
        };
        f.0.is_empty().then_some(r)
    })();
    match record {
        Some(r) => Parsed::Record(r, lsn, (8 + len).next_multiple_of(8)),
        None => Parsed::Bad(format!("malformed record of type {kind}")),
    }
}
