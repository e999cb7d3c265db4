//! Per-object action queues: OpenvCloud's queuer.
//!
//! What it does is in [`Queuer`]'s documentation; how, below.
//!
//! # Design
//!
//! The queuer shares no lock between all requests. Each queue belongs to one of 256
//! stripes, chosen by the hash of its key: a stripe's intake lock orders a
//! request's start and its push (only callers take it, on a line of its own), and a
//! short lock on the stripe's queues covers the push and a worker's hand-on to the
//! queue's next job (a request looks there before its start only while some queue
//! is stopping, a count kept under those locks). A queue lives while it has work:
//! the request that finds none makes it, the worker that ends its last job deletes
//! it (and leaves its key to the ticket to free), so the queuer's memory follows
//! the objects with work, not every object ever queued.
//!
//! A queue's next job goes into a lock-free ready list
//! (`crossbeam_queue::SegQueue`) itself, not its queue's key, so that a worker
//! takes it without a look in the queues, and runs on whoever swaps its stage from
//! ready to taken first: a worker, or the thread blocked in `Ticket::wait` on that
//! very job; a ready entry whose task a waiter took is passed over (past 1,024 such
//! leftovers, as when every worker is busy with long actions and waiting threads
//! run their own requests, the waiter that adds one sweeps them out, putting the
//! ready jobs back in order).
//!
//! A worker parks only after a last look at the list past a fence that the pusher's
//! look at the parked count pairs with, so no job is left with every worker asleep;
//! a caller wakes one only when none spins (up to two spin at once, so that the one
//! that takes a job leaves the other spinning; for 50 µs, or as
//! `QueuerBuilder::spin` says, never when zero), and a worker that takes a job and
//! sees more passes the wake-up on.
//!
//! An end the store refuses while its backend is down is tried again on the
//! queuer's retrier thread (`Shared::retry_later`), so a store outage holds the
//! queues of the actions it caught, not the workers.
//!
//! A worker borrows the task's id and runtime: nothing a request's caller counts
//! references on is written on the worker's core. A task whose outcome its ticket
//! gave (waited for or awaited) is kept as a spare by that thread (up to 1,024,
//! thread-local, the runtime dropped) and the thread's next request writes its task
//! over it: under a burst of outstanding requests, glibc served each task from its
//! shared arena.

use std::any::Any;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use smallvec::SmallVec;

use fsm_core::{ActionId, RuleError};

use fsm_core::{ActionRef, UnknownAction};

use crate::in_flight::Detached;
use crate::park::{Parking, SPIN, spin_until};
use crate::sync::Padded;
use crate::{Actor, Fence, InFlight, IntoObjectId, ObjectId, Record, Runtime, RuntimeError, Store};

/// Why a request was not accepted, or how an accepted one ended badly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The runtime refused the request (busy, no such action here, role, owner,
    /// guard, conflict): nothing was queued.
    #[error(transparent)]
    Refused(#[from] RuntimeError),
    /// A step of a composite action may not run from the state the object is in.
    #[error("{id}: a step of `{action}` is refused: {refused}")]
    Step {
        /// The object.
        id: ObjectId,
        /// The requested action.
        action: String,
        /// What the table says of the step, from the object's state.
        refused: RuleError,
    },
    /// The queue is being stopped: it takes no more requests.
    #[error("the queue of {id} is stopping and takes no more requests")]
    Closed {
        /// The queue.
        id: ObjectId,
    },
    /// The queuer was terminated.
    #[error("the queuer was terminated")]
    Terminated,
    /// A step's work failed; the action failed back to where it started.
    #[error("step `{step}` failed: {message}")]
    Failed {
        /// The step.
        step: String,
        /// What its work said.
        message: String,
    },
    /// The action's hold was revoked (the healer rolled it back) before its work
    /// was done: no step ran after that, and nothing was written.
    #[error(transparent)]
    Revoked(RuntimeError),
    /// The work panicked; the action is left abandoned for the healer.
    #[error("the worker running `{action}` on {id} crashed; the action is left for the healer")]
    Crashed {
        /// The object.
        id: ObjectId,
        /// The action.
        action: String,
    },
}

/// The work of one step, given the action's fencing token to pass on to the
/// systems it drives: `Err` with a message fails the action.
pub type Work = Box<dyn FnOnce(Fence) -> Result<(), String> + Send>;

/// What a job ends in: whether its queue should end after it (the object reached
/// a terminal state), and the outcome for its ticket.
type Done = (bool, Result<Record, QueueError>);

/// What running a job came to: its end, or an end the store refused while
/// its backend is unreachable, tried again later off the worker
/// ([`Shared::retry_later`]).
enum Ran {
    Done(Done),
    Retry(Retry),
}

/// One more try of an end the store refused: `None` while it still refuses it
/// (retryably, and the queuer is not terminated).
type Retry = Box<dyn FnMut(&Shared) -> Option<Done> + Send>;

/// An accepted request as its queue holds it: the job, run once by a worker, and
/// the outcome its [`Ticket`] reads. Both live in one allocation, which the caller
/// makes and (its ticket being the last to let go) usually frees: a worker that
/// freed what callers allocate would meet them on the allocator's locks for every
/// request (BENCHMARKS.md).
trait Queued: Send + Sync {
    /// Runs the job.
    fn run(&self, queue: &Shared) -> Ran;
    /// Its queue, its stage there and where the outcome goes.
    fn head(&self) -> &Head;
    /// The error of a job that panicked, or was never run.
    fn crashed(&self) -> QueueError;
    /// Drops the job unrun: its action, in flight, is recorded as abandoned now.
    fn discard(&self);
    /// Keeps the task, once its outcome was taken, as a spare for this
    /// thread's next request ([`SPARE`]), if nothing else holds it.
    fn recycle(self: Arc<Self>);
}

/// What the queuer knows of a task whatever its job: its queue, its stage
/// there, and where its outcome goes.
struct Head {
    /// The object.
    id: ObjectId,
    /// The queue it is on, when not its object's own (see [`Queuer::with_route`]).
    routed: Option<ObjectId>,
    /// [`QUEUED`], [`READY`] or [`TAKEN`]: taken by whoever swaps it from
    /// ready first (a worker, or a waiting ticket).
    stage: AtomicU8,
    outcome: Outcome,
}

/// A task's stages: behind another on its queue; next on its queue, in the
/// ready list; taken by a worker, or by a waiting ticket, to run.
const QUEUED: u8 = 0;
const READY: u8 = 1;
const TAKEN: u8 = 2;

impl Head {
    fn new(id: ObjectId, routed: Option<ObjectId>) -> Self {
        Head {
            id,
            routed,
            stage: AtomicU8::new(QUEUED),
            outcome: Outcome::default(),
        }
    }

    /// The queue's key.
    fn key(&self) -> &ObjectId {
        self.routed.as_ref().unwrap_or(&self.id)
    }

    /// Marks the task next on its queue, in the ready list.
    fn ready(&self) {
        self.stage.store(READY, Ordering::Release);
    }

