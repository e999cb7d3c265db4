//! The handle of a started action, and how it ends: completed, failed, or dropped
//! and recorded as abandoned.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use fsm_core::{ActionId, Rule, StateId};

use crate::write::{Change, Hold, Slot};
use crate::{
    Actor, Entry, EntryKind, Expected, Holder, ObjectId, Record, Runtime, RuntimeError, Store,
    StoreError,
};

/// The fencing token of an action in flight: the version of the record its start
/// wrote, higher for every later start on the same object. Pass it to the systems
/// the action's work drives, and have them refuse a token lower than one they have
/// seen: once the healer revokes a hold, a slow worker still holding the old token
/// cannot act on the object (Kleppmann's fencing tokens, Chubby's sequencers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fence(pub u64);

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fence {}", self.0)
    }
}

/// An action's hold on its object ended by someone else (the healer rolled it back),
/// as [`InFlight::still_held`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Revocation {
    /// Who ended the hold, as the object's history records it.
    pub by: String,
    /// When.
    pub at: SystemTime,
    /// The version of the write that ended it.
    pub version: u64,
}

/// The runtime an [`InFlight`] handle finishes its action on: borrowed, or owned
/// for a handle that must outlive the borrow (one sent to a worker thread).
enum RuntimeRef<'r, S: Store> {
    Borrowed(&'r Runtime<S>),
    Owned(Runtime<S>),
}

impl<S: Store> std::ops::Deref for RuntimeRef<'_, S> {
    type Target = Runtime<S>;

    fn deref(&self) -> &Runtime<S> {
        match self {
            RuntimeRef::Borrowed(rt) => rt,
            RuntimeRef::Owned(rt) => rt,
        }
    }
}

/// The rule a start took, as its handle keeps it: the ids in 32 bits (20
/// bytes, against [`Rule`]'s 48), so that a handle, moved out of its start
/// and into its completion, stays small (a start's decision, its handle and
/// the `Result` around it are copied from one to the next: a handle 32 bytes
/// smaller made an action 6% faster, BENCHMARKS.md, sixty-second session).
/// A machine's ids fit: [`RuntimeBuilder::build`](crate::RuntimeBuilder::build)
/// refuses one that numbers more ([`RuntimeError::MachineTooLarge`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Taken {
    action: u32,
    origin: u32,
    /// [`NO_ID`](crate::NO_ID) when the rule has no transition state.
    via: u32,
    target: u32,
    changes_state: bool,
}

impl Taken {
    /// The rule, taken from a machine the runtime accepted.
    #[inline(always)]
    pub(crate) fn new(rule: Rule) -> Taken {
        Taken {
            action: rule.action.0 as u32,
            origin: rule.origin.0 as u32,
            via: rule.via.map_or(crate::NO_ID, |v| v.0 as u32),
            target: rule.target.0 as u32,
            changes_state: rule.changes_state,
        }
    }

    /// The rule.
    #[inline(always)]
    pub(crate) fn rule(self) -> Rule {
        Rule {
            action: self.action(),
            origin: self.origin(),
            via: (self.via != crate::NO_ID).then_some(StateId(self.via as usize)),
            target: self.target(),
            changes_state: self.changes_state,
        }
    }

    /// The rule's action.
    #[inline(always)]
    pub(crate) fn action(self) -> ActionId {
        ActionId(self.action as usize)
    }

    /// The state it starts from.
    #[inline(always)]
    pub(crate) fn origin(self) -> StateId {
        StateId(self.origin as usize)
    }

    /// The state it ends in.
    #[inline(always)]
    pub(crate) fn target(self) -> StateId {
        StateId(self.target as usize)
    }
}

/// A started action's handle without its runtime: what a queue carries from the
/// caller who started the action to the worker that ends it, which attaches it
/// to the runtime its task holds. (An owned handle would take a count of the
/// runtime's reference on one core and give it back on another, for every
/// request.) A `Detached` must be attached: dropped as it is, it records
/// nothing, where a dropped handle records its action as abandoned.
pub(crate) struct Detached {
    rule: Taken,
    slot: Slot,
    held: Expected,
    proposed: Option<Arc<str>>,
}

