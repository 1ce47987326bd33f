//! The byte format of every filter kind (specified in `docs/FORMAT.md`).
//!
//! ```text
//! header   magic "SEENFLTR", version u16 (1, or 2 for the Guava layouts),
//!          kind u8, layout u8, hash u8,
//!          flags u8, reserved u16, seed u64, capacity u64, error f64,
//!          items u64, expansion u32, links u32            (56 bytes)
//! links    per link: size u64, hashes u32, reserved u32, capacity u64,
//!          error f64, items u64                           (40 bytes each)
//! crc      CRC-32 of header and links                      (4 bytes)
//! body     every link's words, little-endian u64, in order
//! crc      CRC-32 of the body                              (4 bytes)
//! ```
//!
//! Encoding and decoding stream: the body goes through a 64 KiB buffer,
//! straight from or into the filter's own memory, so a multi-GiB filter
//! never needs a second copy. Decoding checks the header's checksum and every
//! parameter against [`DecodeOptions`] before it allocates anything.

use std::io::{Read, Write};

use crate::bloom::{BloomFilter, DEFAULT_MAX_BYTES};
use crate::counting::CountingBloomFilter;
use crate::error::{corrupt, Error, ErrorKind, Result};
use crate::hash::HashAlgorithm;
use crate::raw::{Layout, RawFilter};
use crate::scalable::{link_mut, ChainParams, ScalableBloomFilter, MAX_LINKS};
use crate::sizing::MAX_HASHES;
use crate::stats::FilterStats;

/// The first eight bytes of every encoded filter.
pub const MAGIC: [u8; 8] = *b"SEENFLTR";

/// The newest format version this build reads and writes. Version 2 adds
/// the Guava layouts (ids 4 and 5) to version 1; a filter is written in
/// the oldest version that holds it, so that a reader
/// of version 1 reads every filter but a Guava-layout one, and refuses that
/// one as newer rather than as damaged.
pub const FORMAT_VERSION: u16 = 2;

/// The version a filter of layout id `layout_id` is written in.
fn version_for(layout_id: u8) -> u16 {
    match Layout::from_id(layout_id) {
        Some(Layout::Guava | Layout::Guava32) => 2,
        _ => 1,
    }
}

const FIXED_HEADER: usize = 56;
const LINK_HEADER: usize = 40;
const BUF: usize = 64 * 1024;

/// The kind of filter in an encoded stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterKind {
    /// [`BloomFilter`] (id 1).
    Bloom,
    /// [`ScalableBloomFilter`] (id 2).
    Scalable,
    /// [`CountingBloomFilter`] (id 3).
    Counting,
}

impl FilterKind {
    fn id(self) -> u8 {
        match self {
            FilterKind::Bloom => 1,
            FilterKind::Scalable => 2,
            FilterKind::Counting => 3,
        }
    }
    fn from_id(id: u8) -> Option<Self> {
        match id {
            1 => Some(FilterKind::Bloom),
            2 => Some(FilterKind::Scalable),
            3 => Some(FilterKind::Counting),
            _ => None,
        }
    }
}

/// The layout id of the counting filter's 4-bit counter blocks.
const COUNTING_LAYOUT_ID: u8 = 3;

/// Limits a decoder enforces before allocating.
#[derive(Clone, Debug)]
pub struct DecodeOptions {
    /// Refuse filters whose arrays need more bytes than this in total.
    pub max_bytes: u64,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// A decoded filter of any kind.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyFilter {
    /// A fixed-size filter.
    Bloom(BloomFilter),
    /// A scalable chain.
    Scalable(ScalableBloomFilter),
    /// A counting filter.
    Counting(CountingBloomFilter),
}

impl AnyFilter {
    /// Which kind this is.
    pub fn kind(&self) -> FilterKind {
        match self {
            AnyFilter::Bloom(_) => FilterKind::Bloom,
            AnyFilter::Scalable(_) => FilterKind::Scalable,
            AnyFilter::Counting(_) => FilterKind::Counting,
        }
    }

