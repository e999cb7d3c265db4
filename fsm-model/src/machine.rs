//! The checked machine: states and actions resolved to indices. What it allows is
//! stated once, in [`crate::rules`].

use alloc::{borrow::Cow, borrow::ToOwned, boxed::Box, string::String, vec::Vec};
use core::time::Duration;

use super::def::StateKind;
use crate::UnknownState;

/// A static string or an owned one: the model can be built at run time from a spec
/// file, or as a `static` by generated code.
pub type Text = Cow<'static, str>;

/// The index of a state in [`Machine::states`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StateId(pub usize);

/// The index of an action in [`Machine::actions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActionId(pub usize);

/// A typed name of a state: a derived state enum. It gives `StateId: From<Self>`,
/// so a derived state goes wherever an `impl Into<StateId>` does.
///
/// `#[derive(StateMachine)]` implements it. It exists so that the derive need not
/// write a `From` impl in the user's crate: `From` has so many impls that checking
/// one more for overlap was a measurable part of rebuilding a derived machine
/// (BENCHMARKS.md), while this trait has one impl per machine.
pub trait IntoStateId: Copy {
    /// The state's id in its machine.
    fn state_id(self) -> StateId;
}

/// A typed name of an action: a derived action enum. It gives
/// `ActionId: From<Self>`; see [`IntoStateId`] for why it exists.
pub trait IntoActionId: Copy {
    /// The action's id in its machine.
    fn action_id(self) -> ActionId;
}

impl<T: IntoStateId> From<T> for StateId {
    #[inline]
    fn from(state: T) -> Self {
        state.state_id()
    }
}

impl<T: IntoActionId> From<T> for ActionId {
    #[inline]
    fn from(action: T) -> Self {
        action.action_id()
    }
}

/// The index of a guard in [`Machine::guards`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GuardId(pub usize);

/// A state of a checked machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct State {
    /// The name, spelled as the spec spells it.
    pub name: Text,
    /// Static or transition.
    pub kind: StateKind,
    /// Nothing leaves a terminal state.
    pub terminal: bool,
    /// Whether the design writes the state to the persistent store (see
    /// [`StateDef::persisted`](crate::StateDef::persisted)): drawn and exported;
    /// the runtime's store keeps every state.
    pub persisted: bool,
    /// The role that alone may move an object out of this state.
    pub owner: Option<Text>,
    /// Who may remove an object in this state: `None`, no one; `Some` of the
    /// roles that may, empty for anyone (see
    /// [`StateDef::remove`](crate::StateDef::remove)).
    pub remove: Option<Cow<'static, [Text]>>,
    /// For a transition state: how long an action may hold an object in it before
    /// a healer may roll it back, however alive its holder.
    pub deadline: Option<Duration>,
    /// Names the state had in earlier versions of the spec.
    pub renamed_from: Cow<'static, [Text]>,
    /// What the state means.
    pub description: Option<Text>,
}

impl State {
    /// True for a transition state: an action is running.
    pub fn is_transition(&self) -> bool {
        self.kind == StateKind::Transition
    }

    /// Whether an actor holding the roles `has_role` answers yes for may
    /// remove an object in this state: the state allows removal to anyone or
    /// to one of the actor's roles, and the actor holds the owner's role, if
    /// the state has an owner.
    pub fn may_remove(&self, has_role: impl Fn(&str) -> bool) -> bool {
        let Some(roles) = &self.remove else {
            return false;
        };
        (roles.is_empty() || roles.iter().any(|r| has_role(r)))
            && self.owner.as_deref().is_none_or(&has_role)
    }
}

/// Where a checked action leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The same state from every origin.
    State(StateId),
    /// Back to the origin. With no transition state this is an action that changes
    /// no state (sabakan's key operations, OVC's hidden `migrate`).
    Origin,
    /// A target for each origin, as `(origin, target)` pairs covering every origin.
    PerOrigin(Cow<'static, [(StateId, StateId)]>),
}

