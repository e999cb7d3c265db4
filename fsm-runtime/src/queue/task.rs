//! What a request is while it waits in its queue: its task (the action and
//! its steps, run by a worker or by the thread that waits for it), the job
//! that carries it through the queues, and the outcome its ticket gives.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::task::Waker;
use std::thread::Thread;

use fsm_core::ActionId;

use crate::in_flight::Detached;
use crate::{Actor, Fence, InFlight, ObjectId, Record, Runtime, RuntimeError, Store};

use super::*;

/// What a job ends in: whether its queue should end after it (the object reached
/// a terminal state), and the outcome for its ticket.
pub(super) type Done = (bool, Ended);

/// A queued action's outcome as the queuer passes it from the worker to the
/// ticket: its error boxed, so that the outcome the worker returns, hands on
/// and keeps is a record's size (64 bytes), not an error's (120): 17
/// instructions fewer on the worker's path, and no call to `memcpy` for each
/// move once the error reaches 128 bytes (BENCHMARKS.md, sixty-first
/// session). The ticket unboxes it.
pub(super) type Ended = Result<Record, Box<QueueError>>;

/// What running a job came to: its end, or an end the store refused while
/// its backend is unreachable, tried again later off the worker
/// ([`Shared::retry_later`]).
pub(super) enum Ran {
    Done(Done),
    Retry(Retry),
}

/// One more try of an end the store refused: `None` while it still refuses it
/// (retryably, and the queuer is not terminated).
pub(super) type Retry = Box<dyn FnMut(&Shared) -> Option<Done> + Send>;

/// An accepted request as its queue holds it: the job, run once by a worker, and
/// the outcome its [`Ticket`] reads. Both live in one allocation, which the caller
/// makes and (its ticket being the last to let go) usually frees: a worker that
/// freed what callers allocate would meet them on the allocator's locks for every
/// request (BENCHMARKS.md).
pub(super) trait Queued: Send + Sync {
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
pub(super) struct Head {
    /// The object.
    pub(super) id: ObjectId,
    /// The queue it is on, when not its object's own (see [`Queuer::with_route`]).
    pub(super) routed: Option<ObjectId>,
    /// [`QUEUED`], [`READY`] or [`TAKEN`]: taken by whoever swaps it from
    /// ready first (a worker, or a waiting ticket).
    pub(super) stage: AtomicU8,
    pub(super) outcome: Outcome,
}

/// A task's stages: behind another on its queue; next on its queue, in the
/// ready list; taken by a worker, or by a waiting ticket, to run.
pub(super) const QUEUED: u8 = 0;
pub(super) const READY: u8 = 1;
pub(super) const TAKEN: u8 = 2;

impl Head {
    pub(super) fn new(id: ObjectId, routed: Option<ObjectId>) -> Self {
        Head {
            id,
            routed,
            stage: AtomicU8::new(QUEUED),
            outcome: Outcome::default(),
        }
    }

    /// The queue's key.
    pub(super) fn key(&self) -> &ObjectId {
        self.routed.as_ref().unwrap_or(&self.id)
    }

    /// Marks the task next on its queue, in the ready list.
    pub(super) fn ready(&self) {
        self.stage.store(READY, Ordering::Release);
    }

