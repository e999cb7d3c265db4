//! The checked machine: states and actions resolved to indices, ready to answer
//! "may this object move from here to there?".

use std::borrow::Cow;

use super::def::StateKind;

/// A static string or an owned one: the model can be built at run time from a spec
/// file, or as a `static` by generated code.
pub type Text = Cow<'static, str>;

/// The index of a state in [`Machine::states`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct StateId(pub usize);

/// The index of an action in [`Machine::actions`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ActionId(pub usize);

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
    /// Whether the state is written to the persistent store.
    pub persisted: bool,
    /// The role that alone may move an object out of this state.
    pub owner: Option<Text>,
    /// What the state means.
    pub description: Option<Text>,
}

impl State {
    /// True for a transition state: an action is running.
    pub fn is_transition(&self) -> bool {
        self.kind == StateKind::Transition
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
    /// What the action does.
    pub description: Option<Text>,
}

impl Action {
    /// The state the action ends in when started from `origin`, or `None` if it
    /// cannot start there.
    pub fn target_from(&self, origin: StateId) -> Option<StateId> {
        if !self.origins.contains(&origin) {
            return None;
        }
        match &self.target {
            Target::State(t) => Some(*t),
            Target::Origin => Some(origin),
            Target::PerOrigin(pairs) => pairs.iter().find(|(o, _)| *o == origin).map(|p| p.1),
        }
    }

    /// Every state the action can end in, each once, in origin order.
    pub fn targets(&self) -> Vec<StateId> {
        let mut out = Vec::new();
        for &o in self.origins.iter() {
            if let Some(t) = self.target_from(o) {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        out
    }

    /// True when the action moves the object: it has a transition state or a target
    /// other than its origin.
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

/// A checked state machine. The only way to get one is through
/// [`crate::analysis::check`] (or a front end built on it), so every reference in it
/// resolves and the analysis found no error.
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

/// The step of the table that makes a move legal, as returned by
/// [`Machine::validate_transition`].
///
/// `A` is the action type: [`ActionId`] for a machine loaded at run time, the
/// generated action enum for a derived one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step<A = ActionId> {
    /// From a static origin into the action's transition state: the action starts.
    Start(A),
    /// From the transition state to the action's target: the action finishes.
    Finish(A),
    /// A whole action, from a static origin to its static target.
    Whole(A),
}

impl<A: Copy> Step<A> {
    /// The action the step belongs to.
    pub const fn action(self) -> A {
        match self {
            Step::Start(a) | Step::Finish(a) | Step::Whole(a) => a,
        }
    }
}

/// Why [`Machine::validate_transition`] refused a move.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The object is in a transition state and the move is not the end of the
    /// action running there.
    #[error(
        "{from} is a transition state: {actions} is running and can only end in {ends}, not {to}",
        actions = or_list(running), ends = or_list(ends)
    )]
    Busy {
        /// The transition state.
        from: String,
        /// The requested state.
        to: String,
        /// The actions that run in `from`.
        running: Vec<String>,
        /// The states those actions end in.
        ends: Vec<String>,
    },
    /// The origin is terminal.
    #[error("{from} is terminal: no action leaves it")]
    Terminal {
        /// The terminal state.
        from: String,
        /// The requested state.
        to: String,
    },
    /// No action of the table moves `from` to `to`.
    #[error("no action moves {from} to {to}; from {from} the table allows: {allowed}", allowed = allowed_list(allowed))]
    NoRule {
        /// The origin.
        from: String,
        /// The requested state.
        to: String,
        /// The moves the table allows from `from`, as `action -> state`.
        allowed: Vec<String>,
    },
}

