//! Machines as Rust types: the traits `#[derive(StateMachine)]` implements, the
//! errors they return, and marker types that check moves at compile time.
//!
//! The derive writes data, not logic: a [`Table`] of constants computed from the
//! checked machine (names, flags, a bit per allowed move, successors, the rules of
//! each action) and the machine itself. The methods are provided here, once, by
//! [`StateMachine`] and [`ActionEnum`], and read that table; a crate that derives
//! a machine compiles only the methods it calls. A handful of `const fn`s are also
//! generated on the enum itself (`id`, `name`, `can_transition`,
//! `validate_transition`), so the table can be asked in `const` context. Anything
//! that needs names or messages goes through [`StateMachine::machine`], the same
//! checked [`Machine`] `fsm check` builds from a spec file, so a derived enum and
//! `fsm validate` always agree.

use core::fmt;
use core::hash::Hash;

use alloc::borrow::ToOwned;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::{ActionId, IntoActionId, IntoStateId, Machine, Move, StateId};

/// The tables of a derived machine, written by `#[derive(StateMachine)]` from the
/// checked machine's rules. Not for writing by hand: the derive checked the machine
/// these tables were computed from.
#[doc(hidden)]
#[derive(Debug)]
pub struct Table<S: 'static, A: 'static> {
    /// Every state, by id.
    pub states: &'static [S],
    /// Each state's name, by id.
    pub state_names: &'static [&'static str],
    /// Each state's flags, by id: bit 0 transition state, bit 1 terminal, bit
    /// 2 removable (the spec's `remove`, by someone).
    pub state_flags: &'static [u8],
    /// The initial state.
    pub initial: S,
    /// `words` words per state, bit `to` of row `from` set when `from → to` is a move.
    pub moves: &'static [u64],
    /// Words per row of `moves`.
    pub words: usize,
    /// Every action, by id.
    pub actions: &'static [A],
    /// Each action's name, by id.
    pub action_names: &'static [&'static str],
    /// Each action's flags, by id: bit 0 changes the state, bit 1 hidden.
    pub action_flags: &'static [u8],
    /// Each action's roles, by id.
    pub roles: &'static [&'static [&'static str]],
    /// Each action's guards, by id.
    pub guards: &'static [&'static [&'static str]],
    /// The checked machine, encoded.
    pub machine: &'static str,
    /// Where it is kept once decoded: a function that lends the derive's
    /// `static`, since a constant may hold no reference to a `static` that has
    /// interior mutability before Rust 1.90 (its value would then be rejected as
    /// undefined behaviour, on every crate that derives a machine).
    pub cell: fn() -> &'static crate::__private::MachineCell,
}

impl<S: Copy, A> Table<S, A> {
    /// Whether state `from` → state `to` (by id) is a move of the table.
    pub const fn allows(&self, from: usize, to: usize) -> bool {
        self.moves[from * self.words + to / 64] >> (to % 64) & 1 != 0
    }

    /// Why nothing leads from state `from` (by id) to a state its row lacks.
    pub const fn refusal(&self, from: usize) -> Refusal {
        let flags = self.state_flags[from];
        if flags & 1 != 0 {
            Refusal::Busy
        } else if flags & 2 != 0 {
            Refusal::Terminal
        } else {
            Refusal::NoRule
        }
    }

    /// `from → to` (with their ids) allowed, or refused with the reason.
    pub const fn validate(
        &self,
        (from, from_id): (S, usize),
        (to, to_id): (S, usize),
    ) -> Result<(), InvalidTransition<S>> {
        if self.allows(from_id, to_id) {
            Ok(())
        } else {
            Err(InvalidTransition {
                from,
                to,
                refusal: self.refusal(from_id),
            })
        }
    }
}

/// A state enum with a checked transition table, implemented by
/// `#[derive(StateMachine)]`. Its methods are provided: they read the table the
/// derive wrote.
pub trait StateMachine: IntoStateId + Eq + Hash + fmt::Debug + Send + Sync + 'static {
    /// The generated enum of the machine's actions.
    type Action: ActionEnum<State = Self>;

    /// The tables the derive computed.
    #[doc(hidden)]
    const TABLE: &'static Table<Self, Self::Action>;

    /// Every state, in the order of the table (`ALL[i]` is the state with id `i`).
    const ALL: &'static [Self] = Self::TABLE.states;
    /// Every action, in the order of the table.
    const ACTIONS: &'static [Self::Action] = Self::TABLE.actions;

    /// The state's id in [`StateMachine::machine`].
    fn id(self) -> StateId {
        self.state_id()
    }

    /// The checked machine the enum was derived from.
    fn machine() -> &'static Machine {
        (Self::TABLE.cell)().get(Self::TABLE.machine)
    }

    /// The state where new objects start.
    fn initial() -> Self {
        Self::TABLE.initial
    }

    /// The state's name, as the spec spells it.
    fn name(self) -> &'static str {
        Self::TABLE.state_names[self.id().0]
    }

    /// True for a transition state: an action is running.
    fn is_transition(self) -> bool {
        Self::TABLE.state_flags[self.id().0] & 1 != 0
    }

    /// True for a static state: no action is running.
    fn is_static(self) -> bool {
        !self.is_transition()
    }

    /// True for a terminal state: nothing leaves it.
    fn is_terminal(self) -> bool {
        Self::TABLE.state_flags[self.id().0] & 2 != 0
    }

    /// True when the spec lets someone remove an object in this state (its
    /// `remove`; who may is [`State::may_remove`](crate::State::may_remove)
    /// on [`machine()`](Self::machine)'s state).
    fn is_removable(self) -> bool {
        Self::TABLE.state_flags[self.id().0] & 4 != 0
    }

    /// The state with this id.
    fn from_id(id: StateId) -> Option<Self> {
        Self::ALL.get(id.0).copied()
    }

    /// The state whose name matches, ignoring ASCII case.
    fn from_name(name: &str) -> Option<Self> {
        crate::__private::position(Self::TABLE.state_names, name).map(|i| Self::ALL[i])
    }

    /// The state named exactly `name` in the spec, or in an earlier version of it
    /// (`renamed_from`): how a name read from the wire or a store is taken back.
    /// The derive's `FromStr` (and, with the `serde` feature, `Deserialize`).
    fn parse(name: &str) -> Result<Self, UnknownName> {
        let table = Self::TABLE;
        parse_name(
            table.cell,
            table.machine,
            NameKind::State,
            table.state_names,
            name,
        )
        .map(|i| Self::ALL[i])
    }

    /// True when `from → to` is one move of the table.
    fn can_transition(from: Self, to: Self) -> bool {
        Self::TABLE.allows(from.id().0, to.id().0)
    }

    /// `Ok(())` when `from → to` is one move of the table (an action starts,
    /// finishes, or runs whole); otherwise the error says from, to and why.
    fn validate_transition(from: Self, to: Self) -> Result<(), InvalidTransition<Self>> {
        Self::TABLE.validate((from, from.id().0), (to, to.id().0))
    }

    /// The move `from → to`: which part of which action it is, if one rule of the
    /// table makes it (see [`Machine::move_between`]).
    fn move_between(from: Self, to: Self) -> Option<Move<Self::Action>> {
        let found = Self::machine().move_between(from.id(), to.id())?;
        let action = Self::ACTIONS[found.action().0];
        Some(match found {
            Move::Start(_) => Move::Start(action),
            Move::Finish(_) => Move::Finish(action),
            Move::Whole(_) => Move::Whole(action),
        })
    }

    /// The states one move of the table leads to, each once, in state order (see
    /// [`Machine::successors`]).
    fn successors(self) -> Vec<Self> {
        let ids = Self::machine().successors(self.id());
        ids.into_iter().map(|s| Self::ALL[s.0]).collect()
    }

    /// The actions that may start in this state, in the order of the table.
    fn actions_from(self) -> Vec<Self::Action> {
        let ids = Self::machine().actions_from(self.id());
        ids.map(|a| Self::ACTIONS[a.0]).collect()
    }

    /// The action's id in [`StateMachine::machine`].
    fn action_id(action: Self::Action) -> ActionId {
        action.id()
    }

    #[cfg(feature = "render")]
    /// The machine as a Mermaid `stateDiagram-v2`.
    fn mermaid() -> String {
        crate::render::diagram(Self::machine(), crate::render::Format::Mermaid)
    }

    #[cfg(feature = "render")]
    /// The machine as Graphviz DOT.
    fn dot() -> String {
        crate::render::diagram(Self::machine(), crate::render::Format::Dot)
    }

    #[cfg(feature = "render")]
    /// The machine as a PlantUML state diagram.
    fn plantuml() -> String {
        crate::render::diagram(Self::machine(), crate::render::Format::PlantUml)
    }

    #[cfg(feature = "render")]
    /// The machine in `format` and `view` ([`View::Folded`](crate::render::View)
    /// labels each move with its transition state instead of drawing it).
    fn diagram(format: crate::render::Format, view: crate::render::View) -> String {
        crate::render::render(Self::machine(), format, view)
    }
}

