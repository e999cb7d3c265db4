//! What the seed examples share: waiting on a condition of a system that says when
//! it changed.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

/// Locks `m`, going on after a panic elsewhere (the examples check their own
/// invariants).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits until `done` holds of `subject`, re-checking each time `changed` is told,
/// or until `limit` passes; answers whether it held.
pub async fn wait_until<T>(
    changed: &Notify,
    limit: Duration,
    subject: &T,
    done: impl Fn(&T) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // Registered before the check, so that a change between the check and the
        // wait is not missed.
        let notified = changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if done(subject) {
            return true;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return done(subject);
        }
    }
}

/// Waits until `done` holds, looking every `every`, or until `limit` passes;
/// answers whether it held (for a system whose steps are taken elsewhere, by
/// other processes, with nothing here to say when).
#[allow(dead_code)]
pub async fn poll_until(limit: Duration, every: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}

/// The wall clock in microseconds since the Unix epoch, made strictly greater than
/// `last` (which it then holds): a clock that never returns the same time twice,
/// so that entries written by different objects order as they happened.
#[allow(dead_code)]
pub fn unique_micros(last: &std::sync::atomic::AtomicU64) -> u64 {
    use std::sync::atomic::Ordering;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let prev = last
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
            Some(now.max(last + 1))
        })
        .unwrap_or(0);
    now.max(prev + 1)
}
