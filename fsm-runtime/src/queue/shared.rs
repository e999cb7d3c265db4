//! What the queuer's threads share: the striped queues, the ready list, the
//! workers that run the jobs and the retrier of refused ends.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use crate::ObjectId;
use crate::park::Parking;
use crate::sync::Padded;

use super::*;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) type Route = Box<dyn Fn(&str, &ObjectId) -> ObjectId + Send + Sync>;

/// A queue lives while it has work: made by the request that finds none for
/// its key, deleted by the worker that ends its last job. An object's queue
/// costs nothing between its actions, however many objects were ever queued.
pub(super) struct Queue {
    /// The jobs behind the one in the ready list or running.
    pub(super) jobs: VecDeque<Job>,
    pub(super) closing: bool,
    /// Which queue of its key this is: `stop` waits for the one it closed to
    /// end, not for a queue a later request makes under the same key.
    pub(super) made: u64,
}

/// The queues of one stripe, by key, and how many it made. A key is found by
/// the hash its id was made with, as the memory store finds objects: no
/// request hashes its id's text again.
#[derive(Default)]
pub(super) struct Queues {
    pub(super) map: HashTable<(ObjectId, Queue)>,
    pub(super) made: u64,
}

/// Whether a table entry is `key`'s queue (found under `key.hash_code()`).
pub(super) fn queue_of(key: &ObjectId) -> impl Fn(&(ObjectId, Queue)) -> bool + '_ {
    move |(k, _)| k == key
}

impl Queues {
    pub(super) fn get(&self, key: &ObjectId) -> Option<&Queue> {
        (self.map.find(key.hash_code(), queue_of(key))).map(|(_, queue)| queue)
    }

    pub(super) fn get_mut(&mut self, key: &ObjectId) -> Option<&mut Queue> {
        (self.map.find_mut(key.hash_code(), queue_of(key))).map(|(_, queue)| queue)
    }

    /// Marks `queue` closing: it takes no more requests (see
    /// [`Shared::stopping`]).
    pub(super) fn close(queue: &mut Queue, stopping: &AtomicUsize) {
        if !queue.closing {
            queue.closing = true;
            stopping.fetch_add(1, Ordering::Release);
        }
    }
}

/// A lock the queuer holds for a few instructions, never across work: a spin
/// lock whose waiters yield, released by a plain store (the memory store's
/// shards use the same, `crate::sync`).
pub(super) type Short<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;

/// One stripe of the queuer: the lock that orders the intake of its queues,
/// and the queues themselves. A queue's stripe is chosen by the hash of its key.
/// Each part on cache lines of its own, so that callers and workers on
/// different stripes share none, and callers do not meet workers on the
/// intake.
#[derive(Default)]
pub(super) struct Stripe {
    /// Held from before a request's start until it is in its queue (see
    /// [`Queuer::intake`]): a lock that parks its waiters, as a start may wait
    /// on the network. Only callers take it: on lines of its own, apart from
    /// the queues that workers change.
    pub(super) intake: Padded<Mutex<()>>,
    /// Held by a request's caller to put its job in, by a worker to take the
    /// queue's next one out when a job ends.
    pub(super) queues: Padded<Short<Queues>>,
}

/// How many stripes a queuer has: two requests contend on one only when their
/// queues' hashes meet in it (one pair in 256).
pub(super) const STRIPES: usize = 256;
const _: () = assert!(STRIPES.is_power_of_two());

/// The ends the store refused, each with its job (which holds its queue
/// meanwhile) and when it is tried next; and the retrier's thread, once
/// started.
#[derive(Default)]
pub(super) struct Retries {
    pub(super) pending: Vec<Pending>,
    pub(super) thread: Option<JoinHandle<()>>,
}

pub(super) struct Pending {
    pub(super) job: Job,
    pub(super) retry: Retry,
    pub(super) due: Instant,
    pub(super) pause: Duration,
}

/// How many leftovers the ready list keeps before a waiter sweeps them out:
/// each holds its task (a few hundred bytes) until a worker passes it over,
/// and while every worker is busy with long actions, threads that wait for
/// their own requests add one per request.
pub(super) const LEFTOVERS: isize = 1024;

/// How long a queued action waits before it tries again to write its end that
/// the store refused retryably: the first pause, doubled each time up to the last.
pub(super) const RETRY_FIRST: Duration = Duration::from_millis(10);
pub(super) const RETRY_MOST: Duration = Duration::from_secs(1);

