//! Guava's `BloomFilter`, bit for bit: its sizing and its `writeTo` file
//! format, so a filter a Java service built can be served by seen and
//! written back for Java to read.
//!
//! ```text
//! u8       strategy ordinal: 0 MURMUR128_MITZ_32, 1 MURMUR128_MITZ_64
//! u8       hash count, 1 to 255
//! i32 BE   word count n, 1 to 2^31 - 1
//! n × i64 BE   the bit array's words; bit x is word x / 64, mask 1 << (x % 64)
//! ```
//!
//! The file holds no capacity, error rate or item count. A filter read from
//! one says it holds Guava's `approximateElementCount()` items, and takes
//! as its capacity the largest number of insertions for which Guava would
//! have chosen its hash count for its bits, `m ln 2 / (k - 1/2)` (Guava
//! rounds `m ln 2 / n` to `k`, so the capacity it was created with is at
//! most that, but for rates above `1/sqrt(2)`, where `k` is clamped to 1),
//! and as its error rate the textbook `(1 - e^(-k n / m))^k` at that
//! capacity, at most 0.5.
//!
//! Sizing ([`size`], and so `BF.RESERVE ... LAYOUT GUAVA`) follows Guava
//! 31; Guava 33 takes the hash count from the rate alone, which differs for
//! small capacities. The files carry their hash count, so either reads the
//! other's.
//!
//! Items are the bytes Guava's funnel feeds the hash: for
//! `Funnels.stringFunnel(UTF_8)` a string's UTF-8 bytes, for
//! `Funnels.byteArrayFunnel()` the bytes themselves. Other funnels write
//! other bytes (`Funnels.integerFunnel()` an `int`'s four little-endian
//! bytes, `unencodedCharsFunnel()` each UTF-16 unit little-endian); an
//! application that used one must give seen those same bytes.
//!
//! ```
//! use seen_core::{guava, Layout};
//!
//! // BloomFilter.create(Funnels.stringFunnel(UTF_8), 1000, 0.01)
//! let f = guava::create(1000, 0.01)?;
//! assert_eq!((f.bits(), f.hashes()), (9600, 7));
//! f.add("https://example.com/");
//! let mut file = Vec::new();
//! guava::write(&f, &mut file)?;
//! let back = guava::read(&file[..], guava::DEFAULT_MAX_BYTES)?;
//! assert_eq!(back.layout(), Layout::Guava);
//! assert!(back.contains("https://example.com/"));
//! # Ok::<(), seen_core::Error>(())
//! ```

use std::io::{BufWriter, Read, Write};

use crate::bloom::BloomFilter;
use crate::error::{corrupt, ErrorKind, Result};
use crate::raw::Layout;
use crate::sizing;

pub use crate::sizing::GUAVA_MAX_WORDS as MAX_WORDS;

/// The limit [`read`] callers pass unless they have their own: the largest
/// filter Guava can make (16 GiB).
pub const DEFAULT_MAX_BYTES: u64 = MAX_WORDS * 8;

/// Bytes before the words: strategy, hash count, word count.
pub const HEADER_BYTES: usize = 6;

/// Words read at a time.
const BUF_WORDS: usize = 8192;

/// Guava's strategy ordinal of a layout, or `None` for seen's own layouts.
pub fn strategy_ordinal(layout: Layout) -> Option<u8> {
    match layout {
        Layout::Guava32 => Some(0),
        Layout::Guava => Some(1),
        _ => None,
    }
}

pub use crate::sizing::guava_size as size;

/// A new, empty filter sized as `BloomFilter.create(funnel, capacity,
/// error_rate)` sizes it, with Guava's default strategy
/// (`MURMUR128_MITZ_64`).
pub fn create(capacity: u64, error_rate: f64) -> Result<BloomFilter> {
    BloomFilter::builder(capacity, error_rate)
        .layout(Layout::Guava)
        .build()
}