    /// Takes the task to run, if it is ready and nobody took it first (a
    /// worker from the ready list, or its waiting ticket).
    fn take(&self) -> bool {
        (self.stage)
            .compare_exchange(READY, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

struct Task<S: Store, F> {
    head: Head,
    /// `None` only while the task is a spare: a spare keeps no runtime, and
    /// no store, alive.
    runtime: Option<Runtime<S>>,
    action: ActionId,
    /// The started action, detached from the runtime (the task holds one), and
    /// the job that ends it.
    job: Short<Option<(Detached, F)>>,
}

impl<S: Store, F: Send + 'static> Task<S, F> {
    /// A task for the job `job` of the started `handle`: written over one of
    /// this thread's spare tasks, if one of its type is there, field by field
    /// (a spare's outcome is taken, its job run: only what a request sets is
    /// written), or newly allocated. A spare of another type (a runtime over
    /// another store) is dropped.
    fn new(
        id: ObjectId,
        routed: Option<ObjectId>,
        runtime: &Runtime<S>,
        action: ActionId,
        handle: Detached,
        job: F,
    ) -> Arc<Self> {
        let spare = SPARE.try_with(|spare| spare.borrow_mut().pop());
        if let Some(Ok(mut spare)) = spare.ok().flatten().map(|spare| spare.downcast::<Self>()) {
            // (Always unique: a task becomes a spare only once nothing else
            // holds it.)
            if let Some(task) = Arc::get_mut(&mut spare) {
                debug_assert!(task.job.get_mut().is_none(), "a spare's job ran");
                debug_assert!(
                    matches!(
                        task.head.outcome.slot.get_mut(),
                        OutcomeSlot {
                            result: None,
                            waiter: None,
                            ended_queue: None
                        }
                    ),
                    "a spare's outcome was taken"
                );
                // What `Head::new` and the fields below set afresh; the rest
                // is as a taken outcome and a run job left it.
                let head = &mut task.head;
                head.id = id;
                head.routed = routed;
                *head.stage.get_mut() = QUEUED;
                *head.outcome.given.get_mut() = false;
                task.runtime = Some(runtime.clone());
                task.action = action;
                *task.job.get_mut() = Some((handle, job));
                return spare;
            }
        }
        Arc::new(Task {
            head: Head::new(id, routed),
            runtime: Some(runtime.clone()),
            action,
            job: Short::new(Some((handle, job))),
        })
    }
}

impl<S: Store, F> Task<S, F> {
    fn runtime(&self) -> &Runtime<S> {
        self.runtime
            .as_ref()
            .expect("only a spare task has no runtime")
    }
}

impl<S, F> Queued for Task<S, F>
where
    S: Store,
    F: for<'r> FnOnce(InFlight<'r, S>, &'r Runtime<S>, &Shared, &ObjectId) -> Ran + Send + 'static,
{
    fn run(&self, queue: &Shared) -> Ran {
        let (handle, job) = self.job.lock().take().expect("a queued job runs once");
        let (id, runtime) = (&self.head.id, self.runtime());
        job(handle.attach(runtime, id), runtime, queue, id)
    }

    fn head(&self) -> &Head {
        &self.head
    }

    fn crashed(&self) -> QueueError {
        QueueError::Crashed {
            id: self.head.id.clone(),
            action: self.runtime().action_name(self.action).to_owned(),
        }
    }

    fn discard(&self) {
        // Attached and dropped: its action is recorded as abandoned now.
        let job = self.job.lock().take();
        drop(job.map(|(handle, _)| handle.attach(self.runtime(), &self.head.id)));
    }

    fn recycle(mut self: Arc<Self>) {
        let Some(task) = Arc::get_mut(&mut self) else {
            // A worker, or the ready list, still holds it: freed as usual.
            return;
        };
        task.runtime = None;
        task.head.outcome.slot.get_mut().ended_queue = None;
        let _ = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < SPARE_TASKS {
                spare.push(self);
            }
        });
    }
}

thread_local! {
    /// Tasks whose outcome this thread's tickets took, kept for its next
    /// requests: a request then writes its task over a spare one instead of
    /// allocating. Under a burst of outstanding requests, each task's
    /// allocation and free otherwise went to the allocator's shared arena
    /// (glibc keeps seven blocks of a size per thread), 46 ns of the
    /// caller's 360 per queued request (BENCHMARKS.md, sixteenth and
    /// seventeenth sessions). Kept type-erased: a thread may queue on
    /// runtimes of several stores.
    static SPARE: RefCell<Vec<Arc<dyn Any + Send + Sync>>> = const { RefCell::new(Vec::new()) };
}

/// How many spare tasks a thread keeps at most (a task is a few hundred
/// bytes, so a few hundred kilobytes at most, for a thread with that many
/// requests outstanding at once).
const SPARE_TASKS: usize = 1024;

/// A task in its queue, or in the ready list. Dropped before its outcome was
/// given (its worker gone), it gives its ticket the crash, so that no ticket
/// waits forever; unless it is the ready list's leftover of a task a waiting
/// ticket took ([`Job::disown`]).
struct Job {
    task: Arc<dyn Queued>,
    live: bool,
}

impl Job {
    fn new(task: Arc<dyn Queued>) -> Self {
        Job { task, live: true }
    }

    fn head(&self) -> &Head {
        self.task.head()
    }

    /// Drops the job as a leftover: another `Job` of the same task runs it.
    fn disown(mut self) {
        self.live = false;
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.live && !self.head().outcome.is_given() {
            self.task.discard();
            self.head().outcome.give(Err(self.task.crashed()), None);
        }
    }
}

/// The outcome of a request, given once by its worker and taken once by its
/// ticket, blocking or async.
#[derive(Default)]
struct Outcome {
    /// Set once the outcome is in `slot`: a waiting ticket spins on it.
    given: AtomicBool,
    slot: Short<OutcomeSlot>,
}

#[derive(Default)]
struct OutcomeSlot {
    result: Option<Result<Record, QueueError>>,
    /// Who to wake when the outcome is given.
    waiter: Option<Waiter>,
    /// The key of the queue the job's end deleted, freed with the task: by
    /// the ticket, mostly, on the caller's thread, whose requests count the
    /// id's references (a worker that let go of it would write the id's cache
    /// line, and the caller's next request would wait to take it back).
    ended_queue: Option<ObjectId>,
}

enum Waiter {
    Thread(Thread),
    Task(Waker),
}

impl Outcome {
    fn is_given(&self) -> bool {
        self.given.load(Ordering::Acquire)
    }

    /// Gives the outcome, with the key of the queue the job's end deleted, if
    /// it did (see [`OutcomeSlot::ended_queue`]).
    fn give(&self, result: Result<Record, QueueError>, ended_queue: Option<ObjectId>) {
        let waiter = {
            let mut slot = self.slot.lock();
            debug_assert!(!self.is_given(), "an outcome is given once");
            slot.result = Some(result);
            slot.ended_queue = ended_queue;
            self.given.store(true, Ordering::Release);
            slot.waiter.take()
        };
        match waiter {
            Some(Waiter::Thread(thread)) => thread.unpark(),
            Some(Waiter::Task(waker)) => waker.wake(),
            None => {}
        }
    }

    /// The outcome if it was given, or else `waiter` registered to be woken.
    ///
    /// # Panics
    ///
    /// If the outcome was taken already: a ticket polled again after it was
    /// ready would otherwise wait for a wake-up that never comes.
    fn take_or_wait(&self, waiter: impl FnOnce() -> Waiter) -> Option<Result<Record, QueueError>> {
        let mut slot = self.slot.lock();
        let result = slot.result.take();
        // `given` is set under this lock, with the result: given and gone is taken.
        let taken = result.is_none() && self.given.load(Ordering::Acquire);
        if result.is_none() && !taken {
            slot.waiter = Some(waiter());
        }
        drop(slot);
        assert!(!taken, "{POLLED_AFTER}");
        result
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Route = Box<dyn Fn(&str, &ObjectId) -> ObjectId + Send + Sync>;

/// A queue lives while it has work: made by the request that finds none for
/// its key, deleted by the worker that ends its last job. An object's queue
/// costs nothing between its actions, however many objects were ever queued.
struct Queue {
    /// The jobs behind the one in the ready list or running.
    jobs: VecDeque<Job>,
    closing: bool,
    /// Which queue of its key this is: `stop` waits for the one it closed to
    /// end, not for a queue a later request makes under the same key.
    made: u64,
}

/// The queues of one stripe, by key, and how many it made. A key is found by
/// the hash its id was made with, as the memory store finds objects: no
/// request hashes its id's text again.
#[derive(Default)]
struct Queues {
    map: HashTable<(ObjectId, Queue)>,
    made: u64,
}

/// Whether a table entry is `key`'s queue (found under `key.hash_code()`).
fn queue_of(key: &ObjectId) -> impl Fn(&(ObjectId, Queue)) -> bool + '_ {
    move |(k, _)| k == key
}

impl Queues {
    fn get(&self, key: &ObjectId) -> Option<&Queue> {
        (self.map.find(key.hash_code(), queue_of(key))).map(|(_, queue)| queue)
    }

