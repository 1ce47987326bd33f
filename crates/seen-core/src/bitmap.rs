//! The bit array under every filter: 64-byte aligned blocks of atomic words.
//!
//! Atomics (not plain words) so that filters can be shared between threads
//! through `&self`; on x86-64 and AArch64 a relaxed atomic load or store is
//! the same instruction as a plain one, so the single-threaded paths pay
//! nothing for it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{ErrorKind, Result};

/// Words in one block.
pub(crate) const BLOCK_WORDS: usize = 8;

/// One cache line of bits.
#[repr(C, align(64))]
#[derive(Default)]
pub(crate) struct Block(pub(crate) [AtomicU64; BLOCK_WORDS]);

/// A fixed-size array of bits stored as whole blocks.
pub(crate) struct Bitmap {
    blocks: Vec<Block>,
    /// Words in use (the last block may be partly unused by the classic
    /// layout, whose size is only a multiple of 64 bits).
    words: usize,
}

impl Bitmap {
    /// A zeroed bitmap of `words` 64-bit words, or an error if the allocator
    /// refuses (never an abort).
    pub(crate) fn zeroed(words: u64) -> Result<Bitmap> {
        let bytes = words.saturating_mul(8);
        let words_usize = usize::try_from(words).map_err(|_| ErrorKind::OutOfMemory(bytes))?;
        let nblocks = words_usize.div_ceil(BLOCK_WORDS);
        let mut blocks = Vec::new();
        blocks
            .try_reserve_exact(nblocks)
            .map_err(|_| ErrorKind::OutOfMemory(bytes))?;
        advise_huge_pages(&mut blocks);
        blocks.resize_with(nblocks, Block::default);
        Ok(Bitmap {
            blocks,
            words: words_usize,
        })
    }

    #[inline(always)]
    pub(crate) fn block(&self, index: usize) -> &Block {
        &self.blocks[index]
    }

    #[inline(always)]
    pub(crate) fn block_mut(&mut self, index: usize) -> &mut Block {
        &mut self.blocks[index]
    }

    #[inline(always)]
    pub(crate) fn word(&self, index: usize) -> &AtomicU64 {
        &self.blocks[index / BLOCK_WORDS].0[index % BLOCK_WORDS]
    }

    #[inline(always)]
    pub(crate) fn word_mut(&mut self, index: usize) -> &mut u64 {
        self.blocks[index / BLOCK_WORDS].0[index % BLOCK_WORDS].get_mut()
    }

    /// Number of words in use.
    pub(crate) fn words(&self) -> usize {
        self.words
    }

    /// Number of blocks.
    pub(crate) fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Hints the CPU to start loading `block` into cache.
    #[inline(always)]
    pub(crate) fn prefetch(&self, block: usize) {
        if let Some(b) = self.blocks.get(block) {
            prefetch_read(b as *const Block as *const i8);
        }
    }

    /// Number of set bits among the words in use, with `mask` applied to
    /// every word (to leave out lock bits).
    pub(crate) fn count_ones_masked(&self, mask: impl Fn(usize) -> u64) -> u64 {
        (0..self.words)
            .map(|w| (self.word(w).load(Ordering::Relaxed) & mask(w)).count_ones() as u64)
            .sum()
    }

    /// Bytes of memory held by the array.
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.blocks.len() as u64 * 64
    }
}

/// Asks Linux to back a large, not yet touched allocation with 2 MiB
/// pages: zeroing a 1 GiB filter then takes 512 page faults instead of
/// 262,144, the largest part of the time a large filter takes to create or
/// load. Fewer TLB misses also speed up lookups in large filters.
fn advise_huge_pages(blocks: &mut Vec<Block>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = blocks.capacity() * std::mem::size_of::<Block>();
        if bytes < 2 * HUGE {
            return;
        }
        let start = blocks.as_mut_ptr() as usize;
        let aligned = start.next_multiple_of(HUGE);
        let len = (start + bytes - aligned) / HUGE * HUGE;
        // SAFETY: [aligned, aligned + len) lies inside the vector's own
        // allocation (capacity `bytes` from `start`), which nothing else
        // uses; MADV_HUGEPAGE only changes how the kernel backs those pages,
        // never their contents. A refusal (an old kernel) is harmless.
        let _ = unsafe {
            rustix::mm::madvise(aligned as *mut _, len, rustix::mm::Advice::LinuxHugepage)
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = blocks;
}

#[inline(always)]
pub(crate) fn prefetch_read(ptr: *const i8) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is
        // in the target's baseline), and it only hints the cache: it never
        // faults or reads memory into the program, whatever the address.
        // Batched lookups on a filter larger than the cache overlap their
        // cache misses with it instead of waiting for one at a time.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ptr;
    }
}

/// A spin lock striped by item hash, shared by all filters in the process.
///
/// Used where an add must be exact ("exactly one caller is told new") and
/// the item's bits are not all in one block: the classic layout and the
/// scalable chain. Two adds of the same item always take the same stripe;
/// adds of different items rarely share one. Critical sections are a few
/// atomic operations long, so spinning (with a yield after a while) beats
/// parking.
pub(crate) struct StripeGuard {
    stripe: &'static PaddedFlag,
}

#[repr(align(64))]
pub(crate) struct PaddedFlag(std::sync::atomic::AtomicBool);

const STRIPES: usize = 1024;

#[allow(clippy::declare_interior_mutable_const)] // only used to build the array below
const UNLOCKED: PaddedFlag = PaddedFlag(std::sync::atomic::AtomicBool::new(false));
static STRIPE_LOCKS: [PaddedFlag; STRIPES] = [UNLOCKED; STRIPES];

impl StripeGuard {
    /// Locks the stripe of an item with hash word `key`.
    pub(crate) fn lock(key: u64) -> StripeGuard {
        let stripe = &STRIPE_LOCKS[(key >> 54) as usize % STRIPES];
        let mut spins = 0u32;
        while stripe
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        StripeGuard { stripe }
    }
}

impl Drop for StripeGuard {
    fn drop(&mut self) {
        self.stripe.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_is_zero_and_aligned() {
        let b = Bitmap::zeroed(20).unwrap();
        assert_eq!(b.words(), 20);
        assert_eq!(b.blocks(), 3);
        assert_eq!(b.count_ones_masked(|_| !0), 0);
        assert_eq!(b.block(1) as *const Block as usize % 64, 0);
    }

    #[test]
    fn absurd_size_is_an_error_not_an_abort() {
        let err = Bitmap::zeroed(u64::MAX / 16).err().expect("must fail");
        assert!(matches!(err.kind(), ErrorKind::OutOfMemory(_)));
    }
}
