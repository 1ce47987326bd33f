//! RedisBloom's dump format (`BF.SCANDUMP` / `BF.LOADCHUNK`) for classic
//! scalable chains.
//!
//! The header is RedisBloom's `dumpedChainHeader` followed by one
//! `dumpedChainLink` per link, little-endian and packed:
//!
//! ```text
//! u64 total_items, u32 links, u32 options, u32 expansion       (20 bytes)
//! per link: u64 bytes, u64 bits, u64 items, f64 error, f64 bpe,
//!           u32 hashes, u64 capacity, u8 n2                   (53 bytes)
//! ```
//!
//! Iterator 0 returns `(1, header)`. Iterator `i >= 1` returns the bit bytes
//! from offset `i - 1` of all links' arrays laid end to end, at most
//! [`MAX_CHUNK`] bytes and never past the end of a link, with next iterator
//! `i + len`; `(0, [])` ends the dump. Loading takes the same pairs: the
//! header with iterator 1, then each chunk with the iterator that came with
//! it, whose data starts at offset `iter - 1 - len`.

use crate::bloom::BloomFilter;
use crate::error::{ChunkMisfit, ErrorKind, Result};
use crate::raw::Layout;
use crate::scalable::{ChainParams, ScalableBloomFilter, MAX_LINKS};
use crate::sizing::{redis_bits_per_entry, MAX_HASHES, REDIS_LN2};

/// The largest chunk `BF.SCANDUMP` returns: 16 MiB, as RedisBloom.
pub const MAX_CHUNK: u64 = 16 * 1024 * 1024;

const OPT_NOROUND: u32 = 1;
const OPT_FORCE64: u32 = 4;
const OPT_NO_SCALING: u32 = 8;
const CHAIN_HEADER: usize = 20;
const LINK_HEADER: usize = 53;

/// Why RedisBloom dump data was refused; the server maps every kind to
/// RedisBloom's own reply text.
fn bad_data(msg: impl Into<String>) -> crate::Error {
    ErrorKind::Corrupt(msg.into()).into()
}

impl ScalableBloomFilter {
    fn require_classic(&self) -> Result<()> {
        if self.layout() != Layout::Classic {
            return Err(ErrorKind::Incompatible(
                "only classic (RedisBloom) layout chains have a RedisBloom dump".into(),
            )
            .into());
        }
        Ok(())
    }

    /// `BF.INFO`'s `Size`: `32 + 64 * links + sum of link bytes`, RedisBloom's
    /// accounting of its structures.
    pub fn redis_info_size(&self) -> u64 {
        let info = self.link_info();
        32 + 64 * info.len() as u64 + info.iter().map(|l| l.bits / 8).sum::<u64>()
    }

    /// RedisBloom's dump header for this chain.
    pub fn redis_dump_header(&self) -> Result<Vec<u8>> {
        self.require_classic()?;
        let links = self.link_info();
        let mut b = Vec::with_capacity(CHAIN_HEADER + LINK_HEADER * links.len());
        let options = OPT_NOROUND
            | OPT_FORCE64
            | if self.is_nonscaling() {
                OPT_NO_SCALING
            } else {
                0
            };
        b.extend_from_slice(&self.len().to_le_bytes());
        b.extend_from_slice(&(links.len() as u32).to_le_bytes());
        b.extend_from_slice(&options.to_le_bytes());
        b.extend_from_slice(&self.expansion().to_le_bytes());
        for l in &links {
            b.extend_from_slice(&(l.bits / 8).to_le_bytes());
            b.extend_from_slice(&l.bits.to_le_bytes());
            b.extend_from_slice(&l.items.to_le_bytes());
            b.extend_from_slice(&l.error_rate.to_le_bytes());
            b.extend_from_slice(&redis_bits_per_entry(l.error_rate).to_le_bytes());
            b.extend_from_slice(&l.hashes.to_le_bytes());
            b.extend_from_slice(&l.capacity.to_le_bytes());
            b.push(0);
        }
        Ok(b)
    }

