//! The locks the stores use: the standard library's, or loom's when the crate is
//! built for the model checker (`RUSTFLAGS="--cfg fsm_loom"`, see
//! `tests/loom.rs`), so that loom runs the real code under every interleaving.

#[cfg(fsm_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(fsm_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(fsm_loom)]
pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(fsm_loom))]
pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