fn or_list(items: &[String]) -> String {
    match items {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

fn allowed_list(items: &[String]) -> String {
    if items.is_empty() {
        "nothing".to_owned()
    } else {
        items.join(", ")
    }
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
    pub fn state(&self, id: StateId) -> &State {
        &self.states[id.0]
    }

    /// The action with this id.
    ///
    /// # Panics
    /// If `id` did not come from this machine.
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

    /// The state name closest to `name`, for a "did you mean" hint.
    pub fn suggest_state(&self, name: &str) -> Option<&str> {
        crate::suggest(name, self.states.iter().map(|s| &*s.name))
    }

    /// The action name closest to `name`, for a "did you mean" hint.
    pub fn suggest_action(&self, name: &str) -> Option<&str> {
        crate::suggest(name, self.actions.iter().map(|a| &*a.name))
    }

    /// The actions that may start in `state`, in declaration order. A transition
    /// state and a terminal state start none.
    pub fn actions_from(&self, state: StateId) -> impl Iterator<Item = ActionId> + '_ {
        self.action_ids()
            .filter(move |&a| self.actions[a.0].origins.contains(&state))
    }

    /// The actions whose transition state is `state`.
    pub fn actions_via(&self, state: StateId) -> impl Iterator<Item = ActionId> + '_ {
        self.action_ids()
            .filter(move |&a| self.actions[a.0].via == Some(state))
    }

    /// The states one step of the table leads to from `state` (see
    /// [`Machine::validate_transition`]), each once, in a stable order.
    pub fn successors(&self, state: StateId) -> Vec<StateId> {
        self.steps_from(state)
            .into_iter()
            .map(|(to, _)| to)
            .collect()
    }

    /// Every move one step of the table allows from `from`, with its step, in the
    /// order of the target states. The same answers as [`Machine::step`] for every
    /// target, found from the actions that touch `from` instead of trying each state.
    pub fn steps_from(&self, from: StateId) -> Vec<(StateId, Step)> {
        let mut candidates: Vec<StateId> = if self.state(from).is_transition() {
            self.actions_via(from)
                .flat_map(|a| self.action(a).targets())
                .collect()
        } else {
            self.actions_from(from)
                .flat_map(|a| {
                    let action = self.action(a);
                    action.via.into_iter().chain(action.target_from(from))
                })
                .collect()
        };
        candidates.sort_unstable();
        candidates.dedup();
        candidates
            .into_iter()
            .filter_map(|to| self.step(from, to).map(|step| (to, step)))
            .collect()
    }

    /// Is `from → to` one step of the table?
    ///
    /// A move is allowed when it is a static origin into an action's transition state
    /// (the action starts), that transition state into the action's target (it
    /// finishes), or a whole action from a static origin to its static target
    /// (`RUNNING → PAUSED`). Actions that change no state allow no move. Roles and
    /// guards are not consulted here: the runtime checks them when an action starts.
    pub fn validate_transition(&self, from: StateId, to: StateId) -> Result<Step, TransitionError> {
        if let Some(step) = self.step(from, to) {
            return Ok(step);
        }
        let from_state = self.state(from);
        if from_state.is_transition() {
            let mut running = Vec::new();
            let mut ends = Vec::new();
            for a in self.actions_via(from) {
                let action = self.action(a);
                let targets = action.targets();
                running.push(action.name.to_string());
                for t in targets {
                    let name = self.state(t).name.to_string();
                    if !ends.contains(&name) {
                        ends.push(name);
                    }
                }
            }
            return Err(TransitionError::Busy {
                from: from_state.name.to_string(),
                to: self.state(to).name.to_string(),
                running,
                ends,
            });
        }
        let mut allowed = Vec::new();
        for a in self.actions_from(from) {
            let action = self.action(a);
            if !action.changes_state() {
                continue;
            }
            if let Some(via) = action.via {
                allowed.push(format!("{} -> {}", action.name, self.state(via).name));
            }
            if let Some(target) = action.target_from(from) {
                allowed.push(format!("{} -> {}", action.name, self.state(target).name));
            }
        }
        let from_name = from_state.name.to_string();
        let to_name = self.state(to).name.to_string();
        if allowed.is_empty() && from_state.terminal {
            return Err(TransitionError::Terminal {
                from: from_name,
                to: to_name,
            });
        }
        Err(TransitionError::NoRule {
            from: from_name,
            to: to_name,
            allowed,
        })
    }

    /// The step of the table that allows `from → to`, if one does: the allowed half
    /// of [`Machine::validate_transition`], without building the error.
    pub fn step(&self, from: StateId, to: StateId) -> Option<Step> {
        if self.state(from).is_transition() {
            return self
                .actions_via(from)
                .find(|&a| self.action(a).targets().contains(&to))
                .map(Step::Finish);
        }
        self.actions_from(from).find_map(|a| {
            let action = self.action(a);
            if !action.changes_state() {
                None
            } else if action.via == Some(to) {
                Some(Step::Start(a))
            } else if action.target_from(from) == Some(to) {
                Some(Step::Whole(a))
            } else {
                None
            }
        })
    }

    /// What running `action` from `from` does: the transition state it passes through
    /// and the state it ends in (back-to-origin and per-origin targets resolved).
    pub fn plan(&self, action: ActionId, from: StateId) -> Result<Plan, PlanError> {
        let a = self.action(action);
        let state = self.state(from);
        if state.is_transition() {
            return Err(PlanError::Busy {
                action: a.name.to_string(),
                state: state.name.to_string(),
            });
        }
        match a.target_from(from) {
            Some(target) => Ok(Plan {
                action,
                origin: from,
                via: a.via,
                target,
            }),
            None => Err(PlanError::NotFrom {
                action: a.name.to_string(),
                state: state.name.to_string(),
                origins: a
                    .origins
                    .iter()
                    .map(|&o| self.state(o).name.to_string())
                    .collect(),
            }),
        }
    }
}

