//! Graphviz DOT.

use std::fmt::Write;

use fsm_model::Machine;

use crate::drawing::Drawing;

fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                q.push('\\');
                q.push(c);
            }
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

pub(super) fn render(m: &Machine, d: &Drawing) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quote(m.name()));
    out.push_str("    rankdir=LR;\n");
    out.push_str("    node [shape=box, style=rounded, fontname=\"Helvetica\"];\n");
    out.push_str("    edge [fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("    \"[*]\" [shape=point, width=0.2];\n");
    for s in &d.states {
        let state = m.state(s.id);
        let mut label = state.name.to_string();
        for note in &s.notes {
            label.push_str(&format!("\n({note})"));
        }
        for line in &s.loops {
            label.push_str(&format!("\n{line}"));
        }
        let mut attrs = vec![format!("label={}", quote(&label))];
        if state.is_transition() {
            attrs.push("style=\"rounded,dashed,filled\"".to_owned());
            attrs.push("fillcolor=\"#fff4d6\"".to_owned());
            attrs.push("color=\"#c98a00\"".to_owned());
        }
        if state.terminal {
            attrs.push("peripheries=2".to_owned());
        }
        let _ = writeln!(out, "    {} [{}];", quote(&state.name), attrs.join(", "));
    }
    let _ = writeln!(out, "    \"[*]\" -> {};", quote(&m.state(m.initial()).name));
    for e in &d.edges {
        let mut attrs = vec![format!("label={}", quote(&e.label))];
        if e.in_place {
            attrs.push("style=dashed".to_owned());
        }
        let _ = writeln!(
            out,
            "    {} -> {} [{}];",
            quote(&m.state(e.from).name),
            quote(&m.state(e.to).name),
            attrs.join(", ")
        );
    }
    out.push_str("}\n");
    out
}
