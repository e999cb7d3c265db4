//! [`AnyStore`]: memory or etcd, chosen at run time.

use fsm_core::Machine;
use fsm_runtime::{
    Change, Entry, MemoryStore, ObjectId, Record, Records, Removal, Store, StoreError, Watcher,
    Write,
};

use crate::EtcdStore;

/// A store chosen at run time: memory, or etcd (what a program that takes
/// `--etcd ENDPOINTS` runs on, like `fsm serve` and the seed examples).
#[derive(Debug)]
pub enum AnyStore {
    /// In this process: lost when it stops.
    Memory(Box<MemoryStore>),
    /// On etcd, shared with every process on the same prefix.
    Etcd(EtcdStore),
}

impl AnyStore {
    /// The store's position now, when it keeps an order of writes that every
    /// process on it sees alike (etcd's revision, see [`EtcdStore::revision`]):
    /// every write accepted from here on is placed past it. `None` for the
    /// memory store.
    pub fn position(&self) -> Result<Option<u64>, StoreError> {
        match self {
            AnyStore::Memory(_) => Ok(None),
            AnyStore::Etcd(s) => s.revision().map(Some),
        }
    }

    /// Forgets the removals made before `before`
    /// ([`MemoryStore::forget_removals`], [`EtcdStore::forget_removals`]),
    /// answering how many it forgot.
    pub fn forget_removals(&self, before: std::time::SystemTime) -> Result<usize, StoreError> {
        match self {
            AnyStore::Memory(s) => Ok(s.forget_removals(before)),
            AnyStore::Etcd(s) => s.forget_removals(before),
        }
    }
}

