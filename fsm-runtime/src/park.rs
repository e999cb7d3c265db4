//! How the queuer's idle workers wait for work, and how a pusher wakes one:
//! spinning briefly (at most [`SPINNERS`] at a time), then parked on a condition
//! variable. The one promise: no job pushed is left with every worker asleep.
//!
//! It rests on a Dekker-style pairing of two `SeqCst` fences. A pusher pushes,
//! passes a fence, then reads how many workers spin and how many sleep; a
//! worker counts itself (spinning, or parked), passes a fence, then takes its
//! last look at the list. Of two fences one comes first in their single total
//! order, so either the pusher sees the worker counted (and skips the wake-up
//! only for a spinner, which looks again before it stops) or the worker sees
//! the job. `tests/loom.rs` checks it under every interleaving of a pusher and
//! two workers (`RUSTFLAGS="--cfg fsm_loom"`, where these are loom's locks,
//! atomics and fences).

use std::time::Duration;

use crate::sync::{AtomicUsize, Condvar, Mutex, MutexGuard, Ordering, fence};

/// How long an idle worker, and a caller waiting for its ticket, spin before they
/// park, unless the queuer was built with another
/// [`QueuerBuilder::spin`](crate::QueuerBuilder::spin): a wake-up through the
/// kernel costs tens of microseconds on a busy or virtual machine, more than
/// most actions take.
pub(crate) const SPIN: Duration = Duration::from_micros(50);

/// How many idle workers spin at once. Two, not one: a spinner that takes a
/// job stops spinning, and with nobody left spinning the caller's next
/// request would wake a parked worker through the kernel, a system call on
/// the caller's thread for every job the spinner takes while callers keep
/// the workers just busy (BENCHMARKS.md, seventeenth session). The other
/// spinner keeps the next request free of it.
pub(crate) const SPINNERS: usize = 2;

/// How many workers are parked, and how many of those were signalled and are
/// not yet running.
#[derive(Default)]
struct Park {
    parked: usize,
    waking: usize,
}

/// Idle workers, spinning or parked, and the wake-ups of pushers.
pub struct Parking {
    /// Parked workers wait on `work`, under `park`.
    park: Mutex<Park>,
    work: Condvar,
    /// How many parked workers nobody signalled yet, for a pusher to read
    /// without the lock (each signal is a system call, made only when someone
    /// sleeps).
    sleepers: AtomicUsize,
    /// How many workers are spinning: at most [`SPINNERS`], so that idle
    /// workers do not take every core from the callers.
    spinning: AtomicUsize,
    /// How long idle workers (and the queuer's waiting tickets) spin.
    spin: Duration,
}

fn lock(park: &Mutex<Park>) -> MutexGuard<'_, Park> {
    park.lock().unwrap_or_else(|e| e.into_inner())
}

impl Parking {
    /// Nobody idle yet; idle workers will spin for `spin` (never when zero).
    pub fn new(spin: Duration) -> Self {
        Parking {
            park: Mutex::new(Park::default()),
            work: Condvar::new(),
            sleepers: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
            spin,
        }
    }

    /// How long idle workers spin.
    pub(crate) fn spin(&self) -> Duration {
        self.spin
    }

    /// How many workers spin now.
    #[cfg(test)]
    pub(crate) fn spinning(&self) -> usize {
        self.spinning.load(Ordering::Relaxed)
    }