    fn get_mut(&mut self, key: &ObjectId) -> Option<&mut Queue> {
        (self.map.find_mut(key.hash_code(), queue_of(key))).map(|(_, queue)| queue)
    }

    /// Marks `queue` closing: it takes no more requests (see
    /// [`Shared::stopping`]).
    fn close(queue: &mut Queue, stopping: &AtomicUsize) {
        if !queue.closing {
            queue.closing = true;
            stopping.fetch_add(1, Ordering::Release);
        }
    }
}

/// A lock the queuer holds for a few instructions, never across work: a spin
/// lock whose waiters yield, released by a plain store (the memory store's
/// shards use the same, `crate::sync`).
type Short<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;

/// One stripe of the queuer: the lock that orders the intake of its queues,
/// and the queues themselves. A queue's stripe is chosen by the hash of its key.
/// Each part on cache lines of its own, so that callers and workers on
/// different stripes share none, and callers do not meet workers on the
/// intake.
#[derive(Default)]
struct Stripe {
    /// Held from before a request's start until it is in its queue (see
    /// [`Queuer::intake`]): a lock that parks its waiters, as a start may wait
    /// on the network. Only callers take it: on lines of its own, apart from
    /// the queues that workers change.
    intake: Padded<Mutex<()>>,
    /// Held by a request's caller to put its job in, by a worker to take the
    /// queue's next one out when a job ends.
    queues: Padded<Short<Queues>>,
}

/// How many stripes a queuer has: two requests contend on one only when their
/// queues' hashes meet in it (one pair in 256).
const STRIPES: usize = 256;

/// The ends the store refused, each with its job (which holds its queue
/// meanwhile) and when it is tried next; and the retrier's thread, once
/// started.
#[derive(Default)]
struct Retries {
    pending: Vec<Pending>,
    thread: Option<JoinHandle<()>>,
}

struct Pending {
    job: Job,
    retry: Retry,
    due: Instant,
    pause: Duration,
}

/// How many leftovers the ready list keeps before a waiter sweeps them out:
/// each holds its task (a few hundred bytes) until a worker passes it over,
/// and while every worker is busy with long actions, threads that wait for
/// their own requests add one per request.
const LEFTOVERS: isize = 1024;

/// How long a queued action waits before it tries again to write its end that
/// the store refused retryably: the first pause, doubled each time up to the last.
const RETRY_FIRST: Duration = Duration::from_millis(10);
const RETRY_MOST: Duration = Duration::from_secs(1);

struct Shared {
    /// The next job of each queue that has one and runs none, in the order they
    /// became ready: a worker takes one without any lock. A job a waiting ticket
    /// took first ([`Shared::help`]) leaves its entry here, passed over.
    ready: SegQueue<Job>,
    /// How many entries of `ready` are such leftovers: past [`LEFTOVERS`],
    /// the waiter that adds one sweeps them out ([`Shared::sweep`]), one
    /// waiter at a time (`sweeping`). Signed: a worker that passes an entry
    /// over may count it before its waiter does.
    leftovers: AtomicIsize,
    sweeping: AtomicBool,
    stripes: Box<[Stripe]>,
    /// Idle workers, spinning or parked, and the wake-ups pushes cost.
    parking: Parking,
    /// `stop` and `terminate` wait on `drained` for queues to end, counted in
    /// `draining` so that a worker that ends a queue signals only when
    /// someone waits.
    drain: Mutex<()>,
    drained: Condvar,
    draining: AtomicUsize,
    /// `None`: each object's own queue.
    route: Option<Route>,
    /// Set when the queuer terminates: requests are refused, and an end the
    /// store refuses is no longer tried again (see [`retry`]).
    terminated: AtomicBool,
    /// Set once every queue ended after `terminate`: the workers leave.
    stopped: AtomicBool,
    /// Ends the store refused, waiting for their next try on the retrier's
    /// thread (started on the first), which waits on `retried`.
    retries: Mutex<Retries>,
    retried: Condvar,
    /// This, for the retrier's thread to hold.
    me: std::sync::Weak<Shared>,
    /// How many queues are closing, plus one once the queuer terminates:
    /// written under a stripe's lock, read without it by every request, which
    /// looks in the queues for its own only when this is not zero.
    stopping: AtomicUsize,
}

/// Per-object action queues run by a bounded pool of workers.
///
/// It owns a bounded pool of worker threads and one queue per object with work,
/// made by its first request and deleted when its last job ends. A request is
/// checked and started at once, so the object shows the action's transition state
/// as soon as the request is accepted (or keeps its status, for a hidden action);
/// its work then runs on a worker, after everything queued before it on the same
/// queue, one action at a time per queue, and different queues in parallel. When
/// the work is done the action completes, or fails back to where it started; if the
/// work panics the action is left abandoned for the [`Healer`](crate::Healer). An
/// end the store refuses while its backend is unreachable is tried again, backing
/// off up to a second, until the store takes it (the work is done: rolled back, the
/// object would show a state it is no longer in), the healer revokes the hold, or
/// the queuer terminates. The tries run on one thread of the queuer's (started with
/// the first), not on a worker: the action's queue waits for its end, the other
/// queues do not wait for a worker.
///
/// The model is blocking: actions drive hypervisors, disks and networks through
/// blocking calls, and a thread pool runs them without imposing an async runtime
/// on anyone. Async code uses the same queuer without blocking: a [`Ticket`] is a
/// `Future` (`ticket.await`), and work that is itself async runs on a worker with
/// the caller's runtime handle (`move || handle.block_on(work())`).
///
/// An idle worker spins for up to 50 µs before it parks (two workers at a time),
/// and [`Ticket::wait`] spins as long before it blocks: a request on an idle
/// queuer then costs a few microseconds instead of two wake-ups through the
/// kernel (BENCHMARKS.md). The spinning costs CPU only right after work; a
/// queuer on a machine shared with other work can spin less, or not at all
/// ([`QueuerBuilder::spin`]).
///
/// A thread blocked in [`Ticket::wait`] on a request no worker has taken yet
/// runs it itself (see there): the workers bound the threads the queuer keeps,
/// and the waiting threads add to them.
///
/// No lock is shared by every request: each queue belongs to one of 256
/// stripes, which orders its requests and holds its jobs, and the queues
/// ready to run are handed to the workers through a lock-free list.
///
/// ```
/// use fsm_runtime::{Actor, MemoryStore, Queuer, Runtime};
///
/// let vms = Runtime::new(
///     fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?,
///     MemoryStore::new(),
/// )?;
/// let user = Actor::new("user");
/// vms.create("vm-1", &user)?;
/// let queuer = Queuer::new(2);
/// let deploy = queuer.request(&vms, "vm-1", &user, "deploy").run(|_| Ok(()))?;
/// // Accepted: the status shows the action at once.
/// assert!(["DEPLOYING", "RUNNING"].contains(&vms.state_name("vm-1")?));
/// let record = deploy.wait()?;
/// assert_eq!(vms.machine().state(record.state).name, "RUNNING");
/// queuer.terminate();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Queuer {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Queuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queuer")
            .field("queues", &self.queues())
            .finish_non_exhaustive()
    }
}

impl Queuer {
    /// A queuer with `workers` threads (at least one), each request queued on its
    /// own object's queue: `Queuer::builder().workers(workers).build()`.
    pub fn new(workers: usize) -> Self {
        Self::builder().workers(workers).build()
    }

    /// A queuer whose `route(machine, id)` names the queue of each request: actions
    /// on a disk can go to the queue of the VM it is attached to
    /// (`Queuer::builder().workers(workers).route(route).build()`).
    pub fn with_route(
        workers: usize,
        route: impl Fn(&str, &ObjectId) -> ObjectId + Send + Sync + 'static,
    ) -> Self {
        Self::builder().workers(workers).route(route).build()
    }

