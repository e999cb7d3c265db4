//! What a machine allows, stated once.
//!
//! A [`Rule`] is one row of the table resolved for one origin: the action, the
//! static state it starts from, the transition state the object shows while it
//! runs, and the state it ends in (back-to-origin and per-origin targets resolved).
//! [`Machine::rule`] is the one place a rule is decided; everything that asks what
//! the table allows reads rules: the moves between states ([`Move`],
//! [`Machine::validate_transition`]), diagrams, test paths, the derive's generated
//! tables and refusals, the runtime's admission and completion, the queue's step
//! check.

use alloc::{borrow::ToOwned, format, string::String, string::ToString, vec, vec::Vec};
use core::fmt;

use crate::{ActionId, Machine, StateId};

/// One row of the table for one origin: `action`, started from `origin`, shows
/// `via` while it runs and ends in `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The action.
    pub action: ActionId,
    /// The static state it starts from.
    pub origin: StateId,
    /// The transition state the object shows while it runs, if any.
    pub via: Option<StateId>,
    /// The state it ends in.
    pub target: StateId,
    /// Whether taking the rule moves the object. False for an action that keeps
    /// the status (no transition state, back to its origin): it is allowed in its
    /// origins but makes no move.
    pub changes_state: bool,
}

impl Rule {
    /// The moves taking the rule allows, as `(from, to, move)`: with a transition
    /// state, into it, from it to the target, and the whole action from the origin
    /// to the target (an observer may see only the two ends); without one, the whole
    /// action. None when it changes no state.
    pub fn moves(&self) -> impl Iterator<Item = (StateId, StateId, Move)> + use<> {
        let (o, t, a) = (self.origin, self.target, self.action);
        let moves = match (self.changes_state, self.via) {
            (false, _) => [None, None, None],
            (true, Some(v)) => [
                Some((o, v, Move::Start(a))),
                Some((v, t, Move::Finish(a))),
                Some((o, t, Move::Whole(a))),
            ],
            (true, None) => [Some((o, t, Move::Whole(a))), None, None],
        };
        moves.into_iter().flatten()
    }
}

/// Which part of an action a move `from → to` is, as returned by
/// [`Machine::validate_transition`].
///
/// `A` is the action type: [`ActionId`] for a machine loaded at run time, the
/// generated action enum for a derived one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Move<A = ActionId> {
    /// From a static origin into the action's transition state: the action starts.
    Start(A),
    /// From the transition state to the action's target: the action finishes.
    Finish(A),
    /// A whole action, from a static origin to its static target.
    Whole(A),
}

impl<A: Copy> Move<A> {
    /// The action the move belongs to.
    pub const fn action(self) -> A {
        match self {
            Move::Start(a) | Move::Finish(a) | Move::Whole(a) => a,
        }
    }
}

/// Why [`Machine::validate_transition`] refused a move `from → to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitionError {
    /// The object is in a transition state and the move is not the end of the
    /// action running there.
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
    Terminal {
        /// The terminal state.
        from: String,
        /// The requested state.
        to: String,
    },
    /// No rule of the table moves `from` to `to`.
    NoRule {
        /// The origin.
        from: String,
        /// The requested state.
        to: String,
        /// The moves the table allows from `from`, as `action -> state`.
        allowed: Vec<String>,
    },
}

/// Why an action cannot start from a state, as returned by [`Machine::start`]. The
/// runtime and the queue report this same error, with the object it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleError {
    /// The state is a transition state: another action is running.
    Busy {
        /// The action asked for.
        action: String,
        /// The transition state.
        state: String,
        /// The actions that run in it.
        running: Vec<String>,
    },
    /// The table has no rule for the action from this state.
    NotFrom {
        /// The action asked for.
        action: String,
        /// The state.
        state: String,
        /// The states it starts from.
        origins: Vec<String>,
    },
}

impl fmt::Display for TransitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransitionError::Busy {
                from,
                to,
                running,
                ends,
            } => write!(
                f,
                "{from} is a transition state: {} is running and can only end in {}, not {to}",
                or_list(running),
                or_list(ends)
            ),
            TransitionError::Terminal { from, .. } => {
                write!(f, "{from} is terminal: no action leaves it")
            }
            TransitionError::NoRule { from, to, allowed } => write!(
                f,
                "no action moves {from} to {to}; from {from} the table allows: {}",
                list(allowed)
            ),
        }
    }
}

impl core::error::Error for TransitionError {}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleError::Busy {
                action,
                state,
                running,
            } => write!(
                f,
                "`{action}` cannot start in {state}: it is a transition state while {} runs",
                or_list(running)
            ),
            RuleError::NotFrom {
                action,
                state,
                origins,
            } => write!(
                f,
                "`{action}` cannot start in {state}: it starts only from {}",
                list(origins)
            ),
        }
    }
}

impl core::error::Error for RuleError {}

fn or_list(items: &[String]) -> String {
    match items {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "nothing".to_owned()
    } else {
        items.join(", ")
    }
}

impl Machine {
    /// The rule of `action` from `origin`, if the action starts there.
    #[inline]
    pub fn rule(&self, action: ActionId, origin: StateId) -> Option<Rule> {
        let a = self.action(action);
        a.target_from(origin).map(|target| Rule {
            action,
            origin,
            via: a.via,
            target,
            changes_state: a.changes_state(),
        })
    }

