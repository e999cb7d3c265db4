//! `fsm-core`: declarative state-transition tables for infrastructure objects.
//!
//! - [`spec`]: the model of a machine — static and transition states, actions with
//!   origins, a transition state and a target, guards, roles and owners — and the
//!   TOML spec-file format.
//! - [`analysis`]: every check a machine must pass, with findings that point at the
//!   place at fault.
//! - [`paths`]: test paths, the shortest to every state and a set covering every
//!   action.
//! - [`render`]: Mermaid, Graphviz DOT and PlantUML diagrams, and the seed-style table.
//! - [`runtime`]: a state store with compare-and-set, one action at a time per
//!   object, roles, owners and guards enforced, history and watchers.
//! - `testing` (feature `testing`): a model-based test harness for your own system.
//! - [`typed`]: the [`typed::StateMachine`] trait `#[derive(StateMachine)]` implements,
//!   and marker types that check moves at compile time.
//!
//! ```
//! use fsm_core::{Machine, TransitionError};
//!
//! let vm = Machine::from_spec_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/ovc/vm.toml"))?;
//! let state = |name| vm.find_state(name).unwrap();
//! assert!(vm.validate_transition(state("RUNNING"), state("PAUSING")).is_ok());
//! let refused = vm.validate_transition(state("DEPLOYING"), state("HALTED")).unwrap_err();
//! assert!(matches!(refused, TransitionError::Busy { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod analysis;
pub mod paths;
pub mod render;
pub mod runtime;
pub mod spec;
#[cfg(feature = "testing")]
pub mod testing;
pub mod typed;

#[doc(hidden)]
pub use spec::__private;

pub use analysis::{Diagnostic, Lint, Severity};
pub use spec::{
    Action, ActionId, Machine, MachineDef, Plan, PlanError, SpecError, SpecFile, State, StateId,
    StateKind, Step, Target, TransitionError,
};

/// The candidate closest to `name` (ignoring case), if it is close enough to be a
/// plausible typo.
pub(crate) fn suggest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let wanted = name.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&wanted, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
