//! A filter's life under its name: created (or loaded from a RedisBloom
//! dump header, or imported whole), given an expiry, deleted.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use seen_core::{AnyFilter, ScalableBloomFilter};

use crate::entry::{now_ms, Entry};
use crate::error::{ErrorKind, Result};
use crate::filter::{self};
use crate::log::lock;
use crate::record::{FilterSpec, Record, MAX_CHUNK_PER_RECORD, MAX_NAME_LEN};
use crate::store::{Pending, Store};

impl Store {
    /// Creates a filter. Fails with [`ErrorKind::Exists`] if the name is
    /// taken.
    pub fn create(&self, name: &[u8], spec: &FilterSpec) -> Result<()> {
        self.create_limited(name, spec, self.inner.opts.max_filter_bytes)
    }

    /// [`create`](Self::create), refusing a filter of more than `max_bytes`
    /// bytes (or of more than the store's own limit), before anything is
    /// allocated or logged.
    pub fn create_limited(&self, name: &[u8], spec: &FilterSpec, max_bytes: u64) -> Result<()> {
        let large = filter::builds_large(spec);
        self.create_with(
            name,
            max_bytes,
            large,
            |room| filter::build(spec, room),
            |id| Record::Create {
                id,
                spec: *spec,
                name,
            },
        )
    }

    /// `BF.LOADCHUNK name 1 header`: creates a zeroed RedisBloom chain from
    /// a dump header, refusing one of more than `max_bytes` (or the store's
    /// limit) before allocating. Fails with [`ErrorKind::Exists`] if the
    /// name is taken.
    pub fn load_redis_header(&self, name: &[u8], header: &[u8], max_bytes: u64) -> Result<()> {
        let make = |room| {
            Ok(AnyFilter::Scalable(ScalableBloomFilter::from_redis_header(
                header, room,
            )?))
        };
        self.create_with(name, max_bytes, true, make, |id| Record::LoadHeader {
            id,
            name,
            header,
        })
    }

    /// Puts a whole filter under `name` (`BF.IMPORT`), refusing one of
    /// more than `max_bytes` bytes (or of more than the store's limit or
    /// what `maxmemory` leaves). Fails with [`ErrorKind::Exists`] if the
    /// name is taken.
    ///
    /// The filter is logged in seen's byte format, in pieces of at most 4
    /// MiB, and comes to be under its name with its last piece: a crash or
    /// an error part way leaves no filter, never part of one. No checkpoint
    /// runs meanwhile, so every piece stays in the log until a checkpoint
    /// has the whole filter in a snapshot.
    pub fn import(&self, name: &[u8], filter: AnyFilter, max_bytes: u64) -> Result<()> {
        self.check_new_name(name)?;
        let bytes = filter::memory_bytes(&filter);
        let limit = max_bytes.min(self.inner.opts.max_filter_bytes);
        if bytes > limit {
            let e = seen_core::ErrorKind::TooLarge {
                needed: bytes,
                limit,
            };
            return Err(seen_core::Error::from(e).into());
        }
        let charge = self.inner.budget.charge(bytes)?;
        let mut encoded = Vec::new();
        filter.encode(&mut encoded)?;
        let lsn: Result<u64> = self.blocking(|| {
            let _no_checkpoint = lock(&self.inner.checkpointing);
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let bytes: &[u8] = &encoded;
            let piece = |offset: usize| Record::Import {
                id,
                name,
                total: bytes.len() as u64,
                offset: offset as u64,
                data: &bytes[offset..bytes.len().min(offset + MAX_CHUNK_PER_RECORD)],
            };
            let offsets: Vec<usize> = (0..bytes.len()).step_by(MAX_CHUNK_PER_RECORD).collect();
            let (&last, before) = offsets.split_last().expect("an encoded filter has bytes");
            for &offset in before {
                self.inner.log.write(&piece(offset))?;
            }
            let mut map = self.filters_mut();
            if map.contains_key(name) {
                return Err(ErrorKind::Exists.into());
            }
            let lsn = self.inner.log.write(&piece(last))?;
            let entry = Entry::new(id, name.to_vec(), filter, charge, &self.inner.opts);
            entry.write().last_lsn = lsn;
            map.insert(name.to_vec(), Arc::new(entry));
            Ok(lsn)
        });
        self.wait(Pending(lsn?))
    }