impl Detached {
    /// The handle again, on `id` (the object it was detached from), borrowing
    /// `runtime` and `id`.
    pub(crate) fn attach<'r, S: Store>(
        self,
        runtime: &'r Runtime<S>,
        id: &'r ObjectId,
    ) -> InFlight<'r, S> {
        self.attach_to(RuntimeRef::Borrowed(runtime), Cow::Borrowed(id))
    }

    fn attach_to<'r, S: Store>(
        self,
        runtime: RuntimeRef<'r, S>,
        id: Cow<'r, ObjectId>,
    ) -> InFlight<'r, S> {
        InFlight {
            runtime,
            id,
            rule: self.rule,
            slot: self.slot,
            held: self.held,
            proposed: self.proposed,
            done: false,
        }
    }
}

/// An action running on an object. Finish it with [`InFlight::complete`] or
/// [`InFlight::fail`]. It borrows its [`Runtime`]; [`InFlight::into_owned`] makes
/// a `'static` handle to send elsewhere.
///
/// Dropped without either (a forgotten handle, a panic in the action), it records
/// the action as abandoned: the object stays in its transition state, visibly held
/// by an abandoned action, until the healer rolls it back.
///
/// ```
/// use fsm_runtime::{Actor, Healer, MemoryStore, Runtime};
///
/// let vms = Runtime::new(
///     fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?,
///     MemoryStore::new(),
/// )?;
/// let worker = Actor::new("worker-1");
/// vms.create("vm-1", &worker)?;
///
/// let deploy = vms.start("vm-1", &worker, "deploy")?;
/// let fence = deploy.fence(); // for the hypervisor: refuse any lower token
/// deploy.still_held()?; // before each step of the work
/// let record = deploy.complete()?;
/// assert_eq!(vms.machine().state(record.state).name, "RUNNING");
///
/// // A handle dropped unfinished leaves the object held, marked abandoned...
/// drop(vms.start("vm-1", &worker, "pause")?);
/// let held = vms.get("vm-1")?.in_flight.expect("held");
/// assert!(held.abandoned && held.version > fence.0);
/// // ...until a healer rolls it back to where it started.
/// Healer::new().heal(&vms)?;
/// assert_eq!(vms.state_name("vm-1")?, "RUNNING");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "an action in flight must be completed or failed"]
pub struct InFlight<'r, S: Store = crate::MemoryStore> {
    runtime: RuntimeRef<'r, S>,
    id: Cow<'r, ObjectId>,
    /// The rule the start took: action, origin, transition state, target.
    rule: Taken,
    slot: Slot,
    held: Expected,
    /// The data the start proposed, written by a completion.
    proposed: Option<Arc<str>>,
    done: bool,
}

impl<S: Store> fmt::Debug for InFlight<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("id", &self.id)
            .field("action", &self.runtime.action_name(self.rule.action()))
            .field("origin", &self.runtime.name(self.rule.origin()))
            .field("version", &self.held.version)
            .finish()
    }
}

impl<'r, S: Store> InFlight<'r, S> {
    /// The handle of the action its start wrote `held` for, writing `proposed`
    /// when it completes.
    #[inline]
    pub(crate) fn new(
        runtime: &'r Runtime<S>,
        id: Cow<'r, ObjectId>,
        rule: Taken,
        slot: Slot,
        held: Expected,
        proposed: Option<Arc<str>>,
    ) -> Self {
        InFlight {
            runtime: RuntimeRef::Borrowed(runtime),
            id,
            rule,
            slot,
            held,
            proposed,
            done: false,
        }
    }

    /// The handle of the action that holds `record`, the object `id` as read,
    /// with `fence`, taken up by `actor` (see [`Runtime::resume`]); `None` when
    /// that action holds nothing in `record`, for the caller to tell why from
    /// the object's history ([`hold_gone`]), read as it reads.
    pub(crate) fn resumed(
        runtime: &'r Runtime<S>,
        id: &ObjectId,
        record: &Record,
        actor: &Actor,
        fence: Fence,
    ) -> Option<Result<Self, RuntimeError>> {
        let (slot, holder) = [Slot::Visible, Slot::Hidden].into_iter().find_map(|slot| {
            let holder = slot.get(record).filter(|h| h.version == fence.0)?;
            Some((slot, holder))
        })?;
        Some(Self::taken_up(runtime, id, actor, fence, slot, holder))
    }

