//! The handles of actions started over the API and not ended yet, and letting
//! go of those that others ended.

use std::collections::BTreeMap;

use fsm_etcd::AnyStore;
use fsm_runtime::{EntryKind, Event, InFlight};

/// An action started over the API and not ended yet.
pub struct Flight {
    pub(crate) handle: InFlight<'static, AnyStore>,
    pub(crate) actor: String,
}

/// The in-flight handles of a service, by machine, object and fence.
pub type Flights = std::sync::Mutex<BTreeMap<(String, String, u64), Flight>>;

/// Takes out of `flights` the handles whose hold `event` ended (a completion,
/// failure or rollback written by another process, or by this one without
/// the handle): an object's kept handle of the same action, started before
/// it. A service whose actions are ended by others would otherwise keep
/// their handles until it stops.
pub(crate) fn ended(flights: &Flights, machine: &str, event: &Event) -> Vec<Flight> {
    let entry = &event.entry;
    if !matches!(
        entry.kind,
        EntryKind::Completed | EntryKind::Failed | EntryKind::Healed
    ) {
        return Vec::new();
    }
    let mut flights = flights.lock().unwrap_or_else(|e| e.into_inner());
    let object = |fence| (machine.to_owned(), event.id.as_str().to_owned(), fence);
    let gone: Vec<_> = flights
        .range(object(0)..object(entry.version))
        .filter(|(_, f)| Some(f.handle.action()) == entry.action)
        .map(|(key, _)| key.clone())
        .collect();
    gone.iter().filter_map(|key| flights.remove(key)).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fsm_runtime::{Actor, MemoryStore, Runtime};

    use super::{Flight, Flights, ended};
    use crate::AnyStore;

    /// Each end lets go of its own action's handle only: not the hidden
    /// action's beside it, not another object's.
    #[test]
    fn an_end_lets_go_of_its_own_action_s_handle() {
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/ovc/vm.toml");
        let machine = fsm_core::spec::load(spec).unwrap();
        let store = AnyStore::Memory(Box::new(MemoryStore::new()));
        let rt = Runtime::new(machine, store).unwrap();
        let mut watcher = rt.watch().unwrap();
        let ops = Actor::new("ops");
        let flights = Arc::new(Flights::default());
        let keep = |id: &str, action: &str| {
            let handle = rt.start(id, &ops, action).unwrap().into_owned();
            let fence = handle.fence().0;
            let flight = Flight {
                handle,
                actor: "ops".into(),
            };
            let key = ("vm".to_owned(), id.to_owned(), fence);
            flights.lock().unwrap().insert(key, flight);
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
                ended(&flights, "vm", &event)
                    .into_iter()
                    .map(|f| f.handle.fence().0),
            );
        }
        assert_eq!(gone, [reboot]);
        let left: Vec<_> = flights.lock().unwrap().keys().map(|k| k.2).collect();
        assert_eq!(left, [migrate, other]);
    }
}