pub(super) struct Shared {
    /// The next job of each queue that has one and runs none, in the order they
    /// became ready: a worker takes one without any lock. A job a waiting ticket
    /// took first ([`Shared::help`]) leaves its entry here, passed over.
    pub(super) ready: SegQueue<Job>,
    /// How many entries of `ready` are such leftovers: past [`LEFTOVERS`],
    /// the waiter that adds one sweeps them out ([`Shared::sweep`]), one
    /// waiter at a time (`sweeping`). Signed: a worker that passes an entry
    /// over may count it before its waiter does.
    pub(super) leftovers: AtomicIsize,
    pub(super) sweeping: AtomicBool,
    pub(super) stripes: Box<[Stripe]>,
    /// Idle workers, spinning or parked, and the wake-ups pushes cost.
    pub(super) parking: Parking,
    /// `stop` and `terminate` wait on `drained` for queues to end, counted in
    /// `draining` so that a worker that ends a queue signals only when
    /// someone waits.
    pub(super) drain: Mutex<()>,
    pub(super) drained: Condvar,
    pub(super) draining: AtomicUsize,
    /// `None`: each object's own queue.
    pub(super) route: Option<Route>,
    /// Set when the queuer terminates: requests are refused, and an end the
    /// store refuses is no longer tried again (see [`retry`]).
    pub(super) terminated: AtomicBool,
    /// Set once every queue ended after `terminate`: the workers leave.
    pub(super) stopped: AtomicBool,
    /// Ends the store refused, waiting for their next try on the retrier's
    /// thread (started on the first), which waits on `retried`.
    pub(super) retries: Mutex<Retries>,
    pub(super) retried: Condvar,
    /// This, for the retrier's thread to hold.
    pub(super) me: std::sync::Weak<Shared>,
    /// How many queues are closing, plus one once the queuer terminates:
    /// written under a stripe's lock, read without it by every request, which
    /// looks in the queues for its own only when this is not zero.
    pub(super) stopping: AtomicUsize,
}

/// A worker: take a ready job, run it, put its queue's next job in the ready
/// list, or delete the queue when it has none.
pub(super) fn work(shared: &Shared) {
    let mut next = None;
    loop {
        let Some(job) = next.take().or_else(|| shared.take()) else {
            return;
        };
        next = shared.run(job, true);
    }
}

impl Shared {
    /// The stripe of `key`'s queue, by bits of its hash that its stripe's
    /// table does not place it by (the low ones, and the top seven). A mask,
    /// as the memory store chooses its shard: there are [`STRIPES`], a power
    /// of two (a remainder was a division on every call, three a request).
    pub(super) fn stripe(&self, key: &ObjectId) -> &Stripe {
        &self.stripes[(key.hash_code() >> 32) as usize & (self.stripes.len() - 1)]
    }

    /// Accepts a started request into its queue (`key`, the job's), in order:
    /// behind the jobs of its queue, or, making the queue, in the ready list.
    pub(super) fn push(&self, key: &ObjectId, job: Job) {
        {
            let mut queues = self.stripe(key).queues.0.lock();
            let Queues { map, made } = &mut *queues;
            match map.entry(key.hash_code(), queue_of(key), |(k, _)| k.hash_code()) {
                Entry::Occupied(mut queue) => {
                    queue.get_mut().1.jobs.push_back(job);
                    return;
                }
                Entry::Vacant(vacant) => {
                    *made += 1;
                    let queue = Queue {
                        jobs: VecDeque::new(),
                        closing: false,
                        made: *made,
                    };
                    vacant.insert((key.clone(), queue));
                }
            }
        }
        self.make_ready(job, false);
    }

    /// Puts `job`, its queue's next, in the ready list, and wakes a parked
    /// worker unless one is sure to take it anyway: a spinning worker, for a
    /// lone ready job, or the worker that readied it (`by_worker`), which takes
    /// its next job from the list itself.
    pub(super) fn make_ready(&self, job: Job, by_worker: bool) {
        job.head().ready();
        self.ready.push(job);
        if !by_worker {
            self.wake_for_pushed();
        }
    }

    /// After a push on the ready list: wakes a parked worker unless one
    /// spins (see [`Parking`]).
    pub(super) fn wake_for_pushed(&self) {
        self.parking.pushed();
    }

