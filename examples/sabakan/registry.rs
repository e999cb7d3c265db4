//! A sabakan-like machine registry on the fsm runtime: machines with their states
//! and disk encryption keys, admins and controllers as actors with roles, the
//! seed's rules on keys as guards and state-preserving actions, and its rule on
//! removal as the spec's `remove` on Retired.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use fsm::StateMachine;
use fsm_runtime::{Actor, Entry, MemoryStore, Runtime, RuntimeError};

use crate::machines::{MachineAction, MachineState};

/// Why the registry refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// The lifecycle's rules refused (see the runtime's message).
    #[error(transparent)]
    Refused(#[from] RuntimeError),
}

type Keys = Arc<Mutex<HashMap<String, Vec<String>>>>;

/// Machines, their states and their disk encryption keys.
pub struct Registry {
    machines: Runtime,
    keys: Keys,
    restarted: Arc<Mutex<HashSet<String>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        let keys: Keys = Arc::default();
        let restarted: Arc<Mutex<HashSet<String>>> = Arc::default();
        let machines = Runtime::builder_of::<MachineState>(MemoryStore::new())
            // "A Retiring machine can transition to Retired only when its disk
            // encryption keys have been deleted."
            .guard("keys_deleted", {
                let keys = keys.clone();
                move |ctx| lock(&keys).get(ctx.id.as_str()).is_none_or(Vec::is_empty)
            })
            // "Updating machines can transition only to Uninitialized after restarting."
            .guard("restarted", {
                let restarted = restarted.clone();
                move |ctx| lock(&restarted).contains(ctx.id.as_str())
            })
            // The rules on changes of keys: this registry keeps the keys itself,
            // and its `add_key` only adds one, its `delete_keys` only deletes.
            .guard("keeps_keys", |_| true)
            .guard("adds_no_keys", |_| true)
            .build()
            .expect("every guard of the sabakan spec is implemented");
        Registry {
            machines,
            keys,
            restarted,
        }
    }

    /// Registers a new machine: Uninitialized, no keys. A removed serial may
    /// be registered again, as a new machine.
    pub fn register(&self, serial: &str, actor: &Actor) -> Result<(), RegistryError> {
        self.machines.create(serial, actor)?;
        Ok(())
    }

    /// The machine's state.
    pub fn state(&self, serial: &str) -> Result<MachineState, RegistryError> {
        Ok(self.machines.state_as::<MachineState>(serial)?)
    }

    /// Moves the machine by `action` (retire, initialize, fail, ...).
    pub fn transition(
        &self,
        serial: &str,
        actor: &Actor,
        action: MachineAction,
    ) -> Result<MachineState, RegistryError> {
        let record = self.machines.run(serial, actor, action)?;
        if action == MachineAction::FinishUpdate {
            lock(&self.restarted).remove(serial);
        }
        Ok(MachineState::from_id(record.state).expect("a state of the machine"))
    }

    /// Adds a disk encryption key: never to a Retired machine.
    pub fn add_key(&self, serial: &str, actor: &Actor, key: &str) -> Result<(), RegistryError> {
        let held = self.machines.start(serial, actor, MachineAction::AddKey)?;
        lock(&self.keys)
            .entry(serial.to_owned())
            .or_default()
            .push(key.to_owned());
        held.complete()?;
        Ok(())
    }

    /// Deletes every disk encryption key of the machine: only while Retiring.
    pub fn delete_keys(&self, serial: &str, actor: &Actor) -> Result<usize, RegistryError> {
        let held = self
            .machines
            .start(serial, actor, MachineAction::DeleteKeys)?;
        let deleted = lock(&self.keys).remove(serial).map_or(0, |k| k.len());
        held.complete()?;
        Ok(deleted)
    }

    /// The machine's disk encryption keys.
    pub fn keys(&self, serial: &str) -> Vec<String> {
        lock(&self.keys).get(serial).cloned().unwrap_or_default()
    }

    /// A controller reports that an Updating machine has restarted.
    pub fn report_restart(&self, serial: &str) {
        lock(&self.restarted).insert(serial.to_owned());
    }

    /// Removes the machine from sabakan, its keys with it: only Retired
    /// machines, by admins. Answers the removal's entry, the last event
    /// watchers get of the machine.
    pub fn remove(&self, serial: &str, actor: &Actor) -> Result<Entry, RegistryError> {
        let removed = self.machines.remove(serial, actor)?;
        lock(&self.keys).remove(serial);
        lock(&self.restarted).remove(serial);
        Ok(removed)
    }

    /// The runtime, for its history and watchers.
    pub fn runtime(&self) -> &Runtime {
        &self.machines
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