/// An action of a checked machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Action {
    /// The name, spelled as the spec spells it.
    pub name: Text,
    /// The static states the action may start from.
    pub origins: Cow<'static, [StateId]>,
    /// The transition state the object is in while the action runs.
    pub via: Option<StateId>,
    /// Where the action leads.
    pub target: Target,
    /// The roles allowed to perform it; empty means anyone.
    pub roles: Cow<'static, [Text]>,
    /// Guards that must pass before it starts.
    pub guards: Cow<'static, [GuardId]>,
    /// A hidden action runs without a status of its own.
    pub hidden: bool,
    /// How long the action may hold an object before a healer may roll it back
    /// (see [`Machine::deadline`]).
    pub deadline: Option<Duration>,
    /// Names the action had in earlier versions of the spec.
    pub renamed_from: Cow<'static, [Text]>,
    /// What the action does.
    pub description: Option<Text>,
}

impl Action {
    /// The state the action ends in when started from `origin`, if it starts there:
    /// the one place a target is resolved. Callers go through
    /// [`Machine::rule`](crate::Machine::rule).
    #[inline]
    pub(crate) fn target_from(&self, origin: StateId) -> Option<StateId> {
        if !self.origins.contains(&origin) {
            return None;
        }
        match &self.target {
            Target::State(t) => Some(*t),
            Target::Origin => Some(origin),
            Target::PerOrigin(pairs) => pairs.iter().find(|(o, _)| *o == origin).map(|p| p.1),
        }
    }

    /// True when the action moves the object: it has a transition state or a target
    /// other than its origin. An action that changes no state (OpenvCloud's hidden
    /// `migrate`, sabakan's key operations) is allowed in its origins but makes no
    /// move.
    #[inline]
    pub fn changes_state(&self) -> bool {
        self.via.is_some() || !matches!(self.target, Target::Origin)
    }
}

/// A guard: a named condition implemented by the user's code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Guard {
    /// The name actions refer to.
    pub name: Text,
    /// What the condition means.
    pub description: Text,
    /// The condition as a CEL expression over the object (`object.data`,
    /// `object.state`, ...), for runtimes that evaluate guards without user code.
    pub cel: Option<Text>,
}

/// A role: an actor that may be allowed to perform actions or own states.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Role {
    /// The role's name.
    pub name: Text,
    /// Who holds it.
    pub description: Option<Text>,
}

/// A checked state machine. The only public way to get one is through the analysis
/// (`fsm-analysis`, or a front end built on it; the derive embeds one it checked), so
/// every reference in it resolves and the analysis found no error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub(crate) name: Text,
    pub(crate) description: Option<Text>,
    pub(crate) initial: StateId,
    pub(crate) single_mutator: bool,
    pub(crate) states: Cow<'static, [State]>,
    pub(crate) actions: Cow<'static, [Action]>,
    pub(crate) guards: Cow<'static, [Guard]>,
    pub(crate) roles: Cow<'static, [Role]>,
}

impl Machine {
    /// The machine's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the machine models.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The initial state.
    pub fn initial(&self) -> StateId {
        self.initial
    }

    /// Whether only one actor may move an object out of any given state.
    pub fn single_mutator(&self) -> bool {
        self.single_mutator
    }

    /// All states, in the order the spec declares them.
    pub fn states(&self) -> &[State] {
        &self.states
    }

    /// All actions, in the order the spec declares them.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// All declared guards.
    #[inline]
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    /// All declared roles.
    pub fn roles(&self) -> &[Role] {
        &self.roles
    }

    /// The state with this id.
    ///
    /// # Panics
    /// If `id` did not come from this machine.
    #[inline]
    pub fn state(&self, id: StateId) -> &State {
        &self.states[id.0]
    }

    /// The action with this id.
    ///
    /// # Panics
    /// If `id` did not come from this machine.
    #[inline]
    pub fn action(&self, id: ActionId) -> &Action {
        &self.actions[id.0]
    }

