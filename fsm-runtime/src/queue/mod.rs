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
//! sees more while another is parked passes the wake-up on.
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

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::SegQueue;
use smallvec::SmallVec;

use fsm_core::{ActionId, RuleError};

use fsm_core::{ActionRef, UnknownAction};

use crate::park::{Parking, SPIN, spin_until};
use crate::{Actor, Fence, InFlight, IntoObjectId, ObjectId, Record, Runtime, RuntimeError, Store};

use self::shared::*;
use self::task::*;

mod shared;
mod task;
#[cfg(test)]
mod tests;

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
        /// What the table says of the step, from the object's state. Boxed,
        /// as this refusal is rare, so that every `Result` with a
        /// `QueueError` (a request's, a ticket's) stays small to move.
        refused: Box<RuleError>,
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
        // The steps that are other actions than the one requested: each is
        // checked against the object's state (the action itself is the
        // start's to check), here, the steps themselves going to the job
        // before the start. Most requests have none (and collect nothing).
        let others: SmallVec<[ActionId; 2]> = match checked.iter().any(|&(step, _)| step != action)
        {
            true => (checked.iter())
                .filter(|&&(step, _)| step != action)
                .map(|&(step, _)| step)
                .collect(),
            false => SmallVec::new(),
        };
        let composite = !others.is_empty();
        // Most requests go to their object's own queue: keyed by the id itself.
        let routed = (queuer.shared.route.as_ref())
            .map(|route| route(machine.name(), &id))
            .filter(|key| *key != id);
        let _order = queuer.intake(routed.as_ref().unwrap_or(&id))?;
        // The first step the table does not allow from `origin`, as the error. The
        // action itself is the runtime's to check, with its own message.
        let bad_step = |origin| {
            (others.iter())
                .find_map(|&step| machine.start(step, origin).err())
                .map(|refused| QueueError::Step {
                    id: id.clone(),
                    action: machine.action(action).name.to_string(),
                    refused: Box::new(refused),
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
                return Ran::Done((false, Err(Box::new(QueueError::Revoked(e)))));
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
        // A spare task of this thread's, taken before the start (see
        // [`Task::spare_for`]), and given back if the request is refused.
        let spare = Task::spare_for(&job);
        let handle = match runtime.start(&id, actor, action) {
            Ok(handle) => handle,
            Err(e) => {
                Task::give_back(spare);
                return Err(e.into());
            }
        };
        // ... and again against the state the start found, which may differ.
        if composite && let Some(e) = bad_step(handle.origin()) {
            let _ = handle.fail();
            Task::give_back(spare);
            return Err(e);
        }
        let fence = handle.fence();
        let handle = handle.detach();
        let task: Arc<dyn Queued> = Task::new(spare, id, routed, runtime, action, handle, job);
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
    /// this thread's spare (see `task::SPARE`).
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
        result.map_err(|e| *e)
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
                Poll::Ready(result.map_err(|e| *e))
            }
            None => Poll::Pending,
        }
    }
}
