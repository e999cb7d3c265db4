//! Mermaid `stateDiagram-v2`.

use std::fmt::Write;

use super::{arrow_label, arrows, ident, state_notes};
use crate::Machine;

pub(super) fn render(m: &Machine) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "---\ntitle: {}\n---\nstateDiagram-v2", m.name());
    out.push_str("    classDef transition fill:#fff4d6,stroke:#c98a00,stroke-dasharray:4 4\n");
    out.push_str("    classDef terminal fill:#e8e8e8,stroke:#555\n");
    for s in m.state_ids() {
        let name = &m.state(s).name;
        if ident(name) != **name {
            let _ = writeln!(out, "    state \"{name}\" as {}", ident(name));
        }
    }
    let _ = writeln!(out, "    [*] --> {}", ident(&m.state(m.initial()).name));
    for e in arrows(m) {
        let _ = writeln!(
            out,
            "    {} --> {}: {}",
            ident(&m.state(e.from).name),
            ident(&m.state(e.to).name),
            arrow_label(m, &e)
        );
    }
    for s in m.state_ids() {
        let state = m.state(s);
        let id = ident(&state.name);
        if state.terminal {
            let _ = writeln!(out, "    {id} --> [*]");
        }
        let notes = state_notes(m, s);
        if !notes.is_empty() {
            let _ = writeln!(out, "    note right of {id}: {}", notes.join(", "));
        }
    }
    for s in m.state_ids() {
        let state = m.state(s);
        if state.is_transition() {
            let _ = writeln!(out, "    class {} transition", ident(&state.name));
        } else if state.terminal {
            let _ = writeln!(out, "    class {} terminal", ident(&state.name));
        }
    }
    out
}