    /// Every rule of the table: action by action, each origin in the order written.
    pub fn rules(&self) -> impl Iterator<Item = Rule> + '_ {
        self.action_ids().flat_map(move |a| self.rules_of(a))
    }

    /// The rules of `action`, one per origin, in the order written.
    pub fn rules_of(&self, action: ActionId) -> impl Iterator<Item = Rule> + '_ {
        self.action(action)
            .origins
            .iter()
            .filter_map(move |&o| self.rule(action, o))
    }

    /// The rules that start in `state`, in table order. A transition state and a
    /// terminal state start none.
    pub fn rules_from(&self, state: StateId) -> impl Iterator<Item = Rule> + '_ {
        self.action_ids().filter_map(move |a| self.rule(a, state))
    }

    /// The rules whose transition state is `state`, in table order.
    pub fn rules_via(&self, state: StateId) -> impl Iterator<Item = Rule> + '_ {
        self.rules().filter(move |r| r.via == Some(state))
    }

    /// The actions that may start in `state`, in table order.
    pub fn actions_from(&self, state: StateId) -> impl Iterator<Item = ActionId> + '_ {
        self.rules_from(state).map(|r| r.action)
    }

    /// The actions whose transition state is `state`, in table order.
    pub fn actions_via(&self, state: StateId) -> impl Iterator<Item = ActionId> + '_ {
        self.action_ids()
            .filter(move |&a| self.action(a).via == Some(state))
    }

    /// The rule of `action` from `from`, or why the action cannot start there.
    pub fn start(&self, action: ActionId, from: StateId) -> Result<Rule, RuleError> {
        self.rule(action, from)
            .ok_or_else(|| self.refusal(action, from))
    }

    /// Why `action` cannot start from `from`, for a pair that has no
    /// [`rule`](Self::rule): what [`start`](Self::start) answers then.
    pub fn refusal(&self, action: ActionId, from: StateId) -> RuleError {
        let (a, state) = (self.action(action), self.state(from));
        if state.is_transition() {
            return RuleError::Busy {
                action: a.name.to_string(),
                state: state.name.to_string(),
                running: self.names_running(from),
            };
        }
        RuleError::NotFrom {
            action: a.name.to_string(),
            state: state.name.to_string(),
            origins: a
                .origins
                .iter()
                .map(|&o| self.state(o).name.to_string())
                .collect(),
        }
    }

    /// The move `from → to`, if one rule of the table makes it: a static origin
    /// into an action's transition state (the action starts), that transition state
    /// into the action's target (it finishes), or a whole action from a static
    /// origin to its target (`RUNNING → PAUSED`). Rules that change no state make
    /// no move. Roles and guards are not consulted: the runtime checks them when an
    /// action starts.
    pub fn move_between(&self, from: StateId, to: StateId) -> Option<Move> {
        let mut found = None;
        self.each_move_from(from, |t, m| {
            if t == to && found.is_none() {
                found = Some(m);
            }
        });
        found
    }

    /// Calls `each(to, move)` for every move leaving `from`, in table order: from a
    /// transition state, the rules through it finish; from a static state, its
    /// rules start, or run whole.
    fn each_move_from(&self, from: StateId, mut each: impl FnMut(StateId, Move)) {
        let transition = self.state(from).is_transition();
        for a in self.action_ids() {
            if transition && self.action(a).via != Some(from) {
                continue;
            }
            for rule in self.rules_of(a) {
                if transition || rule.origin == from {
                    for (f, t, m) in rule.moves() {
                        if f == from {
                            each(t, m);
                        }
                    }
                }
            }
        }
    }

    /// Every move one rule allows from `from`, in the order of the target states,
    /// each target once with the move [`Machine::move_between`] answers for it.
    pub fn moves_from(&self, from: StateId) -> Vec<(StateId, Move)> {
        // The first move to each target, in target order.
        let mut first: Vec<Option<Move>> = vec![None; self.states().len()];
        self.each_move_from(from, |t, m| {
            first[t.0].get_or_insert(m);
        });
        (0..first.len())
            .filter_map(|t| first[t].map(|m| (StateId(t), m)))
            .collect()
    }

    /// The states one move leads to from `from`, each once, in state order.
    pub fn successors(&self, from: StateId) -> Vec<StateId> {
        self.moves_from(from)
            .into_iter()
            .map(|(to, _)| to)
            .collect()
    }

    /// Is `from → to` one move of the table ([`Machine::move_between`])? The move,
    /// or why not, with the names involved.
    pub fn validate_transition(&self, from: StateId, to: StateId) -> Result<Move, TransitionError> {
        if let Some(m) = self.move_between(from, to) {
            return Ok(m);
        }
        let from_state = self.state(from);
        let (from_name, to_name) = (from_state.name.to_string(), self.state(to).name.to_string());
        if from_state.is_transition() {
            let mut ends: Vec<String> = Vec::new();
            for r in self.rules_via(from) {
                let name = self.state(r.target).name.to_string();
                if !ends.contains(&name) {
                    ends.push(name);
                }
            }
            return Err(TransitionError::Busy {
                from: from_name,
                to: to_name,
                running: self.names_running(from),
                ends,
            });
        }
        let allowed: Vec<String> = self
            .rules_from(from)
            .flat_map(|r| r.moves())
            .filter(|&(f, _, _)| f == from)
            .map(|(_, t, m)| format!("{} -> {}", self.action(m.action()).name, self.state(t).name))
            .collect();
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

    fn names_running(&self, state: StateId) -> Vec<String> {
        self.actions_via(state)
            .map(|a| self.action(a).name.to_string())
            .collect()
    }
}
