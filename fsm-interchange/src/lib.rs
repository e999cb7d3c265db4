//! Machines exchanged with other tools: exported as an XState v5 machine config
//! ([`xstate`]) or a W3C SCXML document ([`scxml`]); imported from an XState v5
//! machine config ([`from_xstate`]), an SCXML document ([`from_scxml`]), a
//! PlantUML state diagram ([`plantuml`]), also one carried in a PlantUML
//! server's image address ([`source_from_url`]), or a Mermaid state diagram
//! ([`mermaid`]), also one in a Markdown document; or from whichever of these
//! a text is ([`import`], which tells the format by what the text holds:
//! [`Format::detect`]).
//!
//! # The contract of both exports
//!
//! - An action is an event named as the action.
//! - An action with a transition state enters it; there, the event `<action>_done`
//!   leads to the action's target and `<action>_failed` back to the origin; every
//!   other event is ignored there. Back-to-origin and per-origin targets resolve
//!   per origin: the transition state is a compound state with one child per
//!   origin (`DEPLOYING.VIRTUAL` in SCXML, `#vm.DEPLOYING.VIRTUAL` in XState),
//!   entered from that origin.
//! - An action without a transition state moves straight to its target.
//! - A refused event changes nothing (the engines ignore events a state has no
//!   transition for).
//! - A state named by steps (`active.playing`, as nested states import) is, in
//!   XState, the child `playing` of a compound state `active` that has no
//!   transitions of its own.
//! - A machine with a name the format would read as something else is not
//!   exported: [`ExportError`] names it and says how the format reads it (`.` in
//!   an XState state's name is a step into a child state, so `a.b` cannot sit
//!   beside a state `a`; an SCXML state id must be an XML name, and an SCXML
//!   event `go` also takes `go.fast`).
//! - Hidden actions and actions that change no state are metadata, not moves
//!   (in SCXML, an action that changes no state is a targetless transition,
//!   which moves nothing); roles, guards (with their CEL), owners, deadlines,
//!   descriptions and earlier names are metadata too (XState `meta` and
//!   `description`; SCXML elements and attributes in the [`FSM_NAMESPACE`],
//!   which engines ignore). Terminal states are final states.
//!
//! The machine a tool runs from either export agrees with the table on every
//! event from every reachable state; the test suite checks it with the engines
//! themselves (`xstate` in node, python-statemachine's SCXML interpreter), for
//! every shipped spec and for generated specs of every shape.
//!
//! # The imports
//!
//! Each import writes a spec (TOML) with the same moves as the file, or refuses
//! what a table cannot say with an [`ImportError`] at its line and column; it
//! never drops a move silently. What the file holds that changes no move and
//! has no place in a spec (entry and exit actions, a data model) is named in a
//! comment at the top of the spec.
//!
//! - What either export writes imports back to the same machine, equal part
//!   for part: its states and moves, every piece of metadata (guards' CEL and
//!   earlier names included), and the order of its states, actions, roles and
//!   guards, which their ids follow.
//! - A file written by hand imports by its events: each event is an action,
//!   allowed from every state with a transition for it. Compound (composite)
//!   states flatten: each state without children is one of the table's (named
//!   by its path in XState, `active.playing`; by its id in SCXML and the
//!   diagrams, where ids are the document's), under its parents' transitions
//!   for the events it has none for.
//! - The test suite runs the files written by hand in the engines, against the
//!   tables imported from them.
//!
//! ```
//! let config = r#"{
//!   "id": "light", "initial": "green",
//!   "states": {
//!     "green": { "on": { "TIMER": "yellow" } },
//!     "yellow": { "on": { "TIMER": "red" } },
//!     "red": { "on": { "TIMER": "green" } }
//!   }
//! }"#;
//! let spec = fsm_interchange::from_xstate(config, "light")?;
//! assert!(spec.contains(r#"TIMER = { from = ["green", "yellow", "red"], to = { green = "yellow", yellow = "red", red = "green" } }"#));
//!
//! // Nested states: the parent's `stop` holds in each child.
//! let nested = r#"{
//!   "id": "player", "initial": "stopped",
//!   "states": {
//!     "stopped": { "on": { "play": "active" } },
//!     "active": {
//!       "initial": "playing",
//!       "on": { "stop": "stopped" },
//!       "states": {
//!         "playing": { "on": { "pause": "paused" } },
//!         "paused": { "on": { "play": "playing" } }
//!       }
//!     }
//!   }
//! }"#;
//! let spec = fsm_interchange::from_xstate(nested, "player")?;
//! assert!(spec.contains(r#"play = { from = ["stopped", "active.paused"], to = "active.playing" }"#));
//! assert!(spec.contains(r#"stop = { from = ["active.playing", "active.paused"], to = "stopped" }"#));
//!
//! let refused = fsm_interchange::from_xstate(r#"{"initial": "a", "states": {"a": {"after": {"500": "a"}}}}"#, "m");
//! assert_eq!(
//!     refused.unwrap_err().to_string(),
//!     "line 1, column 44: delayed transitions (`after`) cannot be said in a table"
//! );
//! # Ok::<(), fsm_interchange::ImportError>(())
//! ```

mod format;
mod import;
mod names;
mod plantuml;
mod scxml;
mod scxml_import;
mod spec_text;
mod xstate;
mod xstate_import;

pub use format::{Format, import};
pub use import::ImportError;
pub use names::ExportError;
pub use plantuml::{mermaid, plantuml, source_from_url};
pub use scxml::{FSM_NAMESPACE, scxml};
pub use scxml_import::from_scxml;
pub use xstate::xstate;
pub use xstate_import::from_xstate;

use fsm_model::{ActionId, Machine, StateId};

/// The event that ends `action` successfully, in its transition state.
pub fn done_event(machine: &Machine, action: ActionId) -> String {
    format!("{}_done", machine.action(action).name)
}

/// The event that ends `action` in failure, back to where it started.
pub fn failed_event(machine: &Machine, action: ActionId) -> String {
    format!("{}_failed", machine.action(action).name)
}

/// One way into a transition state: `action` from `origin`, ending in `target`.
struct Entry {
    action: ActionId,
    origin: StateId,
    target: StateId,
}

/// The ways into transition state `via`, one per rule that shows it.
fn entries(m: &Machine, via: StateId) -> Vec<Entry> {
    m.rules()
        .filter(|r| r.via == Some(via))
        .map(|r| Entry {
            action: r.action,
            origin: r.origin,
            target: r.target,
        })
        .collect()
}

/// The name of the child of transition state `via` entered from `origin` by
/// `action` (the origin's name; the action's too when several actions share the
/// transition state).
fn child(m: &Machine, via: StateId, action: ActionId, origin: StateId) -> String {
    let shared = entries(m, via).iter().any(|e| e.action != action);
    if shared {
        format!("{}_{}", m.action(action).name, m.state(origin).name)
    } else {
        m.state(origin).name.to_string()
    }
}

/// The origins of `action` in the order its spec lists them, when that is
/// not the order of the states: the exports write it, so that the table
/// comes back the same (a document lists the ways out state by state).
fn origins_in_spec_order(m: &Machine, action: ActionId) -> Option<Vec<&str>> {
    let origins = &m.action(action).origins;
    let sorted = origins.windows(2).all(|pair| pair[0] < pair[1]);
    (!sorted).then(|| origins.iter().map(|&s| m.state(s).name.as_ref()).collect())
}

/// This crate's README (its page on crates.io): its examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
