//! Rebuilding filters from snapshots and log records: what an open does
//! with the whole log, and a checkpoint with the part its snapshots cover.

use std::collections::{HashMap, HashSet};

use seen_core::{AnyFilter, DecodeOptions, ScalableBloomFilter};

use crate::filter::{apply_adds, apply_removes, build};
use crate::record::Record;
use crate::snapshot::{Loaded, MAX_ID};

/// A filter rebuilt from its snapshot (if it has one) and the records
/// after it.
pub(crate) struct Rebuilt {
    pub(crate) id: u64,
    pub(crate) name: Vec<u8>,
    pub(crate) filter: AnyFilter,
    pub(crate) expire_at_ms: i64,
    /// Every record of the filter up to this lsn is in its snapshot (0:
    /// no snapshot).
    pub(crate) snap_lsn: u64,
    /// The lsn of the last record applied to it (or of its snapshot).
    pub(crate) last_lsn: u64,
}

impl From<Loaded> for Rebuilt {
    fn from(l: Loaded) -> Rebuilt {
        Rebuilt {
            id: l.id,
            name: l.name,
            filter: l.filter,
            expire_at_ms: l.expire_at_ms,
            snap_lsn: l.lsn,
            last_lsn: l.lsn,
        }
    }
}

/// Filters rebuilt by applying records in lsn order.
#[derive(Default)]
pub(crate) struct Replay {
    pub(crate) filters: HashMap<u64, Rebuilt>,
    /// Ids whose delete was applied.
    pub(crate) deleted: HashSet<u64>,
    /// Ids whose records are passed by: another group's (a checkpoint
    /// rebuilds filters a group at a time) or a snapshot put aside by a
    /// salvaging open.
    pub(crate) ignored: HashSet<u64>,
    /// With `Some`, only these ids are rebuilt.
    pub(crate) only: Option<HashSet<u64>>,
    pub(crate) records: u64,
    pub(crate) adds: u64,
    /// The highest filter id any record names.
    pub(crate) max_id: u64,
    /// Imports not complete yet: the bytes of their pieces so far.
    pub(crate) importing: HashMap<u64, Vec<u8>>,
}

impl Replay {
    /// The highest lsn a loaded snapshot covers.
    pub(crate) fn max_snap_lsn(&self) -> u64 {
        self.filters.values().map(|f| f.snap_lsn).max().unwrap_or(0)
    }

    /// Applies the record at `lsn`; `Err` says why it cannot be (damage).
    ///
    /// Records of a filter up to its snapshot's lsn are in the snapshot
    /// already, but a delete, which applies whatever its lsn: ids are never
    /// given again, so a snapshot of a deleted filter is one a checkpoint
    /// wrote after the delete, and the filter must not come back.
    pub(crate) fn apply(&mut self, lsn: u64, record: Record<'_>) -> Result<(), String> {
        let id = record.id();
        if id >= MAX_ID {
            return Err(format!("filter id {id} out of range"));
        }
        self.records += 1;
        self.max_id = self.max_id.max(id);
        if self.ignored.contains(&id) || self.only.as_ref().is_some_and(|o| !o.contains(&id)) {
            return Ok(());
        }
        if let Record::Delete { .. } = record {
            self.filters.remove(&id);
            self.deleted.insert(id);
            return Ok(());
        }
        if let Record::Import {
            name,
            total,
            offset,
            data,
            ..
        } = record
        {
            return self.import_piece(id, lsn, name, total, offset, data);
        }
        let new_filter = |filter| Rebuilt {
            id,
            name: Vec::new(),
            filter,
            expire_at_ms: 0,
            snap_lsn: 0,
            last_lsn: lsn,
        };
        let Some(f) = self.filters.get_mut(&id) else {
            if self.deleted.contains(&id) {
                return Ok(());
            }
            let made = match record {
                // No limit: the filter was made once already.
                Record::Create { spec, name, .. } => build(&spec, u64::MAX)
                    .map(|f| (f, name))
                    .map_err(|e| e.to_string()),
                Record::LoadHeader { name, header, .. } => {
                    ScalableBloomFilter::from_redis_header(header, u64::MAX)
                        .map(|c| (AnyFilter::Scalable(c), name))
                        .map_err(|e| e.to_string())
                }
                _ => return Err(format!("a record of filter {id}, which nothing creates")),
            };
            let (filter, name) = made.map_err(|e| format!("filter {id} cannot be made: {e}"))?;
            self.filters.insert(
                id,
                Rebuilt {
                    name: name.to_vec(),
                    ..new_filter(filter)
                },
            );
            return Ok(());
        };
        if lsn <= f.snap_lsn {
            return Ok(());
        }
        f.last_lsn = lsn;
        let applied = match record {
            Record::Add { hashes, .. } => {
                self.adds += hashes.len() as u64;
                apply_adds(&mut f.filter, hashes).map(drop)
            }
            Record::Remove { hashes, .. } => apply_removes(&mut f.filter, hashes).map(drop),
            Record::Expire { at_ms, .. } => {
                f.expire_at_ms = at_ms;
                Ok(())
            }
            Record::LoadChunk { iter, data, .. } => match &mut f.filter {
                AnyFilter::Scalable(c) => c.redis_load_chunk(iter, data).map_err(Into::into),
                _ => Err(
                    crate::ErrorKind::WrongKind("a dump chunk for a filter that is no chain")
                        .into(),
                ),
            },
            Record::Create { .. } | Record::LoadHeader { .. } => {
                return Err(format!("filter {id} created twice"))
            }
            Record::Delete { .. } | Record::Import { .. } => unreachable!("handled above"),
        };
        applied.map_err(|e| format!("a record filter {id} refuses: {e}"))
    }