    /// A queuer to set up: its workers, its route, how long idle workers spin,
    /// its threads' names.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fsm_runtime::Queuer;
    ///
    /// // On a machine shared with other services: workers park as soon as
    /// // they are idle, and waiting tickets do not spin.
    /// let queuer = Queuer::builder()
    ///     .workers(4)
    ///     .spin(Duration::ZERO)
    ///     .thread_name("vm-queuer")
    ///     .build();
    /// # queuer.terminate();
    /// ```
    pub fn builder() -> QueuerBuilder {
        QueuerBuilder {
            workers: 1,
            route: None,
            spin: SPIN,
            thread_name: "fsm-queuer".into(),
        }
    }

    /// A request for `action` on `id` by `actor`; add its work with
    /// [`Request::run`], or several steps with [`Request::step`] and
    /// [`Request::submit`].
    pub fn request<'a, S: Store>(
        &'a self,
        runtime: &'a Runtime<S>,
        id: impl IntoObjectId,
        actor: &'a Actor,
        action: impl ActionRef,
    ) -> Request<'a, S> {
        let action = action.resolve(runtime.machine()).map_err(Box::new);
        Request {
            queuer: self,
            runtime,
            id: id.into_object_id(),
            actor,
            action,
            steps: SmallVec::new(),
            unknown: None,
        }
    }

    /// The queues that exist now, sorted: those with a request queued or
    /// running. A queue is made by the request that finds none, and deleted
    /// once its last job ended.
    pub fn queues(&self) -> Vec<ObjectId> {
        let mut ids = Vec::new();
        for stripe in &*self.shared.stripes {
            ids.extend(stripe.queues.0.lock().map.iter().map(|(id, _)| id.clone()));
        }
        ids.sort();
        ids
    }

    /// Stops the queue `id`: it takes no more requests, runs what is queued, and is
    /// deleted. Returns once it is gone. A later request creates a new queue,
    /// which this does not wait for, even if it comes before this returns.
    ///
    /// What is queued runs to its end, and an end the store refuses while its
    /// backend is unreachable is tried again until it is written (see the
    /// module): with the store down, this waits for the store.
    /// [`terminate`](Self::terminate) ends those retries.
    pub fn stop(&self, id: impl IntoObjectId) {
        let id = id.into_object_id();
        let shared = &*self.shared;
        let stripe = shared.stripe(&id);
        let made = {
            // After the requests being taken in: a request accepted before the
            // stop is run, one after it refused.
            let _order = lock(&stripe.intake.0);
            let mut queues = stripe.queues.0.lock();
            let queue = queues.get_mut(&id);
            queue.map(|queue| {
                Queues::close(queue, &shared.stopping);
                queue.made
            })
        };
        // The queue closed here ends; a request after this one's end makes
        // another, which this does not wait for.
        if let Some(made) = made {
            shared.wait_drained(|| {
                let queues = stripe.queues.0.lock();
                queues.get(&id).is_none_or(|q| q.made != made)
            });
        }
    }

    /// Stops every queue as [`Queuer::stop`] does, then the workers. Requests after
    /// this are refused with [`QueueError::Terminated`].
    pub fn terminate(&self) {
        let shared = &*self.shared;
        if !shared.terminated.swap(true, Ordering::AcqRel) {
            shared.stopping.fetch_add(1, Ordering::Release);
        }
        // Ends still refused are not tried again: their tickets get the refusal.
        drop(lock(&shared.retries));
        shared.retried.notify_all();
        // Each stripe's intake is taken once: a request that came before this
        // is in its queue, and one after it sees the queuer terminated.
        for stripe in &*shared.stripes {
            let _order = lock(&stripe.intake.0);
            let mut queues = stripe.queues.0.lock();
            for (_, queue) in queues.map.iter_mut() {
                Queues::close(queue, &shared.stopping);
            }
        }
        shared.wait_drained(|| {
            shared
                .stripes
                .iter()
                .all(|s| s.queues.0.lock().map.is_empty())
        });
        shared.stopped.store(true, Ordering::SeqCst);
        shared.parking.stop_all();
        let retrier = {
            let mut retries = lock(&shared.retries);
            shared.retried.notify_all();
            retries.thread.take()
        };
        let workers = std::mem::take(&mut *lock(&self.workers));
        for thread in workers.into_iter().chain(retrier) {
            let _ = thread.join();
        }
    }

    /// The lock that orders the requests of `key`'s queue, held from before a
    /// request's start until it is in its queue ([`Shared::push`]), so that
    /// requests enter the queue in the order their starts were accepted; refused
    /// while the queue, or the queuer, is stopping.
    ///
    /// The lock is its stripe's, not a lock of the queue itself: a request takes
    /// it without a look in the queues, which it takes only while some queue is
    /// stopping. (Two queues on one stripe order each other's intake too; the
    /// work of their requests still runs in parallel.)
    fn intake(&self, key: &ObjectId) -> Result<MutexGuard<'_, ()>, QueueError> {
        let stripe = self.shared.stripe(key);
        let order = lock(&stripe.intake.0);
        // A stop or terminate that comes after this look is one that came
        // after the request, as if it had come after its push.
        if self.shared.stopping.load(Ordering::Acquire) > 0 {
            if self.shared.terminated.load(Ordering::Acquire) {
                return Err(QueueError::Terminated);
            }
            if (stripe.queues.0.lock().get(key)).is_some_and(|q| q.closing) {
                return Err(QueueError::Closed { id: key.clone() });
            }
        }
        Ok(order)
    }
}

/// How a [`Queuer`] is made ([`Queuer::builder`]): each setting has a default,
/// so set only what differs.
#[must_use = "a builder does nothing until `build`"]
pub struct QueuerBuilder {
    workers: usize,
    route: Option<Route>,
    spin: Duration,
    thread_name: String,
}

impl std::fmt::Debug for QueuerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuerBuilder")
            .field("workers", &self.workers)
            .field("routed", &self.route.is_some())
            .field("spin", &self.spin)
            .field("thread_name", &self.thread_name)
            .finish()
    }
}

impl QueuerBuilder {
    /// How many worker threads run the queued work (at least one; one unless
    /// told). Threads waiting for their tickets add to them (see
    /// [`Ticket::wait`]).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Names the queue of each request by `route(machine, id)` instead of the
    /// object's own: actions on a disk can go to the queue of the VM it is
    /// attached to.
    pub fn route(
        mut self,
        route: impl Fn(&str, &ObjectId) -> ObjectId + Send + Sync + 'static,
    ) -> Self {
        self.route = Some(Box::new(route));
        self
    }

    /// How long an idle worker spins for new work before it parks (two
    /// workers at a time), and a ticket's [`wait`](Ticket::wait) for its
    /// outcome before it blocks: 50 µs unless told. Spinning saves a wake-up
    /// through the kernel per request on a busy queuer, at the cost of CPU
    /// right after work; `Duration::ZERO` never spins (BENCHMARKS.md has both).
    pub fn spin(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }

    /// Names the workers' threads `<name>-<n>` (`fsm-queuer-0`, ... unless
    /// told): what a profile or a thread dump shows.
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// The queuer, its workers started.
    pub fn build(self) -> Queuer {
        let QueuerBuilder {
            workers,
            route,
            spin,
            thread_name,
        } = self;
        let shared = Arc::new_cyclic(|me| Shared {
            ready: SegQueue::new(),
            leftovers: AtomicIsize::new(0),
            sweeping: AtomicBool::new(false),
            stripes: (0..STRIPES).map(|_| Stripe::default()).collect(),
            parking: Parking::new(spin),
            drain: Mutex::default(),
            drained: Condvar::new(),
            draining: AtomicUsize::new(0),
            route,
            terminated: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            retries: Mutex::default(),
            retried: Condvar::new(),
            me: me.clone(),
            stopping: AtomicUsize::new(0),
        });
        let workers = (0..workers)
            .map(|n| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("{thread_name}-{n}"))
                    .spawn(move || work(&shared))
                    .expect("spawn a queue worker")
            })
            .collect();
        Queuer {
            shared,
            workers: Mutex::new(workers),
        }
    }
}

