//! Drawing a machine: Mermaid `stateDiagram-v2`, Graphviz DOT, PlantUML (the seeds'
//! own format), and the table as the seed documents print it.
//!
//! All diagram formats draw from one list of [`Edge`]s, so they always agree.

mod dot;
mod mermaid;
mod plantuml;
mod table;

use std::fmt;
use std::str::FromStr;

use crate::spec::{ActionId, Machine, StateId, Target};

pub use self::table::table;

/// A diagram format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Mermaid `stateDiagram-v2`.
    Mermaid,
    /// Graphviz DOT.
    Dot,
    /// PlantUML state diagram.
    PlantUml,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 3] = [Format::Mermaid, Format::Dot, Format::PlantUml];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Mermaid => "mermaid",
            Format::Dot => "dot",
            Format::PlantUml => "plantuml",
        }
    }

    /// The usual file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Mermaid => "mmd",
            Format::Dot => "dot",
            Format::PlantUml => "puml",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A format name that is not one of [`Format::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown diagram format `{0}`; expected mermaid, dot or plantuml")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// Renders `machine` in `format`.
pub fn diagram(machine: &Machine, format: Format) -> String {
    match format {
        Format::Mermaid => mermaid::render(machine),
        Format::Dot => dot::render(machine),
        Format::PlantUml => plantuml::render(machine),
    }
}

/// Which part of an action an edge draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// Origin into the transition state: the action starts.
    Start,
    /// Transition state into the target: the action finishes.
    Finish,
    /// Origin straight to the target: an action with no transition state.
    Direct,
    /// An action that changes no state, drawn as a loop.
    InPlace,
}

/// One arrow of a diagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// Where the arrow starts.
    pub from: StateId,
    /// Where it ends.
    pub to: StateId,
    /// The action it belongs to.
    pub action: ActionId,
    /// Which part of the action it draws.
    pub kind: EdgeKind,
}

/// Every arrow of the machine's diagram, action by action, each once.
pub fn edges(machine: &Machine) -> Vec<Edge> {
    let mut out: Vec<Edge> = Vec::new();
    let mut push = |e: Edge| {
        if !out.contains(&e) {
            out.push(e);
        }
    };
    for a in machine.action_ids() {
        let action = machine.action(a);
        for &origin in action.origins.iter() {
            let Some(target) = action.target_from(origin) else {
                continue;
            };
            match action.via {
                Some(via) => {
                    push(Edge {
                        from: origin,
                        to: via,
                        action: a,
                        kind: EdgeKind::Start,
                    });
                    push(Edge {
                        from: via,
                        to: target,
                        action: a,
                        kind: EdgeKind::Finish,
                    });
                }
                None if action.changes_state() => push(Edge {
                    from: origin,
                    to: target,
                    action: a,
                    kind: EdgeKind::Direct,
                }),
                None => push(Edge {
                    from: origin,
                    to: origin,
                    action: a,
                    kind: EdgeKind::InPlace,
                }),
            }
        }
    }
    out
}

/// The text on an edge: the action, then its guards in brackets and its roles in
/// parentheses on the edge that starts it; `(hidden)` for hidden actions. A finishing
/// edge whose target depends on the origin says which origins it is for, and
/// `(back)` when the action returns to where it started.
pub fn edge_label(machine: &Machine, edge: &Edge) -> String {
    let action = machine.action(edge.action);
    let mut label = action.name.to_string();
    if edge.kind == EdgeKind::Finish {
        match &action.target {
            Target::Origin => label.push_str(" (back)"),
            Target::PerOrigin(_) => {
                let origins: Vec<&str> = action
                    .origins
                    .iter()
                    .filter(|&&o| action.target_from(o) == Some(edge.to))
                    .map(|&o| &*machine.state(o).name)
                    .collect();
                label.push_str(&format!(" (from {})", origins.join(" / ")));
            }
            Target::State(_) => {}
        }
    }
    if edge.kind != EdgeKind::Finish {
        if !action.guards.is_empty() {
            let guards: Vec<&str> = action
                .guards
                .iter()
                .map(|&g| &*machine.guard(g).name)
                .collect();
            label.push_str(&format!(" [{}]", guards.join(", ")));
        }
        if !action.roles.is_empty() {
            let roles: Vec<&str> = action.roles.iter().map(|r| &**r).collect();
            label.push_str(&format!(" ({})", roles.join(", ")));
        }
    }
    if action.hidden {
        label.push_str(" (hidden)");
    }
    label
}

/// Notes about a state worth drawing: its owner, and whether it is only transient.
pub fn state_notes(machine: &Machine, state: StateId) -> Vec<String> {
    let s = machine.state(state);
    let mut notes = Vec::new();
    if let Some(owner) = &s.owner {
        notes.push(format!("owner: {owner}"));
    }
    if !s.persisted {
        notes.push("not persisted".to_owned());
    }
    notes
}

/// A diagram identifier for a state name: letters, digits and `_` only.
pub(crate) fn ident(name: &str) -> String {
    let mut id: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if id.starts_with(|c: char| c.is_ascii_digit()) || id.is_empty() {
        id.insert(0, '_');
    }
    id
}