    /// Takes the task to run, if it is ready and nobody took it first (a
    /// worker from the ready list, or its waiting ticket).
    pub(super) fn take(&self) -> bool {
        (self.stage)
            .compare_exchange(READY, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

pub(super) struct Task<S: Store, F> {
    pub(super) head: Head,
    /// `None` only while the task is a spare: a spare keeps no runtime, and
    /// no store, alive.
    pub(super) runtime: Option<Runtime<S>>,
    pub(super) action: ActionId,
    /// The started action, detached from the runtime (the task holds one), and
    /// the job that ends it.
    pub(super) job: Short<Option<(Detached, F)>>,
}

impl<S: Store, F: Send + 'static> Task<S, F> {
    /// One of this thread's spare tasks of this type, if one is there, for
    /// [`Task::new`] to write a request over; a spare of another type (a
    /// runtime over another store) is dropped. `job` names the type.
    ///
    /// A request takes its spare (and builds its job) before its start, not
    /// in [`Task::new`] after it: 9% off a queued request in bursts, which
    /// wait less for the lines a worker wrote (BENCHMARKS.md, sixty-third
    /// session).
    #[inline(always)]
    pub(super) fn spare_for(_job: &F) -> Option<Arc<Self>> {
        let spare = SPARE.try_with(|spare| spare.borrow_mut().pop());
        spare.ok().flatten()?.downcast::<Self>().ok()
    }

    /// Keeps `spare`, taken for a request that was then refused, for the
    /// thread's next request (where it was: within [`SPARE_TASKS`]).
    pub(super) fn give_back(spare: Option<Arc<Self>>) {
        if let Some(spare) = spare {
            let _ = SPARE.try_with(|spares| spares.borrow_mut().push(spare));
        }
    }

    /// A task for the job `job` of the started `handle`: written over
    /// `spare` ([`Task::spare_for`]) field by field (a spare's outcome is
    /// taken, its job run: only what a request sets is written), or newly
    /// allocated.
    ///
    /// (Always inlined into its one caller, so that the handle and the job
    /// are written into the task where they are made rather than copied
    /// through its arguments: 28 instructions a request fewer,
    /// `scripts/instructions`, the caller's path.)
    #[inline(always)]
    pub(super) fn new(
        spare: Option<Arc<Self>>,
        id: ObjectId,
        routed: Option<ObjectId>,
        runtime: &Runtime<S>,
        action: ActionId,
        handle: Detached,
        job: F,
    ) -> Arc<Self> {
        // (Always unique: a task becomes a spare only once nothing else
        // holds it.)
        if let Some(mut spare) = spare
            && let Some(task) = Arc::get_mut(&mut spare)
        {
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
            // What `Head::new` and the fields below set afresh; the rest is
            // as a taken outcome and a run job left it.
            let head = &mut task.head;
            *head.stage.get_mut() = QUEUED;
            *head.outcome.given.get_mut() = false;
            head.id = id;
            head.routed = routed;
            task.runtime = Some(runtime.clone());
            task.action = action;
            *task.job.get_mut() = Some((handle, job));
            return spare;
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
    pub(super) fn runtime(&self) -> &Runtime<S> {
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
    pub(super) static SPARE: RefCell<Vec<Arc<dyn Any + Send + Sync>>> = const { RefCell::new(Vec::new()) };
}

/// How many spare tasks a thread keeps at most (a task is a few hundred
/// bytes, so a few hundred kilobytes at most, for a thread with that many
/// requests outstanding at once).
pub(super) const SPARE_TASKS: usize = 1024;

/// A task in its queue, or in the ready list. Dropped before its outcome was
/// given (its worker gone), it gives its ticket the crash, so that no ticket
/// waits forever; unless it is the ready list's leftover of a task a waiting
/// ticket took ([`Job::disown`]).
pub(super) struct Job {
    pub(super) task: Arc<dyn Queued>,
    pub(super) live: bool,
}

impl Job {
    pub(super) fn new(task: Arc<dyn Queued>) -> Self {
        Job { task, live: true }
    }

    pub(super) fn head(&self) -> &Head {
        self.task.head()
    }

    /// Drops the job as a leftover: another `Job` of the same task runs it.
    pub(super) fn disown(mut self) {
        self.live = false;
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.live && !self.head().outcome.is_given() {
            self.task.discard();
            self.head()
                .outcome
                .give(Err(Box::new(self.task.crashed())), None);
        }
    }
}

/// The outcome of a request, given once by its worker and taken once by its
/// ticket, blocking or async.
#[derive(Default)]
pub(super) struct Outcome {
    /// Set once the outcome is in `slot`: a waiting ticket spins on it.
    pub(super) given: AtomicBool,
    pub(super) slot: Short<OutcomeSlot>,
}

#[derive(Default)]
pub(super) struct OutcomeSlot {
    pub(super) result: Option<Ended>,
    /// Who to wake when the outcome is given.
    pub(super) waiter: Option<Waiter>,
    /// The key of the queue the job's end deleted, freed with the task: by
    /// the ticket, mostly, on the caller's thread, whose requests count the
    /// id's references (a worker that let go of it would write the id's cache
    /// line, and the caller's next request would wait to take it back).
    pub(super) ended_queue: Option<ObjectId>,
}

pub(super) enum Waiter {
    Thread(Thread),
    Task(Waker),
}

impl Outcome {
    pub(super) fn is_given(&self) -> bool {
        self.given.load(Ordering::Acquire)
    }

    /// Gives the outcome, with the key of the queue the job's end deleted, if
    /// it did (see [`OutcomeSlot::ended_queue`]).
    pub(super) fn give(&self, result: Ended, ended_queue: Option<ObjectId>) {
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
    pub(super) fn take_or_wait(&self, waiter: impl FnOnce() -> Waiter) -> Option<Ended> {
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

/// The outcome of a queued action's end (`ended`): the record it left, or the
/// failure of the step that failed (`failed`), or the store's refusal; and
/// whether its queue ends with it: after an object reaches a terminal state
/// its own queue ends (`own_queue`), a queue it was routed to (its VM's) goes
/// on.
pub(super) fn settle<S: Store>(
    rt: &Runtime<S>,
    own_queue: bool,
    ended: Result<Record, RuntimeError>,
    failed: Option<(String, String)>,
) -> Done {
    let outcome = match failed {
        Some((step, message)) => match ended {
            Ok(_) => Err(Box::new(QueueError::Failed { step, message })),
            Err(e) => Err(Box::new(QueueError::Refused(e))),
        },
        None => ended.map_err(|e| Box::new(QueueError::Refused(e))),
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
pub(super) fn retry<S: Store>(
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