/// What one run of an action does, as computed by [`Machine::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The action.
    pub action: ActionId,
    /// The static state it starts from.
    pub origin: StateId,
    /// The transition state the object shows while it runs.
    pub via: Option<StateId>,
    /// The state it ends in.
    pub target: StateId,
}

/// Why an action cannot be planned from a state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The object is in a transition state: another action is running.
    #[error("cannot execute action {action} at this time: {state} is a transition state")]
    Busy {
        /// The action asked for.
        action: String,
        /// The transition state the object is in.
        state: String,
    },
    /// The action does not start from this state.
    #[error("action {action} cannot start from {state}; it starts from {}", origins.join(", "))]
    NotFrom {
        /// The action asked for.
        action: String,
        /// The state the object is in.
        state: String,
        /// The states it starts from.
        origins: Vec<String>,
    },
}

/// Constructors for code generated by `#[derive(StateMachine)]`, which embeds a
/// machine the derive already checked as a `static`. Not part of the public API:
/// a machine built by hand this way skips the analysis.
#[doc(hidden)]
pub mod __private {
    use super::*;

    /// A state from static parts.
    pub const fn state(
        name: &'static str,
        kind: StateKind,
        terminal: bool,
        persisted: bool,
        owner: Option<&'static str>,
        description: Option<&'static str>,
    ) -> State {
        State {
            name: Cow::Borrowed(name),
            kind,
            terminal,
            persisted,
            owner: match owner {
                Some(o) => Some(Cow::Borrowed(o)),
                None => None,
            },
            description: match description {
                Some(d) => Some(Cow::Borrowed(d)),
                None => None,
            },
        }
    }

    /// An action from static parts.
    #[allow(clippy::too_many_arguments)]
    pub const fn action(
        name: &'static str,
        origins: &'static [StateId],
        via: Option<StateId>,
        target: Target,
        roles: &'static [Text],
        guards: &'static [GuardId],
        hidden: bool,
        description: Option<&'static str>,
    ) -> Action {
        Action {
            name: Cow::Borrowed(name),
            origins: Cow::Borrowed(origins),
            via,
            target,
            roles: Cow::Borrowed(roles),
            guards: Cow::Borrowed(guards),
            hidden,
            description: match description {
                Some(d) => Some(Cow::Borrowed(d)),
                None => None,
            },
        }
    }

    /// A per-origin target from static pairs.
    pub const fn per_origin(pairs: &'static [(StateId, StateId)]) -> Target {
        Target::PerOrigin(Cow::Borrowed(pairs))
    }

    /// A guard from static parts.
    pub const fn guard(name: &'static str, description: &'static str) -> Guard {
        Guard {
            name: Cow::Borrowed(name),
            description: Cow::Borrowed(description),
        }
    }

    /// A role from static parts.
    pub const fn role(name: &'static str, description: Option<&'static str>) -> Role {
        Role {
            name: Cow::Borrowed(name),
            description: match description {
                Some(d) => Some(Cow::Borrowed(d)),
                None => None,
            },
        }
    }

    /// A machine from static parts.
    #[allow(clippy::too_many_arguments)]
    pub const fn machine(
        name: &'static str,
        description: Option<&'static str>,
        initial: StateId,
        single_mutator: bool,
        states: &'static [State],
        actions: &'static [Action],
        guards: &'static [Guard],
        roles: &'static [Role],
    ) -> Machine {
        Machine {
            name: Cow::Borrowed(name),
            description: match description {
                Some(d) => Some(Cow::Borrowed(d)),
                None => None,
            },
            initial,
            single_mutator,
            states: Cow::Borrowed(states),
            actions: Cow::Borrowed(actions),
            guards: Cow::Borrowed(guards),
            roles: Cow::Borrowed(roles),
        }
    }
}
