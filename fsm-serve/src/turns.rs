//! Requests that wait for their object (`?wait=SECONDS` on a start, a data
//! change or a removal), as the OpenvCloud
//! queuer has requests wait: each object's waiters take turns in the order
//! they came, and the one whose turn it is tries again at each write of its
//! object (which the machine's feed reports), until it starts, is refused for
//! another reason, or its time is up. Only one action runs on an object at a
//! time whatever waits: the runtime's compare-and-set decides, not the line.
//! So a request that does not wait (or one on another service of the store)
//! may still take a freed object before the first in line, which then waits
//! on: the line orders the waiters of one service, not every client.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

/// The longest a waiter goes without trying again, should a write of its
/// object not reach the feed (a gap).
const RETRY_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// One machine's waiting requests, by object.
#[derive(Debug)]
pub struct Turns {
    objects: std::sync::Mutex<HashMap<String, Arc<Line>>>,
    /// Set when the service stops: nobody waits any more.
    closed: watch::Sender<bool>,
}

impl Default for Turns {
    fn default() -> Turns {
        Turns {
            objects: Default::default(),
            closed: watch::channel(false).0,
        }
    }
}

/// One object's waiters.
#[derive(Debug)]
struct Line {
    /// One permit: the waiter whose turn it is holds it. tokio's semaphore
    /// hands permits out in the order they were asked for.
    turn: Semaphore,
    /// Sent at each write of the object.
    changed: watch::Sender<()>,
}

