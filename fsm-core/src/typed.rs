//! Machines as Rust types: the trait `#[derive(StateMachine)]` implements, the errors
//! its generated methods return, and marker types that check moves at compile time.
//!
//! The generated methods are plain `match`es over the enum; anything that needs
//! names or messages goes through [`StateMachine::machine`], the same checked
//! [`Machine`] `fsm check` builds from a spec file, so a derived enum and
//! `fsm validate` always agree.

use std::fmt;
use std::hash::Hash;

use crate::spec::{ActionId, Machine, StateId, Step};

/// A state enum with a checked transition table, implemented by
/// `#[derive(StateMachine)]`.
pub trait StateMachine: Copy + Eq + Hash + fmt::Debug + Send + Sync + 'static {
    /// The generated enum of the machine's actions.
    type Action: Copy + Eq + Hash + fmt::Debug + Send + Sync + 'static;

    /// Every state, in the order of the table (`ALL[i]` is the state with id `i`).
    const ALL: &'static [Self];
    /// Every action, in the order of the table.
    const ACTIONS: &'static [Self::Action];

    /// The checked machine the enum was derived from.
    fn machine() -> &'static Machine;
    /// The state's id in [`StateMachine::machine`].
    fn id(self) -> StateId;
    /// The action's id in [`StateMachine::machine`].
    fn action_id(action: Self::Action) -> ActionId;
    /// The state where new objects start.
    fn initial() -> Self;
    /// The state's name, as the spec spells it.
    fn name(self) -> &'static str;
    /// True for a transition state: an action is running.
    fn is_transition(self) -> bool;
    /// True for a terminal state.
    fn is_terminal(self) -> bool;
    /// Is `from → to` one step of the table? The step, or why not.
    fn step(from: Self, to: Self) -> Result<Step<Self::Action>, TransitionError<Self>>;
    /// The states one step leads to.
    fn successors(self) -> &'static [Self];
    /// The actions that may start in this state.
    fn actions_from(self) -> &'static [Self::Action];

    /// The state with this id.
    fn from_id(id: StateId) -> Option<Self> {
        Self::ALL.get(id.0).copied()
    }

    /// The state whose name matches, ignoring ASCII case.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }

    /// True when `from → to` is one step of the table.
    fn can_transition(from: Self, to: Self) -> bool {
        Self::step(from, to).is_ok()
    }
}

/// Why a derived machine refused a move, in brief; [`TransitionError`]'s `Display`
/// gives the full reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The origin is a transition state whose action ends elsewhere.
    Busy,
    /// The origin is terminal.
    Terminal,
    /// No action of the table makes the move.
    NoRule,
}

/// A move a derived machine refused. Small and `Copy`: the message is built only
/// when displayed, from the machine, so it reads exactly as `fsm validate` says it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransitionError<S> {
    /// The state the object is in.
    pub from: S,
    /// The state requested.
    pub to: S,
    /// Why, in brief.
    pub refusal: Refusal,
}

impl<S: StateMachine> fmt::Display for TransitionError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match S::machine().validate_transition(self.from.id(), self.to.id()) {
            Err(e) => e.fmt(f),
            // Unreachable for errors the derive made; say something true anyway.
            Ok(_) => write!(f, "{} -> {} was refused", self.from.name(), self.to.name()),
        }
    }
}

impl<S: StateMachine> fmt::Debug for TransitionError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransitionError")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("refusal", &self.refusal)
            .field("message", &self.to_string())
            .finish()
    }
}

impl<S: StateMachine> std::error::Error for TransitionError<S> {}

/// What one run of an action of a derived machine does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Plan<S> {
    /// The static state it starts from.
    pub origin: S,
    /// The transition state the object shows while it runs.
    pub via: Option<S>,
    /// The state it ends in.
    pub target: S,
}

/// An action a derived machine cannot start from a state.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlanError<S: StateMachine> {
    /// The action asked for.
    pub action: S::Action,
    /// The state the object is in.
    pub state: S,
}

impl<S: StateMachine> PlanError<S> {
    /// True when the state is a transition state ("cannot execute action at this
    /// time"), false when the action simply does not start there.
    pub fn is_busy(&self) -> bool {
        self.state.is_transition()
    }
}

impl<S: StateMachine> fmt::Display for PlanError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match S::machine().plan(S::action_id(self.action), self.state.id()) {
            Err(e) => e.fmt(f),
            Ok(_) => write!(
                f,
                "{:?} cannot start from {}",
                self.action,
                self.state.name()
            ),
        }
    }
}

impl<S: StateMachine> fmt::Debug for PlanError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanError")
            .field("action", &self.action)
            .field("state", &self.state)
            .field("message", &self.to_string())
            .finish()
    }
}

impl<S: StateMachine> std::error::Error for PlanError<S> {}

/// A zero-sized type standing for one state, generated per state by the derive.
pub trait StateMarker {
    /// The machine the state belongs to.
    type Machine: StateMachine;
    /// The state it stands for.
    const STATE: Self::Machine;
}

/// Implemented by a state marker for exactly the states one step of the table leads
/// to, so a forbidden move does not compile.
#[diagnostic::on_unimplemented(
    message = "the table has no move from `{Self}` to `{To}`",
    label = "not one step of the table",
    note = "the moves a state allows are listed by `fsm actions SPEC STATE`"
)]
pub trait MoveTo<To: StateMarker>: StateMarker {}

/// A move checked at compile time: compiles only when `From → To` is one step of the
/// table, and returns the pair of states.
///
/// ```ignore
/// let (from, to) = fsm::typed::checked_move::<vm_state::Running, vm_state::Pausing>();
/// ```
pub const fn checked_move<From, To>() -> (From::Machine, From::Machine)
where
    From: MoveTo<To>,
    To: StateMarker<Machine = From::Machine>,
{
    (From::STATE, To::STATE)
}
