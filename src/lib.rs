//! Declarative state-transition tables for infrastructure objects.
//!
//! Write an object's lifecycle once, as a table (in a TOML spec file or in attributes
//! on an enum), and get a checked model, a generated API, diagrams and property-test
//! strategies from it. Everything in [`fsm_core`] is re-exported here.
//!
//! # `#[derive(StateMachine)]`
//!
//! The table inline, on the enum and its variants:
//!
//! ```
//! use fsm::prelude::*;
//!
//! /// A virtual machine.
//! #[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
//! #[fsm(initial = Halted, markers)]
//! #[fsm(roles(admin = "A cloud administrator"))]
//! #[fsm(guards(drained = "No workload is left on the VM"))]
//! #[fsm(action(start, from = Halted, via = Starting, to = Running))]
//! #[fsm(action(stop, from = Running, via = Stopping, to = Halted, guards = drained))]
//! #[fsm(action(resize, from = [Running, Halted], via = Resizing, to_origin))]
//! #[fsm(action(destroy, from = Halted, to = Destroyed, roles = admin))]
//! pub enum Vm {
//!     /// Powered off.
//!     Halted,
//!     #[fsm(transition)]
//!     Starting,
//!     Running,
//!     #[fsm(transition)]
//!     Stopping,
//!     #[fsm(transition)]
//!     Resizing,
//!     #[fsm(terminal)]
//!     Destroyed,
//! }
//!
//! # fn main() {
//! assert!(Vm::validate_transition(Vm::Halted, Vm::Starting).is_ok());
//! let refused = Vm::validate_transition(Vm::Starting, Vm::Halted).unwrap_err();
//! assert_eq!(
//!     refused.to_string(),
//!     "Starting is a transition state: start is running and can only end in Running, not Halted"
//! );
//!
//! // Usable in const context.
//! const CAN_PAUSE: bool = Vm::can_transition(Vm::Running, Vm::Stopping);
//! assert!(CAN_PAUSE);
//!
//! // `resize` returns where it started.
//! let plan = VmAction::Resize.plan(Vm::Running).unwrap();
//! assert_eq!((plan.via, plan.target), (Some(Vm::Resizing), Vm::Running));
//!
//! // A move the table allows, checked by the type system.
//! let (from, to) = fsm::typed::checked_move::<vm::Running, vm::Stopping>();
//! assert_eq!((from, to), (Vm::Running, Vm::Stopping));
//!
//! // With the feature `render`, the machine as text.
//! assert!(Vm::mermaid().contains("Halted --> Starting: start"));
//! # }
//! ```
//!
//! Or, with the `toml` feature, from a spec file, whose path is relative to the
//! crate's `Cargo.toml` (or to the directory in the `FSM_SPEC_DIR` environment
//! variable, when set); the
//! variants must match the spec's states one to one (`ADDING_DISK` matches
//! `AddingDisk`, ignoring case, `_` and `-`), and editing the file rebuilds the crate:
//!
//! ```ignore
//! #[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
//! #[fsm(spec = "specs/ovc/vm.toml")]
//! pub enum VmState { Virtual, Deploying, Running, /* ... every state of the spec */ }
//! ```
//!
//! Either way the table goes through the same analysis as `fsm check`, and every
//! error is a compile error at the token at fault (for a spec file, the message gives
//! its file, line and column), all of them in one build. They are the build's
//! only errors: a derive that fails still writes the enum's API, over a stand-in
//! table, so that the code using it adds no error of its own at each use.
//!
//! ## Attributes
//!
//! On the enum, `#[fsm(...)]` takes:
//!
//! | attribute | meaning |
//! |---|---|
//! | `spec = "path.toml"` | read the table from a spec file (then, beside it, only the settings below from `actions` on; on variants only `name`) |
//! | `name = "vm"`, `description = "..."` | the machine's name (default: the enum's, in snake_case) and description (default: its doc comment) |
//! | `initial = Variant` | the initial state |
//! | `single_mutator` | one actor alone may leave each state |
//! | `allow = ["lint", ...]` | warnings accepted (warnings never fail the build) |
//! | `roles(name = "who", "with-dash" = "who")` | declared roles |
//! | `guards(name = "what must hold")` | declared guards |
//! | `action(name, from = A \| [A, B], via = T, to = B, to_origin, to(A = X, B = Y), roles = r, guards = [g], hidden, description = "...")` | an action |
//! | `actions = Name` | the generated action enum's name (default: `{Enum}Action`) |
//! | `markers`, `markers = name` | generate the marker module for typed moves, named `name` (default: the enum's name in snake_case); off by default, as it costs a type per state and an impl per move |
//! | `diagram = folded \| full \| none` | the view drawn on the enum's documentation page with the feature `diagram` (default: `folded`) |
//! | `serde = false` | no `Serialize`/`Deserialize` from the derive, whether or not the feature `serde` is on: the enum keeps impls of its own |
//! | `crate = "path"` | where the `fsm` crate is, if renamed |
//!
//! On a variant: `transition`, `terminal`, `persisted = false`, `owner = role`,
//! `name = "RUNNING"` (the state's name when it differs from the variant's),
//! `description = "..."` (default: the doc comment).
//!
//! ## What is generated
//!
//! Data, and a few `const fn`s: the derive writes the machine's tables and the
//! checked machine; the methods come from the traits [`StateMachine`] and
//! [`ActionEnum`] (bring them in with `use fsm::prelude::*;`), so a crate compiles
//! only the methods it calls.
//!
//! On the enum (`Vm` above), usable in `const` context: `ALL`, `id`, `name`,
//! `can_transition` (one load and a shift from a bit table) and
//! `validate_transition`. From [`StateMachine`]: `machine()` (the checked
//! [`Machine`], decoded on first use), `initial`, `is_static`, `is_transition`,
//! `is_terminal`, `from_id`, `from_name` (ignoring case), `parse` (exact, as
//! `FromStr`), `move_between` (the [`Move`] that allows
//! `from → to`), `successors`, `actions_from`; with the feature `render`,
//! `mermaid()`, `dot()`, `plantuml()` and `diagram(format, view)`.
//!
//! An action enum (`VmAction`) with `ALL` and `id`; from [`ActionEnum`]: `name`, `parse`,
//! `origins`, `via`, `target_from`, `changes_state`, `is_hidden`, `roles`, `guards`
//! and `plan`.
//!
//! [`IntoStateId`] and [`IntoActionId`], which give `StateId: From<Vm>` and
//! `ActionId: From<VmAction>`, so the runtime takes derived states and actions
//! (`runtime.start(id, &actor, VmAction::Resize)`).
//!
//! With the feature `diagram`, the enum's page (the documentation of its
//! generated `impl` block) shows the machine drawn as an SVG in the chosen view,
//! and the table of actions: origins, transition state, target, roles, guards.
//!
//! With `markers`, a module of marker types (`vm::Running`, ...) implementing
//! [`typed::MoveTo`] for exactly the allowed moves, so [`typed::checked_move`]
//! compiles only for those.
//!
//! Names on the wire, both enums: `Display` writes the spec's name and `FromStr`
//! reads it back (`"RUNNING".parse::<VmState>()`, `VmState::AddingDisk.to_string()
//! == "ADDING_DISK"`), exactly, or a name from before a rename (`renamed_from`); an
//! unknown name is a [`typed::UnknownName`] listing the valid ones. With the
//! feature `serde`, `Serialize` and `Deserialize` use the same names and refuse
//! unknown ones, with nothing to add to the enum. An enum that keeps its own
//! serde impls (a `#[derive(Serialize)]` with other names, numbers in a
//! compact format) says `#[fsm(serde = false)]`: Cargo turns a feature on for
//! the whole build when any crate in it asks, so without that, another crate's
//! `fsm/serde` (or `fsm/full`) would make the derive's impls conflict with its
//! own. Other derives, strum's for example, work on the same enum.
//!
//! ## Without the standard library
//!
//! Without features (or with only `serde` and `diagram`) this crate is `no_std`
//! and needs `alloc` only: a `#![no_std]` crate derives machines as above, and
//! gets the `const` table, `Display` and `FromStr`, the refusals, the checked
//! machine (decoded on first use, without a lock) and, with `serde`, the enums'
//! `Serialize` and `Deserialize` by name (serde without its `std`). Every other
//! feature turns `std` on. `tests/no-std` in the repository is such a crate,
//! built alone in CI.
//!
//! ## Features
//!
//! | feature | what it adds |
//! |---|---|
//! | (none) | the derive with its table in attributes, the checked model, the typed API, names on the wire: what a crate that derives needs, and nothing more (see the compile-time figures in BENCHMARKS.md); `no_std` (it needs `alloc`) |
//! | `std` | the standard library; every feature below but `serde` and `diagram` turns it on |
//! | `render` | diagrams as text: `fsm::render`, and `mermaid()`, `dot()`, `plantuml()`, `diagram()` on derived enums |
//! | `paths` | `fsm::paths`: the shortest path to every state and paths covering every rule |
//! | `evolve` | `fsm::evolve`: what a change of spec means for objects already stored |
//! | `analysis` | `fsm::analysis`: the checks, to build a machine from a definition at run time |
//! | `toml` | TOML spec files: `#[fsm(spec = "...")]` and `fsm::spec` to load one at run time (with `analysis`) |
//! | `runtime` | `fsm::runtime`: one action at a time per object, queues, healing (the `fsm-runtime` crate) |
//! | `testing` | `testing`: your system against its table, on proptest-state-machine (`Reference`, `Expected::check`) and along the test paths (`Harness`) |
//! | `proptest` | `strategy`: proptest strategies over any derived machine |
//! | `serde` | `Serialize`/`Deserialize` on derived enums, by the spec's names |
//! | `interchange` | `interchange`: XState v5 and SCXML export and import, PlantUML and Mermaid import (the `fsm-interchange` crate) |
//! | `full` | every feature above but `diagram` |
//! | `diagram` | each derived enum's documentation page draws its machine (an SVG laid out at compile time: no tool, nothing fetched, shown offline and on docs.rs) and prints its table of actions |