    /// Encodes the filter.
    pub fn encode<W: Write>(&self, w: W) -> Result<()> {
        match self {
            AnyFilter::Bloom(f) => f.encode(w),
            AnyFilter::Scalable(f) => f.encode(w),
            AnyFilter::Counting(f) => f.encode(w),
        }
    }

    /// Its fill, estimated items and error rate now (one pass over its
    /// bits or counters).
    pub fn stats(&self) -> FilterStats {
        match self {
            AnyFilter::Bloom(f) => f.stats(),
            AnyFilter::Scalable(f) => f.stats(),
            AnyFilter::Counting(f) => f.stats(),
        }
    }

    /// Whether it holds more than it was sized for, by `stats` (its own):
    /// its error rate now is above the one it was sized for; for a chain,
    /// which grows instead, when it is non-scaling and full.
    pub fn is_over_capacity(&self, stats: &FilterStats) -> bool {
        match self {
            AnyFilter::Scalable(f) => f.is_nonscaling() && f.is_full(),
            _ => stats.current_fpp > stats.error_rate * OVER_RATE_MARGIN,
        }
    }
}

/// How far past its asked rate a filter's rate now may be before it is
/// called over capacity (the rate's last bits are rounding).
const OVER_RATE_MARGIN: f64 = 1.0001;

/// Parameters of one link as stored.
#[derive(Clone, Copy, Debug)]
struct LinkHeader {
    size: u64,
    hashes: u32,
    capacity: u64,
    error_rate: f64,
    items: u64,
}

struct Header {
    kind: FilterKind,
    layout_id: u8,
    flags: u8,
    seed: u64,
    capacity: u64,
    error_rate: f64,
    items: u64,
    expansion: u32,
    links: Vec<LinkHeader>,
}

impl Header {
    fn to_bytes(&self) -> Vec<u8> {
        let hash = Layout::from_id(self.layout_id)
            .map_or(HashAlgorithm::Xxh3_128, Layout::hash_algorithm)
            .id();
        let mut b = Vec::with_capacity(FIXED_HEADER + LINK_HEADER * self.links.len() + 4);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&version_for(self.layout_id).to_le_bytes());
        b.push(self.kind.id());
        b.push(self.layout_id);
        b.push(hash);
        b.push(self.flags);
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&self.seed.to_le_bytes());
        b.extend_from_slice(&self.capacity.to_le_bytes());
        b.extend_from_slice(&self.error_rate.to_le_bytes());
        b.extend_from_slice(&self.items.to_le_bytes());
        b.extend_from_slice(&self.expansion.to_le_bytes());
        b.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        for l in &self.links {
            b.extend_from_slice(&l.size.to_le_bytes());
            b.extend_from_slice(&l.hashes.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&l.capacity.to_le_bytes());
            b.extend_from_slice(&l.error_rate.to_le_bytes());
            b.extend_from_slice(&l.items.to_le_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Words (u64) of one link's body.
    fn link_words(&self, l: &LinkHeader) -> u64 {
        match sized_in_bits(self.layout_id) {
            true => l.size / 64,
            false => l.size.saturating_mul(8),
        }
    }
}

/// Whether a layout id's link sizes count bits (the spread layouts), not
/// 64-byte blocks.
fn sized_in_bits(layout_id: u8) -> bool {
    Layout::from_id(layout_id).is_some_and(Layout::is_spread)
}

/// Little-endian field reader over a header buffer.
struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[self.pos..self.pos + N]);
        self.pos += N;
        out
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take())
    }
}

