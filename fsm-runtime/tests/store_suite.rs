//! The behavioural suite every store backend passes, on the in-memory store (the
//! etcd store runs it in `fsm-etcd/tests/etcd.rs`).

#[test]
fn the_memory_store_passes_the_store_suite() {
    fsm_runtime::testing::check_store(fsm_runtime::MemoryStore::new);
}

#[test]
fn objects_of_the_memory_store_survive_an_edited_spec() {
    let shared = std::sync::Arc::new(fsm_runtime::MemoryStore::new());
    fsm_runtime::testing::specs_evolve(|| shared.clone());
}