impl Turns {
    fn objects(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Line>>> {
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tries `attempt` until it answers something `busy` does not call busy,
    /// `deadline` passes or the service stops ([`close`](Self::close)), in
    /// `id`'s line: after the waiters that came before, once each time the
    /// object is written, and at least once a second. The last answer.
    pub async fn take<T, E, F>(
        &self,
        id: &str,
        deadline: Instant,
        mut attempt: impl FnMut() -> F,
        busy: impl Fn(&E) -> bool,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let place = Place::new(self, id);
        let mut closed = self.closed.subscribe();
        let closing = async |closed: &mut watch::Receiver<bool>| {
            // (An error: the sender, which these turns hold, is gone.)
            let _ = closed.wait_for(|closed| *closed).await;
        };
        // Out of time in the line, or stopping: the object as it is now.
        let turn = tokio::select! {
            turn = tokio::time::timeout_at(deadline, place.line.turn.acquire()) => turn,
            () = closing(&mut closed) => return attempt().await,
        };
        let Ok(Ok(_turn)) = turn else {
            return attempt().await;
        };
        loop {
            // Subscribed before the attempt: a write after it is not missed.
            let mut changed = place.line.changed.subscribe();
            let answer = attempt().await;
            let now = Instant::now();
            if !matches!(&answer, Err(e) if busy(e)) || now >= deadline || *closed.borrow() {
                return answer;
            }
            let retry = deadline.min(now + RETRY_AT_LEAST_EVERY);
            tokio::select! {
                _ = tokio::time::timeout_at(retry, changed.changed()) => {}
                () = closing(&mut closed) => return answer,
            }
        }
    }

    /// Stops every wait, now and to come: each waiter answers as its object
    /// is (a service that stops finishes the requests under way, and should
    /// not wait on those for their whole time).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Tells `id`'s waiter whose turn it is, if any, that the object was written.
    pub fn wrote(&self, id: &str) {
        if let Some(line) = self.objects().get(id) {
            line.changed.send_replace(());
        }
    }

    /// Tells every waiter to try again: writes may have been missed.
    pub fn missed_writes(&self) {
        for line in self.objects().values() {
            line.changed.send_replace(());
        }
    }

    /// How many requests wait, over every object.
    pub fn waiting(&self) -> usize {
        self.objects().values().map(waiters).sum()
    }

    /// How many requests wait for `id`.
    pub fn waiting_for(&self, id: &str) -> usize {
        self.objects().get(id).map_or(0, waiters)
    }
}

/// How many requests stand in `line`: each line is held by the map and by
/// each of its waiters.
fn waiters(line: &Arc<Line>) -> usize {
    Arc::strong_count(line) - 1
}

/// A waiter's place in its object's line: the line is dropped with its last
/// waiter.
struct Place<'t> {
    turns: &'t Turns,
    id: &'t str,
    line: Arc<Line>,
}

impl<'t> Place<'t> {
    fn new(turns: &'t Turns, id: &'t str) -> Place<'t> {
        let line = turns
            .objects()
            .entry(id.to_owned())
            .or_insert_with(|| {
                Arc::new(Line {
                    turn: Semaphore::new(1),
                    changed: watch::channel(()).0,
                })
            })
            .clone();
        Place { turns, id, line }
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut objects = self.turns.objects();
        // The map's and this place's: no other waiter (each takes its place
        // under the same lock).
        if Arc::strong_count(&self.line) == 2 {
            objects.remove(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waiters take turns in the order they came; each tries again as soon
    /// as its object is written; a line goes with its last waiter.
    #[tokio::test(start_paused = true)]
    async fn waiters_take_turns_in_order_and_leave_no_line() {
        let turns = Arc::new(Turns::default());
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        // The object is free once `free` is set.
        let free = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut waiters = Vec::new();
        for n in 1..=3 {
            let (line, order, free) = (turns.clone(), order.clone(), free.clone());
            waiters.push(tokio::spawn(async move {
                line.take(
                    "vm",
                    deadline,
                    || {
                        let free = free.load(std::sync::atomic::Ordering::SeqCst);
                        // Each waiter's turn comes once the one before is done.
                        let answer = if free >= n { Ok(n) } else { Err("busy") };
                        order.lock().unwrap().push((n, answer.is_ok()));
                        std::future::ready(answer)
                    },
                    |e| *e == "busy",
                )
                .await
            }));
            // Each in line before the next comes.
            while turns.waiting() < n {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!((turns.waiting_for("vm"), turns.waiting_for("db")), (3, 0));
        let before = Instant::now();
        for n in 1..=3 {
            free.store(n, std::sync::atomic::Ordering::SeqCst);
            turns.wrote("vm");
            assert_eq!(waiters.remove(0).await.unwrap(), Ok(n));
        }
        // Each tried again when told of the write, not at its next second
        // (the clock, paused, moves only when every task waits for it).
        assert!(before.elapsed() < RETRY_AT_LEAST_EVERY);
        let order = order.lock().unwrap().clone();
        // Only the first in line tried until it started; each after it tried
        // only once its turn came.
        let firsts: Vec<usize> = order.iter().map(|(n, _)| *n).collect();
        let mut sorted = firsts.clone();
        sorted.sort();
        assert_eq!(firsts, sorted, "turns out of order: {order:?}");
        assert!(
            order.contains(&(1, false)),
            "the first never waited: {order:?}"
        );
        assert_eq!(turns.waiting(), 0);
        assert!(turns.objects().is_empty(), "a line outlived its waiters");
    }

    /// Closing the turns answers every waiter at once, as its object is
    /// (busy), the first in line and the one behind it alike, and any
    /// waiter to come.
    #[tokio::test(start_paused = true)]
    async fn closed_turns_answer_every_waiter_at_once() {
        let turns = Arc::new(Turns::default());
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut waiters = Vec::new();
        for n in 1..=2 {
            let line = turns.clone();
            waiters.push(tokio::spawn(async move {
                line.take(
                    "vm",
                    deadline,
                    || std::future::ready(Err::<(), _>("busy")),
                    |e| *e == "busy",
                )
                .await
            }));
            while turns.waiting() < n {
                tokio::task::yield_now().await;
            }
        }
        let before = Instant::now();
        turns.close();
        for waiter in waiters {
            assert_eq!(waiter.await.unwrap(), Err("busy"));
        }
        let late = turns
            .take(
                "vm",
                deadline,
                || std::future::ready(Err::<(), _>("busy")),
                |e| *e == "busy",
            )
            .await;
        assert_eq!(late, Err("busy"));
        assert!(before.elapsed() < RETRY_AT_LEAST_EVERY);
        assert_eq!(turns.waiting(), 0);
    }

    /// Told that writes may have been missed (the feed's gap), the waiter
    /// whose turn it is on every object tries again at once, not at its next
    /// second.
    #[tokio::test(start_paused = true)]
    async fn missed_writes_wake_the_first_waiter_of_every_object() {
        let turns = Arc::new(Turns::default());
        let free = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut waiters = Vec::new();
        for (n, id) in ["vm-1", "vm-2"].into_iter().enumerate() {
            let (line, free) = (turns.clone(), free.clone());
            waiters.push(tokio::spawn(async move {
                line.take(
                    id,
                    deadline,
                    || {
                        let free = free.load(std::sync::atomic::Ordering::SeqCst);
                        std::future::ready(if free { Ok(id) } else { Err("busy") })
                    },
                    |e| *e == "busy",
                )
                .await
            }));
            while turns.waiting() <= n {
                tokio::task::yield_now().await;
            }
        }
        // Each has tried once and waits; neither object's write is told.
        tokio::task::yield_now().await;
        let before = Instant::now();
        free.store(true, std::sync::atomic::Ordering::SeqCst);
        turns.missed_writes();
        assert_eq!(waiters.remove(0).await.unwrap(), Ok("vm-1"));
        assert_eq!(waiters.remove(0).await.unwrap(), Ok("vm-2"));
        assert!(before.elapsed() < RETRY_AT_LEAST_EVERY);
        assert_eq!(turns.waiting(), 0);
    }

    /// A waiter whose time is up answers as the object is, busy; one refused
    /// otherwise answers at once.
    #[tokio::test(start_paused = true)]
    async fn a_waiter_gives_up_at_its_deadline_and_waits_only_while_busy() {
        let turns = Turns::default();
        let started = Instant::now();
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let answer: Result<(), &str> = turns
            .take(
                "vm",
                started + Duration::from_secs(5),
                || {
                    tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    std::future::ready(Err("busy"))
                },
                |e| *e == "busy",
            )
            .await;
        assert_eq!(answer, Err("busy"));
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        // Tried at least once a second with no write told.
        assert!(tries.into_inner() >= 5);
        let answer: Result<(), &str> = turns
            .take(
                "vm",
                Instant::now() + Duration::from_secs(5),
                || std::future::ready(Err("no rule")),
                |e| *e == "busy",
            )
            .await;
        assert_eq!(answer, Err("no rule"));
        assert_eq!(turns.waiting(), 0);
    }
}
