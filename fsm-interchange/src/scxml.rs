//! W3C SCXML.

use std::fmt::Write;

use fsm_model::{ActionId, Machine, xml_escape};

use crate::{ExportError, child, done_event, entries, failed_event};

/// Text for inside an XML comment, which may not hold `--`.
fn comment(text: &str) -> String {
    text.replace("--", "- -")
}

/// What an action carries besides its moves, as a comment's text.
fn action_note(m: &Machine, a: ActionId) -> String {
    let action = m.action(a);
    let mut note = format!("action {}", action.name);
    if action.hidden {
        note.push_str(", hidden");
    }
    if !action.roles.is_empty() {
        note.push_str(&format!("; roles: {}", action.roles.join(", ")));
    }
    if !action.guards.is_empty() {
        note.push_str(&format!("; guards: {}", m.guard_names(a).join(", ")));
    }
    if let Some(d) = &action.description {
        note.push_str(&format!("; {d}"));
    }
    comment(&note)
}

/// `machine` as a W3C SCXML document, under the contract in the crate's
/// documentation: state ids are the states' names, a transition state's children
/// are `<STATE>.<ORIGIN>`; roles, guards, owners and descriptions are comments.
///
/// # Errors
///
/// A name SCXML would read as something else ([`ExportError`]).
pub fn scxml(m: &Machine) -> Result<String, ExportError> {
    crate::names::for_scxml(m)?;
    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<!-- Exported by fsm from machine `{}`. -->",
        comment(m.name())
    );
    let _ = writeln!(
        out,
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" version=\"1.0\" name=\"{}\" initial=\"{}\">",
        xml_escape(m.name()),
        xml_escape(&m.state(m.initial()).name)
    );
    if let Some(d) = m.description() {
        let _ = writeln!(out, "  <!-- {} -->", comment(d));
    }
    for r in m.roles() {
        let _ = writeln!(
            out,
            "  <!-- role {}: {} -->",
            comment(&r.name),
            comment(r.description.as_deref().unwrap_or(""))
        );
    }
    for g in m.guards() {
        let _ = writeln!(
            out,
            "  <!-- guard {}: {} -->",
            comment(&g.name),
            comment(&g.description)
        );
    }
    for s in m.state_ids() {
        let state = m.state(s);
        let id = xml_escape(&state.name);
        let element = if state.terminal { "final" } else { "state" };
        let ways = if state.is_transition() {
            entries(m, s)
        } else {
            Vec::new()
        };
        match ways.first() {
            Some(first) => {
                let _ = writeln!(
                    out,
                    "  <{element} id=\"{id}\" initial=\"{id}.{}\">",
                    xml_escape(&child(m, s, first.action, first.origin))
                );
            }
            None => {
                let _ = writeln!(out, "  <{element} id=\"{id}\">");
            }
        }
        let mut notes = Vec::new();
        if state.is_transition() {
            notes.push("transition state".to_owned());
        }
        if let Some(owner) = &state.owner {
            notes.push(format!("owner: {owner}"));
        }
        if !state.persisted {
            notes.push("not persisted".to_owned());
        }
        if let Some(d) = &state.description {
            notes.push(d.to_string());
        }
        if !notes.is_empty() {
            let _ = writeln!(out, "    <!-- {} -->", comment(&notes.join("; ")));
        }
        for rule in m.rules_from(s) {
            let event = xml_escape(&m.action(rule.action).name);
            if !rule.changes_state {
                let _ = writeln!(
                    out,
                    "    <!-- in place, no move: {} -->",
                    action_note(m, rule.action)
                );
                continue;
            }
            let target = match rule.via {
                Some(via) => format!("{}.{}", m.state(via).name, child(m, via, rule.action, s)),
                None => m.state(rule.target).name.to_string(),
            };
            let _ = writeln!(out, "    <!-- {} -->", action_note(m, rule.action));
            let _ = writeln!(
                out,
                "    <transition event=\"{event}\" target=\"{}\"/>",
                xml_escape(&target)
            );
        }
        for way in &ways {
            let _ = writeln!(
                out,
                "    <state id=\"{id}.{}\">",
                xml_escape(&child(m, s, way.action, way.origin))
            );
            let _ = writeln!(
                out,
                "      <transition event=\"{}\" target=\"{}\"/>",
                xml_escape(&done_event(m, way.action)),
                xml_escape(&m.state(way.target).name)
            );
            let _ = writeln!(
                out,
                "      <transition event=\"{}\" target=\"{}\"/>",
                xml_escape(&failed_event(m, way.action)),
                xml_escape(&m.state(way.origin).name)
            );
            out.push_str("    </state>\n");
        }
        let _ = writeln!(out, "  </{element}>");
    }
    out.push_str("</scxml>\n");
    Ok(out)
}
