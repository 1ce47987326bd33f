//! The metadata key's value: what every client must agree on before it
//! computes a single bit position.
//!
//! 68 bytes, little-endian, written once by the client that creates the
//! filter (`SET key value NX`) and read by every client that opens it.
//!
//! The byte layout is in [`Metadata`]'s documentation.

use seen_core::{sizing, HashAlgorithm, Layout};

use crate::error::{lossy, ErrorKind, Result};
use crate::layout::{Plan, BLOCK_BYTES, MAX_SHARDS, MAX_SHARD_BYTES};

/// The first eight bytes of a metadata value.
pub const META_MAGIC: [u8; 8] = *b"SEENREDS";

/// The metadata version this build writes, and the newest it reads.
pub const META_VERSION: u16 = 1;

/// Length of a version 1 metadata value.
pub const META_LEN: usize = 68;

/// A filter's parameters and layout, as stored in its metadata key
/// `seen:{NAME}:meta`: 68 bytes, integers little-endian, written once by the
/// client that creates the filter (`SET key value NX`) and read and checked
/// by every client that opens it.
///
/// ```text
/// offset size field
/// 0      8    magic "SEENREDS"
/// 8      2    format version = 1
/// 10     1    layout id = 1 (blocked, docs/FORMAT.md 2.1)
/// 11     1    hash algorithm id = 1 (xxh3-128, docs/FORMAT.md 1)
/// 12     4    hashes k (1..=255)
/// 16     8    seed of the hash
/// 24     8    capacity asked for
/// 32     8    error rate asked for (f64)
/// 40     8    P = blocks per shard (>= 1, P * 64 <= 256 MiB)
/// 48     8    S = shards (1..=2^20)
/// 56     8    creation time, unix milliseconds
/// 64     4    crc32 (ISO-HDLC) of bytes 0..64
/// ```
///
/// A reader rejects another magic, version 0 or a version above
/// [`META_VERSION`] (naming both), another length, a bad CRC, and any field
/// out of range, before using any of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metadata {
    /// Items the filter was sized for.
    pub capacity: u64,
    /// False-positive rate it was sized for.
    pub error_rate: f64,
    /// Seed of the xxh3-128 item hash.
    pub seed: u64,
    /// Shards, hashes and blocks per shard.
    pub plan: Plan,
    /// When the filter was created, unix milliseconds.
    pub created_unix_ms: u64,
}