    /// Applies a piece of an import: the filter comes to be when its last
    /// piece is applied, unless another filter holds its name by then (the
    /// live import was refused then, as `Store::import` checks at the same
    /// point of the log).
    fn import_piece(
        &mut self,
        id: u64,
        lsn: u64,
        name: &[u8],
        total: u64,
        offset: u64,
        data: &[u8],
    ) -> Result<(), String> {
        if let Some(f) = self.filters.get(&id) {
            // Its snapshot, written after the import, holds it.
            return match lsn <= f.snap_lsn {
                true => Ok(()),
                false => Err(format!("filter {id} imported twice")),
            };
        }
        if self.deleted.contains(&id) {
            return Ok(());
        }
        let bytes = self.importing.entry(id).or_default();
        let end = offset.checked_add(data.len() as u64);
        if offset != bytes.len() as u64 || end.is_none_or(|end| end > total) {
            // A piece lost to damage a salvaging open skipped: the import
            // can never complete, so it never was; the records after it
            // are kept.
            tracing::warn!(
                "filter {id}'s import has a piece at {offset} of {total} bytes after {} bytes: \
                 the import is passed by",
                bytes.len()
            );
            self.importing.remove(&id);
            self.ignored.insert(id);
            return Ok(());
        }
        bytes.extend_from_slice(data);
        if (bytes.len() as u64) < total {
            return Ok(());
        }
        let bytes = self.importing.remove(&id).unwrap_or_default();
        if self.filters.values().any(|f| f.name == name) {
            return Ok(());
        }
        let opts = DecodeOptions {
            max_bytes: u64::MAX,
        };
        let filter = seen_core::decode(&bytes[..], &opts)
            .map_err(|e| format!("filter {id}'s import cannot be read: {e}"))?;
        self.filters.insert(
            id,
            Rebuilt {
                id,
                name: name.to_vec(),
                filter,
                expire_at_ms: 0,
                snap_lsn: 0,
                last_lsn: lsn,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use seen_core::{BloomFilter, Layout};

    use super::*;
    use crate::record::{FilterSpec, Hashes};

    fn encoded(items: &[&str]) -> Vec<u8> {
        let f = BloomFilter::builder(1000, 0.01)
            .layout(Layout::Guava)
            .build()
            .unwrap();
        for i in items {
            f.add(i);
        }
        let mut out = Vec::new();
        f.encode(&mut out).unwrap();
        out
    }

    /// Applies the first `upto` bytes of an import of `bytes` as filter
    /// `id` named `name`, in pieces of `piece` bytes, from lsn `lsn` on;
    /// returns the next lsn.
    fn import(r: &mut Replay, id: u64, name: &[u8], bytes: &[u8], upto: usize, lsn: u64) -> u64 {
        let (mut lsn, piece) = (lsn, 100);
        for (i, data) in bytes[..upto].chunks(piece).enumerate() {
            let record = Record::Import {
                id,
                name,
                total: bytes.len() as u64,
                offset: (i * piece) as u64,
                data,
            };
            r.apply(lsn, record).unwrap();
            lsn += 1;
        }
        lsn
    }

    fn holds(r: &Replay, id: u64, item: &str) -> bool {
        match &r.filters[&id].filter {
            AnyFilter::Bloom(b) => b.contains(item),
            _ => false,
        }
    }

    #[test]
    fn an_import_comes_to_be_with_its_last_piece_if_its_name_is_free() {
        let mut r = Replay::default();
        let bytes = encoded(&["a", "b"]);
        let create = Record::Create {
            id: 1,
            spec: FilterSpec::Bloom {
                capacity: 10,
                error_rate: 0.01,
                layout: Layout::Blocked,
            },
            name: b"taken",
        };
        r.apply(1, create).unwrap();
        // Into a free name, in three pieces: there only after the last.
        let upto = bytes.len() / 100 * 100;
        let lsn = import(&mut r, 2, b"new", &bytes, upto, 2);
        assert!(!r.filters.contains_key(&2));
        let last = Record::Import {
            id: 2,
            name: b"new",
            total: bytes.len() as u64,
            offset: upto as u64,
            data: &bytes[upto..],
        };
        r.apply(lsn, last).unwrap();
        assert!(holds(&r, 2, "a") && holds(&r, 2, "b"));
        assert_eq!(r.filters[&2].name, b"new");
        // Into a taken name: never made (the live import was refused).
        let lsn = import(&mut r, 3, b"taken", &bytes, bytes.len(), lsn + 1);
        assert!(!r.filters.contains_key(&3));
        // Never completed: never made; a later add to it is damage.
        let lsn = import(&mut r, 4, b"cut", &bytes, 100, lsn);
        assert!(!r.filters.contains_key(&4));
        let add = Record::Add {
            id: 4,
            hashes: Hashes(&[0; 16]),
        };
        assert!(r.apply(lsn, add).is_err());
    }

    #[test]
    fn an_import_missing_a_piece_is_passed_by_and_later_records_kept() {
        let mut r = Replay::default();
        let bytes = encoded(&["a"]);
        let first = Record::Import {
            id: 5,
            name: b"x",
            total: bytes.len() as u64,
            offset: 0,
            data: &bytes[..64],
        };
        r.apply(1, first).unwrap();
        // The piece at 64 was lost: the one at 128 arrives.
        let third = Record::Import {
            id: 5,
            name: b"x",
            total: bytes.len() as u64,
            offset: 128,
            data: &bytes[128..],
        };
        r.apply(2, third).unwrap();
        assert!(!r.filters.contains_key(&5));
        assert!(r.ignored.contains(&5));
        // Another filter's import after it is made.
        import(&mut r, 6, b"y", &bytes, bytes.len(), 3);
        assert!(holds(&r, 6, "a"));
    }
}
