//! Records and history entries as a persistent store keeps them: states and actions
//! by name, never by their index in the spec, with the fingerprint of the spec that
//! wrote them. Adding or reordering states in a spec therefore changes nothing
//! stored, and an operator reading the store sees `"state": "RUNNING"`.
//!
//! A [`Codec`] translates between the runtime's [`Record`]s and [`Entry`]s (ids,
//! fast to compare) and these stored forms, for one machine.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use fsm_core::{ActionId, Machine, StateId};
use serde::{Deserialize, Serialize};

use crate::{Entry, EntryKind, Holder, Record};

/// A [`Record`] as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRecord {
    /// The state, by name.
    pub state: String,
    /// The record's version.
    pub version: u64,
    /// When it last changed.
    pub changed_at: SystemTime,
    /// The visible action in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<StoredHolder>,
    /// The hidden action in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<StoredHolder>,
    /// The object's data (JSON text), if it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// The fingerprint of the spec that wrote it ([`fsm_core::evolve::fingerprint`]).
    pub spec: String,
}

/// A [`Holder`] as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredHolder {
    /// The action, by name.
    pub action: String,
    /// The state it started from, by name.
    pub origin: String,
    /// Who started it.
    pub actor: String,
    /// When.
    pub since: SystemTime,
    /// Whether its handle was dropped.
    #[serde(default)]
    pub abandoned: bool,
    /// The version its start wrote.
    pub version: u64,
    /// The session of the process that started it (see [`Holder::session`]).
    /// Absent in records written before stores named sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<i64>,
    /// The data its start proposed (see [`Holder::proposed`]), as JSON text.
    /// Absent when it proposed none, and in records written before holds
    /// kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed: Option<String>,
}

/// An [`Entry`] as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredEntry {
    /// The version the write made.
    pub version: u64,
    /// When.
    pub at: SystemTime,
    /// Who.
    pub actor: String,
    /// What kind of write.
    pub kind: EntryKind,
    /// The action, by name (none for a creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The state before, by name.
    pub from: String,
    /// The state after, by name.
    pub to: String,
    /// The fingerprint of the spec that wrote it.
    pub spec: String,
}

/// A stored name the machine does not have (nor had, by a declared rename).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "machine `{machine}` has no {kind} `{name}` (if it was renamed, say so with `renamed_from` in the spec)"
)]
pub struct UnknownName {
    /// The machine.
    pub machine: String,
    /// `state` or `action`.
    pub kind: &'static str,
    /// The stored name.
    pub name: String,
}

/// Translates records and entries of one machine to and from their stored forms.
#[derive(Debug, Clone)]
pub struct Codec {
    machine: String,
    fingerprint: String,
    state_names: Vec<Arc<str>>,
    action_names: Vec<Arc<str>>,
    states: HashMap<String, StateId>,
    actions: HashMap<String, ActionId>,
}

impl Codec {
    /// The codec of `machine`.
    pub fn new(machine: &Machine) -> Codec {
        let state_names: Vec<Arc<str>> = machine
            .states()
            .iter()
            .map(|s| s.name.as_ref().into())
            .collect();
        let action_names: Vec<Arc<str>> = machine
            .actions()
            .iter()
            .map(|a| a.name.as_ref().into())
            .collect();
        Codec {
            machine: machine.name().to_owned(),
            fingerprint: fsm_core::evolve::fingerprint(machine),
            // Current names, and the earlier ones the spec declares (`renamed_from`):
            // an object stored under an old name reads as in the renamed state, and
            // is written back under the new one.
            states: machine
                .state_ids()
                .flat_map(|s| {
                    let state = machine.state(s);
                    std::iter::once(&state.name)
                        .chain(state.renamed_from.iter())
                        .map(move |n| (n.to_string(), s))
                })
                .collect(),
            actions: machine
                .action_ids()
                .flat_map(|a| {
                    let action = machine.action(a);
                    std::iter::once(&action.name)
                        .chain(action.renamed_from.iter())
                        .map(move |n| (n.to_string(), a))
                })
                .collect(),
            state_names,
            action_names,
        }
    }

