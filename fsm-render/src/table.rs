//! The machine as the seed documents print it: one Markdown table row per group of
//! origins that an action takes to the same target.

use std::fmt::Write;

use fsm_model::{Machine, StateId};

/// Renders the machine's table in Markdown, followed by its states and guards.
///
/// Origins an action takes to the same target share a row (`RUNNING / PAUSED`);
/// back-to-origin actions get a row per origin, as the OVC tables print them.
pub fn table(m: &Machine) -> String {
    let with_roles = m.actions().iter().any(|a| !a.roles.is_empty());
    let with_guards = m.actions().iter().any(|a| !a.guards.is_empty());
    let mut header = vec![
        "Action",
        "Initial State",
        "Transition State",
        "Desired State",
    ];
    if with_roles {
        header.push("Roles");
    }
    if with_guards {
        header.push("Guards");
    }
    let mut out = String::new();
    let _ = writeln!(out, "### {}", m.name());
    if let Some(d) = m.description() {
        let _ = writeln!(out, "\n{d}");
    }
    let _ = writeln!(out, "\nInitial state: {}\n", m.state(m.initial()).name);
    let _ = writeln!(out, "|{}|", header.join("|"));
    let _ = writeln!(out, "|{}|", vec!["---"; header.len()].join("|"));
    for a in m.action_ids() {
        let action = m.action(a);
        let mut groups: Vec<(StateId, Vec<StateId>)> = Vec::new();
        for rule in m.rules_of(a) {
            // An action that changes no state has one row, whatever its origins.
            let t = if rule.changes_state {
                rule.target
            } else {
                StateId(usize::MAX)
            };
            match groups.iter_mut().find(|(target, _)| *target == t) {
                Some((_, origins)) => origins.push(rule.origin),
                None => groups.push((t, vec![rule.origin])),
            }
        }
        for (target, origins) in groups {
            let names: Vec<&str> = origins.iter().map(|&o| &*m.state(o).name).collect();
            let mut name = action.name.to_string();
            if action.hidden {
                name.push_str(" (hidden)");
            }
            let via = action.via.map_or("—", |v| &m.state(v).name);
            let desired = if action.changes_state() {
                &*m.state(target).name
            } else {
                "(unchanged)"
            };
            let mut row = vec![name, names.join(" / "), via.to_owned(), desired.to_owned()];
            if with_roles {
                row.push(action.roles.join(", "));
            }
            if with_guards {
                row.push(m.guard_names(a).join(", "));
            }
            let _ = writeln!(out, "|{}|", row.join("|"));
        }
    }
    out.push_str("\nStates:\n\n");
    for s in m.states() {
        let mut tags = Vec::new();
        tags.push(if s.is_transition() {
            "transition"
        } else {
            "static"
        });
        if s.terminal {
            tags.push("terminal");
        }
        if !s.persisted {
            tags.push("not persisted");
        }
        let mut owner = s
            .owner
            .as_ref()
            .map(|o| format!(", owner {o}"))
            .unwrap_or_default();
        match s.remove.as_deref() {
            None => {}
            Some([]) => owner.push_str(", removable"),
            Some(roles) => owner.push_str(&format!(", removable by {}", roles.join(" or "))),
        }
        let desc = s
            .description
            .as_ref()
            .map(|d| format!(" - {d}"))
            .unwrap_or_default();
        let _ = writeln!(out, "* {} ({}{owner}){desc}", s.name, tags.join(", "));
    }
    if !m.guards().is_empty() {
        out.push_str("\nGuards:\n\n");
        for g in m.guards() {
            let _ = writeln!(out, "* {} - {}", g.name, g.description);
        }
    }
    out
}
