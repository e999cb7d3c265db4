//! Forgetting removals: the floor that keeps versions from repeating for an
//! id, and the mark of the prefix's stored format.

use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse};
#[cfg(doc)]
use fsm_runtime::Store;
use fsm_runtime::wire::StoredEntry;
use fsm_runtime::{ObjectId, StoreError};

use crate::{
    EtcdStore, FORGET_BATCH, RECORDS_PAGE, REMOVED, json, prefix_end, unescape, unreadable,
};

impl EtcdStore {
    /// Forgets what the objects removed before `before` left under the
    /// prefix (each one's emptied `obj/` key and its `gone/` entry), and
    /// answers how many it forgot: for a prefix whose ids are seldom used
    /// twice (one per job, per operation), where they would otherwise pile
    /// up for ever, and [`Store::ids`] read every one of them.
    ///
    /// [`Store::removal`] then answers `None` for those ids, as for an id
    /// that never had an object. Versions still never repeat for an id: the
    /// key `floor` is first raised to the highest removal version it is about
    /// to forget, and an id without a key is created above it (its creation
    /// compares the floor's key as it read it), so an `If-Match` or a
    /// [`Fence`](fsm_runtime::Fence) of a forgotten object never matches a
    /// later object of its id, and fences stay increasing. A removal is
    /// forgotten only if its keys are still as it left them (the id was not
    /// created again meanwhile): by one transaction for up to 32 removals,
    /// then, should one of them have changed, by one each.
    /// Removals made by an earlier version of this store, whose `gone/` key
    /// is empty (no time to go by), are kept; so is a `gone/` key that cannot
    /// be read (its version unknown), with a warning naming it.
    ///
    /// **Every process on the prefix must be of this version or later** once
    /// a removal is forgotten: an earlier one creates an id without a key at
    /// version 1, and compares a record's version with its key's etcd
    /// version, which a key created again no longer matches. The first
    /// forgetting marks the prefix with this store's [`FORMAT`]; from this
    /// version on a store refuses a prefix marked with a format newer than it
    /// reads, so a later format is never misread (versions before this one
    /// do not read the mark).
    ///
    /// Call it now and then, not per action: it reads every `gone/` key, a
    /// thousand per request. `fsm serve` does so with
    /// `--forget-removals-after`.
    pub fn forget_removals(&self, before: std::time::SystemTime) -> Result<usize, StoreError> {
        let due = self.removals_before(before)?;
        let Some(highest) = due.iter().map(|(_, version, _)| *version).max() else {
            return Ok(0);
        };
        self.raise_floor(highest)?;
        let mut forgotten = 0;
        for batch in due.chunks(FORGET_BATCH) {
            // Most often no removal of a batch changed meanwhile: one
            // transaction forgets them all. Otherwise each by its own, and
            // those that changed are left alone.
            if self.forget(batch)? {
                forgotten += batch.len();
                continue;
            }
            for removal in batch {
                if self.forget(std::slice::from_ref(removal))? {
                    forgotten += 1;
                }
            }
        }
        Ok(forgotten)
    }

    /// Forgets every removal of `due` (its id, its version and the revision
    /// that wrote it) by one transaction, if each one's `obj/` and `gone/`
    /// keys are still as it left them; whether they were.
    fn forget(&self, due: &[(ObjectId, u64, i64)]) -> Result<bool, StoreError> {
        let mut when = Vec::with_capacity(2 * due.len());
        let mut ops = Vec::with_capacity(3 * due.len());
        for (id, _, revision) in due {
            let (object, gone) = (self.object_key(id), self.gone_key(id));
            let history = self.history_prefix(id);
            when.push(Compare::mod_revision(
                object.clone(),
                CompareOp::Equal,
                *revision,
            ));
            when.push(Compare::mod_revision(
                gone.clone(),
                CompareOp::Equal,
                *revision,
            ));
            ops.push(TxnOp::delete(object, None));
            ops.push(TxnOp::delete(gone, None));
            // The removal's last history key, if its clean-up failed.
            ops.push(TxnOp::delete(
                history.clone(),
                Some(DeleteOptions::new().with_range(prefix_end(&history))),
            ));
        }
        let txn = Txn::new().when(when).and_then(ops);
        let mut kv = self.kv();
        let forgot = self.run(async move { kv.txn(txn).await })?.succeeded();
        if forgot {
            for (id, _, _) in due {
                self.keep(id, None);
            }
        }
        Ok(forgot)
    }

