//! Drawing a machine: Mermaid `stateDiagram-v2`, Graphviz DOT, PlantUML (the seeds'
//! own format), and the table as the seed documents print it.
//!
//! All diagram formats draw one [`Drawing`], made from the machine's rules in a
//! [`View`]: the full one (every state, an arrow for each part of each action) or
//! the folded one (static states, each move labelled with the transition state it
//! shows), so they always agree with each other and with the table. [`svg`]
//! draws a drawing with a layout of its own, needing no tool.

mod dot;
mod drawing;
mod mermaid;
mod plantuml;
mod svg;
mod table;

use std::fmt;
use std::str::FromStr;

use fsm_model::{ActionId, Machine, StateId, Target};

pub use self::drawing::{Drawing, DrawnState, Edge, UnknownView, View};
pub use self::svg::svg;
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown diagram format `{}`; expected mermaid, dot or plantuml",
            self.0
        )
    }
}

impl std::error::Error for UnknownFormat {}

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// Renders `machine` in `format`, full view.
pub fn diagram(machine: &Machine, format: Format) -> String {
    render(machine, format, View::Full)
}

/// Renders `machine` in `format` and `view`.
pub fn render(machine: &Machine, format: Format, view: View) -> String {
    let drawing = Drawing::new(machine, view);
    match format {
        Format::Mermaid => mermaid::render(machine, &drawing),
        Format::Dot => dot::render(machine, &drawing),
        Format::PlantUml => plantuml::render(machine, &drawing),
    }
}

/// Which part of a rule an arrow draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrowKind {
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Arrow {
    /// Where the arrow starts.
    pub from: StateId,
    /// Where it ends.
    pub to: StateId,
    /// The action it belongs to.
    pub action: ActionId,
    /// Which part of the action it draws.
    pub kind: ArrowKind,
}

/// Every arrow of the machine's diagram, from its rules, action by action, each
/// once.
pub fn arrows(machine: &Machine) -> Vec<Arrow> {
    let mut out: Vec<Arrow> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |from, to, action, kind| {
        let arrow = Arrow {
            from,
            to,
            action,
            kind,
        };
        if seen.insert(arrow.clone()) {
            out.push(arrow);
        }
    };
    for rule in machine.rules() {
        let (o, t, a) = (rule.origin, rule.target, rule.action);
        match rule.via {
            Some(via) => {
                push(o, via, a, ArrowKind::Start);
                push(via, t, a, ArrowKind::Finish);
            }
            None if rule.changes_state => push(o, t, a, ArrowKind::Direct),
            None => push(o, o, a, ArrowKind::InPlace),
        }
    }
    out
}

/// The text on an arrow: the action, then its guards in brackets and its roles in
/// parentheses on the arrow that starts it (a name that is not a plain word in
/// double quotes, [`fsm_model::label_name`]); `(hidden)` for hidden actions. A
/// finishing arrow whose target depends on the origin says which origins it is
/// for, and `(back)` when the action returns to where it started.
pub fn arrow_label(machine: &Machine, arrow: &Arrow) -> String {
    let action = machine.action(arrow.action);
    let mut label = action.name.to_string();
    if arrow.kind == ArrowKind::Finish {
        match &action.target {
            Target::Origin => label.push_str(" (back)"),
            Target::PerOrigin(_) => {
                let origins: Vec<&str> = machine
                    .rules_of(arrow.action)
                    .filter(|r| r.target == arrow.to)
                    .map(|r| &*machine.state(r.origin).name)
                    .collect();
                label.push_str(&format!(" (from {})", origins.join(" / ")));
            }
            Target::State(_) => {}
        }
    }
    if arrow.kind != ArrowKind::Finish {
        // Names that are not plain words in quotes (`fsm_model::label_name`),
        // so that the label reads back whole.
        let listed = |names: Vec<&str>| {
            let names: Vec<_> = names.into_iter().map(fsm_model::label_name).collect();
            names.join(", ")
        };
        if !action.guards.is_empty() {
            label.push_str(&format!(" [{}]", listed(machine.guard_names(arrow.action))));
        }
        if !action.roles.is_empty() {
            let roles: Vec<&str> = action.roles.iter().map(|r| &**r).collect();
            label.push_str(&format!(" ({})", listed(roles)));
        }
    }
    if action.hidden {
        label.push_str(" (hidden)");
    }
    label
}

/// Notes about a state worth drawing: its owner, who may remove an object in
/// it (`removable` for anyone, `removable by: admin, "cloud admin"`, names
/// that are not plain words in quotes), and whether it is only transient.
pub fn state_notes(machine: &Machine, state: StateId) -> Vec<String> {
    let s = machine.state(state);
    let mut notes = Vec::new();
    if let Some(owner) = &s.owner {
        notes.push(format!("owner: {owner}"));
    }
    match s.remove.as_deref() {
        None => {}
        Some([]) => notes.push("removable".to_owned()),
        Some(roles) => {
            let roles: Vec<_> = roles.iter().map(|r| fsm_model::label_name(r)).collect();
            notes.push(format!("removable by: {}", roles.join(", ")));
        }
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
