//! The kind of value a key holds, for type checks and `TYPE`.

use seen_core::AnyFilter;
use seen_resp::Reply;

use super::replies::store_error;
use crate::state::Shared;

/// What kind of value a key holds, for type checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// A Bloom filter `BF.*` works on (scalable chain or fixed filter).
    Bloom,
    /// A counting filter (made by the library or the CLI; not a `BF.*`
    /// type).
    Counting,
}

impl KeyKind {
    pub(crate) fn of(f: &AnyFilter) -> KeyKind {
        match f {
            AnyFilter::Counting(_) => KeyKind::Counting,
            _ => KeyKind::Bloom,
        }
    }

    /// `TYPE`'s answer.
    pub(crate) fn type_name(self) -> &'static str {
        match self {
            KeyKind::Bloom => "MBbloom--",
            KeyKind::Counting => "seen-cbf-",
        }
    }
}

/// The kind of the value at `key`, if any.
pub(crate) fn key_kind(shared: &Shared, key: &[u8]) -> Result<Option<KeyKind>, Reply> {
    shared
        .store
        .with_filter(key, KeyKind::of)
        .map_err(|e| store_error(&e))
}