    /// The fingerprint written beside every record and entry.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn state_name(&self, s: StateId) -> String {
        self.state_names[s.0].to_string()
    }

    fn action_name(&self, a: ActionId) -> String {
        self.action_names[a.0].to_string()
    }

    /// The state stored as `name`.
    pub fn state(&self, name: &str) -> Result<StateId, UnknownName> {
        self.states
            .get(name)
            .copied()
            .ok_or_else(|| self.unknown("state", name))
    }

    /// The action stored as `name`.
    pub fn action(&self, name: &str) -> Result<ActionId, UnknownName> {
        self.actions
            .get(name)
            .copied()
            .ok_or_else(|| self.unknown("action", name))
    }

    fn unknown(&self, kind: &'static str, name: &str) -> UnknownName {
        UnknownName {
            machine: self.machine.clone(),
            kind,
            name: name.to_owned(),
        }
    }

    /// The stored form of `record`.
    pub fn encode_record(&self, record: &Record) -> StoredRecord {
        let holder = |h: &Option<Box<Holder>>| {
            h.as_ref().map(|h| StoredHolder {
                action: self.action_name(h.action),
                origin: self.state_name(h.origin),
                actor: h.actor.as_str().to_owned(),
                since: h.since,
                abandoned: h.abandoned,
                version: h.version,
                session: h.session,
                proposed: h.proposed.as_deref().map(str::to_owned),
            })
        };
        StoredRecord {
            state: self.state_name(record.state),
            version: record.version,
            changed_at: record.changed_at,
            in_flight: holder(&record.in_flight),
            hidden: holder(&record.hidden),
            data: record.data.as_deref().map(str::to_owned),
            spec: self.fingerprint.clone(),
        }
    }

    /// The record stored as `stored`.
    pub fn decode_record(&self, stored: StoredRecord) -> Result<Record, UnknownName> {
        let holder = |h: Option<StoredHolder>| -> Result<Option<Box<Holder>>, UnknownName> {
            let Some(h) = h else { return Ok(None) };
            Ok(Some(Box::new(Holder {
                action: self.action(&h.action)?,
                origin: self.state(&h.origin)?,
                actor: h.actor.into(),
                since: h.since,
                abandoned: h.abandoned,
                version: h.version,
                session: h.session,
                proposed: h.proposed.map(Arc::from),
            })))
        };
        Ok(Record {
            state: self.state(&stored.state)?,
            version: stored.version,
            changed_at: stored.changed_at,
            in_flight: holder(stored.in_flight)?,
            hidden: holder(stored.hidden)?,
            data: stored.data.map(Arc::from),
        })
    }

    /// The stored form of `entry`.
    pub fn encode_entry(&self, entry: &Entry) -> StoredEntry {
        StoredEntry {
            version: entry.version,
            at: entry.at,
            actor: entry.actor.as_str().to_owned(),
            kind: entry.kind,
            action: entry.action.map(|a| self.action_name(a)),
            from: self.state_name(entry.from),
            to: self.state_name(entry.to),
            spec: self.fingerprint.clone(),
        }
    }

    /// The entry stored as `stored`.
    pub fn decode_entry(&self, stored: StoredEntry) -> Result<Entry, UnknownName> {
        Ok(Entry {
            version: stored.version,
            at: stored.at,
            actor: stored.actor.into(),
            kind: stored.kind,
            action: stored.action.map(|a| self.action(&a)).transpose()?,
            from: self.state(&stored.from)?,
            to: self.state(&stored.to)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Actor, MemoryStore, Runtime};

    /// The data a start proposed is stored with its holder and read back; a
    /// holder stored before holds kept it reads as proposing none.
    #[test]
    fn a_holder_keeps_the_data_its_start_proposed() {
        let rt = Runtime::new(crate::testing::machine(), MemoryStore::new()).unwrap();
        let user = Actor::new("user");
        rt.create("a", &user).unwrap();
        let handle = rt
            .start_changing("a", None, &user, "start", r#"{"disk":"d-1"}"#.into())
            .unwrap();
        let codec = Codec::new(rt.machine());
        let stored = codec.encode_record(&rt.get("a").unwrap());
        let json = serde_json::to_string(&stored).unwrap();
        assert!(
            json.contains(r#""proposed":"{\"disk\":\"d-1\"}""#),
            "{json}"
        );
        let read = codec
            .decode_record(serde_json::from_str(&json).unwrap())
            .unwrap();
        let proposed = read.in_flight.as_ref().unwrap().proposed.as_deref();
        assert_eq!(proposed, Some(r#"{"disk":"d-1"}"#));
        // As stored before: no `proposed` key.
        let before = json.replace(r#","proposed":"{\"disk\":\"d-1\"}""#, "");
        assert!(!before.contains("proposed"), "{before}");
        let read = codec
            .decode_record(serde_json::from_str(&before).unwrap())
            .unwrap();
        assert_eq!(read.in_flight.unwrap().proposed, None);
        handle.complete().unwrap();
    }
}
