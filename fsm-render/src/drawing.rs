//! What a diagram shows, whichever format draws it: the states drawn, the lines
//! written inside or beside each, and the edges. Both views are made here, so the
//! three formats draw the same picture of the same rules.

use fsm_model::{Machine, Rule, StateId};

use crate::{ArrowKind, arrow_label, arrows, state_notes};

/// How much of the machine a diagram draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum View {
    /// Every state, transition states included, and every part of every action:
    /// the arrow that starts it and the one that finishes it.
    #[default]
    Full,
    /// The static states only: each transition state becomes the label of the move
    /// it stands for (`RUNNING → PAUSED: pause (PAUSING)`), and an action that
    /// returns to where it started, or changes no state, is a line `↻ action` on
    /// each state it starts from rather than a loop.
    Folded,
}

impl View {
    /// Every view.
    pub const ALL: [View; 2] = [View::Full, View::Folded];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            View::Full => "full",
            View::Folded => "folded",
        }
    }
}

impl std::fmt::Display for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A view name that is not one of [`View::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownView(pub String);

impl std::fmt::Display for UnknownView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown diagram view `{}`; expected full or folded",
            self.0
        )
    }
}

impl std::error::Error for UnknownView {}

impl std::str::FromStr for View {
    type Err = UnknownView;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        View::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownView(s.to_owned()))
    }
}

/// A state as drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawnState {
    /// The state.
    pub id: StateId,
    /// Its notes ([`state_notes`]): owner, not persisted.
    pub notes: Vec<String>,
    /// In the folded view, the actions that leave it where it is, one line each
    /// (`↻ reboot (REBOOTING)`).
    pub loops: Vec<String>,
}

/// An edge as drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// Where it starts.
    pub from: StateId,
    /// Where it ends.
    pub to: StateId,
    /// Its text.
    pub label: String,
    /// An action that changes no state, drawn as a dashed loop (full view).
    pub in_place: bool,
}

/// What a diagram of `machine` shows in `view`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawing {
    /// The states drawn, in the order of the table.
    pub states: Vec<DrawnState>,
    /// The edges, action by action.
    pub edges: Vec<Edge>,
}

impl Drawing {
    /// The drawing of `machine` in `view`.
    pub fn new(machine: &Machine, view: View) -> Drawing {
        match view {
            View::Full => full(machine),
            View::Folded => folded(machine),
        }
    }
}

fn full(m: &Machine) -> Drawing {
    Drawing {
        states: m
            .state_ids()
            .map(|id| DrawnState {
                id,
                notes: state_notes(m, id),
                loops: Vec::new(),
            })
            .collect(),
        edges: arrows(m)
            .iter()
            .map(|a| Edge {
                from: a.from,
                to: a.to,
                label: arrow_label(m, a),
                in_place: a.kind == ArrowKind::InPlace,
            })
            .collect(),
    }
}

fn folded(m: &Machine) -> Drawing {
    // Transition states are folded into labels; one that is the initial state
    // (which nothing leads into) stays, or the diagram would have no start.
    let mut states: Vec<DrawnState> = m
        .state_ids()
        .filter(|&id| !m.state(id).is_transition() || id == m.initial())
        .map(|id| DrawnState {
            id,
            notes: state_notes(m, id),
            loops: Vec::new(),
        })
        .collect();
    // Where each state is drawn, by id.
    let mut drawn = vec![None; m.states().len()];
    for (k, s) in states.iter().enumerate() {
        drawn[s.id.0] = Some(k);
    }
    let mut edges = Vec::new();
    for rule in m.rules() {
        let label = folded_label(m, &rule);
        if rule.origin == rule.target {
            if let Some(k) = drawn[rule.origin.0] {
                states[k].loops.push(format!("↻ {label}"));
            }
        } else {
            edges.push(Edge {
                from: rule.origin,
                to: rule.target,
                label,
                in_place: false,
            });
        }
    }
    Drawing { states, edges }
}

/// `pause (PAUSING) [drained] by admin`: the action, the transition state it
/// shows, its guards and its roles; `, hidden` for a hidden action.
fn folded_label(m: &Machine, rule: &Rule) -> String {
    let action = m.action(rule.action);
    let mut label = action.name.to_string();
    if let Some(via) = rule.via {
        label.push_str(&format!(" ({})", m.state(via).name));
    }
    if !action.guards.is_empty() {
        label.push_str(&format!(" [{}]", m.guard_names(rule.action).join(", ")));
    }
    if !action.roles.is_empty() {
        let roles: Vec<&str> = action.roles.iter().map(|r| &**r).collect();
        label.push_str(&format!(" by {}", roles.join(", ")));
    }
    if action.hidden {
        label.push_str(", hidden");
    }
    label
}