    /// The guard with this id.
    ///
    /// # Panics
    /// If `id` did not come from this machine.
    pub fn guard(&self, id: GuardId) -> &Guard {
        &self.guards[id.0]
    }

    /// The names of the guards `action` waits on, in the order written.
    pub fn guard_names(&self, action: ActionId) -> Vec<&str> {
        self.action(action)
            .guards
            .iter()
            .map(|&g| &*self.guard(g).name)
            .collect()
    }

    /// Ids of all states.
    pub fn state_ids(&self) -> impl Iterator<Item = StateId> + '_ {
        (0..self.states.len()).map(StateId)
    }

    /// Ids of all actions.
    pub fn action_ids(&self) -> impl Iterator<Item = ActionId> + '_ {
        (0..self.actions.len()).map(ActionId)
    }

    /// The state with exactly this name.
    pub fn state_id(&self, name: &str) -> Option<StateId> {
        self.states.iter().position(|s| s.name == name).map(StateId)
    }

    /// The state whose name matches ignoring ASCII case (the analysis guarantees at
    /// most one does).
    pub fn find_state(&self, name: &str) -> Option<StateId> {
        self.states
            .iter()
            .position(|s| s.name.eq_ignore_ascii_case(name))
            .map(StateId)
    }

    /// The action whose name matches ignoring ASCII case.
    pub fn find_action(&self, name: &str) -> Option<ActionId> {
        self.actions
            .iter()
            .position(|a| a.name.eq_ignore_ascii_case(name))
            .map(ActionId)
    }

    /// The state called `name` now, or in an earlier version of the spec (its
    /// `renamed_from`): how a stored name is read.
    pub fn state_named(&self, name: &str) -> Option<StateId> {
        self.state_id(name).or_else(|| {
            self.states
                .iter()
                .position(|s| s.renamed_from.iter().any(|r| r == name))
                .map(StateId)
        })
    }

    /// The action called `name` now, or in an earlier version of the spec.
    pub fn action_named(&self, name: &str) -> Option<ActionId> {
        self.actions
            .iter()
            .position(|a| a.name == name || a.renamed_from.iter().any(|r| r == name))
            .map(ActionId)
    }

    /// How long `action` may hold an object in `state` (its transition state, or
    /// its origin) before a healer may roll it back however alive its holder: the
    /// action's own deadline, else the state's.
    pub fn deadline(&self, action: ActionId, state: StateId) -> Option<Duration> {
        self.action(action).deadline.or(self.state(state).deadline)
    }

    /// The state name closest to `name`, for a "did you mean" hint.
    pub fn suggest_state(&self, name: &str) -> Option<&str> {
        crate::suggest::closest(name, self.states.iter().map(|s| &*s.name))
    }

    /// The state called `name` as the spec spells it, ignoring ASCII case (as
    /// [`ActionRef`](crate::ActionRef) finds an action by its name), or why there
    /// is none, with the closest name.
    pub fn resolve_state(&self, name: &str) -> Result<StateId, UnknownState> {
        self.find_state(name).ok_or_else(|| UnknownState {
            machine: self.name().to_owned(),
            name: name.to_owned(),
            suggestion: self.suggest_state(name).map(str::to_owned),
        })
    }

    /// The action name closest to `name`, for a "did you mean" hint.
    pub fn suggest_action(&self, name: &str) -> Option<&str> {
        crate::suggest::closest(name, self.actions.iter().map(|a| &*a.name))
    }

    /// The role name closest to `name`, for a "did you mean" hint.
    pub fn suggest_role(&self, name: &str) -> Option<&str> {
        crate::suggest::closest(name, self.roles.iter().map(|r| &*r.name))
    }

    /// The guard name closest to `name`, for a "did you mean" hint.
    pub fn suggest_guard(&self, name: &str) -> Option<&str> {
        crate::suggest::closest(name, self.guards.iter().map(|g| &*g.name))
    }
}

