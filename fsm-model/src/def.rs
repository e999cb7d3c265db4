//! The definition of a machine as its author wrote it: names, not yet resolved or checked.
//!
//! Every front end (a TOML spec file, the derive macro, code) builds a [`MachineDef`];
//! the analysis (`fsm-analysis`) resolves it into a [`crate::Machine`] and reports every
//! finding. Positions in a definition are named by [`Site`], which each front end maps
//! back to its own notion of a span (a byte range in a file, a token of a derive).

use alloc::{format, string::String, vec::Vec};
use core::ops::Range;
use core::time::Duration;

/// A machine as written: states, actions, guards and roles, referring to each other by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineDef {
    /// The machine's name, for example `vm`.
    pub name: String,
    /// What the machine models, in a sentence.
    pub description: Option<String>,
    /// The name of the initial state.
    pub initial: Option<String>,
    /// When true, every state may be left by one actor only (Mizar's rule).
    pub single_mutator: bool,
    /// Names of warning lints the author accepts for this machine.
    pub allow: Vec<String>,
    /// Declared roles: actors an action may be restricted to, or that own a state.
    pub roles: Vec<NamedDef>,
    /// Declared guards: named conditions the user's code decides.
    pub guards: Vec<NamedDef>,
    /// The states, in the order written.
    pub states: Vec<StateDef>,
    /// The actions, in the order written.
    pub actions: Vec<ActionDef>,
}

/// A role or a guard: a name and what it means.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedDef {
    /// The name actions refer to.
    pub name: String,
    /// What it means; a guard needs one, since user code has to implement it.
    pub description: Option<String>,
    /// A guard's condition as a CEL expression over the object, which a runtime
    /// can evaluate without user code (roles have none).
    pub cel: Option<String>,
}

/// Whether a state is at rest or means that an action is running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StateKind {
    /// A state that does not change unless requested (OVC's "static" state).
    #[default]
    Static,
    /// A state that means an action is being executed (OVC's "transition" state).
    Transition,
}

/// A state as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDef {
    /// The state's name, spelled as the seed spells it.
    pub name: String,
    /// Static or transition.
    pub kind: StateKind,
    /// Nothing leaves a terminal state.
    pub terminal: bool,
    /// Whether the design writes the state to the persistent store (Mizar
    /// persists only `Init` and `Provisioned`); transient states are only
    /// communicated. Diagrams and exports carry it; the runtime's store keeps
    /// every state, since the store is where actors see each other's moves.
    pub persisted: bool,
    /// The role that alone may move an object out of this state.
    pub owner: Option<String>,
    /// Who may remove an object in this state, deleting its record and history
    /// from the store: `None`, no one (the default); `Some` of the roles that
    /// may, an empty list for anyone (as an action's roles). The owner rule
    /// holds too: in an owned state, only the owner removes.
    pub remove: Option<Vec<String>>,
    /// For a transition state: how long an action may hold an object in it before a
    /// healer may roll it back, however alive its holder.
    pub deadline: Option<Duration>,
    /// Names the state had in earlier versions of the spec: stored objects in those
    /// states read as in this one.
    pub renamed_from: Vec<String>,
    /// What the state means.
    pub description: Option<String>,
}

impl StateDef {
    /// A persisted, non-terminal state of the given kind with no owner or description.
    pub fn new(name: impl Into<String>, kind: StateKind) -> Self {
        StateDef {
            name: name.into(),
            kind,
            terminal: false,
            persisted: true,
            owner: None,
            remove: None,
            deadline: None,
            renamed_from: Vec::new(),
            description: None,
        }
    }
}

/// Where an action leads, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TargetDef {
    /// No target given: the action changes no state, unless it names a transition
    /// state, in which case the target is missing.
    #[default]
    Unset,
    /// One target state for every origin.
    State(String),
    /// Back to the state the action started from (OVC `ADDING_DISK`).
    Origin,
    /// A target for each origin (OVC disk `DELETING`: `CREATED` to `DELETED`,
    /// `ASSIGNED` to `TOBEDELETED`), as `(origin, target)` pairs.
    PerOrigin(Vec<(String, String)>),
}

