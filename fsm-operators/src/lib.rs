//! The seeds' control planes as operators on the fsm runtime.
//!
//! [`mizar`]: Mizar's seven operators (`mizar-object-workflows.md`), as tasks of
//! one process on the in-memory store, or each as its own process sharing etcd
//! with the others (`cargo run --example mizar -- --etcd ENDPOINTS --chaos`).
//! [`podops`]: KusionStack's PodOpsLifecycle (`podopslifecycle.md`): its
//! controllers and the operation controllers on one pod, the same two ways
//! (`cargo run --example podopslifecycle -- --etcd ENDPOINTS --chaos`).

#[path = "../../examples/support/mod.rs"]
mod support;

mod api;
pub mod chaos;
pub mod machines;
pub mod mizar;
pub mod podops;
