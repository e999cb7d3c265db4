//! The behavioural suite every store backend passes, on the in-memory store (the
//! etcd store runs it in `fsm-etcd/tests/etcd.rs`).

#[test]
fn the_memory_store_passes_the_store_suite() {
    fsm_runtime::testing::check_store(fsm_runtime::MemoryStore::new);
}
