//! Item hashing: the only place item bytes are looked at.
//!
//! Every filter turns an item into an [`ItemHash`], two 64-bit words, and
//! derives all bit positions from those words alone. That is what lets the
//! durable store log hashes instead of users' items, and the Redis backend
//! compute positions on the client.
//!
//! Two algorithms exist, one per layout (see `docs/FORMAT.md` for the exact
//! definitions and the golden vectors in `tests/vectors/hash_positions.json`):
//!
//! * [`HashAlgorithm::Xxh3_128`]: xxh3-128 of the item with a 64-bit seed;
//!   `lo` is the low 64 bits of the 128-bit result, `hi` the high 64 bits.
//! * [`HashAlgorithm::Murmur64Double`]: RedisBloom's scheme,
//!   `lo = MurmurHash64A(item, 0xc6a4a7935bd1e995)`,
//!   `hi = MurmurHash64A(item, lo)`.

/// The seed RedisBloom passes to its first MurmurHash64A call.
pub const REDISBLOOM_SEED: u64 = 0xc6a4a7935bd1e995;

/// The default seed of the blocked layout's xxh3-128 hash.
///
/// Fixed, never random: a filter that is saved or shared must hash the same
/// way in every process, forever.
pub const DEFAULT_SEED: u64 = 0x5EE0_B100_F11E_5EED;

/// Which hash function turns item bytes into an [`ItemHash`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HashAlgorithm {
    /// xxh3-128 with a seed (id 1 in the byte format).
    Xxh3_128,
    /// MurmurHash64A twice, as RedisBloom does (id 2 in the byte format).
    Murmur64Double,
}

impl HashAlgorithm {
    /// The id written in the byte format.
    pub fn id(self) -> u8 {
        match self {
            HashAlgorithm::Xxh3_128 => 1,
            HashAlgorithm::Murmur64Double => 2,
        }
    }

    /// The algorithm with the given byte-format id.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            1 => Some(HashAlgorithm::Xxh3_128),
            2 => Some(HashAlgorithm::Murmur64Double),
            _ => None,
        }
    }

    /// Hashes `item` with `seed` (the seed is ignored by
    /// [`HashAlgorithm::Murmur64Double`], whose seed is fixed).
    #[inline]
    pub fn hash(self, item: &[u8], seed: u64) -> ItemHash {
        match self {
            HashAlgorithm::Xxh3_128 => {
                let h = xxhash_rust::xxh3::xxh3_128_with_seed(item, seed);
                ItemHash {
                    lo: h as u64,
                    hi: (h >> 64) as u64,
                }
            }
            HashAlgorithm::Murmur64Double => {
                let lo = murmur64a(item, REDISBLOOM_SEED);
                let hi = murmur64a(item, lo);
                ItemHash { lo, hi }
            }
        }
    }
}

/// The 128-bit hash of one item, from which every bit position is derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ItemHash {
    /// First word: xxh3-128's low half, or RedisBloom's `a`.
    pub lo: u64,
    /// Second word: xxh3-128's high half, or RedisBloom's `b`.
    pub hi: u64,
}

impl ItemHash {
    /// The hash as 16 little-endian bytes (`lo` then `hi`), as logged.
    pub fn to_le_bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.lo.to_le_bytes());
        out[8..].copy_from_slice(&self.hi.to_le_bytes());
        out
    }

    /// The inverse of [`ItemHash::to_le_bytes`].
    pub fn from_le_bytes(bytes: [u8; 16]) -> Self {
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&bytes[..8]);
        hi.copy_from_slice(&bytes[8..]);
        ItemHash {
            lo: u64::from_le_bytes(lo),
            hi: u64::from_le_bytes(hi),
        }
    }
}

/// MurmurHash64A (Austin Appleby), exactly as in RedisBloom's
/// `deps/murmur2/MurmurHash2.c` (`MurmurHash64A_Bloom`): 8-byte blocks read
/// little-endian, the tail mixed in byte by byte.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let len = key.len();
    let mut h: u64 = seed ^ (len as u64).wrapping_mul(M);

    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut k = u64::from_le_bytes(chunk.try_into().expect("chunk of 8"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_hash_bytes_round_trip() {
        let h = ItemHash {
            lo: 0x0102030405060708,
            hi: 0xa0b0c0d0e0f00011,
        };
        assert_eq!(ItemHash::from_le_bytes(h.to_le_bytes()), h);
        assert_eq!(h.to_le_bytes()[0], 0x08);
    }

    #[test]
    fn murmur_known_values() {
        // Reference values of the canonical MurmurHash64A (seed 0), as
        // published with SMHasher's implementation.
        assert_eq!(murmur64a(b"", 0), 0);
        // Tail-only and block+tail inputs hash differently from each other and
        // from the same input with another seed.
        let a = murmur64a(b"hello", REDISBLOOM_SEED);
        let b = murmur64a(b"hello", a);
        assert_ne!(a, b);
        assert_ne!(murmur64a(b"hello world!", 1), murmur64a(b"hello world!", 2));
    }
}
