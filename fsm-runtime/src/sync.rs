//! The locks the stores and the queuer's parking use: the standard library's, or
//! loom's when the crate is built for the model checker (`RUSTFLAGS="--cfg fsm_loom"`, see
//! `tests/loom.rs`), so that loom runs the real code under every interleaving.

#[cfg(fsm_loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(fsm_loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

#[cfg(fsm_loom)]
pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering, fence};
#[cfg(not(fsm_loom))]
pub(crate) use std::sync::atomic::{AtomicUsize, Ordering, fence};

/// The lock of one shard of the memory store: a spin lock whose waiters yield
/// their time slice, released by a plain store. A shard is held for a lookup and
/// a write, a few dozen nanoseconds; a lock that can park a waiter must release
/// with an atomic read-modify-write (to see whether anyone sleeps), and that
/// instruction was a tenth of a completed action on one thread (BENCHMARKS.md:
/// 206 → 193 ns per action; sixteen threads on two cores no slower). Under the
/// model checker, loom's mutex.
#[cfg(not(fsm_loom))]
pub(crate) type ShardLock<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;
#[cfg(not(fsm_loom))]
pub(crate) type ShardGuard<'a, T> = spin::mutex::SpinMutexGuard<'a, T, spin::relax::Yield>;
#[cfg(fsm_loom)]
pub(crate) type ShardLock<T> = loom::sync::Mutex<T>;
#[cfg(fsm_loom)]
pub(crate) type ShardGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

/// Takes a shard's lock.
#[cfg(not(fsm_loom))]
pub(crate) fn lock_shard<T>(shard: &ShardLock<T>) -> ShardGuard<'_, T> {
    shard.lock()
}

/// Takes a shard's lock (a panic while it was held poisons nothing: each write
/// is applied whole or not at all).
#[cfg(fsm_loom)]
pub(crate) fn lock_shard<T>(shard: &ShardLock<T>) -> ShardGuard<'_, T> {
    shard.lock().unwrap_or_else(|e| e.into_inner())
}

/// A value on cache lines of its own: it starts a pair of lines and ends the
/// pair's last (adjacent-line prefetch moves lines in pairs), so that threads
/// writing neighbouring values do not contend on one line. The memory store's
/// shards and the queuer's stripes use it.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);
