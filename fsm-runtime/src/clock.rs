//! Time: the wall clock read cheaply, and clocks injected so that tests of
//! timeouts never sleep.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Where the runtime reads the time of a change.
///
/// The runtime reads it inside [`Store::modify`](crate::Store::modify), while a
/// store may hold the object (the memory store does, under a shard lock), so that
/// every write is stamped no earlier than what its guards read, and no earlier
/// than the object's last write (a clock that reads earlier, stepped back, gets
/// that write's time instead). `now` must therefore be quick and must not call
/// the runtime or its store.
///
/// The runtime's default is [`CounterClock`]; [`SystemClock`] asks the system
/// at every read, and [`ManualClock`] moves only when a test moves it.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock, asked at every read (`SystemTime::now`).
///
/// The runtime's default is [`CounterClock`], which follows this clock within
/// microseconds for a third of the cost of a read.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// The system's wall clock, read through the processor's time-stamp counter:
/// the runtime's default.
///
/// A read of the counter, scaled to nanoseconds, costs a third of a read of
/// the system clock (about 9 against 25 ns on the machine of BENCHMARKS.md),
/// and an action reads the time twice. The counter is calibrated once per
/// process (by [`quanta`], which uses it only where the processor says it
/// ticks at a constant rate, and the operating system's monotonic clock
/// elsewhere) and anchored to the system clock, which it asks again every
/// 100 ms: the time follows the system clock's adjustments (NTP's slewing and
/// steps) within that period, off by at most the counter's drift over it, a
/// few microseconds.
///
/// Like the system clock, it may step back (when it is anchored again). The
/// runtime stamps no write of an object earlier than the object's last write,
/// whatever its clock does, so an object's history stays in order. Should the
/// counter's rate change under the process (a virtual machine moved to
/// another host), readings are off by that change over at most 100 ms, and
/// right again at the next anchoring. Where stamps must be the system clock's
/// own readings, give the runtime [`SystemClock`].
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use fsm_runtime::{Clock, CounterClock};
///
/// let system = SystemTime::now();
/// let counter = CounterClock.now();
/// let apart = counter.duration_since(system).unwrap_or_else(|e| e.duration());
/// assert!(apart < Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CounterClock;

impl Clock for CounterClock {
    #[inline]
    fn now(&self) -> SystemTime {
        static ANCHOR: OnceLock<Anchor> = OnceLock::new();
        ANCHOR.get_or_init(Anchor::new).now()
    }
}

/// How often [`CounterClock`] asks the system clock again, in nanoseconds.
const ANCHOR_EVERY: u64 = 100_000_000;

/// The counter, and where its nanoseconds stand against the system clock's.
///
/// The anchor is one number: the system clock's nanoseconds since the epoch
/// less the counter's (in this anchor's nanoseconds) at the last anchoring. A
/// read adds it to the counter's nanoseconds, so that a read is one load of
/// it beside the counter's, and a new anchoring one store: a read never sees
/// half of one. (Nanoseconds since the epoch fit in 64 bits until 2554.)
struct Anchor {
    counter: quanta::Clock,
    /// The counter's reading this anchor's nanoseconds count from.
    base: u64,
    /// The system clock's nanoseconds since the epoch less this anchor's, at
    /// the last anchoring (wrapping).
    offset: AtomicU64,
    /// This anchor's nanoseconds from which the system clock is due to be asked.
    due: AtomicU64,
}

impl Anchor {
    fn new() -> Anchor {
        let counter = quanta::Clock::new();
        let base = counter.raw();
        let anchor = Anchor {
            counter,
            base,
            offset: AtomicU64::new(0),
            due: AtomicU64::new(0),
        };
        anchor.ask_system(0);
        anchor
    }

    /// Nanoseconds since this anchor was made, by the counter.
    #[inline]
    fn elapsed(&self) -> u64 {
        self.counter.delta_as_nanos(self.base, self.counter.raw())
    }

    #[inline]
    fn now(&self) -> SystemTime {
        let elapsed = self.elapsed();
        if elapsed >= self.due.load(Ordering::Relaxed) {
            self.ask_system(elapsed);
        }
        self.at(elapsed)
    }