/// An action as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionDef {
    /// The action's name, for example `stop`.
    pub name: String,
    /// The states the action may start from.
    pub from: Vec<String>,
    /// The transition state the object is in while the action runs, if any.
    pub via: Option<String>,
    /// Where the action leads.
    pub to: TargetDef,
    /// The roles allowed to perform the action; empty means anyone.
    pub roles: Vec<String>,
    /// Guards that must all pass before the action may start.
    pub guards: Vec<String>,
    /// A hidden action runs without showing a status of its own (OVC `migrate`).
    pub hidden: bool,
    /// How long the action may hold an object before a healer may roll it back,
    /// however alive its holder (for a visible action, the default is its transition
    /// state's deadline).
    pub deadline: Option<Duration>,
    /// Names the action had in earlier versions of the spec.
    pub renamed_from: Vec<String>,
    /// What the action does.
    pub description: Option<String>,
}

/// A place in a [`MachineDef`] that a diagnostic can point at.
///
/// Indices refer to the vectors of the definition the diagnostic was found in.
/// New findings may point at new places, so a `match` on it needs a wildcard
/// arm.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Site {
    /// The machine as a whole (its header).
    Machine,
    /// The machine's name.
    MachineName,
    /// The `initial` setting.
    Initial,
    /// An entry of `allow`.
    Allow(usize),
    /// A declared role.
    Role(usize),
    /// A declared guard.
    Guard(usize),
    /// A state's name.
    State(usize),
    /// A state's owner.
    StateOwner(usize),
    /// A state's `remove` setting.
    StateRemove(usize),
    /// Role number `.1` of state `.0`'s `remove`.
    StateRemoveRole(usize, usize),
    /// A state's `terminal` flag.
    StateTerminal(usize),
    /// A state's deadline.
    StateDeadline(usize),
    /// Earlier name number `.1` of state `.0`.
    StateRename(usize, usize),
    /// An action's name.
    Action(usize),
    /// Origin number `.1` of action `.0`.
    ActionFrom(usize, usize),
    /// The transition state of an action.
    ActionVia(usize),
    /// The target of an action.
    ActionTo(usize),
    /// The origin of entry `.1` of a per-origin target.
    ActionToOrigin(usize, usize),
    /// The target of entry `.1` of a per-origin target.
    ActionToTarget(usize, usize),
    /// Role number `.1` of action `.0`.
    ActionRole(usize, usize),
    /// Guard number `.1` of action `.0`.
    ActionGuard(usize, usize),
    /// An action's deadline.
    ActionDeadline(usize),
    /// Earlier name number `.1` of action `.0`.
    ActionRename(usize, usize),
    /// A byte range of the source text, for findings made before a definition exists
    /// (syntax errors, wrong value types).
    Text(Range<usize>),
}

impl Site {
    /// The enclosing site, used when a front end has no position for this one.
    pub fn parent(&self) -> Option<Site> {
        Some(match *self {
            Site::Machine | Site::Text(_) => return None,
            Site::MachineName
            | Site::Initial
            | Site::Allow(_)
            | Site::Role(_)
            | Site::Guard(_)
            | Site::State(_) => Site::Machine,
            Site::Action(_) => Site::Machine,
            Site::StateRemoveRole(s, _) => Site::StateRemove(s),
            Site::StateOwner(s)
            | Site::StateRemove(s)
            | Site::StateTerminal(s)
            | Site::StateDeadline(s)
            | Site::StateRename(s, _) => Site::State(s),
            Site::ActionFrom(a, _)
            | Site::ActionVia(a)
            | Site::ActionTo(a)
            | Site::ActionRole(a, _)
            | Site::ActionGuard(a, _)
            | Site::ActionDeadline(a)
            | Site::ActionRename(a, _) => Site::Action(a),
            Site::ActionToOrigin(a, _) | Site::ActionToTarget(a, _) => Site::ActionTo(a),
        })
    }
}

/// A duration as specs write it: numbers with units, `500ms`, `30s`, `10m`, `2h`,
/// `1d`, or several together (`1h30m`).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(fsm_model::parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
/// assert!(fsm_model::parse_duration("ten minutes").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let expected = || {
        format!(
            "`{text}` is not a duration; expected a number and a unit (ms, s, m, h, d), such as `30s` or `1h30m`"
        )
    };
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(expected());
    }
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let number: u64 = rest[..digits].parse().map_err(|_| expected())?;
        rest = &rest[digits..];
        let unit_len = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number * 60),
            "h" => Duration::from_secs(number * 3600),
            "d" => Duration::from_secs(number * 86_400),
            _ => return Err(expected()),
        };
        total += unit;
        rest = rest[unit_len..].trim_start();
    }
    Ok(total)
}

/// A duration as [`parse_duration`] reads it, in its largest exact unit.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}