/// The action enum `#[derive(StateMachine)]` generates beside a state enum
/// (`VmStateAction` for `VmState`). Its methods are provided: they read the state
/// enum's table.
pub trait ActionEnum: IntoActionId + Eq + Hash + fmt::Debug + Send + Sync + 'static {
    /// The state enum the actions belong to.
    type State: StateMachine<Action = Self>;

    /// Every action, in the order of the table.
    const ALL: &'static [Self] = <Self::State as StateMachine>::TABLE.actions;

    /// The action's id in the machine.
    fn id(self) -> ActionId {
        self.action_id()
    }

    /// The action's name, as the spec spells it.
    fn name(self) -> &'static str {
        Self::table().action_names[self.id().0]
    }

    /// The action named exactly `name` in the spec, or in an earlier version of it
    /// (`renamed_from`). The derive's `FromStr` (and, with the `serde` feature,
    /// `Deserialize`).
    fn parse(name: &str) -> Result<Self, UnknownName> {
        let table = Self::table();
        parse_name(
            table.cell,
            table.machine,
            NameKind::Action,
            table.action_names,
            name,
        )
        .map(|i| Self::ALL[i])
    }

    /// The static states the action may start from, in the order written.
    fn origins(self) -> Vec<Self::State> {
        let action = Self::State::machine().action(self.id());
        action
            .origins
            .iter()
            .map(|o| Self::State::ALL[o.0])
            .collect()
    }

    /// The transition state the object shows while the action runs.
    fn via(self) -> Option<Self::State> {
        let action = Self::State::machine().action(self.id());
        action.via.map(|v| Self::State::ALL[v.0])
    }

    /// The state the action ends in when started from `from`: its rule from there.
    fn target_from(self, from: Self::State) -> Option<Self::State> {
        let rule = Self::State::machine().rule(self.id(), from.id())?;
        Some(Self::State::ALL[rule.target.0])
    }

    /// True when the action moves the object (it is not only allowed in some
    /// states, like a hidden `migrate`).
    fn changes_state(self) -> bool {
        Self::table().action_flags[self.id().0] & 1 != 0
    }

    /// True for a hidden action, which keeps the object's status.
    fn is_hidden(self) -> bool {
        Self::table().action_flags[self.id().0] & 2 != 0
    }

    /// The roles allowed to perform it; empty means anyone.
    fn roles(self) -> &'static [&'static str] {
        Self::table().roles[self.id().0]
    }

    /// The guards that must pass before it starts.
    fn guards(self) -> &'static [&'static str] {
        Self::table().guards[self.id().0]
    }

    /// What running the action from `from` does: its transition state and the
    /// state it ends in (back-to-origin and per-origin targets resolved).
    fn plan(self, from: Self::State) -> Result<Plan<Self::State>, PlanError<Self::State>> {
        match self.target_from(from) {
            Some(target) => Ok(Plan {
                origin: from,
                via: self.via(),
                target,
            }),
            None => Err(PlanError {
                action: self,
                state: from,
            }),
        }
    }

    #[doc(hidden)]
    fn table() -> &'static Table<Self::State, Self> {
        <Self::State as StateMachine>::TABLE
    }
}

