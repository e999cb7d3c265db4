//! Checking that a history is a path the machine allows.

use fsm_core::{ActionId, Machine, StateId};

use crate::{Entry, EntryKind};

/// A history that no run of the machine could have written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("history entry {index} (version {version}): {problem}")]
pub struct HistoryError {
    /// The position of the entry at fault, from 0.
    pub index: usize,
    /// Its version.
    pub version: u64,
    /// What is wrong.
    pub problem: String,
}

/// Checks that `history` is a valid path of `machine`, as the runtime writes it:
/// a creation in the initial state at version 1 (or later: an id whose earlier
/// object was removed numbers its next one on); versions following one another
/// without gaps; no entry stamped earlier than the one before it; each entry starting where the previous one ended; an action started
/// only from one of its origins, into its transition state (or holding the state),
/// while no other action is in flight (a hidden action only excludes another hidden
/// one); completed to its target; failed, or healed, back to its origin; abandoned
/// without moving; a hidden action ending where the status then is; and, as
/// the last entry only (a removal's event, which no store's history keeps), a
/// removal in a state that allows it, with no action in flight.
///
/// ```
/// use fsm_runtime::{check_history, Actor, MemoryStore, Runtime};
/// # let machine = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/node.toml"))?;
/// let runtime = Runtime::new(machine.clone(), MemoryStore::new())?;
/// let ops = Actor::new("ops");
/// runtime.create("node-1", &ops)?;
/// runtime.run("node-1", &ops, "put_in_maintenance")?;
/// runtime.start("node-1", &ops, "enable")?.fail()?;
/// check_history(&machine, &runtime.history("node-1")?)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_history(machine: &Machine, history: &[Entry]) -> Result<(), HistoryError> {
    // The visible action in flight and the hidden one: (action, origin).
    let mut in_flight: Option<(ActionId, StateId)> = None;
    let mut hidden: Option<(ActionId, StateId)> = None;
    let mut at: Option<StateId> = None;
    for (index, entry) in history.iter().enumerate() {
        let fail = |problem: String| HistoryError {
            index,
            version: entry.version,
            problem,
        };
        let name = |s: StateId| machine.state(s).name.to_string();
        if index > 0 && history[index - 1].kind == EntryKind::Removed {
            return Err(fail("an entry after the object's removal".into()));
        }
        let due = match index {
            0 => entry.version.max(1),
            _ => history[index - 1].version + 1,
        };
        if entry.version != due {
            return Err(fail(format!(
                "version {} where {due} was due",
                entry.version
            )));
        }
        if let Some(before) = index.checked_sub(1).map(|i| history[i].at)
            && let Err(back) = entry.at.duration_since(before)
        {
            return Err(fail(format!(
                "stamped {:?} earlier than the entry before it",
                back.duration()
            )));
        }
        match at {
            None if entry.kind != EntryKind::Created => {
                return Err(fail("the first entry is not a creation".into()));
            }
            Some(state) if state != entry.from => {
                return Err(fail(format!(
                    "starts in {} but the object was in {}",
                    name(entry.from),
                    name(state)
                )));
            }
            _ => {}
        }
        let action_of = |entry: &Entry| {
            entry
                .action
                .ok_or_else(|| fail(format!("a {:?} entry names no action", entry.kind)))
        };
        match entry.kind {
            EntryKind::Removed => {
                if let Some((running, _)) = in_flight.or(hidden) {
                    return Err(fail(format!(
                        "removed while `{}` was in flight",
                        machine.action(running).name
                    )));
                }
                if entry.to != entry.from || machine.state(entry.from).remove.is_none() {
                    return Err(fail(format!(
                        "removed in {}, which allows no removal",
                        name(entry.from)
                    )));
                }
            }
            EntryKind::Created => {
                if at.is_some() {
                    return Err(fail("created twice".into()));
                }
                if entry.to != machine.initial() || entry.from != entry.to {
                    return Err(fail(format!(
                        "created in {} rather than {}",
                        name(entry.to),
                        name(machine.initial())
                    )));
                }
            }
            EntryKind::Started => {
                let action = action_of(entry)?;
                let def = machine.action(action);
                let blocking = if def.hidden {
                    in_flight.or(hidden)
                } else {
                    in_flight
                };
                if let Some((running, _)) = blocking {
                    return Err(fail(format!(
                        "`{}` started while `{}` was in flight",
                        def.name,
                        machine.action(running).name
                    )));
                }
                if !def.origins.contains(&entry.from) {
                    return Err(fail(format!(
                        "`{}` started from {}, not one of its origins",
                        def.name,
                        name(entry.from)
                    )));
                }
                if entry.to != def.via.unwrap_or(entry.from) {
                    return Err(fail(format!(
                        "`{}` started into {}",
                        def.name,
                        name(entry.to)
                    )));
                }
                let slot = if def.hidden {
                    &mut hidden
                } else {
                    &mut in_flight
                };
                *slot = Some((action, entry.from));
            }
            EntryKind::Completed | EntryKind::Failed | EntryKind::Healed | EntryKind::Abandoned => {
                let action = action_of(entry)?;
                let def = machine.action(action);
                let slot = if def.hidden {
                    &mut hidden
                } else {
                    &mut in_flight
                };
                let Some((running, origin)) = *slot else {
                    return Err(fail(format!(
                        "{:?} `{}` with no action in flight",
                        entry.kind, def.name
                    )));
                };
                if running != action {
                    return Err(fail(format!(
                        "{:?} `{}` while `{}` was in flight",
                        entry.kind,
                        def.name,
                        machine.action(running).name
                    )));
                }
                let due = match entry.kind {
                    // A hidden action keeps whatever status is shown.
                    _ if def.hidden => entry.from,
                    EntryKind::Completed => {
                        machine.rule(action, origin).map_or(origin, |r| r.target)
                    }
                    EntryKind::Abandoned => entry.from,
                    _ => origin,
                };
                if entry.to != due {
                    return Err(fail(format!(
                        "{:?} `{}` led to {} rather than {}",
                        entry.kind,
                        def.name,
                        name(entry.to),
                        name(due)
                    )));
                }
                if entry.kind != EntryKind::Abandoned {
                    *slot = None;
                }
            }
        }
        at = Some(entry.to);
    }
    Ok(())
}
