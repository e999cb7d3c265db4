//! The embedded default store: in memory, safe under many threads.

use std::collections::VecDeque;

use dashmap::DashMap;
use dashmap::mapref::entry::Entry as MapEntry;

use crate::{Entry, Event, ObjectId, Publisher, Record, Store, StoreError, Watcher, Write};

/// Records and histories in memory.
///
/// Objects live in a sharded map (with a fast, randomly seeded hash): a write locks
/// only the shard of its object, for
/// the time of one comparison and one push, so writes to different objects run in
/// parallel and there is no global lock. Each write is applied whole under that lock
/// (record, history entry and the event to watchers, in version order).
///
/// Histories are kept whole by default. A long-running process that only needs the
/// recent past can bound them with [`MemoryStore::keep_history`].
#[derive(Debug)]
pub struct MemoryStore {
    objects: DashMap<ObjectId, Slot, foldhash::fast::RandomState>,
    publisher: Publisher,
    keep: usize,
}

#[derive(Debug)]
struct Slot {
    record: Record,
    history: VecDeque<Entry>,
}

impl MemoryStore {
    /// How many events each watcher buffers by default before it lags.
    pub const WATCH_CAPACITY: usize = 1024;

    /// An empty store.
    pub fn new() -> Self {
        Self::with_watch_capacity(Self::WATCH_CAPACITY)
    }

    /// An empty store whose watchers buffer up to `capacity` events each.
    pub fn with_watch_capacity(capacity: usize) -> Self {
        MemoryStore {
            objects: DashMap::default(),
            publisher: Publisher::new(capacity),
            keep: usize::MAX,
        }
    }

    /// Keeps only the last `entries` entries of each history (at least one). A
    /// history cut this way no longer starts with the creation, so
    /// [`check_history`](crate::check_history) no longer applies to it.
    pub fn keep_history(mut self, entries: usize) -> Self {
        self.keep = entries.max(1);
        self
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl Store for MemoryStore {
    fn load(&self, id: &ObjectId) -> Result<Option<Record>, StoreError> {
        Ok(self.objects.get(id).map(|slot| slot.record.clone()))
    }

    fn commit(&self, write: Write) -> Result<(), StoreError> {
        let (id, expected, record, entry) = write.into_parts();
        let publish = |entry: &Entry, id: &ObjectId| {
            self.publisher.publish(|| Event {
                id: id.clone(),
                entry: entry.clone(),
            })
        };
        match expected {
            None => match self.objects.entry(id) {
                MapEntry::Occupied(slot) => Err(StoreError::Conflict {
                    id: slot.key().clone(),
                    found: Some(Box::new(slot.get().record.clone())),
                }),
                MapEntry::Vacant(slot) => {
                    publish(&entry, slot.key());
                    slot.insert(Slot {
                        record,
                        history: VecDeque::from([entry]),
                    });
                    Ok(())
                }
            },
            Some(expected) => {
                let Some(mut slot) = self.objects.get_mut(&id) else {
                    return Err(StoreError::Conflict { id, found: None });
                };
                if slot.record.expected() != expected {
                    return Err(StoreError::Conflict {
                        id,
                        found: Some(Box::new(slot.record.clone())),
                    });
                }
                publish(&entry, &id);
                slot.record = record;
                if slot.history.len() == self.keep {
                    slot.history.pop_front();
                }
                slot.history.push_back(entry);
                Ok(())
            }
        }
    }

    fn history(&self, id: &ObjectId) -> Result<Vec<Entry>, StoreError> {
        Ok(self
            .objects
            .get(id)
            .map(|slot| slot.history.iter().cloned().collect())
            .unwrap_or_default())
    }

    fn ids(&self) -> Result<Vec<ObjectId>, StoreError> {
        let mut ids: Vec<_> = self.objects.iter().map(|e| e.key().clone()).collect();
        ids.sort();
        Ok(ids)
    }

    fn watch(&self) -> Result<Watcher, StoreError> {
        Ok(self.publisher.watch())
    }
}
