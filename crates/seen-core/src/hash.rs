//! Item hashing: the only place item bytes are looked at.
//!
//! Every filter turns an item into an [`ItemHash`], two 64-bit words, and
//! derives all bit positions from those words alone. That is what lets the
//! durable store log hashes instead of users' items, and the Redis backend
//! compute positions on the client.
//!
//! Three algorithms exist (see `docs/FORMAT.md` for the exact definitions
//! and the golden vectors in `tests/vectors/`):
//!
//! * [`HashAlgorithm::Xxh3_128`]: xxh3-128 of the item with a 64-bit seed;
//!   `lo` is the low 64 bits of the 128-bit result, `hi` the high 64 bits.
//! * [`HashAlgorithm::Murmur64Double`]: RedisBloom's scheme,
//!   `lo = MurmurHash64A(item, 0xc6a4a7935bd1e995)`,
//!   `hi = MurmurHash64A(item, lo)`.
//! * [`HashAlgorithm::Murmur3_128`]: Guava's `Hashing.murmur3_128()`,
//!   MurmurHash3 x64 128-bit with seed 0; `lo` is its `h1`, `hi` its `h2`.

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
    /// MurmurHash3 x64 128-bit with seed 0, as Guava's Bloom filters hash
    /// (id 3 in the byte format).
    Murmur3_128,
}

impl HashAlgorithm {
    /// The id written in the byte format.
    pub fn id(self) -> u8 {
        match self {
            HashAlgorithm::Xxh3_128 => 1,
            HashAlgorithm::Murmur64Double => 2,
            HashAlgorithm::Murmur3_128 => 3,
        }
    }

    /// The algorithm with the given byte-format id.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            1 => Some(HashAlgorithm::Xxh3_128),
            2 => Some(HashAlgorithm::Murmur64Double),
            3 => Some(HashAlgorithm::Murmur3_128),
            _ => None,
        }
    }

    /// Hashes `item` with `seed` (the seed is ignored by
    /// [`HashAlgorithm::Murmur64Double`] and [`HashAlgorithm::Murmur3_128`],
    /// whose seeds are fixed).
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
            HashAlgorithm::Murmur3_128 => {
                let (lo, hi) = murmur3_x64_128(item, 0);
                ItemHash { lo, hi }
            }
        }
    }
}

/// The 128-bit hash of one item, from which every bit position is derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ItemHash {
    /// First word: xxh3-128's low half, RedisBloom's `a`, or MurmurHash3's
    /// `h1`.
    pub lo: u64,
    /// Second word: xxh3-128's high half, RedisBloom's `b`, or MurmurHash3's
    /// `h2`.
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

/// MurmurHash3 x64 128-bit (Austin Appleby's `MurmurHash3_x64_128`, as
/// Guava's `Murmur3_128HashFunction` computes it): 16-byte blocks read as
/// two little-endian words, the 1-15 tail bytes as two more (zero-filled).
/// Returns
/// `(h1, h2)`, the first and second eight bytes of the 128-bit result read
/// little-endian.
pub fn murmur3_x64_128(key: &[u8], seed: u32) -> (u64, u64) {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let mix_k1 = |k: u64| k.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    let mix_k2 = |k: u64| k.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    let (mut h1, mut h2) = (seed as u64, seed as u64);

    let mut blocks = key.chunks_exact(16);
    for block in &mut blocks {
        let k1 = u64::from_le_bytes(block[..8].try_into().expect("8 bytes"));
        let k2 = u64::from_le_bytes(block[8..].try_into().expect("8 bytes"));
        h1 ^= mix_k1(k1);
        h1 = h1.rotate_left(27).wrapping_add(h2);
        h1 = h1.wrapping_mul(5).wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(k2);
        h2 = h2.rotate_left(31).wrapping_add(h1);
        h2 = h2.wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let word = |bytes: &[u8]| {
            bytes
                .iter()
                .enumerate()
                .fold(0u64, |w, (i, &b)| w | (b as u64) << (8 * i))
        };
        let (first, second) = tail.split_at(tail.len().min(8));
        if !second.is_empty() {
            h2 ^= mix_k2(word(second));
        }
        h1 ^= mix_k1(word(first));
    }

    let len = key.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// MurmurHash3's 64-bit finaliser.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
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

    #[test]
    fn murmur3_matches_guava() {
        // `Hashing.murmur3_128().hashString(s, UTF_8)` printed by Guava 31
        // (its bytes in order: h1 then h2, each little-endian).
        let cases = [
            ("", "00000000000000000000000000000000"),
            ("a", "897859f6655555855a890e51483ab5e6"),
            ("hello", "029bbd41b3a7d8cb191dae486a901e5b"),
            ("0123456789abcdef", "a7d14acf946de04bda08a7635c5bc387"),
            ("0123456789abcdefXYZ", "1d904a6c0275d399f39cf8ea56e2694e"),
            (
                "h\u{e9}llo w\u{f6}rld \u{2713} \u{1d11e}",
                "fcca0a4f40c4fcc1b808994d8b7e1ae4",
            ),
        ];
        for (item, want) in cases {
            let (h1, h2) = murmur3_x64_128(item.as_bytes(), 0);
            let mut bytes = h1.to_le_bytes().to_vec();
            bytes.extend_from_slice(&h2.to_le_bytes());
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, want, "{item:?}");
        }
    }
}
