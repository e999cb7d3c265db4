//! The handles of actions started over the API and not ended yet, and letting
//! go of those that others ended.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use fsm_core::ActionId;
use fsm_etcd::AnyStore;
use fsm_runtime::{EntryKind, Event, InFlight};

/// An action started over the API and not ended yet.
pub struct Flight {
    pub(crate) handle: InFlight<'static, AnyStore>,
    pub(crate) actor: String,
}

/// A kept handle's key: machine, object and fence.
pub(crate) type Key = (String, String, u64);

/// How many ends with no kept handle a service remembers, for a handle kept
/// after its action's end was seen (see [`Flights::keep`]).
const ENDS: usize = 1024;

/// The in-flight handles of a service, by machine, object and fence.
#[derive(Default)]
pub struct Flights(Mutex<Kept>);

#[derive(Default)]
pub(crate) struct Kept {
    pub(crate) handles: BTreeMap<Key, Flight>,
    /// The latest ends the feed saw that no kept handle was there for
    /// (oldest first): an end written by this service through its handle,
    /// or an end of an action whose handle is about to be kept.
    ends: VecDeque<End>,
}

/// An end of an action: its object, the action, and the version it wrote.
struct End {
    machine: String,
    id: String,
    action: Option<ActionId>,
    version: u64,
}

impl End {
    /// Whether this end ended the action a handle kept under `key` holds
    /// (the numbers compared first: most ends are other objects').
    fn ends(&self, (machine, id, fence): &Key, action: ActionId) -> bool {
        self.version > *fence
            && self.action == Some(action)
            && self.id == *id
            && self.machine == *machine
    }
}

impl Flights {
    /// The handles, to look one up and take it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `flight` under `key`, unless the feed saw its action end already
    /// (another service ended it between the start and this call): then the
    /// flight is handed back, for the caller to drop off the async workers.
    pub(crate) fn keep(&self, key: Key, flight: Flight) -> Option<Flight> {
        let mut kept = self.lock();
        let action = flight.handle.action();
        if kept.ends.iter().any(|end| end.ends(&key, action)) {
            return Some(flight);
        }
        kept.handles.insert(key, flight);
        None
    }

    /// Takes out the handles whose hold `event` ended (a completion, failure
    /// or rollback written by another process, or by this one without the
    /// handle): an object's kept handle of the same action, started before
    /// it. A service whose actions are ended by others would otherwise keep
    /// their handles until it stops. An end with no handle here is
    /// remembered for a while, for a handle kept after it.
    pub(crate) fn ended(&self, machine: &str, event: &Event) -> Vec<Flight> {
        let entry = &event.entry;
        if !matches!(
            entry.kind,
            EntryKind::Completed | EntryKind::Failed | EntryKind::Healed
        ) {
            return Vec::new();
        }
        let mut kept = self.lock();
        let object = |fence| (machine.to_owned(), event.id.as_str().to_owned(), fence);
        let gone: Vec<_> = kept
            .handles
            .range(object(0)..object(entry.version))
            .filter(|(_, f)| Some(f.handle.action()) == entry.action)
            .map(|(key, _)| key.clone())
            .collect();
        if gone.is_empty() {
            if kept.ends.len() == ENDS {
                kept.ends.pop_front();
            }
            kept.ends.push_back(End {
                machine: machine.to_owned(),
                id: event.id.as_str().to_owned(),
                action: entry.action,
                version: entry.version,
            });
        }
        gone.iter()
            .filter_map(|key| kept.handles.remove(key))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fsm_runtime::{Actor, MemoryStore, Runtime, Watcher};

    use super::{Flight, Flights};
    use crate::AnyStore;

    /// OpenvCloud's VMs in memory, their watcher, and an actor.
    fn vms() -> (Runtime<AnyStore>, Watcher, Actor) {
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml");
        let machine = fsm_core::spec::load(spec).unwrap();
        let store = AnyStore::Memory(Box::new(MemoryStore::new()));
        let rt = Runtime::new(machine, store).unwrap();
        let watcher = rt.watch().unwrap();
        (rt, watcher, Actor::new("ops"))
    }

    /// Each end lets go of its own action's handle only: not the hidden
    /// action's beside it, not another object's.
    #[test]
    fn an_end_lets_go_of_its_own_action_s_handle() {
        let (rt, mut watcher, ops) = vms();
        let flights = Arc::new(Flights::default());
        let keep = |id: &str, action: &str| {
            let handle = rt.start(id, &ops, action).unwrap().into_owned();
            let fence = handle.fence().0;
            let flight = Flight {
                handle,
                actor: "ops".into(),
            };
            let key = ("vm".to_owned(), id.to_owned(), fence);
            assert!(flights.keep(key, flight).is_none());
            fence
        };
        rt.create("vm-1", &ops).unwrap();
        rt.run("vm-1", &ops, "deploy").unwrap();
        rt.create("vm-2", &ops).unwrap();
        rt.run("vm-2", &ops, "deploy").unwrap();
        let migrate = keep("vm-1", "migrate");
        let reboot = keep("vm-1", "reboot");
        let other = keep("vm-2", "reboot");
        // Another process ends vm-1's reboot.
        rt.resume("vm-1", &ops, fsm_runtime::Fence(reboot))
            .unwrap()
            .complete()
            .unwrap();
        let mut gone = Vec::new();
        while let Ok(Some(event)) = watcher.try_recv() {
            gone.extend(
                flights
                    .ended("vm", &event)
                    .into_iter()
                    .map(|f| f.handle.fence().0),
            );
        }
        assert_eq!(gone, [reboot]);
        let left: Vec<_> = flights.lock().handles.keys().map(|k| k.2).collect();
        assert_eq!(left, [migrate, other]);
    }

    /// A handle kept after the feed saw its action ended by another service
    /// (the end came between the start and the keeping) is handed back, not
    /// kept; a later start of the same action on the object is kept.
    #[test]
    fn a_handle_whose_end_came_first_is_not_kept() {
        let (rt, mut watcher, ops) = vms();
        let flights = Flights::default();
        rt.create("vm-1", &ops).unwrap();
        rt.run("vm-1", &ops, "deploy").unwrap();
        let migration = rt.start("vm-1", &ops, "migrate").unwrap().into_owned();
        let reboot = rt.start("vm-1", &ops, "reboot").unwrap().into_owned();
        let fence = reboot.fence();
        // Another service ends the reboot, and the feed sees it, before this
        // service keeps the reboot's handle.
        rt.resume("vm-1", &ops, fence).unwrap().complete().unwrap();
        while let Ok(Some(event)) = watcher.try_recv() {
            assert!(flights.ended("vm", &event).is_empty());
        }
        let flight = |handle| Flight {
            handle,
            actor: "ops".into(),
        };
        let key = |fence: fsm_runtime::Fence| ("vm".to_owned(), "vm-1".to_owned(), fence.0);
        let stale = flights.keep(key(fence), flight(reboot));
        assert_eq!(stale.map(|f| f.handle.fence()), Some(fence));
        // The migration beside it was not ended: kept.
        let migrating = migration.fence();
        assert!(flights.keep(key(migrating), flight(migration)).is_none());
        // A new reboot is a new hold: kept.
        let again = rt.start("vm-1", &ops, "reboot").unwrap().into_owned();
        let again_fence = again.fence();
        assert!(flights.keep(key(again_fence), flight(again)).is_none());
        let left: Vec<_> = flights.lock().handles.keys().map(|k| k.2).collect();
        assert_eq!(left, [migrating.0, again_fence.0]);
    }
}