    /// Every removal under the prefix made before `before`: its id, its
    /// version, and the revision that wrote it (its `obj/` and `gone/` keys
    /// alike), read a thousand `gone/` keys per request.
    fn removals_before(
        &self,
        before: std::time::SystemTime,
    ) -> Result<Vec<(ObjectId, u64, i64)>, StoreError> {
        let prefix = format!("{}gone/", self.inner.prefix);
        let end = prefix_end(&prefix);
        let mut from = prefix.clone().into_bytes();
        let mut due = Vec::new();
        loop {
            let options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(RECORDS_PAGE);
            let (mut kv, key) = (self.kv(), from.clone());
            let resp = self.run(async move { kv.get(key, Some(options)).await })?;
            for kv in resp.kvs() {
                if kv.value() == REMOVED {
                    continue;
                }
                // One removal that cannot be read stops no other's forgetting;
                // it is kept (its version is unknown, so the floor could not
                // be raised past it).
                let entry: StoredEntry = match json(kv.value(), kv.key()) {
                    Ok(entry) => entry,
                    Err(e) => {
                        tracing::warn!("etcd: a removal kept, not forgotten: {e}");
                        continue;
                    }
                };
                let segment = kv.key_str().ok().and_then(|k| k.strip_prefix(&prefix));
                if let (Some(segment), true) = (segment, entry.at < before) {
                    due.push((unescape(segment), entry.version, kv.mod_revision()));
                }
            }
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok(due),
            }
        }
    }

    /// Raises the floor to `version`, unless it is there already, by
    /// compare-and-set on its key, and marks the prefix as of this store's
    /// [`FORMAT`] in the same transaction (a process that reads only an
    /// earlier format refuses the prefix from then on).
    fn raise_floor(&self, version: u64) -> Result<(), StoreError> {
        loop {
            let (floor_key, format_key) = (self.floor_key(), self.format_key());
            let read = Txn::new().and_then([
                TxnOp::get(floor_key.clone(), None),
                TxnOp::get(format_key.clone(), None),
            ]);
            let mut kv = self.kv();
            let resp = self.run(async move { kv.txn(read).await })?;
            let mut gets = resp.op_responses().into_iter().map(|r| match r {
                TxnOpResponse::Get(get) => get.kvs().first().cloned(),
                _ => None,
            });
            let floor = Floor::of(gets.next().flatten().as_ref())?;
            let format = Format::of(gets.next().flatten().as_ref())?;
            self.saw_floor(floor);
            if floor.version >= version {
                return Ok(());
            }
            let mut ops = vec![TxnOp::put(floor_key.clone(), version.to_string(), None)];
            if format.version < FORMAT {
                ops.push(TxnOp::put(format_key.clone(), FORMAT.to_string(), None));
            }
            let txn = Txn::new()
                .when([
                    Compare::mod_revision(floor_key, CompareOp::Equal, floor.revision),
                    Compare::mod_revision(format_key, CompareOp::Equal, format.revision),
                ])
                .and_then(ops);
            let mut kv = self.kv();
            let resp = self.run(async move { kv.txn(txn).await })?;
            if resp.succeeded() {
                self.saw_floor(Floor {
                    version,
                    revision: resp.header().map_or(0, |h| h.revision()),
                });
                return Ok(());
            }
        }
    }

    /// Refuses a prefix stored in a format newer than this store reads
    /// ([`FORMAT`]), before it reads or writes anything there.
    pub(crate) fn check_format(&self) -> Result<(), StoreError> {
        let (mut kv, key) = (self.kv(), self.format_key());
        let resp = self.run(async move { kv.get(key, None).await })?;
        Format::of(resp.kvs().first()).map(drop)
    }
}

/// The floor as this store last read it: the highest removal version
/// forgotten under the prefix ([`EtcdStore::forget_removals`]; 0: none),
/// and the revision of the key that holds it (0: no key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Floor {
    pub(crate) version: u64,
    pub(crate) revision: i64,
}

impl Floor {
    /// The floor `kv` holds (none: no key), or why it cannot be read.
    pub(crate) fn of(kv: Option<&etcd_client::KeyValue>) -> Result<Floor, StoreError> {
        let Some(kv) = kv else {
            return Ok(Floor::default());
        };
        Ok(Floor {
            version: decimal(kv, "not a version (the floor of forgotten removals)")?,
            revision: kv.mod_revision(),
        })
    }
}

/// The stored format this store writes, and the newest it reads: 2 since
/// removals can be forgotten (a write compares the revision that wrote the
/// record it was decided on, a creation the floor, where format 1 compared
/// a key's etcd version, which forgetting restarts). A prefix without the
/// key `format` is of format 1, which this store reads and writes alike.
pub const FORMAT: u64 = 2;

/// The format a prefix is stored in, and the revision that said so (0: no
/// key, format 1).
#[derive(Debug, Clone, Copy)]
struct Format {
    version: u64,
    revision: i64,
}

impl Format {
    /// The format `kv` holds (none: no key, format 1), or why this store
    /// cannot read the prefix: a number it does not know.
    fn of(kv: Option<&etcd_client::KeyValue>) -> Result<Format, StoreError> {
        let Some(kv) = kv else {
            return Ok(Format {
                version: 1,
                revision: 0,
            });
        };
        let version = decimal(kv, "not a format (a number)")?;
        if version > FORMAT {
            return Err(unreadable(
                kv.key(),
                format!(
                    "the prefix is stored in format {version}, and this version of fsm-etcd reads \
                     formats up to {FORMAT}: upgrade every process on the prefix"
                ),
            ));
        }
        Ok(Format {
            version,
            revision: kv.mod_revision(),
        })
    }
}

/// The number `kv` holds in decimal, or `what` it should have been.
fn decimal(kv: &etcd_client::KeyValue, what: &str) -> Result<u64, StoreError> {
    std::str::from_utf8(kv.value())
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| unreadable(kv.key(), what))
}