/// The capacity and error rate taken for a filter of `bits` bits and
/// `hashes` hashes, whose file does not record them: the most insertions
/// Guava would size with this many hashes for these bits, and the textbook
/// rate at that load.
pub fn implied_capacity_and_rate(bits: u64, hashes: u32) -> (u64, f64) {
    let most = bits as f64 * std::f64::consts::LN_2 / (hashes as f64 - 0.5);
    let capacity = (most as u64).max(1);
    let rate = sizing::classic_fpp(bits, hashes, capacity).clamp(f64::MIN_POSITIVE, 0.5);
    (capacity, rate)
}

/// Guava's `approximateElementCount()`: `-m ln(1 - X / m) / k` for `X` of
/// `m` bits set, rounded half up (`u64::MAX` once every bit is set, where
/// Guava's estimate is infinite).
pub fn approximate_element_count(f: &BloomFilter) -> u64 {
    let estimate = f.estimated_items();
    if estimate.is_finite() {
        (estimate + 0.5).floor() as u64
    } else {
        u64::MAX
    }
}

/// Reads one filter in Guava's `writeTo` format, refusing one of more than
/// `max_bytes` bytes before allocating it. The reader is read up to the
/// filter's end, no further (as `BloomFilter.readFrom` reads), in reads of
/// 64 KiB.
pub fn read(mut r: impl Read, max_bytes: u64) -> Result<BloomFilter> {
    let mut header = [0u8; HEADER_BYTES];
    r.read_exact(&mut header)?;
    let (layout, hashes, words) = parse_header(&header)?;
    let bytes = words * 8;
    if bytes > max_bytes {
        return Err(ErrorKind::TooLarge {
            needed: bytes,
            limit: max_bytes,
        }
        .into());
    }
    let bits = words * 64;
    let (capacity, rate) = implied_capacity_and_rate(bits, hashes);
    let mut f = BloomFilter::with_size(layout, bits, hashes, 0, capacity, rate, u64::MAX)?;
    let raw = f.raw_mut();
    let mut buf = vec![0u8; BUF_WORDS * 8];
    let mut at = 0;
    while at < words as usize {
        let n = (words as usize - at).min(BUF_WORDS);
        r.read_exact(&mut buf[..n * 8])?;
        for (i, word) in buf[..n * 8].chunks_exact(8).enumerate() {
            raw.set_word(
                at + i,
                u64::from_be_bytes(word.try_into().expect("8 bytes")),
            );
        }
        at += n;
    }
    let items = approximate_element_count(&f);
    f.set_len(items);
    Ok(f)
}

/// Reads a whole Guava file: [`read`], then refuses bytes after the
/// filter (a file that is not one Guava filter).
pub fn read_file(mut r: impl Read, max_bytes: u64) -> Result<BloomFilter> {
    let f = read(&mut r, max_bytes)?;
    let mut rest = [0u8; 1];
    if r.read(&mut rest)? != 0 {
        return Err(corrupt(format!(
            "bytes follow the Guava filter's {} words",
            f.bits() / 64
        )));
    }
    Ok(f)
}

/// Reads a Guava file held in memory, checking its length against its word
/// count before allocating anything (a header that claims gigabytes in a
/// short buffer costs nothing).
pub fn from_bytes(data: &[u8], max_bytes: u64) -> Result<BloomFilter> {
    if let Some(header) = data.get(..HEADER_BYTES) {
        let (_, _, words) = parse_header(header.try_into().expect("6 bytes"))?;
        let want = file_len(words);
        match (data.len() as u64).cmp(&want) {
            std::cmp::Ordering::Less => return Err(ErrorKind::Truncated.into()),
            std::cmp::Ordering::Greater => {
                return Err(corrupt(format!(
                    "{} bytes follow the Guava filter's {words} words",
                    data.len() as u64 - want
                )))
            }
            std::cmp::Ordering::Equal => {}
        }
    }
    read(data, max_bytes)
}

/// The length of a Guava file of `words` words.
fn file_len(words: u64) -> u64 {
    HEADER_BYTES as u64 + words.saturating_mul(8)
}