/// Constructors for the analysis, which builds the machine it checked, and the
/// encoding `#[derive(StateMachine)]` embeds a machine it checked in. Not part of the
/// public API: a machine built by hand this way skips the analysis.
#[doc(hidden)]
pub mod __private {
    use super::*;

    /// A state from its definition, which the analysis checked.
    pub fn owned_state(def: &crate::StateDef) -> State {
        State {
            name: Cow::Owned(def.name.clone()),
            kind: def.kind,
            terminal: def.terminal,
            persisted: def.persisted,
            owner: def.owner.clone().map(Cow::Owned),
            remove: def
                .remove
                .as_ref()
                .map(|roles| roles.iter().cloned().map(Cow::Owned).collect()),
            deadline: def.deadline,
            renamed_from: def.renamed_from.iter().cloned().map(Cow::Owned).collect(),
            description: def.description.clone().map(Cow::Owned),
        }
    }

    /// An action from its definition and its resolved parts.
    pub fn owned_action(
        def: &crate::ActionDef,
        origins: Vec<StateId>,
        via: Option<StateId>,
        target: Target,
        guards: Vec<GuardId>,
    ) -> Action {
        Action {
            name: Cow::Owned(def.name.clone()),
            origins: Cow::Owned(origins),
            via,
            target,
            roles: def.roles.iter().cloned().map(Cow::Owned).collect(),
            guards: Cow::Owned(guards),
            hidden: def.hidden,
            deadline: def.deadline,
            renamed_from: def.renamed_from.iter().cloned().map(Cow::Owned).collect(),
            description: def.description.clone().map(Cow::Owned),
        }
    }

    /// A guard from owned parts.
    pub fn owned_guard(name: String, description: String, cel: Option<String>) -> Guard {
        Guard {
            name: Cow::Owned(name),
            description: Cow::Owned(description),
            cel: cel.map(Cow::Owned),
        }
    }

    /// A role from owned parts.
    pub fn owned_role(name: String, description: Option<String>) -> Role {
        Role {
            name: Cow::Owned(name),
            description: description.map(Cow::Owned),
        }
    }

    /// A machine from owned parts.
    #[allow(clippy::too_many_arguments)]
    pub fn owned_machine(
        name: String,
        description: Option<String>,
        initial: StateId,
        single_mutator: bool,
        states: Vec<State>,
        actions: Vec<Action>,
        guards: Vec<Guard>,
        roles: Vec<Role>,
    ) -> Machine {
        Machine {
            name: Cow::Owned(name),
            description: description.map(Cow::Owned),
            initial,
            single_mutator,
            states: Cow::Owned(states),
            actions: Cow::Owned(actions),
            guards: Cow::Owned(guards),
            roles: Cow::Owned(roles),
        }
    }

    pub use crate::encode::{decode, encode};

    /// Where a derived enum keeps its machine, decoded on first use: a type of its
    /// own, so that the generated code instantiates nothing generic. A cell without
    /// a lock (`no_std`): callers that race to decode the machine each decode it,
    /// the first to store its own wins and the others drop theirs. It is never
    /// dropped (a `ManuallyDrop`: a `static` is not dropped anyway), so that the
    /// user's crate compiles no drop glue for it.
    #[derive(Debug)]
    pub struct MachineCell(core::mem::ManuallyDrop<once_cell::race::OnceBox<Machine>>);

    impl MachineCell {
        /// An empty cell, for a `static`.
        pub const fn new() -> Self {
            MachineCell(core::mem::ManuallyDrop::new(once_cell::race::OnceBox::new()))
        }

        /// The machine `encoded` holds, decoded the first time.
        pub fn get(&'static self, encoded: &'static str) -> &'static Machine {
            self.0.get_or_init(|| Box::new(decode(encoded)))
        }
    }

    impl Default for MachineCell {
        fn default() -> Self {
            Self::new()
        }
    }

    /// The index of the name that matches `name` ignoring ASCII case.
    pub fn position(names: &[&str], name: &str) -> Option<usize> {
        names.iter().position(|n| n.eq_ignore_ascii_case(name))
    }
}
