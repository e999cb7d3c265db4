//! Time, injectable so that tests of timeouts never sleep.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Where the runtime reads the time of a change.
///
/// The runtime reads it inside [`Store::modify`](crate::Store::modify), while a
/// store may hold the object (the memory store does, under a shard lock), so that
/// every write is stamped no earlier than the write before it and no earlier
/// than what its guards read. `now` must therefore be quick and must not call the
/// runtime or its store.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> SystemTime {
        SystemTime::now()
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