    /// The first ready job, now taken; `None` when none is ready. Jobs a
    /// waiting ticket took are passed over.
    pub(super) fn take_ready(&self) -> Option<Job> {
        while let Some(job) = self.ready.pop() {
            if !job.head().take() {
                self.leftovers.fetch_sub(1, Ordering::Relaxed);
                job.disown();
                continue;
            }
            // More ready than this worker takes: pass the wake-up on. Asked
            // only when a worker sleeps: looking at the list reads the line
            // the caller writes at each push, which the caller then waits to
            // take back (a queued request in bursts 372 -> 365 and 380 -> 366
            // ns, BENCHMARKS.md, sixty-third session). The look at the
            // sleepers is without a fence: the wake-up passed on is for
            // parallelism, not the promise (see `crate::park`), which rests on
            // the pushers' wake-ups.
            if self.parking.anyone_asleep() && !self.ready.is_empty() {
                self.parking.pass_on();
            }
            return Some(job);
        }
        None
    }

    /// A worker's next job: waits for a ready queue, spinning a little first
    /// (two workers at a time), then parked. `None` once the queuer stopped.
    pub(super) fn take(&self) -> Option<Job> {
        loop {
            if let Some(taken) = self.take_ready() {
                return Some(taken);
            }
            if self.stopped.load(Ordering::Acquire) {
                return None;
            }
            // Nothing ready: spin a little, then park (see [`Parking`]).
            self.parking.idle(
                || !self.ready.is_empty(),
                || self.stopped.load(Ordering::Acquire),
            );
        }
    }

    /// Runs `job`, taken, and ends it ([`Shared::end`]); or, if the store
    /// refused its end while its backend is unreachable, leaves the tries
    /// again to the retrier. A worker (`by_worker`) takes its next job from
    /// the ready list, if one is there, and gets it back.
    pub(super) fn run(&self, job: Job, by_worker: bool) -> Option<Job> {
        let done = match catch_unwind(AssertUnwindSafe(|| job.task.run(self))) {
            Ok(Ran::Done(done)) => done,
            Ok(Ran::Retry(retry)) => {
                self.retry_later(job, retry);
                return if by_worker { self.take_ready() } else { None };
            }
            Err(_) => {
                tracing::error!(queue = %job.head().key(), "an action panicked; it is left abandoned for the healer");
                (false, Err(Box::new(job.task.crashed())))
            }
        };
        self.end(job, done, by_worker)
    }

    /// Puts the queue's next job in the ready list, or deletes the queue when
    /// it has none; closes it first when `close` (its object reached a
    /// terminal state: the jobs behind run, later requests are refused). Then
    /// gives the job's outcome.
    pub(super) fn end(&self, job: Job, (close, outcome): Done, by_worker: bool) -> Option<Job> {
        let key = job.head().key();
        let (next, ended) = {
            let mut queues = self.stripe(key).queues.0.lock();
            match queues.map.find_entry(key.hash_code(), queue_of(key)) {
                Ok(mut entry) => {
                    let queue = &mut entry.get_mut().1;
                    if close {
                        Queues::close(queue, &self.stopping);
                    }
                    match queue.jobs.pop_front() {
                        Some(next) => (Some(next), None),
                        None => {
                            let ((key, queue), _) = entry.remove();
                            if queue.closing {
                                self.stopping.fetch_sub(1, Ordering::Release);
                                tracing::debug!(queue = %key, "queue stopped");
                            }
                            (None, Some(key))
                        }
                    }
                }
                // (A job's queue lives until its last job ends.)
                Err(_) => (None, None),
            }
        };
        let draining = ended.is_some() && self.draining.load(Ordering::SeqCst) > 0;
        if let Some(next) = next {
            self.make_ready(next, by_worker);
        }
        // The ticket first, once its queue reflects the outcome (a queue ended by
        // a terminal state is gone): it is what a caller is blocked on.
        job.head().outcome.give(outcome, ended);
        drop(job);
        if draining {
            // Under the lock its waiter looks at the queues under.
            drop(lock(&self.drain));
            self.drained.notify_all();
        }
        if by_worker { self.take_ready() } else { None }
    }

    /// Leaves `job`, whose end the store refused, to the retrier's thread:
    /// `retry` is tried after a pause, doubled after each refusal (up to a
    /// second), and the job ended ([`Shared::end`]) once it comes to an end.
    /// Its queue waits meanwhile (the object is held), and the worker goes on
    /// to other queues' jobs.
    #[cold]
    pub(super) fn retry_later(&self, job: Job, retry: Retry) {
        let mut retries = lock(&self.retries);
        retries.pending.push(Pending {
            job,
            retry,
            due: Instant::now() + RETRY_FIRST,
            pause: RETRY_FIRST,
        });
        if retries.thread.is_none() {
            let shared = self.me.upgrade().expect("a queuer running jobs");
            retries.thread = Some(
                std::thread::Builder::new()
                    .name("fsm-queuer-retry".into())
                    .spawn(move || shared.retrier())
                    .expect("spawn the queuer's retrier"),
            );
        }
        drop(retries);
        self.retried.notify_all();
    }