    /// [`resumed`](Self::resumed), once the holder is found in its slot.
    fn taken_up(
        runtime: &'r Runtime<S>,
        id: &ObjectId,
        actor: &Actor,
        fence: Fence,
        slot: Slot,
        holder: &Holder,
    ) -> Result<Self, RuntimeError> {
        if holder.actor != actor.actor_name() {
            return Err(RuntimeError::NotHolder {
                id: id.clone(),
                action: runtime.action_name(holder.action).to_owned(),
                fence,
                holder: holder.actor.as_str().to_owned(),
                actor: actor.name().to_owned(),
            });
        }
        // The rule its start took, by the action's and origin's ids: the
        // store translated both by name if the spec changed since.
        let rule = runtime
            .machine()
            .start(holder.action, holder.origin)
            .map_err(|refused| RuntimeError::NoRule {
                id: id.clone(),
                refused,
            })?;
        let held = Expected {
            state: rule.via.unwrap_or(holder.origin),
            version: fence.0,
        };
        // The data its start proposed, which its completion writes.
        Ok(InFlight::new(
            runtime,
            Cow::Owned(id.clone()),
            Taken::new(rule),
            slot,
            held,
            holder.proposed.clone(),
        ))
    }
}

/// Why the action `fence` names does not hold `id`: who ended its hold and
/// when, from the object's history ([`RuntimeError::Revoked`]); or, when the
/// history names no start with that fence, [`RuntimeError::NoHold`]. `action`
/// is the action's, when known; otherwise the history's start names it.
pub(crate) fn hold_gone<S: Store>(
    rt: &Runtime<S>,
    id: &ObjectId,
    fence: Fence,
    action: Option<ActionId>,
) -> RuntimeError {
    hold_gone_in(rt, rt.history(id), id, fence, action)
}

/// [`hold_gone`], from the object's `history` as read.
pub(crate) fn hold_gone_in<S: Store>(
    rt: &Runtime<S>,
    history: Result<Vec<Entry>, RuntimeError>,
    id: &ObjectId,
    fence: Fence,
    action: Option<ActionId>,
) -> RuntimeError {
    let history = match history {
        Ok(history) => history,
        Err(e) => return e,
    };
    let started = |e: &&Entry| e.version == fence.0 && e.kind == EntryKind::Started;
    let Some(action) = action.or_else(|| history.iter().find(started).and_then(|e| e.action))
    else {
        return RuntimeError::NoHold {
            id: id.clone(),
            fence,
        };
    };
    // The first entry after the start that ended the hold: an abandonment
    // (a dropped handle) leaves the action holding.
    let ended = history.iter().find(|e| {
        e.version > fence.0
            && e.action == Some(action)
            && !matches!(e.kind, EntryKind::Started | EntryKind::Abandoned)
    });
    RuntimeError::Revoked {
        id: id.clone(),
        action: rt.action_name(action).to_owned(),
        fence,
        by: ended.map(|e| Revocation {
            by: e.actor.as_str().to_owned(),
            at: e.at,
            version: e.version,
        }),
    }
}

