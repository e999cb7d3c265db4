//! The one place a write is made: the next record of an object and the history
//! entry that goes with it.

use std::sync::Arc;
use std::time::SystemTime;

use fsm_core::{ActionId, StateId};

use crate::{ActorName, Entry, EntryKind, Holder, ObjectId, Record, Write};

/// Which holder slot of a record a write concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The visible action's: its transition state shows.
    Visible,
    /// A hidden action's: it keeps the status.
    Hidden,
}

impl Slot {
    #[inline]
    pub(crate) fn of(hidden: bool) -> Slot {
        if hidden { Slot::Hidden } else { Slot::Visible }
    }

    #[inline]
    pub(crate) fn get(self, record: &Record) -> Option<&Holder> {
        match self {
            Slot::Visible => record.in_flight.as_deref(),
            Slot::Hidden => record.hidden.as_deref(),
        }
    }

    #[inline]
    fn get_mut(self, record: &mut Record) -> &mut Option<Box<Holder>> {
        match self {
            Slot::Visible => &mut record.in_flight,
            Slot::Hidden => &mut record.hidden,
        }
    }
}

/// What a [`Change`] does to its slot's holder. A new holder is made where the
/// change is applied, from the change's action, actor and time and the record
/// it is applied to, not carried in the change: the change stays small, as it is
/// moved out of the store's decision and into its write.
#[derive(Debug)]
pub(crate) enum Hold {
    /// A start: the slot, empty, holds a new holder, who proposes this data.
    Start(Option<Arc<str>>),
    /// An abandonment: the holder stays, marked abandoned.
    Abandon,
    /// An end (completed, failed, rolled back): the slot is emptied.
    End,
}

/// A change of one object that the runtime decided after its checks: what
/// happened, to which holder slot, and the state after. A [`Store`](crate::Store)
/// receives one in [`Store::modify`](crate::Store::modify) and applies it to the
/// record it holds with [`Change::apply`]; only the runtime makes one, as only it
/// makes a [`Write`].
#[derive(Debug)]
pub struct Change {
    pub(crate) kind: EntryKind,
    pub(crate) action: ActionId,
    pub(crate) slot: Slot,
    /// What becomes of the slot's holder (see [`Hold`]).
    pub(crate) hold: Hold,
    pub(crate) to: StateId,
    pub(crate) actor: ActorName,
    pub(crate) at: SystemTime,
    /// The object's new data, if the change replaces it.
    pub(crate) data: Option<Arc<str>>,
}

impl Change {
    /// Makes `record` the next version, in place, and returns the history entry
    /// that goes with it. The store has checked that `record` is the one the
    /// change was decided on.
    #[inline]
    pub fn apply(self, record: &mut Record) -> Entry {
        self.apply_reusing(record, &mut None)
    }

    /// [`apply`](Self::apply), boxing a new holder in `spare` if it holds a box,
    /// and leaving there the box of a holder the change ends. A store that keeps
    /// one spare box per object allocates a holder once per object, not once per
    /// action; and a queued action, started on the caller's thread and ended on a
    /// worker's, frees nothing on the worker that the caller allocated (a box
    /// freed on another thread reaches its allocator's next request only through
    /// the allocator's shared bins: a sixth of a queued request, BENCHMARKS.md).
    #[inline(always)]
    pub(crate) fn apply_reusing(
        self,
        record: &mut Record,
        spare: &mut Option<Box<Holder>>,
    ) -> Entry {
        let from = record.state;
        record.state = self.to;
        record.version += 1;
        let version = record.version;
        record.changed_at = self.at;
        let slot = self.slot.get_mut(record);
        match self.hold {
            Hold::Start(proposed) => {
                debug_assert!(slot.is_none(), "a start's slot is empty");
                let holder = Holder {
                    action: self.action,
                    origin: from,
                    actor: self.actor,
                    since: self.at,
                    abandoned: false,
                    version,
                    // The store names the session, if it has any, as it writes it.
                    session: None,
                    proposed,
                };
                *slot = Some(match spare.take() {
                    Some(mut kept) => {
                        overwrite_spare(&mut kept, holder);
                        kept
                    }
                    None => Box::new(holder),
                });
            }
            Hold::Abandon => {
                debug_assert!(slot.is_some(), "an abandonment's slot holds its action");
                if let Some(held) = slot {
                    held.abandoned = true;
                }
            }
            Hold::End => {
                if let Some(mut ended) = slot.take() {
                    // Dropped here, where the box was just read: a spare
                    // proposes nothing (see `overwrite_spare`).
                    ended.proposed = None;
                    *spare = Some(ended);
                }
            }
        }
        if let Some(data) = self.data {
            record.data = Some(data);
        }
        Entry {
            version: record.version,
            at: self.at,
            actor: self.actor,
            kind: self.kind,
            action: Some(self.action),
            from,
            to: self.to,
        }
    }

    /// The write that applies the change to `id`, whose record as read is
    /// `record`: the next version, compared against the one read.
    pub(crate) fn write(self, id: ObjectId, record: &Record) -> Write {
        let mut next = record.clone();
        let entry = self.apply(&mut next);
        Write {
            id,
            expected: Some(record.expected()),
            record: next,
            entry,
        }
    }
}

/// Writes `holder` into a spare box, field by field. A spare's box was last
/// touched an action ago, and its line is cold by now: `*kept = holder` would
/// read the old holder's proposed data to drop it, a miss on every start
/// (BENCHMARKS.md, twenty-fourth session). A box becomes spare with no
/// proposed data, so a holder that proposes none reads nothing of it.
#[inline(always)]
fn overwrite_spare(kept: &mut Holder, holder: Holder) {
    debug_assert!(kept.proposed.is_none(), "a spare box proposes nothing");
    let Holder {
        action,
        origin,
        actor,
        since,
        abandoned,
        version,
        session,
        proposed,
    } = holder;
    kept.action = action;
    kept.origin = origin;
    kept.actor = actor;
    kept.since = since;
    kept.abandoned = abandoned;
    kept.version = version;
    kept.session = session;
    if proposed.is_some() {
        kept.proposed = proposed;
    }
}

/// The write that creates `id` in `initial`, its first entry at `version`
/// (1, or the one after the removal of the id's last object:
/// [`StoreError::CreateAt`](crate::StoreError::CreateAt)).
pub(crate) fn create(
    id: ObjectId,
    initial: StateId,
    actor: ActorName,
    at: SystemTime,
    data: Option<Arc<str>>,
    version: u64,
) -> Write {
    let record = Record {
        data,
        ..Record::new(initial, version, at)
    };
    let entry = Entry {
        version,
        at,
        actor,
        kind: EntryKind::Created,
        action: None,
        from: initial,
        to: initial,
    };
    Write {
        id,
        expected: None,
        record,
        entry,
    }
}