// docs.rs (`--cfg docsrs`, a nightly) marks each item a feature gates with it.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without `std` (no feature but `diagram`), what a derive needs builds without
// the standard library.
#![cfg_attr(not(feature = "std"), no_std)]

// The derive names this crate `::fsm`; so does the example below.
extern crate self as fsm;

/// The trait the derive implements on the generated action enum.
pub use fsm_core::typed::ActionEnum;

/// What `#[derive(StateMachine)]` generates, shown on the example at the top of
/// these docs: its page draws the machine and lists its actions (built with the
/// feature `diagram`, as docs.rs builds this crate). Documentation only.
#[cfg(doc)]
pub mod example {
    use crate::prelude::*;

    /// A virtual machine, the example at the top of the crate's documentation.
    #[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[fsm(initial = Halted, markers)]
    #[fsm(roles(admin = "A cloud administrator"))]
    #[fsm(guards(drained = "No workload is left on the VM"))]
    #[fsm(action(start, from = Halted, via = Starting, to = Running))]
    #[fsm(action(stop, from = Running, via = Stopping, to = Halted, guards = drained))]
    #[fsm(action(resize, from = [Running, Halted], via = Resizing, to_origin))]
    #[fsm(action(destroy, from = Halted, to = Destroyed, roles = admin))]
    pub enum Vm {
        /// Powered off.
        Halted,
        /// Booting.
        #[fsm(transition)]
        Starting,
        /// Up.
        Running,
        /// Shutting down.
        #[fsm(transition)]
        Stopping,
        /// Changing size, back where it started once done.
        #[fsm(transition)]
        Resizing,
        /// Gone.
        #[fsm(terminal)]
        Destroyed,
    }
}