    /// The retrier's thread: tries each pending end when it is due (all of
    /// them at once when the queuer terminates, which ends their tries), until
    /// the queuer stopped.
    pub(super) fn retrier(&self) {
        let mut retries = lock(&self.retries);
        loop {
            let terminated = self.terminated.load(Ordering::Acquire);
            let now = Instant::now();
            let Some(next) = retries.pending.iter().map(|p| p.due).min() else {
                if self.stopped.load(Ordering::Acquire) {
                    return;
                }
                retries = self
                    .retried
                    .wait(retries)
                    .unwrap_or_else(|e| e.into_inner());
                continue;
            };
            if next > now && !terminated {
                retries = (self.retried)
                    .wait_timeout(retries, next - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            let (due, waiting) = std::mem::take(&mut retries.pending)
                .into_iter()
                .partition::<Vec<_>, _>(|p| terminated || p.due <= now);
            retries.pending = waiting;
            // Tried without the lock: a try waits on the store.
            drop(retries);
            let mut again = Vec::new();
            for mut pending in due {
                match catch_unwind(AssertUnwindSafe(|| (pending.retry)(self))) {
                    Ok(Some(done)) => {
                        self.end(pending.job, done, false);
                    }
                    Ok(None) => {
                        pending.pause = (pending.pause * 2).min(RETRY_MOST);
                        pending.due = Instant::now() + pending.pause;
                        again.push(pending);
                    }
                    Err(_) => {
                        tracing::error!(queue = %pending.job.head().key(), "trying an action's end again panicked; it is left for the healer");
                        let crashed = pending.job.task.crashed();
                        self.end(pending.job, (false, Err(Box::new(crashed))), false);
                    }
                }
            }
            retries = lock(&self.retries);
            retries.pending.extend(again);
        }
    }

    /// Waits until `drained` answers true, looking again each time a queue
    /// ends.
    pub(super) fn wait_drained(&self, mut drained: impl FnMut() -> bool) {
        let mut guard = lock(&self.drain);
        // Counted before the look: a queue that ends after it signals.
        self.draining.fetch_add(1, Ordering::SeqCst);
        while !drained() {
            guard = self.drained.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        self.draining.fetch_sub(1, Ordering::SeqCst);
    }

    /// Runs `task` on this thread if it is the next job of its queue and no
    /// worker has taken it yet: see [`Ticket::wait`]. Its entry in the ready
    /// list is left for a worker to pass over (or for a sweep, past
    /// [`LEFTOVERS`]), and no longer counts as ready work. A task already
    /// taken (most are) costs the waiter one atomic read.
    pub(super) fn help(&self, task: &Arc<dyn Queued>) {
        let head = task.head();
        if head.stage.load(Ordering::Acquire) != READY {
            return;
        }
        if head.take() {
            let leftovers = self.leftovers.fetch_add(1, Ordering::Relaxed) + 1;
            self.run(Job::new(task.clone()), false);
            if leftovers > LEFTOVERS {
                self.sweep();
            }
        }
    }

    /// Drops the leftovers in the ready list, and puts the jobs still ready
    /// back in the order they were in (behind any made ready meanwhile): a
    /// queue has one entry in the list at most, so no queue's order changes.
    /// One sweeper at a time; the others go on.
    #[cold]
    pub(super) fn sweep(&self) {
        if self.sweeping.swap(true, Ordering::Acquire) {
            return;
        }
        let mut put_back = false;
        for _ in 0..self.ready.len() {
            let Some(job) = self.ready.pop() else { break };
            // Taken, in the list: by its waiting ticket (a worker pops what it
            // takes). A job its ticket takes after this look is put back, and
            // left over later.
            if job.head().stage.load(Ordering::Acquire) == READY {
                self.ready.push(job);
                put_back = true;
            } else {
                self.leftovers.fetch_sub(1, Ordering::Relaxed);
                job.disown();
            }
        }
        self.sweeping.store(false, Ordering::Release);
        // A worker that found the list empty meanwhile may have parked.
        if put_back {
            self.wake_for_pushed();
        }
    }
}