    /// What a new filter's name must pass first: a usable log, a name
    /// short enough to log, and no live filter under it (an expired one
    /// goes).
    fn check_new_name(&self, name: &[u8]) -> Result<()> {
        self.usable(false)?;
        if name.len() > MAX_NAME_LEN {
            return Err(ErrorKind::NameTooLong {
                len: name.len(),
                max: MAX_NAME_LEN,
            }
            .into());
        }
        if self.live(name)?.is_some() {
            return Err(ErrorKind::Exists.into());
        }
        Ok(())
    }

    fn create_with<'a>(
        &self,
        name: &'a [u8],
        max_bytes: u64,
        large: bool,
        make: impl FnOnce(u64) -> Result<AnyFilter>,
        record: impl Fn(u64) -> Record<'a>,
    ) -> Result<()> {
        self.check_new_name(name)?;
        let room = max_bytes
            .min(self.inner.opts.max_filter_bytes)
            .min(self.inner.budget.available());
        let filter = match large {
            true => self.blocking(|| make(room)),
            false => make(room),
        }?;
        let charge = self.inner.budget.charge(filter::memory_bytes(&filter))?;
        let lsn = {
            let mut map = self.filters_mut();
            // Made meanwhile by another caller (`live` above took an
            // expired one away).
            if map.contains_key(name) {
                charge.release();
                return Err(ErrorKind::Exists.into());
            }
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let logged = self.inner.log.write(&record(id));
            let lsn = logged.inspect_err(|_| charge.release())?;
            let entry = Entry::new(id, name.to_vec(), filter, charge, &self.inner.opts);
            entry.write().last_lsn = lsn;
            map.insert(name.to_vec(), Arc::new(entry));
            lsn
        };
        self.wait(Pending(lsn))
    }

    /// Deletes a filter; `false` if there was none, or only one that had
    /// expired (which goes all the same), as Redis's `DEL` counts keys.
    pub fn delete(&self, name: &[u8]) -> Result<bool> {
        self.usable(false)?;
        self.delete_entry(name, None, false)
    }

    /// Deletes the filter of `name` (with `only`, if it is still that one;
    /// with `expired_only`, if it has expired): whether it was there and
    /// live.
    pub(crate) fn delete_entry(
        &self,
        name: &[u8],
        only: Option<u64>,
        expired_only: bool,
    ) -> Result<bool> {
        let (live, lsn) = {
            let mut map = self.filters_mut();
            let Some(e) = map.get(name).cloned() else {
                return Ok(false);
            };
            if only.is_some_and(|id| id != e.id) {
                return Ok(false);
            }
            // Held while the delete is logged: no add of the filter comes
            // after it in the log.
            let mut st = e.write();
            let live = !e.expired();
            if expired_only && live {
                return Ok(false);
            }
            let lsn = self.inner.log.write(&Record::Delete { id: e.id })?;
            // Callers waiting for it look its name up again.
            st.deleted = true;
            drop(st);
            e.charge.release();
            lock(&self.inner.deleted).push((e.id, lsn));
            map.remove(name);
            (live, lsn)
        };
        self.wait(Pending(lsn))?;
        Ok(live)
    }

    /// Sets (or with `None` clears) the time a filter expires as a whole.
    pub fn expire_at(&self, name: &[u8], at: Option<SystemTime>) -> Result<bool> {
        self.usable(false)?;
        let Some(entry) = self.live(name)? else {
            return Ok(false);
        };
        let at_ms = at.map_or(0, |t| {
            t.duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_millis() as i64)
                .max(1)
        });
        let lsn = {
            let mut st = entry.write();
            if st.deleted || entry.expired() {
                drop(st);
                self.delete_entry(name, Some(entry.id), true)?;
                return Ok(false);
            }
            st.last_lsn = self.inner.log.write(&Record::Expire {
                id: entry.id,
                at_ms,
            })?;
            entry.expire_at_ms.store(at_ms, Ordering::Relaxed);
            st.last_lsn
        };
        self.wait(Pending(lsn))?;
        if at_ms != 0 && at_ms <= now_ms() {
            self.delete_entry(name, Some(entry.id), true)?;
        }
        Ok(true)
    }

    /// When the filter expires, if it does.
    pub fn expires_at(&self, name: &[u8]) -> Result<Option<Option<SystemTime>>> {
        let Some(entry) = self.live(name)? else {
            return Ok(None);
        };
        let at = entry.expire_at_ms.load(Ordering::Relaxed);
        Ok(Some(
            (at != 0).then(|| UNIX_EPOCH + Duration::from_millis(at as u64)),
        ))
    }
}