impl Metadata {
    /// The 68-byte encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(META_LEN);
        out.extend_from_slice(&META_MAGIC);
        out.extend_from_slice(&META_VERSION.to_le_bytes());
        out.push(Layout::Blocked.id());
        out.push(HashAlgorithm::Xxh3_128.id());
        out.extend_from_slice(&self.plan.hashes.to_le_bytes());
        out.extend_from_slice(&self.seed.to_le_bytes());
        out.extend_from_slice(&self.capacity.to_le_bytes());
        out.extend_from_slice(&self.error_rate.to_le_bytes());
        out.extend_from_slice(&self.plan.shard_blocks.to_le_bytes());
        out.extend_from_slice(&self.plan.shards.to_le_bytes());
        out.extend_from_slice(&self.created_unix_ms.to_le_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len(), META_LEN);
        out
    }

    /// Decodes and validates a metadata value read from `key`.
    pub fn decode(key: &[u8], bytes: &[u8]) -> Result<Metadata> {
        let corrupt = |reason: String| -> crate::Error {
            ErrorKind::CorruptMetadata {
                key: lossy(key),
                reason,
            }
            .into()
        };
        if bytes.len() < 10 || bytes[..8] != META_MAGIC {
            let shown = &bytes[..bytes.len().min(16)];
            return Err(corrupt(format!(
                "not seen metadata: {} bytes starting {:02x?}",
                bytes.len(),
                shown
            )));
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version == 0 || version > META_VERSION {
            return Err(ErrorKind::UnsupportedVersion {
                key: lossy(key),
                found: version,
                supported: META_VERSION,
            }
            .into());
        }
        if bytes.len() != META_LEN {
            return Err(corrupt(format!(
                "{} bytes long, version {version} metadata is {META_LEN}",
                bytes.len()
            )));
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let stored = u32_at(64);
        let computed = crc32fast::hash(&bytes[..64]);
        if stored != computed {
            return Err(corrupt(format!(
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            )));
        }
        if bytes[10] != Layout::Blocked.id() {
            return Err(corrupt(format!(
                "layout id {} (only 1, blocked, is used in Redis)",
                bytes[10]
            )));
        }
        if bytes[11] != HashAlgorithm::Xxh3_128.id() {
            return Err(corrupt(format!(
                "hash algorithm id {} (only 1, xxh3-128, is used in Redis)",
                bytes[11]
            )));
        }
        let hashes = u32_at(12);
        if hashes == 0 || hashes > sizing::MAX_HASHES {
            return Err(corrupt(format!(
                "{hashes} hashes (must be 1 to {})",
                sizing::MAX_HASHES
            )));
        }
        let capacity = u64_at(24);
        if capacity == 0 {
            return Err(corrupt("capacity 0".into()));
        }
        let error_rate = f64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes"));
        if sizing::check_error_rate(error_rate).is_err() {
            return Err(corrupt(format!(
                "error rate {error_rate} (must be in (0, 1))"
            )));
        }
        let shard_blocks = u64_at(40);
        if shard_blocks == 0 || shard_blocks > MAX_SHARD_BYTES / BLOCK_BYTES {
            return Err(corrupt(format!(
                "{shard_blocks} blocks per shard (must be 1 to {})",
                MAX_SHARD_BYTES / BLOCK_BYTES
            )));
        }
        let shards = u64_at(48);
        if shards == 0 || shards > MAX_SHARDS {
            return Err(corrupt(format!(
                "{shards} shards (must be 1 to {MAX_SHARDS})"
            )));
        }
        Ok(Metadata {
            capacity,
            error_rate,
            seed: u64_at(16),
            plan: Plan {
                shards,
                shard_blocks,
                hashes,
            },
            created_unix_ms: u64_at(56),
        })
    }

    /// Whether two metadata values put every item at the same bits.
    pub fn same_positions(&self, other: &Metadata) -> bool {
        self.plan == other.plan && self.seed == other.seed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Metadata {
        Metadata {
            capacity: 1_000_000,
            error_rate: 0.001,
            seed: seen_core::DEFAULT_SEED,
            plan: Plan::new(1_000_000, 0.001, 1 << 20).unwrap(),
            created_unix_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn round_trip() {
        let m = sample();
        let bytes = m.encode();
        assert_eq!(bytes.len(), META_LEN);
        assert_eq!(&bytes[..8], b"SEENREDS");
        assert_eq!(Metadata::decode(b"k", &bytes).unwrap(), m);
    }

    #[test]
    fn every_damage_is_an_error() {
        let good = sample().encode();
        // Any single flipped bit is caught (magic, version or checksum).
        for i in 0..good.len() * 8 {
            let mut bad = good.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(Metadata::decode(b"k", &bad).is_err(), "bit {i}");
        }
        for len in 0..good.len() {
            assert!(Metadata::decode(b"k", &good[..len]).is_err(), "len {len}");
        }
        let mut newer = good.clone();
        newer[8] = 2;
        let e = Metadata::decode(b"seen:{x}:meta", &newer).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::UnsupportedVersion { found: 2, .. }),
            "{e}"
        );
        let e = Metadata::decode(b"seen:{x}:meta", b"hello").unwrap_err();
        assert!(e.to_string().contains("seen:{x}:meta"), "{e}");
    }

    #[test]
    fn fields_are_validated_even_with_a_good_checksum() {
        let good = sample().encode();
        let cases: [(usize, &[u8], &str); 6] = [
            (10, &[2], "layout id 2"),
            (11, &[2], "hash algorithm id 2"),
            (12, &0u32.to_le_bytes(), "0 hashes"),
            (32, &1.5f64.to_le_bytes(), "error rate 1.5"),
            (40, &0u64.to_le_bytes(), "0 blocks per shard"),
            (48, &u64::MAX.to_le_bytes(), "shards"),
        ];
        for (at, value, needle) in cases {
            let mut bad = good.clone();
            bad[at..at + value.len()].copy_from_slice(value);
            let crc = crc32fast::hash(&bad[..64]);
            bad[64..].copy_from_slice(&crc.to_le_bytes());
            let e = Metadata::decode(b"k", &bad).unwrap_err();
            assert!(e.to_string().contains(needle), "{needle}: {e}");
        }
    }
}