fn read_header<R: Read>(r: &mut R, opts: &DecodeOptions) -> Result<Header> {
    let mut fixed = [0u8; FIXED_HEADER];
    r.read_exact(&mut fixed)?;
    let mut f = Fields {
        buf: &fixed,
        pos: 0,
    };
    let magic: [u8; 8] = f.take();
    if magic != MAGIC {
        return Err(ErrorKind::BadMagic(magic).into());
    }
    let version = f.u16();
    if version > FORMAT_VERSION {
        return Err(ErrorKind::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        }
        .into());
    }
    if version == 0 {
        return Err(corrupt("format version 0 does not exist"));
    }
    let kind_id = f.u8();
    let layout_id = f.u8();
    let hash_id = f.u8();
    let flags = f.u8();
    let _reserved = f.u16();
    let seed = f.u64();
    let capacity = f.u64();
    let error_rate = f.f64();
    let items = f.u64();
    let expansion = f.u32();
    let nlinks = f.u32();
    // Bound the link table before reading it, so a corrupt count cannot make
    // us allocate or read gigabytes; the CRC below then covers it.
    if nlinks == 0 || nlinks as usize > MAX_LINKS {
        return Err(corrupt(format!(
            "link count {nlinks} is outside 1..={MAX_LINKS}"
        )));
    }
    let mut rest = vec![0u8; nlinks as usize * LINK_HEADER + 4];
    r.read_exact(&mut rest)?;
    let crc_at = rest.len() - 4;
    let stored = u32::from_le_bytes(rest[crc_at..].try_into().expect("4 bytes"));
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&fixed);
    hasher.update(&rest[..crc_at]);
    check_crc("header", stored, hasher.finalize())?;
    let mut lf = Fields {
        buf: &rest[..crc_at],
        pos: 0,
    };
    let links: Vec<LinkHeader> = (0..nlinks)
        .map(|_| {
            let size = lf.u64();
            let hashes = lf.u32();
            let _ = lf.u32();
            LinkHeader {
                size,
                hashes,
                capacity: lf.u64(),
                error_rate: lf.f64(),
                items: lf.u64(),
            }
        })
        .collect();

    let kind = FilterKind::from_id(kind_id)
        .ok_or_else(|| corrupt(format!("unknown filter kind id {kind_id}")))?;
    if version < version_for(layout_id) {
        return Err(corrupt(format!(
            "layout id {layout_id} in a filter of format version {version}"
        )));
    }
    let header = Header {
        kind,
        layout_id,
        flags,
        seed,
        capacity,
        error_rate,
        items,
        expansion,
        links,
    };
    check_header(&header, hash_id, opts)?;
    Ok(header)
}

/// Checks a header's fields against the format's rules (docs/FORMAT.md,
/// section 4), and its arrays' size against `opts`: what a reader refuses.
/// Also for filters made from outside bytes another way (a RedisBloom dump
/// header), so that nothing is taken that could not be read back.
fn check_header(h: &Header, hash_id: u8, opts: &DecodeOptions) -> Result<()> {
    let (kind, layout_id, flags, links) = (h.kind, h.layout_id, h.flags, &h.links);
    let nlinks = links.len();
    let expected_hash = match (kind, layout_id) {
        (FilterKind::Counting, COUNTING_LAYOUT_ID) => HashAlgorithm::Xxh3_128,
        (FilterKind::Bloom | FilterKind::Scalable, id) => Layout::from_id(id)
            .ok_or_else(|| corrupt(format!("unknown layout id {id}")))?
            .hash_algorithm(),
        (_, id) => {
            return Err(corrupt(format!(
                "layout id {id} does not fit a {kind:?} filter"
            )))
        }
    };
    if HashAlgorithm::from_id(hash_id) != Some(expected_hash) {
        return Err(corrupt(format!(
            "hash algorithm id {hash_id} does not fit layout id {layout_id}"
        )));
    }
    if kind != FilterKind::Scalable && nlinks != 1 {
        return Err(corrupt(format!(
            "a {kind:?} filter has 1 link, not {nlinks}"
        )));
    }
    if flags & !1 != 0 || (flags != 0 && kind != FilterKind::Scalable) {
        return Err(corrupt(format!("unknown flags {flags:#04x}")));
    }
    if kind == FilterKind::Scalable && h.expansion == 0 {
        return Err(corrupt("expansion 0"));
    }
    check_rate(h.error_rate)?;
    let mut total = 0u64;
    let mut link_items = 0u64;
    for (i, l) in links.iter().enumerate() {
        if l.hashes == 0 || l.hashes > MAX_HASHES {
            return Err(corrupt(format!("link {i}: {} hashes", l.hashes)));
        }
        if l.size == 0 || (sized_in_bits(layout_id) && !l.size.is_multiple_of(64)) {
            return Err(corrupt(format!("link {i}: size {}", l.size)));
        }
        check_rate(l.error_rate)?;
        let words = match sized_in_bits(layout_id) {
            true => l.size / 64,
            false => l
                .size
                .checked_mul(8)
                .ok_or_else(|| corrupt("size overflows"))?,
        };
        let bytes = words
            .checked_mul(8)
            .ok_or_else(|| corrupt(format!("link {i}: size {} overflows", l.size)))?;
        total = total.saturating_add(bytes);
        link_items = (link_items.checked_add(l.items))
            .ok_or_else(|| corrupt("the links' item counts overflow"))?;
    }
    if total > opts.max_bytes {
        return Err(ErrorKind::TooLarge {
            needed: total,
            limit: opts.max_bytes,
        }
        .into());
    }
    if kind == FilterKind::Scalable && link_items != h.items {
        return Err(corrupt(format!(
            "item count {} is not the sum of the links' counts {link_items}",
            h.items
        )));
    }
    Ok(())
}

