//! A store of the trait's required calls only, for the tests that hold the
//! trait's defaults.

use fsm_runtime::{
    Entry, MemoryStore, ObjectId, Record, Removal, Store, StoreError, Watcher, Write,
};

/// A store that reads, decides and then writes with a compare-and-set, as a
/// store on the network does: the memory store behind the required calls alone
/// (`load`, `commit`, `history`, `ids`, `watch`, `remove`, and `bind` to learn the
/// machine), every other call taken from the trait's defaults (`modify`'s read
/// and compare-and-set, `records`' read per object, the `_async` calls).
pub struct ReadThenWrite(pub MemoryStore);

impl Store for ReadThenWrite {
    fn bind(&self, machine: &fsm_core::Machine) -> Result<(), StoreError> {
        self.0.bind(machine)
    }
    fn load(&self, id: &ObjectId) -> Result<Option<Record>, StoreError> {
        self.0.load(id)
    }
    fn commit(&self, write: Write) -> Result<(), StoreError> {
        self.0.commit(write)
    }
    fn history(&self, id: &ObjectId) -> Result<Vec<Entry>, StoreError> {
        self.0.history(id)
    }
    fn ids(&self) -> Result<Vec<ObjectId>, StoreError> {
        self.0.ids()
    }
    fn watch(&self) -> Result<Watcher, StoreError> {
        self.0.watch()
    }
    fn remove(&self, removal: Removal) -> Result<(), StoreError> {
        self.0.remove(removal)
    }

    fn removal(&self, id: &ObjectId) -> Result<Option<fsm_runtime::Entry>, StoreError> {
        self.0.removal(id)
    }
}