/// The traits a derived machine's methods come from: `use fsm::prelude::*;`.
pub mod prelude {
    pub use fsm_core::typed::{ActionEnum, StateMachine};
    pub use fsm_derive::StateMachine;
}
/// The trait the derive implements, under the derive's name (as serde does): one
/// `use fsm::StateMachine;` brings both.
pub use fsm_core::typed::StateMachine;
pub use fsm_core::*;
pub use fsm_derive::StateMachine;

// Named here, not only through the glob above, so that its feature shows in the
// docs as the other modules' do.
/// Drawing a machine (feature `render`): Mermaid, Graphviz DOT and PlantUML, in a
/// full or a folded view, and the table as the seeds print it (the `fsm-render`
/// crate).
#[cfg(feature = "render")]
#[doc(inline)]
pub use fsm_core::render;

/// The runtime (feature `runtime`; also usable on its own as the `fsm-runtime`
/// crate): one action at a time per object, by compare-and-set, with roles,
/// owners, guards, queues, healing and history.
#[cfg(feature = "runtime")]
pub use fsm_runtime as runtime;

#[cfg(feature = "proptest")]
pub mod strategy;

/// Machines to and from other tools (feature `interchange`; also usable on its own
/// as the `fsm-interchange` crate): XState v5 and SCXML export and import,
/// PlantUML and Mermaid import.
#[cfg(feature = "interchange")]
pub use fsm_interchange as interchange;

/// The README's Rust examples, compiled and run as doctests (they use the spec
/// files and the runtime: `cargo test --all-features`, as `scripts/test` runs).
#[cfg(all(doctest, feature = "toml", feature = "runtime"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