fn check_rate(e: f64) -> Result<()> {
    if e.is_finite() && e > 0.0 && e < 1.0 {
        Ok(())
    } else {
        Err(corrupt(format!("error rate {e} is outside (0, 1)")))
    }
}

/// Writes the header, then `words` through a buffer, then the body CRC.
fn write_all<W: Write>(mut w: W, header: &Header, words: impl Iterator<Item = u64>) -> Result<()> {
    w.write_all(&header.to_bytes())?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = Vec::with_capacity(BUF);
    for word in words {
        buf.extend_from_slice(&word.to_le_bytes());
        if buf.len() == BUF {
            hasher.update(&buf);
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    hasher.update(&buf);
    w.write_all(&buf)?;
    w.write_all(&hasher.finalize().to_le_bytes())?;
    w.flush()?;
    Ok(())
}

/// Reads `words` words through a buffer, calling `set(i, word)` for each.
fn read_words<R: Read>(
    r: &mut R,
    words: u64,
    hasher: &mut crc32fast::Hasher,
    mut set: impl FnMut(usize, u64),
) -> Result<()> {
    let mut buf = vec![0u8; BUF];
    let mut done = 0u64;
    while done < words {
        let n = ((words - done) * 8).min(BUF as u64) as usize;
        r.read_exact(&mut buf[..n])?;
        hasher.update(&buf[..n]);
        for (j, chunk) in buf[..n].chunks_exact(8).enumerate() {
            set(
                done as usize + j,
                u64::from_le_bytes(chunk.try_into().expect("8 bytes")),
            );
        }
        done += n as u64 / 8;
    }
    Ok(())
}

fn check_body_crc<R: Read>(r: &mut R, hasher: crc32fast::Hasher) -> Result<()> {
    let mut crc = [0u8; 4];
    r.read_exact(&mut crc)?;
    check_crc("body", u32::from_le_bytes(crc), hasher.finalize())
}

/// Compares a section's stored CRC with the one computed over it.
fn check_crc(section: &'static str, stored: u32, computed: u32) -> Result<()> {
    if stored == computed {
        Ok(())
    } else {
        Err(ErrorKind::BadChecksum {
            section,
            stored,
            computed,
        }
        .into())
    }
}

fn link_header_of(f: &BloomFilter) -> LinkHeader {
    LinkHeader {
        size: f.size(),
        hashes: f.hashes(),
        capacity: f.capacity(),
        error_rate: f.error_rate(),
        items: f.len(),
    }
}

fn raw_words(raw: &RawFilter) -> impl Iterator<Item = u64> + '_ {
    (0..raw.words()).map(move |i| raw.word(i))
}

fn read_link<R: Read>(
    r: &mut R,
    h: &Header,
    l: &LinkHeader,
    hasher: &mut crc32fast::Hasher,
) -> Result<BloomFilter> {
    let layout = Layout::from_id(h.layout_id).expect("validated");
    let mut f = BloomFilter::with_size(
        layout,
        l.size,
        l.hashes,
        h.seed,
        l.capacity,
        l.error_rate,
        u64::MAX,
    )?;
    let raw = f.raw_mut();
    let blocked = layout == Layout::Blocked;
    read_words(r, h.link_words(l), hasher, |i, w| {
        // The lock bit is never stored set; clear it if a writer's was.
        let w = if blocked && i % 8 == 0 { w & !1 } else { w };
        raw.set_word(i, w)
    })?;
    f.set_len(l.items);
    Ok(f)
}

/// Decodes a filter of any kind.
pub fn decode<R: Read>(mut r: R, opts: &DecodeOptions) -> Result<AnyFilter> {
    let h = read_header(&mut r, opts)?;
    let mut hasher = crc32fast::Hasher::new();
    let out = match h.kind {
        FilterKind::Bloom => AnyFilter::Bloom(read_link(&mut r, &h, &h.links[0], &mut hasher)?),
        FilterKind::Scalable => {
            let mut links = Vec::with_capacity(h.links.len());
            for l in &h.links {
                links.push(read_link(&mut r, &h, l, &mut hasher)?);
            }
            let layout = Layout::from_id(h.layout_id).expect("validated");
            let mut f = ScalableBloomFilter::from_links(
                ChainParams {
                    layout,
                    seed: links[0].seed(),
                    capacity: h.capacity,
                    error_rate: h.error_rate,
                    expansion: h.expansion,
                    nonscaling: h.flags & 1 != 0,
                    max_bytes: opts.max_bytes,
                },
                links,
            );
            f.set_len(h.items);
            AnyFilter::Scalable(f)
        }
        FilterKind::Counting => {
            let l = &h.links[0];
            let mut f = CountingBloomFilter::with_size(
                l.size,
                l.hashes,
                h.seed,
                l.capacity,
                l.error_rate,
                u64::MAX,
            )?;
            read_words(&mut r, h.link_words(l), &mut hasher, |i, w| {
                f.set_word(i, w)
            })?;
            f.set_len(l.items);
            AnyFilter::Counting(f)
        }
    };
    check_body_crc(&mut r, hasher)?;
    Ok(out)
}

impl BloomFilter {
    /// Writes the filter in the seen byte format. Adds that run concurrently
    /// may or may not be included.
    pub fn encode<W: Write>(&self, w: W) -> Result<()> {
        let header = Header {
            kind: FilterKind::Bloom,
            layout_id: self.layout().id(),
            flags: 0,
            seed: self.seed(),
            capacity: self.capacity(),
            error_rate: self.error_rate(),
            items: self.len(),
            expansion: 0,
            links: vec![link_header_of(self)],
        };
        write_all(w, &header, raw_words(self.raw()))
    }

    /// Reads a filter written by [`BloomFilter::encode`].
    pub fn decode<R: Read>(r: R, opts: &DecodeOptions) -> Result<Self> {
        match decode(r, opts)? {
            AnyFilter::Bloom(f) => Ok(f),
            other => Err(wrong_kind("Bloom", &other)),
        }
    }
}

impl ScalableBloomFilter {
    /// Writes the chain in the seen byte format.
    pub fn encode<W: Write>(&self, w: W) -> Result<()> {
        let links = self.link_snapshot();
        let header = self.format_header(&links);
        write_all(w, &header, links.iter().flat_map(|l| raw_words(l.raw())))
    }

    fn format_header(&self, links: &[std::sync::Arc<BloomFilter>]) -> Header {
        let p = self.params();
        let link_headers: Vec<LinkHeader> = links.iter().map(|l| link_header_of(l)).collect();
        Header {
            kind: FilterKind::Scalable,
            layout_id: p.layout.id(),
            flags: p.nonscaling as u8,
            seed: p.seed,
            capacity: p.capacity,
            error_rate: p.error_rate,
            items: link_headers.iter().fold(0, |a, l| a.wrapping_add(l.items)),
            expansion: p.expansion,
            links: link_headers,
        }
    }

    /// Whether the chain's header passes every check a reader of the byte
    /// format makes (for a chain made from outside bytes).
    pub(crate) fn check_readable(&self, opts: &DecodeOptions) -> Result<()> {
        let header = self.format_header(&self.link_snapshot());
        check_header(&header, self.hash_algorithm().id(), opts)
    }

    /// Reads a chain written by [`ScalableBloomFilter::encode`].
    pub fn decode<R: Read>(r: R, opts: &DecodeOptions) -> Result<Self> {
        match decode(r, opts)? {
            AnyFilter::Scalable(f) => Ok(f),
            other => Err(wrong_kind("scalable", &other)),
        }
    }

    /// Overwrites one word of one link (exclusive access).
    pub(crate) fn set_link_word(&mut self, link: usize, index: usize, value: u64) {
        let links = self.links_mut();
        link_mut(&mut links[link]).raw_mut().set_word(index, value);
    }
}

impl CountingBloomFilter {
    /// Writes the filter in the seen byte format.
    pub fn encode<W: Write>(&self, w: W) -> Result<()> {
        write_all(w, &self.format_header(), self.words())
    }

    fn format_header(&self) -> Header {
        Header {
            kind: FilterKind::Counting,
            layout_id: COUNTING_LAYOUT_ID,
            flags: 0,
            seed: self.seed(),
            capacity: self.capacity(),
            error_rate: self.error_rate(),
            items: self.len(),
            expansion: 0,
            links: vec![LinkHeader {
                size: self.blocks(),
                hashes: self.hashes(),
                capacity: self.capacity(),
                error_rate: self.error_rate(),
                items: self.len(),
            }],
        }
    }

    /// Reads a filter written by [`CountingBloomFilter::encode`].
    pub fn decode<R: Read>(r: R, opts: &DecodeOptions) -> Result<Self> {
        match decode(r, opts)? {
            AnyFilter::Counting(f) => Ok(f),
            other => Err(wrong_kind("counting", &other)),
        }
    }
}

/// The error of a typed decode that found another kind of filter.
fn wrong_kind(expected: &str, found: &AnyFilter) -> Error {
    ErrorKind::Incompatible(format!(
        "expected a {expected} filter, found a {:?} filter",
        found.kind()
    ))
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded_bloom() -> Vec<u8> {
        let f = BloomFilter::new(1000, 0.01).unwrap();
        for i in 0..500 {
            f.add(format!("i{i}"));
        }
        let mut out = Vec::new();
        f.encode(&mut out).unwrap();
        out
    }

    #[test]
    fn round_trip_bloom() {
        let bytes = encoded_bloom();
        let g = BloomFilter::decode(&bytes[..], &DecodeOptions::default()).unwrap();
        for i in 0..500 {
            assert!(g.contains(format!("i{i}")));
        }
        assert_eq!(g.len(), 500);
        let mut again = Vec::new();
        g.encode(&mut again).unwrap();
        assert_eq!(again, bytes, "encoding is deterministic");
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encoded_bloom();
        for len in 0..bytes.len() {
            let e = decode(&bytes[..len], &DecodeOptions::default()).unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::Truncated), "len {len}: {e}");
        }
    }

    #[test]
    fn newer_version_is_rejected() {
        let mut bytes = encoded_bloom();
        bytes[8] = 3;
        let e = decode(&bytes[..], &DecodeOptions::default()).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::UnsupportedVersion {
                    found: 3,
                    supported: 2
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn guava_layouts_are_version_2_and_the_rest_version_1() {
        assert_eq!(&encoded_bloom()[8..10], &[1, 0]);
        let f = crate::guava::create(100, 0.01).unwrap();
        let mut bytes = Vec::new();
        f.encode(&mut bytes).unwrap();
        assert_eq!(&bytes[8..10], &[2, 0]);
        // Layout 4 under version 1 (header checksum mended): refused.
        bytes[8] = 1;
        let crc = crc32fast::hash(&bytes[..FIXED_HEADER + LINK_HEADER]);
        bytes[FIXED_HEADER + LINK_HEADER..FIXED_HEADER + LINK_HEADER + 4]
            .copy_from_slice(&crc.to_le_bytes());
        let e = decode(&bytes[..], &DecodeOptions::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("layout id 4 in a filter of format version 1"),
            "{e}"
        );
    }

    #[test]
    fn memory_limit_checked_before_allocating() {
        let bytes = encoded_bloom();
        let e = decode(&bytes[..], &DecodeOptions { max_bytes: 100 }).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::TooLarge { limit: 100, .. }),
            "{e}"
        );
    }
}