    /// How many workers are parked and not signalled now.
    #[cfg(test)]
    pub(crate) fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::Relaxed)
    }

    /// After a push: wakes a parked worker unless one spins. A spinning
    /// worker takes the job sooner than a parked one wakes up, and waking one
    /// costs the pusher a system call; a worker that takes a job and sees
    /// more passes the wake-up on ([`Parking::pass_on`]).
    pub fn pushed(&self) {
        fence(Ordering::SeqCst);
        if self.spinning.load(Ordering::Relaxed) == 0 {
            self.wake_one();
        }
    }

    /// Whether some parked worker is not yet signalled, as this thread last
    /// saw the count (a look without a fence: enough to skip
    /// [`Parking::pass_on`] when nobody sleeps, not to decide a pusher's
    /// wake-up).
    pub fn anyone_asleep(&self) -> bool {
        self.sleepers.load(Ordering::Relaxed) > 0
    }

    /// After a worker took a job and saw more: wakes another, if one is
    /// parked and not already woken.
    pub fn pass_on(&self) {
        fence(Ordering::SeqCst);
        self.wake_one();
    }

    /// Wakes one parked worker, unless every parked worker is waking already.
    /// (Past a fence: see the module.)
    fn wake_one(&self) {
        if self.sleepers.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut park = lock(&self.park);
        if park.parked > park.waking {
            park.waking += 1;
            self.sleepers
                .store(park.parked - park.waking, Ordering::Relaxed);
            self.work.notify_one();
        }
    }

    /// A worker that found nothing to take: spins a little (up to
    /// [`SPINNERS`] workers at a time) until `has_work` or `stopped`
    /// answers true, then parks unless one does. Returns when the worker
    /// should look for work again (or, `stopped`, leave).
    pub fn idle(&self, has_work: impl Fn() -> bool, stopped: impl Fn() -> bool) {
        // Counted only while spinning: a pusher that sees the count skips
        // the wake-up.
        let spin = (self.spinning).fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
            (n < SPINNERS && !self.spin.is_zero()).then_some(n + 1)
        });
        if spin.is_ok() {
            spin_until(self.spin, true, || has_work() || stopped());
            self.spinning.fetch_sub(1, Ordering::Relaxed);
            // The last look, past the fence `pushed` pairs with.
            fence(Ordering::SeqCst);
            if has_work() {
                return;
            }
        }
        let mut park = lock(&self.park);
        park.parked += 1;
        self.sleepers
            .store(park.parked - park.waking, Ordering::Relaxed);
        // Counted as asleep before this last look, past the fence `pushed`
        // pairs with; and `stop_all` signals under this lock after `stopped`
        // answers true.
        fence(Ordering::SeqCst);
        if !has_work() && !stopped() {
            park = self.work.wait(park).unwrap_or_else(|e| e.into_inner());
        }
        park.parked -= 1;
        // (A spurious wake-up may count as a signalled one: at worst one
        // more signal later.)
        park.waking = park.waking.saturating_sub(1);
        self.sleepers
            .store(park.parked - park.waking, Ordering::Relaxed);
    }

    /// Wakes every parked worker, once what `idle`'s `stopped` reads answers
    /// true: under the lock a worker holds from its last look at it until it
    /// parks.
    pub fn stop_all(&self) {
        drop(lock(&self.park));
        self.work.notify_all();
    }
}

/// Spins until `done` answers true or `spin` passes. With `yielding`, the
/// spinner offers its core to any thread that has work between rounds (an idle
/// worker must not slow the callers feeding it).
#[cfg(not(fsm_loom))]
pub(crate) fn spin_until(spin: Duration, yielding: bool, mut done: impl FnMut() -> bool) {
    // Most waits are over at once: the clock is read only for one that is not.
    if done() || spin.is_zero() {
        return;
    }
    let start = std::time::Instant::now();
    loop {
        for _ in 0..64 {
            if done() {
                return;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= spin {
            return;
        }
        if yielding {
            std::thread::yield_now();
        }
    }
}

/// Under the model checker, which has no clock: a spin is one look and a
/// yield, so that others run meanwhile; the caller looks again after it
/// (as it does after a spin that ran out), so every interleaving of a spin
/// that ends either way is there.
#[cfg(fsm_loom)]
pub(crate) fn spin_until(spin: Duration, _yielding: bool, mut done: impl FnMut() -> bool) {
    if done() || spin.is_zero() {
        return;
    }
    loom::thread::yield_now();
}