impl<S: Store> InFlight<'_, S> {
    /// The object.
    pub fn id(&self) -> &ObjectId {
        &self.id
    }

    /// The action.
    pub fn action(&self) -> ActionId {
        self.rule.action()
    }

    /// The static state the action started from.
    pub fn origin(&self) -> StateId {
        self.rule.origin()
    }

    /// The rule the action runs by: its transition state and target from its origin.
    pub fn rule(&self) -> Rule {
        self.rule.rule()
    }

    /// The state the object showed and the version it had when the action started.
    pub fn held(&self) -> Expected {
        self.held
    }

    /// The action's fencing token: pass it to the systems its work drives.
    pub fn fence(&self) -> Fence {
        Fence(self.held.version)
    }

    /// Whether the action still holds its object: `Ok` while its start's holder is
    /// in its slot; otherwise who ended the hold and when (the healer rolled it
    /// back), read from the object's history. Check it before each step of long
    /// work: a revoked action must do nothing more.
    pub fn still_held(&self) -> Result<(), RuntimeError> {
        let rt = &*self.runtime;
        // Only the slot's holder is read (in place, in the memory store): a
        // queued step asks this before it runs.
        let mine = |r: &Record| {
            let holder = self.slot.get(r);
            holder.is_some_and(|h| h.version == self.held.version)
        };
        let held = rt.store().load_with(&self.id, mine);
        if held.map_err(RuntimeError::Store)? == Some(true) {
            return Ok(());
        }
        Err(hold_gone(
            rt,
            &self.id,
            self.fence(),
            Some(self.rule.action()),
        ))
    }

    /// Lets go of a revoked action without writing: its hold is already gone.
    pub(crate) fn relinquish(mut self) {
        self.done = true;
    }

    /// Whether the action is hidden (it keeps the status and its own slot).
    pub fn is_hidden(&self) -> bool {
        self.slot == Slot::Hidden
    }

    /// The same handle, owning a clone of the runtime: `'static`, to send to
    /// another thread.
    pub fn into_owned(self) -> InFlight<'static, S> {
        let runtime = RuntimeRef::Owned((*self.runtime).clone());
        let id = Cow::Owned((*self.id).clone());
        self.detach().attach_to(runtime, id)
    }

    /// The handle without its runtime and id, for a worker that holds both to
    /// [`attach`](Detached::attach) it again.
    pub(crate) fn detach(mut self) -> Detached {
        self.done = true;
        Detached {
            rule: self.rule,
            slot: self.slot,
            held: self.held,
            proposed: self.proposed.take(),
        }
    }

    /// The action succeeded: the object moves to its target (for a back-to-origin
    /// or hidden action, where it started; a hidden action leaves whatever status a
    /// user's action has set meanwhile), with the data proposed at its start
    /// ([`Runtime::start_changing`]), if any. A [`RuntimeError::Conflict`] means
    /// the action was rolled back meanwhile by the healer; nothing is written.
    pub fn complete(mut self) -> Result<Record, RuntimeError> {
        let data = self.proposed.take();
        self.finish(EntryKind::Completed, data)
    }

    /// [`complete`](Self::complete) right after the start that made the handle,
    /// with nothing run between ([`Runtime::run`]): the completion is stamped
    /// with the time of the write before it (the start's, unless a hidden
    /// action wrote since), so that an action run at once reads the clock once
    /// and both its entries carry that time.
    #[inline]
    pub(crate) fn complete_at_once(mut self) -> Result<Record, RuntimeError> {
        let data = self.proposed.take();
        let outcome = self.outcome(EntryKind::Completed).at_once();
        self.end(outcome, data)
    }

    /// [`complete_at_once`](Self::complete_at_once) for async callers, as
    /// [`complete_async`](Self::complete_async).
    pub(crate) fn complete_at_once_async(
        mut self,
    ) -> impl Future<Output = Result<Record, RuntimeError>> {
        let data = self.proposed.take();
        let outcome = self.outcome(EntryKind::Completed).at_once();
        self.finish_async(outcome, data)
    }

    /// The action succeeded and leaves the object with `data` (JSON text, see
    /// [`Record::data`]), written with the completion in one step: a change of
    /// data passes the same checks as the action that makes it (its roles, the
    /// states it may start from, its guards). Guards see the data only when it is
    /// given at the start: [`Runtime::start_changing`]. This replaces data
    /// proposed there.
    pub fn complete_with(mut self, data: Arc<str>) -> Result<Record, RuntimeError> {
        self.finish(EntryKind::Completed, Some(data))
    }

    /// The action failed: the object returns to where it started.
    pub fn fail(mut self) -> Result<Record, RuntimeError> {
        self.finish(EntryKind::Failed, None)
    }

    /// [`complete`](Self::complete) for async callers: the store's reads and
    /// writes are awaited.
    ///
    /// Dropping the future before it is done (a `select!` that took another
    /// branch) drops the handle: the action is recorded as abandoned, as for any
    /// dropped handle, unless the completion was written already.
    pub fn complete_async(mut self) -> impl Future<Output = Result<Record, RuntimeError>> {
        let data = self.proposed.take();
        let outcome = self.outcome(EntryKind::Completed);
        self.finish_async(outcome, data)
    }

    /// [`complete_with`](Self::complete_with) for async callers, as
    /// [`complete_async`](Self::complete_async).
    pub fn complete_with_async(
        self,
        data: Arc<str>,
    ) -> impl Future<Output = Result<Record, RuntimeError>> {
        let outcome = self.outcome(EntryKind::Completed);
        self.finish_async(outcome, Some(data))
    }

    /// [`fail`](Self::fail) for async callers, as
    /// [`complete_async`](Self::complete_async).
    pub fn fail_async(self) -> impl Future<Output = Result<Record, RuntimeError>> {
        let outcome = self.outcome(EntryKind::Failed);
        self.finish_async(outcome, None)
    }

    /// The change an outcome of the action held in its slot since `held` makes,
    /// stamped now (an outcome [`at_once`](Outcome::at_once): when the record
    /// was last written), to the object's `record` as read: the entry's kind,
    /// the state `to` computes from the record, and what the slot keeps. A
    /// record held by someone else (or gone) is the conflict that ends the
    /// action's hold: `Err(found)`, the state and version found instead, if any.
    #[inline(always)]
    fn settlement<'a>(
        &self,
        record: Option<&'a Record>,
        outcome: &Outcome,
        data: Option<Arc<str>>,
    ) -> Result<(Change, &'a Record), Option<Expected>> {
        let Some(record) = record else {
            return Err(None);
        };
        let Some(holder) = self
            .slot
            .get(record)
            .filter(|h| h.version == self.held.version)
        else {
            return Err(Some(record.expected()));
        };
        let change = Change {
            kind: outcome.kind,
            action: self.rule.action(),
            slot: self.slot,
            hold: outcome.hold(),
            to: outcome.to(record),
            // The holder is this handle's own: the actor who started the action.
            actor: holder.actor,
            at: match outcome.at_once {
                // Later than every write before, as `stamp` is, without the clock.
                true => record.changed_at,
                false => self.runtime.stamp(record),
            },
            data,
        };
        Ok((change, record))
    }

    /// Writes `outcome`, decided on the record as the store has it; when the
    /// record changed meanwhile for another reason (a hidden action beside a
    /// visible one), decided again on the record as it is then.
    #[inline(always)]
    fn settle(&mut self, outcome: Outcome, data: Option<Arc<str>>) -> Result<Record, RuntimeError> {
        let kind = outcome.kind;
        loop {
            let mut expected = None;
            let decided = self.runtime.store().modify(
                &self.id,
                |record| self.decide_settlement(record, &outcome, data.clone(), &mut expected),
                // A closure of its own, not `Record::clone`: that function's
                // one `FnMut` shim is shared by every caller that reads a whole
                // record, and in a program with several of them rustc kept it
                // out of line here, the copy (always inlined itself) with it
                // (BENCHMARKS.md, sixtieth session).
                |record| record.clone(),
            );
            if matches!(decided, Err(StoreError::Conflict { .. })) {
                continue;
            }
            // Logged before the answer is made, which is then made in the
            // caller's place: made first, it was copied out and back around
            // the call (the record twice, 17 instructions an action).
            tracing::debug!(object = %self.id, ?kind, ok = matches!(decided, Ok(Ok(_))), "finished");
            return match decided {
                Ok(Ok(((), record))) => Ok(record),
                Ok(Err(found)) => Err(self.lost(found)),
                Err(e) => Err(self.runtime.refused(expected, e)),
            };
        }
    }

    /// The settlement of `outcome` as the store decides it on `record`, stamped
    /// there (later than the write before it), noting the version it read.
    ///
    /// (Always inlined, as `settlement`: in a program that ends actions both
    /// blocking and async, rustc kept the two out of line, shared by both
    /// settlements, which cost a completion 76 instructions more:
    /// `scripts/instructions`, path direct, 1,098 against 1,022.)
    #[inline(always)]
    fn decide_settlement(
        &self,
        record: Option<&Record>,
        outcome: &Outcome,
        data: Option<Arc<str>>,
        expected: &mut Option<Expected>,
    ) -> Result<(Change, ()), Option<Expected>> {
        let (change, read) = self.settlement(record, outcome, data)?;
        *expected = Some(read.expected());
        Ok((change, ()))
    }

    /// The error of a settlement whose compare-and-set found another holder, or
    /// none (`found`: the state and version there, if any). The settlement's loop
    /// matches the store's answer itself, so that its success path moves only the
    /// record; the refusals are built out of line.
    #[cold]
    fn lost(&self, found: Option<Expected>) -> RuntimeError {
        self.runtime
            .conflict((*self.id).clone(), Some(self.held), found)
    }

    #[inline]
    fn finish(&mut self, kind: EntryKind, data: Option<Arc<str>>) -> Result<Record, RuntimeError> {
        self.end(self.outcome(kind), data)
    }

    /// Writes `outcome` (with `data`, if it replaces the object's).
    #[inline]
    fn end(&mut self, outcome: Outcome, data: Option<Arc<str>>) -> Result<Record, RuntimeError> {
        self.done = true;
        self.settle(outcome, data)
    }

    /// [`finish`](Self::finish) awaiting the store, as [`settle`](Self::settle)
    /// decides: one future that owns the handle (a layer of futures more, one
    /// for the settlement's loop, cost each async completion some 50
    /// instructions of moves: BENCHMARKS.md, fifty-ninth session).
    async fn finish_async(
        mut self,
        outcome: Outcome,
        data: Option<Arc<str>>,
    ) -> Result<Record, RuntimeError> {
        if self.runtime.store().never_waits() {
            // Written here, in the first poll, as a blocking end would.
            return self.end(outcome, data);
        }
        let kind = outcome.kind;
        let result = loop {
            let mut expected = None;
            let decided = self
                .runtime
                .store()
                .modify_async(
                    &self.id,
                    |record| self.decide_settlement(record, &outcome, data.clone(), &mut expected),
                    Record::clone,
                )
                .await;
            break match decided {
                Ok(Ok(((), record))) => Ok(record),
                Err(StoreError::Conflict { .. }) => continue,
                Ok(Err(found)) => Err(self.lost(found)),
                Err(e) => Err(self.runtime.refused(expected, e)),
            };
        };
        // Only now: a future dropped before this point leaves the handle to
        // `Drop`, which records the action as abandoned.
        self.done = true;
        tracing::debug!(object = %self.id, ?kind, ok = result.is_ok(), "finished");
        result
    }

    /// How `kind` ends the action: a hidden action keeps whatever status is shown;
    /// otherwise a completion moves to the rule's target and a failure returns to
    /// its origin.
    fn outcome(&self, kind: EntryKind) -> Outcome {
        let to = match kind {
            _ if self.is_hidden() => To::Same,
            EntryKind::Completed => To::State(self.rule.target()),
            _ => To::State(self.rule.origin()),
        };
        Outcome {
            kind,
            to,
            at_once: false,
        }
    }
}