    /// One step of `BF.SCANDUMP`: `(next_iterator, data)`; `(0, [])` at the
    /// end.
    pub fn redis_scandump(&self, iter: u64) -> Result<(u64, Vec<u8>)> {
        self.require_classic()?;
        if iter == 0 {
            return Ok((1, self.redis_dump_header()?));
        }
        let links = self.link_snapshot();
        let mut pos = iter - 1;
        for link in &links {
            let bytes = link.bits() / 8;
            if pos < bytes {
                let len = (bytes - pos).min(MAX_CHUNK);
                let raw = link.raw();
                let data: Vec<u8> = (pos..pos + len)
                    .map(|b| (raw.word((b / 8) as usize) >> ((b % 8) * 8)) as u8)
                    .collect();
                return Ok((iter + len, data));
            }
            pos -= bytes;
        }
        Ok((0, Vec::new()))
    }

    /// A zeroed chain from a RedisBloom dump header (`BF.LOADCHUNK key 1`).
    /// Every field is checked, and the total size against `max_bytes`,
    /// before anything is allocated.
    pub fn from_redis_header(data: &[u8], max_bytes: u64) -> Result<Self> {
        if data.len() < CHAIN_HEADER {
            return Err(bad_data(format!(
                "dump header of {} bytes is shorter than {CHAIN_HEADER}",
                data.len()
            )));
        }
        let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().expect("4"));
        let u64_at = |o: usize| u64::from_le_bytes(data[o..o + 8].try_into().expect("8"));
        let total_items = u64_at(0);
        let nlinks = u32_at(8) as usize;
        let options = u32_at(12);
        let expansion = u32_at(16);
        if nlinks == 0 || nlinks > MAX_LINKS {
            return Err(bad_data(format!("{nlinks} links")));
        }
        if data.len() != CHAIN_HEADER + nlinks * LINK_HEADER {
            return Err(bad_data(format!(
                "dump header of {} bytes for {nlinks} links",
                data.len()
            )));
        }
        if options & !(OPT_NOROUND | OPT_FORCE64 | OPT_NO_SCALING) != 0 {
            return Err(bad_data(format!("unknown options {options:#x}")));
        }
        if options & OPT_FORCE64 == 0 || options & OPT_NOROUND == 0 {
            return Err(bad_data(format!(
                "options {options:#x}: only 64-bit hashing without power-of-two rounding is supported"
            )));
        }
        let nonscaling = options & OPT_NO_SCALING != 0;
        if expansion == 0 && !nonscaling {
            return Err(bad_data("expansion 0"));
        }
        let mut total_bytes = 0u64;
        let mut item_sum = 0u64;
        let mut shapes = Vec::with_capacity(nlinks);
        for i in 0..nlinks {
            let o = CHAIN_HEADER + i * LINK_HEADER;
            let bytes = u64_at(o);
            let bits = u64_at(o + 8);
            let items = u64_at(o + 16);
            let error = f64::from_le_bytes(data[o + 24..o + 32].try_into().expect("8"));
            let bpe = f64::from_le_bytes(data[o + 32..o + 40].try_into().expect("8"));
            let hashes = u32_at(o + 40);
            let capacity = u64_at(o + 44);
            let n2 = data[o + 52];
            if bits == 0 || bits % 64 != 0 || bytes != bits / 8 {
                return Err(bad_data(format!("link {i}: {bytes} bytes for {bits} bits")));
            }
            if hashes == 0 || hashes > MAX_HASHES || n2 != 0 || capacity == 0 {
                return Err(bad_data(format!(
                    "link {i}: {hashes} hashes, n2 {n2}, capacity {capacity}"
                )));
            }
            if !(error.is_finite() && error > 0.0 && error < 1.0) {
                return Err(bad_data(format!("link {i}: error rate {error}")));
            }
            // RedisBloom's own check of a loaded link: its hash count is
            // the one its bits per entry give. And the bits per entry are
            // the ones its error rate gives, as in every dump RedisBloom
            // writes: a chain keeps only the rate, and must dump again
            // what it loaded.
            if f64::from(hashes) != (REDIS_LN2 * bpe).ceil() {
                return Err(bad_data(format!(
                    "link {i}: {hashes} hashes for {bpe} bits per entry"
                )));
            }
            if bpe != redis_bits_per_entry(error) {
                return Err(bad_data(format!(
                    "link {i}: {bpe} bits per entry for error rate {error}"
                )));
            }
            total_bytes = total_bytes.saturating_add(bytes);
            item_sum = (item_sum.checked_add(items))
                .ok_or_else(|| bad_data("the links' item counts overflow"))?;
            shapes.push((bits, hashes, capacity, error, items));
        }
        if total_bytes > max_bytes {
            return Err(ErrorKind::TooLarge {
                needed: total_bytes,
                limit: max_bytes,
            }
            .into());
        }
        if item_sum != total_items {
            return Err(bad_data(format!(
                "total items {total_items} is not the sum of the links' {item_sum}"
            )));
        }
        let mut links = Vec::with_capacity(nlinks);
        for (bits, hashes, capacity, error, items) in shapes {
            let mut f = BloomFilter::with_size(
                Layout::Classic,
                bits,
                hashes,
                0,
                capacity,
                error,
                u64::MAX,
            )?;
            f.set_len(items);
            links.push(f);
        }
        let first = &links[0];
        let params = ChainParams {
            layout: Layout::Classic,
            seed: first.seed(),
            capacity: first.capacity(),
            error_rate: if nonscaling {
                first.error_rate()
            } else {
                first.error_rate() * 2.0
            },
            expansion: expansion.max(1),
            nonscaling,
            max_bytes,
        };
        let chain = ScalableBloomFilter::from_links(params, links);
        // Nothing is taken that a snapshot of it could not be read back as.
        let opts = crate::DecodeOptions {
            max_bytes: u64::MAX,
        };
        chain
            .check_readable(&opts)
            .map_err(|e| bad_data(e.to_string()))?;
        Ok(chain)
    }

    /// `BF.LOADCHUNK key iter data` for `iter > 1`: copies `data` into the
    /// link it falls in, at offset `iter - 1 - data.len()`.
    pub fn redis_load_chunk(&mut self, iter: u64, data: &[u8]) -> Result<()> {
        let (link, pos) = self.redis_chunk_place(iter, data.len() as u64)?;
        self.write_link_bytes(link, pos, data);
        Ok(())
    }

    /// Where [`redis_load_chunk`](Self::redis_load_chunk) would copy a chunk
    /// of `len` bytes for `iter`: the link and the byte offset in it, or the
    /// error it would return. Changes nothing (a store logs the chunk only
    /// once it knows the load will succeed).
    pub fn redis_chunk_place(&self, iter: u64, len: u64) -> Result<(usize, u64)> {
        self.require_classic()?;
        let misfit = |why, detail: String| ErrorKind::ChunkMisfit { why, detail };
        if iter == 0 || iter < len {
            let detail = format!("iterator {iter} for a chunk of {len} bytes");
            return Err(misfit(ChunkMisfit::BadIterator, detail).into());
        }
        // RedisBloom's `getLinkPos`: the chunk starts at `iter - len - 1`.
        let past_end = || {
            misfit(
                ChunkMisfit::NoLink,
                format!("iterator {iter} is past the end"),
            )
        };
        let mut pos = (iter - len).checked_sub(1).ok_or_else(past_end)?;
        let sizes: Vec<u64> = self.link_info().iter().map(|l| l.bits / 8).collect();
        for (i, bytes) in sizes.into_iter().enumerate() {
            if pos < bytes {
                if len > bytes - pos {
                    let detail =
                        format!("{len} bytes at offset {pos} overrun link {i} of {bytes} bytes");
                    return Err(misfit(ChunkMisfit::TooBig, detail).into());
                }
                return Ok((i, pos));
            }
            pos -= bytes;
        }
        Err(past_end().into())
    }

    fn write_link_bytes(&mut self, link: usize, offset: u64, data: &[u8]) {
        let links = self.link_snapshot();
        let raw_words: Vec<(usize, u64)> = {
            let raw = links[link].raw();
            let first = (offset / 8) as usize;
            let last = ((offset + data.len() as u64).div_ceil(8)) as usize;
            (first..last)
                .map(|w| {
                    let mut bytes = raw.word(w).to_le_bytes();
                    for (b, byte) in bytes.iter_mut().enumerate() {
                        let abs = w as u64 * 8 + b as u64;
                        if abs >= offset && abs < offset + data.len() as u64 {
                            *byte = data[(abs - offset) as usize];
                        }
                    }
                    (w, u64::from_le_bytes(bytes))
                })
                .collect()
        };
        drop(links);
        for (w, v) in raw_words {
            self.set_link_word(link, w, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_and_load_round_trip() {
        let f = ScalableBloomFilter::builder(10, 0.01)
            .layout(Layout::Classic)
            .build()
            .unwrap();
        for i in 0..100 {
            f.add(format!("k{i}")).unwrap();
        }
        let (mut iter, header) = f.redis_scandump(0).unwrap();
        let mut g = ScalableBloomFilter::from_redis_header(&header, 1 << 30).unwrap();
        loop {
            let (next, data) = f.redis_scandump(iter).unwrap();
            if next == 0 {
                break;
            }
            g.redis_load_chunk(next, &data).unwrap();
            iter = next;
        }
        for i in 0..100 {
            assert!(g.contains(format!("k{i}")));
        }
        assert_eq!(g.redis_dump_header().unwrap(), header);
        assert_eq!(g.len(), f.len());
    }

    #[test]
    fn garbage_headers_are_errors() {
        for data in [&b""[..], b"garbage", &[0xff; 20], &[0u8; 73]] {
            assert!(ScalableBloomFilter::from_redis_header(data, 1 << 30).is_err());
        }
        let f = ScalableBloomFilter::builder(1000, 0.01)
            .layout(Layout::Classic)
            .build()
            .unwrap();
        let header = f.redis_dump_header().unwrap();
        let e = ScalableBloomFilter::from_redis_header(&header, 100).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::TooLarge { .. }));
        // A header asking for 2^60 bytes: refused before allocating.
        let mut huge = header.clone();
        huge[20..28].copy_from_slice(&(1u64 << 60).to_le_bytes());
        huge[28..36].copy_from_slice(&(1u64 << 63).to_le_bytes());
        assert!(ScalableBloomFilter::from_redis_header(&huge, 1 << 40).is_err());
    }

    #[test]
    fn a_link_must_dump_as_it_loaded() {
        // A header whose error rate was edited (its bits per entry and hash
        // count left) must be refused: taken, it would dump with the bits
        // per entry of the new rate, a header that does not load.
        // RedisBloom writes both from the rate.
        let f = ScalableBloomFilter::builder(8, 0.01)
            .layout(Layout::Classic)
            .build()
            .unwrap();
        let header = f.redis_dump_header().unwrap();
        let error_at = CHAIN_HEADER + 24;
        let mut edited = header.clone();
        edited[error_at..error_at + 8].copy_from_slice(&0.0123f64.to_le_bytes());
        let e = ScalableBloomFilter::from_redis_header(&edited, 1 << 30).unwrap_err();
        assert!(e.to_string().contains("bits per entry"), "{e}");
        let g = ScalableBloomFilter::from_redis_header(&header, 1 << 30).unwrap();
        assert_eq!(g.redis_dump_header().unwrap(), header);
    }
}
