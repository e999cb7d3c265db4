//! `fsm-core`: the table core of fsm. A spec file or a derive's attributes become a
//! checked [`Machine`]; from it come diagrams, test paths and the typed API derived
//! enums implement.
//!
//! - `spec` (feature `toml`, on by default): spec files, from text to a checked
//!   machine (`spec::load`). With the feature `cel`, a guard's CEL expression is
//!   parsed as the spec is read, and one that does not parse, or names a
//!   variable a guard does not see, is a finding at its place (the CEL parser is a dependency of its own: off by default).
//! - `analysis` (feature `analysis`, part of `toml`): every check a machine must
//!   pass, findings rendered like rustc's.
//! - [`rules`]: what a machine allows, stated once ([`Rule`], [`Move`]).
//! - `render` (feature `render`): Mermaid, Graphviz DOT and PlantUML diagrams, and
//!   the seed-style table.
//! - `evolve` (feature `evolve`): what a change of spec means for stored objects.
//! - `paths` (feature `paths`): test paths, the shortest to every state and a set
//!   covering every rule.
//! - [`typed`]: the [`typed::StateMachine`] trait `#[derive(StateMachine)]`
//!   implements, and marker types that check moves at compile time.
//! - `testing` (feature `testing`): a model-based test harness for your own system.
//!
//! `toml`, `render`, `paths` and `evolve` are on by default here; the `fsm`
//! facade turns on only what its own features ask for, so that a crate that only
//! derives a machine compiles the typed API and the model, nothing else (see the
//! compile-time figures in BENCHMARKS.md).
//!
//! The layers below (`fsm-model`, `fsm-toml`, `fsm-analysis`) are re-exported here;
//! the runtime is `fsm-runtime`, a layer above.
//!
//! ```
//! use fsm_core::TransitionError;
//!
//! let vm = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?;
//! let state = |name| vm.find_state(name).unwrap();
//! assert!(vm.validate_transition(state("RUNNING"), state("PAUSING")).is_ok());
//! let refused = vm.validate_transition(state("DEPLOYING"), state("HALTED")).unwrap_err();
//! assert!(matches!(refused, TransitionError::Busy { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// docs.rs (`--cfg docsrs`, a nightly) marks each item a feature gates with it.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without a feature, the typed API a derive implements: `alloc` only, so that
// a derived machine builds for a target without the standard library. Every
// feature brings `std`.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

#[cfg(feature = "analysis")]
pub mod analysis;
#[cfg(feature = "evolve")]
pub mod evolve;
#[cfg(feature = "paths")]
pub mod paths;
#[cfg(feature = "toml")]
pub mod spec;
#[cfg(feature = "testing")]
pub mod testing;
pub mod typed;

pub use fsm_model::rules;
pub use fsm_model::{
    Action, ActionId, ActionRef, Diagnostic, Guard, GuardId, Help, IntoActionId, IntoStateId, Lint,
    Machine, Move, Role, Rule, RuleError, Severity, State, StateId, StateKind, Target, Text,
    TransitionError, UnknownAction, UnknownState,
};

#[doc(hidden)]
pub use fsm_model::__private;
/// Drawing a machine: Mermaid, Graphviz DOT and PlantUML, in a full or a folded
/// view, and the table as the seeds print it (the `fsm-render` crate).
#[cfg(feature = "render")]
pub use fsm_render as render;

/// This crate's README (its page on crates.io): its examples run as doctests.
#[cfg(all(doctest, feature = "toml", feature = "render", feature = "paths"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