/// The index of the state or action named `name` (as [`StateMachine::parse`]
/// reads it), or the error listing the valid names. Not generic, so that a crate
/// deriving a machine compiles none of it: the derive's `FromStr` calls it
/// directly, with the table's fields.
#[doc(hidden)]
pub fn parse_name(
    cell: fn() -> &'static crate::__private::MachineCell,
    encoded: &'static str,
    kind: NameKind,
    expected: &'static [&'static str],
    name: &str,
) -> Result<usize, UnknownName> {
    let machine = cell().get(encoded);
    let found = match kind {
        NameKind::State => machine.state_named(name).map(|id| id.0),
        NameKind::Action => machine.action_named(name).map(|id| id.0),
    };
    found.ok_or_else(|| UnknownName {
        kind,
        machine: machine.name(),
        name: name.to_owned(),
        expected,
        suggestion: match kind {
            NameKind::State => machine.suggest_state(name),
            NameKind::Action => machine.suggest_action(name),
        },
    })
}

/// What an [`UnknownName`] was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameKind {
    /// A state.
    State,
    /// An action.
    Action,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::State => "state",
            NameKind::Action => "action",
        })
    }
}

/// A name that is no state (or action) of a derived machine: the error of its
/// `FromStr` and, with the `serde` feature, of its `Deserialize`. Names are the
/// spec's, exactly (or a `renamed_from` one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// State or action.
    pub kind: NameKind,
    /// The machine.
    pub machine: &'static str,
    /// The name given.
    pub name: String,
    /// The valid names, in the order of the table.
    pub expected: &'static [&'static str],
    /// The closest valid name, if one is close.
    pub suggestion: Option<&'static str>,
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not {} of {}",
            self.name,
            match self.kind {
                NameKind::State => "a state",
                NameKind::Action => "an action",
            },
            self.machine
        )?;
        if let Some(s) = self.suggestion {
            write!(f, " (did you mean `{s}`?)")?;
        }
        write!(f, "; expected one of: {}", self.expected.join(", "))
    }
}

