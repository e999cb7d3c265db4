//! proptest strategies over any derived machine (feature `proptest`).
//!
//! ```
//! use fsm::StateMachine;
//! use fsm::strategy;
//! use proptest::prelude::*;
//!
//! #[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
//! #[fsm(initial = Off)]
//! #[fsm(action(switch_on, from = Off, to = On), action(switch_off, from = On, to = Off))]
//! enum Light { Off, On }
//!
//! proptest!(|(walk in strategy::walk::<Light>(8))| {
//!     for pair in walk.windows(2) {
//!         prop_assert!(Light::can_transition(pair[0], pair[1]));
//!     }
//! });
//! ```

use proptest::prelude::*;
use proptest::sample::{Index, select};

use crate::typed::StateMachine;

/// Any state of the machine.
pub fn any_state<S: StateMachine>() -> impl Strategy<Value = S> {
    select(S::ALL)
}

fn moves<S: StateMachine>(allowed: bool) -> Vec<(S, S)> {
    S::ALL
        .iter()
        .flat_map(|&from| S::ALL.iter().map(move |&to| (from, to)))
        .filter(|&(from, to)| S::can_transition(from, to) == allowed)
        .collect()
}

/// A move the table allows, as `(from, to)`.
///
/// # Panics
/// When the machine allows no move at all.
pub fn allowed_move<S: StateMachine>() -> impl Strategy<Value = (S, S)> {
    select(moves::<S>(true))
}

/// A move the table forbids, as `(from, to)`.
///
/// # Panics
/// When the machine forbids no move (every pair of states is one step apart).
pub fn forbidden_move<S: StateMachine>() -> impl Strategy<Value = (S, S)> {
    select(moves::<S>(false))
}

/// A random walk from the initial state: up to `steps` moves, each one step of the
/// table, ending early only in a state with no way out. Shrinks towards shorter walks
/// and earlier choices.
pub fn walk<S: StateMachine>(steps: usize) -> impl Strategy<Value = Vec<S>> {
    prop::collection::vec(any::<Index>(), 0..=steps).prop_map(|choices| {
        let mut at = S::initial();
        let mut path = vec![at];
        for choice in choices {
            let next = at.successors();
            if next.is_empty() {
                break;
            }
            at = next[choice.index(next.len())];
            path.push(at);
        }
        path
    })
}