impl Store for AnyStore {
    fn bind(&self, machine: &Machine) -> Result<(), StoreError> {
        match self {
            AnyStore::Memory(s) => s.bind(machine),
            AnyStore::Etcd(s) => s.bind(machine),
        }
    }
    fn load(&self, id: &ObjectId) -> Result<Option<Record>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.load(id),
            AnyStore::Etcd(s) => s.load(id),
        }
    }
    fn load_with<R>(
        &self,
        id: &ObjectId,
        read: impl FnOnce(&Record) -> R,
    ) -> Result<Option<R>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.load_with(id, read),
            AnyStore::Etcd(s) => s.load_with(id, read),
        }
    }
    fn commit(&self, write: Write) -> Result<(), StoreError> {
        match self {
            AnyStore::Memory(s) => s.commit(write),
            AnyStore::Etcd(s) => s.commit(write),
        }
    }
    fn commit_reading<R>(
        &self,
        write: Write,
        read: impl FnOnce(&Record) -> R,
    ) -> Result<R, StoreError> {
        match self {
            AnyStore::Memory(s) => s.commit_reading(write, read),
            AnyStore::Etcd(s) => s.commit_reading(write, read),
        }
    }
    fn modify<T, E, R>(
        &self,
        id: &ObjectId,
        decide: impl FnMut(Option<&Record>) -> Result<(Change, T), E>,
        read: impl FnMut(&Record) -> R,
    ) -> Result<Result<(T, R), E>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.modify(id, decide, read),
            AnyStore::Etcd(s) => s.modify(id, decide, read),
        }
    }
    async fn modify_async<T: Send, E: Send, R: Send>(
        &self,
        id: &ObjectId,
        decide: impl FnMut(Option<&Record>) -> Result<(Change, T), E> + Send,
        read: impl FnMut(&Record) -> R + Send,
    ) -> Result<Result<(T, R), E>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.modify_async(id, decide, read).await,
            AnyStore::Etcd(s) => s.modify_async(id, decide, read).await,
        }
    }
    fn runs_detached(&self) -> bool {
        match self {
            AnyStore::Memory(s) => s.runs_detached(),
            AnyStore::Etcd(s) => s.runs_detached(),
        }
    }
    fn never_waits(&self) -> bool {
        match self {
            AnyStore::Memory(s) => s.never_waits(),
            AnyStore::Etcd(s) => s.never_waits(),
        }
    }
    async fn run_detached<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        match self {
            AnyStore::Memory(s) => s.run_detached(call).await,
            AnyStore::Etcd(s) => s.run_detached(call).await,
        }
    }
    fn cached(&self, id: &ObjectId) -> Option<Record> {
        match self {
            AnyStore::Memory(s) => s.cached(id),
            AnyStore::Etcd(s) => s.cached(id),
        }
    }
    fn first_version(&self, id: &ObjectId) -> u64 {
        match self {
            AnyStore::Memory(s) => s.first_version(id),
            AnyStore::Etcd(s) => s.first_version(id),
        }
    }
    fn history(&self, id: &ObjectId) -> Result<Vec<Entry>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.history(id),
            AnyStore::Etcd(s) => s.history(id),
        }
    }
    fn history_after(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.history_after(id, after, limit),
            AnyStore::Etcd(s) => s.history_after(id, after, limit),
        }
    }
    fn ids(&self) -> Result<Vec<ObjectId>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.ids(),
            AnyStore::Etcd(s) => s.ids(),
        }
    }
    fn records(&self) -> Result<Records, StoreError> {
        match self {
            AnyStore::Memory(s) => s.records(),
            AnyStore::Etcd(s) => s.records(),
        }
    }
    fn for_each_record(
        &self,
        look: impl FnMut(&ObjectId, Result<&Record, &StoreError>),
    ) -> Result<(), StoreError> {
        match self {
            AnyStore::Memory(s) => s.for_each_record(look),
            AnyStore::Etcd(s) => s.for_each_record(look),
        }
    }
    fn records_after(&self, after: Option<&ObjectId>, limit: usize) -> Result<Records, StoreError> {
        match self {
            AnyStore::Memory(s) => s.records_after(after, limit),
            AnyStore::Etcd(s) => s.records_after(after, limit),
        }
    }
    fn watch(&self) -> Result<Watcher, StoreError> {
        match self {
            AnyStore::Memory(s) => s.watch(),
            AnyStore::Etcd(s) => s.watch(),
        }
    }
    fn remove(&self, removal: Removal) -> Result<(), StoreError> {
        match self {
            AnyStore::Memory(s) => s.remove(removal),
            AnyStore::Etcd(s) => s.remove(removal),
        }
    }
    fn removal(&self, id: &ObjectId) -> Result<Option<Entry>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.removal(id),
            AnyStore::Etcd(s) => s.removal(id),
        }
    }
    async fn remove_async(&self, removal: Removal) -> Result<(), StoreError> {
        match self {
            AnyStore::Memory(s) => s.remove_async(removal).await,
            AnyStore::Etcd(s) => s.remove_async(removal).await,
        }
    }
    // Forwarded, so that awaiting an etcd store never blocks the caller's thread.
    async fn load_async(&self, id: &ObjectId) -> Result<Option<Record>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.load_async(id).await,
            AnyStore::Etcd(s) => s.load_async(id).await,
        }
    }
    async fn load_with_async<R: Send>(
        &self,
        id: &ObjectId,
        read: impl FnOnce(&Record) -> R + Send,
    ) -> Result<Option<R>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.load_with_async(id, read).await,
            AnyStore::Etcd(s) => s.load_with_async(id, read).await,
        }
    }
    async fn commit_async(&self, write: Write) -> Result<(), StoreError> {
        match self {
            AnyStore::Memory(s) => s.commit_async(write).await,
            AnyStore::Etcd(s) => s.commit_async(write).await,
        }
    }
    async fn commit_reading_async<R: Send>(
        &self,
        write: Write,
        read: impl FnOnce(&Record) -> R + Send,
    ) -> Result<R, StoreError> {
        match self {
            AnyStore::Memory(s) => s.commit_reading_async(write, read).await,
            AnyStore::Etcd(s) => s.commit_reading_async(write, read).await,
        }
    }
    async fn ids_async(&self) -> Result<Vec<ObjectId>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.ids_async().await,
            AnyStore::Etcd(s) => s.ids_async().await,
        }
    }
    async fn records_async(&self) -> Result<Records, StoreError> {
        match self {
            AnyStore::Memory(s) => s.records_async().await,
            AnyStore::Etcd(s) => s.records_async().await,
        }
    }
    async fn watch_async(&self) -> Result<Watcher, StoreError> {
        match self {
            AnyStore::Memory(s) => s.watch_async().await,
            AnyStore::Etcd(s) => s.watch_async().await,
        }
    }
    async fn for_each_record_async(
        &self,
        look: impl FnMut(&ObjectId, Result<&Record, &StoreError>) + Send,
    ) -> Result<(), StoreError> {
        match self {
            AnyStore::Memory(s) => s.for_each_record_async(look).await,
            AnyStore::Etcd(s) => s.for_each_record_async(look).await,
        }
    }
    async fn records_after_async(
        &self,
        after: Option<&ObjectId>,
        limit: usize,
    ) -> Result<Records, StoreError> {
        match self {
            AnyStore::Memory(s) => s.records_after_async(after, limit).await,
            AnyStore::Etcd(s) => s.records_after_async(after, limit).await,
        }
    }
    async fn history_after_async(
        &self,
        id: &ObjectId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.history_after_async(id, after, limit).await,
            AnyStore::Etcd(s) => s.history_after_async(id, after, limit).await,
        }
    }
    async fn history_async(&self, id: &ObjectId) -> Result<Vec<Entry>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.history_async(id).await,
            AnyStore::Etcd(s) => s.history_async(id).await,
        }
    }
    async fn removal_async(&self, id: &ObjectId) -> Result<Option<Entry>, StoreError> {
        match self {
            AnyStore::Memory(s) => s.removal_async(id).await,
            AnyStore::Etcd(s) => s.removal_async(id).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_variant_passes_the_store_suite() {
        fsm_runtime::testing::check_store(|| AnyStore::Memory(Box::new(MemoryStore::new())));
    }

    /// The runtime's async calls take the path of the store held: the
    /// memory store's blocking forms, not the detached run etcd's needs.
    #[test]
    fn the_memory_variant_never_waits_and_runs_nothing_detached() {
        let store = AnyStore::Memory(Box::new(MemoryStore::new()));
        assert!(store.never_waits());
        assert!(!store.runs_detached());
    }

    #[test]
    fn the_memory_variant_forgets_removals() {
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        fsm_runtime::testing::forgotten_removals_keep_versions_apart(
            AnyStore::Memory(Box::new(MemoryStore::new())),
            |store| store.forget_removals(later).unwrap(),
        );
    }
}
