//! The names each format can carry. A name the format would read as something
//! else (a step into a child state, a wildcard, the prefix of another event)
//! would make the export a different machine, so the export is refused and says
//! which name and why.

use std::collections::HashMap;
use std::fmt;

use fsm_model::Machine;

use crate::{child, done_event, entries, failed_event};

/// A name of the machine that a format would read as something else: the export
/// would not be the machine, so there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportError {
    /// The format: `XState` or `SCXML`.
    pub format: &'static str,
    /// What bears the name: `machine`, `state`, `action` or `event`; or
    /// `the description of` a machine, state, action, role or guard.
    pub what: &'static str,
    /// The name.
    pub name: String,
    /// How the format would read it.
    pub why: String,
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} cannot carry {} `{}`: {}",
            self.format, self.what, self.name, self.why
        )
    }
}

impl std::error::Error for ExportError {}

fn refuse(format: &'static str, what: &'static str, name: &str, why: String) -> ExportError {
    ExportError {
        format,
        what,
        name: name.to_owned(),
        why,
    }
}

/// XState: `.` separates the steps of a target (`#vm.DEPLOYING.VIRTUAL`), and
/// `*` is a wildcard event. A state named with steps (`active.playing`, as
/// `fsm import xstate` names a nested state) is written as a child of compound
/// states (`active`), which no state of the table may be.
pub(crate) fn for_xstate(m: &Machine) -> Result<(), ExportError> {
    let refused = |what, name: &str, why: &str| Err(refuse("XState", what, name, why.to_owned()));
    let step = "XState reads `.` in a target as a step into a child state";
    if m.name().contains('.') {
        return refused("machine", m.name(), step);
    }
    let names: std::collections::HashSet<&str> =
        m.state_ids().map(|s| m.state(s).name.as_ref()).collect();
    for s in m.state_ids() {
        let state = m.state(s);
        if state.name.contains('.') {
            if state.is_transition() {
                let why = format!("a transition state is a compound state of its own, and {step}");
                return refused("state", &state.name, &why);
            }
            if state.terminal {
                let why = format!(
                    "{step}, and a final state inside a compound state ends its parent there, not \
                     the machine"
                );
                return refused("state", &state.name, &why);
            }
            if state.name.split('.').any(str::is_empty) {
                let why = format!("{step}, and one of its steps is empty");
                return refused("state", &state.name, &why);
            }
            let parents = state
                .name
                .match_indices('.')
                .map(|(at, _)| &state.name[..at]);
            for parent in parents {
                if names.contains(parent) {
                    let why = format!(
                        "{step}: it would be a child of `{parent}`, a state of the table, which \
                         XState would make a compound state"
                    );
                    return refused("state", &state.name, &why);
                }
            }
        }
        for way in entries(m, s) {
            let child = child(m, s, way.action, way.origin);
            if child.contains('.') {
                let why = format!(
                    "its name is part of the child state `{child}` of `{}`, and {step}",
                    state.name
                );
                return refused("action", &m.action(way.action).name, &why);
            }
        }
    }
    for a in m.action_ids() {
        let name = &m.action(a).name;
        if name.as_ref() == "*" || name.ends_with(".*") {
            return refused(
                "action",
                name,
                "XState reads it as a wildcard that takes other events",
            );
        }
    }
    Ok(())
}

/// SCXML: a state's id is an XML name, unique in the document; an event
/// descriptor takes every event it is a `.`-prefix of (`go` takes `go.fast`),
/// and `*` takes every event.
pub(crate) fn for_scxml(m: &Machine) -> Result<(), ExportError> {
    let refused = |what, name: &str, why: String| Err(refuse("SCXML", what, name, why));
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut claim = |id: String, state: &str| -> Result<(), ExportError> {
        if !is_xml_name(&id) {
            let why = format!(
                "the state id `{id}` is not an XML name (a letter or `_` first, then letters, digits, `-`, `_` or `.`)"
            );
            return refused("state", state, why);
        }
        if let Some(other) = ids.insert(id.clone(), state.to_owned()) {
            let why = format!("its id `{id}` is also the id of `{other}`");
            return refused("state", state, why);
        }
        Ok(())
    };
    for s in m.state_ids() {
        let state = &m.state(s).name;
        claim(state.to_string(), state)?;
        for way in entries(m, s) {
            claim(
                format!("{state}.{}", child(m, s, way.action, way.origin)),
                state,
            )?;
        }
    }
    let mut events: Vec<String> = m
        .action_ids()
        .map(|a| m.action(a).name.to_string())
        .collect();
    for s in m.state_ids() {
        for way in entries(m, s) {
            events.push(done_event(m, way.action));
            events.push(failed_event(m, way.action));
        }
    }
    for event in &events {
        if event == "*" {
            return refused("event", event, "SCXML reads it as every event".into());
        }
        let prefix = format!("{event}.");
        if let Some(longer) = events.iter().find(|e| e.starts_with(&prefix)) {
            let why = format!(
                "a transition on it also takes the event `{longer}` (SCXML matches events by their `.`-prefix)"
            );
            return refused("event", event, why);
        }
    }
    // Descriptions go into attributes, where XML 1.0 holds every character
    // but most control characters.
    let described = std::iter::once((m.name(), m.description()))
        .chain(
            m.states()
                .iter()
                .map(|s| (&*s.name, s.description.as_deref())),
        )
        .chain((m.action_ids().map(|a| m.action(a))).map(|a| (&*a.name, a.description.as_deref())))
        .chain(
            m.roles()
                .iter()
                .map(|r| (&*r.name, r.description.as_deref())),
        )
        .chain(m.guards().iter().map(|g| (&*g.name, Some(&*g.description))));
    for (name, description) in described {
        let bad = description.and_then(|d| d.chars().find(|&c| !is_xml_char(c)));
        if let Some(c) = bad {
            let why = format!("XML 1.0 cannot hold the character U+{:04X} in it", c as u32);
            return refused("the description of", name, why);
        }
    }
    Ok(())
}

/// Whether XML 1.0 can hold `c` (its `Char` production).
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// An XML name without a colon (`NCName`), Unicode letters and digits included.
fn is_xml_name(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
