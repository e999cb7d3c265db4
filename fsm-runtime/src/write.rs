//! The one place a write is made: the next record of an object and the history
//! entry that goes with it.

use std::sync::Arc;
use std::time::SystemTime;

use fsm_core::{ActionId, StateId};

use crate::{Entry, EntryKind, Expected, Holder, ObjectId, Record, Write};

/// Which holder slot of a record a write concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The visible action's: its transition state shows.
    Visible,
    /// A hidden action's: it keeps the status.
    Hidden,
}

impl Slot {
    pub(crate) fn of(hidden: bool) -> Slot {
        if hidden { Slot::Hidden } else { Slot::Visible }
    }

    pub(crate) fn get(self, record: &Record) -> Option<&Arc<Holder>> {
        match self {
            Slot::Visible => record.in_flight.as_ref(),
            Slot::Hidden => record.hidden.as_ref(),
        }
    }

    fn get_mut(self, record: &mut Record) -> &mut Option<Arc<Holder>> {
        match self {
            Slot::Visible => &mut record.in_flight,
            Slot::Hidden => &mut record.hidden,
        }
    }
}

/// A change of one object: what happened, to which slot, and the state after.
pub(crate) struct Change {
    pub kind: EntryKind,
    pub action: ActionId,
    pub slot: Slot,
    /// What the slot holds afterwards: the new holder of a start, the abandoned
    /// holder of an abandonment, nothing once the action ended.
    pub holder: Option<Arc<Holder>>,
    pub to: StateId,
    pub actor: Arc<str>,
    pub at: SystemTime,
    /// The object's new data, if the change replaces it.
    pub data: Option<Arc<str>>,
}

/// The write that creates `id` in `initial`.
pub(crate) fn create(
    id: ObjectId,
    initial: StateId,
    actor: Arc<str>,
    at: SystemTime,
    data: Option<Arc<str>>,
) -> Write {
    let record = Record {
        state: initial,
        version: 1,
        changed_at: at,
        in_flight: None,
        hidden: None,
        data,
    };
    let entry = Entry {
        version: 1,
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

/// The write that applies `change` to `id`, whose record as read is `record`: the
/// next version, compared against the one read.
pub(crate) fn change(id: ObjectId, record: &Record, change: Change) -> Write {
    let mut next = record.clone();
    next.state = change.to;
    next.version = record.version + 1;
    next.changed_at = change.at;
    *change.slot.get_mut(&mut next) = change.holder;
    if let Some(data) = change.data {
        next.data = Some(data);
    }
    let entry = Entry {
        version: next.version,
        at: change.at,
        actor: change.actor,
        kind: change.kind,
        action: Some(change.action),
        from: record.state,
        to: change.to,
    };
    Write {
        id,
        expected: Some(Expected {
            state: record.state,
            version: record.version,
        }),
        record: next,
        entry,
    }
}