/// An outcome to write: its entry's kind and where the object goes.
struct Outcome {
    kind: EntryKind,
    to: To,
    /// Written right after the start, nothing run between: stamped with the
    /// time of the write before it, the clock not read again.
    at_once: bool,
}

/// Where an outcome leaves the object.
enum To {
    /// In the state the record shows.
    Same,
    /// In this state.
    State(StateId),
}

impl Outcome {
    /// The outcome of an action run at once ([`Runtime::run`]).
    fn at_once(self) -> Outcome {
        Outcome {
            at_once: true,
            ..self
        }
    }

    fn to(&self, record: &Record) -> StateId {
        match self.to {
            To::Same => record.state,
            To::State(state) => state,
        }
    }

    /// An abandoned action keeps its holder, marked; any other end empties the
    /// slot.
    #[inline]
    fn hold(&self) -> Hold {
        match self.kind {
            EntryKind::Abandoned => Hold::Abandon,
            _ => Hold::End,
        }
    }
}

impl<S: Store> Drop for InFlight<'_, S> {
    #[inline]
    fn drop(&mut self) {
        if !self.done {
            self.abandon();
        }
    }
}

impl<S: Store> InFlight<'_, S> {
    /// Records the action of a handle dropped unfinished as abandoned.
    #[cold]
    #[inline(never)]
    fn abandon(&mut self) {
        let abandoned = Outcome {
            kind: EntryKind::Abandoned,
            to: To::Same,
            at_once: false,
        };
        let result = self.settle(abandoned, None);
        match result {
            Ok(_) => tracing::warn!(
                object = %self.id,
                action = %self.runtime.action_name(self.rule.action()),
                "action abandoned: handle dropped without complete or fail"
            ),
            // Healed or otherwise moved on: nothing left to record.
            Err(RuntimeError::Conflict { .. }) => {}
            Err(e) => {
                tracing::error!(object = %self.id, error = %e, "abandoned action could not be recorded")
            }
        }
    }
}