impl Drop for Queuer {
    fn drop(&mut self) {
        if !self.shared.stopped.load(Ordering::Acquire) {
            self.terminate();
        }
    }
}

/// A worker: take a ready job, run it, put its queue's next job in the ready
/// list, or delete the queue when it has none.
fn work(shared: &Shared) {
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
    /// table does not place it by (the low ones, and the top seven).
    fn stripe(&self, key: &ObjectId) -> &Stripe {
        &self.stripes[(key.hash_code() >> 32) as usize % self.stripes.len()]
    }

    /// Accepts a started request into its queue (`key`, the job's), in order:
    /// behind the jobs of its queue, or, making the queue, in the ready list.
    fn push(&self, key: &ObjectId, job: Job) {
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
    fn make_ready(&self, job: Job, by_worker: bool) {
        job.head().ready();
        self.ready.push(job);
        if !by_worker {
            self.wake_for_pushed();
        }
    }

    /// After a push on the ready list: wakes a parked worker unless one
    /// spins (see [`Parking`]).
    fn wake_for_pushed(&self) {
        self.parking.pushed();
    }

    /// The first ready job, now taken; `None` when none is ready. Jobs a
    /// waiting ticket took are passed over.
    fn take_ready(&self) -> Option<Job> {
        while let Some(job) = self.ready.pop() {
            if !job.head().take() {
                self.leftovers.fetch_sub(1, Ordering::Relaxed);
                job.disown();
                continue;
            }
            // More ready than this worker takes: pass the wake-up on.
            if !self.ready.is_empty() {
                self.parking.pass_on();
            }
            return Some(job);
        }
        None
    }

    /// A worker's next job: waits for a ready queue, spinning a little first
    /// (two workers at a time), then parked. `None` once the queuer stopped.
    fn take(&self) -> Option<Job> {
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
    fn run(&self, job: Job, by_worker: bool) -> Option<Job> {
        let done = match catch_unwind(AssertUnwindSafe(|| job.task.run(self))) {
            Ok(Ran::Done(done)) => done,
            Ok(Ran::Retry(retry)) => {
                self.retry_later(job, retry);
                return if by_worker { self.take_ready() } else { None };
            }
            Err(_) => {
                tracing::error!(queue = %job.head().key(), "an action panicked; it is left abandoned for the healer");
                (false, Err(job.task.crashed()))
            }
        };
        self.end(job, done, by_worker)
    }

    /// Puts the queue's next job in the ready list, or deletes the queue when
    /// it has none; closes it first when `close` (its object reached a
    /// terminal state: the jobs behind run, later requests are refused). Then
    /// gives the job's outcome.
    fn end(&self, job: Job, (close, outcome): Done, by_worker: bool) -> Option<Job> {
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
    fn retry_later(&self, job: Job, retry: Retry) {
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
    fn retrier(&self) {
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
                        self.end(pending.job, (false, Err(crashed)), false);
                    }
                }
            }
            retries = lock(&self.retries);
            retries.pending.extend(again);
        }
    }

    /// Waits until `drained` answers true, looking again each time a queue
    /// ends.
    fn wait_drained(&self, mut drained: impl FnMut() -> bool) {
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
    fn help(&self, task: &Arc<dyn Queued>) {
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
    fn sweep(&self) {
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

/// The outcome of a queued action's end (`ended`): the record it left, or the
/// failure of the step that failed (`failed`), or the store's refusal; and
/// whether its queue ends with it: after an object reaches a terminal state
/// its own queue ends (`own_queue`), a queue it was routed to (its VM's) goes
/// on.
fn settle<S: Store>(
    rt: &Runtime<S>,
    own_queue: bool,
    ended: Result<Record, RuntimeError>,
    failed: Option<(String, String)>,
) -> Done {
    let outcome = match failed {
        Some((step, message)) => match ended {
            Ok(_) => Err(QueueError::Failed { step, message }),
            Err(e) => Err(QueueError::Refused(e)),
        },
        None => ended.map_err(QueueError::Refused),
    };
    let terminal = own_queue
        && outcome
            .as_ref()
            .is_ok_and(|r| r.in_flight.is_none() && rt.machine().state(r.state).terminal);
    (terminal, outcome)
}

/// The tries again of an end (`failed`: a failure, else a completion) the
/// store `refused` retryably (its backend unreachable), by the action's fence
/// ([`Runtime::resume`]): until it is written, or the hold is gone (the
/// healer rolled the action back), or the queuer terminates, which leaves the
/// store's error to the ticket (and the action to [`Ticket::fence`]). The work
/// is done: rolled back by the healer, it would show the object where it no
/// longer is.
///
/// A write the store reported as failed may have landed all the same (a
/// connection lost after etcd applied it): then the hold is found ended by
/// this action's own actor at the next version, and the record as read now is
/// the outcome.
#[cold]
fn retry<S: Store>(
    rt: Runtime<S>,
    id: ObjectId,
    fence: Fence,
    by: crate::ActorName,
    mut failed: Option<(String, String)>,
    own_queue: bool,
    refused: RuntimeError,
) -> Retry {
    let warn_refused = move |id: &ObjectId, e: &RuntimeError| {
        tracing::warn!(object = %id, %fence, error = %e, "the store refused the action's end: trying again");
    };
    warn_refused(&id, &refused);
    Box::new(move |queue: &Shared| {
        let actor = Actor::new(by.as_str());
        let ended = rt
            .resume(&id, &actor, fence)
            .and_then(|handle| match &failed {
                Some(_) => handle.fail(),
                None => handle.complete(),
            });
        let ended = match ended {
            Err(e) if e.is_retryable() && !queue.terminated.load(Ordering::Acquire) => {
                warn_refused(&id, &e);
                return None;
            }
            Err(RuntimeError::Revoked {
                by: Some(revocation),
                ..
            }) if revocation.version == fence.0 + 1 && revocation.by == by.as_str() => rt.get(&id),
            ended => ended,
        };
        Some(settle(&rt, own_queue, ended, failed.take()))
    })
}

/// A request being put together: its action and the work of its steps.
#[must_use = "a request does nothing until `run` or `submit`"]
pub struct Request<'a, S: Store> {
    queuer: &'a Queuer,
    runtime: &'a Runtime<S>,
    id: ObjectId,
    actor: &'a Actor,
    /// A name that is no action of the machine is boxed: the request is
    /// moved whole into [`Request::submit`], and most name an action.
    action: Result<ActionId, Box<UnknownAction>>,
    /// Most requests have one step: kept inline, it costs no allocation.
    steps: SmallVec<[(ActionId, Work); 1]>,
    /// The first step that is no action of the machine: the request is
    /// refused with it.
    unknown: Option<Box<UnknownAction>>,
}

impl<S: Store> Request<'_, S> {
    /// Queues the action with `work` as its step: its only one, or, after steps
    /// added with [`Request::step`], its last, named after the action itself.
    pub fn run(
        mut self,
        work: impl FnOnce(Fence) -> Result<(), String> + Send + 'static,
    ) -> Result<Ticket, QueueError> {
        // (An unknown action is refused before any step is looked at.)
        if let Ok(action) = self.action {
            self.steps.push((action, Box::new(work)));
        }
        self.submit()
    }

    /// Adds a step: an action of the table, run in order with the others as the
    /// work of the requested action (OpenvCloud's `destroy_vm` is `stop`,
    /// `delete`, `destroy`). Each step must be an action the table allows from the
    /// state the object is in when the request is accepted.
    pub fn step(
        mut self,
        step: impl ActionRef,
        work: impl FnOnce(Fence) -> Result<(), String> + Send + 'static,
    ) -> Self {
        match step.resolve(self.runtime.machine()) {
            Ok(step) => self.steps.push((step, Box::new(work))),
            Err(e) => {
                self.unknown.get_or_insert(Box::new(e));
            }
        }
        self
    }

    /// Checks and starts the request, and queues its steps.
    ///
    /// Refused when the runtime refuses the action (an object in a transition state
    /// answers "cannot execute action at this time"), when a step is not allowed
    /// from the object's state, or when the queue is stopping. Accepted, the object
    /// shows the action's transition state at once and the returned [`Ticket`]
    /// gives the outcome.
    pub fn submit(self) -> Result<Ticket, QueueError> {
        let Request {
            queuer,
            runtime,
            id,
            actor,
            action,
            steps: checked,
            unknown,
        } = self;
        let action = action.map_err(|e| RuntimeError::from(*e))?;
        if let Some(e) = unknown {
            return Err(RuntimeError::from(*e).into());
        }
        let machine = runtime.machine();
        // Whether a step is another action than the one requested: each such
        // step is checked against the object's state (the action itself is
        // the start's to check). Most requests have none.
        let composite = checked.iter().any(|&(step, _)| step != action);
        // Most requests go to their object's own queue: keyed by the id itself.
        let routed = (queuer.shared.route.as_ref())
            .map(|route| route(machine.name(), &id))
            .filter(|key| *key != id);
        let _order = queuer.intake(routed.as_ref().unwrap_or(&id))?;
        // The first step the table does not allow from `origin`, as the error. The
        // action itself is the runtime's to check, with its own message.
        let bad_step = |origin| {
            checked
                .iter()
                .filter(|(step, _)| *step != action)
                .find_map(|&(step, _)| machine.start(step, origin).err())
                .map(|refused| QueueError::Step {
                    id: id.clone(),
                    action: machine.action(action).name.to_string(),
                    refused,
                })
        };
        // Checked before the start, so that a refused request writes nothing...
        // (A busy object is left to the start, which answers that it is busy.)
        if composite {
            match runtime.get(id.clone()) {
                Ok(record) if record.in_flight.is_none() => {
                    if let Some(e) = bad_step(record.state) {
                        return Err(e);
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let handle = runtime.start(&id, actor, action)?;
        // ... and again against the state the start found, which may differ.
        if composite && let Some(e) = bad_step(handle.origin()) {
            let _ = handle.fail();
            return Err(e);
        }
        let own_queue = routed.is_none();
        let by = actor.actor_name();
        let job = move |handle: InFlight<'_, S>, rt: &Runtime<S>, queue: &Shared, id: &ObjectId| {
            let span = tracing::info_span!("queued", object = %handle.id());
            let _enter = span.enter();
            let fence = handle.fence();
            // The first step to fail, with its message; the later steps do not run.
            // Before each step, the action must still hold the object: a hold the
            // healer revoked while the job waited, or during an earlier step, runs
            // nothing more.
            let mut failed: Option<(String, String)> = None;
            let mut revoked = None;
            for (step, work) in checked {
                if let Err(e) = handle.still_held() {
                    revoked = Some(e);
                    break;
                }
                let name = rt.action_name(step);
                tracing::debug!(step = %name, %fence, "step");
                if let Err(message) = work(fence) {
                    failed = Some((name.to_owned(), message));
                    break;
                }
            }
            if let Some(e) = revoked {
                tracing::warn!(error = %e, "revoked: no further step runs");
                handle.relinquish();
                return Ran::Done((false, Err(QueueError::Revoked(e))));
            }
            let fence = handle.fence();
            let ended = match &failed {
                Some(_) => handle.fail(),
                None => handle.complete(),
            };
            match ended {
                Err(e) if e.is_retryable() && !queue.terminated.load(Ordering::Acquire) => {
                    Ran::Retry(retry(
                        rt.clone(),
                        id.clone(),
                        fence,
                        by,
                        failed,
                        own_queue,
                        e,
                    ))
                }
                ended => Ran::Done(settle(rt, own_queue, ended, failed)),
            }
        };
        let fence = handle.fence();
        let handle = handle.detach();
        let task: Arc<dyn Queued> = Task::new(id, routed, runtime, action, handle, job);
        queuer
            .shared
            .push(task.head().key(), Job::new(task.clone()));
        Ok(Ticket {
            task: Some(task),
            fence,
            queue: queuer.shared.clone(),
        })
    }
}

/// The outcome of an accepted request: wait for it (blocking) or `.await` it.
#[must_use = "a ticket is how the outcome of a request is known"]
pub struct Ticket {
    /// `None` once an awaited ticket gave its outcome: its task is then
    /// this thread's spare (see [`SPARE`]).
    task: Option<Arc<dyn Queued>>,
    fence: Fence,
    /// The queuer, for [`Ticket::wait`] to run the request from.
    queue: Arc<Shared>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field(
                "done",
                &(self.task.as_ref()).is_none_or(|task| task.head().outcome.is_given()),
            )
            .finish()
    }
}

impl Ticket {
    /// The fencing token of the accepted request's action, as its start handed
    /// it out (the one each step's work is given). Keep it before waiting: the
    /// queue tries an end the store refuses again until it is written, but not
    /// once the queuer terminates; an end the store still refused then
    /// (`QueueError::Refused(e)` where [`e.is_retryable()`](RuntimeError::is_retryable))
    /// leaves the action holding the object, and
    /// [`Runtime::resume`] with this fence ends it.
    ///
    /// ```
    /// # use fsm_runtime::{Actor, MemoryStore, Queuer, Runtime};
    /// # let vms = Runtime::new(
    /// #     fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?,
    /// #     MemoryStore::new(),
    /// # )?;
    /// # let user = Actor::new("user");
    /// # vms.create("vm-1", &user)?;
    /// let queuer = Queuer::new(1);
    /// let ticket = queuer.request(&vms, "vm-1", &user, "deploy").run(|_| Ok(()))?;
    /// let fence = ticket.fence();
    /// let record = ticket.wait()?;
    /// // The start wrote the version the fence names; the completion the next.
    /// assert_eq!(record.version, fence.0 + 1);
    /// # queuer.terminate();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fence(&self) -> Fence {
        self.fence
    }

    /// Waits for the action to end: the record it left, or why it failed. Do not
    /// call from async code; `.await` the ticket there.
    ///
    /// A request whose work no worker has taken yet, and that is next on its
    /// queue, is run here, on the waiting thread, as a worker would run it (its
    /// panic caught, its queue then handed on): the thread would only wait
    /// otherwise, perhaps behind long actions on other queues that hold every
    /// worker. A request behind another on its queue waits its turn. So more
    /// actions may run at once than the queuer has workers: one more per
    /// waiting thread. An awaited ticket never runs work (a task must not block
    /// its executor).
    pub fn wait(mut self) -> Result<Record, QueueError> {
        let task = self.task.take().expect(POLLED_AFTER);
        let outcome = &task.head().outcome;
        if !outcome.is_given() {
            self.queue.help(&task);
        }
        // Most actions end within microseconds: spin briefly before parking.
        spin_until(self.queue.parking.spin(), false, || outcome.is_given());
        let result = loop {
            if let Some(result) = outcome.take_or_wait(|| Waiter::Thread(std::thread::current())) {
                break result;
            }
            // Woken by `give`, or spuriously: look again.
            std::thread::park();
        };
        task.recycle();
        result
    }
}

/// What polling a ticket that gave its outcome panics with.
const POLLED_AFTER: &str = "a `Ticket` was polled after it gave its outcome";

/// Ready once, with the outcome; polled again after that, it panics (as
/// futures do when polled after completion) rather than stay pending forever.
impl Future for Ticket {
    type Output = Result<Record, QueueError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let task = &mut self.task;
        let outcome = &task.as_ref().expect(POLLED_AFTER).head().outcome;
        match outcome.take_or_wait(|| Waiter::Task(cx.waker().clone())) {
            Some(result) => {
                // Given: the ticket is done with its task.
                task.take().expect(POLLED_AFTER).recycle();
                Poll::Ready(result)
            }
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::park::SPINNERS;
    use crate::{Holder, MemoryStore};

    /// A task its queue drops unrun (its worker gone) gives its ticket the crash
    /// at once, and its action, in flight, is recorded as abandoned for the
    /// healer: no ticket waits forever, no object stays held by nobody.
    #[test]
    fn a_task_dropped_unrun_gives_its_ticket_the_crash() {
        let machine = crate::testing::machine();
        let rt = Runtime::new(machine, MemoryStore::new()).unwrap();
        let user = Actor::new("user");
        rt.create("vm", &user).unwrap();
        let handle = rt.start("vm", &user, "start").unwrap();
        let (action, fence) = (handle.action(), handle.fence());
        let job = |handle: InFlight<'_>, _: &Runtime, _: &Shared, _: &ObjectId| {
            Ran::Done((false, handle.complete().map_err(QueueError::from)))
        };
        let task: Arc<dyn Queued> = Arc::new(Task {
            head: Head::new("vm".into(), None),
            runtime: Some(rt.clone()),
            action,
            job: Short::new(Some((handle.detach(), job))),
        });
        let ticket = Ticket {
            task: Some(task.clone()),
            fence,
            // A queuer that never saw the task: the wait finds nothing to run.
            queue: Queuer::new(1).shared.clone(),
        };
        drop(task);
        drop(Job::new(ticket.task.clone().expect("not taken yet")));
        // Recorded when the queue let go, not when the ticket does.
        let record = rt.get("vm").unwrap();
        assert!(record.in_flight.expect("still held").abandoned);
        match ticket.wait() {
            Err(QueueError::Crashed { id, action }) => {
                assert_eq!((id.as_str(), action.as_str()), ("vm", "start"));
            }
            other => panic!("{other:?}"),
        }
    }

    /// Idle workers spin before they park, but no more than `SPINNERS` of
    /// them at once, however many go idle together: four workers released
    /// at once from four jobs, ten times over.
    #[test]
    fn no_more_than_two_idle_workers_spin() {
        let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
        let user = Actor::new("user");
        let queuer = Queuer::new(4);
        let shared = queuer.shared.clone();
        let mut most = 0;
        for round in 0..10 {
            let gate = Arc::new(std::sync::Barrier::new(5));
            let tickets: Vec<_> = (0..4)
                .map(|i| {
                    let id = format!("vm-{round}-{i}");
                    rt.create(id.as_str(), &user).unwrap();
                    let gate = gate.clone();
                    queuer
                        .request(&rt, id.as_str(), &user, "start")
                        .run(move |_| {
                            gate.wait();
                            Ok(())
                        })
                        .unwrap()
                })
                .collect();
            // Every worker holds a job; released together, they go idle
            // together, and spin for `SPIN` at most (looked at for longer,
            // in case this thread or they wait for a core meanwhile).
            gate.wait();
            let until = Instant::now() + Duration::from_millis(2);
            while Instant::now() < until {
                most = most.max(shared.parking.spinning());
            }
            for ticket in tickets {
                ticket.wait().unwrap();
            }
        }
        assert!((1..=SPINNERS).contains(&most), "{most} spinning at once");
        queuer.terminate();
    }

    /// Built not to spin, a queuer's idle workers park at once (none is ever
    /// counted spinning) and each request wakes one through the kernel:
    /// every request of many rounds still ends, on the workers, whose
    /// threads carry the builder's name.
    #[test]
    fn a_queuer_built_not_to_spin_parks_its_workers_and_still_runs_every_request() {
        let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
        let user = Actor::new("user");
        let queuer = Queuer::builder()
            .workers(2)
            .spin(Duration::ZERO)
            .thread_name("vm-queuer")
            .build();
        let shared = queuer.shared.clone();
        let ran_on = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        let mut most = 0;
        for round in 0..200 {
            let id = format!("vm-{round}");
            rt.create(id.as_str(), &user).unwrap();
            let ran_on = ran_on.clone();
            let mut ticket = queuer
                .request(&rt, id.as_str(), &user, "start")
                .run(move |_| {
                    let name = std::thread::current().name().map(str::to_owned);
                    lock(&ran_on).insert(name);
                    Ok(())
                })
                .unwrap();
            // Polled, not waited for: a waiting thread would run the job
            // itself rather than wait for a parked worker to wake. Meanwhile,
            // the workers go idle: a spinning one would be seen.
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut cx = Context::from_waker(Waker::noop());
            loop {
                most = most.max(shared.parking.spinning());
                if let Poll::Ready(outcome) = Pin::new(&mut ticket).poll(&mut cx) {
                    outcome.unwrap();
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "round {round}: the request was lost"
                );
            }
            let until = Instant::now() + Duration::from_micros(200);
            while Instant::now() < until {
                most = most.max(shared.parking.spinning());
            }
        }
        assert_eq!(most, 0, "a worker spun");
        let names = lock(&ran_on).clone();
        assert!(
            !names.is_empty()
                && names
                    .iter()
                    .all(|n| n.as_deref().is_some_and(|n| n.starts_with("vm-queuer-"))),
            "{names:?}"
        );
        // Both parked, waiting for work.
        let deadline = Instant::now() + Duration::from_secs(10);
        while shared.parking.sleepers() < 2 {
            assert!(Instant::now() < deadline, "the workers did not park");
            std::thread::yield_now();
        }
        queuer.terminate();
    }

    /// A thread's next request writes its task over the one whose outcome
    /// its last ticket took, rather than allocate; and a spare task keeps no
    /// runtime, and so no store, alive: the store goes with the last runtime.
    #[test]
    fn a_thread_reuses_the_task_its_ticket_let_go_and_keeps_no_store_alive() {
        let store = Arc::new(MemoryStore::new());
        let rt = Runtime::new(crate::testing::machine(), store.clone()).unwrap();
        let user = Actor::new("user");
        rt.create("vm", &user).unwrap();
        let queuer = Queuer::new(1);
        fn task(ticket: &Ticket) -> &Arc<dyn Queued> {
            ticket.task.as_ref().expect("not taken yet")
        }
        let address = |ticket: &Ticket| Arc::as_ptr(task(ticket)).cast::<()>();
        // Until the worker let go of the task (it does once it gave the
        // outcome): only a task nothing else holds is kept.
        let alone = |ticket: &Ticket| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Arc::strong_count(task(ticket)) > 1 {
                assert!(Instant::now() < deadline, "the worker keeps the task");
                std::thread::yield_now();
            }
        };
        let first = queuer
            .request(&rt, "vm", &user, "start")
            .run(|_| Ok(()))
            .unwrap();
        let reused = address(&first);
        alone(&first);
        first.wait().unwrap();
        // Awaited, the same.
        let mut second = queuer
            .request(&rt, "vm", &user, "stop")
            .run(|_| Ok(()))
            .unwrap();
        assert_eq!(address(&second), reused, "a new task was allocated");
        alone(&second);
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(record) = Pin::new(&mut second).poll(&mut cx) else {
            panic!("the outcome was given, and not ready");
        };
        assert_eq!(
            rt.machine().state(record.unwrap().state).name.as_ref(),
            "HALTED"
        );
        // The second task is a spare now, on this thread.
        assert_eq!(SPARE.with(|spare| spare.borrow().len()), 1);
        drop(rt);
        assert_eq!(Arc::strong_count(&store), 1, "a spare task keeps the store");
        // A runtime over another store has tasks of another type: the spare
        // is dropped (not kept beside), the task allocated (perhaps in the
        // block just freed), and that one kept in its place, then reused.
        let other = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
        other.create("vm", &user).unwrap();
        let third = queuer
            .request(&other, "vm", &user, "start")
            .run(|_| Ok(()))
            .unwrap();
        let allocated = address(&third);
        alone(&third);
        third.wait().unwrap();
        assert_eq!(SPARE.with(|spare| spare.borrow().len()), 1);
        let fourth = queuer
            .request(&other, "vm", &user, "stop")
            .run(|_| Ok(()))
            .unwrap();
        assert_eq!(
            address(&fourth),
            allocated,
            "the spare of its type was not reused"
        );
        fourth.wait().unwrap();
        queuer.terminate();
    }

    /// Threads that wait for their own requests while the only worker is busy
    /// run them, each leaving its entry in the ready list; past `LEFTOVERS`
    /// the waiter that adds one sweeps them out, so the list stays bounded
    /// while the worker stays busy. A job still ready in the list (nobody
    /// waits for it) is put back by each sweep, and the worker runs it once
    /// it is free.
    #[test]
    fn leftovers_of_requests_their_waiters_ran_are_swept() {
        let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
        let user = Actor::new("user");
        let queuer = Queuer::new(1);
        for id in ["held", "ready"] {
            rt.create(id, &user).unwrap();
        }
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (started, busy) = std::sync::mpsc::channel::<()>();
        let held = queuer
            .request(&rt, "held", &user, "start")
            .run(move |_| {
                started.send(()).map_err(|e| e.to_string())?;
                released.recv().map_err(|e| e.to_string())
            })
            .unwrap();
        busy.recv().unwrap();
        let ran_on = Arc::new(std::sync::OnceLock::new());
        let mut ready = {
            let ran_on = ran_on.clone();
            queuer
                .request(&rt, "ready", &user, "start")
                .run(move |_| {
                    let _ = ran_on.set(std::thread::current().name().map(str::to_owned));
                    Ok(())
                })
                .unwrap()
        };
        let listed = || queuer.shared.ready.len() as isize;
        let mut longest = 0;
        for i in 0..3 * LEFTOVERS {
            let id = format!("vm-{i}");
            rt.create(id.as_str(), &user).unwrap();
            let ticket = queuer
                .request(&rt, id.as_str(), &user, "start")
                .run(|_| Ok(()))
                .unwrap();
            ticket.wait().unwrap();
            longest = longest.max(listed());
        }
        // The leftovers piled up, and were swept out each time they passed
        // the bound (the ready job is the one more).
        assert_eq!(longest, LEFTOVERS + 1);
        assert!(listed() <= LEFTOVERS + 1, "{} listed", listed());
        // Awaited (an awaited ticket never runs its job), the ready job is
        // run by the worker once it is free.
        release.send(()).unwrap();
        held.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut cx = Context::from_waker(Waker::noop());
        let record = loop {
            if let Poll::Ready(outcome) = Pin::new(&mut ready).poll(&mut cx) {
                break outcome.unwrap();
            }
            assert!(Instant::now() < deadline, "the ready job was lost");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(rt.machine().state(record.state).name.as_ref(), "RUNNING");
        assert_eq!(
            ran_on.get().cloned().flatten().as_deref(),
            Some("fsm-queuer-0")
        );
        queuer.terminate();
    }

    /// A ticket polled again after it was ready panics, saying so, rather than
    /// stay pending with nobody left to wake it.
    #[test]
    #[should_panic(expected = "a `Ticket` was polled after it gave its outcome")]
    fn a_ticket_polled_after_its_outcome_panics() {
        let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
        let user = Actor::new("user");
        rt.create("vm", &user).unwrap();
        let queuer = Queuer::new(1);
        let mut ticket = queuer
            .request(&rt, "vm", &user, "start")
            .run(|_| Ok(()))
            .unwrap();
        while !ticket
            .task
            .as_ref()
            .expect("not taken yet")
            .head()
            .outcome
            .is_given()
        {
            std::thread::yield_now();
        }
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(&mut ticket).poll(&mut cx) {
            Poll::Ready(outcome) => assert!(outcome.is_ok(), "{outcome:?}"),
            Poll::Pending => panic!("the outcome was given"),
        }
        let _ = Pin::new(&mut ticket).poll(&mut cx);
    }

    /// A queued action is started on the caller's thread and ended on a
    /// worker's, and its holder's box is freed by neither: the memory store keeps
    /// it with the object, and the object's next action (started here again) is
    /// held in the same box, whether the queued one completed or failed. A box
    /// freed on the worker would reach the caller's next start only through the
    /// allocator's shared bins (see `Change::apply_reusing`).
    #[test]
    fn a_queued_action_leaves_its_holder_box_to_the_next_start() {
        let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
        let user = Actor::new("user");
        let queuer = Queuer::new(1);
        let boxed = |id: &str| {
            rt.store()
                .load_with(&id.into(), |r| {
                    r.in_flight.as_deref().map(|h| h as *const Holder as usize)
                })
                .unwrap()
                .flatten()
        };
        for (id, fails, next) in [("completes", false, "stop"), ("fails", true, "start")] {
            rt.create(id, &user).unwrap();
            // The job, taken by the worker (not by the wait below), waits until
            // the box it holds is seen here.
            let (started, taken) = std::sync::mpsc::channel::<()>();
            let (release, released) = std::sync::mpsc::channel::<()>();
            let ticket = queuer
                .request(&rt, id, &user, "start")
                .run(move |_| {
                    started.send(()).map_err(|e| e.to_string())?;
                    match released.recv() {
                        Ok(()) if fails => Err("no host".to_owned()),
                        got => got.map_err(|e| e.to_string()),
                    }
                })
                .unwrap();
            taken.recv().unwrap();
            let first = boxed(id).expect("started");
            release.send(()).unwrap();
            let outcome = ticket.wait();
            let state = &rt.machine().state(rt.state(id).unwrap()).name;
            match outcome {
                Ok(_) if !fails => assert_eq!(state, "RUNNING"),
                Err(QueueError::Failed { .. }) if fails => assert_eq!(state, "HALTED"),
                other => panic!("{id}: {other:?}"),
            }
            assert_eq!(boxed(id), None, "{id}: ended");
            let handle = rt.start(id, &user, next).unwrap();
            assert_eq!(
                boxed(id),
                Some(first),
                "{id}: the next start reuses the box"
            );
            handle.complete().unwrap();
        }
        queuer.terminate();
    }

    /// Requests look in the shared queues only while some queue is stopping:
    /// the count that says so rises while `stop` waits for a running job (and
    /// other queues take requests meanwhile), rises and falls again when an
    /// object's own queue ends at a terminal state, and is back to zero once
    /// the queues it counted are gone (a count left behind would send every
    /// later request the slow way).
    #[test]
    fn the_count_of_stopping_queues_returns_to_zero() {
        let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
        let user = Actor::new("user");
        for id in ["vm", "other", "old"] {
            rt.create(id, &user).unwrap();
        }
        let queuer = Queuer::new(2);
        let stopping = || queuer.shared.stopping.load(Ordering::Acquire);
        let (release, released) = std::sync::mpsc::channel::<()>();
        let ticket = queuer
            .request(&rt, "vm", &user, "start")
            .run(move |_| released.recv().map_err(|e| e.to_string()))
            .unwrap();
        assert_eq!(stopping(), 0);
        std::thread::scope(|s| {
            let stop = s.spawn(|| queuer.stop("vm"));
            while stopping() == 0 {
                std::thread::yield_now();
            }
            assert_eq!(stopping(), 1);
            // Only the stopping queue refuses.
            let refused = queuer.request(&rt, "vm", &user, "stop").run(|_| Ok(()));
            assert!(
                matches!(refused, Err(QueueError::Closed { .. })),
                "{refused:?}"
            );
            let other = queuer.request(&rt, "other", &user, "start").run(|_| Ok(()));
            release.send(()).unwrap();
            other.expect("another queue takes requests").wait().unwrap();
            stop.join().unwrap();
        });
        ticket.wait().unwrap();
        assert_eq!(stopping(), 0);
        // `retire` ends in a terminal state: the object's queue closes and goes.
        queuer
            .request(&rt, "old", &user, "retire")
            .run(|_| Ok(()))
            .unwrap()
            .wait()
            .unwrap();
        assert!(!queuer.queues().contains(&"old".into()));
        assert_eq!(stopping(), 0);
        queuer.terminate();
        assert_eq!(
            stopping(),
            1,
            "a terminated queuer counts as stopping for good"
        );
    }
}
