//! The behavioural suite every store backend passes, on the in-memory store (the
//! etcd store runs it in `fsm-etcd/tests/etcd.rs`).

mod read_then_write;

use read_then_write::ReadThenWrite;

#[test]
fn the_memory_store_passes_the_store_suite() {
    fsm_runtime::testing::check_store(fsm_runtime::MemoryStore::new);
}

#[test]
fn the_memory_store_forgets_removals_and_keeps_versions_apart() {
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    fsm_runtime::testing::forgotten_removals_keep_versions_apart(
        fsm_runtime::MemoryStore::new(),
        |store| store.forget_removals(later),
    );
}

#[test]
fn objects_of_the_memory_store_survive_an_edited_spec() {
    let shared = std::sync::Arc::new(fsm_runtime::MemoryStore::new());
    fsm_runtime::testing::specs_evolve(|| shared.clone());
}

#[test]
fn removals_in_the_memory_store_outlive_specs_that_cannot_read_them() {
    let shared = std::sync::Arc::new(fsm_runtime::MemoryStore::new());
    fsm_runtime::testing::removals_outlive_specs_that_cannot_read_them(|| shared.clone());
}

/// A backend that implements only what a store must (`load`, `commit`,
/// `history`, `ids`, `watch`, and `bind`), here over the memory store, and
/// takes every other call from the trait's defaults: the suite holds those
/// defaults (`modify`'s read and compare-and-set, `records`' read per object,
/// the `_async` calls) to the same behaviour.
#[test]
fn a_store_of_the_required_calls_only_passes_the_store_suite() {
    fsm_runtime::testing::check_store(|| ReadThenWrite(fsm_runtime::MemoryStore::new()));
}
