//! Mermaid `stateDiagram-v2`.

use std::fmt::Write;

use fsm_model::Machine;

use crate::drawing::Drawing;
use crate::ident;

pub(super) fn render(m: &Machine, d: &Drawing) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "---\ntitle: {}\n---\nstateDiagram-v2", m.name());
    out.push_str("    classDef transition fill:#fff4d6,stroke:#c98a00,stroke-dasharray:4 4\n");
    out.push_str("    classDef terminal fill:#e8e8e8,stroke:#555\n");
    for s in &d.states {
        let name = &m.state(s.id).name;
        if ident(name) != **name {
            let _ = writeln!(out, "    state \"{name}\" as {}", ident(name));
        }
    }
    let _ = writeln!(out, "    [*] --> {}", ident(&m.state(m.initial()).name));
    for e in &d.edges {
        let _ = writeln!(
            out,
            "    {} --> {}: {}",
            ident(&m.state(e.from).name),
            ident(&m.state(e.to).name),
            e.label
        );
    }
    for s in &d.states {
        let state = m.state(s.id);
        let id = ident(&state.name);
        // Where objects end: a terminal state, or one where they are removed.
        if state.terminal || state.remove.is_some() {
            let _ = writeln!(out, "    {id} --> [*]");
        }
        // Notes as blocks: a one-line note ends at its first colon.
        if !s.notes.is_empty() {
            let _ = writeln!(out, "    note right of {id}");
            for note in &s.notes {
                let _ = writeln!(out, "        {note}");
            }
            out.push_str("    end note\n");
        }
        if !s.loops.is_empty() {
            let _ = writeln!(out, "    note left of {id}");
            for line in &s.loops {
                let _ = writeln!(out, "        {line}");
            }
            out.push_str("    end note\n");
        }
    }
    for s in &d.states {
        let state = m.state(s.id);
        if state.is_transition() {
            let _ = writeln!(out, "    class {} transition", ident(&state.name));
        } else if state.terminal {
            let _ = writeln!(out, "    class {} terminal", ident(&state.name));
        }
    }
    out
}
