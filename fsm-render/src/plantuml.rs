//! PlantUML state diagrams, the format the seeds draw in.

use std::fmt::Write;

use fsm_model::Machine;

use crate::drawing::Drawing;
use crate::ident;

pub(super) fn render(m: &Machine, d: &Drawing) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "@startuml {}", ident(m.name()));
    out.push_str("hide empty description\n");
    out.push_str("skinparam state {\n");
    out.push_str("  BackgroundColor<<transition>> #FFF4D6\n");
    out.push_str("  BorderColor<<transition>> #C98A00\n");
    out.push_str("  BackgroundColor<<terminal>> #E8E8E8\n");
    out.push_str("}\n");
    for s in &d.states {
        let state = m.state(s.id);
        let stereotype = if state.is_transition() {
            " <<transition>>"
        } else if state.terminal {
            " <<terminal>>"
        } else {
            ""
        };
        let id = ident(&state.name);
        let _ = writeln!(out, "state \"{}\" as {id}{stereotype}", state.name);
        for line in s.notes.iter().chain(&s.loops) {
            let _ = writeln!(out, "{id} : {line}");
        }
    }
    let _ = writeln!(out, "[*] --> {}", ident(&m.state(m.initial()).name));
    for e in &d.edges {
        let _ = writeln!(
            out,
            "{} --> {} : {}",
            ident(&m.state(e.from).name),
            ident(&m.state(e.to).name),
            e.label
        );
    }
    // Where objects end: a terminal state, or one where they are removed.
    for s in &d.states {
        let state = m.state(s.id);
        if state.terminal || state.remove.is_some() {
            let _ = writeln!(out, "{} --> [*]", ident(&state.name));
        }
    }
    out.push_str("@enduml\n");
    out
}
