//! PlantUML state diagrams, the format the seeds draw in.

use std::fmt::Write;

use super::{arrow_label, arrows, ident, state_notes};
use crate::Machine;

pub(super) fn render(m: &Machine) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "@startuml {}", ident(m.name()));
    out.push_str("hide empty description\n");
    out.push_str("skinparam state {\n");
    out.push_str("  BackgroundColor<<transition>> #FFF4D6\n");
    out.push_str("  BorderColor<<transition>> #C98A00\n");
    out.push_str("  BackgroundColor<<terminal>> #E8E8E8\n");
    out.push_str("}\n");
    for s in m.state_ids() {
        let state = m.state(s);
        let stereotype = if state.is_transition() {
            " <<transition>>"
        } else if state.terminal {
            " <<terminal>>"
        } else {
            ""
        };
        let id = ident(&state.name);
        let _ = writeln!(out, "state \"{}\" as {id}{stereotype}", state.name);
        for note in state_notes(m, s) {
            let _ = writeln!(out, "{id} : {note}");
        }
    }
    let _ = writeln!(out, "[*] --> {}", ident(&m.state(m.initial()).name));
    for e in arrows(m) {
        let _ = writeln!(
            out,
            "{} --> {} : {}",
            ident(&m.state(e.from).name),
            ident(&m.state(e.to).name),
            arrow_label(m, &e)
        );
    }
    for s in m.state_ids() {
        if m.state(s).terminal {
            let _ = writeln!(out, "{} --> [*]", ident(&m.state(s).name));
        }
    }
    out.push_str("@enduml\n");
    out
}