/// The layout, hash count and word count of a Guava file's first
/// [`HEADER_BYTES`] bytes, checked as Guava's `readFrom` checks them.
pub fn parse_header(header: &[u8; HEADER_BYTES]) -> Result<(Layout, u32, u64)> {
    let layout = match header[0] {
        0 => Layout::Guava32,
        1 => Layout::Guava,
        s => {
            return Err(corrupt(format!(
                "Guava strategy ordinal {s} is unknown (0 is MURMUR128_MITZ_32, \
                 1 MURMUR128_MITZ_64)"
            )))
        }
    };
    let hashes = header[1] as u32;
    if hashes == 0 {
        return Err(corrupt("a Guava filter with 0 hash functions"));
    }
    let words = i32::from_be_bytes(header[2..6].try_into().expect("4 bytes"));
    if words <= 0 {
        return Err(corrupt(format!(
            "a Guava filter of {words} words (it has at least one)"
        )));
    }
    Ok((layout, hashes, words as u64))
}

/// Whether `bytes` (a whole file of `len` bytes, of which `bytes` is the
/// start) looks like one Guava filter: a known strategy, a hash count
/// above 0 and a word count that is exactly the rest of the file.
pub fn looks_like_guava(bytes: &[u8], len: u64) -> bool {
    let Some(header) = bytes.get(..HEADER_BYTES) else {
        return false;
    };
    let header: &[u8; HEADER_BYTES] = header.try_into().expect("6 bytes");
    parse_header(header).is_ok_and(|(_, _, words)| len == file_len(words))
}

/// Writes a Guava-layout filter in Guava's `writeTo` format, which
/// `BloomFilter.readFrom` reads. A filter of another layout is refused:
/// its bits mean nothing to Guava.
pub fn write(f: &BloomFilter, w: impl Write) -> Result<()> {
    let Some(strategy) = strategy_ordinal(f.layout()) else {
        return Err(ErrorKind::Incompatible(format!(
            "a {:?} filter cannot be written as a Guava filter: only the Guava layouts can \
             (their bits are where Guava looks for them)",
            f.layout()
        ))
        .into());
    };
    let raw = f.raw();
    let words = raw.words();
    if words as u64 > MAX_WORDS {
        return Err(ErrorKind::TooLarge {
            needed: words as u64 * 8,
            limit: MAX_WORDS * 8,
        }
        .into());
    }
    let mut w = BufWriter::with_capacity(64 * 1024, w);
    w.write_all(&[strategy, f.hashes() as u8])?;
    w.write_all(&(words as i32).to_be_bytes())?;
    for i in 0..words {
        w.write_all(&raw.word(i).to_be_bytes())?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_guavas() {
        // BloomFilter.create(funnel, n, p) in Guava 31, its bit size and
        // hash count (from `bitSize()` and the file's header).
        assert_eq!(size(1000, 0.01).unwrap(), (9600, 7));
        assert_eq!(size(0, 0.03).unwrap(), size(1, 0.03).unwrap());
        assert!(size(1, 0.99).is_err(), "Guava refuses a filter of no bits");
        assert!(matches!(
            size(10, 1e-300).unwrap_err().kind(),
            ErrorKind::InvalidHashCount { .. }
        ));
        assert!(matches!(
            size(u64::MAX / 4, 0.01).unwrap_err().kind(),
            ErrorKind::TooLarge { .. }
        ));
    }

    #[test]
    fn headers_are_checked() {
        let ok = [1, 7, 0, 0, 0, 2];
        assert_eq!(parse_header(&ok).unwrap(), (Layout::Guava, 7, 2));
        assert!(parse_header(&[2, 7, 0, 0, 0, 2]).is_err());
        assert!(parse_header(&[1, 0, 0, 0, 0, 2]).is_err());
        assert!(parse_header(&[1, 7, 0, 0, 0, 0]).is_err());
        assert!(parse_header(&[1, 7, 0x80, 0, 0, 0]).is_err());
        assert!(looks_like_guava(&ok, 6 + 16));
        assert!(!looks_like_guava(&ok, 6 + 15));
        assert!(!looks_like_guava(&ok[..5], 5));
    }

    #[test]
    fn other_layouts_are_not_written() {
        let f = BloomFilter::new(100, 0.01).unwrap();
        let e = write(&f, Vec::new()).unwrap_err();
        assert!(e.to_string().contains("Blocked"), "{e}");
    }
}