impl core::error::Error for UnknownName {}

/// Why a derived machine refused a move, in brief; [`InvalidTransition`]'s
/// `Display` gives the full reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The origin is a transition state whose action ends elsewhere.
    Busy,
    /// The origin is terminal.
    Terminal,
    /// No action of the table makes the move.
    NoRule,
}

/// A move a derived machine refused. Small and `Copy`, so `validate_transition` can
/// be a `const fn`: the message is built only when displayed, from the machine's
/// [`TransitionError`](crate::TransitionError), so it reads exactly as
/// `fsm validate` says it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct InvalidTransition<S> {
    /// The state the object is in.
    pub from: S,
    /// The state requested.
    pub to: S,
    /// Why, in brief.
    pub refusal: Refusal,
}

impl<S: StateMachine> fmt::Display for InvalidTransition<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match S::machine().validate_transition(self.from.id(), self.to.id()) {
            Err(e) => e.fmt(f),
            // Unreachable for errors the derive made; say something true anyway.
            Ok(_) => write!(f, "{} -> {} was refused", self.from.name(), self.to.name()),
        }
    }
}

impl<S: StateMachine> fmt::Debug for InvalidTransition<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InvalidTransition")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("refusal", &self.refusal)
            .field("message", &self.to_string())
            .finish()
    }
}

impl<S: StateMachine> core::error::Error for InvalidTransition<S> {}

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
        match S::machine().start(S::action_id(self.action), self.state.id()) {
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

impl<S: StateMachine> core::error::Error for PlanError<S> {}

/// A zero-sized type standing for one state, generated per state by the derive.
pub trait StateMarker {
    /// The machine the state belongs to.
    type Machine: StateMachine;
    /// The state it stands for.
    const STATE: Self::Machine;
}

/// Implemented by a state marker for exactly the states one move of the table leads
/// to, so a forbidden move does not compile.
#[diagnostic::on_unimplemented(
    message = "the table has no move from `{Self}` to `{To}`",
    label = "not one move of the table",
    note = "the moves a state allows are listed by `fsm actions SPEC STATE`"
)]
pub trait MoveTo<To: StateMarker>: StateMarker {}

/// A move checked at compile time: compiles only when `From → To` is one move of the
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

/// Serde by the spec's names, for the impls `#[derive(StateMachine)]` asks for
/// through [`__serde_names!`](crate::__serde_names).
#[cfg(feature = "serde")]
#[doc(hidden)]
pub mod names_serde {
    use core::marker::PhantomData;

    pub use serde;

    /// Reads a name as `T` by `parse`, refusing unknown names with the message.
    pub struct Visitor<T>(
        pub fn(&str) -> Result<T, super::UnknownName>,
        pub PhantomData<T>,
    );

    impl<T> serde::de::Visitor<'_> for Visitor<T> {
        type Value = T;

        fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("a name of the machine's spec")
        }

        fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<T, E> {
            (self.0)(name).map_err(E::custom)
        }
    }
}

/// `Serialize` and `Deserialize` by the spec's names for a derived state enum and
/// its action enum, when fsm-core's `serde` feature is on; nothing otherwise.
/// Called by `#[derive(StateMachine)]`, not by hand.
#[cfg(feature = "serde")]
#[doc(hidden)]
#[macro_export]
macro_rules! __serde_names {
    ($state:ty, $action:ty) => {
        $crate::__serde_names!(@one $state, $crate::typed::StateMachine::name, $crate::typed::StateMachine::parse);
        $crate::__serde_names!(@one $action, $crate::typed::ActionEnum::name, $crate::typed::ActionEnum::parse);
    };
    (@one $ty:ty, $name:path, $parse:path) => {
        impl $crate::typed::names_serde::serde::Serialize for $ty {
            fn serialize<S: $crate::typed::names_serde::serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                serializer.serialize_str($name(*self))
            }
        }
        impl<'de> $crate::typed::names_serde::serde::Deserialize<'de> for $ty {
            fn deserialize<D: $crate::typed::names_serde::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<Self, D::Error> {
                deserializer.deserialize_str($crate::typed::names_serde::Visitor(
                    $parse,
                    ::core::marker::PhantomData,
                ))
            }
        }
    };
}

/// Without the `serde` feature, the derive's call expands to nothing.
#[cfg(not(feature = "serde"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __serde_names {
    ($state:ty, $action:ty) => {};
}
