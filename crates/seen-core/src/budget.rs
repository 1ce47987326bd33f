//! A memory limit shared by many filters (a server's `maxmemory`).
//!
//! A filter's own limit ([`FilterBuilder::max_bytes`](crate::FilterBuilder::max_bytes))
//! bounds that filter alone; a [`MemoryBudget`] bounds the sum over every
//! filter charged to it, including what scalable chains take when they
//! grow later. Each filter holds a [`Charge`]: the bytes it has taken
//! from the budget, given back when the charge is released or dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{ErrorKind, Result};

/// Bytes of filter memory that many filters share, under one limit.
///
/// ```
/// use seen_core::{MemoryBudget, ScalableBloomFilter};
/// let budget = MemoryBudget::new(64 << 10);
/// let mut chain = ScalableBloomFilter::new(100, 0.01).unwrap();
/// let charge = budget.charge(chain.memory_bytes()).unwrap();
/// chain.set_charge(charge);
/// // The chain grows while the budget has room, then refuses to.
/// let mut refused = None;
/// for i in 0..100_000u32 {
///     if let Err(e) = chain.add(i.to_le_bytes()) {
///         refused = Some(e);
///         break;
///     }
/// }
/// assert!(refused.is_some());
/// assert!(budget.used() <= budget.limit());
/// assert_eq!(budget.used(), chain.memory_bytes());
/// drop(chain);
/// assert_eq!(budget.used(), 0);
/// ```
#[derive(Debug)]
pub struct MemoryBudget {
    limit: AtomicU64,
    used: AtomicU64,
}

impl MemoryBudget {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: u64) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget {
            limit: AtomicU64::new(limit),
            used: AtomicU64::new(0),
        })
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Changes the limit. Charges already taken stay, even past a lower
    /// limit; later charges fail until enough is given back.
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Bytes charged and not yet given back.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Bytes left under the limit (0 when past it).
    pub fn available(&self) -> u64 {
        self.limit().saturating_sub(self.used())
    }

    /// Takes `bytes` from the budget, or fails with
    /// [`ErrorKind::TooLarge`] (nothing taken) if they are more than is
    /// left.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Result<Charge> {
        self.take(bytes)?;
        Ok(self.charged(bytes))
    }

    /// Takes `bytes` from the budget even past its limit: for filters that
    /// exist already (a store's reopen, whose limit may have been lowered
    /// since). Later charges fail until enough is given back.
    pub fn charge_anyway(self: &Arc<Self>, bytes: u64) -> Charge {
        self.used.fetch_add(bytes, Ordering::Relaxed);
        self.charged(bytes)
    }

    fn charged(self: &Arc<Self>, bytes: u64) -> Charge {
        Charge(Arc::new(ChargeInner {
            budget: self.clone(),
            bytes: Mutex::new(Some(bytes)),
        }))
    }

    fn take(&self, bytes: u64) -> Result<()> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let left = self.limit().saturating_sub(used);
            if bytes > left {
                return Err(ErrorKind::TooLarge {
                    needed: bytes,
                    limit: left,
                }
                .into());
            }
            match self.used.compare_exchange_weak(
                used,
                used + bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => used = now,
            }
        }
    }

    fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Bytes one filter holds of a [`MemoryBudget`]. Clones share the charge;
/// it goes back to the budget at [`release`](Charge::release) or when the
/// last clone is dropped, whichever comes first.
#[derive(Clone, Debug)]
pub struct Charge(Arc<ChargeInner>);

#[derive(Debug)]
struct ChargeInner {
    budget: Arc<MemoryBudget>,
    /// `None` once released.
    bytes: Mutex<Option<u64>>,
}

impl Charge {
    /// Takes `more` bytes from the budget for this charge (a chain's new
    /// sub-filter), or fails with [`ErrorKind::TooLarge`], taking nothing.
    /// A released charge takes nothing and fails (its filter has left the
    /// budget's accounts: deleted while an add still held it).
    pub(crate) fn grow(&self, more: u64) -> Result<()> {
        let mut bytes = self.0.bytes.lock().unwrap_or_else(|e| e.into_inner());
        let Some(b) = bytes.as_mut() else {
            return Err(ErrorKind::TooLarge {
                needed: more,
                limit: 0,
            }
            .into());
        };
        self.0.budget.take(more)?;
        *b += more;
        Ok(())
    }

    /// Gives back `less` bytes of a [`grow`](Self::grow) whose memory could
    /// not be allocated after all.
    pub(crate) fn shrink(&self, less: u64) {
        let mut bytes = self.0.bytes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = bytes.as_mut() {
            let less = less.min(*b);
            *b -= less;
            self.0.budget.give_back(less);
        }
    }

    /// Gives the bytes back now (a filter deleted while something may
    /// still hold it). Later calls do nothing.
    pub fn release(&self) {
        self.0.release();
    }
}

impl ChargeInner {
    fn release(&self) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = bytes.take() {
            self.budget.give_back(b);
        }
    }
}

impl Drop for ChargeInner {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_refused_past_the_limit_and_given_back_once() {
        let b = MemoryBudget::new(100);
        let a = b.charge(60).unwrap();
        let e = b.charge(41).unwrap_err();
        assert!(matches!(
            e.kind(),
            ErrorKind::TooLarge {
                needed: 41,
                limit: 40
            }
        ));
        assert_eq!(b.used(), 60);
        a.grow(40).unwrap();
        assert_eq!((b.used(), b.available()), (100, 0));
        assert!(a.grow(1).is_err());
        let clone = a.clone();
        a.release();
        assert_eq!(b.used(), 0);
        // Released (through a clone too): grows are refused, and neither a
        // second release nor the drops give anything back twice.
        assert!(clone.grow(1).is_err());
        assert!(a.grow(1).is_err());
        clone.release();
        drop(a);
        drop(clone);
        assert_eq!(b.used(), 0);
        // A growth whose memory could not be allocated is given back.
        let d = b.charge(10).unwrap();
        d.grow(50).unwrap();
        d.shrink(50);
        assert_eq!(b.used(), 10);
        drop(d);
        assert_eq!(b.used(), 0);
        let c = b.charge_anyway(150);
        assert_eq!((b.used(), b.available()), (150, 0));
        assert!(b.charge(1).is_err());
        drop(c);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn concurrent_charges_never_pass_the_limit() {
        let b = MemoryBudget::new(1000);
        let held: Vec<Charge> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    let b = b.clone();
                    s.spawn(move || {
                        (0..100)
                            .filter_map(|_| b.charge(7).ok())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(held.len(), 1000 / 7);
        assert_eq!(b.used(), 7 * (1000 / 7));
        drop(held);
        assert_eq!(b.used(), 0);
    }
}