    /// The time of the counter's reading `elapsed`, by the anchor as it is.
    /// (A reading taken just before an anchoring it then reads gives a time
    /// just before that anchoring's: wrapping, not below the epoch.)
    #[inline]
    fn at(&self, elapsed: u64) -> SystemTime {
        let since_epoch = elapsed.wrapping_add(self.offset.load(Ordering::Relaxed));
        SystemTime::UNIX_EPOCH + Duration::from_nanos(since_epoch)
    }

    /// Anchors the counter to the system clock again, at `elapsed`; of the
    /// threads that find it due, one does it, and the others read the anchor as
    /// it was.
    #[cold]
    fn ask_system(&self, elapsed: u64) {
        let due = self.due.load(Ordering::Relaxed);
        let next = elapsed.saturating_add(ANCHOR_EVERY);
        if elapsed < due
            || self
                .due
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // A system clock set before 1970 reads as 1970.
        let system = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let system = u64::try_from(system.as_nanos()).unwrap_or(u64::MAX);
        self.offset
            .store(system.wrapping_sub(self.elapsed()), Ordering::Relaxed);
    }
}

/// A clock that moves only when told to, for tests.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use fsm_runtime::{Clock, ManualClock};
///
/// let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
/// clock.advance(Duration::from_secs(90));
/// assert_eq!(clock.now(), SystemTime::UNIX_EPOCH + Duration::from_secs(90));
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    /// A clock that reads `start` until advanced.
    pub fn new(start: SystemTime) -> Self {
        ManualClock {
            now: Mutex::new(start),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }

    /// Sets the clock to `time`, earlier or later: a system clock stepped back
    /// by NTP or by hand, for example.
    pub fn set(&self, time: SystemTime) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = time;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    fn now(&self) -> SystemTime {
        (**self).now()
    }
}

/// `time` as an RFC 3339 timestamp in UTC, to the millisecond: `2026-11-23T09:31:45.123Z`.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let t = UNIX_EPOCH + Duration::from_millis(1_795_426_305_123);
/// assert_eq!(fsm_runtime::rfc3339(t), "2026-11-23T09:31:45.123Z");
/// ```
pub fn rfc3339(time: SystemTime) -> String {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How far apart two times are, whichever is first.
    fn apart(a: SystemTime, b: SystemTime) -> Duration {
        a.duration_since(b).unwrap_or_else(|e| e.duration())
    }

    #[test]
    fn the_counter_clock_reads_between_two_reads_of_the_system_clock() {
        for _ in 0..1_000 {
            let before = SystemTime::now();
            let counter = CounterClock.now();
            let after = SystemTime::now();
            // Off by the counter's drift since it was anchored (under 100 ms
            // ago): microseconds. A millisecond leaves room for a slow machine.
            let slack = Duration::from_millis(1);
            assert!(
                counter + slack >= before && counter <= after + slack,
                "{counter:?} is not between {before:?} and {after:?}"
            );
        }
    }

    #[test]
    fn the_counter_clock_asks_the_system_clock_again_when_due() {
        let anchor = Anchor::new();
        // An anchor an hour off, as a counter drifting or a system clock
        // stepped would leave it, and not yet due: it reads an hour off...
        let hour = 3_600 * 1_000_000_000;
        anchor.offset.fetch_add(hour, Ordering::Relaxed);
        assert!(apart(anchor.now(), SystemTime::now()) > Duration::from_secs(3_599));
        // ... until it is due, when it reads the system clock's time again.
        anchor.due.store(0, Ordering::Relaxed);
        let now = anchor.now();
        assert!(
            apart(now, SystemTime::now()) < Duration::from_millis(1),
            "{now:?}"
        );
        assert!(anchor.due.load(Ordering::Relaxed) >= ANCHOR_EVERY);
    }

    #[test]
    fn the_counter_clock_reads_past_seconds_and_before_its_anchoring() {
        let anchor = Anchor::new();
        let elapsed = anchor.elapsed();
        let then = anchor.at(elapsed);
        // Later readings, within the second and past several.
        for later in [999_999_999, 1_000_000_000, 1_500_000_000, 7_250_000_000] {
            let at = anchor.at(elapsed + later);
            assert_eq!(
                at.duration_since(then).unwrap(),
                Duration::from_nanos(later)
            );
        }
        // A reading taken before the anchor it reads: earlier, not wrapped round.
        let before = anchor.at(elapsed.wrapping_sub(200_000_000));
        assert_eq!(
            then.duration_since(before).unwrap(),
            Duration::from_millis(200)
        );
    }
}
